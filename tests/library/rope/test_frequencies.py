"""p-RoPE and HoPE: the fast pairs keep RoPE's frequencies, the dropped pairs carry no position."""

import math

import pytest
import torch
from helpers import rand
from hypothesis import given
from hypothesis import strategies as st

from posenc import apply_rope, cos_sin_from_inv_freq, hope_inv_freq, p_rope_inv_freq, rope_inv_freq, rope_turning_pairs


def score(q, k, inv_freq, m, n):
    """q at position m, k at n, rotated (half layout) by the given frequencies."""
    cos, sin = cos_sin_from_inv_freq(torch.tensor([m, n], dtype=torch.float64), inv_freq)
    return apply_rope(q, cos[0], sin[0]) @ apply_rope(k, cos[1], sin[1])


@pytest.mark.parametrize(
    ("head_dim", "p", "kept"), [(8, 0.5, 2), (8, 0.0, 0), (8, 1.0, 4), (128, 0.75, 48), (96, 0.3, 14)]
)
def test_p_rope_keeps_the_fastest_floor_p_half_d_pairs(head_dim, p, kept):
    inv, _ = rope_inv_freq(head_dim)
    ours = p_rope_inv_freq(head_dim, p)
    assert int((ours > 0).sum()) == kept == math.floor(p * head_dim / 2)
    assert torch.equal(ours[:kept], inv[:kept]) and not ours[kept:].any()


def test_p_rope_with_p_1_is_rope():
    assert torch.equal(p_rope_inv_freq(64, 1.0, base=5e5), rope_inv_freq(64, base=5e5)[0])


@given(
    p=st.floats(0.0, 1.0),
    m=st.integers(0, 10**6),
    n=st.integers(0, 10**6),
    seed=st.integers(0, 2**16),
)
def test_dropped_pairs_add_a_score_that_no_position_changes(p, m, n, seed):
    d = 32
    q, k = rand(2, d, seed=seed)
    inv = p_rope_inv_freq(d, p)
    dropped = torch.cat((inv == 0, inv == 0))  # the channels of the dropped pairs (half layout)
    qd, kd = q * dropped, k * dropped
    assert math.isclose(score(qd, kd, inv, m, n).item(), (qd @ kd).item(), rel_tol=1e-12, abs_tol=1e-12)


@given(m=st.integers(0, 4096), n=st.integers(0, 4096), shift=st.integers(0, 10**5), seed=st.integers(0, 2**16))
def test_p_rope_scores_still_depend_on_the_distance_only(m, n, shift, seed):
    q, k = rand(2, 16, seed=seed)
    inv = p_rope_inv_freq(16, 0.5)
    assert math.isclose(
        score(q, k, inv, m, n).item(), score(q, k, inv, m + shift, n + shift).item(), rel_tol=1e-9, abs_tol=1e-9
    )


def test_turning_pairs_are_those_whose_period_fits():
    inv, _ = rope_inv_freq(128, base=1e4)
    turns = rope_turning_pairs(inv, 4096)
    periods = 2 * math.pi / inv
    assert torch.equal(turns, periods <= 4095)
    # LLaMA 2's numbers: pairs 0..45 turn within 4096 positions, 46..63 do not
    assert int(turns.sum()) == 46 and bool(turns[45]) and not bool(turns[46])


def test_turning_pairs_at_the_edge_and_a_zero_frequency():
    inv = torch.tensor([2 * math.pi / 10, 0.0], dtype=torch.float64)
    assert rope_turning_pairs(inv, 11).tolist() == [True, False]  # 10 steps: exactly one turn
    assert rope_turning_pairs(inv, 10).tolist() == [False, False]


@pytest.mark.parametrize(("head_dim", "train_len", "base"), [(128, 4096, 1e4), (128, 8192, 5e5), (64, 2048, 1e4)])
def test_hope_keeps_exactly_the_turning_pairs(head_dim, train_len, base):
    inv, _ = rope_inv_freq(head_dim, base=base)
    ours = hope_inv_freq(head_dim, train_len, base=base)
    turns = rope_turning_pairs(inv, train_len)
    assert torch.equal(ours, torch.where(turns, inv, torch.zeros_like(inv)))
    assert bool(turns[0]) and not bool(turns[-1])


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: p_rope_inv_freq(8, 1.5), r"p must be in \[0, 1\], got 1\.5"),
        (lambda: p_rope_inv_freq(7, 0.5), "head_dim must be even"),
        (lambda: hope_inv_freq(8, 0), "train_len must be >= 1, got 0"),
        (lambda: rope_turning_pairs(torch.tensor([-1.0]), 4), "inv_freq must be a 1-d tensor of finite numbers >= 0"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
