"""Chapter 2's three design choices: add rather than concatenate, scale tokens by sqrt(d), the base 10000."""

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import sinusoidal_frequencies, sinusoidal_table


@given(half=st.integers(1, 128), num_positions=st.integers(1, 300))
def test_every_position_vector_has_norm_sqrt_half_d(half, num_positions):
    table = sinusoidal_table(num_positions, 2 * half, dtype=torch.float64)
    assert torch.allclose(table.norm(dim=1), torch.full((num_positions,), math.sqrt(half), dtype=torch.float64))


def test_a_linear_map_of_a_concatenation_is_a_sum_of_maps():
    g = torch.Generator().manual_seed(3)
    x, p = torch.randn(2, 32, generator=g, dtype=torch.float64)
    W = torch.randn(16, 64, generator=g, dtype=torch.float64)
    assert torch.allclose(W @ torch.cat([x, p]), W[:, :32] @ x + W[:, 32:] @ p, atol=1e-12)


def test_random_tokens_are_nearly_orthogonal_to_positions():
    d = 512
    g = torch.Generator().manual_seed(0)
    tokens = torch.randn(1000, d, generator=g, dtype=torch.float64)
    p = sinusoidal_table(100, d, dtype=torch.float64)[37]
    assert (tokens @ p / (tokens.norm(dim=1) * p.norm())).abs().mean() < 2 / math.sqrt(d)


def test_the_slowest_wavelength_is_almost_two_pi_times_the_base():
    for base, expected in ((100.0, 617), (10000.0, 60611), (500000.0, 2984615)):
        slowest = 2 * math.pi / sinusoidal_frequencies(512, base=base)[-1].item()
        assert round(slowest) == expected and slowest < 2 * math.pi * base
