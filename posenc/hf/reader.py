"""Read a Hugging Face model's configuration and say, layer by layer, how it encodes positions.

:func:`from_hf_config` turns a ``config.json`` (or a ``transformers`` configuration
object, or its dict) into one object per decoder layer; each has ``kind``,
``scores(q, k, position_ids)``, ``apply(q, k, position_ids)`` and ``row()`` (see
:mod:`posenc.hf.layers` for shapes). :func:`describe` lists the rows and
:func:`format_description` prints them, one line per run of alike layers, so that
patterns such as Gemma 3's five local layers to one global layer stand out. From the
shell: ``python -m posenc.hf path/to/config.json`` (or ``python -m posenc.describe``).

The reading follows ``transformers`` 5: ``rope_parameters`` (or the older
``rope_scaling`` with ``rope_theta`` beside it; where a file has both, a non-empty
``rope_scaling`` wins, as ``posenc.hf.fields.raw_rope_parameters`` reads them),
``partial_rotary_factor`` (inside the parameters before the top-level key; GPT-NeoX's
``rotary_pct``), GPT-J's ``rotary_dim``, per-layer-type parameters
(Gemma 3's ``layer_types``; the older ``sliding_window_pattern``,
``rope_local_base_freq``), a multimodal model's ``text_config``. Missing fields take
the defaults of the ``transformers`` configuration class. posenc never imports
``transformers``: a configuration object is read through its ``to_dict()``.

Row values: ``theta`` the RoPE base (None without RoPE), ``scaling`` a label such as
``"llama3 x8"`` (``"none"``), ``rotary`` the number of channels per head that turn,
``layout`` ``"half"`` or ``"interleaved"``, ``nope_temperature`` None unless a layer
without RoPE scales its queries, ``softmax_scale`` what multiplies ``q . k``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .families import FAMILIES
from .fields import DEFAULTS, config_dict

__all__ = ["DEFAULTS", "FAMILIES", "config_dict", "describe", "format_description", "from_hf_config"]


def from_hf_config(config) -> list:
    """One position-encoding object per decoder layer of the model the configuration describes.

    Args:
        config: A ``transformers`` configuration, its dict, or a path to a ``config.json``.

    Returns:
        A list with one entry per layer, each with ``kind``, ``scores(q, k, position_ids)``
        (logits ``[b, h_q, s_q, s_k]`` as the ``transformers`` layer computes them before mask
        and softmax), ``apply(q, k, position_ids)`` and ``row()``.

    Raises:
        ValueError: If ``model_type`` is missing or not one of ``FAMILIES``, or a field
            the family needs is missing or invalid.
    """
    cfg = config_dict(config)
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        raise ValueError(f"model_type {model_type!r:.80} is not supported; supported: {', '.join(sorted(FAMILIES))}")
    return FAMILIES[model_type](cfg)


def describe(config) -> list[dict]:
    """One row per layer: ``layer``, ``scheme``, ``theta``, ``scaling``, ``rotary``, ``layout``,
    ``nope_temperature``, ``softmax_scale`` (see the module docstring); errors as :func:`from_hf_config`."""
    return [{"layer": index, **layer.row()} for index, layer in enumerate(from_hf_config(config))]


_COLUMNS = ("scheme", "theta", "scaling", "rotary", "layout", "nope_temperature", "softmax_scale")
_HEADERS = ("layers", "scheme", "theta", "scaling", "rotary", "layout", "nope temp", "softmax scale")


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    return str(value)


def _period(keys: list[tuple]) -> int:
    """The smallest ``p`` with row ``i`` equal to row ``i - p`` for every ``i``: the length less its longest
    proper border (the prefix function of Knuth, Morris and Pratt), in linear time."""
    border = [0] * len(keys)
    for i in range(1, len(keys)):
        b = border[i - 1]
        while b and keys[i] != keys[b]:
            b = border[b - 1]
        border[i] = b + (keys[i] == keys[b])
    return len(keys) - border[-1]


def format_description(rows: list[dict]) -> str:
    """A text table of :func:`describe`'s rows, one line per run of consecutive alike layers.

    A last line names the period when the layers repeat with one (e.g. "every 6 layers").

    Raises:
        ValueError: If ``rows`` is not a list of dicts that each have a ``"layer"`` key.
    """
    if not isinstance(rows, (list, tuple)):
        raise ValueError(f"rows must be a list of describe() rows, got {type(rows).__name__}")
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping) or "layer" not in row:
            raise ValueError(f"rows[{index}] must be a dict with a 'layer' key (a describe() row), got {row!r:.80}")
    if not rows:
        return "(no layers)"
    keys = [tuple(_cell(row.get(column)) for column in _COLUMNS) for row in rows]
    runs: list[list] = []
    for row, key in zip(rows, keys, strict=True):
        if runs and runs[-1][2] == key:
            runs[-1][1] = row["layer"]
        else:
            runs.append([row["layer"], row["layer"], key])
    table = [_HEADERS] + [(f"{a}" if a == b else f"{a}-{b}", *key) for a, b, key in runs]
    widths = [max(len(line[i]) for line in table) for i in range(len(_HEADERS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    period = _period(keys)
    if 1 < period <= len(rows) // 2:  # a pattern is seen at least twice
        lines.append(f"pattern: the layers repeat every {period} ({len(rows)} layers)")
    return "\n".join(lines)
