"""Fuzz tests of the absolute and bias encodings and of attention: sinusoidal (Vaswani et al. 2017),
ALiBi (Press et al. 2022), T5's buckets (Raffel et al. 2020), attention and Shaw et al.'s relative terms,
each against its float64 oracle (tests/fuzzing.py)."""

from __future__ import annotations

import math

import pytest
import torch
from fuzzing import (
    EPS32,
    EPS64,
    F64,
    FUZZ,
    FUZZ_HEAVY,
    FUZZ_LIGHT,
    INTS,
    TOL,
    assert_close,
    bases,
    call_or_posenc_error,
    even_dims,
    expect_posenc_error,
    float_dtypes,
    oracle_alibi_slopes,
    oracle_frequencies,
    oracle_sinusoidal,
    oracle_t5_bucket,
    pair_angles_to_channels,
    positions_st,
    random_tensor,
    seeds,
    t5_configs,
)
from hypothesis import given
from hypothesis import strategies as st

import posenc


def test_call_or_posenc_error_tells_raw_errors_from_posenc_ones():
    with pytest.raises(ValueError, match="dim"):
        call_or_posenc_error(posenc.sinusoidal_encoding, [0], 3)
    with pytest.raises(AssertionError, match="raw error"):
        call_or_posenc_error(torch.zeros(2).view, 3)  # a torch RuntimeError
    with pytest.raises(AssertionError, match="raw error"):
        call_or_posenc_error(torch.as_tensor, "a")  # a TypeError, but torch's
    with pytest.raises(AssertionError, match="silently"):
        expect_posenc_error(posenc.sinusoidal_encoding, [0], 2)


# Sinusoidal encoding (Vaswani et al. 2017, section 3.5)


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


# ALiBi (Press, Smith and Lewis 2022)


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


# T5 buckets (Raffel et al. 2020)


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


# Attention (Vaswani et al. 2017, eq. 1) and Shaw et al. 2018's relative terms


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
