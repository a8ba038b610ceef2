"""Each chapter is committed as one clean top-to-bottom run, in sync with its MyST twin."""

import re

import jupytext
import nbformat
import pytest
from chapters import ROOT, chapter_notebooks, toc_files

NOTEBOOKS = chapter_notebooks()
IDS = [p.stem for p in NOTEBOOKS]


def test_toc_pages_exist_and_chapters_are_notebooks():
    for f in toc_files():
        assert (ROOT / f"{f}.ipynb").exists() or (ROOT / f"{f}.md").exists(), f
    assert {p.stem for p in (ROOT / "book").glob("[0-9][0-9]_*.ipynb")} == set(IDS)
    assert len(NOTEBOOKS) >= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_twin_in_sync(path):
    twin = path.parent / "md_src" / f"{path.stem}.md"
    assert twin.exists(), f"missing MyST twin {twin}"
    nb = jupytext.read(path)
    assert nb.metadata["jupytext"]["formats"] == "ipynb,md_src//md:myst"
    assert jupytext.writes(nb, fmt="md:myst") == twin.read_text(encoding="utf-8"), (
        f"{twin.name} differs from {path.name}: run `make notebooks`"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_outputs_are_one_clean_run(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "a chapter without code cells"
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), f"execution counts {counts}: not one fresh run"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"committed error output: {errors[0].get('ename')}"
    streams = [o.get("text", "") for c in code for o in c.outputs if o.get("name") == "stderr"]
    assert not any("Warning" in s for s in streams), f"a warning in the committed outputs: {streams}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_chapter_imports_posenc_and_asserts_its_claims(path):
    nb = nbformat.read(path, as_version=4)
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert re.search(r"^from posenc|^import posenc", source, re.M)
    assert source.count("assert ") >= 5, "claims are asserted in the cell after them"


def test_intro_chapter_map_lists_every_chapter():
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        assert f"{path.stem}" in intro, f"{path.stem} missing from the intro's chapter map"
