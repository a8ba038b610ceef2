"""Property-based fuzz test of the public API against float64 oracles written from the papers' formulas.

Every expected value here is computed by this file, in float64, from the defining
formula (Vaswani et al. 2017; Su et al. 2021 and the ``transformers`` scalings;
Press et al. 2022; Raffel et al. 2020; Shaw et al. 2018), never by calling posenc.
Two failure classes are looked for:

* silently wrong: a result farther from the float64 oracle than the rounding of
  its dtype allows (float64 ~1e-12, float32 ~1e-6, float16/bfloat16 a few units
  in the last place, widened by the condition of ``sin``/``cos`` at large angles);
* raw errors: anything other than a ``ValueError``/``TypeError``/``IndexError``
  raised by a ``raise`` statement of posenc itself (:func:`call_or_posenc_error`).

Wrong inputs (integer/bool/complex tensors where floats are meant, wrong ranks,
mismatched shapes, negative or huge ints, NaN parameters) must give posenc's own
error: never a raw torch error, never a result.

Bounded and derandomized (``FUZZ``): a few hundred examples per test, small sizes.
"""

from __future__ import annotations

import linecache
import math
import os
import traceback

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
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


def test_call_or_posenc_error_tells_raw_errors_from_posenc_ones():
    with pytest.raises(ValueError, match="dim"):
        call_or_posenc_error(posenc.sinusoidal_encoding, [0], 3)
    with pytest.raises(AssertionError, match="raw error"):
        call_or_posenc_error(torch.zeros(2).view, 3)  # a torch RuntimeError
    with pytest.raises(AssertionError, match="raw error"):
        call_or_posenc_error(torch.as_tensor, "a")  # a TypeError, but torch's
    with pytest.raises(AssertionError, match="silently"):
        expect_posenc_error(posenc.sinusoidal_encoding, [0], 2)


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


# ---------------------------------------------------------------------------
# Sinusoidal encoding (Vaswani et al. 2017, section 3.5)
# ---------------------------------------------------------------------------


@FUZZ
@given(
    pos=positions_st(),
    dim=even_dims,
    base=bases,
    layout=st.sampled_from(posenc.SINUSOIDAL_LAYOUTS),
    dtype=float_dtypes,
    angle_dtype=st.sampled_from([None, torch.float64, torch.float32]),
)
def test_sinusoidal_encoding_matches_the_paper(pos, dim, base, layout, dtype, angle_dtype):
    positions, p64 = pos
    kwargs = {} if angle_dtype is None else {"angle_dtype": angle_dtype}
    out = call_or_posenc_error(
        posenc.sinusoidal_encoding, positions, dim, base=base, layout=layout, dtype=dtype, **kwargs
    )
    assert out.dtype == dtype
    expected, slack = oracle_sinusoidal(p64, dim, base, layout)
    if angle_dtype == torch.float32:  # the angle is only known to float32 precision
        angles = p64.abs().unsqueeze(-1) * oracle_frequencies(dim, base)
        slack = 8 * EPS32 * (1 + angles) * (1 + math.log(base))
        slack = pair_angles_to_channels(slack, "half" if layout == "concat" else layout)
    assert_close(out, expected, TOL[dtype] * (expected.abs() + 1) + slack, "sinusoidal_encoding")


@FUZZ_HEAVY
@given(
    dim=even_dims,
    base=bases,
    layout=st.sampled_from(posenc.SINUSOIDAL_LAYOUTS),
    dtype=float_dtypes,
    lead=st.sampled_from([(), (2,), (2, 3)]),
    seq_len=st.integers(1, 16),
    offsets=st.lists(
        st.one_of(st.integers(0, 600), st.integers(60_000, 70_000), st.integers(10**6, 10**7)), min_size=1, max_size=3
    ),
    initial_len=st.integers(0, 16),
    dropout=st.sampled_from([0.0, 0.5]),
    cast=st.sampled_from([None, torch.float64, torch.float16]),
    seed=seeds,
)
def test_sinusoidal_module_adds_the_encoding_at_the_offset(
    dim, base, layout, dtype, lead, seq_len, offsets, initial_len, dropout, cast, seed
):
    module = call_or_posenc_error(
        posenc.SinusoidalPositionalEncoding, dim, base=base, layout=layout, dropout=dropout, initial_len=initial_len
    )
    module.eval()  # dropout off
    if cast is not None:
        module = module.to(cast)
    x = random_tensor((*lead, seq_len, dim), dtype, seed)
    x64 = x.to(F64)
    for offset in offsets:
        out = call_or_posenc_error(module, x, offset=offset)
        assert out.dtype == dtype and out.shape == x.shape
        pe, slack = oracle_sinusoidal(torch.arange(offset, offset + seq_len, dtype=F64), dim, base, layout)
        expected = x64 + pe
        tol = TOL[dtype] * (expected.abs() + x64.abs() + 1) + slack
        assert_close(out, expected, tol, f"SinusoidalPositionalEncoding(offset={offset})")


# ---------------------------------------------------------------------------
# RoPE: frequencies, cos/sin, rotation, module (Su et al. 2021; transformers' scalings)
# ---------------------------------------------------------------------------


@FUZZ_LIGHT
@given(data=st.data(), head_dim=even_dims, base=bases, dtype=st.sampled_from([torch.float64, torch.float32]))
def test_rope_inv_freq_matches_the_transformers_formulas(data, head_dim, base, dtype):
    scaling = data.draw(scalings(head_dim))
    seq_len = None
    if scaling is not None and scaling["rope_type"] == "dynamic":
        seq_len = data.draw(st.one_of(st.none(), st.integers(1, 10**6), st.floats(0.5, 1e6)))
    inv_freq, attention_factor = call_or_posenc_error(
        posenc.rope_inv_freq, head_dim, base=base, scaling=scaling, seq_len=seq_len, dtype=dtype
    )
    assert inv_freq.dtype == dtype and inv_freq.shape == (head_dim // 2,)
    assert isinstance(attention_factor, float)

    def check(candidate):
        expected, expected_af = candidate
        expected = torch.tensor(expected, dtype=F64)
        assert_close(inv_freq, expected, TOL[dtype] * expected.abs() + 1e-300, f"rope_inv_freq({scaling})")
        assert math.isclose(attention_factor, expected_af, rel_tol=1e-12), (attention_factor, expected_af)

    first_passing(oracle_inv_freq(head_dim, base, scaling, seq_len), check)


@FUZZ
@given(
    data=st.data(),
    pos=positions_st(),
    head_dim=even_dims,
    base=bases,
    layout=st.sampled_from(posenc.ROPE_LAYOUTS),
    dtype=float_dtypes,
    angle_dtype=st.sampled_from([None, torch.float64, torch.float32]),
)
def test_rope_cos_sin_matches_the_paper(data, pos, head_dim, base, layout, dtype, angle_dtype):
    positions, p64 = pos
    scaling = data.draw(scalings(head_dim))
    if dynamic_seq_len(scaling, p64) is not None and dynamic_seq_len(scaling, p64) <= 0:
        positions, p64 = p64.abs(), p64.abs()  # all-negative positions with "dynamic": FINDING 3, tested below
    kwargs = {} if angle_dtype is None else {"angle_dtype": angle_dtype}
    cos, sin = call_or_posenc_error(
        posenc.rope_cos_sin, positions, head_dim, base=base, scaling=scaling, layout=layout, dtype=dtype, **kwargs
    )
    assert cos.dtype == sin.dtype == dtype
    assert cos.shape == sin.shape == (*p64.shape, head_dim)

    def check(candidate):
        angles, af = candidate
        if angle_dtype == torch.float32:
            slack = 8 * EPS32 * (1 + angles.abs()) * (1 + math.log(base)) * af
        else:
            slack = angle_slack(angles, base) * af
        slack = pair_angles_to_channels(slack, layout)
        for name, got, fn in (("cos", cos, torch.cos), ("sin", sin, torch.sin)):
            expected = pair_angles_to_channels(af * fn(angles), layout)
            assert_close(got, expected, TOL[dtype] * (expected.abs() + af) + slack, f"rope_cos_sin {name}")

    first_passing(oracle_angles(p64, head_dim, base, scaling, dynamic_seq_len(scaling, p64)), check)


@FUZZ
@given(
    head_dim=even_dims,
    layout=st.sampled_from(posenc.ROPE_LAYOUTS),
    x_dtype=float_dtypes,
    table_dtype=float_dtypes,
    x_lead=st.sampled_from([(), (2,), (2, 3)]),
    seq_len=st.integers(1, 8),
    table_shape=st.sampled_from(["[s,d]", "[d]", "full", "[1,s,d]"]),
    backend=st.sampled_from(["auto", "torch"]),
    seed=seeds,
)
def test_apply_rope_rotates_every_pair(
    head_dim, layout, x_dtype, table_dtype, x_lead, seq_len, table_shape, backend, seed
):
    x = random_tensor((*x_lead, seq_len, head_dim), x_dtype, seed, scale=2.0)
    shape = {
        "[s,d]": (seq_len, head_dim),
        "[d]": (head_dim,),
        "full": x.shape,
        "[1,s,d]": (1, seq_len, head_dim) if x_lead else (seq_len, head_dim),
    }[table_shape]
    # any cos and sin laid out per pair, not only unit rotations (the formula is per channel)
    pair_cos = random_tensor((*shape[:-1], head_dim // 2), F64, seed + 1)
    pair_sin = random_tensor((*shape[:-1], head_dim // 2), F64, seed + 2)
    cos = pair_angles_to_channels(pair_cos, layout).to(table_dtype)
    sin = pair_angles_to_channels(pair_sin, layout).to(table_dtype)
    out = call_or_posenc_error(posenc.apply_rope, x, cos, sin, layout=layout, backend=backend)
    assert out.dtype == x_dtype and out.shape == x.shape
    expected, magnitude = oracle_rotate(x.to(F64), cos.to(F64), sin.to(F64), layout)
    compute = torch.promote_types(x_dtype, table_dtype)
    tol = TOL[x_dtype] * expected.abs() + 4 * torch.finfo(compute).eps * magnitude + 1e-300
    assert_close(out, expected, tol, "apply_rope")


@FUZZ
@given(
    data=st.data(),
    pos=positions_st(shapes=((6,), (1, 6), (2, 6))),
    head_dim=even_dims,
    base=bases,
    layout=st.sampled_from(posenc.ROPE_LAYOUTS),
    dtype=float_dtypes,
    seed=seeds,
)
def test_rope_cos_sin_then_apply_rope_is_a_rotation_by_position_times_theta(
    data, pos, head_dim, base, layout, dtype, seed
):
    positions, p64 = pos
    scaling = data.draw(scalings(head_dim))
    if dynamic_seq_len(scaling, p64) is not None and dynamic_seq_len(scaling, p64) <= 0:
        positions, p64 = p64.abs(), p64.abs()  # FINDING 3, tested below
    x = random_tensor((2, 3, 6, head_dim) if p64.dim() == 1 else (p64.shape[0], 6, head_dim), dtype, seed)
    table_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    cos, sin = call_or_posenc_error(
        posenc.rope_cos_sin, positions, head_dim, base=base, scaling=scaling, layout=layout, dtype=table_dtype
    )
    out = call_or_posenc_error(posenc.apply_rope, x, cos, sin, layout=layout)

    def check(candidate):
        angles, af = candidate
        cos64 = pair_angles_to_channels(af * torch.cos(angles), layout)
        sin64 = pair_angles_to_channels(af * torch.sin(angles), layout)
        expected, magnitude = oracle_rotate(x.to(F64), cos64, sin64, layout)
        slack = pair_angles_to_channels(angle_slack(angles, base), layout) * 2 * x.to(F64).abs().amax() * af
        tol = TOL[dtype] * expected.abs() + 4 * TOL[table_dtype] * magnitude + slack + 1e-300
        assert_close(out, expected, tol, f"apply_rope(rope_cos_sin) {scaling}")

    first_passing(oracle_angles(p64, head_dim, base, scaling, dynamic_seq_len(scaling, p64)), check)


@st.composite
def rotary_calls(draw):
    """A RotaryEmbedding configuration, q and k shapes, and 1-3 calls (positions or offset)."""
    head_dim = draw(even_dims)
    q_shape_kind = draw(st.sampled_from(["[b,h,s,d]", "[b,s,d]", "[s,d]"]))
    seq_len, batch, heads, kv_heads = draw(st.integers(1, 8)), draw(st.integers(1, 2)), draw(st.integers(1, 4)), 1
    if q_shape_kind == "[b,h,s,d]":
        kv_heads = draw(st.integers(1, 4))
        q_shape, k_shape = (batch, heads, seq_len, head_dim), (batch, kv_heads, seq_len, head_dim)
    elif q_shape_kind == "[b,s,d]":
        q_shape = k_shape = (batch, seq_len, head_dim)
    else:
        q_shape = k_shape = (seq_len, head_dim)
    calls = []
    for _ in range(draw(st.integers(1, 3))):
        mode = draw(
            st.sampled_from(
                ["none", "offset", "1d", "2d", "list"] if len(q_shape) >= 3 else ["none", "offset", "1d", "list"]
            )
        )
        if mode == "none":
            calls.append(("none", None, 0))
        elif mode == "offset":
            offset = draw(st.one_of(st.integers(0, 600), st.integers(60_000, 70_000), st.integers(10**6, 10**9)))
            calls.append(("offset", None, offset))
        else:
            shape = (seq_len,) if mode in ("1d", "list") else (draw(st.sampled_from([1, batch])), seq_len)
            positions, p64 = draw(positions_st(shapes=(shape,), allow_list=False))
            calls.append((mode, positions.tolist() if mode == "list" else positions, 0))
    return head_dim, q_shape, k_shape, calls


@FUZZ_HEAVY
@given(
    data=st.data(),
    config=rotary_calls(),
    base=bases,
    layout=st.sampled_from(posenc.ROPE_LAYOUTS),
    dtype=float_dtypes,
    initial_len=st.integers(0, 16),
    inplace=st.booleans(),
    seed=seeds,
)
def test_rotary_embedding_rotates_q_and_k_by_their_positions(
    data, config, base, layout, dtype, initial_len, inplace, seed
):
    head_dim, q_shape, k_shape, calls = config
    scaling = data.draw(scalings(head_dim))
    module = call_or_posenc_error(
        posenc.RotaryEmbedding, head_dim, base=base, scaling=scaling, layout=layout, initial_len=initial_len
    )
    seq_len = q_shape[-2]
    for i, (mode, positions, offset) in enumerate(calls):
        q = random_tensor(q_shape, dtype, seed + i, scale=2.0)
        k = random_tensor(k_shape, dtype, seed + 100 + i, scale=2.0)
        q64, k64 = q.to(F64, copy=True), k.to(F64, copy=True)  # inplace=True overwrites q and k
        if positions is None:
            p64 = torch.arange(offset, offset + seq_len, dtype=F64)
            args = () if mode == "none" else (None, offset)
        else:
            p64 = torch.tensor(positions, dtype=F64) if mode == "list" else positions.to(F64)
            if dynamic_seq_len(scaling, p64) is not None and dynamic_seq_len(scaling, p64) <= 0:
                p64 = p64.abs()  # FINDING 3, tested below
                positions = p64.tolist() if mode == "list" else torch.as_tensor(positions).abs()
            args = (positions,)
        q_rot, k_rot = call_or_posenc_error(module, q, k, *args, inplace=inplace)
        assert q_rot.dtype == k_rot.dtype == dtype
        assert q_rot.shape == q_shape and k_rot.shape == k_shape
        if inplace:
            assert q_rot.data_ptr() == q.data_ptr() and k_rot.data_ptr() == k.data_ptr()

        def check(candidate, q_rot=q_rot, k_rot=k_rot, q64=q64, k64=k64, p64=p64, mode=mode, offset=offset):
            angles, af = candidate  # [s, d/2] or [b, s, d/2]
            if p64.dim() == 2 and len(q_shape) == 4:
                angles = angles.unsqueeze(1)  # one row per sequence, shared by the heads
            cos64 = pair_angles_to_channels(af * torch.cos(angles), layout)
            sin64 = pair_angles_to_channels(af * torch.sin(angles), layout)
            slack = pair_angles_to_channels(angle_slack(angles, base), layout) * af
            for name, got, x64 in (("q", q_rot, q64), ("k", k_rot, k64)):
                expected, magnitude = oracle_rotate(x64, cos64, sin64, layout)
                table_tol = TOL[torch.float64] if dtype == torch.float64 else 4 * EPS32
                tol = TOL[dtype] * expected.abs() + (table_tol + 2 * slack) * magnitude.clamp(min=af * 1e-3) + 1e-300
                assert_close(got, expected, tol, f"RotaryEmbedding {name} ({mode}, offset={offset}, {scaling})")

        first_passing(oracle_angles(p64, head_dim, base, scaling, dynamic_seq_len(scaling, p64)), check)


# ---------------------------------------------------------------------------
# ALiBi (Press, Smith and Lewis 2022)
# ---------------------------------------------------------------------------


@FUZZ_LIGHT
@given(
    num_heads=st.one_of(st.integers(1, 64), st.sampled_from([96, 100, 128, 255, 256, 257])),
    method=st.sampled_from(["exact", "geometric"]),
    dtype=float_dtypes,
)
def test_alibi_slopes_match_the_paper(num_heads, method, dtype):
    slopes = call_or_posenc_error(posenc.alibi_slopes, num_heads, method=method, dtype=dtype)
    assert slopes.dtype == dtype and slopes.shape == (num_heads,)
    expected = torch.tensor(oracle_alibi_slopes(num_heads), dtype=F64)
    if method == "exact":  # the exact value rounded once
        tol = TOL[dtype] * expected.abs()
    else:  # a float32 ratio raised to the k-th power: k roundings of the ratio, then the result's own
        n0 = 1 << (num_heads.bit_length() - 1)
        tol = (2 * n0 + 2) * EPS32 * expected.abs() + TOL[dtype] * expected.abs()
    assert_close(slopes, expected, tol, f"alibi_slopes({num_heads}, method={method!r})")


@FUZZ_LIGHT
@given(
    num_heads=st.integers(1, 8),
    q_len=st.integers(1, 32),
    k_len=st.integers(1, 32),
    causal=st.booleans(),
    offset=st.one_of(st.none(), st.integers(0, 64)),
    dtype=float_dtypes,
)
def test_alibi_bias_is_minus_slope_times_distance(num_heads, q_len, k_len, causal, offset, dtype):
    bias = call_or_posenc_error(posenc.alibi_bias, num_heads, q_len, k_len, causal=causal, offset=offset, dtype=dtype)
    assert bias.dtype == dtype and bias.shape == (num_heads, q_len, k_len)
    first = k_len - q_len if offset is None else offset  # bottom-right by default (flash-attention >= 2.1)
    slopes = torch.tensor(oracle_alibi_slopes(num_heads), dtype=F64).view(-1, 1, 1)
    i = torch.arange(q_len, dtype=F64).view(-1, 1) + first  # query positions
    j = torch.arange(k_len, dtype=F64).view(1, -1)  # key positions
    if causal:
        expected = (-slopes * (i - j)).masked_fill(j > i, float("-inf"))
    else:
        expected = -slopes * (i - j).abs()
    # documented: computed from the float32 slopes, so float64 results carry float32 slopes (rel 2**-24)
    tol = (TOL[dtype] + EPS32) * expected.abs().nan_to_num(posinf=0)
    assert_close(bias, expected, tol, "alibi_bias")


# ---------------------------------------------------------------------------
# T5 buckets (Raffel et al. 2020)
# ---------------------------------------------------------------------------


@st.composite
def t5_configs(draw):
    bidirectional = draw(st.booleans())
    num_buckets = draw(st.integers(4 if bidirectional else 2, 64))
    per_side = num_buckets // 2 if bidirectional else num_buckets
    exact = per_side // 2
    max_distance = draw(st.one_of(st.integers(exact + 1, exact + 8), st.integers(exact + 1, 1000), st.just(128)))
    return bidirectional, num_buckets, max(max_distance, exact + 1)


@FUZZ_LIGHT
@given(
    config=t5_configs(),
    dtype=st.sampled_from(INTS),
    values=st.lists(st.integers(-(2**63) + 1, 2**63 - 1), min_size=0, max_size=8),
    extent=st.integers(1, 200),
    as_list=st.booleans(),
    seed=seeds,
)
def test_t5_relative_position_bucket_matches_the_formula(config, dtype, values, extent, as_list, seed):
    bidirectional, num_buckets, max_distance = config
    info = torch.iinfo(dtype)
    # a [q, k] matrix of relative positions, plus drawn values (extremes included) clipped to the dtype
    grid = (torch.arange(8).view(1, -1) - torch.arange(6).view(-1, 1)) * extent // 4
    flat = grid.flatten().tolist() + [min(max(v, info.min if info.min < 0 else 0), info.max) for v in values]
    flat = [min(max(v, info.min), info.max) for v in flat]
    r = torch.tensor(flat, dtype=torch.int64).to(dtype)
    arg = r.tolist() if as_list else r
    buckets = call_or_posenc_error(
        posenc.t5_relative_position_bucket,
        arg,
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    assert buckets.dtype == torch.long and buckets.shape == r.shape
    for rel, got in zip(r.tolist(), buckets.tolist(), strict=True):
        want = oracle_t5_bucket(rel, bidirectional, num_buckets, max_distance)
        assert got in want, (
            f"t5 bucket of r={rel} (bidirectional={bidirectional}, num_buckets={num_buckets}, "
            f"max_distance={max_distance}): got {got}, expected {sorted(want)}"
        )


# ---------------------------------------------------------------------------
# Attention (Vaswani et al. 2017, eq. 1) and Shaw et al. 2018's relative terms
# ---------------------------------------------------------------------------


@st.composite
def attention_inputs(draw):
    lead = draw(st.sampled_from([(), (2,), (2, 3), (1, 4)]))
    q_len, k_len = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    d, dv = draw(st.integers(1, 16)), draw(st.integers(1, 16))
    dtype = draw(float_dtypes)
    kv_dtype = draw(st.sampled_from([dtype, dtype, torch.float32, torch.float64]))
    kv_lead = lead
    if len(lead) == 2 and draw(st.booleans()):
        kv_lead = (lead[0], 1)  # one key/value head for all query heads
    causal = draw(st.booleans()) and q_len <= k_len
    bias_kind = draw(st.sampled_from(["none", "float", "bool"]))
    bias_shapes = [(q_len, k_len), (1, k_len), (q_len, 1), (1, 1), (*lead, q_len, k_len)]
    if len(lead) == 2:
        bias_shapes += [(lead[1], q_len, k_len), (lead[0], 1, q_len, k_len)]
    bias_shape = draw(st.sampled_from(bias_shapes))
    bias_dtype = draw(float_dtypes)
    return lead, kv_lead, q_len, k_len, d, dv, dtype, kv_dtype, causal, bias_kind, bias_shape, bias_dtype


@FUZZ_HEAVY
@given(inputs=attention_inputs(), seed=seeds, scale=st.sampled_from([0.5, 1.0, 3.0]))
def test_scaled_dot_product_attention_matches_float64_softmax(inputs, seed, scale):
    lead, kv_lead, q_len, k_len, d, dv, dtype, kv_dtype, causal, bias_kind, bias_shape, bias_dtype = inputs
    q = random_tensor((*lead, q_len, d), dtype, seed, scale)
    k = random_tensor((*kv_lead, k_len, d), kv_dtype, seed + 1, scale)
    v = random_tensor((*kv_lead, k_len, dv), kv_dtype, seed + 2)
    gen = torch.Generator().manual_seed(seed + 3)
    bias = None
    masked = torch.zeros(bias_shape, dtype=torch.bool)
    if bias_shape[-1] == k_len and k_len > 1:  # mask some keys, never key 0 (no row is fully masked)
        masked = torch.rand(bias_shape, generator=gen) < 0.3
        masked[..., 0] = False
    if bias_kind == "float":
        bias = random_tensor(bias_shape, bias_dtype, seed + 4, 2.0).masked_fill(masked, float("-inf"))
    elif bias_kind == "bool":
        bias = ~masked
    out, weights = call_or_posenc_error(posenc.scaled_dot_product_attention, q, k, v, bias=bias, causal=causal)

    # the oracle: float64 softmax(q k^T / sqrt(d) + bias) v, causal keys j <= i + (k_len - q_len)
    q64, k64, v64 = q.to(F64), k.to(F64), v.to(F64)
    scores = q64 @ k64.transpose(-2, -1) / math.sqrt(d)
    if bias_kind == "float":
        scores = scores + bias.to(F64)
    elif bias_kind == "bool":
        scores = scores.masked_fill(~bias, float("-inf"))
    if causal:
        i = torch.arange(q_len).view(-1, 1) + (k_len - q_len)
        scores = scores.masked_fill(torch.arange(k_len).view(1, -1) > i, float("-inf"))
    top = scores.amax(-1, keepdim=True)
    e = torch.exp(scores - top)
    expected_w = e / e.sum(-1, keepdim=True)
    expected_out = expected_w @ v64
    assert out.dtype == weights.dtype == dtype
    assert out.shape == expected_out.shape and weights.shape == expected_w.shape

    compute_eps = EPS64 if dtype == torch.float64 else EPS32
    if dtype != torch.float64 and kv_dtype == torch.float64:
        compute_eps = EPS32
    score_mag = 1 + scores.nan_to_num(neginf=0).abs().amax().item() + (q64.abs().amax() * k64.abs().amax()).item() * d
    if bias_kind == "float" and bias_dtype == torch.float64 and dtype != torch.float64:
        score_mag += bias.to(F64).nan_to_num(neginf=0).abs().amax().item()
    err_w = 16 * compute_eps * score_mag
    assert_close(weights, expected_w, TOL[dtype] * expected_w + err_w, "attention weights")
    vmax = v64.abs().amax().item() if v64.numel() else 0.0
    assert_close(out, expected_out, TOL[dtype] * (expected_out.abs() + vmax) + err_w * vmax * k_len, "attention out")


@st.composite
def relative_inputs(draw):
    q_len, k_len, d = draw(st.integers(1, 8)), draw(st.integers(1, 8)), draw(st.integers(1, 16))
    q_lead, r_lead = draw(
        st.sampled_from([((), ()), ((2,), ()), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2,)), ((2, 3), (2, 3))])
    )
    return q_len, k_len, d, q_lead, r_lead, draw(float_dtypes), draw(st.sampled_from(["shift", "materialize"]))


def _pair_rows(q_len: int, k_len: int) -> torch.Tensor:
    """Row ``j - i + q_len - 1`` of the relative table for query ``i``, key ``j`` (Shaw et al. 2018)."""
    return torch.tensor([[j - i + q_len - 1 for j in range(k_len)] for i in range(q_len)])


@FUZZ
@given(inputs=relative_inputs(), seed=seeds)
def test_relative_scores_is_q_dot_the_pair_embedding(inputs, seed):
    q_len, k_len, d, q_lead, r_lead, dtype, method = inputs
    q = random_tensor((*q_lead, q_len, d), dtype, seed)
    rel = random_tensor((*r_lead, q_len + k_len - 1, d), dtype, seed + 1)
    out = call_or_posenc_error(posenc.relative_scores, q, rel, method=method)
    emb = rel.to(F64)[..., _pair_rows(q_len, k_len), :]  # [..., q, k, d]
    products = q.to(F64).unsqueeze(-2) * emb  # [..., q, k, d]
    expected = products.sum(-1)
    assert out.dtype == dtype
    tol = TOL[dtype] * expected.abs() + (d + 2) * torch.finfo(dtype).eps * products.abs().sum(-1) + 1e-300
    assert_close(out, expected, tol, f"relative_scores({method})")


@FUZZ
@given(inputs=relative_inputs(), seed=seeds)
def test_relative_values_is_the_weighted_sum_of_pair_embeddings(inputs, seed):
    q_len, k_len, d, w_lead, r_lead, dtype, method = inputs
    weights = random_tensor((*w_lead, q_len, k_len), dtype, seed).abs()
    rel = random_tensor((*r_lead, q_len + k_len - 1, d), dtype, seed + 1)
    out = call_or_posenc_error(posenc.relative_values, weights, rel, method=method)
    emb = rel.to(F64)[..., _pair_rows(q_len, k_len), :]  # [..., q, k, d]
    products = weights.to(F64).unsqueeze(-1) * emb  # [..., q, k, d]
    expected = products.sum(-2)
    assert out.dtype == dtype
    tol = TOL[dtype] * expected.abs() + (k_len + 2) * torch.finfo(dtype).eps * products.abs().sum(-2) + 1e-300
    assert_close(out, expected, tol, f"relative_values({method})")


# ---------------------------------------------------------------------------
# Wrong inputs: posenc's own ValueError/TypeError/IndexError, never a raw error or a result
# ---------------------------------------------------------------------------

NOT_FLOAT_DTYPES = [torch.int64, torch.int32, torch.uint8, torch.bool, torch.complex64, "float32", None, float]
BAD_BASES = [float("nan"), float("inf"), -float("inf"), 1.0, 0.5, 0.0, -3.0, "10000", True, None, 1e4 + 0j]
BAD_ROPE_BASES = [b for b in BAD_BASES if b is not None]  # None: scaling["rope_theta"] or 10000
BAD_DIMS = [0, -2, 3, 7, 2.0, True, "4", None]
BAD_LENGTHS = [0, -1, 2.0, True, "3", None]
BAD_INT_LENGTHS = [0, -1, 2.0, True]  # str/None lengths: FINDING 8, tested below
BAD_INITIAL_LENS = [-1, 2.5, True, None]
BAD_OFFSETS = [-1, -(2**70), 1.5, True, "2", float("nan")]
BAD_LAYOUT_TEXT = st.text(max_size=12).filter(lambda s: s not in posenc.PAIR_LAYOUTS)
BAD_TENSOR_KINDS = st.sampled_from(["int", "int32", "bool", "complex"])


YARN_64 = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64}
LLAMA3_64 = {
    "rope_type": "llama3",
    "factor": 2.0,
    "original_max_position_embeddings": 64,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
}
GOOD_SCALINGS = [
    {"rope_type": "linear", "factor": 2.0},
    {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64},
    YARN_64,
    LLAMA3_64,
]
BAD_FACTORS = [float("nan"), float("inf"), 0.5, 0.0, -2.0, "2", True, None, 2j]
BAD_ORIGINALS = [0, -5, float("nan"), float("inf"), "64", None, True]
#: ``rope_parameters`` dicts (and other objects) that must be rejected.
bad_scalings = st.one_of(
    st.text(max_size=8).filter(lambda s: s not in posenc.ROPE_TYPES).map(lambda t: {"rope_type": t}),
    st.sampled_from([["linear", 2.0], "linear", 3, (("rope_type", "linear"),)]),
    st.sampled_from(["fator", "foo", "beta_fast"]).map(lambda key: {"rope_type": "linear", "factor": 2.0, key: 1.0}),
    st.sampled_from(  # a required key missing
        [
            {"rope_type": "linear"},
            {"rope_type": "dynamic", "factor": 2.0},
            {"rope_type": "yarn", "factor": 2.0},
            {"rope_type": "llama3", "factor": 2.0, "original_max_position_embeddings": 64},
        ]
    ),
    st.tuples(st.sampled_from(GOOD_SCALINGS), st.sampled_from(BAD_FACTORS)).map(lambda p: {**p[0], "factor": p[1]}),
    st.tuples(st.sampled_from(GOOD_SCALINGS[1:3]), st.sampled_from(BAD_ORIGINALS)).map(
        lambda p: {**p[0], "original_max_position_embeddings": p[1]}
    ),
    st.floats(0.1, 8.0).flatmap(  # llama3: high_freq_factor must be >= low_freq_factor
        lambda low: st.sampled_from([low / 2, float("nan")]).map(
            lambda high: {**LLAMA3_64, "low_freq_factor": low, "high_freq_factor": high}
        )
    ),
    st.sampled_from(
        [
            {"beta_fast": 1.0, "beta_slow": 2.0},
            {"beta_fast": float("nan")},
            {"beta_slow": -1.0},
            {"attention_factor": float("inf")},
            {"mscale": "1"},
            {"truncate": "yes"},
            {"truncate": 1},
            {"truncate": 0.0},
        ]
    ).map(lambda extra: {**YARN_64, **extra}),
    st.sampled_from(GOOD_SCALINGS).map(lambda p: {**p, "rope_theta": 5000.0}),  # disagrees with base=10000
)


def bad_tensor(kind: str, shape, seed: int = 0) -> torch.Tensor:
    """A tensor of the wrong kind where floats are meant."""
    base = random_tensor(shape, F64, seed)
    return {
        "int": (base * 10).long(),
        "int32": (base * 10).int(),
        "bool": base > 0,
        "complex": torch.complex(base, base).to(torch.complex64),
    }[kind]


def bad_tensors(shape, kinds=BAD_TENSOR_KINDS):
    return kinds.map(lambda kind: bad_tensor(kind, shape))


def one_bad(data, good: dict, bad: dict) -> dict:
    """``good`` with one argument, drawn, replaced by one of its drawn ``bad`` values."""
    name = data.draw(st.sampled_from(sorted(bad)), label="argument")
    return {**good, name: data.draw(bad[name], label=name)}


def expect_posenc_error_kw(fn, kwargs: dict, positional: tuple[str, ...]) -> None:
    """:func:`expect_posenc_error` with the arguments named in ``positional`` passed by position."""
    args = [kwargs[name] for name in positional]
    expect_posenc_error(fn, *args, **{k: v for k, v in kwargs.items() if k not in positional})


@FUZZ_LIGHT
@given(data=st.data())
def test_wrong_inputs_to_sinusoidal_encoding_raise(data):
    good = {"positions": torch.arange(4), "dim": 8, "base": 10000.0, "layout": "interleaved", "dtype": torch.float32}
    bad = {
        "positions": st.one_of(bad_tensors((3,), st.sampled_from(["bool", "complex"])), st.just(torch.tensor(True))),
        "dim": st.sampled_from(BAD_DIMS),
        "base": st.sampled_from(BAD_BASES),
        "layout": st.one_of(BAD_LAYOUT_TEXT, st.sampled_from(["half", None, 0])),
        "dtype": st.sampled_from(NOT_FLOAT_DTYPES),
        "angle_dtype": st.sampled_from([torch.float16, torch.bfloat16, torch.int32, None, "float64"]),
    }
    expect_posenc_error_kw(posenc.sinusoidal_encoding, one_bad(data, good, bad), ("positions", "dim"))


@FUZZ_LIGHT
@given(data=st.data())
def test_wrong_inputs_to_sinusoidal_module_raise(data):
    good = {"dim": 8, "base": 10000.0, "layout": "interleaved", "initial_len": 4, "dropout": 0.0}
    bad = {
        "dim": st.sampled_from(BAD_DIMS),
        "base": st.sampled_from(BAD_BASES),
        "layout": st.one_of(BAD_LAYOUT_TEXT, st.just("half")),
        "initial_len": st.sampled_from(BAD_INITIAL_LENS),
        "dropout": st.sampled_from([1.0, -0.1, float("nan"), 2, True, "0.1"]),
    }
    expect_posenc_error_kw(posenc.SinusoidalPositionalEncoding, one_bad(data, good, bad), ("dim",))
    module = posenc.SinusoidalPositionalEncoding(8, initial_len=4)
    bad = {
        "x": st.one_of(
            bad_tensors((2, 3, 8)), st.sampled_from([(8,), (3, 7), (2, 3, 9), (2, 3, 4), ()]).map(torch.zeros)
        ),
        "offset": st.sampled_from(BAD_OFFSETS),
    }
    expect_posenc_error_kw(module, one_bad(data, {"x": torch.zeros(2, 3, 8), "offset": 0}, bad), ("x",))


@FUZZ_LIGHT
@given(data=st.data())
def test_wrong_inputs_to_rope_frequencies_and_tables_raise(data):
    good = {"head_dim": 8, "base": 10000.0, "scaling": None, "dtype": torch.float32}
    bad = {
        "head_dim": st.sampled_from(BAD_DIMS),
        "base": st.sampled_from(BAD_ROPE_BASES),
        "scaling": bad_scalings,
        "dtype": st.sampled_from(NOT_FLOAT_DTYPES),
    }
    kwargs = one_bad(data, good, bad)
    expect_posenc_error_kw(posenc.rope_inv_freq, kwargs, ("head_dim",))
    bad.update(
        positions=bad_tensors((5,), st.sampled_from(["bool", "complex"])),
        layout=st.one_of(BAD_LAYOUT_TEXT, st.sampled_from(["concat", None])),
        angle_dtype=st.sampled_from([torch.float16, torch.bfloat16, torch.int64, None]),
    )
    kwargs = one_bad(data, {**good, "positions": torch.arange(5)}, bad)
    expect_posenc_error_kw(posenc.rope_cos_sin, kwargs, ("positions", "head_dim"))
    dynamic = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16}
    # (0 and negative lengths are valid: every position negative, the frequencies unscaled, as in transformers)
    seq_len = data.draw(st.sampled_from([float("nan"), -float("inf"), float("inf"), "16", None]))
    if seq_len is None:
        return
    expect_posenc_error(posenc.rope_inv_freq, 8, scaling=dynamic, seq_len=seq_len)


@FUZZ_LIGHT
@given(data=st.data(), layout=st.sampled_from(posenc.ROPE_LAYOUTS))
def test_wrong_inputs_to_apply_rope_raise(data, layout):
    good = {"x": torch.randn(2, 5, 8), "cos": torch.ones(5, 8), "sin": torch.zeros(5, 8), "layout": layout}
    table_shapes = st.sampled_from([(5, 6), (4, 8), (3, 2, 5, 8), (5, 16), (), (5, 1)])
    bad = {
        "x": st.one_of(
            bad_tensors((2, 5, 8)),
            st.sampled_from([(), (2, 5, 7), (2, 5, 6), (2, 4, 8), (5, 0)]).map(torch.randn),
            st.just(torch.randn(2, 5, 8).tolist()),
        ),
        "cos": st.one_of(bad_tensors((5, 8)), table_shapes.map(torch.ones), st.just(torch.ones(5, 8).tolist())),
        "sin": st.one_of(bad_tensors((5, 8)), st.sampled_from([(1, 8), (5, 6), (8,)]).map(torch.zeros)),
        "layout": st.one_of(BAD_LAYOUT_TEXT, st.just("concat")),
        "backend": st.one_of(st.text(max_size=8).filter(lambda s: s not in posenc.ROPE_BACKENDS), st.none()),
    }
    expect_posenc_error_kw(posenc.apply_rope, one_bad(data, good, bad), ("x", "cos", "sin"))


@FUZZ_LIGHT
@given(data=st.data())
def test_wrong_inputs_to_rotary_embedding_raise(data):
    good = {"head_dim": 8, "base": 10000.0, "layout": "half", "initial_len": 4, "backend": "auto", "scaling": None}
    bad = {
        "head_dim": st.sampled_from(BAD_DIMS),
        "base": st.sampled_from(BAD_ROPE_BASES),
        "layout": st.one_of(BAD_LAYOUT_TEXT, st.just("concat")),
        "initial_len": st.sampled_from(BAD_INITIAL_LENS),
        "backend": st.sampled_from(["cuda", "", None, "TORCH"]),
        "scaling": bad_scalings,
    }
    expect_posenc_error_kw(posenc.RotaryEmbedding, one_bad(data, good, bad), ("head_dim",))
    module = posenc.RotaryEmbedding(8, initial_len=4)
    q, k = torch.randn(2, 3, 5, 8), torch.randn(2, 1, 5, 8)
    cases = {
        "q": st.one_of(bad_tensors(q.shape), st.sampled_from([(8,), (2, 3, 5, 6), (2, 3, 5, 16), ()]).map(torch.randn)),
        "k": st.one_of(bad_tensors(k.shape), st.sampled_from([4, 6, 0]).map(lambda n: torch.randn(2, 1, n, 8))),
        "positions": st.one_of(
            bad_tensors((5,), st.sampled_from(["bool", "complex"])),
            st.sampled_from([4, 6, 0, 10]).map(torch.arange),
            st.just(torch.arange(5).view(1, 1, 5)),
            st.sampled_from([3, 4]).map(lambda rows: torch.arange(5).repeat(rows, 1)),  # rows != batch
        ),
        "offset": st.sampled_from(BAD_OFFSETS),
        "both": st.integers(1, 10),
        "inplace_leaf": st.just(True),
    }
    kwargs = one_bad(data, {"q": q, "k": k}, cases)
    if "both" in kwargs:
        kwargs.update(positions=torch.arange(5), offset=kwargs.pop("both"))
    if kwargs.pop("inplace_leaf", False):
        kwargs.update(q=q.clone().requires_grad_(), inplace=True)
    expect_posenc_error_kw(module, kwargs, ("q", "k"))


@FUZZ_LIGHT
@given(data=st.data())
def test_wrong_inputs_to_alibi_raise(data):
    lengths = st.sampled_from(BAD_INT_LENGTHS)
    good = {"num_heads": 4, "method": "exact", "dtype": torch.float32}
    bad = {
        "num_heads": st.sampled_from(BAD_LENGTHS),
        "method": st.one_of(st.text(max_size=8).filter(lambda s: s not in ("exact", "geometric")), st.none()),
        "dtype": st.sampled_from(NOT_FLOAT_DTYPES),
    }
    expect_posenc_error_kw(posenc.alibi_slopes, one_bad(data, good, bad), ("num_heads",))
    good = {"num_heads": 2, "q_len": 3, "k_len": 4, "offset": None, "dtype": torch.float32, "causal": True}
    bad = {
        "num_heads": lengths,
        "q_len": lengths,
        "k_len": lengths,
        "offset": st.sampled_from(BAD_OFFSETS),
        "dtype": st.sampled_from(NOT_FLOAT_DTYPES),
    }
    expect_posenc_error_kw(posenc.alibi_bias, one_bad(data, good, bad), ("num_heads", "q_len", "k_len"))
    expect_posenc_error(posenc.ALiBiBias, data.draw(st.sampled_from(BAD_LENGTHS)))
    kwargs = one_bad(data, {"q_len": 3, "k_len": 4, "offset": None}, {"q_len": lengths, "k_len": lengths})
    expect_posenc_error_kw(posenc.ALiBiBias(2), kwargs, ("q_len", "k_len"))


@FUZZ_LIGHT
@given(data=st.data(), bidirectional=st.booleans())
def test_wrong_inputs_to_t5_buckets_raise(data, bidirectional):
    good = {"relative_position": torch.arange(-5, 5), "bidirectional": bidirectional, "num_buckets": 16}
    good["max_distance"] = 128
    non_integer = [torch.arange(-5, 5).float(), torch.arange(-5, 5).half(), torch.arange(3) > 0]
    bad = {
        "relative_position": st.sampled_from(
            [*non_integer, torch.ones(3, dtype=torch.complex64), [0.5, 1.0], [True, False]]
        ),
        "num_buckets": st.sampled_from([0, -4, 1, 3 if bidirectional else 1, 32.0, True, None]),
        # 16 buckets leave 4 (bidirectional) or 8 exact ones: max_distance must exceed them
        "max_distance": st.sampled_from([0, -1, 4 if bidirectional else 8, 128.0, None]),
    }
    expect_posenc_error_kw(posenc.t5_relative_position_bucket, one_bad(data, good, bad), ("relative_position",))
    expect_posenc_error(posenc.T5RelativeBias, data.draw(st.sampled_from(BAD_LENGTHS)))
    kwargs = one_bad(data, {"q_len": 3, "k_len": 4}, {"q_len": st.sampled_from(BAD_INT_LENGTHS)})
    expect_posenc_error_kw(posenc.T5RelativeBias(2), kwargs, ("q_len", "k_len"))


@FUZZ_LIGHT
@given(data=st.data())
def test_wrong_inputs_to_attention_raise(data):
    good = {"q": torch.randn(2, 3, 4, 8), "k": torch.randn(2, 3, 5, 8), "v": torch.randn(2, 3, 5, 6)}
    bad = {
        "q": st.one_of(bad_tensors((2, 3, 4, 8)), st.sampled_from([(8,), ()]).map(torch.randn)),
        "k": st.one_of(
            bad_tensors((2, 3, 5, 8)),
            st.sampled_from([(2, 3, 5, 7), (2, 3, 5, 9), (2, 2, 5, 8), (4, 3, 5, 8)]).map(torch.randn),
        ),
        "v": st.one_of(bad_tensors((2, 3, 5, 6)), st.sampled_from([(2, 3, 4, 6), (2, 3, 1, 6)]).map(torch.randn)),
        "bias": st.one_of(
            st.sampled_from([torch.long, torch.int8, torch.complex64]).map(lambda dt: torch.zeros(4, 5, dtype=dt)),
            st.sampled_from([(5, 4), (4, 6), (3, 4, 5, 1, 1), (5,), (2, 2, 4, 5)]).map(torch.zeros),
        ),
        "causal_longer_q": st.just(True),
    }
    kwargs = one_bad(data, good, bad)
    if kwargs.pop("causal_longer_q", False):
        kwargs.update(q=torch.randn(2, 3, 6, 8), causal=True)
    expect_posenc_error_kw(posenc.scaled_dot_product_attention, kwargs, ("q", "k", "v"))


@FUZZ_LIGHT
@given(data=st.data(), method=st.sampled_from(["shift", "materialize"]))
def test_wrong_inputs_to_relative_terms_raise(data, method):
    float_kinds = st.sampled_from([torch.float64, torch.float16])
    good = {"q": torch.randn(2, 4, 8), "rel_emb": torch.randn(2, 8, 8), "method": method}
    bad = {
        "q": st.sampled_from([torch.randn(8), torch.randn(2, 0, 8)]),
        "rel_emb": st.one_of(
            st.sampled_from([(2, 8, 7), (2, 8, 9), (2, 3, 8), (2, 0, 8), (3, 8, 8), (8,)]).map(torch.randn),
            float_kinds.map(lambda dt: torch.randn(2, 8, 8, dtype=dt)),  # dtype differs from q's
        ),
        "method": st.one_of(st.text(max_size=8).filter(lambda s: s not in ("shift", "materialize")), st.none()),
    }
    expect_posenc_error_kw(posenc.relative_scores, one_bad(data, good, bad), ("q", "rel_emb"))
    good = {"weights": torch.rand(2, 4, 5), "rel_emb": torch.randn(2, 8, 8), "method": method}
    bad = {
        "weights": st.sampled_from([torch.rand(5), torch.rand(2, 0, 5), torch.rand(2, 4, 0)]),
        "rel_emb": st.one_of(
            st.sampled_from([(2, 7, 8), (2, 9, 8), (3, 8, 8), (8,)]).map(torch.randn),
            float_kinds.map(lambda dt: torch.randn(2, 8, 8, dtype=dt)),
        ),
        "method": bad["method"],
    }
    expect_posenc_error_kw(posenc.relative_values, one_bad(data, good, bad), ("weights", "rel_emb"))
    # bool, int and complex tables: FINDING 6, tested below


# ---------------------------------------------------------------------------
# Findings: defects this fuzz test found in posenc (fixed), each kept as a regression test
# (described with reproductions in the maintainers' findings list)
# ---------------------------------------------------------------------------

FUZZ_FINDING = settings(FUZZ, max_examples=100)


@FUZZ_FINDING
@given(config=t5_configs(), values=st.lists(st.integers(-(2**63), -(2**62)), min_size=1, max_size=4))
@example(config=(True, 32, 128), values=[-(2**63)])
def test_finding_t5_bucket_of_the_int64_minimum(config, values):
    bidirectional, num_buckets, max_distance = config
    r = torch.tensor([*values, -(2**63)], dtype=torch.int64)
    buckets = call_or_posenc_error(
        posenc.t5_relative_position_bucket,
        r,
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    )
    for rel, got in zip(r.tolist(), buckets.tolist(), strict=True):
        assert got in oracle_t5_bucket(rel, bidirectional, num_buckets, max_distance), (rel, got)


@FUZZ_FINDING
@given(
    head_dim=st.integers(2, 32).map(lambda h: 2 * h),
    base=bases,
    factor=st.floats(1.0, 64.0),
    original=st.integers(1, 10000),
    length=st.integers(1, 10000),
)
@example(head_dim=8, base=10000.0, factor=28.1, original=9498, length=9498)
def test_finding_dynamic_rope_with_any_factor(head_dim, base, factor, original, length):
    scaling = {"rope_type": "dynamic", "factor": factor, "original_max_position_embeddings": original}
    seq_len = min(length, original)  # short: the unscaled frequencies
    inv_freq, _ = call_or_posenc_error(posenc.rope_inv_freq, head_dim, base=base, scaling=scaling, seq_len=seq_len)
    (expected, _), *_ = oracle_inv_freq(head_dim, base, scaling, seq_len)
    expected = torch.tensor(expected, dtype=F64)
    assert_close(inv_freq, expected, 1e-12 * expected, "rope_inv_freq(dynamic)")
    module = call_or_posenc_error(posenc.RotaryEmbedding, head_dim, base=base, scaling=scaling, initial_len=0)
    q = torch.ones(1, head_dim, dtype=F64)
    call_or_posenc_error(module, q, q)


@FUZZ_FINDING
@given(
    head_dim=st.integers(2, 32).map(lambda h: 2 * h),
    layout=st.sampled_from(posenc.ROPE_LAYOUTS),
    factor=st.integers(4, 64).map(lambda n: n / 4),
    original=st.integers(1, 4096),
    last=st.integers(-1000, -1),
    seq_len=st.integers(1, 8),
)
@example(head_dim=8, layout="half", factor=2.0, original=4, last=-1, seq_len=2)
def test_finding_dynamic_rope_with_negative_positions(head_dim, layout, factor, original, last, seq_len):
    scaling = {"rope_type": "dynamic", "factor": factor, "original_max_position_embeddings": original}
    positions = torch.arange(last - seq_len + 1, last + 1)
    cos, sin = call_or_posenc_error(posenc.rope_cos_sin, positions, head_dim, scaling=scaling, layout=layout)
    (angles, _), *_ = oracle_angles(positions.to(F64), head_dim, 10000.0, scaling, last + 1)
    assert_close(cos, pair_angles_to_channels(torch.cos(angles), layout), 1e-6, "rope_cos_sin cos")
    assert_close(sin, pair_angles_to_channels(torch.sin(angles), layout), 1e-6, "rope_cos_sin sin")
    module = call_or_posenc_error(posenc.RotaryEmbedding, head_dim, scaling=scaling, layout=layout)
    q = torch.ones(seq_len, head_dim)
    call_or_posenc_error(module, q, q, positions)


@FUZZ_FINDING
@given(
    offset=st.one_of(st.integers(2**63 - 8, 2**63 + 8), st.integers(2**63, 2**80)),
    module_kind=st.sampled_from(["rotary", "sinusoidal"]),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
@example(offset=2**63 - 2, module_kind="rotary", dtype=torch.float32)
def test_finding_offsets_beyond_int64(offset, module_kind, dtype):
    x = torch.ones(2, 3, 8, dtype=dtype)
    try:  # posenc's own error (the positions must fit in int64) or a result, never torch's error
        if module_kind == "rotary":
            out = call_or_posenc_error(posenc.RotaryEmbedding(8, initial_len=4), x, x, offset=offset)[0]
        else:
            out = call_or_posenc_error(posenc.SinusoidalPositionalEncoding(8, initial_len=4), x, offset=offset)
    except ValueError as err:
        assert "must fit in int64" in str(err)
        return
    assert out.shape == x.shape and out.dtype == dtype


NOT_POSITIONS = ["12", "a", None, [1j], [[1, 2], [3]], [[0], 1], object(), {0: 1}]
#: Python ints outside int64: positions all the same (float64 angles), or posenc's own error.
HUGE_INT_POSITIONS = [[2**63], [-(2**63) - 1], [2**64, 0], [0, 10**30]]


@FUZZ_FINDING
@given(
    positions=st.one_of(
        st.sampled_from(NOT_POSITIONS + HUGE_INT_POSITIONS), st.lists(st.booleans(), min_size=1, max_size=3)
    ),
    function=st.sampled_from(["sinusoidal_encoding", "rope_cos_sin", "RotaryEmbedding", "t5"]),
)
@example(positions="12", function="sinusoidal_encoding")
@example(positions=[True, False], function="sinusoidal_encoding")
@example(positions=[2**63], function="rope_cos_sin")
@example(positions=[[1, 2], [3]], function="t5")
def test_finding_positions_that_are_not_numbers(positions, function):
    call = {
        "sinusoidal_encoding": lambda: posenc.sinusoidal_encoding(positions, 8),
        "rope_cos_sin": lambda: posenc.rope_cos_sin(positions, 8),
        "RotaryEmbedding": lambda: posenc.RotaryEmbedding(8)(q, q, positions),
        "t5": lambda: posenc.t5_relative_position_bucket(positions),
    }[function]
    q = torch.ones(len(positions) if isinstance(positions, list) else 2, 8)
    if positions is None and function == "RotaryEmbedding":
        return  # no positions: the default 0 .. s - 1
    if positions in HUGE_INT_POSITIONS:  # a result or posenc's own error, never torch's
        try:
            call_or_posenc_error(call)
        except POSENC_ERRORS:
            pass
    else:
        expect_posenc_error(call)


@FUZZ_FINDING
@given(
    kind=BAD_TENSOR_KINDS,
    function=st.sampled_from(["scores", "values"]),
    method=st.sampled_from(["shift", "materialize"]),
    q_len=st.integers(1, 4),
    k_len=st.integers(1, 4),
)
@example(kind="bool", function="scores", method="shift", q_len=2, k_len=2)
def test_finding_relative_terms_of_non_float_tensors(kind, function, method, q_len, k_len):
    rel = bad_tensor(kind, (q_len + k_len - 1, 4), 1)
    if function == "scores":
        expect_posenc_error(posenc.relative_scores, bad_tensor(kind, (q_len, 4)), rel, method=method)
    else:
        expect_posenc_error(posenc.relative_values, bad_tensor(kind, (q_len, k_len)), rel, method=method)


@FUZZ_FINDING
@given(
    empty=st.sampled_from(["d", "k_len"]),
    lead=st.sampled_from([(), (2,), (2, 3)]),
    q_len=st.integers(1, 4),
    n=st.integers(1, 8),
)
@example(empty="d", lead=(), q_len=2, n=3)
def test_finding_attention_with_empty_dims(empty, lead, q_len, n):
    if empty == "d":
        q, k, v = torch.ones(*lead, q_len, 0), torch.ones(*lead, n, 0), torch.ones(*lead, n, 3)
    else:
        q, k, v = torch.ones(*lead, q_len, n), torch.ones(*lead, 0, n), torch.ones(*lead, 0, 3)
    expect_posenc_error(posenc.scaled_dot_product_attention, q, k, v)


@FUZZ_FINDING
@given(
    bad=st.sampled_from(["3", None, b"3", [3]]),
    which=st.sampled_from(["q_len", "k_len"]),
    function=st.sampled_from(["alibi_bias", "ALiBiBias", "T5RelativeBias"]),
)
@example(bad="3", which="q_len", function="alibi_bias")
def test_finding_lengths_that_are_not_ints(bad, which, function):
    lengths = {"q_len": 3, "k_len": 4, which: bad}
    if function == "alibi_bias":
        expect_posenc_error(posenc.alibi_bias, 2, lengths["q_len"], lengths["k_len"])
    elif function == "ALiBiBias":
        expect_posenc_error(posenc.ALiBiBias(2), lengths["q_len"], lengths["k_len"])
    else:
        expect_posenc_error(posenc.T5RelativeBias(2), lengths["q_len"], lengths["k_len"])


@FUZZ_FINDING
@given(
    head_dim=st.sampled_from([64, 128, 256]),
    base=st.sampled_from([1.0000000000000002, 1.0000000000000004, 1.000000000000001]),
    original=st.integers(2**50, 2**62),
    factor=st.floats(1.0, 64.0),
)
@example(head_dim=128, base=1.0000000000000002, original=2**62, factor=2.0)
def test_finding_yarn_with_extreme_bounds(head_dim, base, original, factor):
    scaling = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": original}
    inv_freq, af = call_or_posenc_error(posenc.rope_inv_freq, head_dim, base=base, scaling=scaling)
    (expected, expected_af), *_ = oracle_inv_freq(head_dim, base, scaling, None)
    expected = torch.tensor(expected, dtype=F64)
    assert_close(inv_freq, expected, 1e-12 * expected, "rope_inv_freq(yarn)")
