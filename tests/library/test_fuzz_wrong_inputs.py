"""Fuzz tests of wrong inputs: posenc's own ValueError/TypeError/IndexError, never a raw torch error,
never a result (tests/fuzzing.py tells the two apart)."""

from __future__ import annotations

import torch
from fuzzing import (
    BAD_TENSOR_KINDS,
    FUZZ_LIGHT,
    bad_tensor,
    expect_posenc_error,
)
from hypothesis import given
from hypothesis import strategies as st

import posenc

# Wrong inputs: posenc's own ValueError/TypeError/IndexError, never a raw error or a result

NOT_FLOAT_DTYPES = [torch.int64, torch.int32, torch.uint8, torch.bool, torch.complex64, "float32", None, float]
BAD_BASES = [float("nan"), float("inf"), -float("inf"), 1.0, 0.5, 0.0, -3.0, "10000", True, None, 1e4 + 0j]
BAD_ROPE_BASES = [b for b in BAD_BASES if b is not None]  # None: scaling["rope_theta"] or 10000
BAD_DIMS = [0, -2, 3, 7, 2.0, True, "4", None]
BAD_LENGTHS = [0, -1, 2.0, True, "3", None]
BAD_INT_LENGTHS = [0, -1, 2.0, True]  # str/None lengths: FINDING 8, tested below
BAD_INITIAL_LENS = [-1, 2.5, True, None]
BAD_OFFSETS = [-1, -(2**70), 1.5, True, "2", float("nan")]
BAD_LAYOUT_TEXT = st.text(max_size=12).filter(lambda s: s not in posenc.PAIR_LAYOUTS)


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
