"""Sinusoidal tables for an odd model dimension: layout="concat" follows Marian's convention in transformers.

``MarianSinusoidalPositionalEmbedding.create_weight`` puts ``sin(p * w_i)`` in
the first ``ceil(d/2)`` columns and ``cos(p * w_i)`` in the last ``floor(d/2)``,
``w_i = 10000 ** (-2i / d)``, computed in float64 by NumPy and rounded to
float32. posenc computes the same angles in float64 by another route
(``exp(-2i ln(base) / d)``), so the tables agree to float32 rounding: bit for
bit in all but rare entries, and never by more than one unit in the last place.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import SinusoidalPositionalEncoding, sinusoidal_encoding, sinusoidal_table

SETTINGS = settings(derandomize=True, deadline=None, database=None, max_examples=40)


def ulp32(x: torch.Tensor) -> torch.Tensor:
    """One unit in the last place of every float32 entry of ``x``."""
    a = x.abs().float()
    return torch.nextafter(a, torch.full_like(a, math.inf)) - a


@pytest.mark.parametrize("dim", [1, 2, 3, 5, 7, 8, 9, 16, 63, 64, 512, 513])
def test_concat_equals_marian_for_odd_and_even_dims(dim):
    marian = pytest.importorskip("transformers.models.marian.modeling_marian")
    reference = marian.MarianSinusoidalPositionalEmbedding(1024, dim).create_weight()  # [1024, dim] float32
    table = sinusoidal_table(1024, dim, layout="concat")
    diff = (table - reference).abs()
    assert (diff <= ulp32(reference)).all(), f"dim {dim}: largest difference {diff.max().item():.3g}"
    assert (diff > 0).float().mean() < 1e-4  # bit-identical but for rare float32 roundings (1 of 525k at d=513)
    module = SinusoidalPositionalEncoding(dim, layout="concat", initial_len=4)
    assert torch.equal(module(torch.zeros(1, 1024, dim)), table.unsqueeze(0))


@SETTINGS
@given(st.integers(0, 40).map(lambda n: 2 * n + 1), st.integers(0, 10_000))
def test_odd_concat_is_sines_then_the_cosines_of_the_first_pairs(dim, position):
    pe = sinusoidal_encoding(torch.tensor(position), dim, layout="concat", dtype=torch.float64)
    # w_i = 10000 ** (-2i / d), i = 0 .. ceil(d/2) - 1 for sines, .. floor(d/2) - 1 for cosines
    w = [10000.0 ** (-2 * i / dim) for i in range(dim // 2 + 1)]
    expected = [math.sin(position * wi) for wi in w] + [math.cos(position * wi) for wi in w[: dim // 2]]
    assert pe.shape == (dim,) and pe.tolist() == pytest.approx(expected, abs=1e-12)


def test_interleaved_still_needs_an_even_dim_and_points_to_concat():
    for call in (lambda: sinusoidal_encoding(torch.arange(3), 7), lambda: SinusoidalPositionalEncoding(7)):
        with pytest.raises(ValueError, match=r"dim must be even for layout='interleaved' .*got 7; use 6 or 8, or "):
            call()
    with pytest.raises(ValueError, match=r"dim must be even .*got 7; use 6 or 8"):  # bad_inputs.yaml's pattern
        sinusoidal_encoding(torch.arange(3), 7)
    with pytest.raises(ValueError, match=r"layout must be one of"):  # an unknown layout named before the dim
        sinusoidal_encoding(torch.arange(3), 7, layout="marian")
