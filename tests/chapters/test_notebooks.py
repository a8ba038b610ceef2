"""Each chapter is committed as one clean top-to-bottom run, in sync with its MyST twin."""

import re
from pathlib import Path

import jupytext
import nbformat
import pytest
from repo import ROOT, chapter_notebooks, toc_files

NOTEBOOKS = chapter_notebooks()
IDS = [p.stem for p in NOTEBOOKS]


def test_toc_pages_exist_and_chapters_are_notebooks():
    for f in toc_files():
        assert (ROOT / f"{f}.ipynb").exists() or (ROOT / f"{f}.md").exists(), f
    assert {p.stem for p in (ROOT / "book").glob("*.ipynb")} == set(IDS), "every notebook of book/ is in _toc.yml"
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


def _fold_checks():
    import fold_checks as module

    return module


WIDTH = 88  # the column: code and printed output fit it at 1280 px without scrolling


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_checks_and_plotting_code_are_folded(path):
    """Checks sit in collapsed cells after what they check; figures show without their code."""
    fold = _fold_checks()
    _, changes = fold.fold(path.parent / "md_src" / f"{path.stem}.md", path)
    assert changes == 0, f"{changes} cell(s) to fold: run scripts/fold_checks.py, then make notebooks"
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and fold.draws_figure(cell):
            tags = cell.metadata.get("tags", [])
            assert {"hide-input", "hide-cell", "remove-input"} & set(tags), cell.source[:80]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_assert_is_shown_outside_the_exercise_solutions(path):
    """Every assert runs in a cell the site removes (tagged check, remove-cell), except in the
    solutions of the exercises, whose checks are part of the answer."""
    fold = _fold_checks()
    shown = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code" or "remove-cell" in cell.metadata.get("tags", []):
            continue
        if cell.metadata.get("mystnb", {}).get("code_prompt_show") == fold.SOLUTION["code_prompt_show"]:
            continue
        if re.search(r"^\s*assert\b", cell.source, re.M):
            shown.append(cell.source.splitlines()[0])
    assert not shown, f"{len(shown)} cell(s) on the page assert: {shown}"


def test_the_sources_are_named_never_numbered_in_the_prose():
    """The introduction names the five source documents; the English prose never calls them
    "seed NNN" (in chapter 11 a seed is a random seed)."""
    pages = sorted((ROOT / "book" / "md_src").glob("*.md")) + sorted((ROOT / "book").glob("*.md"))
    for page in pages:
        prose = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        found = re.findall(r"\b[Ss]eeds? \d{3}\b", prose)
        assert not found, f"{page.name}: {found[:3]}"


def _text_outputs(cell):
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            yield out.text
        elif "text/html" not in out.get("data", {}) and "image/png" not in out.get("data", {}):
            yield out.get("data", {}).get("text/plain", "")


# Figure text: 8 points or more, so that a phone shows it at 9 CSS pixels or more
# (book/_ext/page_style.py gives every figure the width at which 8 points are 9 pixels).
SMALL_TEXT = re.compile(
    r"\b(?:fontsize|size|labelsize|titlesize)\s*=\s*(?:([0-7](?:\.\d+)?)\b|[\"'](?:x-small|xx-small)[\"'])"
)


def _plotting_sources():
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                yield path.stem, cell.source
    for path in sorted((ROOT / "posenc_book").glob("*.py")):
        yield path.name, path.read_text(encoding="utf-8")


def test_no_figure_text_is_set_below_8_points():
    small = [(where, m.group(0)) for where, source in _plotting_sources() for m in SMALL_TEXT.finditer(source)]
    assert not small, f"figure text below 8 points: {small}"
    from posenc_book.style import BOOK_STYLE

    assert min(v for k, v in BOOK_STYLE.items() if k.endswith("size") and isinstance(v, (int, float))) >= 8
    assert SMALL_TEXT.search("ax.legend(fontsize=7)") and SMALL_TEXT.search("ax.text(0, 0, 's', size='x-small')")
    assert not SMALL_TEXT.search("ax.legend(fontsize=8)") and not SMALL_TEXT.search("figsize=(7, 3)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_code_and_output_fit_the_column(path):
    nb = nbformat.read(path, as_version=4)
    wide = [
        line
        for cell in nb.cells
        if cell.cell_type == "code"
        for text in [cell.source, *_text_outputs(cell)]
        for line in text.splitlines()
        if len(line) > WIDTH
    ]
    assert not wide, f"{len(wide)} line(s) over {WIDTH} characters, the first: {wide[0]!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_chapter_ends_with_checked_exercises(path):
    """Exercises close every chapter; each solution is hidden, and asserts its answer."""
    nb = nbformat.read(path, as_version=4)
    heads = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "## Exercises" in c.source]
    assert heads, "no Exercises section"
    after = nb.cells[heads[-1] :]
    assert not any(c.cell_type == "markdown" and re.search(r"^##? ", c.source, re.M) for c in after[1:]), (
        "the Exercises section is not the last one"
    )
    solutions = [c for c in after if c.cell_type == "code"]
    assert len(solutions) >= 3, "fewer than three exercises"
    for cell in solutions:
        assert "hide-cell" in cell.metadata.get("tags", []), cell.source[:80]
        assert cell.metadata.get("mystnb", {}).get("code_prompt_show") == "Show the solution"
        assert "assert " in cell.source, f"a solution that checks nothing: {cell.source[:80]}"


def _shown_objects(md: Path):
    """(file, pyobject, start-at) of every ``literalinclude`` in a chapter's twin."""
    text = md.read_text(encoding="utf-8")
    for match in re.finditer(r"```\{literalinclude\} (\S+)\n((?::[a-z-]+:.*\n)*)", text):
        options = dict(re.findall(r"^:([a-z-]+):\s?(.*)$", match.group(2), re.M))
        yield (md.parent.parent / match.group(1)).resolve(), options["pyobject"], options.get("start-at")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_package_code_shown_on_the_page_fits_the_column(path):
    import ast

    for source, pyobject, start in _shown_objects(path.parent / "md_src" / f"{path.stem}.md"):
        text = source.read_text(encoding="utf-8")
        node = ast.parse(text)
        for name in pyobject.split("."):
            node = next(n for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)
        lines = text.splitlines()[node.lineno - 1 : node.end_lineno]
        if start:
            lines = lines[next(i for i, line in enumerate(lines) if start in line) :]
        wide = [line.strip() for line in lines if len(line) > WIDTH]
        assert not wide, f"{source.name}:{pyobject} shows {len(wide)} line(s) over {WIDTH}: {wide[0][:70]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_figure_has_alt_text_from_the_chapter_source(path):
    """A figure's alt text lives in its cell's metadata (``mystnb.image.alt``), so that
    re-running the chapter keeps it; it says what the figure shows, not where it is stored."""
    nb = nbformat.read(path, as_version=4)
    fold = _fold_checks()
    for cell in nb.cells:
        if cell.cell_type != "code" or not fold.draws_figure(cell):
            continue
        alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
        assert len(alt.split()) >= 15, f"figure without a description: {cell.source[:60]!r}"
        assert not re.search(r"\.(png|svg|jpg)\b|_images/", alt), f"alt text names a file: {alt[:60]}"
