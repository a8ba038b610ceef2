"""Re-execute chapters top to bottom in place and sync their MyST twins.

Usage: python scripts/run_notebooks.py [--prefer md|ipynb] [CHAPTER ...]
       python scripts/run_notebooks.py --check   # exit 1 naming what a run would change

A chapter is ``book/NN_name.ipynb`` paired with ``book/md_src/NN_name.md``
(jupytext formats ``ipynb,md_src//md:myst``). Either file may have been
edited. Each run records a fingerprint of the cells it wrote in the notebook's
metadata (``posenc.synced_cells``); the side whose cells differ from that
fingerprint is the edited one and provides the cells. If both sides were edited
(or a notebook carries no fingerprint and the two disagree), the script stops
and names both files instead of discarding one side's edits; ``--prefer md`` or
``--prefer ipynb`` then says which wins. File times are not used: a checkout
sets them arbitrarily. The notebook is then executed in a fresh kernel with ``book/`` as the working
directory, saved with its outputs (execution counts 1, 2, 3, ...), and the
twin is rewritten from it. With no arguments every chapter is processed. First, the
section headings of every chapter are recorded for the claims ledger
(``posenc_book/data/sections.json``).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

from posenc_book.data import DATA
from posenc_book.ledger import section_titles

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling scripts
import manifest  # noqa: E402

FORMATS = "ipynb,md_src//md:myst"
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def twin_of(ipynb: Path) -> Path:
    return ipynb.parent / "md_src" / (ipynb.stem + ".md")


def all_chapters() -> list[Path]:
    """The English chapters of the table of contents (a MyST twin without its notebook counts)."""
    return manifest.chapters()


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


class EditConflict(Exception):
    """Both a notebook and its twin were edited since they were last synchronised."""


def fingerprint(nb: nbformat.NotebookNode) -> str:
    """A hash of what both files hold: each cell's type, source, tags and MyST-NB settings
    (folding prompts, a figure's alt text and caption)."""
    cells = [
        [c.cell_type, c.source, sorted(c.get("metadata", {}).get("tags", [])), c.get("metadata", {}).get("mystnb", {})]
        for c in nb.cells
    ]
    return hashlib.sha256(json.dumps(cells, ensure_ascii=False).encode()).hexdigest()


def load_cells(ipynb: Path, prefer: str | None = None) -> nbformat.NotebookNode:
    """The chapter's cells: from the side that was edited since the last run (see the module docstring)."""
    md = twin_of(ipynb)
    if not md.exists():
        return jupytext.read(ipynb)
    if not ipynb.exists():
        return jupytext.read(md)
    from_nb, from_md = jupytext.read(ipynb), jupytext.read(md)
    now_nb, now_md = fingerprint(from_nb), fingerprint(from_md)
    if now_nb == now_md or prefer == "ipynb":
        return from_nb
    if prefer == "md":
        return from_md
    synced = from_nb.metadata.get("posenc", {}).get("synced_cells")
    if synced == now_nb:  # only the twin changed
        return from_md
    if synced == now_md:  # only the notebook changed
        return from_nb
    raise EditConflict(
        f"{_shown(ipynb)} and {_shown(md)} were both edited"
        + ("" if synced else " (or the notebook has no record of its last run)")
        + "; merge the edits into one of them, or pass --prefer md or --prefer ipynb"
    )


def write_sections(prefer: str | None = None) -> Path:
    """Record every chapter's section headings for the claims ledger (13_claims)."""
    sections = {
        ipynb.stem: section_titles(jupytext.writes(load_cells(ipynb, prefer), fmt="md:myst"))
        for ipynb in all_chapters()
    }
    path = DATA / "sections.json"
    path.write_text(json.dumps(sections, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def merge_streams(outputs: list) -> list:
    """Join consecutive stdout (or stderr) chunks: where the kernel split them is timing."""
    merged = []
    for out in outputs:
        if (
            out.output_type == "stream"
            and merged
            and merged[-1].output_type == "stream"
            and merged[-1].name == out.name
        ):
            merged[-1].text += out.text
        else:
            merged.append(out)
    return merged


def run(ipynb: Path, prefer: str | None = None) -> float:
    nb = load_cells(ipynb, prefer)
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata["posenc"] = {"synced_cells": fingerprint(nb)}
    nb.metadata.setdefault("jupytext", {})["formats"] = FORMATS
    for number, cell in enumerate(nb.cells):
        cell.id = f"cell-{number:03d}"  # stable ids keep diffs to what changed
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cell.metadata.pop("execution", None)
    start = time.perf_counter()
    NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(ipynb.parent)}},
    ).execute()
    elapsed = time.perf_counter() - start
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = merge_streams(cell.outputs)
    nbformat.write(nb, ipynb)
    md = twin_of(ipynb)
    md.parent.mkdir(exist_ok=True)
    # from the file as written: nbformat sorts metadata keys, and the twin must match it
    md.write_text(jupytext.writes(jupytext.read(ipynb), fmt="md:myst"), encoding="utf-8")
    return elapsed


def stale() -> list[str]:
    """What a run would change: chapters whose notebook and twin differ, or that were edited
    since their last run, and ``sections.json`` out of step with the twins (``--check``)."""
    found = []
    for ipynb in all_chapters():
        md = twin_of(ipynb)
        if not (ipynb.exists() and md.exists()):
            found.append(f"{_shown(ipynb)}: the notebook or its twin is missing")
            continue
        nb = jupytext.read(ipynb)
        now = fingerprint(nb)
        if now != fingerprint(jupytext.read(md)) or nb.metadata.get("posenc", {}).get("synced_cells") != now:
            found.append(f"{_shown(ipynb)}: edited since its last run")
    sections = {ipynb.stem: section_titles(twin_of(ipynb).read_text(encoding="utf-8")) for ipynb in all_chapters()}
    recorded = DATA / "sections.json"
    if not recorded.exists() or json.loads(recorded.read_text(encoding="utf-8")) != sections:
        found.append(f"{_shown(recorded)}: out of step with the chapters' headings")
    return found


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        found = stale()
        print("\n".join(found) or "every chapter is as its last run left it")
        return 1 if found else 0
    prefer = None
    if argv[:1] == ["--prefer"]:
        if len(argv) < 2 or argv[1] not in ("md", "ipynb"):
            print("--prefer takes md or ipynb", file=sys.stderr)
            return 2
        prefer, argv = argv[1], argv[2:]
    chapters = [Path(a).resolve() for a in argv] or all_chapters()
    chapters = [p.parent.parent / (p.stem + ".ipynb") if p.suffix == ".md" else p for p in chapters]
    try:  # a conflict is reported before anything is written
        for ipynb in chapters:
            load_cells(ipynb, prefer)
        print(f"{write_sections(prefer).relative_to(ROOT)} written")
    except EditConflict as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for ipynb in chapters:
        print(f"{ipynb.relative_to(ROOT)} ...", end=" ", flush=True)
        print(f"{run(ipynb, prefer):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
