"""Transformer-XL's relative positions (Dai et al. 2019): sinusoids of the distance and two global biases.

The score of query ``i`` and key ``j`` has four terms (content-content,
content-position, and the two global biases ``u`` and ``v``); the position terms use
the sinusoidal encoding of the distance, projected, and are aligned with
:func:`posenc.rel_shift`. Conventions as in :mod:`posenc.relative`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_base, check_choice, check_heads
from .attention import scaled_dot_product_attention
from .relative import METHODS, _project, relative_position_range, relative_scores
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
        q, k, values = _project(self, x, memory)  # [b, h, s, dh], [b, h, t, dh] x 2
        (b, h, s, dh), t = q.shape, k.shape[2]
        rel = self.position_embeddings(s, t, offset=t - s, dtype=x.dtype, device=x.device)  # [s + t - 1, dim]
        w_r = self.r(rel).view(-1, h, dh).transpose(0, 1)  # [s + t - 1, dim] -> [h, s + t - 1, dh]
        bd = relative_scores(q + self.v.unsqueeze(1), w_r, method=self.method) / math.sqrt(dh)  # [b, h, s, t]
        out, weights = scaled_dot_product_attention(q + self.u.unsqueeze(1), k, values, bias=bd, causal=causal)
        out = out.transpose(1, 2).reshape(b, s, self.dim)  # [b, h, s, dh] -> [b, s, dim]
        return self.out(out), weights
