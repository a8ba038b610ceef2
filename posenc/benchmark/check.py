"""Correct before timed: float64 references, poisoned outputs, the relative error.

Each implementation first runs once on random inputs (never zeros) and is compared with a
float64 reference by ``||out - ref|| / ||ref||``. Every uninitialised tensor it allocates
is filled with NaN first (:func:`poisoned_allocations`), and so is freed memory, for
compiled code that allocates outside the dispatcher (:func:`poison_freed`): an element it
never writes shows up as NaN and fails the check.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .._checks import check_angle_dtype
from ..rope.rotary import apply_rope, cos_sin_from_inv_freq

#: Largest ``||out - ref|| / ||ref||`` accepted against the float64 reference, per dtype.
TOLERANCE = {torch.float32: 1e-3, torch.float16: 5e-3, torch.bfloat16: 1e-2}

# Factories that hand out uninitialised memory.
_FACTORIES = frozenset(("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"))


def standard_normal(shape: Sequence[int], dtype: torch.dtype, device, generator: torch.Generator) -> torch.Tensor:
    """Random inputs, never zeros: standard normal values drawn in float32, then cast to ``dtype``.

    Args:
        shape: Shape of the result.
        dtype: Element type of the result.
        device: Where to allocate.
        generator: Seeded generator on ``device``.

    Returns:
        Tensor of ``shape`` and ``dtype`` on ``device``.
    """
    return torch.randn(shape, generator=generator, device=device).to(dtype)


def synchronize(device) -> None:
    """Wait until ``device`` has finished its queued work (a no-op off CUDA)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def poison_freed(like: Iterable[torch.Tensor], device) -> None:
    """Fill freed memory with NaN where the next outputs will probably be allocated.

    Blocks the size of each tensor in ``like`` are filled with NaN and released:
    the caching allocator tends to hand the same blocks to the next allocations
    of those sizes. This reaches allocations made outside PyTorch's dispatcher
    (compiled code), which :func:`poisoned_allocations` cannot see.

    Args:
        like: Tensors with the shapes and dtypes of the outputs to expect.
        device: Where the outputs will be allocated.
    """
    blocks = [torch.full(t.shape, float("nan"), dtype=t.dtype, device=device) for t in like]
    del blocks


class _PoisonAllocations(TorchDispatchMode):
    """Fills every uninitialised floating tensor a factory returns with NaN."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(func, "overloadpacket", None) is not None and func.overloadpacket.__name__ in _FACTORIES:
            if isinstance(out, torch.Tensor) and out.is_floating_point():
                out.fill_(float("nan"))
        return out


def poisoned_allocations() -> TorchDispatchMode:
    """A context in which every uninitialised floating tensor torch allocates is filled with NaN.

    ``torch.empty``, ``empty_like``, ``empty_strided`` and ``new_empty`` are
    intercepted through a ``TorchDispatchMode``: a kernel that allocates its
    output that way and leaves an element unwritten returns NaN there,
    whatever the memory held before, and fails the check.

    Returns:
        A context manager.
    """
    return _PoisonAllocations()


def call_poisoned(fn: Callable, args: Sequence, like: Iterable[torch.Tensor], device, *, traceable: bool = True):
    """Call ``fn(*args)`` over poisoned memory and wait for the device.

    Freed blocks shaped like ``like`` are filled with NaN first
    (:func:`poison_freed`); when ``traceable``, the call also runs under
    :func:`poisoned_allocations` (compiled code may not run under a dispatch mode).

    Args:
        fn: The implementation under test.
        args: Its inputs.
        like: Tensors shaped like its outputs.
        device: Where it runs.
        traceable: Whether ``fn`` may run under a ``TorchDispatchMode``.

    Returns:
        What ``fn`` returned.
    """
    poison_freed(like, device)
    if traceable:
        with poisoned_allocations():
            out = fn(*args)
    else:
        out = fn(*args)
    synchronize(device)
    return out


def relative_error(outputs: Sequence[torch.Tensor], references: Sequence[torch.Tensor]) -> float:
    """``||out - ref|| / ||ref||`` over several tensors together, in float64; NaN if any output is not finite.

    Args:
        outputs: Tensors of any floating dtype.
        references: Float64 tensors of the same shapes. Infinite entries
            (a mask) must be matched exactly and are left out of the norms.

    Returns:
        A float; ``nan`` when an output holds NaN or an infinity the
        reference does not have.
    """
    num = den = 0.0
    for out, ref in zip(outputs, references, strict=True):
        out = out.to(torch.float64)
        finite = torch.isfinite(ref)
        if not torch.equal(torch.isfinite(out), finite):
            return float("nan")
        if not finite.all():  # a mask: the infinities must match exactly, the rest is compared
            if not torch.equal(out[~finite], ref[~finite]):
                return float("nan")
            out, ref = out[finite], ref[finite]
        num += (out - ref).pow(2).sum().item()
        den += ref.pow(2).sum().item()
    return math.sqrt(num / den) if den else math.sqrt(num)


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

    The package's own code in float64: cos and sin from
    :func:`posenc.cos_sin_from_inv_freq` (the one place RoPE's angles are
    formed), then :func:`posenc.apply_rope`'s torch path on ``q`` upcast
    to float64.

    Args:
        q: ``[..., s, d]``, any floating dtype (upcast to float64).
        inv_freq: ``[d/2]`` frequencies.
        positions: ``[s]``, or any shape that broadcasts against
            ``q.shape[:-1]``.
        layout: ``"half"`` or ``"interleaved"``.
        attention_factor: Multiplies cos and sin.
        angle_dtype: Dtype in which ``position * theta_i`` and its cos and sin
            are formed; float64 for the reference, float32 to see what the usual
            float32 computation costs.

    Returns:
        Float64 tensor of ``q``'s shape.

    Raises:
        ValueError: For an unknown layout, an ``angle_dtype`` other than float32
            or float64, or ``positions`` that do not broadcast against ``q``.
    """
    check_angle_dtype(angle_dtype)
    cos, sin = cos_sin_from_inv_freq(
        positions.to(q.device), inv_freq.to(q.device, angle_dtype), layout=layout, attention_factor=attention_factor
    )  # [..., d] each, in angle_dtype
    return apply_rope(q.to(torch.float64), cos.to(torch.float64), sin.to(torch.float64), layout=layout, backend="torch")
