"""The findings of the experiments chapter, asserted again on the saved results, on every seed and budget.

``state(task, scheme, m, step)`` is the accuracy per seed that a budget of ``step``
steps leaves (a run that converged and stopped earlier counts with its last
checkpoint); ``budgets`` is every seed's accuracy at every budget from a step on: at the
trained length a converged run keeps its last value, on longer inputs only the budgets
its run reached count (a stopped run is not credited with budgets it never trained for).
The chapter defines the same two and asserts the same statements.
"""

import pytest
import torch
from repo import ROOT

from posenc.experiments import Accuracies, ExperimentConfig, load_experiments

DATA = ROOT / "posenc_book" / "data"
ENCODINGS = ["sinusoidal", "learned", "shaw", "t5", "alibi", "rope", "rope_pi"]


class Saved:
    def __init__(self) -> None:
        document = load_experiments(DATA / "experiments.json")
        self.config = ExperimentConfig.from_dict(document["config"])
        self.runs = {(r["task"], r["scheme"], r["seed"]): r for r in document["runs"]}
        accuracies = Accuracies(document)
        self.state, self.final = accuracies.after, accuracies.final
        self._checkpoints = accuracies.checkpoints

    def budgets(self, task, name, m, start=0):
        if m == 1:
            return [
                a for step in self.config.evaluation_steps if step >= start for a in self.state(task, name, m, step)
            ]
        return self._checkpoints(task, name, m, since=start)

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


@pytest.mark.claim("002-29")
def test_every_encoding_learns_shift_and_no_encoding_learns_it_slowly(saved):
    assert all(min(saved.budgets("shift", s, 1, 1000)) >= 0.98 for s in ENCODINGS)
    for step in saved.config.evaluation_steps:
        weakest = min(min(saved.state("shift", s, 1, step)) for s in ENCODINGS)
        assert max(saved.state("shift", "none", 1, step)) < weakest
    assert all(c is None for c in saved.converged("shift", "none"))
    assert min(saved.final("shift", "none", 1)) > max(saved.state("shift", "none", 1, 4000))


@pytest.mark.claim("002-34")
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


@pytest.mark.claim("004-04", "004-09")
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
    # the chapter's "at most 0.11 at any checkpoint"
    assert f"{max(max(saved.budgets('lookup', 'rope', m)) for m in (2, 4)):.2f}" == "0.11"


# --- the real-text experiment ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def text():
    from posenc.experiments import load_text_results, text_summary

    document = load_text_results(DATA / "text_lm.json")
    steps = [*document["config"]["checkpoints"], document["config"]["steps"]]
    summaries = {step: text_summary(document, step) for step in steps}
    return document, summaries


def _bits(text, name, n, step):
    return text[1][step][name, n]["values"]


def test_the_recorded_text_experiment(text):
    document, summaries = text
    config = document["config"]
    assert config["multipliers"] == [1, 2, 4, 8] and config["train_length"] == 64 and len(config["seeds"]) >= 3
    assert document["corpus"]["train_chars"] == 2_000_000 and config["eval_chars"] == 65_536
    assert len(summaries) == 3
    trained = {(r["scheme"], r["seed"]): r["trained_as"] for r in document["runs"]}
    assert all(trained["rope_pi", s] == "rope" for s in config["seeds"])


def test_at_the_training_length_every_encoding_helps_and_shaw_most(text):
    schemes = text[0]["config"]["schemes"]
    encodings = [s for s in schemes if s != "none"]
    for step in text[1]:
        none = _bits(text, "none", 64, step)
        assert max(b for s in encodings for b in _bits(text, s, 64, step)) < min(none) and min(none) > 3
        assert max(_bits(text, "shaw", 64, step)) < min(
            b for s in encodings if s != "shaw" for b in _bits(text, s, 64, step)
        )
        if step >= 1000:
            rest = [b for s in encodings if s != "alibi" for b in _bits(text, s, 64, step)]
            assert min(_bits(text, "alibi", 64, step)) > max(rest)


@pytest.mark.claim("002-25", "004-24")
def test_on_longer_text_alibi_and_shaw_hold_and_sinusoidal_is_worst(text):
    schemes = text[0]["config"]["schemes"]
    for step in text[1]:

        def change(name, step=step):
            return [b - a for a, b in zip(_bits(text, name, 64, step), _bits(text, name, 512, step), strict=True)]

        assert max(abs(c) for c in change("alibi")) < 0.05
        assert max(abs(c) for c in change("shaw")) < 0.05
        assert 0.5 < min(change("t5")) and max(change("t5")) < min(change("rope"))
        assert min(change("rope")) > 1.5 and min(change("sinusoidal")) > 1.9
        others = [b for s in schemes if s not in ("sinusoidal", "learned") for b in _bits(text, s, 512, step)]
        assert min(_bits(text, "sinusoidal", 512, step)) > max(others)
        assert all(v is None for v in _bits(text, "learned", 128, step))
    # the chapter's ranges at the last checkpoint, to one decimal
    last = max(text[1])
    for name, stated in {"t5": "1.1 1.4", "rope": "2.1 2.4", "sinusoidal": "2.7 3.7"}.items():
        moved = [b - a for a, b in zip(_bits(text, name, 64, last), _bits(text, name, 512, last), strict=True)]
        assert f"{min(moved):.1f} {max(moved):.1f}" == stated, (name, moved)


def test_interpolation_without_fine_tuning_does_not_help_the_language_model(text):
    for step in text[1]:
        for n in (128, 256):
            pairs = zip(_bits(text, "rope", n, step), _bits(text, "rope_pi", n, step), strict=True)
            assert all(pi > rope for rope, pi in pairs)
        assert max(_bits(text, "none", 512, step)) < min(_bits(text, "rope", 512, step))
        assert max(_bits(text, "none", 512, step)) < min(_bits(text, "sinusoidal", 512, step))


def test_no_encoding_beats_sinusoidal_on_shift_from_500_steps_and_trails_the_relative_schemes(saved):
    for step in saved.config.evaluation_steps:
        if step >= 500:
            assert min(saved.state("shift", "none", 4, step)) > max(saved.state("shift", "sinusoidal", 4, step))
    for name in ("alibi", "shaw", "rope"):
        assert max(saved.final("shift", "none", 4)) < min(saved.final("shift", name, 4))


# --- per-layer patterns (chapter 9): Llama 4's layers without positions, Gemma 3's local and global layers ---


def test_layer_patterns_change_nothing_on_the_synthetic_tasks():
    document = load_experiments(DATA / "layered_experiments.json")
    config = ExperimentConfig.from_dict(document["config"])
    assert config.num_layers == 4 and config.schemes == ("rope", "irope", "local_global")
    final = {(r["task"], r["scheme"]): [] for r in document["runs"]}
    for r in document["runs"]:
        final[r["task"], r["scheme"]].append([e["accuracy"] for e in r["evaluations"]])
    for name in config.schemes:
        assert min(acc[2] for acc in final["shift", name]) >= 0.99
        assert min(acc[0] for acc in final["lookup", name]) == 1.0
        assert max(max(acc[1:]) for acc in final["lookup", name]) < 0.12


def test_local_and_global_layers_extrapolate_on_text_and_nope_layers_do_not():
    from posenc.experiments import load_text_results, text_summary

    document = load_text_results(DATA / "layered_text_lm.json")
    config = document["config"]
    lengths = [config["train_length"] * m for m in config["multipliers"]]
    for step in [*config["checkpoints"], config["steps"]]:
        rows = text_summary(document, step)

        def overlap(a, b, rows=rows):
            return min(rows[a]["values"]) <= max(rows[b]["values"]) and min(rows[b]["values"]) <= max(rows[a]["values"])

        assert all(overlap(("irope", n), ("rope", n)) for n in lengths)
        assert overlap(("local_global", 64), ("rope", 64))
        assert all(rows["local_global", n]["max"] < rows["rope", n]["min"] for n in lengths[1:])
    final = text_summary(document)
    lost = {
        s: [b - a for a, b in zip(final[s, 64]["values"], final[s, 512]["values"], strict=True)]
        for s in ("rope", "irope", "local_global")
    }
    assert max(lost["local_global"]) < 1 / 3 and min(lost["rope"]) > 2 and min(lost["irope"]) > 2
    # the global layer's base does not keep its angles within training's: head dimension 16, base 10^6
    from posenc import rope_inv_freq

    theta, _ = rope_inv_freq(config["dim"] // config["num_heads"], base=1e6, dtype=torch.float64)
    assert [round(n * theta[2].item(), 1) for n in (63, 511)] == [2.0, 16.2]


# --- the frontier schemes on passkey and count (chapter 15): FIRE, CoPE, RoPE with PoSE, Command R7B's layers ---


def _count_bars(n: int, cap: int = 7, p: float = 0.25) -> tuple[float, float]:
    """Accuracy over n positions of answering the cap everywhere, and of the commonest count per position."""
    from math import comb

    cap_share = by_position = 0.0
    for i in range(n):
        probs = [0.0] * (cap + 1)
        for k in range(i + 1):
            probs[min(k, cap)] += comb(i, k) * p**k * (1 - p) ** (i - k)
        cap_share, by_position = cap_share + probs[-1] / n, by_position + max(probs) / n
    return cap_share, by_position


@pytest.fixture(scope="module")
def frontier():
    document = load_experiments(DATA / "frontier_experiments.json")
    config = ExperimentConfig.from_dict(document["config"])
    runs = {(r["task"], r["scheme"], r["seed"]): r for r in document["runs"]}
    return config, runs, Accuracies(document)


def _reached(frontier, task, name, m):
    return frontier[2].checkpoints(task, name, m)


def _final(frontier, task, name, m):
    return frontier[2].final(task, name, m)


def test_the_frontier_experiment_covers_twelve_schemes_two_tasks_three_seeds(frontier):
    config, runs, _ = frontier
    assert config.tasks == ("passkey", "count") and config.seeds == (0, 1, 2) and config.multipliers == (1, 2, 4)
    assert config.schemes[-4:] == ("fire", "cope", "rope_nope", "rope_pose") and len(config.schemes) == 12
    assert config.steps == 1000 and config.checkpoints == (250, 500) and config.converged_loss == 0.01
    assert len(runs) == 12 * 2 * 3


def test_the_designs_that_meet_no_new_distance_keep_the_passkey_at_four_times_the_length(frontier):
    config, _, _ = frontier
    assert all(min(_final(frontier, "passkey", s, 1)) >= 0.99 for s in config.schemes)
    for name in ("alibi", "rope_nope", "rope_pose"):
        assert min(_reached(frontier, "passkey", name, 4)) >= 0.98
    for name in ("fire", "shaw", "cope"):
        assert min(_reached(frontier, "passkey", name, 4)) >= 0.72
    plain = _reached(frontier, "passkey", "rope", 4) + _reached(frontier, "passkey", "sinusoidal", 4)
    assert max(plain) <= 0.36 < 0.41 <= min(_reached(frontier, "passkey", "none", 4))
    assert min(_reached(frontier, "passkey", "rope_pi", 4)) > max(_reached(frontier, "passkey", "rope", 4))


def test_no_scheme_counts_beyond_the_trained_length(frontier):
    config, runs, _ = frontier
    always_cap, by_position = _count_bars(64)
    assert round(always_cap, 2) == 0.56 and round(by_position, 2) == 0.67
    assert round(1 / _count_bars(16)[0]) in range(100, 120)  # a 7 is rare in training
    running = [s for s in config.schemes if s != "learned"]
    assert max(a for s in running for a in _reached(frontier, "count", s, 4)) < by_position
    assert sum(max(_reached(frontier, "count", s, 4)) < always_cap for s in running) > len(running) / 2
    assert max(_reached(frontier, "count", "rope_pi", 4)) < 1 / 8
    assert all(runs["count", s, seed]["converged_at"] is None for s in config.schemes for seed in config.seeds)


def test_the_count_bars_are_those_of_sampled_inputs():
    from posenc.experiments import make_task

    targets = make_task("count").sample(20_000, 64, torch.Generator().manual_seed(3)).targets
    always_cap, _ = _count_bars(64)
    assert abs((targets == 7).double().mean().item() - always_cap) < 0.01
