"""Launching the RoPE kernels: argument checks, grid and block sizes, autograd, entry points.

:func:`rope_qk_triton` runs the angles kernel on queries and keys;
:func:`apply_rope_triton` runs the table kernel on one tensor. Both are
reached through :mod:`posenc.triton_rope`, which loads this module on first
use. This module imports without Triton (``kernel`` is then None and the entry
points raise a ``ValueError`` saying so).
"""

from __future__ import annotations

import torch

from .._checks import check_choice, check_qk
from ..layout import ROPE_LAYOUTS
from . import TRITON_DTYPES, check_range, interpreter_mode

try:  # Triton is a Linux-only requirement; everything else in posenc works without it.
    import triton  # noqa: F401  (imported first so that only its absence is caught, not an error in .kernel)
except ImportError:  # pragma: no cover - exercised only where Triton is missing
    kernel = None
else:
    from . import kernel

# Largest tile of one program, heads x pairs, in elements of each half.
TILE = 2048
# Warps per program of the angles kernel: 64 threads share a tile of at most 2048 pairs.
# Chosen by scripts/triton_sweep.py on an H200 (bfloat16, 32 + 8 heads of 128): 2 warps moved
# 90-96% of the copy bandwidth at 16384 tokens, 4 warps 63-67%, 8 warps 50-67%.
NUM_WARPS = 2
# Warps per program of the table kernel: 4 moved 81-90% of the copy at 16384 tokens on the same
# H200, 2 warps 78-85%, 1 warp 71-79%.
TABLE_WARPS = 4
# The angles kernel: queries and keys of a token in two programs (True) or in one (False).
SPLIT_QK = False


# ---------------------------------------------------------------------------
# Launch
# ---------------------------------------------------------------------------


def _next_power_of_2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for ``n <= 1``)."""
    return 1 << max(n - 1, 0).bit_length()


def block_pairs(dim: int) -> int:
    """Pairs in one tile row: ``d/2`` rounded up to a power of two."""
    return _next_power_of_2(dim // 2)


def block_heads(heads: int, block_p: int, tile: int | None = None) -> int:
    """Heads in one tile: all of them if they fit in ``tile`` (:data:`TILE`) elements, else as many as do."""
    return max(1, min(_next_power_of_2(heads), (tile or TILE) // block_p))


def _position_strides(positions: torch.Tensor | None) -> tuple[int, int]:
    """Strides ``(batch, token)`` of positions ``[s]``, ``[1, s]`` or ``[b, s]``; 0 where they are shared."""
    if positions is None:
        return 0, 0  # the kernel computes offset + s instead
    if positions.dim() == 1:
        return 0, positions.stride(0)
    if positions.shape[0] == 1:
        return 0, positions.stride(1)
    return positions.stride(0), positions.stride(1)


def _launch_angles(
    q: torch.Tensor,
    qo: torch.Tensor,
    k: torch.Tensor,
    ko: torch.Tensor,
    freqs: tuple[torch.Tensor, torch.Tensor],
    *,
    positions: torch.Tensor | None,
    offset: int,
    scale: float,
    interleaved: bool,
    backward: bool = False,
    split_qk: bool | None = None,
    num_warps: int | None = None,
    tile: int | None = None,
) -> None:
    """``qo = R q`` and ``ko = R k`` for ``[b, h, s, d]`` tensors of any strides, angles from positions.

    ``freqs`` is ``(hi, lo)``, float32 ``[d/2]``. Positions are ``positions``
    (``[s]``, ``[1, s]`` or ``[b, s]``) or, if None, ``offset .. offset + s - 1``.
    ``qo`` may be ``q`` itself (in place); likewise ``ko``. ``split_qk``,
    ``num_warps`` and ``tile`` override :data:`SPLIT_QK`, :data:`NUM_WARPS`
    and :data:`TILE` (for ``scripts/triton_sweep.py``, which times the choices
    on a GPU).
    """
    batch, q_heads, seq_len, dim = q.shape
    if batch * seq_len == 0 or dim == 0:
        return
    block_p = block_pairs(dim)
    f_hi, f_lo = freqs
    split = SPLIT_QK if split_qk is None else split_qk
    # the arguments in the groups of the kernel's header comment
    pointers = (q, qo, k, ko, positions, f_hi, f_lo)
    sizes = (seq_len, q_heads, k.shape[1], dim // 2, offset, float(scale))
    strides = (*q.stride(), *qo.stride(), *k.stride(), *ko.stride(), *_position_strides(positions))
    kernel._rope_angles_kernel[(batch * seq_len, 2 if split else 1)](
        *pointers,
        *sizes,
        *strides,
        INTERLEAVED=interleaved,
        BACKWARD=backward,
        BLOCK_HQ=block_heads(q_heads, block_p, tile),
        BLOCK_HK=block_heads(k.shape[1], block_p, tile),
        BLOCK_P=block_p,
        SPLIT_QK=split,
        num_warps=num_warps or NUM_WARPS,
        enable_fp_fusion=True,
    )


def _launch_table(
    x: torch.Tensor,
    out: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    interleaved: bool,
    backward: bool = False,
) -> None:
    """``out = x * cos + rotate(x) * sin`` (its transpose for ``backward``) for ``[b, h, s, d]`` tensors.

    ``cos`` and ``sin`` have ``x``'s shape and one set of strides (expanded
    views, stride 0 on broadcast dims). ``out`` may be ``x`` itself.
    """
    batch, heads, seq_len, dim = x.shape
    if batch * seq_len == 0 or dim == 0:
        return
    block_p = block_pairs(dim)
    # fmt: off  (arguments grouped as the kernel's header comment groups them)
    kernel._rope_table_kernel[(batch * seq_len,)](
        x,
        out,
        cos,
        sin,
        seq_len,
        heads,
        dim // 2,
        *x.stride(),
        *out.stride(),
        *cos.stride(),
        INTERLEAVED=interleaved,
        BACKWARD=backward,
        BLOCK_H=block_heads(heads, block_p),
        BLOCK_P=block_p,
        num_warps=TABLE_WARPS,
        enable_fp_fusion=True,
    )
    # fmt: on


# ---------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------


class _FusedRope(torch.autograd.Function):
    """``(q, k) -> (R q, R k)`` with angles from positions; backward rotates by ``-theta``."""

    @staticmethod
    def forward(ctx, q, k, positions, f_hi, f_lo, offset, scale, interleaved, inplace):  # noqa: PLR0917  (autograd passes them positionally)
        qo, ko = (q, k) if inplace else (torch.empty_like(q), torch.empty_like(k))
        _launch_angles(
            q, qo, k, ko, (f_hi, f_lo), positions=positions, offset=offset, scale=scale, interleaved=interleaved
        )
        ctx.interleaved, ctx.offset, ctx.scale = interleaved, offset, scale
        ctx.has_positions = positions is not None
        ctx.save_for_backward(*([positions] if positions is not None else []), f_hi, f_lo)
        if inplace:
            ctx.mark_dirty(q, k)
        return qo, ko

    @staticmethod
    def backward(ctx, grad_q, grad_k):
        saved = ctx.saved_tensors
        positions = saved[0] if ctx.has_positions else None
        gq, gk = torch.empty_like(grad_q), torch.empty_like(grad_k)
        options = {"offset": ctx.offset, "scale": ctx.scale, "interleaved": ctx.interleaved, "backward": True}
        _launch_angles(grad_q, gq, grad_k, gk, saved[-2:], positions=positions, **options)
        return gq, gk, None, None, None, None, None, None, None


class _TableRope(torch.autograd.Function):
    """``x -> x * cos + rotate(x) * sin`` with the tables read; backward applies the transpose."""

    @staticmethod
    def forward(ctx, x4, cos4, sin4, interleaved):
        out = torch.empty_like(x4)
        _launch_table(x4, out, cos4, sin4, interleaved=interleaved)
        ctx.interleaved = interleaved
        ctx.save_for_backward(cos4, sin4)
        return out

    @staticmethod
    def backward(ctx, grad):
        cos4, sin4 = ctx.saved_tensors
        gx = torch.empty_like(grad)
        _launch_table(grad, gx, cos4, sin4, interleaved=ctx.interleaved, backward=True)
        return gx, None, None, None


# ---------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------


def _require_triton(*tensors: torch.Tensor) -> None:
    """Raise unless Triton is installed and every tensor is where a kernel can run."""
    if kernel is None:
        raise ValueError("backend='triton' needs the triton package, which is not installed (Linux only)")
    for t in tensors:
        if not (t.is_cuda or (interpreter_mode() and t.device.type == "cpu")):
            raise ValueError(
                f"backend='triton' needs CUDA tensors (or CPU tensors with TRITON_INTERPRET=1 set before "
                f"posenc.triton_rope first runs a kernel), got a tensor on {t.device}"
            )


def _check_dtype(name: str, t: torch.Tensor) -> None:
    if t.dtype not in TRITON_DTYPES:
        raise ValueError(
            f"{name} must be float32, float16 or bfloat16 for backend='triton', got {t.dtype}; "
            f"use backend='torch' for other dtypes"
        )


def _check_kernel_shapes(q: torch.Tensor, k: torch.Tensor) -> None:
    """What the kernel needs beyond ``posenc._checks.check_qk``.

    Raises unless ``q`` and ``k`` are ``[b, h, s, d]`` with one ``b``, ``s`` and even
    ``d``, in a kernel dtype.
    """
    for name, t in (("q", q), ("k", k)):
        if t.dim() != 4:
            raise ValueError(f"{name} must have shape [batch, heads, seq_len, head_dim], got {tuple(t.shape)}")
        _check_dtype(name, t)
    if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2] or k.shape[3] != q.shape[3]:
        raise ValueError(
            f"k must have shape [{q.shape[0]}, h_kv, {q.shape[2]}, {q.shape[3]}] to match q {tuple(q.shape)} "
            f"(same batch, seq_len and head_dim), got {tuple(k.shape)}"
        )
    if q.shape[-1] % 2:
        raise ValueError(f"head_dim (q.shape[-1]) must be even (channels come in pairs), got {q.shape[-1]}")


def _frequencies(
    inv_freq: torch.Tensor | tuple[torch.Tensor, torch.Tensor], q: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(hi, lo)`` for ``q``'s head dim: split here, or already split by the caller."""
    f_hi, f_lo = inv_freq if isinstance(inv_freq, tuple) else split_frequencies(inv_freq, device=q.device)
    half = q.shape[-1] // 2
    if f_hi.shape != (half,) or f_lo.shape != (half,):
        raise ValueError(f"inv_freq must have shape [{half}] (head_dim / 2), got {tuple(f_hi.shape)}")
    return f_hi, f_lo


# ---------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------


def split_frequencies(
    inv_freq: torch.Tensor, device: torch.device | str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split frequencies into float32 head and tail, ``hi + lo`` equal to the float64 values.

    Args:
        inv_freq: Frequencies ``theta_i``, ``[d/2]``, ideally float64 (as
            :func:`posenc.rope_inv_freq` returns them); float32 input gives a
            zero tail.
        device: Device of the results (default: that of ``inv_freq``).

    Returns:
        ``(hi, lo)``, two contiguous float32 tensors ``[d/2]``.
    """
    exact = inv_freq.detach().to(device=device, dtype=torch.float64)
    hi = exact.to(torch.float32)
    lo = (exact - hi.to(torch.float64)).to(torch.float32)
    return hi.contiguous(), lo.contiguous()


def rope_qk_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    inv_freq: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
    *,
    positions: torch.Tensor | None = None,
    offset: int = 0,
    layout: str = "half",
    attention_factor: float = 1.0,
    inplace: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys by their positions in one fused Triton launch.

    Su et al. 2021 (RoPE). Pair ``i`` of the token at position ``m`` turns by
    ``m * theta_i``; cos and sin are formed in registers from ``positions``
    (or ``offset``) and ``inv_freq``, never read from a table, and multiplied
    by ``attention_factor`` (YaRN's; 1 otherwise). The result equals
    :func:`posenc.apply_rope` with the float64-angle tables of
    :func:`posenc.rope_cos_sin`, to float32 rounding before the final rounding
    to the input's dtype.

    Args:
        q: Queries ``[b, h_q, s, d]``, float32, float16 or bfloat16, any strides.
        k: Keys ``[b, h_kv, s, d]``, the same ``b`` and ``s``; ``h_kv`` may
            differ from ``h_q`` (grouped-query attention).
        inv_freq: Frequencies ``theta_i``, ``[d/2]`` (float64 for full
            accuracy), or a pair ``(hi, lo)`` from :func:`split_frequencies`
            already on the device.
        positions: Optional positions ``[s]`` or ``[b, s]`` (integers, or
            floats converted to float32); integers below ``2**24`` in magnitude,
            where float32 is exact.
        offset: Used when ``positions`` is None: tokens sit at
            ``offset .. offset + s - 1``.
        layout: ``"half"`` or ``"interleaved"``.
        attention_factor: Multiplies cos and sin.
        inplace: Write the results into ``q`` and ``k`` (which must not be
            leaves that require grad) and return them.

    Returns:
        ``(q_rotated, k_rotated)``, with the shapes and dtypes of ``q`` and ``k``.

    Raises:
        ValueError: If Triton is missing, the tensors are not on a CUDA device
            (or on the CPU under ``TRITON_INTERPRET=1``), a dtype is not
            supported, shapes disagree, ``positions`` has the wrong shape, the
            layout is unknown, ``offset`` is negative or given together
            with ``positions``, or a position reaches ``2**24``.
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    _check_kernel_shapes(q, k)
    positions = check_qk(q, k, q.shape[-1], positions=positions, offset=offset, inplace=inplace)
    check_range(positions, offset, q.shape[-2])
    f_hi, f_lo = _frequencies(inv_freq, q)
    _require_triton(q, k, f_hi, f_lo, *([positions] if positions is not None else []))
    if q.device != k.device:
        raise ValueError(f"q and k must be on one device, got {q.device} and {k.device}")
    interleaved = layout == "interleaved"
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
        return _FusedRope.apply(q, k, positions, f_hi, f_lo, offset, float(attention_factor), interleaved, inplace)
    qo, ko = (q, k) if inplace else (torch.empty_like(q), torch.empty_like(k))
    _launch_angles(
        q, qo, k, ko, (f_hi, f_lo), positions=positions, offset=offset, scale=attention_factor, interleaved=interleaved
    )
    return qo, ko


def apply_rope_triton(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str = "half") -> torch.Tensor:
    """:func:`posenc.apply_rope` as a Triton kernel that reads the given cos and sin tables.

    The arguments are those of :func:`posenc.apply_rope`, which has already
    checked their shapes; ``x`` has at most 4 dims, is float32, float16 or
    bfloat16, and ``cos``, ``sin`` do not require grad. The products are
    formed in float32.

    Args:
        x: Queries or keys ``[..., s, d]``, at most 4 dims, any strides.
        cos: Broadcastable to ``x``, for example ``[s, d]``.
        sin: The shape of ``cos``.
        layout: ``"half"`` or ``"interleaved"``.

    Returns:
        Tensor of ``x``'s shape and dtype.

    Raises:
        ValueError: If Triton cannot run on these tensors, ``x`` has more than
            4 dims or an unsupported dtype, ``cos`` and ``sin`` differ in
            shape, or ``cos``/``sin`` require grad.
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    if x.dim() > 4:
        raise ValueError(f"x must have at most 4 dims for backend='triton', got {tuple(x.shape)}")
    _check_dtype("x", x)
    if cos.shape != sin.shape:  # the kernel reads both with one set of strides
        raise ValueError(f"cos and sin must have one shape, got cos {tuple(cos.shape)} and sin {tuple(sin.shape)}")
    if cos.requires_grad or sin.requires_grad:
        raise ValueError("backend='triton' does not differentiate with respect to cos and sin; use backend='torch'")
    _require_triton(x, cos, sin)
    lead = (None,) * (4 - x.dim())
    x4 = x[lead]  # [..., s, d] -> [1.., s, d], 4 dims, a view
    cos4 = cos.contiguous().expand(x.shape)[lead]  # [..., s, d] -> [1.., s, d]; broadcast dims get stride 0
    sin4 = sin.contiguous().expand(x.shape)[lead]
    out = _TableRope.apply(x4, cos4, sin4, layout == "interleaved")
    return out.reshape(x.shape)  # [1.., s, d] -> x's shape, a view
