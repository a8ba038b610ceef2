"""Chapter 11's long-context experiment: the code that runs it, and its findings on the saved results.

The findings are asserted on every seed, at both training budgets (1,000 and 2,000 steps)
and both fine-tuning budgets (100 and 200 steps), as the chapter asserts them.
"""

import json

import pytest
import torch
from repo import ROOT

from posenc import apply_rope, ntk_scaled_base, rope_cos_sin
from posenc.experiments import (
    SCALING_METHODS,
    ScalingConfig,
    TextConfig,
    TinyConfig,
    TinyTransformer,
    load_scaling_results,
    load_text_results,
    main,
    run_scaling_experiment,
    scaling_options,
    scaling_summary,
)

DATA = ROOT / "posenc_book" / "data"
TINY_TEXT = TextConfig(
    schemes=("rope",),
    seeds=(0,),
    steps=3,
    checkpoints=(2,),
    train_length=16,
    batch_size=4,
    train_chars=20_000,
    eval_chars=512,
)


# --- the options and the configuration --------------------------------------------------


def test_each_method_is_the_rope_parameters_it_names():
    opts = {m: scaling_options(m, 4, trained=64, head_dim=16) for m in SCALING_METHODS}
    assert opts["none"] == {"base": 10000.0, "scaling": None}
    assert opts["linear"]["scaling"] == {"rope_type": "linear", "factor": 4.0}
    assert opts["ntk"] == {"base": ntk_scaled_base(10000.0, 4, 16), "scaling": None}
    assert opts["dynamic"]["scaling"] == {
        "rope_type": "dynamic",
        "factor": 2.0,
        "original_max_position_embeddings": 64,
    }
    assert opts["yarn"]["scaling"] == {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: scaling_options("ntk-by-parts", 2, trained=64, head_dim=16), "method must be one of"),
        (lambda: scaling_options("yarn", 0.5, trained=64, head_dim=16), "factor must be >= 1, got 0.5"),
        (lambda: ScalingConfig(text=TextConfig(schemes=("alibi",))), r"schemes \('rope',\)"),
        (lambda: ScalingConfig(multipliers=(1, 2)), "multipliers must be ints >= 2"),
        (lambda: ScalingConfig(finetune_methods=("ntk", "xpos")), "finetune_methods must be one of"),
        (lambda: ScalingConfig(finetune_checkpoints=(200,)), r"finetune_checkpoints must be steps in 1 \.\. 199"),
        (lambda: ScalingConfig(finetune_multiplier=3), "batch_size 32 must be divisible by finetune_multiplier 3"),
    ],
)
def test_bad_configurations_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_scaled_rope_model_is_the_trained_one_read_with_other_angles():
    """The scheme holds no weights: the plain model's weights load, and q, k turn by the scaled angles."""
    config = TinyConfig(97, scheme="rope", dim=32, num_heads=2, max_len=16, causal=True, seed=3)
    plain = TinyTransformer(config)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
    scaled = TinyTransformer(config.replace(scheme_options={"scaling": yarn}))
    scaled.load_state_dict(plain.state_dict())
    q, k = torch.randn(2, 1, 2, 40, 16, generator=torch.Generator().manual_seed(0))
    cos, sin = rope_cos_sin(torch.arange(40), 16, scaling=yarn)
    got_q, got_k = scaled.scheme.rotate(q, k)
    torch.testing.assert_close(got_q, apply_rope(q, cos, sin))
    torch.testing.assert_close(got_k, apply_rope(k, cos, sin))
    ids = torch.randint(0, 97, (1, 12), generator=torch.Generator().manual_seed(1))
    assert not torch.allclose(scaled(ids), plain(ids))  # YaRN changes short inputs too


# --- a tiny run, end to end ---------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_document():
    config = ScalingConfig(text=TINY_TEXT, finetune_steps=2, finetune_checkpoints=(1,))
    return config, run_scaling_experiment(config)


def test_a_run_records_every_method_at_every_length_and_budget(tiny_document):
    config, document = tiny_document
    (run,) = document["runs"]
    assert [c["step"] for c in run["zero_shot"]] == [2, 3]
    for checkpoint in run["zero_shot"]:
        evaluations = checkpoint["evaluations"]
        assert set(evaluations) == set(SCALING_METHODS)
        assert [e["multiplier"] for e in evaluations["none"]] == [1, 2, 4, 8]
        assert all([e["multiplier"] for e in evaluations[m]] == [2, 4, 8] for m in SCALING_METHODS[1:])
    assert [t["method"] for t in run["finetuned"]] == list(config.finetune_methods)
    assert all([c["step"] for c in t["checkpoints"]] == [1, 2] for t in run["finetuned"])
    rows = scaling_summary(document)
    assert ("zero-shot", "yarn", 8) in rows and ("finetuned", "linear", 8) in rows
    assert all(len(v) == 1 and 0 < v[0] < 8 for v in rows.values())


def test_the_command_line_writes_a_file_the_loader_reads(tmp_path, capsys):
    out = tmp_path / "scaling.json"
    argv = ["scaling", "--seeds", "1", "--steps", "2", "--checkpoints", "1", "--train-chars", "20000"]
    argv += ["--eval-chars", "4096", "--finetune-steps", "2", "--finetune-checkpoints", "1", "--quiet"]
    assert main([*argv, "--out", str(out)]) == 0
    document = load_scaling_results(out)
    assert [r["seed"] for r in document["runs"]] == [1]
    with pytest.raises(SystemExit):  # an existing file is replaced only with --force
        main([*argv, "--out", str(out)])
    assert "--force" in capsys.readouterr().err


def test_the_loader_names_what_is_missing(tmp_path):
    document = json.loads((DATA / "scaling_text_lm.json").read_text())
    del document["runs"][1]["finetuned"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=r"runs\[1\] lacks \['finetuned'\]"):
        load_scaling_results(path)
    with pytest.raises(ValueError, match="step must be a training checkpoint"):
        scaling_summary(load_scaling_results(DATA / "scaling_text_lm.json"), 1500)


# --- the findings, on the saved results -----------------------------------------------------

SAVED = load_scaling_results(DATA / "scaling_text_lm.json")
SEEDS = range(len(SAVED["runs"]))
NAMES = SCALING_METHODS


def test_the_saved_runs_are_the_text_experiments_rope_models():
    text = load_text_results(DATA / "text_lm.json")["runs"]
    for run in SAVED["runs"]:
        for scheme, method in (("rope", "none"), ("rope_pi", "linear")):
            (same,) = [r for r in text if r["scheme"] == scheme and r["seed"] == run["seed"]]
            theirs = {e["multiplier"]: e["bits_per_char"] for e in same["evaluations"]}
            for e in run["zero_shot"][-1]["evaluations"][method]:
                assert e["bits_per_char"] == pytest.approx(theirs[e["multiplier"]], abs=1e-4)


@pytest.mark.parametrize("step", [1000, 2000])
@pytest.mark.parametrize("seed", SEEDS)
def test_zero_shot_findings(step, seed):
    z = scaling_summary(SAVED, step)

    def v(method, m):
        return z["zero-shot", method, m][seed]

    base = v("none", 1)
    for m in (2, 4):  # PI alone is worse than nothing
        assert v("linear", m) > v("none", m)
    for m in (2, 4, 8):  # keeping the fast pairs works
        assert all(v(method, m) < v("none", m) for method in ("ntk", "dynamic", "yarn"))
    for m in (4, 8):  # nothing holds the trained level far out
        assert min(v(x, m) for x in NAMES) > base + 0.2
    assert v("ntk", 2) < min(v(x, 2) for x in NAMES if x != "ntk") and v("ntk", 2) - base < 0.05
    assert v("yarn", 8) < min(v(x, 8) for x in NAMES if x != "yarn")
    # at 4x, dynamic NTK and YaRN are the best two, within a tenth of a bit of each other
    assert max(v("dynamic", 4), v("yarn", 4)) < min(v(x, 4) for x in NAMES if x not in ("dynamic", "yarn"))
    assert abs(v("dynamic", 4) - v("yarn", 4)) < 0.1


@pytest.mark.parametrize("seed", SEEDS)
def test_fine_tuned_findings(seed):
    run = SAVED["runs"][seed]
    at = {t["method"]: {c["step"]: c["evaluations"] for c in t["checkpoints"]} for t in run["finetuned"]}

    def bits(method, step, m):
        return next(e["bits_per_char"] for e in at[method][step] if e["multiplier"] == m)

    base = next(e["bits_per_char"] for e in run["zero_shot"][-1]["evaluations"]["none"] if e["multiplier"] == 1)
    assert bits("yarn", 200, 4) < base  # the longer context now helps
    assert bits("yarn", 100, 4) - bits("yarn", 200, 4) < 0.05  # fastest
    assert bits("none", 100, 4) - bits("yarn", 100, 4) > 0.2
    for step in (100, 200):
        assert bits("yarn", step, 4) < bits("none", step, 4) < bits("linear", step, 4)  # PI loses to the control
        assert bits("linear", step, 1) > bits("none", step, 1)  # and pays at short inputs
    assert bits("none", 200, 8) < min(bits("yarn", 200, 8), bits("linear", 200, 8))
    pi_at_4 = next(e for e in run["zero_shot"][-1]["evaluations"]["linear"] if e["multiplier"] == 4)
    lost = pi_at_4["bits_per_char"] - base
    assert (lost - (bits("linear", 200, 4) - base)) / lost > 0.9  # fine-tuned PI wins back 9/10
