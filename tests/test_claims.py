"""The claims ledger, posenc_book/data/claims.yaml: its schema, the chapters it points to, and the tests it names, which
must exist and pass."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest
import yaml
from chapters import ROOT, toc_files
from docutils.nodes import make_id

LEDGER = ROOT / "posenc_book" / "data" / "claims.yaml"
CLAIMS = yaml.safe_load(LEDGER.read_text(encoding="utf-8"))
IDS = [claim["id"] for claim in CLAIMS]
SEEDS = ("000", "001", "002", "003", "004")
VERDICTS = ("correct", "wrong", "imprecise", "untestable")
REQUIRED = {"id", "seed", "section", "claim", "verdict", "reason", "chapter", "test"}
NODE_ID = re.compile(r"^(tests/test_\w+\.py)::(test_\w+)$")
CHAPTER = re.compile(r"^(\d\d_[a-z0-9_]+)(?:#([a-z0-9-]+))?$")


def chapter_stem(claim: dict) -> str:
    return CHAPTER.match(claim["chapter"]).group(1)


def chapter_exists(stem: str) -> bool:
    """A chapter is in the book once its notebook or its MyST twin is."""
    return (ROOT / "book" / f"{stem}.ipynb").exists() or (ROOT / "book" / "md_src" / f"{stem}.md").exists()


def section_anchors(stem: str) -> set[str]:
    """The ids Sphinx gives the headings of a chapter (outside code cells)."""
    text = (ROOT / "book" / "md_src" / f"{stem}.md").read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return {make_id(title.replace("$", "").replace("`", "")) for title in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def is_testable(claim: dict) -> bool:
    return claim["verdict"] != "untestable"


def test_ledger_schema():
    assert isinstance(CLAIMS, list) and len(CLAIMS) >= 25
    for claim in CLAIMS:
        assert isinstance(claim, dict), claim
        assert REQUIRED <= set(claim) <= REQUIRED | {"pending"}, (claim.get("id"), set(claim) ^ REQUIRED)
        for key in ("id", "seed", "section", "claim", "reason", "chapter"):
            assert isinstance(claim[key], str) and claim[key].strip(), (claim["id"], key)
        assert claim["seed"] in SEEDS, claim["id"]
        assert re.fullmatch(rf"{claim['seed']}-\d\d", claim["id"]), claim["id"]
        assert claim["verdict"] in VERDICTS, (claim["id"], claim["verdict"])
        assert claim["test"] is None or isinstance(claim["test"], str), claim["id"]
        assert claim.get("pending", True) is True, (claim["id"], "pending is true or absent")
        assert CHAPTER.match(claim["chapter"]), (claim["id"], claim["chapter"])


def test_ids_are_unique_and_in_order():
    assert len(set(IDS)) == len(IDS), sorted(i for i in IDS if IDS.count(i) > 1)
    assert IDS == sorted(IDS)
    for seed in SEEDS:  # every document has claims, numbered 01, 02, ... without gaps
        numbers = [int(i[4:]) for i in IDS if i.startswith(seed)]
        assert numbers == list(range(1, len(numbers) + 1)), seed


def test_every_verdict_occurs():
    assert {claim["verdict"] for claim in CLAIMS} == set(VERDICTS)


@pytest.mark.parametrize("claim", CLAIMS, ids=IDS)
def test_chapter_exists_unless_pending(claim):
    stem = chapter_stem(claim)
    if claim.get("pending"):
        assert not chapter_exists(stem), (
            f"{claim['id']}: chapter {stem} is in the book now; decide the claim there, name its test "
            f"and drop `pending`"
        )
        return
    assert (ROOT / "book" / f"{stem}.ipynb").exists(), f"{claim['id']}: no chapter book/{stem}.ipynb"
    assert f"book/{stem}" in toc_files(), f"{claim['id']}: {stem} is not in _toc.yml"
    anchor = CHAPTER.match(claim["chapter"]).group(2)
    if anchor:
        assert anchor in section_anchors(stem), f"{claim['id']}: no section #{anchor} in {stem}"


@pytest.mark.parametrize("claim", CLAIMS, ids=IDS)
def test_testable_claims_name_a_test_that_exists(claim):
    if not is_testable(claim):
        assert claim["test"] is None and not claim.get("pending"), f"{claim['id']}: untestable, so no test"
        return
    if claim.get("pending"):
        assert claim["test"] is None, f"{claim['id']}: pending claims name their test once decided"
        return
    match = NODE_ID.match(claim["test"] or "")
    assert match, f"{claim['id']}: test must be a node id tests/test_x.py::test_name, got {claim['test']!r}"
    path = ROOT / match.group(1)
    assert path.exists(), f"{claim['id']}: no file {match.group(1)}"
    assert path.name != Path(__file__).name, "the ledger cannot be decided by its own checks"
    functions = {
        node.name for node in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(node, ast.FunctionDef)
    }
    assert match.group(2) in functions, f"{claim['id']}: {match.group(1)} defines no {match.group(2)}"


def test_named_tests_pass(tmp_path):
    node_ids = sorted({claim["test"] for claim in CLAIMS if claim["test"]})
    report = tmp_path / "named.xml"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *node_ids],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    outcomes: dict[str, list[str]] = {node_id: [] for node_id in node_ids}
    for case in ET.parse(report).getroot().iter("testcase"):
        module, name = case.get("classname"), case.get("name").split("[")[0]
        node_id = f"{module.replace('.', '/')}.py::{name}"
        failed = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes.setdefault(node_id, []).append(failed[0] if failed else "passed")
    for node_id in node_ids:
        assert outcomes[node_id], f"{node_id} collected no test"
        assert set(outcomes[node_id]) == {"passed"}, (node_id, outcomes[node_id])


def test_the_chapter_shows_every_claim():
    nb = nbformat.read(ROOT / "book" / "10_claims.ipynb", as_version=4)
    html = "\n".join(
        str(output.get("data", {}).get("text/html", ""))
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )
    missing = [i for i in IDS if f'id="claim-{i}"' not in html]
    assert not missing, f"claims missing from the committed chapter 10: {missing}; re-run it"
    source = (ROOT / "book" / "md_src" / "10_claims.md").read_text(encoding="utf-8")
    assert 'data_path("claims.yaml")' in source
