"""Sinusoidal encoding: hand-checked values, identities as properties, and bad input."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import (
    SinusoidalPositionalEncoding,
    layout_permutation,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_table,
)

even_dims = st.integers(1, 64).map(lambda n: 2 * n)
layouts = st.sampled_from(["interleaved", "concat"])


def test_position_zero_is_sin0_cos0_pairs():
    pe = sinusoidal_encoding(torch.tensor(0), 8)
    assert pe.tolist() == [0.0, 1.0] * 4
    pe = sinusoidal_encoding(torch.tensor(0), 8, layout="concat")
    assert pe.tolist() == [0.0] * 4 + [1.0] * 4


@pytest.mark.claim("000-04", "001-14", "003-04")
def test_position_one_hand_values():
    d = 6
    pe = sinusoidal_encoding(torch.tensor(1), d, dtype=torch.float64)
    assert pe[0].item() == pytest.approx(math.sin(1.0), abs=1e-15)
    assert pe[1].item() == pytest.approx(math.cos(1.0), abs=1e-15)
    w1 = 10000.0 ** (-2 / d)
    assert pe[2].item() == pytest.approx(math.sin(w1), abs=1e-15)
    assert pe[3].item() == pytest.approx(math.cos(w1), abs=1e-15)


def test_d4_worked_table():
    # d = 4: frequencies 1 and 1/100, so PE(p) = [sin p, cos p, sin(p/100), cos(p/100)].
    table = sinusoidal_table(4, 4, dtype=torch.float64)
    for p in range(4):
        expected = [math.sin(p), math.cos(p), math.sin(p / 100), math.cos(p / 100)]
        assert table[p].tolist() == pytest.approx(expected, abs=1e-15)
    assert round(table[1, 0].item(), 4) == 0.8415 and round(table[3, 2].item(), 4) == 0.0300


@pytest.mark.claim("000-06", "001-04")
def test_wavelengths_run_from_2pi_to_just_under_2pi_base():
    d, base = 512, 10000.0
    lam = 2 * math.pi / sinusoidal_frequencies(d, base=base)
    assert lam[0].item() == pytest.approx(2 * math.pi, rel=1e-15)
    assert lam[-1].item() == pytest.approx(2 * math.pi * base ** ((d - 2) / d), rel=1e-12)
    assert lam[-1].item() < 2 * math.pi * base
    assert torch.all(lam[1:] > lam[:-1])


def test_the_heatmaps_striped_columns_are_slow_pairs_sine_near_0_cosine_near_1():
    """Chapter 2: over 128 positions with d = 64, pairs 24 to 31 stay near angle 0 (interleaved layout)."""
    slow = sinusoidal_table(128, 64, dtype=torch.float64)[:, 48:]
    assert slow[:, 0::2].abs().max() < 0.13 and slow[:, 1::2].min() > 0.99
    # pair 16 is not among them: its angle reaches 1.28 radians
    assert sinusoidal_table(128, 64, dtype=torch.float64)[:, 32].abs().max() > 0.9


def test_float32_at_a_million_is_within_1e6_of_float64():
    pos = torch.arange(1_000_000, 1_000_000 + 257, dtype=torch.float64)
    exact = sinusoidal_encoding(pos, 128, dtype=torch.float64)
    fast = sinusoidal_encoding(pos.float(), 128, dtype=torch.float32)
    assert (fast.double() - exact).abs().max().item() < 1e-6
    naive = sinusoidal_encoding(pos.float(), 128, dtype=torch.float32, angle_dtype=torch.float32)
    assert (naive.double() - exact).abs().max().item() > 1e-3  # what float32 angles cost


def test_python_floats_keep_float64_precision():
    p = 1_000_000.3  # float32 would round it to 1_000_000.3125
    exact = sinusoidal_encoding(torch.tensor(p, dtype=torch.float64), 8, dtype=torch.float64)
    assert torch.equal(sinusoidal_encoding(p, 8, dtype=torch.float64), exact)
    assert torch.equal(sinusoidal_encoding([p], 8, dtype=torch.float64)[0], exact)


@pytest.mark.claim("000-10")
def test_fractional_positions_and_shapes():
    pos = torch.tensor([[0.5, 1.25], [2.0, -3.5]])
    pe = sinusoidal_encoding(pos, 4, dtype=torch.float64)
    assert pe.shape == (2, 2, 4)
    assert pe[1, 1, 0].item() == pytest.approx(math.sin(-3.5), abs=1e-15)
    assert pe[0, 0, 3].item() == pytest.approx(math.cos(0.5 / 100), abs=1e-15)


@given(st.integers(0, 4096), even_dims, layouts)
def test_values_in_unit_interval(n, d, layout):
    pe = sinusoidal_encoding(torch.tensor([n, n * 7919 + 3]), d, layout=layout)
    assert pe.abs().max().item() <= 1.0


@given(st.floats(-1e5, 1e5, allow_nan=False), even_dims)
def test_each_pair_lies_on_the_unit_circle(p, d):
    pe = sinusoidal_encoding(torch.tensor(p, dtype=torch.float64), d, dtype=torch.float64)
    pairs = pe.view(d // 2, 2)  # [d/2, (sin, cos)]
    assert torch.allclose(pairs.pow(2).sum(-1), torch.ones(d // 2, dtype=torch.float64), atol=1e-14)


@given(st.integers(0, 300), even_dims)
def test_concat_is_a_fixed_permutation_of_interleaved(n, d):
    inter = sinusoidal_table(n, d)
    concat = sinusoidal_table(n, d, layout="concat")
    assert torch.equal(inter[:, layout_permutation(d)], concat)
    back = layout_permutation(d, src="concat", dst="interleaved")
    assert torch.equal(concat[:, back], inter)


@pytest.mark.claim("000-07", "001-02", "001-06")
@given(st.integers(1, 5), st.integers(1, 40), st.integers(0, 2000), st.sampled_from([8, 16, 34]), layouts)
def test_module_adds_exactly_rows_offset_to_offset_plus_s(b, s, offset, d, layout):
    module = SinusoidalPositionalEncoding(d, layout=layout, initial_len=16)
    x = torch.randn(b, s, d, generator=torch.Generator().manual_seed(s))
    out = module(x, offset=offset)
    table = sinusoidal_table(offset + s, d, layout=layout)
    assert torch.equal(out, x + table[offset : offset + s])


@pytest.mark.claim("000-11", "004-03")
def test_module_has_no_state_and_grows_its_cache():
    module = SinusoidalPositionalEncoding(8, initial_len=4)
    assert module.state_dict() == {} and list(module.parameters()) == []
    module(torch.zeros(1, 10, 8))
    assert module.table.shape == (10, 8)
    module(torch.zeros(1, 3, 8), offset=9)
    assert module.table.shape == (20, 8)
    assert torch.equal(module.table, sinusoidal_table(20, 8))


def test_module_keeps_input_dtype():
    module = SinusoidalPositionalEncoding(8)
    x = torch.zeros(2, 5, 8, dtype=torch.bfloat16)
    out = module(x)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out[0], sinusoidal_table(5, 8).to(torch.bfloat16))


def test_module_dropout_after_addition():
    module = SinusoidalPositionalEncoding(64, dropout=0.5)
    x = torch.ones(4, 32, 64)
    torch.manual_seed(0)
    out = module(x)
    kept = out != 0
    assert 0.3 < kept.float().mean().item() < 0.7
    expected = (x + sinusoidal_table(32, 64)) * 2.0
    assert torch.allclose(out[kept], expected[kept])
    module.eval()
    assert torch.equal(module(x), x + sinusoidal_table(32, 64))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sinusoidal_encoding(torch.arange(3), 7), r"dim must be even.*got 7"),
        (lambda: sinusoidal_encoding(torch.arange(3), 0), r"dim must be >= 1, got 0"),
        (lambda: sinusoidal_encoding(torch.arange(3), -4), r"dim must be >= 1, got -4"),
        (lambda: sinusoidal_encoding(torch.arange(3), 4.0), r"dim must be an int"),
        (lambda: sinusoidal_encoding(torch.arange(3), 4, layout="half"), r"layout must be one of .*'half'"),
        (lambda: sinusoidal_encoding(torch.arange(3), 4, base=1.0), r"base must be a finite number > 1, got 1"),
        (lambda: sinusoidal_encoding(torch.tensor([True]), 4), r"positions must hold real numbers"),
        (
            lambda: sinusoidal_encoding(torch.arange(3), 4, angle_dtype=torch.float16),
            r"angle_dtype must be torch.float32 or torch.float64 .*got torch.float16",
        ),
        (lambda: sinusoidal_table(-1, 4), r"num_positions must be >= 0, got -1"),
        (lambda: SinusoidalPositionalEncoding(5), r"dim must be even.*got 5"),
        (lambda: SinusoidalPositionalEncoding(4, layout="rope"), r"layout must be one of"),
        (lambda: SinusoidalPositionalEncoding(4, dropout=1.0), r"dropout must be in \[0, 1\), got 1.0"),
        (lambda: SinusoidalPositionalEncoding(4)(torch.zeros(2, 3, 6)), r"last dim = dim = 4.*\(2, 3, 6\)"),
        (lambda: SinusoidalPositionalEncoding(4)(torch.zeros(4)), r"got \(4,\)"),
        (lambda: SinusoidalPositionalEncoding(4)(torch.zeros(1, 3, 4), offset=-2), r"offset must be >= 0, got -2"),
    ],
)
def test_bad_input_names_argument_and_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


FAIRSEQ_TABLES = ["m2m_100", "nllb_moe", "xglm", "fsmt", "speech_to_text", "musicgen", "trocr"]


@pytest.mark.parametrize("family", FAIRSEQ_TABLES)
def test_the_models_chapter_2_names_use_fairseqs_ladder_not_the_papers(family):
    """Chapter 2: these ports of fairseq's table turn pair i at 10000^(-i/(d/2-1)), concatenated."""
    import importlib
    import inspect
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    classes = [c for name, c in vars(module).items() if inspect.isclass(c) and "Sinusoidal" in name]
    (table_class,) = [c for c in classes if hasattr(c, "get_embedding")]
    arguments = (20, 16) if len(inspect.signature(table_class.get_embedding).parameters) == 2 else (20, 16, None)
    theirs = table_class.get_embedding(*arguments).double()  # row p: position p
    p = torch.arange(20, dtype=torch.float64)[:, None]
    ladder = 10000.0 ** (-torch.arange(8, dtype=torch.float64) / 7)
    sin, cos = torch.sin(p * ladder), torch.cos(p * ladder)
    # the ladder is what the chapter names; MusicGen puts the cosines first
    orders = [torch.cat([sin, cos], dim=-1), torch.cat([cos, sin], dim=-1)]
    assert any(torch.allclose(theirs, order, atol=1e-5) for order in orders)
    paper = sinusoidal_table(20, 16, layout="concat", dtype=torch.float64)
    assert (theirs - paper).abs().max() > 0.1  # not the paper's numbers reordered
