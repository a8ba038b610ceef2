"""The families of 2025-2026 against transformers' own attention modules, layer by layer.

For each family a small configuration is built with its ``transformers`` configuration class;
each layer's attention module runs on random hidden states with the model's own rotary module,
and its ``apply_rotary_pos_emb`` (the function the module calls) records the queries and keys
it is given and what it returns. posenc's layer for the same index must return the same rotated
queries and keys from the same inputs; a layer without positions must never call it.
"""

import importlib

import pytest
import torch

pytest.importorskip("transformers")
import transformers  # noqa: E402

from posenc.hf import from_hf_config  # noqa: E402

TOL = {"atol": 2e-5, "rtol": 2e-5}  # float32, as transformers' own tests of these models

SMALL = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 32,
         "vocab_size": 32, "num_hidden_layers": 8}  # fmt: skip

#: model_type -> (module name, class prefix, the family's own fields beside SMALL)
FAMILIES = {
    "gpt_oss": ("gpt_oss", "GptOss", {"head_dim": 16, "num_local_experts": 2, "sliding_window": 4,
                "rope_parameters": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                    "truncate": False, "original_max_position_embeddings": 64,
                                    "rope_theta": 150000.0}}),
    "smollm3": ("smollm3", "SmolLM3", {}),
    "cohere2": ("cohere2", "Cohere2", {"head_dim": 16, "sliding_window": 4}),
    "glm4": ("glm4", "Glm4", {"head_dim": 16}),
    "glm4_moe": ("glm4_moe", "Glm4Moe", {"head_dim": 16, "n_routed_experts": 2, "first_k_dense_replace": 8}),
    "qwen3_next": ("qwen3_next", "Qwen3Next", {"head_dim": 16, "num_experts": 2}),
}  # fmt: skip


def _config(model_type: str, **extra):
    _, _, own = FAMILIES[model_type]
    cfg = transformers.CONFIG_MAPPING[model_type](**{**SMALL, **own, **extra})
    cfg._attn_implementation = "eager"
    return cfg


def _recorded_rotation(model_type: str, monkeypatch, name: str = "apply_rotary_pos_emb"):
    module = importlib.import_module(f"transformers.models.{FAMILIES[model_type][0]}.modeling_{model_type}")
    original, calls = getattr(module, name), []

    def record(q, k, cos, sin, *args, **kwargs):
        out = original(q, k, cos, sin, *args, **kwargs)
        calls.append((q, k, *out))
        return out

    monkeypatch.setattr(module, name, record)
    return module, calls


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
@pytest.mark.parametrize("far", [False, True], ids=["near", "far"])
def test_each_layer_rotates_as_transformers_attention_does(model_type, far, monkeypatch):
    module, calls = _recorded_rotation(model_type, monkeypatch)
    cfg = _config(model_type)
    prefix = FAMILIES[model_type][1]
    layers = from_hf_config(cfg)
    assert len(layers) == cfg.num_hidden_layers
    rotary = getattr(module, f"{prefix}RotaryEmbedding")(cfg)
    torch.manual_seed(0)
    h = torch.randn(2, 6, cfg.hidden_size)
    position_ids = torch.tensor([[0, 1, 2, 3, 4, 5], [3, 9, 30, 31, 200, 4000]]) if far else torch.arange(6)[None]
    cos_sin = rotary(h, position_ids)
    kinds = getattr(cfg, "layer_types", None) or ["full_attention"] * cfg.num_hidden_layers
    for i, layer in enumerate(layers):
        if kinds[i] == "linear_attention":  # Qwen3-Next's Gated DeltaNet: a recurrence, no rotation anywhere
            assert layer.kind == "recurrence"
            continue
        attn = getattr(module, f"{prefix}Attention")(cfg, i).eval()
        calls.clear()
        with torch.no_grad():
            attn(h, cos_sin, None)
        if layer.kind == "nope":
            assert calls == [], f"{model_type} layer {i}: transformers rotates where posenc says no positions"
            continue
        assert layer.kind == "rope" and len(calls) == 1, (model_type, i, layer.kind, len(calls))
        q, k, q_out, k_out = calls[0]
        with torch.no_grad():
            mine_q, mine_k = layer.apply(q, k, position_ids)
        torch.testing.assert_close(mine_q, q_out, **TOL)
        torch.testing.assert_close(mine_k, k_out, **TOL)


def test_the_layer_patterns_as_the_configuration_classes_fill_them_in():
    kinds = {t: [layer.kind for layer in from_hf_config(_config(t))] for t in FAMILIES}
    assert kinds["smollm3"] == ["rope", "rope", "rope", "nope"] * 2  # no_rope_layers: 1 means RoPE
    assert kinds["cohere2"] == ["rope", "rope", "rope", "nope"] * 2  # global layers have no positions
    assert kinds["qwen3_next"] == ["recurrence"] * 3 + ["rope"] + ["recurrence"] * 3 + ["rope"]
    assert kinds["gpt_oss"] == ["rope"] * 8  # sliding and full layers rotate alike
    rows = {t: from_hf_config(_config(t))[0].row() for t in FAMILIES}
    assert (rows["glm4"]["layout"], rows["glm4_moe"]["layout"]) == ("interleaved", "half")  # GLM-4 and GLM-4.5 differ
    assert rows["glm4"]["rotary"] == rows["glm4_moe"]["rotary"] == 8  # half of each 16-wide head
    assert from_hf_config(_config("qwen3_next"))[3].row()["rotary"] == 4  # a quarter (layer 0 is recurrent)


def test_smollm3_polarity_backwards_is_a_different_model():
    """The porting mistake: reading no_rope_layers[i] == 1 as 'no RoPE here' swaps every layer."""
    cfg = _config("smollm3")
    right = [layer.kind for layer in from_hf_config(cfg)]
    backwards = ["nope" if flag else "rope" for flag in cfg.no_rope_layers]
    assert right == ["rope" if flag else "nope" for flag in cfg.no_rope_layers]
    assert all(a != b for a, b in zip(right, backwards, strict=True))


DSV32 = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 32,
         "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8, "index_head_dim": 16,
         "index_n_heads": 2, "index_topk": 4, "num_hidden_layers": 2, "n_routed_experts": 2, "vocab_size": 32,
         "intermediate_size": 32, "moe_intermediate_size": 16, "first_k_dense_replace": 2}  # fmt: skip


def test_deepseek_v32_mla_rotates_its_pairs_reordered_and_its_indexer_does_not(monkeypatch):
    """V3.2's MLA reorders (2i, 2i + 1) pairs before turning them; its indexer turns (i, i + r/2) pairs.
    Giving the indexer MLA's reordering, the reference demo's mistake until late 2025, changes its
    scores."""
    module = importlib.import_module("transformers.models.deepseek_v32.modeling_deepseek_v32")
    cfg = transformers.CONFIG_MAPPING["deepseek_v32"](**DSV32)
    cfg._attn_implementation = "eager"
    layer = from_hf_config(cfg)[0]
    assert layer.row()["layout"] == "interleaved" and layer.kind == "mla_rope"  # pairs (2i, 2i + 1), reordered
    rotary = module.DeepseekV32RotaryEmbedding(cfg)
    torch.manual_seed(0)
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 1, 6, 8)
    position_ids = torch.tensor([[0, 1, 2, 3, 4, 5], [3, 9, 30, 31, 200, 4000]])
    cos, sin = rotary(q, position_ids)
    q_mla, k_mla = module.apply_rotary_pos_emb_interleave(q, k, cos, sin)
    nope = torch.zeros(2, 4, 6, 8)
    mine_q, mine_k = layer.apply(torch.cat([nope, q], -1), torch.cat([nope[:, :1], k], -1), position_ids)
    torch.testing.assert_close(mine_q[..., 8:], q_mla, **TOL)
    torch.testing.assert_close(mine_k[..., 8:], k_mla, **TOL)
    # the indexer: half-split pairs, which posenc's half layout gives and MLA's does not
    q_idx, k_idx = module.apply_rotary_pos_emb(q, k, cos, sin)
    assert not torch.allclose(q_idx, q_mla, atol=1e-3)
    half = from_hf_config({**cfg.to_dict(), "model_type": "deepseek_v3", "rope_interleave": False})[0]
    mine_q, _ = half.apply(torch.cat([nope, q], -1), torch.cat([nope[:, :1], k], -1), position_ids)
    torch.testing.assert_close(mine_q[..., 8:], q_idx, **TOL)
