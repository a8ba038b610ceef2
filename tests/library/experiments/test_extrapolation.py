"""The length extrapolation experiments: the command line, the JSON it writes, exact reproduction, the summary."""

import json
import math
import subprocess
import sys

import pytest
from repo import ROOT

from posenc.experiments import (
    ALL_SCHEMES,
    DEFAULT_OUT,
    SCHEMA,
    ExperimentConfig,
    ShiftTask,
    TinyConfig,
    TinyTransformer,
    build_task,
    experiment_summary,
    load_experiments,
    main,
    run_experiments,
    train_and_evaluate,
    train_tiny,
)

#: A configuration that trains in well under a second per run.
TINY = dict(
    steps=4, train_length=4, multipliers=(1, 2), dim=16, num_heads=2, num_layers=1, batch_size=8, num_examples=16
)
TINY_ARGS = [
    "--steps",
    "4",
    "--train-length",
    "4",
    "--multipliers",
    "1",
    "2",
    "--dim",
    "16",
    "--num-heads",
    "2",
    "--num-layers",
    "1",
    "--batch-size",
    "8",
    "--num-examples",
    "16",
    "--quiet",
]


def _without_timings(document):
    return [{k: v for k, v in run.items() if k != "train_seconds"} for run in document["runs"]]


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("experiments") / "sub" / "results.json"
    args = ["--schemes", "none", "learned", "rope_pi", "--tasks", "shift", "lookup", "--seeds", "0", "1"]
    assert main(args + TINY_ARGS + ["--out", str(out)]) == 0
    return out


def test_cli_writes_the_documented_schema(cli_results):
    document = json.loads(cli_results.read_text(encoding="utf-8"))
    assert document["schema"] == SCHEMA == "posenc.experiments/2"
    assert set(document) == {"schema", "config", "environment", "runs"}
    assert (
        document["config"]
        == ExperimentConfig(
            schemes=("none", "learned", "rope_pi"), tasks=("shift", "lookup"), seeds=(0, 1), **TINY
        ).to_dict()
    )
    assert {"date", "posenc", "torch", "python", "platform", "threads"} <= set(document["environment"])
    runs = document["runs"]
    assert [(r["task"], r["scheme"], r["seed"]) for r in runs] == [
        (t, s, seed) for t in ("shift", "lookup") for s in ("none", "learned", "rope_pi") for seed in (0, 1)
    ]
    keys = {
        "scheme",
        "task",
        "seed",
        "task_repr",
        "chance",
        "max_len",
        "parameters",
        "losses",
        "final_loss",
        "evaluations",
        "train_seconds",
        "steps_trained",
        "converged_at",
        "checkpoints",
    }
    for run in runs:
        assert set(run) == keys
        assert run["steps_trained"] == 4 and run["converged_at"] is None
        assert run["checkpoints"] == [
            {"step": 4, "loss": run["checkpoints"][0]["loss"], "evaluations": run["evaluations"]}
        ]
        assert run["final_loss"] == run["losses"][-1] and all(math.isfinite(x) for x in run["losses"])
        lengths = [(e["multiplier"], e["length"]) for e in run["evaluations"]]
        assert lengths == [(1, 4), (2, 8)]
        for e in run["evaluations"]:
            if e["status"] == "ok":
                assert 0.0 <= e["accuracy"] <= 1.0 and "reason" not in e
            else:
                assert e["status"] == "cannot run" and e["accuracy"] is None
    assert load_experiments(cli_results) == document


def test_learned_positions_cannot_run_past_the_training_length(cli_results):
    runs = load_experiments(cli_results)["runs"]
    for run in runs:
        expected_max_len = 4 if run["task"] == "shift" else 4 + 4  # lookup adds 4 query tokens
        assert run["max_len"] == expected_max_len
        statuses = [e["status"] for e in run["evaluations"]]
        if run["scheme"] == "learned":
            assert statuses == ["ok", "cannot run"]
            assert f"max_len={expected_max_len}" in run["evaluations"][1]["reason"]
        else:
            assert statuses == ["ok", "ok"]


def test_results_reproduce_bit_for_bit(cli_results, tmp_path):
    again = tmp_path / "again.json"
    args = ["--schemes", "none", "learned", "rope_pi", "--tasks", "shift", "lookup", "--seeds", "0", "1"]
    assert main(args + TINY_ARGS + ["--out", str(again)]) == 0
    first, second = load_experiments(cli_results), load_experiments(again)
    assert first["config"] == second["config"]
    assert _without_timings(first) == _without_timings(second)  # losses and accuracies, exactly


def test_a_subset_reproduces_its_runs_of_the_full_experiment(cli_results):
    full = load_experiments(cli_results)
    config = ExperimentConfig.from_dict(full["config"]).replace(schemes=("rope_pi",), tasks=("lookup",), seeds=(1,))
    subset = run_experiments(config)
    expected = [r for r in _without_timings(full) if (r["scheme"], r["task"], r["seed"]) == ("rope_pi", "lookup", 1)]
    assert _without_timings(subset) == expected


def test_parallel_jobs_change_nothing():
    config = ExperimentConfig(schemes=("sinusoidal", "alibi"), tasks=("shift",), seeds=(3,), **TINY)
    assert _without_timings(run_experiments(config, jobs=2)) == _without_timings(run_experiments(config))


def test_progress_bar_goes_to_stderr(capsys):
    pytest.importorskip("tqdm")
    config = ExperimentConfig(schemes=("none",), tasks=("shift",), seeds=(0,), **TINY)
    run_experiments(config, progress=True)
    captured = capsys.readouterr()
    assert captured.out == "" and "1/1" in captured.err


def test_train_and_evaluate_returns_the_model():
    config = ExperimentConfig(schemes=("alibi",), tasks=("reverse",), seeds=(5,), **TINY)
    record, model = train_and_evaluate(config, "alibi", "reverse", 5)
    assert model.scheme_name == "alibi" and model.causal and model.num_heads == 2
    assert record["parameters"] == sum(p.numel() for p in model.parameters())


def test_each_run_builds_its_model_from_the_experiment():
    config = ExperimentConfig(schemes=("rope_pi",), tasks=("lookup",), seeds=(1,), **TINY)
    task = build_task(config, "lookup")
    expected = TinyConfig(
        task.vocab_size, scheme="rope_pi", dim=16, num_heads=2, num_layers=1, max_len=4 + 4, causal=True, seed=1
    )
    assert config.model_config("rope_pi", task, 1) == expected
    record, model = train_and_evaluate(config, "rope_pi", "lookup", 1)
    assert model.config == expected and record["max_len"] == expected.max_len


def test_cli_runs_as_a_module():
    proc = subprocess.run(
        [sys.executable, "-m", "posenc.experiments", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("usage: python -m posenc.experiments")
    assert "--jobs" in proc.stdout and "default: experiments.json" in proc.stdout
    assert str(DEFAULT_OUT) == "experiments.json"


def test_summary_by_hand():
    config = ExperimentConfig(schemes=("learned",), tasks=("shift",), seeds=(0, 1, 2), **TINY)

    def run(seed, accuracy):
        evaluations = [
            {"multiplier": 1, "length": 4, "seq_len": 4, "status": "ok", "accuracy": accuracy},
            {
                "multiplier": 2,
                "length": 8,
                "seq_len": 8,
                "status": "cannot run",
                "accuracy": None,
                "reason": "past the table",
            },
        ]
        return {"scheme": "learned", "task": "shift", "seed": seed, "evaluations": evaluations}

    document = {
        "schema": SCHEMA,
        "config": config.to_dict(),
        "environment": {},
        "runs": [run(0, 0.5), run(1, 0.75), run(2, 1.0)],
    }
    at_1x, at_2x = experiment_summary(document)
    assert at_1x["mean"] == 0.75 and at_1x["std"] == 0.25  # sample standard deviation
    assert (at_1x["min"], at_1x["max"], at_1x["n"], at_1x["status"]) == (0.5, 1.0, 3, "ok")
    assert at_1x["accuracies"] == [0.5, 0.75, 1.0]
    assert at_2x["status"] == "cannot run" and at_2x["mean"] is None and at_2x["length"] == 8
    document["runs"][1]["evaluations"][1] |= {"status": "ok", "accuracy": 0.1}
    with pytest.raises(ValueError, match=r"shift/learned at length 8: some seeds ran and some did not"):
        experiment_summary(document)


def test_default_configuration_is_the_chapters():
    config = ExperimentConfig()
    assert config.schemes == ALL_SCHEMES and len(ALL_SCHEMES) == 8
    assert config.eval_lengths == (16, 32, 64) and config.causal and config.num_heads == 4
    assert ExperimentConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(schemes=("rotary",)), r"schemes must be one of .*'rope'.*; got 'rotary'"),
        (dict(schemes="rope"), r"schemes must be a non-empty list of names, got 'rope'"),
        (dict(schemes=("rope", "rope")), r"schemes must not repeat a name, got \['rope', 'rope'\]"),
        (dict(tasks=("sort",)), r"tasks must be one of 'reverse', 'shift', 'lookup', 'passkey', 'count'; got 'sort'"),
        (dict(seeds=()), r"seeds must be a non-empty list of ints, got \(\)"),
        (dict(seeds=(-1,)), r"seeds must be >= 0, got -1"),
        (dict(multipliers=(1, 0)), r"multipliers must be >= 1, got 0"),
        (dict(steps=0), r"steps must be >= 1, got 0"),
        (dict(lr=0.0), r"lr must be a finite number > 0, got 0\.0"),
        (dict(causal="yes"), r"causal must be True or False, got 'yes'"),
        (dict(dim=30), r"dim must be divisible by num_heads, got dim=30, num_heads=4"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ExperimentConfig(**kwargs)


def test_bad_calls(tmp_path):
    config = ExperimentConfig(**TINY)
    with pytest.raises(ValueError, match=r"seed must be one of \[0, 1, 2\]; got 7"):
        train_and_evaluate(config, "rope", "shift", 7)
    with pytest.raises(ValueError, match=r"scheme must be one of .*; got 'rotary'"):
        train_and_evaluate(config, "rotary", "shift", 0)
    with pytest.raises(ValueError, match=r"config must be an ExperimentConfig, got dict"):
        run_experiments(config.to_dict())
    with pytest.raises(ValueError, match=r"jobs must be >= 1, got 0"):
        run_experiments(config, jobs=0)
    with pytest.raises(ValueError, match=r"config has unknown key\(s\) \['epochs'\]"):
        ExperimentConfig.from_dict({"epochs": 3})
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"schema": "other/1"}))
    with pytest.raises(ValueError, match=r"not a posenc experiments file: schema must be 'posenc.experiments/2'"):
        load_experiments(wrong)
    with pytest.raises(ValueError, match=r"results must be a document of schema"):
        experiment_summary({"runs": []})


def test_cli_rejects_bad_options(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["--seeds", "-1", "--out", str(tmp_path / "x.json"), "--quiet"])
    assert info.value.code == 2 and "seeds must be >= 0, got -1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--jobs", "0", "--out", str(tmp_path / "x.json"), "--quiet"])
    assert not (tmp_path / "x.json").exists()


# --- budgets: checkpoints, the constant schedule, convergence ------------------------------------


def test_with_a_constant_rate_a_checkpoint_is_the_shorter_budget_bit_for_bit():
    config = ExperimentConfig(schemes=("rope",), tasks=("shift",), seeds=(0,), schedule="constant", **TINY)
    long = config.replace(steps=8, checkpoints=(4,))
    short_record, _ = train_and_evaluate(config, "rope", "shift", 0)  # 4 steps
    long_record, _ = train_and_evaluate(long, "rope", "shift", 0)
    assert [c["step"] for c in long_record["checkpoints"]] == [4, 8] and long_record["steps_trained"] == 8
    assert long_record["checkpoints"][0]["evaluations"] == short_record["evaluations"]
    # with the cosine decay the learning rate of step 4 depends on the budget: another run
    cosine = ExperimentConfig(schemes=("rope",), tasks=("shift",), seeds=(0,), **(TINY | {"warmup": 1}))
    short_cosine = train_and_evaluate(cosine, "rope", "shift", 0)[0]
    long_cosine = train_and_evaluate(cosine.replace(steps=8, checkpoints=(4,)), "rope", "shift", 0)[0]
    assert long_cosine["checkpoints"][0]["loss"] != short_cosine["checkpoints"][0]["loss"]


def test_a_converged_run_trains_one_checkpoint_more_and_stops():
    base = dict(TINY, steps=12, checkpoints=(3, 6, 9))
    config = ExperimentConfig(schemes=("rope",), tasks=("shift",), seeds=(0,), converged_loss=100.0, **base)
    record, _ = train_and_evaluate(config, "rope", "shift", 0)
    assert record["converged_at"] == 3 and record["steps_trained"] == 6
    assert [c["step"] for c in record["checkpoints"]] == [3, 6]
    assert record["evaluations"] == record["checkpoints"][-1]["evaluations"]
    never, _ = train_and_evaluate(config.replace(converged_loss=0.0), "rope", "shift", 0)
    assert never["converged_at"] is None and never["steps_trained"] == 12
    assert [c["step"] for c in never["checkpoints"]] == [3, 6, 9, 12]
    assert never["final_loss"] == never["losses"][-1]


def test_a_callback_can_stop_training():
    model = TinyTransformer(TinyConfig(16, dim=16, num_heads=2, num_layers=1))
    seen = []
    losses = train_tiny(
        model, ShiftTask(), steps=10, length=4, batch_size=4, callback=lambda s, ls: seen.append(s) or s == 3
    )
    assert len(losses) == 3 and seen == [1, 2, 3] and not model.training


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"checkpoints": (200, 100)}, r"checkpoints must be ascending steps, each <= steps = 300, got \[200, 100\]"),
        ({"checkpoints": (400,)}, r"checkpoints must be ascending steps, each <= steps = 300, got \[400\]"),
        ({"checkpoints": (0,)}, r"checkpoints must be >= 1, got 0"),
        ({"checkpoints": "100"}, r"checkpoints must be a list of steps, got '100'"),
        ({"converged_loss": -0.1}, r"converged_loss must be a finite number >= 0, got -0\.1"),
        ({"converged_loss": float("nan")}, r"converged_loss must be a finite number >= 0, got nan"),
        ({"converged_loss": True}, r"converged_loss must be a number >= 0, got True"),
        ({"schedule": "linear"}, r"schedule must be one of 'cosine', 'constant'; got 'linear'"),
    ],
)
def test_bad_budgets(change, message):
    with pytest.raises(ValueError, match=message):
        ExperimentConfig(**change)
