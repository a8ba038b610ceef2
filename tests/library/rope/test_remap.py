"""Training-free remapping: RoPE's scores at the remapped distances, all within the trained range."""

import pytest
import torch
from helpers import rand
from hypothesis import given
from hypothesis import strategies as st

from posenc import (
    apply_rope,
    dual_chunk_distances,
    remapped_rope_scores,
    rerope_distances,
    rope_cos_sin,
    self_extend_distances,
    string_distances,
)


def explicit(q, k, q_pos, k_pos, base=10000.0):
    """Dot products of q rotated at q_pos[i, j] and k rotated at k_pos[i, j], pair by pair ([s, s])."""
    d = q.shape[-1]
    qc, qs = rope_cos_sin(q_pos, d, base=base, dtype=torch.float64)  # [s, s, d]
    kc, ks = rope_cos_sin(k_pos, d, base=base, dtype=torch.float64)
    n, m = q_pos.shape
    q_all, k_all = q[:, None, :].expand(n, m, d), k[None, :, :].expand(n, m, d)  # [s, s, d]
    return (apply_rope(q_all, qc, qs) * apply_rope(k_all, kc, ks)).sum(-1)


def causal(x):
    return torch.tril(torch.ones_like(x, dtype=torch.bool))


@given(seq_len=st.integers(1, 24), seed=st.integers(0, 2**16), base=st.sampled_from([1e4, 5e5]))
def test_plain_distances_give_rope_scores(seq_len, seed, base):
    q, k = rand(2, seq_len, 16, seed=seed)
    pos = torch.arange(seq_len)
    cos, sin = rope_cos_sin(pos, 16, base=base, dtype=torch.float64)
    ref = apply_rope(q, cos, sin) @ apply_rope(k, cos, sin).T
    ours = remapped_rope_scores(q, k, pos[:, None] - pos[None, :], base=base)
    assert torch.allclose(ours, ref, rtol=1e-10, atol=1e-10)


#: name: (the map at a length, its largest distance at that length (a bound for DCA), its exact window)
MAPS = {
    "rerope": (lambda s: rerope_distances(s, 5), lambda s: min(s - 1, 5), 5),
    "self_extend": (
        lambda s: self_extend_distances(s, 3, 6),
        lambda s: max(min(s - 1, 5), (s - 1) // 3 + 6 - 2 if s > 6 else 0),
        5,
    ),
    "dual_chunk": (lambda s: dual_chunk_distances(s, 8, 3), lambda s: 11, 3),
    "string": (lambda s: string_distances(s, 9, 2), lambda s: max(min(s - 1, 8), s - 1 - 9 + 2), 8),
}


@pytest.mark.parametrize("name", MAPS)
@given(seq_len=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_scores_equal_rope_with_the_query_at_the_distance_and_the_key_at_0(name, seq_len, seed):
    q, k = rand(2, seq_len, 8, seed=seed)
    rel = MAPS[name][0](seq_len)
    ours = remapped_rope_scores(q, k, rel)
    ref = explicit(q, k, rel, torch.zeros_like(rel))
    assert torch.allclose(ours, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", MAPS)
@pytest.mark.parametrize("seq_len", [1, 7, 20, 64])
def test_no_distance_exceeds_the_stated_maximum_and_none_is_negative(name, seq_len):
    make, largest, _ = MAPS[name]
    rel = make(seq_len)
    lower = rel[causal(rel)]
    assert lower.min() >= 0
    assert lower.max() <= largest(seq_len)
    if name != "dual_chunk":
        assert lower.max() == largest(seq_len)


@pytest.mark.parametrize("name", MAPS)
def test_inside_the_neighbour_window_every_distance_is_ropes(name):
    make, _, window = MAPS[name]
    rel = make(64)
    plain = torch.arange(64)[:, None] - torch.arange(64)[None, :]
    near = (plain >= 0) & (plain <= window)
    assert torch.equal(rel[near], plain[near])
    assert not torch.equal(rel[plain >= 0], plain[plain >= 0])  # and it does remap farther out
    upper = plain < 0
    assert torch.equal(rel[upper], plain[upper])  # above the diagonal: left to the causal mask


def test_self_extend_is_rope_at_grouped_positions():
    s, g, w = 30, 4, 8
    q, k = rand(2, s, 8, seed=3)
    pos = torch.arange(s)
    q_pos = (pos[:, None] // g + w - w // g).expand(s, s)
    k_pos = (pos[None, :] // g).expand(s, s)
    plain = pos[:, None] - pos[None, :]
    near = plain < w
    q_pos = torch.where(near, pos[:, None].expand(s, s), q_pos)
    k_pos = torch.where(near, pos[None, :].expand(s, s), k_pos)
    ours = remapped_rope_scores(q, k, self_extend_distances(s, g, w))
    ref = explicit(q, k, q_pos, k_pos)
    lower = causal(ours)
    assert torch.allclose(ours[lower], ref[lower], rtol=1e-10, atol=1e-10)


def test_dual_chunk_is_rope_with_keys_at_j_mod_s():
    s, w, n = 6, 2, 25
    q, k = rand(2, n, 8, seed=4)
    pos = torch.arange(n)
    apart = pos[:, None] // s - pos[None, :] // s
    q_pos = torch.where(
        apart == 0, (pos % s)[:, None], torch.where(apart == 1, (s + pos % s).clamp(max=s + w)[:, None], s + w)
    )
    k_pos = (pos % s)[None, :].expand(n, n)
    ours = remapped_rope_scores(q, k, dual_chunk_distances(n, s, w))
    ref = explicit(q, k, q_pos, k_pos)
    lower = causal(ours)
    assert torch.allclose(ours[lower], ref[lower], rtol=1e-10, atol=1e-10)


def test_settings_for_a_trained_length_stay_inside_it():
    trained, seq_len = 64, 256  # four times the trained length
    for rel in (
        rerope_distances(seq_len, trained - 1),
        self_extend_distances(seq_len, 8, 16),
        dual_chunk_distances(seq_len, 48, 15),
    ):
        assert rel[causal(rel)].max() <= trained - 1
    # STRING works inside the trained length: its largest distances are never used
    rel = string_distances(trained, trained // 3, 4)
    assert rel[causal(rel)].max() == trained - 1 - trained // 3 + 4


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: rerope_distances(0, 4), "seq_len must be >= 1, got 0"),
        (lambda: self_extend_distances(8, 0, 4), "group_size must be >= 1, got 0"),
        (lambda: dual_chunk_distances(8, 4, 5), r"local_window must be <= chunk_len \(4\), got 5"),
        (lambda: string_distances(8, 2, 3), r"window must be <= shift \(2\), got 3"),
        (lambda: remapped_rope_scores(rand(3, 8), rand(3, 8), torch.zeros(3, 2)), r"distances must be .* \[3, 3\]"),
        (lambda: remapped_rope_scores(rand(3, 7), rand(3, 7), torch.zeros(3, 3)), "q and k must be"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
