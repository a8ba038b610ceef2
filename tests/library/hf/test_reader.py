"""posenc.hf (the reader) against transformers 5: per-layer logits of tiny configurations, and real models' rows.

Each tiny configuration is built offline with transformers' own configuration class; the
reference logits come from that model's rotary module, its apply function and its
attention module's softmax scale: ``(q_rot @ repeat_kv(k_rot)^T) * attention.scaling``.
transformers forms the angles in float32, posenc in float64: the two differ by about
``position * 6e-8`` radians, so at the positions used here (< 300) the logits (|s| < 10)
agree to 1e-4.
"""

from __future__ import annotations

import importlib
import json
import runpy
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from repo import ROOT

from posenc.hf.fields import DEFAULTS
from posenc.hf.reader import config_dict, describe, format_description, from_hf_config

transformers = pytest.importorskip("transformers")
from transformers.models.llama.modeling_llama import repeat_kv  # noqa: E402

ATOL = 1e-4
TINY = {
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "max_position_embeddings": 64,
}
LONG = {"short_factor": [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.1, 3.8, 4.6, 5.5, 6.5, 7.6]}
LONG["long_factor"] = [2 * f for f in LONG["short_factor"]]

#: name -> (transformers configuration, model module, rotary class, attention class)
CASES = {
    "llama-default": (lambda: transformers.LlamaConfig(**TINY), "llama", "Llama"),
    "llama-linear": (
        lambda: transformers.LlamaConfig(**TINY, rope_parameters={"rope_type": "linear", "factor": 4.0}),
        "llama",
        "Llama",
    ),
    "llama-dynamic": (
        lambda: transformers.LlamaConfig(**TINY, rope_parameters={"rope_type": "dynamic", "factor": 2.0}),
        "llama",
        "Llama",
    ),
    "llama-llama3": (
        lambda: transformers.LlamaConfig(
            **TINY,
            rope_parameters={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 32,
                "rope_theta": 500000.0,
            },
        ),
        "llama",
        "Llama",
    ),
    "llama-yarn": (
        lambda: transformers.LlamaConfig(
            **TINY, rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}
        ),
        "llama",
        "Llama",
    ),
    "mistral-head_dim": (lambda: transformers.MistralConfig(**TINY, head_dim=32), "mistral", "Mistral"),
    "qwen2": (
        lambda: transformers.Qwen2Config(**TINY, rope_parameters={"rope_type": "default", "rope_theta": 1e6}),
        "qwen2",
        "Qwen2",
    ),
    "qwen3-yarn": (
        lambda: transformers.Qwen3Config(
            **TINY,
            head_dim=16,
            rope_parameters={
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32,
                "rope_theta": 1e6,
            },
        ),
        "qwen3",
        "Qwen3",
    ),
    "phi3-longrope-partial": (  # head_dim 32, 0.75 of it turns: 24 channels, 12 factors
        lambda: transformers.Phi3Config(
            **{**TINY, "hidden_size": 128, "max_position_embeddings": 256},
            partial_rotary_factor=0.75,
            original_max_position_embeddings=64,
            rope_parameters={"rope_type": "longrope", **LONG},
        ),
        "phi3",
        "Phi3",
    ),
    "gpt_neox-partial": (
        lambda: transformers.GPTNeoXConfig(
            hidden_size=64, num_attention_heads=4, num_hidden_layers=2, rotary_pct=0.25, max_position_embeddings=64
        ),
        "gpt_neox",
        "GPTNeoX",
    ),
    "falcon-rope": (
        lambda: transformers.FalconConfig(
            hidden_size=64, num_attention_heads=4, num_kv_heads=2, num_hidden_layers=2, new_decoder_architecture=True
        ),
        "falcon",
        "Falcon",
    ),
}


def qkv(config, h_kv: int, head_dim: int, s: int = 12, batch: int = 2, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, 4, s, head_dim, generator=g)
    return q, torch.randn(batch, h_kv, s, head_dim, generator=g)


def positions(start: int, s: int = 12, batch: int = 2) -> torch.Tensor:
    """``[batch, s]``: ``start .. start + s - 1``, the second row 5 further."""
    return start + torch.arange(s).expand(batch, s) + torch.tensor([[0], [5]])


def reference_scores(rotary, apply_fn, scale, q, k, position_ids, **kwargs) -> torch.Tensor:
    """transformers' logits: cos/sin of the keys' positions, the queries' the last s_q of them."""
    cos, sin = rotary(k, position_ids, **kwargs)  # [b, s_k, r]
    s_q = q.shape[2]
    q_rot = apply_fn(q, q, cos[:, -s_q:], sin[:, -s_q:])[0]
    k_rot = apply_fn(k, k, cos, sin)[1]
    k_rot = repeat_kv(k_rot, q.shape[1] // k.shape[1])
    return torch.matmul(q_rot, k_rot.transpose(2, 3)) * scale


@pytest.mark.parametrize("start", [0, 100], ids=["inside", "beyond"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_rope_families_match_transformers(name, start):
    make, model, prefix = CASES[name]
    config = make()
    module = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
    rotary = getattr(module, f"{prefix}RotaryEmbedding")(config)
    layers = from_hf_config(config)
    assert len(layers) == config.num_hidden_layers
    layer = layers[1]
    attention = getattr(module, f"{prefix}Attention")(config, layer_idx=1)
    scale = getattr(attention, "scaling", None) or attention.inv_norm_factor
    h_kv = getattr(config, "num_key_value_heads", None) or getattr(config, "num_kv_heads", None) or 4
    q, k = qkv(config, h_kv, layer.head_dim)
    pos = positions(start)
    expected = reference_scores(rotary, module.apply_rotary_pos_emb, scale, q, k, pos)
    torch.testing.assert_close(layer.scores(q, k, pos), expected, atol=ATOL, rtol=ATOL)
    # decode: the last 3 keys are the queries
    torch.testing.assert_close(layer.scores(q[:, :, -3:], k, pos), expected[:, :, -3:], atol=ATOL, rtol=ATOL)
    assert layer.row()["softmax_scale"] == pytest.approx(scale, rel=1e-12)


def test_gptj_interleaved_partial_rotary_matches_transformers():
    from transformers.models.gptj.modeling_gptj import GPTJAttention, apply_rotary_pos_emb

    config = transformers.GPTJConfig(n_embd=64, n_head=4, n_layer=2, rotary_dim=8, n_positions=512)
    attention = GPTJAttention(config, layer_idx=0)
    q, k = qkv(config, 4, 16)
    layer = from_hf_config(config)[0]
    assert (layer.rotary_dim, layer.layout) == (8, "interleaved")
    for start in (0, 300):
        pos = positions(start)
        sin, cos = torch.split(attention.embed_positions[pos], 4, dim=-1)  # [b, s, r/2] each

        def turn(x, sin=sin, cos=cos):  # GPT-J rotates [b, s, h, d]
            x = x.transpose(1, 2)
            x = torch.cat([apply_rotary_pos_emb(x[..., :8], sin, cos), x[..., 8:]], dim=-1)
            return x.transpose(1, 2)

        expected = torch.matmul(turn(q), turn(k).transpose(2, 3)) / attention.scale_attn
        torch.testing.assert_close(layer.scores(q, k, pos), expected, atol=ATOL, rtol=ATOL)


def gemma3_config(**extra):
    return transformers.Gemma3TextConfig(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_hidden_layers=7,
        query_pre_attn_scalar=24,
        max_position_embeddings=256,
        rope_scaling={"rope_type": "linear", "factor": 8.0},
        **extra,
    )


def test_gemma3_layers_match_transformers():
    from transformers.models.gemma3.modeling_gemma3 import Gemma3Attention, Gemma3RotaryEmbedding, apply_rotary_pos_emb

    config = gemma3_config()
    rotary = Gemma3RotaryEmbedding(config)
    layers = from_hf_config(config)
    q, k = qkv(config, 2, 16)
    for i, layer in enumerate(layers):
        scale = Gemma3Attention(config, layer_idx=i).scaling
        for start in (0, 200):
            pos = positions(start)
            layer_type = config.layer_types[i]
            expected = reference_scores(rotary, apply_rotary_pos_emb, scale, q, k, pos, layer_type=layer_type)
            torch.testing.assert_close(layer.scores(q, k, pos), expected, atol=ATOL, rtol=ATOL)
    rows = describe(config)
    assert [row["theta"] for row in rows] == [1e4] * 5 + [1e6] + [1e4]
    assert [row["scaling"] for row in rows] == [None] * 5 + ["linear x8"] + [None]
    assert {row["softmax_scale"] for row in rows} == {24**-0.5}


def test_gemma3_older_file_reads_as_the_transformers_5_dict():
    # the pre-v5 spelling: rope_theta, rope_local_base_freq, sliding_window_pattern, rope_scaling for global layers
    old = {
        "model_type": "gemma3",
        "text_config": {
            "model_type": "gemma3_text",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "num_hidden_layers": 7,
            "query_pre_attn_scalar": 24,
            "max_position_embeddings": 256,
            "rope_theta": 1e6,
            "rope_local_base_freq": 1e4,
            "sliding_window_pattern": 6,
            "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        },
    }
    assert describe(old) == describe(gemma3_config())
    wrapped = transformers.Gemma3Config(text_config=gemma3_config().to_dict())
    assert describe(wrapped) == describe(gemma3_config())


def test_qwen2_vl_mrope_matches_transformers():
    from transformers.models.qwen2_vl import modeling_qwen2_vl as m

    config = transformers.Qwen2VLTextConfig(
        **TINY, rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 1e6}
    )
    rotary, scale = m.Qwen2VLRotaryEmbedding(config), m.Qwen2VLAttention(config, layer_idx=0).scaling
    layer = from_hf_config(config)[0]
    assert layer.mrope_section == [2, 3, 3] and layer.row()["scheme"] == "mrope"
    q, k = qkv(config, 2, 16)
    pos3 = torch.randint(0, 300, (3, 2, 12), generator=torch.Generator().manual_seed(1))  # [3, b, s]
    expected = reference_scores(rotary, m.apply_rotary_pos_emb, scale, q, k, pos3)
    torch.testing.assert_close(layer.scores(q, k, pos3), expected, atol=ATOL, rtol=ATOL)
    text = positions(100)  # [b, s]: the same position on the three axes
    expected = reference_scores(rotary, m.apply_rotary_pos_emb, scale, q, k, text)
    torch.testing.assert_close(layer.scores(q, k, text), expected, atol=ATOL, rtol=ATOL)
    # the older file: rope_scaling {"type": "mrope", "mrope_section": ...} at the top level
    old = {
        **TINY,
        "model_type": "qwen2_vl",
        "rope_theta": 1e6,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
    }
    assert describe(old) == describe(transformers.Qwen2VLConfig(text_config=config.to_dict()))


def test_falcon_dispatches_on_alibi():
    rope = transformers.FalconConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, alibi=False)
    alibi = transformers.FalconConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, alibi=True)
    assert [layer.kind for layer in from_hf_config(rope)] == ["rope", "rope"]
    assert [layer.kind for layer in from_hf_config(alibi)] == ["alibi", "alibi"]


def test_defaults_are_those_of_the_transformers_classes():
    gemma = transformers.Gemma3TextConfig()
    for key in ("hidden_size", "num_attention_heads", "head_dim", "num_hidden_layers", "query_pre_attn_scalar"):
        assert DEFAULTS["gemma3_text"][key] == getattr(gemma, key), key
    assert DEFAULTS["gemma3_text"]["max_position_embeddings"] == gemma.max_position_embeddings
    assert DEFAULTS["gemma3_text"]["rope_theta"] == gemma.rope_parameters["full_attention"]["rope_theta"]
    assert DEFAULTS["gemma3_text"]["rope_local_base_freq"] == gemma.rope_parameters["sliding_attention"]["rope_theta"]
    assert DEFAULTS["gemma3_text"]["sliding_window_pattern"] == gemma._sliding_window_pattern
    neox = transformers.GPTNeoXConfig().rope_parameters
    assert (DEFAULTS["gpt_neox"]["rotary_pct"], DEFAULTS["gpt_neox"]["rotary_emb_base"]) == (
        neox["partial_rotary_factor"],
        neox["rope_theta"],
    )
    assert DEFAULTS["gptj"]["rotary_dim"] == transformers.GPTJConfig().rotary_dim
    assert (
        DEFAULTS["phi3"]["original_max_position_embeddings"]
        == transformers.Phi3Config().original_max_position_embeddings
    )
    assert DEFAULTS["qwen2_vl_text"]["rope_theta"] == transformers.Qwen2VLTextConfig().rope_parameters["rope_theta"]


@pytest.mark.parametrize(
    "model_type, config_class",
    [("qwen3", "Qwen3Config"), ("llama4_text", "Llama4TextConfig"), ("llama", "LlamaConfig"), ("qwen2", "Qwen2Config")],
)
def test_a_missing_head_dim_is_the_config_class_default(model_type, config_class):
    """Qwen3 and Llama 4 fix head_dim at 128 whatever the width; Llama and Qwen2 derive it."""
    small = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1}
    theirs = getattr(transformers, config_class)(**small)
    expected = getattr(theirs, "head_dim", None) or small["hidden_size"] // small["num_attention_heads"]
    layer = from_hf_config({"model_type": model_type, **small})[0]
    assert layer.head_dim == expected
    assert describe({"model_type": model_type, **small})[0]["softmax_scale"] == pytest.approx(expected**-0.5)


# --- Real models: values from their published config.json (only fields we are sure of) ---

# huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json
LLAMA_31_8B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
}
# huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json
QWEN25_7B = {
    "model_type": "qwen2",
    "hidden_size": 3584,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "num_hidden_layers": 28,
    "max_position_embeddings": 131072,
    "rope_theta": 1000000.0,
    "rope_scaling": None,
}
# huggingface.co/google/gemma-3-4b-it/blob/main/config.json: the text_config lists only these; the rest
# (8 heads, head_dim 256, query_pre_attn_scalar 256, theta 1e6 / 1e4, pattern 6) are Gemma3TextConfig defaults
GEMMA3_4B = {
    "model_type": "gemma3",
    "text_config": {
        "hidden_size": 2560,
        "intermediate_size": 10240,
        "model_type": "gemma3_text",
        "num_hidden_layers": 34,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024,
    },
}
# huggingface.co/EleutherAI/gpt-neox-20b/blob/main/config.json
GPT_NEOX_20B = {
    "model_type": "gpt_neox",
    "hidden_size": 6144,
    "num_attention_heads": 64,
    "num_hidden_layers": 44,
    "max_position_embeddings": 2048,
    "rotary_pct": 0.25,
    "rotary_emb_base": 10000,
}
# huggingface.co/EleutherAI/gpt-j-6b/blob/main/config.json
GPT_J_6B = {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "n_layer": 28, "n_positions": 2048, "rotary_dim": 64}
# huggingface.co/microsoft/Phi-4-mini-instruct/blob/main/config.json: the geometry below is published; the
# 48-entry long_factor and short_factor lists are NOT reproduced here (placeholders of 1.0)
PHI4_MINI = {
    "model_type": "phi3",
    "hidden_size": 3072,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "partial_rotary_factor": 0.75,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {"type": "longrope", "long_factor": [1.0] * 48, "short_factor": [1.0] * 48},
}

PUBLISHED = {
    # name: (config, layers, rows that repeat: (theta, scaling, rotary, layout, softmax scale))
    "Llama-3.1-8B": (LLAMA_31_8B, 32, [(500000.0, "llama3 x8", 128, "half", 128**-0.5)]),
    "Qwen2.5-7B": (QWEN25_7B, 28, [(1e6, None, 128, "half", 128**-0.5)]),
    "GPT-NeoX-20B": (GPT_NEOX_20B, 44, [(10000.0, None, 24, "half", 96**-0.5)]),
    "GPT-J-6B": (GPT_J_6B, 28, [(10000.0, None, 64, "interleaved", 256**-0.5)]),
    "Phi-4-mini": (PHI4_MINI, 32, [(10000.0, "longrope x32", 96, "half", 128**-0.5)]),
    "Gemma-3-4B": (
        GEMMA3_4B,
        34,
        [(1e4, None, 256, "half", 256**-0.5)] * 5 + [(1e6, "linear x8", 256, "half", 256**-0.5)],
    ),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_configs_describe_rows(name):
    config, n, pattern = PUBLISHED[name]
    rows = describe(config)
    assert [row["layer"] for row in rows] == list(range(n))
    got = [(r["theta"], r["scaling"], r["rotary"], r["layout"], r["softmax_scale"]) for r in rows]
    assert got == [pattern[i % len(pattern)] for i in range(n)]


def test_qwen25_model_card_yarn_and_transformers_object_agree():
    # the Qwen2.5 model card's long-context setting
    yarn = {**QWEN25_7B, "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}}
    assert {row["scaling"] for row in describe(yarn)} == {"yarn x4"}
    assert describe(
        transformers.LlamaConfig(**{k: v for k, v in LLAMA_31_8B.items() if k != "model_type"})
    ) == describe(LLAMA_31_8B)


def test_a_pattern_is_named_only_when_it_repeats():
    """Four layers full, sliding, sliding, full repeat no period of 3: a pattern is seen twice at least."""

    def gemma(layer_types):
        text = {**GEMMA3_4B["text_config"], "num_hidden_layers": 4, "layer_types": layer_types}
        return format_description(describe({**GEMMA3_4B, "text_config": text}))

    assert "pattern: the layers repeat every 2 (4 layers)" in gemma(["full_attention", "sliding_attention"] * 2)
    assert "pattern" not in gemma(["full_attention", "sliding_attention", "sliding_attention", "full_attention"])


@pytest.mark.parametrize("flag, family", [("alibi", "falcon"), ("rope_interleave", "deepseek_v3")])
def test_a_flag_of_null_reads_as_transformers_reads_it_and_a_string_is_refused(flag, family):
    """JSON's null is false, as transformers' truthiness reads it; "no" would be true there, so it is refused."""
    base = {"model_type": family, "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1}
    absent, null = describe(base), describe({**base, flag: None})
    assert null == describe({**base, flag: False})
    assert (absent == null) == (flag == "alibi")  # falcon's alibi defaults to false, DeepSeek's interleave to true
    with pytest.raises(ValueError, match=rf"config\['{flag}'\] must be true or false, got 'no'"):
        describe({**base, flag: "no"})


def test_format_description_shows_the_gemma3_pattern():
    text = format_description(describe(GEMMA3_4B))
    lines = text.splitlines()
    assert lines[2].split()[:5] == ["0-4", "rope", "10000", "-", "256"]
    assert lines[3].split()[:5] == ["5", "rope", "1e+06", "linear", "x8"]
    assert lines[-1] == "pattern: the layers repeat every 6 (34 layers)"
    assert len(lines) == 2 + 11 + 1  # header, rule, 11 runs (0-4, 5, ..., 29, 30-33), pattern


def test_config_dict_reads_files_objects_and_dicts(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_31_8B))
    assert config_dict(path) == config_dict(str(path)) == config_dict(LLAMA_31_8B)
    assert config_dict(GEMMA3_4B)["model_type"] == "gemma3_text"
    with pytest.raises(ValueError, match="config path .*missing.json.* is not a file"):
        config_dict(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="model_type 'gpt2' is not supported; supported: .*llama"):
        from_hf_config({"model_type": "gpt2"})
    with pytest.raises(ValueError, match="config is missing 'num_attention_heads'"):
        from_hf_config({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2})


def test_bad_query_and_key_shapes_raise():
    layer = from_hf_config(LLAMA_31_8B)[0]
    q, k = torch.zeros(1, 32, 4, 128), torch.zeros(1, 8, 4, 128)
    with pytest.raises(ValueError, match=r"position_ids must have shape \[batch, s_k\].*got \(1, 5\)"):
        layer.scores(q, k, torch.arange(5)[None])
    with pytest.raises(ValueError, match="must be a multiple of k's heads"):
        layer.scores(q, torch.zeros(1, 5, 4, 128), torch.arange(4))
    with pytest.raises(ValueError, match=r"q must have head_dim 128 \(last dim\) for this layer, got \(1, 32, 4, 64\)"):
        layer.scores(torch.zeros(1, 32, 4, 64), k, torch.arange(4))


def test_command_line_prints_the_table_and_fails_with_status_2(tmp_path, capsys, monkeypatch):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA3_4B))
    # the older name runs the same command (in this process: runpy runs it as python -m does)
    monkeypatch.setattr(sys, "argv", ["posenc.describe", str(path)])
    with pytest.raises(SystemExit) as done:
        runpy.run_module("posenc.describe", run_name="__main__", alter_sys=False)
    assert done.value.code == 0 and "pattern: the layers repeat every 6" in capsys.readouterr().out
    run = [sys.executable, "-m", "posenc.hf"]
    done = subprocess.run([*run, str(path)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "pattern: the layers repeat every 6" in done.stdout
    path.write_text(json.dumps({"model_type": "gpt2"}))
    done = subprocess.run([*run, str(path)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "model_type 'gpt2' is not supported" in done.stderr


@settings(derandomize=True, deadline=None, database=None, max_examples=30)
@given(
    name=st.sampled_from(["llama-default", "gpt_neox-partial", "qwen2", "mistral-head_dim"]), shift=st.integers(0, 200)
)
def test_scores_depend_on_relative_positions_only(name, shift):
    config = CASES[name][0]()
    layer = from_hf_config(config)[0]
    q, k = qkv(config, getattr(config, "num_key_value_heads", None) or 4, layer.head_dim, s=6)
    pos = positions(0, s=6)
    torch.testing.assert_close(layer.scores(q, k, pos + shift), layer.scores(q, k, pos), atol=ATOL, rtol=ATOL)


def test_format_description_rejects_rows_without_layers():
    assert format_description([]) == "(no layers)"
    with pytest.raises(ValueError, match=r"rows\[0\] must be a dict with a 'layer' key"):
        format_description([{"scheme": "rope"}])
    with pytest.raises(ValueError, match="rows must be a list of describe"):
        format_description("rope")


#: config.json files that spell a parameter twice, read as transformers 5 reads them: a non-empty
#: ``rope_scaling`` wins over ``rope_parameters`` (convert_rope_params_to_dict), and a
#: ``partial_rotary_factor`` inside the parameters wins over the top-level one (Phi-3) or over
#: ``rotary_pct`` (GPT-NeoX, which never reads a top-level ``partial_rotary_factor``).
RAW = {
    "llama-empty-parameters-beside-scaling": (
        {**TINY, "model_type": "llama", "rope_parameters": {}, "rope_scaling": {"rope_type": "linear", "factor": 4.0}},
        "LlamaConfig", "llama", "Llama",
    ),
    "llama-scaling-beside-parameters": (
        {**TINY, "model_type": "llama", "rope_parameters": {"rope_type": "default", "rope_theta": 1e4},
         "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
        "LlamaConfig", "llama", "Llama",
    ),
    "phi3-partial-inside-and-outside": (
        {**TINY, "model_type": "phi3", "partial_rotary_factor": 0.5,
         "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.75}},
        "Phi3Config", "phi3", "Phi3",
    ),
    "phi3-longrope-original-length-inside-only": (  # the class attribute, 4096, wins over the 64 inside
        {**TINY, "hidden_size": 128, "max_position_embeddings": 256, "model_type": "phi3",
         "partial_rotary_factor": 0.75,
         "rope_parameters": {"rope_type": "longrope", **LONG, "original_max_position_embeddings": 64}},
        "Phi3Config", "phi3", "Phi3",
    ),
    "gpt_neox-rotary_pct-and-partial": (
        {**TINY, "model_type": "gpt_neox", "rotary_pct": 0.25, "partial_rotary_factor": 1.0},
        "GPTNeoXConfig", "gpt_neox", "GPTNeoX",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(RAW))
def test_parameters_spelt_twice_are_read_as_transformers_reads_them(name):
    raw, config_class, model, prefix = RAW[name]
    copy = json.loads(json.dumps(raw))  # transformers fills in the dicts it is given
    config = getattr(transformers, config_class)(**{key: value for key, value in copy.items() if key != "model_type"})
    module = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
    rotary = getattr(module, f"{prefix}RotaryEmbedding")(config)
    layer = from_hf_config(json.loads(json.dumps(raw)))[1]
    attention = getattr(module, f"{prefix}Attention")(config, layer_idx=1)
    h_kv = getattr(config, "num_key_value_heads", None) or 4
    q, k = qkv(config, h_kv, layer.head_dim)
    for start in (0, 100):
        pos = positions(start)
        expected = reference_scores(rotary, module.apply_rotary_pos_emb, attention.scaling, q, k, pos)
        torch.testing.assert_close(layer.scores(q, k, pos), expected, atol=ATOL, rtol=ATOL)


@pytest.mark.parametrize(
    "field, value",
    [("head_dim", float("inf")), ("head_dim", "16"), ("hidden_size", "64"), ("num_attention_heads", 0),
     ("num_hidden_layers", True), ("head_dim", 16.0)],
)  # fmt: skip
def test_a_count_that_is_not_a_positive_int_is_named(tmp_path, capsys, field, value):
    """Counts read from a config are ints >= 1: anything else is a ValueError naming the field and the
    family, and the command line prints it on one line with status 2 (no OverflowError or division by zero)."""
    cfg = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1, field: value}
    with pytest.raises(ValueError, match=rf"config\['{field}'\] must be an int >= 1.*, got .* \(model_type 'llama'\)"):
        from_hf_config(cfg)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))  # inf is written as Infinity, which json.loads reads back
    assert importlib.import_module("posenc.hf.cli").main([str(path)]) == 2  # the command, in this process
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"error: config['{field}']"), err


@pytest.mark.parametrize(
    "cfg, field",
    [
        ({"model_type": "llama", "rope_theta": "1e4"}, "rope_theta"),
        ({"model_type": "llama", "rope_theta": float("nan")}, "rope_theta"),
        ({"model_type": "phi3", "partial_rotary_factor": float("inf")}, "partial_rotary_factor"),
        ({"model_type": "gemma3_text", "query_pre_attn_scalar": 0}, "query_pre_attn_scalar"),
        ({"model_type": "llama4_text", "floor_scale": -1.0, "head_dim": 16}, "floor_scale"),
        ({"model_type": "mpt", "n_heads": 2, "d_model": 8, "n_layers": 1,
          "attn_config": {"alibi": True, "softmax_scale": float("nan")}}, "softmax_scale"),
    ],
)  # fmt: skip
def test_a_number_that_is_not_finite_and_positive_is_named(cfg, field):
    """Bases, factors and scales read from a config are finite numbers > 0; a string, NaN, infinity,
    zero or a negative value is a ValueError naming the field and the family, not a crash or a NaN score."""
    small = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1}
    with pytest.raises(ValueError, match=rf"config\['{field}'\] must be a finite number > 0, got .*\(model_type "):
        from_hf_config({**small, **cfg})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=40))
def test_the_period_is_the_smallest_shift_that_repeats_the_rows(seq):
    from posenc.hf.reader import _period

    keys = [(k,) for k in seq]
    by_definition = next(p for p in range(1, len(keys) + 1) if all(keys[i] == keys[i - p] for i in range(p, len(keys))))
    assert _period(keys) == by_definition


def test_the_period_search_is_linear_in_the_rows():
    """20,000 rows without a period took 19.6 s with a quadratic search; count the comparisons instead
    of timing them: at most three per row (the prefix function's amortized bound)."""
    from posenc.hf.reader import _period

    compared = 0

    class Key(tuple):
        def __eq__(self, other):
            nonlocal compared
            compared += 1
            return tuple.__eq__(self, other)

        def __ne__(self, other):
            return not self.__eq__(other)

        __hash__ = tuple.__hash__

    keys = [Key(("rope", 1e4))] * 19_999 + [Key(("rope", 1.0))]
    assert _period(keys) == 20_000
    assert compared <= 3 * len(keys)  # the quadratic search made about 2 * 10^8
    rows = [{"layer": i, "scheme": "rope", "theta": 1e4} for i in range(2_000)]
    rows[-1]["theta"] = 1.0
    assert "every" not in format_description(rows)


@pytest.mark.parametrize("family", ["llama", "gemma3_text", "deepseek_v3", "llama4_text", "bloom", "t5"])
def test_a_layer_count_past_the_bound_is_refused_before_building(family):
    """One object per layer: 10**9 layers would exhaust memory (or loop for minutes), 10**400 overflow."""
    for layers in (10**9, 10**400):
        cfg = {"model_type": family, "num_hidden_layers": layers, "n_layer": layers, "num_layers": layers,
               "hidden_size": 64, "num_attention_heads": 4, "n_head": 4, "num_heads": 4, "head_dim": 16}  # fmt: skip
        with pytest.raises(ValueError, match=r"must be an int >= 1 and <= 65536, got 1000"):
            from_hf_config(cfg)


def test_gemma3_nested_parameters_without_a_base_take_the_top_level_ones():
    """transformers fills a layer type's missing rope_theta from the top level: rope_theta for the
    global layers, rope_local_base_freq for the local ones (not 10,000 for both)."""
    kinds = {"full_attention": {"rope_type": "default"}, "sliding_attention": {"rope_type": "default"}}
    raw = {"model_type": "gemma3_text", "num_hidden_layers": 6, "rope_theta": 5e5, "rope_local_base_freq": 2e4,
           "rope_parameters": kinds}  # fmt: skip
    copy = json.loads(json.dumps({key: value for key, value in raw.items() if key != "model_type"}))
    theirs = transformers.Gemma3TextConfig(**copy).rope_parameters
    rows = describe(raw)
    layer_types = transformers.Gemma3TextConfig(**copy).layer_types
    assert [row["theta"] for row in rows] == [theirs[kind]["rope_theta"] for kind in layer_types]
    assert {row["theta"] for row in rows} == {5e5, 2e4}


LLAMA_SMALL = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2}
PHI3_LONGROPE_SMALL = {
    "model_type": "phi3", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1,
    "original_max_position_embeddings": 16,
    "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8},
}  # fmt: skip
GEMMA3_SMALL = {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16,
                "num_hidden_layers": 6, "rope_theta": 5e5, "rope_local_base_freq": 2e4}  # fmt: skip
LLAMA4_SMALL = {"model_type": "llama4_text", "num_hidden_layers": 4, "num_attention_heads": 2, "head_dim": 8}
DEEPSEEK_SMALL = {"model_type": "deepseek_v3", "num_hidden_layers": 1, "num_attention_heads": 2}
GPTJ_SMALL = {"model_type": "gptj", "n_embd": 64, "n_head": 4, "n_layer": 1}


@pytest.mark.parametrize(
    "extra",
    [
        {"rope_parameters": {"rope_type": "linear", "factor": 8.0}},
        {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e5}},
        {"rope_scaling": {"type": "linear", "factor": 4.0}},  # transformers keeps rope_type "default" here
        {"layer_types": ["attention", "sliding_attention"] * 3},  # "attention" is remapped to full_attention
    ],
)
def test_gemma3_reads_rope_parameters_and_layer_types_as_transformers(extra):
    """A flat (not per-layer-type) rope_parameters is ignored by Gemma3TextConfig, which fills in one default
    dict per layer type; posenc applied it to the global layers (W5). A legacy "attention" layer type is
    transformers' full_attention (R4)."""
    raw = {**GEMMA3_SMALL, **extra}
    ours = describe(raw)
    config = transformers.Gemma3TextConfig(
        **json.loads(json.dumps({k: v for k, v in raw.items() if k != "model_type"}))
    )
    theirs = {
        kind: params["rope_type"] for kind, params in config.rope_parameters.items() if kind in config.layer_types
    }
    assert [row["theta"] for row in ours] == [config.rope_parameters[kind]["rope_theta"] for kind in config.layer_types]
    expected = [None if theirs[kind] == "default" else theirs[kind] for kind in config.layer_types]
    assert [row["scaling"] and row["scaling"].split()[0] for row in ours] == expected


MUST_BE_INT = r"must be an int >= 1, got"
MUST_BE_DICT = r"must be a dict \(a JSON object\) or null, got"


@pytest.mark.parametrize(
    "cfg, message",
    [
        # W11: per-layer lists of the wrong length or type
        ({**GEMMA3_SMALL, "layer_types": ["sliding_attention"] * 5},
         r"config\['layer_types'\] must be a list of num_hidden_layers = 6 names, got 5 entries"),
        ({**GEMMA3_SMALL, "layer_types": ["sliding_attention"] * 7}, r"num_hidden_layers = 6 names, got 7 entries"),
        ({**GEMMA3_SMALL, "layer_types": ["global"] * 6},
         r"config\['layer_types'\] entries must be one of 'full_attention', 'sliding_attention', got 'global'"),
        ({**GEMMA3_SMALL, "layer_types": "full_attention"}, r"layer_types'\] must be a list .*got 'full_attention'"),
        ({**LLAMA4_SMALL, "no_rope_layers": [1, 1, 1, 0, 1]},
         r"config\['no_rope_layers'\] must have num_hidden_layers = 4 entries, got 5"),
        ({**LLAMA4_SMALL, "no_rope_layers": "0000"}, r"config\['no_rope_layers'\] must be a list of ints .*got '0000'"),
        ({**LLAMA4_SMALL, "no_rope_layers": 5}, r"config\['no_rope_layers'\] must be a list of ints .*got 5"),
        # W11: falsy garbage is not replaced by a default
        ({**LLAMA_SMALL, "rope_parameters": {"rope_type": "default", "rope_theta": 0}},
         r"config\['rope_theta'\] must be a finite number > 0, got 0"),
        ({**LLAMA4_SMALL, "rope_theta": 0}, r"config\['rope_theta'\] must be a finite number > 0, got 0"),
        ({**GPTJ_SMALL, "rotary_dim": []}, rf"config\['rotary_dim'\] {MUST_BE_INT} \[\]"),
        ({**GPTJ_SMALL, "rotary_dim": {}}, rf"config\['rotary_dim'\] {MUST_BE_INT} \{{\}}"),
        # W11: Phi-3 LongRoPE's longest length
        *[({**PHI3_LONGROPE_SMALL, "max_position_embeddings": value}, rf"_embeddings'\] {MUST_BE_INT} {text}")
          for value, text in ((float("nan"), "nan"), (-1, "-1"), (True, "True"))],
        # R2: divisions by zero
        ({**GEMMA3_SMALL, "sliding_window_pattern": 0}, rf"config\['sliding_window_pattern'\] {MUST_BE_INT} 0"),
        ({**DEEPSEEK_SMALL, "max_position_embeddings": 100,
          "rope_scaling": {"type": "yarn", "factor": None, "original_max_position_embeddings": 0}},
         rf"config\['original_max_position_embeddings'\] {MUST_BE_INT} 0"),
        ({**LLAMA_SMALL, "max_position_embeddings": 100,
          "rope_scaling": {"type": "yarn", "original_max_position_embeddings": 0}},
         rf"config\['original_max_position_embeddings'\] {MUST_BE_INT} 0"),
        # R3: wrong container types
        ({**LLAMA_SMALL, "rope_parameters": "linear"}, rf"config\['rope_parameters'\] {MUST_BE_DICT} 'linear'"),
        ({**LLAMA_SMALL, "rope_scaling": 5}, rf"config\['rope_scaling'\] {MUST_BE_DICT} 5"),
        ({**LLAMA_SMALL, "rope_scaling": ["linear"]}, rf"config\['rope_scaling'\] {MUST_BE_DICT} \['linear'\]"),
        ({**GEMMA3_SMALL, "rope_parameters": "linear"}, rf"config\['rope_parameters'\] {MUST_BE_DICT} 'linear'"),
        ({**GEMMA3_SMALL, "rope_parameters": {"full_attention": "linear"}},
         rf"config\['rope_parameters'\]\['full_attention'\] {MUST_BE_DICT} 'linear'"),
        ({"model_type": "mpt", "n_layers": 1, "n_heads": 2, "d_model": 8, "attn_config": "x"},
         rf"config\['attn_config'\] {MUST_BE_DICT} 'x'"),
        ({"model_type": ["llama"]}, r"model_type \['llama'\] is not supported; supported: "),
        # H3: sizes past the documented bound
        ({**LLAMA_SMALL, "head_dim": 2**40}, r"config\['head_dim'\] must be an int >= 1 and <= 65536, got 10995116"),
        ({**LLAMA_SMALL, "hidden_size": 2**62, "num_attention_heads": 1},
         r"hidden_size // num_attention_heads = 4611686018427387904 must be <= 65536"),
        ({**LLAMA4_SMALL, "head_dim": 2**62}, r"config\['head_dim'\] must be an int >= 1 and <= 65536, got 4611686"),
    ],
)  # fmt: skip
def test_a_malformed_config_is_a_clear_error(cfg, message):
    """Each of these was accepted with a wrong or default result, or crashed with a builtin error (W11, R2, R3, H3)."""
    with pytest.raises(ValueError, match=message):
        from_hf_config(cfg)


def test_deepseek_yarn_without_factor_or_original_length_reads_as_transformers():
    """transformers fills original_max_position_embeddings with max_position_embeddings, then the factor with
    their ratio, 1 (R5: a bare KeyError before)."""
    cfg = {**DEEPSEEK_SMALL, "max_position_embeddings": 100, "rope_scaling": {"type": "yarn"}}
    layer = from_hf_config(cfg)[0]
    assert layer.rope_parameters["original_max_position_embeddings"] == 100
    assert layer.rope_parameters["factor"] == 1.0


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", r"config file '.*config\.json' is empty"),
        (b"{x", r"config file '.*config\.json' is not JSON: Expecting property name .* at line 1 column 2"),
        (b"\xef\xbb\xbf{}", r"config file '.*config\.json' starts with a byte-order mark"),
        (b"\xff\xfe{}", r"config file '.*config\.json' is not UTF-8 text: byte 0 is 0xff"),
        (b"[" * 100_000 + b"]" * 100_000, r"config file '.*config\.json' is nested more than 64 levels deep"),
        (b'{"a":' * 100 + b"1" + b"}" * 100, r"config is nested more than 64 levels deep"),
        (
            b'{"num_hidden_layers": 1' + b"0" * 5000 + b"}",
            r"config file '.*config\.json' holds a number Python will not",
        ),
    ],
)
def test_a_config_file_that_is_not_json_is_named(tmp_path, content, message):
    """R6: JSONDecodeError, UnicodeDecodeError and RecursionError became one ValueError naming the file."""
    path = tmp_path / "config.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        config_dict(path)


@pytest.mark.parametrize(
    "cfg, error, message",
    [
        ({"model_type": "llama", "x": {1, 2}}, TypeError, r"config\['x'\] must be a JSON value .*got set"),
        ({"model_type": "llama", (1, 2): 3}, TypeError, r"config keys must be strings, got \(1, 2\) \(tuple\)"),
    ],
)
def test_a_config_dict_that_json_cannot_hold_is_named(cfg, error, message):
    """R6: a set value or a tuple key is named (json's own TypeError did not say where)."""
    with pytest.raises(error, match=message):
        config_dict(cfg)


def test_a_deeply_nested_config_dict_is_refused_without_recursion_error():
    deep: dict = {"model_type": "llama"}
    node = deep
    for _ in range(5_000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(ValueError, match=r"config is nested more than 64 levels deep, at config\['a'\]"):
        config_dict(deep)
    # what json itself turns into text still reads the same: int keys and tuples as JSON spells them
    assert config_dict({"model_type": "llama", "id2label": {0: "a"}, "t": (1, 2)}) == json.loads(
        json.dumps({"model_type": "llama", "id2label": {0: "a"}, "t": (1, 2)})
    )


@pytest.mark.parametrize(
    "error",
    [OverflowError("int too large"), RecursionError("deep"), ZeroDivisionError("division by zero"),
     AttributeError("'str' object has no attribute 'get'"), MemoryError(), KeyError("global")],
)  # fmt: skip
def test_the_command_line_prints_one_line_and_exits_2_on_any_error(monkeypatch, capsys, error):
    """R7: whatever escapes the checks, python -m posenc.hf prints one line naming the file and the
    error type, never a traceback or a bare key name."""
    cli = importlib.import_module("posenc.hf.cli")

    def fail(config):
        raise error

    monkeypatch.setattr(cli, "describe", fail)
    assert cli.main(["some/config.json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"error: some/config.json cannot be described: {type(error).__name__}"), err


# Where posenc reads a configuration differently from transformers, on purpose (the API page lists these).

LLAMA = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 1}
STRICTER = {  # rope_scaling that transformers warns about and computes with, and posenc refuses
    "a rope_type posenc does not implement": {"rope_type": "proportional", "factor": 2.0},
    "an unknown extra key": {"rope_type": "linear", "factor": 2.0, "colour": "red"},
    "factor below 1": {"rope_type": "linear", "factor": 0.5},
    "factor True": {"rope_type": "linear", "factor": True},
    "beta_fast below beta_slow": {
        "rope_type": "yarn",
        "factor": 4.0,
        "beta_fast": 1.0,
        "beta_slow": 32.0,
        "original_max_position_embeddings": 64,
    },
    "high_freq_factor below low_freq_factor": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 4.0,
        "high_freq_factor": 1.0,
        "original_max_position_embeddings": 64,
    },
}


def _transformers_llama_cos(config: dict) -> torch.Tensor:
    import warnings

    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    fields = {k: v for k, v in json.loads(json.dumps(config)).items() if k != "model_type"}  # it fills in dicts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rotary = LlamaRotaryEmbedding(LlamaConfig(**fields))
    cos, _ = rotary(torch.zeros(1, 4, 16), torch.arange(4)[None])
    return cos


@pytest.mark.parametrize("name", list(STRICTER))
def test_posenc_refuses_rope_parameters_that_transformers_computes_with(name):
    config = {**LLAMA, "max_position_embeddings": 256, "rope_scaling": STRICTER[name]}
    assert torch.isfinite(_transformers_llama_cos(config)).all()
    with pytest.raises((ValueError, TypeError), match="scaling"):
        from_hf_config(config)


def test_posenc_refuses_gptj_rotary_dim_0_on_which_transformers_fails_at_run_time():
    import warnings

    from transformers import GPTJConfig
    from transformers.models.gptj.modeling_gptj import GPTJAttention

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        attention = GPTJAttention(GPTJConfig(n_embd=64, n_head=4, n_layer=1, rotary_dim=0), layer_idx=0)
    with pytest.raises(RuntimeError, match="size of tensor"):
        attention(torch.randn(1, 5, 64), position_ids=torch.arange(5)[None])
    config = {"model_type": "gptj", "n_embd": 64, "n_head": 4, "n_layer": 1, "rotary_dim": 0}
    with pytest.raises(ValueError, match="rotary_dim"):
        from_hf_config(config)


def test_a_missing_max_position_embeddings_is_the_config_class_default_as_in_transformers():
    config = {**LLAMA, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}  # no length at all
    positions = torch.tensor([[0, 3000]])  # past LlamaConfig's default, 2048: the base is scaled
    layer = from_hf_config(config)[0]
    cos, _ = layer.cos_sin(positions)
    import warnings

    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fields = {k: v for k, v in json.loads(json.dumps(config)).items() if k != "model_type"}
        expected, _ = LlamaRotaryEmbedding(LlamaConfig(**fields))(torch.zeros(1, 2, 16), positions)
    assert torch.allclose(cos.float(), expected, atol=1e-5)
    unscaled, _ = from_hf_config({**LLAMA, "rope_parameters": {"rope_type": "default"}})[0].cos_sin(positions)
    assert (cos - unscaled).abs().max() > 0.1  # the default length made dynamic NTK scale at 3000


def test_gemma3_per_layer_yarn_truncate_is_applied_where_transformers_ignores_it():
    import warnings

    from transformers import Gemma3TextConfig
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding

    def config(truncate: bool) -> dict:
        yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4, "truncate": truncate}
        return {
            "model_type": "gemma3_text",
            "hidden_size": 8,
            "num_attention_heads": 1,
            "num_key_value_heads": 1,
            "head_dim": 4,
            "num_hidden_layers": 1,
            "max_position_embeddings": 16,
            "sliding_window_pattern": 1,
            "rope_parameters": {"full_attention": yarn, "sliding_attention": {"rope_type": "default"}},
        }

    theirs, ours = {}, {}
    for truncate in (False, True):
        fields = {k: v for k, v in json.loads(json.dumps(config(truncate))).items() if k != "model_type"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs[truncate] = Gemma3RotaryEmbedding(Gemma3TextConfig(**fields)).full_attention_inv_freq
        cos, sin = from_hf_config(config(truncate))[0].cos_sin(torch.tensor([[1]]))
        ours[truncate] = torch.atan2(sin[0, 0, :2], cos[0, 0, :2]).double()  # position 1: angle = frequency
    assert torch.equal(theirs[False], theirs[True])  # transformers: the same either way
    assert torch.allclose(ours[True].float(), theirs[True], atol=1e-6)
    assert (ours[False] - ours[True]).abs().max() > 1e-4  # posenc: truncate=False changes the slow pair


def test_posenc_bounds_sizes_that_transformers_would_allocate():
    assert torch.isfinite(_transformers_llama_cos({**LLAMA, "head_dim": 2**17})).all()
    with pytest.raises(ValueError, match="65536"):
        from_hf_config({**LLAMA, "head_dim": 2**17})
    nested: dict = {}
    for _ in range(70):
        nested = {"x": nested}
    with pytest.raises(ValueError, match="64"):
        from_hf_config({**LLAMA, "extra": nested})


def test_gemma3_flat_rope_parameters_with_rope_scaling_scale_the_global_layers_where_transformers_fails():
    import warnings

    from transformers import Gemma3TextConfig

    fields = {
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 16,
        "num_hidden_layers": 2,
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {"rope_type": "default"},
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    }
    with warnings.catch_warnings(), pytest.raises(KeyError):
        warnings.simplefilter("ignore")
        Gemma3TextConfig(**fields)
    rows = describe({"model_type": "gemma3_text", **fields})
    assert [r["scaling"] for r in rows] == [None, "linear x8"]


def test_the_older_module_names_forward_with_a_warning():
    """posenc.hf_config, hf_fields, hf_families and hf_layers are the reader's older names: every name
    they had still resolves, to the very object of posenc.hf, with a DeprecationWarning naming its home."""
    import posenc.hf.bias_layers
    import posenc.hf.families
    import posenc.hf.fields
    import posenc.hf.layers
    import posenc.hf.reader

    moved = {
        "posenc.hf_config": {"from_hf_config": posenc.hf.reader, "build_llama": posenc.hf.families,
                             "FAMILIES": posenc.hf.reader, "DEFAULTS": posenc.hf.reader},
        "posenc.hf_fields": {"rope_parameters": posenc.hf.fields, "MAX_POSITIONS": posenc.hf.fields},
        "posenc.hf_families": {"build_deepseek": posenc.hf.families},
        "posenc.hf_layers": {"RotaryLayer": posenc.hf.layers, "T5BiasLayer": posenc.hf.bias_layers},
    }  # fmt: skip
    for old, names in moved.items():
        module = importlib.import_module(old)
        for name, home in names.items():
            with pytest.warns(DeprecationWarning, match=f"{old} moved: import {name} from {home.__name__}"):
                assert getattr(module, name) is getattr(home, name)
        assert set(names) <= set(dir(module))
        with pytest.raises(AttributeError, match=f"module '{old}' has no attribute 'nope'"):
            module.nope  # noqa: B018


def test_every_model_type_has_its_builder_in_the_one_table():
    import posenc.hf.families

    builders = {name for name in dir(posenc.hf.families) if name.startswith("build_")}
    used = {builder.__name__ for builder in posenc.hf.families.FAMILIES.values()}
    assert used <= builders and builders - used == {"build_rope"}, "every family builder is in FAMILIES"
    assert all(builder.__module__ == "posenc.hf.families" for builder in posenc.hf.families.FAMILIES.values())


@pytest.mark.parametrize("name", ["Llama-3.1-8B", "DeepSeek-V3"])
def test_a_rotary_layer_gives_its_frequencies_after_scaling(name):
    """``layer.frequencies(seq_len)``: rope_inv_freq of the layer's own parameters, as chapter 9's
    spectra read them (Llama 3.1's llama3 scaling, DeepSeek-V3's YaRN on the last 64 channels)."""
    from posenc import rope_inv_freq
    from posenc_book import data_path

    models = json.loads(data_path("model_configs.json").read_text(encoding="utf-8"))
    layer = from_hf_config(models[name]["config"])[0]
    want, _ = rope_inv_freq(layer.rotary_dim, scaling=layer.rope_parameters, seq_len=8192)
    got = layer.frequencies(8192)
    assert got.shape == (layer.rotary_dim // 2,) and torch.equal(got, want)
    plain, _ = rope_inv_freq(layer.rotary_dim, base=layer.base)
    assert got[0] == plain[0] and got[-1] < plain[-1]  # the scalings stretch the slowest pairs only


def test_the_two_readings_where_transformers_refuses_are_as_the_api_page_says():
    """book/api.md lists them: a YaRN factor left out, and Phi-3 with a linear scaling."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    base = {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 1, "max_position_embeddings": 256}
    yarn = {
        **base,
        "model_type": "llama",
        "rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 64},
    }
    with pytest.raises(KeyError, match="factor"):
        LlamaRotaryEmbedding(transformers.LlamaConfig(**{k: v for k, v in yarn.items() if k != "model_type"}))
    assert describe(yarn)[0]["scaling"] == "yarn x4"  # 256 / 64
    phi3 = {**base, "model_type": "phi3", "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    with pytest.raises(Exception, match="rope_parameters"):
        transformers.Phi3Config(**{k: v for k, v in phi3.items() if k != "model_type"})
    assert describe(phi3)[0]["scaling"] == "linear x2"


def test_ctrl_c_in_the_reader_s_command_line_exits_130_in_one_line(monkeypatch, capsys):
    from posenc.hf import cli

    def interrupted(argv=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "main", interrupted)
    with pytest.raises(SystemExit) as info:
        runpy.run_module("posenc.hf", run_name="__main__", alter_sys=False)
    assert info.value.code == 130
    err = capsys.readouterr().err
    assert err == "python -m posenc.hf interrupted\n"
