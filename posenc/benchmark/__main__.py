"""Timing position encodings: a harness that checks before it times, and a bytes model.

``python -m posenc.benchmark``: run every case, write the result as JSON, print the table last.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from .results import default_path, save_results, summary_table
from .rope_impls import ROPE_IMPL_NAMES
from .run import OPS, run_benchmark

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m posenc.benchmark", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        help="JSON file, or folder for gpu_rope_<device>.json, to write "
        "(default: gpu_rope_<device>.json here; the book reads posenc_book/data/)",
    )
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--dtype", default=None, choices=sorted(_DTYPES), help="default bfloat16 on a GPU")
    parser.add_argument("--ops", nargs="+", default=list(OPS), choices=OPS)
    parser.add_argument("--impl", nargs="+", default=None, choices=ROPE_IMPL_NAMES, help="RoPE implementations")
    parser.add_argument("--quick", action="store_true", help="fewer, smaller shapes and short runs")
    parser.add_argument("--run-s", type=float, default=None, help="seconds of timed runs per measurement")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run everything, write JSON, print the table last.

    Args:
        argv: Command-line arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 1 if any check failed, else 0.
    """
    args = _parser().parse_args(argv)
    result = run_benchmark(
        args.device,
        dtype=_DTYPES[args.dtype] if args.dtype else None,
        ops=args.ops,
        impls=args.impl,
        quick=args.quick,
        run_s=args.run_s,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    out = args.out
    if out is None or out.endswith(("/", "\\")) or Path(out).is_dir():  # a folder: name the file after the device
        out = default_path(result, out or ".")
    path = save_results(result, out)
    failed = [r for r in result["results"] if r["status"] == "failed"]
    print(summary_table(result))
    print(f"written: {path}" + (f"; {len(failed)} check(s) FAILED" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
