"""The repository's scripts, for the site's extensions: the manifest (chapters, pages, editions) and
the chapter-run records, imported from ``scripts/`` as the scripts import each other.

``scripts/`` goes on ``sys.path`` only while a script is imported: it has a module ``editions``
of its own, beside this folder's Sphinx extension of that name.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


def script(name: str) -> ModuleType:
    """The module ``scripts/<name>.py`` (``manifest``, ``run_status``), imported once."""
    if name in sys.modules and Path(getattr(sys.modules[name], "__file__", "") or "").parent == SCRIPTS:
        return sys.modules[name]
    sys.path.insert(0, str(SCRIPTS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(SCRIPTS))
