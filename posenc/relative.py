"""Relative position encodings: terms that depend on ``j - i`` and act on the attention scores.

An absolute encoding gives every *token* a vector for its position. A relative encoding gives every
*pair* (query ``i``, key ``j``) a term that depends only on their relative position, so attention is
unchanged when every position moves by the same amount. Here: Shaw et al. 2018 (learned vectors for the
clipped relative position, added to the keys and values inside attention, :class:`ShawRelativeAttention`)
and the machinery all relative schemes share, the rel-shift trick (:func:`rel_shift`) included.
Transformer-XL is in :mod:`posenc.transformer_xl`, T5's in :mod:`posenc.t5`, ALiBi in :mod:`posenc.alibi`.

Conventions used throughout:

* The relative position of key ``j`` seen from query ``i`` is ``r = j - i``
  (key minus query): negative for keys in the past.
* ``offset`` is the position of the first query when the keys sit at positions ``0 .. k_len - 1``; with
  a KV cache or a memory of ``m`` earlier tokens, ``offset = m = k_len - q_len``.
* A *relative embedding table* for ``q_len`` queries and ``k_len`` keys has ``q_len + k_len - 1`` rows,
  one per relative position ``r = -(q_len - 1) - offset, ..., k_len - 1 - offset`` in increasing order
  (:func:`relative_position_range`): every ``r`` that occurs, each once.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import _checks
from ._checks import check_choice, check_float_tensor, check_heads, check_nonnegative_int, check_positive_int
from .attention import scaled_dot_product_attention

#: How :func:`relative_scores` and :func:`relative_values` pair queries with
#: relative embeddings: ``"shift"`` multiplies by the table and aligns with
#: :func:`rel_shift`; ``"materialize"`` builds the ``[q_len, k_len, d]`` tensor of
#: per-pair vectors, as written in Shaw et al. 2018.
METHODS = ("shift", "materialize")


class ShawRelativeEmbeddings(nn.Module):
    """Shaw et al.'s clipped relative embeddings ``w^K``, ``w^V``: ``2k + 1`` vectors each.

    Relative position ``r = j - i`` (key minus query) reads row ``clip(r, -k, k) + k``;
    positions beyond ``+-k`` share the embedding of ``+-k``. Shared by all heads.
    :class:`ShawRelativeAttention` and the tiny Transformer's Shaw scheme both hold one.

    Args:
        head_dim: Size of each embedding, >= 1.
        max_relative_position: Clipping distance ``k``, >= 0.
    """

    def __init__(self, head_dim: int, max_relative_position: int = 16) -> None:
        super().__init__()
        self.head_dim = check_positive_int("head_dim", head_dim)
        self.max_relative_position = check_nonnegative_int("max_relative_position", max_relative_position)
        n = 2 * max_relative_position + 1
        self.rel_k = nn.Parameter(torch.randn(n, head_dim) * head_dim**-0.5)  # w^K_{-k..k}
        self.rel_v = nn.Parameter(torch.randn(n, head_dim) * head_dim**-0.5)  # w^V_{-k..k}

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_relative_position={self.max_relative_position}"

    def forward(self, q_len: int, k_len: int, *, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Same as :meth:`tables`: calling the module gives the key and value tables."""
        return self.tables(q_len, k_len, offset=offset)

    def tables(self, q_len: int, k_len: int, *, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """The key and value tables for ``q_len`` queries, the first at position ``offset``, and ``k_len`` keys.

        Returns:
            ``(a_k, a_v)``, each ``[q_len + k_len - 1, head_dim]``: row ``c`` is the
            embedding of the clipped relative position ``c - (q_len - 1) - offset``.
        """
        k = self.max_relative_position
        r = relative_position_range(q_len, k_len, offset=offset, device=self.rel_k.device)
        index = r.clamp(-k, k) + k  # [q + k - 1] rows of w^K, w^V
        return self.rel_k[index], self.rel_v[index]


def query_offset(q_len: int, k_len: int, offset: int | None) -> int:
    """``offset`` if given, else ``max(k_len - q_len, 0)``: queries at the end of the keys, as in causal attention."""
    if offset is None:
        return max(check_positive_int("k_len", k_len) - check_positive_int("q_len", q_len), 0)
    return check_nonnegative_int("offset", offset)


def relative_positions(q_len: int, k_len: int, *, offset: int = 0, device=None) -> torch.Tensor:
    """Relative position ``j - (offset + i)`` of every key ``j`` seen from every query ``i``.

    Args:
        q_len: Number of queries, >= 1; query ``i`` sits at position ``offset + i``.
        k_len: Number of keys, >= 1; key ``j`` sits at position ``j``.
        offset: Position of the first query, >= 0 (tokens already in a KV cache).
        device: Device of the result.

    Returns:
        ``torch.long`` tensor ``[q_len, k_len]``, constant along every diagonal.

    Raises:
        ValueError: If a length is not an int >= 1 or ``offset`` is not an int >= 0.
    """
    check_positive_int("q_len", q_len)
    check_positive_int("k_len", k_len)
    check_nonnegative_int("offset", offset)
    query = torch.arange(q_len, device=device).unsqueeze(-1) + offset  # [q, 1]
    key = torch.arange(k_len, device=device)  # [k]
    return key - query  # [q, k]


def relative_position_range(q_len: int, k_len: int, *, offset: int = 0, device=None) -> torch.Tensor:
    """Every relative position that occurs between ``q_len`` queries and ``k_len`` keys, ascending.

    Row ``c`` of a relative embedding table belongs to relative position
    ``c - (q_len - 1) - offset``, so that the pair ``(i, j)`` reads row
    ``j - i + q_len - 1`` whatever the offset.

    Args:
        q_len: Number of queries, >= 1.
        k_len: Number of keys, >= 1.
        offset: Position of the first query, >= 0.
        device: Device of the result.

    Returns:
        ``torch.long`` tensor ``[q_len + k_len - 1]`` running from
        ``-(q_len - 1) - offset`` to ``k_len - 1 - offset``.

    Raises:
        ValueError: As :func:`relative_positions`.
    """
    check_positive_int("q_len", q_len)
    check_positive_int("k_len", k_len)
    check_nonnegative_int("offset", offset)
    return torch.arange(q_len + k_len - 1, device=device) - (q_len - 1) - offset


def rel_shift(x: torch.Tensor) -> torch.Tensor:
    """Align scores against relative positions into scores against keys (Dai et al. 2019, appendix B).

    ``x[..., i, c]`` holds query ``i`` against relative embedding row ``c``
    (rows ordered as in :func:`relative_position_range`). The pair ``(i, j)``
    needs row ``j - i + q_len - 1``: row ``i`` of the result is row ``i`` of
    ``x`` moved left by ``q_len - 1 - i`` places. Instead of gathering with an
    index tensor, one zero column is padded on the left and the buffer is read
    back with a different row length, which moves each row by one place more
    than the row below it.

    Args:
        x: ``[..., q_len, m]`` with ``m >= q_len``.

    Returns:
        ``[..., q_len, m - q_len + 1]`` (``k_len`` columns) with
        ``out[..., i, j] = x[..., i, j - i + q_len - 1]``, exact for every entry.

    Raises:
        ValueError: If ``x`` has fewer than 2 dims, no rows, or fewer columns than rows.
    """
    if x.dim() < 2 or x.shape[-2] < 1 or x.shape[-1] < x.shape[-2]:
        raise ValueError(
            f"x must have shape [..., q_len, m] with 1 <= q_len <= m (m = q_len + k_len - 1), got {tuple(x.shape)}"
        )
    *lead, q_len, m = x.shape
    padded = F.pad(x, (1, 0))  # [..., q, m + 1]: a zero column in front of every row
    padded = padded.reshape(*lead, m + 1, q_len)  # same buffer, read with row length q
    # drop q entries; row i now starts q - 1 - i later
    shifted = padded[..., 1:, :].reshape(*lead, q_len, m)
    return shifted[..., : m - q_len + 1]  # [..., q, k]


def _rel_unshift(y: torch.Tensor) -> torch.Tensor:
    """The transpose of :func:`rel_shift`: ``[..., q, k] -> [..., q, q + k - 1]``.

    ``out[..., i, j - i + q - 1] = y[..., i, j]``; entries no pair maps to are 0.
    """
    *lead, q_len, k_len = y.shape
    m = q_len + k_len - 1
    flat = F.pad(y, (0, q_len - 1)).reshape(*lead, q_len * m)  # [..., q, m] -> [..., q * m]
    flat = F.pad(flat, (q_len, 0))  # [..., q * (m + 1)]: put back the q entries rel_shift drops
    return flat.reshape(*lead, q_len, m + 1)[..., 1:]  # [..., q, m + 1] -> drop the pad column


def _pair_index(q_len: int, k_len: int, device) -> torch.Tensor:
    return relative_positions(q_len, k_len, device=device) + (q_len - 1)  # [q, k], rows of the table


def _check_table(name: str, table: torch.Tensor, rows: int, dim: int, dim_name: str) -> None:
    if table.dim() < 2 or table.shape[-2] != rows or table.shape[-1] != dim:
        raise ValueError(f"{name} has shape {tuple(table.shape)}, expected [..., {rows}, {dim}] ({dim_name})")


def _check_lead(name: str, a: torch.Tensor, b: torch.Tensor, a_name: str) -> None:
    check_float_tensor(a_name, a)
    if a.dtype != b.dtype:
        raise TypeError(f"{name} has dtype {b.dtype}, expected {a.dtype} to match (cast it with .to({a.dtype}))")
    try:
        torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"{name} has leading dims {tuple(b.shape[:-2])}, not broadcastable with {tuple(a.shape[:-2])}"
        ) from None


def relative_scores(q: torch.Tensor, rel_emb: torch.Tensor, *, method: str = "shift") -> torch.Tensor:
    """Dot product of every query with the relative embedding of every pair.

    ``out[..., i, j] = q[..., i, :] . rel_emb[..., j - i + q_len - 1, :]``: the
    term ``x_i W^Q (a^K_ij)^T`` of Shaw et al. 2018, eq. (4), and terms (b) + (d)
    of Dai et al. 2019, eq. (3).

    Args:
        q: Queries ``[..., q_len, d]``.
        rel_emb: Relative embedding table ``[..., q_len + k_len - 1, d]``, rows
            as in :func:`relative_position_range`; leading dims broadcast with ``q``'s.
        method: ``"shift"`` computes ``q @ rel_emb^T`` (``[..., q_len, q_len + k_len - 1]``)
            and aligns it with :func:`rel_shift`; ``"materialize"`` gathers the
            ``[..., q_len, k_len, d]`` tensor of per-pair vectors first.

    Returns:
        ``[..., q_len, k_len]``, unscaled.

    Raises:
        ValueError: If the shapes do not fit or ``method`` is unknown.
        TypeError: If the table's dtype is not that of the other operand.
    """
    check_choice("method", method, METHODS)
    for name, tensor in (("q", q), ("rel_emb", rel_emb)):
        if not isinstance(tensor, torch.Tensor):
            hint = " (ShawRelativeEmbeddings returns (a_k, a_v): pass one of them)" if isinstance(tensor, tuple) else ""
            raise TypeError(f"{name} must be a tensor, got {type(tensor).__name__}{hint}")
    if q.dim() < 2 or q.shape[-2] < 1:
        raise ValueError(f"q must have shape [..., q_len, d] with q_len >= 1, got {tuple(q.shape)}")
    q_len, d = q.shape[-2:]
    if rel_emb.dim() < 2 or rel_emb.shape[-2] < q_len or rel_emb.shape[-1] != d:
        raise ValueError(
            f"rel_emb has shape {tuple(rel_emb.shape)}, expected [..., q_len + k_len - 1, {d}] with "
            f"at least q_len = {q_len} rows"
        )
    _check_lead("rel_emb", q, rel_emb, "q")
    k_len = rel_emb.shape[-2] - q_len + 1
    if method == "shift":
        return rel_shift(q @ rel_emb.transpose(-2, -1))  # [..., q, q + k - 1] -> [..., q, k]
    emb = rel_emb[..., _pair_index(q_len, k_len, rel_emb.device), :]  # [..., q, k, d]
    return torch.einsum("...id,...ijd->...ij", q, emb)


def relative_values(weights: torch.Tensor, rel_emb: torch.Tensor, *, method: str = "shift") -> torch.Tensor:
    """Attention-weighted sum of the relative embeddings of every pair.

    ``out[..., i, :] = sum_j weights[..., i, j] * rel_emb[..., j - i + q_len - 1, :]``:
    the term ``sum_j alpha_ij a^V_ij`` of Shaw et al. 2018, eq. (3).

    Args:
        weights: Attention weights ``[..., q_len, k_len]``.
        rel_emb: Relative embedding table ``[..., q_len + k_len - 1, d_v]``.
        method: ``"shift"`` spreads the weights over the table's rows with the
            transpose of :func:`rel_shift` and multiplies once;
            ``"materialize"`` gathers the ``[..., q_len, k_len, d_v]`` tensor first.

    Returns:
        ``[..., q_len, d_v]``.

    Raises:
        ValueError: If the shapes do not fit or ``method`` is unknown.
        TypeError: If the table's dtype is not that of the other operand.
    """
    check_choice("method", method, METHODS)
    if weights.dim() < 2 or weights.shape[-2] < 1 or weights.shape[-1] < 1:
        raise ValueError(f"weights must have shape [..., q_len, k_len], got {tuple(weights.shape)}")
    q_len, k_len = weights.shape[-2:]
    if rel_emb.dim() < 2 or rel_emb.shape[-2] != q_len + k_len - 1:
        raise ValueError(
            f"rel_emb has shape {tuple(rel_emb.shape)}, expected [..., {q_len + k_len - 1}, d_v] "
            f"(q_len + k_len - 1 rows for weights {tuple(weights.shape)})"
        )
    _check_lead("rel_emb", weights, rel_emb, "weights")
    if method == "shift":
        return _rel_unshift(weights) @ rel_emb  # [..., q, q + k - 1] @ [..., q + k - 1, d_v]
    emb = rel_emb[..., _pair_index(q_len, k_len, rel_emb.device), :]  # [..., q, k, d_v]
    return torch.einsum("...ij,...ijd->...id", weights, emb)


def project_qkv(module: nn.Module, x: torch.Tensor, memory: torch.Tensor | None):
    """Check ``x`` and ``memory``; ``q [b, h, s, dh]`` from ``x``, ``k, v [b, h, m + s, dh]`` from both."""
    dim = module.dim
    _checks.check_input_dtype("x", x, module.q.weight)
    _checks.check_input_dtype("memory", x if memory is None else memory, module.q.weight)
    if x.dim() != 3 or x.shape[-1] != dim or x.shape[1] < 1:
        raise ValueError(f"x must have shape [batch, seq_len >= 1, {dim}], got {tuple(x.shape)}")
    if memory is not None and (memory.dim() != 3 or memory.shape[0] != x.shape[0] or memory.shape[-1] != dim):
        raise ValueError(f"memory must have shape [{x.shape[0]}, mem_len, {dim}], got {tuple(memory.shape)}")
    context = x if memory is None else torch.cat([memory, x], dim=1)  # [b, t, dim]
    (b, s, _), t = x.shape, context.shape[1]
    h, dh = module.num_heads, module.head_dim
    q = module.q(x).view(b, s, h, dh).transpose(1, 2)  # [b, s, dim] -> [b, h, s, dh]
    k, v = module.kv(context).view(b, t, 2, h, dh).permute(2, 0, 3, 1, 4).unbind(0)  # 2 x [b, h, t, dh]
    return q, k, v


class HasShawTables:
    """For modules holding a :class:`ShawRelativeEmbeddings` as ``self.relative``: its tables as attributes."""

    relative: ShawRelativeEmbeddings

    @property
    def rel_k(self) -> nn.Parameter:
        """``w^K``: ``[2k + 1, head_dim]``, row ``r + k`` for relative position ``r``."""
        return self.relative.rel_k

    @property
    def rel_v(self) -> nn.Parameter:
        """``w^V``: ``[2k + 1, head_dim]``, row ``r + k`` for relative position ``r``."""
        return self.relative.rel_v


class ShawRelativeAttention(HasShawTables, nn.Module):
    """Multi-head self-attention with clipped relative position embeddings on keys and values.

    Shaw, Uszkoreit and Vaswani, "Self-Attention with Relative Position
    Representations", 2018, equations (3)-(5)::

        e_ij = x_i W^Q (x_j W^K + a^K_ij)^T / sqrt(d_h)
        z_i  = sum_j softmax_j(e_ij) (x_j W^V + a^V_ij)
        a^K_ij = w^K[clip(j - i, -k, k)],   a^V_ij = w^V[clip(j - i, -k, k)]

    with ``k = max_relative_position``: ``2k + 1`` learned vectors for keys and
    as many for values, shared by all heads. The key term reaches
    :func:`scaled_dot_product_attention` as its ``bias``; the value term is
    added to its output.

    Args:
        dim: Model dimension, divisible by ``num_heads``.
        num_heads: Number of heads, >= 1.
        max_relative_position: Clipping distance ``k``, >= 0; relative positions
            beyond ``+-k`` share the embedding of ``+-k``.
        bias: Whether the projections have bias terms.
        method: ``"shift"`` (default) or ``"materialize"``, see :func:`relative_scores`.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int = 1,
        *,
        max_relative_position: int = 16,
        bias: bool = True,
        method: str = "shift",
    ) -> None:
        super().__init__()
        self.head_dim = check_heads(dim, num_heads)
        self.dim, self.num_heads = dim, num_heads
        self.max_relative_position = check_nonnegative_int("max_relative_position", max_relative_position)
        self.method = check_choice("method", method, METHODS)
        self.q = nn.Linear(dim, dim, bias=bias)
        self.kv = nn.Linear(dim, 2 * dim, bias=bias)
        self.out = nn.Linear(dim, dim, bias=bias)
        self.relative = ShawRelativeEmbeddings(self.head_dim, max_relative_position)  # w^K, w^V

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, num_heads={self.num_heads}, max_relative_position={self.max_relative_position}, "
            f"method={self.method!r}"
        )

    def relative_embeddings(self, q_len: int, k_len: int, *, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """The key and value tables for ``q_len`` queries and ``k_len`` keys.

        Args:
            q_len: Number of queries, >= 1.
            k_len: Number of keys, >= 1.
            offset: Position of the first query, >= 0.

        Returns:
            ``(a_k, a_v)``, each ``[q_len + k_len - 1, head_dim]``: row ``c`` is the
            embedding of the clipped relative position ``c - (q_len - 1) - offset``.
        """
        return self.relative.tables(q_len, k_len, offset=offset)

    def forward(
        self, x: torch.Tensor, *, memory: torch.Tensor | None = None, causal: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend over the sequence (and over ``memory`` before it, if given).

        Args:
            x: ``[b, s, dim]``.
            memory: Optional ``[b, m, dim]`` of earlier tokens; keys and values
                come from ``cat(memory, x)`` and the queries sit at positions
                ``m .. m + s - 1``.
            causal: Mask keys after the query.

        Returns:
            ``(out [b, s, dim], weights [b, h, s, m + s])``.

        Raises:
            ValueError: If ``x`` or ``memory`` has the wrong shape.
        """
        q, k, v = project_qkv(self, x, memory)  # [b, h, s, dh], [b, h, t, dh] x 2
        (b, _, s, dh), t = q.shape, k.shape[2]
        a_k, a_v = self.relative_embeddings(s, t, offset=t - s)  # [s + t - 1, dh] each
        key_term = relative_scores(q, a_k.to(q.dtype), method=self.method)
        bias = key_term / math.sqrt(dh)  # [b, h, s, t]
        out, weights = scaled_dot_product_attention(q, k, v, bias=bias, causal=causal)
        values = relative_values(weights, a_v.to(weights.dtype), method=self.method)
        out = out + values  # [b, h, s, dh]
        out = out.transpose(1, 2).reshape(b, s, self.dim)  # -> [b, s, dim]
        return self.out(out), weights
