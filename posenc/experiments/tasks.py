"""Synthetic order-sensitive tasks for the tiny Transformer (:class:`posenc.experiments.TinyTransformer`).

Each task draws random sequences of ``num_symbols`` data tokens from a
``torch.Generator`` and says, per position, which token (for ``"count"``, which
class) the model must output. The answer depends on where tokens stand, not only
on which tokens occur, so a model that cannot see positions cannot solve them. Any length can be drawn, so
a model trained on one length can be tested on two or four times that length.

* ``"reverse"``: output the sequence backwards; position ``i`` answers with
  the token at ``n - 1 - i``.
* ``"shift"``: copy with an offset; position ``i`` answers with the token at
  ``i - shift`` (the first ``shift`` positions have no answer).
* ``"lookup"``: the token at a queried position. The data is followed by
  query tokens, each naming a position ``p``; the answer at a query is the
  token at ``p``.
* ``"passkey"``: a needle in a haystack. A key marker stands at a random
  position, followed by the key; a query marker ends the input, and the
  answer there is the key, the token right after the marker.
* ``"count"``: at every position, how often the current token occurred
  before it (capped): counting by content, the motivating case of CoPE
  (``posenc.cope``). The answer depends on which tokens come earlier, not on
  how far back they stand.

Targets hold ``IGNORE`` (-100) where there is nothing to predict, the value
``torch.nn.functional.cross_entropy`` skips by default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .._checks import check_choice, check_nonnegative_int, check_positive_int

__all__ = [
    "IGNORE",
    "TASKS",
    "CountTask",
    "LookupTask",
    "PasskeyTask",
    "ReverseTask",
    "ShiftTask",
    "Task",
    "TaskBatch",
    "make_task",
]

#: Target value for positions without an answer (cross_entropy's ignore_index).
IGNORE = -100
#: The longest input, in data tokens, an experiment may draw (8 times the book's longest, 512): the tiny
#: model's attention grows with its square, so 10**8 would exhaust memory after training started.
MAX_LENGTH = 1 << 12
#: The most evaluation examples per length an experiment may ask for (the book uses 512): more only takes longer.
MAX_EXAMPLES = 1 << 20


def check_sizes(train_length: int, longest: int, num_examples: int) -> None:
    """Raise a ``ValueError`` before anything is built if the longest evaluation input, ``train_length`` times
    the largest multiplier (``longest``), exceeds ``MAX_LENGTH`` or ``num_examples`` exceeds ``MAX_EXAMPLES``."""
    if longest > MAX_LENGTH:
        raise ValueError(
            f"train_length * max(multipliers) must be <= MAX_LENGTH = {MAX_LENGTH} data tokens, "
            f"got train_length = {train_length}: {longest}"
        )
    if num_examples > MAX_EXAMPLES:
        raise ValueError(f"num_examples must be <= MAX_EXAMPLES = {MAX_EXAMPLES}, got {num_examples}")


@dataclass(frozen=True)
class TaskBatch:
    """One batch of a task.

    Attributes:
        inputs: Token ids ``[b, s]``, ``torch.long``.
        targets: Answers ``[b, s]``, ``torch.long``; ``IGNORE`` (-100) where
            there is none.
    """

    inputs: torch.Tensor
    targets: torch.Tensor


class Task:
    """A synthetic task: draws batches of token sequences and their answers.

    Args:
        num_symbols: Number of data tokens, ids ``0 .. num_symbols - 1``, >= 2.

    Attributes:
        name: The task's name in :func:`make_task`.
        vocab_size: Number of token ids the inputs use.
        chance: Accuracy of guessing a data token uniformly at random,
            ``1 / num_symbols``.
    """

    name = "task"

    def __init__(self, num_symbols: int = 16) -> None:
        check_positive_int("num_symbols", num_symbols)
        if num_symbols < 2:
            raise ValueError(f"num_symbols must be >= 2, got {num_symbols}")
        self.num_symbols = num_symbols

    @property
    def vocab_size(self) -> int:
        return self.num_symbols

    @property
    def chance(self) -> float:
        return 1.0 / self.num_symbols

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_symbols={self.num_symbols})"

    def seq_len(self, length: int) -> int:
        """Number of input tokens of an example with ``length`` data tokens."""
        return length

    def _data(self, batch_size: int, length: int, generator: torch.Generator | None) -> torch.Tensor:
        check_positive_int("batch_size", batch_size)
        check_positive_int("length", length)
        return torch.randint(self.num_symbols, (batch_size, length), generator=generator)  # [b, n]

    def sample(self, batch_size: int, length: int, generator: torch.Generator | None = None) -> TaskBatch:
        """Draw ``batch_size`` examples with ``length`` data tokens each.

        Args:
            batch_size: Number of examples, >= 1.
            length: Number of data tokens per example, >= 1 (the input may be
                longer, see ``seq_len``).
            generator: Source of randomness; the same seed gives the same batch.

        Returns:
            A :class:`TaskBatch` of ``[batch_size, seq_len(length)]`` tensors.
        """
        raise NotImplementedError


class ReverseTask(Task):
    """Output the sequence backwards: the answer at position ``i`` is ``x[n - 1 - i]``."""

    name = "reverse"

    def sample(self, batch_size: int, length: int, generator: torch.Generator | None = None) -> TaskBatch:
        x = self._data(batch_size, length, generator)  # [b, n]
        return TaskBatch(x, x.flip(-1))


class ShiftTask(Task):
    """Copy with an offset: the answer at position ``i`` is ``x[i - shift]``.

    Args:
        num_symbols: Number of data tokens.
        shift: Offset, >= 0; positions ``0 .. shift - 1`` have no answer.
    """

    name = "shift"

    def __init__(self, num_symbols: int = 16, shift: int = 2) -> None:
        super().__init__(num_symbols)
        self.shift = check_nonnegative_int("shift", shift)

    def __repr__(self) -> str:
        return f"ShiftTask(num_symbols={self.num_symbols}, shift={self.shift})"

    def sample(self, batch_size: int, length: int, generator: torch.Generator | None = None) -> TaskBatch:
        if length <= self.shift:
            raise ValueError(f"length must be > shift = {self.shift}, got {length}")
        x = self._data(batch_size, length, generator)  # [b, n]
        targets = torch.full_like(x, IGNORE)
        targets[:, self.shift :] = x[:, : length - self.shift]
        return TaskBatch(x, targets)


class LookupTask(Task):
    """The token at a queried position.

    The input is ``length`` data tokens followed by ``num_queries`` query
    tokens. Query token ``num_symbols + p`` asks for the data token at
    position ``p``; the answer at each query is that token, and the data
    positions have no answer.

    Args:
        num_symbols: Number of data tokens.
        num_queries: Queries per example, >= 1.
        max_length: Largest ``length`` that can be queried: there is one query
            token per position ``0 .. max_length - 1``.
    """

    name = "lookup"

    def __init__(self, num_symbols: int = 16, num_queries: int = 4, max_length: int = 64) -> None:
        super().__init__(num_symbols)
        self.num_queries = check_positive_int("num_queries", num_queries)
        self.max_length = check_positive_int("max_length", max_length)

    def __repr__(self) -> str:
        return (
            f"LookupTask(num_symbols={self.num_symbols}, num_queries={self.num_queries}, max_length={self.max_length})"
        )

    @property
    def vocab_size(self) -> int:
        return self.num_symbols + self.max_length

    def seq_len(self, length: int) -> int:
        return length + self.num_queries

    def sample(self, batch_size: int, length: int, generator: torch.Generator | None = None) -> TaskBatch:
        x = self._data(batch_size, length, generator)  # [b, n]
        if length > self.max_length:
            raise ValueError(f"length must be <= max_length = {self.max_length}, got {length}")
        where = torch.randint(length, (batch_size, self.num_queries), generator=generator)  # [b, m]
        inputs = torch.cat([x, where + self.num_symbols], dim=1)  # [b, n + m]
        targets = torch.cat([torch.full_like(x, IGNORE), x.gather(1, where)], dim=1)  # [b, n + m]
        return TaskBatch(inputs, targets)


class PasskeyTask(Task):
    """A needle in a haystack: the key after a marker, asked for at the end.

    The input is ``length`` data tokens, the haystack, followed by one query
    token. The data tokens are drawn uniformly from ``0 .. num_symbols - 1``
    (the digits); then the token at one position ``p``, drawn uniformly from
    ``0 .. length - 2``, is replaced by the key marker ``num_symbols``. The key
    is the digit at ``p + 1``; the query token ``num_symbols + 1`` comes last,
    and the answer there is the key::

        inputs  = x_0 .. x_{p-1}, KEY, d, x_{p+2} .. x_{n-1}, QUERY
        targets = IGNORE, ..., IGNORE, d

    The haystack holds the same digits as the key, so the key is found by
    where it stands, right after the marker, not by what it is. Only the
    query has an answer; guessing a digit is right with ``1 / num_symbols``.

    Args:
        num_symbols: Number of digit values (the key's and the haystack's), >= 2.
    """

    name = "passkey"

    def __init__(self, num_symbols: int = 10) -> None:
        super().__init__(num_symbols)

    @property
    def key_token(self) -> int:
        """The id of the key marker, ``num_symbols``."""
        return self.num_symbols

    @property
    def query_token(self) -> int:
        """The id of the query marker, ``num_symbols + 1``."""
        return self.num_symbols + 1

    @property
    def vocab_size(self) -> int:
        return self.num_symbols + 2

    def seq_len(self, length: int) -> int:
        return length + 1

    def sample(self, batch_size: int, length: int, generator: torch.Generator | None = None) -> TaskBatch:
        x = self._data(batch_size, length, generator)  # [b, n]
        if length < 2:
            raise ValueError(f"length must be >= 2 (the key marker and the key), got {length}")
        where = torch.randint(length - 1, (batch_size, 1), generator=generator)  # [b, 1]: the marker's position p
        key = x.gather(1, where + 1)  # [b, 1]: the digit at p + 1
        x = x.scatter(1, where, self.key_token)
        inputs = torch.cat([x, torch.full_like(key, self.query_token)], dim=1)  # [b, n + 1]
        targets = torch.cat([torch.full_like(x, IGNORE), key], dim=1)  # [b, n + 1]
        return TaskBatch(inputs, targets)


class CountTask(Task):
    """At every position, how many times the current token occurred before it, capped at ``max_count``.

    The answer at position ``i`` is ``min(#{t < i : x_t = x_i}, max_count)``,
    a class in ``0 .. max_count``: 0 at a token's first occurrence, 1 at its
    second, ..., ``max_count`` at its ``max_count + 1``-th and every later
    one. It depends on which tokens come before ``i``, whatever their distance:
    counting by content, the case Golovneva et al. 2024 built CoPE for
    (``posenc.cope``). A causal model sees which tokens come earlier through
    its mask; a bidirectional one needs positions for it.

    ``chance`` is ``1 / (max_count + 1)``, a class guessed uniformly at
    random. The classes are not equally frequent: small counts dominate short
    inputs, and the capped class grows more frequent as inputs grow longer
    (with 4 symbols, most positions of an input of 64 tokens have seen their
    token 7 times or more), so a model that always answers the cap scores
    well above chance on long inputs.

    Args:
        num_symbols: Number of data tokens, >= 2.
        max_count: The largest answer, >= 1; the answers are ``max_count + 1``
            classes, ids ``0 .. max_count`` of the model's output.
    """

    name = "count"

    def __init__(self, num_symbols: int = 4, max_count: int = 7) -> None:
        super().__init__(num_symbols)
        self.max_count = check_positive_int("max_count", max_count)

    def __repr__(self) -> str:
        return f"CountTask(num_symbols={self.num_symbols}, max_count={self.max_count})"

    @property
    def vocab_size(self) -> int:
        return max(self.num_symbols, self.max_count + 1)

    @property
    def chance(self) -> float:
        return 1.0 / (self.max_count + 1)

    def sample(self, batch_size: int, length: int, generator: torch.Generator | None = None) -> TaskBatch:
        x = self._data(batch_size, length, generator)  # [b, n]
        seen = F.one_hot(x, self.num_symbols).cumsum(1)  # [b, n, symbols]: occurrences of each symbol in x_0 .. x_i
        counts = seen.gather(2, x.unsqueeze(-1)).squeeze(-1) - 1  # [b, n]: #{t < i : x_t = x_i}
        return TaskBatch(x, counts.clamp(max=self.max_count))

    def class_probabilities(self, length: int) -> torch.Tensor:
        """The exact probability of each answer at each position of an input of ``length`` tokens.

        Position ``i`` follows ``i`` tokens drawn uniformly from ``num_symbols``,
        so its token's earlier copies number ``k`` with the binomial probability
        ``C(i, k) p^k (1 - p)^(i - k)``, ``p = 1 / num_symbols``; the answers
        ``max_count`` and above are one class.

        Args:
            length: Number of data tokens, >= 1.

        Returns:
            A float64 tensor ``[length, max_count + 1]``: row ``i`` is the
            distribution of the answer at position ``i``; each row sums to 1.

        Raises:
            ValueError: If ``length`` is not an int >= 1.
        """
        check_positive_int("length", length)
        i = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # [n, 1]: earlier tokens
        k = torch.arange(self.max_count, dtype=torch.float64)  # [max_count]: the uncapped counts
        p = 1.0 / self.num_symbols
        # log C(i, k) + k log p + (i - k) log(1 - p); zero where k > i
        log_binomial = torch.lgamma(i + 1) - torch.lgamma(k + 1) - torch.lgamma((i - k).clamp(min=0) + 1)
        below = torch.where(k <= i, torch.exp(log_binomial + k * math.log(p) + (i - k) * math.log1p(-p)), 0.0)
        capped = (1.0 - below.sum(1, keepdim=True)).clamp(min=0.0)  # [n, 1]: max_count or more
        return torch.cat([below, capped], dim=1)

    def baselines(self, length: int) -> tuple[float, float]:
        """What two answers that never read the input score on inputs of ``length`` tokens.

        Args:
            length: Number of data tokens, >= 1.

        Returns:
            ``(always_cap, by_position)``: the expected accuracy of answering
            ``max_count`` everywhere, and of answering at each position its most
            probable count (:meth:`class_probabilities`), the best any answer
            that knows only the position can do.

        Raises:
            ValueError: If ``length`` is not an int >= 1.
        """
        probs = self.class_probabilities(length)
        return probs[:, -1].mean().item(), probs.max(1).values.mean().item()


#: The tasks by name.
TASKS: dict[str, type[Task]] = {t.name: t for t in (ReverseTask, ShiftTask, LookupTask, PasskeyTask, CountTask)}


def make_task(name: str, **options) -> Task:
    """Build a task by name.

    Args:
        name: ``"reverse"``, ``"shift"``, ``"lookup"``, ``"passkey"`` or ``"count"``.
        **options: Passed to the task's constructor (``num_symbols``,
            ``shift``, ``num_queries``, ``max_length``, ``max_count``).

    Returns:
        The :class:`Task`.

    Raises:
        ValueError: If ``name`` is not a known task.
    """
    check_choice("task", name, tuple(TASKS))
    return TASKS[name](**options)
