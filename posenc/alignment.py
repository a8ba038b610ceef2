"""Where the queries sit among the keys: top-left and bottom-right alignment, per-batch offsets.

Keys sit at positions ``0 .. k_len - 1`` and query ``i`` at ``start + i``. With
as many queries as keys, ``start = 0`` and both conventions agree. When the
lengths differ, attention implementations pick one of two:

* ``"bottom_right"``: ``start = k_len - q_len``, so the last query sits at the
  last key. This is a KV cache (``q_len`` new tokens after ``k_len - q_len``
  cached ones), flash-attention >= 2.1 (its ALiBi bias is
  ``-m * |i + k_len - q_len - j|``, its causal mask keeps ``j <= i + k_len - q_len``)
  and ``torch.nn.attention.bias.causal_lower_right``. With more queries than
  keys ``start`` is negative: the first ``q_len - k_len`` queries come before
  every key, and a causal mask hides every key from them (flash-attention
  returns zeros for those rows; a plain softmax gives NaN).
* ``"top_left"``: ``start = 0``, the first query at the first key: flash-attention
  before 2.1 and ``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``
  (``causal_upper_left``).

An explicit ``offset`` overrides the alignment. It is an int >= 0, or a 1-D integer
tensor ``[batch]`` when every sequence's queries start elsewhere: a cache of
``k_len`` slots in which sequence ``b`` holds ``offset[b]`` earlier tokens and
its ``q_len`` new ones right after them (flash-attention's ``cache_seqlens``),
with the slots after them masked. Left padding needs no per-batch offset:
padding every sequence on the left moves its queries and keys by the same amount,
so in slot coordinates ``j - i`` is unchanged and only the pad keys need a mask.
"""

from __future__ import annotations

import torch

from ._checks import check_choice, check_nonnegative_int, check_positive_int

#: Values of ``align``: where the queries sit when ``q_len != k_len`` and no ``offset`` is given.
ALIGNMENTS = ("bottom_right", "top_left")


def _check_offsets(offset: torch.Tensor) -> torch.Tensor | int:
    """An offset tensor: 0-d becomes an int, 1-d stays ``[batch]``; integer, >= 0."""
    if offset.is_floating_point() or offset.is_complex() or offset.dtype == torch.bool:
        raise TypeError(f"offset must be an int or an integer tensor, got dtype {offset.dtype}")
    if offset.dim() > 1 or offset.numel() < 1:
        raise ValueError(
            f"offset must be an int or a 1-D tensor [batch] with batch >= 1, got shape {tuple(offset.shape)}"
        )
    if offset.is_meta:
        raise ValueError("offset is on the meta device, which holds no values to check; pass it on a real device")
    low = int(offset.min())
    if low < 0:
        index = int(torch.argmin(offset.reshape(-1)))
        raise ValueError(f"offset must be >= 0 everywhere, got {low} (at batch index {index})")
    return int(offset) if offset.dim() == 0 else offset.long()


def query_start(
    q_len: int, k_len: int, offset: int | torch.Tensor | None = None, *, align: str = "bottom_right"
) -> int | torch.Tensor:
    """Position of the first query, keys at ``0 .. k_len - 1``.

    Args:
        q_len: Number of queries, >= 1.
        k_len: Number of keys, >= 1.
        offset: ``None`` (use ``align``), an int >= 0, or an integer tensor
            ``[batch]`` of starts >= 0, one per sequence.
        align: ``"bottom_right"`` (``k_len - q_len``, negative when there are
            more queries than keys) or ``"top_left"`` (0); see the module docstring.

    Returns:
        An int, or a ``torch.long`` tensor ``[batch]`` when ``offset`` is one.

    Raises:
        ValueError: If a length is not an int >= 1, ``align`` is unknown, or
            ``offset`` is negative or not 1-D.
        TypeError: If ``offset`` is a tensor of floats or booleans.
    """
    check_positive_int("q_len", q_len)
    check_positive_int("k_len", k_len)
    check_choice("align", align, ALIGNMENTS)
    if offset is None:
        return k_len - q_len if align == "bottom_right" else 0
    if isinstance(offset, torch.Tensor):
        return _check_offsets(offset)
    return check_nonnegative_int("offset", offset)


def aligned_relative_positions(
    q_len: int,
    k_len: int,
    *,
    offset: int | torch.Tensor | None = None,
    align: str = "bottom_right",
    device=None,
) -> torch.Tensor:
    """Relative position ``j - (start + i)`` of key ``j`` seen from query ``i``, aligned as asked.

    Like :func:`posenc.relative_positions`, with the start of the queries given
    by :func:`query_start`: bottom-right by default (a negative start is
    allowed), or one start per sequence.

    Args:
        q_len: Number of queries, >= 1.
        k_len: Number of keys, >= 1.
        offset: ``None``, an int >= 0, or an integer tensor ``[batch]``.
        align: ``"bottom_right"`` or ``"top_left"``, used when ``offset`` is ``None``.
        device: Device of the result (by default that of ``offset`` if it is a tensor).

    Returns:
        ``torch.long`` tensor ``[q_len, k_len]``, or ``[batch, q_len, k_len]``
        for a tensor ``offset``.

    Raises:
        ValueError, TypeError: As :func:`query_start`.
    """
    start = query_start(q_len, k_len, offset, align=align)
    if device is None and isinstance(start, torch.Tensor):
        device = start.device
    query = torch.arange(q_len, device=device).unsqueeze(-1)  # [q, 1]
    key = torch.arange(k_len, device=device)  # [k]
    if isinstance(start, torch.Tensor):
        start = start.to(device).view(-1, 1, 1)  # [b] -> [b, 1, 1]
    # r = j - (start + i)
    return key - (query + start)  # [q, k] or [b, q, k]
