"""The tiny-Transformer apparatus: position schemes, tasks, the model, its training, the experiments.

* :mod:`~posenc.experiments.schemes`: the :class:`PositionScheme` hooks, the
  registry and the eight schemes of the book, registered when this package is
  imported.
* :mod:`~posenc.experiments.tasks`: the synthetic order-sensitive tasks.
* :mod:`~posenc.experiments.model`: :class:`TinyConfig` and
  ``TinyTransformer(config)``.
* :mod:`~posenc.experiments.train`: deterministic training and accuracy.
* :mod:`~posenc.experiments.extrapolation`: the length extrapolation
  experiments of chapter 8 and their JSON documents.
* :mod:`~posenc.experiments.cli`: ``python -m posenc.experiments``.

It builds on the encodings of :mod:`posenc`; no encoding imports it.
"""

from .cli import main
from .extrapolation import (
    ALL_SCHEMES,
    DEFAULT_OUT,
    SCHEMA,
    ExperimentConfig,
    build_task,
    environment,
    experiment_summary,
    load_experiments,
    run_experiments,
    train_and_evaluate,
)
from .model import TinyAttention, TinyBlock, TinyConfig, TinyTransformer
from .schemes import (
    COMMON_KEYWORDS,
    ALiBiScheme,
    LearnedScheme,
    NoPositions,
    PositionScheme,
    RopePIScheme,
    RopeScheme,
    SchemeFactory,
    ShawScheme,
    SinusoidalScheme,
    T5Scheme,
    check_scheme_options,
    make_position_scheme,
    position_schemes,
    register_position_scheme,
)
from .tasks import IGNORE, TASKS, LookupTask, ReverseTask, ShiftTask, Task, TaskBatch, make_task
from .train import deterministic, tiny_accuracy, tiny_accuracy_by_position, train_tiny

__all__ = [
    "ALL_SCHEMES",
    "COMMON_KEYWORDS",
    "DEFAULT_OUT",
    "IGNORE",
    "SCHEMA",
    "TASKS",
    "ALiBiScheme",
    "ExperimentConfig",
    "LearnedScheme",
    "LookupTask",
    "NoPositions",
    "PositionScheme",
    "ReverseTask",
    "RopePIScheme",
    "RopeScheme",
    "SchemeFactory",
    "ShawScheme",
    "ShiftTask",
    "SinusoidalScheme",
    "T5Scheme",
    "Task",
    "TaskBatch",
    "TinyAttention",
    "TinyBlock",
    "TinyConfig",
    "TinyTransformer",
    "build_task",
    "check_scheme_options",
    "deterministic",
    "environment",
    "experiment_summary",
    "load_experiments",
    "main",
    "make_position_scheme",
    "make_task",
    "position_schemes",
    "register_position_scheme",
    "run_experiments",
    "tiny_accuracy",
    "tiny_accuracy_by_position",
    "train_and_evaluate",
    "train_tiny",
]
