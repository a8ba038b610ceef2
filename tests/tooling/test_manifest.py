"""scripts/manifest.py: the chapters and pages of _toc.yml and the editions of editions.yaml, declared once."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from repo import ROOT, manifest

from posenc_book import i18n


def test_the_chapters_are_the_notebooks_of_the_toc_in_every_edition():
    stems = manifest.chapter_stems()
    assert len(set(stems)) == len(stems) and len(stems) >= 13, stems
    # within each part of the toc the chapters come in the order of their numbers (the claims
    # ledger, 13, is a reference page after the "Going further" part)
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    for part in toc["parts"]:
        in_part = [Path(c["file"]).name for c in part["chapters"] if Path(c["file"]).name in stems]
        assert in_part == sorted(in_part), part["caption"]
    assert [p.stem for p in manifest.chapters()] == stems
    for edition in manifest.editions():
        assert [p for p in manifest.chapters(edition.folder) if not p.exists()] == []
        assert {p.stem for p in edition.book.glob("*.ipynb")} == set(stems), edition.folder
    assert set(manifest.pages()) >= {"intro", "api", "glossary", "errata", "status"}
    assert not set(manifest.pages()) & set(stems)


def test_the_editions_are_read_by_every_consumer_from_one_file():
    editions = manifest.editions()
    assert [e.key for e in editions] == ["en", "zh-hans", "zh-hant"]
    assert [e.source for e in editions] == [None, "en", "zh-hans"]
    assert i18n.LANGUAGES == tuple(e.key for e in editions)
    assert i18n.LANGUAGE_NAMES == {e.key: e.name for e in editions}
    for edition in manifest.translations():
        config = (ROOT / edition.folder / "_config.yml").read_text(encoding="utf-8")
        assert f"language: {edition.sphinx}" in config, edition.folder


def test_the_command_line_gives_the_makefile_its_lists():
    run = [sys.executable, "scripts/manifest.py"]
    done = subprocess.run([*run, "chapters", "zh-hant"], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split() == [f"zh-hant/book/{s}.ipynb" for s in manifest.chapter_stems()]
    done = subprocess.run([*run, "editions"], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split() == ["zh-hans", "zh-hant"]
    done = subprocess.run([*run, "nothing"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "manifest.py chapters" in done.stderr


def test_a_new_chapter_is_a_notebook_twin_and_one_toc_line(tmp_path):
    """Adding a chapter: write its MyST twin, add one line to _toc.yml; the manifest lists it
    (run_notebooks.py then makes the notebook), whatever its file name."""
    (tmp_path / "posenc_book" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "posenc_book" / "data" / "editions.yaml", tmp_path / "posenc_book" / "data")
    (tmp_path / "book" / "md_src").mkdir(parents=True)
    (tmp_path / "book" / "md_src" / "position_interpolation.md").write_text("# PI\n")
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    (tmp_path / "_toc.yml").write_text(
        "root: book/intro\nparts:\n- caption: Chapters\n  chapters:\n  - file: book/position_interpolation\n"
    )
    assert manifest.chapter_stems(tmp_path) == ["position_interpolation"]
    assert manifest.pages(tmp_path) == ["intro"]
    assert manifest.chapter_number("position_interpolation", tmp_path) == 1


def test_a_chapters_number_is_its_place_in_the_toc_never_its_file_name(tmp_path):
    """Chapter numbers on the site (ledger, errata, status page) come from the toc's order: a
    chapter inserted before 01_motivation makes it chapter 2 without renaming a file."""
    stems = manifest.chapter_stems()
    assert [manifest.chapter_number(s) for s in stems] == list(range(1, len(stems) + 1))
    (tmp_path / "posenc_book" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "posenc_book" / "data" / "editions.yaml", tmp_path / "posenc_book" / "data")
    (tmp_path / "book" / "md_src").mkdir(parents=True)
    for stem in ("a_new_opening", "01_motivation"):
        (tmp_path / "book" / "md_src" / f"{stem}.md").write_text("# x\n")
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    (tmp_path / "_toc.yml").write_text(
        "root: book/intro\nparts:\n- caption: Chapters\n  chapters:\n"
        "  - file: book/a_new_opening\n  - file: book/01_motivation\n"
    )
    assert manifest.chapter_number("01_motivation", tmp_path) == 2
    with pytest.raises(ValueError, match="stem must be a chapter of _toc.yml, got 'intro'"):
        manifest.chapter_number("intro", tmp_path)


def test_an_editions_file_without_its_source_first_is_refused(tmp_path):
    (tmp_path / "posenc_book" / "data").mkdir(parents=True)
    (tmp_path / "posenc_book" / "data" / "editions.yaml").write_text(
        "- {folder: zh-hans, tag: zh-Hans, sphinx: zh_CN, name: 简体中文, english: Simplified Chinese, from: en}\n"
    )
    with pytest.raises(ValueError, match="source edition"):
        manifest.editions(tmp_path)


@pytest.mark.parametrize("folder", ["scripts", "tests", "book/_ext"])
def test_no_tool_finds_the_chapters_by_their_numbered_names(folder):
    pattern = "[0-9]" + "[0-9]_"
    offenders = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / folder).rglob("*.py"))
        if pattern in p.read_text(encoding="utf-8")
    ]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert offenders == [] and pattern not in makefile, "ask scripts/manifest.py for the chapters"


def _generate():

    import generate as module

    return module


def test_one_pipeline_names_every_writer_in_order():
    """make notebooks runs scripts/generate.py: each generator once, the ledger's test fields and
    the twins before the notebooks run, the editions after them (each --check is its own test)."""
    generate = _generate()
    scripts = [script for script, _ in generate.STEPS]
    assert scripts == ["claim_tests.py", "sync_repo_url.py", "fold_checks.py", "run_notebooks.py", "editions.py"]
    for script in scripts:
        assert "--check" in (ROOT / "scripts" / script).read_text(encoding="utf-8"), script
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\nnotebooks:", 1)[1].split("\n\n", 1)[0]
    assert "scripts/generate.py" in recipe and "run_notebooks.py" not in recipe


def test_the_pipeline_check_names_the_stale_step_and_stops_a_run_at_a_failure(tmp_path, monkeypatch, capsys):
    generate = _generate()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "fresh.py").write_text("import sys; sys.exit(0)\n")
    (tmp_path / "scripts" / "stale.py").write_text("print('book/x.ipynb: edited since its last run'); exit(1)\n")
    (tmp_path / "scripts" / "after.py").write_text("open('ran', 'w').write('yes')\n")
    monkeypatch.setattr(generate, "ROOT", tmp_path)
    monkeypatch.setattr(generate, "STEPS", (("fresh.py", "a"), ("stale.py", "b"), ("after.py", "c")))
    assert generate.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "scripts/stale.py (b): book/x.ipynb: edited since its last run" in out and "fresh.py" not in out
    (tmp_path / "ran").unlink()  # every check runs
    assert generate.main([]) == 1 and not (tmp_path / "ran").exists()
    assert generate.main(["--bogus"]) == 2
