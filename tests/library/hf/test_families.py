"""posenc.hf.families (Llama 4, DeepSeek, ALiBi, T5) against transformers' modules, with tiny offline configurations.

References, per family:

* Llama 4 and DeepSeek-V2/V3: the attention module itself (``Llama4TextAttention``,
  ``DeepseekV2Attention``, ``DeepseekV3Attention``) runs its forward with transformers'
  rotary embedding class; an attention function registered with ``AttentionInterface``
  records the query and key states it receives (after RoPE, temperature, the cache) and
  its ``scaling``; the reference logits are ``query @ repeat_kv(key).T * scaling``, the
  eager formula. Our inputs are the module's own projections before any position step.
* BLOOM, MPT, Falcon: logits from each model's ``build_alibi_tensor`` (MPT:
  ``build_mpt_alibi_tensor``) and the attention module's scaling, and the module's own
  attention probabilities (``softmax`` of our scores must equal them).
* T5: ``T5Attention.compute_bias`` of a decoder block with the same weights.
"""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import alibi_bias, from_hf_config, rope_inv_freq
from posenc.hf.families import build_alibi, build_deepseek, build_llama4, build_t5

transformers = pytest.importorskip("transformers")
from transformers import AttentionInterface, DynamicCache  # noqa: E402
from transformers.models.bloom import modeling_bloom  # noqa: E402
from transformers.models.deepseek_v2 import modeling_deepseek_v2  # noqa: E402
from transformers.models.deepseek_v3 import modeling_deepseek_v3  # noqa: E402
from transformers.models.falcon import modeling_falcon  # noqa: E402
from transformers.models.llama4 import modeling_llama4  # noqa: E402
from transformers.models.mpt import modeling_mpt  # noqa: E402
from transformers.models.t5 import modeling_t5  # noqa: E402

TOL = {"atol": 1e-5, "rtol": 1e-5}  # float32, as transformers' own tests of these models
RECORD: dict = {}


def _record(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """An eager attention that keeps what it was given and its pre-softmax logits."""
    rep = query.shape[1] // key.shape[1]
    key_r, value_r = key.repeat_interleave(rep, dim=1), value.repeat_interleave(rep, dim=1)
    logits = torch.matmul(query, key_r.transpose(2, 3)) * scaling
    RECORD.update(q=query, k=key, logits=logits)
    probs = torch.softmax(logits, dim=-1)
    return torch.matmul(probs, value_r).transpose(1, 2).contiguous(), probs


AttentionInterface.register("posenc_record", _record)


def _heads(x: torch.Tensor, width: int) -> torch.Tensor:
    return x.view(*x.shape[:2], -1, width).transpose(1, 2)  # [b, s, h * d] -> [b, h, s, d]


# ---------------------------------------------------------------------------
# Llama 4
# ---------------------------------------------------------------------------


def llama4_config(**kwargs):
    cfg = modeling_llama4.Llama4TextConfig(
        num_hidden_layers=4, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=32, intermediate_size_mlp=32, num_local_experts=2, vocab_size=32,
        use_qk_norm=False, floor_scale=4, attn_scale=0.5, **kwargs,
    )  # fmt: skip
    cfg._attn_implementation = "posenc_record"
    return cfg


LLAMA3 = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 64}  # fmt: skip


def test_llama4_layer_pattern_and_rows():
    layers = build_llama4(llama4_config().to_dict())
    assert [layer.kind for layer in layers] == ["rope", "rope", "rope", "nope"]
    assert layers[0].row()["theta"] == 500000.0 and layers[0].row()["layout"] == "interleaved"
    assert layers[3].row()["nope_temperature"] == "1 + 0.5 * log1p(floor((p + 1) / 4))"
    explicit = build_llama4({**llama4_config().to_dict(), "no_rope_layers": [0, 1, 1, 1]})
    assert [layer.kind for layer in explicit] == ["nope", "rope", "rope", "rope"]
    wrapped = build_llama4({"model_type": "llama4", "text_config": llama4_config().to_dict()})
    assert [layer.kind for layer in wrapped] == ["rope", "rope", "rope", "nope"]
    off = build_llama4(llama4_config(attn_temperature_tuning=False).to_dict())
    assert off[3].row()["nope_temperature"] is None


@pytest.mark.parametrize("rope", [None, LLAMA3], ids=["default", "llama3"])
def test_llama4_decode_matches_attention_module(rope):
    """Prefill 7 tokens into a cache, then 3 more: the logits of the 3 new queries over all 10 keys."""
    cfg = llama4_config(rope_parameters=rope)
    layers = build_llama4(cfg.to_dict())
    torch.manual_seed(0)
    h = torch.randn(2, 10, 64)
    position_ids = torch.arange(10)[None]
    freqs = modeling_llama4.Llama4TextRotaryEmbedding(cfg)(h, position_ids)
    for i in (0, 3):  # a RoPE layer and the NoPE layer with its temperature
        attn = modeling_llama4.Llama4TextAttention(cfg, i).eval()
        cache = DynamicCache()
        with torch.no_grad():
            attn(h[:, :7], freqs[:, :7], None, past_key_values=cache)
            attn(h[:, 7:], freqs[:, 7:], None, past_key_values=cache)
            q, k = _heads(attn.q_proj(h[:, 7:]), 16), _heads(attn.k_proj(h), 16)
            q_enc, k_enc = layers[i].apply(q, k, position_ids)
            torch.testing.assert_close(layers[i].scores(q, k, position_ids), RECORD["logits"], **TOL)
        torch.testing.assert_close(q_enc, RECORD["q"], **TOL)
        torch.testing.assert_close(k_enc, RECORD["k"], **TOL)


def test_llama4_rope_far_positions_match():
    cfg = llama4_config(rope_parameters=LLAMA3)
    layer = build_llama4(cfg.to_dict())[0]
    torch.manual_seed(1)
    h = torch.randn(2, 6, 64)
    position_ids = torch.tensor([[1000, 1001, 1002, 1003, 1004, 1005], [3, 9, 30, 31, 200, 4000]])
    attn = modeling_llama4.Llama4TextAttention(cfg, 0).eval()
    with torch.no_grad():
        attn(h, modeling_llama4.Llama4TextRotaryEmbedding(cfg)(h, position_ids), None)
        scores = layer.scores(_heads(attn.q_proj(h), 16), _heads(attn.k_proj(h), 16), position_ids)
    torch.testing.assert_close(scores, RECORD["logits"], atol=2e-5, rtol=2e-5)


def test_llama4_top_level_original_length_wins_as_in_transformers():
    """A config.json with the trained length both at the top level (16) and inside the RoPE
    parameters (64): transformers' rope init reads the top-level one, and so does posenc."""
    cfg = llama4_config(rope_parameters=copy.deepcopy(LLAMA3), original_max_position_embeddings=16)
    raw = {**cfg.to_dict(), "rope_parameters": copy.deepcopy(LLAMA3), "original_max_position_embeddings": 16}
    params = dict(build_llama4(raw)[0].rope_parameters)
    ours, _ = rope_inv_freq(16, base=params.pop("rope_theta"), scaling=params)
    theirs = modeling_llama4.Llama4TextRotaryEmbedding(cfg).inv_freq
    torch.testing.assert_close(ours.float(), theirs.float(), atol=1e-6, rtol=1e-6)


# ---------------------------------------------------------------------------
# DeepSeek-V2 / V3
# ---------------------------------------------------------------------------

YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32,
        "mscale": 0.8, "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1}  # fmt: skip


def deepseek_setup(version: int, rope, interleave: bool = True):
    module = modeling_deepseek_v3 if version == 3 else modeling_deepseek_v2
    config_class = module.DeepseekV3Config if version == 3 else module.DeepseekV2Config
    extra = {"rope_interleave": interleave} if version == 3 else {}
    cfg = config_class(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=None,
        kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8, intermediate_size=32,
        moe_intermediate_size=16, n_routed_experts=4, vocab_size=32, max_position_embeddings=128,
        rope_parameters=rope, **extra,
    )  # fmt: skip
    cfg._attn_implementation = "posenc_record"
    attention = module.DeepseekV3Attention if version == 3 else module.DeepseekV2Attention
    rotary = module.DeepseekV3RotaryEmbedding if version == 3 else module.DeepseekV2RotaryEmbedding
    return cfg, attention(cfg, 0).eval(), rotary(cfg)


def deepseek_qk(attn, h):
    """The module's q ``[b, h, s, nope + rope]`` and per-head k ``[k_nope | k_rot]``, before RoPE."""
    q = _heads(attn.q_proj(h), 16)
    kv_nope, k_rot = torch.split(attn.kv_a_proj_with_mqa(h), [16, 8], dim=-1)
    k_nope = _heads(attn.kv_b_proj(attn.kv_a_layernorm(kv_nope)), 16)[..., :8]  # [b, h, s, nope]
    k_rot = k_rot[:, None].expand(-1, 4, -1, -1)  # the one shared rotary head, repeated: [b, h, s, rope]
    return q, torch.cat((k_nope, k_rot), dim=-1)


@pytest.mark.parametrize(
    ("version", "rope", "interleave"),
    [(3, None, True), (3, None, False), (3, YARN, True), (3, YARN, False), (2, None, True), (2, YARN, True)],
    ids=["v3-interleave", "v3-half", "v3-yarn-interleave", "v3-yarn-half", "v2", "v2-yarn"],
)
def test_deepseek_matches_attention_module(version, rope, interleave):
    cfg, attn, rotary = deepseek_setup(version, rope, interleave)
    layer = build_deepseek(cfg.to_dict())[0]
    assert layer.softmax_scale == pytest.approx(attn.scaling, rel=1e-15)
    torch.manual_seed(2)
    h = torch.randn(2, 9, 64)
    position_ids = torch.arange(9)[None] + torch.tensor([[0], [50]])
    with torch.no_grad():
        attn(h, position_embeddings=rotary(h, position_ids), attention_mask=None)
        q, k = deepseek_qk(attn, h)
        q_enc, k_enc = layer.apply(q, k, position_ids)
        scores = layer.scores(q, k, position_ids)
    torch.testing.assert_close(q_enc, RECORD["q"], **TOL)
    torch.testing.assert_close(k_enc, RECORD["k"], **TOL)
    torch.testing.assert_close(scores, RECORD["logits"], **TOL)


def test_deepseek_yarn_mscale_changes_the_softmax_scale():
    cfg, attn, _ = deepseek_setup(3, YARN)
    layer = build_deepseek(cfg.to_dict())[0]
    # (0.1 * mscale_all_dim * ln 4 + 1) ** 2 / sqrt(16)
    assert layer.softmax_scale == pytest.approx((0.1 * torch.log(torch.tensor(4.0)).item() + 1) ** 2 / 4)
    assert layer.row() | {"softmax_scale": None} == {
        "scheme": "mla_rope", "theta": 10000.0, "scaling": "yarn x4", "rotary": 8, "layout": "interleaved",
        "nope_temperature": None, "softmax_scale": None,
    }  # fmt: skip


@settings(derandomize=True, deadline=None, database=None, max_examples=20)
@given(shift=st.integers(0, 3000), version=st.sampled_from([2, 3]))
def test_rope_scores_depend_on_relative_positions_only(shift, version):
    cfg, _, _ = deepseek_setup(version, None)
    layer = build_deepseek(cfg.to_dict())[0]
    g = torch.Generator().manual_seed(shift)
    q, k = torch.randn(1, 4, 5, 16, generator=g), torch.randn(1, 4, 5, 16, generator=g)
    positions = torch.arange(5)[None]
    base = layer.scores(q, k, positions)
    # float32 angles: shifting by up to 3000 moves the logits by float32 rounding only
    torch.testing.assert_close(layer.scores(q, k, positions + shift), base, atol=2e-4, rtol=1e-4)


# ---------------------------------------------------------------------------
# BLOOM, MPT, Falcon
# ---------------------------------------------------------------------------

MASK = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1]])  # left padding in row 0
CUMULATIVE = (MASK.cumsum(-1) - 1) * MASK  # the positions build_alibi_tensor reads from the mask


def test_bloom_matches_build_alibi_tensor_and_attention():
    cfg = modeling_bloom.BloomConfig(hidden_size=48, n_head=6, n_layer=2)
    layer = build_alibi(cfg.to_dict())[0]
    attn = modeling_bloom.BloomAttention(cfg, layer_idx=0).eval()
    torch.manual_seed(3)
    h = torch.randn(2, 8, 48)
    alibi = modeling_bloom.build_alibi_tensor(MASK, 6, torch.float32)  # [b * h, 1, s]
    with torch.no_grad():
        q, k, _ = (t.contiguous() for t in attn._reshape(attn.query_key_value(h)))  # [b, h, s, d] each
        # BloomAttention: alibi.baddbmm(q, k^T, beta, alpha = 1 / sqrt(d))
        ref = alibi.baddbmm(q.flatten(0, 1), k.flatten(0, 1).transpose(1, 2), beta=attn.beta,
                            alpha=attn.inv_norm_factor).view(2, 6, 8, 8)  # fmt: skip
        scores = layer.scores(q, k, CUMULATIVE)
        probs = attn(h, h, alibi, None, output_attentions=True)[1]
    torch.testing.assert_close(scores, ref, **TOL)
    torch.testing.assert_close(torch.softmax(scores, -1), probs, **TOL)


def test_mpt_matches_build_mpt_alibi_tensor_and_attention():
    for scale in (None, 0.3):
        cfg = modeling_mpt.MptConfig(d_model=48, n_heads=6, n_layers=1, max_seq_len=32,
                                     attn_config={"softmax_scale": scale})  # fmt: skip
        layer = build_alibi(cfg.to_dict())[0]
        attn = modeling_mpt.MptAttention(cfg, 0).eval()
        torch.manual_seed(4)
        h = torch.randn(2, 8, 48)
        bias = modeling_mpt.build_mpt_alibi_tensor(6, 32)  # [h, 1, max_seq_len], sliced to the last keys
        with torch.no_grad():
            q, k, _ = (_heads(t, 8) for t in attn.Wqkv(h).chunk(3, dim=2))
            ref = torch.matmul(q, k.transpose(-1, -2)) * attn.softmax_scale + bias[:, :, -8:]
            scores = layer.scores(q, k, torch.arange(8)[None])
            probs = attn(h, bias)[1]
        torch.testing.assert_close(scores, ref, **TOL)
        torch.testing.assert_close(torch.softmax(scores, -1), probs, **TOL)
    with pytest.raises(ValueError, match="max_seq_len = 32 keys, got 40"):
        layer.scores(torch.zeros(1, 6, 1, 8), torch.zeros(1, 6, 40, 8), torch.arange(40)[None])


@pytest.mark.parametrize("arch", ["multi_query", "new_decoder_architecture"])
def test_falcon_matches_build_alibi_tensor_and_attention(arch):
    kwargs = {"new_decoder_architecture": True, "num_kv_heads": 2} if arch != "multi_query" else {}
    cfg = modeling_falcon.FalconConfig(alibi=True, hidden_size=48, num_attention_heads=6, num_hidden_layers=1,
                                       attn_implementation="eager", **kwargs)  # fmt: skip
    layer = build_alibi(cfg.to_dict())[0]
    attn = modeling_falcon.FalconAttention(cfg, 0).eval()
    torch.manual_seed(5)
    h = torch.randn(2, 8, 48)
    alibi = modeling_falcon.build_alibi_tensor(MASK, 6, torch.float32)  # [b * h, 1, s], bfloat16 products
    with torch.no_grad():
        q, k, _ = (t.transpose(1, 2) for t in attn._split_heads(attn.query_key_value(h)))  # [b, h, s, d]
        # FalconModel (sdpa): q k^T / sqrt(d) + alibi / sqrt(d), the bias passed in the attention mask
        ref = torch.matmul(q, k.transpose(-1, -2)) / 8**0.5 + alibi.view(2, 6, 1, 8) / 8**0.5
        scores = layer.scores(q, k, CUMULATIVE)
        probs = attn(h, alibi, torch.zeros(2, 1, 8, 8), output_attentions=True)[1]  # eager, mask without alibi
    torch.testing.assert_close(scores, ref, **TOL)
    torch.testing.assert_close(torch.softmax(scores, -1), probs, **TOL)


def test_falcon_without_alibi_is_rope():
    with pytest.raises(ValueError, match="falcon without alibi uses RoPE"):
        build_alibi(modeling_falcon.FalconConfig(num_hidden_layers=1).to_dict())


@pytest.mark.parametrize("model", ["bloom", "falcon"])
def test_alibi_softmax_equals_the_papers_bias(model):
    """+m_h * j differs from -m_h (i - j) by a constant per row: the same causal attention."""
    layer = build_alibi({"model_type": model, "hidden_size": 40, "n_head": 5, "n_layer": 1, "alibi": True})[0]
    g = torch.Generator().manual_seed(6)
    q, k = torch.randn(1, 5, 7, 8, generator=g), torch.randn(1, 5, 7, 8, generator=g)
    scores = layer.scores(q, k, torch.arange(7)[None])
    paper = torch.matmul(q, k.transpose(-1, -2)) * layer.softmax_scale + alibi_bias(5, 7, 7, slopes=layer.slopes) * (
        layer.softmax_scale if model == "falcon" else 1.0
    )
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    torch.testing.assert_close(
        torch.softmax(scores.masked_fill(~causal, float("-inf")), -1), torch.softmax(paper, -1), **TOL
    )


# ---------------------------------------------------------------------------
# T5
# ---------------------------------------------------------------------------


def test_t5_decoder_bias_matches_compute_bias():
    cfg = modeling_t5.T5Config(num_layers=2, num_decoder_layers=3, num_heads=4, d_kv=8, d_model=32,
                               relative_attention_num_buckets=16, relative_attention_max_distance=40)  # fmt: skip
    layers = build_t5(cfg.to_dict())
    assert len(layers) == 3 and all(layer.bias_module is layers[0].bias_module for layer in layers)
    decoder = modeling_t5.T5Config(**{**cfg.to_dict(), "is_decoder": True})
    attn = modeling_t5.T5Attention(decoder, has_relative_attention_bias=True, layer_idx=0)
    torch.manual_seed(7)
    with torch.no_grad():
        attn.relative_attention_bias.weight.normal_()
        layers[0].bias_module.embedding.weight.copy_(attn.relative_attention_bias.weight)
        q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 4, 90, 8)
        ref = torch.matmul(q, k.transpose(-1, -2)) + attn.compute_bias(3, 90, past_seen_tokens=87)  # scaling 1
        scores = layers[2].scores(q, k, torch.arange(90)[None])
    torch.testing.assert_close(scores, ref, atol=0, rtol=0)
    r = torch.arange(-300, 30)
    expected = attn._relative_position_bucket(r, bidirectional=False, num_buckets=16, max_distance=40)
    from posenc.t5 import t5_relative_position_bucket

    assert torch.equal(t5_relative_position_bucket(r, bidirectional=False, num_buckets=16, max_distance=40), expected)


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def test_bad_input_names_the_argument():
    layer = build_llama4(llama4_config().to_dict())[0]
    with pytest.raises(ValueError, match=r"q must have head_dim 16 \(last dim\) for this layer, got \(1, 4, 3, 8\)"):
        layer.scores(torch.zeros(1, 4, 3, 8), torch.zeros(1, 2, 3, 8), torch.arange(3)[None])
    with pytest.raises(ValueError, match=r"position_ids must have shape \[batch, s_k\] = \[1, 3\]"):
        layer.scores(torch.zeros(1, 4, 3, 16), torch.zeros(1, 2, 3, 16), torch.arange(4)[None])
    with pytest.raises(ValueError, match=r"q's heads \(4\) must be a multiple of k's heads \(3\)"):
        layer.scores(torch.zeros(1, 4, 3, 16), torch.zeros(1, 3, 3, 16), torch.arange(3)[None])
    t5 = build_t5(modeling_t5.T5Config(num_layers=1, num_heads=2).to_dict())[0]
    with pytest.raises(ValueError, match="position_ids must be integers for a T5 layer"):
        t5.scores(torch.zeros(1, 2, 3, 64), torch.zeros(1, 2, 3, 64), torch.arange(3.0)[None])
    with pytest.raises(
        ValueError, match="model_type must be 'deepseek_v2', 'deepseek_v3', 'kimi_k2' or 'deepseek_v32', got 'llama'"
    ):
        build_deepseek({"model_type": "llama"})
    with pytest.raises(ValueError, match=r"config is missing 'num_hidden_layers' \(or 'n_layer'"):
        build_alibi({"model_type": "bloom"})
    with pytest.raises(TypeError, match="cfg must be a dict"):
        build_t5("t5")


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32])
def test_narrow_integer_positions_give_the_int64_bias(dtype):
    """A T5 or ALiBi layer subtracts key and query positions; in uint8 a past key would wrap to a
    large positive offset (every one in bucket 0), so the layers subtract in int64."""
    t5 = from_hf_config({"model_type": "t5", "num_heads": 1, "d_kv": 4, "num_layers": 1})[0]
    t5.bias_module.embedding.weight.data = torch.arange(32.0)[:, None]
    alibi = from_hf_config({"model_type": "bloom", "n_head": 2, "hidden_size": 8, "n_layer": 1})[0]
    for layer, heads in ((t5, 1), (alibi, 2)):
        q = k = torch.zeros(1, heads, 4, 4)
        expected = layer.scores(q, k, torch.arange(4))
        assert torch.equal(layer.scores(q, k, torch.arange(4, dtype=dtype)), expected)
    assert t5.scores(q[:, :1], k[:, :1], torch.arange(4))[0, 0, 3].tolist() == [3.0, 2.0, 1.0, 0.0]
