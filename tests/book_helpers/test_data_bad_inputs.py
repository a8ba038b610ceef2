"""Every entry of posenc_book/data/bad_inputs.yaml raises the stated exception with a message that says why."""

from __future__ import annotations

import builtins
import re

import pytest
import yaml
from repo import ROOT, extension

import posenc
from posenc_book import bad_input_namespace

CATALOG_PATH = ROOT / "posenc_book" / "data" / "bad_inputs.yaml"
CATALOG = yaml.safe_load(CATALOG_PATH.read_text(encoding="utf-8"))
EXCEPTIONS = {"ValueError": ValueError, "TypeError": TypeError, "IndexError": IndexError}


def namespace() -> dict:
    """What an entry's call can see: torch and the public API (the library's and the experiments'), nothing else."""
    return bad_input_namespace()


def test_catalog_is_well_formed():
    assert isinstance(CATALOG, list) and len(CATALOG) >= 50
    calls = [entry["call"] for entry in CATALOG]
    assert len(set(calls)) == len(calls), "duplicate calls in the catalog"
    for entry in CATALOG:
        assert set(entry) == {"call", "raises", "match"}, entry
        assert entry["raises"] in EXCEPTIONS, entry
        re.compile(entry["match"])
        compile(entry["call"], "<catalog>", "eval")


#: Public callables that take no argument that could be wrong.
NOTHING_TO_CHECK = {
    "PositionScheme": "a base class whose hooks are no-ops; it takes no arguments",
    "TaskBatch": "a frozen record of two tensors",
    "position_schemes": "takes no arguments",
}


def test_names_without_entries_are_public():
    assert set(NOTHING_TO_CHECK) <= set(namespace())


def test_every_public_callable_has_an_entry():
    # the library's names, and the experiments' main ones (those the root used to re-export)
    public = set(posenc.__all__) | set(posenc._MOVED_TO_EXPERIMENTS)
    callables = {name for name in public if callable(namespace()[name])} - set(NOTHING_TO_CHECK)
    called = {name for entry in CATALOG for name in re.findall(r"\b([A-Za-z_]\w*)\s*\(", entry["call"])}
    missing = sorted(callables - called)
    assert not missing, f"public names without a bad-input entry in {CATALOG_PATH.name}: {missing}"


@pytest.mark.parametrize("entry", CATALOG, ids=[entry["call"] for entry in CATALOG])
def test_bad_input_raises_with_a_clear_message(entry):
    expected = EXCEPTIONS[entry["raises"]]
    with pytest.raises(expected, match=entry["match"]) as info:
        eval(entry["call"], namespace())
    assert type(info.value) is expected  # not a subclass such as a torch error type
    message = str(info.value)
    assert "\n" not in message.strip(), "one-line messages"
    assert not message.startswith("The size of tensor"), "a broadcasting error escaped from torch"


def test_names_in_calls_are_public():
    allowed = set(namespace()) | set(dir(builtins))
    for entry in CATALOG:
        names = set(re.findall(r"(?<![.\w])([A-Za-z_]\w*)\s*\(", entry["call"]))
        assert names <= allowed, (entry["call"], names - allowed)


def test_the_chapter_renders_this_catalog():
    source = (ROOT / "book" / "md_src" / "10_pytorch.md").read_text(encoding="utf-8")
    assert 'data_path("bad_inputs.yaml")' in source


def test_appendix_page_shows_every_entry_once():
    """book/bad_inputs.md renders the catalog by family; no entry is lost or shown twice."""

    module = extension("bad_input_table")
    families = module.families(CATALOG_PATH.read_text(encoding="utf-8"))
    shown = [entry["call"] for _, entries in families for entry in entries]
    assert shown == [entry["call"] for entry in CATALOG]
    assert len(families) >= 10 and all(title for title, _ in families)
    page = (ROOT / "book" / "bad_inputs.md").read_text(encoding="utf-8")
    assert "```{bad-input-catalog} posenc_book/data/bad_inputs.yaml" in page
