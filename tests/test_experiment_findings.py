"""The findings of the experiments chapter, asserted again on the saved results, on every seed and budget.

``state(task, scheme, m, step)`` is the accuracy per seed that a budget of ``step``
steps leaves (a run that converged and stopped earlier counts with its last
checkpoint); ``budgets`` is every seed's accuracy at every budget from a step on.
The chapter defines the same two and asserts the same statements.
"""

import pytest
from chapters import ROOT

from posenc import ExperimentConfig, load_experiments

DATA = ROOT / "posenc_book" / "data"
ENCODINGS = ["sinusoidal", "learned", "shaw", "t5", "alibi", "rope", "rope_pi"]


class Saved:
    def __init__(self) -> None:
        document = load_experiments(DATA / "experiments.json")
        self.config = ExperimentConfig.from_dict(document["config"])
        self.runs = {(r["task"], r["scheme"], r["seed"]): r for r in document["runs"]}

    def _index(self, m: int) -> int:
        return self.config.multipliers.index(m)

    def state(self, task, name, m, step):
        values = []
        for seed in self.config.seeds:
            reached = [c for c in self.runs[task, name, seed]["checkpoints"] if c["step"] <= step]
            values.append(reached[-1]["evaluations"][self._index(m)]["accuracy"])
        return values

    def budgets(self, task, name, m, start=0):
        return [a for step in self.config.evaluation_steps if step >= start for a in self.state(task, name, m, step)]

    def final(self, task, name, m):
        return self.state(task, name, m, self.config.steps)

    def converged(self, task, name):
        return [self.runs[task, name, s]["converged_at"] for s in self.config.seeds]


@pytest.fixture(scope="module")
def saved():
    return Saved()


def test_the_recorded_experiment_trains_to_convergence_or_8000_steps(saved):
    config = saved.config
    assert config.schedule == "constant" and config.steps == 8000 and config.converged_loss == 0.01
    assert config.checkpoints == (250, 500, 1000, 2000, 4000) and len(config.seeds) >= 3
    assert len(saved.runs) == len(config.schemes) * len(config.tasks) * len(config.seeds)
    for run in saved.runs.values():
        steps = [c["step"] for c in run["checkpoints"]]
        if run["converged_at"] is None:
            assert run["steps_trained"] == 8000 and steps == list(config.evaluation_steps)
        elif run["converged_at"] == 8000:  # at the last budget: no control
            assert run["steps_trained"] == 8000
        else:  # one checkpoint after convergence, the control
            assert steps[-2] == run["converged_at"] and run["steps_trained"] == steps[-1]


def test_every_encoding_learns_shift_and_no_encoding_learns_it_slowly(saved):
    assert all(min(saved.budgets("shift", s, 1, 1000)) >= 0.98 for s in ENCODINGS)
    for step in saved.config.evaluation_steps:
        weakest = min(min(saved.state("shift", s, 1, step)) for s in ENCODINGS)
        assert max(saved.state("shift", "none", 1, step)) < weakest
    assert all(c is None for c in saved.converged("shift", "none"))
    assert min(saved.final("shift", "none", 1)) > max(saved.state("shift", "none", 1, 4000))


def test_every_encoding_that_converges_learns_lookup_at_its_own_speed(saved):
    assert all(c == 250 for s in ("sinusoidal", "learned") for c in saved.converged("lookup", s))
    assert all(c is not None and 1000 <= c <= 4000 for s in ("shaw", "rope") for c in saved.converged("lookup", s))
    assert all(min(saved.final("lookup", s, 1)) == 1.0 for s in ("sinusoidal", "learned", "shaw", "rope"))
    for name in ("t5", "alibi", "none"):
        assert not any(saved.converged("lookup", name))
        before, after = saved.state("lookup", name, 1, 4000), saved.final("lookup", name, 1)
        assert all(b > a for a, b in zip(before, after, strict=True))
    assert all(max(saved.state("lookup", s, 1, 250)) < 0.9 for s in ("t5", "alibi", "rope"))


def test_learned_runs_cannot_run_past_the_training_length(saved):
    for run in saved.runs.values():
        if run["scheme"] == "learned":
            for c in run["checkpoints"]:
                assert [e["status"] for e in c["evaluations"]] == ["ok", "cannot run", "cannot run"]


def test_sinusoidal_positions_do_not_extrapolate(saved):
    for m, n in ((2, 32), (4, 64)):
        answered, known = n - 2, 16 - 2
        predicted = known / answered + (answered - known) / answered / 16
        assert all(abs(a - predicted) < 0.03 for a in saved.budgets("shift", "sinusoidal", m))


def test_shift_at_four_times_the_training_length(saved):
    strong = ("rope", "shaw", "alibi")
    assert all(min(saved.final("shift", s, 4)) >= 0.9 for s in strong)
    assert max(saved.final("shift", "t5", 4)) < min(min(saved.final("shift", s, 4)) for s in strong)
    assert min(saved.final("shift", "t5", 4)) > max(saved.final("shift", "sinusoidal", 4))


def test_position_interpolation_without_fine_tuning_breaks_shift(saved):
    for (task, name, seed), run in saved.runs.items():
        if name == "rope":
            pi = saved.runs[task, "rope_pi", seed]
            assert run["losses"] == pi["losses"]
            assert [c["evaluations"][0] for c in run["checkpoints"]] == [c["evaluations"][0] for c in pi["checkpoints"]]
    for m in (2, 4):
        assert max(saved.budgets("shift", "rope_pi", m)) < 0.12
        assert min(saved.budgets("shift", "rope", m)) >= 0.99


def test_nobody_reaches_the_lookup_ceiling_and_shaw_comes_closest(saved):
    for m, n in ((2, 32), (4, 64)):
        ceiling = 16 / n + (1 - 16 / n) / 16
        assert all(max(saved.budgets("lookup", s, m)) <= ceiling for s in saved.config.schemes if s != "learned")
        assert all(ceiling - a < 0.1 for a in saved.final("lookup", "shaw", m))
        assert max(saved.budgets("lookup", "rope", m)) < 0.17
