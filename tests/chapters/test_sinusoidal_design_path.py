"""The design path of chapter 2 (counter, normalised counter, bits, sinusoids) and chapter 1's overview table.

Checked independently of the chapters' cells: the bit periods, the length dependence of ``p / (L - 1)``,
the wavelengths, the rotation by a fixed matrix for any offset, and the parameter counts the overview
table states for each scheme.
"""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import (
    ALiBiBias,
    AxialRotaryEmbedding,
    LearnedPositionalEmbedding,
    MultiHeadSelfAttention,
    RotaryEmbedding,
    ShawRelativeAttention,
    ShawRelativeEmbeddings,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
    TransformerXLRelativeAttention,
    XPosRotaryEmbedding,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_table,
)

F64 = torch.float64
even_dims = st.integers(1, 32).map(lambda n: 2 * n)


def bits(positions: torch.Tensor, n: int) -> torch.Tensor:
    """Bits 0 .. n-1 of each position, bit 0 first: ``[len(positions), n]``."""
    return (positions[:, None] >> torch.arange(n)) & 1


def count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# ---- (a) the counter itself -------------------------------------------------------------------


def test_raw_position_outgrows_a_scaled_token_embedding():
    d = 512
    token = torch.randn(d, generator=torch.Generator().manual_seed(1), dtype=F64)  # norm about sqrt(d)
    assert 0.9 * math.sqrt(d) < token.norm() < 1.1 * math.sqrt(d)
    positions = torch.arange(4096, dtype=F64)
    beyond = positions > token.norm()
    # from some position on, the single channel holding p is longer than the whole token ...
    first = int(beyond.nonzero()[0])
    assert 20 <= first <= 26 and beyond[first:].all()
    # ... while every sinusoidal vector keeps the norm sqrt(d/2), whatever the position
    norms = sinusoidal_table(4096, d, dtype=F64).norm(dim=1)
    assert torch.allclose(norms, torch.full_like(norms, math.sqrt(d / 2)))


# ---- (b) divide by the length -----------------------------------------------------------------


@pytest.mark.parametrize(("short", "long"), [(16, 64), (10, 1000)])
def test_normalised_step_depends_on_the_length(short, long):
    def scaled(n):
        return torch.arange(n, dtype=F64) / (n - 1)

    steps = {n: (scaled(n)[1] - scaled(n)[0]).item() for n in (short, long)}
    assert steps[short] == pytest.approx(1 / (short - 1)) and steps[long] == pytest.approx(1 / (long - 1))
    assert steps[short] != steps[long]
    # the value 1/3 names position (L - 1) / 3: a different position for each length
    assert 3 * int((scaled(16) - 1 / 3).abs().argmin()) == 15
    assert 3 * int((scaled(64) - 1 / 3).abs().argmin()) == 63


# ---- (c) count in binary ----------------------------------------------------------------------


@given(st.integers(0, 2**20), st.integers(0, 12))
def test_bit_j_flips_every_2_to_the_j_and_repeats_every_2_to_the_j_plus_1(p, j):
    b = bits(torch.tensor([p, p + 1, p + 2**j, p + 2 ** (j + 1)]), j + 1)[:, j]
    assert b[3] == b[0]  # period 2**(j + 1)
    assert b[2] != b[0]  # flipped after 2**j steps ...
    assert (b[1] != b[0]) == ((p + 1) % 2**j == 0)  # ... and only at multiples of 2**j


def test_bits_are_unique_and_independent_of_the_input_length():
    table = bits(torch.arange(64), 6)
    assert len({tuple(row) for row in table.tolist()}) == 64
    assert torch.equal(bits(torch.arange(4096), 6)[:64], table)


def test_bits_jump_between_neighbours():
    table = bits(torch.arange(64), 6)
    flips = (table[1:] != table[:-1]).sum(1)
    assert flips.min() == 1 and flips.max() == 6  # 31 -> 32 flips all six
    assert flips[7] == 4 and flips[8] == 1  # 7 -> 8 and 8 -> 9
    assert (table[0] != table[32]).sum() == (table[0] != table[1]).sum() == 1


def test_no_affine_map_adds_one_to_the_bits():
    table = bits(torch.arange(64), 6).to(F64)
    x = torch.cat([table[:-1], torch.ones(63, 1, dtype=F64)], 1)
    fit = torch.linalg.lstsq(x, table[1:]).solution
    assert (x @ fit - table[1:]).abs().max() > 0.5


# ---- (d) sinusoids: the smooth version --------------------------------------------------------


@given(even_dims, st.sampled_from([64.0, 10000.0, 500000.0]), st.floats(-1000, 1000))
def test_pair_i_has_period_2pi_base_to_the_2i_over_d(d, base, p):
    lam = 2 * math.pi / sinusoidal_frequencies(d, base=base)
    i = torch.arange(d // 2, dtype=F64)
    assert torch.allclose(lam, 2 * math.pi * base ** (2 * i / d), rtol=1e-12)
    pos = torch.tensor(p, dtype=F64)
    here = sinusoidal_encoding(pos, d, base=base, dtype=F64).view(-1, 2)
    # every pair, moved by its own wavelength, comes back to the same point
    for k, wave in enumerate(lam.tolist()):
        there = sinusoidal_encoding(pos + wave, d, base=base, dtype=F64).view(-1, 2)
        assert torch.allclose(there[k], here[k], atol=1e-8)


def test_base_2_to_the_d_over_2_doubles_the_wavelength_like_the_bits():
    d = 12
    lam = 2 * math.pi / sinusoidal_frequencies(d, base=2.0 ** (d // 2))
    assert torch.allclose(lam[1:] / lam[:-1], torch.full((d // 2 - 1,), 2.0, dtype=F64))
    # a wave of period 2, like bit 0, would read 0 at every integer position
    assert torch.sin(math.pi * torch.arange(1000, dtype=F64)).abs().max() < 1e-12


def test_neighbours_are_equally_far_apart_and_all_positions_distinct():
    table = sinusoidal_table(1000, 12, dtype=F64)
    gaps = (table[1:] - table[:-1]).norm(dim=1)
    assert (gaps.max() - gaps.min()).item() < 1e-12
    dist = torch.cdist(table, table) + torch.eye(1000, dtype=F64)
    assert dist.min() > 0.5


# ---- (e) moving k positions is one rotation per pair ------------------------------------------


@given(st.integers(-10_000, 10_000), st.integers(-5_000, 5_000), even_dims)
def test_shift_by_k_is_a_fixed_rotation_of_each_pair(p, k, d):
    angle = k * sinusoidal_frequencies(d)  # [d/2]
    c, s = torch.cos(angle), torch.sin(angle)
    turn = torch.stack([torch.stack([c, s], -1), torch.stack([-s, c], -1)], -2)  # [d/2, 2, 2]
    here = sinusoidal_encoding(torch.tensor(p, dtype=F64), d, dtype=F64).view(-1, 2)
    there = sinusoidal_encoding(torch.tensor(p + k, dtype=F64), d, dtype=F64).view(-1, 2)
    assert torch.allclose(torch.einsum("iab,ib->ia", turn, here), there, atol=1e-9)
    # the matrices do not involve p, and each is a rotation
    assert torch.allclose(turn @ turn.transpose(-1, -2), torch.eye(2, dtype=F64).expand(d // 2, 2, 2))


# ---- chapter 1's table: parameter counts --------------------------------------------------------


@pytest.mark.parametrize(("d", "h", "max_len", "k"), [(64, 4, 16, 16), (768, 12, 512, 8)])
def test_parameter_counts_of_the_overview_table(d, h, max_len, k):
    dh = d // h
    assert count(LearnedPositionalEmbedding(max_len, d)) == max_len * d
    assert count(ShawRelativeEmbeddings(dh, k)) == 2 * (2 * k + 1) * dh
    shaw = ShawRelativeAttention(d, h, max_relative_position=k)
    assert count(shaw) - count(MultiHeadSelfAttention(d, h)) == 2 * (2 * k + 1) * dh
    xl = TransformerXLRelativeAttention(d, h)
    assert count(xl) - count(MultiHeadSelfAttention(d, h, bias=False)) == d * d + 2 * d
    assert count(T5RelativeBias(h)) == 32 * h


@pytest.mark.parametrize(
    "module",
    [
        SinusoidalPositionalEncoding(64),
        ALiBiBias(8),
        RotaryEmbedding(64),
        RotaryEmbedding(64, rotary_dim=16),
        XPosRotaryEmbedding(64),
        AxialRotaryEmbedding(64),
    ],
    ids=lambda m: type(m).__name__,
)
def test_fixed_schemes_learn_and_save_nothing(module):
    assert count(module) == 0
    assert not module.state_dict()


def test_learnable_alibi_slopes_are_h_parameters():
    assert count(ALiBiBias(8, learnable=True)) == 8
