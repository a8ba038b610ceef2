"""Result files and what is read off them: JSON in and out, labels, the summary table, the targets.

A result is one JSON-serialisable dict (device name, torch/triton/CUDA versions, date,
dtype, shapes, and one record per operation, implementation and shape), as
:func:`~posenc.benchmark.run_benchmark` returns it. Timings are measurements to report,
never assertions to test.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

#: Identifies the layout of the result files.
SCHEMA = "posenc-benchmark/1"

_REQUIRED_KEYS = ("schema", "device", "versions", "date", "dtype", "copy", "results")
_SHAPE_KEYS = ("batch", "seq_len", "num_heads", "q_len", "k_len", "dim")


def save_results(result: dict, path) -> Path:
    """Write ``result`` as indented JSON to ``path`` (folders created), atomically.

    The JSON goes to a temporary file in the same folder, which then replaces
    ``path`` (``os.replace``): a reader, or a run stopped while writing, sees
    the previous file or the new one, never half of one.

    Args:
        result: A dict from :func:`~posenc.benchmark.run_benchmark`.
        path: The file to write.

    Returns:
        The path written.

    Raises:
        ValueError: If ``result`` holds NaN or an infinity (JSON has neither).
    """
    path = Path(path)
    text = json.dumps(result, indent=1, allow_nan=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path


def load_results(directory="data", pattern: str = "gpu_*.json") -> list[dict]:
    """Read recorded result files, oldest first.

    Args:
        directory: Folder to search (chapter 12 passes the book's recorded
            data, ``posenc_book/data``).
        pattern: Glob pattern of the files, by default the GPU runs.

    Returns:
        One dict per file, each with a ``path`` key added; an empty list when
        the folder holds no matching file.

    Raises:
        FileNotFoundError: If there is no folder ``directory``.
        ValueError: If ``directory`` is a file, or a file is not a result of
            this harness (not JSON, not a JSON object, its ``schema`` is
            wrong, a required key is missing, or ``date`` is not a string or
            ``results`` not a list); the message names the file.
    """
    directory = Path(directory)
    if not directory.exists():
        raise FileNotFoundError(f"no folder {directory} to read benchmark results from")
    if not directory.is_dir():
        raise ValueError(f"directory must be a folder of result files, got the file {directory}")
    results = [_read_result(path) for path in sorted(directory.glob(pattern))]
    return sorted(results, key=lambda r: r["date"])


def _read_result(path: Path) -> dict:
    """One result file, checked, with ``path`` added."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not a posenc benchmark result: not JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a posenc benchmark result: a JSON {type(data).__name__}, not an object")
    missing = [key for key in _REQUIRED_KEYS if key not in data]
    if data.get("schema") != SCHEMA or missing:
        raise ValueError(
            f"{path} is not a posenc benchmark result: schema {data.get('schema')!r} (expected {SCHEMA!r}), "
            f"missing keys {missing}"
        )
    if not isinstance(data["date"], str) or not isinstance(data["results"], list):
        raise ValueError(
            f"{path} is not a posenc benchmark result: 'date' must be a string and 'results' a list, "
            f"got {type(data['date']).__name__} and {type(data['results']).__name__}"
        )
    data["path"] = str(path)
    return data


def result_label(result: dict) -> str:
    """One line naming where and when a result was measured: device, versions, date.

    Args:
        result: A dict from :func:`~posenc.benchmark.run_benchmark` or :func:`load_results`.

    Returns:
        ``"<device> · torch <v> · triton <v> · CUDA <v> · <date>"`` (triton and CUDA
        when present), prefixed ``"SYNTHETIC TEST DATA · "`` for made-up data.
    """
    v = result["versions"]
    parts = [result["device"]["name"], f"torch {v.get('torch')}"]
    if v.get("triton"):
        parts.append(f"triton {v['triton']}")
    if v.get("cuda"):
        parts.append(f"CUDA {v['cuda']}")
    parts.append(result["date"][:10])
    label = " · ".join(parts)
    return f"SYNTHETIC TEST DATA · {label}" if result.get("synthetic") else label


def record_line(r: dict) -> str:
    """One record as an aligned line: op, implementation, shape, then time and bandwidth or the status."""
    shape = ", ".join(f"{k}={r[k]}" for k in _SHAPE_KEYS if k in r)
    if r["status"] != "ok":
        return f"{r['op']:<10} {r['impl']:<22} {shape:<28} {r['status']}: {r['reason']}"
    host = f"  host {r['host_us_per_call']:.1f} us/call" if r.get("host_us_per_call") else ""
    if r.get("threads"):  # a CPU case: its thread count, and its time over its own ceiling
        ratio = f"  {r['vs_ceiling']:.2f} x {r['ceiling']}" if r.get("vs_ceiling") else ""
        host = f"  {r['threads']} thread{'s' if r['threads'] > 1 else ''}{ratio}{host}"
    return (
        f"{r['op']:<10} {r['impl']:<22} {shape:<28} {r['ms'] * 1e3:>10.1f} us  {r['gbps']:>8.1f} GB/s  "
        f"{100 * r['copy_fraction']:>5.1f}% of copy  err {r['rel_err']:.1e}{host}"
    )


def summary_table(result: dict) -> str:
    """The results as aligned text lines, one per record, the copy ceiling first.

    Args:
        result: A dict from :func:`~posenc.benchmark.run_benchmark` or :func:`load_results`.

    Returns:
        The label, the copy ceiling, then one line per record, joined by newlines.
    """
    copy = result["copy"]
    lines = [result_label(result), f"copy ceiling: {copy['gbps']:.1f} GB/s ({copy['bytes'] / 2**30:.2f} GiB moved)"]
    lines += [record_line(r) for r in result["results"]]
    return "\n".join(lines)


def ok_records(result: dict, op: str, **match) -> list[dict]:
    """The records of ``op`` that passed their check and were timed, and whose fields equal ``match``.

    Args:
        result: A dict from :func:`~posenc.benchmark.run_benchmark` or :func:`load_results`.
        op: ``"rope"``, ``"sinusoidal"`` or ``"alibi"``.
        **match: Field values to select, for example ``phase="prefill", batch=1``.

    Returns:
        The records, in file order.
    """
    return [
        r
        for r in result["results"]
        if r["op"] == op and r["status"] == "ok" and all(r.get(k) == v for k, v in match.items())
    ]


def _find(records: list[dict], impl: str, batch: int, seq_len: int) -> dict | None:
    return next((r for r in records if r["impl"] == impl and r["batch"] == batch and r["seq_len"] == seq_len), None)


def rope_targets(
    result: dict, *, fraction: float = 0.85, impl: str = "posenc_triton", rival: str = "liger"
) -> list[dict]:
    """How ``impl`` fares at the longest prefill sequences: fraction of copy bandwidth, and time against ``rival``.

    Args:
        result: A dict from :func:`~posenc.benchmark.run_benchmark` or :func:`load_results`.
        fraction: The target fraction of the copy bandwidth.
        impl: The implementation judged.
        rival: The implementation it should be at least as fast as.

    Returns:
        A list with one dict per batch size, holding ``batch``, ``seq_len``, ``copy_fraction``
        (None if ``impl`` has no result), ``fraction_met``, ``impl_us``,
        ``rival_us`` (None if ``rival`` did not run) and ``rival_met`` (None
        when there is nothing to compare).
    """
    records = ok_records(result, "rope", phase="prefill")
    if not records:
        return []
    longest = max(r["seq_len"] for r in records)
    rows = []
    for batch in sorted({r["batch"] for r in records if r["seq_len"] == longest}):
        mine, other = _find(records, impl, batch, longest), _find(records, rival, batch, longest)
        frac = mine["copy_fraction"] if mine else None
        rows.append(
            {
                "batch": batch,
                "seq_len": longest,
                "copy_fraction": frac,
                "fraction_met": frac is not None and frac >= fraction,
                "impl_us": mine["ms"] * 1e3 if mine else None,
                "rival_us": other["ms"] * 1e3 if other else None,
                "rival_met": (mine["ms"] <= other["ms"]) if mine and other else None,
            }
        )
    return rows


def default_path(result: dict, folder=".") -> Path:
    """``gpu_rope_<device>.json`` (or ``cpu_rope_...``) under ``folder``, the device name made a file name.

    Args:
        result: A dict with ``device["type"]`` and ``device["name"]``.
        folder: The folder of the file.

    Returns:
        The path, for example ``gpu_rope_nvidia_h100_80gb_hbm3.json``.
    """
    slug = re.sub(r"[^a-z0-9]+", "_", result["device"]["name"].lower()).strip("_") or "device"
    prefix = "gpu" if result["device"]["type"] == "cuda" else "cpu"
    return Path(folder) / f"{prefix}_rope_{slug}.json"
