"""A tiny pre-norm Transformer whose position scheme is chosen by name.

Small enough to train on a CPU in seconds, it lets every encoding in the book
be compared on the same tasks (``posenc.tasks``). Position information can
enter a Transformer in three places, and a :class:`PositionScheme` has one
hook for each, all no-ops by default:

* ``embed(x, offset)``: absolute schemes add a vector per position to the
  token embeddings ``[b, s, dim]`` (sinusoidal, learned).
* ``score_bias(q_len, k_len, offset)``: relative schemes add a bias
  ``[h, q_len, k_len]`` to the attention scores of every layer, computed once
  per forward pass (Shaw-style, T5 buckets, ALiBi).
* ``rotate(q, k, offset)``: rotary schemes transform the queries and keys
  ``[b, h, s, head_dim]`` of every layer before the scores are formed.

A fourth hook, ``attend(q, k, v, bias=..., causal=..., offset=...)``, runs the
attention itself; by default it is :func:`posenc.scaled_dot_product_attention`.
Schemes whose terms cannot be written as a bias or a rotation override it:
Shaw et al.'s key term depends on the query, and their value term is added
to the attention output (:mod:`posenc.schemes`).

The schemes ``"none"``, ``"sinusoidal"`` and ``"learned"`` are defined here;
``"shaw"``, ``"t5"``, ``"alibi"``, ``"rope"`` and ``"rope_pi"`` in
:mod:`posenc.schemes`, which ``import posenc`` registers.

A scheme is registered under a name with :func:`register_position_scheme`; the
model builds it with :func:`make_position_scheme`. Every attention layer goes
through :func:`posenc.scaled_dot_product_attention`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import check_choice, check_nonnegative_int, check_positive_int, check_positive_number
from .attention import scaled_dot_product_attention
from .learned import LearnedPositionalEmbedding
from .sinusoidal import SinusoidalPositionalEncoding
from .tasks import IGNORE, Task

# ---------------------------------------------------------------------------
# Position schemes and their registry


class PositionScheme(nn.Module):
    """Where a position encoding acts on the tiny Transformer: four hooks, each a no-op by default.

    Subclasses override the hooks they need. One instance is shared by all
    layers of a model; parameters it holds are trained with the model.
    Schemes are built by keyword: ``dim``, ``num_heads``, ``max_len`` and
    ``causal`` (see :func:`make_position_scheme`), plus scheme options;
    constructors take ``**_`` to ignore the ones they do not use.
    """

    def __init__(self, **_) -> None:
        super().__init__()

    def embed(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Return the token embeddings with position information added.

        Args:
            x: Token embeddings ``[b, s, dim]``.
            offset: Position of the first token.

        Returns:
            ``[b, s, dim]``; the default returns ``x`` unchanged.
        """
        return x

    def score_bias(self, q_len: int, k_len: int, offset: int = 0) -> torch.Tensor | None:
        """Return an additive bias on the attention scores, or ``None``.

        Args:
            q_len: Number of queries.
            k_len: Number of keys.
            offset: Position of the first key; the queries are the last
                ``q_len`` positions ``offset + k_len - q_len ..``.

        Returns:
            ``[h, q_len, k_len]`` (or anything broadcastable to
            ``[b, h, q_len, k_len]``), or ``None`` for no bias (the default).
        """
        return None

    def rotate(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Transform queries and keys before the attention scores.

        Args:
            q: Queries ``[b, h, q_len, head_dim]``.
            k: Keys ``[b, h, k_len, head_dim]``.
            offset: Position of the first key, as in :meth:`posenc.PositionScheme.score_bias`.

        Returns:
            ``(q, k)`` of the same shapes; the default returns them unchanged.
        """
        return q, k

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        *,
        bias: torch.Tensor | None = None,
        causal: bool = False,
        offset: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention of every layer, after :meth:`posenc.PositionScheme.rotate`.

        Override it for terms that are neither a bias nor a rotation.

        Args:
            q: Queries ``[b, h, q_len, head_dim]``.
            k: Keys ``[b, h, k_len, head_dim]``.
            v: Values ``[b, h, k_len, head_dim]``.
            bias: The result of :meth:`posenc.PositionScheme.score_bias`, or ``None``.
            causal: Whether the model's attention is causal.
            offset: Position of the first key, as in :meth:`posenc.PositionScheme.score_bias`.

        Returns:
            ``(out [b, h, q_len, head_dim], weights [b, h, q_len, k_len])``;
            the default is :func:`posenc.scaled_dot_product_attention`.
        """
        return scaled_dot_product_attention(q, k, v, bias=bias, causal=causal)


class NoPositions(PositionScheme):
    """No position information at all: attention sees a set of tokens."""

    def __init__(self, **_) -> None:
        super().__init__()


class SinusoidalScheme(PositionScheme):
    """The fixed sinusoidal encoding added to the token embeddings (Vaswani et al. 2017).

    Args:
        dim: Model dimension, even.
        base: Frequency base.
        layout: ``"interleaved"`` or ``"concat"``.
        max_len: Rows computed up front; the table grows on demand.
    """

    def __init__(self, *, dim: int, base: float = 10000.0, layout: str = "interleaved", max_len: int = 512, **_):
        super().__init__()
        self.encoding = SinusoidalPositionalEncoding(dim, base=base, layout=layout, initial_len=max_len)

    def embed(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return self.encoding(x, offset=offset)


class LearnedScheme(PositionScheme):
    """A trained table of ``max_len`` position vectors added to the token embeddings.

    Args:
        dim: Model dimension.
        max_len: Rows of the table: the longest input (plus offset) the model
            accepts.
        std: Standard deviation of the initial table.
        truncated: Truncated-normal initialisation (BERT's).
    """

    def __init__(self, *, dim: int, max_len: int, std: float = 0.02, truncated: bool = False, **_):
        super().__init__()
        self.table = LearnedPositionalEmbedding(max_len, dim, std=std, truncated=truncated)

    def embed(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return self.table(x, offset=offset)


SchemeFactory = Callable[..., PositionScheme]
_SCHEMES: dict[str, SchemeFactory] = {}


def register_position_scheme(name: str, factory: SchemeFactory | None = None, *, replace: bool = False):
    """Make a position scheme available to :class:`TinyTransformer` under ``name``.

    Use as a call, ``register_position_scheme("alibi", AlibiScheme)``, or as a
    class decorator, ``@register_position_scheme("alibi")``.

    Args:
        name: The scheme's name, a non-empty string.
        factory: A callable (usually a :class:`PositionScheme` subclass) called
            with keywords ``dim``, ``num_heads``, ``max_len``, ``causal`` and
            the scheme's options; it returns the scheme.
        replace: Allow replacing a scheme already registered under ``name``.

    Returns:
        ``factory`` (or, without it, a decorator that registers and returns it).

    Raises:
        ValueError: If ``name`` is not a non-empty string, is taken and
            ``replace`` is false, or ``factory`` is not callable.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")

    def register(f: SchemeFactory) -> SchemeFactory:
        if not callable(f):
            raise ValueError(f"factory for scheme {name!r} must be callable, got {f!r}")
        if name in _SCHEMES and not replace:
            raise ValueError(f"position scheme {name!r} is already registered; pass replace=True to replace it")
        _SCHEMES[name] = f
        return f

    return register if factory is None else register(factory)


def position_schemes() -> tuple[str, ...]:
    """The names of the registered position schemes, sorted."""
    return tuple(sorted(_SCHEMES))


def make_position_scheme(
    name: str, *, dim: int, num_heads: int, max_len: int, causal: bool = False, **options
) -> PositionScheme:
    """Build the position scheme registered under ``name``.

    Args:
        name: One of :func:`position_schemes`.
        dim: Model dimension.
        num_heads: Number of attention heads (``head_dim = dim // num_heads``).
        max_len: Longest sequence the model is built for (a hard limit only
            for schemes with a table, such as ``"learned"``).
        causal: Whether the model's attention is causal.
        **options: Scheme-specific options, for example ``base`` for
            ``"sinusoidal"`` or ``std`` for ``"learned"``.

    Returns:
        The :class:`PositionScheme`.

    Raises:
        ValueError: If ``name`` is not registered (the message lists the
            registered names), or the factory does not return a
            :class:`PositionScheme`.
    """
    check_choice("scheme", name, position_schemes())
    scheme = _SCHEMES[name](dim=dim, num_heads=num_heads, max_len=max_len, causal=causal, **options)
    if not isinstance(scheme, PositionScheme):
        raise ValueError(f"factory for scheme {name!r} returned {type(scheme).__name__}, not a PositionScheme")
    return scheme


register_position_scheme("none", NoPositions)
register_position_scheme("sinusoidal", SinusoidalScheme)
register_position_scheme("learned", LearnedScheme)


# ---------------------------------------------------------------------------
# The model


class TinyAttention(nn.Module):
    """Multi-head self-attention that lets the position scheme rotate ``q`` and ``k`` and attend.

    Args:
        dim: Model dimension, divisible by ``num_heads``.
        num_heads: Number of heads.
    """

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.dim, self.num_heads, self.head_dim = dim, num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(
        self,
        x: torch.Tensor,
        scheme: PositionScheme,
        *,
        bias: torch.Tensor | None,
        causal: bool,
        offset: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x [b, s, dim]`` -> ``(out [b, s, dim], weights [b, h, s, s])``."""
        b, s, _ = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.num_heads, self.head_dim)  # [b, s, 3, h, dh]
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x [b, h, s, dh]
        q, k = scheme.rotate(q, k, offset)
        out, weights = scheme.attend(q, k, v, bias=bias, causal=causal, offset=offset)
        out = out.transpose(1, 2).reshape(b, s, self.dim)  # [b, h, s, dh] -> [b, s, dim]
        return self.out(out), weights


class TinyBlock(nn.Module):
    """Pre-norm Transformer block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = TinyAttention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x, scheme, *, bias, causal, offset):
        attn, weights = self.attn(self.norm1(x), scheme, bias=bias, causal=causal, offset=offset)
        x = x + attn
        return x + self.mlp(self.norm2(x)), weights


class TinyTransformer(nn.Module):
    """A small pre-norm Transformer that predicts one token per input position.

    Token embeddings, then the position scheme's ``embed`` hook, then
    ``num_layers`` blocks whose attention applies the scheme's ``score_bias``,
    ``rotate`` and ``attend`` hooks, then a final layer norm and a linear
    read-out.

    Args:
        vocab_size: Number of token ids.
        scheme: Name of a registered position scheme: ``"none"``,
            ``"sinusoidal"``, ``"learned"``, ``"shaw"``, ``"t5"``,
            ``"alibi"``, ``"rope"``, ``"rope_pi"`` or any added with
            :func:`register_position_scheme`.
        dim: Model dimension, divisible by ``num_heads``.
        num_heads: Number of attention heads.
        num_layers: Number of blocks.
        max_len: Longest input the model is built for: the table size of a
            learned scheme, and the trained length that ``"rope_pi"``
            compresses longer inputs into.
        causal: Causal (decoder-style) attention instead of bidirectional.
        mlp_ratio: Hidden width of the MLP as a multiple of ``dim``.
        embed_std: Standard deviation of the initial token embeddings. The
            default 0.3 sits between the sinusoidal channels (root mean square
            0.71) and a fresh learned table (0.02), so that neither the tokens
            nor the positions drown the other at the start; with it the
            sinusoidal and learned schemes learn every task in
            ``posenc.tasks``.
        seed: Seed of the initial weights; the global random state is left
            untouched.
        scheme_options: Extra keywords for the scheme's factory.

    Raises:
        ValueError: On an unknown scheme, a non-positive size, or ``dim`` not
            divisible by ``num_heads``.
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        scheme: str = "sinusoidal",
        dim: int = 64,
        num_heads: int = 2,
        num_layers: int = 2,
        max_len: int = 64,
        causal: bool = False,
        mlp_ratio: int = 2,
        embed_std: float = 0.3,
        seed: int = 0,
        scheme_options: dict | None = None,
    ) -> None:
        super().__init__()
        for name, value in [("vocab_size", vocab_size), ("dim", dim), ("num_heads", num_heads),
                            ("num_layers", num_layers), ("max_len", max_len), ("mlp_ratio", mlp_ratio)]:
            check_positive_int(name, value)
        if dim % num_heads:
            raise ValueError(f"dim must be divisible by num_heads, got dim={dim}, num_heads={num_heads}")
        check_positive_number("embed_std", embed_std)
        check_choice("scheme", scheme, position_schemes())
        self.vocab_size, self.dim, self.num_heads = vocab_size, dim, num_heads
        self.max_len, self.causal, self.scheme_name = max_len, bool(causal), scheme
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.embed = nn.Embedding(vocab_size, dim)
            nn.init.normal_(self.embed.weight, std=embed_std)
            self.scheme = make_position_scheme(
                scheme, dim=dim, num_heads=num_heads, max_len=max_len, causal=self.causal, **(scheme_options or {})
            )
            self.blocks = nn.ModuleList(TinyBlock(dim, num_heads, mlp_ratio) for _ in range(num_layers))
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab_size)

    def extra_repr(self) -> str:
        return f"scheme={self.scheme_name!r}, causal={self.causal}"

    def forward(
        self, tokens: torch.Tensor, *, offset: int = 0, return_attention: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits for every position.

        Args:
            tokens: Token ids ``[b, s]``.
            offset: Position of the first token.
            return_attention: Also return each layer's attention weights.

        Returns:
            Logits ``[b, s, vocab_size]``; with ``return_attention``, also a
            list of ``num_layers`` tensors ``[b, h, s, s]``.

        Raises:
            ValueError: If ``tokens`` is not a 2-D integer tensor of ids in
                ``[0, vocab_size)`` or ``offset`` is negative.
            IndexError: If a learned scheme has no row for a position.
        """
        if tokens.dim() != 2 or tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
            raise ValueError(f"tokens must be integer ids of shape [batch, seq_len], got {tokens.dtype} "
                             f"{tuple(tokens.shape)}")
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(f"tokens must lie in [0, vocab_size = {self.vocab_size}), got values in "
                             f"[{tokens.min().item()}, {tokens.max().item()}]")
        check_nonnegative_int("offset", offset)
        seq_len = tokens.shape[1]
        x = self.scheme.embed(self.embed(tokens), offset)  # [b, s, dim]
        bias = self.scheme.score_bias(seq_len, seq_len, offset)  # [h, s, s] or None
        maps = []
        for block in self.blocks:
            x, weights = block(x, self.scheme, bias=bias, causal=self.causal, offset=offset)
            maps.append(weights)
        logits = self.head(self.norm(x))  # [b, s, vocab]
        return (logits, maps) if return_attention else logits


# ---------------------------------------------------------------------------
# Training and evaluation


@contextmanager
def deterministic(device: torch.device | str = "cpu", threads: int = 1) -> Iterator[None]:
    """Run the enclosed code with deterministic algorithms and ``threads`` CPU threads.

    Restores the previous settings on exit. On a GPU, operations without a
    deterministic implementation warn instead of failing.
    """
    device = torch.device(device)
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.get_num_threads())
    torch.use_deterministic_algorithms(True, warn_only=device.type != "cpu")
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.set_num_threads(before[2])


def _draw_length(length, generator: torch.Generator) -> int:
    if isinstance(length, int):
        return check_positive_int("length", length)
    if not (isinstance(length, tuple) and len(length) == 2 and all(isinstance(n, int) for n in length)):
        raise ValueError(f"length must be an int or a (min, max) tuple of ints, got {length!r}")
    lo, hi = check_positive_int("length[0]", length[0]), length[1]
    if hi < lo:
        raise ValueError(f"length must have min <= max, got {length}")
    return int(torch.randint(lo, hi + 1, (), generator=generator))


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
        The training loss of every step.
    """
    check_positive_int("steps", steps)
    check_nonnegative_int("warmup", warmup)
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=False)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    losses = []
    model.train()
    with deterministic(device):
        for _ in range(steps):
            batch = task.sample(batch_size, _draw_length(length, generator), generator)
            inputs, targets = batch.inputs.to(device), batch.targets.to(device)
            logits = model(inputs)  # [b, s, vocab]
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def _answer_counts(model, task, length, num_examples, batch_size, seed, offset):
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
    correct, total = _answer_counts(model, task, length, num_examples, batch_size, seed, offset)
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
    correct, total = _answer_counts(model, task, length, num_examples, batch_size, seed, offset)
    return (correct.sum() / total.sum()).item()
