"""The config reader's script, on its page only.

``static/config_reader.js`` (copied into ``_static`` with the book's stylesheet by
``page_style.py``) is ``python -m posenc.describe`` ported to JavaScript; the page
``book/config_reader.md`` (and its Chinese editions) holds the form it attaches to. Other
pages do not load it.
"""

from __future__ import annotations

SCRIPT = "config_reader.js"
PAGE = "config_reader"


def _add_script(app, pagename: str, templatename, context, doctree) -> None:
    if pagename.rsplit("/", 1)[-1] == PAGE:
        app.add_js_file(SCRIPT)


def setup(app):
    app.connect("html-page-context", _add_script)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
