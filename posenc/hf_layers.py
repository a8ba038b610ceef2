"""Deprecated: the older name of :mod:`posenc.hf.layers` and :mod:`posenc.hf.bias_layers`.

Every name still works, with a warning.
"""

from ._moved import forwarder

__getattr__, __dir__ = forwarder(__name__, "posenc.hf.layers", "posenc.hf.bias_layers")
