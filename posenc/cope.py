"""CoPE: contextual position encoding (Golovneva et al. 2024).

Positions counted by the content: query ``i`` decides, with a gate per key, which
tokens count, and the position of key ``j`` is the number of counted tokens from ``j``
to ``i``,

    g_it = sigmoid(q_i . k_t),    p_ij = sum_{t=j}^{i} g_it,

a fractional number. A table of learned embeddings ``e[0], e[1], ..., e[P - 1]`` is
read at ``p_ij`` by interpolating between ``e[floor(p)]`` and ``e[ceil(p)]`` with the
fractional part, and the query's dot product with it is added to the logit:

    logit_ij = q_i . k_j / sqrt(d) + q_i . e[p_ij].

Causal: a query counts only keys at or before it. Following the paper's code, the gates
are the sigmoids of the scaled logits ``q . k / sqrt(d)``, positions are clamped at
``P - 1``, and the interpolation is done on the scalars ``q_i . e[n]`` (the same numbers,
since the dot product is linear).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_float_tensor, check_positive_int


def _check_square(name: str, x: torch.Tensor) -> int:
    """The length ``s`` of a ``[..., s, s]`` tensor."""
    if x.dim() < 2 or x.shape[-1] != x.shape[-2] or x.shape[-1] < 1:
        raise ValueError(
            f"{name} must have shape [..., seq_len, seq_len] (causal self-attention), got {tuple(x.shape)}"
        )
    return x.shape[-1]


def cope_positions(gates: torch.Tensor, *, max_position: float | None = None) -> torch.Tensor:
    """CoPE's contextual positions ``p_ij = sum_{t=j}^{i} g_it`` (Golovneva et al. 2024, eq. 3).

    Keys after the query (``j > i``) do not count: their gates are taken as 0, so their
    position is 0 as well (the attention masks them anyway).

    Args:
        gates: Float tensor ``[..., seq_len, seq_len]``, query rows and key columns, values in ``[0, 1]``.
        max_position: Clamp positions at this value (``P - 1`` for a table of ``P``
            embeddings); ``None`` leaves them as they are.

    Returns:
        ``[..., seq_len, seq_len]`` in the dtype of ``gates``; with every gate 1, ``p_ij = i - j + 1``.

    Raises:
        ValueError: If ``gates`` is not square in its last two dims or ``max_position`` is negative.
        TypeError: If ``gates`` is not a float tensor.
    """
    check_float_tensor("gates", gates)
    s = _check_square("gates", gates)
    causal = torch.ones(s, s, dtype=torch.bool, device=gates.device).tril()  # t <= i
    g = gates.masked_fill(~causal, 0.0)
    # p_ij = sum_{t >= j} g_it: a cumulative sum from the right
    positions = g.flip(-1).cumsum(-1).flip(-1)  # [..., s, s]
    if max_position is not None:
        if (
            isinstance(max_position, bool)
            or not isinstance(max_position, (int, float))
            or not math.isfinite(max_position)
            or max_position < 0
        ):
            raise ValueError(f"max_position must be a finite number >= 0 or None, got {max_position!r}")
        positions = positions.clamp(max=float(max_position))
    return positions


def cope_bias(q: torch.Tensor, positions: torch.Tensor, pos_emb: torch.Tensor) -> torch.Tensor:
    """The term ``q_i . e[p_ij]`` CoPE adds to the logits, with ``e`` interpolated at fractional ``p``.

    ``e[p] = (1 - w) e[floor(p)] + w e[ceil(p)]``, ``w = p - floor(p)`` (Golovneva et al. 2024, eq. 4),
    computed on the scalars ``q_i . e[n]``.

    Args:
        q: Queries ``[..., seq_len, d]``.
        positions: ``[..., seq_len, seq_len]`` from :func:`cope_positions`, in ``[0, P - 1]``;
            leading dims broadcast with ``q``'s.
        pos_emb: The table ``[P, d]``.

    Returns:
        ``[..., seq_len, seq_len]``: zero where the key is after the query.

    Raises:
        ValueError: If the shapes do not fit or a position is outside ``[0, P - 1]``.
        TypeError: If an argument is not a float tensor.
    """
    for name, t in (("q", q), ("positions", positions), ("pos_emb", pos_emb)):
        check_float_tensor(name, t)
    s = _check_square("positions", positions)
    if q.dim() < 2 or q.shape[-2] != s:
        raise ValueError(
            f"q must have shape [..., {s}, d] to match positions {tuple(positions.shape)}, got {tuple(q.shape)}"
        )
    if pos_emb.dim() != 2 or pos_emb.shape[1] != q.shape[-1]:
        raise ValueError(f"pos_emb must have shape [num_positions, {q.shape[-1]}], got {tuple(pos_emb.shape)}")
    top = pos_emb.shape[0] - 1
    if torch.compiler.is_compiling():  # a branch on values breaks the graph: assert instead
        inside = torch.isfinite(positions).all() & (positions.min() >= 0) & (positions.max() <= top)
        torch._assert_async(inside, f"positions must be finite and lie in [0, {top}]")
    elif not torch.isfinite(positions).all():
        raise ValueError("positions must be finite, got NaN or infinite values")
    else:
        low, high = float(positions.detach().min()), float(positions.detach().max())  # learned gates need grad
        if low < 0 or high > top:
            raise ValueError(
                f"positions must lie in [0, {top}] for a table of {top + 1} embeddings, got values in [{low}, {high}]; "
                f"pass max_position={top} to cope_positions"
            )
    logits_int = q @ pos_emb.to(q.dtype).T  # [..., s, P]: q_i . e[n] for every integer n
    floor = positions.floor()
    w = positions - floor  # [..., s, s], the fractional part
    # the leading dims of q and positions, broadcast (torch.broadcast_shapes imports torch._refs: seconds)
    shape = (logits_int[..., :1] + positions[..., :1]).shape[:-1]
    logits_int = logits_int.expand(*shape, top + 1)
    at_floor = logits_int.gather(-1, floor.long().expand(*shape, s))  # [..., s, s]
    at_ceil = logits_int.gather(-1, positions.ceil().long().expand(*shape, s))
    # (1 - w) q.e[floor p] + w q.e[ceil p]
    bias = at_floor * (1 - w) + at_ceil * w
    causal = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()
    return bias.masked_fill(~causal, 0.0)


def cope_logits(q: torch.Tensor, k: torch.Tensor, pos_emb: torch.Tensor) -> torch.Tensor:
    """CoPE's causal attention logits ``q_i . k_j / sqrt(d) + q_i . e[p_ij]``, ``-inf`` after the query.

    The gates are ``sigmoid(q_i . k_j / sqrt(d))``; positions are clamped at ``P - 1``.
    Softmax over the last dim gives the attention weights.

    Args:
        q: Queries ``[..., seq_len, d]``.
        k: Keys ``[..., seq_len, d]``, the same shape.
        pos_emb: The table ``[P, d]``.

    Returns:
        ``[..., seq_len, seq_len]``.

    Raises:
        ValueError: If the shapes do not fit.
        TypeError: If an argument is not a float tensor.
    """
    check_float_tensor("q", q)
    check_float_tensor("k", k)
    if q.dtype != k.dtype:
        raise TypeError(f"q and k must have the same dtype, got {q.dtype} and {k.dtype}")
    if q.shape != k.shape or q.dim() < 2:
        raise ValueError(
            f"q and k must have the same shape [..., seq_len, d], got {tuple(q.shape)} and {tuple(k.shape)}"
        )
    check_float_tensor("pos_emb", pos_emb)
    if pos_emb.dim() != 2 or pos_emb.shape[0] < 1:
        raise ValueError(
            f"pos_emb must have shape [num_positions, d] with num_positions >= 1, got {tuple(pos_emb.shape)}"
        )
    # q_i . k_j / sqrt(d)
    content = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # [..., s, s]
    positions = cope_positions(torch.sigmoid(content), max_position=pos_emb.shape[0] - 1)
    logits = content + cope_bias(q, positions, pos_emb)
    s = q.shape[-2]
    future = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    return logits.masked_fill(future, float("-inf"))


class CoPE(nn.Module):
    """CoPE as a module: holds the table of position embeddings, returns the causal logits.

    Golovneva et al. 2024. The table starts at zero, as in the paper's code, so an untrained
    CoPE adds nothing to the logits.

    Args:
        head_dim: Size of queries, keys and embeddings, >= 1.
        num_positions: ``P``, the number of embeddings ``e[0] .. e[P - 1]``; contextual
            positions are clamped at ``P - 1``.

    Raises:
        ValueError: If a size is not an int >= 1.
    """

    def __init__(self, head_dim: int, num_positions: int) -> None:
        super().__init__()
        self.head_dim = check_positive_int("head_dim", head_dim)
        self.num_positions = check_positive_int("num_positions", num_positions)
        self.pos_emb = nn.Parameter(torch.zeros(num_positions, head_dim))  # e[0 .. P - 1]

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, num_positions={self.num_positions}"

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """:func:`cope_logits` with this table: ``q``, ``k`` ``[..., seq_len, head_dim]`` -> ``[..., s, s]``."""
        if q.shape[-1:] != (self.head_dim,):
            raise ValueError(f"q must have shape [..., seq_len, {self.head_dim}], got {tuple(q.shape)}")
        return cope_logits(q, k, self.pos_emb)
