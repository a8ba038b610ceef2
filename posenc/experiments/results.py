"""The JSON documents of the length extrapolation experiments: their environment, writing, reading, summarising them.

A document, as :func:`~posenc.experiments.run_experiments` returns it::

    {"schema": "posenc.experiments/2",
     "config": config.to_dict(),
     "environment": {"date", "posenc", "torch", "python", "platform", ...},
     "runs": [{"scheme", "task", "seed", "task_repr", "chance", "max_len",
               "parameters", "losses", "final_loss", "train_seconds",
               "steps_trained", "converged_at",
               "checkpoints": [{"step", "loss", "evaluations"}, ...],
               "evaluations": [{"multiplier", "length", "seq_len", "status",
                                "accuracy", ["reason"]}, ...]}, ...]}

``status`` is ``"ok"`` or ``"cannot run"`` (then ``accuracy`` is ``None`` and
``reason`` holds the error); ``losses`` is every ``steps_trained // 30``-th
training loss and the last. ``checkpoints`` holds the evaluations at every
step of ``config["checkpoints"]`` the run reached, and at its end, with the
mean training loss of the 50 steps before; ``evaluations`` are those of the
last. ``converged_at`` is the checkpoint where the loss fell below
``converged_loss`` (or ``None``). While an experiment runs, the command line keeps the
runs finished so far in a partial document, marked ``"complete": false``
after ``"schema"`` (:func:`save_document`, atomically); the whole document
has no ``"complete"`` key. Both read back with :func:`load_experiments` and
summarise with :func:`experiment_summary`.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path

import torch

from .._version import __version__
from .config import ExperimentConfig

#: Identifies a results document of :func:`~posenc.experiments.run_experiments`.
SCHEMA = "posenc.experiments/2"


def environment() -> dict:
    """Software, machine and date of a run, as stored with the results."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "posenc": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "threads": 1,
    }


def save_document(document: dict, path) -> Path:
    """Write ``document`` as JSON to ``path`` atomically: a temporary file in the same folder, then ``os.replace``.

    A reader, or a run stopped while writing, sees the previous file or the
    new one, never half of one.

    Args:
        document: A whole or partial document.
        path: The file; its folder must exist.

    Returns:
        ``path`` as a Path.
    """
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("w", encoding="utf-8") as file:
            file.write(json.dumps(document, indent=1) + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path


#: The largest file :func:`is_partial_file` reads: a results document is a few megabytes at most.
MAX_DOCUMENT_BYTES = 256 * 2**20


def is_partial_file(path, config: dict | None = None) -> bool:
    """Whether ``path`` holds a partial document of this schema (``"complete": false``), left by a stopped
    run; with ``config`` (a configuration's ``to_dict()``), one left by a run of that configuration.

    Only a regular file (not a link, a FIFO or a device) of at most ``MAX_DOCUMENT_BYTES`` is read:
    anything else is not a partial file, and the command's output check refuses it.
    """
    path = Path(path)
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_DOCUMENT_BYTES:
            return False
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # unreadable, not UTF-8, not JSON
        return False
    partial = isinstance(document, dict) and document.get("schema") == SCHEMA and document.get("complete") is False
    return partial and (config is None or document.get("config") == config)


def read_document(path, schema: str, what: str, keys: tuple[str, ...]) -> tuple[Path, dict]:
    """``(Path(path), document)`` for a JSON file of ``schema`` that has every key of ``keys``.

    Shared by the readers of both experiments' results.

    Raises:
        ValueError: If ``path`` is not a str or Path, the file is not JSON, its
            ``schema`` differs, or a key is missing; the message calls it a
            posenc ``what``.
        FileNotFoundError: If there is no file at ``path``.
    """
    if not isinstance(path, (str, Path)):
        raise ValueError(f"path must be a str or a Path, got {path!r} ({type(path).__name__})")
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not a posenc {what}: not JSON ({err})") from None
    if not isinstance(document, dict) or document.get("schema") != schema:
        found = document.get("schema") if isinstance(document, dict) else type(document).__name__
        raise ValueError(f"{path} is not a posenc {what}: schema must be {schema!r}, got {found!r}")
    missing = [key for key in keys if key not in document]
    if missing:
        raise ValueError(f"{path} lacks the key(s) {missing}")
    return path, document


def load_experiments(path) -> dict:
    """Read results written by :func:`run_experiments` (through the command line).

    Args:
        path: The JSON file, a ``str`` or ``pathlib.Path``.

    Returns:
        The document, with ``"config"`` checked by :class:`ExperimentConfig`
        and every run checked against it. A partial document (``"complete":
        false``) is returned as it is.

    Raises:
        ValueError: If ``path`` is not a str or Path, or the file is not such
            a document (not JSON, wrong ``schema``, missing keys, an invalid
            configuration, or a run that is not one of its records).
        FileNotFoundError: If there is no file at ``path``.
    """
    path, document = read_document(path, SCHEMA, "experiments file", ("config", "environment", "runs"))
    try:
        _checked_config(document)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    return document


def _checked_config(document: dict):
    """The :class:`ExperimentConfig` of ``document``, after checking ``complete`` and every run against it."""
    if not isinstance(document.get("complete", False), bool):
        raise ValueError(f"'complete' must be true or false where present, got {_short(document['complete'])}")
    config = ExperimentConfig.from_dict(document["config"])
    runs = document["runs"]
    if not isinstance(runs, list):
        raise ValueError(f"'runs' must be a list, got {type(runs).__name__}")
    seen = set()
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            raise ValueError(f"runs[{i}] must be a dict, got {type(run).__name__}")
        missing = [key for key in ("task", "scheme", "seed", "evaluations") if key not in run]
        if missing:
            raise ValueError(f"runs[{i}] lacks the key(s) {missing}")
        for key, allowed in (("task", config.tasks), ("scheme", config.schemes), ("seed", config.seeds)):
            if isinstance(run[key], bool) or run[key] not in allowed:
                raise ValueError(f"runs[{i}] has {key} {_short(run[key])}, not one of the config's {list(allowed)}")
        job = (run["task"], run["scheme"], run["seed"])
        if job in seen:
            raise ValueError(f"runs[{i}] repeats the run task={job[0]!r}, scheme={job[1]!r}, seed={job[2]}")
        seen.add(job)
        _check_evaluations(f"runs[{i}]['evaluations']", run["evaluations"], len(config.multipliers))
    return config


def _check_evaluations(where: str, evaluations: object, count: int) -> None:
    """Raise unless ``evaluations`` is a list of ``count`` evaluations, each ``"ok"`` with an accuracy or not run."""
    if not isinstance(evaluations, list) or len(evaluations) != count:
        raise ValueError(
            f"{where} must be a list of {count} evaluations (one per multiplier), got {_short(evaluations)}"
        )
    for j, entry in enumerate(evaluations):
        if not isinstance(entry, dict) or entry.get("status") not in ("ok", "cannot run"):
            raise ValueError(f"{where}[{j}] must be a dict with status 'ok' or 'cannot run', got {_short(entry)}")
        accuracy = entry.get("accuracy")
        if entry["status"] == "ok" and (
            isinstance(accuracy, bool) or not isinstance(accuracy, (int, float)) or not 0 <= accuracy <= 1
        ):
            raise ValueError(f"{where}[{j}] has status 'ok', so its accuracy must be in [0, 1], got {_short(accuracy)}")


def _short(value: object) -> str:
    """``repr(value)``, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def experiment_summary(results: dict) -> list[dict]:
    """Mean and spread of the accuracy over seeds, per task, scheme and evaluation length.

    Args:
        results: A document from :func:`run_experiments` or
            :func:`load_experiments`, whole or partial (a partial one gives
            rows for the runs it has).

    Returns:
        One dict per (task, scheme, length), in the order of the
        configuration: ``task``, ``scheme``, ``multiplier``, ``length``,
        ``status`` (``"ok"`` if every seed ran, ``"cannot run"`` if none
        did), ``n`` (seeds), ``accuracies`` (per seed, in seed order),
        ``mean``, ``std`` (sample standard deviation, ``n - 1`` in the
        denominator; 0 for one seed), ``min`` and ``max`` (``None`` when the
        status is ``"cannot run"``).

    Raises:
        ValueError: If ``results`` is not such a document (wrong schema,
            missing ``config`` or ``runs``, an invalid configuration, a run
            that lacks a key, names a task, scheme or seed outside the
            configuration, or has evaluations of the wrong number or kind),
            or some seeds of one cell ran and others did not.
    """
    if not isinstance(results, dict) or results.get("schema") != SCHEMA or "runs" not in results:
        raise ValueError(f"results must be a document of schema {SCHEMA!r} with 'runs', got {type(results).__name__}")
    if "config" not in results:
        raise ValueError("results lack the key 'config'")
    config = _checked_config(results)
    by_key = {(r["task"], r["scheme"], r["seed"]): r for r in results["runs"]}
    rows = []
    for task in config.tasks:
        for scheme in config.schemes:
            runs = [by_key[(task, scheme, seed)] for seed in config.seeds if (task, scheme, seed) in by_key]
            if not runs:
                continue
            for i, (multiplier, length) in enumerate(zip(config.multipliers, config.eval_lengths, strict=True)):
                cell = {"task": task, "scheme": scheme, "multiplier": multiplier, "length": length}
                rows.append(_summary_row(cell, [run["evaluations"][i] for run in runs]))
    return rows


def _summary_row(cell: dict, evals: list[dict]) -> dict:
    """``cell`` (task, scheme, multiplier, length) with the statistics of its evaluations, one per seed."""
    statuses = {e["status"] for e in evals}
    if len(statuses) > 1:
        raise ValueError(f"{cell['task']}/{cell['scheme']} at length {cell['length']}: some seeds ran and some did not")
    row = cell | {"status": statuses.pop(), "n": len(evals)}
    if row["status"] != "ok":
        return row | {"accuracies": [None] * len(evals), "mean": None, "std": None, "min": None, "max": None}
    acc = torch.tensor([e["accuracy"] for e in evals], dtype=torch.float64)
    std = acc.std().item() if len(evals) > 1 else 0.0  # sample standard deviation, n - 1 in the denominator
    return row | {
        "accuracies": acc.tolist(),
        "mean": acc.mean().item(),
        "std": std,
        "min": acc.min().item(),
        "max": acc.max().item(),
    }


class Accuracies:
    """A results document's accuracies, one per seed, by task, scheme and length multiplier.

    The chapters ask three questions of an experiment: how accurate each seed's
    model is at the end of its run (:meth:`final`), after a training budget of
    some steps (:meth:`after`), and at every checkpoint it reached
    (:meth:`checkpoints`). Each answer is a list in seed order; an entry is
    ``None`` where the scheme cannot run at that length (a learned table past
    its size).

    Args:
        results: A whole document from :func:`run_experiments` or
            :func:`load_experiments`.

    Raises:
        ValueError: If ``results`` is not such a document (as
            :func:`experiment_summary` says), is partial, or lacks a run of its
            configuration.

    Example:
        >>> saved = Accuracies(load_experiments("experiments.json"))  # doctest: +SKIP
        >>> saved.final("shift", "rope", 2)  # doctest: +SKIP
        [1.0, 1.0, 1.0]
    """

    def __init__(self, results: dict) -> None:
        if not isinstance(results, dict) or results.get("schema") != SCHEMA or "runs" not in results:
            raise ValueError(
                f"results must be a document of schema {SCHEMA!r} with 'runs', got {type(results).__name__}"
            )
        if "config" not in results:
            raise ValueError("results lack the key 'config'")
        if results.get("complete", True) is not True:
            raise ValueError("results are a partial document ('complete': false): wait for the whole experiment")
        self.config = _checked_config(results)
        self._runs = {(r["task"], r["scheme"], r["seed"]): r for r in results["runs"]}
        for task in self.config.tasks:
            for scheme in self.config.schemes:
                for seed in self.config.seeds:
                    if (task, scheme, seed) not in self._runs:
                        raise ValueError(f"results lack the run task={task!r}, scheme={scheme!r}, seed={seed}")

    def __repr__(self) -> str:
        c = self.config
        return f"Accuracies(tasks={list(c.tasks)}, schemes={list(c.schemes)}, seeds={list(c.seeds)})"

    def _seed_runs(self, task: str, scheme: str, multiplier: int) -> tuple[list[dict], int]:
        """The runs of ``task`` and ``scheme`` in seed order, and the index of ``multiplier``."""
        for name, value, allowed in (("task", task, self.config.tasks), ("scheme", scheme, self.config.schemes)):
            if value not in allowed:
                raise ValueError(f"{name} must be one of the experiment's {list(allowed)}, got {_short(value)}")
        if isinstance(multiplier, bool) or multiplier not in self.config.multipliers:
            raise ValueError(
                f"multiplier must be one of the experiment's {list(self.config.multipliers)}, got {_short(multiplier)}"
            )
        return [self._runs[task, scheme, s] for s in self.config.seeds], self.config.multipliers.index(multiplier)

    @staticmethod
    def _checkpoints(run: dict) -> list[dict]:
        """``run["checkpoints"]``, checked: a list of evaluations at ascending steps."""
        checkpoints = run.get("checkpoints")
        where = f"the run task={run['task']!r}, scheme={run['scheme']!r}, seed={run['seed']}"
        if not isinstance(checkpoints, list) or not checkpoints:
            raise ValueError(f"{where} has no list of checkpoints")
        steps = [c.get("step") if isinstance(c, dict) else None for c in checkpoints]
        if not all(isinstance(s, int) for s in steps) or steps != sorted(set(steps)):
            raise ValueError(f"{where} has checkpoints at {_short(steps)}, not at ascending whole steps")
        return checkpoints

    def final(self, task: str, scheme: str, multiplier: int) -> list[float | None]:
        """Each seed's accuracy at the end of its run, on inputs ``multiplier`` times the training length."""
        runs, index = self._seed_runs(task, scheme, multiplier)
        return [run["evaluations"][index]["accuracy"] for run in runs]

    def after(self, task: str, scheme: str, multiplier: int, step: int) -> list[float | None]:
        """Each seed's accuracy after a budget of ``step`` training steps: at its last checkpoint at or before ``step``.

        A run that converged earlier stopped there, so its last checkpoint stands for every larger budget.

        Raises:
            ValueError: If ``step`` is not a whole number of steps, or comes before a run's first checkpoint.
        """
        runs, index = self._seed_runs(task, scheme, multiplier)
        if isinstance(step, bool) or not isinstance(step, int):
            raise ValueError(f"step must be a whole number of training steps, got {_short(step)}")
        values = []
        for run in runs:
            reached = [c for c in self._checkpoints(run) if c["step"] <= step]
            if not reached:
                first = run["checkpoints"][0]["step"]
                raise ValueError(f"step must be at least the first checkpoint, {first}, got {step}")
            values.append(reached[-1]["evaluations"][index]["accuracy"])
        return values

    def checkpoints(self, task: str, scheme: str, multiplier: int, since: int = 0) -> list[float | None]:
        """The accuracy at every checkpoint at or after step ``since`` that each run reached, seed after seed."""
        runs, index = self._seed_runs(task, scheme, multiplier)
        if isinstance(since, bool) or not isinstance(since, int):
            raise ValueError(f"since must be a whole number of training steps, got {_short(since)}")
        return [
            c["evaluations"][index]["accuracy"] for run in runs for c in self._checkpoints(run) if c["step"] >= since
        ]
