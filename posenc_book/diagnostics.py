"""Small measurements the chapters make on matrices of scores and similarities."""

from __future__ import annotations

import html
from functools import partial

import torch
import torch.nn.functional as F

#: HTML-escape ``&``, ``<`` and ``>`` (quotes are left alone), for the tables chapters 10 and 13 render.
escape = partial(html.escape, quote=False)


def diagonal_spread(matrix: torch.Tensor, max_offset: int | None = None) -> float:
    """The largest ``max - min`` along any diagonal of ``matrix``: 0 exactly when each diagonal is constant.

    A matrix whose entry ``[m, n]`` depends only on ``n - m`` (a Toeplitz matrix) has
    spread 0; this is how the chapters check that a score depends on the offset alone.

    Args:
        matrix: ``[rows, cols]``.
        max_offset: Only the diagonals ``n - m`` in ``[-max_offset, max_offset]``; all of them if None.

    Returns:
        The spread, a Python float.
    """
    if matrix.dim() != 2:
        raise ValueError(f"matrix must be 2-D, got shape {tuple(matrix.shape)}")
    rows, cols = matrix.shape
    low, high = -(rows - 1), cols - 1
    if max_offset is not None:
        low, high = max(low, -max_offset), min(high, max_offset)
    spreads = [torch.diagonal(matrix, o) for o in range(low, high + 1)]
    return max((d.max() - d.min()).item() for d in spreads)


def cosine_similarity_matrix(rows: torch.Tensor) -> torch.Tensor:
    """``[n, n]`` cosine similarities between the ``n`` rows of ``rows`` (``[n, d]``), in float64."""
    unit = F.normalize(rows.double(), dim=-1)  # [n, d]
    return unit @ unit.T  # [n, n]
