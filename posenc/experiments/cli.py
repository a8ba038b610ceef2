"""The command line of the length extrapolation experiments (:mod:`posenc.experiments.extrapolation`).

::

    python -m posenc.experiments --seeds 0 1 2 3 4 --jobs 2 --out posenc_book/data/experiments.json

trains one tiny Transformer per position scheme, task and seed, evaluates it
at multiples of the training length, shows a progress bar on stderr (tqdm)
and writes the results with their configuration, versions and date as JSON.
``--help`` lists the options; their defaults are those of
:class:`posenc.ExperimentConfig`, except ``--out``, ``experiments.json`` in the
current directory. ``python -m posenc.experiments`` runs :func:`main`
(``posenc/experiments/__main__.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .._checks import check_positive_int
from .extrapolation import DEFAULT_OUT, ExperimentConfig, run_experiments
from .tasks import TASKS

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    defaults = ExperimentConfig()
    parser = argparse.ArgumentParser(
        prog="python -m posenc.experiments",
        description="Train one tiny Transformer per position scheme, task and seed; evaluate it at multiples "
        "of the training length; write the results with their configuration as JSON.",
    )
    parser.add_argument(
        "--schemes",
        nargs="+",
        default=list(defaults.schemes),
        metavar="NAME",
        help=f"position schemes (default: all eight: {' '.join(defaults.schemes)})",
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=list(defaults.tasks),
        metavar="NAME",
        help=f"tasks among {' '.join(TASKS)} (default: {' '.join(defaults.tasks)})",
    )
    parser.add_argument(
        "--seeds", nargs="+", type=int, default=list(defaults.seeds), metavar="N", help="seeds (default: 0 1 2)"
    )
    parser.add_argument("--steps", type=int, default=defaults.steps, help="optimizer steps per run (default: 300)")
    parser.add_argument(
        "--train-length", type=int, default=defaults.train_length, help="data tokens per training input (default: 16)"
    )
    parser.add_argument(
        "--multipliers",
        nargs="+",
        type=int,
        default=list(defaults.multipliers),
        metavar="M",
        help="evaluation lengths as multiples of the training length (default: 1 2 4)",
    )
    parser.add_argument(
        "--causal",
        action=argparse.BooleanOptionalAction,
        default=defaults.causal,
        help="causal attention (default) or, with --no-causal, bidirectional",
    )
    for name in ("dim", "num_heads", "num_layers", "batch_size", "warmup", "num_examples", "eval_seed"):
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=int,
            default=getattr(defaults, name),
            help=f"default: {getattr(defaults, name)}",
        )
    parser.add_argument("--lr", type=float, default=defaults.lr, help=f"peak learning rate (default: {defaults.lr})")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output JSON file (default: {DEFAULT_OUT})")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs trained at once, one process each (default: 1; results do not depend on it)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: parse, run, write the JSON file; returns the exit status."""
    parser = _parser()
    args = vars(parser.parse_args(argv))
    out, quiet, jobs = args.pop("out"), args.pop("quiet"), args.pop("jobs")
    try:
        config = ExperimentConfig(**args)
        check_positive_int("jobs", jobs)
    except ValueError as err:
        parser.error(str(err))
    results = run_experiments(config, progress=not quiet, jobs=jobs)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    if not quiet:
        print(f"wrote {len(results['runs'])} runs to {out}", file=sys.stderr)
    return 0
