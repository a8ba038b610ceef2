"""Helpers shared by the test files: seeded random tensors."""

from __future__ import annotations

import torch


def rand(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Standard normal values drawn directly in ``dtype`` from a generator seeded with ``seed``."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    """Standard normal values (never zeros) drawn in float32 and rounded to ``dtype``.

    The same draw in every dtype, so float16 and bfloat16 inputs are the float32 ones rounded.
    """
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
