"""T5's relative position buckets (Raffel et al. 2020): one learned scalar per head and bucket.

Relative positions ``j - i`` (key minus query) fall into buckets: one per distance up to
half the buckets, then logarithmically wider ones up to ``max_distance``, beyond which
all share the last. :class:`T5RelativeBias` adds the bucket's scalar to the scores.
Conventions as in :mod:`posenc.relative`; queries and keys aligned as in :mod:`posenc.alignment`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import as_positions, check_bias_size, check_bool, check_choice, check_positive_int
from .alignment import ALIGNMENTS, aligned_relative_positions


def _check_buckets(bidirectional: bool, num_buckets: int, max_distance: int) -> tuple[int, int]:
    """Validate T5's bucket arguments; return (buckets per direction, exact buckets)."""
    check_bool("bidirectional", bidirectional)
    check_positive_int("num_buckets", num_buckets)
    check_positive_int("max_distance", max_distance)
    per_side = num_buckets // 2 if bidirectional else num_buckets
    least = 4 if bidirectional else 2
    if per_side < 2:
        raise ValueError(
            f"num_buckets must be >= {least} with bidirectional={bidirectional} (each direction needs an exact "
            f"bucket and a logarithmic one), got {num_buckets}"
        )
    exact = per_side // 2
    if max_distance <= exact:
        raise ValueError(
            f"max_distance must be larger than the {exact} exact buckets (distances 0..{exact - 1}) that "
            f"num_buckets={num_buckets} gives, got {max_distance}"
        )
    return per_side, exact


def t5_relative_position_bucket(
    relative_position,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's bucket for each relative position (Raffel et al. 2020, section 2.1).

    With ``n`` buckets per direction (``num_buckets // 2`` if bidirectional,
    else ``num_buckets``) and ``e = n // 2``, a distance ``d`` gets

    * bucket ``d`` if ``d < e`` (one bucket per distance),
    * bucket ``e + floor(log(d / e) / log(max_distance / e) * (n - e))`` up to
      ``n - 1`` otherwise: logarithmically wider buckets, and every distance
      from ``max_distance`` on shares the last one.

    Bidirectional: ``d = |r|`` and keys after the query (``r > 0``) use buckets
    ``n .. 2n - 1``. Causal: ``d = max(-r, 0)``, so keys after the query share
    bucket 0 with ``r = 0``. The logarithm is taken in float32 as in the Mesh
    TensorFlow reference: distances where the ratio is exactly a bucket
    boundary then land where the published models expect them.

    Args:
        relative_position: Integer tensor (or anything ``torch.as_tensor`` takes)
            of ``r = key - query`` positions, any shape.
        bidirectional: Encoder-style (both directions) or decoder-style (causal).
        num_buckets: Number of buckets, >= 4 if bidirectional, else >= 2.
        max_distance: Distance from which on all positions share a bucket;
            larger than the ``e`` exact buckets.

    Returns:
        ``torch.long`` tensor of the same shape, values in ``[0, num_buckets)``.

    Raises:
        ValueError: If ``relative_position`` is not an integer tensor, or
            ``num_buckets`` or ``max_distance`` is out of range.
    """
    per_side, exact = _check_buckets(bidirectional, num_buckets, max_distance)
    r = as_positions(relative_position, "relative_position")
    if r.dtype.is_floating_point or r.dtype.is_complex or r.dtype == torch.bool:
        raise ValueError(f"relative_position must be an integer tensor, got dtype {r.dtype}")
    r = r.long().clamp(-(2**62), 2**62)  # far past max_distance: same bucket, and |r| cannot overflow
    if bidirectional:
        first = torch.where(r > 0, per_side, 0)  # keys after the query use the upper half
        distance = r.abs()
    else:
        first = torch.zeros_like(r)
        distance = (-r).clamp(min=0)
    ratio = distance.clamp(min=exact).float() / exact  # >= 1, so the log is >= 0
    log_bucket = torch.log(ratio) / math.log(max_distance / exact) * (per_side - exact)
    far = (exact + log_bucket.long()).clamp(max=per_side - 1)
    return first + torch.where(distance < exact, distance, far)


class T5RelativeBias(nn.Module):
    """T5's relative attention bias: one learned scalar per bucket and head.

    Raffel et al. 2020, section 2.1. The bias for ``q_len`` queries and
    ``k_len`` keys is ``table[bucket(j - i), h]``; pass it as ``bias`` to
    :func:`posenc.scaled_dot_product_attention` or
    :class:`posenc.MultiHeadSelfAttention`. (T5 itself shares one such table
    across all layers and leaves out the ``1/sqrt(d)`` scaling.)

    Args:
        num_heads: Number of heads, >= 1.
        bidirectional: Encoder-style (True) or decoder-style buckets.
        num_buckets: Number of buckets (32 in T5).
        max_distance: Distance from which on all positions share a bucket (128 in T5).
        align: ``"bottom_right"`` (the queries are the last ``q_len`` keys, as in a
            KV cache) or ``"top_left"`` (the first query at key 0): where the
            queries sit when no ``offset`` is given.
    """

    def __init__(
        self,
        num_heads: int,
        *,
        bidirectional: bool = True,
        num_buckets: int = 32,
        max_distance: int = 128,
        align: str = "bottom_right",
    ) -> None:
        super().__init__()
        self.num_heads = check_positive_int("num_heads", num_heads)
        _check_buckets(bidirectional, num_buckets, max_distance)
        self.bidirectional, self.num_buckets, self.max_distance = bidirectional, num_buckets, max_distance
        self.align = check_choice("align", align, ALIGNMENTS)
        self.embedding = nn.Embedding(num_buckets, num_heads)  # [buckets, h]

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, bidirectional={self.bidirectional}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}, align={self.align!r}"
        )

    def forward(self, q_len: int, k_len: int, *, offset: int | torch.Tensor | None = None) -> torch.Tensor:
        """The bias for ``q_len`` queries at ``offset ..`` and ``k_len`` keys at ``0 ..``.

        Args:
            q_len: Number of queries, >= 1.
            k_len: Number of keys, >= 1.
            offset: Position of the first query: ``None`` (from ``align``; by
                default ``k_len - q_len``, negative with more queries than keys,
                as in flash-attention >= 2.1), an int >= 0, or an integer tensor
                ``[batch]`` (one start per sequence, as with a KV cache whose
                sequences hold different numbers of tokens).

        Returns:
            ``[num_heads, q_len, k_len]`` (``[batch, num_heads, q_len, k_len]`` for a
            tensor ``offset``), in the dtype of the table.

        Raises:
            ValueError: If a length is not an int >= 1 or ``offset`` is negative or not 1-D.
            TypeError: If ``offset`` is a tensor of floats or booleans.
        """
        device = self.embedding.weight.device
        check_bias_size(q_len, k_len, self.embedding.embedding_dim)  # before the [(b,) h, q, k] tensor is allocated
        rel = aligned_relative_positions(q_len, k_len, offset=offset, align=self.align, device=device)  # [(b,) q, k]
        buckets = t5_relative_position_bucket(
            rel, bidirectional=self.bidirectional, num_buckets=self.num_buckets, max_distance=self.max_distance
        )
        return self.embedding(buckets).movedim(-1, -3)  # [(b,) q, k, h] -> [(b,) h, q, k]
