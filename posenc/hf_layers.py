"""One decoder layer's position encoding, as a Hugging Face ``transformers`` model computes it.

The layer objects that :mod:`posenc.hf_families` builds from a model's configuration.
Each reproduces one attention layer's pre-softmax logits from its queries and keys:

* :class:`RotaryLayer`: RoPE on all channels (Llama 4's iRoPE layers) or on the last
  ``qk_rope_head_dim`` channels (DeepSeek-V2/V3's multi-head latent attention), in the
  model's own pairing and precision.
* :class:`NoPELayer`: no positions at all, optionally with Llama 4's attention
  temperature: queries at position ``p`` multiplied by
  ``1 + attn_scale * log(1 + floor((p + 1) / floor_scale))`` (Llama 4; the scaling of
  Nakanishi 2025, "Scalable-Softmax Is Superior for Attention").
* :class:`ALiBiLayer`: ALiBi (Press et al. 2022) as BLOOM, MPT and Falcon add it.
* :class:`T5BiasLayer`: T5's bucketed relative bias (Raffel et al. 2020), decoder side.

Every layer takes ``q [b, h_q, s_q, d]``, ``k [b, h_kv, s_k, d]`` and ``position_ids
[b, s_k]``: one position per key, the queries being the last ``s_q`` keys (the whole
sequence when ``s_q == s_k``, the new tokens of a decode step otherwise). For GQA,
``scores`` repeats each key head ``h_q / h_kv`` times, as ``repeat_kv`` does. Norms on
q and k (Llama 4's ``qk_norm``) and masks are not part of the scores.
"""

from __future__ import annotations

import math

import torch

from ._checks import as_positions, check_float_tensor, check_real
from .alibi import ALIBI_SLOPE_SETS
from .rope_ops import _rotate
from .rotary import rope_cos_sin
from .t5 import T5RelativeBias, t5_relative_position_bucket

#: How a rotary layer turns its pairs: ``"complex"`` multiplies pairs ``(2i, 2i + 1)`` as complex
#: numbers in float32 (Llama 4, DeepSeek-V2); ``"half"`` pairs ``(i, i + r/2)`` in the input's dtype
#: (DeepSeek-V3, ``rope_interleave=False``); ``"deinterleave"`` reorders pairs ``(2i, 2i + 1)`` to
#: ``(i, i + r/2)`` and then turns them as ``"half"`` (DeepSeek-V3, ``rope_interleave=True``).
ROTARY_STYLES = ("complex", "half", "deinterleave")


def check_attention_inputs(q, k, position_ids, *, num_heads: int | None = None, head_dim: int | None = None):
    """Check ``q [b, h_q, s_q, d]``, ``k [b, h_kv, s_k, d]`` and ``position_ids``; return them as ``[b or 1, s_k]``.

    Raises:
        TypeError: If ``q`` or ``k`` is not a floating-point tensor.
        ValueError: Naming the argument, its shape and what the layer expects.
    """
    for name, t in (("q", q), ("k", k)):
        check_float_tensor(name, t)
        if t.dim() != 4:
            raise ValueError(f"{name} must have shape [batch, heads, seq_len, head_dim], got {tuple(t.shape)}")
    if head_dim is not None and q.shape[-1] != head_dim:
        raise ValueError(f"q must have head_dim {head_dim} (last dim) for this layer, got {tuple(q.shape)}")
    if k.shape[-1] != q.shape[-1] or k.shape[0] != q.shape[0]:
        raise ValueError(f"k must have q's batch and head_dim, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if num_heads is not None and q.shape[1] != num_heads:
        raise ValueError(f"q must have {num_heads} heads (dim 1) for this layer, got {tuple(q.shape)}")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"q's heads ({q.shape[1]}) must be a multiple of k's heads ({k.shape[1]})")
    if q.shape[2] > k.shape[2]:
        raise ValueError(f"q has {q.shape[2]} positions but k only {k.shape[2]}; the queries are the last keys")
    positions = check_real("position_ids", as_positions(position_ids, "position_ids")).to(q.device)
    positions = positions[None] if positions.dim() == 1 else positions  # [s_k] -> [1, s_k]
    if positions.dim() != 2 or positions.shape[1] != k.shape[2] or positions.shape[0] not in (1, q.shape[0]):
        raise ValueError(
            f"position_ids must have shape [batch, s_k] = [{q.shape[0]}, {k.shape[2]}] (one position per key; "
            f"the queries are the last s_q), got {tuple(positions.shape)}"
        )
    return positions


def _integer_positions(positions: torch.Tensor, layer: str) -> torch.Tensor:
    if positions.is_floating_point():
        raise ValueError(f"position_ids must be integers for {layer}, got dtype {positions.dtype}")
    return positions.long()  # differences of uint8 or int16 positions would wrap


class HFLayer:
    """The position encoding of one attention layer: ``scores``, ``apply`` and ``row``.

    Subclasses override ``_encode`` (what happens to q and k) and ``_bias`` (what is added
    to the scaled logits). The base class is a layer without positions.

    Args:
        softmax_scale: Multiplies ``q . k`` before any bias is added.
        num_heads: Query heads the layer expects, or None for any.
        head_dim: Query and key width the layer expects, or None for any.
    """

    kind = "nope"

    def __init__(self, *, softmax_scale: float, num_heads: int | None = None, head_dim: int | None = None):
        self.softmax_scale, self.num_heads, self.head_dim = float(softmax_scale), num_heads, head_dim

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.row().items())})"

    def _check(self, q, k, position_ids) -> torch.Tensor:
        return check_attention_inputs(q, k, position_ids, num_heads=self.num_heads, head_dim=self.head_dim)

    def _encode(self, q, k, positions):
        return q, k

    def _bias(self, positions: torch.Tensor, q_len: int, logits: torch.Tensor):
        return None

    def apply(self, q: torch.Tensor, k: torch.Tensor, position_ids) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoded queries and keys, as the model passes them to its attention.

        Args:
            q: Queries ``[b, h_q, s_q, d]``.
            k: Keys ``[b, h_kv, s_k, d]``.
            position_ids: ``[b, s_k]`` (or ``[s_k]``): the keys' positions; the queries are the last ``s_q``.

        Returns:
            ``(q, k)`` of the same shapes and dtypes (unchanged where the layer only adds a bias).

        Raises:
            ValueError: If a shape does not fit (see :func:`check_attention_inputs`).
        """
        return self._encode(q, k, self._check(q, k, position_ids))

    def scores(self, q: torch.Tensor, k: torch.Tensor, position_ids) -> torch.Tensor:
        """The layer's pre-softmax logits ``[b, h_q, s_q, s_k]``, without masks.

        Args:
            q: Queries ``[b, h_q, s_q, d]``.
            k: Keys ``[b, h_kv, s_k, d]``; ``h_kv`` divides ``h_q`` (GQA repeats each key head).
            position_ids: ``[b, s_k]`` (or ``[s_k]``): the keys' positions; the queries are the last ``s_q``.

        Returns:
            ``softmax_scale * (q' . k') + bias``, with ``q', k'`` from :meth:`apply`.

        Raises:
            ValueError: If a shape does not fit (see :func:`check_attention_inputs`).
        """
        positions = self._check(q, k, position_ids)
        q, k = self._encode(q, k, positions)
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # [b, h_kv, s_k, d] -> [b, h_q, s_k, d]
        logits = torch.matmul(q, k.transpose(-1, -2)) * self.softmax_scale  # [b, h_q, s_q, s_k]
        bias = self._bias(positions, q.shape[2], logits)
        return logits if bias is None else logits + bias

    def row(self) -> dict:
        """The layer's ``describe`` row: scheme, theta, scaling, rotary, layout, nope_temperature, softmax_scale."""
        return {
            "scheme": self.kind,
            "theta": None,
            "scaling": None,
            "rotary": 0,
            "layout": None,
            "nope_temperature": None,
            "softmax_scale": self.softmax_scale,
        }


class NoPELayer(HFLayer):
    """No positions; with ``temperature=(floor_scale, attn_scale)``, Llama 4's query temperature.

    ``Llama4TextAttention`` (``attn_temperature_tuning``) multiplies the query at position
    ``p`` by ``1 + attn_scale * log1p(floor((p + 1) / floor_scale))``, in float32, on its
    NoPE layers. It takes ``p`` from the cache length, ``position_ids`` here: the same
    numbers unless sequences are padded. :meth:`apply` returns the scaled queries.
    """

    kind = "nope"

    def __init__(self, *, temperature: tuple[float, float] | None = None, **kwargs):
        super().__init__(**kwargs)
        self.temperature = temperature

    def _encode(self, q, k, positions):
        if self.temperature is None:
            return q, k
        floor_scale, attn_scale = self.temperature
        p = positions[:, -q.shape[2] :].float()  # [b, s_q]
        # tau(p) = 1 + attn_scale * log(1 + floor((p + 1) / floor_scale))
        tau = torch.log1p(torch.floor((p + 1.0) / floor_scale)) * attn_scale + 1.0
        return (q * tau[:, None, :, None]).to(q.dtype), k

    def row(self) -> dict:
        row = super().row()
        if self.temperature is not None:
            floor_scale, attn_scale = self.temperature
            row["nope_temperature"] = f"1 + {attn_scale:g} * log1p(floor((p + 1) / {floor_scale:g}))"
        return row


class RotaryLayer(HFLayer):
    """RoPE on the last ``rotary_dim`` channels of q and k (all of them, or MLA's rotary part).

    Angles ``p * theta_i`` in float32, as ``transformers`` forms them, from the frequencies
    of :func:`posenc.rope_inv_freq` for ``rope_parameters`` (YaRN's attention factor
    multiplies cos and sin). The channels before the rotary part pass through: DeepSeek's
    ``q_pass``/``k_nope``, then ``q_rot``/``k_rot``.

    Args:
        kind: ``"rope"`` or ``"mla_rope"``.
        rotary_dim: Channels rotated, even.
        rope_parameters: A ``rope_parameters`` dict with ``rope_theta`` (see :func:`posenc.rope_inv_freq`).
        style: One of :data:`ROTARY_STYLES`.
        **kwargs: ``softmax_scale``, ``num_heads``, ``head_dim`` of :class:`HFLayer`.
    """

    def __init__(self, kind: str, *, rotary_dim: int, rope_parameters: dict, style: str, **kwargs):
        super().__init__(**kwargs)
        self.kind, self.rotary_dim, self.rope_parameters, self.style = kind, rotary_dim, rope_parameters, style
        rope_cos_sin(torch.zeros(1), rotary_dim, scaling=rope_parameters)  # bad parameters raise here, not later

    def _turn(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        keep, part = x[..., : x.shape[-1] - self.rotary_dim], x[..., x.shape[-1] - self.rotary_dim :]
        if self.style == "complex":  # (x0 + i x1) * (cos + i sin) in float32
            out = _rotate(part.float(), cos, sin, "interleaved").to(x.dtype)
        else:
            if self.style == "deinterleave":  # pairs (2i, 2i + 1) -> (i, i + r/2)
                part = torch.cat((part[..., 0::2], part[..., 1::2]), dim=-1)  # [..., r]
            out = _rotate(part, cos.to(x.dtype), sin.to(x.dtype), "half")
        return torch.cat((keep, out), dim=-1)  # [..., d - r] + [..., r] -> [..., d]

    def _encode(self, q, k, positions):
        layout = "interleaved" if self.style == "complex" else "half"
        cos, sin = rope_cos_sin(
            positions,
            self.rotary_dim,
            scaling=self.rope_parameters,
            layout=layout,
            angle_dtype=torch.float32,
        )  # [b, s_k, r] each
        cos, sin = cos[:, None], sin[:, None]  # [b, 1, s_k, r]
        s_q = q.shape[2]
        return self._turn(q, cos[..., -s_q:, :], sin[..., -s_q:, :]), self._turn(k, cos, sin)

    def row(self) -> dict:
        row = super().row()
        rope_type = self.rope_parameters.get("rope_type", "default")
        row.update(
            theta=float(self.rope_parameters["rope_theta"]),
            scaling=None if rope_type == "default" else rope_type,
            rotary=self.rotary_dim,
            layout="interleaved" if self.style != "half" else "half",
        )
        return row


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
        keys = _integer_positions(positions, "an ALiBi layer")[:, None, :]  # [b, 1, s_k]
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
        positions = _integer_positions(positions, "a T5 layer")
        rel = positions[:, None, :] - positions[:, -q_len:, None]  # key - query: [b, s_q, s_k]
        m = self.bias_module
        buckets = t5_relative_position_bucket(
            rel, bidirectional=m.bidirectional, num_buckets=m.num_buckets, max_distance=m.max_distance
        )
        return m.embedding(buckets.to(m.embedding.weight.device)).movedim(-1, -3)  # [b, s_q, s_k, h] -> [b, h, ...]
