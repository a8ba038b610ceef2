"""Where a position encoding acts on the tiny Transformer: the hooks, and the registry of schemes by name.

A :class:`PositionScheme` has one hook per place a position encoding can act
(``embed``, ``score_bias``, ``rotate``, ``attend``), each a no-op by default,
and a fifth, ``for_layer``, that picks the scheme of each layer (by default
the scheme itself, for every layer).
:func:`make_position_scheme` calls a registered factory with those of the
model's keywords ``dim``, ``num_heads``, ``max_len`` and ``causal`` that its
signature names, plus the scheme's own options; an option the factory does not
name is an error, not silently dropped. The book's eight schemes are in
:mod:`posenc.experiments.schemes`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping

import torch
from torch import nn

from .._checks import check_choice
from ..attention import scaled_dot_product_attention

__all__ = [
    "COMMON_KEYWORDS",
    "PositionScheme",
    "SchemeFactory",
    "check_scheme_options",
    "make_position_scheme",
    "position_schemes",
    "register_position_scheme",
]

#: The model's keywords, passed to every factory whose signature names them.
COMMON_KEYWORDS = ("dim", "num_heads", "max_len", "causal")


class PositionScheme(nn.Module):
    """Where a position encoding acts on the tiny Transformer: five hooks, each a no-op by default.

    * ``embed``: absolute schemes add a vector per position to the token
      embeddings (sinusoidal, learned).
    * ``score_bias``: a bias on the attention scores of every layer, computed
      once per forward pass (T5, ALiBi).
    * ``rotate``: queries and keys are transformed in every layer (RoPE).
    * ``attend``: the attention itself, for terms that are neither a bias nor
      a rotation (Shaw et al.'s query-dependent key term and value term).
    * ``for_layer``: the scheme whose ``rotate`` and ``attend`` layer ``i``
      uses, for models that treat positions differently per layer (Llama 4's
      RoPE layers with a NoPE layer every fourth, Gemma 3's local and global
      layers; ``posenc.experiments.layered``). The default is the scheme
      itself for every layer.

    Subclasses override the hooks they need. ``embed`` and ``score_bias`` are
    called once per forward pass on the model's scheme; ``rotate`` and
    ``attend`` on ``for_layer(i)`` in layer ``i``. By default one instance
    serves all layers of a model; parameters it holds (and those of the
    per-layer schemes, which must be its submodules) are trained with the model.
    """

    def __init__(self) -> None:
        super().__init__()

    def embed(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Return the token embeddings ``x [b, s, dim]`` with position information added (default: ``x``)."""
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
        """Transform queries ``[b, h, q_len, head_dim]`` and keys ``[b, h, k_len, head_dim]``.

        ``offset`` is as in :meth:`posenc.experiments.PositionScheme.score_bias`. Returns ``(q, k)`` of the same
        shapes; the default returns them unchanged.
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
        """Attention of every layer, after ``rotate``; override it for terms that are neither bias nor rotation.

        Args:
            q: Queries ``[b, h, q_len, head_dim]``.
            k: Keys ``[b, h, k_len, head_dim]``.
            v: Values ``[b, h, k_len, head_dim]``.
            bias: The result of :meth:`posenc.experiments.PositionScheme.score_bias`, or ``None``.
            causal: Whether the model's attention is causal.
            offset: Position of the first key, as in :meth:`posenc.experiments.PositionScheme.score_bias`.

        Returns:
            ``(out [b, h, q_len, head_dim], weights [b, h, q_len, k_len])``;
            the default is :func:`posenc.scaled_dot_product_attention`.
        """
        return scaled_dot_product_attention(q, k, v, bias=bias, causal=causal)

    def for_layer(self, index: int) -> PositionScheme:
        """The scheme whose ``rotate`` and ``attend`` hooks layer ``index`` (counted from 0) uses.

        The default returns ``self``: one scheme for every layer. A scheme
        that overrides it must return ``self`` or one of its own submodules,
        so that the per-layer schemes' parameters train with the model and
        travel in its ``state_dict``.
        """
        return self


# ---------------------------------------------------------------------------
# The registry

SchemeFactory = Callable[..., PositionScheme]
_SCHEMES: dict[str, SchemeFactory] = {}


def register_position_scheme(name: str, factory: SchemeFactory | None = None, *, replace: bool = False):
    """Make a position scheme available to :class:`posenc.experiments.TinyTransformer` under ``name``.

    Use as a call, ``register_position_scheme("alibi", ALiBiScheme)``, or as a
    class decorator, ``@register_position_scheme("alibi")``.

    Args:
        name: The scheme's name, a non-empty string.
        factory: A callable (usually a :class:`PositionScheme` subclass) that
            returns the scheme. It receives those of the keywords ``dim``,
            ``num_heads``, ``max_len`` and ``causal`` that its signature names
            (all four if it takes ``**kwargs``), plus the scheme's options.
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


def _keywords(factory: SchemeFactory) -> tuple[set[str], bool]:
    """The keywords ``factory`` names, and whether it also takes any other (``**kwargs``)."""
    try:
        parameters = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):  # no signature to read: let the factory decide
        return set(), True
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return named, any(p.kind is p.VAR_KEYWORD for p in parameters)


def check_scheme_options(name: str, options: Mapping[str, object]) -> dict[str, object]:
    """Return ``options`` as a dict if the scheme registered under ``name`` takes every one of them.

    Raises:
        ValueError: If ``name`` is not registered, ``options`` is not a mapping
            of keyword names, names one of the model's keywords (``dim``,
            ``num_heads``, ``max_len``, ``causal``), or names an option the
            scheme does not take (the message lists those it takes).
    """
    check_choice("scheme", name, position_schemes())
    if not isinstance(options, Mapping) or not all(isinstance(key, str) for key in options):
        raise ValueError(f"scheme options must be a mapping from option names to values, got {options!r}")
    model_keywords = [key for key in COMMON_KEYWORDS if key in options]
    if model_keywords:
        raise ValueError(f"{model_keywords} are set by the model, not by scheme options")
    named, takes_any = _keywords(_SCHEMES[name])
    unknown = sorted(set(options) - named)
    if unknown and not takes_any:
        accepted = sorted(named - set(COMMON_KEYWORDS))
        raise ValueError(
            f"position scheme {name!r} has no option(s) {unknown}; it accepts "
            + (", ".join(map(repr, accepted)) if accepted else "no options")
        )
    return dict(options)


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
        **options: The scheme's own options, for example ``base`` for
            ``"sinusoidal"`` or ``std`` for ``"learned"``.

    Returns:
        The :class:`PositionScheme`.

    Raises:
        ValueError: If ``name`` is not registered (the message lists the
            registered names), an option is not one the scheme takes (the
            message lists those it takes), an option value is invalid, or the
            factory does not return a :class:`PositionScheme`.
    """
    options = check_scheme_options(name, options)
    factory = _SCHEMES[name]
    named, takes_any = _keywords(factory)
    model = {"dim": dim, "num_heads": num_heads, "max_len": max_len, "causal": causal}
    scheme = factory(**{key: value for key, value in model.items() if takes_any or key in named}, **options)
    if not isinstance(scheme, PositionScheme):
        raise ValueError(f"factory for scheme {name!r} returned {type(scheme).__name__}, not a PositionScheme")
    return scheme
