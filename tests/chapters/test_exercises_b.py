"""The exercises of chapters 9 to 13, their key answers checked again, by other routes where one exists.

Each test names its chapter and exercise. The solutions in the chapters compute the
answers one way; the tests here recompute them from the formulas or from the raw data,
so that a change in the package or in the recorded results that moves an answer fails
here as well as in the chapter.
"""

import io
import json
import math
from collections import Counter
from fractions import Fraction

import torch
import yaml
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from posenc import from_hf_config, rope_inv_freq, scaled_dot_product_attention, sinusoidal_table
from posenc.benchmark import count_traffic, rope_bytes, sinusoidal_add_bytes
from posenc.experiments import load_experiments, load_text_results, make_position_scheme, text_summary
from posenc_book import data_path
from posenc_book.tutorial import TutorialPositionalEncoding

F64 = torch.float64

LLAMA_32_1B = {
    "model_type": "llama",
    "hidden_size": 2048,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 16,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 32.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}


def _claims():
    return yaml.safe_load(data_path("claims.yaml").read_text(encoding="utf-8"))


# Chapter 9 ------------------------------------------------------------------------------------


def test_ch09_ex1_llama3_rule_keeps_15_ramps_3_and_slows_14_pairs():
    layer = from_hf_config(LLAMA_32_1B)[0]
    assert (layer.head_dim, layer.rotary_dim, layer.base) == (64, 64, 500000.0)
    scaled, _ = rope_inv_freq(64, base=500000.0, scaling=layer.scaling)
    # the rule written out by hand: kept below 8192 / 4, divided by 32 above 8192, a ramp between
    inv = 500000.0 ** (-torch.arange(0, 64, 2, dtype=F64) / 64)
    wavelength = 2 * math.pi / inv
    smooth = (8192 / wavelength - 1.0) / (4.0 - 1.0)
    ramp = (1 - smooth) * inv / 32 + smooth * inv
    expected = torch.where(wavelength < 2048, inv, torch.where(wavelength > 8192, inv / 32, ramp))
    torch.testing.assert_close(scaled, expected, rtol=1e-12, atol=0)
    kept = int((wavelength < 2048).sum())
    full = int((wavelength > 8192).sum())
    assert (kept, 32 - kept - full, full) == (15, 3, 14)


def test_ch09_ex2_slowest_wavelength_and_smallest_base():
    inv, _ = rope_inv_freq(128, base=500000.0)
    wavelength = 2 * math.pi / inv
    assert 2.55e6 < wavelength.max().item() < 2.57e6
    assert int((wavelength > 131072).sum()) == 15
    # the base whose slowest pair turns exactly once in 131,072 positions
    low, high = 1e3, 1e6
    for _ in range(200):  # bisection, independent of the closed form
        mid = math.sqrt(low * high)
        low, high = (mid, high) if 2 * math.pi * mid ** (126 / 128) < 131072 else (low, mid)
    assert 24_428 < low < 24_429
    assert math.isclose(low, (131072 / (2 * math.pi)) ** (128 / 126), rel_tol=1e-9)


def test_ch09_ex3_deepseek_mla_cache_per_token():
    entry = json.loads(data_path("model_configs.json").read_text())["DeepSeek-V3"]
    config = entry["config"]
    layer = from_hf_config(config)[0]
    per_layer = config["kv_lora_rank"] + layer.rotary_dim  # latent + shared rotary key
    assert per_layer == 576 and layer.rotary_dim == 64
    assert per_layer * config["num_hidden_layers"] * 2 == 70_272
    assert round(70_272 * entry["context"] / 1e8) == 115  # 11.5 GB
    assert Fraction(layer.rotary_dim, per_layer) == Fraction(1, 9)
    assert config["kv_lora_rank"] + config["num_attention_heads"] * 64 == 8704


# Chapter 10 ------------------------------------------------------------------------------------


def test_ch10_ex1_table_of_8192_by_1024_is_32_mib_in_every_checkpoint():
    module = TutorialPositionalEncoding(1024, max_len=8192)
    buffer = io.BytesIO()
    torch.save(module.state_dict(), buffer)
    assert 32 * 2**20 < buffer.getbuffer().nbytes < 32 * 2**20 + 10_000
    assert module.to(torch.bfloat16).pe.untyped_storage().nbytes() == 16 * 2**20


def test_ch10_ex2_batch_first_module_after_the_transpose_gives_pe_of_the_batch_index():
    torch.manual_seed(0)
    emb = nn.Embedding(100, 16)
    pe = TutorialPositionalEncoding(16, max_len=64)
    tokens = torch.randint(0, 100, (4, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        h = emb(tokens).transpose(0, 1)
        buggy = pe(h) - h
        fixed = pe(emb(tokens)) - emb(tokens)
    table = sinusoidal_table(10, 16)
    for b in range(4):
        torch.testing.assert_close(buggy[:, b], table[b].expand(10, 16), atol=1e-6, rtol=0)
        torch.testing.assert_close(fixed[b], table, atol=1e-6, rtol=0)


def test_ch10_ex3_odd_width_table_and_its_lone_sine():
    d, n = 7, 64
    p = torch.arange(n, dtype=F64)[:, None]
    w = 10000.0 ** (-2 * torch.arange(4, dtype=F64) / d)
    odd = torch.empty(n, d, dtype=F64)
    odd[:, 0::2] = torch.sin(p * w)
    odd[:, 1::2] = torch.cos(p * w[:3])
    concat = sinusoidal_table(n, d, layout="concat", dtype=F64)
    torch.testing.assert_close(odd, concat[:, [0, 4, 1, 5, 2, 6, 3]], atol=1e-12, rtol=0)
    dots = (odd[:-5] * odd[5:]).sum(-1)
    paired = (odd[:-5, :6] * odd[5:, :6]).sum(-1)  # the three complete pairs
    assert (paired.max() - paired.min()).item() < 1e-12
    assert (dots.max() - dots.min()).item() > 1e-4
    lone = odd[:-5, 6] * odd[5:, 6]
    torch.testing.assert_close(dots - paired, lone, atol=1e-15, rtol=0)


# Chapter 11 ------------------------------------------------------------------------------------


def test_ch11_ex1_sinusoidal_has_the_smallest_spread_and_t5_the_largest_on_shift_at_4x():
    saved = load_experiments(data_path("experiments.json"))
    spread = {}
    for run in saved["runs"]:
        if run["task"] != "shift":
            continue
        last = run["checkpoints"][-1]["evaluations"]
        at_64 = next(e for e in last if e["multiplier"] == 4)
        if at_64["status"] == "ok":
            spread.setdefault(run["scheme"], []).append(at_64["accuracy"])
    gaps = {name: max(v) - min(v) for name, v in spread.items()}
    assert set(gaps) == {"none", "sinusoidal", "shaw", "t5", "alibi", "rope", "rope_pi"}
    assert min(gaps, key=gaps.get) == "sinusoidal" and gaps["sinusoidal"] < 0.001
    assert max(gaps, key=gaps.get) == "t5" and gaps["t5"] > 0.25


def test_ch11_ex2_only_shaw_and_alibi_do_best_on_windows_longer_than_trained():
    text = load_text_results(data_path("text_lm.json"))
    lengths = [64 * m for m in text["config"]["multipliers"]]
    rows = text_summary(text)
    best = {}
    for name in text["config"]["schemes"]:
        if all(rows[name, n]["status"] == "ok" for n in lengths):
            means = [sum(rows[name, n]["values"]) / len(rows[name, n]["values"]) for n in lengths]
            best[name] = lengths[means.index(min(means))]
    assert best == {
        "none": 64,
        "sinusoidal": 64,
        "shaw": 256,
        "t5": 64,
        "alibi": 256,
        "rope": 64,
        "rope_pi": 64,
    }


def test_ch11_ex3_interpolation_moves_a_two_back_head_to_2f_back():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(1, 1, 1, 16, generator=g, dtype=F64)
    rope = make_position_scheme("rope", dim=64, num_heads=4, max_len=16)
    pi = make_position_scheme("rope_pi", dim=64, num_heads=4, max_len=16)
    key, _ = rope.rotate(z, z, offset=2)
    theta = 10000.0 ** (-torch.arange(0, 16, 2, dtype=F64) / 16)
    energy = z[0, 0, 0, :8] ** 2 + z[0, 0, 0, 8:] ** 2  # half layout: pair i is (i, i + 8)
    for n, back in ((16, 2), (32, 4), (40, 5), (64, 8)):
        f = pi.factor_for(n)
        assert 2 * f == back
        # the formula: the score at distance delta is sum |z_i|^2 cos(theta_i (delta / f - 2))
        delta = torch.arange(n, dtype=F64)
        formula = (energy * torch.cos(theta * (delta[:, None] / f - 2))).sum(-1)
        assert int(formula.argmax()) == back
        q, k = pi.rotate(z.expand(1, 1, n, 16), key.expand(1, 1, n, 16))
        scores = q[0, 0, -1] @ k[0, 0].T
        assert n - 1 - int(scores.argmax()) == back
        torch.testing.assert_close(scores.flip(0), formula, atol=1e-9, rtol=0)


# Chapter 12 -----------------------------------------------------------------------------------


def _eager_rope(q, k, cos, sin):
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def test_ch12_ex1_eager_chain_moves_ten_times_q_and_k_plus_four_tables():
    g = torch.Generator().manual_seed(1)
    for dtype, (b, hq, hkv, s, d) in ((torch.float16, (2, 3, 1, 5, 8)), (torch.float32, (1, 4, 2, 7, 16))):
        q = torch.randn(b, hq, s, d, generator=g).to(dtype)
        k = torch.randn(b, hkv, s, d, generator=g).to(dtype)
        cos, sin = torch.randn(2, s, d, generator=g).to(dtype)
        _, ops = count_traffic(_eager_rope, q, k, cos, sin)
        size = dtype.itemsize
        moved = sum(o.read + o.written for o in ops)
        assert moved == 10 * (q.numel() + k.numel()) * size + 4 * s * d * size
        assert moved - 4 * s * d * size == 5 * rope_bytes(b, s, hq, hkv, d, dtype=dtype)
    floor = rope_bytes(2, 8192, 32, 8, 128, dtype=torch.float16)
    chain = 5 * floor + 4 * 8192 * 128 * 2
    assert floor == 335_544_320 and chain == 1_686_110_208
    assert round(floor / 3.35e12 * 1e7) == 1002 and round(chain / 3.35e12 * 1e7) == 5033  # µs, one decimal


def test_ch12_ex2_sinusoidal_add_stays_below_a_quarter_flop_per_byte():
    for b in (1, 4, 64, 10_000):
        intensity = Fraction(b * 16384 * 4096, sinusoidal_add_bytes(b, 16384, 4096))
        assert intensity == Fraction(b, 4 * b + 2) < Fraction(1, 4)
    assert Fraction(67) / Fraction("3.35") / Fraction(1, 4) == 80


def test_ch12_ex3_launches_decide_decoding_and_bytes_decide_long_sequences():
    def ratio(b, s):
        floor = rope_bytes(b, s, 32, 8, 128)
        eager = 10 * 5e-6 + 5 * floor / 3.35e12
        fused = 5e-6 + floor / 3.35e12
        return eager / fused

    assert 9.9 < ratio(1, 1) < 10
    assert 5 < ratio(4, 16384) < 5.1
    per_token = rope_bytes(1, 1, 32, 8, 128)
    assert (817 * per_token) / 3.35e12 < 5e-6 <= (818 * per_token) / 3.35e12


# The claims ledger -----------------------------------------------------------------------------------


def test_ch13_ex1_seed_003_has_the_largest_share_of_wrong_claims():
    claims = _claims()
    by_seed = Counter(c["seed"] for c in claims)
    wrong = Counter(c["seed"] for c in claims if c["verdict"] == "wrong")
    seed_003 = Counter(c["verdict"] for c in claims if c["seed"] == "003")
    assert seed_003 == Counter(correct=11, wrong=3, imprecise=2)
    assert max(by_seed, key=lambda s: wrong[s] / by_seed[s]) == "003"
    assert max(by_seed, key=lambda s: wrong[s]) == "002"


def test_ch13_ex2_claims_decided_by_the_experiment_findings_and_the_busiest_test():
    claims = _claims()
    findings = {c["id"]: c["verdict"] for c in claims if "test_experiments_findings.py::" in (c["test"] or "")}
    assert findings == {
        "002-25": "imprecise",
        "002-29": "correct",
        "002-34": "imprecise",
        "004-04": "wrong",
        "004-09": "wrong",
        "004-24": "imprecise",
    }
    per_test = Counter(c["test"] for c in claims if c["test"])
    ranked = per_test.most_common()
    assert ranked[0] == ("tests/chapters/test_claims_sources.py::test_distinct_positions_get_distinct_vectors", 6)
    assert ranked[1][1] < 6
    busiest = [c for c in claims if c["test"] == ranked[0][0]]
    assert {c["seed"] for c in busiest} == {"000", "001", "002", "003", "004"}
    assert {c["verdict"] for c in busiest} == {"correct"}


def test_ch13_ex3_attention_and_recurrence_flops_meet_at_n_equal_d():
    d = 16
    g = torch.Generator().manual_seed(0)
    w, u = torch.randn(2, d, d, generator=g)
    for n, factor in ((d, 1), (2 * d, 2), (4 * d, 4)):
        x = torch.randn(n, d, generator=g)
        with FlopCounterMode(display=False) as attention:
            scaled_dot_product_attention(x, x, x)
        with FlopCounterMode(display=False) as recurrence:
            h = torch.zeros(1, d)
            for t in range(n):
                h = torch.tanh(x[t : t + 1] @ w + h @ u)
        assert attention.get_total_flops() == factor * recurrence.get_total_flops()
    assert (4 * 8192**2 * 64) // (4 * 8192 * 64**2) == 128
