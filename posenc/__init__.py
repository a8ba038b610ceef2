"""posenc: positional encodings for Transformers, one implementation of each.

The package behind the book: every chapter imports its formulas from here.
"""

from .attention import MultiHeadSelfAttention, scaled_dot_product_attention
from .layout import PAIR_LAYOUTS, layout_permutation
from .sinusoidal import (
    SinusoidalPositionalEncoding,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_table,
)

__version__ = "0.1.0"

__all__ = [
    "PAIR_LAYOUTS",
    "MultiHeadSelfAttention",
    "SinusoidalPositionalEncoding",
    "layout_permutation",
    "scaled_dot_product_attention",
    "sinusoidal_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_table",
]
