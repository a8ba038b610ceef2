"""Timing position encodings: a harness that checks before it times, and a bytes model.

``python -m posenc.benchmark``: run every case, write the result as JSON, print the table last.

Nothing runs until the options have passed: ``--device`` must be here,
``--run-s`` a finite number > 0, and ``--out`` writable (its folder is
created and a trial file written there); an existing ``--out`` file is
replaced only with ``--force``. When any check fails, no file is written:
the failed cases are listed and the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from .._checks import check_output_file, check_positive_number
from .cpu_rope import CPU_ROPE_IMPL_NAMES
from .results import default_path, record_line, save_results, summary_table
from .rope_impls import ROPE_IMPL_NAMES
from .run import OPS, device_info, resolve_device, run_benchmark

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m posenc.benchmark", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        help="JSON file, or folder for gpu_rope_<device>.json, to write "
        "(default: gpu_rope_<device>.json here; the book reads posenc_book/data/); "
        "an existing file is replaced only with --force",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda when available)")
    parser.add_argument("--dtype", default=None, choices=sorted(_DTYPES), help="default bfloat16 on a GPU")
    parser.add_argument("--ops", nargs="+", default=list(OPS), choices=OPS)
    parser.add_argument("--impl", nargs="+", default=None, choices=ROPE_IMPL_NAMES, help="RoPE implementations")
    parser.add_argument(
        "--cpu-impl",
        nargs="+",
        default=None,
        choices=CPU_ROPE_IMPL_NAMES,
        help="implementations of the CPU rotation (rope_cpu; default all but compile)",
    )
    parser.add_argument("--quick", action="store_true", help="fewer, smaller shapes and short runs")
    parser.add_argument("--run-s", type=float, default=None, help="seconds of timed runs per measurement (> 0)")
    return parser


def _out_path(out: str | None, device: torch.device, force: bool) -> Path:
    """The file to write, checked now: named after the device in a folder, writable, not replacing one unasked.

    Raises:
        ValueError: If the file exists and ``force`` is false, or its folder
            cannot be created or written to.
    """
    try:
        folder = out is None or out.endswith(("/", "\\")) or Path(out).is_dir()
    except OSError as err:  # a folder on the way that may not be entered
        raise ValueError(f"--out {out} cannot be written: {err.strerror or err} ({err.filename})") from None
    if folder:  # name the file after the device
        path = default_path({"device": device_info(device)}, out or ".")
    else:
        path = Path(out)
    return check_output_file(path, force=force)


def main(argv: Sequence[str] | None = None) -> int:
    """Check the options, run everything, print the table, write JSON if every check passed.

    Args:
        argv: Command-line arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 1 if any check failed (and nothing was written),
        130 on Ctrl-C (nothing written), else 0; a bad option exits with
        status 2 before anything runs.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        device = resolve_device(args.device)
    except ValueError as err:
        parser.error(f"argument --device: {err}")
    try:
        run_s = None if args.run_s is None else check_positive_number("--run-s", args.run_s)
        out = _out_path(args.out, device, args.force)
    except ValueError as err:
        parser.error(str(err))
    try:
        result = run_benchmark(
            device,
            dtype=_DTYPES[args.dtype] if args.dtype else None,
            ops=args.ops,
            impls=args.impl,
            cpu_rope_impls=args.cpu_impl,
            quick=args.quick,
            run_s=run_s,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except KeyboardInterrupt:  # as python -m posenc.experiments: one line, status 130, no traceback
        kept = f"{out} is unchanged" if out.exists() else f"{out} was not written"
        print(f"python -m posenc.benchmark interrupted; {kept}", file=sys.stderr)
        return 130
    failed = [r for r in result["results"] if r["status"] == "failed"]
    print(summary_table(result))
    if failed:
        print(f"{len(failed)} check(s) FAILED:")
        for record in failed:
            print(f"  {record_line(record)}")
        print(f"not written: {out} (a result with failed checks is not saved)")
        return 1
    print(f"written: {save_results(result, out)}")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except KeyboardInterrupt:  # outside the runs (checking the options): nothing was written either
        print("python -m posenc.benchmark interrupted; nothing was written", file=sys.stderr)
        status = 130
    sys.exit(status)
