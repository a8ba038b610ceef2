"""The book's own page style: one search box, code that fits the column, nothing that
scrolls sideways on a phone. The rules are in ``static/posenc.css``, next to this file.

Two repairs to the theme's markup are made once the pages are written, so that every page
passes axe-core's checks (tests/site/test_browser.py):

- The bibliography: docutils marks each entry ``role="doc-biblioentry"``, a role ARIA has
  deprecated and that a ``role="list"`` may not hold; entries become ``listitem``.
- The primary sidebar holds the book's title outside any landmark; the sidebar becomes a
  ``complementary`` landmark named "Book contents".
"""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

STATIC = Path(__file__).parent / "static"
REPAIRS = (
    ('role="doc-biblioentry"', 'role="listitem"'),
    (
        '<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar">',
        '<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar"'
        ' role="complementary" aria-label="Book contents">',
    ),
)


def _no_type_docstrings(_app, what, _name, obj, *rest) -> None:
    """A constant without a doc comment gets its type's docstring from autodoc (tuple's,
    str's, int's help); the API page shows nothing rather than Python's built-in help."""
    lines = rest[-1]  # (options, lines), as autodoc passes them
    doc = getattr(type(obj), "__doc__", None)
    if what in ("data", "attribute") and doc and "\n".join(lines).strip() == inspect.cleandoc(doc).strip():
        lines.clear()


def _add_static(app) -> None:
    app.config.html_static_path.append(str(STATIC))


def repair(html: str) -> str:
    """The page with the theme's markup repaired (see the module docstring)."""
    for old, new in REPAIRS:
        html = html.replace(old, new)
    return html


def _repair_pages(app, exc) -> None:
    if exc is not None or app.builder.format != "html":
        return
    # Sphinx copies static files only when some page was rewritten; the stylesheet must
    # match its source after every build, so it is copied here too.
    for source in STATIC.iterdir():
        shutil.copyfile(source, Path(app.outdir) / "_static" / source.name)
    for page in Path(app.outdir).rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed = repair(text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


def setup(app):
    app.connect("builder-inited", _add_static)
    app.connect("build-finished", _repair_pages)
    app.connect("autodoc-process-docstring", _no_type_docstrings)
    app.add_css_file("posenc.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
