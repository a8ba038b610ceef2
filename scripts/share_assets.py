"""Let the Chinese editions use the English edition's static files and figures.

Usage: python scripts/share_assets.py [SITE]   (default: _build/html)

The three editions are built separately, so each has its own ``_static/`` (the theme,
MathJax: about 13 MiB) and ``_images/`` (the figures, the same PNG files, since the
outputs are the same). After the build, every file of ``SITE/zh-*/_static`` and
``SITE/zh-*/_images`` that is byte for byte the English edition's is removed, and the
edition's pages point one folder up, to the English copy. Files that differ (the
language's search settings and interface strings) stay in the edition.
"""

from __future__ import annotations

import filecmp
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling scripts
import manifest  # noqa: E402

EDITIONS = tuple(e.folder for e in manifest.translations())
SHARED = ("_static", "_images")
REFERENCE = re.compile(r'((?:src|href)=")((?:\.\./)*)((?:_static|_images)/[^"?#]+)')


def shared_files(site: Path, edition: str) -> set[str]:
    """Remove the edition's copies of English files; return their paths (``_static/…``)."""
    removed = set()
    for folder in SHARED:
        for path in sorted((site / edition / folder).rglob("*")):
            relative = path.relative_to(site / edition).as_posix()
            english = site / relative
            if path.is_file() and english.is_file() and filecmp.cmp(path, english, shallow=False):
                path.unlink()
                removed.add(relative)
        for folder_path in sorted((site / edition / folder).rglob("*"), reverse=True):
            if folder_path.is_dir() and not any(folder_path.iterdir()):
                folder_path.rmdir()
    return removed


def repoint(page: Path, depth: int, removed: set[str]) -> str:
    """The page with its references to removed files sent to the English edition's copy."""

    def one(match: re.Match) -> str:
        attribute, ups, target = match.groups()
        if len(ups) // 3 != depth or target not in removed:
            return match.group(0)
        return f"{attribute}{ups}../{target}"

    return REFERENCE.sub(one, page.read_text(encoding="utf-8"))


def drop_unused_catalogues(site: Path) -> None:
    """Remove each edition's ``_static/locales``: the theme's interface strings in 46 languages
    (about 0.7 MiB). Sphinx compiles the strings into the pages when it builds them; no page
    loads these copies."""
    for root in (site, *(site / edition for edition in EDITIONS)):
        shutil.rmtree(root / "_static" / "locales", ignore_errors=True)


MAP_COMMENT = re.compile(r"\n?(?://|/\*)# sourceMappingURL=[^\s*]+\.map(?:\s*\*/)?\s*$")


def drop_source_maps(site: Path) -> None:
    """Remove the theme's source maps (``*.js.map``, ``*.css.map``: about 3.4 MiB per edition),
    which only a browser's developer tools read, and the comments that point to them, so that
    no request goes to a file that is not there."""
    for root in (site, *(site / edition for edition in EDITIONS)):
        static = root / "_static"
        for source_map in static.rglob("*.map"):
            bundle = source_map.with_suffix("")
            if bundle.suffix in (".js", ".css") and bundle.is_file():
                text = bundle.read_text(encoding="utf-8")
                bundle.write_text(MAP_COMMENT.sub("", text), encoding="utf-8")
            source_map.unlink()


def share(site: Path) -> int:
    drop_unused_catalogues(site)
    drop_source_maps(site)
    total = 0
    for edition in EDITIONS:
        root = site / edition
        removed = shared_files(site, edition)
        total += len(removed)
        for page in root.rglob("*.html"):
            depth = len(page.relative_to(root).parts) - 1
            text = repoint(page, depth, removed)
            page.write_text(text, encoding="utf-8")
        missing = [
            f"{page.relative_to(site)}: {target}"
            for page in root.rglob("*.html")
            for _, ups, target in REFERENCE.findall(page.read_text(encoding="utf-8"))
            if not (page.parent / ups / target).resolve().is_file()
        ]
        if missing:
            raise SystemExit(f"references to files that do not exist: {missing[:5]}")
    return total


if __name__ == "__main__":
    site = Path(sys.argv[1] if len(sys.argv) > 1 else "_build/html")
    print(f"{share(site)} static files and figures shared with the English edition")
