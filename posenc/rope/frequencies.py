"""Which RoPE frequencies to keep: p-RoPE and HoPE, and the pairs that turn within a length.

RoPE's pair ``i`` turns by ``theta_i = base ** (-2i / d)`` per position, so its period is
``2 pi / theta_i`` positions. The fast pairs (small ``i``) go round many times inside a
training length; the slowest never complete one turn. Two proposals keep the fast pairs and
drop the slow ones, which then carry no position at all (a frequency of 0 is the identity
rotation, so a dropped pair adds its plain dot product ``q_i k_i`` to every score):

* p-RoPE (Barbero et al., "Round and Round We Go! What makes Rotary Positional Encodings
  useful?", ICLR 2025): rotate the fraction ``p`` of pairs with the highest frequencies,
  ``floor(p * d / 2)`` of them; ``p = 1`` is RoPE, ``p = 0`` no position at all.
* HoPE (Chen et al., "HoPE: A Novel Positional Encoding Without Long-Term Decay", ACL 2025):
  drop every pair whose period exceeds the training length, the pairs that never complete a
  turn in training.

The functions return inverse frequencies with the dropped pairs at 0, ready for
:func:`~posenc.cos_sin_from_inv_freq`.
"""

from __future__ import annotations

import math

import torch

from .._checks import check_base, check_even_dim, check_float_tensor, check_positive_int, check_real
from .rotary import rope_inv_freq


def _check_fraction(name: str, value: object) -> float:
    """Return ``value`` as a float in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return value


def p_rope_inv_freq(head_dim: int, p: float, *, base: float = 10000.0) -> torch.Tensor:
    """p-RoPE's inverse frequencies: the fastest ``floor(p * d / 2)`` pairs turn, the rest are 0.

    Barbero et al., "Round and Round We Go! What makes Rotary Positional Encodings useful?",
    ICLR 2025: the lowest frequencies act as semantic channels rather than as
    positions, and removing them (keeping the fraction ``p`` of highest frequencies) keeps
    the positional heads and frees those channels from any rotation.

    Args:
        head_dim: Rotary dimension ``d``, even.
        p: Fraction of pairs that keep their rotation, in [0, 1].
        base: RoPE's base, a finite number > 1.

    Returns:
        ``[head_dim // 2]`` float64 tensor: ``base ** (-2i / d)`` for ``i < floor(p * d / 2)``,
        0 after.

    Raises:
        ValueError: If ``head_dim`` is odd or not positive, ``p`` is outside [0, 1], or
            ``base`` is not a finite number > 1.
    """
    check_even_dim("head_dim", head_dim)
    p = _check_fraction("p", p)
    base = check_base("base", base)
    inv_freq, _ = rope_inv_freq(head_dim, base=base)  # [d/2], fastest first
    # kept = floor(p * d / 2); the slowest d/2 - kept pairs stop turning
    kept = math.floor(p * (head_dim // 2) + 1e-9)
    return torch.where(torch.arange(head_dim // 2) < kept, inv_freq, torch.zeros_like(inv_freq))


def rope_turning_pairs(inv_freq: torch.Tensor, length: int) -> torch.Tensor:
    """Which pairs complete at least one full turn within ``length`` positions.

    Pair ``i`` turns by ``theta_i`` per position, so across the ``length - 1`` steps of a
    sequence of ``length`` tokens it turns by ``(length - 1) * theta_i``; the pair completes
    a turn when that reaches ``2 pi``, that is when its period ``2 pi / theta_i`` is at most
    ``length - 1``. A pair of frequency 0 never turns.

    Args:
        inv_freq: ``[n]`` frequencies ``theta_i`` >= 0 (radians per position).
        length: Number of positions, an int >= 1.

    Returns:
        ``[n]`` bool tensor, True where ``(length - 1) * theta_i >= 2 pi``.

    Raises:
        ValueError: If ``inv_freq`` is not a 1-d floating tensor of finite numbers >= 0, or
            ``length`` is not an int >= 1.
    """
    check_float_tensor("inv_freq", inv_freq)
    check_real("inv_freq", inv_freq)
    if inv_freq.dim() != 1 or not bool(torch.isfinite(inv_freq).all()) or bool((inv_freq < 0).any()):
        raise ValueError(f"inv_freq must be a 1-d tensor of finite numbers >= 0, got shape {tuple(inv_freq.shape)}")
    length = check_positive_int("length", length)
    # turned = (L - 1) * theta_i; a full turn is 2 pi
    return (length - 1) * inv_freq.double() >= 2 * math.pi


def hope_inv_freq(head_dim: int, train_len: int, *, base: float = 10000.0) -> torch.Tensor:
    """HoPE's inverse frequencies: pairs that never complete a turn in training are set to 0.

    Chen et al., "HoPE: A Novel Positional Encoding Without Long-Term Decay", ACL 2025:
    the low-frequency components, whose period exceeds the training length, are replaced by
    position-independent ones; the high-frequency components keep RoPE's rotation.

    Args:
        head_dim: Rotary dimension ``d``, even.
        train_len: Training length ``L``, an int >= 1.
        base: RoPE's base, a finite number > 1.

    Returns:
        ``[head_dim // 2]`` float64 tensor: ``theta_i`` where the pair completes a turn within
        ``L`` positions (:func:`rope_turning_pairs`), 0 elsewhere.

    Raises:
        ValueError: If ``head_dim`` is odd or not positive, ``train_len`` is not an int
            >= 1, or ``base`` is not a finite number > 1.
    """
    check_even_dim("head_dim", head_dim)
    train_len = check_positive_int("train_len", train_len)
    base = check_base("base", base)
    inv_freq, _ = rope_inv_freq(head_dim, base=base)  # [d/2]
    return torch.where(rope_turning_pairs(inv_freq, train_len), inv_freq, torch.zeros_like(inv_freq))
