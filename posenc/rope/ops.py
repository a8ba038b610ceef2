"""The two elementary operations of RoPE: cos and sin from the angles, and the rotation by them.

:func:`cos_sin_from_inv_freq` is the one place where RoPE's angles are formed.
The rotation helpers are what :func:`posenc.apply_rope` and
:class:`posenc.RotaryEmbedding` run after checking their arguments; they trust
them.

**Partial rotary.** Some models rotate only the first ``r = rotary_dim``
channels of each head and pass the other ``d - r`` through unchanged: GPT-NeoX
(``rotary_pct``; ``partial_rotary_factor`` in ``transformers``), GPT-J
(``rotary_dim``), Phi. The width of the cos/sin tables decides, as in
``transformers``' ``apply_rotary_pos_emb`` of GPT-NeoX and Phi,
rotary-embedding-torch's ``apply_rotary_emb`` and flash-attention's
``apply_rotary_emb``: with tables ``[..., r]`` and ``x`` ``[..., d]``::

    out[..., :r] = RoPE(x[..., :r])    (full RoPE with head_dim = r)
    out[..., r:] = x[..., r:]

so the pairs lie within the first ``r`` channels: ``(i, i + r/2)`` for
``"half"``, ``(2i, 2i + 1)`` for ``"interleaved"``.
"""

from __future__ import annotations

import torch

from .._checks import check_choice, check_real
from ..layout import ROPE_LAYOUTS


def cos_sin_from_inv_freq(
    positions: torch.Tensor, inv_freq: torch.Tensor, *, layout: str = "half", attention_factor: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the angles ``position * inv_freq_i``, each angle on both channels of its pair.

    The one place where RoPE's angles are formed: :func:`posenc.rope_cos_sin`, the
    module's cache and the benchmark's float64 reference all call it. The angles
    are formed in ``inv_freq``'s dtype (float64 for exact angles, float32 to
    reproduce the usual computation), and cos and sin are multiplied by the
    attention factor (YaRN's, 1 otherwise).

    Args:
        positions: Integer or float positions of any shape.
        inv_freq: ``[head_dim / 2]`` frequencies, from :func:`posenc.rope_inv_freq`.
        layout: ``"half"`` (pair ``i`` at channels ``i``, ``i + d/2``) or
            ``"interleaved"`` (at ``2i``, ``2i + 1``).
        attention_factor: Multiplies cos and sin.

    Returns:
        ``(cos, sin)``, each ``[*positions.shape, head_dim]`` in ``inv_freq``'s dtype and device.
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_real("positions", positions)
    if inv_freq.dim() != 1 or not inv_freq.is_floating_point():
        raise ValueError(
            f"inv_freq must be a 1-D float tensor [head_dim / 2], got {inv_freq.dtype} {tuple(inv_freq.shape)}"
        )
    angles = positions.to(inv_freq.device, inv_freq.dtype).unsqueeze(-1) * inv_freq
    cos, sin = torch.cos(angles), torch.sin(angles)  # [*, d/2] each
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    if layout == "half":
        return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)  # [*, d]
    return cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)  # [*, d]


def _rotate_pairs(x: torch.Tensor, layout: str) -> torch.Tensor:
    """Each pair ``(a, b)`` turned by 90 degrees to ``(-b, a)``, in the given layout."""
    if layout == "half":
        first, second = x.chunk(2, dim=-1)  # 2 x [..., d/2]
        return torch.cat((-second, first), dim=-1)  # [..., d]
    pairs = x.unflatten(-1, (-1, 2))  # [..., d] -> [..., d/2, 2]
    turned = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1)  # [..., d/2, 2]
    return turned.flatten(-2)  # [..., d]


def rotary_part(x: torch.Tensor, rotary_dim: int) -> torch.Tensor:
    """The first ``rotary_dim`` channels of ``x``, the ones RoPE rotates: ``x`` itself or a view ``[..., r]``."""
    return x if rotary_dim == x.shape[-1] else x[..., :rotary_dim]


def _rotated_part(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """RoPE of the first ``r = cos.shape[-1]`` channels of ``x``: ``[..., r]`` in ``x``'s dtype."""
    part = rotary_part(x, cos.shape[-1])  # [..., r]
    # x cos + rotate(x) sin, formed in the promoted dtype of x and cos
    out = part * cos + _rotate_pairs(part, layout) * sin
    return out if out.dtype == x.dtype else out.to(x.dtype)


def join_rotated(x: torch.Tensor, rotated: torch.Tensor, inplace: bool) -> torch.Tensor:
    """``x`` with its first ``r = rotated.shape[-1]`` channels replaced: written into ``x``, or a new tensor."""
    rotary_dim = rotated.shape[-1]
    if inplace:
        rotary_part(x, rotary_dim).copy_(rotated)  # the pass-through channels stay where they are
        return x
    if rotary_dim == x.shape[-1]:
        return rotated
    return torch.cat((rotated, x[..., rotary_dim:]), dim=-1)  # [..., r] + [..., d - r] -> [..., d]


def apply_rotation(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inplace: bool = False
) -> torch.Tensor:
    """The rotation of :func:`posenc.apply_rope` in torch operations, for arguments already checked.

    The first ``cos.shape[-1]`` channels of ``x`` are rotated, the rest kept;
    ``inplace`` writes the result into ``x`` and returns ``x``.
    """
    return join_rotated(x, _rotated_part(x, cos, sin, layout), inplace)
