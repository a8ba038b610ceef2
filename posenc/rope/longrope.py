"""LongRoPE: one rescale factor per channel pair, a short set and a long set.

Ding et al., "LongRoPE: Extending LLM Context Window Beyond 2 Million Tokens",
2024, as used by Phi-3 and computed by ``transformers``' ``_compute_longrope_parameters``.
The factors are found offline by an evolutionary search (section 3.2 of the paper);
a model ships two lists of ``head_dim / 2`` numbers: ``short_factor``, used while the
sequence fits in the original context, and ``long_factor``, used beyond it. Pair ``i``
turns at ``theta_i / factor_i``. This module holds the ``"longrope"`` entry of
:data:`posenc.rope.scaling.ROPE_SCALINGS`: its validator and its frequencies.
"""

from __future__ import annotations

import math

import torch

from .._checks import check_number
from ..sinusoidal import sinusoidal_frequencies

#: Keys of a ``"longrope"`` dictionary besides the common ones.
LONGROPE_REQUIRED = ("short_factor", "long_factor", "original_max_position_embeddings")
LONGROPE_OPTIONAL = ("factor", "attention_factor")


def _check_factor_list(params: dict, key: str) -> None:
    """``params[key]`` as a list of floats, each finite and > 0 (it divides a frequency)."""
    values = params[key]
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(
            f"scaling[{key!r}] must be a non-empty list of finite numbers > 0 (one per channel pair), got {values!r}"
        )
    for index, value in enumerate(values):
        check_number(f"scaling[{key!r}][{index}]", value, minimum=0.0, inclusive=False)
    params[key] = [float(value) for value in values]


def check_longrope(params: dict) -> None:
    """Check a ``"longrope"`` dictionary's values in place (numbers converted to float).

    ``factor`` is optional here as in ``transformers``, which derives a missing one as
    ``config.max_position_embeddings / original_max_position_embeddings``; that
    configuration is not seen here, so one of ``factor`` and ``attention_factor`` is
    required (the factor serves only to compute the default attention factor).

    Raises:
        ValueError: If a factor list is not a non-empty list of finite numbers > 0,
            ``original_max_position_embeddings`` is not > 0, ``factor`` is below 1,
            ``attention_factor`` is negative, both are missing, or the default attention
            factor cannot be computed (``original_max_position_embeddings`` <= 1).
    """
    for key in ("short_factor", "long_factor"):
        _check_factor_list(params, key)
    key = "original_max_position_embeddings"
    params[key] = check_number(f"scaling[{key!r}]", params[key], minimum=0.0, inclusive=False)
    if params.get("factor") is not None:  # transformers only warns below 1, which shortens the context
        params["factor"] = check_number("scaling['factor']", params["factor"], minimum=1.0, inclusive=True)
    if params.get("attention_factor") is not None:
        params["attention_factor"] = check_number(
            "scaling['attention_factor']", params["attention_factor"], minimum=0.0, inclusive=True
        )
    elif params.get("factor") is None:
        raise ValueError(
            "scaling for rope_type 'longrope' needs 'factor' or 'attention_factor'; transformers derives a "
            "missing factor as config.max_position_embeddings / original_max_position_embeddings, pass that ratio"
        )
    elif params["factor"] > 1.0 and params[key] <= 1.0:
        raise ValueError(
            f"scaling[{key!r}] must be > 1 for the default attention factor sqrt(1 + ln(factor) / "
            f"ln(original_max_position_embeddings)), got {params[key]:g}; or pass 'attention_factor'"
        )


def longrope_attention_factor(params: dict) -> float:
    """``attention_factor`` if given, else ``sqrt(1 + ln(s) / ln(L0))`` for ``factor`` s > 1, else 1."""
    if params.get("attention_factor") is not None:
        return params["attention_factor"]
    factor, original = params["factor"], params["original_max_position_embeddings"]
    # LongRoPE section 3.3 (as transformers computes it): sqrt(1 + ln(s) / ln(L0))
    return 1.0 if factor <= 1.0 else math.sqrt(1.0 + math.log(factor) / math.log(original))


def longrope_frequencies(head_dim: int, base: float, params: dict, seq_len, device) -> tuple[torch.Tensor, float]:
    """``theta_i / long_factor[i]`` if ``seq_len`` > the original length, else ``theta_i / short_factor[i]``.

    Args:
        head_dim: Rotary dimension ``d``; each factor list must have ``d / 2`` entries.
        base: The RoPE base.
        params: A dictionary checked by :func:`check_longrope`.
        seq_len: The current length (the largest position + 1), or None (short factors).
        device: Where the frequencies are computed.

    Returns:
        ``(inv_freq [head_dim/2] float64, attention_factor)``.

    Raises:
        ValueError: If a factor list's length is not ``head_dim / 2`` or ``seq_len`` is
            not a finite number.
    """
    for key in ("short_factor", "long_factor"):
        if len(params[key]) != head_dim // 2:
            raise ValueError(
                f"scaling[{key!r}] has {len(params[key])} entries, expected head_dim / 2 = {head_dim // 2} "
                f"(one per channel pair of head_dim {head_dim})"
            )
    long = False
    if seq_len is not None:
        if isinstance(seq_len, bool) or not isinstance(seq_len, (int, float)) or not math.isfinite(seq_len):
            raise ValueError(f"seq_len must be a finite number, got {seq_len!r}")
        long = seq_len > params["original_max_position_embeddings"]
    factors = torch.tensor(params["long_factor" if long else "short_factor"], dtype=torch.float64, device=device)
    # theta_i = base^(-2i/d) / factor_i
    inv_freq = sinusoidal_frequencies(head_dim, base=base, dtype=torch.float64, device=device) / factors
    return inv_freq, longrope_attention_factor(params)
