"""The book's own page style: one search box, code that fits the column, nothing that
scrolls sideways on a phone. The rules are in ``static/posenc.css``, next to this file.

Two repairs to the theme's markup are made once the pages are written, so that every page
passes axe-core's checks (tests/site/test_browser.py):

- The bibliography: docutils marks each entry ``role="doc-biblioentry"``, a role ARIA has
  deprecated and that a ``role="list"`` may not hold; entries become ``listitem``.
- The primary sidebar holds the book's title outside any landmark; the sidebar becomes a
  ``complementary`` landmark named "Book contents".
- Sphinx wraps every word of inline code in a ``<span class="pre">`` of its own, to keep it
  on one line: 8,900 of the API page's 30,600 elements and 6,400 of the bad-input
  catalog's 10,500, which every reader's browser lays out and axe-core's contrast rule
  checks one by one (its cost grows with the element count). The words lose their spans;
  ``static/posenc.css`` decides how inline code wraps, on the ``code`` element itself.

One addition, for phones: every figure a cell draws (a PNG) gets the width at which its
smallest text, 8 points by the book's rule (tests/chapters/test_notebooks.py), is 9 CSS pixels:
``--phone-width``, from the image's size and resolution. Where the column is narrower,
the figure keeps that width and scrolls sideways inside its own box (static/posenc.css),
so that a phone shows its text at a readable size instead of shrinking it to 4 pixels.
"""

from __future__ import annotations

import inspect
import math
import re
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
WORD_SPAN = re.compile(r'<span class="pre">([^<]*)</span>')


#: The smallest text a figure may hold, in points, and the smallest size it may be shown at, in CSS pixels.
FIGURE_MIN_POINTS, READABLE_PX = 8, 9
#: The article column of a 390 px phone, in CSS pixels: a figure kept wider scrolls, and says so.
PHONE_COLUMN = 360
OUTPUT_IMAGE = re.compile(r'<img (alt="[^"]*" )?src="([^"]*_images/[0-9a-f]+\.png)"')


def phone_width(png: Path) -> int:
    """CSS pixels at which the smallest text of ``png`` (8 pt at the resolution it records) is 9 px."""
    from PIL import Image

    with Image.open(png) as image:
        dpi = image.info.get("dpi", (96, 96))[0]
        width = image.width
    return min(width, math.ceil(width * READABLE_PX / (FIGURE_MIN_POINTS * dpi / 72)))


def with_phone_widths(html: str, page: Path) -> str:
    """Each output figure of ``page`` wrapped in a box that scrolls, with its ``--phone-width``."""

    def wrap(match: re.Match) -> str:
        png = (page.parent / match.group(2)).resolve()
        if not png.exists():
            return match.group(0)
        width = phone_width(png)
        wide = " wide" if width > PHONE_COLUMN else ""  # wider than a phone's column: a hint to swipe
        style = f'style="--phone-width: {width}px" '
        return f'<span class="phone-scroll{wide}"><img {style}{match.group(1) or ""}src="{match.group(2)}"'

    # a page an earlier build already wrapped (Sphinx rewrites only changed pages): unwrap first
    html = re.sub(
        r'<span class="phone-scroll(?: wide)?"><img style="--phone-width: \d+px" ([^>]*>)</span>', r"<img \1", html
    )
    html = OUTPUT_IMAGE.sub(wrap, html)
    # close each box after its image
    return re.sub(r'(<span class="phone-scroll(?: wide)?"><img [^>]*>)', r"\1</span>", html)


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
    return WORD_SPAN.sub(r"\1", html)


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
        fixed = with_phone_widths(fixed, page)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")


def setup(app):
    app.connect("builder-inited", _add_static)
    app.connect("build-finished", _repair_pages)
    app.connect("autodoc-process-docstring", _no_type_docstrings)
    app.add_css_file("posenc.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
