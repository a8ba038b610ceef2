"""Argument checks shared by every module.

Each helper raises a ``ValueError`` whose message names the argument, the
value it got and the limit it broke, so that bad input never surfaces as a
broadcasting error from deep inside torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

LAYOUTS = ("interleaved", "concat")


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int >= 1, got {value!r} ({type(value).__name__})")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def check_nonnegative_int(name: str, value: object) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int >= 0, got {value!r} ({type(value).__name__})")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def check_even_dim(name: str, value: object) -> int:
    """Return ``value`` if it is a positive even int (sin/cos or rotation pairs)."""
    value = check_positive_int(name, value)
    if value % 2:
        raise ValueError(
            f"{name} must be even (channels come in sin/cos pairs), got {value}; "
            f"use {value - 1} or {value + 1}"
        )
    return value


def check_base(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite number > 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number > 1, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 1.0:
        raise ValueError(f"{name} must be a finite number > 1, got {value}")
    return value


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value  # type: ignore[return-value]


def check_probability(name: str, value: object) -> float:
    """Return ``value`` as a float in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    value = float(value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return value


def check_sequence_input(x, dim: int) -> None:
    """Raise unless ``x`` is shaped ``[..., seq_len, dim]`` (at least 2 dims)."""
    if x.dim() < 2 or x.shape[-1] != dim:
        raise ValueError(f"x must have shape [..., seq_len, {dim}] (last dim = dim = {dim}), got {tuple(x.shape)}")

def check_positive_number(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number > 0, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return value
