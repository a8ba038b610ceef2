"""scripts/release.py: one version for the book and the package, a changelog section and
errata per release, metadata for a DOI."""

import json
import shutil

import release  # noqa: E402
import yaml
from repo import ROOT

FILES = (
    "posenc/_version.py",
    "pyproject.toml",
    "CITATION.cff",
    "CHANGELOG.md",
    ".zenodo.json",
    "posenc_book/data/errata.yaml",
)


def copy_tree(tmp_path):
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_the_book_and_the_package_state_one_version():
    found = release.versions()
    assert len(set(found.values())) == 1 and release.VERSION.fullmatch(found["pyproject.toml"])


def test_prepare_writes_the_version_everywhere_and_check_then_passes(tmp_path):
    root = copy_tree(tmp_path)
    assert release.check("v9.8.7", root)  # nothing says 9.8.7 yet
    release.prepare("9.8.7", "2027-02-03", root)
    assert release.check("v9.8.7", root) == []
    assert set(release.versions(root).values()) == {"9.8.7"}
    changelog = (root / "CHANGELOG.md").read_text()
    assert "## Unreleased\n\n## 9.8.7 (2027-02-03)\n" in changelog
    assert yaml.safe_load((root / "CITATION.cff").read_text())["date-released"] == "2027-02-03"
    errata = yaml.safe_load((root / "posenc_book/data/errata.yaml").read_text())
    assert errata and all(entry["since"] != "unreleased" for entry in errata)
    assert release.check("v9.8.8", root) and release.check("9.8.7", root) == ["the tag '9.8.7' is not vX.Y.Z"]


def test_the_release_notes_are_the_changelog_section():
    notes = release.notes("0.2.0")
    assert notes.startswith("Runs anywhere") and "## 0.1.0" not in notes and "### Fixed" in notes


def test_zenodo_and_citation_agree():
    zenodo = json.loads((ROOT / ".zenodo.json").read_text())
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert zenodo["title"] == citation["title"] and zenodo["license"] == citation["license"] == "MIT"
    assert [c["name"] for c in zenodo["creators"]] == [a["name"] for a in citation["authors"]]
    assert zenodo["upload_type"] == "software" and "version" not in zenodo


def test_every_errata_entry_is_complete_and_translated():
    entries = yaml.safe_load((ROOT / "posenc_book/data/errata.yaml").read_text())
    pages = {p.stem for p in (ROOT / "book").glob("*.md")} | {p.stem for p in (ROOT / "book").glob("*.ipynb")}
    for entry in entries:
        assert entry["page"] in pages and entry["found"] in ("ledger", "audit", "review")
        assert entry["since"] == "unreleased" or release.VERSION.fullmatch(entry["since"])
        for texts in (entry, entry["zh"]):
            assert texts["said"].strip() and texts["right"].strip() and "|" not in texts["said"] + texts["right"]
