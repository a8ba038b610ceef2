"""Deprecated: the older name of :mod:`posenc.hf.families` (every name still works, with a warning)."""

from ._moved import forwarder

__getattr__, __dir__ = forwarder(__name__, "posenc.hf.families")
