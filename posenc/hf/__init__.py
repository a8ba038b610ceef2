"""Read a Hugging Face model's configuration: how each decoder layer encodes positions.

One reader, in four modules that import downwards only:

* :mod:`posenc.hf.fields`: the configuration as a plain dict, and one checked accessor per
  kind of field (every family's defaults, every older spelling of the RoPE parameters);
* :mod:`posenc.hf.layers`: the layer hierarchy (:class:`~posenc.hf.layers.HFLayer` and its
  rotary, NoPE, ALiBi and T5 layers) with one input check;
* :mod:`posenc.hf.families`: one builder per model family and the table
  :data:`~posenc.hf.families.FAMILIES` (``model_type`` -> builder);
* :mod:`posenc.hf.reader`: :func:`from_hf_config`, :func:`describe` and
  :func:`format_description`; :mod:`posenc.hf.cli` is ``python -m posenc.hf config.json``.

One precision rule: rotary layers form their angles in float32, as ``transformers`` does
(``inv_freq`` in float32, times float32 positions), so that their logits agree with the
model's own to float32 rounding. A float64 angle would be the more exact and, at long
positions, the less faithful one.
"""

from .bias_layers import ALiBiLayer, T5BiasLayer
from .families import FAMILIES
from .fields import config_dict
from .layers import HFLayer, NoPELayer, RecurrentLayer, RotaryLayer
from .reader import describe, format_description, from_hf_config

__all__ = [
    "FAMILIES",
    "ALiBiLayer",
    "HFLayer",
    "NoPELayer",
    "RecurrentLayer",
    "RotaryLayer",
    "T5BiasLayer",
    "config_dict",
    "describe",
    "format_description",
    "from_hf_config",
]
