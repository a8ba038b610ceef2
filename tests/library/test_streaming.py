"""StreamingLLM's cache (positions in the cache, keys rotated after caching) and gpt-oss's sink logit."""

import math
from types import SimpleNamespace

import pytest
import torch
from helpers import rand
from hypothesis import given
from hypothesis import strategies as st

from posenc import apply_rope, remapped_rope_scores, rope_cos_sin, sink_softmax, streaming_kept, streaming_scores


@given(seq_len=st.integers(1, 200), num_sinks=st.integers(0, 8), window=st.integers(1, 50))
def test_the_cache_holds_the_sinks_and_the_last_window(seq_len, num_sinks, window):
    kept = streaming_kept(seq_len, num_sinks=num_sinks, window=window)
    assert len(kept) == min(seq_len, num_sinks + window)
    assert torch.equal(kept, torch.unique(kept))  # increasing, no repeats
    if seq_len > num_sinks + window:
        assert kept[:num_sinks].tolist() == list(range(num_sinks))
        assert kept[num_sinks:].tolist() == list(range(seq_len - window, seq_len))


@given(n=st.integers(1, 30), seed=st.integers(0, 2**16))
def test_cache_scores_are_rope_at_the_cache_distances(n, seed):
    q = rand(16, seed=seed)
    keys = rand(n, 16, seed=seed + 1)
    ours = streaming_scores(q, keys)
    rel = (n - 1 - torch.arange(n))[None, :]  # the query at slot n - 1, key c at slot c
    assert torch.allclose(ours, remapped_rope_scores(q[None], keys, rel)[0], rtol=1e-10, atol=1e-10)


def test_keys_rotated_before_eviction_no_longer_score_as_the_cache_positions_say():
    seq_len, d = 40, 16
    q_raw, k_raw = rand(seq_len, d, seed=1), rand(seq_len, d, seed=2)
    kept = streaming_kept(seq_len, num_sinks=2, window=6)
    cos, sin = rope_cos_sin(torch.arange(seq_len), d, dtype=torch.float64)
    rotated_at_arrival = apply_rope(k_raw, cos, sin)[kept]  # cached after rotation, then evicted
    slot = len(kept) - 1
    q_at_slot = apply_rope(q_raw[-1], cos[slot], sin[slot])
    wrong = rotated_at_arrival @ q_at_slot
    right = streaming_scores(q_raw[-1], k_raw[kept])
    assert (wrong - right).abs().max() > 1e-2
    # the pre-rotated keys give RoPE's scores at the *original* distances, up to 39, beyond the cache
    q_at_end = apply_rope(q_raw[-1], cos[-1], sin[-1])
    original = remapped_rope_scores(q_raw[-1:], k_raw[kept], (seq_len - 1 - kept)[None, :])[0]
    assert torch.allclose(rotated_at_arrival @ q_at_end, original, rtol=1e-10, atol=1e-10)


@given(h=st.integers(1, 4), k_len=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_the_keys_share_one_minus_the_sinks_share(h, k_len, seed):
    scores = rand(2, h, 3, k_len, seed=seed) * 3
    sinks = rand(h, seed=seed + 1) * 3
    p = sink_softmax(scores, sinks)
    share = torch.exp(sinks)[:, None] / (torch.exp(scores).sum(-1) + torch.exp(sinks)[:, None])
    assert torch.allclose(p.sum(-1), 1 - share, rtol=1e-12, atol=1e-12)
    assert bool((p.sum(-1) < 1).all())


@given(h=st.integers(1, 4), k_len=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_a_sink_of_minus_infinity_is_plain_softmax(h, k_len, seed):
    scores = rand(h, 2, k_len, seed=seed)
    p = sink_softmax(scores, torch.full((h,), -math.inf, dtype=torch.float64))
    assert torch.allclose(p, torch.softmax(scores, -1), rtol=1e-12, atol=1e-14)


def test_masked_keys_get_nothing():
    scores = torch.tensor([[[0.0, -math.inf, 1.0]]], dtype=torch.float64)
    p = sink_softmax(scores, torch.tensor([0.5], dtype=torch.float64))
    assert p[0, 0, 1] == 0


def test_equal_to_transformers_gpt_oss_eager_attention():
    gpt_oss = pytest.importorskip("transformers.models.gpt_oss.modeling_gpt_oss")
    b, h, s, d = 2, 3, 5, 8
    q, k, v = rand(3, b, h, s, d, seed=7)
    sinks = rand(h, seed=8)
    module = SimpleNamespace(sinks=sinks, num_key_value_groups=1, training=False)
    mask = torch.triu(torch.full((s, s), -math.inf, dtype=torch.float64), 1)
    _, theirs = gpt_oss.eager_attention_forward(module, q, k, v, mask, scaling=d**-0.5)
    ours = sink_softmax(q @ k.transpose(-1, -2) * d**-0.5 + mask, sinks)
    assert torch.allclose(ours, theirs, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: streaming_kept(0, num_sinks=4, window=8), "seq_len must be >= 1, got 0"),
        (lambda: streaming_kept(10, num_sinks=-1, window=8), "num_sinks must be >= 0, got -1"),
        (lambda: streaming_scores(rand(8), rand(3, 6)), "q must be"),
        (lambda: sink_softmax(rand(2, 3, 3), rand(3)), r"sinks \[h\]"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
