"""Timing position encodings: a harness that checks before it times, and a bytes model.

The method, in the order the harness applies it:

1. **Count bytes first.** Every operation here does a few floating-point
   operations per element and is limited by memory traffic, so its floor is
   the fewest bytes it must move (each input read once, each output written
   once) divided by the memory bandwidth. :func:`rope_bytes`,
   :func:`sinusoidal_add_bytes` and :func:`alibi_bias_bytes` give those counts.
2. **Measure the ceiling in the same run.** A large device-to-device copy
   (bytes read plus bytes written, over its time) is the bandwidth a kernel
   can actually reach; achieved bandwidth is reported as a fraction of it.
3. **Correct before timed.** Each implementation first runs once on random
   inputs (never zeros) and is compared with a float64 reference by
   ``||out - ref|| / ||ref||``; every uninitialised tensor it allocates is
   filled with NaN first (and freed memory too, for compiled code), so an
   element it never writes shows up as NaN. Only an implementation that
   passes is timed.
4. **Time properly.** On a GPU: CUDA events around each call, after warm-up,
   with the L2 cache evicted between calls (or the inputs rotated among
   enough sets to exceed it), and the median of many calls. On a machine
   without a GPU: ``torch.utils.benchmark`` (the median of blocked runs).

Results are one JSON-serialisable dict (device name, torch/triton/CUDA
versions, date, dtype, shapes, and one record per operation, implementation
and shape), written by ``python -m posenc.benchmark --out PATH``. Timings are
measurements to report, never assertions to test.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import torch

from ._checks import check_choice, check_positive_int

#: Identifies the layout of the result files.
SCHEMA = "posenc-benchmark/1"

#: Peak memory bandwidth from the vendors' datasheets, bytes per second: leads, not measurements.
DATASHEET_BANDWIDTH = {
    "H100 SXM (HBM3)": 3.35e12,
    "H100 PCIe (HBM2e)": 2.0e12,
    "H200 SXM (HBM3e)": 4.8e12,
}

#: Largest ``||out - ref|| / ||ref||`` accepted against the float64 reference, per dtype.
TOLERANCE = {torch.float32: 1e-3, torch.float16: 5e-3, torch.bfloat16: 1e-2}

OPS = ("rope", "sinusoidal", "alibi")

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


# ---------------------------------------------------------------------------
# The bytes model
# ---------------------------------------------------------------------------


def _element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def rope_bytes(
    batch: int, seq_len: int, q_heads: int, kv_heads: int, head_dim: int, dtype: torch.dtype = torch.bfloat16
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
    for name, value in (("batch", batch), ("seq_len", seq_len), ("q_heads", q_heads), ("kv_heads", kv_heads),
                        ("head_dim", head_dim)):
        check_positive_int(name, value)
    return 2 * batch * seq_len * (q_heads + kv_heads) * head_dim * _element_size(dtype)


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
    for name, value in (("batch", batch), ("seq_len", seq_len), ("dim", dim)):
        check_positive_int(name, value)
    return (2 * batch * seq_len * dim + seq_len * dim) * _element_size(dtype)


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
    for name, value in (("num_heads", num_heads), ("q_len", q_len), ("k_len", k_len)):
        check_positive_int(name, value)
    return num_heads * q_len * k_len * _element_size(dtype)


# ---------------------------------------------------------------------------
# Traffic of an eager function, op by op
# ---------------------------------------------------------------------------


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
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    log: list[OpTraffic] = []

    class _Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = str(func.overloadpacket.__name__) if hasattr(func, "overloadpacket") else str(func)
            if func.is_view or name in ("empty", "empty_like", "empty_strided", "new_empty", "detach", "alias",
                                        "lift_fresh", "_local_scalar_dense"):
                return out
            inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            if name in ("copy_", "fill_", "zero_") and inputs:
                inputs = inputs[1:]
            outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            read = sum(_distinct_bytes(t) for t in inputs)
            written = sum(_distinct_bytes(t) for t in outputs)
            if read or written:
                log.append(OpTraffic(f"aten.{name}", read, written))
            return out

    with _Count():
        result = fn(*args, **kwargs)
    return result, log


# ---------------------------------------------------------------------------
# Shapes and implementations
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RopeShape:
    """One RoPE case: ``q [b, q_heads, s, d]`` and ``k [b, kv_heads, s, d]`` at positions ``offset ..``."""

    batch: int
    seq_len: int
    q_heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    offset: int = 0

    @property
    def phase(self) -> str:
        return "decode" if self.seq_len == 1 and self.offset > 0 else "prefill"


def default_rope_shapes(device_type: str = "cuda", *, quick: bool = False) -> list[RopeShape]:
    """The LLaMA-like cases: 32 query heads, 8 key/value heads, head_dim 128.

    On a GPU: batch 1 and 4 at sequence lengths 512, 4096 and 16384, and
    decoding one token after 4095 cached ones at batch 1 and 4. On the CPU
    (the fallback) and with ``quick``: shorter sequences.
    """
    check_choice("device_type", device_type, ("cuda", "cpu"))
    if device_type == "cpu":
        lengths, batches = ((128, 512) if quick else (256, 1024, 4096)), (1,)
    else:
        lengths, batches = ((512, 4096) if quick else (512, 4096, 16384)), (1, 4)
    shapes = [RopeShape(b, s) for b in batches for s in lengths]
    return shapes + [RopeShape(b, 1, offset=4095) for b in batches]


class Unavailable(Exception):
    """An implementation that cannot run here (a package or a device is missing)."""


@dataclass(frozen=True)
class RopeImpl:
    """A RoPE implementation: ``build(shape, device, dtype)`` returns ``fn(q, k) -> (q_rot, k_rot)``."""

    name: str
    label: str
    inplace: bool
    build: Callable
    traceable: bool = True  # may run under a TorchDispatchMode (compiled code may not)


def _positions(shape: RopeShape, device) -> torch.Tensor:
    return torch.arange(shape.offset, shape.offset + shape.seq_len, device=device)


def _hf_tables(shape: RopeShape, device, dtype):
    """cos and sin ``[1, s, d]`` as transformers' LLaMA rotary module returns them: float32 angles, x's dtype."""
    from .rotary import rope_cos_sin

    cos, sin = rope_cos_sin(_positions(shape, device)[None], shape.head_dim, angle_dtype=torch.float32)
    return cos.to(dtype), sin.to(dtype)  # [1, s, d]


def _build_naive(shape, device, dtype):
    from .rotary import apply_rope, rope_cos_sin

    def naive(q, k):
        positions = torch.arange(shape.offset, shape.offset + q.shape[-2], device=q.device)
        cos, sin = rope_cos_sin(positions, q.shape[-1], angle_dtype=torch.float32)  # [s, d], every call
        return apply_rope(q, cos, sin, backend="torch"), apply_rope(k, cos, sin, backend="torch")

    return naive


def _build_posenc_torch(shape, device, dtype):
    from .rotary import RotaryEmbedding

    rope = RotaryEmbedding(shape.head_dim, backend="torch", initial_len=shape.offset + shape.seq_len).to(device)
    return lambda q, k: rope(q, k, offset=shape.offset)


def _transformers_apply():
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except ImportError as exc:
        raise Unavailable("transformers is not installed") from exc
    return apply_rotary_pos_emb


def _build_transformers(shape, device, dtype):
    apply_rotary_pos_emb = _transformers_apply()
    cos, sin = _hf_tables(shape, device, dtype)
    return lambda q, k: apply_rotary_pos_emb(q, k, cos, sin)


def _build_compile(shape, device, dtype):
    try:
        eager = _transformers_apply()
    except Unavailable:
        from .rotary import apply_rope

        def eager(q, k, cos, sin):
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [1, s, d] -> [1, 1, s, d]
            return apply_rope(q, cos, sin, backend="torch"), apply_rope(k, cos, sin, backend="torch")

    torch._dynamo.reset()  # one fresh compilation per shape
    compiled = torch.compile(eager, dynamic=False, fullgraph=True)
    cos, sin = _hf_tables(shape, device, dtype)
    return lambda q, k: compiled(q, k, cos, sin)


def _require_cuda(device) -> None:
    if torch.device(device).type != "cuda":
        raise Unavailable("needs a CUDA device")


def _build_triton(inplace: bool):
    def build(shape, device, dtype):
        _require_cuda(device)
        from .triton_rope import triton_available

        if not triton_available():
            raise Unavailable("triton is not installed")
        from .rotary import RotaryEmbedding

        rope = RotaryEmbedding(shape.head_dim, backend="triton").to(device)
        return lambda q, k: rope(q, k, offset=shape.offset, inplace=inplace)

    return build


def _build_liger(shape, device, dtype):
    _require_cuda(device)
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb
    except ImportError as exc:
        raise Unavailable("liger-kernel is not installed") from exc
    cos, sin = _hf_tables(shape, device, dtype)
    return lambda q, k: liger_rotary_pos_emb(q, k, cos, sin)


#: Every RoPE implementation the harness knows, in plotting order.
ROPE_IMPLS = (
    RopeImpl("naive", "naive: cos/sin recomputed each call", False, _build_naive),
    RopeImpl("posenc_torch", "posenc eager, cached table", False, _build_posenc_torch),
    RopeImpl("transformers", "transformers apply_rotary_pos_emb", False, _build_transformers),
    RopeImpl("compile", "torch.compile of the eager path", False, _build_compile, traceable=False),
    RopeImpl("posenc_triton", "posenc Triton, fused", False, _build_triton(False)),
    RopeImpl("posenc_triton_inplace", "posenc Triton, fused, in place", True, _build_triton(True)),
    RopeImpl("liger", "Liger-Kernel RoPE (in place)", True, _build_liger),
)
_IMPL_NAMES = tuple(impl.name for impl in ROPE_IMPLS)


# ---------------------------------------------------------------------------
# Correctness: float64 reference, poisoned outputs
# ---------------------------------------------------------------------------


def _poison_freed(like: Iterable[torch.Tensor], device) -> None:
    """Fill freed memory with NaN where the next outputs will probably be allocated.

    Blocks the size of each output are filled with NaN and released: the
    caching allocator tends to hand the same blocks to the next allocations
    of those sizes. This reaches allocations made outside PyTorch's
    dispatcher (compiled code), which :func:`poisoned_allocations` cannot see.
    """
    blocks = [torch.full(t.shape, float("nan"), dtype=t.dtype, device=device) for t in like]
    del blocks


_FACTORIES = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


def poisoned_allocations():
    """A context in which every uninitialised floating tensor torch allocates is filled with NaN.

    ``torch.empty``, ``empty_like``, ``empty_strided`` and ``new_empty`` are
    intercepted through a ``TorchDispatchMode``: a kernel that allocates its
    output that way and leaves an element unwritten returns NaN there,
    whatever the memory held before, and fails the check.

    Returns:
        A context manager.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Poison(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if getattr(func, "overloadpacket", None) is not None and func.overloadpacket.__name__ in _FACTORIES:
                if isinstance(out, torch.Tensor) and out.is_floating_point():
                    out.fill_(float("nan"))
            return out

    return _Poison()


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


def _random(shape, dtype, device, generator) -> torch.Tensor:
    return torch.randn(shape, generator=generator, device=device).to(dtype)


def rope_inputs(
    shape: RopeShape, dtype: torch.dtype, device, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ``q, k`` as a projection produces them: ``[b, h, s, d]`` views of ``[b, s, h, d]`` memory.

    Args:
        shape: The case.
        dtype: Element type.
        device: Where to allocate.
        generator: Seeded generator on ``device`` (standard normal values, never zeros).

    Returns:
        ``(q [b, q_heads, s, d], k [b, kv_heads, s, d])``, non-contiguous views.
    """
    q = _random((shape.batch, shape.seq_len, shape.q_heads, shape.head_dim), dtype, device, generator)
    k = _random((shape.batch, shape.seq_len, shape.kv_heads, shape.head_dim), dtype, device, generator)
    return q.transpose(1, 2), k.transpose(1, 2)  # [b, s, h, d] -> [b, h, s, d], views


def _check_rope(fn, impl: RopeImpl, shape: RopeShape, dtype, device, generator) -> float:
    from .rotary import rope_inv_freq
    from .triton_rope import rope_reference

    q, k = rope_inputs(shape, dtype, device, generator)
    inv_freq, _ = rope_inv_freq(shape.head_dim, device=device)
    positions = _positions(shape, device)
    refs = [rope_reference(q, inv_freq, positions), rope_reference(k, inv_freq, positions)]
    _poison_freed((q, k), device)
    if impl.traceable:
        with poisoned_allocations():
            out = fn(q, k)  # an in-place implementation overwrites q and k, which are not used again
    else:
        out = fn(q, k)
    _synchronize(device)
    return relative_error(out, refs)


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


def _synchronize(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def cache_bytes(device) -> int:
    """Size of the last-level cache in front of ``device``'s memory (L2 on a GPU, L3 on a CPU), in bytes."""
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


def _time_cuda(fn, sets, *, flush: torch.Tensor | None, warmup_s: float, run_s: float, host: bool) -> Timing:
    """CUDA events around each call, after warm-up; the cache flushed (or inputs rotated) between calls."""
    n = len(sets)
    fn(*sets[0])  # compile, autotune, fill caches of tables
    torch.cuda.synchronize()
    start = time.perf_counter()
    calls = 0
    while time.perf_counter() - start < warmup_s or calls < 5:
        fn(*sets[calls % n])
        calls += 1
        torch.cuda.synchronize()
    per_call = (time.perf_counter() - start) / calls
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
        fn(*sets[i % n])
        ends[i].record()
    torch.cuda.synchronize()
    times = sorted(b.elapsed_time(e) for b, e in zip(begins, ends, strict=True))
    host_us = None
    if host:  # back-to-back calls as a Python loop issues them: host dispatch included
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(reps):
            fn(*sets[i % n])
        torch.cuda.synchronize()
        host_us = (time.perf_counter() - t0) / reps * 1e6
    quartiles = statistics.quantiles(times, n=4)
    return Timing(statistics.median(times), quartiles[0], quartiles[2], reps, host_us)


def _time_cpu(fn, sets, *, run_s: float) -> Timing:
    """``torch.utils.benchmark``: blocked runs after warm-up, the median over blocks."""
    from torch.utils import benchmark

    cycle = itertools.cycle(sets)
    timer = benchmark.Timer(stmt="fn(*next(cycle))", globals={"fn": fn, "cycle": cycle},
                            num_threads=torch.get_num_threads())
    timer.timeit(1)  # warm-up
    m = timer.blocked_autorange(min_run_time=run_s)
    times = sorted(m.times)
    if len(times) >= 2:
        q25, _, q75 = statistics.quantiles(times, n=4)
    else:
        q25 = q75 = times[0]
    return Timing(m.median * 1e3, q25 * 1e3, q75 * 1e3, m.number_per_run * len(m.times))


def _timed(fn, make_set, set_bytes: int, device, *, run_s: float, host: bool = False) -> Timing:
    """Time ``fn`` over input sets whose total exceeds twice the cache (or flush it when they cannot)."""
    device = torch.device(device)
    cache = cache_bytes(device)
    n_sets = max(2, min(64, math.ceil(2 * cache / max(set_bytes, 1)) + 1))
    n_sets = max(1, min(n_sets, int(4 * 2**30 // max(set_bytes, 1))))  # at most 4 GiB of inputs
    sets = [make_set() for _ in range(n_sets)]
    if device.type == "cuda":
        flush = None
        if n_sets * set_bytes < 2 * cache:
            flush = torch.empty(2 * cache // 4, dtype=torch.int32, device=device)
        return _time_cuda(fn, sets, flush=flush, warmup_s=0.1, run_s=run_s, host=host)
    return _time_cpu(fn, sets, run_s=run_s)


def measure_copy(device, nbytes: int | None = None, *, run_s: float = 0.3) -> dict:
    """Bandwidth of a large device-to-device copy: bytes read plus bytes written, over the median time.

    Args:
        device: ``"cuda"``, ``"cpu"`` or a ``torch.device``.
        nbytes: Size of the buffer copied; default 1 GiB on a GPU and 256 MiB
            on the CPU, far beyond the last-level cache.
        run_s: Seconds of timed runs.

    Returns:
        ``{"bytes", "ms", "gbps"}`` with ``bytes = 2 * nbytes``.
    """
    device = torch.device(device)
    if nbytes is None:
        nbytes = 2**30 if device.type == "cuda" else 2**28
    check_positive_int("nbytes", nbytes)
    numel = nbytes // 2
    generator = torch.Generator(device=device).manual_seed(0)
    src = _random((numel,), torch.bfloat16, device, generator)
    dst = torch.empty_like(src)
    if device.type == "cuda":
        timing = _time_cuda(lambda s: dst.copy_(s), [(src,)], flush=None, warmup_s=0.1, run_s=run_s, host=False)
    else:
        timing = _time_cpu(lambda s: dst.copy_(s), [(src,)], run_s=run_s)
    moved = 2 * numel * 2
    return {"bytes": moved, "ms": timing.median_ms, "gbps": moved / timing.median_ms / 1e6}


# ---------------------------------------------------------------------------
# The runs
# ---------------------------------------------------------------------------


def _record(op: str, impl: str, label: str, shape: dict, dtype, nbytes: int, **fields) -> dict:
    record = {"op": op, "impl": impl, "label": label, **shape, "dtype": str(dtype).removeprefix("torch."),
              "bytes": nbytes, "status": "ok", "reason": None, "rel_err": None, "ms": None, "ms_q25": None,
              "ms_q75": None, "runs": None, "gbps": None, "copy_fraction": None, "host_us_per_call": None}
    record.update(fields)
    return record


def _fill_timing(record: dict, timing: Timing, copy_gbps: float) -> dict:
    gbps = record["bytes"] / timing.median_ms / 1e6
    record.update(ms=timing.median_ms, ms_q25=timing.q25_ms, ms_q75=timing.q75_ms, runs=timing.runs, gbps=gbps,
                  copy_fraction=gbps / copy_gbps, host_us_per_call=timing.host_us_per_call)
    return record


def _run_case(record: dict, build, check, make_set, set_bytes, device, dtype, copy_gbps, run_s, host) -> dict:
    """Build, check against float64, then time one implementation on one shape; never raises."""
    try:
        fn = build()
    except Unavailable as exc:
        record.update(status="unavailable", reason=str(exc))
        return record
    try:
        err = check(fn)
    except Exception as exc:  # a failing implementation is reported, not fatal to the whole run
        record.update(status="failed", reason=f"{type(exc).__name__}: {exc}"[:300])
        return record
    record["rel_err"] = err if math.isfinite(err) else None  # JSON has no NaN
    if not err <= TOLERANCE[dtype]:
        record.update(status="failed", reason=f"relative error {err:.3g} > {TOLERANCE[dtype]:g} against float64")
        return record
    try:
        timing = _timed(fn, make_set, set_bytes, device, run_s=run_s, host=host)
    except Exception as exc:
        record.update(status="failed", reason=f"{type(exc).__name__} while timing: {exc}"[:300])
        return record
    return _fill_timing(record, timing, copy_gbps)


def _rope_records(shapes, impls, device, dtype, copy_gbps, run_s, progress) -> list[dict]:
    records = []
    for shape in shapes:
        nbytes = rope_bytes(shape.batch, shape.seq_len, shape.q_heads, shape.kv_heads, shape.head_dim, dtype)
        generator = torch.Generator(device=device).manual_seed(shape.seq_len * 10 + shape.batch)
        for impl in impls:
            fields = {**asdict(shape), "phase": shape.phase}
            record = _record("rope", impl.name, impl.label, fields, dtype, nbytes)
            _run_case(
                record,
                build=lambda impl=impl, shape=shape: impl.build(shape, device, dtype),
                check=lambda fn, impl=impl, shape=shape, g=generator: _check_rope(fn, impl, shape, dtype, device, g),
                make_set=lambda shape=shape, g=generator: rope_inputs(shape, dtype, device, g),
                set_bytes=nbytes // 2, device=device, dtype=dtype, copy_gbps=copy_gbps, run_s=run_s,
                host=shape.phase == "decode",
            )
            records.append(record)
            progress(_one_line(record))
        _free(device)
    return records


def _sinusoidal_records(cases, device, dtype, copy_gbps, run_s, progress) -> list[dict]:
    from .sinusoidal import SinusoidalPositionalEncoding, sinusoidal_encoding, sinusoidal_table

    records = []
    for batch, seq_len, dim in cases:
        generator = torch.Generator(device=device).manual_seed(seq_len + batch)
        nbytes = sinusoidal_add_bytes(batch, seq_len, dim, dtype)
        module = SinusoidalPositionalEncoding(dim, initial_len=seq_len).to(device).eval()

        def recompute(x):
            positions = torch.arange(x.shape[-2], device=x.device)
            return x + sinusoidal_encoding(positions, x.shape[-1], angle_dtype=torch.float32).to(x.dtype)

        def check(fn, batch=batch, seq_len=seq_len, dim=dim, generator=generator):
            x = _random((batch, seq_len, dim), dtype, device, generator)
            ref = x.to(torch.float64) + sinusoidal_table(seq_len, dim, dtype=torch.float64, device=device)
            _poison_freed((x,), device)
            with poisoned_allocations():
                out = fn(x)
            _synchronize(device)
            return relative_error([out], [ref])

        for name, label, fn in (("module", "SinusoidalPositionalEncoding (cached table)", module),
                                ("recompute", "table recomputed each call + add", recompute)):
            record = _record("sinusoidal", name, label, {"batch": batch, "seq_len": seq_len, "dim": dim,
                                                         "phase": "prefill"}, dtype, nbytes)
            _run_case(record, build=lambda fn=fn: fn, check=check,
                      make_set=lambda b=batch, s=seq_len, d=dim, g=generator: (_random((b, s, d), dtype, device, g),),
                      set_bytes=batch * seq_len * dim * _element_size(dtype), device=device, dtype=dtype,
                      copy_gbps=copy_gbps, run_s=run_s, host=False)
            records.append(record)
            progress(_one_line(record))
        _free(device)
    return records


def _alibi_records(cases, device, dtype, copy_gbps, run_s, progress) -> list[dict]:
    from .alibi import alibi_bias

    records = []
    for num_heads, q_len, k_len in cases:
        nbytes = alibi_bias_bytes(num_heads, q_len, k_len, dtype)
        offset = k_len - q_len

        def build(h=num_heads, q=q_len, k=k_len, offset=offset):
            return lambda: alibi_bias(h, q, k, causal=True, offset=offset, dtype=dtype, device=device)

        def check(fn, h=num_heads, q=q_len, k=k_len, offset=offset):
            ref = alibi_bias(h, q, k, causal=True, offset=offset, dtype=torch.float64, device=device)
            _poison_freed((ref.to(dtype),), device)
            with poisoned_allocations():
                out = fn()
            _synchronize(device)
            return relative_error([out], [ref])

        shape = {"num_heads": num_heads, "q_len": q_len, "k_len": k_len,
                 "phase": "decode" if q_len == 1 else "prefill"}
        record = _record("alibi", "posenc", "posenc alibi_bias (causal)", shape, dtype, nbytes)
        _run_case(record, build=build, check=check, make_set=tuple, set_bytes=0, device=device, dtype=dtype,
                  copy_gbps=copy_gbps, run_s=run_s, host=q_len == 1)
        records.append(record)
        progress(_one_line(record))
        _free(device)
    return records


def _free(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def device_info(device) -> dict:
    """Name and properties of ``device``, for the record.

    Args:
        device: ``"cuda"``, ``"cpu"`` or a ``torch.device``.

    Returns:
        ``{"type", "name", "cache_bytes", ...}``; on a GPU also the compute
        capability, memory and multiprocessor count, on the CPU the thread count.
    """
    device = torch.device(device)
    info = {"type": device.type, "cache_bytes": cache_bytes(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, capability=f"{props.major}.{props.minor}", memory_bytes=props.total_memory,
                    multiprocessors=props.multi_processor_count)
    else:
        name = platform.processor() or platform.machine()
        cpuinfo = Path("/proc/cpuinfo")
        if cpuinfo.exists():
            found = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.M)
            name = found.group(1).strip() if found else name
        info.update(name=name, threads=torch.get_num_threads())
    return info


def versions() -> dict:
    """Versions of Python and of the packages whose code is timed (None where not installed)."""
    from . import __version__

    return {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "triton": _version("triton"), "transformers": _version("transformers"),
            "liger_kernel": _version("liger-kernel"), "posenc": __version__}


def run_benchmark(
    device=None,
    *,
    dtype: torch.dtype | None = None,
    ops: Sequence[str] = OPS,
    rope_shapes: Sequence[RopeShape] | None = None,
    impls: Sequence[str | RopeImpl] | None = None,
    sinusoidal_cases: Sequence[tuple[int, int, int]] | None = None,
    alibi_cases: Sequence[tuple[int, int, int]] | None = None,
    quick: bool = False,
    run_s: float | None = None,
    copy_bytes: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Check, then time, every implementation on every shape; return the results as one dict.

    Args:
        device: ``"cuda"``, ``"cpu"`` or a ``torch.device``; default the GPU
            when there is one.
        dtype: Element type of the inputs; default bfloat16 on a GPU and
            float32 on the CPU.
        ops: Any of ``"rope"``, ``"sinusoidal"``, ``"alibi"``.
        rope_shapes: RoPE cases; default :func:`default_rope_shapes`.
        impls: Names from :data:`ROPE_IMPLS` to run, or :class:`RopeImpl`
            objects of your own (default: all; on the CPU all but
            ``"compile"``, whose compilation takes minutes there).
        sinusoidal_cases: ``(batch, seq_len, dim)`` triples for ``x + PE``.
        alibi_cases: ``(num_heads, q_len, k_len)`` triples for the bias.
        quick: Fewer and smaller shapes, shorter runs (a smoke test).
        run_s: Seconds of timed runs per measurement.
        copy_bytes: Size of the copy that measures the bandwidth ceiling.
        progress: Called with one line per finished measurement.

    Returns:
        The result as a dict with ``schema``, ``synthetic`` (False), ``device``, ``versions``,
        ``date`` (UTC), ``dtype``, ``method``, ``copy`` (the ceiling) and
        ``results`` (one record per operation, implementation and shape,
        with ``status`` ``"ok"``, ``"failed"`` or ``"unavailable"``).

    Raises:
        ValueError: On an unknown op or implementation name, or a dtype other
            than float32, float16 or bfloat16.
    """
    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    on_gpu = device.type == "cuda"
    dtype = dtype if dtype is not None else (torch.bfloat16 if on_gpu else torch.float32)
    if dtype not in TOLERANCE:
        raise ValueError(f"dtype must be torch.float32, torch.float16 or torch.bfloat16, got {dtype}")
    for op in ops:
        check_choice("ops", op, OPS)
    if impls is None:
        impls = [n for n in _IMPL_NAMES if on_gpu or n != "compile"]
    chosen = []
    for impl in impls:
        if not isinstance(impl, RopeImpl):
            check_choice("impls", impl, _IMPL_NAMES)
            impl = next(known for known in ROPE_IMPLS if known.name == impl)
        chosen.append(impl)
    rope_shapes = list(rope_shapes) if rope_shapes is not None else default_rope_shapes(device.type, quick=quick)
    big = (512, 4096) if quick else ((512, 4096, 16384) if on_gpu else (256, 1024))
    if sinusoidal_cases is None:
        sinusoidal_cases = [(b, s, 4096 if on_gpu else 1024) for b in ((1, 4) if on_gpu else (1,)) for s in big]
    if alibi_cases is None:
        lengths = (512, 2048, 4096) if on_gpu and not quick else (256, 1024)
        alibi_cases = [(32, s, s) for s in lengths] + [(32, 1, lengths[-1])]
    run_s = run_s if run_s is not None else (0.05 if quick else (0.3 if on_gpu else 0.2))
    progress = progress or (lambda line: None)

    copy = measure_copy(device, copy_bytes, run_s=run_s)
    progress(f"copy: {copy['bytes'] / 2**30:.2f} GiB moved, {copy['ms']:.3f} ms, {copy['gbps']:.1f} GB/s")
    results = []
    if "rope" in ops:
        results += _rope_records(rope_shapes, chosen, device, dtype, copy["gbps"], run_s, progress)
    if "sinusoidal" in ops:
        results += _sinusoidal_records(sinusoidal_cases, device, dtype, copy["gbps"], run_s, progress)
    if "alibi" in ops:
        results += _alibi_records(alibi_cases, device, dtype, copy["gbps"], run_s, progress)
    method = {
        "timer": "CUDA events per call" if on_gpu else "torch.utils.benchmark blocked_autorange",
        "statistic": "median",
        "cache": "inputs rotated over sets totalling more than twice the last-level cache, or the cache "
                 "overwritten between calls",
        "check": "float64 reference, relative error ||out - ref|| / ||ref||; tensors allocated by the "
                 "implementation filled with NaN first",
        "inputs": "standard normal; q, k as [b, h, s, d] views of [b, s, h, d] memory",
        "run_s": run_s,
        "tolerance": TOLERANCE[dtype],
    }
    return {"schema": SCHEMA, "synthetic": False, "device": device_info(device), "versions": versions(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "dtype": str(dtype).removeprefix("torch."), "method": method, "copy": copy, "results": results}


# ---------------------------------------------------------------------------
# Files, tables, figures
# ---------------------------------------------------------------------------

_REQUIRED_KEYS = ("schema", "device", "versions", "date", "dtype", "copy", "results")


def save_results(result: dict, path) -> Path:
    """Write ``result`` as indented JSON to ``path`` (folders created); return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return path


def load_results(directory="data", pattern: str = "gpu_*.json") -> list[dict]:
    """Read recorded result files, oldest first.

    Args:
        directory: Folder to search (chapter 9 passes the book's recorded
            data, ``posenc_book/data``).
        pattern: Glob pattern of the files, by default the GPU runs.

    Returns:
        One dict per file, each with a ``path`` key added; an empty list when
        no file matches.

    Raises:
        ValueError: If a file is not a result of this harness (its ``schema``
            is wrong or a required key is missing).
    """
    results = []
    for path in sorted(Path(directory).glob(pattern)):
        data = json.loads(path.read_text(encoding="utf-8"))
        missing = [key for key in _REQUIRED_KEYS if key not in data]
        if data.get("schema") != SCHEMA or missing:
            raise ValueError(
                f"{path} is not a posenc benchmark result: schema {data.get('schema')!r} (expected {SCHEMA!r}), "
                f"missing keys {missing}"
            )
        data["path"] = str(path)
        results.append(data)
    return sorted(results, key=lambda r: r["date"])


def result_label(result: dict) -> str:
    """One line naming where and when a result was measured: device, versions, date."""
    v = result["versions"]
    parts = [result["device"]["name"], f"torch {v.get('torch')}"]
    if v.get("triton"):
        parts.append(f"triton {v['triton']}")
    if v.get("cuda"):
        parts.append(f"CUDA {v['cuda']}")
    parts.append(result["date"][:10])
    label = " · ".join(parts)
    return f"SYNTHETIC TEST DATA · {label}" if result.get("synthetic") else label


def _one_line(r: dict) -> str:
    shape = ", ".join(f"{k}={r[k]}" for k in ("batch", "seq_len", "num_heads", "q_len", "k_len", "dim") if k in r)
    if r["status"] != "ok":
        return f"{r['op']:<10} {r['impl']:<22} {shape:<28} {r['status']}: {r['reason']}"
    host = f"  host {r['host_us_per_call']:.1f} us/call" if r.get("host_us_per_call") else ""
    return (f"{r['op']:<10} {r['impl']:<22} {shape:<28} {r['ms'] * 1e3:>10.1f} us  {r['gbps']:>8.1f} GB/s  "
            f"{100 * r['copy_fraction']:>5.1f}% of copy  err {r['rel_err']:.1e}{host}")


def summary_table(result: dict) -> str:
    """The results as aligned text lines, one per record, the copy ceiling first."""
    copy = result["copy"]
    lines = [result_label(result), f"copy ceiling: {copy['gbps']:.1f} GB/s ({copy['bytes'] / 2**30:.2f} GiB moved)"]
    lines += [_one_line(r) for r in result["results"]]
    return "\n".join(lines)


def rope_targets(
    result: dict, *, fraction: float = 0.85, impl: str = "posenc_triton", rival: str = "liger"
) -> list[dict]:
    """How ``impl`` fares at the longest prefill sequences: fraction of copy bandwidth, and time against ``rival``.

    Args:
        result: A dict from :func:`run_benchmark` or :func:`load_results`.
        fraction: The target fraction of the copy bandwidth.
        impl: The implementation judged.
        rival: The implementation it should be at least as fast as.

    Returns:
        One dict per batch size: ``batch``, ``seq_len``, ``copy_fraction``
        (None if ``impl`` has no result), ``fraction_met``, ``impl_us``,
        ``rival_us`` (None if ``rival`` did not run) and ``rival_met`` (None
        when there is nothing to compare).
    """
    records = _ok(result, "rope", phase="prefill")
    if not records:
        return []
    longest = max(r["seq_len"] for r in records)
    rows = []
    for batch in sorted({r["batch"] for r in records if r["seq_len"] == longest}):
        mine = next((r for r in records if r["impl"] == impl and r["batch"] == batch and r["seq_len"] == longest), None)
        other = next((r for r in records if r["impl"] == rival and r["batch"] == batch and r["seq_len"] == longest),
                     None)
        frac = mine["copy_fraction"] if mine else None
        rows.append({
            "batch": batch, "seq_len": longest, "copy_fraction": frac,
            "fraction_met": frac is not None and frac >= fraction,
            "impl_us": mine["ms"] * 1e3 if mine else None, "rival_us": other["ms"] * 1e3 if other else None,
            "rival_met": (mine["ms"] <= other["ms"]) if mine and other else None,
        })
    return rows


def _impl_order(records: list[dict]) -> list[str]:
    """Implementation names present in ``records``: the known ones in table order, then any others."""
    present = list(dict.fromkeys(r["impl"] for r in records))
    return [n for n in _IMPL_NAMES if n in present] + [n for n in present if n not in _IMPL_NAMES]


def _ok(result: dict, op: str, **match) -> list[dict]:
    return [r for r in result["results"]
            if r["op"] == op and r["status"] == "ok" and all(r.get(k) == v for k, v in match.items())]


def plot_rope_times(result: dict, ax=None, *, batch: int = 1):
    """Median time of each RoPE implementation against sequence length, with the copy-bandwidth floor.

    Args:
        result: A dict from :func:`run_benchmark` or :func:`load_results`.
        ax: Matplotlib axes (default: a new figure).
        batch: Which batch size to draw.

    Returns:
        The axes.
    """
    import matplotlib.pyplot as plt

    ax = ax if ax is not None else plt.subplots()[1]
    records = _ok(result, "rope", phase="prefill", batch=batch)
    names = _impl_order(records)
    for name in names:
        rows = sorted((r for r in records if r["impl"] == name), key=lambda r: r["seq_len"])
        ax.loglog([r["seq_len"] for r in rows], [r["ms"] * 1e3 for r in rows], "o-", label=rows[0]["label"])
    if records:
        lengths = sorted({r["seq_len"] for r in records})
        by_len = {r["seq_len"]: r["bytes"] for r in records}
        floor = [by_len[s] / (result["copy"]["gbps"] * 1e9) * 1e6 for s in lengths]
        ax.loglog(lengths, floor, "k--", lw=1, label="bytes / copy bandwidth (floor)")
    ax.set(xlabel="sequence length", ylabel="median time per call (µs)",
           title=f"RoPE on q and k, batch {batch}, {result['dtype']}")
    ax.legend(fontsize=7)
    return ax


def plot_copy_fraction(result: dict, ax=None):
    """Achieved bandwidth of each RoPE implementation as a fraction of the copy, at the longest sequences."""
    import matplotlib.pyplot as plt

    ax = ax if ax is not None else plt.subplots()[1]
    records = _ok(result, "rope", phase="prefill")
    if records:
        longest = max(r["seq_len"] for r in records)
        records = [r for r in records if r["seq_len"] == longest]
        batches = sorted({r["batch"] for r in records})
        names = _impl_order(records)
        width = 0.8 / len(batches)
        for j, b in enumerate(batches):
            values = [next((r["copy_fraction"] for r in records if r["impl"] == n and r["batch"] == b), 0.0)
                      for n in names]
            ax.barh([i + j * width for i in range(len(names))], values, height=width, label=f"batch {b}")
        ax.set_yticks([i + width * (len(batches) - 1) / 2 for i in range(len(names))], names)
        ax.axvline(0.85, color="k", ls="--", lw=1, label="85% of copy")
        ax.set(title=f"fraction of copy bandwidth, sequence length {longest}")
        ax.legend(fontsize=7)
    ax.set(xlabel="achieved GB/s / copy GB/s")
    return ax


def plot_decode(result: dict, ax=None):
    """Decode latency (one token, KV cache already filled) of each RoPE implementation."""
    import matplotlib.pyplot as plt

    ax = ax if ax is not None else plt.subplots()[1]
    records = _ok(result, "rope", phase="decode")
    names = _impl_order(records)
    batches = sorted({r["batch"] for r in records})
    width = 0.8 / max(len(batches), 1)
    for j, b in enumerate(batches):
        device_us = [next((r["ms"] * 1e3 for r in records if r["impl"] == n and r["batch"] == b), 0.0) for n in names]
        host_us = [next((r["host_us_per_call"] or 0.0 for r in records if r["impl"] == n and r["batch"] == b), 0.0)
                   for n in names]
        ys = [i + j * width for i in range(len(names))]
        ax.barh(ys, host_us, height=width, alpha=0.35, label=f"batch {b}: host loop, per call")
        ax.barh(ys, device_us, height=width * 0.5, label=f"batch {b}: device time (events)")
    ax.set_yticks([i + width * (len(batches) - 1) / 2 for i in range(len(names))], names)
    ax.set(xlabel="µs per call", title="decode: one token")
    ax.legend(fontsize=7)
    return ax


def plot_results(result: dict):
    """The three RoPE figures of one result file side by side, labelled with device, versions and date."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    plot_rope_times(result, axes[0, 0], batch=1)
    plot_rope_times(result, axes[0, 1], batch=max((r["batch"] for r in _ok(result, "rope")), default=1))
    plot_copy_fraction(result, axes[1, 0])
    plot_decode(result, axes[1, 1])
    fig.suptitle(result_label(result), fontsize=9)
    return fig


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def default_path(result: dict, folder=".") -> Path:
    """``gpu_rope_<device>.json`` (or ``cpu_rope_...``) under ``folder``, the device name made a file name."""
    slug = re.sub(r"[^a-z0-9]+", "_", result["device"]["name"].lower()).strip("_") or "device"
    prefix = "gpu" if result["device"]["type"] == "cuda" else "cpu"
    return Path(folder) / f"{prefix}_rope_{slug}.json"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m posenc.benchmark``: run everything, write JSON, print the table last."""
    parser = argparse.ArgumentParser(prog="python -m posenc.benchmark", description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="JSON file, or folder for gpu_rope_<device>.json, to write "
                        "(default: gpu_rope_<device>.json here; the book reads posenc_book/data/)")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--dtype", default=None, choices=sorted(_DTYPES), help="default bfloat16 on a GPU")
    parser.add_argument("--ops", nargs="+", default=list(OPS), choices=OPS)
    parser.add_argument("--impl", nargs="+", default=None, choices=_IMPL_NAMES, help="RoPE implementations")
    parser.add_argument("--quick", action="store_true", help="fewer, smaller shapes and short runs")
    parser.add_argument("--run-s", type=float, default=None, help="seconds of timed runs per measurement")
    args = parser.parse_args(argv)
    result = run_benchmark(args.device, dtype=_DTYPES[args.dtype] if args.dtype else None, ops=args.ops,
                           impls=args.impl, quick=args.quick, run_s=args.run_s,
                           progress=lambda line: print(line, file=sys.stderr, flush=True))
    out = args.out
    if out is None or out.endswith(("/", "\\")) or Path(out).is_dir():
        out = default_path(result, out or ".")
    path = save_results(result, out)
    failed = [r for r in result["results"] if r["status"] == "failed"]
    print(summary_table(result))
    print(f"written: {path}" + (f"; {len(failed)} check(s) FAILED" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
