"""The chapter "Going further: RoPE at long range": its claims, asserted again through the library."""

import json
import math

import pytest
import torch
from repo import ROOT

from posenc import (
    apply_rope,
    cos_sin_from_inv_freq,
    dual_chunk_distances,
    from_hf_config,
    hope_inv_freq,
    p_rope_inv_freq,
    remapped_rope_scores,
    rerope_distances,
    rope_base_lower_bound,
    rope_cos_sin,
    rope_cos_sum,
    rope_critical_dim,
    rope_inv_freq,
    rope_turning_pairs,
    self_extend_distances,
    sink_softmax,
    streaming_kept,
    streaming_scores,
    string_distances,
)

F64 = torch.float64


def test_llama_2_sized_heads_turn_46_pairs_in_4096_and_the_two_ladders_keep_48_and_46():
    inv, _ = rope_inv_freq(128, base=1e4)
    assert int(rope_turning_pairs(inv, 4096).sum()) == 46
    assert int((p_rope_inv_freq(128, 0.75) > 0).sum()) == 48
    hope = hope_inv_freq(128, 4096)
    assert torch.equal(hope > 0, rope_turning_pairs(inv, 4096)) and torch.equal(hope[:46], inv[:46])


def test_the_dropped_pairs_score_their_plain_dot_product_at_any_distance():
    inv = p_rope_inv_freq(128, 0.75)
    q, k = torch.randn(2, 128, generator=torch.Generator().manual_seed(0), dtype=F64)
    dropped = torch.cat((inv == 0, inv == 0))
    qd, kd = q * dropped, k * dropped
    for m, n in [(0, 0), (1000, 0), (5000, 7), (123456, 99)]:
        cos, sin = cos_sin_from_inv_freq(torch.tensor([m, n], dtype=F64), inv)
        got = apply_rope(qd, cos[0], sin[0]) @ apply_rope(kd, cos[1], sin[1])
        assert abs(got.item() - (qd @ kd).item()) < 1e-12


def test_the_base_bound_for_8192_lies_between_10000_and_llama_3s_500000():
    bound = rope_base_lower_bound(128, 8192, rtol=1e-3)
    m = torch.arange(8192)
    assert bool((rope_cos_sum(m, 128, base=bound) >= 0).all())
    assert bool((rope_cos_sum(m, 128, base=bound / 1.001) < 0).any())
    assert 1e4 < bound < 5e5
    assert f"{bound:.3g}" == "1.67e+05"


#: The chapter's table: which of the book's models have a base at or above the bound.
CLEARS = {
    "GPT-NeoX-20B": False,
    "Code-Llama-7B": True,
    "Llama-3.1-8B": True,
    "Qwen3-8B": False,
    "Phi-3.5-mini": False,
    "DeepSeek-V3": False,
}


@pytest.mark.parametrize("name", CLEARS)
def test_the_table_of_shipped_models(name):
    config = json.loads((ROOT / "posenc_book" / "data" / "model_configs.json").read_text())[name]["config"]
    layer = from_hf_config(config)[0]
    ctx = layer.rope_parameters.get("original_max_position_embeddings") or config["max_position_embeddings"]
    crit = rope_critical_dim(layer.rotary_dim, ctx, base=layer.base)
    assert crit == 2 * int(rope_turning_pairs(rope_inv_freq(layer.rotary_dim, base=layer.base)[0], ctx + 1).sum())
    bound = rope_base_lower_bound(layer.rotary_dim, ctx, rtol=1e-2)
    assert (layer.base >= bound) is CLEARS[name]


def test_the_four_maps_at_24_tokens_stay_within_a_trained_length_of_16():
    maps = {
        "rerope": (rerope_distances(24, 8), 8, 8),
        "self_extend": (self_extend_distances(24, 3, 6), 11, 5),
        "dual_chunk": (dual_chunk_distances(24, 10, 5), 15, 5),
        "string": (string_distances(24, 12, 4), 15, 11),
    }
    causal = torch.tril(torch.ones(24, 24, dtype=torch.bool))
    plain = torch.arange(24)[:, None] - torch.arange(24)[None, :]
    q, k = torch.randn(2, 24, 32, generator=torch.Generator().manual_seed(1), dtype=F64)
    for name, (rel, largest, window) in maps.items():
        assert rel[causal].max().item() == largest <= 15 and rel[causal].min() >= 0, name
        inside = (plain >= 0) & (plain <= window)
        assert torch.equal(rel[inside], plain[inside]), name
        cos, sin = rope_cos_sin(rel, 32, dtype=F64)
        q_at_d = apply_rope(q[:, None, :].expand(24, 24, 32), cos, sin)
        assert torch.allclose((q_at_d * k[None]).sum(-1), remapped_rope_scores(q, k, rel), atol=1e-10), name


def test_a_streaming_cache_needs_keys_stored_before_rotation():
    q_raw, k_raw = torch.randn(2, 40, 16, generator=torch.Generator().manual_seed(2), dtype=F64)
    kept = streaming_kept(40, num_sinks=4, window=8)
    assert kept.tolist() == [0, 1, 2, 3, *range(32, 40)]
    cos, sin = rope_cos_sin(torch.arange(40), 16, dtype=F64)
    in_cache = remapped_rope_scores(q_raw[-1:], k_raw[kept], (11 - torch.arange(12))[None])[0]
    assert torch.allclose(streaming_scores(q_raw[-1], k_raw[kept]), in_cache, atol=1e-10)
    wrong = apply_rope(k_raw, cos, sin)[kept] @ apply_rope(q_raw[-1], cos[11], sin[11])
    assert (wrong - in_cache).abs().max() > 1e-2


def test_a_sink_of_log_4_against_four_equal_keys_takes_half():
    probs = sink_softmax(torch.zeros(2, 1, 4, dtype=F64), torch.tensor([math.log(4.0), -math.inf], dtype=F64))
    assert torch.allclose(probs[0], torch.full((1, 4), 0.125, dtype=F64), atol=1e-15)
    assert torch.allclose(probs[1], torch.full((1, 4), 0.25, dtype=F64), atol=1e-15)


def test_the_exercises():
    assert rope_critical_dim(128, 8192, base=500000.0) == 70
    assert int(rope_turning_pairs(rope_inv_freq(128, base=500000.0)[0], 8193).sum()) == 35
    assert self_extend_distances(208, 4, 16).max().item() == 63
    assert self_extend_distances(209, 4, 16).max().item() == 64
    q, k = torch.randn(2, 64, generator=torch.Generator().manual_seed(5), dtype=F64)
    cos, sin = cos_sin_from_inv_freq(torch.tensor([4000.0, 9999.0], dtype=F64), p_rope_inv_freq(64, 0.0))
    assert abs((apply_rope(q, cos[0], sin[0]) @ apply_rope(k, cos[1], sin[1])).item() - (q @ k).item()) < 1e-12
