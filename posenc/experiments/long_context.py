"""Stretching a trained RoPE language model past its training length: zero-shot, and after a short fine-tune.

The character-level model of :mod:`posenc.experiments.text`, with RoPE,
learns from windows of ``train_length`` characters. It is then read at 2,
4 and 8 times that length in five ways, with the same weights:

* ``"none"``: RoPE as trained, positions past the trained range unseen;
* ``"linear"``: position interpolation, ``factor`` = target / trained;
* ``"ntk"``: the NTK-aware base change for that factor
  (:func:`posenc.ntk_scaled_base`);
* ``"dynamic"``: dynamic NTK with a fixed ``factor`` (``dynamic_factor``),
  its base following the length of the input;
* ``"yarn"``: YaRN with ``factor`` = target / trained and
  ``original_max_position_embeddings`` = the trained length.

Then copies of the trained model are fine-tuned for a few steps on windows
``finetune_multiplier`` times longer, each with its method fixed at that
factor, and evaluated again. ``"none"`` is fine-tuned too: the control that
tells what the extra training on long windows gives by itself.

Every method only changes the rotation, which holds no weights, so each is
the trained model with other scheme options, loaded from its weights.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .._checks import check_choice, check_positive_int, check_positive_number
from ..rope.scaling import ntk_scaled_base
from .corpus import TextTask, stdlib_corpus
from .model import TinyTransformer
from .results import environment, read_document
from .runner import progress_bar, run_jobs
from .text import TextConfig, evaluate_text
from .train import train_tiny, train_with_checkpoints, training_options

__all__ = [
    "SCALING_METHODS",
    "SCALING_SCHEMA",
    "ScalingConfig",
    "load_scaling_results",
    "run_scaling_experiment",
    "scaling_options",
    "scaling_summary",
]

#: Identifies a results document of :func:`run_scaling_experiment`.
SCALING_SCHEMA = "posenc.scaling/1"
#: The ways a trained RoPE model is read at a longer length.
SCALING_METHODS = ("none", "linear", "ntk", "dynamic", "yarn")


@dataclass(frozen=True)
class ScalingConfig:
    """Everything that decides the long-context scaling experiment.

    Args:
        text: The base model and its training: a :class:`TextConfig` whose
            only scheme is ``"rope"`` (its ``checkpoints`` are the budgets at
            which the zero-shot methods are evaluated too).
        multipliers: Target lengths, as multiples of the trained length, > 1.
        dynamic_factor: The ``factor`` of dynamic NTK scaling (its slope, not a target).
        finetune_methods: Methods fine-tuned, a subset of :data:`~posenc.experiments.SCALING_METHODS`.
        finetune_multiplier: The fine-tuning length as a multiple of the trained one.
        finetune_steps: Fine-tuning steps per method and seed.
        finetune_checkpoints: Fine-tuning steps at which to evaluate too, ascending, < ``finetune_steps``.
        finetune_lr: Learning rate of the fine-tune (constant, after 20 warm-up steps).

    Raises:
        ValueError: On a base configuration with another scheme, a multiplier
            of 1 or less, an unknown method, or a non-positive size.
    """

    text: TextConfig = field(default_factory=lambda: TextConfig(schemes=("rope",), checkpoints=(1000,)))
    multipliers: tuple[int, ...] = (2, 4, 8)
    dynamic_factor: float = 2.0
    finetune_methods: tuple[str, ...] = ("none", "linear", "yarn")
    finetune_multiplier: int = 4
    finetune_steps: int = 200
    finetune_checkpoints: tuple[int, ...] = (100,)
    finetune_lr: float = 1e-3

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise lists to tuples in place
        if isinstance(self.text, dict):
            set_(self, "text", TextConfig(**self.text))
        if not isinstance(self.text, TextConfig) or self.text.schemes != ("rope",):
            raise ValueError(f"text must be a TextConfig with schemes ('rope',), got {self.text!r:.80}")
        for name in ("multipliers", "finetune_methods", "finetune_checkpoints"):
            set_(self, name, tuple(getattr(self, name)))
        for m in self.multipliers:
            check_positive_int("multipliers", m)
            if m < 2:
                raise ValueError(f"multipliers must be ints >= 2 (targets past the trained length), got {m}")
        for method in self.finetune_methods:
            check_choice("finetune_methods", method, SCALING_METHODS)
        check_positive_number("dynamic_factor", self.dynamic_factor)
        check_positive_int("finetune_multiplier", self.finetune_multiplier)
        check_positive_int("finetune_steps", self.finetune_steps)
        if any(not isinstance(s, int) or not 0 < s < self.finetune_steps for s in self.finetune_checkpoints):
            raise ValueError(
                f"finetune_checkpoints must be steps in 1 .. {self.finetune_steps - 1}, got {self.finetune_checkpoints}"
            )
        check_positive_number("finetune_lr", self.finetune_lr)
        if self.text.batch_size % self.finetune_multiplier:
            raise ValueError(
                f"text.batch_size {self.text.batch_size} must be divisible by finetune_multiplier "
                f"{self.finetune_multiplier} (fine-tuning steps see as many characters as training steps)"
            )
        longest = self.text.train_length * max(*self.multipliers, 2 * self.finetune_multiplier)
        if self.text.eval_chars % longest:
            raise ValueError(f"text.eval_chars must be a multiple of the longest evaluation length {longest}")

    def to_dict(self) -> dict:
        """The configuration as JSON-ready values."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {
            k: self.text.to_dict() if k == "text" else list(v) if isinstance(v, tuple) else v for k, v in fields.items()
        }


def scaling_options(
    method: str, factor: float, *, trained: int, head_dim: int, base: float = 10000.0, dynamic_factor: float = 2.0
) -> dict:
    """The RoPE scheme options that read a model trained on ``trained`` tokens with ``method`` at ``factor``.

    Returns:
        ``{"base": ..., "scaling": ...}`` for :class:`~posenc.experiments.RopeScheme`.

    Raises:
        ValueError: If ``method`` is not one of :data:`~posenc.experiments.SCALING_METHODS` or ``factor`` is below 1.
    """
    check_choice("method", method, SCALING_METHODS)
    check_positive_number("factor", factor)
    if factor < 1:
        raise ValueError(f"factor must be >= 1, got {factor}")
    if method == "none":
        return {"base": base, "scaling": None}
    if method == "ntk":
        return {"base": ntk_scaled_base(base, factor, head_dim), "scaling": None}
    if method == "linear":
        return {"base": base, "scaling": {"rope_type": "linear", "factor": float(factor)}}
    extra = {"original_max_position_embeddings": trained}
    if method == "dynamic":
        return {"base": base, "scaling": {"rope_type": "dynamic", "factor": float(dynamic_factor)} | extra}
    return {"base": base, "scaling": {"rope_type": "yarn", "factor": float(factor)} | extra}


def _reading(config: ScalingConfig, trained: TinyTransformer, seed: int, method: str, factor: float) -> TinyTransformer:
    """The trained model's weights under ``method`` at ``factor``."""
    text = config.text
    options = scaling_options(
        method,
        factor,
        trained=text.train_length,
        head_dim=text.dim // text.num_heads,
        dynamic_factor=config.dynamic_factor,
    )
    model = TinyTransformer(text.model_config("rope", seed).replace(scheme_options=options))
    model.load_state_dict(trained.state_dict())
    return model


def _evaluate(model: TinyTransformer, ids, config: ScalingConfig, multipliers) -> list[dict]:
    n = config.text.train_length
    return [
        {"multiplier": m}
        | {
            k: v
            for k, v in evaluate_text(model, ids, length=n * m, chars=config.text.eval_chars).items()
            if k != "by_position"
        }
        for m in multipliers
    ]


def _zero_shot(config: ScalingConfig, model: TinyTransformer, seed: int, ids) -> dict[str, list]:
    """Every method at every target length; ``"none"`` at the trained length too."""
    found = {"none": _evaluate(model, ids, config, (1, *config.multipliers))}
    for method in SCALING_METHODS[1:]:
        found[method] = [
            _evaluate(_reading(config, model, seed, method, m), ids, config, (m,))[0] for m in config.multipliers
        ]
    return found


def _scaling_job(config: ScalingConfig, seed: int) -> dict:
    """Train one RoPE model, read it every way, fine-tune the chosen methods (a worker's job)."""
    text = config.text
    try:
        corpus = stdlib_corpus(train_chars=text.train_chars, validation_chars=text.eval_chars + 1)
        model = TinyTransformer(text.model_config("rope", seed))
        start = time.perf_counter()
        losses, checkpoints, _ = train_with_checkpoints(
            model,
            TextTask(corpus.train),
            evaluate=lambda: _zero_shot(config, model, seed, corpus.validation),
            checkpoints=(*text.checkpoints, text.steps),
            **training_options(text, seed),
        )
        finetuned = []
        fm = config.finetune_multiplier
        for method in config.finetune_methods:
            tuned = _reading(config, model, seed, method, fm)
            found = []

            def record(step: int, tuned_losses: list[float], tuned=tuned, found=found) -> bool:
                if step in config.finetune_checkpoints or step == config.finetune_steps:
                    recent = tuned_losses[-20:]
                    evaluations = _evaluate(tuned, corpus.validation, config, (1, fm, 2 * fm))
                    found.append({"step": step, "loss": sum(recent) / len(recent), "evaluations": evaluations})
                return False

            train_tiny(
                tuned,
                TextTask(corpus.train),
                steps=config.finetune_steps,
                length=text.train_length * fm,
                batch_size=text.batch_size // fm,
                lr=config.finetune_lr,
                warmup=20,
                seed=seed + 1,  # other windows than the first steps of training
                schedule="constant",
                callback=record,
            )
            finetuned.append({"method": method, "factor": fm, "checkpoints": found})
        seconds = round(time.perf_counter() - start, 3)
    except BaseException as err:
        err.add_note(f"in the scaling run seed={seed}")
        raise
    return {
        "seed": seed,
        "losses": losses[:: max(1, len(losses) // 40)] + [losses[-1]],
        "zero_shot": [{"step": c["step"], "loss": c["loss"], "evaluations": c["evaluations"]} for c in checkpoints],
        "finetuned": finetuned,
        "seconds": seconds,
    }


def run_scaling_experiment(
    config: ScalingConfig, *, progress: bool = False, jobs: int = 1, on_run: Callable[[dict], None] | None = None
) -> dict:
    """Every seed of ``config`` (in ``jobs`` worker processes); the results document.

    The document: ``{"schema": SCALING_SCHEMA, "config", "corpus",
    "environment", "runs"}``, one run per seed in seed order, each with
    ``"zero_shot"`` (per training checkpoint: method -> evaluations) and
    ``"finetuned"`` (per method: evaluations at each fine-tuning checkpoint).

    Raises:
        ValueError: If ``config`` is not a :class:`ScalingConfig` or ``jobs`` is not an int >= 1.
    """
    if not isinstance(config, ScalingConfig):
        raise ValueError(f"config must be a ScalingConfig, got {type(config).__name__}")
    check_positive_int("jobs", jobs)
    corpus = stdlib_corpus(train_chars=config.text.train_chars, validation_chars=config.text.eval_chars + 1)
    document = {
        "schema": SCALING_SCHEMA,
        "config": config.to_dict(),
        "corpus": corpus.summary(),
        "environment": environment(),
        "runs": [],
    }
    found: dict[int, dict] = {}
    bar = progress_bar(len(config.text.seeds), progress)

    def ordered() -> list[dict]:
        return [found[s] for s in config.text.seeds if s in found]

    def record(job: tuple, run: dict) -> None:
        found[job[0]] = run
        bar.update(1)
        if on_run is not None:
            on_run({"schema": SCALING_SCHEMA, "complete": False} | document | {"runs": ordered()})

    try:
        run_jobs(_scaling_job, config, [(s,) for s in config.text.seeds], record, jobs)
    finally:
        bar.close()
    return document | {"runs": ordered()}


def load_scaling_results(path) -> dict:
    """Read a document written by :func:`run_scaling_experiment` (``python -m posenc.experiments scaling``).

    Raises:
        ValueError: If the file is not JSON of schema :data:`~posenc.experiments.SCALING_SCHEMA`, or a run lacks a key.
        FileNotFoundError: If there is no file at ``path``.
    """
    path, document = read_document(
        path, SCALING_SCHEMA, "scaling results file", ("config", "corpus", "environment", "runs")
    )
    ScalingConfig(**document["config"])
    for i, run in enumerate(document["runs"]):
        lacking = [k for k in ("seed", "zero_shot", "finetuned") if k not in run]
        if lacking:
            raise ValueError(f"{path}: runs[{i}] lacks {lacking}")
    return document


def scaling_summary(document: dict, step: int | None = None) -> dict:
    """Bits per character per seed, as ``{(kind, method, multiplier): [value per seed]}``.

    ``kind`` is ``"zero-shot"`` (at training step ``step``, default the end)
    or ``"finetuned"`` (after every fine-tuning step), ``multiplier`` the
    evaluation length over the trained length.

    Raises:
        ValueError: If ``document`` is not a results document of :data:`~posenc.experiments.SCALING_SCHEMA`,
            or ``step`` is not a training checkpoint of every run.
    """
    if not isinstance(document, dict) or document.get("schema") != SCALING_SCHEMA or "runs" not in document:
        raise ValueError(f"document must be a results document of schema {SCALING_SCHEMA!r}, got {document!r:.60}")
    rows: dict[tuple, list] = {}
    for run in document["runs"]:
        steps = [c["step"] for c in run["zero_shot"]]
        if step is not None and step not in steps:
            raise ValueError(f"step must be a training checkpoint, one of {steps}; got {step!r}")
        chosen = run["zero_shot"][-1 if step is None else steps.index(step)]
        for method, evaluations in chosen["evaluations"].items():
            for e in evaluations:
                rows.setdefault(("zero-shot", method, e["multiplier"]), []).append(e["bits_per_char"])
        for tuned in run["finetuned"]:
            for e in tuned["checkpoints"][-1]["evaluations"]:
                rows.setdefault(("finetuned", tuned["method"], e["multiplier"]), []).append(e["bits_per_char"])
    return rows
