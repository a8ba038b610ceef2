"""The fuzz tests' shared parts: float64 oracles written from the papers' formulas, hypothesis
strategies, and the check that tells posenc's own errors from raw ones.

Every expected value is computed here, in float64, from the defining formula (Vaswani et al.
2017; Su et al. 2021 and the ``transformers`` scalings; Press et al. 2022; Raffel et al. 2020;
Shaw et al. 2018), never by calling posenc. The tests are ``tests/library/test_fuzz_*.py``, one module
per family of the library, its wrong inputs, and the defects the fuzzing found. Two failure
classes are looked for:

* silently wrong: a result farther from the float64 oracle than the rounding of
  its dtype allows (float64 ~1e-12, float32 ~1e-6, float16/bfloat16 a few units
  in the last place, widened by the condition of ``sin``/``cos`` at large angles);
* raw errors: anything other than a ``ValueError``/``TypeError``/``IndexError``
  raised by a ``raise`` statement of posenc itself (:func:`call_or_posenc_error`).

Bounded and derandomized (``FUZZ``): a few hundred examples per test, small sizes.
"""

from __future__ import annotations

import linecache
import math
import os
import traceback

import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import posenc

F64 = torch.float64
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
#: Relative tolerance per result dtype: float64 tight, float32 ~8 ulp, float16/bfloat16 ~2 ulp.
TOL = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
EPS64 = torch.finfo(F64).eps
EPS32 = torch.finfo(torch.float32).eps

FUZZ = settings(
    max_examples=250,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
FUZZ_LIGHT = settings(FUZZ, max_examples=300)
FUZZ_HEAVY = settings(FUZZ, max_examples=200)

# ---------------------------------------------------------------------------
# Where an exception comes from
# ---------------------------------------------------------------------------

POSENC_DIR = os.path.dirname(os.path.realpath(posenc.__file__))
POSENC_ERRORS = (ValueError, TypeError, IndexError)


def _raise_site(exc: BaseException) -> traceback.FrameSummary | None:
    frames = traceback.extract_tb(exc.__traceback__)
    return frames[-1] if frames else None


def raised_by_posenc(exc: BaseException) -> bool:
    """Whether ``exc`` is a ValueError/TypeError/IndexError from a ``raise`` statement in a file under posenc/.

    A torch operator failing inside posenc leaves posenc's frame last (C code has no
    frame), so the frame's file is not enough: its line must be posenc's own ``raise``.
    """
    if type(exc) not in POSENC_ERRORS:
        return False
    site = _raise_site(exc)
    if site is None:
        return False
    path = os.path.realpath(site.filename)
    if not path.startswith(POSENC_DIR + os.sep):
        return False
    line = site.line or linecache.getline(site.filename, site.lineno or 0)
    return line.strip().startswith("raise")


def _describe(exc: BaseException) -> str:
    site = _raise_site(exc)
    where = f"{site.filename}:{site.lineno}: {site.line}" if site else "?"
    return f"{type(exc).__name__}: {exc} (raised at {where})"


def call_or_posenc_error(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``; posenc's own ValueError/TypeError/IndexError pass through, anything else fails.

    Raises:
        AssertionError: The call raised from inside torch (or raised the wrong type).
    """
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if raised_by_posenc(exc):
            raise
        raise AssertionError(f"raw error, not one of posenc's own: {_describe(exc)}") from exc


def expect_posenc_error(fn, *args, **kwargs) -> None:
    """A wrong input: the call must raise posenc's own error, neither a raw one nor return."""
    try:
        result = call_or_posenc_error(fn, *args, **kwargs)
    except POSENC_ERRORS:
        return
    shown = result if not isinstance(result, torch.Tensor) else f"tensor {result.dtype} {tuple(result.shape)}"
    raise AssertionError(f"wrong input accepted silently: {fn.__qualname__} returned {shown!s:.200}")


# ---------------------------------------------------------------------------
# Comparison with the oracle
# ---------------------------------------------------------------------------


def assert_close(actual: torch.Tensor, expected: torch.Tensor, tol: torch.Tensor | float, what: str) -> None:
    """``|actual - expected| <= tol`` elementwise (infinities must match exactly), with the worst entry shown."""
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    a = actual.detach().to(F64)
    inf = expected.isinf()
    if inf.any():
        assert torch.equal(a[inf], expected[inf]), f"{what}: infinities differ"
    finite = ~inf
    err = (a - expected).abs()
    tol = torch.as_tensor(tol, dtype=F64).expand_as(expected)
    bad = finite & ~(err <= tol)  # NaN errors count as bad
    if bad.any():
        i = int(torch.nonzero(bad.flatten())[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {expected.numel()} entries off; first at flat index {i}: "
            f"got {a.flatten()[i].item()!r}, expected {expected.flatten()[i].item()!r}, "
            f"tolerance {tol.flatten()[i].item():.3g}"
        )


def angle_slack(angles: torch.Tensor, base: float) -> torch.Tensor:
    """Absolute error of sin/cos of ``angles`` formed in float64: the angle is only known to a few ulp of itself."""
    return 64 * EPS64 * (1 + angles.abs()) * (1 + math.log(base))


# ---------------------------------------------------------------------------
# Oracles (float64, from the papers)
# ---------------------------------------------------------------------------


def oracle_frequencies(dim: int, base: float) -> torch.Tensor:
    """``theta_i = base ** (-2i / d)``, i = 0 .. d/2 - 1 (Vaswani et al. 3.5; Su et al. 3.2.2)."""
    return torch.tensor([base ** (-(2 * i) / dim) for i in range(dim // 2)], dtype=F64)


def oracle_sinusoidal(p64: torch.Tensor, dim: int, base: float, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """PE(p, 2i) = sin(p w_i), PE(p, 2i+1) = cos(p w_i) (interleaved), or all sines then all cosines (concat)."""
    angles = p64.unsqueeze(-1) * oracle_frequencies(dim, base)  # [*, d/2]
    out = torch.empty(*p64.shape, dim, dtype=F64)
    if layout == "interleaved":
        out[..., 0::2], out[..., 1::2] = torch.sin(angles), torch.cos(angles)
    else:
        out[..., : dim // 2], out[..., dim // 2 :] = torch.sin(angles), torch.cos(angles)
    return out, pair_angles_to_channels(angle_slack(angles, base), "half" if layout == "concat" else layout)


def _mscale(scale: float, weight: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * weight * math.log(scale) + 1.0


def _yarn_bound_candidates(value: float, rounding) -> set:
    """``rounding(value)``, and the neighbour as well when ``value`` is within float noise of an integer."""
    if rounding is None:
        return {value}
    near = 1e-9 * max(1.0, abs(value))
    return {rounding(value), rounding(value - near), rounding(value + near)}


def _oracle_dynamic(dim, base, theta, scaling, seq_len):
    # NTK-aware base for the factor s * L / L0 - (s - 1), with L = max(seq_len, L0)
    factor, original = float(scaling["factor"]), scaling["original_max_position_embeddings"]
    length = original if seq_len is None else max(seq_len, original)
    new_base = base * ((factor * length / original) - (factor - 1)) ** (dim / (dim - 2))
    return [([new_base ** (-(2 * i) / dim) for i in range(dim // 2)], 1.0)]


def _oracle_llama3(dim, base, theta, scaling, seq_len):
    factor, original = float(scaling["factor"]), scaling["original_max_position_embeddings"]
    low_ff, high_ff = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    low_wavelen, high_wavelen = original / low_ff, original / high_ff
    out = []
    for t in theta:
        wavelen = 2 * math.pi / t
        if wavelen < high_wavelen:  # fast pairs kept
            out.append(t)
        elif wavelen > low_wavelen:  # slow pairs interpolated
            out.append(t / factor)
        else:
            smooth = (original / wavelen - low_ff) / (high_ff - low_ff)
            out.append((1 - smooth) * t / factor + smooth * t)
    return [(out, 1.0)]


def _yarn_attention_factor(scaling: dict) -> float:
    factor = float(scaling["factor"])
    if scaling.get("attention_factor") is not None:
        return float(scaling["attention_factor"])
    mscale, mscale_all_dim = scaling.get("mscale"), scaling.get("mscale_all_dim")
    if mscale and mscale_all_dim:
        return _mscale(factor, mscale) / _mscale(factor, mscale_all_dim)
    return _mscale(factor)


def _oracle_yarn(dim, base, theta, scaling, seq_len):
    factor, original = float(scaling["factor"]), scaling["original_max_position_embeddings"]
    beta_fast, beta_slow = scaling.get("beta_fast") or 32, scaling.get("beta_slow") or 1

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    truncate = scaling.get("truncate", True)
    lows = _yarn_bound_candidates(correction_dim(beta_fast), math.floor if truncate else None)
    highs = _yarn_bound_candidates(correction_dim(beta_slow), math.ceil if truncate else None)
    candidates = []
    for low, high in ((low, high) for low in lows for high in highs):
        low_c, high_c = max(low, 0), min(high, dim - 1)
        if low_c == high_c:
            high_c += 0.001
        ramps = [min(max((i - low_c) / (high_c - low_c), 0.0), 1.0) for i in range(len(theta))]  # 1: interpolate
        out = [(t / factor) * ramp + t * (1 - ramp) for t, ramp in zip(theta, ramps, strict=True)]
        candidates.append((out, _yarn_attention_factor(scaling)))
    return candidates


ORACLE_SCALINGS = {
    "default": lambda dim, base, theta, scaling, seq_len: [(theta, 1.0)],
    # Chen et al. 2023: position interpolation
    "linear": lambda dim, base, theta, scaling, seq_len: [([t / float(scaling["factor"]) for t in theta], 1.0)],
    "dynamic": _oracle_dynamic,
    "llama3": _oracle_llama3,
    "yarn": _oracle_yarn,
}


def oracle_inv_freq(dim: int, base: float, scaling: dict | None, seq_len: float | None) -> list[tuple[list, float]]:
    """Candidate ``(inv_freq, attention_factor)`` pairs per ``transformers.modeling_rope_utils``, in float64.

    Several candidates only for YaRN when a truncated correction bound sits within float
    noise of an integer (either rounding is then a faithful float64 evaluation).
    """
    theta = [base ** (-(2 * i) / dim) for i in range(dim // 2)]
    rope_type = (scaling or {}).get("rope_type", "default")
    return ORACLE_SCALINGS[rope_type](dim, base, theta, scaling, seq_len)


def oracle_rotate(x64: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str):
    """``x * cos + rotate(x) * sin`` with ``rotate((a, b)) = (-b, a)`` per pair (Su et al. 3.4.2), per channel.

    Returns the rotated tensor and, per channel, the magnitude ``|x cos| + |rotate(x) sin|`` the
    rounding error scales with.
    """
    dim = x64.shape[-1]
    idx = torch.arange(dim)
    if layout == "half":
        partner = torch.where(idx < dim // 2, idx + dim // 2, idx - dim // 2)
        sign = torch.where(idx < dim // 2, -1.0, 1.0).to(F64)
    else:
        partner = idx ^ 1
        sign = torch.where(idx % 2 == 0, -1.0, 1.0).to(F64)
    rotated = sign * x64[..., partner]
    out = x64 * cos + rotated * sin
    return out, (x64 * cos).abs() + (rotated * sin).abs()


def pair_angles_to_channels(values: torch.Tensor, layout: str) -> torch.Tensor:
    """``[..., d/2]`` per-pair values laid out on both channels of every pair: ``[..., d]``."""
    if layout == "half":
        return torch.cat([values, values], dim=-1)
    return torch.stack([values, values], dim=-1).flatten(-2)


def oracle_alibi_slopes(n: int) -> list[float]:
    """Press et al. 2022's ``get_slopes``: ``2^(-8k/n)`` for n a power of two, else the closest-power interleave."""

    def power_of_2(m: int) -> list[float]:
        return [2.0 ** (-8.0 * k / m) for k in range(1, m + 1)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + oracle_alibi_slopes(2 * closest)[0::2][: n - closest]


def oracle_t5_bucket(r: int, bidirectional: bool, num_buckets: int, max_distance: int) -> set[int]:
    """T5's bucket of relative position ``r = key - query`` (Raffel et al. 2020; Mesh TensorFlow's formula).

    Exact: the logarithmic bucket ``floor(log(d/e) / log(M/e) * (n - e))`` is decided with integer
    arithmetic. Within float32 noise of a bucket boundary either neighbour is accepted (the
    reference takes the logarithm in float32).
    """
    ret, n = 0, -r
    if bidirectional:
        num_buckets //= 2
        ret += num_buckets if n < 0 else 0
        n = abs(n)
    else:
        n = max(n, 0)
    exact = num_buckets // 2
    if n < exact:
        return {ret + n}
    span = num_buckets - exact
    # largest b with (M/e)^b <= (n/e)^span, i.e. M^b e^span <= n^span e^b; capped at the last bucket
    b = 0
    while b + 1 <= span and max_distance ** (b + 1) * exact**span <= n**span * exact ** (b + 1):
        b += 1
    result = {ret + min(exact + b, num_buckets - 1)}
    x = math.log(n / exact) / math.log(max_distance / exact) * span  # float64 only to find near-boundary cases
    window = 4e-7 * span * (1 + math.log(n / exact)) / math.log(max_distance / exact) + 1e-9 * x
    nearest = round(x)
    if abs(x - nearest) <= window:
        for cand in (nearest - 1, nearest):
            result.add(ret + min(exact + max(cand, 0), num_buckets - 1))
    return result


# ---------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------

seeds = st.integers(0, 2**31 - 1)
float_dtypes = st.sampled_from(FLOATS)
even_dims = st.integers(1, 32).map(lambda h: 2 * h)
bases = st.one_of(st.sampled_from([10000.0, 500000.0, 2.0, 1e6]), st.floats(1.01, 1e6))


def random_tensor(shape, dtype, seed: int, scale: float = 1.0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen, dtype=F64) * scale).to(dtype)


def random_ints(shape, dtype, low: int, high: int, seed: int) -> torch.Tensor:
    """Uniform ints in ``[low, high]`` clipped to ``dtype``'s range, always holding ``low`` and ``high`` if room."""
    info = torch.iinfo(dtype)
    low, high = max(low, info.min), min(high, info.max)
    gen = torch.Generator().manual_seed(seed)
    values = torch.randint(0, 2**62, shape, generator=gen, dtype=torch.int64)
    values = [low + int(v) % (high - low + 1) for v in values.flatten().tolist()]
    if len(values) >= 2:
        values[0], values[-1] = low, high
    return torch.tensor(values, dtype=torch.int64).reshape(shape).to(dtype)


@st.composite
def positions_st(draw, shapes=((), (1,), (5,), (3, 4), (2, 2, 3)), allow_negative=True, allow_list=True):
    """Positions as an int tensor of any int dtype, a float tensor, or Python numbers; and their float64 values."""
    shape = draw(st.sampled_from(shapes))
    seed = draw(seeds)
    kind = draw(st.sampled_from(["int", "float", "list"] if allow_list else ["int", "float"]))
    magnitude = draw(st.sampled_from([1, 10, 1000, 10**5, 10**7]))
    low = -magnitude if allow_negative else 0
    if kind == "int":
        dtype = draw(st.sampled_from(INTS))
        tensor = random_ints(shape, dtype, low, magnitude, seed)
        return tensor, tensor.to(F64)
    if kind == "float":
        dtype = draw(st.sampled_from(FLOATS))
        values = random_tensor(shape, F64, seed).mul(magnitude / 3).clamp(-magnitude, magnitude)
        if dtype == torch.float16:
            values = values.clamp(-60000, 60000)
        tensor = (values.abs() if not allow_negative else values).to(dtype)
        return tensor, tensor.to(F64)
    if draw(st.booleans()):
        values = random_ints(shape, torch.int64, low, magnitude, seed).tolist()
    else:
        values = random_tensor(shape, F64, seed).mul(magnitude / 3)
        values = (values.abs() if not allow_negative else values).tolist()
    return values, torch.tensor(values, dtype=F64)


factors = st.one_of(st.sampled_from([1.0, 2.0, 4.0, 8.0, 32.0]), st.floats(1.0, 64.0))
originals = st.sampled_from([1, 2, 16, 256, 2048, 8192]) | st.integers(1, 10000)


@st.composite
def llama3_scalings(draw):
    low = draw(st.floats(0.1, 4.0))
    return {
        "rope_type": "llama3",
        "factor": draw(factors),
        "original_max_position_embeddings": draw(originals),
        "low_freq_factor": low,
        "high_freq_factor": low + draw(st.floats(0.1, 8.0)),
    }


@st.composite
def yarn_scalings(draw):
    params = {"rope_type": "yarn", "factor": draw(factors), "original_max_position_embeddings": draw(originals)}
    if draw(st.booleans()):
        params["beta_slow"] = draw(st.floats(0.25, 4.0))
        params["beta_fast"] = params["beta_slow"] + draw(st.floats(0.5, 64.0))
    if draw(st.booleans()):
        params["truncate"] = draw(st.booleans())
    extra = draw(st.sampled_from(["none", "attention_factor", "mscale"]))
    if extra == "attention_factor":
        params["attention_factor"] = draw(st.floats(0.1, 4.0))
    elif extra == "mscale":
        params["mscale"] = draw(st.floats(0.1, 2.0))
        params["mscale_all_dim"] = draw(st.floats(0.1, 2.0))
    return params


def scalings(head_dim: int):
    """A valid ``rope_parameters``-style dict (or None) for ``head_dim``."""
    options = [
        st.none(),
        st.just({"rope_type": "default"}),
        factors.map(lambda f: {"rope_type": "linear", "factor": f}),
        llama3_scalings(),
        yarn_scalings(),
    ]
    if head_dim >= 4:  # factors in multiples of 1/4: f * L0 / L0 - (f - 1) is exactly 1 (others: FINDING 2)
        dynamic = st.tuples(st.integers(4, 256).map(lambda n: n / 4), originals)
        options.append(
            dynamic.map(lambda fo: {"rope_type": "dynamic", "factor": fo[0], "original_max_position_embeddings": fo[1]})
        )
    return st.one_of(options)


def dynamic_seq_len(scaling: dict | None, p64: torch.Tensor) -> float | None:
    if scaling is None or scaling.get("rope_type") != "dynamic" or p64.numel() == 0:
        return None
    return p64.max().item() + 1


def oracle_angles(p64: torch.Tensor, head_dim: int, base: float, scaling, seq_len=None):
    """Candidate ``(angles [*, d/2], attention_factor)`` of RoPE at positions ``p64``."""
    return [
        (p64.unsqueeze(-1) * torch.tensor(inv, dtype=F64), af)
        for inv, af in oracle_inv_freq(head_dim, base, scaling, seq_len)
    ]


def first_passing(candidates, check) -> None:
    """``check(candidate)`` must pass for at least one candidate; the first failure is re-raised otherwise."""
    failure = None
    for candidate in candidates:
        try:
            check(candidate)
            return
        except AssertionError as exc:
            failure = failure or exc
    raise failure


@st.composite
def t5_configs(draw):
    bidirectional = draw(st.booleans())
    num_buckets = draw(st.integers(4 if bidirectional else 2, 64))
    per_side = num_buckets // 2 if bidirectional else num_buckets
    exact = per_side // 2
    max_distance = draw(st.one_of(st.integers(exact + 1, exact + 8), st.integers(exact + 1, 1000), st.just(128)))
    return bidirectional, num_buckets, max(max_distance, exact + 1)


BAD_TENSOR_KINDS = st.sampled_from(["int", "int32", "bool", "complex"])


def bad_tensor(kind: str, shape, seed: int = 0) -> torch.Tensor:
    """A tensor of the wrong kind where floats are meant."""
    base = random_tensor(shape, F64, seed)
    return {
        "int": (base * 10).long(),
        "int32": (base * 10).int(),
        "bool": base > 0,
        "complex": torch.complex(base, base).to(torch.complex64),
    }[kind]
