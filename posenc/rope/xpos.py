"""xPos: RoPE with an exponential decay per channel pair.

Sun et al., "A Length-Extrapolatable Transformer", 2022 (ACL 2023), section 3.
RoPE's rotation is kept, and pair ``i`` of the query at position ``n`` is also
multiplied by ``zeta_i ** (n / B)``, of the key at ``m`` by ``zeta_i ** (-m / B)``,
with ``zeta_i = (2i / d + gamma) / (1 + gamma)``, ``gamma = 0.4`` and ``B = 512``
(the scale base). Every ``zeta_i`` is below 1, so the score of pair ``i`` is
multiplied by ``zeta_i ** ((n - m) / B)``: a function of the distance alone, as RoPE
is, that shrinks as a key lies further behind the query. Fast pairs (small ``i``,
small ``zeta_i``) decay fastest, which the paper finds steadies the attention
beyond the trained length.

Implementations subtract a centre ``c`` from the positions before the powers
(``(n - c) / B``, ``c = seq_len // 2`` in rotary-embedding-torch and torchscale), so
that neither ``q`` nor ``k`` overflows; the centre cancels in every score.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._checks import (
    as_positions,
    check_base,
    check_choice,
    check_even_dim,
    check_float_dtype,
    check_float_tensor,
    check_positive_number,
    check_qk,
    check_real,
)
from ..layout import ROPE_LAYOUTS
from .rotary import apply_rope, rope_cos_sin

#: The paper's defaults: ``gamma`` in ``zeta_i`` and the scale base ``B``.
XPOS_GAMMA = 0.4
XPOS_SCALE_BASE = 512.0


def xpos_zeta(head_dim: int, *, gamma: float = XPOS_GAMMA, dtype: torch.dtype = torch.float64, device=None):
    """The per-pair decay bases ``zeta_i = (2i / d + gamma) / (1 + gamma)``, ``i = 0 .. d/2 - 1``.

    Sun et al. 2022, section 3.2. All lie in ``[gamma / (1 + gamma), 1)``.

    Args:
        head_dim: Rotary dimension ``d``, even.
        gamma: Offset that keeps the fastest pair's base away from 0, > 0.
        dtype: Floating dtype of the result.
        device: Device of the result.

    Returns:
        ``[head_dim / 2]`` tensor.

    Raises:
        ValueError: If ``head_dim`` is odd or not positive, or ``gamma`` is not > 0.
    """
    check_even_dim("head_dim", head_dim)
    gamma = check_positive_number("gamma", gamma)
    check_float_dtype("dtype", dtype)
    pairs = torch.arange(head_dim // 2, dtype=torch.float64, device=device)  # [d/2]
    # zeta_i = (2i/d + gamma) / (1 + gamma)
    return ((2 * pairs / head_dim + gamma) / (1 + gamma)).to(dtype)


def _check_scale_range(power: torch.Tensor, log_zeta: torch.Tensor, dtype: torch.dtype, center: float) -> None:
    """Raise unless every scale ``exp(power * ln zeta)`` and its inverse are normal numbers of ``dtype``."""
    if not power.numel():
        return
    limit = -math.log(torch.finfo(dtype).tiny)  # exp(-limit) is the smallest normal number
    if torch.compiler.is_compiling():  # a branch on values breaks the graph: assert instead
        reach = power.abs().max() * -log_zeta.min()
        torch._assert_async(reach <= limit, "xPos positions too far from center: scales leave the dtype's range")
        return
    reach = power.abs().max().item() * -log_zeta.min().item()
    if not math.isfinite(reach):
        raise ValueError("positions must be finite: a NaN or infinite position has no xPos scale")
    if reach > limit:
        far = power.abs().max().item()
        raise ValueError(
            f"positions must lie within {limit / -log_zeta.min().item():.4g} * scale_base of center = {center:g} "
            f"for xPos scales in {dtype}: the farthest is {far:.4g} * scale_base away, and its scale or its "
            f"inverse would leave {dtype}'s range (scores 0 * inf); pass a center near the middle of the positions"
        )


def xpos_scales(
    positions,
    head_dim: int,
    *,
    scale_base: float = XPOS_SCALE_BASE,
    gamma: float = XPOS_GAMMA,
    center: float = 0.0,
    layout: str = "half",
    dtype: torch.dtype = torch.float32,
    range_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The query scales ``zeta_i ** ((n - center) / scale_base)``, per channel; keys take their inverse.

    Formed in float64 as ``exp((n - center) / scale_base * ln zeta_i)``. In float32
    they stay normal while ``|n - center| / scale_base * ln(1 / zeta_0)`` is below
    about 87 (``|n - center|`` up to about 35,000 with the defaults).

    Args:
        positions: Integer or float positions of any shape (tensor or numbers).
        head_dim: Rotary dimension, even.
        scale_base: ``B``, the number of positions over which the decay acts, > 0.
        gamma: See :func:`xpos_zeta`, > 0.
        center: Subtracted from every position; it cancels in the scores.
        layout: ``"half"`` or ``"interleaved"``, as the rotation's.
        dtype: Floating dtype of the result.
        range_dtype: The dtype whose normal range every scale and its inverse must
            stay in (default ``dtype``): ``torch.float16`` where the scales will
            multiply float16 queries and keys.

    Returns:
        ``[*positions.shape, head_dim]``, each pair's scale on both its channels.

    Raises:
        ValueError: If ``head_dim`` is odd, ``scale_base`` or ``gamma`` is not
            > 0, ``center`` is not a finite number, the layout is unknown, the
            positions are not real numbers, or a scale or its inverse would leave
            ``range_dtype``'s normal range (a position too far from ``center``):
            the scores would be 0 times infinity.
    """
    scale_base = check_positive_number("scale_base", scale_base)
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_float_dtype("dtype", dtype)
    range_dtype = dtype if range_dtype is None else check_float_dtype("range_dtype", range_dtype)
    if isinstance(center, bool) or not isinstance(center, (int, float)) or not math.isfinite(center):
        raise ValueError(f"center must be a finite number, got {center!r}")
    positions = check_real("positions", as_positions(positions))
    log_zeta = xpos_zeta(head_dim, gamma=gamma, device=positions.device).log()  # [d/2]
    # zeta_i ** ((n - c) / B) = exp((n - c) / B * ln zeta_i)
    power = (positions.to(torch.float64) - center) / scale_base
    _check_scale_range(power, log_zeta, range_dtype, center)
    scales = torch.exp(power.unsqueeze(-1) * log_zeta)  # [*, d/2]
    if layout == "half":
        scales = torch.cat((scales, scales), dim=-1)  # [*, d/2] -> [*, d]: pair i at i and i + d/2
    else:
        scales = scales.repeat_interleave(2, dim=-1)  # [*, d/2] -> [*, d]: pair i at 2i and 2i + 1
    return scales.to(dtype)


def apply_xpos(
    q: torch.Tensor,
    k: torch.Tensor,
    positions=None,
    offset: int = 0,
    *,
    base: float = 10000.0,
    scale_base: float = XPOS_SCALE_BASE,
    gamma: float = XPOS_GAMMA,
    center: float | None = None,
    layout: str = "half",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate ``q`` and ``k`` as RoPE does, then scale ``q`` by the xPos scales and ``k`` by their inverse.

    Sun et al. 2022: ``q_n -> RoPE(q_n) * zeta ** ((n - c) / B)`` and
    ``k_m -> RoPE(k_m) * zeta ** (-(m - c) / B)``, so that pair ``i`` of every score
    carries ``zeta_i ** ((n - m) / B)``. Equal to rotary-embedding-torch's
    ``RotaryEmbedding(d, use_xpos=True).rotate_queries_and_keys(q, k)`` with
    ``layout="interleaved"`` and the default centre.

    Args:
        q: Queries ``[..., s, head_dim]``, for example ``[b, h, s, d]``.
        k: Keys, the same ``s`` and ``head_dim`` as ``q``.
        positions: Optional positions ``[s]`` or ``[b, s]``; by default
            ``offset .. offset + s - 1``.
        offset: First position when ``positions`` is None, >= 0.
        base: RoPE's frequency base, > 1.
        scale_base: ``B``, > 0.
        gamma: See :func:`xpos_zeta`, > 0.
        center: Subtracted from the positions before the powers; by default the
            middle, ``floor((min + max + 1) / 2)`` of the positions (``s // 2`` for
            ``0 .. s - 1``, as in rotary-embedding-torch). It cancels in scores
            between queries and keys scaled with the same centre: pass a fixed one
            when keys are cached across calls.
        layout: ``"half"`` or ``"interleaved"``.

    Returns:
        ``(q, k)`` with their shapes and dtypes (the products are formed in float32,
        or float64 for float64 inputs).

    Raises:
        ValueError: As :func:`xpos_scales` and :class:`posenc.RotaryEmbedding`'s
            forward: bad shapes, positions, offset, base, scale_base or gamma.
    """
    check_float_tensor("q", q)
    head_dim = check_even_dim("head_dim (q.shape[-1])", q.shape[-1] if q.dim() else 0)
    positions = check_qk(q, k, head_dim, positions=positions, offset=offset, inplace=False)
    if positions is None:
        positions = torch.arange(offset, offset + q.shape[-2], device=q.device)  # [s]
    elif positions.is_floating_point() and not bool(torch.isfinite(positions).all()):  # a sync, float positions only
        raise ValueError("positions must be finite: a NaN or infinite position has no xPos scale (nor a centre)")
    centred = positions
    if center is None and positions.numel():
        # the middle position, as a tensor (no host sync): s // 2 for 0 .. s - 1; in float64,
        # where int8 or uint8 positions cannot wrap and int32 ones near 2**31 cannot overflow
        wide = positions.to(torch.float64)
        middle = torch.floor((wide.amin() + wide.amax() + 1) / 2)
        centred, center = wide - middle, 0.0
    dtype = torch.float64 if torch.float64 in (q.dtype, k.dtype) else torch.float32
    cos, sin = rope_cos_sin(positions, head_dim, base=base, layout=layout, dtype=dtype)  # [s, d] or [b, s, d]
    narrow = torch.float16 if torch.float16 in (q.dtype, k.dtype) else dtype  # float16's range is the tightest
    scale = xpos_scales(
        centred, head_dim, scale_base=scale_base, gamma=gamma, center=center or 0.0, layout=layout, dtype=dtype,
        range_dtype=narrow,
    )  # fmt: skip
    if positions.dim() == 2 and q.dim() > 3:
        # [b, s, d] -> [b, 1, ..., 1, s, d]: one row per sequence, shared by every head
        shape = (cos.shape[0],) + (1,) * (q.dim() - 3) + cos.shape[1:]
        cos, sin, scale = cos.view(shape), sin.view(shape), scale.view(shape)
    # RoPE(q) * s = q * (cos s) + rotate(q) * (sin s); keys with 1 / s
    q_out = apply_rope(q, cos * scale, sin * scale, layout=layout, backend="torch")
    k_out = apply_rope(k, cos / scale, sin / scale, layout=layout, backend="torch")
    return q_out, k_out


class XPosRotaryEmbedding(nn.Module):
    """xPos (Sun et al. 2022): RoPE with a per-pair exponential decay in the scores.

    Holds the configuration only; cos, sin and the scales are computed for the
    positions of each call by :func:`apply_xpos`. Meant for causal attention: a key
    ``r`` positions behind its query contributes ``zeta_i ** (r / B) < 1`` per pair,
    while a key ahead of it would be amplified.

    Args:
        head_dim: Rotary dimension per head, even.
        base: RoPE's frequency base, > 1.
        scale_base: ``B``, > 0 (512 in the paper).
        gamma: See :func:`xpos_zeta`, > 0 (0.4 in the paper).
        layout: ``"half"`` or ``"interleaved"`` (rotary-embedding-torch's and the
            paper's code).
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        scale_base: float = XPOS_SCALE_BASE,
        gamma: float = XPOS_GAMMA,
        layout: str = "half",
    ) -> None:
        super().__init__()
        self.head_dim = check_even_dim("head_dim", head_dim)
        self.base = check_base("base", base)
        self.gamma = check_positive_number("gamma", gamma)
        self.scale_base = check_positive_number("scale_base", scale_base)
        self.layout = check_choice("layout", layout, ROPE_LAYOUTS)

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, base={self.base:g}, scale_base={self.scale_base:g}, "
            f"gamma={self.gamma:g}, layout={self.layout!r}"
        )

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, positions=None, offset: int = 0, *, center: float | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate and scale ``q`` and ``k``; arguments and result as :func:`apply_xpos`.

        Raises:
            ValueError: If the last dim of ``q`` or ``k`` is not ``head_dim``, or as
                :func:`apply_xpos`.
        """
        check_qk(q, k, self.head_dim, positions=positions, offset=offset, inplace=False)
        return apply_xpos(
            q,
            k,
            positions,
            offset,
            base=self.base,
            scale_base=self.scale_base,
            gamma=self.gamma,
            center=center,
            layout=self.layout,
        )
