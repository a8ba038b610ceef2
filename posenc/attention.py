"""Scaled dot-product attention, the one attention every chapter uses.

Relative schemes (Shaw, T5, ALiBi, ...) act through ``bias``, an additive term
on the scores; absolute schemes act on the input before the projections.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_bool, check_float_tensor, check_heads, check_input_dtype


def _shape_error(name: str, got, want: str) -> ValueError:
    return ValueError(f"{name} has shape {tuple(got)}, expected {want}")


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raise unless ``q``, ``k``, ``v`` are floating-point ``[..., len, d]`` tensors that fit together."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_float_tensor(name, t)
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(
            f"q, k, v need at least 2 dims [..., len, d], got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[-1] < 1 or k.shape[-2] < 1:
        raise ValueError(f"q needs a head dim >= 1 and k at least one key, got q {tuple(q.shape)}, k {tuple(k.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise _shape_error("k", k.shape, f"last dim {q.shape[-1]} to match q {tuple(q.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise _shape_error("v", v.shape, f"length {k.shape[-2]} (dim -2) to match k {tuple(k.shape)}")
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise _shape_error(
            "k", k.shape, f"leading dims broadcastable to q's {tuple(q.shape[:-2])} (repeat grouped key heads first)"
        ) from None


def _with_bias(scores: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``scores + bias``, or the scores masked where a boolean ``bias`` is False."""
    if bias.dtype != torch.bool and not bias.is_floating_point():
        raise TypeError(f"bias must be a floating-point tensor (added) or a boolean mask, got dtype {bias.dtype}")
    q_len, k_len = scores.shape[-2:]
    if bias.dim() < 2 or bias.shape[-2:] not in ((q_len, k_len), (1, k_len), (q_len, 1), (1, 1)):
        raise _shape_error("bias", bias.shape, f"[..., {q_len}, {k_len}] (broadcastable to the scores)")
    try:
        fits = torch.broadcast_shapes(bias.shape, scores.shape) == scores.shape  # never enlarges the scores
    except RuntimeError:
        fits = False
    if not fits:
        hint = "; a 3-D bias is [heads, q_len, k_len]: pass a per-sequence mask as [batch, 1, q_len, k_len]"
        raise _shape_error("bias", bias.shape, f"broadcastable to scores {tuple(scores.shape)}" + hint)
    if bias.dtype == torch.bool:
        return scores.masked_fill(~bias, float("-inf"))  # True = may attend
    return scores + bias.to(scores.dtype)


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(q k^T / sqrt(d) + bias) v``, returning the weights as well.

    Vaswani et al. 2017, equation (1). The softmax runs in float32 (or float64
    for float64 inputs) and the results are cast back to ``q``'s dtype. A
    query whose every key is masked gets NaN weights and output (0 / 0);
    torch's ``scaled_dot_product_attention``, which returns no weights, gives
    such a query an output of zeros instead.

    Args:
        q: Queries ``[..., q_len, d]``.
        k: Keys ``[..., k_len, d]``.
        v: Values ``[..., k_len, d_v]``.
        bias: Optional additive term on the scores, broadcastable to
            ``[..., q_len, k_len]`` (for example ``[h, q_len, k_len]``) without
            enlarging the scores; ``-inf`` entries mask. A boolean tensor is a
            mask with PyTorch's convention (``True`` = may attend), as in
            ``torch.nn.functional.scaled_dot_product_attention``. Leading dims
            align from the right, so a 3-D bias is per head: a padding mask per
            sequence must be ``[b, 1, q_len, k_len]`` (a ``[b, q_len, k_len]``
            mask would be read as per head, wrongly and silently when ``b``
            equals the number of heads).
        causal: If true, query ``i`` sees keys ``j <= i + (k_len - q_len)``: the
            queries are the last ``q_len`` positions of the keys, as when
            decoding with a KV cache.

    Returns:
        ``(out, weights)``: ``out`` is ``[..., q_len, d_v]``, ``weights`` is
        ``[..., q_len, k_len]`` with rows summing to 1.

    Raises:
        ValueError: If the shapes of ``q``, ``k``, ``v`` or ``bias`` do not fit
            together (for example more query heads than key heads), or ``causal``
            is set with ``q_len > k_len``.
        TypeError: If ``bias`` is neither floating point nor boolean.
    """
    _check_qkv(q, k, v)
    causal = check_bool("causal", causal)
    q_len, k_len = q.shape[-2], k.shape[-2]
    if causal and q_len > k_len:
        raise ValueError(f"causal attention needs q_len <= k_len, got q_len={q_len}, k_len={k_len}")
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    scores = torch.matmul(q.to(compute), k.to(compute).transpose(-2, -1))  # [..., q, k]
    scores = scores / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = _with_bias(scores, bias)
    if causal:
        i = torch.arange(q_len, device=q.device).unsqueeze(-1) + (k_len - q_len)  # [q, 1]
        j = torch.arange(k_len, device=q.device)  # [k]
        scores = scores.masked_fill(j > i, float("-inf"))  # [..., q, k]
    weights = torch.softmax(scores, dim=-1)  # [..., q, k]
    out = torch.matmul(weights, v.to(compute))  # [..., q, d_v]
    return out.to(q.dtype), weights.to(q.dtype)


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention with an optional additive score bias.

    Vaswani et al. 2017, section 3.2.2. Projects ``x`` to ``h`` heads of
    queries, keys and values, runs :func:`scaled_dot_product_attention` per
    head and projects back. Position information, if any, comes from outside:
    added to ``x`` beforehand (absolute encodings) or passed as ``bias``
    (relative encodings).

    Args:
        dim: Model dimension, divisible by ``num_heads``.
        num_heads: Number of heads, >= 1.
        bias: Whether the projections have bias terms.
    """

    def __init__(self, dim: int, num_heads: int = 1, *, bias: bool = True) -> None:
        super().__init__()
        self.dim, self.num_heads, self.head_dim = dim, num_heads, check_heads(dim, num_heads)
        self.qkv = nn.Linear(dim, 3 * dim, bias=bias)
        self.out = nn.Linear(dim, dim, bias=bias)

    def forward(
        self, x: torch.Tensor, *, bias: torch.Tensor | None = None, causal: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend over the sequence.

        Args:
            x: ``[b, s, dim]``.
            bias: Optional score bias broadcastable to ``[b, h, s, s]``.
            causal: Mask future positions.

        Returns:
            ``(out [b, s, dim], weights [b, h, s, s])``.

        Raises:
            ValueError: If ``x`` is not ``[b, s, dim]``.
            TypeError: If ``x`` is not of the layer's dtype.
        """
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x must have shape [batch, seq_len, {self.dim}], got {tuple(x.shape)}")
        check_input_dtype("x", x, self.qkv.weight)
        b, s, _ = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.num_heads, self.head_dim)  # [b, s, 3, h, dh]
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x [b, h, s, dh]
        out, weights = scaled_dot_product_attention(q, k, v, bias=bias, causal=causal)
        out = out.transpose(1, 2).reshape(b, s, self.dim)  # [b, h, s, dh] -> [b, s, dim]
        return self.out(out), weights
