"""RoPE on CPU tensors near the memory limit: the rotation in blocks of rows that stay in cache.

The torch path of :func:`posenc.apply_rope`, ``x * cos + rotate(x) * sin``, runs five
operations and each allocates a tensor the size of ``x``. On a CPU most of its time goes
to allocating those temporaries and touching their fresh pages for the first time, not to
arithmetic: at ``q [1, 32, 2048, 128]`` it takes many times as long as copying ``q``.

:func:`rotate_blocked` computes the same numbers block by block, each block about a
mebibyte of rows taken in ``x``'s memory order, with scratch buffers that each thread
keeps from call to call, and the result written straight into the output (a given
``out``, ``x`` itself, or one new tensor). For the ``"half"`` layout, per block::

    out = x * cos                    # straight into the output
    swapped = cat(x2, x1)            # into the scratch buffer: (x1, x2) -> (x2, x1)
    swapped *= sin_signed            # sin with its first half negated, made once per call
    out += swapped

and for ``"interleaved"`` the swap exchanges the two channels of each pair (a
``gather``) and ``sin_signed`` negates every even channel. Negating is exact, so
``x2 * (-s)`` is ``(-x2) * s`` to the bit, and the products and the sum are the
torch path's, in the same dtype and order: the results equal it bit for bit. There is
deliberately no fused multiply-add (``addcmul_`` is one on AVX2 and AVX-512 CPUs, and
rounds once where the torch path rounds twice). The swap, whose rows are only half a
head wide, costs about as much as two of the other passes: four passes over a block that
sits in cache, one of them reading ``x`` from memory and writing the output, is what
eager torch operations allow.

A tensor of at most :data:`SMALL_ELEMENTS` elements (a decoding step) is one block, and
:func:`rotate_small` rotates it in five operations (``roll`` swaps the halves) whose
temporaries are small enough to come from the allocator's cache.

Products are formed in the promoted dtype of ``x`` and the tables (a bfloat16 ``x``
with float32 tables in float32, rounded once into the output), as on the torch path.
The caller checks the arguments; :func:`blocked_eligible` says when this path applies.
"""

from __future__ import annotations

import threading

import torch

from .ops import apply_rotation, join_rotated

#: Elements of ``x`` per block and thread (1 MiB of float32): a block's x, output, scratch and tables stay
#: in the last-level cache, and the blocks are few enough that the Python loop around them costs little.
BLOCK_ELEMENTS = 1 << 18
#: Up to this many elements, ``x`` is one block whose temporaries stay small and cached: no loop is needed.
SMALL_ELEMENTS = 1 << 14


def blocked_eligible(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> bool:
    """Whether the CPU path may run: CPU tensors, no autograd, not traced or compiled, one table dtype.

    Writing into buffers with ``out=`` is not differentiable, so a call that
    autograd must record (``x``, ``cos`` or ``sin`` requires grad) takes the
    differentiable torch path, as do tracing and ``torch.compile``, which see
    through the torch operations better than through a Python loop.
    """
    if not (x.is_cpu and cos.is_cpu and sin.is_cpu) or x.layout != torch.strided or cos.dtype != sin.dtype:
        return False
    if torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad):
        return False
    if torch.jit.is_tracing() or torch.compiler.is_compiling() or not x.numel():
        return False
    return not torch.overrides.has_torch_function((x, cos, sin))  # subclasses keep their own semantics


def rotate(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    *,
    backend: str = "auto",
    inplace: bool = False,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """The rotation of checked arguments: the CPU path for CPU tensors, else the torch operations.

    ``backend="auto"`` and ``"cpu"`` take the CPU path where :func:`blocked_eligible`
    holds: :func:`rotate_small` up to :data:`SMALL_ELEMENTS` elements (a decoding
    step), :func:`rotate_blocked` above. ``"torch"``, and calls the CPU path cannot
    take (autograd, tracing, other devices under ``"auto"``), run the torch
    operations, whose result is copied into ``out`` if one is given.

    Raises:
        ValueError: If ``backend="cpu"`` and ``x`` is not on the CPU.
    """
    if backend != "torch" and blocked_eligible(x, cos, sin):
        if x.numel() <= SMALL_ELEMENTS:
            return rotate_small(x, cos, sin, layout, inplace=inplace, out=out)
        return rotate_blocked(x, cos, sin, layout, inplace=inplace, out=out)
    if backend == "cpu" and not x.is_cpu:
        raise ValueError(f"backend='cpu' rotates CPU tensors, got x on {x.device}; use backend='auto' or 'torch'")
    if out is None:
        return apply_rotation(x, cos, sin, layout, inplace)
    return out.copy_(apply_rotation(x, cos, sin, layout))  # recorded by autograd like any in-place copy


def rotate_small(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    *,
    inplace: bool = False,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """The CPU path for one small block (a decoding step): five operations, the torch path's numbers.

    ``roll`` (``"half"``) or a ``flip`` of each pair (``"interleaved"``) swaps the
    channels in one operation, the sign goes into ``sin``, and the products and
    the sum are the torch path's. Arguments as :func:`rotate_blocked`.
    """
    rotary_dim = cos.shape[-1]
    part = x[..., :rotary_dim] if rotary_dim < x.shape[-1] else x
    if layout == "half":
        swapped = torch.roll(part, rotary_dim // 2, -1)  # (x1, x2) -> (x2, x1)
    else:
        swapped = part.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)  # (a, b) -> (b, a) in each pair
    sin_signed = sin * _signs(layout, rotary_dim, sin.dtype)  # exact: a sign flip
    compute = torch.promote_types(x.dtype, cos.dtype)
    if compute == swapped.dtype:
        product = swapped.mul_(sin_signed)  # rotate(x) * sin, in the buffer roll made
    else:
        product = swapped * sin_signed
    if compute == x.dtype and (inplace or out is not None):  # x * cos straight into the output
        dst = part if inplace else (out if part is x else out[..., :rotary_dim])
        torch.mul(part, cos, out=dst).add_(product)
        return _finish(x, None, rotary_dim, inplace, out)
    rotated = (part * cos).add_(product)  # x * cos + rotate(x) * sin, then rounded once to x's dtype
    return _finish(x, rotated if rotated.dtype == x.dtype else rotated.to(x.dtype), rotary_dim, inplace, out)


def _finish(x, rotated: torch.Tensor | None, rotary_dim: int, inplace: bool, out: torch.Tensor | None) -> torch.Tensor:
    """The first ``r`` channels, ``rotated`` (None: written there already), put where the call wants them.

    Into ``x``, into ``out`` (the channels past ``r`` copied from ``x``), or a new tensor.
    """
    if out is None:
        return x if rotated is None else join_rotated(x, rotated, inplace)
    if rotated is not None:
        out[..., :rotary_dim].copy_(rotated)
    if rotary_dim < x.shape[-1]:
        out[..., rotary_dim:].copy_(x[..., rotary_dim:])  # channels past rotary_dim pass through
    return out


# Sign patterns, one per (layout, rotary_dim, dtype): a model uses one or two.
_SIGNS: dict[tuple, torch.Tensor] = {}


def _signs(layout: str, rotary_dim: int, dtype: torch.dtype) -> torch.Tensor:
    """``[r]`` of -1 and +1: the channels whose partner enters with a minus sign get -1."""
    key = (layout, rotary_dim, dtype)
    signs = _SIGNS.get(key)
    if signs is None:
        signs = torch.ones(rotary_dim, dtype=dtype)
        if layout == "half":
            signs[: rotary_dim // 2] = -1.0
        else:
            signs[0::2] = -1.0
        if len(_SIGNS) >= 64:  # bounded
            _SIGNS.clear()
        _SIGNS[key] = signs
    return signs


def _pair_swap_index(rotary_dim: int) -> torch.Tensor:
    """``[r]`` indices that exchange the channels of each interleaved pair: 1, 0, 3, 2, ..."""
    index = _SIGNS.get(("index", rotary_dim))
    if index is None:
        index = _SIGNS[("index", rotary_dim)] = torch.arange(rotary_dim).view(-1, 2).flip(-1).reshape(rotary_dim)
    return index


def _pieces(groups: list[tuple], split) -> list[tuple]:
    """``split(view)`` of every view of every group, zipped per group; a view met before is split once.

    A broadcast table is one view object in every group, so its pieces are made once.
    """
    done: dict[int, tuple] = {}
    pieces = []
    for group in groups:
        for v in group:
            if id(v) not in done:
                done[id(v)] = split(v)
        pieces += zip(*(done[id(v)] for v in group), strict=True)
    return pieces


def _blocks(tensors: list[torch.Tensor], strides: tuple[int, ...], target_rows: int) -> list[tuple]:
    """Views of every tensor, block by block, the blocks following ``x``'s memory order.

    All tensors share one shape ``[*lead, last]`` (the last dims may differ). The lead
    dims are reordered by ``x``'s strides (outermost in memory first); the innermost
    dims that hold at most ``target_rows`` rows together stay whole, the next one is
    split into pieces of that many rows, and the dims outside it are taken one index
    at a time. ``unbind`` and ``split`` make the views in C++; along a broadcast dim
    (stride 0, a table shared by the heads) one view serves every index.
    """
    n = len(strides)
    order = sorted(range(n), key=lambda i: -strides[i])  # outermost in memory first (sort is stable)
    groups = _pieces([tuple(tensors)], lambda t: (t.permute(*order, n),))  # [*lead in memory order, last]
    shape = groups[0][0].shape[:-1]
    rows, level = 1, n - 1
    while level >= 0 and rows * shape[level] <= target_rows:
        rows *= shape[level]
        level -= 1
    if level < 0:  # everything fits one block
        return groups
    for _ in range(level):  # the dims outside the split one: one index at a time
        groups = _pieces(groups, lambda v: v.unbind(0) if v.stride(0) else (v[0],) * v.shape[0])
    step = max(1, target_rows // rows)
    return _pieces(groups, lambda v: v.split(step, 0))


# Scratch buffers, one set per thread (a call never shares them), grown to the largest block seen.
_SCRATCH = threading.local()


def _scratch(slot: str, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
    """A reused buffer of ``shape``: its pages were touched by an earlier call, so writing it costs no page faults."""
    buffers = _SCRATCH.__dict__.setdefault("buffers", {})
    key = (slot, dtype, torch.is_inference_mode_enabled())  # an inference tensor cannot be written outside the mode
    numel = shape.numel()
    buffer = buffers.get(key)
    if buffer is None or buffer.numel() < numel:
        buffer = buffers[key] = torch.empty(numel, dtype=dtype)
    return buffer[:numel].view(shape)


def rotate_blocked(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    *,
    inplace: bool = False,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`posenc.apply_rope`'s rotation in cache-sized blocks, bit for bit the torch path's numbers.

    Trusts its arguments: :func:`posenc.apply_rope` has checked them, and
    :func:`blocked_eligible` holds.

    Args:
        x: ``[..., s, d]`` on the CPU, any strides.
        cos: Broadcastable to ``x`` but for the last dim ``r`` (``r <= d``, even).
        sin: Same shape and dtype as ``cos``.
        layout: ``"half"`` or ``"interleaved"``.
        inplace: Write into ``x`` (its first ``r`` channels) and return it.
        out: A tensor of ``x``'s shape and dtype, not overlapping ``x`` or the
            tables, to write into and return; by default a new tensor laid out as
            the torch path lays out its result.

    Returns:
        ``out``, ``x`` (in place) or a new tensor, rotated.
    """
    rotary_dim, head_dim = cos.shape[-1], x.shape[-1]
    half = rotary_dim // 2
    compute = torch.promote_types(x.dtype, cos.dtype)
    if inplace:
        out = x
    elif out is None:  # the torch path's layout: x's strides, or contiguous as torch.cat makes it (partial rotary)
        out = torch.empty_like(
            x, memory_format=torch.preserve_format if rotary_dim == head_dim else torch.contiguous_format
        )
    sin_signed = sin * _signs(layout, rotary_dim, sin.dtype)  # exact: a sign flip, table-sized
    part = x[..., :rotary_dim] if rotary_dim < head_dim else x
    # x, out, then x's halves for the swap, then the channels that pass through; the tables go third and fourth
    tensors = [part, part if inplace else out[..., :rotary_dim]]
    if layout == "half":
        tensors += [part[..., half:], part[..., :half]]
    passes = rotary_dim < head_dim and not inplace
    if passes:
        tensors += [x[..., rotary_dim:], out[..., rotary_dim:]]
    threads = min(torch.get_num_threads(), 8)  # each thread's share of a block stays in cache; at most 8 MiB kept
    target_rows = max(1, BLOCK_ELEMENTS * threads // head_dim)
    if x.numel() <= target_rows * head_dim:  # one block: the tables broadcast as they are
        blocks = [(*tensors[:2], cos, sin_signed, *tensors[2:])]
    else:
        lead = x.shape[:-1]
        tables = [cos.expand(*lead, rotary_dim), sin_signed.expand(*lead, rotary_dim)]
        blocks = _blocks([*tensors[:2], *tables, *tensors[2:]], x.stride()[:-1], target_rows)
    _rotate_blocks(blocks, layout, x.dtype, compute, overwrites=inplace, passes=passes)
    return out


def _rotate_blocks(
    blocks: list[tuple], layout: str, dtype: torch.dtype, compute: torch.dtype, *, overwrites: bool, passes: bool
) -> None:
    """The loop of :func:`rotate_blocked`: each block is ``(x, out, cos, sin_signed, [x2, x1], [x_pass, out_pass])``.

    ``overwrites``: ``out`` is ``x``. ``passes``: copy the channels past ``r``.
    """
    shape = blocks[0][0].shape  # the largest block; later ones take a prefix of the buffers
    direct = compute == dtype  # x * cos can go straight into the output
    swapped = _scratch("swap", shape, compute if layout == "half" else dtype)  # cat converts, gather does not
    product = swapped if swapped.dtype == compute else _scratch("product", shape, compute)
    acc = None if direct else _scratch("acc", shape, compute)
    index = None if layout == "half" else _pair_swap_index(shape[-1])  # [r]
    overwrites = overwrites and direct  # x * cos lands in x: swap x's channels before it does
    for block in blocks:
        xb, ob, cb, sb = block[:4]
        n = xb.shape[0]
        sw, pr = (swapped, product) if n == len(swapped) else (swapped[:n], product[:n])
        dst = ob if direct else (acc if n == len(acc) else acc[:n])
        if not overwrites:  # first: the op that reads x's block from memory also writes the output's
            torch.mul(xb, cb, out=dst)  # x * cos
        if layout == "half":
            torch.cat(block[4:6], dim=-1, out=sw)  # (x1, x2) -> (x2, x1)
        else:
            torch.gather(xb, -1, index.expand(xb.shape), out=sw)  # (a, b) -> (b, a) in each pair
        if overwrites:
            torch.mul(xb, cb, out=dst)  # x * cos
        torch.mul(sw, sb, out=pr)  # rotate(x) * sin, the sign from sin_signed
        dst.add_(pr)
        if not direct:
            ob.copy_(dst)  # rounded once to x's dtype
        if passes:
            block[-1].copy_(block[-2])  # channels past rotary_dim pass through
