"""LongRoPE (rope_type "longrope"): per-pair factors, short up to the original length, long beyond it."""

import math

import pytest
import torch
from transformers import LlamaConfig, Phi3Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

from posenc import RotaryEmbedding, rope_cos_sin, rope_inv_freq
from posenc.rope.scaling import ROPE_SCALINGS, parse_scaling

ORIGINAL = 64


def factor_lists(head_dim: int, seed: int = 0) -> tuple[list[float], list[float]]:
    """Synthetic factors (not a real model's): short in [1, 2), long in [1, 11), one per pair."""
    gen = torch.Generator().manual_seed(seed)
    short = (1 + torch.rand(head_dim // 2, generator=gen, dtype=torch.float64)).tolist()
    long = (1 + 10 * torch.rand(head_dim // 2, generator=gen, dtype=torch.float64)).tolist()
    return short, long


def longrope(head_dim: int, **extra) -> dict:
    short, long = factor_lists(head_dim)
    return {
        "rope_type": "longrope",
        "short_factor": short,
        "long_factor": long,
        "original_max_position_embeddings": ORIGINAL,
        **extra,
    }


def transformers_longrope(head_dim: int, scaling: dict, seq_len, max_positions: int = 4 * ORIGINAL):
    config = LlamaConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        head_dim=head_dim,
        max_position_embeddings=max_positions,
        rope_parameters={"rope_theta": 10000.0, **scaling},
    )
    return ROPE_INIT_FUNCTIONS["longrope"](config, "cpu", seq_len=seq_len)


CASES = [
    (head_dim, extra, seq_len)
    for head_dim in (16, 96, 128)  # 96: Phi-3-mini's head dimension
    for extra in (
        {"factor": 4.0},
        {"factor": 32},
        {"factor": 1.0},
        {"attention_factor": 1.3},
        {"factor": 8.0, "attention_factor": 0.9},
    )
    for seq_len in (None, 1, ORIGINAL - 1, ORIGINAL, ORIGINAL + 1, 100 * ORIGINAL)
]


@pytest.mark.parametrize(("head_dim", "extra", "seq_len"), CASES)
def test_frequencies_and_attention_factor_equal_transformers(head_dim, extra, seq_len):
    scaling = longrope(head_dim, **extra)
    theirs, their_factor = transformers_longrope(head_dim, scaling, seq_len)
    ours, our_factor = rope_inv_freq(head_dim, scaling=scaling, seq_len=seq_len)
    assert ours.shape == theirs.shape == (head_dim // 2,)
    assert torch.allclose(ours, theirs.double(), rtol=1e-6, atol=0)  # theirs are float32
    assert our_factor == pytest.approx(their_factor, rel=1e-12)


def test_the_largest_difference_from_transformers_is_its_float32_rounding():
    largest = 0.0
    for head_dim, extra, seq_len in CASES:
        scaling = longrope(head_dim, **extra)
        theirs, _ = transformers_longrope(head_dim, scaling, seq_len)
        ours, _ = rope_inv_freq(head_dim, scaling=scaling, seq_len=seq_len)
        largest = max(largest, ((ours - theirs.double()) / ours).abs().max().item())
    assert 0 < largest < 4e-7, largest  # seen: 2.9e-7, a few float32 roundings (theirs: base**x, * factor, 1/)


def test_a_missing_factor_is_the_ratio_transformers_derives_from_the_config():
    """transformers: factor = max_position_embeddings / original; here the ratio is passed (Phi-3's configs)."""
    head_dim = 96
    scaling = longrope(head_dim)
    config = Phi3Config(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32 * ORIGINAL,
        original_max_position_embeddings=ORIGINAL,
        rope_parameters=dict(scaling),
    )
    theirs, their_factor = ROPE_INIT_FUNCTIONS["longrope"](config, "cpu", seq_len=2 * ORIGINAL)
    with pytest.raises(ValueError, match=r"needs 'factor' or 'attention_factor'.*max_position_embeddings"):
        rope_inv_freq(head_dim, scaling=scaling)
    ours, our_factor = rope_inv_freq(head_dim, scaling={**scaling, "factor": 32.0}, seq_len=2 * ORIGINAL)
    assert torch.allclose(ours, theirs.double(), rtol=1e-6, atol=0)
    assert our_factor == pytest.approx(their_factor, rel=1e-12)


def test_hand_values_and_the_switch_at_the_original_length():
    scaling = longrope(8, factor=4.0)
    theta = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    short, long = (torch.tensor(scaling[key], dtype=torch.float64) for key in ("short_factor", "long_factor"))
    for seq_len in (None, 0, 1, ORIGINAL - 0.5, ORIGINAL):
        assert torch.allclose(rope_inv_freq(8, scaling=scaling, seq_len=seq_len)[0], theta / short, rtol=1e-15)
    for seq_len in (ORIGINAL + 0.5, ORIGINAL + 1, 10**9):
        assert torch.allclose(rope_inv_freq(8, scaling=scaling, seq_len=seq_len)[0], theta / long, rtol=1e-15)
    # the attention factor of the paper, sqrt(1 + ln s / ln L0), whatever the length
    assert rope_inv_freq(8, scaling=scaling)[1] == pytest.approx(math.sqrt(1 + math.log(4) / math.log(ORIGINAL)))
    assert ROPE_SCALINGS["longrope"].length_dependent and ROPE_SCALINGS["dynamic"].length_dependent
    assert not any(ROPE_SCALINGS[t].length_dependent for t in ("default", "linear", "yarn", "llama3"))


def test_parsing_is_canonical_and_reads_tuples_and_ints():
    scaling = {**longrope(8, factor=4), "short_factor": (1, 2, 3, 4)}
    parsed = parse_scaling(scaling, 10000.0)
    assert parsed["short_factor"] == [1.0, 2.0, 3.0, 4.0] and isinstance(parsed["factor"], float)
    assert parse_scaling(parsed, 10000.0) == parsed


def test_rotary_embedding_treats_longrope_as_length_dependent():
    scaling = longrope(16, factor=4.0)
    module = RotaryEmbedding(16, scaling=scaling)
    assert module.dynamic
    q, k = torch.randn(2, 1, 2, ORIGINAL, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.arange(ORIGINAL), 16, scaling=scaling, dtype=torch.float64)
    from posenc import apply_rope

    rq, rk = module(q, k)
    assert torch.allclose(rq, apply_rope(q, cos, sin), atol=1e-12)
    assert torch.allclose(rk, apply_rope(k, cos, sin), atol=1e-12)


def phi3_cos_sin(head_dim: int, scaling: dict, length: int):
    config = Phi3Config(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4 * ORIGINAL,
        original_max_position_embeddings=ORIGINAL,
        rope_parameters={"rope_theta": 10000.0, **scaling},
    )
    rotary = Phi3RotaryEmbedding(config)
    x = torch.zeros(1, length, head_dim)
    return rotary(x, torch.arange(length)[None])  # 2 x [1, length, d], float32 angles


@pytest.mark.parametrize("length", [ORIGINAL // 2, ORIGINAL])
def test_cos_sin_equal_phi3s_rotary_module_within_the_original_length(length):
    scaling = longrope(96, factor=4.0)
    theirs = phi3_cos_sin(96, scaling, length)
    ours = rope_cos_sin(torch.arange(length)[None], 96, scaling=scaling, angle_dtype=torch.float32)
    for mine, their in zip(ours, theirs, strict=True):
        assert torch.allclose(mine, their, atol=1e-5, rtol=0)  # seen: 2.2e-6, float32 angles (theirs and ours)


@pytest.mark.parametrize("length", [ORIGINAL + 1, 3 * ORIGINAL])
def test_cos_sin_and_the_module_equal_phi3s_rotary_module_beyond_the_original_length(length):
    scaling = longrope(96, factor=4.0)
    theirs = phi3_cos_sin(96, scaling, length)
    ours = rope_cos_sin(torch.arange(length)[None], 96, scaling=scaling, angle_dtype=torch.float32)
    for mine, their in zip(ours, theirs, strict=True):
        assert torch.allclose(mine, their, atol=1e-5, rtol=0)
    module_cos, _ = RotaryEmbedding(96, scaling=scaling).cos_sin(torch.arange(length))
    assert torch.allclose(module_cos, theirs[0][0], atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"short_factor": 2.0}, r"scaling\['short_factor'\] must be a non-empty list of finite numbers > 0.*got 2.0"),
        ({"long_factor": []}, r"scaling\['long_factor'\] must be a non-empty list"),
        ({"long_factor": [1.0, 0.0, 1.0, 1.0]}, r"scaling\['long_factor'\]\[1\] must be a finite number > 0, got 0.0"),
        ({"short_factor": [1.0, -2, 1.0, 1.0]}, r"scaling\['short_factor'\]\[1\] must be a finite number > 0, got -2"),
        ({"short_factor": [1.0, math.inf, 1, 1]}, r"\['short_factor'\]\[1\] must be a finite number > 0, got inf"),
        ({"short_factor": [1.0, True, 1, 1]}, r"\['short_factor'\]\[1\] must be a number > 0, got True"),
        ({"short_factor": [1.0, "2", 1, 1]}, r"\['short_factor'\]\[1\] must be a number > 0, got '2'"),
        ({"short_factor": [1.0, 1.0]}, r"scaling\['short_factor'\] has 2 entries, expected head_dim / 2 = 4"),
        ({"factor": 0.5}, r"scaling\['factor'\] must be a finite number >= 1, got 0.5"),
        ({"factor": None}, r"needs 'factor' or 'attention_factor'; transformers derives a missing factor"),
        ({"attention_factor": -1}, r"scaling\['attention_factor'\] must be a finite number >= 0, got -1"),
        ({"original_max_position_embeddings": 0}, r"original_max_position_embeddings'\] must be .*> 0, got 0"),
        ({"original_max_position_embeddings": 1}, r"must be > 1 for the default attention factor .*got 1"),
        ({"beta_fast": 32}, r"unknown key\(s\) 'beta_fast' for rope_type 'longrope'"),
        ({"short_factor": None}, r"missing 'short_factor', which rope_type 'longrope' needs"),
        ({"original_max_position_embeddings": None}, r"missing 'original_max_position_embeddings'.*max_position_emb"),
    ],
)
def test_bad_values_raise_naming_the_key_the_value_and_the_limit(change, message):
    with pytest.raises(ValueError, match=message):
        rope_inv_freq(8, scaling={**longrope(8, factor=4.0), **change})


def test_a_bad_length_raises():
    with pytest.raises(ValueError, match=r"seq_len must be a finite number, got nan"):
        rope_inv_freq(8, scaling=longrope(8, factor=4.0), seq_len=math.nan)
