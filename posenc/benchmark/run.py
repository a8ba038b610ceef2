"""The runs: every case checked, then timed, against the copy ceiling measured in the same run.

:func:`run_benchmark` builds the cases of the requested operations and runs them in one
loop; :func:`run_case` builds, checks and times one. A case whose check fails is recorded
as failed and is never timed.
"""

from __future__ import annotations

import math
import platform
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import torch

from .._checks import check_choice, check_positive_number
from .._version import __version__
from .cases import (
    Case,
    alibi_bias_cases,
    default_alibi_shapes,
    default_sinusoidal_shapes,
    rope_cases,
    sinusoidal_add_cases,
)
from .check import TOLERANCE
from .cpu_rope import CpuRopeShape, add_ceiling_ratios, cpu_rope_cases
from .results import SCHEMA, record_line
from .rope_impls import ROPE_IMPL_NAMES, RopeImpl, RopeShape, Unavailable, default_rope_shapes, rope_impl
from .timing import Timing, cache_bytes, measure_copy, timed

#: The operations the harness times, in the order their records appear (``"rope_cpu"``: on the CPU only).
OPS = ("rope", "sinusoidal", "alibi", "rope_cpu")


def _new_record(case: Case, dtype: torch.dtype) -> dict:
    """The record of ``case`` before it runs: ``status`` "ok" and every measurement None."""
    return {
        "op": case.op,
        "impl": case.impl,
        "label": case.label,
        **case.fields,
        "dtype": str(dtype).removeprefix("torch."),
        "bytes": case.nbytes,
        "status": "ok",
        "reason": None,
        "rel_err": None,
        "ms": None,
        "ms_q25": None,
        "ms_q75": None,
        "runs": None,
        "gbps": None,
        "copy_fraction": None,
        "host_us_per_call": None,
    }


def _fill_timing(record: dict, timing: Timing, copy_gbps: float) -> dict:
    gbps = record["bytes"] / timing.median_ms / 1e6
    record.update(
        ms=timing.median_ms,
        ms_q25=timing.q25_ms,
        ms_q75=timing.q75_ms,
        runs=timing.runs,
        gbps=gbps,
        copy_fraction=gbps / copy_gbps,
        host_us_per_call=timing.host_us_per_call,
    )
    return record


def run_case(case: Case, *, device, dtype: torch.dtype, copy_gbps: float, run_s: float) -> dict:
    """Build, check against float64, then time one case; a failure is recorded, never raised.

    Args:
        case: The :class:`~posenc.benchmark.Case`.
        device: Where it runs.
        dtype: Element type of its inputs, a key of :data:`~posenc.benchmark.TOLERANCE`.
        copy_gbps: The copy bandwidth measured in the same run, GB/s.
        run_s: Seconds of timed runs.

    Returns:
        The case's record, whose ``status`` is ``"unavailable"`` (``build`` raised
        :class:`~posenc.benchmark.Unavailable`), ``"failed"`` (the check raised
        or its relative error exceeds the tolerance, or timing raised; not
        timed) or ``"ok"`` with the timing filled in.
    """
    record = _new_record(case, dtype)
    try:
        fn = case.build()
    except Unavailable as exc:
        record.update(status="unavailable", reason=str(exc))
        return record
    try:
        err = case.check(fn)
    except Exception as exc:  # a failing implementation is reported, not fatal to the whole run
        record.update(status="failed", reason=f"{type(exc).__name__}: {exc}"[:300])
        return record
    record["rel_err"] = err if math.isfinite(err) else None  # JSON has no NaN
    if not err <= TOLERANCE[dtype]:
        record.update(status="failed", reason=f"relative error {err:.3g} > {TOLERANCE[dtype]:g} against float64")
        return record
    try:
        timing = timed(fn, case.make_set, case.set_bytes, device, run_s=run_s, host=case.host)
    except Exception as exc:
        record.update(status="failed", reason=f"{type(exc).__name__} while timing: {exc}"[:300])
        return record
    return _fill_timing(record, timing, copy_gbps)


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
        info.update(
            name=props.name,
            capability=f"{props.major}.{props.minor}",
            memory_bytes=props.total_memory,
            multiprocessors=props.multi_processor_count,
        )
    else:
        name = platform.processor() or platform.machine()
        cpuinfo = Path("/proc/cpuinfo")
        if cpuinfo.exists():
            found = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.M)
            name = found.group(1).strip() if found else name
        info.update(name=name, threads=torch.get_num_threads())
    return info


def versions() -> dict:
    """Versions of Python and of the packages whose code is timed (None where not installed).

    Returns:
        ``{"python", "torch", "cuda", "triton", "transformers", "liger_kernel", "posenc"}``.
    """
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": _version("triton"),
        "transformers": _version("transformers"),
        "liger_kernel": _version("liger-kernel"),
        "posenc": __version__,
    }


def resolve_device(device) -> torch.device:
    """``device`` as a ``torch.device``: the current GPU by default when there is one, else the CPU.

    Args:
        device: ``None``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a ``torch.device``.

    Returns:
        The device, a GPU with its index.

    Raises:
        ValueError: If ``device`` is not a device name, is neither a CPU nor
            a CUDA device, or is a CUDA device this machine does not have.
    """
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}") from None
    if parsed.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if parsed.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"device {device!r} needs CUDA, and this machine has no usable CUDA device")
        if parsed.index is None:
            parsed = torch.device("cuda", torch.cuda.current_device())
        elif parsed.index >= count:
            raise ValueError(f"device {device!r} does not exist: this machine has {count} CUDA device(s)")
    return parsed


def _resolve_impls(impls: Sequence[str | RopeImpl] | None, on_gpu: bool) -> list[RopeImpl]:
    """Names looked up in ``ROPE_IMPLS``; by default all, except ``"compile"`` on the CPU."""
    if impls is None:
        impls = [name for name in ROPE_IMPL_NAMES if on_gpu or name != "compile"]
    chosen = []
    for impl in impls:
        if not isinstance(impl, RopeImpl):
            impl = rope_impl(check_choice("impls", impl, ROPE_IMPL_NAMES))
        chosen.append(impl)
    return chosen


def _build_cases(
    ops: Sequence[str],
    device: torch.device,
    dtype: torch.dtype,
    *,
    quick: bool,
    rope_shapes: Sequence[RopeShape] | None,
    impls: list[RopeImpl],
    sinusoidal_shapes: Sequence[tuple[int, int, int]] | None,
    alibi_shapes: Sequence[tuple[int, int, int]] | None,
    cpu_shapes: Sequence[CpuRopeShape] | None,
    cpu_impls: Sequence[str] | None = None,
) -> list[Case]:
    """The cases of the requested operations, in the order of :data:`OPS`; shapes left None get the defaults."""
    cases = []
    if "rope" in ops:
        shapes = default_rope_shapes(device.type, quick=quick) if rope_shapes is None else rope_shapes
        cases += rope_cases(shapes, impls, device, dtype)
    if "sinusoidal" in ops:
        shapes = default_sinusoidal_shapes(device.type, quick=quick) if sinusoidal_shapes is None else sinusoidal_shapes
        cases += sinusoidal_add_cases(shapes, device, dtype)
    if "alibi" in ops:
        shapes = default_alibi_shapes(device.type, quick=quick) if alibi_shapes is None else alibi_shapes
        cases += alibi_bias_cases(shapes, device, dtype)
    if "rope_cpu" in ops and device.type == "cpu":  # float32, whatever dtype the other operations use
        cases += cpu_rope_cases(cpu_shapes, cpu_impls, quick=quick)
    return cases


def _method(on_gpu: bool, run_s: float, dtype: torch.dtype) -> dict:
    """How the run measured, for the record."""
    return {
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


def _run_cases(
    cases: list[Case],
    device: torch.device,
    dtype: torch.dtype,
    *,
    run_s: float,
    copy_bytes: int | None,
    progress: Callable[[str], None],
) -> tuple[dict, list[dict]]:
    """Measure the copy ceiling, then run every case; return ``(copy, records)``."""
    copy = measure_copy(device, copy_bytes, run_s=run_s)
    progress(f"copy: {copy['bytes'] / 2**30:.2f} GiB moved, {copy['ms']:.3f} ms, {copy['gbps']:.1f} GB/s")
    records = []
    threads = torch.get_num_threads()
    for case in cases:
        torch.set_num_threads(case.fields.get("threads", threads))  # the CPU cases name their thread count
        try:
            case_dtype = torch.float32 if case.op == "rope_cpu" else dtype
            records.append(run_case(case, device=device, dtype=case_dtype, copy_gbps=copy["gbps"], run_s=run_s))
        finally:
            torch.set_num_threads(threads)
        progress(record_line(records[-1]))
        if device.type == "cuda":
            torch.cuda.empty_cache()  # the next case's sets get the memory
    return copy, add_ceiling_ratios(records)


def run_benchmark(
    device=None,
    *,
    dtype: torch.dtype | None = None,
    ops: Sequence[str] = OPS,
    rope_shapes: Sequence[RopeShape] | None = None,
    impls: Sequence[str | RopeImpl] | None = None,
    sinusoidal_cases: Sequence[tuple[int, int, int]] | None = None,
    alibi_cases: Sequence[tuple[int, int, int]] | None = None,
    cpu_rope_shapes: Sequence[CpuRopeShape] | None = None,
    cpu_rope_impls: Sequence[str] | None = None,
    quick: bool = False,
    run_s: float | None = None,
    copy_bytes: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Check, then time, every implementation on every shape; return the results as one dict.

    Args:
        device: ``"cuda"``, ``"cpu"`` or a ``torch.device``; default the GPU when there is one.
        dtype: Element type of the inputs; default bfloat16 on a GPU and float32 on the CPU.
        ops: Any of ``"rope"``, ``"sinusoidal"``, ``"alibi"``, ``"rope_cpu"``.
        rope_shapes: RoPE cases; default :func:`default_rope_shapes`.
        impls: Names from :data:`ROPE_IMPLS` to run, or :class:`RopeImpl`
            objects of your own (default: all; on the CPU all but
            ``"compile"``, whose compilation takes minutes there).
        sinusoidal_cases: ``(batch, seq_len, dim)`` triples for ``x + PE``;
            default ``default_sinusoidal_shapes(device.type, quick=quick)``.
        alibi_cases: ``(num_heads, q_len, k_len)`` triples for the bias;
            default ``default_alibi_shapes(device.type, quick=quick)``.
        cpu_rope_shapes: Cases of ``"rope_cpu"`` (float32, on the CPU only, each
            beside a copy and a clone: ``posenc.benchmark.cpu_rope``); default
            ``default_cpu_rope_shapes(quick=quick)``.
        cpu_rope_impls: Names from ``posenc.benchmark.cpu_rope.CPU_ROPE_IMPL_NAMES``
            for ``"rope_cpu"`` (default all but ``"compile"``).
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
        ValueError: On an unknown op or implementation name, a dtype other
            than float32, float16 or bfloat16, a device that is not here
            (``resolve_device``), or a ``run_s`` that is not a finite
            number > 0.
    """
    device = resolve_device(device)
    if run_s is not None:
        check_positive_number("run_s", run_s)
    on_gpu = device.type == "cuda"
    dtype = dtype if dtype is not None else (torch.bfloat16 if on_gpu else torch.float32)
    if dtype not in TOLERANCE:
        raise ValueError(f"dtype must be torch.float32, torch.float16 or torch.bfloat16, got {dtype}")
    for op in ops:
        check_choice("ops", op, OPS)
    cases = _build_cases(
        ops,
        device,
        dtype,
        quick=quick,
        rope_shapes=rope_shapes,
        impls=_resolve_impls(impls, on_gpu),
        sinusoidal_shapes=sinusoidal_cases,
        alibi_shapes=alibi_cases,
        cpu_shapes=cpu_rope_shapes,
        cpu_impls=cpu_rope_impls,
    )
    run_s = run_s if run_s is not None else (0.05 if quick else (0.3 if on_gpu else 0.2))
    copy, records = _run_cases(
        cases, device, dtype, run_s=run_s, copy_bytes=copy_bytes, progress=progress or (lambda line: None)
    )
    return {
        "schema": SCHEMA,
        "synthetic": False,
        "device": device_info(device),
        "versions": versions(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "dtype": str(dtype).removeprefix("torch."),
        "method": _method(on_gpu, run_s, dtype),
        "copy": copy,
        "results": records,
    }
