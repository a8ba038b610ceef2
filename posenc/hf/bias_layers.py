"""The layers that add a bias to the attention logits: ALiBi as BLOOM, MPT and Falcon add it, and T5's.

Both are :class:`~posenc.hf.layers.HFLayer` subclasses, with its inputs and shapes.
"""

from __future__ import annotations

import math

import torch

from ..alibi import ALIBI_SLOPE_SETS
from ..t5 import T5RelativeBias, t5_relative_position_bucket
from .layers import HFLayer, integer_positions

__all__ = ["ALiBiLayer", "T5BiasLayer"]


class ALiBiLayer(HFLayer):
    """ALiBi as BLOOM, MPT or Falcon add it to the scaled logits.

    * ``"bloom"``: ``+ m_h * p_j`` (``build_alibi_tensor``: float32 slopes times the key's
      position, from the attention mask's cumulative sum), rounded to the logits' dtype.
    * ``"falcon"``: ``+ m_h * p_j / sqrt(d)`` with the slopes and their products in
      bfloat16, as its ``build_alibi_tensor`` computes them; the bias enters through the
      attention mask (the ``sdpa`` path). Falcon's ``eager`` path adds it a second time
      (``(q . k + alibi) / sqrt(d) + mask``); this layer follows ``sdpa``, the default.
    * ``"mpt"``: ``+ m_h * (j - s_k + 1)`` in float32 (``build_mpt_alibi_tensor`` with its
      default ``alibi_bias_max=8``, which ``transformers`` always uses): MPT ignores the
      mask, so the bias depends on the key's index ``j`` alone, not on ``position_ids``.

    Each differs from the paper's ``-m_h (i - j)`` by ``m_h * i``, constant along a row,
    which the softmax removes.

    Args:
        variant: ``"bloom"``, ``"falcon"`` or ``"mpt"``.
        max_seq_len: MPT only: the longest key length its bias table covers.
        **kwargs: ``softmax_scale``, ``num_heads``, ``head_dim`` of :class:`HFLayer`.
    """

    kind = "alibi"

    def __init__(self, variant: str, *, max_seq_len: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.variant, self.max_seq_len = variant, max_seq_len
        self.slopes = ALIBI_SLOPE_SETS[variant](self.num_heads)  # [h] float32

    def _bias(self, positions, q_len, logits):
        slopes = self.slopes.to(logits.device)  # [h]
        s_k = positions.shape[1]
        if self.variant == "mpt":
            if self.max_seq_len is not None and s_k > self.max_seq_len:
                raise ValueError(f"MPT's bias covers max_seq_len = {self.max_seq_len} keys, got {s_k}")
            index = torch.arange(1 - s_k, 1, dtype=torch.int32, device=logits.device)  # j - (s_k - 1)
            return (slopes[:, None] * index)[None, :, None, :]  # [1, h, 1, s_k], float32
        keys = integer_positions(positions, "an ALiBi layer")[:, None, :]  # [b, 1, s_k]
        if self.variant == "bloom":
            bias = (slopes[None, :, None] * keys).to(logits.dtype)  # m_h * p_j: [b, h, s_k]
        else:
            bias = (slopes.bfloat16()[None, :, None] * keys).to(logits.dtype) / math.sqrt(self.head_dim)
        return bias[:, :, None, :]  # [b, h, s_k] -> [b, h, 1, s_k]


class T5BiasLayer(HFLayer):
    """T5's decoder self-attention: ``q . k`` unscaled plus the bucket's learned scalar.

    ``bias_module`` (a :class:`posenc.T5RelativeBias`, causal buckets) holds the table: load
    ``relative_attention_bias.weight`` (``[num_buckets, num_heads]``) of the decoder's first
    block into ``bias_module.embedding.weight``. Every decoder layer reuses that block's
    bias, as ``transformers`` does, so all layers of a model share one module.
    """

    kind = "t5"

    def __init__(self, bias_module: T5RelativeBias, **kwargs):
        super().__init__(softmax_scale=1.0, num_heads=bias_module.num_heads, **kwargs)
        self.bias_module = bias_module

    def _bias(self, positions, q_len, logits):
        positions = integer_positions(positions, "a T5 layer")
        rel = positions[:, None, :] - positions[:, -q_len:, None]  # key - query: [b, s_q, s_k]
        m = self.bias_module
        buckets = t5_relative_position_bucket(
            rel, bidirectional=m.bidirectional, num_buckets=m.num_buckets, max_distance=m.max_distance
        )
        return m.embedding(buckets.to(m.embedding.weight.device)).movedim(-1, -3)  # [b, s_q, s_k, h] -> [b, h, ...]
