"""The formulas chapters 5 and 7 print for T5's buckets and RoPE's long-context scalings,
written out by hand, equal what posenc computes."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import ntk_scaled_base, rope_inv_freq, t5_relative_position_bucket

F64 = torch.float64


def bucket_by_formula(r: int, n: int, max_distance: int) -> int:
    """Chapter 5: r < n/2 exact; else n/2 + floor(ln(2r/n) / ln(2D/n) * n/2), at most n - 1."""
    exact = n // 2
    if r < exact:
        return r
    return min(n - 1, exact + int(math.log(r / exact) / math.log(max_distance / exact) * (n - exact)))


@given(st.integers(0, 5000), st.sampled_from([8, 16, 32]), st.sampled_from([64, 128, 256]))
def test_t5_bucket_formula(r, n, max_distance):
    behind = t5_relative_position_bucket(
        torch.tensor(-r), num_buckets=n, max_distance=max_distance, bidirectional=False
    )
    assert behind.item() == bucket_by_formula(r, n, max_distance)
    # bidirectional: n buckets per side, keys ahead (r > 0) use the upper half
    both = t5_relative_position_bucket(torch.tensor([-r, r]), num_buckets=2 * n, max_distance=max_distance)
    assert both[0].item() == bucket_by_formula(r, n, max_distance)
    assert both[1].item() == (n if r > 0 else 0) + bucket_by_formula(r, n, max_distance)


def _scaled(d, base, kind, factor, trained_len, seq_len, **extra):
    scaling = {"rope_type": kind, "factor": factor, "original_max_position_embeddings": trained_len, **extra}
    return rope_inv_freq(d, base=base, scaling=scaling, seq_len=seq_len)[0]


CASES = [(64, 10000.0, 2048), (128, 10000.0, 4096), (128, 500000.0, 8192)]


@pytest.mark.parametrize("d, base, trained_len", CASES)
@pytest.mark.parametrize("factor", [2.0, 4.0, 8.0])
def test_ntk_and_dynamic_formulas(d, base, trained_len, factor):
    i = torch.arange(d // 2, dtype=F64)
    theta = base ** (-2 * i / d)
    ntk = (base * factor ** (d / (d - 2))) ** (-2 * i / d)
    assert torch.allclose(ntk, theta * factor ** (-2 * i / (d - 2)), rtol=1e-12, atol=0)
    assert torch.allclose(rope_inv_freq(d, base=ntk_scaled_base(base, factor, d))[0], ntk, rtol=1e-12, atol=0)
    for length in (trained_len, 2 * trained_len, 3 * trained_len):
        s = max(1.0, factor * length / trained_len - (factor - 1))
        expected = (base * s ** (d / (d - 2))) ** (-2 * i / d)
        got = _scaled(d, base, "dynamic", factor, trained_len, length)
        assert torch.allclose(got, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("d, base, trained_len", CASES)
@pytest.mark.parametrize("factor", [2.0, 4.0, 8.0])
def test_yarn_and_llama3_formulas(d, base, trained_len, factor):
    i = torch.arange(d // 2, dtype=F64)
    theta = base ** (-2 * i / d)
    # YaRN: the ramp runs over the pair index between the pairs with beta = 32 and alpha = 1 turns
    low = math.floor(d * math.log(trained_len / (32 * 2 * math.pi)) / (2 * math.log(base)))
    high = math.ceil(d * math.log(trained_len / (1 * 2 * math.pi)) / (2 * math.log(base)))
    ramp = ((i - max(low, 0)) / (min(high, d // 2 - 1) - max(low, 0))).clamp(0, 1)
    yarn = theta / factor * ramp + theta * (1 - ramp)
    got = _scaled(d, base, "yarn", factor, trained_len, 2 * trained_len)
    assert torch.allclose(got, yarn, rtol=1e-12, atol=0)
    # Llama 3: smooth = (L0 / lambda - low_freq_factor) / (high_freq_factor - low_freq_factor), clamped
    wavelength = 2 * math.pi / theta
    smooth = ((trained_len / wavelength - 1.0) / (4.0 - 1.0)).clamp(0, 1)
    llama3 = (1 - smooth) * theta / factor + smooth * theta
    got = _scaled(d, base, "llama3", factor, trained_len, 2 * trained_len, low_freq_factor=1.0, high_freq_factor=4.0)
    assert torch.allclose(got, llama3, rtol=1e-12, atol=0)
