"""posenc: positional encodings for Transformers, one implementation of each.

The package behind the book: every chapter imports its formulas from here.
"""

from .alibi import ALiBiBias, alibi_bias, alibi_slopes
from .attention import MultiHeadSelfAttention, scaled_dot_product_attention
from .layout import PAIR_LAYOUTS, layout_permutation
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
    ROPE_LAYOUTS,
    ROPE_TYPES,
    RotaryEmbedding,
    apply_rope,
    ntk_scaled_base,
    rope_cos_sin,
    rope_inv_freq,
    rope_weight_permutation,
)
from .sinusoidal import (
    SinusoidalPositionalEncoding,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_table,
)

__version__ = "0.1.0"

__all__ = [
    "PAIR_LAYOUTS",
    "ROPE_LAYOUTS",
    "ROPE_TYPES",
    "ALiBiBias",
    "MultiHeadSelfAttention",
    "RotaryEmbedding",
    "ShawRelativeAttention",
    "SinusoidalPositionalEncoding",
    "T5RelativeBias",
    "TransformerXLRelativeAttention",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "layout_permutation",
    "ntk_scaled_base",
    "rel_shift",
    "relative_position_range",
    "relative_positions",
    "relative_scores",
    "relative_values",
    "rope_cos_sin",
    "rope_inv_freq",
    "rope_weight_permutation",
    "scaled_dot_product_attention",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_table",
    "t5_relative_position_bucket",
]
