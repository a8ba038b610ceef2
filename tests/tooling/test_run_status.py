"""scripts/run_status.py: the records behind the site's execution status page, and the
Makefile's chapter runs that write them."""

import json
import os
import re
import subprocess
import sys

import pytest
import run_status
from repo import ROOT, extension

execution_status = extension("execution_status")

# what pytest --junitxml writes for an nbval run (colour escapes as XML keeps them)
REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest"
 errors="0" failures="1" skipped="0" tests="4" time="9.5" timestamp="2026-11-26T15:32:01.073965+00:00">
<testcase classname="zh-hant.book.01_motivation.ipynb" name="Cell 0" time="2.500" />
<testcase classname="zh-hant.book.01_motivation.ipynb" name="Cell 1" time="0.250" />
<testcase classname="zh-hant.book.02_sinusoidal.ipynb" name="Cell 0" time="3.000" />
<testcase classname="zh-hant.book.02_sinusoidal.ipynb" name="Cell 4" time="0.125"><failure
 message="#x1B[91mNotebook cell execution failed#x1B[0m">#x1B[94mCell 4: Cell outputs differ
  - 3
  + 2#x1B[0m</failure></testcase>
</testsuite></testsuites>
"""
ENV = {"python": "3.11.7", "torch": "2.13.0+cpu", "transformers": "5.23.0", "triton": "3.7.1",
       "kernels": {"forced": "avx2", "used": "AVX2"}, "machine": "x86_64"}  # fmt: skip


def test_a_report_gives_each_notebook_its_time_result_and_failed_cells(tmp_path):
    (tmp_path / "r.xml").write_text(REPORT)
    started, notebooks = run_status.parse_junit(tmp_path / "r.xml")
    assert started == "2026-11-26T15:32:01.073965+00:00"
    first, second = notebooks
    assert (first["edition"], first["notebook"], first["seconds"], first["cells"]) == (
        "zh-hant",
        "01_motivation",
        2.75,
        2,
    )
    assert first["result"] == "passed" and first["failed"] == []
    assert second["result"] == "failed" and [f["cell"] for f in second["failed"]] == [4]
    assert "Cell outputs differ" in second["failed"][0]["message"] and "#x1B" not in second["failed"][0]["message"]


def test_the_edition_comes_from_the_path_or_is_given():
    assert run_status.notebook_of("book.03_pairing.ipynb") == ("en", "03_pairing")
    assert run_status.notebook_of("zh-hans.12_gpu_timing.ipynb") == ("zh-hans", "12_gpu_timing")
    assert run_status.notebook_of("03_pairing.ipynb") == (None, "03_pairing")  # run outside the repository


def test_a_run_without_a_report_is_recorded_as_such(tmp_path):
    data = run_status.record("nbval", tmp_path / "missing.xml", "en", env=ENV)
    assert data["notebooks"] == [] and data["error"] == "the run left no report" and data["date"]


def test_record_writes_the_versions_and_kernel_set_of_its_environment(tmp_path):
    # a process of its own, as the Makefile starts it: ATen reads ATEN_CPU_CAPABILITY once, when
    # torch loads, so a process that had imported torch before setting it would report its own
    (tmp_path / "r.xml").write_text(REPORT)
    script = [sys.executable, str(ROOT / "scripts" / "run_status.py")]
    args = ["record", "nbval-cpus", "--xml", str(tmp_path / "r.xml"), "--out", str(tmp_path)]
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    assert subprocess.run([*script, *args], env=env, cwd=ROOT, timeout=300).returncode == 0
    data = json.loads((tmp_path / "nbval-cpus.json").read_text())
    assert data["kernels"]["forced"] == "default" and data["kernels"]["used"] == "DEFAULT"
    import torch
    import transformers

    assert (data["torch"], data["transformers"]) == (torch.__version__, transformers.__version__)
    assert re.fullmatch(r"3\.\d+\.\d+", data["python"]) and data["triton"]


def test_the_page_shows_every_chapter_of_every_edition_from_the_newest_run(tmp_path):
    (tmp_path / "r.xml").write_text(REPORT)
    old = {**run_status.record("nbval-cpus", tmp_path / "r.xml", "zh-hant", env=ENV), "date": "2026-01-01T00:00:00"}
    new = run_status.record("nbval-cpus", tmp_path / "r.xml", "zh-hant", env=ENV)
    new["notebooks"][1] = {**new["notebooks"][1], "result": "passed", "failed": []}
    check = {**run_status.record("no-triton", tmp_path / "r.xml", "zh-hans", kind="check", env=ENV)}
    words = execution_status.WORDS
    table = execution_status.chapter_table(["01_motivation", "02_sinusoidal", "03_pairing"], [old, new, check], words)
    assert table[2] == "| [1](01_motivation) | not run | not run | passed, 2.8 s (nbval-cpus) |"
    assert table[3].endswith("| not run | not run | passed, 3.1 s (nbval-cpus) |"), (
        "the newest run wins; checks do not count"
    )
    assert table[4].count("not run") == 3
    runs = execution_status.run_table([old, new, check], words)
    assert "**failed**: 02_sinusoidal" in runs[2] and "2026-01-01 00:00" in runs[2]
    assert (
        "AVX2 (forced)" in runs[3]
        and "| Python 3.11.7, torch 2.13.0+cpu, transformers 5.23.0, Triton 3.7.1 |" in runs[3]
    )
    assert "chapter 12 with Triton hidden" in runs[4]
    assert execution_status.duration(75.4) == "1 min 15 s"


def test_every_chapter_run_of_make_test_is_recorded():
    """Each of the Makefile's runs of the chapters writes its JUnit report and records it in
    its own environment, whatever its exit status, and keeps that status."""
    makefile = (ROOT / "Makefile").read_text()
    recipes = {
        target: re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
        for target in ("nbval", "nbval-cpus", "nbval-elsewhere")
    }
    assert "$(call record,nbval,en)" in recipes["nbval"]
    assert "$(call record,nbval-cpus,zh-hant)" in recipes["nbval-cpus"]
    assert "$(call record,nbval-elsewhere,zh-hans)" in recipes["nbval-elsewhere"]
    assert "$(call record,no-triton,zh-hans,--kind check)" in recipes["nbval-elsewhere"]
    # the record runs in the forced kernel set's environment too, or it would report the machine's own
    assert "export ATEN_CPU_CAPABILITY=avx2 $(ONE_THREAD) PYTHONPATH=$(PLUGINS) &&" in recipes["nbval-cpus"]
    elsewhere = "export PYTHONPATH=$(ELSEWHERE)/site:$(ELSEWHERE)/plugins ATEN_CPU_CAPABILITY=default $(ONE_THREAD) &&"
    assert elsewhere in recipes["nbval-elsewhere"]
    record = re.search(r"^record = (.+)$", makefile, re.M).group(1)
    assert record.startswith("--junitxml=$(STATUS)/$(1).xml; rc=$$?;") and record.endswith("exit $$rc")


@pytest.mark.parametrize("edition", ["", "zh-hans/", "zh-hant/"])
def test_the_status_page_translates_every_word(edition):
    if not edition:
        assert "```{execution-status}\n```" in (ROOT / "book" / "status.md").read_text()
        return
    page = (ROOT / edition / "book" / "status.md").read_text()
    block = page.split("```{execution-status}\n", 1)[1].split("```", 1)[0]
    keys = {line.split(" = ", 1)[0] for line in block.splitlines()}
    assert keys == set(execution_status.WORDS)
