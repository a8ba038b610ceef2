"""The ``bad-input-catalog`` directive: every entry of ``posenc_book/data/bad_inputs.yaml``
run at build time and shown as a table (call, exception, message), one section per family.

The messages on the page are the ones the installed ``posenc`` raises today, not copies; an
entry that raises nothing or the wrong exception is a build warning, which fails ``-W``.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from docutils import nodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

#: The repository: the catalog path is relative to it in every edition of the book.
ROOT = Path(__file__).resolve().parents[2]

LOGGER = logging.getLogger(__name__)


def families(text: str) -> list[tuple[str, list[dict]]]:
    """(family title, entries): a comment line after a blank line opens a family."""
    found, blank = [], False
    for line in text.splitlines():
        if line.startswith("- "):
            found[-1][1].extend(yaml.safe_load(line))
        elif line.startswith("# ") and blank and found is not None:
            found.append((line[2:].strip(), []))
        blank = not line.strip()
    return [(title, entries) for title, entries in found if entries]


def _run(call: str) -> tuple[str, str]:
    from posenc_book import bad_input_namespace

    try:
        eval(call, bad_input_namespace())  # the catalog's own expressions, nothing from outside the repo
    except Exception as err:  # the table shows whatever is raised
        return type(err).__name__, str(err)
    return "no error", ""


def _table(rows: list[tuple[str, str, str]], headers: tuple[str, ...] = ("call", "raises", "message")) -> nodes.table:
    table = nodes.table(classes=["bad-inputs"])
    group = nodes.tgroup(cols=3)
    table += group
    for width in (40, 14, 46):
        group += nodes.colspec(colwidth=width)
    head, body = nodes.thead(), nodes.tbody()
    group += head
    group += body
    row = nodes.row()
    for title in headers:
        row += nodes.entry("", nodes.paragraph(text=title))
    head += row
    for call, raised, message in rows:
        row = nodes.row()
        row += nodes.entry("", nodes.paragraph("", "", nodes.literal(text=call)))
        row += nodes.entry("", nodes.paragraph(text=raised))
        # the message as printed: literal, so no typographic quotes replace its own
        row += nodes.entry("", nodes.paragraph("", "", nodes.literal(text=message, classes=["message"])))
        body += row
    return table


class BadInputCatalog(SphinxDirective):
    """The catalog as tables. In a translated edition, ``:headers:`` gives the three column
    headers (comma-separated) and the content maps each family's title to its translation
    (``English title -> translated title``, one per line); a family without one is a warning,
    so the build fails until it is translated."""

    required_arguments = 1  # the catalog's path, relative to the repository root (every edition's)
    has_content = True
    option_spec = {"headers": lambda text: tuple(h.strip() for h in text.split(","))}

    def run(self):
        path = ROOT / self.arguments[0]
        self.env.note_dependency(str(path))
        translated = dict(line.split(" -> ", 1) for line in self.content if line.strip())
        out = []
        for title, entries in families(path.read_text(encoding="utf-8")):
            section = nodes.section(ids=[nodes.make_id(f"bad-{title}")])
            if translated and title not in translated:
                LOGGER.warning("bad-input family %r has no translation", title, location=self.get_location())
            section += nodes.title(text=translated.get(title, title))
            rows = []
            for entry in entries:
                raised, message = _run(entry["call"])
                if raised != entry["raises"] or not re.search(entry["match"], message):
                    LOGGER.warning(
                        "bad input %s raised %s (%s), the catalog expects %s matching %r",
                        entry["call"],
                        raised,
                        message,
                        entry["raises"],
                        entry["match"],
                        location=self.get_location(),
                    )
                rows.append((entry["call"], raised, message))
            section += _table(rows, self.options.get("headers", ("call", "raises", "message")))
            out.append(section)
        return out


def setup(app):
    app.add_directive("bad-input-catalog", BadInputCatalog)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
