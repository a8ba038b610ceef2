"""Position schemes of recent papers on the tiny Transformer: FIRE, CoPE, and RoPE trained with PoSE.

Each wraps the library's own implementation in the hooks of
:class:`~posenc.experiments.PositionScheme` (see :mod:`posenc.experiments.registry`):

* ``"fire"`` (:class:`FIREScheme`): Li et al. 2024, a learned bias that is a
  function of the distance, normalised by the query's position
  (:class:`posenc.FIREBias`), on the scores of every layer.
* ``"cope"`` (:class:`CoPEScheme`): Golovneva et al. 2024, positions counted by
  gates on the content (:class:`posenc.CoPE`), in the attention of every layer.
* ``"rope_pose"`` (:class:`RopePoSEScheme`): RoPE whose training inputs carry
  PoSE's skip-wise position ids (Zhu et al. 2024, :func:`posenc.pose_position_ids`),
  spread over a window longer than the inputs; in evaluation mode, plain RoPE.

As the relative schemes of :mod:`posenc.experiments.schemes`, each holds one set
of position parameters for the whole model, shared by all layers. FIRE and CoPE
are causal, as in their papers: they refuse a bidirectional model. All three
are registered by name when :mod:`posenc.experiments` is imported; they are not
among the eight schemes of the book's extrapolation experiment.
"""

from __future__ import annotations

import torch

from .._checks import check_heads, check_nonnegative_int, check_positive_int
from ..cope import CoPE
from ..fire import FIREBias
from ..pose import pose_position_ids
from .registry import PositionScheme, register_position_scheme
from .schemes import RopeScheme

__all__ = ["CoPEScheme", "FIREScheme", "RopePoSEScheme"]


def _check_causal(scheme: str, causal: object) -> None:
    """Raise unless ``causal`` is True: ``scheme`` masks the keys after the query itself."""
    if causal is not True:
        raise ValueError(
            f"causal must be True for {scheme}, whose positions run from the key to the query only; got {causal!r}: "
            "build the model with causal=True"
        )


class FIREScheme(PositionScheme):
    """Li et al. 2024: FIRE's learned bias ``f(psi(i - j) / psi(max(L, i)))`` on the scores of every layer.

    The bias is :class:`posenc.FIREBias`: an MLP with one output per head, of the distance after
    the log transform ``psi(x) = log(c x + 1)``, divided by ``psi`` of the query's
    position or of the threshold ``L``, whichever is larger. The paper learns
    ``c`` and ``L`` with the MLP; here they stay fixed unless ``learn_transform``
    is true: at the tiny model's learning rate a learned ``c`` falls fast (from 1
    to 0.5 or 0.6 in 150 steps of the shift task), towards the identity transform
    it reaches as ``c -> 0``, and :class:`posenc.FIREBias` refuses a ``c <= 0``,
    which would end a long run.

    FIRE depends on the query's position ``i`` through that divisor, so the
    scheme honours ``offset``: the queries sit at ``offset + k_len - q_len ..``.
    The default threshold is the model's ``max_len``, the trained length: up to
    it the distances keep their scale, and a longer input's are divided by
    ``psi(i)``, mapped into the range seen in training (progressive interpolation).

    Args:
        num_heads: Number of heads.
        max_len: The trained length, the default threshold.
        causal: Must be True: FIRE's bias masks the keys after the query.
        hidden: Width of the MLP's hidden layer (32 in the paper).
        c: Initial ``c``, > 0.
        threshold: Initial ``L``, > 0; default ``max_len``.
        transform: ``"log"`` (the paper's) or ``"identity"``.
        learn_transform: Learn ``c`` and ``L`` with the MLP (the paper's choice).

    Raises:
        ValueError: If ``causal`` is not True, or as :class:`posenc.FIREBias`.
        TypeError: As :class:`posenc.FIREBias`.
    """

    def __init__(
        self,
        *,
        num_heads: int,
        max_len: int,
        causal: bool = True,
        hidden: int = 32,
        c: float = 1.0,
        threshold: float | None = None,
        transform: str = "log",
        learn_transform: bool = False,
    ) -> None:
        super().__init__()
        _check_causal("FIRE", causal)
        threshold = float(check_positive_int("max_len", max_len)) if threshold is None else threshold
        self.bias = FIREBias(
            num_heads, hidden=hidden, c=c, threshold=threshold, transform=transform, learn_transform=learn_transform
        )

    def score_bias(self, q_len: int, k_len: int, offset: int = 0) -> torch.Tensor:
        """FIRE's causal bias ``[h, q_len, k_len]`` for queries at the last ``q_len`` keys, the first key at ``offset``.

        It is :class:`posenc.FIREBias` for ``offset + k_len`` keys, of which the first
        ``offset`` (positions the input does not hold) are dropped.
        """
        check_nonnegative_int("offset", offset)
        return self.bias(q_len, offset + k_len)[..., offset:]  # [h, q, offset + k] -> [h, q, k]


class CoPEScheme(PositionScheme):
    """Golovneva et al. 2024: contextual positions, counted by gates on the content, in the attention of every layer.

    Query ``i`` opens a gate ``g_it = sigmoid(q_i . k_t / sqrt(d))`` on every key up
    to itself; key ``j`` stands at ``p_ij = sum_{t=j}^{i} g_it``, the number of
    counted tokens from it to the query, and the logit gains ``q_i . e[p_ij]``, the
    embedding table read by linear interpolation (:func:`posenc.cope_logits`,
    through :class:`posenc.CoPE`). With every gate open ``p_ij = i - j + 1``: a
    relative encoding with one embedding per distance. The positions do not
    depend on ``offset``, which is ignored.

    One table ``[num_positions, head_dim]`` serves every head and every layer
    (the paper shares it across heads and keeps one per layer); it starts at zero,
    as in the paper's code, so an untrained CoPE adds nothing to the logits.
    Positions are clamped at ``num_positions - 1``.

    Args:
        dim: Model dimension, divisible by ``num_heads``.
        num_heads: Number of heads.
        max_len: The trained length; sets the default table size.
        causal: Must be True: CoPE counts the keys up to the query.
        num_positions: Embeddings in the table, >= 1; default ``max_len + 1``,
            so that with every gate open no position of a training input is
            clamped.

    Raises:
        ValueError: If ``causal`` is not True, a size is not an int >= 1, or
            ``num_heads`` does not divide ``dim``.
    """

    def __init__(
        self, *, dim: int, num_heads: int, max_len: int, causal: bool = True, num_positions: int | None = None
    ) -> None:
        super().__init__()
        _check_causal("CoPE", causal)
        head_dim = check_heads(dim, num_heads)
        num_positions = check_positive_int("max_len", max_len) + 1 if num_positions is None else num_positions
        self.cope = CoPE(head_dim, num_positions)

    def attend(self, q, k, v, *, bias=None, causal=False, offset=0):
        """CoPE attention: ``softmax(cope_logits(q, k) + bias) v``.

        Shapes as :meth:`posenc.experiments.PositionScheme.attend`; ``bias`` (a
        float bias, ``-inf`` to mask, or a boolean mask with ``True`` = may attend)
        joins the logits, whose keys after the query are already ``-inf``.

        Raises:
            ValueError: If ``causal`` is not True.
        """
        _check_causal("CoPE", causal)
        logits = self.cope(q, k)  # [b, h, q, k], -inf after the query
        if bias is not None:
            logits = logits.masked_fill(~bias, float("-inf")) if bias.dtype == torch.bool else logits + bias
        weights = torch.softmax(logits, dim=-1)  # [b, h, q, k]
        return weights @ v, weights


class RopePoSEScheme(RopeScheme):
    """RoPE trained with PoSE's skip-wise position ids (Zhu et al. 2024); plain RoPE in evaluation mode.

    In training mode (``model.train()``) every example of a batch gets its own
    :func:`posenc.pose_position_ids`: the ``s`` tokens, cut into ``num_chunks``
    chunks, keep consecutive ids within a chunk, and each chunk is moved right by a
    skip, so that one input of ``s`` tokens carries ids anywhere in
    ``0 .. target_len - 1`` and the model learns distances up to
    ``target_len - 1`` from short inputs. In evaluation mode (``model.eval()``)
    the tokens sit at ``offset .. offset + s - 1``, exactly as :class:`RopeScheme`
    places them, so a trained model runs at any length as plain RoPE.

    The ids of a forward pass are drawn in ``embed``, which the model calls once
    per forward pass before its layers, and every layer's ``rotate`` uses them
    (shifted by ``offset``); they stay in ``position_ids`` until the next pass. An
    input longer than ``target_len`` leaves no room for a skip: its ids are the
    plain ``0 .. s - 1``; one of fewer than ``num_chunks`` tokens is cut into one
    chunk per token. The draws come from a generator of the scheme's own, seeded
    with ``seed``: the global random state is untouched, a fresh model draws the
    same ids (so training stays deterministic), and the scheme holds no weights,
    so ``"rope"`` and ``"rope_pose"`` start from the same ones.

    Args:
        dim: Model dimension, divisible by ``num_heads``, with an even head
            dimension.
        num_heads: Number of heads.
        max_len: The trained length; sets the default target.
        target_len: The window the training ids cover, >= 1; default
            ``4 * max_len``.
        num_chunks: ``N``, chunks per input, >= 1 (the paper uses 2).
        seed: Seed of the ids' generator, >= 0.
        base: Frequency base.
        layout: ``"half"`` or ``"interleaved"``.
    """

    def __init__(
        self,
        *,
        dim: int,
        num_heads: int,
        max_len: int,
        target_len: int | None = None,
        num_chunks: int = 2,
        seed: int = 0,
        base: float = 10000.0,
        layout: str = "half",
    ) -> None:
        super().__init__(dim=dim, num_heads=num_heads, base=base, layout=layout)
        target_len = 4 * check_positive_int("max_len", max_len) if target_len is None else target_len
        self.target_len = check_positive_int("target_len", target_len)
        self.num_chunks = check_positive_int("num_chunks", num_chunks)
        self.generator = torch.Generator().manual_seed(check_nonnegative_int("seed", seed))
        self.position_ids: torch.Tensor | None = None  # [b, s], drawn in training mode

    def extra_repr(self) -> str:
        return f"target_len={self.target_len}, num_chunks={self.num_chunks}"

    def draw_position_ids(self, batch_size: int, seq_len: int) -> torch.Tensor:
        """PoSE ids ``[batch_size, seq_len]``, one window per row, from the scheme's generator."""
        check_positive_int("batch_size", batch_size)
        check_positive_int("seq_len", seq_len)
        target, chunks = max(self.target_len, seq_len), min(self.num_chunks, seq_len)
        rows = [
            pose_position_ids(seq_len, target, num_chunks=chunks, generator=self.generator) for _ in range(batch_size)
        ]
        return torch.stack(rows)  # [b, s]

    def embed(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``x [b, s, dim]`` unchanged; in training mode, draws the pass's ids (``position_ids``) first."""
        self.position_ids = self.draw_position_ids(x.shape[0], x.shape[1]).to(x.device) if self.training else None
        return x

    def rotate(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """In training mode ``q`` and ``k`` rotated by ``offset + position_ids``; else as :class:`RopeScheme`.

        Raises:
            RuntimeError: In training mode, if ``embed`` has drawn no ids for this
                batch and length.
        """
        if not self.training:
            return super().rotate(q, k, offset)
        check_nonnegative_int("offset", offset)
        batch, seq_len = q.shape[0], q.shape[-2]
        if self.position_ids is None or self.position_ids.shape != (batch, seq_len):
            raise RuntimeError(
                f"rope_pose draws its training position ids in embed, once per forward pass: call embed on "
                f"[{batch}, {seq_len}, dim] tokens before rotate (found ids for "
                f"{None if self.position_ids is None else tuple(self.position_ids.shape)})"
            )
        return self.rotary(q, k, positions=self.position_ids + offset)


register_position_scheme("fire", FIREScheme)
register_position_scheme("cope", CoPEScheme)
register_position_scheme("rope_pose", RopePoSEScheme)
