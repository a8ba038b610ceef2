"""The sinusoidal module as tutorials usually write it: a reference to review, not to use.

Most PyTorch tutorials on positional encoding give one and the same module: build a
``[max_len, d_model]`` table of sines and cosines once, in float32, store it with
``register_buffer`` (persistent, so it lands in every checkpoint), and add its first
``seq_len`` rows to the input. Some variants keep the table sequence-first,
``[max_len, 1, d_model]``, for inputs shaped ``[seq_len, batch, d_model]``.

This module writes that pattern out, with its behaviour kept on purpose, so that the
book can show where it goes wrong:

* no check of ``d_model``: an odd value fails inside the table's construction;
* a hard ``max_len``: a longer input fails with a broadcasting error;
* no check of the layout: a batch-first tensor passed to the sequence-first variant
  (or the reverse) is silently given the wrong positions;
* the table's angles are formed in float32, and the table is saved in ``state_dict``.

Use :class:`posenc.SinusoidalPositionalEncoding` instead: it checks its input, has no
maximum length, keeps its table out of checkpoints and preserves the input dtype.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def tutorial_table(max_len: int, d_model: int) -> torch.Tensor:
    """The tutorial's sinusoidal table, angles formed in float32.

    No argument checks, as in the pattern: an odd ``d_model`` fails with a
    shape error from the second slice assignment.

    Args:
        max_len: Number of positions (rows).
        d_model: Model dimension.

    Returns:
        float32 tensor of shape ``[max_len, d_model]``, sines at even channels
        and cosines at odd ones.

    Raises:
        RuntimeError: If ``d_model`` is odd (there is one more sine column than
            cosine columns).
    """
    rows = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # [max_len, 1]
    even = torch.arange(0, d_model, 2, dtype=torch.float32)  # 0, 2, 4, ...
    inv_freq = torch.exp(even * (-math.log(10000.0) / d_model))
    angles = rows * inv_freq  # [max_len, ceil(d_model / 2)]
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(angles)
    # fails when d_model is odd: floor(d/2) columns here
    table[:, 1::2] = torch.cos(angles)
    return table


class TutorialPositionalEncoding(nn.Module):
    """The common tutorial module, kept as the pattern the book reviews (do not use).

    Adds rows ``0 .. seq_len - 1`` of a precomputed sinusoidal table, then
    dropout. Prefer :class:`posenc.SinusoidalPositionalEncoding`.

    Args:
        d_model: Model dimension (not checked: odd values fail in the table).
        max_len: Rows of the table; longer inputs fail.
        dropout: Dropout probability after the addition.
        seq_first: Store the table as ``[max_len, 1, d_model]`` and slice it on
            dim 0, for inputs ``[seq_len, batch, d_model]``. The default stores
            ``[1, max_len, d_model]`` and slices dim 1, for ``[batch, seq_len,
            d_model]``. Neither checks which layout it is given.
        persistent: Whether the table is saved in ``state_dict`` (``True`` in
            the tutorials, which is what ``register_buffer`` does by default).
    """

    pe: torch.Tensor

    def __init__(
        self,
        d_model: int,
        max_len: int = 5000,
        dropout: float = 0.0,
        *,
        seq_first: bool = False,
        persistent: bool = True,
    ) -> None:
        super().__init__()
        self.seq_first = seq_first
        self.dropout = nn.Dropout(dropout)
        table = tutorial_table(max_len, d_model)  # [max_len, d]
        # -> [max_len, 1, d] (sequence first) or [1, max_len, d] (batch first)
        table = table.unsqueeze(1) if seq_first else table.unsqueeze(0)
        self.register_buffer("pe", table, persistent=persistent)

    def extra_repr(self) -> str:
        return f"pe={tuple(self.pe.shape)}, seq_first={self.seq_first}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Add the table's first rows to ``x`` and apply dropout.

        Args:
            x: ``[batch, seq_len, d_model]``, or ``[seq_len, batch, d_model]``
                when ``seq_first``. Nothing checks which one it is.

        Returns:
            ``dropout(x + pe[:seq_len])`` broadcast against ``x``.
        """
        if self.seq_first:
            # [s, 1, d] broadcast over the batch
            return self.dropout(x + self.pe[: x.size(0)])
        # [1, s, d] broadcast over the batch
        return self.dropout(x + self.pe[:, : x.size(1)])
