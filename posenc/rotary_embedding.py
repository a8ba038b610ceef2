"""Deprecated: the older name of :mod:`posenc.rope.embedding` (every name still works, with a warning)."""

from ._moved import forwarder

__getattr__, __dir__ = forwarder(__name__, "posenc.rope.embedding")
