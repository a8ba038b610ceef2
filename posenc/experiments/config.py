"""What decides a length-extrapolation experiment's results: :class:`ExperimentConfig`, checked.

:mod:`posenc.experiments.extrapolation` runs an experiment from it, and
:mod:`posenc.experiments.results` checks a recorded document's configuration with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from .._checks import (
    check_choice,
    check_heads,
    check_nonnegative_int,
    check_positive_int,
    check_positive_number,
    check_unique_list,
)
from .model import TinyConfig, check_model_size
from .registry import make_position_scheme, position_schemes
from .tasks import TASKS, Task, check_sizes, make_task
from .train import SCHEDULES

__all__ = ["ALL_SCHEMES", "ExperimentConfig", "build_task"]


#: The schemes of the book, in the order the chapter shows them.
ALL_SCHEMES = ("none", "sinusoidal", "learned", "shaw", "t5", "alibi", "rope", "rope_pi")


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything that decides an experiment's results.

    Runs are the product ``schemes x tasks x seeds``. The model is the tiny
    Transformer of chapter 4 with ``num_heads=4`` (ALiBi's slopes need a few
    heads: with 2 they are 1/16 and 1/256, too flat to single out a
    neighbour), trained with :func:`posenc.experiments.train_tiny`. The configuration
    holds the model's sizes (``causal``, ``dim``, ``num_heads``,
    ``num_layers``); ``model_config`` makes the :class:`posenc.experiments.TinyConfig` of
    one run from them. The fields are those of the saved JSON documents
    (schema ``posenc.experiments/2``), in the same order.

    Args:
        schemes: Registered position schemes (:func:`posenc.experiments.position_schemes`).
        tasks: Task names (``"reverse"``, ``"shift"``, ``"lookup"``,
            ``"passkey"``, ``"count"``), built with their defaults (16 symbols,
            10 digits for ``passkey``, 4 symbols counted up to 7 for ``count``;
            ``lookup`` with ``max_length`` the longest evaluation length).
        seeds: Seeds, >= 0; a seed sets the initial weights and the batches.
        steps: Optimizer steps per run, at most.
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
        checkpoints: Steps at which a run is evaluated besides its last,
            ascending, each <= ``steps``. With ``schedule="constant"`` the
            checkpoint at step ``n`` is the model a budget of ``n`` steps
            gives, so one run shows accuracy against budget.
        schedule: Learning rate after the warm-up, ``"cosine"`` (decay to
            0 at ``steps``) or ``"constant"``.
        converged_loss: A run has converged at the first checkpoint where
            its mean training loss over the last 50 steps is
            below this; it then trains on to the next checkpoint, a control
            that more training changes nothing, and stops there. 0 (the
            default): every run trains all ``steps``.

    Raises:
        ValueError: On an unknown scheme or task, a repeated or negative
            seed, a non-positive size or learning rate, an input longer than
            ``MAX_LENGTH`` or more than ``MAX_EXAMPLES`` examples (both in ``posenc.experiments.tasks``),
            or a scheme that cannot be built with ``dim`` and ``num_heads`` (each is built once).
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
    checkpoints: tuple[int, ...] = ()
    schedule: str = "cosine"
    converged_loss: float = 0.0

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise lists to tuples in place
        schemes, tasks = position_schemes(), tuple(TASKS)
        set_(
            self,
            "schemes",
            check_unique_list("schemes", self.schemes, lambda n, v: check_choice(n, v, schemes), "names"),
        )
        set_(self, "tasks", check_unique_list("tasks", self.tasks, lambda n, v: check_choice(n, v, tasks), "names"))
        set_(self, "seeds", check_unique_list("seeds", self.seeds, check_nonnegative_int))
        set_(self, "multipliers", check_unique_list("multipliers", self.multipliers, check_positive_int))
        for name in ("steps", "train_length", "dim", "num_heads", "num_layers", "batch_size", "num_examples"):
            check_positive_int(name, getattr(self, name))
        check_sizes(self.train_length, self.train_length * max(self.multipliers, default=1), self.num_examples)
        check_nonnegative_int("warmup", self.warmup)
        check_nonnegative_int("eval_seed", self.eval_seed)
        if not isinstance(self.causal, bool):
            raise ValueError(f"causal must be True or False, got {self.causal!r}")
        check_positive_number("lr", self.lr)
        check_choice("schedule", self.schedule, SCHEDULES)
        self._check_checkpoints()
        if isinstance(self.converged_loss, bool) or not isinstance(self.converged_loss, (int, float)):
            raise ValueError(f"converged_loss must be a number >= 0, got {self.converged_loss!r}")
        if not 0 <= self.converged_loss < float("inf"):
            raise ValueError(f"converged_loss must be a finite number >= 0, got {self.converged_loss!r}")
        check_heads(self.dim, self.num_heads)
        sizes = {name: getattr(self, name) for name in ("dim", "num_heads", "num_layers", "batch_size")}
        longest = max(build_task(self, task).seq_len(max(self.eval_lengths)) for task in self.tasks)
        check_model_size(**sizes, longest=longest)
        _check_schemes_build(self)

    def _check_checkpoints(self) -> None:
        """Normalise ``checkpoints`` to a tuple; raise unless ascending positive ints, each <= ``steps``."""
        values = self.checkpoints
        if isinstance(values, str) or not isinstance(values, Sequence):
            raise ValueError(f"checkpoints must be a list of steps, got {values!r}")
        for value in values:
            check_positive_int("checkpoints", value)
        if list(values) != sorted(set(values)) or (values and values[-1] > self.steps):
            raise ValueError(f"checkpoints must be ascending steps, each <= steps = {self.steps}, got {list(values)}")
        object.__setattr__(self, "checkpoints", tuple(values))

    @property
    def evaluation_steps(self) -> tuple[int, ...]:
        """Steps at which a run is evaluated, ``checkpoints`` and ``steps``, in ascending order."""
        return tuple(sorted(set(self.checkpoints) | {self.steps}))

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
            ValueError: If ``values`` is not a dict, lacks a field (rather
                than take today's default), has a key that is not a field, or
                holds an invalid value.
        """
        fields = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(values, Mapping):
            raise ValueError(f"config must be a dict of the fields {fields}, got {type(values).__name__}")
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ValueError(f"config has unknown key(s) {unknown}; fields are {sorted(fields)}")
        missing = [name for name in fields if name not in values]
        if missing:
            raise ValueError(f"config lacks the key(s) {missing}; a saved configuration names every field")
        return cls(**values)

    def replace(self, **changes) -> ExperimentConfig:
        """A copy with some fields changed, for example a subset of schemes and seeds."""
        return dataclasses.replace(self, **changes)


def _check_schemes_build(config: ExperimentConfig) -> None:
    """Build every scheme of ``config`` once (global random state untouched); raise ValueError naming one that fails."""
    max_len = max(build_task(config, name).seq_len(config.train_length) for name in config.tasks)
    for name in config.schemes:
        try:
            with torch.random.fork_rng(devices=[]):
                make_position_scheme(
                    name, dim=config.dim, num_heads=config.num_heads, max_len=max_len, causal=config.causal
                )
        except Exception as err:  # a scheme of one's own may raise anything
            sizes = f"dim={config.dim}, num_heads={config.num_heads} (head_dim {config.dim // config.num_heads})"
            raise ValueError(f"scheme {name!r} cannot be built with {sizes}: {err}") from err


def build_task(config: ExperimentConfig, name: str) -> Task:
    """The task ``name`` as the experiment uses it (``lookup`` can query every evaluation length)."""
    check_choice("task", name, config.tasks)
    if name == "lookup":
        return make_task(name, max_length=max(config.eval_lengths + (config.train_length,)))
    return make_task(name)
