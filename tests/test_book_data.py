"""posenc_book's recorded data: found through the package, and in step with the chapters."""

import json

import pytest
from chapters import ROOT, chapter_notebooks

from posenc_book import data_path, recorded
from posenc_book.ledger import chapter_sections, section_id, section_titles


def test_data_path_finds_the_recorded_files():
    for name in ("experiments.json", "claims.yaml", "bad_inputs.yaml", "sections.json"):
        assert data_path(name).is_file()
        assert data_path(name).parent == ROOT / "posenc_book" / "data"


@pytest.mark.parametrize("name", ["", "../README.md", "data/claims.yaml", None, 3])
def test_data_path_rejects_what_is_not_a_file_name(name):
    with pytest.raises(ValueError, match="plain file name"):
        data_path(name)


def test_data_path_names_what_is_available_when_a_file_is_missing():
    with pytest.raises(FileNotFoundError, match=r"no data file 'nope.json'.*available: .*claims\.yaml"):
        data_path("nope.json")


def test_recorded_globs_the_data_folder():
    assert [p.name for p in recorded("*.yaml")] == [
        "bad_inputs.yaml",
        "claims.yaml",
        "claims.zh-hans.yaml",
        "claims.zh-hant.yaml",
        "errata.yaml",
        "errata.zh-hant.yaml",
    ]
    assert recorded("gpu_rope_*.json") == sorted(recorded("gpu_rope_*.json"))


def test_section_ids_are_sphinx_ids():
    assert section_id("Wavelengths from $2\\pi$ to almost $2\\pi \\cdot \\text{base}$") == (
        "wavelengths-from-2-pi-to-almost-2-pi-cdot-text-base"
    )
    assert section_id("1. `rel_shift`, proved") == "rel-shift-proved"
    assert section_titles("# A\n```{code-cell}\n# not a heading\n```\n## B $\\pi$\n") == {"a": "A", "b-pi": "B π"}


def test_section_index_is_in_step_with_the_chapters():
    recorded_sections = chapter_sections()
    twins = {p.stem: (p.parent / "md_src" / f"{p.stem}.md").read_text(encoding="utf-8") for p in chapter_notebooks()}
    assert recorded_sections == {stem: section_titles(text) for stem, text in twins.items()}, (
        "posenc_book/data/sections.json is stale: run make notebooks"
    )
    assert json.loads(data_path("sections.json").read_text(encoding="utf-8")) == recorded_sections
