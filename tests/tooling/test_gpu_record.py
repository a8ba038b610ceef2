"""scripts/gpu_record.py, the one command that records chapter 12's GPU timings: its kernel check
runs here in Triton's interpreter (tests/conftest.py sets it), and fails when the kernel is wrong."""

import pytest
import torch

import posenc.triton_rope as triton_rope

pytest.importorskip("triton")
import gpu_record  # noqa: E402

# The GPU's cases are slow in the interpreter: smaller ones, the same kinds.
SMALL = ((2, 4, 2, 5, 16, "half", 0, "bfloat16"), (1, 2, 2, 3, 8, "interleaved", 7, "float32"))


def test_the_kernel_check_passes_on_the_kernel():
    assert gpu_record.kernel_check("cpu", SMALL) == []


@pytest.mark.parametrize("broken", ["forward", "backward"])
def test_the_kernel_check_catches_a_wrong_kernel(monkeypatch, broken):
    real = triton_rope.rope_qk_triton

    class Wrong(torch.autograd.Function):  # right values, wrong gradient
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad * 1.01

    def wrong(*args, **kwargs):
        q, k = real(*args, **kwargs)
        if broken == "forward":
            return q.mul(1.01), k
        return (Wrong.apply(q), k) if q.requires_grad else (q, k)

    monkeypatch.setattr(triton_rope, "rope_qk_triton", wrong)
    failures = gpu_record.kernel_check("cpu", SMALL)
    forward = [line for line in failures if "backward" not in line]
    assert failures and bool(forward) == (broken == "forward")


def test_without_a_gpu_it_says_so_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(gpu_record, "WHEELS", tmp_path / "no-wheels")
    assert gpu_record.main(["--out", str(tmp_path)]) == 2
    assert "no CUDA device" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_launch_sweep_runs_its_checks_and_writes_its_table(tmp_path, monkeypatch):
    """scripts/triton_sweep.py --dry-run: every choice checked against the default, one row each."""
    import json

    import triton_sweep

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert triton_sweep.main(["--dry-run", "--out", str(tmp_path)]) == 0
    (path,) = tmp_path.glob("triton_sweep_*.json")
    rows = json.loads(path.read_text())["rows"]
    assert [r["choice"] for r in rows][-3:] == [f"table kernel (q, k) warps={w}" for w in (1, 2, 4)]
    assert len(rows) == 4 + 3  # the dry run's share of the choices, then the table kernel's warps


def test_the_launch_sweep_stops_when_a_choice_changes_the_result(tmp_path, monkeypatch):
    import triton_sweep

    from posenc.triton_rope import launch

    real = launch._launch_angles

    def doubled_when_split(q, qo, k, ko, freqs, **kwargs):
        real(q, qo, k, ko, freqs, **kwargs)
        if kwargs.get("split_qk"):
            qo.mul_(2)

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(launch, "_launch_angles", doubled_when_split)
    assert triton_sweep.main(["--dry-run", "--out", str(tmp_path)]) == 1
    assert not list(tmp_path.glob("*.json"))
