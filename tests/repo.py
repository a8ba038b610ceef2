"""The repository as the tests see it: its root, its scripts, the site's extensions, the book's pages.

The one way a test reaches code that is not the installed packages:

- ``scripts/`` is put on ``sys.path`` here, once, so that a test imports a script by its name
  (``import manifest``), as the scripts import each other when they run;
- the site's Sphinx extensions (``book/_ext/``) are loaded by :func:`extension`, under names of
  their own (``book/_ext/editions.py`` and ``scripts/editions.py`` are different modules);
- the test plugins (``tests/plugins/``) by :func:`plugin`.

Every test module imports what it needs from here; ``tests/conftest.py`` imports it first.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
FIXTURES = TESTS / "fixtures"
SCRIPTS = ROOT / "scripts"
EXTENSIONS = ROOT / "book" / "_ext"

if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))
if str(EXTENSIONS) not in sys.path:
    sys.path.append(str(EXTENSIONS))  # last: the extensions import each other (repository.py); a script wins a name
import manifest  # noqa: E402  (scripts/manifest.py)


def _load(path: Path, name: str) -> ModuleType:
    """The module in ``path``, loaded once under ``name`` and kept in ``sys.modules``."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


def extension(name: str) -> ModuleType:
    """The site's extension ``book/_ext/<name>.py``, as the module ``book_ext_<name>``."""
    return _load(EXTENSIONS / f"{name}.py", f"book_ext_{name}")


def plugin(name: str) -> ModuleType:
    """The pytest plugin ``tests/plugins/<name>.py``, as the module ``tests_plugin_<name>``."""
    return _load(TESTS / "plugins" / f"{name}.py", f"tests_plugin_{name}")


def toc_files() -> list[str]:
    """Every page of the table of contents, root first, as paths without suffix."""
    return manifest.toc_files()


def chapter_notebooks() -> list[Path]:
    """The pages that are notebooks: the executable chapters (scripts/manifest.py)."""
    return manifest.chapters()
