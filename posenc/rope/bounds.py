"""How the RoPE base bounds the context: the critical dimension and the base's lower bound.

Two readings of the same ladder of periods ``2 pi * base ** (2i / d)``:

* Liu et al., "Scaling Laws of RoPE-based Extrapolation", ICLR 2024: the pairs
  whose period fits inside the training length ``T`` see every angle during training; the
  others do not. Their count, doubled to channels, is the *critical dimension*
  ``d_extra = 2 * ceil((d / 2) * log_base(T / (2 pi)))``.
* Men et al., "Base of RoPE Bounds Context Length", NeurIPS 2024: a query that
  equals its key should score above a random key at every distance ``m`` in the context,
  which holds when ``B(m) = sum_i cos(m * theta_i) >= 0``. For a context ``L`` this is a lower
  bound on the base: below it ``B`` turns negative at some distance under ``L``.
"""

from __future__ import annotations

import math

import torch

from .._checks import check_base, check_even_dim, check_positive_int, check_positive_number
from .rotary import rope_inv_freq

#: Distances evaluated at once by :func:`rope_base_lower_bound`, in blocks of ``_BLOCK``.
_CHUNK = 1 << 16
_BLOCK = 256


def rope_critical_dim(head_dim: int, train_len: int, *, base: float = 10000.0) -> int:
    """Liu et al.'s critical dimension: channels whose pairs complete a period within ``train_len``.

    Liu et al., "Scaling Laws of RoPE-based Extrapolation", ICLR 2024:
    ``d_extra = 2 * ceil((d / 2) * log_base(T / (2 pi)))``, clamped to ``[0, d]``. Pair ``i``
    has period ``2 pi * base ** (2i / d)``, at most ``T`` exactly when
    ``i <= (d / 2) * log_base(T / (2 pi))``: ``d_extra / 2`` counts those pairs (unless that
    bound is an integer, where the count is one more).

    Args:
        head_dim: Rotary dimension ``d``, even.
        train_len: Training length ``T``, an int >= 1.
        base: RoPE's base, a finite number > 1.

    Returns:
        ``d_extra``, an even int in ``[0, head_dim]``.

    Raises:
        ValueError: If ``head_dim`` is odd or not positive, ``train_len`` is not an int >= 1,
            or ``base`` is not a finite number > 1.
    """
    check_even_dim("head_dim", head_dim)
    train_len = check_positive_int("train_len", train_len)
    base = check_base("base", base)
    # d_extra = 2 * ceil(d/2 * log_base(T / 2 pi))
    pairs = math.ceil((head_dim / 2) * math.log(train_len / (2 * math.pi)) / math.log(base))
    return 2 * min(max(pairs, 0), head_dim // 2)


def rope_cos_sum(distances, head_dim: int, *, base: float = 10000.0) -> torch.Tensor:
    """Men et al.'s ``B(m) = sum_i cos(m * theta_i)``, over the ``d / 2`` pairs, at each distance.

    Men et al., "Base of RoPE Bounds Context Length", NeurIPS 2024: for a query
    ``q`` and a key equal to it up to noise, the expected score at distance ``m`` exceeds that
    of a random key by ``2 sigma^2 * B(m)``; RoPE tells similar tokens apart at distance
    ``m`` while ``B(m) >= 0``. ``B(0) = d / 2``.

    Args:
        distances: Tensor (or numbers) of distances ``m``, any shape.
        head_dim: Rotary dimension ``d``, even.
        base: RoPE's base, a finite number > 1.

    Returns:
        float64 tensor of the shape of ``distances``.

    Raises:
        ValueError: If ``head_dim`` is odd or not positive, ``base`` is not a finite number
            > 1, or ``distances`` does not hold finite real numbers.
    """
    check_even_dim("head_dim", head_dim)
    base = check_base("base", base)
    m = torch.as_tensor(distances)
    if m.dtype in (torch.bool, torch.complex64, torch.complex128) or not bool(torch.isfinite(m.double()).all()):
        raise ValueError(f"distances must hold finite real numbers, got dtype {m.dtype}")
    inv_freq, _ = rope_inv_freq(head_dim, base=base)  # [d/2]
    # B(m) = sum_i cos(m theta_i)
    return torch.cos(m.double()[..., None] * inv_freq).sum(-1)


def _holds(head_dim: int, context_len: int, base: float) -> bool:
    """Whether ``B(m) >= 0`` for every distance ``m = 0 .. context_len - 1`` at this base.

    ``B(m0 + k) = Re sum_i exp(1j * m0 * theta_i) * exp(1j * k * theta_i)``: one complex matrix
    product of ``[blocks, d/2]`` starts by ``[d/2, _BLOCK]`` steps gives every distance, to
    about 1e-10 of :func:`rope_cos_sum`, at a tenth of its cost.
    """
    inv_freq, _ = rope_inv_freq(head_dim, base=base)  # [d/2]
    one = torch.ones((), dtype=torch.float64)
    steps = torch.polar(one, torch.arange(_BLOCK, dtype=torch.float64)[:, None] * inv_freq)  # [K, d/2]
    for first in range(0, context_len, _CHUNK):
        starts = torch.arange(first, min(first + _CHUNK, context_len), _BLOCK, dtype=torch.float64)
        phases = torch.polar(one, starts[:, None] * inv_freq)  # [blocks, d/2]
        sums = (phases @ steps.T).real.reshape(-1)[: min(_CHUNK, context_len - first)]  # [blocks * K] distances
        if bool((sums < 0).any()):
            return False
    return True


def rope_base_lower_bound(head_dim: int, context_len: int, *, rtol: float = 1e-3) -> float:
    """A lower bound on the RoPE base for a context: ``B(m) >= 0`` for every distance of ``context_len`` there.

    Men et al., "Base of RoPE Bounds Context Length", NeurIPS 2024: the base must be
    large enough that ``B(m) = sum_i cos(m * theta_i)`` (:func:`rope_cos_sum`) stays
    non-negative for ``m = 0 .. L - 1``. Found by bisection on ``log(base)`` between 2 and
    ``1e15``, then steps of ``1 + rtol`` down while the condition still holds (``B`` is not
    monotone in the base): the result ``b`` satisfies the condition, and ``b / (1 + rtol)``
    does not. Since ``B`` is not monotone, some smaller bases may satisfy it again (at
    ``d = 128``, ``L = 8192``: 150,000, below the ``b`` found); ``b`` is the bound this search
    meets, not the smallest base that passes.

    Args:
        head_dim: Rotary dimension ``d``, even, >= 2.
        context_len: Context length ``L``, an int >= 1.
        rtol: Relative width of the final bracket, a number > 0.

    Returns:
        The base ``b``, a float.

    Raises:
        ValueError: If ``head_dim`` is odd or not positive, ``context_len`` is not an int
            >= 1 or no base up to ``1e15`` satisfies the condition, or ``rtol`` is not > 0.
    """
    check_even_dim("head_dim", head_dim)
    context_len = check_positive_int("context_len", context_len)
    rtol = check_positive_number("rtol", rtol)
    lo, hi = 2.0, 1e15
    if _holds(head_dim, context_len, lo):
        return lo
    if not _holds(head_dim, context_len, hi):
        raise ValueError(f"context_len = {context_len} needs a base above 1e15 for head_dim = {head_dim}")
    while hi > lo * (1 + rtol):
        mid = math.sqrt(lo * hi)  # bisection of log(base)
        lo, hi = (lo, mid) if _holds(head_dim, context_len, mid) else (mid, hi)
    # B is not monotone in the base: step down while one step lower still holds
    while hi / (1 + rtol) > 2.0 and _holds(head_dim, context_len, hi / (1 + rtol)):
        hi /= 1 + rtol
    return hi
