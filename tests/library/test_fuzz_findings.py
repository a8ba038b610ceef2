"""The defects the fuzz tests found in posenc, fixed, each kept as a regression test."""

from __future__ import annotations

import torch
from fuzzing import (
    BAD_TENSOR_KINDS,
    F64,
    FUZZ,
    POSENC_ERRORS,
    assert_close,
    bad_tensor,
    bases,
    call_or_posenc_error,
    expect_posenc_error,
    oracle_angles,
    oracle_inv_freq,
    oracle_t5_bucket,
    pair_angles_to_channels,
    t5_configs,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st

import posenc

# Findings: defects this fuzz test found in posenc (fixed), each kept as a regression test
# (described with reproductions in the maintainers' findings list)

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
