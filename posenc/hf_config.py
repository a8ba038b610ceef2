"""Read a Hugging Face model's configuration and say, layer by layer, how it encodes positions.

:func:`from_hf_config` turns a ``config.json`` (or a ``transformers`` configuration
object, or its dict) into one object per decoder layer; each has ``kind``,
``scores(q, k, position_ids)``, ``apply(q, k, position_ids)`` and ``row()`` (see
:mod:`posenc.hf_layers` for shapes). :func:`describe` lists the rows and
:func:`format_description` prints them, one line per run of alike layers, so that
patterns such as Gemma 3's five local layers to one global layer stand out. From the
shell: ``python -m posenc.describe path/to/config.json``.

The reading follows ``transformers`` 5: ``rope_parameters`` (or the older
``rope_scaling`` with ``rope_theta`` beside it; where a file has both, a non-empty
``rope_scaling`` wins, as ``posenc.hf_fields.raw_rope_parameters`` reads them),
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
from collections.abc import Callable, Mapping

from .hf_families import build_alibi, build_deepseek, build_llama4, build_t5
from .hf_fields import (
    DEFAULTS,
    MAX_HEAD_DIM,
    MAX_LAYERS,
    config_dict,
    config_int,
    config_mapping,
    config_number,
    count,
    field,
    raw_rope_parameters,
    rope_parameters,
)
from .hf_layers import RotaryLayer

__all__ = ["DEFAULTS", "FAMILIES", "config_dict", "describe", "format_description", "from_hf_config"]

_NESTED = ("full_attention", "sliding_attention")  # Gemma 3's keys of per-layer-type rope_parameters


def _head_dim(cfg: dict, *, explicit: bool = True) -> int:
    """``head_dim`` if given (and ``explicit``), else ``hidden_size // num_attention_heads``."""
    if explicit and field(cfg, "head_dim") is not None:
        return count(cfg, "head_dim", maximum=MAX_HEAD_DIM)
    width, heads = count(cfg, "hidden_size"), count(cfg, "num_attention_heads")
    if width // heads > MAX_HEAD_DIM:  # every layer builds a table per pair: 2**40 would exhaust memory
        raise ValueError(f"config's hidden_size // num_attention_heads = {width // heads} must be <= {MAX_HEAD_DIM}")
    return width // heads


def _flat_rope(cfg: dict, theta: float = 10_000.0, renames=None, params=None) -> dict:
    """The one ``rope_parameters`` (or ``rope_scaling`` + ``rope_theta``) of a single-RoPE model, filled in."""
    params = raw_rope_parameters(cfg) if params is None else params
    return rope_parameters(cfg, params, theta=field(cfg, "rope_theta", theta), renames=renames)


def _partial(cfg: dict, default: float = 1.0, *, top_level: str = "partial_rotary_factor") -> float:
    """``partial_rotary_factor``: the one inside the RoPE parameters wins over the top-level key
    (``top_level``), as ``transformers`` fills the parameters in with ``setdefault``."""
    inside = raw_rope_parameters(cfg).get("partial_rotary_factor")
    value = inside if inside is not None else cfg.get(top_level)
    return config_number(cfg, "partial_rotary_factor", value) if value is not None else default


def _num_layers(cfg: dict) -> int:
    return count(cfg, "num_hidden_layers", maximum=MAX_LAYERS)


def _rotary(cfg: dict, head_dim: int, rotary_dim: int, params: dict, **kwargs) -> RotaryLayer:
    return RotaryLayer(rotary_dim=rotary_dim, rope_parameters=params, head_dim=head_dim, **kwargs)


def build_rope(cfg: dict, *, params=None, rotary_fraction: float = 1.0, style: str = "half", mrope_section=None):
    """One :class:`RotaryLayer` for every layer of a model with one RoPE for all (Llama and alike); ``params``
    the filled-in ``rope_parameters`` if the family reads them its own way (else the usual reading)."""
    head_dim = _head_dim(cfg)
    layer = _rotary(
        cfg,
        head_dim,
        int(head_dim * rotary_fraction),
        _flat_rope(cfg) if params is None else params,
        style=style,
        softmax_scale=head_dim**-0.5,
        mrope_section=mrope_section,
    )
    return [layer] * _num_layers(cfg)


def build_llama(cfg: dict) -> list:
    """Llama, Mistral, Qwen2, Qwen3, Falcon without ALiBi: full RoPE, ``half`` layout, ``head_dim ** -0.5``."""
    return build_rope(cfg)


def build_phi3(cfg: dict) -> list:
    """Phi-3 / Phi-4-mini: LongRoPE (``"su"`` and ``"yarn"`` read as ``"longrope"``), partial rotary."""
    params = _flat_rope(cfg, renames={"su": "longrope", "yarn": "longrope"})
    return build_rope(cfg, params=params, rotary_fraction=_partial(cfg))


def build_gpt_neox(cfg: dict) -> list:
    """GPT-NeoX: RoPE on the first ``rotary_pct`` (25%) of each head, base ``rotary_emb_base``."""
    params = rope_parameters(cfg, raw_rope_parameters(cfg), theta=field(cfg, "rotary_emb_base"))
    fraction = _partial(cfg, default=field(cfg, "rotary_pct"), top_level="rotary_pct")  # the top-level factor is unread
    return build_rope(cfg, params=params, rotary_fraction=fraction)


def build_gptj(cfg: dict) -> list:
    """GPT-J: interleaved RoPE on the first ``rotary_dim`` channels, base 10000 (fixed in transformers)."""
    head_dim = _head_dim(cfg, explicit=False)
    rotary_dim = field(cfg, "rotary_dim")  # None rotates the whole head; 0, [] or {} is an error, not the head
    rotary_dim = head_dim if rotary_dim is None else config_int(cfg, "rotary_dim", rotary_dim)
    params = {"rope_type": "default", "rope_theta": 10_000.0}
    layer = _rotary(cfg, head_dim, rotary_dim, params, style="interleaved", softmax_scale=head_dim**-0.5)
    return [layer] * _num_layers(cfg)


def _gemma3_layer_types(cfg: dict) -> list[str]:
    """Each layer's type: ``layer_types`` (one per layer, ``"attention"`` read as ``"full_attention"``,
    as ``transformers`` 5 remaps it), else every ``sliding_window_pattern``-th layer global."""
    n, kinds = _num_layers(cfg), cfg.get("layer_types")
    if kinds is None:
        pattern = count(cfg, "sliding_window_pattern")
        # every pattern-th layer (1-based) attends globally, the others within the sliding window
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
    if not isinstance(kinds, (list, tuple)) or len(kinds) != n:
        size = f"{len(kinds)} entries" if isinstance(kinds, (list, tuple)) else f"{kinds!r:.80}"
        raise ValueError(f"config['layer_types'] must be a list of num_hidden_layers = {n} names, got {size}")
    kinds = ["full_attention" if kind == "attention" else kind for kind in kinds]
    bad = [kind for kind in kinds if kind not in _NESTED]
    if bad:
        raise ValueError(
            f"config['layer_types'] entries must be one of {', '.join(map(repr, _NESTED))}, got {bad[0]!r:.80}"
        )
    return kinds


def _gemma3_rope(cfg: dict) -> dict:
    """``{layer type: rope_parameters}`` as ``transformers`` 5 fills Gemma 3's ``rope_parameters`` in: one dict
    per layer type (a flat dict is ignored, as there), ``rope_scaling`` updating the global one, and a base
    left out taken from ``rope_theta`` (global layers) or ``rope_local_base_freq`` (local ones)."""
    params = config_mapping(cfg, "rope_parameters", cfg.get("rope_parameters"))
    per_type = {key: config_mapping(cfg, f"rope_parameters.{key}", params.get(key)) for key in _NESTED}
    per_type = {key: value or {"rope_type": "default"} for key, value in per_type.items()}
    per_type["full_attention"].update(config_mapping(cfg, "rope_scaling", cfg.get("rope_scaling")))
    theta = {"full_attention": field(cfg, "rope_theta"), "sliding_attention": field(cfg, "rope_local_base_freq")}
    return {key: rope_parameters(cfg, per_type[key], theta=theta[key], nested=True) for key in _NESTED}


def build_gemma3(cfg: dict) -> list:
    """Gemma 3: local layers RoPE base 10^4 unscaled, every 6th layer global, base 10^6 with the scaling.

    Gemma Team, "Gemma 3 Technical Report", 2025, section 2. The softmax scale is
    ``query_pre_attn_scalar ** -0.5``.
    """
    head_dim = _head_dim(cfg)
    scale = config_number(cfg, "query_pre_attn_scalar", field(cfg, "query_pre_attn_scalar")) ** -0.5
    layers = {
        kind: _rotary(cfg, head_dim, head_dim, params, softmax_scale=scale)
        for kind, params in _gemma3_rope(cfg).items()
    }
    return [layers[kind] for kind in _gemma3_layer_types(cfg)]


def build_qwen2_vl(cfg: dict) -> list:
    """Qwen2-VL: M-RoPE, pairs split into temporal/height/width sections; ``position_ids`` ``[3, b, s]``.

    Wang et al., "Qwen2-VL", 2024, section 2.1. The sections are ``mrope_section`` of
    ``rope_parameters`` (``rope_scaling`` in older files, with ``"type": "mrope"``, which
    ``transformers`` reads as the default frequencies).
    """
    params = raw_rope_parameters(cfg)
    section = params.pop("mrope_section", None) or field(cfg, "mrope_section")
    params = _flat_rope(cfg, renames={"mrope": "default"}, params=params)
    return build_rope(cfg, params=params, mrope_section=section)


def build_falcon(cfg: dict) -> list:
    """Falcon: ALiBi when ``alibi`` is true (:func:`posenc.hf_families.build_alibi`), else RoPE."""
    if cfg.get("alibi"):
        return build_alibi(cfg)
    return build_rope({**cfg, "head_dim": None})  # transformers: hidden_size // num_attention_heads


#: ``model_type`` -> builder of the per-layer list.
FAMILIES: dict[str, Callable[[dict], list]] = {
    "llama": build_llama,
    "mistral": build_llama,
    "qwen2": build_llama,
    "qwen3": build_llama,
    "phi3": build_phi3,
    "gpt_neox": build_gpt_neox,
    "gptj": build_gptj,
    "gemma3": build_gemma3,
    "gemma3_text": build_gemma3,
    "qwen2_vl": build_qwen2_vl,
    "qwen2_vl_text": build_qwen2_vl,
    "falcon": build_falcon,
    "llama4": build_llama4,
    "llama4_text": build_llama4,
    "deepseek_v2": build_deepseek,
    "deepseek_v3": build_deepseek,
    "bloom": build_alibi,
    "mpt": build_alibi,
    "t5": build_t5,
}


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
    if 1 < period < len(rows):
        lines.append(f"pattern: the layers repeat every {period} ({len(rows)} layers)")
    return "\n".join(lines)
