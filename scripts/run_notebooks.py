"""Re-execute chapters top to bottom in place and sync their MyST twins.

Usage: python scripts/run_notebooks.py [CHAPTER ...]

A chapter is ``book/NN_name.ipynb`` paired with ``book/md_src/NN_name.md``
(jupytext formats ``ipynb,md_src//md:myst``). Either file may have been
edited: the newer one provides the cells, as with ``jupytext --sync``. The
notebook is then executed in a fresh kernel with ``book/`` as the working
directory, saved with its outputs (execution counts 1, 2, 3, ...), and the
twin is rewritten from it. With no arguments every chapter is processed. First, the
section headings of every chapter are recorded for the claims ledger
(``posenc_book/data/sections.json``).
"""

from __future__ import annotations

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
FORMATS = "ipynb,md_src//md:myst"
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def twin_of(ipynb: Path) -> Path:
    return ipynb.parent / "md_src" / (ipynb.stem + ".md")


def all_chapters() -> list[Path]:
    stems = {p.stem for p in BOOK.glob("[0-9][0-9]_*.ipynb")}
    stems |= {p.stem for p in (BOOK / "md_src").glob("[0-9][0-9]_*.md")}
    return [BOOK / f"{stem}.ipynb" for stem in sorted(stems)]


def load_cells(ipynb: Path) -> nbformat.NotebookNode:
    md = twin_of(ipynb)
    if md.exists() and (not ipynb.exists() or md.stat().st_mtime > ipynb.stat().st_mtime):
        return jupytext.read(md)
    return jupytext.read(ipynb)


def write_sections() -> Path:
    """Record every chapter's section headings for the claims ledger (chapter 10)."""
    sections = {
        ipynb.stem: section_titles(jupytext.writes(load_cells(ipynb), fmt="md:myst")) for ipynb in all_chapters()
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


def run(ipynb: Path) -> float:
    nb = load_cells(ipynb)
    nb.metadata["kernelspec"] = KERNELSPEC
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
    md.write_text(jupytext.writes(nb, fmt="md:myst"), encoding="utf-8")
    return elapsed


def main(argv: list[str]) -> int:
    chapters = [Path(a).resolve() for a in argv] or all_chapters()
    print(f"{write_sections().relative_to(ROOT)} written")
    for ipynb in chapters:
        if ipynb.suffix == ".md":
            ipynb = ipynb.parent.parent / (ipynb.stem + ".ipynb")
        print(f"{ipynb.relative_to(ROOT)} ...", end=" ", flush=True)
        print(f"{run(ipynb):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
