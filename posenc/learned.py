"""Learned absolute position embeddings: one trained vector per position.

A table of ``max_len`` rows, one per position, is a parameter of the model
and is trained with it; row ``p`` is added to the embedding of the token at
position ``p``. BERT (Devlin et al. 2019, ``max_len`` 512) and GPT-2 (Radford
et al. 2019, 1024) work this way. The table has a hard length limit: there is
no row for position ``max_len``, and rows for positions that never occur in
training keep their initial random values.

Initialisation, as the reference implementations do it:

* BERT's TensorFlow code draws the table from a normal distribution with
  standard deviation 0.02 truncated at two standard deviations
  (``truncated=True`` here).
* GPT-2's TensorFlow code draws it from a normal with standard deviation 0.01
  (0.02 for the token embeddings).
* Hugging Face's ``transformers`` initialises both models' tables with a plain
  normal of standard deviation ``initializer_range = 0.02``: the default here.
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import (
    check_nonnegative_int,
    check_positive_int,
    check_positive_number,
    check_probability,
    check_sequence_input,
)
from .sinusoidal import check_token_positions


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trained vector per position to a batch of embeddings, then dropout.

    Devlin et al. 2019 (BERT); Radford et al. 2019 (GPT-2). ``weight`` is a
    ``[max_len, dim]`` parameter; ``forward`` adds rows ``offset .. offset + s - 1``.

    Args:
        max_len: Number of rows: positions ``0 .. max_len - 1`` have an
            embedding, later ones do not.
        dim: Model dimension.
        std: Standard deviation of the initial values; 0.02 as in BERT and in
            Hugging Face's GPT-2 (OpenAI's GPT-2 code uses 0.01).
        truncated: Draw from a normal truncated at ``+-2 std``, as BERT's
            TensorFlow code does; the truncation lowers the actual standard
            deviation to about ``0.88 * std``.
        dropout: Dropout probability applied after the addition, in [0, 1).

    Raises:
        ValueError: If ``max_len`` or ``dim`` is not a positive int, ``std`` is
            not a positive number, or ``dropout`` is outside [0, 1).
    """

    def __init__(
        self, max_len: int, dim: int, *, std: float = 0.02, truncated: bool = False, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.max_len = check_positive_int("max_len", max_len)
        self.dim = check_positive_int("dim", dim)
        self.std = check_positive_number("std", std)
        self.truncated = bool(truncated)
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        self.weight = nn.Parameter(torch.empty(max_len, dim))
        self.reset_parameters()

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, dim={self.dim}, std={self.std:g}, truncated={self.truncated}"

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Redraw the table from its initial distribution.

        Args:
            generator: Optional random generator, for a reproducible table
                without touching the global seed.
        """
        if self.truncated:
            a, b = -2.0 * self.std, 2.0 * self.std
            nn.init.trunc_normal_(
                self.weight,
                mean=0.0,
                std=self.std,
                a=a,
                b=b,
                generator=generator,
            )
        else:
            nn.init.normal_(self.weight, mean=0.0, std=self.std, generator=generator)

    def forward(self, x: torch.Tensor, offset: int = 0, *, positions=None) -> torch.Tensor:
        """Add the embeddings of positions ``offset .. offset + s - 1``, or of ``positions``.

        Args:
            x: Embeddings of shape ``[..., s, dim]`` (batch first: ``[b, s, dim]``).
            offset: Position of the first token, >= 0.
            positions: Instead of ``offset``, the integer position of every
                token: ``[s]``, or ``[b, s]`` for one row per sequence of
                ``x [b, s, dim]`` (left-padded batches, packed sequences).

        Returns:
            ``dropout(x + weight[positions])``, same shape and dtype as ``x``.

        Raises:
            ValueError: If ``x`` has fewer than 2 dims, its last dim is not
                ``dim``, ``offset`` is negative, both ``offset`` and
                ``positions`` are given, or ``positions`` does not fit ``x``.
            TypeError: If ``positions`` does not hold integers.
            IndexError: If a position is negative, or ``max_len`` or more:
                the table has no row for it.
        """
        check_sequence_input(x, self.dim)
        if positions is not None:
            pe = self._rows(check_token_positions(positions, x, offset=offset))
            return self.dropout(x + pe.to(x.dtype))
        check_nonnegative_int("offset", offset)
        seq_len = x.shape[-2]
        last = offset + seq_len - 1
        if last >= self.max_len:
            raise IndexError(
                f"position {last} is past the learned table: "
                f"max_len={self.max_len} covers positions 0..{self.max_len - 1} "
                f"(offset={offset}, seq_len={seq_len})"
            )
        pe = self.weight[offset : offset + seq_len].to(dtype=x.dtype)  # [s, d]
        return self.dropout(x + pe)

    def _rows(self, positions: torch.Tensor) -> torch.Tensor:
        """``weight[positions]``, ``[*positions.shape, dim]``, once every position is checked against the table."""
        if positions.is_floating_point():
            raise TypeError(f"positions must hold integers (rows of the learned table), got dtype {positions.dtype}")
        if positions.numel():
            low, high = int(positions.min()), int(positions.max())
            if low < 0 or high >= self.max_len:
                bad, where = (low, "before") if low < 0 else (high, "past")
                raise IndexError(
                    f"position {bad} is {where} the learned table: max_len={self.max_len} covers positions "
                    f"0..{self.max_len - 1} (positions span {low}..{high})"
                )
        return self.weight[positions.to(self.weight.device)]  # [*positions.shape, d]
