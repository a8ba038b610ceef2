"""The command line of the length extrapolation experiments (:mod:`posenc.experiments.extrapolation`).

::

    python -m posenc.experiments --steps 8000 --checkpoints 250 500 1000 2000 4000 \\
        --schedule constant --lr 3e-3 --warmup 100 --converged-loss 0.01 \\
        --jobs 2 --out posenc_book/data/experiments.json --force

trains one tiny Transformer per position scheme, task and seed, evaluates it
at multiples of the training length, shows a progress bar on stderr (tqdm)
and writes the results with their configuration, versions and date as JSON.
``python -m posenc.experiments text [options]`` runs the real-text
experiment instead (:mod:`posenc.experiments.text`; ``text --help``), and
``python -m posenc.experiments scaling [options]`` the long-context scaling one
(:mod:`posenc.experiments.long_context`; ``scaling --help``).
``--help`` lists the options; their defaults are those of
:class:`posenc.experiments.ExperimentConfig`, except ``--out``, ``experiments.json`` in the
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
import dataclasses
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from .._checks import check_output_file, check_positive_int
from .config import ExperimentConfig
from .extrapolation import DEFAULT_OUT, run_experiments
from .long_context import ScalingConfig, run_scaling_experiment
from .results import is_partial_file, save_document
from .tasks import TASKS
from .text import TextConfig, run_text_experiment
from .train import SCHEDULES

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
    _add_budget_options(parser, defaults)
    _add_run_options(parser)
    return parser


def _add_budget_options(parser: argparse.ArgumentParser, defaults: ExperimentConfig) -> None:
    """The options that decide how long a run trains and where it is evaluated."""
    parser.add_argument(
        "--checkpoints",
        nargs="*",
        type=int,
        default=list(defaults.checkpoints),
        metavar="STEP",
        help="steps at which each run is also evaluated, ascending, each <= --steps (default: none)",
    )
    parser.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default=defaults.schedule,
        help="learning rate after the warm-up: cosine decay to 0, or constant (default: cosine)",
    )
    parser.add_argument(
        "--converged-loss",
        type=float,
        default=defaults.converged_loss,
        help="stop a run one checkpoint after its mean training loss falls below this (default: 0, never)",
    )


def _add_run_options(parser: argparse.ArgumentParser, out: Path = DEFAULT_OUT) -> None:
    """The options that change how the experiment runs and is saved, not its results."""
    parser.add_argument(
        "--out",
        type=Path,
        default=out,
        help=f"output JSON file (default: {out}); rewritten after every run; an existing file is "
        "replaced only with --force, or if it is a partial file of this command",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --out file (without it, only a partial file left by a stopped run with the "
        "same options is replaced)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs trained at once, one process each (default: 1; results do not depend on it)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _check_out(out: Path, *, force: bool, config: dict | None = None) -> Path:
    """Make sure ``out`` can be written now, before any training: create its folder, write a trial file there.

    Args:
        out: The output file.
        force: Replace an existing file.
        config: The run's configuration (``to_dict()``): a partial file left by a
            run of the same configuration may be replaced without ``force``.

    Returns:
        ``out``.

    Raises:
        ValueError: If ``out`` is a directory, exists (and is not a partial
            file of this command with these options) without ``force``, or its
            folder cannot be created or written to.
    """
    hint = f", such as {out / DEFAULT_OUT.name}"
    note = " and is not a partial file of this command with these options"
    replaceable = is_partial_file(out, config)
    return check_output_file(out, force=force, replaceable=replaceable, hint=hint, exists_note=note)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: parse, check, run, write the JSON file after every run; returns the exit status.

    Returns:
        0 when every run finished, 1 when one failed, 130 on Ctrl-C (the
        runs finished by then are in ``--out``); 2 on a bad option, before
        any training.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["text"]:
        return _text_main(argv[1:])
    if argv[:1] == ["scaling"]:
        return _scaling_main(argv[1:])
    parser = _parser()
    args = vars(parser.parse_args(argv))
    out, quiet, jobs, force = args.pop("out"), args.pop("quiet"), args.pop("jobs"), args.pop("force")
    try:
        config = ExperimentConfig(**args)
        check_positive_int("jobs", jobs)
        _check_out(out, force=force, config=config.to_dict())
    except ValueError as err:
        parser.error(str(err))
    return _run_and_save(run_experiments, config, out, quiet=quiet, jobs=jobs)


def _text_parser() -> argparse.ArgumentParser:
    defaults = TextConfig()
    parser = argparse.ArgumentParser(
        prog="python -m posenc.experiments text",
        description="Train one character-level language model per position scheme and seed on the Python standard "
        "library's sources; evaluate bits per character at multiples of the training length; write JSON.",
    )
    for field in dataclasses.fields(TextConfig):
        default = getattr(defaults, field.name)
        option = f"--{field.name.replace('_', '-')}"
        if isinstance(default, tuple):
            kind = str if field.name == "schemes" else int
            parser.add_argument(option, nargs="+", type=kind, default=list(default), help=f"default: {list(default)}")
        elif field.name == "schedule":
            parser.add_argument(option, choices=SCHEDULES, default=default, help=f"default: {default}")
        else:
            parser.add_argument(option, type=type(default), default=default, help=f"default: {default}")
    _add_run_options(parser, Path("text_lm.json"))
    return parser


def _text_main(argv: list[str]) -> int:
    """``python -m posenc.experiments text``: as :func:`main`, for :func:`run_text_experiment`."""
    parser = _text_parser()
    args = vars(parser.parse_args(argv))
    out, quiet, jobs, force = args.pop("out"), args.pop("quiet"), args.pop("jobs"), args.pop("force")
    try:
        config = TextConfig(**args)
        check_positive_int("jobs", jobs)
        check_output_file(out, force=force, replaceable=False, hint=f", such as {out / 'text_lm.json'}")
    except ValueError as err:
        parser.error(str(err))
    return _run_and_save(run_text_experiment, config, out, quiet=quiet, jobs=jobs)


def _scaling_main(argv: list[str]) -> int:
    """``python -m posenc.experiments scaling``: as :func:`main`, for :func:`run_scaling_experiment`."""
    defaults = ScalingConfig()
    parser = argparse.ArgumentParser(
        prog="python -m posenc.experiments scaling",
        description="Train a RoPE character-level language model per seed; read it at 2, 4 and 8 times its "
        "training length with no scaling, linear, NTK-aware, dynamic NTK and YaRN; fine-tune some briefly; write JSON.",
    )
    text_options = ("seeds", "steps", "checkpoints", "train_chars", "eval_chars")
    for name in text_options:
        default = getattr(defaults.text, name)
        nargs = "+" if isinstance(default, tuple) else None
        parser.add_argument(
            f"--{name.replace('_', '-')}", nargs=nargs, type=int, default=default, help=f"default: {default}"
        )
    for name in ("multipliers", "finetune_steps", "finetune_checkpoints", "finetune_multiplier"):
        default = getattr(defaults, name)
        nargs = "+" if isinstance(default, tuple) else None
        parser.add_argument(
            f"--{name.replace('_', '-')}", nargs=nargs, type=int, default=default, help=f"default: {default}"
        )
    _add_run_options(parser, Path("scaling_text_lm.json"))
    args = vars(parser.parse_args(argv))
    out, quiet, jobs, force = args.pop("out"), args.pop("quiet"), args.pop("jobs"), args.pop("force")
    try:
        text = dataclasses.replace(defaults.text, **{k: args.pop(k) for k in text_options})
        config = ScalingConfig(text=text, **args)
        check_positive_int("jobs", jobs)
        check_output_file(out, force=force, replaceable=False, hint=f", such as {out / 'scaling_text_lm.json'}")
    except ValueError as err:
        parser.error(str(err))
    return _run_and_save(run_scaling_experiment, config, out, quiet=quiet, jobs=jobs)


def _run_and_save(run, config, out: Path, *, quiet: bool, jobs: int) -> int:
    """Run an experiment, writing ``out`` after every finished run and at the end; the exit status."""
    saved = 0

    def save(document: dict) -> None:
        nonlocal saved
        save_document(document, out)
        saved = len(document["runs"])

    try:
        results = run(config, progress=not quiet, jobs=jobs, on_run=save)
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
