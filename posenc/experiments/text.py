"""A character-level language model on real text, evaluated at 1, 2, 4 and 8 times its training length.

The small-scale counterpart of the ALiBi paper's figure of perplexity
against input length (Press et al., 2022): one causal
:class:`posenc.experiments.TinyTransformer` per position scheme and seed learns to
predict the next character of the Python standard library's sources
(:func:`posenc.experiments.corpus.stdlib_corpus`) from windows of
``train_length`` characters, and is evaluated on files it never saw, cut
into windows of every evaluation length. Every length covers the same
``eval_chars`` predicted characters, so the numbers compare directly: a
model that uses a longer context well predicts better; one that breaks on
unseen distances predicts worse. The measure is bits per character, the
mean cross-entropy divided by ln 2.

``rope_pi`` has no weights of its own: when ``rope`` runs too, the RoPE
model of each seed is evaluated both ways (with ``"trained_as": "rope"`` in
the ``rope_pi`` record) instead of being trained twice to the same weights.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .._checks import check_choice, check_positive_int, check_positive_number, check_unique_list
from .corpus import VOCAB_SIZE, TextTask, stdlib_corpus
from .model import TinyConfig, TinyTransformer, check_model_size
from .registry import make_position_scheme, position_schemes
from .results import environment, read_document
from .runner import progress_bar, run_jobs
from .train import SCHEDULES, deterministic, train_with_checkpoints, training_options

__all__ = ["TEXT_SCHEMA", "TextConfig", "evaluate_text", "load_text_results", "run_text_experiment", "text_summary"]

#: Identifies a results document of :func:`run_text_experiment`.
TEXT_SCHEMA = "posenc.text/1"
#: Number of bins of the loss-by-position curve stored per evaluation.
POSITION_BINS = 16


@dataclass(frozen=True)
class TextConfig:
    """Everything that decides the real-text experiment's results.

    Args:
        schemes: Registered position schemes.
        seeds: Seeds of the weights and of the training windows.
        steps: Optimizer steps per run.
        checkpoints: Steps at which a run is also evaluated, ascending, < ``steps``.
        train_length: Characters per training window.
        multipliers: Evaluation lengths as multiples of ``train_length``.
        dim, num_heads, num_layers: The model's sizes.
        batch_size: Windows per step.
        lr: Learning rate, reached after ``warmup`` steps.
        warmup: Steps of linear warm-up.
        schedule: ``"constant"`` (checkpoints are then every budget's model) or ``"cosine"``.
        train_chars: Characters of training text.
        eval_chars: Characters predicted at every evaluation length; a
            multiple of the longest length.

    Raises:
        ValueError: On an unknown or repeated scheme, a repeated seed, a
            non-positive size, checkpoints not ascending below ``steps``, or
            an ``eval_chars`` that the longest length does not divide.
    """

    schemes: tuple[str, ...] = ("none", "sinusoidal", "learned", "shaw", "t5", "alibi", "rope", "rope_pi")
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 2000
    checkpoints: tuple[int, ...] = (500, 1000)
    train_length: int = 64
    multipliers: tuple[int, ...] = (1, 2, 4, 8)
    dim: int = 64
    num_heads: int = 4
    num_layers: int = 2
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 100
    schedule: str = "constant"
    train_chars: int = 2_000_000
    eval_chars: int = 65_536

    def __post_init__(self) -> None:
        known = position_schemes()
        set_ = object.__setattr__  # frozen: normalise lists to tuples in place
        set_(
            self, "schemes", check_unique_list("schemes", self.schemes, lambda n, v: check_choice(n, v, known), "names")
        )
        set_(self, "seeds", check_unique_list("seeds", self.seeds, _check_seed))
        set_(self, "multipliers", check_unique_list("multipliers", self.multipliers, check_positive_int))
        set_(self, "checkpoints", tuple(self.checkpoints))
        for name in ("steps", "train_length", "dim", "num_heads", "num_layers", "batch_size", "train_chars"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("eval_chars", self.eval_chars)
        for step in self.checkpoints:
            check_positive_int("checkpoints", step)
        if list(self.checkpoints) != sorted(set(self.checkpoints)) or any(s >= self.steps for s in self.checkpoints):
            raise ValueError(f"checkpoints must be ascending steps below steps = {self.steps}, got {self.checkpoints}")
        check_positive_number("lr", self.lr)
        check_choice("schedule", self.schedule, SCHEDULES)
        if self.eval_chars % max(self.eval_lengths):
            raise ValueError(
                f"eval_chars must be a multiple of the longest evaluation length {max(self.eval_lengths)}, "
                f"got {self.eval_chars}"
            )
        TinyConfig(VOCAB_SIZE, dim=self.dim, num_heads=self.num_heads)  # checks the head split
        sizes = {name: getattr(self, name) for name in ("dim", "num_heads", "num_layers", "batch_size")}
        check_model_size(**sizes, longest=max(self.eval_lengths))
        for name in self.schemes:  # each scheme built once, as the runs will
            try:
                with torch.random.fork_rng(devices=[]):
                    make_position_scheme(
                        name, dim=self.dim, num_heads=self.num_heads, max_len=self.train_length, causal=True
                    )
            except Exception as err:  # a scheme of one's own may raise anything
                raise ValueError(
                    f"scheme {name!r} cannot be built with dim={self.dim}, num_heads={self.num_heads}: {err}"
                ) from err

    @property
    def eval_lengths(self) -> tuple[int, ...]:
        """Characters per evaluation window, ``train_length * m`` per multiplier."""
        return tuple(self.train_length * m for m in self.multipliers)

    def model_config(self, scheme: str, seed: int) -> TinyConfig:
        """The causal tiny Transformer of one run; ``max_len`` is the training length."""
        return TinyConfig(
            VOCAB_SIZE,
            scheme=scheme,
            dim=self.dim,
            num_heads=self.num_heads,
            num_layers=self.num_layers,
            max_len=self.train_length,
            causal=True,
            seed=seed,
        )

    def to_dict(self) -> dict:
        """The configuration as JSON-ready values."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def _check_seed(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must hold ints >= 0, got {value!r}")


@torch.no_grad()
def evaluate_text(model: TinyTransformer, ids: torch.Tensor, *, length: int, chars: int, batch_size: int = 16) -> dict:
    """Bits per character of ``model`` on ``ids`` cut into windows of ``length`` characters.

    The first ``chars`` predictions of the text are scored (``chars``
    divisible by ``length``): window ``w`` holds characters
    ``w * length ..`` and predicts each following one.

    Returns:
        ``{"length", "status": "ok", "bits_per_char", "by_position"}``, the
        last a list of ``POSITION_BINS`` (16) mean bits per character over
        equal bins of positions; or ``{"length", "status": "cannot run",
        "reason"}`` for a scheme with no position past its table.

    Raises:
        ValueError: If ``chars`` is not a multiple of ``length`` or the text is too short.
    """
    check_positive_int("length", length)
    check_positive_int("chars", chars)
    if chars % length or chars + 1 > len(ids):
        raise ValueError(f"chars must be a multiple of length = {length} below the text's {len(ids)}, got {chars}")
    inputs = ids[:chars].long().view(-1, length)
    targets = ids[1 : chars + 1].long().view(-1, length)
    was_training = model.training
    model.eval()
    losses = []
    try:
        with deterministic(next(model.parameters()).device):
            for i in range(0, len(inputs), batch_size):
                logits = model(inputs[i : i + batch_size])  # [n, length, vocab]
                losses.append(F.cross_entropy(logits.transpose(1, 2), targets[i : i + batch_size], reduction="none"))
    except IndexError as err:  # past a learned table
        return {"length": length, "status": "cannot run", "reason": str(err)}
    finally:
        model.train(was_training)
    bits = torch.cat(losses).double() / math.log(2)  # [windows, length]
    bins = bits.mean(0).view(POSITION_BINS, -1).mean(1) if length % POSITION_BINS == 0 else bits.mean(0)
    return {"length": length, "status": "ok", "bits_per_char": bits.mean().item(), "by_position": bins.tolist()}


def _evaluate_all(config: TextConfig, models: dict[str, TinyTransformer], ids: torch.Tensor) -> dict[str, list]:
    """Every evaluation length for every model of ``models``: scheme -> evaluations."""
    return {
        scheme: [
            {"multiplier": m} | evaluate_text(model, ids, length=n, chars=config.eval_chars)
            for m, n in zip(config.multipliers, config.eval_lengths, strict=True)
        ]
        for scheme, model in models.items()
    }


def _twins(config: TextConfig, scheme: str) -> list[str]:
    """The schemes one training run of ``scheme`` stands for: rope also for rope_pi when both are asked."""
    return [scheme, "rope_pi"] if scheme == "rope" and "rope_pi" in config.schemes else [scheme]


def _jobs(config: TextConfig) -> list[tuple[str, int]]:
    trained = [s for s in config.schemes if not (s == "rope_pi" and "rope" in config.schemes)]
    return [(scheme, seed) for scheme in trained for seed in config.seeds]


def _text_job(config: TextConfig, scheme: str, seed: int) -> list[dict]:
    """Train one model and return the record of every scheme it stands for (a worker's job)."""
    try:
        corpus = stdlib_corpus(train_chars=config.train_chars, validation_chars=config.eval_chars + 1)
        model = TinyTransformer(config.model_config(scheme, seed))
        models = {name: model for name in _twins(config, scheme)}
        if "rope_pi" in models and scheme == "rope":
            models["rope_pi"] = TinyTransformer(config.model_config("rope_pi", seed))

        def evaluate() -> dict[str, list]:
            for other in models.values():
                if other is not model:
                    other.load_state_dict(model.state_dict())  # rope_pi holds no weights of its own
            return _evaluate_all(config, models, corpus.validation)

        start = time.perf_counter()
        losses, checkpoints, _ = train_with_checkpoints(
            model,
            TextTask(corpus.train),
            evaluate=evaluate,
            checkpoints=(*config.checkpoints, config.steps),
            **training_options(config, seed),
        )
        seconds = round(time.perf_counter() - start, 3)
    except BaseException as err:
        err.add_note(f"in the text run scheme={scheme!r}, seed={seed}")
        raise
    return [
        {
            "scheme": name,
            "seed": seed,
            "trained_as": scheme,
            "parameters": sum(p.numel() for p in model.parameters()),
            "losses": losses[:: max(1, len(losses) // 40)] + [losses[-1]],
            "checkpoints": [
                {"step": c["step"], "loss": c["loss"], "evaluations": c["evaluations"][name]} for c in checkpoints
            ],
            "evaluations": checkpoints[-1]["evaluations"][name],
            "train_seconds": seconds,
        }
        for name in models
    ]


def run_text_experiment(
    config: TextConfig, *, progress: bool = False, jobs: int = 1, on_run: Callable[[dict], None] | None = None
) -> dict:
    """Train and evaluate every run of ``config`` (in ``jobs`` worker processes); the results document.

    The document: ``{"schema": TEXT_SCHEMA, "config", "corpus" (what
    :meth:`~posenc.experiments.corpus.TextCorpus.summary` gives),
    "environment", "runs"}``, runs ordered by scheme, then seed. ``on_run``
    gets the document so far after every finished run, marked
    ``"complete": False``.

    Raises:
        ValueError: If ``config`` is not a :class:`TextConfig` or ``jobs`` is not an int >= 1.
        FileNotFoundError: If this Python has no standard library sources.
    """
    if not isinstance(config, TextConfig):
        raise ValueError(f"config must be a TextConfig, got {type(config).__name__}")
    check_positive_int("jobs", jobs)
    corpus = stdlib_corpus(train_chars=config.train_chars, validation_chars=config.eval_chars + 1)
    document = {
        "schema": TEXT_SCHEMA,
        "config": config.to_dict(),
        "corpus": corpus.summary(),
        "environment": environment(),
        "runs": [],
    }
    order, found = _jobs(config), {}
    bar = progress_bar(len(order), progress)

    def ordered() -> list[dict]:
        return [found[s, seed] for s in config.schemes for seed in config.seeds if (s, seed) in found]

    def record(job: tuple, records: list[dict]) -> None:
        found.update({(r["scheme"], r["seed"]): r for r in records})
        bar.set_postfix_str(" ".join(map(str, job)))
        bar.update(1)
        if on_run is not None:
            on_run({"schema": TEXT_SCHEMA, "complete": False} | document | {"runs": ordered()})

    try:
        run_jobs(_text_job, config, order, record, jobs)
    finally:
        bar.close()
    return document | {"runs": ordered()}


def load_text_results(path) -> dict:
    """Read a document written by :func:`run_text_experiment` (``python -m posenc.experiments text``).

    Raises:
        ValueError: If the file is not JSON of schema :data:`~posenc.experiments.TEXT_SCHEMA` with
            ``config``, ``corpus`` and ``runs``, or a run lacks a key.
        FileNotFoundError: If there is no file at ``path``.
    """
    path, document = read_document(path, TEXT_SCHEMA, "text results file", ("config", "corpus", "environment", "runs"))
    config = TextConfig(**document["config"])
    for i, run in enumerate(document["runs"]):
        lacking = [k for k in ("scheme", "seed", "checkpoints", "evaluations") if k not in run]
        if lacking or len(run["evaluations"]) != len(config.multipliers):
            raise ValueError(f"{path}: runs[{i}] lacks {lacking or 'one evaluation per multiplier'}")
    return document


def text_summary(document: dict, step: int | None = None) -> dict[tuple[str, int], dict]:
    """Bits per character over seeds, per (scheme, evaluation length).

    Args:
        document: From :func:`run_text_experiment` or :func:`load_text_results`.
        step: A checkpoint's step (default: the end of training).

    Returns:
        ``{(scheme, length): {"status", "values" (per seed), "mean", "min", "max"}}``;
        the values are ``None`` where the scheme cannot run.

    Raises:
        ValueError: If ``document`` is not a results document of
            :data:`~posenc.experiments.TEXT_SCHEMA`, or ``step`` is not a checkpoint of every run.
    """
    if not isinstance(document, dict) or document.get("schema") != TEXT_SCHEMA or "runs" not in document:
        raise ValueError(
            f"document must be a results document of schema {TEXT_SCHEMA!r} with 'runs', got {document!r:.60}"
        )
    rows: dict[tuple[str, int], dict] = {}
    for run in document["runs"]:
        if step is None:
            evaluations = run["evaluations"]
        else:
            steps = [c["step"] for c in run["checkpoints"]]
            if step not in steps:
                raise ValueError(f"step must be a checkpoint, one of {steps}; got {step!r}")
            evaluations = run["checkpoints"][steps.index(step)]["evaluations"]
        for e in evaluations:
            row = rows.setdefault((run["scheme"], e["length"]), {"status": e["status"], "values": []})
            row["values"].append(e.get("bits_per_char"))
    for row in rows.values():
        ran = [v for v in row["values"] if v is not None]
        row["status"] = "ok" if len(ran) == len(row["values"]) else "cannot run"
        row |= (
            {"mean": sum(ran) / len(ran), "min": min(ran), "max": max(ran)}
            if ran
            else dict.fromkeys(("mean", "min", "max"))
        )
    return rows
