"""PoSE: the ids of one window (increasing, in range, chunked, starting at 0), coverage over many draws, bad input."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import pose_chunks, pose_position_ids


@given(st.integers(1, 64), st.integers(0, 500), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_ids_of_one_window(train_len, extra, num_chunks, seed):
    num_chunks = min(num_chunks, train_len)
    target_len = train_len + extra
    ids = pose_position_ids(train_len, target_len, num_chunks=num_chunks, generator=torch.Generator().manual_seed(seed))
    assert ids.dtype == torch.long and ids.shape == (train_len,)
    assert ids[0] == 0  # the first chunk starts at 0
    assert (ids.diff() > 0).all() and ids[-1] < target_len
    runs = pose_chunks(ids)
    assert 1 <= len(runs) <= num_chunks  # equal skips join chunks into one run
    assert all(torch.equal(run, torch.arange(run[0], run[0] + run.numel())) for run in runs)
    assert torch.equal(torch.cat(runs), ids)


def test_seeded_draws_repeat():
    first = pose_position_ids(16, 128, num_chunks=3, generator=torch.Generator().manual_seed(7))
    again = pose_position_ids(16, 128, num_chunks=3, generator=torch.Generator().manual_seed(7))
    assert torch.equal(first, again)


def test_no_room_means_plain_positions():
    assert torch.equal(pose_position_ids(10, 10, num_chunks=3), torch.arange(10))


@pytest.mark.parametrize("num_chunks", [2, 3])
def test_relative_distances_cover_the_target_window(num_chunks):
    """Over many windows of 8 tokens, every distance 0 .. target - 1 = 31 is seen."""
    gen = torch.Generator().manual_seed(0)
    seen = torch.zeros(32, dtype=torch.bool)
    for _ in range(1000):
        ids = pose_position_ids(8, 32, num_chunks=num_chunks, generator=gen)
        seen[(ids[:, None] - ids[None, :]).clamp(min=0).flatten()] = True
    assert seen.all()
    # without skips a window of 8 sees distances up to 7 only
    plain = torch.arange(8)
    assert (plain[:, None] - plain[None, :]).max() == 7


def test_one_chunk_is_one_run_from_zero():
    ids = pose_position_ids(12, 100, num_chunks=1, generator=torch.Generator().manual_seed(3))
    assert torch.equal(ids, torch.arange(12))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: pose_position_ids(16, 8), ValueError, r"target_len must be >= train_len = 16, got 8"),
        (lambda: pose_position_ids(4, 8, num_chunks=5), ValueError, r"num_chunks must be <= train_len = 4 .*got 5"),
        (lambda: pose_position_ids(0, 8), ValueError, r"train_len must be >= 1, got 0"),
        (lambda: pose_position_ids(4, 8, generator=3), TypeError, r"generator must be a torch\.Generator or None"),
        (lambda: pose_chunks(torch.tensor([0, 2, 2])), ValueError, r"position_ids must increase strictly"),
        (lambda: pose_chunks(torch.tensor([0.0, 1.0])), ValueError, r"position_ids must be a 1-D integer tensor"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
