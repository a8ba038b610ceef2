"""Deterministic training and evaluation of the tiny Transformer.

:func:`train_tiny` trains with Adam, a linear warm-up and cosine decay, on
batches drawn from a seeded generator, with deterministic algorithms and one
CPU thread: the same model, task and seed give the same losses, bit for bit.
:func:`tiny_accuracy` and :func:`tiny_accuracy_by_position` count the answers
a model gets right on fresh examples of any length.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from .._checks import check_nonnegative_int, check_positive_int
from .model import TinyTransformer
from .tasks import IGNORE, Task

__all__ = ["deterministic", "tiny_accuracy", "tiny_accuracy_by_position", "train_tiny"]


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


def _warmup_cosine(warmup: int, steps: int) -> Callable[[int], float]:
    """Learning-rate multiplier of each step: linear warm-up over ``warmup`` steps, then cosine decay to 0."""

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
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
) -> list[float]:
    """Train ``model`` on ``task`` in place, deterministically.

    Adam (no weight decay), a linear warm-up then cosine decay of the learning
    rate, gradients clipped at norm 1, cross-entropy on the answer positions.
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

    Returns:
        The training loss of every step. The model is left in evaluation
        mode; if training is interrupted (an error, Ctrl-C), in the mode it
        was in before.
    """
    check_positive_int("steps", steps)
    check_nonnegative_int("warmup", warmup)
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=False)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _warmup_cosine(warmup, steps))
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
        finished = True
    finally:  # done: evaluation mode; interrupted by an error or Ctrl-C: the mode it came in
        model.train(was_training and not finished)
    return losses


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
