"""Deterministic training and evaluation of the tiny Transformer.

:func:`train_tiny` trains with Adam, a linear warm-up and cosine decay, on
batches drawn from a seeded generator, with deterministic algorithms and one
CPU thread: the same model, task and seed give the same losses, bit for bit.
:func:`tiny_accuracy` and :func:`tiny_accuracy_by_position` count the answers
a model gets right on fresh examples of any length.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from .._checks import check_choice, check_nonnegative_int, check_positive_int
from .model import TinyTransformer
from .tasks import IGNORE, Task

__all__ = [
    "LOSS_WINDOW",
    "SCHEDULES",
    "deterministic",
    "tiny_accuracy",
    "tiny_accuracy_by_position",
    "train_tiny",
    "train_with_checkpoints",
    "training_options",
]


@contextmanager
def deterministic(device: torch.device | str = "cpu", threads: int = 1) -> Iterator[None]:
    """Run the enclosed code with deterministic algorithms and ``threads`` CPU threads.

    Restores the previous settings on exit. On a GPU, operations without a
    deterministic implementation warn instead of failing.
    """
    device = torch.device(device)
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.get_num_threads(),
    )
    torch.use_deterministic_algorithms(True, warn_only=device.type != "cpu")
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.set_num_threads(before[2])


def _draw_length(length: int | tuple[int, int], generator: torch.Generator) -> int:
    """``length`` itself, or a length drawn uniformly from ``(min, max)``."""
    if isinstance(length, int):
        return check_positive_int("length", length)
    if not (isinstance(length, tuple) and len(length) == 2 and all(isinstance(n, int) for n in length)):
        raise ValueError(f"length must be an int or a (min, max) tuple of ints, got {length!r}")
    lo, hi = check_positive_int("length[0]", length[0]), length[1]
    if hi < lo:
        raise ValueError(f"length must have min <= max, got {length}")
    return int(torch.randint(lo, hi + 1, (), generator=generator))


#: Learning-rate schedules of :func:`train_tiny`, after the linear warm-up.
SCHEDULES = ("cosine", "constant")


def _warmup_schedule(warmup: int, steps: int, kind: str = "cosine") -> Callable[[int], float]:
    """Learning-rate multiplier of each step: linear warm-up over ``warmup`` steps, then cosine decay to 0, or 1."""

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if kind == "constant":
            return 1.0
        # 0.5 (1 + cos(pi t / T)), t steps after the warm-up, T = steps - warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    return schedule


def train_tiny(
    model: TinyTransformer,
    task: Task,
    *,
    steps: int = 400,
    length: int | tuple[int, int] = 16,
    batch_size: int = 64,
    lr: float = 1e-2,
    warmup: int = 20,
    seed: int = 0,
    schedule: str = "cosine",
    callback: Callable[[int, list[float]], bool | None] | None = None,
) -> list[float]:
    """Train ``model`` on ``task`` in place, deterministically.

    Adam (no weight decay), a linear warm-up then cosine decay of the learning
    rate (or, with ``schedule="constant"``, the peak rate to the end),
    gradients clipped at norm 1, cross-entropy on the answer positions.
    With a constant rate, a run of ``n`` steps is the first ``n`` steps of a
    longer one, bit for bit: checkpoints of one run are runs of every budget.
    The batches come from a generator seeded with ``seed``; the run uses
    deterministic algorithms and one CPU thread, so the same model, task and
    seed give the same losses, bit for bit.

    Args:
        model: The model; trained in place.
        task: The task to draw batches from.
        steps: Number of optimizer steps.
        length: Data tokens per example: an int, or ``(min, max)`` to draw a
            length per batch.
        batch_size: Examples per batch.
        lr: Peak learning rate.
        warmup: Steps of linear warm-up.
        seed: Seed of the batches.
        schedule: ``"cosine"`` or ``"constant"``, after the warm-up.
        callback: Called after every step as ``callback(step, losses)``
            (``step`` counts from 1; ``losses`` so far), with the model in
            training mode; a true result ends training there. Use it to
            evaluate checkpoints (:func:`tiny_accuracy` restores the mode).
            It draws nothing from the batches' generator, so it does not
            change the run.

    Returns:
        The training loss of every step (fewer than ``steps`` if
        ``callback`` ended training). The model is left in evaluation
        mode; if training is interrupted (an error, Ctrl-C), in the mode it
        was in before.
    """
    check_positive_int("steps", steps)
    check_nonnegative_int("warmup", warmup)
    check_choice("schedule", schedule, SCHEDULES)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable or None, got {type(callback).__name__}")
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=False)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _warmup_schedule(warmup, steps, schedule))
    losses = []
    was_training, finished = model.training, False
    model.train()
    try:
        with deterministic(device):
            for _ in range(steps):
                batch = task.sample(batch_size, _draw_length(length, generator), generator)
                inputs, targets = batch.inputs.to(device), batch.targets.to(device)
                logits = model(inputs)  # [b, s, vocab]
                loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)  # over b * s
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                losses.append(loss.item())
                if callback is not None and callback(len(losses), losses):
                    break
        finished = True
    finally:  # done: evaluation mode; interrupted by an error or Ctrl-C: the mode it came in
        model.train(was_training and not finished)
    return losses


#: Training steps over which a checkpoint's loss is averaged.
LOSS_WINDOW = 50


def training_options(config, seed: int) -> dict:
    """:func:`train_tiny`'s keywords taken from an experiment's config and a seed.

    ``config`` is any of the experiments' configs: it has ``steps``,
    ``train_length``, ``batch_size``, ``lr``, ``warmup`` and ``schedule``.
    """
    return {
        "steps": config.steps,
        "length": config.train_length,
        "batch_size": config.batch_size,
        "lr": config.lr,
        "warmup": config.warmup,
        "seed": seed,
        "schedule": config.schedule,
    }


def train_with_checkpoints(
    model: TinyTransformer,
    task: Task,
    *,
    evaluate: Callable[[], object],
    checkpoints: Sequence[int],
    converged_loss: float = 0.0,
    **options,
) -> tuple[list[float], list[dict], int | None]:
    """:func:`train_tiny`, evaluating the model at ``checkpoints`` and stopping once the loss has converged.

    At every checkpoint step the mean training loss over the last
    ``LOSS_WINDOW`` steps and ``evaluate()`` are recorded. The run has
    converged at the first checkpoint whose mean loss is below
    ``converged_loss``; it then trains on to the next checkpoint (a control:
    does more training change the evaluation?) and stops there.

    Args:
        model: The model; trained in place.
        task: The task to draw batches from.
        evaluate: Called with no argument at each checkpoint; its result is stored.
        checkpoints: Steps (from 1) at which to evaluate.
        converged_loss: The convergence threshold; 0 never stops early.
        **options: :func:`train_tiny`'s keywords (``steps``, ``lr``, ...).

    Returns:
        ``(losses, records, converged_at)``: every step's loss, one
        ``{"step", "loss", "evaluations"}`` per checkpoint reached, and the
        step of convergence or ``None``.
    """
    if not callable(evaluate):
        raise TypeError(f"evaluate must be callable, got {type(evaluate).__name__}")
    stops, records = set(checkpoints), []
    converged_at = None

    def at_step(step: int, losses: list[float]) -> bool:
        nonlocal converged_at
        if step not in stops:
            return False
        recent = losses[-LOSS_WINDOW:]
        loss = sum(recent) / len(recent)
        records.append({"step": step, "loss": loss, "evaluations": evaluate()})
        if converged_at is not None:
            return True  # the control checkpoint after convergence
        if loss < converged_loss:
            converged_at = step
        return False

    losses = train_tiny(model, task, callback=at_step, **options)
    return losses, records, converged_at


@torch.no_grad()
def _answer_counts(
    model: TinyTransformer, task: Task, length: int, *, num_examples: int, batch_size: int, seed: int, offset: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right answers and answers at each position, float64 ``[task.seq_len(length)]`` each."""
    check_positive_int("num_examples", num_examples)
    check_positive_int("batch_size", batch_size)
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    seq_len = task.seq_len(length)
    correct = torch.zeros(seq_len, dtype=torch.float64)
    total = torch.zeros(seq_len, dtype=torch.float64)
    done = 0
    with deterministic(device):
        while done < num_examples:
            n = min(batch_size, num_examples - done)
            batch = task.sample(n, length, generator)
            predicted = model(batch.inputs.to(device), offset=offset).argmax(-1).cpu()  # [n, s]
            answered = batch.targets != IGNORE
            correct += ((predicted == batch.targets) & answered).sum(0)
            total += answered.sum(0)
            done += n
    model.train(was_training)
    return correct, total


def tiny_accuracy_by_position(
    model: TinyTransformer,
    task: Task,
    *,
    length: int,
    num_examples: int = 512,
    batch_size: int = 256,
    seed: int = 12345,
    offset: int = 0,
) -> torch.Tensor:
    """Fraction of answers the model gets right at each input position.

    Args:
        model: A trained model.
        task: The task.
        length: Data tokens per example (may exceed the training length).
        num_examples: Examples drawn.
        batch_size: Examples per forward pass.
        seed: Seed of the examples (differs from training seeds by default).
        offset: Position of the first token.

    Returns:
        float64 tensor ``[task.seq_len(length)]``; NaN where the task has no
        answer.
    """
    correct, total = _answer_counts(
        model, task, length, num_examples=num_examples, batch_size=batch_size, seed=seed, offset=offset
    )
    return correct / total


def tiny_accuracy(
    model: TinyTransformer,
    task: Task,
    *,
    length: int,
    num_examples: int = 512,
    batch_size: int = 256,
    seed: int = 12345,
    offset: int = 0,
) -> float:
    """Fraction of all answers the model gets right; arguments as :func:`tiny_accuracy_by_position`."""
    correct, total = _answer_counts(
        model, task, length, num_examples=num_examples, batch_size=batch_size, seed=seed, offset=offset
    )
    return (correct.sum() / total.sum()).item()
