"""A fused Triton kernel for rotary position embedding (RoPE).

One launch rotates the queries and the keys of a grouped-query layer (fewer
key/value heads than query heads). Each program takes one token of one
sequence: it forms the ``d/2`` angles ``position * theta_i`` in registers from
the token's position and the frequencies, takes their cos and sin once, and
rotates every query head and every key head of that token with them. No
cos/sin table is read, so the kernel moves the fewest bytes RoPE can move:
``q`` and ``k`` read once and written once.

* Both channel layouts, ``"half"`` and ``"interleaved"`` (see
  :mod:`posenc.rotary`).
* float32, float16 and bfloat16 inputs; arithmetic in float32, one rounding
  to the input's dtype at the store.
* Any strides: ``[b, h, s, d]`` views of ``[b, s, h, d]`` memory, as a
  projection followed by ``.transpose(1, 2)`` produces them, need no copy.
* Positions as an offset (``offset .. offset + s - 1``, a KV cache already
  filled) or as a tensor ``[s]`` or ``[b, s]``.
* In place or into new tensors; autograd, whose backward is the rotation by
  ``-theta`` (the transpose of a rotation is its inverse).

**Angles.** A float32 product ``position * theta_i`` is off by up to half a
unit in the last place of the angle, about ``1e-3`` radian at position 16384.
The kernel avoids that error without float64: ``theta_i`` comes split into a
float32 head and tail (``hi + lo`` equals the float64 value to about
``2**-48``), the rounding error of ``position * hi`` is recovered exactly with
one fused multiply-add, and the angle is reduced to ``[-pi, pi]`` with ``2*pi``
split the same way before cos and sin are taken. The angles are then as
accurate as float64 ones rounded to float32, so the kernel agrees with the
float64 cos/sin tables of :func:`posenc.rope_cos_sin` to float32 rounding at
any position below ``2**24`` (positions are converted to float32, exact for
integers up to that bound).

A second mode reads ``cos`` and ``sin`` from tensors, for
:func:`posenc.apply_rope` with ``backend="triton"``, whose caller supplies the
tables.

Triton is imported only when this module is; ``import posenc`` never imports
it. Set ``TRITON_INTERPRET=1`` before this module is first imported to run
the kernel on CPU tensors through Triton's interpreter: that is how the tests
check it on a machine without a GPU. The kernel calls only builtins of
``triton.language`` (none of the ``@triton.jit`` helpers of its standard
library, which are fixed as compiled or interpreted when Triton is imported),
so this works even when Triton was imported before the variable was set.
"""

from __future__ import annotations

import os

import torch

from ._checks import check_choice, check_nonnegative_int

try:  # Triton is a Linux-only requirement; everything else in posenc works without it.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where Triton is missing
    triton = None
    tl = None

#: Input dtypes the kernel accepts.
TRITON_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

_LAYOUTS = ("half", "interleaved")
# Largest tile of one program, heads x pairs, in elements of each half.
_TILE = 2048


def _fuse_interpreter_fma() -> None:
    """Make Triton's CPU interpreter round ``tl.fma`` once, as a GPU does.

    The kernel recovers the float32 rounding error of ``position * frequency`` with one
    fused multiply-add, which is exact only if the fma rounds once. Interpreters of
    Triton before 3.9 compute it as a float32 multiply followed by an add (two
    roundings), so under ``TRITON_INTERPRET=1`` the angles lose the bits the kernel
    works to keep; torch 2.13.0 requires Triton 3.7.1, whose interpreter does this.
    Here the product is formed in float64, where a product of two float32 numbers is
    exact, and rounded once more to float32 after the add: for the error terms the
    kernel computes, which float32 represents exactly, the result is exact. GPUs are
    unaffected: only the interpreter's builder is changed.
    """
    import numpy as np
    from triton.runtime import interpreter

    def create_fma(self, x, y, z):
        dtype = z.data.dtype
        if dtype in (np.float32, np.float16):
            total = np.multiply(x.data, y.data, dtype=np.float64) + z.data.astype(np.float64)
            return interpreter.TensorHandle(total.astype(dtype), z.dtype.scalar)
        return original(self, x, y, z)

    original = interpreter.InterpreterBuilder.create_fma
    interpreter.InterpreterBuilder.create_fma = create_fma


if triton is not None and tuple(int(part) for part in triton.__version__.split(".")[:2]) < (3, 9):
    _fuse_interpreter_fma()


def triton_available() -> bool:
    """Whether Triton could be imported, so that the ``"triton"`` backend can run."""
    return triton is not None


def interpreter_mode() -> bool:
    """Whether ``TRITON_INTERPRET`` is set, so that the kernel runs on CPU tensors."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "yes", "on")


# ---------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------

if triton is not None:
    # 2*pi as a float32 head and tail: TWO_PI_HI + TWO_PI_LO equals 2*pi to about 2**-48 relative.
    _TWO_PI_HI = tl.constexpr(6.2831854820251465)
    _TWO_PI_LO = tl.constexpr(-1.7484555314695172e-07)
    _INV_TWO_PI = tl.constexpr(0.15915494309189535)

    @triton.jit
    def _cos_sin(pos, f_hi, f_lo):
        """cos and sin of ``pos * (f_hi + f_lo)``, with the angle carried to float64 accuracy."""
        angle = pos * f_hi
        # What float32 rounding dropped from pos * f_hi (exact, one fma), plus the tail's share.
        error = tl.fma(pos, f_hi, -angle) + pos * f_lo
        turns = tl.floor(angle * _INV_TWO_PI + 0.5)
        # angle - turns * 2*pi, in two steps so that the product with the head is exact.
        reduced = tl.fma(-turns, _TWO_PI_HI, angle)
        reduced = tl.fma(-turns, _TWO_PI_LO, reduced) + error
        return tl.cos(reduced), tl.sin(reduced)

    @triton.jit
    def _to_output(y, out_ptr):
        """Round float32 ``y`` to the output's dtype, to nearest even.

        For bfloat16 the rounding is done here on the bits, so that the final
        conversion is exact: GPUs round a float32 -> bfloat16 conversion to
        nearest even, Triton's interpreter truncates, and this way both give
        the correctly rounded result.
        """
        if out_ptr.dtype.element_ty == tl.bfloat16:
            bits = y.to(tl.uint32, bitcast=True)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
            y = tl.where(y == y, bits.to(tl.float32, bitcast=True), y)  # NaN stays NaN
        return y.to(out_ptr.dtype.element_ty)

    @triton.jit
    def _load_pairs(ptr, rows, stride_c, half, rows_ok, INTERLEAVED: tl.constexpr, BLOCK_P: tl.constexpr):
        """The two members of every pair, each ``[BLOCK_H, BLOCK_P]`` in float32.

        ``rows`` holds each head's start offset and ``rows_ok`` whether that
        head exists, both ``[BLOCK_H, 1]``. Interleaved rows are read whole, in
        one contiguous tile, and split into even and odd channels.
        """
        pair = tl.arange(0, BLOCK_P)
        if INTERLEAVED:
            chan = tl.arange(0, 2 * BLOCK_P)  # pair i at channels (2i, 2i + 1)
            both = rows_ok & (chan < 2 * half)[None, :]  # [BLOCK_H, 2 * BLOCK_P]
            tile = tl.load(ptr + rows + chan[None, :] * stride_c, mask=both, other=0.0).to(tl.float32)
            first, second = tl.split(tl.reshape(tile, (rows_ok.shape[0], BLOCK_P, 2)))  # 2 x [BLOCK_H, BLOCK_P]
        else:
            mask = rows_ok & (pair < half)[None, :]  # [BLOCK_H, BLOCK_P]
            first = tl.load(ptr + rows + pair[None, :] * stride_c, mask=mask, other=0.0).to(tl.float32)
            second = tl.load(ptr + rows + (pair + half)[None, :] * stride_c, mask=mask, other=0.0).to(tl.float32)
        return first, second

    @triton.jit
    def _store_pairs(ptr, rows, stride_c, half, rows_ok, first, second, INTERLEAVED: tl.constexpr,
                     BLOCK_P: tl.constexpr):
        """Write pairs back in the layout :func:`_load_pairs` read them from."""
        pair = tl.arange(0, BLOCK_P)
        first = _to_output(first, ptr)
        second = _to_output(second, ptr)
        if INTERLEAVED:
            chan = tl.arange(0, 2 * BLOCK_P)
            both = rows_ok & (chan < 2 * half)[None, :]  # [BLOCK_H, 2 * BLOCK_P]
            tile = tl.reshape(tl.join(first, second), (rows_ok.shape[0], 2 * BLOCK_P))  # [BLOCK_H, 2 * BLOCK_P]
            tl.store(ptr + rows + chan[None, :] * stride_c, tile, mask=both)
        else:
            mask = rows_ok & (pair < half)[None, :]  # [BLOCK_H, BLOCK_P]
            tl.store(ptr + rows + pair[None, :] * stride_c, first, mask=mask)
            tl.store(ptr + rows + (pair + half)[None, :] * stride_c, second, mask=mask)

    @triton.jit
    def _rotate_heads(
        x_ptr, out_ptr, cos_ptr, sin_ptr,
        b, s, heads, half,
        sxb, sxh, sxs, sxd,
        sob, soh, sos, sod,
        stb, sth, sts, std,
        cos1, sin1,
        FROM_TABLE: tl.constexpr, INTERLEAVED: tl.constexpr, BACKWARD: tl.constexpr,
        BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr,
    ):
        """Rotate all heads of token ``(b, s)`` of one tensor, ``BLOCK_H`` heads at a time."""
        head_range = tl.arange(0, BLOCK_H)
        for h0 in range(0, heads, BLOCK_H):
            h = h0 + head_range
            ok = (h < heads)[:, None]  # [BLOCK_H, 1]
            x1, x2 = _load_pairs(x_ptr, b * sxb + s * sxs + h[:, None] * sxh, sxd, half, ok, INTERLEAVED, BLOCK_P)
            if FROM_TABLE:
                rows = b * stb + s * sts + h[:, None] * sth
                c1, c2 = _load_pairs(cos_ptr, rows, std, half, ok, INTERLEAVED, BLOCK_P)
                s1, s2 = _load_pairs(sin_ptr, rows, std, half, ok, INTERLEAVED, BLOCK_P)
            else:
                c1 = cos1[None, :]
                c2 = c1
                s1 = sin1[None, :]
                s2 = s1
            if BACKWARD:  # the transpose: the rotation by -theta when both channels share one angle
                y1 = x1 * c1 + x2 * s2
                y2 = x2 * c2 - x1 * s1
            else:
                y1 = x1 * c1 - x2 * s1
                y2 = x2 * c2 + x1 * s2
            rows = b * sob + s * sos + h[:, None] * soh
            _store_pairs(out_ptr, rows, sod, half, ok, y1, y2, INTERLEAVED, BLOCK_P)

    @triton.jit
    def _rope_kernel(
        q_ptr, qo_ptr, k_ptr, ko_ptr,
        pos_ptr, f_hi_ptr, f_lo_ptr, cos_ptr, sin_ptr,
        seq_len, q_heads, k_heads, half, offset, scale,
        sqb, sqh, sqs, sqd,
        soqb, soqh, soqs, soqd,
        skb, skh, sks, skd,
        sokb, sokh, soks, sokd,
        spb, sps,
        stb, sth, sts, std,
        HAS_K: tl.constexpr, HAS_POS: tl.constexpr, FROM_TABLE: tl.constexpr,
        INTERLEAVED: tl.constexpr, BACKWARD: tl.constexpr,
        BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_P: tl.constexpr,
    ):
        """One program per token: angles once, then every query head and every key head."""
        token = tl.program_id(0).to(tl.int64)
        b = token // seq_len
        s = token % seq_len
        pair = tl.arange(0, BLOCK_P)
        if FROM_TABLE:
            cos1 = tl.full([BLOCK_P], 0.0, tl.float32)  # unused: the tables are read per head
            sin1 = cos1
        else:
            if HAS_POS:
                pos = tl.load(pos_ptr + b * spb + s * sps).to(tl.float32)
            else:
                pos = (s + offset).to(tl.float32)
            f_hi = tl.load(f_hi_ptr + pair, mask=pair < half, other=0.0)
            f_lo = tl.load(f_lo_ptr + pair, mask=pair < half, other=0.0)
            cos1, sin1 = _cos_sin(pos, f_hi, f_lo)
            cos1 = cos1 * scale
            sin1 = sin1 * scale
        _rotate_heads(
            q_ptr, qo_ptr, cos_ptr, sin_ptr, b, s, q_heads, half,
            sqb, sqh, sqs, sqd, soqb, soqh, soqs, soqd, stb, sth, sts, std,
            cos1, sin1, FROM_TABLE, INTERLEAVED, BACKWARD, BLOCK_HQ, BLOCK_P,
        )
        if HAS_K:
            _rotate_heads(
                k_ptr, ko_ptr, cos_ptr, sin_ptr, b, s, k_heads, half,
                skb, skh, sks, skd, sokb, sokh, soks, sokd, stb, sth, sts, std,
                cos1, sin1, FROM_TABLE, INTERLEAVED, BACKWARD, BLOCK_HK, BLOCK_P,
            )


def _block_heads(heads: int, block_p: int) -> int:
    return max(1, min(triton.next_power_of_2(max(heads, 1)), _TILE // block_p))


def _launch(
    q: torch.Tensor,
    qo: torch.Tensor,
    k: torch.Tensor | None,
    ko: torch.Tensor | None,
    *,
    interleaved: bool,
    backward: bool = False,
    positions: torch.Tensor | None = None,
    offset: int = 0,
    freqs: tuple[torch.Tensor, torch.Tensor] | None = None,
    tables: tuple[torch.Tensor, torch.Tensor] | None = None,
    scale: float = 1.0,
) -> None:
    """Run the kernel: ``qo = R q`` and ``ko = R k`` for 4-D tensors ``[b, h, s, d]`` of any strides.

    Exactly one of ``freqs`` (``(hi, lo)``, float32 ``[d/2]``, the angle mode)
    and ``tables`` (``(cos, sin)`` expanded to ``q``'s shape, the table mode)
    is given. ``qo`` may be ``q`` itself (in place); likewise ``ko``.
    """
    batch, q_heads, seq_len, dim = q.shape
    k_heads = k.shape[1] if k is not None else 0
    if batch * seq_len == 0 or dim == 0:
        return
    half = dim // 2
    block_p = triton.next_power_of_2(half)
    dummy = q  # pointer arguments a mode does not read
    if tables is not None:
        cos, sin = tables
        table_strides = cos.stride()
        f_hi = f_lo = dummy
    else:
        f_hi, f_lo = freqs
        cos = sin = dummy
        table_strides = (0, 0, 0, 0)
    if positions is not None:
        pos = positions
        pos_strides = (0, positions.stride(0)) if positions.dim() == 1 else positions.stride()
        if positions.dim() == 2 and positions.shape[0] == 1:
            pos_strides = (0, positions.stride(1))
    else:
        pos, pos_strides = dummy, (0, 0)
    k_strides = k.stride() if k is not None else (0, 0, 0, 0)
    ko_strides = ko.stride() if ko is not None else (0, 0, 0, 0)
    _rope_kernel[(batch * seq_len,)](
        q, qo, k if k is not None else dummy, ko if ko is not None else dummy,
        pos, f_hi, f_lo, cos, sin,
        seq_len, q_heads, k_heads, half, offset, float(scale),
        *q.stride(), *qo.stride(), *k_strides, *ko_strides, *pos_strides, *table_strides,
        HAS_K=k is not None, HAS_POS=positions is not None, FROM_TABLE=tables is not None,
        INTERLEAVED=interleaved, BACKWARD=backward,
        BLOCK_HQ=_block_heads(q_heads, block_p), BLOCK_HK=_block_heads(k_heads, block_p), BLOCK_P=block_p,
        num_warps=4, enable_fp_fusion=True,
    )


# ---------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------


class _FusedRope(torch.autograd.Function):
    """``(q, k) -> (R q, R k)`` with angles from positions; backward rotates by ``-theta``."""

    @staticmethod
    def forward(ctx, q, k, positions, f_hi, f_lo, offset, scale, interleaved, inplace):
        qo, ko = (q, k) if inplace else (torch.empty_like(q), torch.empty_like(k))
        _launch(q, qo, k, ko, interleaved=interleaved, positions=positions, offset=offset,
                freqs=(f_hi, f_lo), scale=scale)
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
        f_hi, f_lo = saved[-2:]
        gq, gk = torch.empty_like(grad_q), torch.empty_like(grad_k)
        _launch(grad_q, gq, grad_k, gk, interleaved=ctx.interleaved, backward=True, positions=positions,
                offset=ctx.offset, freqs=(f_hi, f_lo), scale=ctx.scale)
        return gq, gk, None, None, None, None, None, None, None


class _TableRope(torch.autograd.Function):
    """``x -> x * cos + rotate(x) * sin`` with the tables read; backward applies the transpose."""

    @staticmethod
    def forward(ctx, x4, cos4, sin4, interleaved):
        out = torch.empty_like(x4)
        _launch(x4, out, None, None, interleaved=interleaved, tables=(cos4, sin4))
        ctx.interleaved = interleaved
        ctx.save_for_backward(cos4, sin4)
        return out

    @staticmethod
    def backward(ctx, grad):
        cos4, sin4 = ctx.saved_tensors
        gx = torch.empty_like(grad)
        _launch(grad, gx, None, None, interleaved=ctx.interleaved, backward=True, tables=(cos4, sin4))
        return gx, None, None, None


# ---------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------


def _require_triton(*tensors: torch.Tensor) -> None:
    if triton is None:
        raise ValueError("backend='triton' needs the triton package, which is not installed (Linux only)")
    for t in tensors:
        if not (t.is_cuda or (interpreter_mode() and t.device.type == "cpu")):
            raise ValueError(
                f"backend='triton' needs CUDA tensors (or CPU tensors with TRITON_INTERPRET=1 set before "
                f"posenc.triton_rope is imported), got a tensor on {t.device}"
            )


def _check_dtype(name: str, t: torch.Tensor) -> None:
    if t.dtype not in TRITON_DTYPES:
        raise ValueError(
            f"{name} must be float32, float16 or bfloat16 for backend='triton', got {t.dtype}; "
            f"use backend='torch' for other dtypes"
        )


def split_frequencies(inv_freq: torch.Tensor, device=None) -> tuple[torch.Tensor, torch.Tensor]:
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
            floats converted to float32); exact for integers below ``2**24``.
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
            layout is unknown, or ``offset`` is negative or given together
            with ``positions``.
    """
    check_choice("layout", layout, _LAYOUTS)
    for name, t in (("q", q), ("k", k)):
        if t.dim() != 4:
            raise ValueError(f"{name} must have shape [batch, heads, seq_len, head_dim], got {tuple(t.shape)}")
        _check_dtype(name, t)
    if k.shape[0] != q.shape[0] or k.shape[2] != q.shape[2] or k.shape[3] != q.shape[3]:
        raise ValueError(
            f"k must have shape [{q.shape[0]}, h_kv, {q.shape[2]}, {q.shape[3]}] to match q {tuple(q.shape)} "
            f"(same batch, seq_len and head_dim), got {tuple(k.shape)}"
        )
    dim = q.shape[-1]
    if dim % 2:
        raise ValueError(f"head_dim (q.shape[-1]) must be even (channels come in pairs), got {dim}")
    if isinstance(inv_freq, tuple):
        f_hi, f_lo = inv_freq
    else:
        f_hi, f_lo = split_frequencies(inv_freq, device=q.device)
    if f_hi.shape != (dim // 2,) or f_lo.shape != (dim // 2,):
        raise ValueError(f"inv_freq must have shape [{dim // 2}] (head_dim / 2), got {tuple(f_hi.shape)}")
    if positions is None:
        check_nonnegative_int("offset", offset)
    else:
        if offset != 0:
            raise ValueError(f"pass either positions or offset, not both; got offset={offset} with positions")
        positions = torch.as_tensor(positions, device=q.device)
        if positions.dtype.is_complex or positions.dtype == torch.bool:
            raise ValueError(f"positions must hold real numbers, got dtype {positions.dtype}")
        batch, seq_len = q.shape[0], q.shape[2]
        if positions.dim() not in (1, 2) or positions.shape[-1] != seq_len or (
            positions.dim() == 2 and positions.shape[0] not in (1, batch)
        ):
            raise ValueError(
                f"positions must have shape [{seq_len}] or [{batch}, {seq_len}] (seq_len = q.shape[2]), "
                f"got {tuple(positions.shape)}"
            )
    if inplace and any(t.requires_grad and t.is_leaf for t in (q, k)) and torch.is_grad_enabled():
        raise ValueError("inplace=True cannot overwrite q or k: a leaf tensor that requires grad")
    _require_triton(q, k, f_hi, f_lo, *([positions] if positions is not None else []))
    if q.device != k.device:
        raise ValueError(f"q and k must be on one device, got {q.device} and {k.device}")
    interleaved = layout == "interleaved"
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
        return _FusedRope.apply(q, k, positions, f_hi, f_lo, offset, float(attention_factor), interleaved, inplace)
    qo, ko = (q, k) if inplace else (torch.empty_like(q), torch.empty_like(k))
    _launch(q, qo, k, ko, interleaved=interleaved, positions=positions, offset=offset,
            freqs=(f_hi, f_lo), scale=attention_factor)
    return qo, ko


def apply_rope_triton(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str = "half") -> torch.Tensor:
    """:func:`posenc.apply_rope` as a Triton kernel that reads the given cos and sin tables.

    The arguments are those of :func:`posenc.apply_rope`, which has already
    checked their shapes; ``x`` has at most 4 dims, is float32, float16 or
    bfloat16, and ``cos``, ``sin`` do not require grad. The products are
    formed in float32.

    Returns:
        Tensor of ``x``'s shape and dtype.

    Raises:
        ValueError: If Triton cannot run on these tensors, ``x`` has more than
            4 dims or an unsupported dtype, or ``cos``/``sin`` require grad.
    """
    check_choice("layout", layout, _LAYOUTS)
    if x.dim() > 4:
        raise ValueError(f"x must have at most 4 dims for backend='triton', got {tuple(x.shape)}")
    _check_dtype("x", x)
    if cos.requires_grad or sin.requires_grad:
        raise ValueError("backend='triton' does not differentiate with respect to cos and sin; use backend='torch'")
    _require_triton(x, cos, sin)
    lead = (None,) * (4 - x.dim())
    x4 = x[lead]  # [..., s, d] -> [1.., s, d], 4 dims, a view
    cos4 = cos.contiguous().expand(x.shape)[lead]  # broadcast dims get stride 0
    sin4 = sin.contiguous().expand(x.shape)[lead]
    out = _TableRope.apply(x4, cos4, sin4, layout == "interleaved")
    return out.reshape(x.shape)  # [1.., s, d] -> x's shape, a view


def ptx_summary(
    *, layout: str = "half", from_table: bool = False, dtype: torch.dtype = torch.bfloat16, head_dim: int = 128,
    q_heads: int = 32, kv_heads: int = 8, arch: int = 90,
) -> dict[str, int]:
    """Compile the kernel for an NVIDIA GPU without one, and count its global-memory instructions.

    Compilation to PTX needs no device: this shows what the compiler makes of
    the kernel on a machine without a GPU. Arguments are specialised as for a
    contiguous launch (pointers 16-byte aligned, strides multiples of 16,
    channel stride 1), as Triton's JIT does for real tensors of these shapes.
    Under ``TRITON_INTERPRET=1`` (where the kernel is interpreted, not
    compiled) the work is done in a fresh Python process without it.

    Args:
        layout: ``"half"`` or ``"interleaved"``.
        from_table: The table mode instead of angles from positions.
        dtype: Element type of ``q`` and ``k``.
        head_dim: Channels per head (a multiple of 16 for the specialisation).
        q_heads: Query heads.
        kv_heads: Key heads.
        arch: Compute capability times ten (90 for the H100 and H200).

    Returns:
        Counts of PTX global loads and stores by width, e.g.
        ``{"ld.global.v4.b32": 10, ...}``.

    Raises:
        ValueError: Without Triton, or for an unknown layout or dtype.
    """
    import re
    from collections import Counter

    if triton is None:
        raise ValueError("ptx_summary compiles the kernel with Triton, which is not installed")
    check_choice("layout", layout, _LAYOUTS)
    if dtype not in TRITON_DTYPES:
        raise ValueError(f"dtype must be float32, float16 or bfloat16, got {dtype}")
    if interpreter_mode():
        import json
        import subprocess
        import sys

        args = (f"layout={layout!r}, from_table={from_table}, dtype=torch.{str(dtype).removeprefix('torch.')}, "
                f"head_dim={head_dim}, q_heads={q_heads}, kv_heads={kv_heads}, arch={arch}")
        code = f"import json, torch; from posenc.triton_rope import ptx_summary; print(json.dumps(ptx_summary({args})))"
        env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    element = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
    block_p = triton.next_power_of_2(head_dim // 2)
    constexprs = {
        "HAS_K": not from_table, "HAS_POS": False, "FROM_TABLE": from_table, "INTERLEAVED": layout == "interleaved",
        "BACKWARD": False, "BLOCK_HQ": _block_heads(q_heads, block_p), "BLOCK_HK": _block_heads(kv_heads, block_p),
        "BLOCK_P": block_p, "sqd": 1, "soqd": 1, "skd": 1, "sokd": 1, "std": 1,
    }
    signature, attrs = {}, {}
    for i, name in enumerate(_rope_kernel.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
        elif name.endswith("_ptr"):
            kind = {"pos_ptr": "i64", "f_hi_ptr": "fp32", "f_lo_ptr": "fp32", "cos_ptr": "fp32", "sin_ptr": "fp32"}
            signature[name] = "*" + kind.get(name, element)
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name == "scale":
            signature[name] = "fp32"
        else:
            signature[name] = "i32"
            if name not in ("seq_len", "q_heads", "k_heads", "offset", "spb", "sps"):
                attrs[(i,)] = [["tt.divisibility", 16]]  # half and the strides: multiples of 16
    source = ASTSource(fn=_rope_kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"enable_fp_fusion": True})
    found = re.findall(r"\b((?:ld|st)\.global(?:\.nc)?(?:\.v[24])?\.b(?:16|32|64))\b", compiled.asm["ptx"])
    return dict(sorted(Counter(found).items()))


def rope_reference(
    q: torch.Tensor,
    inv_freq: torch.Tensor,
    positions: torch.Tensor,
    *,
    layout: str = "half",
    attention_factor: float = 1.0,
    angle_dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """The rotation computed in float64, to check implementations against.

    Args:
        q: ``[..., s, d]``, any floating dtype (upcast to float64).
        inv_freq: ``[d/2]`` frequencies.
        positions: ``[s]``, or any shape that broadcasts against
            ``q.shape[:-1]``.
        layout: ``"half"`` or ``"interleaved"``.
        attention_factor: Multiplies cos and sin.
        angle_dtype: Dtype in which ``position * theta_i`` is formed; float64
            for the reference, float32 to see what a float32 product costs.

    Returns:
        Float64 tensor of ``q``'s shape.
    """
    check_choice("layout", layout, _LAYOUTS)
    positions = positions.to(q.device, angle_dtype).unsqueeze(-1)  # [..., 1]
    angles = (positions * inv_freq.to(q.device, angle_dtype)).to(torch.float64)  # [..., d/2]
    cos, sin = torch.cos(angles) * attention_factor, torch.sin(angles) * attention_factor
    x = q.to(torch.float64)
    if layout == "half":
        x1, x2 = x.chunk(2, dim=-1)  # 2 x [..., d/2]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)  # [..., d]
    pairs = x.unflatten(-1, (-1, 2))  # [..., d] -> [..., d/2, 2]
    x1, x2 = pairs[..., 0], pairs[..., 1]
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)  # -> [..., d]


__all__ = [
    "TRITON_DTYPES",
    "apply_rope_triton",
    "interpreter_mode",
    "ptx_summary",
    "rope_qk_triton",
    "rope_reference",
    "split_frequencies",
    "triton_available",
]
