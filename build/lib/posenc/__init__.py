"""posenc: positional encodings for Transformers, one implementation of each.

The package behind the book: every chapter imports its formulas from here.
"""

from . import schemes  # noqa: F401  (registers shaw, t5, alibi, rope, rope_pi with the tiny Transformer)
from .alibi import ALiBiBias, alibi_bias, alibi_slopes
from .attention import MultiHeadSelfAttention, scaled_dot_product_attention
from .extrapolation import (
    ExperimentConfig,
    experiment_summary,
    load_experiments,
    run_experiments,
    train_and_evaluate,
)
from .layout import PAIR_LAYOUTS, layout_permutation
from .learned import LearnedPositionalEmbedding
from .pairing import sinusoidal_dot_product, sinusoidal_offset_matrix
from .relative import (
    ShawRelativeAttention,
    T5RelativeBias,
    TransformerXLRelativeAttention,
    rel_shift,
    relative_position_range,
    relative_positions,
    relative_scores,
    relative_values,
    t5_relative_position_bucket,
)
from .rotary import (
    ROPE_BACKENDS,
    ROPE_LAYOUTS,
    ROPE_TYPES,
    RotaryEmbedding,
    apply_rope,
    ntk_scaled_base,
    rope_cos_sin,
    rope_inv_freq,
    rope_weight_permutation,
)
from .sinusoidal import SinusoidalPositionalEncoding, sinusoidal_encoding, sinusoidal_frequencies, sinusoidal_table
from .tasks import LookupTask, ReverseTask, ShiftTask, Task, TaskBatch, make_task
from .tiny import (
    PositionScheme,
    TinyTransformer,
    make_position_scheme,
    position_schemes,
    register_position_scheme,
    tiny_accuracy,
    tiny_accuracy_by_position,
    train_tiny,
)

__version__ = "0.1.0"

__all__ = [
    "PAIR_LAYOUTS",
    "ROPE_BACKENDS",
    "ROPE_LAYOUTS",
    "ROPE_TYPES",
    "ALiBiBias",
    "ExperimentConfig",
    "LearnedPositionalEmbedding",
    "LookupTask",
    "MultiHeadSelfAttention",
    "PositionScheme",
    "ReverseTask",
    "RotaryEmbedding",
    "ShawRelativeAttention",
    "ShiftTask",
    "SinusoidalPositionalEncoding",
    "T5RelativeBias",
    "Task",
    "TaskBatch",
    "TinyTransformer",
    "TransformerXLRelativeAttention",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
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
