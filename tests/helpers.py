"""Helpers shared by the test files: seeded random tensors."""

from __future__ import annotations

import torch


def rand(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Standard normal values drawn directly in ``dtype`` from a generator seeded with ``seed``."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    """Standard normal values (never zeros) drawn in float32 and rounded to ``dtype``.

    The same draw in every dtype, so float16 and bfloat16 inputs are the float32 ones rounded.
    """
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# ---------------------------------------------------------------------------
# The config reader page (book/config_reader.md): the configurations its JavaScript is checked on
# ---------------------------------------------------------------------------

#: Values put in place of a field to reach each check of the reader (types, ranges, huge ints).
ODD_VALUES = (None, 0, -1, 1, 3, 0.5, 1.5, 2.0, float("inf"), "8", True, [], {}, [1, 0], 10**400, 1e308)


def _minimal_configs() -> dict[str, dict]:
    """One small configuration per family posenc.hf reads, and one with nothing but its model_type."""
    from posenc.hf.families import FAMILIES

    small = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 6, "max_position_embeddings": 256}
    configs = {}
    for model_type in FAMILIES:
        configs[f"{model_type} (defaults)"] = {"model_type": model_type}
        configs[f"{model_type} (small)"] = {"model_type": model_type, **small}
    return configs


def _with_odd_values(name: str, config: dict) -> dict[str, dict]:
    """``config`` with each field, and each field of its RoPE parameters, set to each of ``ODD_VALUES``."""
    out = {}
    for key in config:
        for index, value in enumerate(ODD_VALUES):
            out[f"{name}: {key} = {value!r:.20} ({index})"] = {**config, key: value}
    for outer in ("rope_scaling", "rope_parameters"):
        if isinstance(config.get(outer), dict):
            for key in config[outer]:
                for index, value in enumerate(ODD_VALUES):
                    out[f"{name}: {outer}.{key} = {value!r:.20} ({index})"] = {
                        **config,
                        outer: {**config[outer], key: value},
                    }
    return out


#: Every rope_type the reader knows, two older spellings and an unknown one.
ROPE_TYPE_NAMES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "su", "mrope", "ntk")


def _with_rope_types(name: str, config: dict) -> dict[str, dict]:
    """``config`` with its RoPE parameters given each of ``ROPE_TYPE_NAMES``, keeping their other fields."""
    out = {}
    for outer in ("rope_scaling", "rope_parameters"):
        if isinstance(config.get(outer), dict):
            for rope_type in ROPE_TYPE_NAMES:
                params = {k: v for k, v in config[outer].items() if k not in ("type", "rope_type")}
                out[f"{name}: {outer} of type {rope_type}"] = {**config, outer: {**params, "rope_type": rope_type}}
    return out


def _bad_input_configs() -> dict[str, dict]:
    """The configurations of posenc_book/data/bad_inputs.yaml that go to ``from_hf_config`` alone."""
    import ast
    import re

    import yaml

    from posenc_book.data import data_path

    found = {}
    for entry in yaml.safe_load(data_path("bad_inputs.yaml").read_text(encoding="utf-8")):
        match = re.fullmatch(r"from_hf_config\((\{.*\})\)", entry["call"])
        try:
            found[f"bad_inputs: {entry['call']:.60}"] = ast.literal_eval(match.group(1)) if match else None
        except ValueError:  # an expression (10**9), not a literal
            continue
    return {name: config for name, config in found.items() if config is not None}


#: Files that are not a configuration: each reaches one of the reader's messages about the file.
BAD_FILES = {
    "empty": b"",
    "blank": b" \n\t ",
    "byte-order mark": b'\xef\xbb\xbf{"model_type": "llama"}',
    "not UTF-8": b'{"model_type": "llama\xff"}',
    "truncated UTF-8": b'{"model_type": "\xe4\xb8',
    "not JSON": b"model_type: llama",
    "trailing comma": b'{"model_type": "llama",}',
    "missing colon": b'{"model_type" "llama"}',
    "missing comma": b'{"model_type": "llama" "hidden_size": 64}',
    "unterminated string": b'{"model_type": "llama',
    "bad escape": b'{"model_type": "ll\\ama"}',
    "bad unicode escape": b'{"model_type": "\\u12x4"}',
    "control character": b'{"model_type": "ll\tama"}',
    "extra data": b'{"model_type": "llama"} {}',
    "a list": b"[1, 2]",
    "a number": b"3.5",
    "nested too deep": b'{"a": ' * 100 + b"1" + b"}" * 100,
    "nested far too deep": b"[" * 3000 + b"]" * 3000,
    "too many digits": b'{"model_type": "llama", "hidden_size": ' + b"7" * 5000 + b"}",
    "unknown model_type": b'{"model_type": "gpt2"}',
    "no model_type": b'{"hidden_size": 64}',
    "odd model_type": b'{"model_type": ["ll\\u00e9ama", "\\u2028", "\\ud83d\\ude00", 1e-7]}',
    "text_config not an object": b'{"model_type": "gemma3", "text_config": [1]}',
    "NaN and Infinity": b'{"model_type": "llama", "hidden_size": NaN, "rope_theta": -Infinity}',
    "multi-line error": b'{\n  "model_type": "llama",\n  "hidden_size": 64\n  "x": 1\n}',
    "non-ASCII before the error": '{"名字": "ä", "model_type": ]}'.encode(),
}


def config_reader_cases() -> dict[str, bytes]:
    """Every configuration the book ships (posenc_book/data/model_configs.json, chapter 9's models),
    one small and one empty configuration per family, the bad inputs of the reference page, each
    shipped configuration with each field set to odd values, and files that are not configurations:
    name -> the bytes of a config.json."""
    import json

    from posenc_book.data import data_path

    shipped = {name: entry["config"] for name, entry in json.loads(data_path("model_configs.json").read_text()).items()}
    configs = {**shipped, **_minimal_configs(), **_bad_input_configs()}
    for name, config in shipped.items():
        configs.update(_with_odd_values(name, config) | _with_rope_types(name, config))
        if isinstance(config.get("text_config"), dict):
            text, inner = config["text_config"], f"{name} text_config"
            configs.update(_with_odd_values(inner, text) | _with_rope_types(inner, text))
    cases = {name: json.dumps(config, indent=2).encode() for name, config in configs.items()}
    return {**cases, **BAD_FILES}


def describe_command_output(data: bytes, folder, name: str = "config.json") -> str:
    """What ``python -m posenc.describe NAME`` prints (standard output, or standard error on failure)
    for a file ``name`` holding ``data``, written in ``folder``, without its last newline."""
    import contextlib
    import io

    from posenc.hf.cli import main

    (folder / name).write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(folder), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([name])
    return (out if status == 0 else err).getvalue().removesuffix("\n")
