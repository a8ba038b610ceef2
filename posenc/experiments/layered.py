"""Per-layer position schemes: today's models treat positions differently from one layer to the next.

Each scheme here holds the schemes of its layers as submodules and hands them
out through the ``for_layer`` hook (:class:`~posenc.experiments.PositionScheme`);
the model calls ``rotate`` and ``attend`` of ``for_layer(i)`` in layer ``i``.

* ``"irope"`` (:class:`IRopeScheme`): Llama 4's interleaved RoPE, RoPE in
  every layer but every fourth, which has no position encoding (NoPE).
* ``"local_global"`` (:class:`LocalGlobalScheme`): Gemma 3's pattern,
  sliding-window layers with RoPE of base 10,000 and, every
  ``global_every``-th layer, a global layer with RoPE of base 1,000,000.
* ``"rope_nope"`` (:class:`RopeNopeScheme`): Cohere Command R7B's pattern,
  sliding-window layers with RoPE and, every ``nope_every``-th layer, a
  global layer with no position encoding.

All three are registered by name when :mod:`posenc.experiments` is imported; they
are not among the eight schemes of the book's extrapolation experiment.
"""

from __future__ import annotations

import torch

from .._checks import check_base, check_even_dim, check_heads, check_nonnegative_int, check_positive_int
from .registry import PositionScheme, register_position_scheme
from .schemes import NoPositions, RopeScheme

__all__ = [
    "IRopeScheme",
    "LocalGlobalScheme",
    "PerLayerScheme",
    "RopeNopeScheme",
    "SlidingWindowRopeScheme",
    "sliding_window_bias",
]


def _check_rope(dim: int, num_heads: int, name: str, base: object) -> float:
    """``base`` as a float if it is a finite number > 1 and the heads of ``dim`` split into rotation pairs."""
    check_even_dim("head_dim", check_heads(dim, num_heads))
    return check_base(name, base)


def sliding_window_bias(
    q_len: int, k_len: int, window: int, *, causal: bool, device: torch.device | None = None
) -> torch.Tensor | None:
    """The additive bias ``[q_len, k_len]`` that hides keys ``window`` or more positions from the query.

    The queries are the last ``q_len`` of the keys (as in
    :meth:`posenc.experiments.PositionScheme.score_bias`), so query ``i`` sits at key
    position ``i + k_len - q_len``; the offset of the first key cancels out of
    the distance and is not needed. A causal query at position ``p`` sees keys
    ``p - window + 1 .. p`` (the causal mask hides later ones); a
    bidirectional one sees keys within ``window - 1`` on either side. Every
    query sees its own key.

    Returns:
        ``0`` where a key is in the window, ``-inf`` where it is not; ``None``
        when no key is ever out of it (``window >= k_len``), so that a local
        layer with such a window computes exactly what a global one does.
    """
    check_positive_int("window", window)
    if window >= k_len:
        return None
    query = torch.arange(q_len, device=device).unsqueeze(-1) + (k_len - q_len)  # [q, 1], key positions
    distance = query - torch.arange(k_len, device=device)  # [q, k], > 0 for earlier keys
    far = distance >= window if causal else distance.abs() >= window
    return torch.zeros(q_len, k_len, device=device).masked_fill(far, float("-inf"))  # [q, k]


class SlidingWindowRopeScheme(RopeScheme):
    """RoPE, with attention limited to the keys of a sliding window: a local layer of Gemma 2 and 3.

    Args:
        dim: Model dimension, divisible by ``num_heads``, with an even head
            dimension.
        num_heads: Number of heads.
        window: Keys a query sees, itself included, >= 1 (see
            :func:`sliding_window_bias`).
        base: Frequency base.
        layout: ``"half"`` or ``"interleaved"``.
    """

    def __init__(self, *, dim: int, num_heads: int, window: int, base: float = 10000.0, layout: str = "half") -> None:
        super().__init__(dim=dim, num_heads=num_heads, base=base, layout=layout)
        self.window = check_positive_int("window", window)

    def extra_repr(self) -> str:
        return f"window={self.window}"

    def attend(self, q, k, v, *, bias=None, causal=False, offset=0):
        """:meth:`~posenc.experiments.PositionScheme.attend`, with the keys outside the window masked
        (``-inf`` added to ``bias``)."""
        window = sliding_window_bias(q.shape[-2], k.shape[-2], self.window, causal=causal, device=q.device)
        if window is not None:  # [q, k]
            if bias is None:
                bias = window
            elif bias.dtype == torch.bool:  # a mask, True = may attend
                bias = torch.where(bias, window, float("-inf"))
            else:
                bias = bias + window
        return super().attend(q, k, v, bias=bias, causal=causal, offset=offset)


def _default_window(max_len: object, window: int | None) -> int | None:
    """``window``, or a local layer's default of a quarter of ``max_len`` (at least 1)."""
    return max(1, check_positive_int("max_len", max_len) // 4) if window is None else window


def _check_every(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1 (1: every layer), got {value!r}")
    return value


class PerLayerScheme(PositionScheme):
    """A scheme that acts only through the schemes ``for_layer`` hands out: its own ``rotate`` and ``attend`` refuse."""

    def _refuse(self, hook: str):
        raise RuntimeError(
            f"{type(self).__name__} has no {hook} of its own: call {hook} on for_layer(index), the scheme of the layer"
        )

    def rotate(self, q, k, offset=0):
        self._refuse("rotate")

    def attend(self, q, k, v, *, bias=None, causal=False, offset=0):
        self._refuse("attend")


class IRopeScheme(PerLayerScheme):
    """Llama 4's interleaved RoPE (iRoPE): RoPE in every layer except every ``nope_every``-th, which has none.

    Layer ``i`` (from 0) is a NoPE layer when ``i % nope_every == nope_every - 1``:
    with the default 4, layers 3, 7, ... see no positions (their only
    information on order is what the RoPE layers below wrote into the
    residual stream, and the causal mask); the others are :class:`RopeScheme`.

    Left out, as they change nothing at the tiny model's lengths or are not
    position encodings: Llama 4 scales the queries of its NoPE layers by a
    temperature ``1 + attn_scale * log(floor((p + 1) / 8192) + 1)``, which is
    1 below 8,192 positions; its RoPE layers attend within chunks of 8,192
    tokens and normalise queries and keys (QK-norm); and its base is 500,000.

    Args:
        dim: Model dimension, divisible by ``num_heads``, with an even head
            dimension.
        num_heads: Number of heads.
        base: RoPE frequency base of the RoPE layers.
        layout: ``"half"`` or ``"interleaved"``.
        nope_every: Every how many layers one has no positions, >= 1 (1: all
            layers NoPE).
    """

    def __init__(
        self, *, dim: int, num_heads: int, base: float = 10000.0, layout: str = "half", nope_every: int = 4
    ) -> None:
        super().__init__()
        base = _check_rope(dim, num_heads, "base", base)
        self.nope_every = _check_every("nope_every", nope_every)
        self.rope = RopeScheme(dim=dim, num_heads=num_heads, base=base, layout=layout)
        self.nope = NoPositions()

    def extra_repr(self) -> str:
        return f"nope_every={self.nope_every}"

    def is_nope(self, index: int) -> bool:
        """Whether layer ``index`` has no position encoding."""
        return check_nonnegative_int("index", index) % self.nope_every == self.nope_every - 1

    def for_layer(self, index: int) -> PositionScheme:
        """:class:`NoPositions` for every ``nope_every``-th layer, else :class:`RopeScheme`."""
        return self.nope if self.is_nope(index) else self.rope


class LocalGlobalScheme(PerLayerScheme):
    """Gemma 3's local and global layers: sliding-window RoPE, and every ``global_every``-th layer global.

    A local layer (:class:`~posenc.experiments.layered.SlidingWindowRopeScheme`) rotates with
    ``local_base`` and lets a causal query at position ``p`` see keys
    ``p - window + 1 .. p``; a global layer (layer ``i`` with
    ``i % global_every == global_every - 1``: 3, 7, ... by default) is
    :class:`RopeScheme` with ``global_base`` and full attention. A local layer
    whose window covers the whole input computes exactly what a global layer
    of the same base does. In a bidirectional model the window is symmetric:
    keys within ``window - 1`` positions on either side.

    Gemma 3 has five local layers per global one (``global_every=6``) and a
    window of 1,024 tokens; a tiny model has few layers, hence 4 and
    ``max_len // 4``. Left out: Gemma's QK-norm, and the linear RoPE scaling
    of the global layers of its long-context models.

    Args:
        dim: Model dimension, divisible by ``num_heads``, with an even head
            dimension.
        num_heads: Number of heads.
        max_len: The model's longest input; sets the default window.
        window: Keys a local layer's query sees, itself included, >= 1;
            default ``max(1, max_len // 4)``.
        global_every: Every how many layers one is global, >= 1 (1: all
            layers global).
        local_base: RoPE base of the local layers, > 1.
        global_base: RoPE base of the global layers, > 1.
        layout: ``"half"`` or ``"interleaved"``.
    """

    def __init__(
        self,
        *,
        dim: int,
        num_heads: int,
        max_len: int,
        window: int | None = None,
        global_every: int = 4,
        local_base: float = 1e4,
        global_base: float = 1e6,
        layout: str = "half",
    ) -> None:
        super().__init__()
        local_base = _check_rope(dim, num_heads, "local_base", local_base)
        global_base = check_base("global_base", global_base)
        window = _default_window(max_len, window)
        self.global_every = _check_every("global_every", global_every)
        self.local_scheme = SlidingWindowRopeScheme(
            dim=dim, num_heads=num_heads, window=window, base=local_base, layout=layout
        )
        self.global_scheme = RopeScheme(dim=dim, num_heads=num_heads, base=global_base, layout=layout)

    @property
    def window(self) -> int:
        return self.local_scheme.window

    def extra_repr(self) -> str:
        return f"window={self.window}, global_every={self.global_every}"

    def is_global(self, index: int) -> bool:
        """Whether layer ``index`` is global."""
        return check_nonnegative_int("index", index) % self.global_every == self.global_every - 1

    def for_layer(self, index: int) -> PositionScheme:
        """The global :class:`RopeScheme` for every ``global_every``-th layer, else the sliding-window one."""
        return self.global_scheme if self.is_global(index) else self.local_scheme


class RopeNopeScheme(PerLayerScheme):
    """Cohere Command R7B's RoPE/NoPE hybrid: sliding-window RoPE layers, and every ``nope_every``-th layer
    global with no position encoding.

    Layer ``i`` (from 0) is a NoPE layer when ``i % nope_every == nope_every - 1``:
    :class:`NoPositions`, attending to every key. The others are local
    :class:`~posenc.experiments.layered.SlidingWindowRopeScheme` layers: RoPE,
    with a query seeing the ``window`` keys up to itself (causal) or within
    ``window - 1`` positions on either side (bidirectional). Positions reach the
    global layers only through what the local layers wrote into the residual
    stream, and a local layer never sees a distance of ``window`` or more, however
    long the input.

    Command R7B (and Command A, Hugging Face's ``cohere2``) has three local layers
    per global one (``nope_every=4``), a window of 4,096 tokens and the
    ``interleaved`` layout. The tiny Transformer has two layers, hence the default
    ``nope_every=2``: layer 0 local RoPE, layer 1 global NoPE; and a window of
    ``max_len // 4``, as :class:`LocalGlobalScheme`. With a window covering the
    whole input the scheme computes exactly what ``"irope"`` with the same
    ``nope_every`` does. Llama 4's iRoPE (:class:`IRopeScheme`) differs in its
    local layers: chunks of 8,192 tokens rather than a sliding window, left out
    there.

    Args:
        dim: Model dimension, divisible by ``num_heads``, with an even head
            dimension.
        num_heads: Number of heads.
        max_len: The model's longest input; sets the default window.
        window: Keys a local layer's query sees, itself included, >= 1;
            default ``max(1, max_len // 4)``.
        nope_every: Every how many layers one is global NoPE, >= 1 (1: all
            layers NoPE).
        base: RoPE frequency base of the local layers, > 1.
        layout: ``"half"`` or ``"interleaved"``.
    """

    def __init__(
        self,
        *,
        dim: int,
        num_heads: int,
        max_len: int,
        window: int | None = None,
        nope_every: int = 2,
        base: float = 10000.0,
        layout: str = "half",
    ) -> None:
        super().__init__()
        base = _check_rope(dim, num_heads, "base", base)
        window = _default_window(max_len, window)
        self.nope_every = _check_every("nope_every", nope_every)
        self.rope = SlidingWindowRopeScheme(dim=dim, num_heads=num_heads, window=window, base=base, layout=layout)
        self.nope = NoPositions()

    @property
    def window(self) -> int:
        return self.rope.window

    def extra_repr(self) -> str:
        return f"window={self.window}, nope_every={self.nope_every}"

    def is_nope(self, index: int) -> bool:
        """Whether layer ``index`` is a global layer without position encoding."""
        return check_nonnegative_int("index", index) % self.nope_every == self.nope_every - 1

    def for_layer(self, index: int) -> PositionScheme:
        """:class:`NoPositions` for every ``nope_every``-th layer, else the sliding-window RoPE scheme."""
        return self.nope if self.is_nope(index) else self.rope


register_position_scheme("irope", IRopeScheme)
register_position_scheme("local_global", LocalGlobalScheme)
register_position_scheme("rope_nope", RopeNopeScheme)
