"""``python -m posenc.experiments`` loses no work: options checked before training, runs saved as they finish.

Every command here trains one or two models of a few hundred parameters for two steps, in this process.
"""

import copy
import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from posenc.experiments import (
    SCHEMA,
    ExperimentConfig,
    ReverseTask,
    TinyConfig,
    TinyTransformer,
    experiment_summary,
    extrapolation,
    load_experiments,
    main,
    runner,
    train_tiny,
)

TINY = ["--steps", "2", "--dim", "8", "--num-heads", "2", "--num-layers", "1", "--batch-size", "4"]
TINY += ["--train-length", "4", "--multipliers", "1", "2", "--num-examples", "8", "--tasks", "shift", "--quiet"]


def tiny(out, *, schemes=("none",), seeds=("0",), extra=()):
    """The arguments of a tiny experiment writing to ``out``."""
    return [*TINY, "--schemes", *schemes, "--seeds", *seeds, "--out", str(out), *extra]


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if any run starts."""

    def refuse(*args):
        raise AssertionError(f"a run started: {args[1:]}")

    monkeypatch.setattr(extrapolation, "_run_job", refuse)


def refused(capsys, argv) -> str:
    """The error message of a command that argparse refuses (exit status 2)."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


# --- the configuration builds its schemes before any training ---------------------------------


def test_a_head_dim_that_rope_rejects_is_refused_before_training(tmp_path, capsys, no_training):
    out = tmp_path / "r.json"
    message = refused(capsys, tiny(out, schemes=("none", "rope")) + ["--dim", "6"])
    assert message.endswith(
        "error: scheme 'rope' cannot be built with dim=6, num_heads=2 (head_dim 3): "
        "head_dim must be even (channels come in sin/cos pairs), got 3; use 2 or 4"
    )
    assert not out.exists()
    with pytest.raises(ValueError, match=r"scheme 'rope_pi' cannot be built with dim=6, num_heads=2 \(head_dim 3\)"):
        ExperimentConfig(schemes=("none", "rope_pi"), dim=6, num_heads=2)
    assert ExperimentConfig(schemes=("none", "sinusoidal"), dim=6, num_heads=2).dim == 6  # they take odd heads


def test_building_the_schemes_leaves_the_global_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    ExperimentConfig()  # builds the learned table, among others
    assert torch.equal(torch.rand(3), expected)


# --- --out is checked before any training -------------------------------------------------------


def test_out_that_cannot_be_written_is_refused_before_training(tmp_path, capsys, no_training):
    (tmp_path / "afile").write_text("not a folder")
    message = refused(capsys, tiny(tmp_path))
    assert f"--out {tmp_path} is a directory; give a file name, such as {tmp_path / 'experiments.json'}" in message
    message = refused(capsys, tiny(tmp_path / "afile" / "x.json"))
    assert f"--out {tmp_path / 'afile' / 'x.json'} cannot be written: {tmp_path / 'afile'} is a file" in message
    if Path("/sys").is_dir() and not os.access("/sys", os.W_OK):
        message = refused(capsys, tiny("/sys/x.json"))
        assert "--out /sys/x.json cannot be written:" in message and "(writing in /sys)" in message
    assert list(tmp_path.iterdir()) == [tmp_path / "afile"]  # no trial file left


def test_out_that_is_a_pipe_is_refused_without_reading_it(tmp_path, capsys, no_training):
    """A FIFO as --out: the partial-file check does not open it (it would wait for a writer), and the
    output check refuses it, --force or not."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for force in ([], ["--force"]):
        message = refused(capsys, tiny(pipe) + force)
        assert f"--out {pipe} is not a regular file (a device, a pipe or a socket)" in message
    assert pipe.is_fifo()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes in any folder")
def test_out_in_a_read_only_folder_is_refused(tmp_path, capsys, no_training):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        message = refused(capsys, tiny(locked / "x.json"))
    finally:
        locked.chmod(0o755)
    assert f"--out {locked / 'x.json'} cannot be written: Permission denied" in message


def test_an_existing_file_is_replaced_only_with_force(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recorded = tmp_path / "experiments.json"  # the default --out
    recorded.write_text('{"my": "data"}')
    argv = [a for a in tiny("unused") if a not in ("--out", "unused")]
    with monkeypatch.context() as m:
        m.setattr(extrapolation, "_run_job", lambda *args: pytest.fail("a run started"))
        message = refused(capsys, argv)
    assert message.endswith(
        "--out experiments.json exists and is not a partial file of this command with these options; "
        "pass --force to replace it"
    )
    assert recorded.read_text() == '{"my": "data"}'
    assert main(argv + ["--force"]) == 0
    whole = load_experiments(recorded)
    assert "complete" not in whole and len(whole["runs"]) == 1
    assert "exists and is not a partial file" in refused(capsys, argv)  # a whole results file is kept too
    partial = {"schema": SCHEMA, "complete": False} | whole | {"runs": []}
    recorded.write_text(json.dumps(partial))
    other = {**partial, "config": {**partial["config"], "steps": partial["config"]["steps"] + 1}}
    recorded.write_text(json.dumps(other))
    assert "is not a partial file of this command with these options" in refused(capsys, argv)
    assert json.loads(recorded.read_text()) == other  # a stopped run with other options is kept
    recorded.write_text(json.dumps(partial))
    assert main(argv) == 0  # a partial file of a stopped run with these options is replaced without --force
    assert "complete" not in load_experiments(recorded)


# --- runs are saved as they finish ----------------------------------------------------------------


def stop_at(monkeypatch, out: Path, call: int, error: BaseException) -> list:
    """Make the ``call``-th run raise ``error``, the runs before it run; returns what each run found in ``out``."""
    real, seen = extrapolation.train_and_evaluate, []

    def run(config, scheme, task, seed):
        seen.append(json.loads(out.read_text()) if out.exists() else None)
        if len(seen) == call:
            raise error
        return real(config, scheme, task, seed)

    monkeypatch.setattr(extrapolation, "train_and_evaluate", run)
    return seen


def test_every_finished_run_is_on_disk_when_a_later_run_fails(tmp_path, capsys, monkeypatch):
    out = tmp_path / "sub" / "r.json"
    seen = stop_at(monkeypatch, out, 3, RuntimeError("boom"))
    assert main(tiny(out, seeds=("0", "1", "2"))) == 1
    assert seen[0] is None and seen[1]["complete"] is False and len(seen[1]["runs"]) == 1  # saved after each run
    document = load_experiments(out)
    assert list(document)[:2] == ["schema", "complete"] and document["complete"] is False
    assert [run["seed"] for run in document["runs"]] == [0, 1]
    assert [row["n"] for row in experiment_summary(document)] == [2, 2]  # a partial document summarises
    err = capsys.readouterr().err
    assert "RuntimeError: boom" in err and "in the run scheme='none', task='shift', seed=2" in err
    assert err.strip().splitlines()[-1] == (
        "python -m posenc.experiments stopped by RuntimeError: boom; "
        f'2 finished run(s) are in {out}, marked "complete": false'
    )
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.json"]  # no temporary file left


def test_ctrl_c_keeps_the_finished_runs(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r.json"
    stop_at(monkeypatch, out, 2, KeyboardInterrupt())
    assert main(tiny(out, seeds=("0", "1"))) == 130
    assert len(load_experiments(out)["runs"]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f'python -m posenc.experiments interrupted; 1 finished run(s) are in {out}, marked "complete": false'


def test_a_failure_before_any_run_finished_writes_nothing(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r.json"
    stop_at(monkeypatch, out, 1, ValueError("bad"))
    assert main(tiny(out)) == 1
    assert not out.exists()
    assert capsys.readouterr().err.strip().endswith(f"no run finished; {out} was not written")


def test_parallel_runs_stop_at_the_first_failure():
    """Queued runs are cancelled; the runs already going finish and are kept; the error is raised."""
    jobs = [("none", "shift", seed) for seed in range(8)]
    started, recorded, lock = [], [], threading.Lock()

    def run(config, scheme, task, seed):
        with lock:
            started.append(seed)
        if seed == 0:
            raise RuntimeError("seed 0 fails")
        time.sleep(0.2)
        return {"seed": seed}

    with pytest.raises(RuntimeError, match="seed 0 fails"):
        runner._run_pool(ThreadPoolExecutor(2), run, None, jobs, lambda job, r: recorded.append(job[2]))
    assert len(started) < len(jobs)  # without the cancel every job would have run before the error
    assert sorted(recorded) == sorted(started)[1:]  # all that ran, but the failing one


# --- damaged documents ----------------------------------------------------------------------------


def _document() -> dict:
    config = ExperimentConfig(schemes=("learned",), tasks=("shift",), seeds=(0, 1), multipliers=(1, 2))
    evaluations = [{"status": "ok", "accuracy": 0.5}, {"status": "cannot run", "accuracy": None}]
    runs = [
        {"scheme": "learned", "task": "shift", "seed": s, "evaluations": copy.deepcopy(evaluations)} for s in (0, 1)
    ]
    return {"schema": SCHEMA, "config": config.to_dict(), "environment": {}, "runs": runs}


def _set(path, value):
    def damage(document):
        *keys, last = path
        target = document
        for key in keys:
            target = target[key]
        if value is KeyError:
            del target[last]
        else:
            target[last] = value

    return damage


DAMAGE = [
    (_set(["runs", 1, "evaluations"], KeyError), r"runs\[1\] lacks the key\(s\) \['evaluations'\]"),
    (_set(["runs", 0, "evaluations"], []), r"runs\[0\]\['evaluations'\] must be a list of 2 evaluations .*got \[\]"),
    (_set(["runs", 0, "evaluations"], "ok"), r"runs\[0\]\['evaluations'\] must be a list of 2 evaluations"),
    (_set(["runs", 0, "evaluations", 1], 3), r"runs\[0\]\['evaluations'\]\[1\] must be a dict with status"),
    (_set(["runs", 0, "evaluations", 0, "status"], "fine"), r"\['evaluations'\]\[0\] must be a dict with status"),
    (_set(["runs", 0, "evaluations", 0, "accuracy"], "0.5"), r"status 'ok', so its accuracy must be in \[0, 1\]"),
    (_set(["runs", 0, "evaluations", 0, "accuracy"], 2.0), r"accuracy must be in \[0, 1\], got 2\.0"),
    (_set(["runs", 0, "seed"], 7), r"runs\[0\] has seed 7, not one of the config's \[0, 1\]"),
    (_set(["runs", 0, "seed"], 1), r"runs\[1\] repeats the run task='shift', scheme='learned', seed=1"),
    (_set(["runs", 0], ["learned"]), r"runs\[0\] must be a dict, got list"),
    (_set(["runs"], {"a": 1}), r"'runs' must be a list, got dict"),
    (_set(["config"], KeyError), r"results lack the key 'config'"),
    (_set(["config"], [1]), r"config must be a dict of the fields \['schemes', .*\], got list"),
    (_set(["config", "seeds"], KeyError), r"config lacks the key\(s\) \['seeds'\]"),
    (_set(["complete"], "no"), r"'complete' must be true or false where present, got 'no'"),
]


@pytest.mark.parametrize("damage, match", DAMAGE, ids=[m for _, m in DAMAGE])
def test_a_damaged_document_is_refused_with_what_is_wrong(tmp_path, damage, match):
    document = _document()
    assert [row["status"] for row in experiment_summary(document)] == ["ok", "cannot run"]
    damage(document)
    with pytest.raises(ValueError, match=match):
        experiment_summary(document)
    if "config" in document:  # load_experiments checks its own top-level keys first
        path = tmp_path / "damaged.json"
        path.write_text(json.dumps(document))
        with pytest.raises(ValueError, match=rf"^{path}: .*" + match):
            load_experiments(path)


# --- train_tiny leaves the model's mode as it found it when it stops early ----------------------


class _Stops(ReverseTask):
    """A task whose second batch raises."""

    def __init__(self, error: BaseException):
        super().__init__()
        self.calls, self.error = 0, error

    def sample(self, *args, **kwargs):
        self.calls += 1
        if self.calls == 2:
            raise self.error
        return super().sample(*args, **kwargs)


@pytest.mark.parametrize("error", [RuntimeError("stop"), KeyboardInterrupt()], ids=["error", "ctrl-c"])
@pytest.mark.parametrize("training", [False, True], ids=["from-eval", "from-train"])
def test_train_tiny_interrupted_restores_the_mode(error, training):
    model = TinyTransformer(TinyConfig(16, dim=8, num_heads=2, num_layers=1, max_len=16)).train(training)
    with pytest.raises(type(error)):
        train_tiny(model, _Stops(error), steps=3, length=4, batch_size=2)
    assert model.training is training
    train_tiny(model.train(training), ReverseTask(), steps=1, length=4, batch_size=2)
    assert model.training is False  # a finished run ends in evaluation mode, as before


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--train-length", "100000000"],
            r"train_length \* max\(multipliers\) must be <= MAX_LENGTH = 4096 .*200000000",
        ),
        (["--num-examples", "1000000000"], r"num_examples must be <= MAX_EXAMPLES = 1048576, got 1000000000"),
    ],
)
def test_sizes_past_the_documented_bound_are_refused_before_training(tmp_path, capsys, no_training, extra, message):
    """H3: --train-length 10**8 ran out of memory after starting; --num-examples 10**9 would run for days."""
    assert re.search(message, refused(capsys, tiny(tmp_path / "r.json", extra=extra)))


def test_ctrl_c_while_the_command_line_loads_exits_130_in_one_line(monkeypatch, capsys):
    """R9: a KeyboardInterrupt outside the runs printed a traceback (exit -2); now one line and 130, as during them."""
    import runpy

    from posenc.experiments import cli

    def interrupted(argv=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "main", interrupted)
    with pytest.raises(SystemExit) as info:
        runpy.run_module("posenc.experiments", run_name="__main__")
    assert info.value.code == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and "Traceback" not in err
