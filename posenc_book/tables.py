"""Tables that code cells show: a Markdown table, which the site renders as an HTML table.

A table printed as aligned columns of text wraps into zig-zags on a phone and cannot be read
by a screen reader as a table. :func:`show_table` builds the same rows as Markdown instead;
Jupyter and the book's pages render it as a table that scrolls inside its own box when it
is wider than the screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Number

from IPython.display import Markdown

_ALIGN = {"l": ":--", "r": "--:", "c": ":-:"}


def _cell(value) -> str:
    """One cell's text: ``|`` escaped, line breaks folded, None as an en dash."""
    if value is None:
        return "–"
    return str(value).replace("|", "\\|").replace("\n", " ")


def table_markdown(header: Sequence, rows: Sequence[Sequence], *, align: str | None = None) -> str:
    """The Markdown source of a table with ``header`` and ``rows``.

    Args:
        header: The column headings.
        rows: The rows, each with one value per heading; values are shown with ``str``
            (format numbers before passing them to choose their digits), None as "–".
        align: One letter per column, ``l``, ``r`` or ``c``; by default numbers in the
            first row are aligned right and everything else left.

    Raises:
        ValueError: If a row has another number of values than ``header``, or ``align``
            has another length or a letter other than l, r and c.
    """
    width = len(header)
    for number, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(f"rows[{number}] has {len(row)} values; the header has {width}")
    if align is None:
        first = rows[0] if rows else [""] * width
        align = "".join("r" if isinstance(v, Number) and not isinstance(v, bool) else "l" for v in first)
    if len(align) != width or set(align) - set(_ALIGN):
        raise ValueError(f"align must be {width} letters from l, r and c (one per column); got {align!r}")
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "|".join(_ALIGN[a] for a in align) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def show_table(header: Sequence, rows: Sequence[Sequence], *, align: str | None = None):
    """:func:`table_markdown`, displayed: the last line of a cell shows it as a table.

    Returns:
        An ``IPython.display.Markdown`` object holding the table.
    """
    return Markdown(table_markdown(header, rows, align=align))
