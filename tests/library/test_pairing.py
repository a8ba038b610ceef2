"""The offset matrix M_k and what the sin/cos pairing buys: identities, layouts, a broken variant."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import layout_permutation, sinusoidal_encoding, sinusoidal_frequencies, sinusoidal_table
from posenc.pairing import sinusoidal_dot_product, sinusoidal_offset_matrix

f64 = torch.float64
even_dims = st.integers(1, 32).map(lambda n: 2 * n)
layouts = st.sampled_from(["interleaved", "concat"])
offsets = st.one_of(st.integers(-5000, 5000), st.floats(-1e3, 1e3, allow_nan=False))


def seed_001_encoding(positions, d, base=10000.0):
    """Seed 001 §7.3.2 as written: cos(p / base**((2i+1)/d)) in the odd channels."""
    positions = torch.as_tensor(positions, dtype=f64)
    two_i = torch.arange(0, d, 2, dtype=f64)
    sin = torch.sin(positions[..., None] * base ** (-two_i / d))
    cos = torch.cos(positions[..., None] * base ** (-(two_i + 1) / d))
    return torch.stack((sin, cos), dim=-1).flatten(-2)  # [..., d/2, 2] -> [..., d]


def relative_lstsq_residual(x, y):
    fit = torch.linalg.lstsq(x, y, driver="gelsd").solution  # x @ fit ~ y
    return ((x @ fit - y).norm() / y.norm()).item(), fit


def test_hand_values_d2_and_d4():
    m = sinusoidal_offset_matrix(math.pi / 2, 2)
    assert torch.allclose(m, torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=f64), atol=1e-15)
    m = sinusoidal_offset_matrix(1, 4)
    c, s = math.cos(1.0), math.sin(1.0)
    c2, s2 = math.cos(0.01), math.sin(0.01)
    expected = torch.tensor([[c, s, 0, 0], [-s, c, 0, 0], [0, 0, c2, s2], [0, 0, -s2, c2]], dtype=f64)
    assert torch.allclose(m, expected, atol=1e-15)
    concat = sinusoidal_offset_matrix(1, 4, layout="concat")
    assert torch.allclose(concat, expected[[0, 2, 1, 3]][:, [0, 2, 1, 3]], atol=1e-15)


def test_zero_offset_is_identity_and_shapes_broadcast():
    assert torch.equal(sinusoidal_offset_matrix(0, 10), torch.eye(10, dtype=f64))
    m = sinusoidal_offset_matrix(torch.arange(6.0).view(2, 3), 8, dtype=torch.float32)
    assert m.shape == (2, 3, 8, 8) and m.dtype == torch.float32
    assert torch.allclose(m[1, 2].double(), sinusoidal_offset_matrix(5, 8), atol=1e-7)


@pytest.mark.claim("000-03", "004-07")
@given(st.floats(-1e4, 1e4, allow_nan=False), offsets, even_dims, layouts)
def test_shift_is_the_offset_matrix(p, k, d, layout):
    pe = sinusoidal_encoding(torch.tensor(p, dtype=f64), d, dtype=f64, layout=layout)
    shifted = sinusoidal_encoding(torch.tensor(p + k, dtype=f64), d, dtype=f64, layout=layout)
    m = sinusoidal_offset_matrix(k, d, layout=layout)
    assert torch.allclose(m @ pe, shifted, atol=1e-9)


@given(offsets, offsets, even_dims, layouts)
def test_offset_matrices_are_rotations_that_compose(a, b, d, layout):
    ma, mb = sinusoidal_offset_matrix(a, d, layout=layout), sinusoidal_offset_matrix(b, d, layout=layout)
    assert torch.allclose(ma @ ma.T, torch.eye(d, dtype=f64), atol=1e-13)
    assert torch.allclose(ma @ mb, sinusoidal_offset_matrix(a + b, d, layout=layout), atol=1e-9)
    assert torch.allclose(sinusoidal_offset_matrix(-a, d, layout=layout), ma.T, atol=0)


@given(st.integers(-100, 100), even_dims)
def test_concat_offset_matrix_is_the_permuted_interleaved_one(k, d):
    perm = layout_permutation(d)
    inter = sinusoidal_offset_matrix(k, d)
    assert torch.equal(inter[perm][:, perm], sinusoidal_offset_matrix(k, d, layout="concat"))


@pytest.mark.claim("002-13")
@given(st.integers(1, 64), st.sampled_from([2, 8, 64, 128]), st.floats(100.0, 1e5))
def test_dot_product_depends_only_on_the_offset(n, d, base):
    table = sinusoidal_table(n, d, base=base, dtype=f64)
    offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # [n, n]
    assert torch.allclose(table @ table.T, sinusoidal_dot_product(offset, d, base=base), atol=1e-11)
    concat = sinusoidal_table(n, d, base=base, layout="concat", dtype=f64)
    assert torch.allclose(concat @ concat.T, table @ table.T, atol=1e-11)


def test_dot_product_is_even_and_peaks_at_zero():
    k = torch.arange(1, 5000, dtype=f64)
    for d in (2, 16, 64, 512):
        assert sinusoidal_dot_product(0, d).item() == d / 2
        assert torch.equal(sinusoidal_dot_product(k, d), sinusoidal_dot_product(-k, d))
        assert torch.all(sinusoidal_dot_product(k, d) < d / 2)
    far = torch.cat([torch.arange(-2000, -9), torch.arange(10, 2001)])
    for d in (64, 512):
        assert sinusoidal_dot_product(far, d).max() < 0.8 * (d / 2)
    # d = 2 by hand: a single pair with frequency 1
    assert sinusoidal_dot_product(torch.tensor(2.0), 2).item() == pytest.approx(math.cos(2.0), abs=1e-15)


def test_generic_projection_breaks_offset_only_scores_pairwise_rotations_keep_them():
    n, d = 96, 32
    table = sinusoidal_table(n, d, dtype=f64)
    w = torch.randn(d, d, generator=torch.Generator().manual_seed(0), dtype=f64) / math.sqrt(d)
    scores = table @ w @ table.T
    spread = max(torch.diagonal(scores, o).max() - torch.diagonal(scores, o).min() for o in range(-16, 17))
    assert spread > 1.0
    scales, angles = [0.5 + i / d for i in range(d // 2)], [0.3 * i for i in range(d // 2)]
    blocks = [
        r * torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]], dtype=f64)
        for r, a in zip(scales, angles, strict=True)
    ]
    scores = table @ torch.block_diag(*blocks) @ table.T
    spread = max(torch.diagonal(scores, o).max() - torch.diagonal(scores, o).min() for o in range(-16, 17))
    assert spread < 1e-12
    assert abs(scores[10, 15] - scores[10, 5]) > 0.1  # not symmetric: direction is visible


def test_a_sine_alone_cannot_be_shifted():
    # Positions 0 and 355 have (almost) the same sine at frequency 1, opposite sines one step later.
    assert abs(math.sin(0) - math.sin(355)) < 1e-4 and math.sin(1) - math.sin(356) > 1.6
    d = 16
    p = torch.arange(2048, dtype=f64)
    sines = sinusoidal_encoding(p, d, dtype=f64, layout="concat")[:, : d // 2]
    sines_next = sinusoidal_encoding(p + 1, d, dtype=f64, layout="concat")[:, : d // 2]
    assert sines[0].abs().max() == 0 and sines_next[0].abs().min() > 0
    residual, _ = relative_lstsq_residual(sines, sines_next)
    assert residual > 0.3
    pe, pe_next = sinusoidal_encoding(p, d, dtype=f64), sinusoidal_encoding(p + 1, d, dtype=f64)
    residual, fit = relative_lstsq_residual(pe, pe_next)
    assert residual < 1e-12
    assert torch.allclose(fit, sinusoidal_offset_matrix(1, d).T, atol=1e-10)


@pytest.mark.claim("001-03")
@pytest.mark.parametrize("k", [1, 10, 100, -7, 2.5])
def test_seed_001_exponent_breaks_the_offset_identity(k):
    d = 16
    p = torch.arange(2048, dtype=f64)
    x, y = seed_001_encoding(p, d), seed_001_encoding(p + k, d)
    assert torch.equal(x[0], sinusoidal_encoding(torch.tensor(0), d, dtype=f64))  # same at position 0 ...
    assert (x @ sinusoidal_offset_matrix(k, d).T - y).norm(dim=-1).max() > 1.5  # ... but M_k fails
    residual, _ = relative_lstsq_residual(x, y)
    assert residual > 0.2  # and so does every linear map


def test_seed_001_pairs_leave_the_unit_circle():
    d = 16
    radius2 = seed_001_encoding(torch.arange(2048), d).view(-1, d // 2, 2).pow(2).sum(-1)
    assert radius2.min() < 0.01 and radius2.max() > 1.99


@pytest.mark.claim("001-05", "002-11")
def test_lowest_pair_is_fastest():
    for d in (4, 64, 512):
        wavelength = 2 * math.pi / sinusoidal_frequencies(d)
        assert wavelength[0].item() == pytest.approx(2 * math.pi, rel=1e-15)
        assert torch.all(wavelength[1:] > wavelength[:-1])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sinusoidal_offset_matrix(1, 7), r"dim must be even.*got 7"),
        (lambda: sinusoidal_offset_matrix(1, 0), r"dim must be >= 1, got 0"),
        (lambda: sinusoidal_offset_matrix(1, 4, layout="half"), r"layout must be one of .*got 'half'"),
        (lambda: sinusoidal_offset_matrix(1, 4, base=0.5), r"base must be a finite number > 1, got 0.5"),
        (lambda: sinusoidal_offset_matrix(torch.tensor(True), 4), r"k must hold real numbers, got dtype torch.bool"),
        (lambda: sinusoidal_offset_matrix(torch.tensor(1j), 4), r"k must hold real numbers, got dtype torch.complex"),
        (lambda: sinusoidal_dot_product(1, 5), r"dim must be even.*got 5"),
        (lambda: sinusoidal_dot_product(torch.tensor([True]), 4), r"offset must hold real numbers"),
    ],
)
def test_bad_input_names_argument_and_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()
