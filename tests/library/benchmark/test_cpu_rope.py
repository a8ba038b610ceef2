"""The CPU rotation cases of the benchmark: each beside a copy and a clone of the same run, saved and read back.

Tiny shapes and very short runs: these tests check that the cases are built, checked, timed and
recorded with their ratios, never how fast anything is (timings are data, not assertions).
"""

import json
import math

import pytest
import torch

from posenc import benchmark as bench
from posenc.benchmark import cpu_rope
from posenc.benchmark.results import record_line

TINY = [
    cpu_rope.CpuRopeShape(seq_len=6, q_heads=4, kv_heads=2, head_dim=16, threads=1),
    cpu_rope.CpuRopeShape(seq_len=1, q_heads=4, kv_heads=2, head_dim=16, offset=300, threads=2),
]
FAST = {"run_s": 0.002, "copy_bytes": 2**20}


@pytest.fixture(scope="module")
def tiny_result():
    return bench.run_benchmark("cpu", ops=("rope_cpu",), cpu_rope_shapes=TINY, **FAST)


def test_default_shapes_are_the_issue_cases():
    shapes = cpu_rope.default_cpu_rope_shapes()
    found = {(s.phase, s.seq_len, s.offset, s.threads) for s in shapes}
    cases = (("prefill", 512, 0), ("prefill", 2048, 0), ("decode", 1, 4095))
    assert found == {(phase, s, offset, t) for t in (1, 2) for phase, s, offset in cases}
    assert {(s.batch, s.q_heads, s.kv_heads, s.head_dim) for s in shapes} == {(1, 32, 8, 128)}
    assert {(s.seq_len, s.threads) for s in cpu_rope.default_cpu_rope_shapes(quick=True)} == {(512, 1), (1, 1)}


def test_every_case_is_checked_timed_and_given_its_ratios(tiny_result):
    records = tiny_result["results"]
    by_default = [impl for impl in cpu_rope.CPU_ROPE_IMPLS if not impl.optional]
    assert {r["op"] for r in records} == {"rope_cpu"} and len(records) == len(TINY) * len(by_default)
    assert all(r["status"] == "ok" and r["dtype"] == "float32" for r in records), [r["reason"] for r in records]
    for r in records:
        assert 0 <= r["rel_err"] < bench.TOLERANCE[torch.float32]
        assert r["vs_copy"] == pytest.approx(r["ms"] / r["copy_ms"])
        assert r["vs_clone"] == pytest.approx(r["ms"] / r["clone_ms"])
        assert r["ceiling"] == ("clone" if r["writes"] == "new" else "copy")
        assert r["vs_ceiling"] == r["vs_" + r["ceiling"]]
    by_impl = {(r["impl"], r["threads"]): r for r in records}
    assert by_impl["copy", 1]["vs_copy"] == 1.0 and by_impl["clone", 2]["vs_clone"] == 1.0
    assert {r["writes"] for r in records if r["impl"].endswith("inplace")} == {"inplace"}
    assert by_impl["posenc_cpu_out", 2]["ceiling"] == "copy" and by_impl["transformers", 1]["ceiling"] == "clone"
    assert tiny_result["device"]["type"] == "cpu" and tiny_result["device"]["name"]
    json.dumps(tiny_result, allow_nan=False)  # plain JSON


def test_the_thread_count_is_set_per_case_and_restored(monkeypatch):
    seen = []
    real = bench.run.run_case

    def spy(case, **kwargs):
        seen.append((case.fields["threads"], torch.get_num_threads()))
        return real(case, **kwargs)

    monkeypatch.setattr(bench.run, "run_case", spy)
    before = torch.get_num_threads()
    bench.run_benchmark("cpu", ops=("rope_cpu",), cpu_rope_shapes=TINY[1:], **FAST)
    assert seen and all(wanted == got for wanted, got in seen) and torch.get_num_threads() == before


def test_a_missing_ceiling_leaves_the_ratio_empty():
    record = {"op": "rope_cpu", "impl": "posenc_cpu_out", "writes": "out", "ms": 2.0, "seq_len": 4, "threads": 1}
    ceiling = dict(record, impl="copy", ms=1.0)
    cpu_rope.add_ceiling_ratios([record, ceiling])
    assert record["vs_copy"] == 2.0 and record["vs_clone"] is None and record["vs_ceiling"] == 2.0
    lone = dict(record, seq_len=5)
    cpu_rope.add_ceiling_ratios([lone])
    assert lone["vs_ceiling"] is None and lone["ceiling"] == "copy"


def test_cases_refuse_unknown_names_and_keep_the_ceilings():
    with pytest.raises(ValueError, match=r"impls must be one of 'copy', 'clone', .*; got 'fast'"):
        cpu_rope.cpu_rope_cases(TINY, ["fast"])
    with pytest.raises(ValueError, match=r"threads must be >= 1, got 0"):
        cpu_rope.cpu_rope_cases([cpu_rope.CpuRopeShape(threads=0)])
    names = [case.impl for case in cpu_rope.cpu_rope_cases(TINY[:1], ["transformers"])]
    assert names == ["copy", "clone", "transformers"]


def test_the_compiled_formula_runs_only_when_named_and_outside_the_poisoning_mode():
    """torch.compile of the formula compiles for seconds per case: the chapter's live run leaves
    it out, a recording names it (--cpu-impl); compiled code cannot run under a dispatch mode."""
    default = [case.impl for case in cpu_rope.cpu_rope_cases(TINY[:1])]
    assert "compile" not in default and "posenc_auto" in default
    assert [case.impl for case in cpu_rope.cpu_rope_cases(TINY[:1], ["compile"])] == ["copy", "clone", "compile"]
    (compiled,) = [impl for impl in cpu_rope.CPU_ROPE_IMPLS if impl.name == "compile"]
    assert compiled.optional and not compiled.traceable and compiled.writes == "new"


def test_recorded_and_live_side_by_side(tiny_result, tmp_path):
    path = bench.save_results(tiny_result, bench.default_path(tiny_result, tmp_path))
    assert path.name.startswith("cpu_rope_")
    (tmp_path / "cpu_other.json").write_text(json.dumps(dict(tiny_result, results=[])))  # no CPU rotation records
    recorded = cpu_rope.load_cpu_results(tmp_path)
    assert [r["path"] for r in recorded] == [str(path)]
    lines = cpu_rope.cpu_rope_table(recorded[0], tiny_result).splitlines()
    assert lines[0].startswith("recorded: ") and lines[1].startswith("live: ")
    assert "recorded ms" in lines[2] and "live ms" in lines[2]
    assert len(lines) == 3 + len(tiny_result["results"])
    row = next(line for line in lines if "posenc_cpu_out" in line and line.split()[0] == "decode")
    assert row.split()[1:3] == ["1", "2"]
    only_live = cpu_rope.cpu_rope_table(None, tiny_result).splitlines()
    assert only_live[0].startswith("live: ") and only_live[2].split()[4:7] == ["-", "-", "-"]


def test_the_summary_line_shows_threads_and_the_ratio(tiny_result):
    line = next(record_line(r) for r in tiny_result["results"] if r["impl"] == "posenc_cpu_inplace")
    assert " thread" in line and " x copy" in line
    assert math.isfinite(float(line.split(" x copy")[0].split()[-1]))


def test_the_recorded_cpu_run_covers_every_case():
    """What the chapter reads: a run of ``python -m posenc.benchmark --device cpu`` in posenc_book/data."""
    from repo import ROOT

    recorded = cpu_rope.load_cpu_results(ROOT / "posenc_book" / "data")
    assert recorded, "no recorded CPU run with rope_cpu records in posenc_book/data"
    result = recorded[-1]
    assert result["device"]["type"] == "cpu" and result["device"]["name"] and result["synthetic"] is False
    found = {(r["phase"], r["seq_len"], r["threads"], r["impl"]) for r in result["results"] if r["status"] == "ok"}
    wanted = {
        (s.phase, s.seq_len, s.threads, impl)
        for s in cpu_rope.default_cpu_rope_shapes()
        for impl in cpu_rope.CPU_ROPE_IMPL_NAMES
    }
    assert wanted <= found
    assert all(r["vs_ceiling"] is not None for r in result["results"] if r["op"] == "rope_cpu")
