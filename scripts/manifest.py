"""The book's manifest: its chapters and pages (``_toc.yml``) and its editions (``editions.yaml``).

Every script, test and Makefile rule that needs "the chapters" or "the editions" asks here,
so that adding a chapter is one line in ``_toc.yml`` and the notebook, and adding an edition
one entry in ``posenc_book/data/editions.yaml`` (and its translation). A chapter is a page of the table of
contents that is a notebook; its identity is its file name, wherever the toc places it.

From the shell (the Makefile's lists)::

    python scripts/manifest.py chapters [FOLDER]   # the chapter notebooks of an edition, toc order
    python scripts/manifest.py editions            # the folders of the translated editions
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Edition:
    """One edition: ``folder`` ("" for the English source), ``tag`` (BCP 47), ``sphinx`` (Sphinx's
    ``language``), ``name`` (in its own language), ``english`` (its name in English) and ``source``
    (the edition its text comes from, None for the source itself); ``convert``, for an edition
    converted from another rather than translated, how (see editions.yaml)."""

    folder: str
    tag: str
    sphinx: str
    name: str
    english: str
    source: str | None
    convert: dict | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        """``"en"`` for the source edition, else its folder: how records and tables name it."""
        return self.folder or "en"

    @property
    def book(self) -> Path:
        """The edition's folder of pages and chapters."""
        return ROOT / self.folder / "book" if self.folder else ROOT / "book"


def editions(root: Path = ROOT) -> list[Edition]:
    """Every edition, the source first, as ``posenc_book/data/editions.yaml`` lists them."""
    entries = yaml.safe_load((root / "posenc_book" / "data" / "editions.yaml").read_text(encoding="utf-8"))
    found = [
        Edition(e["folder"], e["tag"], e["sphinx"], e["name"], e["english"], e["from"], e.get("convert"))
        for e in entries
    ]
    if [e.source is None for e in found].count(True) != 1 or found[0].source is not None:
        raise ValueError("editions.yaml must list the source edition (from: null) first, and only once")
    return found


def translations(root: Path = ROOT) -> list[Edition]:
    """The editions other than the source."""
    return editions(root)[1:]


def edition(folder: str, root: Path = ROOT) -> Edition:
    """The edition in ``folder``."""
    found = {e.folder: e for e in editions(root)}
    if folder not in found:
        raise ValueError(f"folder must be an edition's, one of {sorted(found)}; got {folder!r}")
    return found[folder]


def toc_files(root: Path = ROOT) -> list[str]:
    """Every page of the table of contents, root first, as paths without suffix (``book/01_motivation``)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for entry in part.get("chapters", []):
            files.append(entry["file"])
            files.extend(sub["file"] for sub in entry.get("sections", []))
    return files


def _is_chapter(root: Path, page: str) -> bool:
    """A page of ``book/`` is a chapter if it is a notebook, or has a MyST twin that will become one."""
    name = Path(page).name
    return (root / f"{page}.ipynb").exists() or (root / "book" / "md_src" / f"{name}.md").exists()


def chapter_stems(root: Path = ROOT) -> list[str]:
    """The chapters' file names without suffix, in the order of the table of contents."""
    return [Path(f).name for f in toc_files(root) if f.startswith("book/") and _is_chapter(root, f)]


def chapter_number(stem: str, root: Path = ROOT) -> int:
    """A chapter's number: its place among the chapters of the table of contents, from 1.

    The number is never read from the file name: a chapter inserted in ``_toc.yml`` renumbers
    those after it, and their files, links and anchors stay as they are.
    """
    stems = chapter_stems(root)
    if stem not in stems:
        raise ValueError(f"stem must be a chapter of _toc.yml, got {stem!r}; the chapters are {', '.join(stems)}")
    return stems.index(stem) + 1


def chapters(folder: str = "", root: Path = ROOT) -> list[Path]:
    """The chapter notebooks of the edition in ``folder`` ("" for English), in toc order."""
    book = root / folder / "book" if folder else root / "book"
    return [book / f"{stem}.ipynb" for stem in chapter_stems(root)]


def pages(root: Path = ROOT) -> list[str]:
    """The pages of ``book/`` that are not notebooks (the reference pages), in toc order."""
    return [Path(f).name for f in toc_files(root) if f.startswith("book/") and not _is_chapter(root, f)]


def main(argv: list[str]) -> int:
    if argv[:1] == ["chapters"] and len(argv) <= 2:
        print(" ".join(str(p.relative_to(ROOT)) for p in chapters(argv[1] if len(argv) == 2 else "")))
    elif argv == ["editions"]:
        print(" ".join(e.folder for e in translations()))
    else:
        print(__doc__.split("::")[1].strip("\n"), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
