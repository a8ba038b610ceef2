"""posenc.experiments.Accuracies: each seed's accuracy at the end, after a budget and at every checkpoint."""

import copy

import pytest

from posenc.experiments import SCHEMA, Accuracies, ExperimentConfig

CONFIG = ExperimentConfig(
    schemes=("none", "rope"), tasks=("shift",), seeds=(0, 1), steps=1000, checkpoints=(250, 500), multipliers=(1, 2)
)


def _evals(a1, a2):
    return [
        {"multiplier": 1, "length": 16, "seq_len": 16, "status": "ok", "accuracy": a1},
        {"multiplier": 2, "length": 32, "seq_len": 32, "status": "ok", "accuracy": a2},
    ]


def _run(scheme, seed, steps):
    """A run evaluated at ``steps``; its accuracy at step s is s / 2000 + seed / 100 (at twice the length, s / 4000)."""
    checkpoints = [{"step": s, "loss": 1.0, "evaluations": _evals(s / 2000 + seed / 100, s / 4000)} for s in steps]
    return {
        "task": "shift",
        "scheme": scheme,
        "seed": seed,
        "evaluations": checkpoints[-1]["evaluations"],
        "checkpoints": checkpoints,
    }


def _document():
    runs = [
        _run("none", 0, [250, 500, 1000]),
        _run("none", 1, [250, 500, 1000]),
        _run("rope", 0, [250, 500]),  # converged: stopped at 500
        _run("rope", 1, [250, 500, 1000]),
    ]
    return {"schema": SCHEMA, "config": CONFIG.to_dict(), "environment": {}, "runs": runs}


def test_final_after_and_checkpoints_by_hand():
    saved = Accuracies(_document())
    assert saved.final("shift", "none", 1) == [0.5, 0.51]
    assert saved.final("shift", "rope", 2) == [0.125, 0.25]
    assert saved.after("shift", "none", 1, 250) == [0.125, 0.135]
    assert saved.after("shift", "none", 1, 999) == [0.25, 0.26]  # the last checkpoint at or before the budget
    assert saved.after("shift", "rope", 1, 1000) == [0.25, 0.51]  # a converged run keeps its last value
    assert saved.checkpoints("shift", "rope", 1) == [0.125, 0.25, 0.135, 0.26, 0.51]  # seed after seed
    assert saved.checkpoints("shift", "rope", 1, since=500) == [0.25, 0.26, 0.51]
    assert saved.config == CONFIG and "rope" in repr(saved)


def test_a_cannot_run_evaluation_is_none():
    document = _document()
    for run in document["runs"]:
        if run["scheme"] == "rope":
            for entries in [run["evaluations"], *(c["evaluations"] for c in run["checkpoints"])]:
                entries[1] = {"multiplier": 2, "length": 32, "seq_len": 32, "status": "cannot run", "accuracy": None}
    saved = Accuracies(document)
    assert saved.final("shift", "rope", 2) == [None, None]
    assert saved.checkpoints("shift", "rope", 2, since=1000) == [None]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda s: s.final("copy", "rope", 1), r"task must be one of the experiment's \['shift'\], got 'copy'"),
        (lambda s: s.final("shift", "alibi", 1), r"scheme must be one of .*'none', 'rope'.*got 'alibi'"),
        (lambda s: s.final("shift", "rope", 4), r"multiplier must be one of the experiment's \[1, 2\], got 4"),
        (lambda s: s.final("shift", "rope", True), r"multiplier .* got True"),
        (lambda s: s.after("shift", "rope", 1, 100), r"step must be at least the first checkpoint, 250, got 100"),
        (lambda s: s.after("shift", "rope", 1, 250.0), r"step must be a whole number of training steps, got 250.0"),
        (lambda s: s.checkpoints("shift", "rope", 1, since="0"), r"since must be a whole number .* got '0'"),
    ],
)
def test_wrong_arguments_name_the_argument_value_and_choices(call, message):
    with pytest.raises(ValueError, match=message):
        call(Accuracies(_document()))


def test_documents_it_cannot_read_are_refused():
    with pytest.raises(ValueError, match="schema"):
        Accuracies({"schema": "other"})
    with pytest.raises(ValueError, match="partial document"):
        Accuracies(_document() | {"complete": False})
    missing = _document()
    del missing["runs"][1]
    with pytest.raises(ValueError, match=r"lack the run task='shift', scheme='none', seed=1"):
        Accuracies(missing)
    unordered = _document()
    unordered["runs"][0]["checkpoints"].reverse()
    with pytest.raises(ValueError, match=r"seed=0 has checkpoints at \[1000, 500, 250\], not at ascending"):
        Accuracies(unordered).after("shift", "none", 1, 500)
    bare = copy.deepcopy(_document())
    del bare["runs"][2]["checkpoints"]
    with pytest.raises(ValueError, match="scheme='rope', seed=0 has no list of checkpoints"):
        Accuracies(bare).checkpoints("shift", "rope", 1)
    assert Accuracies(bare).final("shift", "rope", 1) == [0.25, 0.51]  # the end needs no checkpoints
