"""The book's pages as listed in _toc.yml, shared by the notebook and site tests: the manifest's."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import manifest  # noqa: E402  (scripts/manifest.py)


def toc_files() -> list[str]:
    """Every page of the table of contents, root first, as paths without suffix."""
    return manifest.toc_files()


def chapter_notebooks() -> list[Path]:
    """The pages that are notebooks: the executable chapters (scripts/manifest.py)."""
    return manifest.chapters()
