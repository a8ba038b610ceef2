"""The claims ledger, posenc_book/data/claims.yaml: its schema, the quotes (found in the source documents), the
chapters it points to, the sources it cites, and the tests it names, which must exist and pass."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import nbformat
import pytest
import yaml
from docutils.nodes import make_id
from repo import ROOT, toc_files

from posenc_book.ledger import SOURCES

LEDGER = ROOT / "posenc_book" / "data" / "claims.yaml"
CLAIMS = yaml.safe_load(LEDGER.read_text(encoding="utf-8"))
IDS = [claim["id"] for claim in CLAIMS]
SEEDS = ("000", "001", "002", "003", "004")
VERDICTS = ("correct", "wrong", "imprecise", "untestable")
REQUIRED = {"id", "seed", "location", "quote", "translation", "claim", "verdict", "reason", "chapter", "test"}
OPTIONAL = {"source", "pending"}
NODE_ID = re.compile(r"^(tests/(?:\w+/)+test_\w+\.py)::(test_\w+)$")
CHAPTER = re.compile(r"^([a-z0-9_]+)(?:#([a-z0-9-]+))?$")
LOCATION = re.compile(r"^(?P<where>\S.*), lines? (?P<first>\d+)(?:-(?P<last>\d+))?$")
BIB_KEYS = set(re.findall(r"^@\w+\{([^,\s]+),", (ROOT / "book" / "references.bib").read_text(encoding="utf-8"), re.M))


def seeds_dir() -> Path | None:
    """The five source documents, NNN_<hash>.txt: $POSENC_SEEDS, or the shared folder beside the checkout."""
    for folder in (os.environ.get("POSENC_SEEDS"), ROOT.parent / "shared" / "seeds", ROOT / "seeds"):
        if folder and all(len(list(Path(folder).glob(f"{seed}_*.txt"))) == 1 for seed in SEEDS):
            return Path(folder)
    return None


def normalise(text: str) -> str:
    """Runs of whitespace (line breaks included) become one space; nothing else changes."""
    return " ".join(text.split())


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
        assert REQUIRED <= set(claim) <= REQUIRED | OPTIONAL, (claim.get("id"), set(claim) ^ REQUIRED)
        for key in ("id", "seed", "location", "quote", "translation", "claim", "reason", "chapter"):
            assert isinstance(claim[key], str) and claim[key].strip(), (claim["id"], key)
        assert LOCATION.match(claim["location"]), (claim["id"], claim["location"], "want '<section>, line N'")
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


@pytest.mark.parametrize("claim", CLAIMS, ids=IDS)
def test_quote_is_the_seed_text_at_its_location(claim):
    """The quote occurs verbatim (whitespace aside) in its document, on the lines its location names."""
    quote = normalise(claim["quote"])
    assert re.search(r"[\u4e00-\u9fff]", claim["quote"]) or re.search(r"[=(#|]", quote), (
        f"{claim['id']}: quote the document's own Chinese sentence, formula or line of code"
    )
    folder = seeds_dir()
    if folder is None:
        pytest.skip("the source documents are not here: set POSENC_SEEDS to the folder of 000_*.txt ... 004_*.txt")
    (path,) = folder.glob(f"{claim['seed']}_*.txt")
    text = path.read_text(encoding="utf-8")
    assert quote in normalise(text), f"{claim['id']}: quote not found in {path.name}: {claim['quote']!r}"
    match = LOCATION.match(claim["location"])
    first, last = int(match["first"]), int(match["last"] or match["first"])
    lines = text.splitlines()
    assert 1 <= first <= last <= len(lines), (claim["id"], claim["location"])
    assert quote in normalise(" ".join(lines[first - 1 : last])), (
        f"{claim['id']}: the quote is not on line(s) {first}-{last} of {path.name}"
    )
    assert quote not in normalise(" ".join(lines[first:last])), f"{claim['id']}: it starts after line {first}"


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
def test_verdicts_name_what_decides_them(claim):
    """A verdict other than untestable names a test, a source or both; an untestable one names neither."""
    source = claim.get("source")
    if source is not None:
        assert isinstance(source, str) and source in BIB_KEYS, f"{claim['id']}: no entry {source!r} in references.bib"
    if not is_testable(claim):
        assert claim["test"] is None and source is None and not claim.get("pending"), (
            f"{claim['id']}: untestable means neither a test nor a source decides it"
        )
        return
    if claim.get("pending"):
        assert claim["test"] is None, f"{claim['id']}: pending claims name their test once decided"
        return
    assert claim["test"] is not None or source is not None, f"{claim['id']}: name a test or a source"
    if claim["test"] is None:
        return
    match = NODE_ID.match(claim["test"])
    assert match, f"{claim['id']}: test must be a node id tests/<folder>/test_x.py::test_name, got {claim['test']!r}"
    path = ROOT / match.group(1)
    assert path.exists(), f"{claim['id']}: no file {match.group(1)}"
    assert path.name != Path(__file__).name, "the ledger cannot be decided by its own checks"
    functions = {
        node.name for node in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(node, ast.FunctionDef)
    }
    assert match.group(2) in functions, f"{claim['id']}: {match.group(1)} defines no {match.group(2)}"


def test_some_verdicts_rest_on_the_literature_alone():
    literature = [c["id"] for c in CLAIMS if is_testable(c) and c["test"] is None]
    assert literature and all(CLAIMS[IDS.index(i)]["source"] for i in literature)


def test_the_test_fields_are_the_markers_of_the_tests():
    """Each claim's test is declared by @pytest.mark.claim on the test; claims.yaml's field follows it."""
    import claim_tests

    text = (ROOT / "posenc_book" / "data" / "claims.yaml").read_text(encoding="utf-8")
    marked = claim_tests.marked_tests()
    assert claim_tests.problems(text, marked) == []
    assert claim_tests.written(text, marked) == text, "run python scripts/claim_tests.py"
    assert {c["id"]: c["test"] for c in CLAIMS if c["test"]} == {c: t[0] for c, t in marked.items()}
    # moving a test moves its claims: the rewrite follows the marker, and a marker twice is an error
    moved = {c: ["tests/elsewhere/test_moved.py::test_x"] if c == "000-01" else t for c, t in marked.items()}
    assert "  test: tests/elsewhere/test_moved.py::test_x\n" in claim_tests.written(text, moved)
    twice = {**marked, "000-01": ["tests/a.py::test_a", "tests/b.py::test_b"], "999-99": ["tests/c.py::test_c"]}
    assert claim_tests.problems(text, twice) == [
        "claim 000-01 is marked by 2 tests: tests/a.py::test_a, tests/b.py::test_b",
        "tests/c.py::test_c is marked with claim 999-99, not in the ledger",
    ]


def test_a_claim_test_that_fails_or_skips_fails_the_whole_run():
    """tests/conftest.py records how each claim test ended in the run and fails the run if one did
    not pass; a run that left some out (a file, a -k) is not judged."""
    import claim_tests

    marked = {"000-01": ["tests/test_a.py::test_x"], "000-02": ["tests/test_b.py::test_y"]}
    passed = {"tests/test_a.py::test_x": {"passed"}, "tests/test_b.py::test_y": {"passed"}}
    assert claim_tests.outcome_problems(passed, marked) == []
    skipped = {**passed, "tests/test_b.py::test_y": {"passed", "skipped"}}
    assert claim_tests.outcome_problems(skipped, marked) == ["tests/test_b.py::test_y: skipped"]
    assert claim_tests.outcome_problems({"tests/test_a.py::test_x": {"failed"}}, marked) is None
    # and in this run: every test the ledger names exists, so the run of the suite judges them all
    node_ids = sorted({test for tests in claim_tests.marked_tests().values() for test in tests})
    assert len(node_ids) >= 45
    for node_id in node_ids:
        path, name = node_id.split("::")
        assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), node_id


def test_the_chapter_shows_every_claim():
    nb = nbformat.read(ROOT / "book" / "13_claims.ipynb", as_version=4)
    html = "\n".join(
        str(output.get("data", {}).get("text/html", ""))
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )
    missing = [i for i in IDS if f'id="claim-{i}"' not in html]
    assert not missing, f"claims missing from the committed ledger (13_claims): {missing}; re-run it"
    source = (ROOT / "book" / "md_src" / "13_claims.md").read_text(encoding="utf-8")
    assert 'data_path("claims.yaml")' in source


def test_every_source_has_a_label_with_its_year():
    """The ledger shows a source as author and year; the label's year is the bibliography's."""
    bib = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    for key in {c["source"] for c in CLAIMS if c.get("source")}:
        assert key in SOURCES, f"add a label for {key} to posenc_book.ledger.SOURCES"
        year = re.search(rf"@\w+\{{{key},.*?year\s*=\s*\{{(\d{{4}})\}}", bib, re.S).group(1)
        assert SOURCES[key].endswith(year), (key, SOURCES[key], year)


def chinese_quotes() -> list[tuple[str, str, str, str]]:
    """(edition, page, document, quote) for every quotation of a source in the Chinese editions."""
    from posenc_book.i18n import source_quotes

    found = []
    for lang in ("zh-hans", "zh-hant"):
        for path in sorted((ROOT / lang / "book").glob("*.ipynb")):
            for cell in nbformat.read(path, as_version=4).cells:
                if cell.cell_type == "markdown":
                    found += [(lang, path.stem, doc, m["quote"]) for doc, m in source_quotes(cell.source, lang)]
        for path in sorted((ROOT / lang / "book").glob("*.md")):
            text = path.read_text(encoding="utf-8")
            found += [(lang, path.stem, doc, m["quote"]) for doc, m in source_quotes(text, lang)]
    return found


QUOTES = chinese_quotes()


def test_the_chinese_editions_quote_the_sources_alike():
    """Both editions quote: the Traditional edition's quotations are the Simplified one's, not
    converted (a quotation is the document's sentence in its own script)."""
    hans = [(page, doc, quote) for lang, page, doc, quote in QUOTES if lang == "zh-hans"]
    hant = [(page, doc, quote) for lang, page, doc, quote in QUOTES if lang == "zh-hant"]
    assert len(hans) >= 25 and hans == hant


@pytest.mark.parametrize("lang, page, document, quote", [q for q in QUOTES if q[0] == "zh-hans"])
def test_a_chinese_quotation_is_the_sources_sentence_as_written(lang, page, document, quote):
    """Where a Chinese page quotes a source (“…” after its 《name》), the quotation is in the
    document, verbatim (whitespace aside), as the ledger's quotes are."""
    folder = seeds_dir()
    if folder is None:
        pytest.skip("the source documents are not here: set POSENC_SEEDS to the folder of 000_*.txt ... 004_*.txt")
    (path,) = folder.glob(f"{document}_*.txt")
    assert normalise(quote) in normalise(path.read_text(encoding="utf-8")), (
        f"{lang}/book/{page}: the quotation of {path.name} is not its own sentence: {quote!r}"
    )
