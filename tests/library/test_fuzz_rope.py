"""Fuzz tests of RoPE (Su et al. 2021; transformers' scalings): frequencies, cos/sin, the rotation and the
module, against the float64 oracles of tests/fuzzing.py."""

from __future__ import annotations

import math

import torch
from fuzzing import (
    EPS32,
    F64,
    FUZZ,
    FUZZ_HEAVY,
    FUZZ_LIGHT,
    TOL,
    angle_slack,
    assert_close,
    bases,
    call_or_posenc_error,
    dynamic_seq_len,
    even_dims,
    first_passing,
    float_dtypes,
    oracle_angles,
    oracle_inv_freq,
    oracle_rotate,
    pair_angles_to_channels,
    positions_st,
    random_tensor,
    scalings,
    seeds,
)
from hypothesis import given
from hypothesis import strategies as st

import posenc

# RoPE: frequencies, cos/sin, rotation, module (Su et al. 2021; transformers' scalings)


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
