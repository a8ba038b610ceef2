"""The JSON documents of the length extrapolation experiments: their environment, reading them, summarising them."""

from __future__ import annotations

import datetime
import json
import platform
from pathlib import Path

import torch

#: Identifies a results document of :func:`~posenc.run_experiments`.
SCHEMA = "posenc.experiments/1"


def environment() -> dict:
    """Software, machine and date of a run, as stored with the results."""
    from .. import __version__

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


def load_experiments(path) -> dict:
    """Read results written by :func:`run_experiments` (through the command line).

    Args:
        path: The JSON file, a ``str`` or ``pathlib.Path``.

    Returns:
        The document, with ``"config"`` checked by :class:`ExperimentConfig`.

    Raises:
        ValueError: If ``path`` is not a str or Path, or the file is not such
            a document (not JSON, wrong ``schema``, missing keys, or an
            invalid configuration).
        FileNotFoundError: If there is no file at ``path``.
    """
    if not isinstance(path, (str, Path)):
        raise ValueError(f"path must be a str or a Path, got {path!r} ({type(path).__name__})")
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not a posenc experiments file: not JSON ({err})") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        found = document.get("schema") if isinstance(document, dict) else type(document).__name__
        raise ValueError(f"{path} is not a posenc experiments file: schema must be {SCHEMA!r}, got {found!r}")
    missing = [key for key in ("config", "environment", "runs") if key not in document]
    if missing:
        raise ValueError(f"{path} lacks the key(s) {missing}")
    from .extrapolation import ExperimentConfig  # which imports this module

    ExperimentConfig.from_dict(document["config"])
    return document


def experiment_summary(results: dict) -> list[dict]:
    """Mean and spread of the accuracy over seeds, per task, scheme and evaluation length.

    Args:
        results: A document from :func:`run_experiments` or
            :func:`load_experiments`.

    Returns:
        One dict per (task, scheme, length), in the order of the
        configuration: ``task``, ``scheme``, ``multiplier``, ``length``,
        ``status`` (``"ok"`` if every seed ran, ``"cannot run"`` if none
        did), ``n`` (seeds), ``accuracies`` (per seed, in seed order),
        ``mean``, ``std`` (sample standard deviation, ``n - 1`` in the
        denominator; 0 for one seed), ``min`` and ``max`` (``None`` when the
        status is ``"cannot run"``).

    Raises:
        ValueError: If ``results`` is not such a document, or some seeds of
            one cell ran and others did not.
    """
    if not isinstance(results, dict) or results.get("schema") != SCHEMA or "runs" not in results:
        raise ValueError(f"results must be a document of schema {SCHEMA!r} with 'runs', got {type(results).__name__}")
    from .extrapolation import ExperimentConfig  # which imports this module

    config = ExperimentConfig.from_dict(results["config"])
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
