"""Pair layouts: the permutation and its inverse."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import layout_permutation


@given(st.integers(1, 200).map(lambda n: 2 * n))
def test_permutations_are_inverse(d):
    fwd = layout_permutation(d, src="interleaved", dst="concat")
    back = layout_permutation(d, src="concat", dst="interleaved")
    assert sorted(fwd.tolist()) == list(range(d))
    assert torch.equal(fwd[back], torch.arange(d))
    assert torch.equal(layout_permutation(d, src="half", dst="concat"), torch.arange(d))


def test_small_case_by_hand():
    assert layout_permutation(6).tolist() == [0, 2, 4, 1, 3, 5]
    assert layout_permutation(6, src="half", dst="interleaved").tolist() == [0, 3, 1, 4, 2, 5]


def test_bad_input():
    with pytest.raises(ValueError, match="dim must be even.*got 5"):
        layout_permutation(5)
    with pytest.raises(ValueError, match="dst must be one of.*'blocked'"):
        layout_permutation(4, dst="blocked")
