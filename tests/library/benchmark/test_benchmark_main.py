"""``python -m posenc.benchmark`` checks its options before it runs, and saves only a result whose checks all passed.

The harness runs for real on the CPU with one tiny shape; ``run_benchmark`` is replaced where a test needs no timing.
"""

import json
import os
from pathlib import Path

import pytest
import torch
from repo import FIXTURES

from posenc import benchmark as bench
from posenc.benchmark import __main__ as cli
from posenc.benchmark import load_results, run_benchmark

SHAPE = bench.RopeShape(1, 5, 4, 2, 16)


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fail the test if the benchmark starts."""
    monkeypatch.setattr(cli, "run_benchmark", lambda *args, **kwargs: pytest.fail("the benchmark ran"))


@pytest.fixture
def passing(monkeypatch):
    """``run_benchmark`` returns the synthetic fixture without its failed record."""
    result = load_results(FIXTURES)[0]
    result["results"] = [r for r in result["results"] if r["status"] != "failed"]
    monkeypatch.setattr(cli, "run_benchmark", lambda *args, **kwargs: result)
    return result


def refused(capsys, argv) -> str:
    """The last line of the error of a command that argparse refuses (exit status 2)."""
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_run_s_must_be_a_finite_positive_number(capsys, nothing_runs, value, tmp_path):
    message = refused(capsys, ["--device", "cpu", "--run-s", value, "--out", str(tmp_path / "b.json")])
    assert message.endswith(f"error: --run-s must be a finite number > 0, got {float(value)}")
    with pytest.raises(ValueError, match=r"run_s must be a finite number > 0, got"):
        run_benchmark("cpu", ops=("rope",), rope_shapes=[SHAPE], impls=["naive"], run_s=float(value))


def test_a_device_that_is_not_here_is_refused(capsys, nothing_runs, tmp_path):
    out = ["--out", str(tmp_path / "b.json")]
    assert refused(capsys, ["--device", "foo", *out]).endswith(
        "error: argument --device: device must be 'cpu', 'cuda' or 'cuda:N', got 'foo'"
    )
    assert "device must be 'cpu', 'cuda' or 'cuda:N', got 'meta'" in refused(capsys, ["--device", "meta", *out])
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        message = refused(capsys, ["--device", f"cuda:{count}", *out])
        assert f"device 'cuda:{count}' does not exist: this machine has {count} CUDA device(s)" in message
    else:
        message = refused(capsys, ["--device", "cuda", *out])
        assert message.endswith(
            "argument --device: device 'cuda' needs CUDA, and this machine has no usable CUDA device"
        )
    with pytest.raises(ValueError, match=r"device must be 'cpu', 'cuda' or 'cuda:N', got 'foo'"):
        run_benchmark("foo")


def test_out_that_cannot_be_written_is_refused_before_running(tmp_path, capsys, nothing_runs):
    (tmp_path / "afile").write_text("not a folder")
    message = refused(capsys, ["--device", "cpu", "--out", str(tmp_path / "afile" / "b.json")])
    assert message.endswith(
        f"--out {tmp_path / 'afile' / 'b.json'} cannot be written: {tmp_path / 'afile'} is a file, not a folder"
    )
    if Path("/sys").is_dir() and not os.access("/sys", os.W_OK):
        message = refused(capsys, ["--device", "cpu", "--out", "/sys/b.json"])
        assert "--out /sys/b.json cannot be written:" in message and "(writing in /sys)" in message
    assert list(tmp_path.iterdir()) == [tmp_path / "afile"]  # no trial file left


def test_out_that_is_not_a_regular_file_is_refused_even_with_force(tmp_path, capsys, nothing_runs):
    """The result is written beside --out and moved over it: a pipe, a device or a link would be
    replaced by a regular file (as root, /dev/null itself), so anything but a regular file is refused."""
    pipe, link, target = tmp_path / "pipe", tmp_path / "link.json", tmp_path / "target.json"
    os.mkfifo(pipe)
    target.write_text("{}")
    link.symlink_to(target)
    for out, kind in ((pipe, "not a regular file (a device, a pipe or a socket)"), (link, "a link")):
        message = refused(capsys, ["--device", "cpu", "--out", str(out), "--force"])
        assert message.endswith(f"--out {out} is {kind}; give the name of a regular file to write")
    assert pipe.is_fifo() and link.is_symlink() and target.read_text() == "{}"


def test_out_under_a_folder_that_cannot_be_entered_is_refused(tmp_path, capsys, nothing_runs, monkeypatch):
    """Asking whether --out is a folder may itself fail (a folder on the way without the x bit):
    a clear error, exit 2, as for the experiments. Simulated: the tests may run as root."""
    locked = tmp_path / "locked"

    def no_entry(self):
        if str(self).startswith(str(locked)):
            raise PermissionError(13, "Permission denied", str(locked / "x.json"))
        return False

    monkeypatch.setattr(Path, "is_dir", no_entry)
    message = refused(capsys, ["--device", "cpu", "--out", str(locked / "x.json")])
    assert message.endswith(f"--out {locked / 'x.json'} cannot be written: Permission denied ({locked / 'x.json'})")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes in any folder")
def test_out_in_a_read_only_folder_is_refused(tmp_path, capsys, nothing_runs):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        message = refused(capsys, ["--device", "cpu", "--out", str(locked / "b.json")])
    finally:
        locked.chmod(0o755)
    assert f"--out {locked / 'b.json'} cannot be written: Permission denied" in message


def test_an_existing_file_is_replaced_only_with_force(tmp_path, capsys, monkeypatch, passing):
    monkeypatch.chdir(tmp_path)
    default = bench.default_path({"device": bench.device_info("cpu")})  # the default --out, named after the CPU
    default.write_text('{"recorded": "full run"}')
    with monkeypatch.context() as m:
        m.setattr(cli, "run_benchmark", lambda *args, **kwargs: pytest.fail("the benchmark ran"))
        assert refused(capsys, ["--device", "cpu"]).endswith(f"--out {default} exists; pass --force to replace it")
        message = refused(capsys, ["--device", "cpu", "--out", "."])  # the folder: the same file
        assert message.endswith(f"--out {default} exists; pass --force to replace it")
    assert default.read_text() == '{"recorded": "full run"}'
    assert cli.main(["--device", "cpu", "--force"]) == 0
    assert json.loads(default.read_text())["results"] == passing["results"]
    assert capsys.readouterr().out.splitlines()[-1] == f"written: {default}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [default.name]  # no temporary file left


def test_failed_checks_write_no_file_and_are_listed(tmp_path, capsys, monkeypatch):
    """A real run on the CPU, one implementation right and one that crashes."""

    def crashes(q, k):
        raise RuntimeError("kernel exploded")

    broken = bench.RopeImpl("crash", "crash", False, lambda shape, device, dtype: crashes)

    def tiny_run(device, **kwargs):
        kwargs.update(ops=("rope",), rope_shapes=[SHAPE], impls=["naive", broken], run_s=0.002, copy_bytes=2**20)
        return run_benchmark(device, **kwargs)

    monkeypatch.setattr(cli, "run_benchmark", tiny_run)
    out = tmp_path / "b.json"
    assert cli.main(["--device", "cpu", "--out", str(out)]) == 1
    assert not out.exists() and list(tmp_path.iterdir()) == []
    printed = capsys.readouterr().out.splitlines()
    assert printed[-3] == "1 check(s) FAILED:"
    assert "crash" in printed[-2] and "failed: RuntimeError: kernel exploded" in printed[-2]
    assert printed[-1] == f"not written: {out} (a result with failed checks is not saved)"


# --- load_results on what is not a folder of results ----------------------------------------------


def test_load_results_names_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match=rf"no folder {tmp_path / 'dtaa'} to read benchmark results from"):
        load_results(tmp_path / "dtaa")  # a misspelt folder is not an empty one
    (tmp_path / "afile").write_text("")
    with pytest.raises(ValueError, match=rf"directory must be a folder of result files, got the file {tmp_path}"):
        load_results(tmp_path / "afile")
    bad = {"gpu_list.json": "[1, 2]", "gpu_broken.json": '{"schema": ', "gpu_latin.json": b"\xff\xfe{"}
    expected = {
        "gpu_list.json": r"is not a posenc benchmark result: a JSON list, not an object",
        "gpu_broken.json": r"is not a posenc benchmark result: not JSON",
        "gpu_latin.json": r"is not a posenc benchmark result: not JSON",
    }
    for name, content in bad.items():
        folder = tmp_path / name.removesuffix(".json")
        folder.mkdir()
        path = folder / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
        with pytest.raises(ValueError, match=rf"^{path} " + expected[name]):
            load_results(folder)
    result = load_results(FIXTURES)[0]
    del result["path"]
    (tmp_path / "typed").mkdir()
    (tmp_path / "typed" / "gpu_x.json").write_text(json.dumps(result | {"results": {"a": 1}}))
    with pytest.raises(ValueError, match=r"'date' must be a string and 'results' a list, got str and dict"):
        load_results(tmp_path / "typed")


def test_ctrl_c_during_the_runs_exits_130_in_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """R9: Ctrl-C printed a KeyboardInterrupt traceback (exit -2); as the experiments' command line: one line, 130."""

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run_benchmark", interrupted)
    out = tmp_path / "r.json"
    assert cli.main(["--device", "cpu", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m posenc.benchmark interrupted;"), err
    assert not out.exists()
