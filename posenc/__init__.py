"""posenc: positional encodings for Transformers, one implementation of each.

The package behind the book: every chapter imports its formulas from here.
"""

from .alibi import ALIBI_SLOPE_SETS, ALiBiBias, alibi_bias, alibi_slopes
from .alignment import ALIGNMENTS, aligned_relative_positions, query_start
from .attention import MultiHeadSelfAttention, scaled_dot_product_attention
from .experiments import (
    ExperimentConfig,
    LookupTask,
    PositionScheme,
    ReverseTask,
    ShiftTask,
    Task,
    TaskBatch,
    TinyConfig,
    TinyTransformer,
    experiment_summary,
    load_experiments,
    make_position_scheme,
    make_task,
    position_schemes,
    register_position_scheme,
    run_experiments,
    tiny_accuracy,
    tiny_accuracy_by_position,
    train_and_evaluate,
    train_tiny,
)
from .hf_config import config_dict, describe, format_description, from_hf_config
from .layout import PAIR_LAYOUTS, ROPE_LAYOUTS, SINUSOIDAL_LAYOUTS, layout_permutation
from .learned import LearnedPositionalEmbedding
from .packing import (
    check_cu_seqlens,
    cu_seqlens_from_position_ids,
    cu_seqlens_from_seqlens,
    max_seqlen_from_cu_seqlens,
    packed_alibi_bias,
    packed_attention_mask,
    packed_relative_bias,
    positions_from_attention_mask,
    positions_from_cu_seqlens,
    sequence_ids_from_cu_seqlens,
)
from .pairing import sinusoidal_dot_product, sinusoidal_offset_matrix
from .relative import (
    ShawRelativeAttention,
    ShawRelativeEmbeddings,
    rel_shift,
    relative_position_range,
    relative_positions,
    relative_scores,
    relative_values,
)
from .rope_nd import (
    AXIAL_FREQS,
    AxialRotaryEmbedding,
    axial_cos_sin,
    axial_rope_angles,
    mrope_cos_sin,
    mrope_pair_axes,
)
from .rope_scaling import ROPE_SCALINGS, ROPE_TYPES, ntk_scaled_base
from .rotary import (
    ROPE_BACKENDS,
    apply_rope,
    cos_sin_from_inv_freq,
    rope_cos_sin,
    rope_inv_freq,
    rope_weight_permutation,
)
from .rotary_embedding import RotaryEmbedding
from .sinusoidal import SinusoidalPositionalEncoding, sinusoidal_encoding, sinusoidal_frequencies, sinusoidal_table
from .t5 import T5RelativeBias, t5_relative_position_bucket
from .transformer_xl import TransformerXLRelativeAttention
from .xpos import XPosRotaryEmbedding, apply_xpos, xpos_scales, xpos_zeta

__version__ = "0.2.0"

__all__ = [
    "config_dict",
    "describe",
    "format_description",
    "from_hf_config",
    "ALIBI_SLOPE_SETS",
    "ALIGNMENTS",
    "aligned_relative_positions",
    "query_start",
    "XPosRotaryEmbedding",
    "apply_xpos",
    "xpos_scales",
    "xpos_zeta",
    "check_cu_seqlens",
    "cu_seqlens_from_position_ids",
    "cu_seqlens_from_seqlens",
    "max_seqlen_from_cu_seqlens",
    "packed_alibi_bias",
    "packed_attention_mask",
    "packed_relative_bias",
    "positions_from_attention_mask",
    "positions_from_cu_seqlens",
    "sequence_ids_from_cu_seqlens",
    "AXIAL_FREQS",
    "AxialRotaryEmbedding",
    "axial_cos_sin",
    "axial_rope_angles",
    "mrope_cos_sin",
    "mrope_pair_axes",
    "PAIR_LAYOUTS",
    "ROPE_BACKENDS",
    "ROPE_LAYOUTS",
    "ROPE_SCALINGS",
    "ROPE_TYPES",
    "SINUSOIDAL_LAYOUTS",
    "ALiBiBias",
    "ExperimentConfig",
    "LearnedPositionalEmbedding",
    "LookupTask",
    "MultiHeadSelfAttention",
    "PositionScheme",
    "ReverseTask",
    "RotaryEmbedding",
    "ShawRelativeAttention",
    "ShawRelativeEmbeddings",
    "ShiftTask",
    "SinusoidalPositionalEncoding",
    "T5RelativeBias",
    "Task",
    "TaskBatch",
    "TinyConfig",
    "TinyTransformer",
    "TransformerXLRelativeAttention",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "cos_sin_from_inv_freq",
    "experiment_summary",
    "layout_permutation",
    "load_experiments",
    "make_position_scheme",
    "make_task",
    "ntk_scaled_base",
    "position_schemes",
    "register_position_scheme",
    "rel_shift",
    "relative_position_range",
    "relative_positions",
    "relative_scores",
    "relative_values",
    "rope_cos_sin",
    "rope_inv_freq",
    "rope_weight_permutation",
    "run_experiments",
    "scaled_dot_product_attention",
    "sinusoidal_dot_product",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_offset_matrix",
    "sinusoidal_table",
    "t5_relative_position_bucket",
    "tiny_accuracy",
    "tiny_accuracy_by_position",
    "train_and_evaluate",
    "train_tiny",
]
