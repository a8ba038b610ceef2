"""One decoder layer's position encoding, as a Hugging Face ``transformers`` model computes it.

The layer objects that :func:`posenc.from_hf_config` builds from a model's configuration.
Each reproduces one attention layer's pre-softmax logits from its queries and keys:

* :class:`RotaryLayer`: RoPE on the first ``rotary_dim`` channels of each head (Llama,
  Qwen, Gemma 3, Phi-3, GPT-NeoX, GPT-J, Falcon; M-RoPE for Qwen2-VL; Llama 4's iRoPE
  layers) or on the last ones (DeepSeek-V2/V3's multi-head latent attention), in the
  model's own pairing, with angles in float32 as ``transformers`` forms them.
* :class:`NoPELayer`: no positions at all, optionally with Llama 4's attention
  temperature: queries at position ``p`` multiplied by
  ``1 + attn_scale * log(1 + floor((p + 1) / floor_scale))`` (Llama 4; the scaling of
  Nakanishi 2025, "Scalable-Softmax Is Superior for Attention").
* :class:`~posenc.hf.bias_layers.ALiBiLayer` and :class:`~posenc.hf.bias_layers.T5BiasLayer`
  (:mod:`posenc.hf.bias_layers`): ALiBi as BLOOM, MPT and Falcon add it (Press et al. 2022),
  and T5's bucketed relative bias, decoder side (Raffel et al. 2020).

Every layer takes ``q [b, h_q, s_q, d]``, ``k [b, h_kv, s_k, d]`` and ``position_ids
[b, s_k]`` (or ``[s_k]``, shared by the batch; M-RoPE layers also ``[3, b, s_k]``:
temporal, height, width): one position per key, the queries being the last ``s_q`` keys
(the whole sequence when ``s_q == s_k``, the new tokens of a decode step otherwise). For
GQA, ``scores`` repeats each key head ``h_q / h_kv`` times, as ``repeat_kv`` does. Norms on
q and k (Llama 4's ``qk_norm``) and masks are not part of the scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from .._checks import as_positions, check_choice, check_float_tensor, check_real
from ..rope.nd import mrope_cos_sin
from ..rope.ops import apply_rotation
from ..rope.rotary import rope_cos_sin, rope_inv_freq
from ..rope.state import DynamicRopeState
from .fields import scaling_label

#: How a rotary layer turns its pairs: ``"half"`` pairs ``(i, i + r/2)`` in the input's dtype (Llama,
#: GPT-NeoX and most others in ``transformers``; DeepSeek-V3 with ``rope_interleave=False``);
#: ``"interleaved"`` pairs ``(2i, 2i + 1)`` in the input's dtype (GPT-J); ``"complex"`` multiplies
#: pairs ``(2i, 2i + 1)`` as complex numbers in float32 (Llama 4, DeepSeek-V2); ``"deinterleave"``
#: reorders pairs ``(2i, 2i + 1)`` to ``(i, i + r/2)``, then turns them as ``"half"`` (DeepSeek-V3).
ROTARY_STYLES = ("half", "interleaved", "complex", "deinterleave")


def check_attention_inputs(
    q, k, position_ids, *, num_heads: int | None = None, head_dim: int | None = None, axes: int | None = None
):
    """Check ``q [b, h_q, s_q, d]``, ``k [b, h_kv, s_k, d]`` and ``position_ids``; return them as ``[b or 1, s_k]``.

    With ``axes`` (M-RoPE), ``position_ids`` may also be ``[axes, b, s_k]``, and ``[b, s_k]`` is
    expanded to it (three equal rows for text, as ``transformers`` does); the result is then
    ``[axes, b or 1, s_k]``.

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
    if axes is not None and positions.dim() == 2:
        positions = positions.expand(axes, -1, -1)  # [b, s_k] -> [axes, b, s_k]
    lead = 0 if axes is None else 1
    if (
        positions.dim() != lead + 2
        or positions.shape[-1] != k.shape[2]
        or positions.shape[-2] not in (1, q.shape[0])
        or (lead and positions.shape[0] != axes)
    ):
        shape = f"[batch, s_k] = [{q.shape[0]}, {k.shape[2]}]" + (f" or [{axes}, batch, s_k]" if axes else "")
        raise ValueError(
            f"position_ids must have shape {shape} (one position per key; the queries are the last s_q), "
            f"got {tuple(positions.shape)}"
        )
    return positions


def integer_positions(positions: torch.Tensor, layer: str) -> torch.Tensor:
    """``positions`` as int64 for a layer that indexes or subtracts them; a ``ValueError`` naming
    ``layer`` for floating-point positions (a bias table cannot be read at position 2.5)."""
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

    axes: int | None = None  # M-RoPE: the rows of position_ids

    def _check(self, q, k, position_ids) -> torch.Tensor:
        return check_attention_inputs(
            q, k, position_ids, num_heads=self.num_heads, head_dim=self.head_dim, axes=self.axes
        )

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
            ValueError: If a shape does not fit (see ``posenc.hf.layers.check_attention_inputs``).
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
            ValueError: If a shape does not fit (see ``posenc.hf.layers.check_attention_inputs``).
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
    numbers unless sequences are padded. ``apply`` returns the scaled queries.
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


class RecurrentLayer(NoPELayer):
    """A layer whose recurrence carries order itself (Qwen3-Next's gated linear attention): no position
    encoding is applied, and its ``scores`` are those of plain attention, for comparison only."""

    kind = "recurrence"


class RotaryLayer(HFLayer):
    """RoPE on the first (or, for MLA, the last) ``rotary_dim`` channels of q and k; the rest pass through.

    Su et al., "RoFormer", 2021, as a Hugging Face model configures it. The frequencies are
    :func:`posenc.rope_inv_freq`'s for ``rope_parameters`` (length-dependent scalings, dynamic
    NTK and LongRoPE, see the largest key position, as ``transformers`` does; YaRN's attention
    factor multiplies cos and sin). The angles ``p * theta_i`` are formed in float32, as
    ``transformers`` forms them. DeepSeek's channels are ``[nope | rope]`` per head.

    Args:
        kind: ``"rope"`` or ``"mla_rope"``.
        rotary_dim: Channels rotated, even, ``<= head_dim``.
        rope_parameters: A ``rope_parameters`` dict with ``rope_theta`` (see :func:`posenc.rope_inv_freq`).
        style: One of ``ROTARY_STYLES`` (``"half"``, ``"interleaved"``, ``"complex"``, ``"deinterleave"``).
        channels: ``"first"`` or ``"last"``: which ``rotary_dim`` channels of a head turn.
        mrope_section: For M-RoPE (Qwen2-VL): pairs per axis, e.g. ``[16, 24, 24]``.
        dynamic_state: None (stateless: ``"dynamic"`` frequencies follow each call's length) or a
            :class:`posenc.DynamicRopeState`, which each call updates as ``transformers``' rotary
            module does; it keeps one module per model, so give every layer the same state (also
            settable afterwards: ``layer.dynamic_state = state``). Used only for ``"dynamic"``.
        **kwargs: ``softmax_scale``, ``num_heads``, ``head_dim`` of :class:`HFLayer`.

    Raises:
        ValueError: If the dimensions, the style or the RoPE parameters are invalid.
        TypeError: If ``dynamic_state`` is neither None nor a :class:`posenc.DynamicRopeState`.
    """

    def __init__(
        self,
        kind: str = "rope",
        *,
        rotary_dim: int,
        rope_parameters: Mapping,
        style: str = "half",
        channels: str = "first",
        mrope_section: Sequence[int] | None = None,
        dynamic_state: DynamicRopeState | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        widest = self.head_dim if self.head_dim is not None else rotary_dim
        if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int) or not 2 <= rotary_dim <= widest:
            raise ValueError(f"rotary_dim must be an even int in [2, head_dim = {self.head_dim}], got {rotary_dim!r}")
        if rotary_dim % 2:
            raise ValueError(f"rotary_dim must be even (channels turn in pairs), got {rotary_dim}")
        self.kind, self.rotary_dim, self.rope_parameters = kind, rotary_dim, dict(rope_parameters)
        self.style = check_choice("style", style, ROTARY_STYLES)
        self.channels = check_choice("channels", channels, ("first", "last"))
        self.mrope_section = None if mrope_section is None else list(mrope_section)
        self.axes = None if mrope_section is None else len(self.mrope_section)
        if dynamic_state is not None and not isinstance(dynamic_state, DynamicRopeState):
            raise TypeError(f"dynamic_state must be None or a DynamicRopeState, got {type(dynamic_state).__name__}")
        self.dynamic_state = dynamic_state
        self.cos_sin(torch.zeros(self.axes or 1, 1, 1) if self.axes else torch.zeros(1, 1))  # bad parameters raise

    @property
    def layout(self) -> str:
        """``"half"`` or ``"interleaved"``, the pairing of the channels as the weights store them."""
        return "half" if self.style == "half" else "interleaved"

    @property
    def base(self) -> float:
        """RoPE's base (``rope_theta``)."""
        return float(self.rope_parameters["rope_theta"])

    @property
    def scaling(self) -> dict | None:
        """The long-context scaling (``rope_parameters`` less the base), or None for the default RoPE."""
        if self.rope_parameters.get("rope_type", "default") == "default":
            return None
        return {key: value for key, value in self.rope_parameters.items() if key != "rope_theta"}

    def cos_sin(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """float32 cos and sin ``[b, s, rotary_dim]`` for positions ``[b, s]`` (``[3, b, s]`` for M-RoPE)."""
        if self.mrope_section is not None:
            scaling = self.rope_parameters
            return mrope_cos_sin(
                positions, self.rotary_dim, self.mrope_section, scaling=scaling, angle_dtype=torch.float32
            )
        layout = "half" if self.style in ("half", "deinterleave") else "interleaved"
        # with a state: one call of transformers' rotary module (posenc.rope.state)
        table = rope_cos_sin if self.dynamic_state is None else self.dynamic_state.cos_sin
        return table(positions, self.rotary_dim, scaling=self.rope_parameters, layout=layout, angle_dtype=torch.float32)

    def _turn(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        r, d = self.rotary_dim, x.shape[-1]
        cut = r if self.channels == "first" else d - r
        part = x[..., :cut] if self.channels == "first" else x[..., cut:]
        if self.style == "complex":  # (x0 + i x1) * (cos + i sin) in float32
            out = apply_rotation(part.float(), cos, sin, "interleaved").to(x.dtype)
        else:
            if self.style == "deinterleave":  # pairs (2i, 2i + 1) -> (i, i + r/2)
                part = torch.cat((part[..., 0::2], part[..., 1::2]), dim=-1)  # [..., r]
            layout = "interleaved" if self.style == "interleaved" else "half"
            out = apply_rotation(part, cos.to(x.dtype), sin.to(x.dtype), layout)
        rest = x[..., cut:] if self.channels == "first" else x[..., :cut]
        return torch.cat((out, rest) if self.channels == "first" else (rest, out), dim=-1)  # [..., d]

    def _encode(self, q, k, positions):
        cos, sin = self.cos_sin(positions)  # [b, s_k, r] each
        cos, sin = cos[:, None], sin[:, None]  # [b, 1, s_k, r]
        s_q = q.shape[2]
        return self._turn(q, cos[..., -s_q:, :], sin[..., -s_q:, :]), self._turn(k, cos, sin)

    def frequencies(self, seq_len: int | None = None) -> torch.Tensor:
        """The layer's ``rotary_dim / 2`` frequencies after its scaling (radians per position, float64),
        at sequence length ``seq_len`` for the scalings that depend on it (dynamic NTK, LongRoPE)."""
        inv_freq, _ = rope_inv_freq(self.rotary_dim, scaling=self.rope_parameters, seq_len=seq_len)
        return inv_freq

    def row(self) -> dict:
        row = super().row()
        row.update(
            scheme="mrope" if self.mrope_section is not None else self.kind,
            theta=float(self.rope_parameters["rope_theta"]),
            scaling=scaling_label(self.rope_parameters),
            rotary=self.rotary_dim,
            layout=self.layout,
        )
        return row
