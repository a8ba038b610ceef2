"""The critical dimension (Liu et al.) and the base's lower bound (Men et al.)."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import rope_base_lower_bound, rope_cos_sum, rope_critical_dim, rope_inv_freq, rope_turning_pairs


def test_critical_dimension_of_llama_2():
    # Liu et al.'s example: d = 128, base 10000, 4096 tokens -> 92 channels (46 pairs)
    assert rope_critical_dim(128, 4096, base=1e4) == 92


@given(
    half=st.integers(1, 128),
    train_len=st.integers(8, 10**6),
    base=st.floats(10.0, 1e9),
)
def test_critical_dimension_counts_the_pairs_whose_period_fits(half, train_len, base):
    d = 2 * half
    bound = half * math.log(train_len / (2 * math.pi)) / math.log(base)
    if abs(bound - round(bound)) < 1e-6:
        return  # the formula's ceil and the count differ by one where the bound is an integer
    inv, _ = rope_inv_freq(d, base=base)
    fits = int((2 * math.pi / inv <= train_len).sum())
    assert rope_critical_dim(d, train_len, base=base) == 2 * fits


def test_critical_dimension_is_clamped():
    assert rope_critical_dim(64, 3, base=1e4) == 0  # T < 2 pi: no pair
    assert rope_critical_dim(64, 10**9, base=10.0) == 64


@given(m=st.integers(0, 10**6), half=st.integers(1, 64), base=st.floats(2.0, 1e7))
def test_cos_sum_is_the_sum_over_pairs(m, half, base):
    inv, _ = rope_inv_freq(2 * half, base=base)
    expected = sum(math.cos(m * t) for t in inv.tolist())
    assert math.isclose(rope_cos_sum(m, 2 * half, base=base).item(), expected, rel_tol=1e-9, abs_tol=1e-9)


def test_cos_sum_at_distance_zero_is_the_number_of_pairs():
    assert rope_cos_sum(torch.zeros(3), 128).tolist() == [64.0] * 3


@pytest.mark.parametrize(("head_dim", "context_len"), [(128, 4096), (128, 8192), (64, 2048), (96, 4096)])
def test_lower_bound_holds_there_and_fails_just_below(head_dim, context_len):
    b = rope_base_lower_bound(head_dim, context_len, rtol=1e-3)
    m = torch.arange(context_len)
    assert bool((rope_cos_sum(m, head_dim, base=b) >= 0).all())
    assert bool((rope_cos_sum(m, head_dim, base=b / 1.001) < 0).any())


def test_lower_bound_grows_with_the_context():
    bounds = [rope_base_lower_bound(128, n, rtol=1e-2) for n in (1024, 4096, 16384)]
    assert bounds[0] < bounds[1] < bounds[2]


def test_a_larger_base_turns_fewer_pairs_within_the_context():
    b = rope_base_lower_bound(128, 8192)
    few = rope_turning_pairs(rope_inv_freq(128, base=b)[0], 8192).sum()
    many = rope_turning_pairs(rope_inv_freq(128, base=1e4)[0], 8192).sum()
    assert few < many


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: rope_critical_dim(128, 0), "train_len must be >= 1, got 0"),
        (lambda: rope_cos_sum(torch.tensor([True]), 8), "distances must hold finite real numbers"),
        (lambda: rope_base_lower_bound(2, 100), "needs a base above 1e15"),
        (lambda: rope_base_lower_bound(8, 100, rtol=0.0), "rtol must be a finite number > 0, got 0.0"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
