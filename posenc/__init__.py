"""posenc: positional encodings for Transformers, one implementation of each.

The package behind the book: every chapter imports its formulas from here.
"""

from ._version import __version__ as __version__
from .alibi import ALIBI_SLOPE_SETS, ALiBiBias, alibi_bias, alibi_slopes
from .alignment import ALIGNMENTS, aligned_relative_positions, query_start
from .attention import MultiHeadSelfAttention, scaled_dot_product_attention
from .cope import CoPE, cope_bias, cope_logits, cope_positions
from .fire import FIRE_TRANSFORMS, FIREBias, fire_alibi_layers, fire_bias, fire_distance, fire_mlp, fire_t5_layers
from .hf import config_dict, describe, format_description, from_hf_config
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
from .pose import pose_chunks, pose_position_ids
from .relative import (
    ShawRelativeAttention,
    ShawRelativeEmbeddings,
    rel_shift,
    relative_position_range,
    relative_positions,
    relative_scores,
    relative_values,
)

# RoPE at long range: which frequencies turn, the base's bounds, remapped distances, sinks
from .rope.bounds import rope_base_lower_bound, rope_cos_sum, rope_critical_dim
from .rope.embedding import RotaryEmbedding
from .rope.frequencies import hope_inv_freq, p_rope_inv_freq, rope_turning_pairs
from .rope.nd import (
    AXIAL_FREQS,
    AxialRotaryEmbedding,
    axial_cos_sin,
    axial_rope_angles,
    mrope_cos_sin,
    mrope_pair_axes,
)
from .rope.remap import (
    dual_chunk_distances,
    remapped_rope_scores,
    rerope_distances,
    self_extend_distances,
    string_distances,
)
from .rope.rotary import (
    ROPE_BACKENDS,
    apply_rope,
    cos_sin_from_inv_freq,
    rope_cos_sin,
    rope_inv_freq,
    rope_weight_permutation,
)
from .rope.scaling import ROPE_SCALINGS, ROPE_TYPES, ntk_scaled_base
from .rope.state import DynamicRopeState
from .rope.xpos import XPosRotaryEmbedding, apply_xpos, xpos_scales, xpos_zeta
from .sinusoidal import SinusoidalPositionalEncoding, sinusoidal_encoding, sinusoidal_frequencies, sinusoidal_table
from .streaming import sink_softmax, streaming_kept, streaming_scores
from .t5 import T5RelativeBias, t5_relative_position_bucket
from .transformer_xl import TransformerXLLearnableAttention, TransformerXLRelativeAttention

__all__ = [
    "alibi_bias",
    "ALIBI_SLOPE_SETS",
    "alibi_slopes",
    "ALiBiBias",
    "aligned_relative_positions",
    "ALIGNMENTS",
    "apply_rope",
    "apply_xpos",
    "axial_cos_sin",
    "AXIAL_FREQS",
    "axial_rope_angles",
    "AxialRotaryEmbedding",
    "check_cu_seqlens",
    "config_dict",
    "cos_sin_from_inv_freq",
    "cu_seqlens_from_position_ids",
    "cu_seqlens_from_seqlens",
    "describe",
    "DynamicRopeState",
    "format_description",
    "from_hf_config",
    "layout_permutation",
    "LearnedPositionalEmbedding",
    "max_seqlen_from_cu_seqlens",
    "mrope_cos_sin",
    "mrope_pair_axes",
    "MultiHeadSelfAttention",
    "ntk_scaled_base",
    "packed_alibi_bias",
    "packed_attention_mask",
    "packed_relative_bias",
    "PAIR_LAYOUTS",
    "positions_from_attention_mask",
    "positions_from_cu_seqlens",
    "query_start",
    "rel_shift",
    "relative_position_range",
    "relative_positions",
    "relative_scores",
    "relative_values",
    "ROPE_BACKENDS",
    "rope_cos_sin",
    "rope_inv_freq",
    "ROPE_LAYOUTS",
    "ROPE_SCALINGS",
    "ROPE_TYPES",
    "rope_weight_permutation",
    "RotaryEmbedding",
    "scaled_dot_product_attention",
    "sequence_ids_from_cu_seqlens",
    "ShawRelativeAttention",
    "ShawRelativeEmbeddings",
    "sinusoidal_dot_product",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "SINUSOIDAL_LAYOUTS",
    "sinusoidal_offset_matrix",
    "sinusoidal_table",
    "SinusoidalPositionalEncoding",
    "t5_relative_position_bucket",
    "T5RelativeBias",
    "TransformerXLLearnableAttention",
    "TransformerXLRelativeAttention",
    "xpos_scales",
    "xpos_zeta",
    "XPosRotaryEmbedding",
    # Going further: positions that are learned functions, counted by content, or skipped in training
    "CoPE",
    "cope_bias",
    "cope_logits",
    "cope_positions",
    "FIRE_TRANSFORMS",
    "FIREBias",
    "fire_alibi_layers",
    "fire_bias",
    "fire_distance",
    "fire_mlp",
    "fire_t5_layers",
    "pose_chunks",
    "pose_position_ids",
]

# RoPE at long range (the chapter "Going further: RoPE at long range")
__all__ += [
    "dual_chunk_distances",
    "hope_inv_freq",
    "p_rope_inv_freq",
    "remapped_rope_scores",
    "rerope_distances",
    "rope_base_lower_bound",
    "rope_cos_sum",
    "rope_critical_dim",
    "rope_turning_pairs",
    "self_extend_distances",
    "sink_softmax",
    "streaming_kept",
    "streaming_scores",
    "string_distances",
]

#: The names of the experiments that this package used to re-export. The root holds the
#: library; the experiments are the book's apparatus, in ``posenc.experiments``.
_MOVED_TO_EXPERIMENTS = frozenset(
    {
        "ExperimentConfig",
        "LookupTask",
        "PositionScheme",
        "ReverseTask",
        "ScalingConfig",
        "ShiftTask",
        "Task",
        "TaskBatch",
        "TextConfig",
        "TinyConfig",
        "TinyTransformer",
        "experiment_summary",
        "load_experiments",
        "load_scaling_results",
        "load_text_results",
        "make_position_scheme",
        "make_task",
        "position_schemes",
        "register_position_scheme",
        "run_experiments",
        "run_scaling_experiment",
        "run_text_experiment",
        "scaling_summary",
        "stdlib_corpus",
        "text_summary",
        "tiny_accuracy",
        "tiny_accuracy_by_position",
        "train_and_evaluate",
        "train_tiny",
        "train_with_checkpoints",
    }
)


def __getattr__(name: str):
    """``posenc.<experiment name>``, deprecated: the name from ``posenc.experiments``, with a warning."""
    if name in _MOVED_TO_EXPERIMENTS:
        import importlib
        import warnings

        warnings.warn(
            f"posenc.{name} moved to posenc.experiments.{name}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("posenc.experiments"), name)
    raise AttributeError(f"module 'posenc' has no attribute {name!r}")
