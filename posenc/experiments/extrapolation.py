"""Length extrapolation experiments: tiny Transformers trained per scheme, task and seed, run on longer inputs.

One experiment trains a :class:`posenc.TinyTransformer` for every position
scheme, task and seed of an :class:`ExperimentConfig`, on inputs of
``train_length`` data tokens, and measures its accuracy at
``train_length * m`` for every multiplier ``m`` (1, 2 and 4 by default).
Every run is seeded and deterministic (:func:`posenc.train_tiny`), so a run
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
experiment and writes that document::

    python -m posenc.experiments --seeds 0 1 2 3 4 --jobs 2 --out posenc_book/data/experiments.json
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from .._checks import check_choice, check_heads, check_nonnegative_int, check_positive_int, check_positive_number
from .model import TinyConfig, TinyTransformer
from .registry import position_schemes
from .results import SCHEMA, environment
from .tasks import TASKS, Task, make_task
from .train import tiny_accuracy, train_tiny

__all__ = ["ALL_SCHEMES", "DEFAULT_OUT", "ExperimentConfig", "build_task", "run_experiments", "train_and_evaluate"]


#: The schemes of the book, in the order the chapter shows them.
ALL_SCHEMES = ("none", "sinusoidal", "learned", "shaw", "t5", "alibi", "rope", "rope_pi")

#: Where the command writes by default, relative to the current directory.
DEFAULT_OUT = Path("experiments.json")  # the book's recorded copy is posenc_book/data/experiments.json


def _check_names(name: str, values: object, choices: Sequence[str]) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        raise ValueError(f"{name} must be a non-empty list of names, got {values!r}")
    for value in values:
        check_choice(name, value, choices)
    if len(set(values)) != len(values):
        raise ValueError(f"{name} must not repeat a name, got {list(values)}")
    return tuple(values)


def _check_ints(name: str, values: object, check) -> tuple[int, ...]:
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        raise ValueError(f"{name} must be a non-empty list of ints, got {values!r}")
    for value in values:
        check(name, value)
    if len(set(values)) != len(values):
        raise ValueError(f"{name} must not repeat a value, got {list(values)}")
    return tuple(values)


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that decides an experiment's results.

    Runs are the product ``schemes x tasks x seeds``. The model is the tiny
    Transformer of chapter 4 with ``num_heads=4`` (ALiBi's slopes need a few
    heads: with 2 they are 1/16 and 1/256, too flat to single out a
    neighbour), trained with :func:`posenc.train_tiny`. The configuration
    holds the model's sizes (``causal``, ``dim``, ``num_heads``,
    ``num_layers``); ``model_config`` makes the :class:`posenc.TinyConfig` of
    one run from them. The fields are those of the saved JSON documents
    (schema ``posenc.experiments/1``), in the same order.

    Args:
        schemes: Registered position schemes (:func:`posenc.position_schemes`).
        tasks: Task names (``"reverse"``, ``"shift"``, ``"lookup"``), built
            with their defaults (16 symbols; ``lookup`` with ``max_length``
            the longest evaluation length).
        seeds: Seeds, >= 0; a seed sets the initial weights and the batches.
        steps: Optimizer steps per run.
        train_length: Data tokens of every training input.
        multipliers: Evaluation lengths as multiples of ``train_length``.
        causal: Causal (decoder-style) attention; the default, as in the
            ALiBi paper's language models.
        dim: Model dimension.
        num_heads: Attention heads.
        num_layers: Transformer blocks.
        batch_size: Training examples per step.
        lr: Peak learning rate.
        warmup: Warm-up steps.
        num_examples: Evaluation examples per length.
        eval_seed: Seed of the evaluation examples (differs from the
            training seeds).

    Raises:
        ValueError: On an unknown scheme or task, a repeated or negative
            seed, a non-positive size, or a non-positive learning rate.
    """

    schemes: tuple[str, ...] = ALL_SCHEMES
    tasks: tuple[str, ...] = ("shift", "lookup")
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 300
    train_length: int = 16
    multipliers: tuple[int, ...] = (1, 2, 4)
    causal: bool = True
    dim: int = 64
    num_heads: int = 4
    num_layers: int = 2
    batch_size: int = 64
    lr: float = 1e-2
    warmup: int = 20
    num_examples: int = 512
    eval_seed: int = 12345

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise lists to tuples in place
        set_(self, "schemes", _check_names("schemes", self.schemes, position_schemes()))
        set_(self, "tasks", _check_names("tasks", self.tasks, tuple(TASKS)))
        set_(self, "seeds", _check_ints("seeds", self.seeds, check_nonnegative_int))
        set_(self, "multipliers", _check_ints("multipliers", self.multipliers, check_positive_int))
        for name in ("steps", "train_length", "dim", "num_heads", "num_layers", "batch_size", "num_examples"):
            check_positive_int(name, getattr(self, name))
        check_nonnegative_int("warmup", self.warmup)
        check_nonnegative_int("eval_seed", self.eval_seed)
        if not isinstance(self.causal, bool):
            raise ValueError(f"causal must be True or False, got {self.causal!r}")
        check_positive_number("lr", self.lr)
        check_heads(self.dim, self.num_heads)

    @property
    def eval_lengths(self) -> tuple[int, ...]:
        """Data tokens of the evaluation inputs, ``train_length * m`` per multiplier."""
        return tuple(self.train_length * m for m in self.multipliers)

    def model_config(self, scheme: str, task: Task, seed: int) -> TinyConfig:
        """The tiny Transformer of one run: ``max_len`` is the number of tokens of a training input.

        Args:
            scheme: The position scheme.
            task: The task, as :func:`~posenc.experiments.build_task` makes it (it gives the
                vocabulary and the input length).
            seed: Seed of the initial weights.
        """
        return TinyConfig(
            task.vocab_size,
            scheme=scheme,
            dim=self.dim,
            num_heads=self.num_heads,
            num_layers=self.num_layers,
            max_len=task.seq_len(self.train_length),
            causal=self.causal,
            seed=seed,
        )

    def to_dict(self) -> dict:
        """The configuration as JSON-ready values (lists for tuples)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, values: dict) -> ExperimentConfig:
        """The configuration saved by :meth:`to_dict`.

        Raises:
            ValueError: On a key that is not a field, or any invalid value.
        """
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ValueError(f"config has unknown key(s) {unknown}; fields are {sorted(fields)}")
        return cls(**values)

    def replace(self, **changes) -> ExperimentConfig:
        """A copy with some fields changed, for example a subset of schemes and seeds."""
        return dataclasses.replace(self, **changes)


def build_task(config: ExperimentConfig, name: str) -> Task:
    """The task ``name`` as the experiment uses it (``lookup`` can query every evaluation length)."""
    check_choice("task", name, config.tasks)
    if name == "lookup":
        return make_task(name, max_length=max(config.eval_lengths + (config.train_length,)))
    return make_task(name)


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
    losses = train_tiny(
        model,
        the_task,
        steps=config.steps,
        length=config.train_length,
        batch_size=config.batch_size,
        lr=config.lr,
        warmup=config.warmup,
        seed=seed,
    )
    seconds = time.perf_counter() - start
    record = {
        "scheme": scheme,
        "task": task,
        "seed": seed,
        "task_repr": repr(the_task),
        "chance": the_task.chance,
        "max_len": model.max_len,
        "parameters": sum(p.numel() for p in model.parameters()),
        "losses": losses[:: max(1, config.steps // 30)] + [losses[-1]],
        "final_loss": losses[-1],
        "evaluations": _evaluate(config, model, the_task),
        "train_seconds": round(seconds, 3),
    }
    return record, model


def _progress(total: int, enabled: bool):
    """A tqdm bar on stderr, or a stand-in that does nothing when tqdm is missing or ``enabled`` is false."""
    if enabled:
        try:
            from tqdm.auto import tqdm

            return tqdm(total=total, unit="run", file=sys.stderr, dynamic_ncols=True)
        except ImportError:
            pass

    class _Silent:
        def update(self, n=1):
            pass

        def set_postfix_str(self, s):
            pass

        def close(self):
            pass

    return _Silent()


def _run_job(config: ExperimentConfig, scheme: str, task: str, seed: int) -> dict:
    """One run's record; a module-level function, so that worker processes find it by its qualified name."""
    return train_and_evaluate(config, scheme, task, seed)[0]


def run_experiments(config: ExperimentConfig, *, progress: bool = False, jobs: int = 1) -> dict:
    """Train and evaluate every run of ``config``.

    Every run uses one CPU thread and depends only on the configuration, its
    scheme, task and seed, so running several at once (``jobs``) changes
    nothing in the results.

    Args:
        config: The experiment.
        progress: Show a progress bar on stderr (tqdm).
        jobs: Runs trained at the same time, each in its own process.

    Returns:
        A JSON-ready dict::

            {"schema": "posenc.experiments/1",
             "config": config.to_dict(),
             "environment": {"date", "posenc", "torch", "python", "platform", ...},
             "runs": [{"scheme", "task", "seed", "task_repr", "chance", "max_len",
                       "parameters", "losses", "final_loss", "train_seconds",
                       "evaluations": [{"multiplier", "length", "seq_len", "status",
                                        "accuracy", ["reason"]}, ...]}, ...]}

        ``status`` is ``"ok"`` or ``"cannot run"`` (then ``accuracy`` is
        ``None`` and ``reason`` holds the error); ``losses`` is every
        ``steps // 30``-th training loss and the last. Runs are ordered by
        task, then scheme, then seed, whatever ``jobs`` is.

    Raises:
        ValueError: If ``config`` is not an :class:`ExperimentConfig` or
            ``jobs`` is not an int >= 1.
    """
    if not isinstance(config, ExperimentConfig):
        raise ValueError(f"config must be an ExperimentConfig, got {type(config).__name__}")
    check_positive_int("jobs", jobs)
    pending_runs = [(scheme, task, seed) for task in config.tasks for scheme in config.schemes for seed in config.seeds]
    bar = _progress(len(pending_runs), progress)
    try:
        runs = _run_all(config, pending_runs, jobs, bar)
    finally:
        bar.close()
    return {
        "schema": SCHEMA,
        "config": config.to_dict(),
        "environment": environment(),
        "runs": [runs[job] for job in pending_runs],
    }


def _run_all(config: ExperimentConfig, jobs_to_run: list[tuple], jobs: int, bar) -> dict[tuple, dict]:
    """The record of every ``(scheme, task, seed)``, run here or in ``jobs`` spawned processes."""
    runs: dict[tuple, dict] = {}
    if jobs == 1:
        for job in jobs_to_run:
            bar.set_postfix_str(" ".join(map(str, job)))
            runs[job] = _run_job(config, *job)
            bar.update(1)
        return runs
    context = multiprocessing.get_context("spawn")  # no fork of a process that holds torch threads
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(_run_job, config, *job): job for job in jobs_to_run}
        for future in as_completed(futures):
            runs[futures[future]] = future.result()
            bar.set_postfix_str(" ".join(map(str, futures[future])))
            bar.update(1)
    return runs
