"""Take the checks of each chapter off the page, and collapse plotting code.

Usage: python scripts/fold_checks.py [--check] [CHAPTER.md ...]

A *check* is a top-level statement that only asserts: ``assert ...``, or a ``for``/``if``
whose body holds nothing but such statements. A code cell that starts with checks loses
them to a check cell just before it. A code cell that ends in checks is split in two:
the demonstration keeps its outputs (asserts print nothing), the checks move into a
cell of their own, tagged ``check`` and ``remove-cell``: nbval and ``make notebooks`` run it,
the site does not show it, and the end of each page says how many checks its build re-ran
(``book/_ext/checked.py``).
Cells that draw a figure (an image among their committed outputs) get ``hide-input`` with
the prompt "Show the plotting code". With ``--check`` nothing is written; the exit status
says whether any chapter still needs folding. The MyST twins in ``book/md_src`` are edited;
``scripts/run_notebooks.py --prefer md`` then re-executes the chapters.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling scripts
import manifest  # noqa: E402

CHECK_TAGS = ("check", "remove-cell")  # run by nbval, not shown on the page
PLOT = {
    "code_prompt_show": "Show the plotting code",
    "code_prompt_hide": "Hide the plotting code",
}
SOLUTION = {
    "code_prompt_show": "Show the solution",
    "code_prompt_hide": "Hide the solution",
}


def _only_checks(node: ast.stmt) -> bool:
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, (ast.For, ast.If)):
        body = node.body + node.orelse
        return bool(body) and all(_only_checks(n) for n in body)
    return False


def split_checks(source: str) -> tuple[str, str]:
    """(demonstration, checks): the cell's source cut before its trailing checks.

    The demonstration is "" when the whole cell is checks; the checks are "" when it
    does not end in checks, or when cutting would display a value the cell did not show
    (a bare expression just before the checks).
    """
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return source, ""
    first = len(body)
    while first > 0 and _only_checks(body[first - 1]):
        first -= 1
    if first == len(body):
        return source, ""
    if first == 0:
        return "", source
    last = body[first - 1]
    if isinstance(last, ast.Expr) and not _is_print(last.value):
        return source, ""
    lines = source.splitlines()
    cut = last.end_lineno  # comments after the demonstration go with the checks
    demo = "\n".join(lines[:cut]).rstrip()
    checks = "\n".join(lines[cut:]).strip("\n")
    return demo, checks


def split_leading_checks(source: str) -> tuple[str, str]:
    """(checks, rest): the asserts a cell starts with, cut off the code that follows them.

    Such asserts check what the cells before computed; run as a cell of their own just
    before, they check the same values. ``("", source)`` when the cell does not start with
    checks, or is nothing but checks.
    """
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return "", source
    first = 0
    while first < len(body) and _only_checks(body[first]):
        first += 1
    if first == 0 or first == len(body):
        return "", source
    lines = source.splitlines()
    cut = body[first].lineno - 1
    while cut > body[first - 1].end_lineno and lines[cut - 1].lstrip().startswith("#"):
        cut -= 1  # comments just above the code go with it
    return "\n".join(lines[:cut]).strip("\n"), "\n".join(lines[cut:]).strip("\n")


def _is_print(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"


def _asserts(source: str) -> bool:
    try:
        return any(isinstance(n, ast.Assert) for n in ast.walk(ast.parse(source)))
    except SyntaxError:
        return False


def _names(source: str, kind: type) -> set[str]:
    """Names the cell binds (kind ast.Store, with its defs) or reads (ast.Load)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, kind)}
    if kind is ast.Store:
        found |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return found


def silent_checks(cells: list, ran: list | None) -> set[int]:
    """Cells that assert, show nothing, and bind nothing a later visible cell reads.

    Such a cell is a computation made only to check a claim (a reference value, an
    independent recomputation), so the whole cell is folded; names that later shown code
    uses keep their cell on the page.
    """
    if ran is None:
        return set()
    found = set()
    for index in reversed(range(len(cells))):
        cell = cells[index]
        if cell.cell_type != "code" or ran[index].get("outputs") or not _asserts(cell.source):
            continue
        later = set()
        for after in range(index + 1, len(cells)):
            if cells[after].cell_type == "code" and after not in found:
                later |= _names(split_checks(cells[after].source)[0], ast.Load)
        if not _names(cell.source, ast.Store) & later:
            found.add(index)
    return found


def is_checks_cell(cell) -> bool:
    return cell.cell_type == "code" and cell.source.strip() and not split_checks(cell.source)[0]


def draws_figure(cell) -> bool:
    return any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))


def _prompts(cell) -> dict:
    """The cell's prompt settings (other mystnb keys, e.g. a figure's alt text, stay apart)."""
    mystnb = cell.metadata.get("mystnb", {})
    return {key: mystnb[key] for key in ("code_prompt_show", "code_prompt_hide") if key in mystnb}


def is_marked_check(cell) -> bool:
    tags = cell.metadata.get("tags", [])
    return all(t in tags for t in CHECK_TAGS) and "hide-input" not in tags and not _prompts(cell)


def _mark_check(cell) -> None:
    """Tag the cell as a check off the page; drop the folding it had before."""
    tags = [t for t in cell.metadata.get("tags", []) if t != "hide-input"]
    cell.metadata["tags"] = tags + [t for t in CHECK_TAGS if t not in tags]
    mystnb = cell.metadata.get("mystnb", {})
    for key in ("code_prompt_show", "code_prompt_hide"):
        mystnb.pop(key, None)
    if "mystnb" in cell.metadata and not mystnb:
        del cell.metadata["mystnb"]


def _hide(cell, prompts: dict) -> None:
    tags = cell.metadata.setdefault("tags", [])
    if "hide-input" not in tags and "hide-cell" not in tags:
        tags.append("hide-input")
    cell.metadata.setdefault("mystnb", {}).update(prompts)


def fold(md: Path, ipynb: Path) -> tuple[nbformat.NotebookNode, int]:
    """The chapter with its checks folded and its plotting code collapsed; changes made."""
    nb = jupytext.read(md)
    ran = nbformat.read(ipynb, as_version=4) if ipynb.exists() else None
    same = ran is not None and [c.source for c in ran.cells] == [c.source for c in nb.cells]
    silent = silent_checks(nb.cells, ran.cells if same else None)
    cells, changes = [], 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "hide-cell" in cell.metadata.get("tags", []):
            cells.append(cell)
            continue
        if same and draws_figure(ran.cells[index]):
            if _prompts(cell) != PLOT:
                _hide(cell, PLOT)
                changes += 1
            cells.append(cell)
            continue
        settled = "check" in cell.metadata.get("tags", [])  # a check cell before: stays one cell
        whole = index in silent or settled
        leading, rest = ("", cell.source) if whole else split_leading_checks(cell.source)
        if leading:
            check = nbformat.v4.new_code_cell(leading)
            _mark_check(check)
            cells.append(check)
            cell.source = rest
            changes += 1
        demo, checks = ("", cell.source) if whole else split_checks(cell.source)
        if not checks:
            cells.append(cell)
            continue
        if demo:
            cell.source = demo
            cells.append(cell)
            cell = nbformat.v4.new_code_cell(checks)
        if not is_marked_check(cell):
            _mark_check(cell)
            changes += 1
        cells.append(cell)
    nb.cells = cells
    return nb, changes


def main(argv: list[str]) -> int:
    check = argv[:1] == ["--check"]
    paths = [Path(a) for a in argv[check:]] or [ROOT / "book" / "md_src" / f"{s}.md" for s in manifest.chapter_stems()]
    pending = 0
    for md in paths:
        ipynb = md.parent.parent / f"{md.stem}.ipynb"
        nb, changes = fold(md, ipynb)
        pending += changes
        if changes and not check:
            md.write_text(jupytext.writes(nb, fmt="md:myst"), encoding="utf-8")
        print(f"{md.name}: {changes} cell(s) {'to fold' if check else 'folded'}")
    return 1 if check and pending else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
