"""Long-context scaling of RoPE's frequencies, one function per ``rope_type``.

The vocabulary is Hugging Face's ``rope_parameters`` dictionary (``{"rope_type":
"yarn", "factor": 4.0, ...}``), and for the same parameters each function returns
what ``transformers``' ``ROPE_INIT_FUNCTIONS`` compute, in float64. Every
dictionary that transformers' validator accepts for these types is accepted, with
the same meaning (see :func:`parse_scaling` for the few exceptions); where
transformers only warns, about an unknown key, a missing parameter or an
out-of-range value, a ``ValueError`` is raised here instead.

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

from .._checks import check_base, check_choice, check_even_dim, check_number
from ..sinusoidal import sinusoidal_frequencies
from .longrope import LONGROPE_OPTIONAL, LONGROPE_REQUIRED, check_longrope, longrope_frequencies

Frequencies = Callable[[int, float, dict, "float | None", torch.device], "tuple[torch.Tensor, float]"]


@dataclass(frozen=True)
class RopeScaling:
    """One ``rope_type``: its keys, their checks, and the frequencies it gives.

    Attributes:
        required: Keys the dictionary must hold.
        optional: Keys it may hold besides ``COMMON_KEYS`` and the required ones.
        validate: ``validate(params)`` checks the values in place (numbers converted to float).
        frequencies: The scaled frequencies, signature as in the module docstring.
        length_dependent: Whether the frequencies depend on ``seq_len`` (the current length),
            so that a table cannot be computed once for every length.
    """

    required: tuple[str, ...]
    optional: tuple[str, ...]
    validate: Callable[[dict], None]
    frequencies: Frequencies
    length_dependent: bool = False


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


def _real(params: dict, key: str, *, minimum: float | None = None, inclusive: bool = True) -> float:
    """``params[key]`` as a float, finite and above ``minimum`` if given (message: key, value, limit)."""
    name = f"scaling[{key!r}]"
    if minimum is not None:
        params[key] = check_number(name, params[key], minimum=minimum, inclusive=inclusive)
        return params[key]
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    params[key] = float(value)
    return params[key]


def _check_factor(params: dict) -> None:
    # transformers only warns below 1 (and still computes); a factor < 1 shortens the context, so it raises here
    _real(params, "factor", minimum=1.0)


def _check_nothing(params: dict) -> None:
    """``"default"`` takes no parameters to check."""


def _check_linear(params: dict) -> None:
    _check_factor(params)
    if params.get("original_max_position_embeddings") is None:
        params.pop("original_max_position_embeddings", None)
    else:  # tolerated, and ignored as transformers ignores it: linear divides every frequency alike
        _real(params, "original_max_position_embeddings", minimum=0.0, inclusive=False)


def _check_dynamic(params: dict) -> None:
    _check_factor(params)
    _real(params, "original_max_position_embeddings", minimum=0.0, inclusive=False)


def _check_llama3(params: dict) -> None:
    _check_factor(params)
    _real(params, "original_max_position_embeddings")  # transformers accepts any length (<= 0: all interpolated)
    for key in ("low_freq_factor", "high_freq_factor"):  # transformers divides the length by each
        if _real(params, key) == 0.0:
            raise ValueError(f"scaling[{key!r}] must be != 0 (the length is divided by it), got 0.0")
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    if high < low:  # equal factors are a step (Llama 4 Scout ships them); transformers only warns about both
        raise ValueError(
            f"scaling['high_freq_factor'] must be >= scaling['low_freq_factor'], got high_freq_factor={high:g} "
            f"and low_freq_factor={low:g}"
        )


def _check_yarn(params: dict) -> None:
    _check_factor(params)
    _real(params, "original_max_position_embeddings", minimum=0.0, inclusive=False)  # its log is taken
    if not isinstance(params.get("truncate", True), bool):  # transformers would read None as False, "no" as True
        raise ValueError(f"scaling['truncate'] must be True or False, got {params['truncate']!r}")
    if params.get("attention_factor") is not None:  # transformers warns for an int, then uses it
        _real(params, "attention_factor", minimum=0.0)
    for key in ("mscale", "mscale_all_dim", "beta_fast"):
        if params.get(key) is not None:
            _real(params, key)
    if params.get("beta_slow") is not None:
        _real(params, "beta_slow", minimum=0.0)  # 0, like None, means the default 1 in transformers (`or 1`)
    beta_fast, beta_slow = params.get("beta_fast") or 32.0, params.get("beta_slow") or 1.0
    if beta_fast < beta_slow:
        raise ValueError(
            f"scaling['beta_fast'] must be >= scaling['beta_slow'], got beta_fast={beta_fast:g} "
            f"and beta_slow={beta_slow:g} (0 or None means the default, 32 and 1)"
        )
    if params.get("attention_factor") is None and params.get("mscale") and params.get("mscale_all_dim"):
        if _mscale(params["factor"], params["mscale_all_dim"]) == 0.0:
            raise ValueError(
                f"scaling['mscale_all_dim'] = {params['mscale_all_dim']:g} makes the attention factor's "
                f"denominator 0.1 * mscale_all_dim * ln(factor) + 1 zero for factor = {params['factor']:g}"
            )


def _mscale(scale: float, weight: float = 1.0) -> float:
    """YaRN's attention temperature: ``0.1 * weight * ln(scale) + 1``, or 1 for ``scale <= 1``."""
    return 1.0 if scale <= 1.0 else 0.1 * weight * math.log(scale) + 1.0


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
        # A length of at most L0 (even <= 0, when every position is negative) leaves the base unchanged.
        if isinstance(seq_len, bool) or not isinstance(seq_len, (int, float)) or not math.isfinite(seq_len):
            raise ValueError(f"seq_len must be a finite number, got {seq_len!r}")
        length = max(float(seq_len), original)
    # The NTK-aware base for the factor s * L / L0 - (s - 1): 1 up to L = L0 (clamped: it may round below 1),
    # then growing by s per L0.
    base = ntk_scaled_base(base, max(1.0, factor * length / original - (factor - 1)), head_dim)
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
    low, high = float(max(low, 0)), float(min(high, head_dim - 1))  # floats: a huge bound fits no int64
    if low == high:
        high += 0.001  # a step instead of a ramp, without dividing by zero
    pairs = torch.arange(head_dim // 2, dtype=torch.float64, device=device)  # [d/2]
    return ((pairs - low) / (high - low)).clamp(0.0, 1.0)


def _yarn_attention_factor(params: dict) -> float:
    if params.get("attention_factor") is not None:
        return params["attention_factor"]
    factor = params["factor"]
    if params.get("mscale") and params.get("mscale_all_dim"):  # truthiness, as in transformers: 0 means unset
        return _mscale(factor, params["mscale"]) / _mscale(factor, params["mscale_all_dim"])
    return _mscale(factor)


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
    if high_ff == low_ff:
        # A zero-width ramp is a step (Llama 4 Scout), as transformers and Meta's llama4 code compute it; a pair
        # exactly at the boundary is divided, the limit of every wider ramp (transformers: NaN, Meta: assert).
        return torch.where(wavelength < original / high_ff, inv_freq, inv_freq / factor), 1.0
    # 0 (divide by factor) for wavelengths > original / low_ff, else 1 (keep) below original / high_ff, else a
    # linear blend; tested in this order, as transformers does, which matters only for low_ff < 0.
    smooth = (original / wavelength - low_ff) / (high_ff - low_ff)
    smooth = torch.where(wavelength < original / high_ff, 1.0, smooth)
    smooth = torch.where(wavelength > original / low_ff, 0.0, smooth)
    return (1 - smooth) * inv_freq / factor + smooth * inv_freq, 1.0


#: Every ``rope_type``, in Hugging Face's vocabulary, and how it scales the frequencies.
ROPE_SCALINGS: dict[str, RopeScaling] = {
    "default": RopeScaling((), (), _check_nothing, _default),
    "linear": RopeScaling(("factor",), ("original_max_position_embeddings",), _check_linear, _linear),
    "dynamic": RopeScaling(("factor", "original_max_position_embeddings"), (), _check_dynamic, _dynamic, True),
    "yarn": RopeScaling(
        ("factor", "original_max_position_embeddings"),
        ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"),
        _check_yarn,
        _yarn,
    ),
    # LongRoPE (Ding et al. 2024, Phi-3): per-pair factors, short up to the original length, long beyond it
    "longrope": RopeScaling(LONGROPE_REQUIRED, LONGROPE_OPTIONAL, check_longrope, longrope_frequencies, True),
    "llama3": RopeScaling(
        ("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"),
        (),
        _check_llama3,
        _llama3,
    ),
}

#: Values of ``scaling["rope_type"]``.
ROPE_TYPES = tuple(ROPE_SCALINGS)


#: Keys every type takes: the type (``"type"`` is transformers' legacy spelling), the base, the rotated fraction.
COMMON_KEYS = ("rope_type", "type", "rope_theta", "partial_rotary_factor")

#: What transformers does when the key is missing: it reads the config, which this function does not see.
_HINTS = {
    **{
        (rope_type, "original_max_position_embeddings"): "; it is the length the model was trained on, which "
        "transformers takes from config.max_position_embeddings"
        for rope_type in ("dynamic", "yarn", "llama3", "longrope")
    },
    ("yarn", "factor"): "; transformers derives a missing factor as config.max_position_embeddings / "
    "original_max_position_embeddings",
}


#: RoPE's base when neither ``base`` nor ``scaling["rope_theta"]`` gives one (Su et al. 2021).
DEFAULT_BASE = 10000.0


def resolve_base(base: float | None, scaling: Mapping | None) -> float:
    """The RoPE base: ``base`` if given, else ``scaling["rope_theta"]`` if present, else 10000.

    ``transformers`` v5 keeps ``rope_theta`` inside ``rope_parameters``, so a
    model's dictionary alone fixes the frequencies. Given both, they must agree
    (:func:`parse_scaling` checks it).

    Raises:
        ValueError: If the base chosen is not a finite number > 1.
    """
    if base is not None:
        return check_base("base", base)
    theta = scaling.get("rope_theta") if isinstance(scaling, Mapping) else None
    return DEFAULT_BASE if theta is None else check_base("scaling['rope_theta']", theta)


def parse_scaling(scaling: Mapping | None, base: float) -> dict:
    """Validate a ``rope_parameters``-style dict; return a copy with ``rope_type`` filled in.

    Every dict that ``transformers``' validator accepts for these types is accepted, with
    the same meaning: ints for floats, ``"type"`` for ``"rope_type"`` (``"rope_type"`` wins
    if both are given), ``rope_theta`` (it must equal ``base``), ``partial_rotary_factor``
    of 1, 0 or None for an optional YaRN number (its default, as transformers' ``or``),
    ``original_max_position_embeddings`` in a ``"linear"`` dict (ignored; transformers
    warns it is unrecognized). The exceptions: keys transformers reads from the config
    when absent (``original_max_position_embeddings``; YaRN's ``factor``; LongRoPE's
    ``factor`` unless ``attention_factor`` is given) are required;
    ``partial_rotary_factor`` other than 1 and a ``truncate`` that is not a bool raise.
    Where transformers warns, this raises (naming the key, the value and the limit),
    except for an int ``attention_factor``, a non-int llama3 length, and llama3's
    ``high_freq_factor == low_freq_factor`` (a step: pairs with a wavelength below
    ``original_max_position_embeddings / high_freq_factor`` kept, the others divided by
    ``factor``, as in Llama 4 Scout), which are used.
    The result is canonical: parsing it again gives it back.

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
    legacy = params.pop("type", "default")
    rope_type = params.setdefault("rope_type", legacy)
    check_choice("scaling['rope_type']", rope_type, ROPE_TYPES)
    entry = ROPE_SCALINGS[rope_type]
    _check_keys(params, rope_type, entry)
    if "rope_theta" in params and check_base("scaling['rope_theta']", params["rope_theta"]) != base:
        raise ValueError(
            f"scaling['rope_theta'] = {params['rope_theta']!r} disagrees with base = {base:g}; pass the same value"
        )
    if "partial_rotary_factor" in params:
        _check_full_rotation(params["partial_rotary_factor"])
    entry.validate(params)
    return params


def _check_keys(params: dict, rope_type: str, entry: RopeScaling) -> None:
    allowed = {*COMMON_KEYS, *entry.required, *entry.optional}
    unknown = sorted(set(params) - allowed, key=str)
    if unknown:
        raise ValueError(
            f"scaling has unknown key(s) {', '.join(map(repr, unknown))} for rope_type {rope_type!r}; "
            f"accepted: {', '.join(map(repr, sorted(allowed)))}"
        )
    missing = [key for key in entry.required if params.get(key) is None]
    if missing:
        raise ValueError(
            f"scaling is missing {', '.join(map(repr, missing))}, which rope_type {rope_type!r} needs "
            f"(it needs {', '.join(map(repr, entry.required))}){_HINTS.get((rope_type, missing[0]), '')}"
        )


def _check_full_rotation(fraction: object) -> None:
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or fraction != 1:
        hint = f"int(head_dim * {fraction!r})" if isinstance(fraction, (int, float)) else "the rotated dimension"
        raise ValueError(
            f"scaling['partial_rotary_factor'] must be 1 (full rotation), got {fraction!r}: partial rotary is not "
            f"supported by the frequencies; drop the key and pass head_dim = {hint}, the dimension transformers "
            f"rotates (RotaryEmbedding(head_dim, rotary_dim={hint}) rotates that part of each head and passes the "
            "rest through)"
        )
