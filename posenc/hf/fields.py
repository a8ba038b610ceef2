"""A Hugging Face configuration as a plain dict, and one checked accessor per kind of field.

:func:`config_dict` turns a configuration (an object, a dict or a ``config.json`` path)
into a plain dict; :func:`config_int`, :func:`config_number`, :func:`config_mapping` and
:func:`config_flags` each check one field. A value out of range is a ``ValueError``
naming the field, the value, the limit and the model type, never a builtin ``int()``,
``dict()`` or ``len()`` error, a division by zero, or a default put silently in place of
garbage. :func:`field` reads a field under any of its spellings, with the family's default, and
:func:`rope_parameters` fills in one set of RoPE parameters as ``transformers`` does: the whole reader
(:mod:`posenc.hf.families`) reads every field through them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

#: The most layers a config may declare: one object per layer is built, so 10**9 would exhaust memory.
MAX_LAYERS = 1 << 16
#: The widest head a config may declare (released models use at most 512): every layer builds
#: tables of ``head_dim / 2`` frequencies, so 2**40 would exhaust memory.
MAX_HEAD_DIM = 1 << 16
#: The deepest nesting a configuration may have (real ones nest three or four levels): deeper would exhaust the stack.
MAX_DEPTH = 64


def _family(cfg: Mapping) -> str:
    return f"(model_type {cfg.get('model_type')!r:.80})"


def _field(name: str) -> str:
    """``config['rope_parameters']['full_attention']`` for ``"rope_parameters.full_attention"``."""
    return "config" + "".join(f"[{part!r}]" for part in name.split("."))


def config_int(cfg: Mapping, name: str, value, maximum: int | None = None) -> int:
    """``value``, the config field ``name``, if it is an int >= 1 (and <= ``maximum``); else a ``ValueError``
    naming the field, the family and the value (a string, a float, NaN or infinity would crash or mislead)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (maximum and value > maximum):
        most = f" and <= {maximum}" if maximum else ""
        raise ValueError(f"{_field(name)} must be an int >= 1{most}, got {value!r:.80} {_family(cfg)}")
    return value


def config_number(cfg: Mapping, name: str, value) -> float:
    """``value``, the config field ``name``, as a float if it is a finite number > 0; else a ``ValueError``
    naming the field, the family and the value (``float()`` of a string, NaN or infinity would not say)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{_field(name)} must be a finite number > 0, got {value!r:.80} {_family(cfg)}")
    return float(value)


def config_mapping(cfg: Mapping, name: str, value) -> dict:
    """``value``, the config field ``name``, as a new dict (``{}`` for None); a string, a number or a
    list is a ``ValueError`` naming the field, the family and the value (``dict()`` or ``.get`` would not say)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{_field(name)} must be a dict (a JSON object) or null, got {value!r:.80} {_family(cfg)}")
    return dict(value)


def config_bool(cfg: Mapping, name: str, default: bool) -> bool:
    """The config flag ``name``: JSON's ``true`` or ``false``, ``default`` if absent, false if null (as
    ``transformers`` reads it). A string such as ``"false"`` or a number is a ``ValueError``, where
    ``transformers`` reads it by truthiness."""
    if name not in cfg:
        return default
    value = cfg[name]
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValueError(f"{_field(name)} must be true or false, got {value!r:.80} {_family(cfg)}")
    return value


def config_flags(cfg: Mapping, name: str, value, length: int) -> list:
    """``value``, the config field ``name``, if it is a list of exactly ``length`` flags 0 or 1 (one per layer,
    as ``transformers`` requires); a string such as ``"0000"``, bools, a 2 or another length is a ``ValueError``."""
    if not isinstance(value, (list, tuple)) or any(isinstance(v, bool) or v not in (0, 1) for v in value):
        raise ValueError(f"{_field(name)} must be a list of ints (1: RoPE, 0: NoPE), got {value!r:.80} {_family(cfg)}")
    if len(value) != length:
        raise ValueError(
            f"{_field(name)} must have num_hidden_layers = {length} entries, got {len(value)} {_family(cfg)}"
        )
    return list(value)


def raw_rope_parameters(cfg: Mapping) -> dict:
    """The RoPE parameters as written, read as ``transformers`` 5 reads them: ``rope_scaling``
    when it is given and not empty, else ``rope_parameters`` (``convert_rope_params_to_dict``)."""
    scaling = config_mapping(cfg, "rope_scaling", cfg.get("rope_scaling"))
    if scaling or cfg.get("rope_parameters") is not None:
        return scaling or config_mapping(cfg, "rope_parameters", cfg.get("rope_parameters"))
    return dict(DEFAULTS.get(cfg.get("model_type"), {}).get("rope_parameters", {}))  # the class's own


#: Other spellings of a field, in older or other families' configurations (GPT-2 style, BLOOM, MPT, T5).
ALIASES = {
    "hidden_size": ("n_embd", "n_embed", "d_model"),
    "num_attention_heads": ("n_head", "n_heads", "num_heads"),
    "num_hidden_layers": ("n_layer", "n_layers", "num_layers"),
    "max_position_embeddings": ("n_positions",),
    "no_rope_layer_interval": ("nope_layer_interval",),
}

_LLAMA4 = {
    "head_dim": 128,  # fixed, not hidden_size // num_attention_heads
    "max_position_embeddings": 131072,
    "rope_theta": 500_000.0,
    "no_rope_layer_interval": 4,
    "floor_scale": 8192,
    "attn_scale": 0.1,
}
_GEMMA3 = {
    "hidden_size": 2304,
    "num_attention_heads": 8,
    "head_dim": 256,
    "num_hidden_layers": 26,
    "query_pre_attn_scalar": 256,
    "max_position_embeddings": 131072,
    "rope_theta": 1_000_000.0,
    "rope_local_base_freq": 10_000.0,
    "sliding_window_pattern": 6,
}
_QWEN2_VL = {"mrope_section": [16, 24, 24], "rope_theta": 1_000_000.0, "max_position_embeddings": 32768}
#: Defaults of the ``transformers`` configuration classes for the fields read here, per ``model_type``:
#: what a ``config.json`` that leaves a field out means.
DEFAULTS: dict[str, dict] = {
    "llama": {"max_position_embeddings": 2048},
    "mistral": {"max_position_embeddings": 131072},
    "qwen2": {"max_position_embeddings": 32768},
    "qwen3": {"head_dim": 128, "max_position_embeddings": 32768},  # head_dim fixed, as Llama 4's
    "phi3": {"original_max_position_embeddings": 4096, "max_position_embeddings": 4096},
    "gpt_neox": {"rotary_pct": 0.25, "rotary_emb_base": 10_000.0, "max_position_embeddings": 2048},
    "gptj": {"rotary_dim": 64, "max_position_embeddings": 2048},
    "falcon": {"max_position_embeddings": 2048},
    "gemma3": _GEMMA3,
    "gemma3_text": _GEMMA3,
    "qwen2_vl": _QWEN2_VL,
    "qwen2_vl_text": _QWEN2_VL,
    "llama4": _LLAMA4,
    "llama4_text": _LLAMA4,
    "deepseek_v2": {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "max_position_embeddings": 2048},
    "deepseek_v3": {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "max_position_embeddings": 4096},
    "kimi_k2": {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "max_position_embeddings": 4096},  # as V3
    "mpt": {"max_seq_len": 2048},
    "gpt_oss": {
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "rope_theta": 150_000.0,
        "rope_parameters": {
            "rope_type": "yarn",
            "factor": 32.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 4096,
        },
    },  # fmt: skip
    "smollm3": {"max_position_embeddings": 32768, "rope_theta": 2_000_000.0, "no_rope_layer_interval": 4},
    "cohere2": {"head_dim": 128, "max_position_embeddings": 8192},
    "glm4": {"head_dim": 128, "max_position_embeddings": 131072, "rope_parameters": {"partial_rotary_factor": 0.5}},
    "glm4_moe": {"max_position_embeddings": 131072, "rope_parameters": {"partial_rotary_factor": 0.5}},
    "qwen3_next": {
        "head_dim": 256,
        "max_position_embeddings": 32768,
        "rope_parameters": {"partial_rotary_factor": 0.25},
    },
    "deepseek_v32": {"qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "max_position_embeddings": 163840},
    "t5": {"d_kv": 64, "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128},
}
#: ``max_position_embeddings`` of each family's configuration class (dynamic NTK, and the trained length
#: of llama3, YaRN and LongRoPE, read it).
MAX_POSITIONS = {
    family: d["max_position_embeddings"] for family, d in DEFAULTS.items() if "max_position_embeddings" in d
}


def field(cfg: Mapping, key: str, default=None, *, required: bool = False):
    """The config field ``key`` (or one of its :data:`ALIASES`), else the family's :data:`DEFAULTS`,
    else ``default``; with ``required``, a missing field is a ``ValueError`` naming it and the family."""
    for name in (key, *ALIASES.get(key, ())):
        if cfg.get(name) is not None:
            return cfg[name]
    value = DEFAULTS.get(cfg.get("model_type"), {}).get(key, default)
    if value is None and required:
        also = f" (or {', '.join(map(repr, ALIASES[key]))})" if key in ALIASES else ""
        raise ValueError(f"config is missing {key!r}{also}, which model_type {cfg.get('model_type')!r:.80} needs")
    return value


#: The largest count of each kind a configuration may give, checked before anything is built
#: (a layer, a head or a bucket is a row of some table; 10**9 heads would exhaust memory).
MAXIMA = {"num_hidden_layers": MAX_LAYERS, "head_dim": MAX_HEAD_DIM, "num_attention_heads": 1 << 16}
MAXIMA["relative_attention_num_buckets"] = 1 << 16


def count(cfg: Mapping, key: str, default=None, maximum: int | None = None) -> int:
    """:func:`field` ``key`` (required unless ``default`` is given) checked by :func:`config_int`,
    named as the configuration spells it, and at most ``maximum`` (by default ``MAXIMA[key]``)."""
    value = field(cfg, key, default, required=True)
    name = next((n for n in (key, *ALIASES.get(key, ())) if cfg.get(n) is not None), key)
    return config_int(cfg, name, value, maximum if maximum is not None else MAXIMA.get(key))


_LENGTH_TYPES = ("llama3", "yarn", "longrope")  # they read the trained length from the configuration


def rope_parameters(cfg: Mapping, params: Mapping | None, *, theta, nested: bool = False, renames=None) -> dict:
    """One ``rope_parameters`` dict filled in as ``transformers`` 5 standardizes it, ``rope_theta`` inside.

    The legacy ``"type"`` key is read as ``"rope_type"`` (and a family's own names through ``renames``,
    e.g. Phi-3's ``{"su": "longrope"}``); ``rope_theta`` inside wins over ``theta``. For llama3, YaRN and
    LongRoPE the trained length ``original_max_position_embeddings`` comes from the top level (unless the
    dict is one of Gemma 3's per-layer-type ones), else the dict, else ``max_position_embeddings``; dynamic
    NTK always scales from ``max_position_embeddings``; a YaRN or LongRoPE ``factor`` left out is
    ``max_position_embeddings / original_max_position_embeddings``.
    """
    params = {key: value for key, value in dict(params or {}).items() if key != "partial_rotary_factor"}
    legacy = params.pop("type", None)
    rope_type = params.setdefault("rope_type", legacy or "default")
    if not isinstance(rope_type, str):
        where = "rope_parameters" if nested or cfg.get("rope_scaling") is None else "rope_scaling"
        raise ValueError(
            f"config[{where!r}]['rope_type'] must be a string naming the scaling, got {rope_type!r:.80} "
            f"(model_type {cfg.get('model_type')!r:.80})"
        )
    rope_type = params["rope_type"] = (renames or {}).get(rope_type, rope_type)
    inside = params.pop("rope_theta", None)  # a falsy base (0, [], {}) is an error, not the default
    params["rope_theta"] = config_number(cfg, "rope_theta", theta if inside is None else inside)
    if rope_type == "default":
        return {"rope_type": "default", "rope_theta": params["rope_theta"]}
    length, key = field(cfg, "max_position_embeddings"), "original_max_position_embeddings"
    if length is not None:  # NaN, -1 or True would silently give LongRoPE an attention factor of 1
        length = config_int(cfg, "max_position_embeddings", length)
    if rope_type in _LENGTH_TYPES:
        if not nested and field(cfg, key) is not None:
            # transformers gives the top-level value priority, the class default included (Phi-3's 4096)
            params[key] = field(cfg, key)
        elif params.get(key) is None:
            params[key] = length if length is not None else field(cfg, key)
    if rope_type == "dynamic":
        params[key] = length  # transformers' dynamic update reads config.max_position_embeddings
    if rope_type in ("yarn", "longrope") and params.get("factor") is None and length and params.get(key) is not None:
        ratio = length / config_int(cfg, key, params[key])
        if ratio >= 1 or rope_type == "yarn":
            params["factor"] = ratio
        else:  # transformers: no attention factor for a factor <= 1
            params.setdefault("attention_factor", 1.0)
    return params


def _plain(value, where: str, depth: int = 0):
    """A deep copy of ``value`` as ``json.loads(json.dumps(value))`` makes it, with errors that say where."""
    if depth > MAX_DEPTH:
        raise ValueError(f"config is nested more than {MAX_DEPTH} levels deep, at {where:.100}")
    if isinstance(value, Mapping):
        copy = {}
        for key, item in value.items():
            if not (key is None or isinstance(key, (str, int, float))):  # JSON spells the others' keys as text
                raise TypeError(f"config keys must be strings, got {key!r:.80} ({type(key).__name__}) in {where}")
            text = key if isinstance(key, str) else json.dumps(key)
            copy[text] = _plain(item, f"{where}[{text!r}]", depth + 1)
        return copy
    if isinstance(value, (list, tuple)):
        return [_plain(item, f"{where}[{index}]", depth + 1) for index, item in enumerate(value)]
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (int, float)):
        return float(value) if isinstance(value, float) else int(value)
    raise TypeError(f"{where} must be a JSON value (dict, list, str, number, bool or null), got {type(value).__name__}")


def _read_json(path: Path):
    """The JSON value in the file ``path``; a ``ValueError`` naming the file when it cannot be read as JSON."""
    name = repr(str(path))
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ValueError(f"config file {name} cannot be read: {error.strerror}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        raise ValueError(f"config file {name} starts with a byte-order mark; save it as UTF-8 without one")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"config file {name} is not UTF-8 text: byte {error.start} is {data[error.start]:#04x}"
        ) from None
    if not text.strip():
        raise ValueError(f"config file {name} is empty; a config.json holds one JSON object")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"config file {name} is not JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    except RecursionError:
        raise ValueError(f"config file {name} is nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as error:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise ValueError(f"config file {name} holds a number Python will not read: {error}") from None


def config_dict(config) -> dict:
    """The configuration as a plain dict, its ``text_config`` (if any) merged over the top level.

    Args:
        config: A ``transformers`` configuration object (anything with ``to_dict()``; else
            its ``vars()``), a mapping, or a ``str``/``Path`` of a ``config.json``.

    Returns:
        A new dict. For a multimodal configuration the text model's fields win, and
        ``model_type`` is the text model's (``"gemma3_text"``, ``"qwen2_vl_text"``, ...).

    Raises:
        ValueError: If the path does not exist, or is not UTF-8 JSON of an object (the
            message names the file), the configuration is nested more than ``MAX_DEPTH``
            levels, or ``config`` is none of the above.
        TypeError: If it holds a value JSON cannot (a set, an object) or a key that is not a string.
    """
    if isinstance(config, (str, Path)):
        path = Path(config)
        if not path.is_file():
            raise ValueError(f"config path {str(path)!r} is not a file; pass a config.json")
        cfg = _read_json(path)
    elif isinstance(config, Mapping):
        cfg = dict(config)
    elif hasattr(config, "to_dict"):
        cfg = config.to_dict()
    elif hasattr(config, "__dict__"):
        cfg = dict(vars(config))
    else:
        raise ValueError(f"config must be a configuration object, a dict or a path, got {type(config).__name__}")
    if not isinstance(cfg, Mapping):
        raise ValueError(f"config must hold a JSON object, got {type(cfg).__name__}")
    cfg = _plain(cfg, "config")  # a deep copy: the builders may fill in defaults
    text = cfg.get("text_config")
    if text is not None and not isinstance(text, Mapping):
        raise ValueError(f"config['text_config'] must be a JSON object (the text model's fields), got {text!r:.80}")
    if isinstance(text, Mapping):
        outer = {key: value for key, value in cfg.items() if not key.endswith("_config")}
        cfg = {**outer, **text, "model_type": text.get("model_type") or cfg.get("model_type")}
    return cfg


def scaling_label(params: Mapping | None) -> str | None:
    """A short name of a ``rope_parameters`` scaling for tables: None, ``"linear x8"``, ``"longrope x32"``."""
    if not params or params.get("rope_type", "default") == "default":
        return None
    factor = params.get("factor")
    return params["rope_type"] if factor is None else f"{params['rope_type']} x{float(factor):g}"
