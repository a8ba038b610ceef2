"""A Hugging Face configuration as a plain dict, and one checked accessor per kind of field.

:func:`config_dict` turns a configuration (an object, a dict or a ``config.json`` path)
into a plain dict; :func:`config_int`, :func:`config_number`, :func:`config_mapping` and
:func:`config_flags` each check one field. A value out of range is a ``ValueError``
naming the field, the value, the limit and the model type, never a builtin ``int()``,
``dict()`` or ``len()`` error, a division by zero, or a default put silently in place of
garbage. :mod:`posenc.hf_config` and :mod:`posenc.hf_families` read every field through them.
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
#: ``max_position_embeddings`` of each family's ``transformers`` configuration class, used when a
#: ``config.json`` leaves it out (dynamic NTK, and the trained length of llama3, YaRN and LongRoPE, read it).
MAX_POSITIONS = {
    "deepseek_v2": 2048,
    "deepseek_v3": 4096,
    "falcon": 2048,
    "gemma3": 131072,
    "gemma3_text": 131072,
    "gpt_neox": 2048,
    "gptj": 2048,
    "llama": 2048,
    "llama4": 131072,
    "llama4_text": 131072,
    "mistral": 131072,
    "phi3": 4096,
    "qwen2": 32768,
    "qwen2_vl": 32768,
    "qwen2_vl_text": 32768,
    "qwen3": 32768,
}


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


def config_flags(cfg: Mapping, name: str, value, length: int) -> list:
    """``value``, the config field ``name``, if it is a list of exactly ``length`` ints (one per layer, as
    ``transformers`` requires); a string such as ``"0000"``, bools or another length is a ``ValueError``."""
    if not isinstance(value, (list, tuple)) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
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
    return scaling or config_mapping(cfg, "rope_parameters", cfg.get("rope_parameters"))


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
    if isinstance(text, Mapping):
        outer = {key: value for key, value in cfg.items() if not key.endswith("_config")}
        cfg = {**outer, **text, "model_type": text.get("model_type") or cfg.get("model_type")}
    return cfg
