"""The command line of the length extrapolation experiments (:mod:`posenc.experiments.extrapolation`).

::

    python -m posenc.experiments --seeds 0 1 2 3 4 --jobs 2 --out posenc_book/data/experiments.json --force

trains one tiny Transformer per position scheme, task and seed, evaluates it
at multiples of the training length, shows a progress bar on stderr (tqdm)
and writes the results with their configuration, versions and date as JSON.
``--help`` lists the options; their defaults are those of
:class:`posenc.ExperimentConfig`, except ``--out``, ``experiments.json`` in the
current directory. ``python -m posenc.experiments`` runs :func:`main`
(``posenc/experiments/__main__.py``).

Nothing is trained until the options have passed: the configuration (every
scheme is built once, so an odd ``head_dim`` for RoPE is refused here) and
``--out``, whose folder is created and written to as a trial. An existing
``--out`` file is replaced only with ``--force``, or when it is a partial
file this command left. After every finished run the results so far are
written to ``--out`` (atomically, marked ``"complete": false``); if a run
fails (exit 1) or Ctrl-C stops the command (exit 130), those runs stay there
and the message says how many. The finished file has no ``"complete"`` key.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from .._checks import check_output_file, check_positive_int
from .extrapolation import DEFAULT_OUT, ExperimentConfig, run_experiments
from .results import is_partial_file, save_document
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
    _add_run_options(parser)
    return parser


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options that change how the experiment runs and is saved, not its results."""
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"output JSON file (default: {DEFAULT_OUT}); rewritten after every run; an existing file is "
        "replaced only with --force, or if it is a partial file of this command",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs trained at once, one process each (default: 1; results do not depend on it)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _check_out(out: Path, *, force: bool) -> Path:
    """Make sure ``out`` can be written now, before any training: create its folder, write a trial file there.

    Args:
        out: The output file.
        force: Replace an existing file.

    Returns:
        ``out``.

    Raises:
        ValueError: If ``out`` is a directory, exists (and is not a partial
            file of this command) without ``force``, or its folder cannot be
            created or written to.
    """
    hint = f", such as {out / DEFAULT_OUT.name}"
    note = " and is not a partial file of this command"
    return check_output_file(out, force=force, replaceable=is_partial_file(out), hint=hint, exists_note=note)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: parse, check, run, write the JSON file after every run; returns the exit status.

    Returns:
        0 when every run finished, 1 when one failed, 130 on Ctrl-C (the
        runs finished by then are in ``--out``); 2 on a bad option, before
        any training.
    """
    parser = _parser()
    args = vars(parser.parse_args(argv))
    out, quiet, jobs, force = args.pop("out"), args.pop("quiet"), args.pop("jobs"), args.pop("force")
    try:
        config = ExperimentConfig(**args)
        check_positive_int("jobs", jobs)
        _check_out(out, force=force)
    except ValueError as err:
        parser.error(str(err))
    saved = 0

    def save(document: dict) -> None:
        nonlocal saved
        save_document(document, out)
        saved = len(document["runs"])

    try:
        results = run_experiments(config, progress=not quiet, jobs=jobs, on_run=save)
    except (Exception, KeyboardInterrupt) as err:
        return _stopped(err, out, saved)
    save_document(results, out)
    if not quiet:
        print(f"wrote {len(results['runs'])} runs to {out}", file=sys.stderr)
    return 0


def _stopped(err: BaseException, out: Path, saved: int) -> int:
    """Report a failed or interrupted experiment on stderr, with where its finished runs are; the exit status."""
    if isinstance(err, KeyboardInterrupt):
        what, status = "interrupted", 130
    else:
        traceback.print_exception(err)
        what, status = f"stopped by {type(err).__name__}: {err}", 1
    if saved:
        kept = f'{saved} finished run(s) are in {out}, marked "complete": false'
    else:
        kept = f"no run finished; {out} was not written"
    print(f"python -m posenc.experiments {what}; {kept}", file=sys.stderr)
    return status
