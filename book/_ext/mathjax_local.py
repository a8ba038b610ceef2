"""Serve MathJax from the site itself, so equations typeset with no network.

The files come from the pinned ``sphinx-mathjax-offline`` package (MathJax 3), but only
those a page can load are copied: the TeX-to-CommonHTML bundle, its web fonts, the TeX
extensions it autoloads, and the menu's accessibility modules. That is about 7 MB of
the package's 24 MB.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sphinx.util.fileutil import copy_asset

KEEP = ("tex-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions", "ui", "a11y", "sre")


def _source() -> Path:
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("sphinx-mathjax-offline is not installed (it is pinned in requirements.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax"


def _copy(app, exc) -> None:
    if exc is not None or app.builder.format != "html":
        return
    src, dst = _source(), Path(app.outdir) / "_static" / "mathjax"
    for part in KEEP:
        if (src / part).is_dir():
            copy_asset(str(src / part), str(dst / part))
        else:
            (dst / part).parent.mkdir(parents=True, exist_ok=True)
            copy_asset(str(src / part), str((dst / part).parent))


def setup(app):
    app.config.mathjax_path = "mathjax/tex-chtml.js"
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
