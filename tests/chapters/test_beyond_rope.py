"""Chapter 'Positions that are learned, counted or skipped': its claims, re-asserted through the library."""

import pytest
import torch

from posenc import (
    CoPE,
    T5RelativeBias,
    alibi_bias,
    alibi_slopes,
    cope_bias,
    cope_logits,
    cope_positions,
    fire_alibi_layers,
    fire_bias,
    fire_distance,
    fire_t5_layers,
    pose_chunks,
    pose_position_ids,
)

F64 = torch.float64


@pytest.mark.parametrize("n", [128, 1024, 8192])
def test_fire_maps_every_length_into_the_unit_interval(n):
    x = fire_distance(1, n, c=1.0, threshold=64.0)[0]
    assert x[0].item() == 1.0 and x[-1].item() == 0.0 and (x.diff() < 0).all()


def test_fire_below_the_threshold_keeps_distances_apart():
    assert fire_distance(1, 11, threshold=64.0)[0, 0].item() < 0.6


def test_fire_gives_alibi_with_the_identity_transform_up_to_the_threshold():
    layers = fire_alibi_layers(alibi_slopes(8), threshold=512.0)
    assert torch.equal(fire_bias(300, 300, layers, transform="identity", threshold=512.0), alibi_bias(8, 300, 300))
    short = fire_alibi_layers(alibi_slopes(8), threshold=64.0)
    past = fire_bias(100, 100, short, transform="identity", threshold=64.0)
    assert torch.equal(past[:, :65], alibi_bias(8, 100, 100)[:, :65])
    assert not torch.equal(past[:, 65:], alibi_bias(8, 100, 100)[:, 65:])


def test_fire_with_a_linear_f_and_the_log_transform_is_not_alibi():
    """The chapter's reason for the identity transform: after the log, a linear f bends."""
    layers = fire_alibi_layers(alibi_slopes(1), threshold=512.0)
    log_bias = fire_bias(50, 50, layers, transform="log", threshold=512.0)
    assert not torch.allclose(log_bias, alibi_bias(1, 50, 50))


@pytest.mark.parametrize("transform", ["log", "identity"])
def test_fire_gives_t5_to_the_last_bit(transform):
    t5 = T5RelativeBias(num_heads=4, bidirectional=False)
    with torch.no_grad():
        t5.embedding.weight.copy_(torch.randn(32, 4, generator=torch.Generator().manual_seed(0)))
    layers = fire_t5_layers(t5.embedding.weight, c=1.0, threshold=512.0, transform=transform)
    assert [tuple(w.shape) for w, _ in layers] == [(31, 1), (31, 31), (32, 31), (4, 32)]
    n = 300
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    fire = fire_bias(n, n, layers, c=1.0, threshold=512.0, transform=transform)
    assert torch.equal(fire[:, causal], t5(n, n)[:, causal]) and torch.isneginf(fire[:, ~causal]).all()


def test_cope_with_every_gate_open_counts_from_one_and_reads_one_vector_per_distance():
    s = 5
    p = cope_positions(torch.ones(s, s, dtype=F64))
    assert p.diagonal().tolist() == [1.0] * s and p[-1].tolist() == [5.0, 4.0, 3.0, 2.0, 1.0]
    gen = torch.Generator().manual_seed(3)
    q, table = torch.randn(s, 8, generator=gen, dtype=F64), torch.randn(s + 1, 8, generator=gen, dtype=F64)
    term = cope_bias(q, p, table)
    for i in range(s):
        for j in range(i + 1):
            assert torch.allclose(term[i, j], q[i] @ table[i - j + 1], rtol=1e-12, atol=1e-12)


def test_cope_counts_sentences_when_gates_open_on_full_stops():
    words = "the cat sat . it slept . then it woke up .".split()
    stop = torch.tensor([w == "." for w in words], dtype=F64)
    n = len(words)
    p = cope_positions(stop.expand(n, n))
    assert p[-1].tolist() == [3.0] * 4 + [2.0] * 3 + [1.0] * 5
    assert p[8].tolist()[:9] == [2.0] * 4 + [1.0] * 3 + [0.0, 0.0]
    soft = cope_positions(torch.sigmoid(8.0 * (2 * stop - 1)).expand(n, n))
    assert (soft[-1] - p[-1]).abs().max() < 0.01


def test_cope_module_starts_as_plain_attention():
    qk = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(4))
    module = CoPE(head_dim=8, num_positions=16)
    logits = module(qk[0], qk[1])
    tri = torch.ones(6, 6, dtype=torch.bool).tril()
    assert torch.allclose(logits[tri], (qk[0] @ qk[1].T / 8**0.5)[tri]) and torch.isneginf(logits[~tri]).all()
    assert torch.equal(logits, cope_logits(qk[0], qk[1], module.pos_emb))


def test_pose_windows_of_16_cover_every_distance_of_64():
    gen = torch.Generator().manual_seed(2)
    seen = torch.zeros(64, dtype=torch.long)
    for _ in range(300):
        ids = pose_position_ids(16, 64, num_chunks=2, generator=gen)
        assert ids[0] == 0 and (ids.diff() > 0).all() and ids[-1] < 64
        assert all((run.diff() == 1).all() for run in pose_chunks(ids))
        gaps = ids[:, None] - ids[None, :]
        seen += torch.bincount(gaps[gaps >= 0], minlength=64)
    assert (seen > 0).all()
