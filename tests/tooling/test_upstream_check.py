"""scripts/upstream_check.py and .github/workflows/upstream.yml: the weekly check against the
newest torch and transformers, and of the site's links, and the one issue it keeps."""

import json
import os
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
import upstream_check  # noqa: E402
import yaml
from repo import ROOT

FAILED_CELL = """<?xml version="1.0" encoding="utf-8"?><testsuites>
<testsuite name="pytest" timestamp="2027-01-04T04:30:00">
<testcase classname="book.06_rope.ipynb" name="Cell 0" time="3.0" />
<testcase classname="book.06_rope.ipynb" name="Cell 17" time="0.5"><failure message="failed">
Cell 17: Cell outputs differ
 mismatch 'stdout'
  - max error 0.0
  + max error 2.4e-07</failure></testcase>
<testcase classname="book.07_long_context.ipynb" name="Cell 0" time="3.0" />
</testsuite></testsuites>
"""
PASSED_TESTS = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_rope_scaling" name="test_yarn" time="0.1" />
</testsuite></testsuites>
"""


def fake_newest(folder, chapters=FAILED_CELL, tests=PASSED_TESTS, links=None):
    """The reports `run` leaves, as if torch and transformers had a newer release."""
    folder.mkdir(exist_ok=True)
    found = upstream_check.versions()  # the pinned environment as installed
    assert found["torch"]["tested"].split("+")[0] == found["torch"]["pinned"] == "2.13.0"
    found["torch"]["tested"], found["transformers"]["tested"] = "2.99.0", "9.0.0"  # the fake 'newest'
    (folder / "versions.json").write_text(json.dumps(found))
    (folder / "chapters.xml").write_text(chapters)
    (folder / "transformers.xml").write_text(tests)
    (folder / "links.json").write_text(json.dumps(links or {"built": True, "links": []}))
    return folder


def test_the_issue_lists_the_versions_and_each_failing_cell(tmp_path):
    links = {"built": True, "links": [
        {"url": "https://example.org/a", "status": 200, "error": None, "pages": ["book/intro.html"]},
        {"url": "https://example.org/gone", "status": 404, "error": "Not Found", "pages": ["book/05_relative.html"]},
    ]}  # fmt: skip
    body, broken = upstream_check.report(fake_newest(tmp_path / "r", links=links), "https://ci.example/runs/1")
    assert broken == 2
    assert body.startswith(upstream_check.MARK + "\n\n2 failures.\n")
    assert "| torch | 2.13.0 | 2.99.0 |" in body and "| transformers | 5.23.0 | 9.0.0 |" in body
    assert "- **chapters: 1 of 2 failed.**" in body
    assert "<summary><code>06_rope</code>, cell 17</summary>" in body and "+ max error 2.4e-07" in body
    assert "- test files: all 1 passed." in body
    assert "| <https://example.org/gone> | 404 | book/05_relative.html |" in body and "1 of 2 links answered" in body
    assert body.rstrip().endswith("The run: https://ci.example/runs/1")


def test_nothing_broke_and_a_site_that_did_not_build(tmp_path):
    passed = FAILED_CELL.replace('<failure message="failed">', "<system-out>").replace("</failure>", "</system-out>")
    body, broken = upstream_check.report(fake_newest(tmp_path / "ok", chapters=passed))
    assert broken == 0 and "\n\nNothing broke.\n" in body and "all 2 passed" in body
    body, broken = upstream_check.report(fake_newest(tmp_path / "nosite", chapters=passed, links={"built": False}))
    assert broken == 1 and "The site did not build" in body
    (tmp_path / "nosite" / "chapters.xml").unlink()
    body, broken = upstream_check.report(tmp_path / "nosite")
    assert broken == 2 and "chapters: no report" in body


def test_the_transformers_tests_are_the_files_that_import_it():
    files = {p.name for p in upstream_check.transformers_tests()}
    assert {"test_scaling.py", "test_reader.py", "test_families.py"} <= files
    assert "test_sinusoidal.py" not in files and "test_upstream_check.py" not in files


@pytest.fixture
def server(tmp_path):
    (tmp_path / "here.html").write_text("ok")
    handler = partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_links_are_collected_from_every_page_and_checked(tmp_path, server):
    site = tmp_path / "site"
    (site / "book").mkdir(parents=True)
    (site / "book" / "a.html").write_text(
        f'<a href="{server}/here.html#x">ok</a> <a href="{server}/gone.html">gone</a> <a href="b.html">local</a>'
    )
    (site / "index.html").write_text(f'<a href="{server}/here.html">again</a>')
    found = upstream_check.external_links(site)
    assert found == {f"{server}/here.html": ["book/a.html", "index.html"], f"{server}/gone.html": ["book/a.html"]}
    results = {r["url"]: r for r in upstream_check.check_links(site)}
    assert results[f"{server}/here.html"]["status"] == 200 and results[f"{server}/gone.html"]["status"] == 404
    assert upstream_check.check_link("http://127.0.0.1:9/none", timeout=2)["status"] is None


@pytest.mark.parametrize(("open_issue", "body", "expected", "status"), [
    (None, "broke", ["issue create --title"], 1),
    (7, "broke", ["issue edit 7"], 1),
    (7, "fine", ["issue close 7"], 0),
    (None, "fine", [], 0),
])  # fmt: skip
def test_one_issue_is_opened_updated_or_closed(tmp_path, monkeypatch, open_issue, body, expected, status):
    log = tmp_path / "gh.log"
    listing = json.dumps([{"number": open_issue, "title": upstream_check.TITLE}] if open_issue else [])
    fake = tmp_path / "bin" / "gh"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n[ "$2" = list ] && echo \'{listing}\'\nexit 0\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    text = f"{upstream_check.MARK}\n\n" + ("Nothing broke.\n" if body == "fine" else "1 failures.\n")
    (tmp_path / "issue.md").write_text(text)
    assert upstream_check.publish(tmp_path / "issue.md") == status
    calls = [" ".join(line.split()[:3]) for line in log.read_text().splitlines() if line.startswith("issue ")]
    assert calls[0].startswith("issue list --state")
    assert calls[1:] == expected


def test_the_workflow_is_weekly_upgrades_torch_and_transformers_and_may_write_issues_only():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "upstream.yml").read_text())
    triggers = workflow[True]  # YAML reads the key `on` as True
    assert set(triggers) == {"schedule", "workflow_dispatch"}, "never on a push or a pull request"
    assert workflow["permissions"] == {"contents": "read"}
    job = workflow["jobs"]["check"]
    assert job["permissions"] == {"contents": "read", "issues": "write"}
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "make .venv/.test" in runs and "--upgrade" in runs and "torch transformers" in runs
    for command in ("run --out", "report", "publish"):
        assert f"scripts/upstream_check.py {command}" in runs
    assert all("${{" not in s.get("run", "") for s in job["steps"]), "expressions go through env, not into scripts"
    assert all("@" in s["uses"] and len(s["uses"].split("@")[1]) == 40 for s in job["steps"] if "uses" in s)


def test_the_workflows_pass_the_linters():
    bin_dir = os.path.dirname(sys.executable)
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    schema = [f"{bin_dir}/check-jsonschema", "--builtin-schema", "vendor.github-workflows", *workflows]
    done = subprocess.run(schema, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(
        [f"{bin_dir}/zizmor", "--offline", "--quiet", str(ROOT / ".github" / "workflows")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_release_workflow_checks_the_tag_then_attaches_wheel_pdf_site_and_citation():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    assert workflow[True] == {"push": {"tags": ["v*"]}}
    assert workflow["permissions"] == {"contents": "read"}
    job = workflow["jobs"]["release"]
    assert job["permissions"] == {"contents": "write"}
    runs = [s.get("run", "") for s in job["steps"]]
    order = ["scripts/release.py check", "make test", "sync_repo_url.py --publish", "pip wheel", "gh release create"]
    where = [next(i for i, run in enumerate(runs) if step in run) for step in order]
    assert where == sorted(where), "check the tag, test, then add the addresses, build and release"
    release = runs[where[-1]]
    for asset in ("dist/*.whl", "dist/*.pdf", "dist/*.tar.gz", "dist/CITATION.cff", "--notes-file dist/notes.md"):
        assert asset in release
    assert all("${{" not in run for run in runs), "expressions go through env, not into scripts"
