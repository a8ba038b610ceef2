"""The eight position schemes of the book, registered by name when :mod:`posenc.experiments` is imported.

Each is a :class:`~posenc.experiments.PositionScheme` that overrides the hooks
of the place where its encoding acts (see :mod:`posenc.experiments.registry`):

* ``"none"`` (:class:`NoPositions`), ``"sinusoidal"`` and ``"learned"``:
  nothing, or absolute vectors added to the token embeddings.
* ``"shaw"``: Shaw et al. 2018, clipped relative embeddings on keys and values.
* ``"t5"``: Raffel et al. 2020, a learned bias per head and bucket.
* ``"alibi"``: Press et al. 2022, a fixed linear penalty on the distance.
* ``"rope"``: Su et al. 2021, and ``"rope_pi"``, RoPE with linear position
  interpolation (Chen et al. 2023): queries and keys rotated by their positions.

The relative schemes hold one set of position parameters for the whole model,
shared by all layers (and, for Shaw, by all heads), as T5 does with its bias,
and ignore the ``offset`` the hooks receive (RoPE up to rounding).

"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from .._checks import check_heads, check_nonnegative_int, check_positive_int
from ..alibi import ALiBiBias
from ..attention import scaled_dot_product_attention
from ..learned import LearnedPositionalEmbedding
from ..relative import HasShawTables, ShawRelativeEmbeddings, relative_scores, relative_values
from ..rope.embedding import RotaryEmbedding
from ..rope.rotary import apply_rope, rope_cos_sin
from ..sinusoidal import SinusoidalPositionalEncoding
from ..t5 import T5RelativeBias
from .registry import PositionScheme, register_position_scheme

__all__ = [
    "ALiBiScheme",
    "LearnedScheme",
    "NoPositions",
    "RopePIScheme",
    "RopeScheme",
    "ShawScheme",
    "SinusoidalScheme",
    "T5Scheme",
]


# ---------------------------------------------------------------------------
# Absolute schemes


class NoPositions(PositionScheme):
    """No position information at all: attention sees a set of tokens."""


class SinusoidalScheme(PositionScheme):
    """The fixed sinusoidal encoding added to the token embeddings (Vaswani et al. 2017).

    Args:
        dim: Model dimension, even.
        max_len: Rows computed up front; the table grows on demand.
        base: Frequency base.
        layout: ``"interleaved"`` or ``"concat"``.
    """

    def __init__(self, *, dim: int, max_len: int = 512, base: float = 10000.0, layout: str = "interleaved") -> None:
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

    def __init__(
        self,
        *,
        dim: int,
        max_len: int,
        std: float = 0.02,
        truncated: bool = False,
    ) -> None:
        super().__init__()
        self.table = LearnedPositionalEmbedding(
            max_len,
            dim,
            std=std,
            truncated=truncated,
        )

    def embed(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return self.table(x, offset=offset)


# ---------------------------------------------------------------------------
# Relative schemes


class ShawScheme(HasShawTables, PositionScheme):
    """Shaw et al. 2018: clipped relative embeddings added to the keys and to the values.

    The key term ``q_i . a^K_ij`` depends on the query, and the value term
    ``sum_j alpha_ij a^V_ij`` is added to the attention output: neither is a
    bias or a rotation, so the scheme overrides ``attend``. It computes the
    same attention as :class:`posenc.ShawRelativeAttention` (with the
    projections left to the tiny Transformer), and holds the same tables,
    ``posenc.relative.ShawRelativeEmbeddings``.

    Args:
        dim: Model dimension, divisible by ``num_heads``.
        num_heads: Number of heads.
        max_relative_position: Clipping distance ``k``, >= 0: relative positions
            beyond ``+-k`` share the embedding of ``+-k``.
    """

    def __init__(self, *, dim: int, num_heads: int, max_relative_position: int = 16) -> None:
        super().__init__()
        self.head_dim = check_heads(dim, num_heads)
        self.relative = ShawRelativeEmbeddings(self.head_dim, max_relative_position)  # w^K, w^V

    @property
    def max_relative_position(self) -> int:
        return self.relative.max_relative_position

    def relative_embeddings(self, q_len: int, k_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The key and value tables ``[q_len + k_len - 1, head_dim]`` for queries at the last ``q_len`` keys.

        Row ``c`` belongs to the relative position ``c - (k_len - 1)``, clipped
        to ``[-k, k]``; the absolute positions do not enter.
        """
        return self.relative.tables(q_len, k_len, offset=k_len - q_len)

    def attend(self, q, k, v, *, bias=None, causal=False, offset=0):
        """Shaw attention: the key term joins ``bias``, the value term the output.

        The key term is ``q_i . a^K_ij / sqrt(d_h)``, the value term
        ``sum_j alpha_ij a^V_ij``. Shapes as
        :meth:`posenc.experiments.PositionScheme.attend`; ``offset`` is ignored.
        """
        q_len, k_len = q.shape[-2], k.shape[-2]
        a_k, a_v = self.relative_embeddings(q_len, k_len)  # [q + k - 1, dh] each
        scores = relative_scores(q, a_k.to(q.dtype))  # [b, h, q, k]
        key_term = scores / math.sqrt(self.head_dim)
        bias = key_term if bias is None else key_term + bias
        out, weights = scaled_dot_product_attention(q, k, v, bias=bias, causal=causal)
        value_term = relative_values(weights, a_v.to(weights.dtype))  # [b, h, q, dh]
        return out + value_term, weights


class T5Scheme(PositionScheme):
    """Raffel et al. 2020: a learned bias per head and bucket of relative positions.

    Bidirectional buckets for a bidirectional model, causal ones for a causal
    model (:func:`posenc.t5_relative_position_bucket`).

    Args:
        num_heads: Number of heads.
        causal: Whether the model is causal.
        num_buckets: Number of buckets (32 in T5).
        max_distance: Distance from which on all relative positions share a
            bucket (128 in T5).
    """

    def __init__(self, *, num_heads: int, causal: bool = False, num_buckets: int = 32, max_distance: int = 128) -> None:
        super().__init__()
        self.bias = T5RelativeBias(
            num_heads, bidirectional=not causal, num_buckets=num_buckets, max_distance=max_distance
        )

    def score_bias(self, q_len: int, k_len: int, offset: int = 0) -> torch.Tensor:
        """T5's bias ``[h, q_len, k_len]`` for queries at the last ``q_len`` keys; ``offset`` is ignored."""
        return self.bias(q_len, k_len, offset=k_len - q_len)  # [h, q, k]


class ALiBiScheme(PositionScheme):
    """Press et al. 2022: ``-m_h`` times the distance on the scores, nothing learned.

    A causal model gets the paper's bias (past keys only, with the causal
    mask); a bidirectional one the symmetric ``-m_h |i - j|``, which cannot
    tell a key on the left from one at the same distance on the right.

    Args:
        num_heads: Number of heads.
        causal: Whether the model is causal.
    """

    def __init__(self, *, num_heads: int, causal: bool = False) -> None:
        super().__init__()
        self.bias = ALiBiBias(num_heads, causal=causal)

    def score_bias(self, q_len: int, k_len: int, offset: int = 0) -> torch.Tensor:
        """ALiBi's bias ``[h, q_len, k_len]`` for queries at the last ``q_len`` keys; ``offset`` is ignored."""
        return self.bias(q_len, k_len, offset=k_len - q_len)  # [h, q, k]


# ---------------------------------------------------------------------------
# Rotary schemes


class RopeScheme(PositionScheme):
    """Su et al. 2021: queries and keys rotated by their positions in every layer.

    Args:
        dim: Model dimension, divisible by ``num_heads``, with an even head
            dimension.
        num_heads: Number of heads.
        base: Frequency base (``rope_theta``).
        layout: ``"half"`` or ``"interleaved"``.
        scaling: ``None`` or a ``rope_parameters``-style dict (``{"rope_type":
            "yarn", "factor": 4.0, "original_max_position_embeddings": 64}``,
            see :func:`posenc.rope_inv_freq`), applied at every length. The
            scheme holds no weights, so a model trained without scaling
            becomes the scaled one by loading its weights.
    """

    def __init__(
        self,
        *,
        dim: int,
        num_heads: int,
        base: float = 10000.0,
        layout: str = "half",
        scaling: Mapping | None = None,
    ) -> None:
        super().__init__()
        self.rotary = RotaryEmbedding(check_heads(dim, num_heads), base=base, layout=layout, scaling=scaling)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """``q`` and ``k`` ``[b, h, s, head_dim]`` rotated by the positions ``offset .. offset + s - 1``."""
        return self.rotary(q, k, offset=offset)


def _check_factor(factor: object) -> float | None:
    if factor is None:
        return None
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1.0 <= factor < math.inf:
        raise ValueError(f"factor must be None or a finite number >= 1, got {factor!r}")
    return float(factor)


class RopePIScheme(RopeScheme):
    """RoPE with linear position interpolation (Chen et al. 2023), decided at every forward pass.

    Up to the trained length ``max_len`` it is :class:`RopeScheme`, bit for
    bit, so a model trained on inputs of at most ``max_len`` tokens is the
    same model with either scheme. A longer input, whose last position is
    ``n - 1`` with ``n = offset + seq_len > max_len``, is rotated with
    ``scaling={"rope_type": "linear", "factor": n / max_len}``
    (:func:`posenc.rope_cos_sin`): positions are divided by the factor and
    span ``[0, max_len)``, the range seen in training, at the cost of
    fractional positions that training never saw. Chen et al. fine-tune
    briefly after the change; here nothing is fine-tuned.

    Args:
        dim: Model dimension, divisible by ``num_heads``.
        num_heads: Number of heads.
        max_len: The trained length: the longest input rotated unchanged.
        factor: ``None`` (default) for ``max(1, n / max_len)``, chosen per
            forward pass, or a fixed factor >= 1 used at every length.
        base: Frequency base.
        layout: ``"half"`` or ``"interleaved"``.
    """

    def __init__(
        self,
        *,
        dim: int,
        num_heads: int,
        max_len: int,
        factor: float | None = None,
        base: float = 10000.0,
        layout: str = "half",
    ) -> None:
        super().__init__(dim=dim, num_heads=num_heads, base=base, layout=layout)
        self.max_len = check_positive_int("max_len", max_len)
        self.factor = _check_factor(factor)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, factor={self.factor}"

    def get_extra_state(self) -> dict:
        """The trained length and the factor travel with the weights: they are part of what was trained."""
        return {"max_len": self.max_len, "factor": self.factor}

    def set_extra_state(self, state: dict) -> None:
        """Restore the trained length and factor of a checkpoint, which decide every longer input's rotation."""
        if not isinstance(state, dict) or set(state) != {"max_len", "factor"}:
            raise ValueError(f"rope_pi state must be a dict with keys 'max_len' and 'factor', got {state!r}")
        self.max_len = check_positive_int("max_len", state["max_len"])
        self.factor = _check_factor(state["factor"])

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
        # A plain RoPE checkpoint has no trained length to restore: interpolating a RoPE-trained
        # model is this scheme's use, so it loads and keeps the max_len it was built with.
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        missing = (
            args[2] if len(args) > 2 else kwargs.get("missing_keys", [])
        )  # (local_metadata, strict, missing_keys, ...)
        if prefix + "_extra_state" not in state_dict and prefix + "_extra_state" in missing:
            missing.remove(prefix + "_extra_state")

    def factor_for(self, length: int) -> float:
        """The interpolation factor for positions ``0 .. length - 1``: ``max(1, length / max_len)`` or the fixed one."""
        check_positive_int("length", length)
        return self.factor if self.factor is not None else max(1.0, length / self.max_len)

    def rotate(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        offset: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """As :class:`RopeScheme`, with positions divided by a factor.

        The factor is :meth:`factor_for` of ``offset + s``, the input's length.
        """
        check_nonnegative_int("offset", offset)
        seq_len = q.shape[-2]
        factor = self.factor_for(offset + seq_len)
        if factor == 1.0:
            return super().rotate(q, k, offset)
        rotary = self.rotary
        positions = torch.arange(offset, offset + seq_len, device=q.device)  # [s]
        cos, sin = rope_cos_sin(
            positions,
            rotary.head_dim,
            base=rotary.base,
            layout=rotary.layout,
            scaling={"rope_type": "linear", "factor": factor},
            dtype=torch.float64 if q.dtype == torch.float64 else torch.float32,
        )  # [s, dh] each
        return (
            apply_rope(q, cos, sin, layout=rotary.layout),
            apply_rope(k, cos, sin, layout=rotary.layout),
        )


# ---------------------------------------------------------------------------
# Registered by name
# ---------------------------------------------------------------------------

register_position_scheme("none", NoPositions)
register_position_scheme("sinusoidal", SinusoidalScheme)
register_position_scheme("learned", LearnedScheme)
register_position_scheme("shaw", ShawScheme)
register_position_scheme("t5", T5Scheme)
register_position_scheme("alibi", ALiBiScheme)
register_position_scheme("rope", RopeScheme)
register_position_scheme("rope_pi", RopePIScheme)
