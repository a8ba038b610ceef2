"""Every number a chapter's prose states is tied to the computation or the data it comes from.

A number in the prose (a decimal, a percentage, a ratio such as "3x", a count written with
thousands separators) either appears, as a value, in a cell of the same chapter that asserts
something (a check cell the site does not show, or an exercise's solution), so that nbval
fails when the data and the sentence part; or it is listed in ``prose_numbers.yaml`` beside
this file with what kind of number it is (a section of a cited text, a version, an
identifier, a parameter the text chooses, a value a cited paper or configuration publishes)
and why it cannot drift. A number written into the prose without either fails here, and so
does a listed number that the prose no longer states.

Plain small integers (a dimension, a chapter, a year) are left out: they are parameters or
names far more often than results, and the chapters' asserts cover the counts they report.
"""

import re
from collections import Counter
from decimal import Decimal

import nbformat
import pytest
import yaml
from repo import ROOT, chapter_notebooks

REGISTRY = yaml.safe_load((ROOT / "tests" / "chapters" / "prose_numbers.yaml").read_text(encoding="utf-8"))
KINDS = {"section", "version", "identifier", "parameter", "published"}

# a decimal, a percentage, a ratio ("3x", "9.75×") or a count with thousands separators
NUMBER = re.compile(
    r"(?<![\w.$\\{#/-])"
    r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\d+(?:\.\d+)?(?=\s?%)|\d+(?:\.\d+)?(?=\s?[x×](?![\w])))"
    r"(\s?%)?(?![\w])"
)
LITERAL = re.compile(r"(?<![\w.])\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?(?![\w])")


def prose(markdown: str) -> str:
    """The running text of a Markdown cell: no code, no mathematics, no link targets."""
    text = re.sub(r"```(?!\{)[^\n]*\n.*?```", " ", markdown, flags=re.S)  # code blocks, not directives
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", " ", text)
    text = re.sub(r"`[^`\n]+`", " ", text)  # inline code, and the targets of {cite}`...` and {ref}`...`
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    return re.sub(r"<[^>]+>", " ", text)  # HTML tags and their attributes


def stated(markdown: str) -> list[tuple[str, Decimal]]:
    """(as written, value) for every number of the prose; a percentage is also its fraction."""
    found = []
    for match in NUMBER.finditer(prose(markdown)):
        written = match.group(0).strip()
        found.append((written, Decimal(match.group(1).replace(",", ""))))
    return found


def asserted(nb) -> set[Decimal]:
    """The numeric literals of the cells that assert something (check cells, solutions)."""
    values = set()
    for cell in nb.cells:
        if cell.cell_type == "code" and "assert" in cell.source:
            for literal in LITERAL.findall(cell.source):
                try:
                    values.add(Decimal(literal.replace("_", "")))
                except ArithmeticError:
                    continue
    return values


def tied(written: str, value: Decimal, values: set[Decimal]) -> bool:
    candidates = {value}
    if written.endswith("%"):
        candidates.add(value / 100)  # "80 %" is asserted as 0.8
    return any(c == v for c in candidates for v in values)


def listed(stem: str) -> Counter:
    return Counter(str(entry["number"]) for entry in REGISTRY.get(stem) or [])


@pytest.mark.parametrize("path", chapter_notebooks(), ids=lambda p: p.stem)
def test_every_number_in_the_prose_is_asserted_or_listed(path):
    nb = nbformat.read(path, as_version=4)
    values = asserted(nb)
    free = Counter(
        written
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for written, value in stated(cell.source)
        if not tied(written, value, values)
    )
    allowed = listed(path.stem)
    unlisted = sorted(set(free) - set(allowed))
    assert not unlisted, (
        f"{path.name}: the prose states {unlisted}, which no asserting cell of the chapter "
        "contains: assert them from the data they come from (or list them in prose_numbers.yaml "
        "with their kind, if they are not results)"
    )
    stale = sorted(set(allowed) - set(free))
    assert not stale, f"prose_numbers.yaml lists {stale} for {path.stem}, which its prose no longer states untied"


def test_the_registry_says_what_each_listed_number_is():
    chapters = {p.stem for p in chapter_notebooks()}
    assert set(REGISTRY) <= chapters, sorted(set(REGISTRY) - chapters)
    for stem, entries in REGISTRY.items():
        for entry in entries:
            assert set(entry) == {"number", "kind", "why"}, (stem, entry)
            assert entry["kind"] in KINDS, (stem, entry)
            assert len(entry["why"].split()) >= 3, (stem, entry)


def test_the_scanner_finds_what_it_should():
    text = (
        "At most 0.11 at any checkpoint; 90 % of shift; 9.75× the kernel's time; 163,840 tokens; "
        "`0.5` in code; $0.774$ in maths; [a link](13_claims.html#claim-000-05); section 3 of 12."
    )
    assert [w for w, _ in stated(text)] == ["0.11", "90 %", "9.75", "163,840"]
    assert tied("90 %", Decimal(90), {Decimal("0.9")}) and not tied("0.11", Decimal("0.11"), {Decimal("0.16")})
    cell = nbformat.v4.new_code_cell('assert f"{best:.2f}" == "0.11" and n == 163_840')
    assert {Decimal("0.11"), Decimal(163840)} <= asserted(nbformat.v4.new_notebook(cells=[cell]))
