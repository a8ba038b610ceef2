"""One line at the end of each chapter: how many checks its build re-ran, and where they are.

A chapter's checks are code cells tagged ``check`` (and ``remove-cell``, so the page does not
show them; ``scripts/fold_checks.py`` tags them). nbval runs them with the rest of the
notebook, and ``tests/`` asserts the same claims again. This extension counts the ``assert``
statements in those cells and appends one paragraph, in the edition's language, linking to
the notebook and to the tests.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from docutils import nodes

ROOT = Path(__file__).resolve().parents[2]
# (before the notebook link, the link's text, between the links, after the tests link)
WORDS = {
    "en": (
        "\u2713 Checked when this page was built: {n} assertions in {m} hidden cells (",
        "the notebook",
        "), asserted again in ",
        ".",
    ),
    "zh_CN": (
        "\u2713 本页构建时运行了 {m} 个隐藏单元格中的 {n} 条断言（见",
        "notebook",
        "），",
        " 中的测试会再断言一遍。",
    ),
    "zh_TW": (
        "\u2713 本頁建置時執行了 {m} 個隱藏儲存格中的 {n} 條斷言（見",
        "筆記本",
        "），",
        " 中的測試會再斷言一次。",
    ),
}


def count_checks(notebook: Path) -> tuple[int, int]:
    """(assert statements, cells) among the notebook's cells tagged ``check``."""
    cells = [
        "".join(cell["source"])
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        if cell["cell_type"] == "code" and "check" in cell.get("metadata", {}).get("tags", [])
    ]
    asserts = sum(isinstance(n, ast.Assert) for source in cells for n in ast.walk(ast.parse(source)))
    return asserts, len(cells)


def _append_note(app, doctree) -> None:
    path = Path(app.env.doc2path(app.env.docname))
    if path.suffix != ".ipynb":
        return
    asserts, cells = count_checks(path)
    if not asserts:
        return
    # the repository's pages in the publishing workflow's build (book/_ext/publication.py);
    # elsewhere the notebook served with the site, and tests/ named without a link
    base = app.config.html_theme_options.get("repository_url", "").rstrip("/")
    branch = app.config.html_theme_options.get("repository_branch", "main")
    if base:
        notebook_url = f"{base}/blob/{branch}/{path.resolve().relative_to(ROOT).as_posix()}"
        tests_url = f"{base}/tree/{branch}/tests"
    else:
        notebook_url, tests_url = f"../_sources/{app.env.docname}.ipynb", None
    before, link_text, middle, after = WORDS.get(app.config.language or "en", WORDS["en"])
    note = nodes.paragraph(classes=["checked-note"])
    note += nodes.Text(before.format(n=asserts, m=cells))
    note += nodes.reference("", link_text, refuri=notebook_url)
    note += nodes.Text(middle)
    note += (
        nodes.reference("", "", nodes.literal("", "tests/"), refuri=tests_url)
        if tests_url
        else nodes.literal("", "tests/")
    )
    note += nodes.Text(after)
    sections = [child for child in doctree.children if isinstance(child, nodes.section)]
    (sections[-1] if sections else doctree).append(note)


def setup(app):
    app.connect("doctree-read", _append_note)
    # the note's words live in this file: a change to it re-reads every page
    version = int(hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:8], 16)
    return {"env_version": version, "parallel_read_safe": True, "parallel_write_safe": True}
