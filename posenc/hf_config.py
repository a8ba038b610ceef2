"""Deprecated: the older name of :mod:`posenc.hf.reader` and the builders of :mod:`posenc.hf.families`.

Every name still works, with a warning.
"""

from ._moved import forwarder

__getattr__, __dir__ = forwarder(__name__, "posenc.hf.reader", "posenc.hf.families", "posenc.hf.fields")
