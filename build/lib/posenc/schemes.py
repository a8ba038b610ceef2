"""The relative and rotary encodings as position schemes of the tiny Transformer.

Importing this module registers five schemes with
:func:`posenc.tiny.register_position_scheme` (``import posenc`` does it), so
that :class:`posenc.TinyTransformer` can compare every encoding of the book on
the same tasks:

* ``"shaw"``: Shaw et al. 2018, clipped relative embeddings on the keys and
  the values (:class:`ShawScheme`, the ``attend`` hook).
* ``"t5"``: Raffel et al. 2020, a learned scalar per head and bucket of
  relative positions (:class:`T5Scheme`, the ``score_bias`` hook).
* ``"alibi"``: Press et al. 2022, a fixed linear penalty on the distance
  (:class:`ALiBiScheme`, the ``score_bias`` hook).
* ``"rope"``: Su et al. 2021, queries and keys rotated by their positions
  (:class:`RopeScheme`, the ``rotate`` hook).
* ``"rope_pi"``: RoPE with linear position interpolation (Chen et al. 2023):
  inputs longer than the trained length have their positions divided by
  ``length / max_len``, so that they fall back into the trained range
  (:class:`RopePIScheme`).

All five depend only on the relative positions of queries and keys: the
``offset`` the hooks receive moves every token by the same amount, and a
relative scheme ignores it (RoPE up to rounding).

Each scheme holds one set of position parameters for the whole model, shared
by all layers (and, for Shaw, by all heads), as T5 does with its bias.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_nonnegative_int, check_positive_int
from .alibi import ALiBiBias
from .attention import scaled_dot_product_attention
from .relative import T5RelativeBias, relative_position_range, relative_scores, relative_values
from .rotary import RotaryEmbedding, apply_rope, rope_cos_sin
from .tiny import PositionScheme, register_position_scheme

__all__ = ["ALiBiScheme", "RopePIScheme", "RopeScheme", "ShawScheme", "T5Scheme"]


def _head_dim(dim: int, num_heads: int) -> int:
    check_positive_int("dim", dim)
    check_positive_int("num_heads", num_heads)
    if dim % num_heads:
        raise ValueError(f"dim must be divisible by num_heads, got dim={dim}, num_heads={num_heads}")
    return dim // num_heads


class ShawScheme(PositionScheme):
    """Shaw et al. 2018: clipped relative embeddings added to the keys and to the values.

    The key term ``q_i . a^K_ij`` depends on the query, and the value term
    ``sum_j alpha_ij a^V_ij`` is added to the attention output: neither is a
    bias or a rotation, so the scheme overrides ``attend``. It computes the
    same attention as :class:`posenc.ShawRelativeAttention` (with the
    projections left to the tiny Transformer), with
    :func:`posenc.relative_scores` and :func:`posenc.relative_values`.

    Args:
        dim: Model dimension, divisible by ``num_heads``.
        num_heads: Number of heads.
        max_relative_position: Clipping distance ``k``, >= 0: relative positions
            beyond ``+-k`` share the embedding of ``+-k``.
    """

    def __init__(self, *, dim: int, num_heads: int, max_relative_position: int = 16, **_) -> None:
        super().__init__()
        self.head_dim = _head_dim(dim, num_heads)
        self.max_relative_position = check_nonnegative_int("max_relative_position", max_relative_position)
        n = 2 * max_relative_position + 1
        self.rel_k = nn.Parameter(torch.randn(n, self.head_dim) * self.head_dim**-0.5)  # w^K_{-k..k}
        self.rel_v = nn.Parameter(torch.randn(n, self.head_dim) * self.head_dim**-0.5)  # w^V_{-k..k}

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_relative_position={self.max_relative_position}"

    def relative_embeddings(self, q_len: int, k_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The key and value tables ``[q_len + k_len - 1, head_dim]`` for queries at the last ``q_len`` keys.

        Row ``c`` belongs to the relative position ``c - (k_len - 1)``, clipped
        to ``[-k, k]``; the absolute positions do not enter.
        """
        k = self.max_relative_position
        r = relative_position_range(q_len, k_len, offset=k_len - q_len, device=self.rel_k.device)  # [q + k - 1]
        index = r.clamp(-k, k) + k  # rows of w^K and w^V
        return self.rel_k[index], self.rel_v[index]

    def attend(self, q, k, v, *, bias=None, causal=False, offset=0):
        """Shaw attention: ``q_i . a^K_ij / sqrt(d_h)`` joins ``bias``; ``sum_j alpha_ij a^V_ij`` joins the output.

        Shapes as :meth:`posenc.PositionScheme.attend`; ``offset`` is ignored.
        """
        a_k, a_v = self.relative_embeddings(q.shape[-2], k.shape[-2])  # [q + k - 1, dh] each
        key_term = relative_scores(q, a_k.to(q.dtype)) / math.sqrt(self.head_dim)  # [b, h, q, k]
        bias = key_term if bias is None else key_term + bias
        out, weights = scaled_dot_product_attention(q, k, v, bias=bias, causal=causal)
        return out + relative_values(weights, a_v.to(weights.dtype)), weights  # [b, h, q, dh]


class T5Scheme(PositionScheme):
    """Raffel et al. 2020: a learned bias per head and bucket of relative positions.

    Bidirectional buckets for a bidirectional model, causal ones for a causal
    model (:func:`posenc.t5_relative_position_bucket`).

    Args:
        num_heads: Number of heads.
        causal: Whether the model is causal.
        num_buckets: Number of buckets (32 in T5).
        max_distance: Distance from which on all relative positions share a
            bucket (128 in T5).
    """

    def __init__(
        self, *, num_heads: int, causal: bool = False, num_buckets: int = 32, max_distance: int = 128, **_
    ) -> None:
        super().__init__()
        self.bias = T5RelativeBias(
            num_heads, bidirectional=not causal, num_buckets=num_buckets, max_distance=max_distance
        )

    def score_bias(self, q_len: int, k_len: int, offset: int = 0) -> torch.Tensor:
        """T5's bias ``[h, q_len, k_len]`` for queries at the last ``q_len`` keys; ``offset`` is ignored."""
        return self.bias(q_len, k_len, offset=k_len - q_len)  # [h, q, k]


class ALiBiScheme(PositionScheme):
    """Press et al. 2022: ``-m_h`` times the distance on the scores, nothing learned.

    A causal model gets the paper's bias (past keys only, with the causal
    mask); a bidirectional one the symmetric ``-m_h |i - j|``, which cannot
    tell a key on the left from one at the same distance on the right.

    Args:
        num_heads: Number of heads.
        causal: Whether the model is causal.
    """

    def __init__(self, *, num_heads: int, causal: bool = False, **_) -> None:
        super().__init__()
        self.bias = ALiBiBias(num_heads, causal=causal)

    def score_bias(self, q_len: int, k_len: int, offset: int = 0) -> torch.Tensor:
        """ALiBi's bias ``[h, q_len, k_len]`` for queries at the last ``q_len`` keys; ``offset`` is ignored."""
        return self.bias(q_len, k_len, offset=k_len - q_len)  # [h, q, k]


class RopeScheme(PositionScheme):
    """Su et al. 2021: queries and keys rotated by their positions in every layer.

    Args:
        dim: Model dimension, divisible by ``num_heads``, with an even head
            dimension.
        num_heads: Number of heads.
        base: Frequency base (``rope_theta``).
        layout: ``"half"`` or ``"interleaved"``.
    """

    def __init__(self, *, dim: int, num_heads: int, base: float = 10000.0, layout: str = "half", **_) -> None:
        super().__init__()
        self.rotary = RotaryEmbedding(_head_dim(dim, num_heads), base=base, layout=layout)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """``q`` and ``k`` ``[b, h, s, head_dim]`` rotated by the positions ``offset .. offset + s - 1``."""
        return self.rotary(q, k, offset=offset)


class RopePIScheme(RopeScheme):
    """RoPE with linear position interpolation (Chen et al. 2023), decided at every forward pass.

    Up to the trained length ``max_len`` it is :class:`RopeScheme`, bit for
    bit, so a model trained on inputs of at most ``max_len`` tokens is the
    same model with either scheme. A longer input, whose last position is
    ``n - 1`` with ``n = offset + seq_len > max_len``, is rotated with
    ``scaling={"rope_type": "linear", "factor": n / max_len}``
    (:func:`posenc.rope_cos_sin`): positions are divided by the factor and
    span ``[0, max_len)``, the range seen in training, at the cost of
    fractional positions that training never saw. Chen et al. fine-tune
    briefly after the change; here nothing is fine-tuned.

    Args:
        dim: Model dimension, divisible by ``num_heads``.
        num_heads: Number of heads.
        max_len: The trained length: the longest input rotated unchanged.
        factor: ``None`` (default) for ``max(1, n / max_len)``, chosen per
            forward pass, or a fixed factor >= 1 used at every length.
        base: Frequency base.
        layout: ``"half"`` or ``"interleaved"``.
    """

    def __init__(
        self,
        *,
        dim: int,
        num_heads: int,
        max_len: int,
        factor: float | None = None,
        base: float = 10000.0,
        layout: str = "half",
        **_,
    ) -> None:
        super().__init__(dim=dim, num_heads=num_heads, base=base, layout=layout)
        self.max_len = check_positive_int("max_len", max_len)
        if factor is not None:
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1.0 <= factor < math.inf:
                raise ValueError(f"factor must be None or a finite number >= 1, got {factor!r}")
            factor = float(factor)
        self.factor = factor

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, factor={self.factor}"

    def factor_for(self, length: int) -> float:
        """The interpolation factor for positions ``0 .. length - 1``: ``max(1, length / max_len)`` or the fixed one."""
        check_positive_int("length", length)
        return self.factor if self.factor is not None else max(1.0, length / self.max_len)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """As :class:`RopeScheme`, with positions divided by :meth:`factor_for` of ``offset + s``."""
        check_nonnegative_int("offset", offset)
        seq_len = q.shape[-2]
        factor = self.factor_for(offset + seq_len)
        if factor == 1.0:
            return super().rotate(q, k, offset)
        rotary = self.rotary
        positions = torch.arange(offset, offset + seq_len, device=q.device)  # [s]
        cos, sin = rope_cos_sin(
            positions, rotary.head_dim, base=rotary.base, layout=rotary.layout,
            scaling={"rope_type": "linear", "factor": factor},
            dtype=torch.float64 if q.dtype == torch.float64 else torch.float32,
        )  # [s, dh] each
        return apply_rope(q, cos, sin, layout=rotary.layout), apply_rope(k, cos, sin, layout=rotary.layout)


register_position_scheme("shaw", ShawScheme)
register_position_scheme("t5", T5Scheme)
register_position_scheme("alibi", ALiBiScheme)
register_position_scheme("rope", RopeScheme)
register_position_scheme("rope_pi", RopePIScheme)
