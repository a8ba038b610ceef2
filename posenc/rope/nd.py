"""RoPE beyond one dimension: axial RoPE for image patches, and Qwen2-VL's multimodal sections.

Both give every token one position per axis (time, row, column) and let each
channel pair turn with one axis only, so a score depends on the positions only
through the per-axis differences ``(Δt, Δrow, Δcol)``.

* **Axial RoPE** (Heo et al., "Rotary Position Embedding for Vision
  Transformer", 2024, "RoPE-Axial"; the ``get_axial_freqs`` of
  rotary-embedding-torch; Qwen2-VL's vision tower): one block of ``axis_dim``
  channels per axis, each block 1-D RoPE of dimension ``axis_dim`` driven by
  its axis; channels past ``num_axes * axis_dim`` are not rotated.
* **M-RoPE** (Wang et al., "Qwen2-VL", 2024, section 2.1): the ``d/2`` pairs of
  1-D RoPE, with its frequencies, are divided into sections (``mrope_section``,
  e.g. ``[16, 24, 24]`` for ``d = 128``); a pair of section ``a`` turns with
  axis ``a``. Text tokens have equal positions on all axes: then it is 1-D RoPE.

The tables rotate with :func:`posenc.apply_rope`: axial ones default to
``layout="interleaved"`` (rotary-embedding-torch's pairs), M-RoPE ones to
``"half"`` (``transformers``').
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from .._checks import (
    angle_device,
    as_positions,
    check_angle_dtype,
    check_base,
    check_choice,
    check_even_dim,
    check_float_dtype,
    check_nonnegative_int,
    check_number,
    check_positive_int,
    check_real,
    check_table_size,
)
from ..layout import ROPE_LAYOUTS, cos_sin_from_angles
from .rotary import apply_rope, rope_inv_freq
from .scaling import ROPE_SCALINGS

#: Frequency families of axial RoPE, rotary-embedding-torch's ``freqs_for``.
AXIAL_FREQS = ("lang", "pixel")


# --- Axial RoPE ---


def _grid_positions(shape, freqs_for: str, offsets, dtype: torch.dtype, device, *, width: int) -> torch.Tensor:
    """``[*shape, len(shape)]`` positions: ``0 .. n-1`` ("lang") or ``linspace(-1, 1, n)`` ("pixel") per axis."""
    if isinstance(shape, int) or not isinstance(shape, Sequence) or not shape:
        raise ValueError(f"shape must be a non-empty tuple of axis lengths such as (H, W), got {shape!r}")
    shape = tuple(check_positive_int(f"shape[{a}]", n) for a, n in enumerate(shape))
    check_table_size("grid", shape, math.prod(shape) * max(width, len(shape)))  # the tables are [*grid, width]
    offsets = [0.0] * len(shape) if offsets is None else as_positions(offsets, "offsets").reshape(-1).tolist()
    if len(offsets) != len(shape):
        raise ValueError(f"offsets must have one number per axis ({len(shape)}), got {len(offsets)}")
    if not all(math.isfinite(off) for off in offsets):
        raise ValueError(f"offsets must be finite numbers, got {offsets}")
    kw = {"dtype": dtype, "device": device}
    line = (lambda n: torch.linspace(-1.0, 1.0, n, **kw)) if freqs_for == "pixel" else (lambda n: torch.arange(n, **kw))
    axes = [line(n) + off for n, off in zip(shape, offsets, strict=True)]  # len(shape) x [n_a]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)  # [*shape, len(shape)]


def axial_rope_angles(
    positions,
    axis_dim: int,
    *,
    freqs_for: str = "lang",
    base: float = 10000.0,
    max_freq: float = 10.0,
    angle_dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """The rotation angle of every channel pair under axial RoPE: one block of pairs per axis.

    Pair ``j`` of block ``a`` (pair ``a * axis_dim / 2 + j`` overall) turns by
    ``positions[..., a] * theta_j``: rotary-embedding-torch's ``get_axial_freqs``,
    one angle per pair instead of one per channel.

    Args:
        positions: ``[..., num_axes]`` positions (row, column, ...).
        axis_dim: Rotary channels per axis, even.
        freqs_for: ``"lang"`` (``theta_j = base ** (-2j / axis_dim)``) or
            ``"pixel"`` (``theta_j = pi * linspace(1, max_freq / 2, axis_dim / 2)``).
        base: Frequency base for ``"lang"``, > 1.
        max_freq: For ``"pixel"``, >= 2: twice the highest frequency in units of pi.
        angle_dtype: ``torch.float64`` or ``torch.float32``: dtype of the angles.

    Returns:
        ``[..., num_axes * axis_dim / 2]`` angles in ``angle_dtype``.

    Raises:
        ValueError: If ``axis_dim`` is odd, ``freqs_for`` unknown, ``base`` not
            > 1, ``max_freq`` not >= 2, or ``positions`` not real with at least one dim.
    """
    check_even_dim("axis_dim", axis_dim)
    check_choice("freqs_for", freqs_for, AXIAL_FREQS)
    check_base("base", base)
    check_number("max_freq", max_freq, minimum=2.0, inclusive=True)
    check_angle_dtype(angle_dtype)
    positions = check_real("positions", as_positions(positions))
    if positions.dim() < 1:
        raise ValueError(f"positions must have shape [..., num_axes], got {tuple(positions.shape)}")
    kw = {"dtype": angle_dtype, "device": angle_device(positions.device, angle_dtype)}  # CPU for float64 on MPS
    if freqs_for == "lang":
        inv_freq = rope_inv_freq(axis_dim, base=base, **kw)[0]  # [axis_dim/2]
    else:  # theta_j = pi * linspace(1, max_freq / 2, axis_dim / 2)_j
        inv_freq = math.pi * torch.linspace(1.0, max_freq / 2, axis_dim // 2, **kw)  # [axis_dim/2]
    angles = positions.to(**kw).unsqueeze(-1) * inv_freq  # [..., num_axes, axis_dim/2]
    return angles.flatten(-2)  # [..., num_axes, axis_dim/2] -> [..., num_axes * axis_dim/2]


def _axis_dim(head_dim: int, num_axes: int, axis_dim: int | None) -> int:
    """``axis_dim``, by default ``head_dim / num_axes``; it must be even and fit in ``head_dim``."""
    if axis_dim is None:
        if head_dim % (2 * num_axes):
            raise ValueError(
                f"head_dim={head_dim} does not split into {num_axes} even blocks; pass axis_dim "
                f"(e.g. {2 * (head_dim // (2 * num_axes))}, leaving the last channels unrotated)"
            )
        return head_dim // num_axes
    check_even_dim("axis_dim", axis_dim)
    if num_axes * axis_dim > head_dim:
        raise ValueError(
            f"axis_dim * num_axes must be <= head_dim ({head_dim}), got axis_dim={axis_dim} with {num_axes} axes"
        )
    return axis_dim


def axial_cos_sin(
    grid,
    head_dim: int,
    *,
    axis_dim: int | None = None,
    freqs_for: str = "lang",
    base: float = 10000.0,
    max_freq: float = 10.0,
    offsets: Sequence[float] | None = None,
    layout: str = "interleaved",
    dtype: torch.dtype = torch.float32,
    angle_dtype: torch.dtype = torch.float64,
    device=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of axial RoPE for every cell of a grid, ready for :func:`posenc.apply_rope`.

    Heo et al. 2024 ("RoPE-Axial"); rotary-embedding-torch's ``RotaryEmbedding(axis_dim,
    freqs_for=...).get_axial_freqs(*shape)``: with ``layout="interleaved"`` channels
    ``[a * axis_dim, (a + 1) * axis_dim)`` turn with axis ``a``. With ``"half"`` the same
    pairs sit at ``(i, i + d/2)``, as in Qwen2-VL's vision tower (``axis_dim = head_dim / 2``).

    Args:
        grid: Axis lengths ``(H, W)`` (or ``(T, H, W)``, ...), whose positions are
            ``0 .. n - 1`` along each axis (``"lang"``) or ``linspace(-1, 1, n)``
            (``"pixel"``), as rotary-embedding-torch's; or a tensor ``[..., num_axes]`` of positions.
        head_dim: Channels per head, even.
        axis_dim: Rotary channels per axis, even; by default ``head_dim / num_axes``.
            Channels past ``num_axes * axis_dim`` are left as they are.
        freqs_for: ``"lang"`` or ``"pixel"`` (see :func:`axial_rope_angles`).
        base: Frequency base for ``"lang"``, > 1.
        max_freq: Highest frequency for ``"pixel"``, >= 2.
        offsets: One number per axis added to its positions, when ``grid`` is a shape.
        layout: ``"interleaved"`` (default) or ``"half"``.
        dtype: Floating dtype of cos and sin.
        angle_dtype: ``torch.float64`` or ``torch.float32``: dtype of the angles.
        device: Device of the tables for a grid shape (a positions tensor keeps its own).

    Returns:
        ``(cos, sin)``, each ``[*grid, head_dim]`` (``[..., head_dim]`` for positions ``[..., num_axes]``).

    Raises:
        ValueError: If ``head_dim`` is odd, the axes do not fit in it, ``grid``
            is neither a shape nor a positions tensor, ``offsets`` comes with a
            positions tensor, or on any error of :func:`axial_rope_angles`.
    """
    check_even_dim("head_dim", head_dim)
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_float_dtype("dtype", dtype)
    if isinstance(grid, torch.Tensor):
        if offsets is not None or grid.dim() < 1:
            raise ValueError(f"grid as a tensor must be positions [..., num_axes], with offsets=None; got {grid.shape}")
        positions = grid
    else:
        positions = _grid_positions(grid, freqs_for, offsets, angle_dtype, device, width=head_dim)
    axis_dim = _axis_dim(head_dim, positions.shape[-1], axis_dim)
    angles = axial_rope_angles(
        positions, axis_dim, freqs_for=freqs_for, base=base, max_freq=max_freq, angle_dtype=angle_dtype
    )  # [..., num_axes * axis_dim/2]
    cos, sin = cos_sin_from_angles(angles, head_dim, layout)
    return cos.to(positions.device, dtype), sin.to(positions.device, dtype)


class AxialRotaryEmbedding(nn.Module):
    """Rotates queries and keys laid out on a grid by axial RoPE.

    Heo et al. 2024; rotary-embedding-torch's axial mode. Convention: ``q`` and
    ``k`` are ``[..., *grid, head_dim]`` with the ``num_axes`` grid dims just
    before the channels, e.g. ``[b, h, H, W, d]`` for images; flatten to
    ``[b, h, H * W, d]`` after the rotation for attention (raster order). The
    module holds the configuration and a small cache of cos/sin tables per grid
    shape (float32, or float64 for float64 inputs), never in ``state_dict``.

    Args:
        head_dim: Channels per head, even.
        num_axes: Grid dims, >= 1 (2 for images, 3 for video).
        axis_dim: Rotary channels per axis (see :func:`axial_cos_sin`).
        freqs_for: ``"lang"`` or ``"pixel"``; ``base`` (> 1) and ``max_freq`` (>= 2) as in
            :func:`axial_rope_angles`.
        layout: ``"interleaved"`` (default, as rotary-embedding-torch) or ``"half"``.
    """

    def __init__(
        self,
        head_dim: int,
        *,
        num_axes: int = 2,
        axis_dim: int | None = None,
        freqs_for: str = "lang",
        base: float = 10000.0,
        max_freq: float = 10.0,
        layout: str = "interleaved",
    ) -> None:
        super().__init__()
        self.head_dim = check_even_dim("head_dim", head_dim)
        self.num_axes = check_positive_int("num_axes", num_axes)
        self.layout = check_choice("layout", layout, ROPE_LAYOUTS)
        self.config = {
            "axis_dim": _axis_dim(head_dim, num_axes, axis_dim),
            "freqs_for": check_choice("freqs_for", freqs_for, AXIAL_FREQS),
            "base": check_base("base", base),
            "max_freq": check_number("max_freq", max_freq, minimum=2.0, inclusive=True),
            "layout": self.layout,
        }
        self._tables: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    def extra_repr(self) -> str:
        config = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"head_dim={self.head_dim}, num_axes={self.num_axes}, {config}"

    def _apply(self, fn, recurse=True):
        self._tables = {}  # computed, never loaded: rebuilt where the inputs live
        return super()._apply(fn, recurse)

    def cos_sin(self, grid: Sequence[int], *, offsets=None, device=None, dtype=torch.float32):
        """The ``(cos, sin)`` tables ``[*grid, head_dim]`` this module rotates with (cached per grid)."""
        offsets = None if offsets is None else tuple(as_positions(offsets, "offsets").reshape(-1).tolist())
        key = (tuple(grid), offsets, torch.device(device or "cpu"), dtype)  # hashable: [[0, 0]] is (0, 0)
        if key not in self._tables:
            if len(self._tables) >= 8:  # bounded: a model sees a handful of grid shapes
                self._tables.clear()
            self._tables[key] = axial_cos_sin(
                tuple(grid), self.head_dim, offsets=offsets, dtype=dtype, device=key[2], **self.config
            )
        return self._tables[key]

    def forward(self, q: torch.Tensor, k: torch.Tensor, *, offsets=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate ``q`` and ``k``, each ``[..., *grid, head_dim]`` with one grid.

        Args:
            q: Queries ``[..., *grid, head_dim]``.
            k: Keys, same grid and ``head_dim`` (leading dims may differ).
            offsets: Optional per-axis offsets of the positions.

        Returns:
            ``(q, k)`` rotated, shapes and dtypes unchanged.

        Raises:
            ValueError: If ``q`` or ``k`` is not ``[..., *grid, head_dim]`` or their grids differ.
        """
        n = self.num_axes
        for name, t in (("q", q), ("k", k)):
            if not isinstance(t, torch.Tensor) or t.dim() < n + 1 or t.shape[-1] != self.head_dim:
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"{name} must have shape [..., *grid ({n} dims), {self.head_dim}], got {got}")
        grid = tuple(q.shape[-n - 1 : -1])
        if tuple(k.shape[-n - 1 : -1]) != grid:
            raise ValueError(f"k has grid {tuple(k.shape[-n - 1 : -1])}, expected q's grid {grid}")
        table = torch.float64 if q.dtype == torch.float64 else torch.float32
        cos, sin = self.cos_sin(grid, offsets=offsets, device=q.device, dtype=table)
        return apply_rope(q, cos, sin, layout=self.layout), apply_rope(k, cos, sin, layout=self.layout)


# --- Multimodal RoPE (Qwen2-VL) ---


def mrope_pair_axes(mrope_section: Sequence[int], *, interleaved: bool = False) -> torch.Tensor:
    """Which axis drives each RoPE pair under M-RoPE.

    Qwen2-VL (``interleaved=False``): the first ``mrope_section[0]`` pairs take
    axis 0 (temporal), the next ``mrope_section[1]`` axis 1 (height), and so on.
    Qwen3-VL (``interleaved=True``): pair ``j`` takes axis ``a >= 1`` when
    ``j % n == a`` and ``j < n * mrope_section[a]`` (``n`` axes), axis 0 otherwise,
    so every axis gets high and low frequencies alike.

    Args:
        mrope_section: Pairs per axis, ints >= 0 (e.g. ``[16, 24, 24]``).
        interleaved: Qwen3-VL's order instead of contiguous sections.

    Returns:
        ``torch.long`` ``[sum(mrope_section)]``: the axis of pair ``i``.

    Raises:
        ValueError: If ``mrope_section`` is not a non-empty sequence of ints
            >= 0 with a positive sum, or (interleaved) the pattern cannot give
            each axis its count.
    """
    if isinstance(mrope_section, (str, bytes)) or not isinstance(mrope_section, Sequence) or not mrope_section:
        raise ValueError(f"mrope_section must be a non-empty list of ints such as [16, 24, 24], got {mrope_section!r}")
    sections = [check_nonnegative_int(f"mrope_section[{a}]", s) for a, s in enumerate(mrope_section)]
    total, n = sum(sections), len(sections)
    check_positive_int("sum(mrope_section)", total)
    if not interleaved:
        return torch.repeat_interleave(torch.arange(n), torch.tensor(sections))  # [total]
    pair = torch.arange(total)
    axes = torch.zeros(total, dtype=torch.long)
    for a in range(1, n):
        axes[(pair % n == a) & (pair < n * sections[a])] = a
    counts = torch.bincount(axes, minlength=n).tolist()
    if counts != sections:
        raise ValueError(f"mrope_section={sections} cannot be interleaved over {total} pairs (would give {counts})")
    return axes


def mrope_cos_sin(
    position_ids,
    head_dim: int,
    mrope_section: Sequence[int],
    *,
    base: float | None = None,
    scaling: Mapping | None = None,
    interleaved: bool = False,
    layout: str = "half",
    dtype: torch.dtype = torch.float32,
    angle_dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of multimodal RoPE (M-RoPE), ready for :func:`posenc.apply_rope`.

    Wang et al., "Qwen2-VL", 2024, section 2.1; ``transformers``' ``Qwen2VLRotaryEmbedding``
    (``Qwen3VLTextRotaryEmbedding`` with ``interleaved=True``). Pair ``i`` turns by
    ``position_ids[axis(i)] * theta_i``, ``theta_i`` from :func:`posenc.rope_inv_freq` and
    ``axis`` from :func:`mrope_pair_axes`. Text (equal positions on all axes) gets 1-D RoPE.

    Args:
        position_ids: ``[num_axes, ...]`` positions, e.g. ``[3, b, s]``
            (temporal, height, width); for text, ``pos.expand(3, -1, -1)``.
        head_dim: Rotary dimension, even, ``= 2 * sum(mrope_section)``.
        mrope_section: Pairs per axis, one entry per axis (e.g. ``[16, 24, 24]``).
        base: Frequency base (``rope_theta``), > 1; default 10000.
        scaling: ``None`` or a ``rope_parameters``-style dict (see :func:`posenc.rope_inv_freq`).
        interleaved: Qwen3-VL's interleaved sections.
        layout: ``"half"`` (default, as ``transformers``) or ``"interleaved"``.
        dtype: Floating dtype of cos and sin.
        angle_dtype: ``torch.float64`` or ``torch.float32``: dtype of the angles.

    Returns:
        ``(cos, sin)``, each ``[*position_ids.shape[1:], head_dim]``, e.g. ``[b, s, d]``.

    Raises:
        ValueError: If ``head_dim`` is odd, the sections do not sum to
            ``head_dim / 2``, ``position_ids`` is not ``[len(mrope_section), ...]``
            of real numbers, or on any error of :func:`posenc.rope_inv_freq`.
    """
    check_even_dim("head_dim", head_dim)
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_float_dtype("dtype", dtype)
    check_angle_dtype(angle_dtype)
    axes = mrope_pair_axes(mrope_section, interleaved=interleaved)  # [d/2]
    if axes.numel() != head_dim // 2:
        sections = f"{list(mrope_section)} (sum {axes.numel()})"
        raise ValueError(f"mrope_section must sum to head_dim / 2 = {head_dim // 2}, got {sections}")
    positions = check_real("position_ids", as_positions(position_ids, "position_ids"))
    n = len(mrope_section)
    if positions.dim() < 2 or positions.shape[0] != n:
        shape = tuple(positions.shape)
        raise ValueError(f"position_ids must have shape [{n}, ...] (one row per mrope_section entry), got {shape}")
    kind = scaling.get("rope_type", scaling.get("type")) if isinstance(scaling, Mapping) else None
    by_length = kind in ROPE_SCALINGS and ROPE_SCALINGS[kind].length_dependent and positions.numel()
    seq_len = positions.max().item() + 1 if by_length else None  # what dynamic NTK and LongRoPE read
    work = angle_device(positions.device, angle_dtype)  # float64 angles of MPS tensors on the CPU
    inv_freq, factor = rope_inv_freq(
        head_dim, base=base, scaling=scaling, seq_len=seq_len, dtype=angle_dtype, device=work
    )  # [d/2]
    # angle of pair i = position_ids[axis(i)] * theta_i
    every = positions.to(work, angle_dtype).unsqueeze(-1) * inv_freq  # [n, ..., d/2]
    index = axes.to(work).view(1, *[1] * (positions.dim() - 1), -1)  # [1, 1.., d/2]
    angles = torch.take_along_dim(every, index, dim=0).squeeze(0)  # [..., d/2]
    cos, sin = cos_sin_from_angles(angles, head_dim, layout, factor)
    return cos.to(positions.device, dtype), sin.to(positions.device, dtype)
