"""The book's pages as listed in _toc.yml, shared by the notebook and site tests."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_files() -> list[str]:
    """Every page of the table of contents, root first, as paths without suffix."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for entry in part.get("chapters", []):
            files.append(entry["file"])
            files.extend(sub["file"] for sub in entry.get("sections", []))
    return files


def chapter_notebooks() -> list[Path]:
    """The pages that are notebooks: the executable chapters."""
    return [ROOT / f"{f}.ipynb" for f in toc_files() if (ROOT / f"{f}.ipynb").exists()]
