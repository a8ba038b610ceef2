"""A tiny pre-norm Transformer whose position scheme is chosen by name, built from one :class:`TinyConfig`.

Small enough to train on a CPU in seconds, it lets every encoding in the book
be compared on the same tasks (``posenc.experiments.tasks``). The position
scheme (``posenc.experiments.schemes``) acts through its hooks: ``embed``
on the token embeddings and ``score_bias`` on the scores of every layer, both
computed once per forward pass, then in layer ``i`` the ``rotate`` and
``attend`` of ``scheme.for_layer(i)`` (the scheme itself, unless it treats
layers differently, as ``posenc.experiments.layered`` does). Every attention
layer goes through :func:`posenc.scaled_dot_product_attention` unless the
layer's scheme overrides ``attend``.

As in nanoGPT (``GPT(GPTConfig(...))``) the model takes one configuration
object::

    model = TinyTransformer(TinyConfig(task.vocab_size, scheme="rope", num_heads=4, causal=True))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field

import torch
from torch import nn

from .._checks import check_heads, check_nonnegative_int, check_positive_int, check_positive_number, check_table_size
from ..packing import check_cu_seqlens, packed_attention_mask, positions_from_cu_seqlens, sequence_ids_from_cu_seqlens
from .registry import PositionScheme, check_scheme_options, make_position_scheme

__all__ = ["TinyAttention", "TinyBlock", "TinyConfig", "TinyTransformer"]


def check_model_size(*, dim: int, num_heads: int, num_layers: int, batch_size: int, longest: int) -> None:
    """Raise a ``ValueError`` before a run starts if the tiny Transformer's weights (about ``12 dim**2``
    per layer), a batch's activations or its attention weights at the longest input would hold more
    than ``MAX_TABLE_ELEMENTS`` numbers each: a run that could not allocate them fails up front."""
    check_table_size("(dim, num_layers)", (dim, num_layers), 12 * dim * dim * num_layers)  # the weights
    check_table_size("(batch_size, dim)", (batch_size, dim), batch_size * longest * 4 * dim)  # a batch's activations
    scores = batch_size * num_heads * longest * longest  # a batch's attention weights at the longest input
    check_table_size("(batch_size, num_heads, longest input)", (batch_size, num_heads, longest), scores)


@dataclass(frozen=True)
class TinyConfig:
    """Everything that decides a :class:`TinyTransformer` and its initial weights.

    Args:
        vocab_size: Number of token ids.
        scheme: Name of a registered position scheme: the book's eight,
            ``"none"``, ``"sinusoidal"``, ``"learned"``, ``"shaw"``,
            ``"t5"``, ``"alibi"``, ``"rope"``, ``"rope_pi"``; the per-layer
            ``"irope"`` (Llama 4: RoPE, with no positions in every fourth
            layer), ``"local_global"`` (Gemma 3: sliding-window RoPE
            layers, every ``global_every``-th layer global with a larger
            base) and ``"rope_nope"`` (Command R7B: sliding-window RoPE
            layers, every ``nope_every``-th layer global without positions),
            from ``posenc.experiments.layered``; ``"fire"``, ``"cope"`` and
            ``"rope_pose"`` (RoPE trained with PoSE's skip-wise positions),
            from ``posenc.experiments.frontier``; or any added with
            :func:`posenc.experiments.register_position_scheme`.
        dim: Model dimension, divisible by ``num_heads``.
        num_heads: Number of attention heads.
        num_layers: Number of blocks.
        max_len: Longest input the model is built for: the table size of a
            learned scheme, the trained length that ``"rope_pi"``
            compresses longer inputs into, and the default sizes of the
            newer schemes (FIRE's threshold, CoPE's table, PoSE's target).
        causal: Causal (decoder-style) attention instead of bidirectional.
        mlp_ratio: Hidden width of the MLP as a multiple of ``dim``.
        embed_std: Standard deviation of the initial token embeddings. The
            default 0.3 sits between the sinusoidal channels (root mean square
            0.71) and a fresh learned table (0.02), so that neither the tokens
            nor the positions drown the other at the start; with it the
            sinusoidal and learned schemes learn every task in
            ``posenc.experiments.tasks``.
        seed: Seed of the initial weights, >= 0; the global random state is
            left untouched.
        scheme_options: The scheme's own options, for example
            ``{"base": 500.0}`` for ``"rope"``; copied.

    Raises:
        ValueError: On a non-positive size, ``dim`` not divisible by
            ``num_heads``, a non-positive ``embed_std``, a negative seed,
            ``causal`` not a bool, an unknown scheme, or an option the scheme
            does not take (the message lists those it takes).
    """

    vocab_size: int
    _: KW_ONLY
    scheme: str = "sinusoidal"
    dim: int = 64
    num_heads: int = 2
    num_layers: int = 2
    max_len: int = 64
    causal: bool = False
    mlp_ratio: int = 2
    embed_std: float = 0.3
    seed: int = 0
    scheme_options: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "dim", "num_heads", "num_layers", "max_len", "mlp_ratio"):
            check_positive_int(name, getattr(self, name))
        check_heads(self.dim, self.num_heads)
        check_positive_number("embed_std", self.embed_std)
        check_nonnegative_int("seed", self.seed)
        if not isinstance(self.causal, bool):
            raise ValueError(f"causal must be True or False, got {self.causal!r}")
        options = check_scheme_options(self.scheme, {} if self.scheme_options is None else self.scheme_options)
        object.__setattr__(self, "scheme_options", options)  # frozen: store the checked copy

    @property
    def head_dim(self) -> int:
        """Channels per head, ``dim // num_heads``."""
        return self.dim // self.num_heads

    def replace(self, **changes) -> TinyConfig:
        """A copy with some fields changed, checked again."""
        return dataclasses.replace(self, **changes)


class TinyAttention(nn.Module):
    """Multi-head self-attention that lets the position scheme rotate ``q`` and ``k`` and attend."""

    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        self.dim, self.num_heads, self.head_dim = config.dim, config.num_heads, config.head_dim
        self.qkv = nn.Linear(config.dim, 3 * config.dim)
        self.out = nn.Linear(config.dim, config.dim)

    def forward(
        self, x: torch.Tensor, scheme: PositionScheme, *, bias: torch.Tensor | None, causal: bool, offset: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x [b, s, dim]`` -> ``(out [b, s, dim], weights [b, h, s, s])``."""
        b, s, _ = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.num_heads, self.head_dim)  # [b, s, 3 * dim] -> [b, s, 3, h, dh]
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # [3, b, h, s, dh] -> 3 x [b, h, s, dh]
        q, k = scheme.rotate(q, k, offset)
        out, weights = scheme.attend(q, k, v, bias=bias, causal=causal, offset=offset)
        out = out.transpose(1, 2).reshape(b, s, self.dim)  # [b, h, s, dh] -> [b, s, dim]
        return self.out(out), weights


class TinyBlock(nn.Module):
    """Pre-norm Transformer block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        dim, hidden = config.dim, config.mlp_ratio * config.dim
        self.norm1 = nn.LayerNorm(dim)
        self.attn = TinyAttention(config)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(
        self, x: torch.Tensor, scheme: PositionScheme, *, bias: torch.Tensor | None, causal: bool, offset: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x [b, s, dim]`` -> ``(x [b, s, dim], attention weights [b, h, s, s])``."""
        attn, weights = self.attn(self.norm1(x), scheme, bias=bias, causal=causal, offset=offset)
        x = x + attn
        return x + self.mlp(self.norm2(x)), weights


class TinyTransformer(nn.Module):
    """A small pre-norm Transformer that predicts one token per input position.

    Token embeddings, then the position scheme's ``embed`` hook, then
    ``config.num_layers`` blocks whose attention applies the scheme's
    ``score_bias`` and the ``rotate`` and ``attend`` hooks of
    ``scheme.for_layer(i)`` in block ``i``, then a final layer norm
    and a linear read-out. The weights are drawn from ``config.seed`` in that
    order: embeddings, scheme, blocks, norm, read-out.

    Args:
        config: The :class:`TinyConfig`.

    Attributes:
        config: The configuration.
        scheme: The :class:`PositionScheme`; block ``i`` uses
            ``scheme.for_layer(i)``, which is ``scheme`` or one of its submodules.
        scheme_name, vocab_size, dim, num_heads, max_len, causal: Shortcuts
            to the configuration.

    Raises:
        ValueError: If ``config`` is not a :class:`TinyConfig`, the scheme
            rejects an option value, or its ``for_layer`` returns anything
            but the scheme or one of its submodules.
    """

    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        if not isinstance(config, TinyConfig):
            raise ValueError(
                f"config must be a TinyConfig, got {config!r} ({type(config).__name__}); "
                "build the model as TinyTransformer(TinyConfig(vocab_size, scheme=..., ...))"
            )
        self.config = c = config
        self.vocab_size, self.dim, self.num_heads = c.vocab_size, c.dim, c.num_heads
        self.max_len, self.causal, self.scheme_name = c.max_len, c.causal, c.scheme
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(c.seed)
            self.embed = nn.Embedding(c.vocab_size, c.dim)
            nn.init.normal_(self.embed.weight, std=c.embed_std)
            self.scheme = make_position_scheme(
                c.scheme, dim=c.dim, num_heads=c.num_heads, max_len=c.max_len, causal=c.causal, **c.scheme_options
            )
            self.blocks = nn.ModuleList(TinyBlock(c) for _ in range(c.num_layers))
            self.norm = nn.LayerNorm(c.dim)
            self.head = nn.Linear(c.dim, c.vocab_size)
        self._check_layer_schemes()

    def _check_layer_schemes(self) -> None:
        """Raise unless every layer's scheme is the model's scheme or one of its submodules (so it trains and saves)."""
        own = {id(module) for module in self.scheme.modules()}
        for i in range(len(self.blocks)):
            layer = self.scheme.for_layer(i)
            if not isinstance(layer, PositionScheme) or id(layer) not in own:
                raise ValueError(
                    f"scheme {self.scheme_name!r}: for_layer({i}) must return the scheme or one of its "
                    f"submodules, got {type(layer).__name__}"
                )

    def extra_repr(self) -> str:
        return f"scheme={self.scheme_name!r}, causal={self.causal}"

    def _check_tokens(self, tokens: torch.Tensor) -> None:
        if tokens.dim() != 2 or tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
            raise ValueError(
                f"tokens must be integer ids of shape [batch, seq_len], got {tokens.dtype} {tuple(tokens.shape)}"
            )
        if tokens.shape[1] == 0:
            raise ValueError(
                f"tokens must hold at least one token per sequence (seq_len >= 1), got shape {tuple(tokens.shape)}"
            )
        if torch.compiler.is_compiling() and tokens.numel():  # a branch on values breaks the graph: assert instead
            torch._assert_async((tokens.min() >= 0) & (tokens.max() < self.vocab_size), "tokens out of range")
            return
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(
                f"tokens must lie in [0, vocab_size = {self.vocab_size}), got values in "
                f"[{tokens.min().item()}, {tokens.max().item()}]"
            )

    def forward(
        self, tokens: torch.Tensor, *, offset: int = 0, return_attention: bool = False, cu_seqlens=None
    ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits for every position.

        Args:
            tokens: Token ids ``[b, s]``; with ``cu_seqlens``, one packed row ``[1, total]``.
            offset: Position of the first token.
            return_attention: Also return each layer's attention weights.
            cu_seqlens: Optional cumulative sequence lengths ``[n + 1]`` of
                sequences packed end to end in ``tokens`` (FlashAttention's
                convention, ``posenc.packing``). Each sequence then starts
                at position 0 and attends only to itself: the result equals
                running every sequence on its own.

        Returns:
            Logits ``[b, s, vocab_size]``; with ``return_attention``, also a
            list of ``num_layers`` tensors ``[b, h, s, s]`` (block diagonal
            for a packed row).

        Raises:
            ValueError: If ``tokens`` is not a 2-D integer tensor of ids in
                ``[0, vocab_size)``, ``offset`` is negative, or ``cu_seqlens``
                is invalid, does not end at ``total``, or comes with a batch
                of more than one row or a nonzero ``offset``.
            IndexError: If a learned scheme has no row for a position.
        """
        self._check_tokens(tokens)
        check_nonnegative_int("offset", offset)
        if cu_seqlens is not None:
            return self._forward_packed(tokens, cu_seqlens, offset, return_attention)
        logits, maps = self._run(tokens, offset, None)
        return (logits, maps) if return_attention else logits

    def _run(
        self, tokens: torch.Tensor, offset: int, key_bias: torch.Tensor | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits ``[b, s, vocab]`` and attention maps; ``key_bias [b, 1, s, s]`` (``-inf`` at padding) joins bias."""
        seq_len = tokens.shape[1]
        x = self.scheme.embed(self.embed(tokens.long()), offset)  # [b, s, dim]; any integer ids
        bias = self.scheme.score_bias(seq_len, seq_len, offset)  # [h, s, s] or None
        if key_bias is not None:
            bias = key_bias if bias is None else bias + key_bias  # [b, h, s, s]
        maps = []
        for i, block in enumerate(self.blocks):
            x, weights = block(x, self.scheme.for_layer(i), bias=bias, causal=self.causal, offset=offset)
            maps.append(weights)
        return self.head(self.norm(x)), maps  # [b, s, vocab]

    def _forward_packed(self, tokens: torch.Tensor, cu_seqlens, offset: int, return_attention: bool):
        """:meth:`forward` of a packed row ``[1, total]``: run as a right-padded batch, one row per sequence.

        Every hook then sees each sequence at positions ``0 .. L_k - 1`` (``rope_pi``
        picks its factor from the longest one), and a ``-inf`` key bias keeps
        attention off the padding; the results are gathered back into the packed row.
        A padding query still sees its own key, so that a scheme that masks distant
        keys (a sliding window) leaves no row with every key masked: its NaN would
        reach the real queries through the masked padding values (0 * NaN).
        """
        if tokens.shape[0] != 1 or offset != 0:
            raise ValueError(
                f"cu_seqlens describes one packed row: tokens must be [1, total] with offset=0, "
                f"got tokens {tuple(tokens.shape)}, offset={offset}"
            )
        total = tokens.shape[1]
        cu = check_cu_seqlens(cu_seqlens, total=total).to(tokens.device)
        pos = positions_from_cu_seqlens(cu)  # [total]
        _, row = torch.unique_consecutive(sequence_ids_from_cu_seqlens(cu), return_inverse=True)  # empty ones dropped
        rows, width = int(row[-1]) + 1, int(pos.max()) + 1
        padded = tokens.new_zeros(rows, width)  # [n, max_seqlen], right padding with id 0
        padded[row, pos] = tokens[0]
        real = torch.zeros(rows, width, dtype=torch.bool, device=tokens.device)
        real[row, pos] = True
        seen = real[:, None, None, :] | torch.eye(width, dtype=torch.bool, device=tokens.device)  # [n, 1, s, s]
        key_bias = torch.zeros(seen.shape, device=tokens.device).masked_fill(~seen, float("-inf"))
        logits, maps = self._run(padded, 0, key_bias)  # [n, max_seqlen, vocab]
        logits = logits[row, pos].unsqueeze(0)  # [total, vocab] -> [1, total, vocab]
        if not return_attention:
            return logits
        i, j = packed_attention_mask(cu).nonzero(as_tuple=True)  # pairs in one sequence
        packed = []
        for weights in maps:  # [n, h, max_seqlen, max_seqlen] -> [1, h, total, total], zero across sequences
            full = weights.new_zeros(1, weights.shape[1], total, total)
            full[0][:, i, j] = weights[row[i], :, pos[i], pos[j]].T  # [pairs, h] -> [h, pairs]
            packed.append(full)
        return logits, packed
