"""The benchmark harness: the bytes model, traffic counting, check-before-time, files and figures.

Nothing here asserts a timing: measured times are data, not facts about the code. The harness
runs on the CPU (its fallback) with tiny shapes; the loading and plotting code is tested on a
synthetic fixture under tests/fixtures/, whose numbers are made up. The figures are the book's
(posenc_book.benchmark_plots); the command line is posenc.benchmark.__main__.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest
import torch
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from repo import FIXTURES  # noqa: E402

import posenc  # noqa: E402
from posenc import (  # noqa: E402
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    apply_rope,
    rope_cos_sin,
    rope_inv_freq,
)
from posenc import benchmark as bench  # noqa: E402
from posenc.benchmark import __main__ as cli  # noqa: E402
from posenc.benchmark import count_traffic, load_results, rope_bytes, rope_reference, run_benchmark  # noqa: E402
from posenc_book.benchmark_plots import plot_results  # noqa: E402

BF16 = torch.bfloat16
TINY = [bench.RopeShape(1, 5, 4, 2, 16), bench.RopeShape(2, 1, 4, 2, 16, offset=300)]
FAST = {"run_s": 0.002, "copy_bytes": 2**20}


# ---------------------------------------------------------------------------
# The bytes model
# ---------------------------------------------------------------------------


def test_bytes_model_by_hand():
    # q: 1 x 512 x 32 x 128 and k: 1 x 512 x 8 x 128 bf16, each read once and written once.
    assert rope_bytes(1, 512, 32, 8, 128, dtype=BF16) == 2 * (512 * 32 * 128 + 512 * 8 * 128) * 2 == 10_485_760
    assert rope_bytes(4, 16384, 32, 8, 128) == 4 * 16384 * 40 * 128 * 2 * 2  # 1.34 GB a call
    assert rope_bytes(1, 1, 1, 1, 2, dtype=torch.float32) == 2 * (2 + 2) * 4
    # x [2, 3, 4] float32 read and written, and 3 table rows of 4 read.
    assert bench.sinusoidal_add_bytes(2, 3, 4, torch.float32) == (2 * 24 + 12) * 4
    assert bench.alibi_bias_bytes(2, 3, 5, BF16) == 2 * 3 * 5 * 2


def test_bytes_model_refuses_bad_counts():
    with pytest.raises(ValueError, match=r"batch must be >= 1, got 0"):
        rope_bytes(0, 4, 1, 1, 2)
    with pytest.raises(ValueError, match=r"kv_heads must be an int >= 1, got 1.5"):
        rope_bytes(1, 4, 1, 1.5, 2)
    with pytest.raises(ValueError, match=r"dim must be >= 1, got -3"):
        bench.sinusoidal_add_bytes(1, 4, -3)
    with pytest.raises(ValueError, match=r"k_len must be >= 1, got 0"):
        bench.alibi_bias_bytes(1, 4, 0)


# ---------------------------------------------------------------------------
# Traffic of eager code, op by op
# ---------------------------------------------------------------------------


def test_traffic_of_simple_ops():
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    _, ops = count_traffic(torch.add, x, y)
    assert [(o.op, o.read, o.written) for o in ops] == [("aten.add", 2 * 128, 128)]
    _, ops = count_traffic(lambda a: a.t().unsqueeze(0)[..., :2], x)  # views only
    assert ops == []
    _, ops = count_traffic(lambda a, row: a + row.expand(4, 8), x, torch.randn(8))  # a broadcast row is 8 values
    assert [(o.read, o.written) for o in ops] == [(128 + 32, 128)]
    dst = torch.empty(4, 8)
    _, ops = count_traffic(dst.copy_, x)
    assert [(o.op, o.read, o.written) for o in ops] == [("aten.copy_", 128, 128)]


def test_eager_rope_moves_five_times_the_minimum():
    """x * cos + rotate(x) * sin, op by op: mul, neg, cat, mul, add read and write 10 copies of x."""
    b, h, s, d = 1, 2, 3, 8
    x = torch.randn(b, h, s, d)
    n = x.numel() * 4
    cos, sin = rope_cos_sin(torch.arange(s), d)  # [s, d] float32
    table = cos.numel() * 4
    _, ops = count_traffic(apply_rope, x, cos, sin, backend="torch")
    assert [o.op for o in ops] == ["aten.mul", "aten.neg", "aten.cat", "aten.mul", "aten.add"]
    assert sum(o.read + o.written for o in ops) == 10 * n + 2 * table
    # transformers' apply_rotary_pos_emb does the same five operations for q and for k.
    q, k = torch.randn(b, 4, s, d), torch.randn(b, 2, s, d)
    _, ops = count_traffic(apply_rotary_pos_emb, q, k, cos[None], sin[None])
    moved = sum(o.read + o.written for o in ops)
    assert len(ops) == 10 and moved == 10 * (q.numel() + k.numel()) * 4 + 4 * table
    minimum = rope_bytes(b, s, 4, 2, d, dtype=torch.float32)
    assert 5 < moved / minimum < 5.5


@pytest.mark.claim("001-11")
def test_sinusoidal_and_learned_modules_move_the_same_bytes():
    """Seed 001 credits the sinusoidal design with efficiency; at run time both are a table read and an add."""
    x = torch.randn(2, 5, 16).to(BF16)
    _, fixed = count_traffic(SinusoidalPositionalEncoding(16).eval(), x)
    with torch.no_grad():
        _, learned = count_traffic(LearnedPositionalEmbedding(32, 16).eval(), x)
    assert fixed == learned
    assert sum(o.read + o.written for o in fixed) >= bench.sinusoidal_add_bytes(2, 5, 16, BF16)


# ---------------------------------------------------------------------------
# Check before timing
# ---------------------------------------------------------------------------


def test_relative_error_and_what_it_refuses():
    ref = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert bench.relative_error([ref.float()], [ref]) == 0.0
    assert bench.relative_error([torch.tensor([3.0, 4.5])], [ref]) == pytest.approx(0.1)
    assert math.isnan(bench.relative_error([torch.tensor([3.0, float("nan")])], [ref]))
    masked = torch.tensor([1.0, float("-inf")], dtype=torch.float64)
    assert bench.relative_error([masked.to(BF16)], [masked]) == 0.0
    assert math.isnan(bench.relative_error([torch.tensor([1.0, 0.0])], [masked]))  # a mask entry lost


def test_poisoned_allocations_fill_uninitialised_floats_with_nan():
    with bench.poisoned_allocations():
        floats = [
            torch.empty(3),
            torch.empty_like(torch.ones(2, 2, dtype=BF16)),
            torch.ones(2).new_empty(4),
            torch.empty_strided((2, 2), (1, 2)),
        ]
        ints = torch.empty(3, dtype=torch.long)
        filled = torch.zeros(3)
    assert all(torch.isnan(t).all() for t in floats) and floats[1].dtype == BF16
    assert ints.dtype == torch.long and torch.equal(filled, torch.zeros(3))  # only uninitialised floats


def test_cpu_run_checks_then_times_every_available_implementation(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # CPU tensors and no interpreter: no Triton kernel
    lines = []
    result = run_benchmark(
        "cpu",
        ops=("rope", "sinusoidal", "alibi"),
        rope_shapes=TINY,
        impls=["naive", "posenc_torch", "transformers", "posenc_triton", "liger"],
        sinusoidal_cases=[(1, 6, 8)],
        alibi_cases=[(3, 4, 4), (3, 1, 7)],
        progress=lines.append,
        **FAST,
    )
    assert result["schema"] == bench.SCHEMA and result["synthetic"] is False
    assert result["device"]["type"] == "cpu" and result["dtype"] == "float32"
    assert result["versions"]["torch"] == torch.__version__ and result["date"][:2] == "20"
    assert result["copy"]["bytes"] == 2 * 2**20
    by_status = {}
    for r in result["results"]:
        by_status.setdefault(r["status"], []).append(r)
    assert {r["impl"] for r in by_status["unavailable"]} == {"posenc_triton", "liger"}
    assert all(r["reason"] == "needs a CUDA device" for r in by_status["unavailable"])
    assert "failed" not in by_status
    ok = by_status["ok"]
    assert len(ok) == 2 * 3 + 2 + 2
    for r in ok:
        assert 0 <= r["rel_err"] < bench.TOLERANCE[torch.float32]
        assert r["ms_q25"] <= r["ms"] <= r["ms_q75"] and r["runs"] >= 1
        assert r["gbps"] == pytest.approx(r["bytes"] / r["ms"] / 1e6)
        assert r["copy_fraction"] == pytest.approx(r["gbps"] / result["copy"]["gbps"])
    decode = [r for r in ok if r["op"] == "rope" and r["phase"] == "decode"]
    assert len(decode) == 3 and all(r["offset"] == 300 and r["batch"] == 2 for r in decode)
    assert len(lines) == 1 + len(result["results"])  # the copy, then one line per record
    json.dumps(result, allow_nan=False)  # plain JSON


def test_in_tritons_interpreter_the_kernel_is_checked_and_timed_on_the_cpu(monkeypatch):
    """How scripts/gpu_record.py --dry-run exercises the GPU implementations without a GPU."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    result = run_benchmark("cpu", ops=("rope",), rope_shapes=TINY[:1], impls=["posenc_triton"], **FAST)
    assert [r["status"] for r in result["results"]] == ["ok"]
    assert result["results"][0]["rel_err"] < bench.TOLERANCE[torch.float32]


def test_a_wrong_or_incomplete_implementation_is_reported_and_not_timed():
    def leaves_one_element(q, k):
        q_out = torch.empty(q.shape)  # the harness fills it with NaN
        good = bench.rope_impl("posenc_torch").build(TINY[0], "cpu", torch.float32)(q, k)
        q_out.view(-1)[:-1] = good[0].reshape(-1)[:-1]
        return q_out, good[1]

    def turns_backwards(q, k):
        cos, sin = rope_cos_sin(torch.arange(q.shape[-2]), q.shape[-1])
        return apply_rope(q, cos, -sin), apply_rope(k, cos, -sin)

    def crashes(q, k):
        raise RuntimeError("kernel exploded")

    impls = [
        bench.RopeImpl(name, name, False, lambda shape, device, dtype, fn=fn: fn)
        for name, fn in (("incomplete", leaves_one_element), ("backwards", turns_backwards), ("crash", crashes))
    ]
    result = run_benchmark("cpu", ops=("rope",), rope_shapes=TINY[:1], impls=impls, **FAST)
    records = {r["impl"]: r for r in result["results"]}
    assert all(r["status"] == "failed" and r["ms"] is None for r in records.values())
    assert records["incomplete"]["rel_err"] is None and "relative error nan" in records["incomplete"]["reason"]
    assert records["backwards"]["rel_err"] > 0.1 and "against float64" in records["backwards"]["reason"]
    assert records["crash"]["reason"] == "RuntimeError: kernel exploded"


def test_run_benchmark_refuses_bad_arguments():
    with pytest.raises(ValueError, match=r"ops must be one of 'rope', 'sinusoidal', 'alibi', 'rope_cpu'; got 'lea"):
        run_benchmark("cpu", ops=("rope", "learned"))
    with pytest.raises(ValueError, match=r"impls must be one of 'naive', .*; got 'flash'"):
        run_benchmark("cpu", impls=["flash"])
    with pytest.raises(ValueError, match=r"dtype must be torch.float32, torch.float16 or torch.bfloat16, got .*64"):
        run_benchmark("cpu", dtype=torch.float64)
    with pytest.raises(ValueError, match=r"device_type must be one of 'cuda', 'cpu'; got 'mps'"):
        bench.default_rope_shapes("mps")


def test_default_shapes_are_the_llama_like_cases():
    gpu = bench.default_rope_shapes("cuda")
    prefill = {(s.batch, s.seq_len) for s in gpu if s.phase == "prefill"}
    assert prefill == {(b, s) for b in (1, 4) for s in (512, 4096, 16384)}
    assert {(s.batch, s.seq_len, s.offset) for s in gpu if s.phase == "decode"} == {(1, 1, 4095), (4, 1, 4095)}
    assert {(s.q_heads, s.kv_heads, s.head_dim) for s in gpu} == {(32, 8, 128)}


# ---------------------------------------------------------------------------
# Files, tables and figures (on the synthetic fixture)
# ---------------------------------------------------------------------------


def test_load_the_synthetic_fixture():
    results = load_results(FIXTURES)
    assert len(results) == 1
    result = results[0]
    assert result["synthetic"] is True and "made up" in result["note"]
    assert result["path"].endswith("gpu_rope_synthetic_fixture.json")
    label = bench.result_label(result)
    assert label.startswith("SYNTHETIC TEST DATA") and "torch 0.0.0-fixture" in label and "2000-01-01" in label
    assert load_results(FIXTURES, pattern="nothing_*.json") == []


def test_save_and_load_round_trip(tmp_path):
    result = load_results(FIXTURES)[0]
    del result["path"]
    path = bench.save_results(result, tmp_path / "deeper" / "gpu_rope_x.json")
    assert load_results(tmp_path / "deeper")[0]["results"] == result["results"]
    assert path.read_text().startswith("{")


def test_load_refuses_files_that_are_not_results(tmp_path):
    (tmp_path / "gpu_other.json").write_text(json.dumps({"schema": "something else", "results": []}))
    with pytest.raises(ValueError, match=r"is not a posenc benchmark result: schema 'something else'"):
        load_results(tmp_path)


def test_figures_are_labelled_with_device_versions_and_date():
    result = load_results(FIXTURES)[0]
    fig = plot_results(result)
    axes = fig.axes
    assert len(axes) == 4
    assert "SYNTHETIC FIXTURE GPU" in fig._suptitle.get_text() and "triton 0.0.0-fixture" in fig._suptitle.get_text()
    times = axes[0]
    assert times.get_xlabel() == "sequence length" and "µs" in times.get_ylabel()
    assert "batch 1" in times.get_title() and "batch 4" in axes[1].get_title()
    labels = [line.get_label() for line in times.get_lines()]
    assert labels == ["transformers apply_rotary_pos_emb", "posenc Triton, fused", "bytes / copy bandwidth (floor)"]
    # The fixture's Triton line sits at 1.25 x the floor, by construction.
    triton_line, floor_line = times.get_lines()[1], times.get_lines()[2]
    assert list(triton_line.get_ydata() / floor_line.get_ydata()) == pytest.approx([1.25, 1.25])
    assert axes[2].get_xlabel() == "achieved GB/s / copy GB/s" and "4096" in axes[2].get_title()
    assert [t.get_text() for t in axes[2].get_yticklabels()] == ["transformers", "posenc_triton"]
    assert axes[3].get_xlabel() == "µs per call" and "decode" in axes[3].get_title()
    plt.close(fig)


def test_summary_table_lists_every_record():
    result = load_results(FIXTURES)[0]
    lines = bench.summary_table(result).splitlines()
    assert lines[0] == bench.result_label(result) and lines[1].startswith("copy ceiling: 1000.0 GB/s")
    assert len(lines) == 2 + len(result["results"])
    assert any("unavailable: liger-kernel is not installed" in line for line in lines)
    assert any("80.0% of copy" in line for line in lines)  # 1 / 1.25


def test_targets_are_read_off_the_results_not_asserted():
    result = load_results(FIXTURES)[0]
    rows = bench.rope_targets(result)
    assert [(r["batch"], r["seq_len"]) for r in rows] == [(1, 4096), (4, 4096)]
    for row in rows:  # the fixture's Triton line runs at 1 / 1.25 = 80% of the copy; Liger did not run
        assert row["copy_fraction"] == pytest.approx(0.8) and row["fraction_met"] is False
        assert row["rival_us"] is None and row["rival_met"] is None
    assert bench.rope_targets(result, fraction=0.75)[0]["fraction_met"] is True
    assert bench.rope_targets(result, impl="posenc_triton", rival="transformers")[0]["rival_met"] is True
    assert bench.rope_targets({"results": []}) == []


def test_default_path_names_the_device():
    result = {"device": {"type": "cuda", "name": "NVIDIA H100 80GB HBM3"}}
    assert bench.default_path(result) == Path("gpu_rope_nvidia_h100_80gb_hbm3.json")
    recorded = Path("posenc_book/data/gpu_rope_nvidia_h100_80gb_hbm3.json")
    assert bench.default_path(result, "posenc_book/data") == recorded
    assert (
        bench.default_path({"device": {"type": "cpu", "name": "AMD EPYC"}}, "out").as_posix()
        == "out/cpu_rope_amd_epyc.json"
    )


def test_command_line_writes_json_and_prints_the_table_last(tmp_path, monkeypatch, capsys):
    fixture = load_results(FIXTURES)[0]
    seen = {}

    def fake_run(device, **kwargs):
        seen.update(device=device, **kwargs)
        return fixture

    monkeypatch.setattr(cli, "run_benchmark", fake_run)
    out = tmp_path / "r.json"
    code = cli.main(["--device", "cpu", "--quick", "--ops", "rope", "--impl", "naive", "--out", str(out)])
    assert code == 1  # the fixture holds one failed check: nothing is written
    assert seen["device"] == torch.device("cpu") and seen["quick"] and seen["ops"] == ["rope"]
    assert seen["impls"] == ["naive"] and not out.exists()
    printed = capsys.readouterr().out.splitlines()
    assert (
        printed[0] == bench.result_label(fixture)
        and printed[-1] == f"not written: {out} (a result with failed checks is not saved)"
    )
    assert printed[-3] == "1 check(s) FAILED:" and "alibi" in printed[-2] and "relative error nan" in printed[-2]
    fixture["results"] = [r for r in fixture["results"] if r["status"] != "failed"]
    assert cli.main(["--device", "cpu", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["results"] == fixture["results"]
    assert capsys.readouterr().out.splitlines()[-1] == f"written: {out}"


def test_device_info_and_versions_on_the_cpu():
    info = bench.device_info("cpu")
    assert info["type"] == "cpu" and info["name"] and info["cache_bytes"] > 0 and info["threads"] >= 1
    v = bench.versions()
    assert v["torch"] == torch.__version__ and v["posenc"] == posenc.__version__ and "python" in v


# ---------------------------------------------------------------------------
# The float64 reference, the cases and the package's seams
# ---------------------------------------------------------------------------


def test_rope_reference_turns_each_pair_by_its_angle():
    q = torch.tensor([[1.0, 0.0, 0.0, 1.0]])  # [s=1, d=4]
    inv_freq = torch.tensor([math.pi / 2, math.pi], dtype=torch.float64)
    position = torch.tensor([1])
    # half: pairs (0, 2) = (1, 0) turned by pi/2 -> (0, 1), and (1, 3) = (0, 1) turned by pi -> (0, -1)
    half = rope_reference(q, inv_freq, position)
    assert half.dtype == torch.float64 and half.shape == (1, 4)
    assert torch.allclose(half, torch.tensor([[0.0, 0.0, 1.0, -1.0]], dtype=torch.float64), atol=1e-15)
    # interleaved: pairs (0, 1) = (1, 0) -> (0, 1), and (2, 3) = (0, 1) -> (0, -1)
    inter = rope_reference(q, inv_freq, position, layout="interleaved", attention_factor=2.0)
    assert torch.allclose(inter, torch.tensor([[0.0, 2.0, 0.0, -2.0]], dtype=torch.float64), atol=1e-15)
    # the same rotation as the library's float64 path, and float32 angles cost accuracy at large positions
    x = torch.randn(2, 3, 4, 64, dtype=torch.float64)
    positions = torch.arange(100_000, 100_004)
    cos, sin = rope_cos_sin(positions, 64, dtype=torch.float64)  # [4, 64], float64 angles
    exact = rope_reference(x, rope_inv_freq(64)[0], positions)
    assert torch.allclose(exact, apply_rope(x, cos, sin, backend="torch"), rtol=0, atol=1e-12)
    plain = rope_reference(x, rope_inv_freq(64)[0], positions, angle_dtype=torch.float32)
    assert plain.dtype == torch.float64 and (plain - exact).abs().max() > 1e-4
    with pytest.raises(ValueError, match=r"layout must be one of 'half', 'interleaved'; got 'concat'"):
        rope_reference(q, inv_freq, position, layout="concat")
    with pytest.raises(ValueError, match=r"angle_dtype must be torch.float32 or torch.float64"):
        rope_reference(q, inv_freq, position, angle_dtype=torch.float16)


def test_cases_of_each_operation_and_their_default_shapes():
    assert bench.default_sinusoidal_shapes("cuda") == [(b, s, 4096) for b in (1, 4) for s in (512, 4096, 16384)]
    assert bench.default_sinusoidal_shapes("cpu", quick=True) == [(1, 512, 1024), (1, 4096, 1024)]
    assert bench.default_alibi_shapes("cuda") == [(32, 512, 512), (32, 2048, 2048), (32, 4096, 4096), (32, 1, 4096)]
    assert bench.default_alibi_shapes("cpu") == [(32, 256, 256), (32, 1024, 1024), (32, 1, 1024)]
    rope = bench.rope_cases(TINY, bench.ROPE_IMPLS[:2], "cpu", torch.float32)
    assert [(c.impl, c.fields["seq_len"], c.fields["phase"], c.host) for c in rope] == [
        ("naive", 5, "prefill", False),
        ("posenc_torch", 5, "prefill", False),
        ("naive", 1, "decode", True),
        ("posenc_torch", 1, "decode", True),
    ]
    assert (
        rope[0].nbytes == rope_bytes(1, 5, 4, 2, 16, dtype=torch.float32) and rope[0].set_bytes == rope[0].nbytes // 2
    )
    sinusoidal = bench.sinusoidal_add_cases([(2, 3, 4)], "cpu", torch.float32)
    assert [c.impl for c in sinusoidal] == ["module", "recompute"] and sinusoidal[0].set_bytes == 2 * 3 * 4 * 4
    (alibi,) = bench.alibi_bias_cases([(2, 1, 5)], "cpu", torch.float32)
    assert alibi.fields == {"num_heads": 2, "q_len": 1, "k_len": 5, "phase": "decode"} and alibi.host
    assert bench.rope_impl("liger") is bench.ROPE_IMPLS[-1]
    with pytest.raises(ValueError, match=r"name must be one of 'naive', .*; got 'flash'"):
        bench.rope_impl("flash")


def test_run_case_times_only_what_passes_its_check():
    def never(*_):
        raise AssertionError("a case that fails its check must not be timed")

    good = bench.sinusoidal_add_cases([(1, 4, 8)], "cpu", torch.float32)[0]
    wrong = bench.Case(
        "sinusoidal",
        "wrong",
        "wrong",
        {"batch": 1},
        64,
        build=lambda: None,
        check=lambda fn: 0.5,
        make_set=never,
        set_bytes=4,
    )

    def missing():
        raise bench.Unavailable("not here")

    gone = bench.Case(
        "sinusoidal", "gone", "gone", {"batch": 1}, 64, build=missing, check=never, make_set=never, set_bytes=4
    )
    kwargs = {"device": "cpu", "dtype": torch.float32, "copy_gbps": 1.0, "run_s": 0.002}
    ok = bench.run_case(good, **kwargs)
    assert ok["status"] == "ok" and ok["ms"] > 0 and list(ok)[:4] == ["op", "impl", "label", "batch"]
    failed = bench.run_case(wrong, **kwargs)
    assert failed["status"] == "failed" and failed["rel_err"] == 0.5 and failed["ms"] is None
    assert failed["reason"] == "relative error 0.5 > 0.001 against float64"
    unavailable = bench.run_case(gone, **kwargs)
    assert unavailable["status"] == "unavailable" and unavailable["reason"] == "not here"
    assert unavailable["rel_err"] is None and unavailable["ms"] is None and list(unavailable) == list(failed)


def test_importing_the_harness_loads_neither_triton_nor_matplotlib():
    code = (
        "import sys, posenc.benchmark; "
        "print(sorted(m for m in ('triton', 'matplotlib', 'transformers', 'liger_kernel') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    done = subprocess.run(
        [sys.executable, "-m", "posenc.benchmark", "--help"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("usage: python -m posenc.benchmark") and "--out OUT" in done.stdout
