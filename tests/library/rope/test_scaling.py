"""RoPE scaling as a table: one entry per rope_type, one signature, its own validator."""

import ast
import copy
import logging
import math
import re
import warnings

import pytest
import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from posenc import ROPE_TYPES, rope_inv_freq
from posenc.rope.scaling import ROPE_SCALINGS, RopeScaling, ntk_scaled_base, parse_scaling

PARAMS = {
    "default": {},
    "linear": {"factor": 4.0},
    "dynamic": {"factor": 2.0, "original_max_position_embeddings": 64},
    "yarn": {"factor": 8.0, "original_max_position_embeddings": 256},
    "longrope": {
        "factor": 4.0,
        "original_max_position_embeddings": 64,
        "short_factor": [1.0, 1.1, 1.2, 1.4, 1.8, 2.5, 3.0, 3.5],
        "long_factor": [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 9.0],
    },
    "llama3": {"factor": 8.0, "original_max_position_embeddings": 128, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
}
YARN = {"rope_type": "yarn", **PARAMS["yarn"]}
LLAMA3 = {"rope_type": "llama3", **PARAMS["llama3"]}


def test_the_table_names_every_rope_type_once():
    assert tuple(ROPE_SCALINGS) == ROPE_TYPES == ("default", "linear", "dynamic", "yarn", "longrope", "llama3")
    assert all(isinstance(entry, RopeScaling) for entry in ROPE_SCALINGS.values())


@pytest.mark.parametrize("rope_type", ROPE_TYPES)
def test_every_entry_has_the_one_signature_and_rope_inv_freq_dispatches_to_it(rope_type):
    params = parse_scaling({"rope_type": rope_type, **PARAMS[rope_type]}, 10000.0)
    inv_freq, factor = ROPE_SCALINGS[rope_type].frequencies(16, 10000.0, params, 200.0, torch.device("cpu"))
    assert inv_freq.shape == (8,) and inv_freq.dtype == torch.float64 and isinstance(factor, float)
    expected = rope_inv_freq(16, scaling={"rope_type": rope_type, **PARAMS[rope_type]}, seq_len=200.0)
    assert torch.equal(inv_freq, expected[0]) and factor == expected[1]


def test_hand_values_of_each_type():
    theta = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)  # head_dim 8
    cpu = torch.device("cpu")
    default, _ = ROPE_SCALINGS["default"].frequencies(8, 10000.0, {}, None, cpu)
    linear, _ = ROPE_SCALINGS["linear"].frequencies(8, 10000.0, {"factor": 4.0}, None, cpu)
    assert torch.allclose(default, theta, rtol=1e-15) and torch.allclose(linear, theta / 4, rtol=1e-15)
    # dynamic at the trained length is the default; at twice it, NTK with factor 2 * 2 - 1 = 3
    dyn = {"factor": 2.0, "original_max_position_embeddings": 64}
    at_trained, _ = ROPE_SCALINGS["dynamic"].frequencies(8, 10000.0, dyn, 64.0, cpu)
    at_double, _ = ROPE_SCALINGS["dynamic"].frequencies(8, 10000.0, dyn, 128.0, cpu)
    ntk = ntk_scaled_base(10000.0, 3.0, 8) ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    assert torch.allclose(at_trained, theta, rtol=1e-15) and torch.allclose(at_double, ntk, rtol=1e-15)
    # YaRN's default attention factor: 0.1 ln(s) + 1
    _, attention = ROPE_SCALINGS["yarn"].frequencies(
        8, 10000.0, parse_scaling({"rope_type": "yarn", **PARAMS["yarn"]}, 10000.0), None, cpu
    )
    assert attention == pytest.approx(0.1 * math.log(8.0) + 1.0, rel=1e-15)


@pytest.mark.parametrize(
    ("scaling", "message"),
    [
        ({"rope_type": "linear"}, r"scaling is missing 'factor'"),
        (
            {"rope_type": "linear", "factor": 2.0, "beta_fast": 3},
            r"unknown key\(s\) 'beta_fast' for rope_type 'linear'",
        ),
        (
            {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8, "beta_fast": 1, "beta_slow": 2},
            r"beta_fast'\] must be >= scaling\['beta_slow'\], got beta_fast=1 and beta_slow=2",
        ),
        (
            {
                "rope_type": "llama3",
                "factor": 8.0,
                "original_max_position_embeddings": 8,
                "low_freq_factor": 4,
                "high_freq_factor": 1,
            },
            r"high_freq_factor'\] must be >= scaling\['low_freq_factor'\], got high_freq_factor=1 and low",
        ),
        ({"rope_type": "linear", "factor": 0.5}, r"scaling\['factor'\] must be a finite number >= 1, got 0.5"),
        ({"rope_type": "nope"}, r"scaling\['rope_type'\] must be one of"),
        ({"rope_type": "default", "rope_theta": 500.0}, r"disagrees with base = 10000"),
        ({"rope_type": "default", "factor": 2.0}, r"unknown key\(s\) 'factor'.*accepted: 'partial_rotary_factor'"),
        ({**YARN, "attention_factor": -1.0}, r"scaling\['attention_factor'\] must be a finite number >= 0, got -1.0"),
        ({**YARN, "beta_slow": -1}, r"scaling\['beta_slow'\] must be a finite number >= 0, got -1.0"),
        ({**YARN, "original_max_position_embeddings": 0}, r"original_max_position_embeddings'\] must be .*> 0, got 0"),
        ({**YARN, "truncate": None}, r"scaling\['truncate'\] must be True or False, got None"),
        ({**YARN, "mscale": "1"}, r"scaling\['mscale'\] must be a finite number, got '1'"),
        ({**LLAMA3, "low_freq_factor": 0}, r"scaling\['low_freq_factor'\] must be != 0 .*got 0.0"),
        ({**LLAMA3, "original_max_position_embeddings": math.inf}, r"original_max_position_embeddings'\] .*got inf"),
        (
            {"rope_type": "dynamic", "factor": 2.0},
            r"missing 'original_max_position_embeddings'.*max_position_embeddings",
        ),
        ({"rope_type": "yarn", "original_max_position_embeddings": 64}, r"missing 'factor'.*derives a missing factor"),
        ({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5}, r"must be 1 .*got 0.5: partial rotary"),
        ({"rope_type": "linear", "factor": 2.0, "original_max_position_embeddings": -1}, r"must be .*> 0, got -1"),
    ],
)
def test_each_validator_raises_on_bad_values(scaling, message):
    with pytest.raises(ValueError, match=message):
        parse_scaling(scaling, 10000.0)


# ---------------------------------------------------------------------------
# Driven by transformers: whatever its validator accepts, parse_scaling accepts, and means the same
# ---------------------------------------------------------------------------

HEAD_DIM, SEQ_LEN = 64, 10_000  # SEQ_LEN > every trained length below, so that "dynamic" scales
L31 = {"factor": 8.0, "original_max_position_embeddings": 8192, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
Y = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
L3 = {"rope_type": "llama3", "rope_theta": 500000.0, **L31}

# (label, dict): valid variants of each type with the extras transformers tolerates, then wrong values and keys.
DICTS = [
    ("default-empty", {}),
    ("default", {"rope_type": "default"}),
    ("default-legacy-type", {"type": "default"}),
    ("default-int-theta", {"rope_type": "default", "rope_theta": 1000000}),
    ("default-full-rotation", {"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 1.0}),
    ("default-factor", {"rope_type": "default", "factor": 2.0}),
    ("linear-int-factor", {"rope_type": "linear", "factor": 4}),
    ("linear-legacy-type", {"type": "linear", "factor": 2.5}),
    ("linear-both-types", {"type": "dynamic", "rope_type": "linear", "factor": 2.0}),
    ("linear-theta", {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6, "partial_rotary_factor": 1}),
    ("linear-with-length", {"rope_type": "linear", "factor": 2.0, "original_max_position_embeddings": 2048}),
    ("linear-small-factor", {"rope_type": "linear", "factor": 0.5}),
    ("linear-str-factor", {"rope_type": "linear", "factor": "2"}),
    ("linear-no-factor", {"rope_type": "linear"}),
    ("linear-yarn-key", {"rope_type": "linear", "factor": 2.0, "beta_fast": 32}),
    ("linear-partial", {"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5}),
    ("dynamic", {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 2048}),
    ("dynamic-ints", {"type": "dynamic", "factor": 3, "original_max_position_embeddings": 1024, "rope_theta": 500000}),
    ("dynamic-without-length", {"rope_type": "dynamic", "factor": 2.0}),
    ("dynamic-small-factor", {"rope_type": "dynamic", "factor": 0.9, "original_max_position_embeddings": 2048}),
    (
        "dynamic-llama3-key",
        {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64, "low_freq_factor": 1},
    ),
    ("yarn", Y),
    ("yarn-ints", {**Y, "factor": 4, "beta_fast": 32, "beta_slow": 1, "rope_theta": 500000}),
    ("yarn-legacy-type", {"type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096}),
    (
        "yarn-all-keys",
        {
            **Y,
            "beta_fast": 16.0,
            "beta_slow": 2.0,
            "mscale": 1.0,
            "mscale_all_dim": 0.707,
            "truncate": False,
            "partial_rotary_factor": 1.0,
        },
    ),
    ("yarn-deepseek", {**Y, "factor": 40, "mscale": 0.707, "mscale_all_dim": 0.707}),
    ("yarn-mscale-alone", {**Y, "mscale": 2.0}),
    ("yarn-mscale-zero", {**Y, "mscale": 0, "mscale_all_dim": 1.0}),
    ("yarn-negative-mscale", {**Y, "mscale": -1.0, "mscale_all_dim": 1.0}),
    ("yarn-equal-betas", {**Y, "beta_fast": 8.0, "beta_slow": 8.0}),
    ("yarn-equal-betas-untruncated", {**Y, "beta_fast": 8.0, "beta_slow": 8.0, "truncate": False}),
    ("yarn-zero-betas", {**Y, "beta_fast": 0, "beta_slow": 0}),
    ("yarn-none-optionals", {**Y, "beta_fast": None, "beta_slow": None, "attention_factor": None, "mscale": None}),
    ("yarn-attention-factor", {**Y, "attention_factor": 1.5}),
    ("yarn-int-attention-factor", {**Y, "attention_factor": 1}),
    ("yarn-zero-attention-factor", {**Y, "attention_factor": 0.0}),
    ("yarn-float-length", {**Y, "original_max_position_embeddings": 100.5}),
    ("yarn-factor-one", {**Y, "factor": 1.0}),
    ("yarn-swapped-betas", {**Y, "beta_fast": 1, "beta_slow": 2}),
    ("yarn-negative-beta-slow", {**Y, "beta_slow": -1.0}),
    ("yarn-negative-attention-factor", {**Y, "attention_factor": -1.0}),
    ("yarn-zero-denominator", {**Y, "factor": math.e, "mscale": 1.0, "mscale_all_dim": -10.0}),
    ("yarn-small-factor", {**Y, "factor": 0.5}),
    ("yarn-none-factor", {**Y, "factor": None}),
    ("yarn-zero-length", {**Y, "original_max_position_embeddings": 0}),
    ("yarn-without-length", {"rope_type": "yarn", "factor": 4.0}),
    ("yarn-truncate-none", {**Y, "truncate": None}),
    ("yarn-truncate-str", {**Y, "truncate": "no"}),
    ("yarn-llama3-key", {**Y, "low_freq_factor": 1.0}),
    ("llama3", L3),
    ("llama3-ints", {**L3, "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "rope_theta": 500000}),
    ("llama3-legacy-type", {"type": "llama3", **L31, "partial_rotary_factor": 1.0}),
    ("llama3-float-length", {**L3, "original_max_position_embeddings": 8192.0}),
    ("llama3-negative-low", {**L3, "low_freq_factor": -1.0}),
    ("llama3-zero-length", {**L3, "original_max_position_embeddings": 0}),
    ("llama3-equal-factors", {**L3, "high_freq_factor": 1.0}),
    ("llama3-zero-low", {**L3, "low_freq_factor": 0}),
    ("llama3-small-factor", {**L3, "factor": 0.5}),
    ("llama3-no-high", {k: v for k, v in L3.items() if k != "high_freq_factor"}),
    ("llama3-without-length", {k: v for k, v in L3.items() if k != "original_max_position_embeddings"}),
    ("llama3-yarn-key", {**L3, "beta_fast": 32.0}),
]

# Where parse_scaling parts from transformers on purpose: label -> what it does instead ("agrees" or an error).
DIVERGENCES = {
    # transformers reads the trained length from config.max_position_embeddings, which this function never sees
    "dynamic-without-length": r"missing 'original_max_position_embeddings'.*config.max_position_embeddings",
    "yarn-without-length": r"missing 'original_max_position_embeddings'.*config.max_position_embeddings",
    "llama3-without-length": r"missing 'original_max_position_embeddings'.*config.max_position_embeddings",
    "linear-partial": r"partial_rotary_factor'\] must be 1.*partial rotary is not supported",
    "yarn-truncate-none": r"scaling\['truncate'\] must be True or False, got None",  # transformers: False
    "yarn-truncate-str": r"scaling\['truncate'\] must be True or False, got 'no'",  # transformers: True
    "linear-with-length": "agrees",  # transformers warns that the key is unrecognized, and ignores it
}
# Values transformers warns about but computes with, well defined: used here rather than refused (an int where
# transformers wants a float, a float where it wants an int, equal llama3 band factors: a step, as in Llama 4
# Scout's published file). Every other value it warns about is refused.
USED_DESPITE_WARNING = {"yarn-int-attention-factor", "llama3-float-length", "llama3-equal-factors"}
# Warnings that compare with config.max_position_embeddings, which is not part of the dict.
CONFIG_LEVEL = ("implicit factor", "must be less than max_position_embeddings")


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def transformers_verdict(params: dict) -> dict:
    """What transformers makes of ``params`` for a LLaMA config: its error, unrecognized keys, warnings, result."""
    hf = copy.deepcopy(params)
    rope_type = hf.get("rope_type", hf.get("type", "default"))
    max_pos = hf.pop("original_max_position_embeddings", 4096) if rope_type == "dynamic" else 4096
    records, logger = _Records(), logging.getLogger("transformers.modeling_rope_utils")
    logger.addHandler(records)
    verdict = {"error": None, "unrecognized": set(), "warnings": [], "result": None}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            config = LlamaConfig(
                hidden_size=2 * HEAD_DIM,
                num_attention_heads=2,
                head_dim=HEAD_DIM,
                max_position_embeddings=max_pos,
                rope_parameters=hf,
            )
            if rope_type == "default":
                verdict["result"] = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
            else:
                verdict["result"] = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=SEQ_LEN)
    except Exception as error:  # noqa: BLE001  (any failure of transformers is its refusal)
        verdict["error"] = error
    finally:
        logger.removeHandler(records)
    for message in records.messages + [str(w.message) for w in caught]:
        if message.startswith("Unrecognized keys"):
            verdict["unrecognized"] |= set(ast.literal_eval(message.rpartition(": ")[2]))
        elif not any(text in message for text in CONFIG_LEVEL):
            verdict["warnings"].append(message)
    return verdict


def posenc_frequencies(params: dict):
    base = params.get("rope_theta", 10000.0)
    base = base if isinstance(base, (int, float)) else 10000.0
    return rope_inv_freq(HEAD_DIM, base=base, scaling=params, seq_len=SEQ_LEN)


def assert_agrees(params: dict, verdict: dict) -> None:
    ours, our_factor = posenc_frequencies(params)
    theirs, their_factor = verdict["result"]
    assert ours.shape == theirs.shape == (HEAD_DIM // 2,)
    assert torch.allclose(ours, theirs.double(), rtol=1e-6, atol=0)  # theirs are float32
    assert our_factor == pytest.approx(their_factor, rel=1e-12)
    parsed = parse_scaling(params, params.get("rope_theta", 10000.0))
    assert parse_scaling(parsed, params.get("rope_theta", 10000.0)) == parsed  # canonical


@pytest.mark.parametrize(("label", "params"), DICTS, ids=[label for label, _ in DICTS])
def test_what_transformers_accepts_parse_scaling_accepts_with_the_same_frequencies(label, params):
    verdict = transformers_verdict(params)
    if label in DIVERGENCES:
        # a real divergence: transformers computes it (the one unrecognized key aside)
        assert verdict["error"] is None and verdict["result"] is not None and not verdict["warnings"]
        if DIVERGENCES[label] == "agrees":
            assert verdict["unrecognized"] == {"original_max_position_embeddings"}
            assert_agrees(params, verdict)
        else:
            with pytest.raises(ValueError, match=DIVERGENCES[label]):
                posenc_frequencies(params)
    elif verdict["error"] is not None:  # transformers raises, in its validator or while computing
        with pytest.raises(ValueError, match=r"scaling"):
            posenc_frequencies(params)
    elif verdict["unrecognized"]:  # transformers only warns; here it is an error naming the key and the accepted ones
        with pytest.raises(ValueError, match=r"unknown key\(s\) .*; accepted: ") as raised:
            posenc_frequencies(params)
        assert all(f"'{key}'" in str(raised.value).split("; accepted")[0] for key in verdict["unrecognized"])
    elif verdict["warnings"]:  # a value transformers warns about: refused, naming it, unless used on purpose
        fields = {m.group(1) for m in map(re.compile(r"'s (\w+) field").search, verdict["warnings"]) if m}
        assert fields, verdict["warnings"]
        if label in USED_DESPITE_WARNING:
            assert_agrees(params, verdict)
        else:
            with pytest.raises(ValueError) as raised:
                posenc_frequencies(params)
            assert any(f"'{field}'" in str(raised.value) for field in fields)
    else:  # transformers accepts it silently: so does parse_scaling, and computes the same frequencies
        assert_agrees(params, verdict)


def test_the_driven_dicts_reach_every_verdict():
    verdicts = [transformers_verdict(params) for _, params in DICTS]
    clean = [v for v in verdicts if not (v["error"] or v["unrecognized"] or v["warnings"])]
    assert len(clean) >= 30
    assert sum(v["error"] is not None for v in verdicts) >= 5
    assert sum(bool(v["unrecognized"]) for v in verdicts) >= 5
    assert sum(bool(v["warnings"]) and v["error"] is None for v in verdicts) >= 5


def test_partial_rotation_is_the_full_rotation_of_the_rotated_dimension():
    """transformers with ``partial_rotary_factor`` p == this function on ``int(head_dim * p)`` without the key."""
    params = {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 2048,
        "partial_rotary_factor": 0.5,
    }
    verdict = transformers_verdict(params)
    with pytest.raises(ValueError, match=r"pass head_dim = int\(head_dim \* 0.5\)"):
        parse_scaling(params, 10000.0)
    ours, factor = rope_inv_freq(
        HEAD_DIM // 2, scaling={k: v for k, v in params.items() if k != "partial_rotary_factor"}
    )
    assert torch.allclose(ours, verdict["result"][0].double(), rtol=1e-6, atol=0)
    assert factor == pytest.approx(verdict["result"][1], rel=1e-12)


def test_legacy_type_is_read_and_dropped_and_rope_type_wins():
    assert parse_scaling({"type": "linear", "factor": 2}, 1e4) == {"rope_type": "linear", "factor": 2.0}
    assert parse_scaling({"type": "dynamic", "rope_type": "linear", "factor": 2}, 1e4)["rope_type"] == "linear"


def test_rope_theta_in_the_dictionary_is_the_base_when_none_is_given():
    """transformers v5 keeps rope_theta inside rope_parameters: the dictionary alone fixes the frequencies."""
    from posenc import RotaryEmbedding, rope_cos_sin, rope_inv_freq

    scaling = {"rope_type": "linear", "factor": 2.0, "rope_theta": 500000.0}
    given, _ = rope_inv_freq(16, base=500000.0, scaling=scaling)
    assert torch.equal(rope_inv_freq(16, scaling=scaling)[0], given)
    assert RotaryEmbedding(16, scaling=scaling).base == 500000.0
    cos, _ = rope_cos_sin(torch.arange(3), 16, scaling=scaling)
    assert torch.equal(cos, rope_cos_sin(torch.arange(3), 16, base=500000.0, scaling=scaling)[0])
    assert abs(rope_inv_freq(16)[0][1].item() - 10000.0 ** (-2 / 16)) < 1e-15  # neither: 10000
    with pytest.raises(ValueError, match="disagrees with base = 10000"):
        rope_inv_freq(16, base=10000.0, scaling=scaling)
    with pytest.raises(ValueError, match=r"scaling\['rope_theta'\] must be a number > 1, got 'x'"):
        rope_inv_freq(16, scaling={"rope_type": "default", "rope_theta": "x"})


# ---------------------------------------------------------------------------
# Equal llama3 band factors (Llama 4 Scout): a step, as transformers computes it
# ---------------------------------------------------------------------------

SCOUT = {
    "rope_type": "llama3",
    "factor": 16.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
}  # Llama 4 Scout's published rope_scaling


def transformers_llama3(head_dim: int, base: float, params: dict) -> tuple[tuple, list[str]]:
    """``ROPE_INIT_FUNCTIONS["llama3"]`` for ``params`` at ``head_dim`` and ``base``, and what it logged."""
    records, logger = _Records(), logging.getLogger("transformers.modeling_rope_utils")
    logger.addHandler(records)
    try:
        config = LlamaConfig(
            hidden_size=2 * head_dim,
            num_attention_heads=2,
            head_dim=head_dim,
            max_position_embeddings=1 << 20,
            rope_parameters={**params, "rope_theta": base},
        )
        result = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    finally:
        logger.removeHandler(records)
    return result, records.messages


@pytest.mark.parametrize("head_dim", [32, 64, 128, 256])
@pytest.mark.parametrize(
    ("factor", "band", "base"),
    [(16.0, 1.0, 500000.0), (8.0, 1.0, 500000.0), (2.0, 4.0, 500000.0), (32.5, 0.5, 10000.0), (4, 2, 1000000)],
)
def test_equal_band_factors_are_the_step_transformers_computes(head_dim, factor, band, base):
    params = {**SCOUT, "factor": factor, "low_freq_factor": band, "high_freq_factor": band}
    ours, our_factor = rope_inv_freq(head_dim, base=base, scaling=params)
    unscaled, _ = rope_inv_freq(head_dim, base=base)
    kept = 2 * math.pi / unscaled < 8192 / band
    assert 0 < int(kept.sum()) < head_dim // 2  # pairs on both sides of the step
    # bit for bit a step: kept or divided by the factor, no pair blended
    assert torch.equal(ours, torch.where(kept, unscaled, unscaled / factor))
    (theirs, their_factor), logged = transformers_llama3(head_dim, base, params)
    assert any("high_freq_factor field must be greater than low_freq_factor" in m for m in logged)  # only warns
    assert torch.allclose(ours, theirs.double(), rtol=1e-6, atol=0)  # theirs are float32
    assert our_factor == their_factor == 1.0


def test_scouts_published_scaling_is_read_as_a_step():
    assert parse_scaling(SCOUT, 500000.0) == SCOUT
    ours, _ = rope_inv_freq(128, base=500000.0, scaling=SCOUT)
    unscaled, _ = rope_inv_freq(128, base=500000.0)
    assert int((ours < unscaled).sum()) == 29 and torch.equal(ours[ours < unscaled] * 16, unscaled[ours < unscaled])
    # no pair has a wavelength between 8192 / 1.22 and 8192: any narrow ramp there gives the step too
    assert torch.equal(rope_inv_freq(128, base=500000.0, scaling={**SCOUT, "high_freq_factor": 1.22})[0], ours)


def test_a_pair_exactly_at_the_step_is_divided_like_on_every_wider_ramp():
    """The one wavelength where implementations can part: ``original / high_freq_factor`` itself.

    posenc divides that pair by the factor (it keeps only wavelengths strictly below the
    boundary), which is the limit of the ramp as ``high_freq_factor`` falls to
    ``low_freq_factor``: the ramp's blend weight at ``original / low_freq_factor`` is 0.
    transformers computes 0 / 0 there (NaN; 5.23 warns and returns it), and Meta's
    reference code (llama-models, llama4 ``apply_scaling``) fails an assert.
    """
    # head_dim 2: one pair, frequency base^0 = 1, wavelength 2 pi, exactly the boundary when original = 2 pi
    at = {**SCOUT, "original_max_position_embeddings": 2 * math.pi}
    assert rope_inv_freq(2, scaling=at)[0].tolist() == [1 / 16]
    for high in (1.001, 1.5, 4.0):  # every ramp above the same low_freq_factor divides it too
        assert rope_inv_freq(2, scaling={**at, "high_freq_factor": high})[0].tolist() == [1 / 16]
    longer = {**at, "original_max_position_embeddings": math.nextafter(2 * math.pi, 7.0)}
    shorter = {**at, "original_max_position_embeddings": math.nextafter(2 * math.pi, 6.0)}
    assert rope_inv_freq(2, scaling=longer)[0].tolist() == [1.0]  # the wavelength just below: kept
    assert rope_inv_freq(2, scaling=shorter)[0].tolist() == [1 / 16]  # just above: divided
