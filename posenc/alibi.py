"""ALiBi: attention with linear biases (Press, Smith and Lewis 2022).

No position vectors at all: each head ``h`` adds ``-m_h * (distance from the
query to the key)`` to its attention scores, with a fixed slope ``m_h`` per
head. Nothing is learned, nothing depends on a maximum length.

Slopes, section 3 of the paper: for ``n`` heads, ``n`` a power of two, the
geometric sequence ``m_k = 2 ** (-8k / n)``, ``k = 1 .. n`` (8 heads: 1/2, 1/4,
..., 1/256). For other ``n``, the slopes of the largest power of two
``n0 < n``, followed by the first ``n - n0`` of every other slope of ``2 * n0``
heads (``k = 1, 3, 5, ...``).
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_choice, check_float_dtype, check_positive_int
from .relative import query_offset, relative_positions

#: How :func:`alibi_slopes` evaluates the paper's geometric sequence.
SLOPE_METHODS = ("exact", "geometric")


def alibi_slopes(
    num_heads: int, *, method: str = "exact", dtype: torch.dtype = torch.float32, device=None
) -> torch.Tensor:
    """The slope ``m_h`` of every head, for any number of heads.

    With ``method="exact"`` each slope is ``2 ** (-exponent)`` computed in
    float64 with the exponent exact, then rounded once to ``dtype``: float32
    slopes are the correctly rounded values (bit-identical to MPT's in
    ``transformers``). With ``method="geometric"`` the sequence is evaluated as
    the paper describes it, a ratio raised to integer powers, in float32: the
    ratio ``2 ** (-8 / n0)`` is rounded to float32 first and its rounding error
    grows with the power, up to a few units in the last place. That is how
    BLOOM computes its slopes, and the result is bit-identical to its
    ``build_alibi_tensor``.

    Args:
        num_heads: Number of heads, >= 1.
        method: ``"exact"`` or ``"geometric"``, as above.
        dtype: Floating dtype of the result.
        device: Device of the result.

    Returns:
        Tensor ``[num_heads]``, positive; decreasing when ``num_heads`` is a power of two.

    Raises:
        ValueError: If ``num_heads`` is not an int >= 1.
    """
    check_positive_int("num_heads", num_heads)
    check_choice("method", method, SLOPE_METHODS)
    check_float_dtype("dtype", dtype)
    n0 = 1 << (num_heads.bit_length() - 1)  # largest power of two <= num_heads
    if method == "geometric":
        ratio = torch.tensor(2.0 ** (-8.0 / n0), dtype=torch.float32, device=device)
        ratio_2n0 = torch.tensor(2.0 ** (-8.0 / (2 * n0)), dtype=torch.float32, device=device)
        k = torch.arange(1, n0 + 1, dtype=torch.int32, device=device)  # [n0]
        odd = 2 * torch.arange(num_heads - n0, dtype=torch.int32, device=device) + 1  # odd k of 2 * n0 heads
        return torch.cat([torch.pow(ratio, k), torch.pow(ratio_2n0, odd)]).to(dtype)  # [num_heads]
    k = torch.arange(1, n0 + 1, dtype=torch.float64, device=device)  # [n0]
    extra = 2 * torch.arange(num_heads - n0, dtype=torch.float64, device=device) + 1  # odd k of 2 * n0 heads
    exponent = torch.cat([k * (8.0 / n0), extra * (8.0 / (2 * n0))])  # [num_heads], exact in float64
    return torch.exp2(-exponent).to(dtype)


def alibi_bias(
    num_heads: int,
    q_len: int,
    k_len: int,
    *,
    causal: bool = True,
    offset: int | None = None,
    dtype: torch.dtype = torch.float32,
    device=None,
) -> torch.Tensor:
    """ALiBi's additive attention bias ``[num_heads, q_len, k_len]``.

    Query ``i`` sits at position ``offset + i``, key ``j`` at ``j``.

    * ``causal=True`` (the paper's language models): ``-m_h * (offset + i - j)``
      for keys at or before the query, ``-inf`` for keys after it, so the bias
      also applies the causal mask.
    * ``causal=False`` (encoders, as in MosaicBERT and MPT): ``-m_h * |offset + i - j|``.

    Implementations such as BLOOM's add ``+m_h * j`` instead of
    ``-m_h * (i - j)``; the two differ by ``m_h * i``, constant along each row,
    which the softmax removes.

    Args:
        num_heads: Number of heads, >= 1.
        q_len: Number of queries, >= 1.
        k_len: Number of keys, >= 1.
        causal: Causal (with the mask) or symmetric bias.
        offset: Position of the first query, >= 0. By default ``k_len - q_len``:
            the queries are the last ``q_len`` keys, as in
            :func:`scaled_dot_product_attention` with ``causal=True`` and when
            decoding with a KV cache (0 when there are more queries than keys).
        dtype: Floating dtype of the result; computed in float64 from the
            float32 slopes and rounded once.
        device: Device of the result.

    Returns:
        Tensor ``[num_heads, q_len, k_len]``.

    Raises:
        ValueError: If ``num_heads`` or a length is not an int >= 1, or
            ``offset`` is negative.
    """
    check_float_dtype("dtype", dtype)
    slopes = alibi_slopes(num_heads, device=device).double()  # [h], float32 values
    offset = query_offset(q_len, k_len, offset)
    rel = relative_positions(q_len, k_len, offset=offset, device=device)  # [q, k], j - i
    future = rel > 0 if causal else None  # keys after the query: masked
    distance = rel.double() if causal else -rel.abs().double()  # [q, k]: -(i - j), or -|i - j|
    del rel
    # One head at a time into the result: the float64 work is two [q, k] planes, not [h, q, k].
    bias = torch.empty(num_heads, q_len, k_len, dtype=dtype, device=distance.device)
    plane = torch.empty_like(distance)
    for head in range(num_heads):
        torch.mul(distance, slopes[head], out=plane)  # exact: float32 slope times an integer, in float64
        bias[head].copy_(plane)  # rounded once to dtype
        if future is not None:
            bias[head].masked_fill_(future, float("-inf"))
    return bias


class ALiBiBias(nn.Module):
    """ALiBi as a module: returns the bias for given lengths.

    Press, Smith and Lewis 2022. Holds no parameters; the slopes are a
    non-persistent buffer (not in ``state_dict``) that follows ``.to()``. Pass
    the result as ``bias`` to :func:`posenc.scaled_dot_product_attention` or
    :class:`posenc.MultiHeadSelfAttention`.

    Args:
        num_heads: Number of heads, >= 1.
        causal: Causal bias with the mask (True) or symmetric bias.
    """

    slopes: torch.Tensor

    def __init__(self, num_heads: int, *, causal: bool = True) -> None:
        super().__init__()
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.causal = causal
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, causal={self.causal}"

    def forward(self, q_len: int, k_len: int, *, offset: int | None = None) -> torch.Tensor:
        """The bias for ``q_len`` queries at ``offset ..`` (by default the last ``q_len`` keys) and ``k_len`` keys.

        Returns:
            ``[num_heads, q_len, k_len]`` in float32, on the slopes' device.
        """
        return alibi_bias(self.num_heads, q_len, k_len, causal=self.causal, offset=offset, device=self.slopes.device)
