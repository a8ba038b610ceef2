"""Long-context scaling of RoPE's frequencies, one function per ``rope_type``.

The vocabulary is Hugging Face's ``rope_parameters`` dictionary (``{"rope_type":
"yarn", "factor": 4.0, ...}``), and for the same parameters each function returns
what ``transformers``' ``ROPE_INIT_FUNCTIONS`` compute, in float64. Unlike that
table, a dictionary with an unknown key, a missing parameter or an out-of-range
value raises a ``ValueError`` here instead of a warning.

Every scaling is a :class:`RopeScaling`: the keys it needs and may take, a
validator for their values, and a function with one signature::

    frequencies(head_dim, base, params, seq_len, device) -> (inv_freq [head_dim/2], attention_factor)

``ROPE_SCALINGS`` maps each ``rope_type`` to its entry; adding a type is
adding one entry. :func:`posenc.rope_inv_freq` looks the type up there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from ._checks import check_base, check_choice, check_even_dim, check_number, check_positive_int
from .sinusoidal import sinusoidal_frequencies

Frequencies = Callable[[int, float, dict, "float | None", torch.device], "tuple[torch.Tensor, float]"]


@dataclass(frozen=True)
class RopeScaling:
    """One ``rope_type``: its keys, their checks, and the frequencies it gives.

    Attributes:
        required: Keys the dictionary must hold.
        optional: Keys it may hold besides ``rope_type``, ``rope_theta`` and the required ones.
        validate: ``validate(params)`` checks the values in place (numbers converted to float).
        frequencies: The scaled frequencies, signature as in the module docstring.
    """

    required: tuple[str, ...]
    optional: tuple[str, ...]
    validate: Callable[[dict], None]
    frequencies: Frequencies


# ---------------------------------------------------------------------------
# The NTK-aware base, shared by "dynamic"
# ---------------------------------------------------------------------------


def ntk_scaled_base(base: float, factor: float, head_dim: int) -> float:
    """The NTK-aware base change: ``base * factor ** (head_dim / (head_dim - 2))``.

    Proposed by bloc97 in the r/LocalLLaMA post "NTK-Aware Scaled RoPE allows
    LLaMA models to have extended (8k+) context size without any fine-tuning
    and minimal perplexity degradation" (June 2023); written down as
    "NTK-aware" interpolation in section 3.1 of the YaRN paper (Peng et al.
    2023). The exponent is chosen so that the slowest pair, ``i = d/2 - 1``,
    turns ``factor`` times more slowly (exactly like position interpolation),
    while the fastest pair, ``i = 0``, is left unchanged; the pairs between
    are slowed by ``factor ** (2i / (d - 2))``, a geometric blend.

    Use the result as ``base`` of any function here; it is a static change,
    made once for a target length. ``scaling={"rope_type": "dynamic", ...}``
    applies the same change with a factor that follows the current length.

    Args:
        base: The model's RoPE base (``rope_theta``), > 1.
        factor: How many times longer the context should become, >= 1.
        head_dim: Rotary dimension ``d``, even and >= 4.

    Returns:
        The new base, a float.

    Raises:
        ValueError: If ``base`` is not > 1, ``factor`` is below 1, or
            ``head_dim`` is not an even int >= 4.
    """
    base = check_base("base", base)
    factor = check_number("factor", factor, minimum=1.0, inclusive=True)
    _check_ntk_dim(head_dim)
    return base * factor ** (head_dim / (head_dim - 2))


def _check_ntk_dim(head_dim: int) -> None:
    check_even_dim("head_dim", head_dim)
    if head_dim < 4:
        raise ValueError(f"head_dim must be >= 4 for the NTK-aware base change (exponent d/(d-2)), got {head_dim}")


# ---------------------------------------------------------------------------
# Validators: one per type, after the common key checks of parse_scaling
# ---------------------------------------------------------------------------


def _check_factor(params: dict) -> None:
    params["factor"] = check_number("scaling['factor']", params["factor"], minimum=1.0, inclusive=True)
    if "original_max_position_embeddings" in params:
        check_positive_int("scaling['original_max_position_embeddings']", params["original_max_position_embeddings"])


def _check_nothing(params: dict) -> None:
    """``"default"`` takes no parameters to check."""


def _check_llama3(params: dict) -> None:
    _check_factor(params)
    low = check_number("scaling['low_freq_factor']", params["low_freq_factor"], minimum=0.0, inclusive=False)
    high = check_number("scaling['high_freq_factor']", params["high_freq_factor"], minimum=0.0, inclusive=False)
    if high <= low:
        raise ValueError(
            f"scaling['high_freq_factor'] must be > scaling['low_freq_factor'], got high_freq_factor={high:g} "
            f"and low_freq_factor={low:g}"
        )


def _check_yarn(params: dict) -> None:
    _check_factor(params)
    if not isinstance(params.get("truncate", True), bool):
        raise ValueError(f"scaling['truncate'] must be True or False, got {params['truncate']!r}")
    for key in ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim"):
        if params.get(key) is not None:
            params[key] = check_number(f"scaling[{key!r}]", params[key], minimum=0.0, inclusive=False)
    beta_fast, beta_slow = params.get("beta_fast") or 32.0, params.get("beta_slow") or 1.0
    if beta_fast <= beta_slow:
        raise ValueError(
            f"scaling['beta_fast'] must be > scaling['beta_slow'], got beta_fast={beta_fast:g} "
            f"and beta_slow={beta_slow:g}"
        )


# ---------------------------------------------------------------------------
# Frequencies: one function per type
# ---------------------------------------------------------------------------


def _default(head_dim: int, base: float, params: dict, seq_len, device) -> tuple[torch.Tensor, float]:
    # theta_i = base^(-2i/d), RoFormer section 3.2.2
    return sinusoidal_frequencies(head_dim, base=base, dtype=torch.float64, device=device), 1.0


def _linear(head_dim: int, base: float, params: dict, seq_len, device) -> tuple[torch.Tensor, float]:
    # position interpolation (Chen et al. 2023): every frequency divided by the factor
    inv_freq, _ = _default(head_dim, base, params, seq_len, device)
    return inv_freq / params["factor"], 1.0


def _dynamic(head_dim: int, base: float, params: dict, seq_len, device) -> tuple[torch.Tensor, float]:
    _check_ntk_dim(head_dim)
    original, factor = params["original_max_position_embeddings"], params["factor"]
    length = original
    if seq_len is not None:
        length = max(check_number("seq_len", seq_len, minimum=0.0, inclusive=False), original)
    # The NTK-aware base for the factor s * L / L0 - (s - 1): 1 up to L = L0, then growing by s per L0.
    base = ntk_scaled_base(base, factor * length / original - (factor - 1), head_dim)
    return _default(head_dim, base, params, seq_len, device)


def _yarn_ramp(head_dim: int, base: float, params: dict, device) -> torch.Tensor:
    """YaRN's blend weight per pair: 0 keeps the frequency, 1 divides it by the factor."""
    original = params["original_max_position_embeddings"]
    beta_fast, beta_slow = params.get("beta_fast") or 32.0, params.get("beta_slow") or 1.0

    def pair_index(num_rotations: float) -> float:
        # The (fractional) pair whose wavelength fits num_rotations times into the original context.
        return head_dim * math.log(original / (num_rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_index(beta_fast), pair_index(beta_slow)
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    # The reference implementation clamps to [0, head_dim - 1], in channel rather than pair units.
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # a step instead of a ramp, without dividing by zero
    pairs = torch.arange(head_dim // 2, dtype=torch.float64, device=device)  # [d/2]
    return ((pairs - low) / (high - low)).clamp(0.0, 1.0)


def _yarn_attention_factor(params: dict) -> float:
    if params.get("attention_factor") is not None:
        return params["attention_factor"]

    def mscale(scale: float, weight: float = 1.0) -> float:
        return 1.0 if scale <= 1.0 else 0.1 * weight * math.log(scale) + 1.0

    factor = params["factor"]
    if params.get("mscale") and params.get("mscale_all_dim"):
        return mscale(factor, params["mscale"]) / mscale(factor, params["mscale_all_dim"])
    return mscale(factor)


def _yarn(head_dim: int, base: float, params: dict, seq_len, device) -> tuple[torch.Tensor, float]:
    # Peng et al. 2023: interpolate the slow pairs, keep the fast ones, blend between (the ramp)
    inv_freq, _ = _default(head_dim, base, params, seq_len, device)
    ramp = _yarn_ramp(head_dim, base, params, device)  # [d/2]
    inv_freq = inv_freq * (1 - ramp) + inv_freq / params["factor"] * ramp
    return inv_freq, _yarn_attention_factor(params)


def _llama3(head_dim: int, base: float, params: dict, seq_len, device) -> tuple[torch.Tensor, float]:
    inv_freq, _ = _default(head_dim, base, params, seq_len, device)
    factor, original = params["factor"], params["original_max_position_embeddings"]
    low_ff, high_ff = params["low_freq_factor"], params["high_freq_factor"]
    wavelength = 2 * math.pi / inv_freq  # [d/2]
    # 0 for wavelengths >= original / low_ff (divide by factor), 1 for <= original / high_ff (keep).
    smooth = ((original / wavelength - low_ff) / (high_ff - low_ff)).clamp(0.0, 1.0)
    return (1 - smooth) * inv_freq / factor + smooth * inv_freq, 1.0


#: Every ``rope_type``, in Hugging Face's vocabulary, and how it scales the frequencies.
ROPE_SCALINGS: dict[str, RopeScaling] = {
    "default": RopeScaling((), (), _check_nothing, _default),
    "linear": RopeScaling(("factor",), (), _check_factor, _linear),
    "dynamic": RopeScaling(("factor", "original_max_position_embeddings"), (), _check_factor, _dynamic),
    "yarn": RopeScaling(
        ("factor", "original_max_position_embeddings"),
        ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"),
        _check_yarn,
        _yarn,
    ),
    "llama3": RopeScaling(
        ("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"),
        (),
        _check_llama3,
        _llama3,
    ),
}

#: Values of ``scaling["rope_type"]``.
ROPE_TYPES = tuple(ROPE_SCALINGS)


def parse_scaling(scaling: Mapping | None, base: float) -> dict:
    """Validate a ``rope_parameters``-style dict; return a copy with ``rope_type`` filled in.

    The keys are checked against the type's entry in ``ROPE_SCALINGS`` (unknown or
    missing ones raise), a ``rope_theta`` key must equal ``base``, and then the type's
    own validator checks the values.

    Raises:
        ValueError: If ``scaling`` is not a mapping, names an unknown ``rope_type``,
            has an unknown key, misses a required one, or holds an out-of-range value.
    """
    if scaling is None:
        return {"rope_type": "default"}
    if not isinstance(scaling, Mapping):
        raise ValueError(
            f"scaling must be None or a dict like {{'rope_type': 'linear', 'factor': 4.0}}, got {scaling!r}"
        )
    params = dict(scaling)
    rope_type = params.setdefault("rope_type", "default")
    check_choice("scaling['rope_type']", rope_type, ROPE_TYPES)
    entry = ROPE_SCALINGS[rope_type]
    allowed = {"rope_type", "rope_theta", *entry.required, *entry.optional}
    unknown = sorted(set(params) - allowed, key=str)
    if unknown:
        raise ValueError(
            f"scaling has unknown key(s) {', '.join(map(repr, unknown))} for rope_type {rope_type!r}; "
            f"allowed: {', '.join(map(repr, sorted(allowed)))}"
        )
    missing = [key for key in entry.required if params.get(key) is None]
    if missing:
        raise ValueError(
            f"scaling is missing {', '.join(map(repr, missing))}, which rope_type {rope_type!r} needs "
            f"(it needs {', '.join(map(repr, entry.required))})"
        )
    if "rope_theta" in params and check_base("scaling['rope_theta']", params["rope_theta"]) != base:
        raise ValueError(
            f"scaling['rope_theta'] = {params['rope_theta']!r} disagrees with base = {base:g}; pass the same value"
        )
    entry.validate(params)
    return params
