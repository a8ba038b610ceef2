"""The bytes model: the fewest bytes an operation must move, and what eager code actually moves.

Every operation timed here does a few floating-point operations per element and is limited
by memory traffic, so its floor is the fewest bytes it must move (each input read once,
each output written once) divided by the memory bandwidth. :func:`rope_bytes`,
:func:`sinusoidal_add_bytes` and :func:`alibi_bias_bytes` give those counts;
:func:`count_traffic` counts what an eager program moves, operation by operation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .._checks import check_positive_int

#: Peak memory bandwidth from the vendors' datasheets, bytes per second: leads, not measurements.
DATASHEET_BANDWIDTH = {
    "H100 SXM (HBM3)": 3.35e12,
    "H100 PCIe (HBM2e)": 2.0e12,
    "H200 SXM (HBM3e)": 4.8e12,
}

# Operations that move no bytes of their own: allocations, detaching and reading one scalar.
_MOVES_NOTHING = frozenset(
    ("empty", "empty_like", "empty_strided", "new_empty", "detach", "alias", "lift_fresh", "_local_scalar_dense")
)
# Operations that overwrite their first argument without reading it.
_WRITE_ONLY_DESTINATION = frozenset(("copy_", "fill_", "zero_"))


def _check_counts(**counts: int) -> None:
    for name, value in counts.items():
        check_positive_int(name, value)


def rope_bytes(
    batch: int, seq_len: int, q_heads: int, kv_heads: int, head_dim: int, *, dtype: torch.dtype = torch.bfloat16
) -> int:
    """Fewest bytes a RoPE call must move: queries and keys read once and written once.

    The positions and frequencies (a few hundred bytes per token at most) and
    any cos/sin table are left out: a fused kernel forms the angles in
    registers, so the table is not part of the operation's minimum.

    Args:
        batch: Sequences ``b``, >= 1.
        seq_len: Tokens per sequence ``s``, >= 1.
        q_heads: Query heads, >= 1.
        kv_heads: Key heads, >= 1.
        head_dim: Channels per head ``d``, >= 1.
        dtype: Element type of ``q`` and ``k``.

    Returns:
        ``2 * b * s * (q_heads + kv_heads) * d * element_size``.

    Raises:
        ValueError: If a count is not an int >= 1.
    """
    _check_counts(batch=batch, seq_len=seq_len, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim)
    return 2 * batch * seq_len * (q_heads + kv_heads) * head_dim * dtype.itemsize


def sinusoidal_add_bytes(batch: int, seq_len: int, dim: int, dtype: torch.dtype = torch.bfloat16) -> int:
    """Fewest bytes of ``x + PE[:s]``: ``x`` read, the table rows read once, the sum written.

    Args:
        batch: Sequences ``b``, >= 1.
        seq_len: Tokens per sequence ``s``, >= 1.
        dim: Model dimension, >= 1.
        dtype: Element type of ``x`` (and of the table rows it reads).

    Returns:
        ``(2 * b * s * dim + s * dim) * element_size``.

    Raises:
        ValueError: If a count is not an int >= 1.
    """
    _check_counts(batch=batch, seq_len=seq_len, dim=dim)
    return (2 * batch * seq_len * dim + seq_len * dim) * dtype.itemsize


def alibi_bias_bytes(num_heads: int, q_len: int, k_len: int, dtype: torch.dtype = torch.bfloat16) -> int:
    """Fewest bytes of building ALiBi's bias ``[h, q_len, k_len]``: written once, nothing read.

    Args:
        num_heads: Heads, >= 1.
        q_len: Queries, >= 1.
        k_len: Keys, >= 1.
        dtype: Element type of the bias.

    Returns:
        ``num_heads * q_len * k_len * element_size``.

    Raises:
        ValueError: If a count is not an int >= 1.
    """
    _check_counts(num_heads=num_heads, q_len=q_len, k_len=k_len)
    return num_heads * q_len * k_len * dtype.itemsize


@dataclass(frozen=True)
class OpTraffic:
    """Bytes one ATen operation reads and writes."""

    op: str
    read: int
    written: int


def _distinct_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements a tensor shows (broadcast, stride-0 dims counted once)."""
    n = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            n *= size
    return n * t.element_size() if t.numel() else 0


def _op_traffic(func, args: tuple, kwargs: dict, out: object) -> OpTraffic | None:
    """What one dispatched operation read and wrote; None when it moved nothing."""
    name = str(func.overloadpacket.__name__) if hasattr(func, "overloadpacket") else str(func)
    if func.is_view or name in _MOVES_NOTHING:
        return None
    inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if name in _WRITE_ONLY_DESTINATION and inputs:
        inputs = inputs[1:]
    outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
    read = sum(_distinct_bytes(t) for t in inputs)
    written = sum(_distinct_bytes(t) for t in outputs)
    return OpTraffic(f"aten.{name}", read, written) if read or written else None


class _TrafficLog(TorchDispatchMode):
    """Runs every operation and appends its :class:`OpTraffic` to ``log``."""

    def __init__(self, log: list[OpTraffic]) -> None:
        super().__init__()
        self.log = log

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        traffic = _op_traffic(func, args, kwargs, out)
        if traffic is not None:
            self.log.append(traffic)
        return out


def count_traffic(fn: Callable, *args, **kwargs) -> tuple[object, list[OpTraffic]]:
    """Run ``fn`` and count the bytes each ATen operation it dispatches reads and writes.

    The model of an eager program: every operation reads each tensor
    argument once and writes each output once. View operations (slices,
    transposes, ``unsqueeze``, ``expand``) and allocations move nothing;
    ``copy_``, ``fill_`` and ``zero_`` do not read their destination. The
    sum is what the program moves when nothing is fused or cached; a fused
    kernel that reads each input once moves the minimum of
    :func:`rope_bytes` instead.

    Args:
        fn: Any callable built from torch operations.
        *args: Passed to ``fn``.
        **kwargs: Passed to ``fn``.

    Returns:
        ``(result, ops)``: what ``fn`` returned and one :class:`OpTraffic`
        per operation that moved bytes, in the order they ran.
    """
    log: list[OpTraffic] = []
    with _TrafficLog(log):
        result = fn(*args, **kwargs)
    return result, log
