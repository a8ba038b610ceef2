"""RoPE scaling as a table: one entry per rope_type, one signature, its own validator."""

import math

import pytest
import torch

from posenc import ROPE_TYPES, rope_inv_freq
from posenc.rope_scaling import ROPE_SCALINGS, RopeScaling, ntk_scaled_base, parse_scaling

PARAMS = {
    "default": {},
    "linear": {"factor": 4.0},
    "dynamic": {"factor": 2.0, "original_max_position_embeddings": 64},
    "yarn": {"factor": 8.0, "original_max_position_embeddings": 256},
    "llama3": {"factor": 8.0, "original_max_position_embeddings": 128, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
}


def test_the_table_names_every_rope_type_once():
    assert tuple(ROPE_SCALINGS) == ROPE_TYPES == ("default", "linear", "dynamic", "yarn", "llama3")
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
            r"beta_fast'\] must be > scaling\['beta_slow'\]",
        ),
        (
            {
                "rope_type": "llama3",
                "factor": 8.0,
                "original_max_position_embeddings": 8,
                "low_freq_factor": 4,
                "high_freq_factor": 1,
            },
            r"high_freq_factor'\] must be > scaling\['low_freq_factor'\]",
        ),
        ({"rope_type": "linear", "factor": 0.5}, r"scaling\['factor'\] must be a finite number >= 1, got 0.5"),
        ({"rope_type": "nope"}, r"scaling\['rope_type'\] must be one of"),
        ({"rope_type": "default", "rope_theta": 500.0}, r"disagrees with base = 10000"),
    ],
)
def test_each_validator_raises_on_bad_values(scaling, message):
    with pytest.raises(ValueError, match=message):
        parse_scaling(scaling, 10000.0)
