"""The tiny-Transformer apparatus: position schemes, tasks, the model, its training, the experiments.

* :mod:`~posenc.experiments.registry`: the :class:`PositionScheme` hooks and
  the registry of schemes by name.
* :mod:`~posenc.experiments.schemes`: the eight schemes of the book,
  registered when this package is imported.
* :mod:`~posenc.experiments.layered`: per-layer schemes, ``"irope"``
  (Llama 4), ``"local_global"`` (Gemma 3) and ``"rope_nope"`` (Cohere Command
  R7B), registered likewise.
* :mod:`~posenc.experiments.frontier`: schemes of recent papers, ``"fire"``,
  ``"cope"`` and ``"rope_pose"`` (RoPE trained with PoSE), registered likewise.
* :mod:`~posenc.experiments.tasks`: the synthetic order-sensitive tasks.
* :mod:`~posenc.experiments.model`: :class:`TinyConfig` and
  ``TinyTransformer(config)``.
* :mod:`~posenc.experiments.train`: deterministic training and accuracy.
* :mod:`~posenc.experiments.extrapolation`: the length extrapolation
  experiments of chapter 11.
* :mod:`~posenc.experiments.results`: their JSON documents, read and summarised.
* :mod:`~posenc.experiments.runner`: many runs at once, in worker processes.
* :mod:`~posenc.experiments.corpus` and :mod:`~posenc.experiments.text`: the
  character-level language model on real text, evaluated at longer inputs.
* :mod:`~posenc.experiments.cli`: ``python -m posenc.experiments``.

It builds on the encodings of :mod:`posenc`; no encoding imports it.
"""

from .cli import main
from .corpus import OTHER, VOCAB, VOCAB_SIZE, TextCorpus, TextTask, decode_text, encode_text, stdlib_corpus
from .extrapolation import ALL_SCHEMES, DEFAULT_OUT, ExperimentConfig, build_task, run_experiments, train_and_evaluate
from .frontier import CoPEScheme, FIREScheme, RopePoSEScheme
from .layered import IRopeScheme, LocalGlobalScheme, RopeNopeScheme
from .long_context import (
    SCALING_METHODS,
    SCALING_SCHEMA,
    ScalingConfig,
    load_scaling_results,
    run_scaling_experiment,
    scaling_options,
    scaling_summary,
)
from .model import TinyAttention, TinyBlock, TinyConfig, TinyTransformer
from .registry import (
    COMMON_KEYWORDS,
    PositionScheme,
    SchemeFactory,
    check_scheme_options,
    make_position_scheme,
    position_schemes,
    register_position_scheme,
)
from .results import SCHEMA, Accuracies, environment, experiment_summary, load_experiments
from .schemes import (
    ALiBiScheme,
    LearnedScheme,
    NoPositions,
    RopePIScheme,
    RopeScheme,
    ShawScheme,
    SinusoidalScheme,
    T5Scheme,
)
from .tasks import (
    IGNORE,
    TASKS,
    CountTask,
    LookupTask,
    PasskeyTask,
    ReverseTask,
    ShiftTask,
    Task,
    TaskBatch,
    make_task,
)
from .text import TEXT_SCHEMA, TextConfig, evaluate_text, load_text_results, run_text_experiment, text_summary
from .train import (
    SCHEDULES,
    deterministic,
    tiny_accuracy,
    tiny_accuracy_by_position,
    train_tiny,
    train_with_checkpoints,
)

__all__ = [
    "ALL_SCHEMES",
    "COMMON_KEYWORDS",
    "DEFAULT_OUT",
    "IGNORE",
    "OTHER",
    "SCALING_METHODS",
    "SCALING_SCHEMA",
    "SCHEDULES",
    "SCHEMA",
    "TASKS",
    "TEXT_SCHEMA",
    "VOCAB",
    "VOCAB_SIZE",
    "ALiBiScheme",
    "Accuracies",
    "CoPEScheme",
    "CountTask",
    "ExperimentConfig",
    "FIREScheme",
    "IRopeScheme",
    "LearnedScheme",
    "LocalGlobalScheme",
    "LookupTask",
    "NoPositions",
    "PasskeyTask",
    "PositionScheme",
    "ReverseTask",
    "RopeNopeScheme",
    "RopePIScheme",
    "RopePoSEScheme",
    "RopeScheme",
    "ScalingConfig",
    "SchemeFactory",
    "ShawScheme",
    "ShiftTask",
    "SinusoidalScheme",
    "T5Scheme",
    "Task",
    "TaskBatch",
    "TextConfig",
    "TextCorpus",
    "TextTask",
    "TinyAttention",
    "TinyBlock",
    "TinyConfig",
    "TinyTransformer",
    "build_task",
    "check_scheme_options",
    "decode_text",
    "deterministic",
    "encode_text",
    "environment",
    "evaluate_text",
    "experiment_summary",
    "load_experiments",
    "load_scaling_results",
    "load_text_results",
    "main",
    "make_position_scheme",
    "make_task",
    "position_schemes",
    "register_position_scheme",
    "run_experiments",
    "run_scaling_experiment",
    "run_text_experiment",
    "scaling_options",
    "scaling_summary",
    "stdlib_corpus",
    "text_summary",
    "tiny_accuracy",
    "tiny_accuracy_by_position",
    "train_and_evaluate",
    "train_tiny",
    "train_with_checkpoints",
]
