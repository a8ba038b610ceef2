"""Timing position encodings: a harness that checks before it times, and a bytes model.

The method, in the order the harness applies it:

1. **Count bytes first.** Every operation here does a few floating-point
   operations per element and is limited by memory traffic, so its floor is
   the fewest bytes it must move (each input read once, each output written
   once) divided by the memory bandwidth. :func:`rope_bytes`,
   :func:`sinusoidal_add_bytes` and :func:`alibi_bias_bytes` give those counts
   (``posenc.benchmark.traffic``).
2. **Measure the ceiling in the same run.** A large device-to-device copy
   (bytes read plus bytes written, over its time) is the bandwidth a kernel
   can actually reach; achieved bandwidth is reported as a fraction of it
   (``posenc.benchmark.timing``).
3. **Correct before timed.** Each implementation first runs once on random
   inputs (never zeros) and is compared with a float64 reference by
   ``||out - ref|| / ||ref||``; every uninitialised tensor it allocates is
   filled with NaN first (and freed memory too, for compiled code), so an
   element it never writes shows up as NaN. Only an implementation that
   passes is timed (``posenc.benchmark.check``).
4. **Time properly.** On a GPU: CUDA events around each call, after warm-up,
   with the L2 cache evicted between calls (or the inputs rotated among
   enough sets to exceed it), and the median of many calls. On a machine
   without a GPU: ``torch.utils.benchmark`` (the median of blocked runs).

On the CPU, the ``"rope_cpu"`` cases (``posenc.benchmark.cpu_rope``) time the rotation beside
two ceilings of the same shape and run, a copy into existing buffers and a clone, and record
each time as a ratio to them; :func:`load_cpu_results` and :func:`cpu_rope_table` read them back.

Each operation contributes :class:`Case` objects (``posenc.benchmark.cases``; the RoPE
implementations are in ``posenc.benchmark.rope_impls``), and :func:`run_benchmark` runs
them all in one loop (``posenc.benchmark.run``). Results are one JSON-serialisable dict
(device name, torch/triton/CUDA versions, date, dtype, shapes, and one record per
operation, implementation and shape), written by ``python -m posenc.benchmark --out PATH``
and read back by :func:`load_results` (``posenc.benchmark.results``). Timings are
measurements to report, never assertions to test.

Importing this package imports neither Triton nor ``transformers``: each is imported
when an implementation that needs it is built. The figures are book-only, in
``posenc_book.benchmark_plots``.
"""

from __future__ import annotations

from .cases import (
    Case,
    alibi_bias_cases,
    default_alibi_shapes,
    default_sinusoidal_shapes,
    rope_cases,
    sinusoidal_add_cases,
)
from .check import TOLERANCE, poison_freed, poisoned_allocations, relative_error, rope_reference
from .cpu_rope import (
    CPU_ROPE_IMPL_NAMES,
    CPU_ROPE_IMPLS,
    CpuRopeImpl,
    CpuRopeShape,
    add_ceiling_ratios,
    cpu_rope_cases,
    cpu_rope_table,
    default_cpu_rope_shapes,
    load_cpu_results,
)
from .results import (
    SCHEMA,
    default_path,
    load_results,
    ok_records,
    result_label,
    rope_targets,
    save_results,
    summary_table,
)
from .rope_impls import (
    ROPE_IMPL_NAMES,
    ROPE_IMPLS,
    RopeImpl,
    RopeShape,
    Unavailable,
    default_rope_shapes,
    rope_impl,
    rope_inputs,
)
from .run import OPS, device_info, run_benchmark, run_case, versions
from .timing import cache_bytes, measure_copy
from .traffic import DATASHEET_BANDWIDTH, OpTraffic, alibi_bias_bytes, count_traffic, rope_bytes, sinusoidal_add_bytes

__all__ = [
    "CPU_ROPE_IMPLS",
    "CPU_ROPE_IMPL_NAMES",
    "DATASHEET_BANDWIDTH",
    "OPS",
    "ROPE_IMPLS",
    "ROPE_IMPL_NAMES",
    "SCHEMA",
    "TOLERANCE",
    "Case",
    "CpuRopeImpl",
    "CpuRopeShape",
    "OpTraffic",
    "RopeImpl",
    "RopeShape",
    "Unavailable",
    "add_ceiling_ratios",
    "alibi_bias_bytes",
    "alibi_bias_cases",
    "cache_bytes",
    "count_traffic",
    "cpu_rope_cases",
    "cpu_rope_table",
    "default_alibi_shapes",
    "default_cpu_rope_shapes",
    "default_path",
    "default_rope_shapes",
    "default_sinusoidal_shapes",
    "device_info",
    "load_cpu_results",
    "load_results",
    "measure_copy",
    "ok_records",
    "poison_freed",
    "poisoned_allocations",
    "relative_error",
    "result_label",
    "rope_bytes",
    "rope_cases",
    "rope_impl",
    "rope_inputs",
    "rope_reference",
    "rope_targets",
    "run_benchmark",
    "run_case",
    "save_results",
    "sinusoidal_add_bytes",
    "sinusoidal_add_cases",
    "summary_table",
    "versions",
]
