"""Transformer-XL's relative positions (Dai et al. 2019): sinusoids of the distance and two global biases.

The score of query ``i`` and key ``j`` has four terms (content-content,
content-position, and the two global biases ``u`` and ``v``); the position terms use
the sinusoidal encoding of the distance, projected, and are aligned with
:func:`posenc.rel_shift`. Conventions as in :mod:`posenc.relative`.

:class:`TransformerXLRelativeAttention` is that default (the authors' ``attn_type=0``);
:class:`TransformerXLLearnableAttention` is their ``attn_type=1``, with learned per-layer
distance embeddings and per-distance biases in place of the sinusoids and ``v``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_base, check_choice, check_heads, check_positive_int, check_table_size
from .attention import scaled_dot_product_attention
from .relative import METHODS, project_qkv, relative_position_range, relative_scores
from .sinusoidal import sinusoidal_encoding


class TransformerXLRelativeAttention(nn.Module):
    """Multi-head self-attention with Transformer-XL's relative positions.

    Dai et al., "Transformer-XL: Attentive Language Models beyond a
    Fixed-Length Context", 2019, equation (3) and appendix B. With
    ``q_i = W_q x_i``, ``k_j = W_{k,E} x_j`` and ``R`` the sinusoidal encoding
    of the distance ``i - j`` (:func:`posenc.sinusoidal_encoding`, no
    learned table)::

        A_ij = q_i.k_j + q_i.W_{k,R} R_{i-j} + u.k_j + v.W_{k,R} R_{i-j}
             = (q_i + u).k_j + (q_i + v).W_{k,R} R_{i-j}

    scaled by ``1 / sqrt(d_h)``. ``u`` and ``v`` are learned per head and do not
    depend on the query's position. The second product is computed against
    every distance at once and aligned with :func:`rel_shift`.

    Args:
        dim: Model dimension, even and divisible by ``num_heads``.
        num_heads: Number of heads, >= 1.
        base: Frequency base of the sinusoids.
        method: ``"shift"`` (default) or ``"materialize"``, see :func:`relative_scores`.
    """

    def __init__(self, dim: int, num_heads: int = 1, *, base: float = 10000.0, method: str = "shift") -> None:
        super().__init__()
        self.head_dim = check_heads(dim, num_heads)
        if dim % 2:
            raise ValueError(f"dim must be even (sinusoids come in sin/cos pairs), got {dim}")
        self.dim, self.num_heads = dim, num_heads
        self.base = check_base("base", base)
        self.method = check_choice("method", method, METHODS)
        self.q = nn.Linear(dim, dim, bias=False)  # W_q
        self.kv = nn.Linear(dim, 2 * dim, bias=False)  # W_{k,E} and W_v
        self.r = nn.Linear(dim, dim, bias=False)  # W_{k,R}
        self.u = nn.Parameter(torch.randn(num_heads, self.head_dim) * 0.02)
        self.v = nn.Parameter(torch.randn(num_heads, self.head_dim) * 0.02)
        self.out = nn.Linear(dim, dim, bias=False)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, num_heads={self.num_heads}, base={self.base:g}, method={self.method!r}"

    def position_embeddings(
        self, q_len: int, k_len: int, *, offset: int = 0, dtype: torch.dtype = torch.float32, device=None
    ) -> torch.Tensor:
        """The sinusoids ``R`` of every distance between the queries and the keys.

        Args:
            q_len: Number of queries, >= 1.
            k_len: Number of keys, >= 1.
            offset: Position of the first query, >= 0.
            dtype: Floating dtype of the result.
            device: Device of the result.

        Returns:
            ``[q_len + k_len - 1, dim]``: row ``c`` is ``R`` at the distance
            ``i - j = -(c - (q_len - 1) - offset)``, laid out as in the
            paper's code (all sines, then all cosines).
        """
        r = relative_position_range(q_len, k_len, offset=offset, device=device)  # j - i, ascending
        return sinusoidal_encoding(-r, self.dim, base=self.base, layout="concat", dtype=dtype)

    def forward(
        self, x: torch.Tensor, *, memory: torch.Tensor | None = None, causal: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend over the segment ``x`` and the cached ``memory`` of the previous one.

        Args:
            x: ``[b, s, dim]``, the current segment.
            memory: Optional ``[b, m, dim]`` hidden states of the previous
                segment (detach them to stop gradients, as the paper does); the
                queries sit at positions ``m .. m + s - 1``.
            causal: Mask keys after the query.

        Returns:
            ``(out [b, s, dim], weights [b, h, s, m + s])``.

        Raises:
            ValueError: If ``x`` or ``memory`` has the wrong shape.
        """
        q, k, values = project_qkv(self, x, memory)  # [b, h, s, dh], [b, h, t, dh] x 2
        (b, h, s, dh), t = q.shape, k.shape[2]
        rel = self.position_embeddings(s, t, offset=t - s, dtype=x.dtype, device=x.device)  # [s + t - 1, dim]
        w_r = self.r(rel).view(-1, h, dh).transpose(0, 1)  # [s + t - 1, dim] -> [h, s + t - 1, dh]
        bd = relative_scores(q + self.v.unsqueeze(1), w_r, method=self.method) / math.sqrt(dh)  # [b, h, s, t]
        out, weights = scaled_dot_product_attention(q + self.u.unsqueeze(1), k, values, bias=bd, causal=causal)
        out = out.transpose(1, 2).reshape(b, s, self.dim)  # [b, h, s, dh] -> [b, s, dim]
        return self.out(out), weights


class TransformerXLLearnableAttention(nn.Module):
    """Multi-head causal self-attention with Transformer-XL's learned relative positions (``attn_type=1``).

    The learnable variant of Dai et al. 2019 (``RelLearnableMultiHeadAttn`` in the authors'
    ``pytorch/mem_transformer.py``, used by ``MemTransformerLM(attn_type=1)``): instead of
    projected sinusoids, every layer learns per head a vector ``E_d`` and a scalar ``b_d`` for
    each distance ``d = i - j >= 0`` between query and key, and one content bias ``u``::

        A_ij = ((q_i + u).k_j + q_i.E_d + b_d) / sqrt(d_h),   d = min(i - j, max_len - 1)

    (``AC + B_ + D_`` of the original, the last two aligned with the rel-shift). The
    tables are kept in the original's layout, so its weights copy in unchanged: ``r_emb``
    ``[max_len, heads, d_h]`` and ``r_bias`` ``[max_len, heads]`` hold distance ``d`` in row
    ``max_len - 1 - d`` (the last row is distance 0), ``r_w_bias`` ``[heads, d_h]`` is ``u``.
    Distances past the table read its first row, as the original pads a table shorter than
    the keys with copies of row 0 (its ``clamp_len`` is a table of the last ``clamp_len``
    rows). The table has no rows for keys after the query, so attention is always causal,
    as the original's decoder mask makes it.

    Args:
        dim: Model dimension, divisible by ``num_heads``.
        num_heads: Number of heads, >= 1.
        max_len: Rows of the tables, >= 1: the original's ``max_klen = tgt_len + ext_len + mem_len``.
        method: ``"shift"`` (default) or ``"materialize"``, see :func:`posenc.relative_scores`.

    Raises:
        ValueError: If ``dim``, ``num_heads``, ``max_len`` or ``method`` is invalid.
    """

    def __init__(self, dim: int, num_heads: int = 1, *, max_len: int, method: str = "shift") -> None:
        super().__init__()
        self.head_dim = check_heads(dim, num_heads)
        self.dim, self.num_heads = dim, num_heads
        self.max_len = check_positive_int("max_len", max_len)
        check_table_size("max_len", max_len, max_len * dim)
        self.method = check_choice("method", method, METHODS)
        self.q = nn.Linear(dim, dim, bias=False)  # W_q
        self.kv = nn.Linear(dim, 2 * dim, bias=False)  # W_k and W_v
        self.r_emb = nn.Parameter(torch.randn(max_len, num_heads, self.head_dim) * 0.02)  # E, distance reversed
        self.r_bias = nn.Parameter(torch.zeros(max_len, num_heads))  # b, distance reversed
        self.r_w_bias = nn.Parameter(torch.randn(num_heads, self.head_dim) * 0.02)  # u
        self.out = nn.Linear(dim, dim, bias=False)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, num_heads={self.num_heads}, max_len={self.max_len}, method={self.method!r}"

    def table_rows(self, distances: torch.Tensor) -> torch.Tensor:
        """Row of ``r_emb`` and ``r_bias`` for each distance ``i - j``: ``max_len - 1 - min(d, max_len - 1)``.

        Negative distances (keys after the query, always masked) read row ``max_len - 1``.
        """
        return self.max_len - 1 - distances.clamp(0, self.max_len - 1)

    def _position_terms(self, q: torch.Tensor, k_len: int) -> torch.Tensor:
        """``(q_i.E_d + b_d) / sqrt(d_h)`` for every pair: ``[b, h, s, k_len]``."""
        s, device = q.shape[2], q.device
        r = relative_position_range(s, k_len, offset=k_len - s, device=device)  # j - i, ascending
        emb = self.r_emb[self.table_rows(-r)].transpose(0, 1)  # [s + t - 1, h, dh] -> [h, s + t - 1, dh]
        b_term = relative_scores(q, emb.to(q.dtype), method=self.method)  # [b, h, s, t]
        i = torch.arange(s, device=device)[:, None] + (k_len - s)  # the queries' positions, [s, 1]
        d_term = self.r_bias[self.table_rows(i - torch.arange(k_len, device=device))]  # [s, t, h]
        return (b_term + d_term.permute(2, 0, 1).to(q.dtype)) / math.sqrt(q.shape[-1])

    def scores(self, x: torch.Tensor, *, memory: torch.Tensor | None = None) -> torch.Tensor:
        """The logits before the softmax, ``[b, h, s, m + s]``: ``A_ij`` above, ``-inf`` after the query.

        Arguments and errors as :meth:`forward`.
        """
        q, k, _ = project_qkv(self, x, memory)  # [b, h, s, dh], [b, h, t, dh]
        s, t = q.shape[2], k.shape[2]
        logits = (q + self.r_w_bias.unsqueeze(1)) @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        logits = logits + self._position_terms(q, t)
        future = torch.arange(t, device=x.device) > torch.arange(s, device=x.device)[:, None] + (t - s)  # [s, t]
        return logits.masked_fill(future, float("-inf"))

    def forward(self, x: torch.Tensor, *, memory: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend causally over the segment ``x`` and the cached ``memory`` of the previous one.

        Args:
            x: ``[b, s, dim]``, the current segment.
            memory: Optional ``[b, m, dim]`` hidden states of the previous segment (the
                original's ``mems``, detached there); the queries sit at ``m .. m + s - 1``.

        Returns:
            ``(out [b, s, dim], weights [b, h, s, m + s])``: ``out`` is the original's
            ``o_net(attn_vec)``, before its dropout, residual and layer norm.

        Raises:
            ValueError: If ``x`` or ``memory`` has the wrong shape.
            TypeError: If their dtype is not the weights'.
        """
        q, k, values = project_qkv(self, x, memory)  # [b, h, s, dh], [b, h, t, dh] x 2
        b, h, s, dh = q.shape
        bias = self._position_terms(q, k.shape[2])  # [b, h, s, t]
        out, weights = scaled_dot_product_attention(
            q + self.r_w_bias.unsqueeze(1), k, values, bias=bias, causal=True
        )  # [b, h, s, dh], [b, h, s, t]
        out = out.transpose(1, 2).reshape(b, s, self.dim)  # [b, h, s, dh] -> [b, s, dim]
        return self.out(out), weights
