"""``python -m posenc.describe path/to/config.json``: the older name of ``python -m posenc.hf``.

The command itself is :func:`posenc.hf.cli.main`. Importing this module makes the attribute
``posenc.describe`` this module instead of the function of the same name; the module is
therefore callable, and ``posenc.describe(config)`` returns the rows either way.
"""

from __future__ import annotations

import sys
import types

from .hf.cli import USAGE, main
from .hf.reader import describe

__all__ = ["USAGE", "describe", "main"]


class _CallableModule(types.ModuleType):
    """This module, callable as :func:`posenc.hf.reader.describe` (it shadows that name in ``posenc``)."""

    def __call__(self, config) -> list[dict]:
        return describe(config)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
