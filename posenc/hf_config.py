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
    MAX_HEAD_DIM,
    MAX_LAYERS,
    MAX_POSITIONS,
    config_dict,
    config_int,
    config_mapping,
    config_number,
    raw_rope_parameters,
)
from .hf_rope import RopeLayer

#: Defaults of the ``transformers`` configuration classes for the fields read here, per family.
DEFAULTS: dict[str, dict] = {
    "gemma3_text": {
        "hidden_size": 2304,
        "num_attention_heads": 8,
        "head_dim": 256,
        "num_hidden_layers": 26,
        "query_pre_attn_scalar": 256,
        "max_position_embeddings": 131072,
        "rope_theta": 1_000_000.0,
        "rope_local_base_freq": 10_000.0,
        "sliding_window_pattern": 6,
    },
    "gpt_neox": {"rotary_pct": 0.25, "rotary_emb_base": 10_000.0},
    "gptj": {"rotary_dim": 64},
    "phi3": {"original_max_position_embeddings": 4096},
    "qwen3": {"head_dim": 128},  # fixed, not hidden_size // num_attention_heads
    "qwen2_vl_text": {"mrope_section": [16, 24, 24], "rope_theta": 1_000_000.0},
}
DEFAULTS["gemma3"] = DEFAULTS["gemma3_text"]
DEFAULTS["qwen2_vl"] = DEFAULTS["qwen2_vl_text"]
for family, length in MAX_POSITIONS.items():  # the class default, where a config.json leaves it out
    DEFAULTS.setdefault(family, {}).setdefault("max_position_embeddings", length)
del family, length

#: Other spellings of a field in older configurations (GPT-2 style, Falcon's RW).
ALIASES = {
    "hidden_size": ("n_embd", "d_model"),
    "num_attention_heads": ("n_head",),
    "num_hidden_layers": ("n_layer", "num_layers"),
    "max_position_embeddings": ("n_positions",),
}

_LENGTH_TYPES = ("llama3", "yarn", "longrope")  # they read the trained length from the configuration
_NESTED = ("full_attention", "sliding_attention")  # Gemma 3's keys of per-layer-type rope_parameters


def _get(cfg: dict, key: str, default=None, *, required: bool = False):
    """``cfg[key]`` or one of its aliases, else the family default, else ``default``."""
    for name in (key, *ALIASES.get(key, ())):
        if cfg.get(name) is not None:
            return cfg[name]
    value = DEFAULTS.get(cfg.get("model_type"), {}).get(key, default)
    if value is None and required:
        raise ValueError(f"config has no {key!r}, which model_type {cfg.get('model_type')!r} needs")
    return value


def _head_dim(cfg: dict, *, explicit: bool = True) -> int:
    """``head_dim`` if given (and ``explicit``), else ``hidden_size // num_attention_heads``."""
    if explicit and _get(cfg, "head_dim") is not None:
        return config_int(cfg, "head_dim", _get(cfg, "head_dim"), MAX_HEAD_DIM)
    width = config_int(cfg, "hidden_size", _get(cfg, "hidden_size", required=True))
    heads = config_int(cfg, "num_attention_heads", _get(cfg, "num_attention_heads", required=True))
    if width // heads > MAX_HEAD_DIM:  # every layer builds a table per pair: 2**40 would exhaust memory
        raise ValueError(f"config's hidden_size // num_attention_heads = {width // heads} must be <= {MAX_HEAD_DIM}")
    return width // heads


def _rope_setup(cfg: dict, params: Mapping | None, *, theta: float, nested: bool = False) -> tuple[float, dict | None]:
    """``(base, scaling)`` from one ``rope_parameters`` dict, filled in as ``transformers`` standardizes it.

    ``rope_theta`` inside wins over ``theta``; ``original_max_position_embeddings`` for
    llama3/yarn/longrope comes from the top level (Phi-3) or else ``max_position_embeddings``;
    dynamic NTK always scales from ``max_position_embeddings``; a missing YaRN or LongRoPE
    ``factor`` is ``max_position_embeddings / original_max_position_embeddings``.
    """
    params = {key: value for key, value in dict(params or {}).items() if key != "partial_rotary_factor"}
    legacy = params.pop("type", None)
    rope_type = params.setdefault("rope_type", legacy or "default")
    inside = params.pop("rope_theta", None)  # a falsy base (0, [], {}) is an error, not the default
    base = config_number(cfg, "rope_theta", theta if inside is None else inside)
    if rope_type == "default":
        return base, None
    length, key = _get(cfg, "max_position_embeddings"), "original_max_position_embeddings"
    if length is not None:  # NaN, -1 or True would silently give LongRoPE an attention factor of 1
        length = config_int(cfg, "max_position_embeddings", length)
    if rope_type in _LENGTH_TYPES:
        if not nested and _get(cfg, key) is not None:
            # transformers gives the top-level value priority, the class default included (Phi-3's 4096)
            params[key] = _get(cfg, key)
        elif params.get(key) is None:
            params[key] = length if length is not None else _get(cfg, key)
    if rope_type == "dynamic":
        params[key] = length  # transformers' dynamic update reads config.max_position_embeddings
    if rope_type in ("yarn", "longrope") and params.get("factor") is None and length and params.get(key) is not None:
        ratio = length / config_int(cfg, key, params[key])
        if ratio >= 1 or rope_type == "yarn":
            params["factor"] = ratio
        else:  # transformers: no attention factor for a factor <= 1
            params.setdefault("attention_factor", 1.0)
    return base, params


def _flat_rope(cfg: dict, theta: float = 10_000.0) -> tuple[float, dict | None]:
    """The one ``rope_parameters`` (or ``rope_scaling`` + ``rope_theta``) of a single-RoPE model."""
    return _rope_setup(cfg, raw_rope_parameters(cfg), theta=_get(cfg, "rope_theta", theta))


def _partial(cfg: dict, default: float = 1.0, *, top_level: str = "partial_rotary_factor") -> float:
    """``partial_rotary_factor``: the one inside the RoPE parameters wins over the top-level key
    (``top_level``), as ``transformers`` fills the parameters in with ``setdefault``."""
    inside = raw_rope_parameters(cfg).get("partial_rotary_factor")
    value = inside if inside is not None else cfg.get(top_level)
    return config_number(cfg, "partial_rotary_factor", value) if value is not None else default


def _num_layers(cfg: dict) -> int:
    return config_int(cfg, "num_hidden_layers", _get(cfg, "num_hidden_layers", required=True), MAX_LAYERS)


def build_rope(cfg: dict, *, rotary_fraction: float = 1.0, layout: str = "half", mrope_section=None) -> list:
    """One :class:`RopeLayer` per layer for a model with one RoPE for every layer (Llama and alike)."""
    head_dim = _head_dim(cfg)
    base, scaling = _flat_rope(cfg)
    layer = RopeLayer(
        head_dim=head_dim,
        rotary_dim=int(head_dim * rotary_fraction),
        base=base,
        scaling=scaling,
        layout=layout,
        softmax_scale=head_dim**-0.5,
        mrope_section=mrope_section,
    )
    return [layer] * _num_layers(cfg)


def build_llama(cfg: dict) -> list:
    """Llama, Mistral, Qwen2, Qwen3, Falcon without ALiBi: full RoPE, ``half`` layout, ``head_dim ** -0.5``."""
    return build_rope(cfg)


def build_phi3(cfg: dict) -> list:
    """Phi-3 / Phi-4-mini: LongRoPE (``"su"`` and ``"yarn"`` read as ``"longrope"``), partial rotary."""
    params = raw_rope_parameters(cfg)
    if params.get("rope_type", params.get("type")) in ("su", "yarn"):
        params.pop("type", None)
        params["rope_type"] = "longrope"
    return build_rope({**cfg, "rope_parameters": params, "rope_scaling": None}, rotary_fraction=_partial(cfg))


def build_gpt_neox(cfg: dict) -> list:
    """GPT-NeoX: RoPE on the first ``rotary_pct`` (25%) of each head, base ``rotary_emb_base``."""
    params = raw_rope_parameters(cfg)
    params.setdefault("rope_theta", _get(cfg, "rotary_emb_base"))
    fraction = _partial(cfg, default=_get(cfg, "rotary_pct"), top_level="rotary_pct")  # the top-level factor is unread
    return build_rope({**cfg, "rope_parameters": params, "rope_scaling": None}, rotary_fraction=fraction)


def build_gptj(cfg: dict) -> list:
    """GPT-J: interleaved RoPE on the first ``rotary_dim`` channels, base 10000 (fixed in transformers)."""
    head_dim = _head_dim(cfg, explicit=False)
    rotary_dim = _get(cfg, "rotary_dim")  # None rotates the whole head; 0, [] or {} is an error, not the head
    rotary_dim = head_dim if rotary_dim is None else config_int(cfg, "rotary_dim", rotary_dim)
    layer = RopeLayer(
        head_dim=head_dim, rotary_dim=rotary_dim, base=10_000.0, layout="interleaved", softmax_scale=head_dim**-0.5
    )
    return [layer] * _num_layers(cfg)


def _gemma3_layer_types(cfg: dict) -> list[str]:
    """Each layer's type: ``layer_types`` (one per layer, ``"attention"`` read as ``"full_attention"``,
    as ``transformers`` 5 remaps it), else every ``sliding_window_pattern``-th layer global."""
    n, kinds = _num_layers(cfg), cfg.get("layer_types")
    if kinds is None:
        pattern = config_int(cfg, "sliding_window_pattern", _get(cfg, "sliding_window_pattern"))
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
    """``{layer type: (base, scaling)}`` as ``transformers`` 5 fills Gemma 3's ``rope_parameters`` in: one dict
    per layer type (a flat dict is ignored, as there), ``rope_scaling`` updating the global one, and a base
    left out taken from ``rope_theta`` (global layers) or ``rope_local_base_freq`` (local ones)."""
    params = config_mapping(cfg, "rope_parameters", cfg.get("rope_parameters"))
    per_type = {key: config_mapping(cfg, f"rope_parameters.{key}", params.get(key)) for key in _NESTED}
    per_type = {key: value or {"rope_type": "default"} for key, value in per_type.items()}
    per_type["full_attention"].update(config_mapping(cfg, "rope_scaling", cfg.get("rope_scaling")))
    theta = {"full_attention": _get(cfg, "rope_theta"), "sliding_attention": _get(cfg, "rope_local_base_freq")}
    return {key: _rope_setup(cfg, per_type[key], theta=theta[key], nested=True) for key in _NESTED}


def build_gemma3(cfg: dict) -> list:
    """Gemma 3: local layers RoPE base 10^4 unscaled, every 6th layer global, base 10^6 with the scaling.

    Gemma Team, "Gemma 3 Technical Report", 2025, section 2. The softmax scale is
    ``query_pre_attn_scalar ** -0.5``.
    """
    head_dim = _head_dim(cfg)
    scale = config_number(cfg, "query_pre_attn_scalar", _get(cfg, "query_pre_attn_scalar")) ** -0.5
    layers = {
        kind: RopeLayer(head_dim=head_dim, rotary_dim=head_dim, base=base, scaling=scaling, softmax_scale=scale)
        for kind, (base, scaling) in _gemma3_rope(cfg).items()
    }
    return [layers[kind] for kind in _gemma3_layer_types(cfg)]


def build_qwen2_vl(cfg: dict) -> list:
    """Qwen2-VL: M-RoPE, pairs split into temporal/height/width sections; ``position_ids`` ``[3, b, s]``.

    Wang et al., "Qwen2-VL", 2024, section 2.1. The sections are ``mrope_section`` of
    ``rope_parameters`` (``rope_scaling`` in older files, with ``"type": "mrope"``, which
    ``transformers`` reads as the default frequencies).
    """
    params = raw_rope_parameters(cfg)
    section = params.pop("mrope_section", None) or _get(cfg, "mrope_section")
    if params.get("rope_type", params.get("type")) == "mrope":
        params.pop("type", None)
        params["rope_type"] = "default"
    return build_rope({**cfg, "rope_parameters": params, "rope_scaling": None}, mrope_section=section)


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
