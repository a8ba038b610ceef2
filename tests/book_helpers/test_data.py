"""posenc_book's recorded data: found through the package, and in step with the chapters."""

import json

import pytest
import torch
from repo import ROOT, chapter_notebooks

from posenc.benchmark import TOLERANCE
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
        "editions.yaml",
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


@pytest.mark.parametrize("path", recorded("gpu_rope_*.json"), ids=lambda p: p.stem)
def test_recorded_gpu_runs_hold_what_chapter_12_says_of_them(path):
    """Chapter 12's words on each recorded GPU run: real CUDA data, every result within the
    dtype's tolerance of float64, the eager paths nine times the fused kernel's time or more
    at the longest sequences, and the default backend on a GPU within 1.5x of the kernel."""
    result = json.loads(path.read_text(encoding="utf-8"))
    assert result["synthetic"] is False and result["device"]["type"] == "cuda"
    assert result["copy"]["gbps"] > 1000  # an H100 or H200 copies at terabytes per second
    ok = [r for r in result["results"] if r["status"] == "ok"]
    tolerance = TOLERANCE[getattr(torch, result["dtype"])]
    assert all(r["rel_err"] <= tolerance for r in ok)
    rope = [r for r in ok if r["op"] == "rope"]
    longest = max(r["seq_len"] for r in rope)
    at = {(r["impl"], r["batch"]): r["ms"] for r in rope if r["seq_len"] == longest}
    for batch in {b for _, b in at}:
        fused = at["posenc_triton", batch]
        for eager in ("naive", "posenc_torch", "transformers"):
            assert at[eager, batch] > 9 * fused, (path.name, eager, batch)
        assert at["posenc_apply", batch] < 1.5 * fused, (path.name, batch)
