"""ALiBi: attention with linear biases (Press, Smith and Lewis 2022).

No position vectors at all: each head ``h`` adds ``-m_h * (distance from the
query to the key)`` to its attention scores, with a fixed slope ``m_h`` per
head. Nothing is learned, nothing depends on a maximum length.

Slopes, section 3 of the paper: for ``n`` heads, ``n`` a power of two, the
geometric sequence ``m_k = 2 ** (-8k / n)``, ``k = 1 .. n`` (8 heads: 1/2, 1/4,
..., 1/256). For other ``n``, the slopes of the largest power of two
``n0 < n``, followed by the first ``n - n0`` of every other slope of ``2 * n0``
heads (``k = 1, 3, 5, ...``). Published models round them differently:
:data:`posenc.ALIBI_SLOPE_SETS` reproduces BLOOM's, MPT's and Falcon's bit for bit.

Queries and keys are aligned as in :mod:`posenc.alignment`: bottom-right by
default (flash-attention >= 2.1), or one start per sequence.
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import (
    check_bias_size,
    check_bool,
    check_choice,
    check_float_dtype,
    check_float_tensor,
    check_positive_int,
)
from .alignment import ALIGNMENTS, aligned_relative_positions

#: How :func:`alibi_slopes` evaluates the paper's geometric sequence.
SLOPE_METHODS = ("exact", "geometric")


def alibi_slopes(
    num_heads: int, *, method: str = "exact", dtype: torch.dtype = torch.float32, device=None
) -> torch.Tensor:
    """The slope ``m_h`` of every head, for any number of heads.

    With ``method="exact"`` each slope is ``2 ** (-exponent)`` computed in
    float64 with the exponent exact, then rounded once to ``dtype``: float32
    slopes are the correctly rounded values (bit-identical to MPT's in
    ``transformers`` up to 64 heads). With ``method="geometric"`` the sequence is evaluated as
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


def _paper_slopes(num_heads: int, device=None) -> torch.Tensor:
    """The paper's slopes, correctly rounded to float32."""
    return alibi_slopes(num_heads, device=device)


def _bloom_slopes(num_heads: int, device=None) -> torch.Tensor:
    """BLOOM's float32 slopes: a float32 ratio raised to integer powers (``method="geometric"``)."""
    return alibi_slopes(num_heads, method="geometric", device=device)


def _mpt_slopes(num_heads: int, device=None) -> torch.Tensor:
    """MPT's float32 slopes (``alibi_bias_max=8``): the slopes of the next power of two ``n2`` heads."""
    n2 = 1 << (check_positive_int("num_heads", num_heads) - 1).bit_length()  # smallest power of two >= num_heads
    # m_k = 1 / 2 ** (k * 8 / n2), k = 1 .. n2, every step in float32
    exponent = torch.arange(1, n2 + 1, dtype=torch.float32, device=device) * (8.0 / n2)  # [n2]
    slopes = 1.0 / torch.pow(2.0, exponent)
    if n2 != num_heads:  # even k (the slopes of n2 / 2 heads) first, then odd k
        slopes = torch.cat([slopes[1::2], slopes[::2]])[:num_heads]
    return slopes


def _falcon_slopes(num_heads: int, device=None) -> torch.Tensor:
    """Falcon's slopes: BLOOM's, rounded to bfloat16 (returned in float32, which holds them exactly)."""
    return _bloom_slopes(num_heads, device).to(torch.bfloat16).float()


#: Slopes as published models compute them, by name: each entry maps
#: ``(num_heads, device=None)`` to a float32 tensor ``[num_heads]``. ``"paper"``
#: is the correctly rounded rule (:func:`alibi_slopes`); ``"bloom"`` raises a
#: float32 ratio to integer powers; ``"mpt"`` divides 1 by float32 powers of two
#: (equal to ``"paper"`` up to 64 heads); ``"falcon"`` is BLOOM's rounded to bfloat16.
ALIBI_SLOPE_SETS = {"paper": _paper_slopes, "bloom": _bloom_slopes, "mpt": _mpt_slopes, "falcon": _falcon_slopes}


def _resolve_slopes(num_heads: int, slopes, device) -> torch.Tensor:
    """``slopes`` (None, a name in ``ALIBI_SLOPE_SETS``, or a tensor ``[h]`` or ``[b, h]``) as a float tensor."""
    check_positive_int("num_heads", num_heads)
    if slopes is None:
        return alibi_slopes(num_heads, device=device)
    if isinstance(slopes, str):
        return ALIBI_SLOPE_SETS[check_choice("slopes", slopes, tuple(ALIBI_SLOPE_SETS))](num_heads, device)
    check_float_tensor("slopes", slopes)
    if slopes.dim() not in (1, 2) or slopes.shape[-1] != num_heads:
        raise ValueError(
            f"slopes must have shape [num_heads] or [batch, num_heads] with num_heads = {num_heads}, "
            f"got {tuple(slopes.shape)}"
        )
    return slopes if device is None else slopes.to(device)


def _distance(rel: torch.Tensor, causal: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(-(i - j) or -|i - j| in float64, the keys after the query or None)`` from ``rel = j - i``."""
    if causal:
        return rel.double(), rel > 0
    return -rel.abs().double(), None


def _bias_planes(rel: torch.Tensor, slopes: torch.Tensor, causal: bool, dtype: torch.dtype) -> torch.Tensor:
    """``[B, h, q, k]`` from ``rel [1 or B, q, k]`` and ``slopes [1 or B, h]``; float64 work of two [q, k] planes."""
    batch, num_heads = max(rel.shape[0], slopes.shape[0]), slopes.shape[1]
    slopes = slopes.double()
    bias = torch.empty(batch, num_heads, *rel.shape[1:], dtype=dtype, device=rel.device)
    plane = torch.empty(rel.shape[1:], dtype=torch.float64, device=rel.device)
    for b in range(batch):
        if b < rel.shape[0]:
            distance, future = _distance(rel[b], causal)  # [q, k] each
        for head in range(num_heads):
            # -m (i - j): exact in float64 for float32 slopes and distances below 2 ** 29
            torch.mul(distance, slopes[min(b, slopes.shape[0] - 1), head], out=plane)
            bias[b, head].copy_(plane)  # rounded once to dtype
            if future is not None:
                bias[b, head].masked_fill_(future, float("-inf"))
    return bias


def _bias_autograd(rel: torch.Tensor, slopes: torch.Tensor, causal: bool, dtype: torch.dtype) -> torch.Tensor:
    """As :func:`_bias_planes`, the same values, but differentiable in ``slopes`` (learned slopes)."""
    distance, future = _distance(rel, causal)  # [1 or B, q, k]
    # -m (i - j) in float64, rounded once
    bias = (slopes.double()[:, :, None, None] * distance[:, None]).to(dtype)  # [B, h, q, k]
    return bias if future is None else bias.masked_fill(future[:, None], float("-inf"))


def alibi_bias(
    num_heads: int,
    q_len: int,
    k_len: int,
    *,
    causal: bool = True,
    offset: int | torch.Tensor | None = None,
    align: str = "bottom_right",
    slopes: str | torch.Tensor | None = None,
    dtype: torch.dtype = torch.float32,
    device=None,
) -> torch.Tensor:
    """ALiBi's additive attention bias ``[num_heads, q_len, k_len]`` (or ``[batch, num_heads, q_len, k_len]``).

    Query ``i`` sits at position ``start + i``, key ``j`` at ``j``, with ``start``
    from ``offset`` and ``align`` (:func:`posenc.query_start`).

    * ``causal=True`` (the paper's language models): ``-m_h * (start + i - j)``
      for keys at or before the query, ``-inf`` for keys after it, so the bias
      also applies the causal mask.
    * ``causal=False`` (encoders, as in MosaicBERT and MPT): ``-m_h * |start + i - j|``.

    This is flash-attention's bias (``alibi_slopes``, ``causal``) for every
    ``q_len``, ``k_len``. Implementations such as BLOOM's add ``+m_h * j`` instead of
    ``-m_h * (i - j)``; the two differ by ``m_h * i``, constant along each row,
    which the softmax removes.

    Args:
        num_heads: Number of heads, >= 1.
        q_len: Number of queries, >= 1.
        k_len: Number of keys, >= 1.
        causal: Causal (with the mask) or symmetric bias.
        offset: Position of the first query: ``None`` (from ``align``), an
            int >= 0, or an integer tensor ``[batch]`` (one start per sequence).
        align: ``"bottom_right"`` (default: the queries are the last ``q_len``
            keys, as in a KV cache and flash-attention >= 2.1; with more queries
            than keys the first ones come before every key and their causal rows
            are all ``-inf``) or ``"top_left"`` (the first query at key 0).
        slopes: ``None`` (the paper's), a name in :data:`posenc.ALIBI_SLOPE_SETS`, or a
            float tensor ``[num_heads]`` or ``[batch, num_heads]``.
        dtype: Floating dtype of the result; computed in float64 from the
            slopes and rounded once.
        device: Device of the result (by default that of a tensor ``slopes`` or ``offset``).

    Returns:
        ``[num_heads, q_len, k_len]``, or ``[batch, num_heads, q_len, k_len]`` when
        ``offset`` or ``slopes`` has a batch dimension. Differentiable in
        ``slopes`` when they require grad.

    Raises:
        ValueError: If ``num_heads`` or a length is not an int >= 1, ``offset``
            is negative or not 1-D, ``slopes`` has the wrong shape or name, or
            the batch sizes of ``offset`` and ``slopes`` differ.
        TypeError: If ``dtype``, ``slopes`` or ``offset`` has the wrong type, or ``causal``
            is not a bool.
    """
    check_float_dtype("dtype", dtype)
    check_bool("causal", causal)
    if device is None:
        device = next((t.device for t in (slopes, offset) if isinstance(t, torch.Tensor)), None)
    m = _resolve_slopes(num_heads, slopes, device)  # [h] or [b, h]
    check_bias_size(q_len, k_len, m.numel())  # before the [(b,) h, q, k] tensor is allocated
    rel = aligned_relative_positions(q_len, k_len, offset=offset, align=align, device=m.device)  # [(b,) q, k]
    batched = rel.dim() == 3 or m.dim() == 2
    rel, m = rel.view(-1, q_len, k_len), m.view(-1, num_heads)  # [1 or b, q, k], [1 or b, h]
    if rel.shape[0] != m.shape[0] and 1 not in (rel.shape[0], m.shape[0]):
        raise ValueError(f"offset has batch {rel.shape[0]} but slopes has batch {m.shape[0]}; they must match")
    grad = m.requires_grad and torch.is_grad_enabled()
    bias = (_bias_autograd if grad else _bias_planes)(rel, m, causal, dtype)  # [b, h, q, k]
    return bias if batched else bias[0]


class ALiBiBias(nn.Module):
    """ALiBi as a module: returns the bias for given lengths.

    Press, Smith and Lewis 2022. By default holds no parameters: the slopes are a
    non-persistent float32 buffer (not in ``state_dict``) that follows ``.to()``
    and is computed again after every move or cast (``to_empty`` included).
    With ``learnable=True`` they are an ``nn.Parameter`` initialised from
    ``slopes``. Pass the result as ``bias`` to
    :func:`posenc.scaled_dot_product_attention` or :class:`posenc.MultiHeadSelfAttention`.

    Args:
        num_heads: Number of heads, >= 1.
        causal: Causal bias with the mask (True) or symmetric bias.
        slopes: ``None`` (the paper's), a name in :data:`posenc.ALIBI_SLOPE_SETS`, or a
            float tensor ``[num_heads]``.
        learnable: Learn the slopes (a parameter) instead of fixing them.
        align: ``"bottom_right"`` or ``"top_left"``, where the queries sit when
            no ``offset`` is given (see :func:`alibi_bias`).

    Raises:
        ValueError: If ``num_heads`` is not an int >= 1, or ``slopes`` or
            ``align`` is not one of the above.
        TypeError: If ``causal`` or ``learnable`` is not a bool.
    """

    slopes: torch.Tensor

    def __init__(
        self,
        num_heads: int,
        *,
        causal: bool = True,
        slopes: str | torch.Tensor | None = None,
        learnable: bool = False,
        align: str = "bottom_right",
    ) -> None:
        super().__init__()
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.causal, self.learnable = check_bool("causal", causal), check_bool("learnable", learnable)
        self.align = check_choice("align", align, ALIGNMENTS)
        if isinstance(slopes, torch.Tensor):
            if slopes.dim() != 1:
                raise ValueError(f"slopes must have shape [num_heads] = [{num_heads}], got {tuple(slopes.shape)}")
            slopes = slopes.detach().to("cpu", torch.promote_types(slopes.dtype, torch.float32)).clone()
        self._source = slopes  # the configuration the fixed slopes are computed from
        initial = _resolve_slopes(num_heads, slopes, None)  # [h]
        if learnable:
            self.slopes = nn.Parameter(initial.clone())
        else:
            self.register_buffer("slopes", initial, persistent=False)

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        if not self.learnable:  # fixed slopes: computed again where the buffer now lives, in float32 or better
            self.slopes = _resolve_slopes(self.num_heads, self._source, self.slopes.device)
        return self

    def extra_repr(self) -> str:
        name = f", slopes={self._source!r}" if isinstance(self._source, str) else ""
        return (
            f"num_heads={self.num_heads}, causal={self.causal}{name}, learnable={self.learnable}, align={self.align!r}"
        )

    def forward(self, q_len: int, k_len: int, *, offset: int | torch.Tensor | None = None) -> torch.Tensor:
        """The bias for ``q_len`` queries and ``k_len`` keys, aligned as configured or starting at ``offset``.

        Args:
            q_len: Number of queries, >= 1.
            k_len: Number of keys, >= 1.
            offset: ``None``, an int >= 0, or an integer tensor ``[batch]``.

        Returns:
            ``[num_heads, q_len, k_len]`` (``[batch, ...]`` for a tensor ``offset``)
            in float32 or the slopes' dtype if wider, on the slopes' device.
        """
        dtype = torch.promote_types(self.slopes.dtype, torch.float32)
        return alibi_bias(
            self.num_heads,
            q_len,
            k_len,
            causal=self.causal,
            offset=offset,
            align=self.align,
            slopes=self.slopes,
            dtype=dtype,
        )
