"""The claims of chapter 9 (positions in today's models), asserted independently of the notebook.

The chapter reads the published ``config.json`` fields of twenty-two models from
``posenc_book/data/model_configs.json``. Each test recomputes one of its claims from the
data and ``posenc`` (and, where a reference helps, ``transformers``), without running the
chapter. Llama 4 Scout's published ``rope_scaling`` has ``low_freq_factor ==
high_freq_factor``: ``posenc`` reads it as published, as a step (no ramp), the frequencies
``transformers`` computes (tested here).
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from posenc import (
    alibi_slopes,
    apply_rope,
    config_dict,
    describe,
    format_description,
    from_hf_config,
    ntk_scaled_base,
    rope_cos_sin,
    rope_inv_freq,
    rope_weight_permutation,
    t5_relative_position_bucket,
)
from posenc_book import data_path

F64 = torch.float64
MODELS = json.loads(data_path("model_configs.json").read_text(encoding="utf-8"))
CONFIGS = {name: entry["config"] for name, entry in MODELS.items()}
CONTEXT = {name: entry["context"] for name, entry in MODELS.items()}
ROPE_MODELS = [
    "GPT-J-6B",
    "GPT-NeoX-20B",
    "Code-Llama-7B",
    "Llama-3.1-8B",
    "Qwen2.5-7B",
    "Qwen3-8B",
    "Qwen2-VL-7B",
    "Phi-3.5-mini",
    "Phi-4-mini",
    "Gemma-3-27B",
    "DeepSeek-V3",
]


def distinct(rows: list[dict], keys: tuple[str, ...]) -> list[tuple]:
    seen: list[tuple] = []
    for row in rows:
        key = tuple(row[k] for k in keys)
        if key not in seen:
            seen.append(key)
    return seen


def frequencies(layer, seq_len=None) -> torch.Tensor:
    """A rotary layer's frequencies after its scaling (Llama 4 and DeepSeek keep rope_theta inside)."""
    if hasattr(layer, "rope_parameters"):
        return rope_inv_freq(layer.rotary_dim, scaling=layer.rope_parameters, seq_len=seq_len)[0]
    return rope_inv_freq(layer.rotary_dim, base=layer.base, scaling=layer.scaling, seq_len=seq_len)[0]


def causal_softmax(scores: torch.Tensor) -> torch.Tensor:
    s = scores.shape[-1]
    keep = torch.ones(s, s, dtype=torch.bool).tril()
    return scores.masked_fill(~keep, float("-inf")).softmax(dim=-1)


def on_previous(probs: torch.Tensor) -> float:
    return probs.diagonal(offset=-1, dim1=-2, dim2=-1).mean().item()


def favourite_offset(probs: torch.Tensor) -> list[int]:
    return (torch.arange(probs.shape[-1]) - probs.argmax(dim=-1)).flatten().tolist()


def previous_token_head(d: int, base: float, layout: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Energy 8 in each of the 4 fastest pairs, random phases; the key is the query turned by one position."""
    g = torch.Generator().manual_seed(seed)
    size = torch.zeros(d // 2, dtype=F64)
    size[:4] = 8.0
    pairs = torch.polar(size, 2 * math.pi * torch.rand(d // 2, generator=g, dtype=F64))
    if layout == "interleaved":
        query = torch.view_as_real(pairs).flatten()
    else:
        query = torch.cat((pairs.real, pairs.imag))
    cos, sin = rope_cos_sin(torch.tensor(1), d, base=base, layout=layout, dtype=F64)
    return query, apply_rope(query, cos, sin, layout=layout)


# ---------------------------------------------------------------------------
# The data
# ---------------------------------------------------------------------------


NEWEST = ["gpt-oss-120b", "Kimi-K2", "GLM-4.5", "SmolLM3-3B", "Command-R7B", "Qwen3-Next-80B-A3B", "DeepSeek-V3.2-Exp"]


def test_twenty_two_published_configurations_with_their_source():
    assert len(MODELS) == 22 and list(MODELS)[15:] == NEWEST
    for name, entry in MODELS.items():
        # a note says which fields of a partly checked file are stored
        assert set(entry) - {"note"} == {"source", "context", "config"}, name
        assert isinstance(entry.get("note", ""), str), name
        assert entry["source"].startswith("https://huggingface.co/"), name
        assert entry["source"].endswith("/blob/main/config.json"), name
        assert isinstance(entry["context"], int) and entry["context"] > 0, name
        assert config_dict(entry["config"])["model_type"], name
        cfg = config_dict(entry["config"])
        if cfg.get("max_position_embeddings") is not None:
            assert entry["context"] == cfg["max_position_embeddings"], name


def test_every_configuration_reads_as_published():
    for name, config in CONFIGS.items():
        assert describe(config), name
        assert from_hf_config(config), name
    scaling = CONFIGS["Llama-4-Scout"]["text_config"]["rope_scaling"]
    assert scaling["low_freq_factor"] == scaling["high_freq_factor"] == 1.0  # Scout's equal band factors


def test_phi_factor_lists_have_one_entry_per_pair():
    for name in ("Phi-3.5-mini", "Phi-4-mini"):
        layer = from_hf_config(CONFIGS[name])[0]
        assert len(layer.scaling["long_factor"]) == len(layer.scaling["short_factor"]) == layer.rotary_dim // 2 == 48


# ---------------------------------------------------------------------------
# Reading a configuration
# ---------------------------------------------------------------------------


def test_llama31_has_32_alike_layers():
    layers = from_hf_config(CONFIGS["Llama-3.1-8B"])
    rows = describe(CONFIGS["Llama-3.1-8B"])
    assert len(layers) == len(rows) == 32 and type(layers[0]).__name__ == "RotaryLayer"
    assert distinct(rows, ("scheme", "theta", "scaling", "rotary", "layout")) == [
        ("rope", 500000.0, "llama3 x8", 128, "half")
    ]
    assert {r["softmax_scale"] for r in rows} == {128**-0.5}
    assert format_description(rows).splitlines()[2].split()[:5] == ["0-31", "rope", "500000", "llama3", "x8"]


# ---------------------------------------------------------------------------
# How the choices moved
# ---------------------------------------------------------------------------


def test_bases():
    bases = {name: distinct(describe(CONFIGS[name]), ("theta",)) for name in ROPE_MODELS}
    assert bases["GPT-J-6B"] == bases["GPT-NeoX-20B"] == [(1e4,)]
    assert bases["Llama-3.1-8B"] == [(5e5,)]
    for name in ("Code-Llama-7B", "Qwen2.5-7B", "Qwen3-8B", "Qwen2-VL-7B"):
        assert bases[name] == [(1e6,)], name
    assert bases["Gemma-3-27B"] == [(1e4,), (1e6,)]
    slowest = {base: round(2 * math.pi * base ** (126 / 128)) for base in (1e4, 5e5, 1e6)}
    assert slowest == {1e4: 54410, 5e5: 2559196, 1e6: 5063256}


def test_shipped_scalings():
    shipped = {name: distinct(describe(CONFIGS[name]), ("scaling",)) for name in ROPE_MODELS}
    assert shipped["Llama-3.1-8B"] == [("llama3 x8",)]
    assert shipped["Phi-3.5-mini"] == shipped["Phi-4-mini"] == [("longrope x32",)]
    assert shipped["Gemma-3-27B"] == [(None,), ("linear x8",)]
    assert shipped["DeepSeek-V3"] == [("yarn x40",)]
    assert from_hf_config(CONFIGS["DeepSeek-V3"])[0].rope_parameters["factor"] == 40
    for name in ("GPT-J-6B", "GPT-NeoX-20B", "Code-Llama-7B", "Qwen2.5-7B", "Qwen3-8B", "Qwen2-VL-7B"):
        assert shipped[name] == [(None,)], name


def slowdowns() -> dict[str, torch.Tensor]:
    d, base, trained, factor = 96, 1e4, 4096, 32.0
    plain, _ = rope_inv_freq(d, base=base)
    phi35, phi4 = (from_hf_config(CONFIGS[n])[0] for n in ("Phi-3.5-mini", "Phi-4-mini"))
    methods = {
        "PI": (base, {"rope_type": "linear", "factor": factor}),
        "NTK": (ntk_scaled_base(base, factor, d), None),
        "YaRN": (base, {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": trained}),
        "Llama 3": (
            base,
            {
                "rope_type": "llama3",
                "factor": factor,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": trained,
            },
        ),
        "Phi-3.5": (phi35.base, phi35.scaling),
        "Phi-4": (phi4.base, phi4.scaling),
    }
    return {
        label: plain / rope_inv_freq(d, base=b, scaling=s, seq_len=trained + 1)[0] for label, (b, s) in methods.items()
    }


def test_both_phi_models_share_one_geometry():
    for name in ("Phi-3.5-mini", "Phi-4-mini"):
        layer = from_hf_config(CONFIGS[name])[0]
        assert (layer.base, layer.rotary_dim) == (1e4, 96), name
        assert layer.scaling["original_max_position_embeddings"] == 4096
        assert layer.scaling["factor"] == 131072 / 4096 == 32


def test_six_ways_to_stretch_the_same_geometry():
    s = slowdowns()
    assert torch.allclose(s["PI"], torch.full((48,), 32.0, dtype=F64))
    for label in ("NTK", "YaRN", "Llama 3", "Phi-4"):
        assert s[label][0] == pytest.approx(1.0), label
    assert s["Phi-3.5"][0] == pytest.approx(1.08, abs=1e-6)
    for label in ("NTK", "YaRN", "Llama 3"):
        assert s[label][-1] == pytest.approx(32.0), label
    assert 64.8 < s["Phi-3.5"].max() < 64.9 and 47.7 < s["Phi-4"].max() < 47.8
    assert (s["Phi-3.5"].diff() >= 0).all()
    # YaRN and the Llama 3 rule leave a group of the fastest pairs exactly as they are
    assert (s["YaRN"][:16] == 1).all() and (s["Llama 3"][:27] == 1).all()


def test_longrope_attention_factor_and_switch():
    layer = from_hf_config(CONFIGS["Phi-3.5-mini"])[0]
    short, factor_short = rope_inv_freq(96, base=1e4, scaling=layer.scaling, seq_len=4096)
    long, factor_long = rope_inv_freq(96, base=1e4, scaling=layer.scaling, seq_len=4097)
    plain, _ = rope_inv_freq(96, base=1e4)
    assert torch.allclose(plain / short, torch.tensor(layer.scaling["short_factor"], dtype=F64))
    assert torch.allclose(plain / long, torch.tensor(layer.scaling["long_factor"], dtype=F64))
    assert factor_short == factor_long == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)))
    assert round(factor_long, 4) == 1.1902


def test_longrope_long_frequencies_match_transformers():
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    for name in ("Phi-3.5-mini", "Phi-4-mini"):
        fields = {k: v for k, v in CONFIGS[name].items() if k != "model_type"}
        config = transformers.Phi3Config(**fields)
        hf_freq, hf_factor = ROPE_INIT_FUNCTIONS["longrope"](config, "cpu", seq_len=131072)
        layer = from_hf_config(CONFIGS[name])[0]
        ours, factor = rope_inv_freq(96, base=layer.base, scaling=layer.scaling, seq_len=131072)
        torch.testing.assert_close(ours.float(), hf_freq.float(), rtol=1e-6, atol=0)
        assert factor == pytest.approx(hf_factor, rel=1e-6)


def test_partial_rotary():
    seen = {}
    for name in ("GPT-NeoX-20B", "GPT-J-6B", "Phi-4-mini", "Phi-3.5-mini"):
        layer = from_hf_config(CONFIGS[name])[0]
        seen[name] = (layer.rotary_dim, layer.head_dim, layer.layout)
    assert seen == {
        "GPT-NeoX-20B": (24, 96, "half"),
        "GPT-J-6B": (64, 256, "interleaved"),
        "Phi-4-mini": (96, 128, "half"),
        "Phi-3.5-mini": (96, 96, "half"),
    }
    neox = from_hf_config(CONFIGS["GPT-NeoX-20B"])[0]
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 1, 1, 6, 96, generator=g, dtype=F64)
    turned_q, turned_k = neox.apply(q, k, torch.tensor([0, 1, 2, 500, 501, 2047]))
    assert torch.equal(turned_q[..., 24:], q[..., 24:]) and torch.equal(turned_k[..., 24:], k[..., 24:])
    assert not torch.allclose(turned_q[..., :24], q[..., :24])


# ---------------------------------------------------------------------------
# Gemma 3
# ---------------------------------------------------------------------------


def test_gemma3_local_and_global_layers():
    rows = describe(CONFIGS["Gemma-3-27B"])
    assert len(rows) == 62
    assert [r["layer"] for r in rows if r["theta"] == 1e6] == list(range(5, 62, 6))
    for r in rows:
        local = r["layer"] % 6 != 5
        assert (r["theta"], r["scaling"]) == ((1e4, None) if local else (1e6, "linear x8"))
    assert {r["softmax_scale"] for r in rows} == {168**-0.5}
    text = CONFIGS["Gemma-3-27B"]["text_config"]
    assert text["query_pre_attn_scalar"] == text["hidden_size"] // text["num_attention_heads"] == 168
    assert 128**-0.5 > 168**-0.5
    assert format_description(rows).splitlines()[-1] == "pattern: the layers repeat every 6 (62 layers)"
    assert text["sliding_window"] == 1024
    small = describe(CONFIGS["Gemma-3-4B"])
    assert [r["theta"] for r in small] == [1e6 if i % 6 == 5 else 1e4 for i in range(34)]
    assert [r["scaling"] for r in small] == ["linear x8" if i % 6 == 5 else None for i in range(34)]


def test_gemma3_reading_agrees_with_transformers():
    transformers = pytest.importorskip("transformers")
    from transformers.models.gemma3 import modeling_gemma3

    fields = {k: v for k, v in CONFIGS["Gemma-3-27B"]["text_config"].items() if k != "model_type"}
    config = transformers.Gemma3TextConfig(**fields)
    assert [i for i, t in enumerate(config.layer_types) if t == "full_attention"] == list(range(5, 62, 6))
    assert set(config.rope_parameters) == {"full_attention", "sliding_attention"}  # one dict per layer type
    assert config.rope_parameters["sliding_attention"]["rope_type"] == "default"
    assert config.rope_parameters["full_attention"]["rope_type"] == "linear"
    with torch.device("meta"):
        scales = {modeling_gemma3.Gemma3Attention(config, i).scaling for i in (0, 5)}
        windows = [modeling_gemma3.Gemma3Attention(config, i).sliding_window for i in (0, 5)]
    assert scales == {168**-0.5} and windows == [1024, None]


def test_gemma3_small_model_logits_equal_transformers_layer_by_layer():
    transformers = pytest.importorskip("transformers")
    from transformers.models.gemma3 import modeling_gemma3

    config = transformers.Gemma3TextConfig(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_hidden_layers=7,
        query_pre_attn_scalar=24,
        max_position_embeddings=256,
        rope_scaling={"rope_type": "linear", "factor": 8.0},
    )
    rotary = modeling_gemma3.Gemma3RotaryEmbedding(config)
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 4, 12, 16, generator=g), torch.randn(1, 2, 12, 16, generator=g)
    positions = torch.arange(200, 212)[None]
    for i, layer in enumerate(from_hf_config(config)):
        cos, sin = rotary(q, positions, layer_type=config.layer_types[i])
        hq, hk = modeling_gemma3.apply_rotary_pos_emb(q, k, cos, sin)
        scale = modeling_gemma3.Gemma3Attention(config, layer_idx=i).scaling
        expected = hq @ hk.repeat_interleave(2, dim=1).transpose(-1, -2) * scale
        torch.testing.assert_close(layer.scores(q, k, positions), expected, atol=1e-4, rtol=0)


# ---------------------------------------------------------------------------
# Llama 4
# ---------------------------------------------------------------------------


def scout_step() -> tuple[torch.Tensor, torch.Tensor]:
    unscaled, _ = rope_inv_freq(128, base=500000.0)
    wavelength = 2 * math.pi / unscaled
    return unscaled, torch.where(wavelength > 8192, unscaled / 16, unscaled)


def test_scout_published_scaling_is_a_step():
    scaling = CONFIGS["Llama-4-Scout"]["text_config"]["rope_scaling"]
    assert scaling == {
        "factor": 16.0,
        "high_freq_factor": 1.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    }
    unscaled, step = scout_step()
    wavelength = 2 * math.pi / unscaled
    assert [round(w) for w in wavelength[34:36].tolist()] == [6695, 8219]
    assert wavelength[34] < 8192 / 1.22 and wavelength[35] > 8192
    assert torch.equal(rope_inv_freq(128, base=500000.0, scaling=scaling)[0], step)  # as published: the step
    for width in (1.05, 1.1, 1.2, 1.22):  # a narrow ramp on which no pair lies gives the same
        params = {**scaling, "high_freq_factor": width}
        assert torch.equal(rope_inv_freq(128, base=500000.0, scaling=params)[0], step), width
    assert not torch.equal(rope_inv_freq(128, base=500000.0, scaling={**scaling, "high_freq_factor": 1.25})[0], step)
    layer = from_hf_config(CONFIGS["Llama-4-Scout"])[0]
    assert torch.equal(frequencies(layer), step)
    assert int((step < unscaled).sum()) == 29


def test_scout_step_equals_transformers():
    pytest.importorskip("transformers")
    from transformers.models.llama4 import modeling_llama4
    from transformers.utils import logging

    text = {k: v for k, v in CONFIGS["Llama-4-Scout"]["text_config"].items() if k != "model_type"}
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()  # transformers warns about the equal band factors
    try:
        config = modeling_llama4.Llama4TextConfig(**text)
        hf_freq = modeling_llama4.Llama4TextRotaryEmbedding(config).inv_freq.double()
    finally:
        logging.set_verbosity(verbosity)
    _, step = scout_step()
    torch.testing.assert_close(step, hf_freq, rtol=1e-6, atol=0)
    torch.testing.assert_close(frequencies(from_hf_config(CONFIGS["Llama-4-Scout"])[0]), hf_freq, rtol=1e-6, atol=0)
    nope = list(range(3, 48, 4))
    assert [i for i, t in enumerate(config.layer_types) if t == "full_attention"] == nope
    assert {config.layer_types[i] for i in range(48) if i not in nope} == {"chunked_attention"}
    assert (config.attn_temperature_tuning, config.floor_scale, config.attn_scale) == (True, 8192, 0.1)


def test_scout_layers():
    rows = describe(CONFIGS["Llama-4-Scout"])
    text = CONFIGS["Llama-4-Scout"]["text_config"]
    assert len(rows) == 48 and text["max_position_embeddings"] == 10_485_760
    assert [r["layer"] for r in rows if r["scheme"] == "nope"] == list(range(3, 48, 4))
    for r in rows:
        if r["scheme"] == "rope":
            assert (r["theta"], r["layout"], r["rotary"], r["scaling"]) == (500000.0, "interleaved", 128, "llama3 x16")
        else:
            assert r["nope_temperature"] == "1 + 0.1 * log1p(floor((p + 1) / 8192))"
    assert format_description(rows).splitlines()[-1] == "pattern: the layers repeat every 4 (48 layers)"
    assert text["attention_chunk_size"] == 8192


def test_scout_nope_temperature():
    layer = from_hf_config(CONFIGS["Llama-4-Scout"])[3]
    p = torch.tensor([0, 8190, 8191, 65535, 1_000_000, 10_485_759])
    scaled, _ = layer.apply(torch.ones(1, 40, len(p), 128), torch.ones(1, 8, len(p), 128), p)
    tau = scaled[0, 0, :, 0].double()
    expected = torch.tensor([1 + 0.1 * math.log(1 + (x + 1) // 8192) for x in p.tolist()], dtype=F64)
    torch.testing.assert_close(tau, expected, rtol=1e-6, atol=0)
    assert tau[:2].tolist() == [1.0, 1.0] and (tau.diff()[1:] > 0).all()
    assert [round(t, 3) for t in tau.tolist()] == [1.0, 1.0, 1.069, 1.22, 1.481, 1.716]


# ---------------------------------------------------------------------------
# DeepSeek-V3
# ---------------------------------------------------------------------------


def test_rope_prevents_absorbing_the_key_projection():
    g = torch.Generator().manual_seed(2)
    rank, dim = 8, 4
    w_uk = torch.randn(dim, rank, generator=g, dtype=F64)
    q_h = torch.randn(dim, generator=g, dtype=F64)
    latents = torch.randn(5, rank, generator=g, dtype=F64)
    torch.testing.assert_close(latents @ (w_uk.T @ q_h), (latents @ w_uk.T) @ q_h, atol=1e-12, rtol=0)

    def absorbed_query(distance: int) -> torch.Tensor:
        return w_uk.T @ apply_rope(q_h, *rope_cos_sin(torch.tensor(distance), dim, dtype=F64))

    m, n = 9, torch.tensor([0, 3, 5, 7, 8])
    keys = apply_rope(latents @ w_uk.T, *rope_cos_sin(n, dim, dtype=F64))
    with_rope = keys @ apply_rope(q_h, *rope_cos_sin(torch.tensor(m), dim, dtype=F64))
    one_each = torch.stack([c @ absorbed_query(m - j) for c, j in zip(latents, n.tolist(), strict=True)])
    torch.testing.assert_close(one_each, with_rope, atol=1e-12, rtol=0)
    assert not torch.allclose(latents @ absorbed_query(1), with_rope, atol=1e-3)
    assert not torch.allclose(absorbed_query(1), absorbed_query(2), atol=1e-3)


def test_deepseek_v3_decoupled_rope_and_cache():
    config = CONFIGS["DeepSeek-V3"]
    layers = from_hf_config(config)
    assert len(layers) == 61 and {layer.kind for layer in layers} == {"mla_rope"}
    mla = layers[0]
    assert (mla.rotary_dim, mla.head_dim) == (64, 192)
    per_token = config["kv_lora_rank"] + config["qk_rope_head_dim"]
    full = config["num_attention_heads"] * (mla.head_dim + config["v_head_dim"])
    assert (per_token, full, round(full / per_token)) == (576, 40960, 71)
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(1, 128, 4, 192, generator=g), torch.randn(1, 1, 4, 192, generator=g)
    turned_q, turned_k = mla.apply(q, k, torch.tensor([0, 1, 2, 3]))
    assert torch.equal(turned_q[..., :128], q[..., :128]) and torch.equal(turned_k[..., :128], k[..., :128])
    assert not torch.allclose(turned_q[..., 128:], q[..., 128:])


def test_deepseek_v3_yarn_temperature_sits_in_the_softmax_scale():
    mla = from_hf_config(CONFIGS["DeepSeek-V3"])[0]
    _, on_cos_sin = rope_inv_freq(64, scaling=mla.rope_parameters)
    temperature = 0.1 * math.log(40) + 1
    assert on_cos_sin == 1.0
    assert mla.softmax_scale == pytest.approx(192**-0.5 * temperature**2, rel=1e-12)
    assert round(mla.softmax_scale, 5) == 0.13523 and round(temperature, 4) == 1.3689


def test_deepseek_v3_agrees_with_transformers_module():
    pytest.importorskip("transformers")
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as ds3

    fields = {k: v for k, v in CONFIGS["DeepSeek-V3"].items() if k != "model_type"}
    with torch.device("meta"):
        attention = ds3.DeepseekV3Attention(ds3.DeepseekV3Config(**fields), layer_idx=0)
    assert attention.scaling == pytest.approx(from_hf_config(CONFIGS["DeepSeek-V3"])[0].softmax_scale, rel=1e-12)
    assert attention.kv_a_proj_with_mqa.out_features == 576  # the latent and the one shared rotary key
    assert attention.q_b_proj.out_features == 128 * 192


# ---------------------------------------------------------------------------
# M-RoPE, ALiBi, T5
# ---------------------------------------------------------------------------


def test_mrope_alibi_t5_and_falcon():
    qwen_vl = from_hf_config(CONFIGS["Qwen2-VL-7B"])[0]
    assert qwen_vl.mrope_section == [16, 24, 24] and qwen_vl.row()["scheme"] == "mrope"
    slopes = alibi_slopes(16)
    assert torch.allclose(slopes, 2.0 ** -torch.arange(0.5, 8.5, 0.5))
    assert (round(-slopes[0].item() * 2047), round(-slopes[-1].item() * 2047, 1)) == (-1447, -8.0)
    bloom = from_hf_config(CONFIGS["BLOOM-560m"])
    assert len(bloom) == 24 and {layer.kind for layer in bloom} == {"alibi"}
    torch.testing.assert_close(bloom[0].slopes, slopes.float())
    every = t5_relative_position_bucket(-torch.arange(200), bidirectional=False)
    assert every[:16].tolist() == list(range(16)) and (every.diff() >= 0).all()
    assert int((every == 31).nonzero()[0]) == 113 and every.max() == 31
    t5 = from_hf_config(CONFIGS["T5-small"])
    assert [layer.kind for layer in t5] == ["t5"] * 6 and len({layer.bias_module for layer in t5}) == 1
    falcon = {"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1}
    assert [from_hf_config({**falcon, "alibi": a})[0].kind for a in (True, False)] == ["alibi", "rope"]


# ---------------------------------------------------------------------------
# The map and the spectra
# ---------------------------------------------------------------------------


def kind_of(layer, row) -> str:
    if row["scheme"] == "rope":
        return "partial RoPE" if row["rotary"] < layer.head_dim else "RoPE"
    return row["scheme"]


def test_per_layer_map():
    counts = {}
    for name in (
        "Llama-3.1-8B",
        "Qwen2-VL-7B",
        "GPT-J-6B",
        "Phi-4-mini",
        "Gemma-3-27B",
        "Llama-4-Scout",
        "DeepSeek-V3",
        "BLOOM-560m",
        "T5-small",
    ):
        tally: dict[tuple, int] = {}
        for layer, row in zip(from_hf_config(CONFIGS[name]), describe(CONFIGS[name]), strict=True):
            key = (kind_of(layer, row), row["scaling"] is not None)
            tally[key] = tally.get(key, 0) + 1
        counts[name] = tally
    assert counts == {
        "Llama-3.1-8B": {("RoPE", True): 32},
        "Qwen2-VL-7B": {("mrope", False): 28},
        "GPT-J-6B": {("partial RoPE", False): 28},
        "Phi-4-mini": {("partial RoPE", True): 32},
        "Gemma-3-27B": {("RoPE", False): 52, ("RoPE", True): 10},
        "Llama-4-Scout": {("RoPE", True): 36, ("nope", False): 12},
        "DeepSeek-V3": {("mla_rope", True): 61},
        "BLOOM-560m": {("alibi", False): 24},
        "T5-small": {("t5", False): 6},
    }


def spectra() -> dict[str, tuple[torch.Tensor, int]]:
    found = {}
    for name in [*ROPE_MODELS, "Llama-4-Scout"]:
        for i, layer in enumerate(from_hf_config(CONFIGS[name])):
            if layer.kind not in ("rope", "mla_rope"):
                continue
            span, label = CONTEXT[name], name
            if name == "Gemma-3-27B":
                local = i % 6 != 5
                span, label = (1024, f"{name} local") if local else (span, f"{name} global")
            elif name == "Llama-4-Scout":
                span, label = 8192, f"{name} RoPE"
            found.setdefault(label, (2 * math.pi / frequencies(layer, CONTEXT[name]), span))
    return found


def test_wavelengths_against_the_span():
    found = spectra()
    turns = {label: int((lam <= span).sum()) for label, (lam, span) in found.items()}
    pairs = {label: len(lam) for label, (lam, _) in found.items()}
    assert turns == {
        "GPT-J-6B": 21,
        "GPT-NeoX-20B": 8,
        "Code-Llama-7B": 37,
        "Llama-3.1-8B": 39,
        "Qwen2.5-7B": 47,
        "Qwen3-8B": 41,
        "Qwen2-VL-7B": 40,
        "Phi-3.5-mini": 31,
        "Phi-4-mini": 34,
        "Gemma-3-27B local": 36,
        "Gemma-3-27B global": 37,
        "DeepSeek-V3": 23,
        "Llama-4-Scout RoPE": 35,
    }
    assert (pairs["GPT-J-6B"], pairs["Llama-3.1-8B"], pairs["Gemma-3-27B local"]) == (32, 64, 64)
    assert all(turns[label] < pairs[label] for label in turns)
    assert all((lam / span).log().abs().min() > 0.01 for lam, span in found.values())
    for lam, span in found.values():  # a pair that never turns covers less than a circle over the span
        never = lam > span
        assert (span * (2 * math.pi / lam[never]) < 2 * math.pi).all()
    qwen = found["Qwen2-VL-7B"][0]
    assert (qwen[40:] > 32768).all() and (qwen[:40] <= 32768).all()  # the width axis: pairs 40-63
    assert 0.01 < 64 * 2 * math.pi / qwen[40] < 0.012  # radians over an image 64 patches wide
    unscaled, step = scout_step()
    assert torch.equal(found["Llama-4-Scout RoPE"][0] > 8192, step < unscaled)


# ---------------------------------------------------------------------------
# Four mistakes in real ports
# ---------------------------------------------------------------------------

D, S = 32, 24
POSITIONS = torch.arange(S)
SMALL_GEMMA = {
    "model_type": "gemma3_text",
    "hidden_size": 64,
    "num_attention_heads": 1,
    "num_key_value_heads": 1,
    "head_dim": D,
    "num_hidden_layers": 6,
    "query_pre_attn_scalar": D,
}
LINEAR8 = {"rope_type": "linear", "factor": 8.0}


WRONG_GEMMA = {  # the one linear scaling applied to both layer types
    **SMALL_GEMMA,
    "rope_parameters": {
        "full_attention": {**LINEAR8, "rope_theta": 1e6},
        "sliding_attention": {**LINEAR8, "rope_theta": 1e4},
    },
}


@pytest.mark.parametrize("seed", range(10))
def test_scaling_every_gemma3_layer_moves_a_previous_token_head_eight_back(seed):
    right_config = {**SMALL_GEMMA, "rope_scaling": LINEAR8}
    assert [r["scaling"] for r in describe(right_config)] == [None] * 5 + ["linear x8"]
    assert [r["scaling"] for r in describe(WRONG_GEMMA)] == ["linear x8"] * 6
    right, wrong = from_hf_config(right_config)[0], from_hf_config(WRONG_GEMMA)[0]
    q0, k0 = previous_token_head(D, 1e4, "half", seed)
    q, k = q0.expand(1, 1, S, D), k0.expand(1, 1, S, D)
    good, bad = (causal_softmax(layer.scores(q, k, POSITIONS)) for layer in (right, wrong))
    assert on_previous(good) > 0.99 and on_previous(bad) < 0.1
    assert favourite_offset(good)[1:] == [1] * (S - 1)
    assert favourite_offset(bad)[8:] == [8] * (S - 8)


@pytest.mark.parametrize("seed", range(10))
def test_interleaved_weights_in_half_split_code(seed):
    interleaved = from_hf_config(
        {
            "model_type": "llama4_text",
            "hidden_size": 64,
            "num_attention_heads": 1,
            "num_key_value_heads": 1,
            "head_dim": D,
            "num_hidden_layers": 4,
        }
    )[0]
    half = from_hf_config(
        {"model_type": "llama", "hidden_size": D, "num_attention_heads": 1, "num_hidden_layers": 1, "rope_theta": 5e5}
    )[0]
    assert (interleaved.row()["layout"], half.row()["layout"]) == ("interleaved", "half")
    q0, k0 = previous_token_head(D, 5e5, "interleaved", seed)
    q, k = q0.expand(1, 1, S, D), k0.expand(1, 1, S, D)
    perm = rope_weight_permutation(D)
    trained = causal_softmax(interleaved.scores(q, k, POSITIONS))
    as_is = causal_softmax(half.scores(q, k, POSITIONS))
    permuted = causal_softmax(half.scores(q[..., perm], k[..., perm], POSITIONS))
    assert on_previous(trained) > 0.99 and on_previous(as_is) < 0.5
    torch.testing.assert_close(permuted, trained, atol=1e-6, rtol=0)
    if seed == 0:  # the chapter's head
        assert on_previous(as_is) < 0.1 and 1 not in favourite_offset(as_is)


@pytest.mark.parametrize("seed", range(10))
def test_bfloat16_angles(seed):
    q0, k0 = previous_token_head(D, 1e4, "half", seed)
    inv_freq, _ = rope_inv_freq(D, base=1e4)
    errors, kept, weights = [], [], []
    for start in (0, 1000, 8000, 30000):
        p = start + POSITIONS
        exact = p.double()[:, None] * inv_freq
        rounded = (p.bfloat16()[:, None] * inv_freq.bfloat16()).double()
        errors.append((rounded - exact).abs().max().item())
        kept.append(p.bfloat16().unique().numel())
        pair = []
        for angles in (exact, rounded):
            cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)
            scores = apply_rope(q0.expand(S, D), cos, sin) @ apply_rope(k0.expand(S, D), cos, sin).T
            pair.append(on_previous(causal_softmax(scores * D**-0.5)))
        weights.append(pair)
    assert kept == [24, 7, 2, 2]
    assert errors[0] < 0.02 and all(a < b for a, b in zip(errors, errors[1:], strict=False))
    assert [round(e, 3) for e in errors] == [0.015, 2.285, 16.0, 64.0]
    assert all(exact > 0.99 for exact, _ in weights)
    assert weights[0][1] > 0.99 and all(rounded < 0.5 for _, rounded in weights[1:])
    integers = torch.arange(1024.0)
    assert torch.equal(integers[:257].bfloat16().float(), integers[:257]) and integers[257].bfloat16() == 256


def test_forgetting_or_doubling_yarns_temperature():
    deepseek = CONFIGS["DeepSeek-V3"]
    small = {key: deepseek[key] for key in ("model_type", "rope_theta", "rope_scaling")}
    small.update(hidden_size=64, num_attention_heads=2, num_hidden_layers=1, qk_nope_head_dim=16, qk_rope_head_dim=16)
    layer = from_hf_config(small)[0]
    temperature2 = (0.1 * math.log(40) + 1) ** 2
    assert layer.softmax_scale == pytest.approx(32**-0.5 * temperature2, rel=1e-12)
    for seed in range(5):
        g = torch.Generator().manual_seed(seed)
        q, k = 1.5 * torch.randn(2, 1, 2, 64, 32, generator=g, dtype=F64)
        right = layer.scores(q, k, 100_000 + torch.arange(64))

        def entropy(x):
            probs = causal_softmax(x)
            return -(probs * probs.clamp_min(1e-300).log()).sum(-1)[..., 1:]

        forgot, configured, twice = (entropy(x) for x in (right / temperature2, right, right * temperature2))
        assert (forgot > configured).all() and (twice < configured).all()


# ---------------------------------------------------------------------------
# The seven newest configurations, Kimi K2's step and Qwen3's static YaRN
# ---------------------------------------------------------------------------


def _loaded(cls, name: str):
    return cls(**{k: v for k, v in CONFIGS[name].items() if k not in ("model_type", "architectures")})


def test_the_newest_layer_patterns_as_the_chapter_lists_them():
    transformers = pytest.importorskip("transformers")
    rows = {name: describe(CONFIGS[name]) for name in NEWEST}
    oss = CONFIGS["gpt-oss-120b"]
    layer_types = _loaded(transformers.GptOssConfig, "gpt-oss-120b").layer_types
    assert layer_types == oss["layer_types"] == ["sliding_attention", "full_attention"] * 18
    assert oss["sliding_window"] == 128
    assert from_hf_config(oss)[0].rope_parameters["truncate"] is False
    assert {r["scaling"] for r in rows["gpt-oss-120b"]} == {"yarn x32"}
    assert {(r["scheme"], r["theta"], r["scaling"]) for r in rows["Kimi-K2"]} == {("mla_rope", 50000.0, "yarn x32")}
    assert {(r["rotary"], r["layout"]) for r in rows["GLM-4.5"]} == {(64, "half")}
    smol_nope = [r["layer"] for r in rows["SmolLM3-3B"] if r["scheme"] == "nope"]
    flags = _loaded(transformers.SmolLM3Config, "SmolLM3-3B").no_rope_layers
    assert smol_nope == [i for i, flag in enumerate(flags) if flag == 0] == list(range(3, 36, 4))
    r7b_types = _loaded(transformers.Cohere2Config, "Command-R7B").layer_types
    assert (
        [r["scheme"] for r in rows["Command-R7B"]]
        == ["nope" if t == "full_attention" else "rope" for t in r7b_types]
        == ["rope", "rope", "rope", "nope"] * 8
    )
    assert {r["layout"] for r in rows["Command-R7B"] if r["scheme"] == "rope"} == {"interleaved"}
    nxt_types = _loaded(transformers.Qwen3NextConfig, "Qwen3-Next-80B-A3B").layer_types
    nxt = from_hf_config(CONFIGS["Qwen3-Next-80B-A3B"])
    assert [type(layer).__name__ for layer in nxt] == [
        "RecurrentLayer" if t == "linear_attention" else "RotaryLayer" for t in nxt_types
    ]
    assert (nxt[3].rotary_dim, nxt[3].head_dim, nxt[3].base) == (64, 256, 1e7)
    assert CONFIGS["DeepSeek-V3.2-Exp"]["index_topk"] == 2048
    assert {r["scaling"] for r in rows["DeepSeek-V3.2-Exp"]} == {"yarn x40"}


def _sides(inv_freq: torch.Tensor, plain: torch.Tensor, factor: float) -> tuple[int, int, int]:
    ratio = inv_freq.double() / plain
    kept = torch.isclose(ratio, torch.ones_like(ratio), rtol=1e-6, atol=0)
    full = torch.isclose(ratio, torch.full_like(ratio, 1 / factor), rtol=1e-6, atol=0)
    return int(kept.sum()), int((~kept & ~full).sum()), int(full.sum())


@pytest.mark.parametrize(("name", "want"), [("Kimi-K2", (20, 0, 12)), ("DeepSeek-V3", (11, 12, 9))])
def test_kimi_k2_yarn_is_a_step_in_posenc_and_in_transformers(name, want):
    """beta_fast == beta_slow == 1: no pair on the ramp (DeepSeek-V3's 32 and 1 put 12 there)."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = from_hf_config(CONFIGS[name])[0].rope_parameters
    plain, _ = rope_inv_freq(64, base=params["rope_theta"])
    ours, factor = rope_inv_freq(64, scaling=params)
    theirs, their_factor = ROPE_INIT_FUNCTIONS["yarn"](_loaded(transformers.DeepseekV3Config, name), "cpu")
    assert _sides(ours, plain, params["factor"]) == _sides(theirs, plain, params["factor"]) == want
    assert torch.allclose(ours, theirs.double(), rtol=1e-6, atol=0)
    if name == "Kimi-K2":
        assert factor == their_factor == 1.0  # mscale == mscale_all_dim: no temperature
        waves = 2 * math.pi / plain
        assert round(float(waves[19])) == 3874 and round(float(waves[20])) == 5433


@pytest.mark.parametrize("seed", range(4))
def test_qwen3_static_yarn_changes_short_inputs(seed):
    """Factor 4 from 32,768 on a 128-channel head with base 1e6, positions below 4,096."""
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    plain, _ = rope_inv_freq(128, base=1e6)
    scaled, factor = rope_inv_freq(128, base=1e6, scaling=yarn)
    assert _sides(scaled, plain, 4.0) == (24, 16, 24)
    assert math.isclose(factor, 0.1 * math.log(4) + 1) and round(factor**2, 3) == 1.296
    n = 4096
    positions = torch.arange(n)
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, 1, n, 128, generator=g, dtype=F64)
    queries = torch.randint(0, n, (64,), generator=g)
    offset = queries[:, None] - positions[None, :]
    cos, sin = (t.double() for t in rope_cos_sin(positions, 128, base=1e6))
    cos_y, sin_y = (t.double() for t in rope_cos_sin(positions, 128, base=1e6, scaling=yarn))

    def probs(c, s):
        logits = apply_rope(q, c, s)[0, 0, queries] @ apply_rope(k, c, s)[0, 0].T / 128**0.5
        return logits.masked_fill(offset < 0, -math.inf).softmax(-1)

    base = probs(cos, sin)
    moved = {
        label: float(0.5 * (probs(c, s) - base).abs().sum(-1).mean())
        for label, (c, s) in {
            "temperature": (cos * factor, sin * factor),
            "frequencies": (cos_y / factor, sin_y / factor),
            "both": (cos_y, sin_y),
        }.items()
    }
    # the chapter's seed gives 0.11, 0.07 and 0.15; every seed orders them alike
    assert 0.10 < moved["temperature"] < 0.13
    assert 0.05 < moved["frequencies"] < 0.09
    assert 0.13 < moved["both"] < 0.17
