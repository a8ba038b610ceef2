"""Timing: CUDA events on a GPU, ``torch.utils.benchmark`` on the CPU, and the copy ceiling.

On a GPU each call is timed with CUDA events, after warm-up, with the L2 cache evicted
between calls (or the inputs rotated among enough sets to exceed it), and the median of
many calls is reported. Without a GPU: ``torch.utils.benchmark``, the median of blocked
runs. A large device-to-device copy, timed the same way (:func:`measure_copy`), is the
bandwidth a kernel can actually reach.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils import benchmark as torch_benchmark

from .._checks import check_positive_int
from .check import standard_normal

_MAX_INPUT_BYTES = 4 * 2**30  # at most 4 GiB of rotated input sets


def cache_bytes(device) -> int:
    """Size of the last-level cache in front of ``device``'s memory (L2 on a GPU, L3 on a CPU), in bytes.

    Args:
        device: ``"cuda"``, ``"cpu"`` or a ``torch.device``.

    Returns:
        Bytes; 50 MiB for a GPU that does not report its L2, 32 MiB for a CPU
        whose cache sizes cannot be read.
    """
    device = torch.device(device)
    if device.type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 * 2**20))
    for index in (3, 2):
        path = Path(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size")
        if path.exists():
            text = path.read_text().strip()
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
            return int(text.rstrip("KMG")) * scale
    return 32 * 2**20


@dataclass
class Timing:
    """Median and quartiles of one measurement, in milliseconds."""

    median_ms: float
    q25_ms: float
    q75_ms: float
    runs: int
    host_us_per_call: float | None = None


def _warm_up_cuda(fn: Callable, sets: Sequence[tuple], warmup_s: float) -> float:
    """Call ``fn`` until ``warmup_s`` has passed (at least 5 calls); return the seconds per call."""
    fn(*sets[0])  # compile, autotune, fill caches of tables
    torch.cuda.synchronize()
    start = time.perf_counter()
    calls = 0
    while time.perf_counter() - start < warmup_s or calls < 5:
        fn(*sets[calls % len(sets)])
        calls += 1
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls


def _host_us_per_call(fn: Callable, sets: Sequence[tuple], reps: int) -> float:
    """Back-to-back calls as a Python loop issues them, host dispatch included: microseconds per call."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(reps):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e6


def time_cuda(
    fn: Callable, sets: Sequence[tuple], *, flush: torch.Tensor | None, warmup_s: float, run_s: float, host: bool
) -> Timing:
    """CUDA events around each call, after warm-up; the cache flushed (or inputs rotated) between calls.

    Args:
        fn: Called as ``fn(*sets[i % len(sets)])``.
        sets: Input sets, rotated from call to call.
        flush: A buffer overwritten before each call to evict L2 (not timed), or None.
        warmup_s: Seconds of warm-up calls.
        run_s: Seconds of timed calls (30 to 1000 calls).
        host: Also time back-to-back calls through the Python loop.

    Returns:
        The :class:`Timing`.
    """
    per_call = _warm_up_cuda(fn, sets, warmup_s)
    reps = int(min(1000, max(30, run_s / max(per_call, 1e-6))))
    # GPU clock cycles to idle before each timed call, longer than the host needs to queue it (about 2 GHz).
    sleep_cycles = int(min(2_000_000, max(100_000, 3e9 * per_call)))
    begins = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        if flush is not None:
            flush.fill_(i)  # evict the inputs from L2 (not timed)
        torch.cuda._sleep(sleep_cycles)  # keep the GPU busy while the host queues the call
        begins[i].record()
        fn(*sets[i % len(sets)])
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(b.elapsed_time(e) for b, e in zip(begins, ends, strict=True))
    host_us = _host_us_per_call(fn, sets, reps) if host else None
    quartiles = statistics.quantiles(times, n=4)
    return Timing(statistics.median(times), quartiles[0], quartiles[2], reps, host_us)


def time_cpu(fn: Callable, sets: Sequence[tuple], *, run_s: float) -> Timing:
    """``torch.utils.benchmark``: blocked runs after warm-up, the median over blocks.

    Args:
        fn: Called as ``fn(*inputs)``, the input sets taken in turn.
        sets: Input sets.
        run_s: Least seconds of timed runs.

    Returns:
        The :class:`Timing` (per call).
    """
    cycle = itertools.cycle(sets)
    timer = torch_benchmark.Timer(
        stmt="fn(*next(cycle))", globals={"fn": fn, "cycle": cycle}, num_threads=torch.get_num_threads()
    )
    timer.timeit(1)  # warm-up
    m = timer.blocked_autorange(min_run_time=run_s)
    times = sorted(m.times)
    if len(times) >= 2:
        q25, _, q75 = statistics.quantiles(times, n=4)
    else:
        q25 = q75 = times[0]
    return Timing(m.median * 1e3, q25 * 1e3, q75 * 1e3, m.number_per_run * len(m.times))


def timed(
    fn: Callable, make_set: Callable[[], tuple], set_bytes: int, device, *, run_s: float, host: bool = False
) -> Timing:
    """Time ``fn`` over input sets whose total exceeds twice the cache (or flush it when they cannot).

    Args:
        fn: The implementation, called as ``fn(*make_set())``.
        make_set: Makes one fresh input set.
        set_bytes: Bytes of one input set.
        device: Where ``fn`` runs.
        run_s: Seconds of timed runs.
        host: On a GPU, also time back-to-back calls through the Python loop.

    Returns:
        The :class:`Timing`.
    """
    device = torch.device(device)
    cache = cache_bytes(device)
    n_sets = max(2, min(64, math.ceil(2 * cache / max(set_bytes, 1)) + 1))
    n_sets = max(1, min(n_sets, int(_MAX_INPUT_BYTES // max(set_bytes, 1))))
    sets = [make_set() for _ in range(n_sets)]
    if device.type == "cuda":
        flush = None
        if n_sets * set_bytes < 2 * cache:
            flush = torch.empty(2 * cache // 4, dtype=torch.int32, device=device)
        return time_cuda(fn, sets, flush=flush, warmup_s=0.1, run_s=run_s, host=host)
    return time_cpu(fn, sets, run_s=run_s)


def measure_copy(device, nbytes: int | None = None, *, run_s: float = 0.3) -> dict:
    """Bandwidth of a large device-to-device copy: bytes read plus bytes written, over the median time.

    Args:
        device: ``"cuda"``, ``"cpu"`` or a ``torch.device``.
        nbytes: Size of the buffer copied; default 1 GiB on a GPU and 256 MiB
            on the CPU, far beyond the last-level cache.
        run_s: Seconds of timed runs.

    Returns:
        ``{"bytes", "ms", "gbps"}`` with ``bytes = 2 * nbytes``.

    Raises:
        ValueError: If ``nbytes`` is not an int >= 1.
    """
    device = torch.device(device)
    if nbytes is None:
        nbytes = 2**30 if device.type == "cuda" else 2**28
    check_positive_int("nbytes", nbytes)
    numel = nbytes // 2  # bfloat16 elements
    generator = torch.Generator(device=device).manual_seed(0)
    src = standard_normal((numel,), torch.bfloat16, device, generator)
    dst = torch.empty_like(src)
    if device.type == "cuda":
        timing = time_cuda(lambda s: dst.copy_(s), [(src,)], flush=None, warmup_s=0.1, run_s=run_s, host=False)
    else:
        timing = time_cpu(lambda s: dst.copy_(s), [(src,)], run_s=run_s)
    moved = 2 * numel * 2
    return {"bytes": moved, "ms": timing.median_ms, "gbps": moved / timing.median_ms / 1e6}
