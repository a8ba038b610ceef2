"""The Triton kernels of the fused RoPE: the ``@triton.jit`` code, and a fix to Triton's interpreter.

Two kernels share the helpers below. :func:`_rope_angles_kernel` forms each
token's angles in registers from its position and the split frequencies, and
rotates the queries and the keys with them. :func:`_rope_table_kernel` reads
``cos`` and ``sin`` from tables instead, for ``apply_rope(..., backend="triton")``.
They are launched from :mod:`posenc.triton_rope.launch`. The one function here
that is not ``@triton.jit``, :func:`_fuse_interpreter_fma`, runs on import: it
belongs with the import of Triton it corrects.

Triton is imported unconditionally: importing this module is what decorates the
kernels, so ``TRITON_INTERPRET=1`` must be set before it is first imported (on
the first call of an entry point of :mod:`posenc.triton_rope`) for the kernels
to run on CPU tensors. They call only builtins of ``triton.language``, none of
the ``@triton.jit`` helpers of its standard library (which are fixed as compiled
or interpreted when Triton itself is imported), so Triton may have been imported
before the variable was set.
"""

# Shapes and strides the kernels see. Strides are in elements; any strides are accepted.
# q, k and x are float32, float16 or bfloat16; every value is loaded as float32 and computed in it.
#
# Grid: one program per token, b * s programs; program t handles batch row t // s, token t % s.
# Pairs: d/2 per head; "half" pairs channel i with i + d/2, "interleaved" pairs 2i with 2i + 1.
# Tiles: BLOCK_P = next_power_of_2(d/2) pairs by BLOCK_H heads, BLOCK_H * BLOCK_P <= 2048;
#        a head loop covers more heads than one tile holds.
#
# _rope_angles_kernel
#   q, qo         [b, hq, s, d]  strides (sqb, sqh, sqs, sqd), (soqb, soqh, soqs, soqd)
#   k, ko         [b, hk, s, d]  strides (skb, skh, sks, skd), (sokb, sokh, soks, sokd); hk may be < hq (GQA)
#                 A projection's [b, s, h, d] memory seen through .transpose(1, 2) has strides
#                 (s*h*d, d, h*d, 1) and needs no copy. qo may be q (in place), ko may be k.
#   pos           [b, s]         strides (spb, sps); spb = 0 for positions [s] or [1, s]; offset is 0.
#                 None: the token at index s sits at position offset + s (spb = sps = 0, unread).
#   f_hi, f_lo    [d/2]          float32, contiguous; f_hi + f_lo = theta_i to about 2**-48 relative
#   scale                        multiplies cos and sin (YaRN's attention factor; 1 otherwise)
#
# _rope_table_kernel
#   x, out        [b, h, s, d]   strides (sxb, sxh, sxs, sxd), (sob, soh, sos, sod)
#   cos, sin      [b, h, s, d]   strides (stb, sth, sts, std), the same for both: the caller's
#                                tables expanded to x's shape, stride 0 on every broadcast dim

import triton
import triton.language as tl


def _fuse_interpreter_fma() -> None:
    """Make Triton's CPU interpreter round ``tl.fma`` once, as a GPU does.

    The angles kernel recovers the float32 rounding error of ``position *
    frequency`` with one fused multiply-add, which is exact only if the fma
    rounds once. Interpreters of Triton before 3.9 compute it as a float32
    multiply followed by an add (two roundings), so under ``TRITON_INTERPRET=1``
    the angles lose the bits the kernel works to keep; torch 2.13.0 requires
    Triton 3.7.1, whose interpreter does this. Here the product is formed in
    float64, where a product of two float32 numbers is exact, and rounded once
    more to float32 after the add: for the error terms the kernel computes,
    which float32 represents exactly, the result is exact. GPUs are unaffected:
    only the interpreter's builder is changed.
    """
    import numpy as np
    from triton.runtime import interpreter

    original = interpreter.InterpreterBuilder.create_fma

    def create_fma(self, x, y, z):
        dtype = z.data.dtype
        if dtype in (np.float32, np.float16):
            total = np.multiply(x.data, y.data, dtype=np.float64) + z.data.astype(np.float64)
            return interpreter.TensorHandle(total.astype(dtype), z.dtype.scalar)
        return original(self, x, y, z)

    interpreter.InterpreterBuilder.create_fma = create_fma


if tuple(int(part) for part in triton.__version__.split(".")[:2]) < (3, 9):
    _fuse_interpreter_fma()

# 2*pi as a float32 head and tail: TWO_PI_HI + TWO_PI_LO equals 2*pi to about 2**-48 relative.
_TWO_PI_HI = tl.constexpr(6.2831854820251465)
_TWO_PI_LO = tl.constexpr(-1.7484555314695172e-07)
_INV_TWO_PI = tl.constexpr(0.15915494309189535)


@triton.jit
def _cos_sin(pos, f_hi, f_lo):
    """cos and sin of ``pos * (f_hi + f_lo)``, the angle kept to float64 accuracy."""
    angle = pos * f_hi
    # What float32 rounding dropped from pos * f_hi (exact, one fma),
    # plus the tail's share: error = (pos * f_hi - angle) + pos * f_lo
    error = tl.fma(pos, f_hi, -angle) + pos * f_lo
    # turns = round(angle / 2pi)
    turns = tl.floor(angle * _INV_TWO_PI + 0.5)
    # reduced = angle - turns * 2pi + error, in two steps so that the product
    # with the head is exact.
    reduced = tl.fma(-turns, _TWO_PI_HI, angle)
    reduced = tl.fma(-turns, _TWO_PI_LO, reduced) + error
    return tl.cos(reduced), tl.sin(reduced)


@triton.jit
def _to_output(y, out_ptr):
    """Round float32 ``y`` to the output's dtype, to nearest even.

    For bfloat16 the rounding is done here on the bits, so that the final
    conversion is exact: GPUs round a float32 -> bfloat16 conversion to nearest
    even, Triton's interpreter truncates, and this way both give the correctly
    rounded result.
    """
    if out_ptr.dtype.element_ty == tl.bfloat16:
        bits = y.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        y = tl.where(y == y, bits.to(tl.float32, bitcast=True), y)  # NaN stays NaN
    return y.to(out_ptr.dtype.element_ty)


@triton.jit
def _load_pairs(ptr, rows, stride_c, half, rows_ok, INTERLEAVED: tl.constexpr, BLOCK_P: tl.constexpr):
    """The two members of every pair, each ``[BLOCK_H, BLOCK_P]`` in float32.

    ``rows`` holds each head's start offset and ``rows_ok`` whether that head
    exists, both ``[BLOCK_H, 1]``. Interleaved rows are read whole, in one
    contiguous tile, and split into even and odd channels.
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
def _store_pairs(
    ptr, rows, stride_c, half, rows_ok, first, second, INTERLEAVED: tl.constexpr, BLOCK_P: tl.constexpr
):
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
    x_ptr, x_rows, sxd, out_ptr, out_rows, sod, half, rows_ok,
    cos1, cos2, sin1, sin2,
    INTERLEAVED: tl.constexpr, BACKWARD: tl.constexpr, BLOCK_P: tl.constexpr,
):
    """Rotate one block of heads, ``out = R x`` pair by pair (``R^T x`` for ``BACKWARD``), in float32.

    ``x_rows``, ``out_rows`` and ``rows_ok`` are ``[BLOCK_H, 1]`` (see
    :func:`_load_pairs`). ``cos1``, ``sin1`` act on the first member of each
    pair and ``cos2``, ``sin2`` on the second; each broadcasts to ``[BLOCK_H,
    BLOCK_P]`` (``[1, BLOCK_P]`` when all heads share the token's angles).
    """
    x1, x2 = _load_pairs(x_ptr, x_rows, sxd, half, rows_ok, INTERLEAVED, BLOCK_P)
    if BACKWARD:  # the transpose: the rotation by -theta when both members share one angle
        y1 = x1 * cos1 + x2 * sin2
        y2 = x2 * cos2 - x1 * sin1
    else:
        y1 = x1 * cos1 - x2 * sin1
        y2 = x2 * cos2 + x1 * sin2
    _store_pairs(out_ptr, out_rows, sod, half, rows_ok, y1, y2, INTERLEAVED, BLOCK_P)


@triton.jit
def _rotate_token(
    x_ptr, out_ptr, b, s, heads, half,
    sxb, sxh, sxs, sxd,
    sob, soh, sos, sod,
    cos, sin,
    INTERLEAVED: tl.constexpr, BACKWARD: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr,
):
    """Rotate every head of token ``(b, s)`` of one tensor by the same angles, ``BLOCK_H`` heads at a time."""
    head_range = tl.arange(0, BLOCK_H)
    for h0 in range(0, heads, BLOCK_H):
        h = h0 + head_range
        ok = (h < heads)[:, None]  # [BLOCK_H, 1]
        x_rows = b * sxb + s * sxs + h[:, None] * sxh  # [BLOCK_H, 1]
        out_rows = b * sob + s * sos + h[:, None] * soh
        _rotate_heads(
            x_ptr, x_rows, sxd, out_ptr, out_rows, sod, half, ok, cos, cos, sin, sin, INTERLEAVED, BACKWARD, BLOCK_P
        )


@triton.jit
def _rope_angles_kernel(
    q_ptr, qo_ptr, k_ptr, ko_ptr, pos_ptr, f_hi_ptr, f_lo_ptr,
    seq_len, q_heads, k_heads, half, offset, scale,
    sqb, sqh, sqs, sqd,
    soqb, soqh, soqs, soqd,
    skb, skh, sks, skd,
    sokb, sokh, soks, sokd,
    spb, sps,
    INTERLEAVED: tl.constexpr, BACKWARD: tl.constexpr,
    BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_P: tl.constexpr,
    SPLIT_QK: tl.constexpr,
):
    """One program per token: its angles once, then all its query and key heads.

    With ``SPLIT_QK`` the grid has a second axis of two: program ``(t, 0)``
    rotates token ``t``'s query heads and ``(t, 1)`` its key heads, each forming
    the angles itself. Without it one program does both, the keys after the
    queries.
    """
    token = tl.program_id(0).to(tl.int64)
    b = token // seq_len
    s = token % seq_len
    if pos_ptr is not None:  # a positions tensor
        pos = tl.load(pos_ptr + b * spb + s * sps).to(tl.float32)
    else:  # tokens at offset .. offset + seq_len - 1
        pos = (s + offset).to(tl.float32)
    pair = tl.arange(0, BLOCK_P)
    f_hi = tl.load(f_hi_ptr + pair, mask=pair < half, other=0.0)
    f_lo = tl.load(f_lo_ptr + pair, mask=pair < half, other=0.0)
    cos, sin = _cos_sin(pos, f_hi, f_lo)  # 2 x [BLOCK_P]
    # [1, BLOCK_P] each: one angle per pair, shared by every head
    cos = (cos * scale)[None, :]
    sin = (sin * scale)[None, :]
    which = tl.program_id(1) if SPLIT_QK else 0  # 0: queries (and keys); 1: keys
    if which == 0:
        _rotate_token(
            q_ptr, qo_ptr, b, s, q_heads, half,
            sqb, sqh, sqs, sqd, soqb, soqh, soqs, soqd,
            cos, sin, INTERLEAVED, BACKWARD, BLOCK_HQ, BLOCK_P,
        )
    if which == 1 or not SPLIT_QK:
        _rotate_token(
            k_ptr, ko_ptr, b, s, k_heads, half,
            skb, skh, sks, skd, sokb, sokh, soks, sokd,
            cos, sin, INTERLEAVED, BACKWARD, BLOCK_HK, BLOCK_P,
        )


@triton.jit
def _rope_table_kernel(
    x_ptr, out_ptr, cos_ptr, sin_ptr,
    seq_len, heads, half,
    sxb, sxh, sxs, sxd,
    sob, soh, sos, sod,
    stb, sth, sts, std,
    INTERLEAVED: tl.constexpr, BACKWARD: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr,
):
    """One program per token: every head, each with the cos and sin its table holds for it."""
    token = tl.program_id(0).to(tl.int64)
    b = token // seq_len
    s = token % seq_len
    head_range = tl.arange(0, BLOCK_H)
    for h0 in range(0, heads, BLOCK_H):
        h = h0 + head_range
        ok = (h < heads)[:, None]  # [BLOCK_H, 1]
        table_rows = b * stb + s * sts + h[:, None] * sth  # [BLOCK_H, 1]
        cos1, cos2 = _load_pairs(cos_ptr, table_rows, std, half, ok, INTERLEAVED, BLOCK_P)
        sin1, sin2 = _load_pairs(sin_ptr, table_rows, std, half, ok, INTERLEAVED, BLOCK_P)
        x_rows = b * sxb + s * sxs + h[:, None] * sxh  # [BLOCK_H, 1]
        out_rows = b * sob + s * sos + h[:, None] * soh
        _rotate_heads(
            x_ptr, x_rows, sxd, out_ptr, out_rows, sod, half, ok, cos1, cos2, sin1, sin2,
            INTERLEAVED, BACKWARD, BLOCK_P,
        )
