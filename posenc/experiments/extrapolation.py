"""Length extrapolation experiments: tiny Transformers trained per scheme, task and seed, run on longer inputs.

One experiment trains a :class:`posenc.experiments.TinyTransformer` for every position
scheme, task and seed of an :class:`ExperimentConfig`, on inputs of
``train_length`` data tokens, and measures its accuracy at
``train_length * m`` for every multiplier ``m`` (1, 2 and 4 by default).
Every run is seeded and deterministic (:func:`posenc.experiments.train_tiny`), so a run
can be repeated alone and gives the same losses and accuracies, bit for bit,
on the same machine and software.

Two decisions fix what "trained length" means:

* The model's ``max_len`` is the number of tokens of a training input,
  ``task.seq_len(train_length)``. For ``"learned"`` that is the table size:
  longer inputs cannot run, and are recorded as ``"cannot run"`` with the
  error, never as accuracy 0. For ``"rope_pi"`` it is the trained length that
  longer inputs are compressed into: the factor is ``n / max_len`` for an
  input of ``n`` tokens, chosen when the input arrives
  (:class:`posenc.experiments.schemes.RopePIScheme`).
* ``"lookup"`` is built with ``max_length`` equal to the longest evaluation
  length, so every evaluation length can be queried. Queries for positions
  at or past ``train_length`` use query tokens that never occurred in
  training.

Results are a JSON document (see :func:`run_experiments`) with the full
configuration, the software versions and the date. The command line
(``python -m posenc.experiments``, :mod:`posenc.experiments.cli`) runs an
experiment and writes that document after every finished run, so that a
failure or Ctrl-C keeps the runs done so far::

    python -m posenc.experiments --seeds 0 1 2 3 4 --jobs 2 --out posenc_book/data/experiments.json --force
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .._checks import check_choice, check_positive_int
from .config import ALL_SCHEMES, ExperimentConfig, build_task
from .model import TinyTransformer
from .results import SCHEMA, environment
from .runner import progress_bar, run_jobs
from .tasks import Task
from .train import tiny_accuracy, train_with_checkpoints, training_options

__all__ = ["ALL_SCHEMES", "DEFAULT_OUT", "ExperimentConfig", "build_task", "run_experiments", "train_and_evaluate"]


#: Where the command writes by default, relative to the current directory.
DEFAULT_OUT = Path("experiments.json")  # the book's recorded copy is posenc_book/data/experiments.json


def _evaluate(config: ExperimentConfig, model: TinyTransformer, task: Task) -> list[dict]:
    """Accuracy at every evaluation length of ``config``, or ``"cannot run"`` past a learned table."""
    evaluations = []
    for multiplier, length in zip(config.multipliers, config.eval_lengths, strict=True):
        entry = {"multiplier": multiplier, "length": length, "seq_len": task.seq_len(length)}
        try:
            accuracy = tiny_accuracy(
                model, task, length=length, num_examples=config.num_examples, seed=config.eval_seed
            )
            entry |= {"status": "ok", "accuracy": accuracy}
        except IndexError as err:  # past a learned table
            entry |= {"status": "cannot run", "accuracy": None, "reason": str(err)}
        evaluations.append(entry)
    return evaluations


def train_and_evaluate(config: ExperimentConfig, scheme: str, task: str, seed: int) -> tuple[dict, TinyTransformer]:
    """Train one model and evaluate it at every length of ``config``.

    Args:
        config: The experiment.
        scheme: One of ``config.schemes``.
        task: One of ``config.tasks``.
        seed: One of ``config.seeds``.

    Returns:
        ``(record, model)``: the run's record as stored by
        :func:`run_experiments`, and the trained model.

    Raises:
        ValueError: If ``scheme``, ``task`` or ``seed`` is not in ``config``.
    """
    check_choice("scheme", scheme, config.schemes)
    if seed not in config.seeds:
        raise ValueError(f"seed must be one of {list(config.seeds)}; got {seed!r}")
    the_task = build_task(config, task)
    model = TinyTransformer(config.model_config(scheme, the_task, seed))
    start = time.perf_counter()
    losses, checkpoints, converged_at = _train(config, model, the_task, seed)
    seconds = time.perf_counter() - start
    record = {
        "scheme": scheme,
        "task": task,
        "seed": seed,
        "task_repr": repr(the_task),
        "chance": the_task.chance,
        "max_len": model.max_len,
        "parameters": sum(p.numel() for p in model.parameters()),
        "losses": losses[:: max(1, len(losses) // 30)] + [losses[-1]],
        "final_loss": losses[-1],
        "steps_trained": len(losses),
        "converged_at": converged_at,
        "checkpoints": checkpoints,
        "evaluations": checkpoints[-1]["evaluations"],
        "train_seconds": round(seconds, 3),
    }
    return record, model


def _train(config: ExperimentConfig, model: TinyTransformer, task: Task, seed: int) -> tuple[list, list, int | None]:
    """Train one run of ``config``, evaluated at its checkpoints: ``(losses, checkpoints, converged_at)``."""
    return train_with_checkpoints(
        model,
        task,
        evaluate=lambda: _evaluate(config, model, task),
        checkpoints=config.evaluation_steps,
        converged_loss=config.converged_loss,
        **training_options(config, seed),
    )


def _run_job(config: ExperimentConfig, scheme: str, task: str, seed: int) -> dict:
    """One run's record; a module-level function, so that worker processes find it by its qualified name.

    An error leaves with the run named in its notes (Python 3.11+), which survive the trip from a worker.
    """
    try:
        return train_and_evaluate(config, scheme, task, seed)[0]
    except BaseException as err:
        if hasattr(err, "add_note"):
            err.add_note(f"in the run scheme={scheme!r}, task={task!r}, seed={seed}")
        raise


def run_experiments(
    config: ExperimentConfig, *, progress: bool = False, jobs: int = 1, on_run: Callable[[dict], None] | None = None
) -> dict:
    """Train and evaluate every run of ``config``.

    Every run uses one CPU thread and depends only on the configuration, its
    scheme, task and seed, so running several at once (``jobs``) changes
    nothing in the results. The first run that raises stops the experiment:
    runs not started are cancelled, running ones finish (and reach
    ``on_run``), and the error is raised, the failing run named in its notes.

    Args:
        config: The experiment.
        progress: Show a progress bar on stderr (tqdm).
        jobs: Runs trained at the same time, each in its own process.
        on_run: Called after every finished run with the document so far,
            marked ``"complete": False``; the command line saves it.

    Returns:
        The JSON-ready document that ``posenc.experiments.results``
        describes, runs ordered by task, then scheme, then seed, whatever
        ``jobs`` is; only the partial documents given to ``on_run`` have a
        ``"complete"`` key.

    Raises:
        ValueError: If ``config`` is not an :class:`ExperimentConfig` or
            ``jobs`` is not an int >= 1.
    """
    if not isinstance(config, ExperimentConfig):
        raise ValueError(f"config must be an ExperimentConfig, got {type(config).__name__}")
    check_positive_int("jobs", jobs)
    order = [(scheme, task, seed) for task in config.tasks for scheme in config.schemes for seed in config.seeds]
    document = {"schema": SCHEMA, "config": config.to_dict(), "environment": environment(), "runs": []}
    runs: dict[tuple, dict] = {}
    bar = progress_bar(len(order), progress)

    def record(job: tuple, run: dict) -> None:
        runs[job] = run
        bar.set_postfix_str(" ".join(map(str, job)))
        bar.update(1)
        if on_run is not None:  # "complete": False placed after "schema"
            on_run({"schema": SCHEMA, "complete": False} | document | {"runs": [runs[j] for j in order if j in runs]})

    try:
        run_jobs(_run_job, config, order, record, jobs)
    finally:
        bar.close()
    return document | {"runs": [runs[job] for job in order]}
