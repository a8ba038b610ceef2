"""Record what a run of the chapters did, for the site's execution status page.

Usage: python scripts/run_status.py record RUN --xml REPORT.xml --edition EDITION [--kind chapters|check] [--out DIR]

Every run of the chapters in ``make test`` (the Makefile's ``nbval``, ``nbval-cpus`` and
``nbval-elsewhere``) gives pytest ``--junitxml``; after the run, in the same environment
(the same ``ATEN_CPU_CAPABILITY``, the same ``PYTHONPATH``), this script reads the report and
writes ``DIR/RUN.json`` (default ``_build/status``): when the run started, the versions it
ran with (Python, torch, transformers, Triton), the CPU kernel set ATen used, and for every
notebook its wall time (the sum of its cells' times, the kernel's start included), its
result and the cells that failed, with nbval's message. ``make book`` renders the records
as the page "Execution status" (``book/_ext/execution_status.py``): nothing on it is typed
by hand. A run that left no report (it stopped before pytest wrote one) is recorded as such.

``--kind check`` marks a run that repeats a chapter under a special condition (chapter 12
with Triton hidden): the page lists it among the runs, not in the chapters' table.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATUS = ROOT / "_build" / "status"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling scripts
import manifest  # noqa: E402

EDITIONS = tuple(e.key for e in manifest.editions())
# nbval colours its messages; the XML report keeps the escapes (as "#x1B[91m" or raw)
COLOUR = re.compile(r"(?:#x1B|\x1b)\[[0-9;]*m")
MESSAGE_LIMIT = 2000  # characters of nbval's message kept per failed cell


def notebook_of(classname: str) -> tuple[str | None, str]:
    """``(edition or None, notebook stem)`` from a JUnit classname such as
    ``zh-hant.book.01_motivation.ipynb`` (pytest writes the path with dots)."""
    parts = classname.removesuffix(".ipynb").split(".")
    edition = parts[0] if parts[0] in EDITIONS[1:] else ("en" if parts[:1] == ["book"] else None)
    return edition, parts[-1]


def cell_number(name: str) -> int | str:
    found = re.fullmatch(r"Cell (\d+)", name)
    return int(found.group(1)) if found else name


def parse_junit(path: Path, edition: str | None = None) -> tuple[str | None, list[dict]]:
    """``(start time, notebooks)`` from a pytest JUnit report of an nbval run: per notebook
    its edition, stem, wall time, result and failed cells, in the report's order."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    started = suites[0].get("timestamp") if suites else None
    notebooks: dict[tuple[str, str], dict] = {}
    for case in (c for suite in suites for c in suite.iter("testcase")):
        found, stem = notebook_of(case.get("classname", ""))
        key = (edition or found or "en", stem)
        entry = notebooks.setdefault(
            key, {"edition": key[0], "notebook": stem, "seconds": 0.0, "cells": 0, "result": "passed", "failed": []}
        )
        entry["seconds"] = round(entry["seconds"] + float(case.get("time") or 0.0), 3)
        entry["cells"] += 1
        for tag in ("failure", "error"):
            problem = case.find(tag)
            if problem is not None:
                message = COLOUR.sub("", (problem.text or problem.get("message") or "").strip())
                entry["result"] = "failed"
                entry["failed"].append({"cell": cell_number(case.get("name", "")), "message": message[:MESSAGE_LIMIT]})
                break
    return started, list(notebooks.values())


def kernel_set() -> dict[str, str]:
    """The CPU kernels ATen uses in this environment: forced by ``ATEN_CPU_CAPABILITY``, or
    the machine's own (what torch reports)."""
    forced = os.environ.get("ATEN_CPU_CAPABILITY", "")
    try:
        import torch

        used = torch.backends.cpu.get_cpu_capability()
    except Exception as error:  # the record says so rather than failing the run
        used = f"unknown ({type(error).__name__})"
    return {"forced": forced, "used": used}


def version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def triton_version() -> str:
    """Triton as the chapters see it: hidden when it cannot be imported here."""
    try:
        import triton
    except ImportError:
        return "not importable"
    return getattr(triton, "__version__", version("triton"))


def environment() -> dict:
    return {
        "python": platform.python_version(),
        "torch": version("torch"),
        "transformers": version("transformers"),
        "triton": triton_version(),
        "kernels": kernel_set(),
        "machine": platform.machine(),
    }


def record(run: str, report: Path, edition: str | None, kind: str = "chapters", env: dict | None = None) -> dict:
    """The record of one run (see the module docstring)."""
    data = {"run": run, "kind": kind, "edition": edition, **(env if env is not None else environment())}
    if report.is_file():
        try:
            data["date"], data["notebooks"] = parse_junit(report, edition)
        except ET.ParseError as error:
            data["date"], data["notebooks"], data["error"] = None, [], f"unreadable report: {error}"
    else:
        data["date"], data["notebooks"], data["error"] = None, [], "the run left no report"
    if data["date"] is None:
        data["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return data


def load_records(folder: Path) -> list[dict]:
    """Every run recorded in ``folder``, oldest first."""
    records = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda r: r.get("date") or "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record one run from its JUnit report")
    rec.add_argument("run", help="the run's name (the Makefile target)")
    rec.add_argument("--xml", type=Path, required=True, help="pytest's --junitxml report")
    rec.add_argument("--edition", choices=EDITIONS, help="the edition of every notebook in the run")
    rec.add_argument("--kind", choices=("chapters", "check"), default="chapters")
    rec.add_argument("--out", type=Path, default=Path(os.environ.get("POSENC_STATUS", STATUS)))
    args = parser.parse_args(argv)
    data = record(args.run, args.xml, args.edition, args.kind)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.run}.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    failed = [n["notebook"] for n in data["notebooks"] if n["result"] == "failed"]
    print(
        f"{args.run}: {len(data['notebooks'])} notebooks recorded in {args.out / (args.run + '.json')}"
        + (f", failed: {', '.join(failed)}" if failed else "")
        + (f" ({data['error']})" if "error" in data else ""),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
