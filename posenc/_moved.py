"""Older module names (``posenc.hf_config``, ``posenc.rope_scaling`` and alike), kept working with a warning."""

from __future__ import annotations

import importlib
import warnings


def forwarder(old: str, *homes: str):
    """``__getattr__`` and ``__dir__`` for the module ``old``: a name is looked up in ``homes``
    (module names, first match wins) and returned with a ``DeprecationWarning`` that names its home."""

    def __getattr__(name: str):
        for home in homes:
            module = importlib.import_module(home)
            if hasattr(module, name):
                warnings.warn(f"{old} moved: import {name} from {home}", DeprecationWarning, stacklevel=2)
                return getattr(module, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({name for home in homes for name in dir(importlib.import_module(home))})

    return __getattr__, __dir__
