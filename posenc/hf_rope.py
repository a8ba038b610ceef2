"""The rotary attention layer that :func:`posenc.from_hf_config` builds for RoPE models.

One :class:`RopeLayer` stands for one decoder layer's self-attention as far as
positions go: which RoPE it applies to queries and keys (base ``theta``, long-context
scaling, how many channels turn, which pairing) and the softmax scale that multiplies
the logits. Given the queries and keys after their projections (and after any q/k
norm), :meth:`RopeLayer.scores` returns the logits before masking and softmax, as the
``transformers`` layer computes them::

    scores = (RoPE(q) @ RoPE(k)^T) * softmax_scale,   k's heads repeated to q's (GQA)

Shapes: ``q`` is ``[b, h_q, s_q, d]``, ``k`` is ``[b, h_kv, s_k, d]`` with ``h_q`` a
multiple of ``h_kv`` and ``s_q <= s_k``; ``position_ids`` ``[b, s_k]`` (or ``[s_k]``,
shared by the batch) are the positions of the keys, and the queries are the last
``s_q`` of them (decoding with a cache). M-RoPE layers (Qwen2-VL) take
``position_ids`` ``[3, b, s_k]`` (temporal, height, width) or ``[b, s_k]`` for text,
which ``transformers`` expands to three equal rows.

Angles are formed in float64 here and in float32 by ``transformers``; the two agree
to the rounding of float32 angles, about ``position * 6e-8`` radians.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from ._checks import as_positions, check_choice, check_float_tensor, check_positive_int, check_positive_number
from .layout import ROPE_LAYOUTS
from .rope_nd import mrope_cos_sin
from .rotary import apply_rope, rope_cos_sin, rope_inv_freq


def check_rope_inputs(q, k, position_ids, head_dim: int, *, axes: int | None = None) -> torch.Tensor:
    """Check ``q [b, h_q, s_q, d]``, ``k [b, h_kv, s_k, d]`` and the keys' positions; return them ``[b|1, s_k]``.

    With ``axes`` (M-RoPE), ``position_ids`` may also be ``[axes, b, s_k]``; the
    result is then ``[axes, b|1, s_k]``.

    Raises:
        ValueError: Naming the argument, its shape and the expected one.
    """
    for name, t in (("q", q), ("k", k)):
        check_float_tensor(name, t)
        if t.dim() != 4 or t.shape[-1] != head_dim:
            raise ValueError(f"{name} must have shape [batch, heads, seq_len, {head_dim}], got {tuple(t.shape)}")
    if k.shape[0] != q.shape[0] or q.shape[1] % k.shape[1]:
        raise ValueError(
            f"k must have q's batch and a number of heads dividing q's (grouped-query attention); "
            f"got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if q.shape[2] > k.shape[2]:
        raise ValueError(f"q has {q.shape[2]} positions, more than k's {k.shape[2]}: the queries are the last keys")
    positions = as_positions(position_ids, "position_ids").to(q.device)
    s_k, batch = k.shape[2], q.shape[0]
    if positions.dim() == 1:
        positions = positions.unsqueeze(0)  # [s_k] -> [1, s_k]
    if axes is not None and positions.dim() == 2:
        positions = positions.expand(axes, -1, -1)  # [b, s_k] -> [axes, b, s_k], as transformers does for text
    lead = 1 if axes is not None else 0
    if positions.dim() != lead + 2 or positions.shape[-1] != s_k or positions.shape[-2] not in (1, batch):
        shape = "[axes, batch, s_k] or [batch, s_k]" if axes else "[batch, s_k] or [s_k]"
        raise ValueError(
            f"position_ids must have shape {shape} with s_k = k.shape[2] = {s_k} and batch {batch} or 1 "
            f"(the keys' positions), got {tuple(positions.shape)}"
        )
    if lead and positions.shape[0] != axes:
        raise ValueError(f"position_ids must have {axes} rows for M-RoPE (dim 0), got {tuple(positions.shape)}")
    return positions


def scaling_label(scaling: Mapping | None) -> str | None:
    """A short name of a ``rope_parameters`` scaling for tables: None, ``"linear x8"``, ``"longrope x32"``."""
    if not scaling or scaling.get("rope_type", "default") == "default":
        return None
    factor = scaling.get("factor")
    return scaling["rope_type"] if factor is None else f"{scaling['rope_type']} x{float(factor):g}"


class RopeLayer:
    """The positions of one rotary self-attention layer: RoPE of q and k, then the scaled logits.

    Su et al., "RoFormer", 2021, as a Hugging Face model configures it: see the module docstring.

    Args:
        head_dim: Channels per head ``d``.
        rotary_dim: Channels that turn (the first ``rotary_dim`` of each head), even, ``<= head_dim``.
        base: RoPE's ``theta`` (``rope_theta``), > 1.
        scaling: ``None`` or a ``rope_parameters``-style dict (:func:`posenc.rope_inv_freq`).
        layout: ``"half"`` (Llama, GPT-NeoX in transformers) or ``"interleaved"`` (GPT-J).
        softmax_scale: Multiplies ``q . k`` (``head_dim ** -0.5`` for most models).
        mrope_section: For M-RoPE (Qwen2-VL): pairs per axis, e.g. ``[16, 24, 24]``.

    Raises:
        ValueError: If a dimension, the base, the scale or the scaling is invalid.
    """

    kind = "rope"

    def __init__(
        self,
        *,
        head_dim: int,
        rotary_dim: int,
        base: float,
        scaling: Mapping | None = None,
        layout: str = "half",
        softmax_scale: float,
        mrope_section: Sequence[int] | None = None,
    ) -> None:
        self.head_dim = check_positive_int("head_dim", head_dim)
        if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int) or not 2 <= rotary_dim <= head_dim:
            raise ValueError(f"rotary_dim must be an even int in [2, head_dim = {head_dim}], got {rotary_dim!r}")
        if rotary_dim % 2:
            raise ValueError(f"rotary_dim must be even (channels turn in pairs), got {rotary_dim}")
        self.rotary_dim = rotary_dim
        self.layout = check_choice("layout", layout, ROPE_LAYOUTS)
        self.softmax_scale = check_positive_number("softmax_scale", softmax_scale)
        self.scaling = dict(scaling) if scaling else None
        self.base = float(base)
        rope_inv_freq(rotary_dim, base=self.base, scaling=self.scaling)  # checks base and scaling now
        self.mrope_section = list(mrope_section) if mrope_section is not None else None
        if self.mrope_section is not None:  # checks the sections now
            mrope_cos_sin(torch.zeros(len(self.mrope_section), 1, 1), rotary_dim, self.mrope_section, base=self.base)

    def __repr__(self) -> str:
        return f"RopeLayer({', '.join(f'{key}={value!r}' for key, value in self.row().items())})"

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype = torch.float32):
        """cos and sin ``[b, s, rotary_dim]`` for positions ``[b, s]`` (``[3, b, s]`` for M-RoPE)."""
        if self.mrope_section is not None:
            return mrope_cos_sin(
                positions, self.rotary_dim, self.mrope_section, base=self.base, scaling=self.scaling, dtype=dtype
            )
        return rope_cos_sin(
            positions, self.rotary_dim, base=self.base, scaling=self.scaling, layout=self.layout, dtype=dtype
        )

    def apply(self, q: torch.Tensor, k: torch.Tensor, position_ids) -> tuple[torch.Tensor, torch.Tensor]:
        """RoPE of ``q [b, h_q, s_q, d]`` and ``k [b, h_kv, s_k, d]``; ``position_ids`` are the keys'.

        Returns:
            ``(q, k)`` rotated, same shapes and dtypes; channels past ``rotary_dim`` unchanged.

        Raises:
            ValueError: If the shapes do not fit (see :func:`check_rope_inputs`).
        """
        axes = len(self.mrope_section) if self.mrope_section is not None else None
        positions = check_rope_inputs(q, k, position_ids, self.head_dim, axes=axes)
        # length-dependent scalings (dynamic, longrope) see the largest key position, as transformers does
        cos, sin = self.cos_sin(positions, dtype=q.dtype)  # [b, s_k, r]
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [b, s_k, r] -> [b, 1, s_k, r]
        s_q = q.shape[2]
        q = apply_rope(q, cos[:, :, -s_q:], sin[:, :, -s_q:], layout=self.layout)
        return q, apply_rope(k, cos, sin, layout=self.layout)

    def scores(self, q: torch.Tensor, k: torch.Tensor, position_ids) -> torch.Tensor:
        """Logits before mask and softmax, ``[b, h_q, s_q, s_k]``: ``(RoPE(q) @ RoPE(k)^T) * softmax_scale``.

        Head ``j`` of ``q`` reads head ``j // (h_q / h_kv)`` of ``k``, as ``transformers``' ``repeat_kv``.
        """
        q, k = self.apply(q, k, position_ids)
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # [b, h_kv, s_k, d] -> [b, h_q, s_k, d]
        return torch.matmul(q, k.transpose(-1, -2)) * self.softmax_scale

    def row(self) -> dict:
        """This layer's line of :func:`posenc.describe` (without ``"layer"``)."""
        return {
            "scheme": "mrope" if self.mrope_section is not None else "rope",
            "theta": self.base,
            "scaling": scaling_label(self.scaling),
            "rotary": self.rotary_dim,
            "layout": self.layout,
            "nope_temperature": None,
            "softmax_scale": self.softmax_scale,
        }
