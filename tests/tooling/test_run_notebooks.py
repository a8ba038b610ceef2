"""scripts/run_notebooks.py takes the edited side of a chapter, and never silently drops an edit."""

from __future__ import annotations

import os
from pathlib import Path

import jupytext
import nbformat
import pytest
from repo import ROOT
from repo import plugin as repo_plugin


@pytest.fixture(scope="module")
def script():
    import run_notebooks

    return run_notebooks


def _chapter(tmp_path: Path, script, source: str = "x = 1") -> Path:
    """A synchronised pair, as a run of the script leaves it."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_code_cell(source)]
    nb.metadata["posenc"] = {"synced_cells": script.fingerprint(nb)}
    ipynb = tmp_path / "01_x.ipynb"
    nbformat.write(nb, ipynb)
    (tmp_path / "md_src").mkdir()
    script.twin_of(ipynb).write_text(jupytext.writes(nb, fmt="md:myst"), encoding="utf-8")
    return ipynb


def _edit_notebook(ipynb: Path, source: str) -> None:
    nb = nbformat.read(ipynb, as_version=4)
    nb.cells[1].source = source
    nbformat.write(nb, ipynb)


def _edit_twin(md: Path, source: str) -> None:
    nb = jupytext.read(md)
    nb.cells[1].source = source
    md.write_text(jupytext.writes(nb, fmt="md:myst"), encoding="utf-8")


def _code(nb) -> str:
    return nb.cells[1].source


def test_the_edited_side_wins_whatever_the_file_times(tmp_path, script):
    ipynb = _chapter(tmp_path, script)
    md = script.twin_of(ipynb)
    _edit_notebook(ipynb, "x = 2")
    os.utime(md)  # the twin is newer, as after a checkout
    assert _code(script.load_cells(ipynb)) == "x = 2"


def test_an_edited_twin_wins(tmp_path, script):
    ipynb = _chapter(tmp_path, script)
    _edit_twin(script.twin_of(ipynb), "x = 3")
    os.utime(ipynb)  # the notebook is newer
    assert _code(script.load_cells(ipynb)) == "x = 3"


def test_both_edited_is_an_error_naming_both_files(tmp_path, script):
    ipynb = _chapter(tmp_path, script)
    _edit_notebook(ipynb, "x = 2")
    _edit_twin(script.twin_of(ipynb), "x = 3")
    with pytest.raises(script.EditConflict, match=r"01_x\.ipynb and .*01_x\.md were both edited.*--prefer"):
        script.load_cells(ipynb)
    assert _code(script.load_cells(ipynb, "md")) == "x = 3"
    assert _code(script.load_cells(ipynb, "ipynb")) == "x = 2"


def test_without_a_record_only_agreement_passes(tmp_path, script):
    ipynb = _chapter(tmp_path, script)
    nb = nbformat.read(ipynb, as_version=4)
    del nb.metadata["posenc"]
    nbformat.write(nb, ipynb)
    assert _code(script.load_cells(ipynb)) == "x = 1"
    _edit_twin(script.twin_of(ipynb), "x = 3")
    with pytest.raises(script.EditConflict, match="no record"):
        script.load_cells(ipynb)


def test_the_chapter_runs_start_one_kernel_at_a_time(monkeypatch, tmp_path):
    """Two workers never ask for ports at once: while one holds the kernel-start lock (from its
    request for ports until its kernel answers), another process cannot take it."""
    import subprocess
    import sys

    plugin = repo_plugin("nbval_kernels")
    monkeypatch.setattr(plugin, "LOCK", tmp_path / "start.lock")
    other = (
        "import fcntl, sys; h = open(sys.argv[1], 'a')\n"
        "try: fcntl.flock(h, fcntl.LOCK_EX | fcntl.LOCK_NB); print('took it')\n"
        "except BlockingIOError: print('held')"
    )
    seen = []

    def start(*args, **kwargs):
        seen.append(subprocess.run([sys.executable, "-c", other, str(plugin.LOCK)], capture_output=True, text=True))
        return "km", "kc"

    monkeypatch.setattr(plugin, "_START", start)
    assert plugin.start_new_kernel() == ("km", "kc")
    assert seen[0].stdout.strip() == "held", seen[0].stderr
    after = subprocess.run([sys.executable, "-c", other, str(plugin.LOCK)], capture_output=True, text=True)
    assert after.stdout.strip() == "took it", "the lock is let go once the kernel has answered"


def test_every_committed_chapter_is_in_sync_with_its_twin(script):
    for ipynb in script.all_chapters():
        nb, md = jupytext.read(ipynb), jupytext.read(script.twin_of(ipynb))
        assert script.fingerprint(nb) == script.fingerprint(md), ipynb.name


def test_the_chapter_runs_start_a_kernel_again_when_it_dies_before_answering(monkeypatch):
    """tests/plugins/nbval_kernels.py (make's chapter runs load it): a kernel that died or stayed
    silent before replying is started again, at most three times; any other failure is not retried."""
    plugin = repo_plugin("nbval_kernels")
    calls = []

    def dies(times, message="Kernel died before replying to kernel_info"):
        def start(*args, **kwargs):
            calls.append(kwargs)
            if len(calls) <= times:
                raise RuntimeError(message)
            return "km", "kc"

        return start

    monkeypatch.setattr(plugin, "_START", dies(2))
    assert plugin.start_new_kernel(kernel_name="python3") == ("km", "kc") and len(calls) == 3
    calls.clear()
    monkeypatch.setattr(plugin, "_START", dies(2, "Kernel didn't respond in 60 seconds"))
    assert plugin.start_new_kernel() == ("km", "kc") and len(calls) == 3  # alive, silent: shut down, again
    calls.clear()
    monkeypatch.setattr(plugin, "_START", dies(3))
    with pytest.raises(RuntimeError, match="died before replying"):
        plugin.start_new_kernel()
    calls.clear()
    monkeypatch.setattr(plugin, "_START", dies(1, "Kernel info reqest timed out"))
    with pytest.raises(RuntimeError, match="timed out"):
        plugin.start_new_kernel()
    assert len(calls) == 1
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "-p nbval_kernels" in makefile.split("\nNBVAL := ", 1)[1].split("\n", 1)[0]
