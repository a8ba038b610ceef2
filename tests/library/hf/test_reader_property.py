"""Property-based test: :func:`posenc.from_hf_config` against transformers' own configuration classes and modules.

For every family ``from_hf_config`` reads, hypothesis draws a small configuration as a
``config.json`` would hold it: random sizes, bases, factors and scaling parameters; optional
fields left out at random (the configuration class's defaults then apply); the RoPE
parameters spelt as ``rope_parameters`` (with ``rope_theta`` inside or beside it), as the
older ``rope_scaling`` + ``rope_theta`` or with the legacy ``"type"`` key, wherever the
class accepts that spelling. transformers builds its configuration object from that dict
with the family's own class; posenc reads the same configuration in every input form
``from_hf_config`` takes (the dict, the configuration object, a ``config.json`` path, the
file ``save_pretrained`` writes, which leaves out every default, and the multimodal
wrapper with ``text_config`` where the family has one).

The reference is transformers' own code, run on the drawn configuration:

* RoPE families (Llama, Mistral, Qwen2, Qwen3, Phi-3, GPT-NeoX, Falcon, Gemma 3, Qwen2-VL):
  the rotary embedding module gives cos/sin (compared with the layer's ``cos_sin``), and
  the attention module's forward runs with it; its ``apply_rotary_pos_emb`` is wrapped to
  record the queries and keys before RoPE (our inputs, after any q/k norm) and an
  attention function registered with ``AttentionInterface`` records the rotated states
  and the ``scaling`` the module passes (Falcon, which has its own attention code: its
  eager attention probabilities). Reference logits ``q_rot @ repeat_kv(k_rot)^T * scaling``.
* GPT-J: the attention module's forward, its ``_attn`` recording the rotated states.
* Llama 4 and DeepSeek-V2/V3: the attention module's forward with the recorder, as
  ``tests/library/hf/test_families.py`` does for fixed configurations.
* BLOOM, MPT, Falcon with ALiBi: ``build_alibi_tensor`` / ``build_mpt_alibi_tensor`` and the
  attention module's scale; T5: ``T5Attention.compute_bias`` of a decoder block.

Positions are random, per batch row, and reach past ``max_position_embeddings`` (and the
trained length of llama3/YaRN/LongRoPE) so that extrapolation, dynamic NTK and LongRoPE's
long factors are exercised. Both form the angles in float32, but from frequencies computed
their own ways (posenc in float64, rounded once): the angles can differ by a float32 step,
about ``1.2e-7 * position`` radians, and the tolerances below grow with the largest position
accordingly.

Bounded and derandomized (``PROPERTY``), as the fuzz tests (``tests/fuzzing.py``): a fixed number of
examples per family, the same ones on every run.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import json
import math
import tempfile
from pathlib import Path
from unittest import mock

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posenc import from_hf_config
from posenc.hf.fields import MAX_POSITIONS

transformers = pytest.importorskip("transformers")
from transformers import AttentionInterface  # noqa: E402
from transformers.models.llama.modeling_llama import repeat_kv  # noqa: E402

PROPERTY = settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

RECORD: dict = {}


def _record(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """An eager attention that keeps the rotated states and the scaling it was given."""
    rep = query.shape[1] // key.shape[1]
    RECORD.update(q_rot=query, k_rot=key, scaling=scaling)
    logits = torch.matmul(query, repeat_kv(key, rep).transpose(2, 3)) * scaling
    probs = torch.softmax(logits, dim=-1)
    return torch.matmul(probs, repeat_kv(value, rep)).transpose(1, 2).contiguous(), probs


AttentionInterface.register("posenc_property", _record)


# ---------------------------------------------------------------------------
# Tolerances
# ---------------------------------------------------------------------------


def angle_error(pmax: int) -> float:
    """A bound on |float32 angle - float64 angle| at positions <= pmax (the product and inv_freq each round)."""
    return 4 * 2.0**-24 * max(pmax, 1) + 1e-6


def assert_logits_close(ours: torch.Tensor, theirs: torch.Tensor, q, k, pmax: int, what: str) -> None:
    """Logits agree to the angle error times the size of the rotated vectors (|q| |k| scale per entry)."""
    scale = (q.norm(dim=-1).amax() * k.norm(dim=-1).amax()).item()
    atol = 3e-6 * scale + 2 * angle_error(pmax) * scale * (theirs.abs().amax().item() / max(scale, 1e-12) + 1)
    torch.testing.assert_close(ours, theirs, atol=atol, rtol=1e-5, msg=lambda m: f"{what}: {m}")


def assert_cos_sin_close(ours, theirs, factor: float, pmax: int, what: str) -> None:
    atol = 4e-7 * factor + angle_error(pmax) * factor
    for name, a, b in zip(("cos", "sin"), ours, theirs, strict=True):
        torch.testing.assert_close(a.float(), b.float(), atol=atol, rtol=1e-5, msg=lambda m, n=name: f"{what} {n}: {m}")


# ---------------------------------------------------------------------------
# Strategies: pieces of a config.json
# ---------------------------------------------------------------------------

BASES = st.one_of(st.sampled_from([100.0, 10_000.0, 500_000.0, 1e6]), st.floats(100.0, 1e6))
FACTORS = st.one_of(st.sampled_from([4.0, 2.0, 8.0, 16.0, 1.0]), st.floats(1.0, 16.0))
LENGTHS = st.sampled_from([16, 32, 64, 100, 128, 256, 512, 1000, 2048])


KEEP = st.booleans()


def maybe(draw, value, p_keep=KEEP):
    """``value`` or None (the field left out), as hypothesis chooses."""
    return value if draw(p_keep) else None


def put(target: dict, key: str, value) -> None:
    """Set ``target[key]`` unless ``value`` is None (a field left out of the file)."""
    if value is not None:
        target[key] = value


@st.composite
def heads(draw, *, max_kv: int = 2):
    """``(h_q, h_kv)``: grouped-query attention with 1 or 2 queries per key head."""
    kv = draw(st.integers(1, max_kv))
    return kv * draw(st.integers(1, 2)), kv


@st.composite
def scaling_parameters(  # noqa: C901 (one branch per rope_type)
    draw, rope_type: str, rotary_dim: int, length: int | None, *, top_original: bool = False
):
    """One ``rope_parameters`` dict of ``rope_type`` (without its base), optional fields left out at random.

    ``length`` is ``max_position_embeddings`` as transformers will see it (the file's or
    the class default); ``top_original``: the file also writes a top-level
    ``original_max_position_embeddings`` (which then wins).
    """
    params: dict = {"rope_type": rope_type}
    if rope_type == "default":
        return params
    if rope_type in ("linear", "dynamic"):
        params["factor"] = draw(FACTORS)
        return params
    length = length or 2048
    original = draw(st.sampled_from(sorted({max(4, length // d) for d in (1, 2, 4, 8, 16)})))
    if rope_type == "llama3":
        low = draw(st.sampled_from([1.0, 2.0, 0.5]))
        params.update(
            factor=draw(FACTORS), low_freq_factor=low, high_freq_factor=low * draw(st.sampled_from([2.0, 4.0, 8.0]))
        )
        if not top_original:
            put(params, "original_max_position_embeddings", maybe(draw, original))
        return params
    if rope_type == "yarn":
        # transformers requires the key but derives a null factor as max_position_embeddings / trained length
        params["factor"] = maybe(draw, draw(FACTORS))
        if not top_original:
            put(params, "original_max_position_embeddings", maybe(draw, original))
        put(params, "beta_fast", maybe(draw, draw(st.sampled_from([32, 16, 64, 8.5]))))
        put(params, "beta_slow", maybe(draw, draw(st.sampled_from([1, 2, 0.5]))))
        which = draw(st.sampled_from(["none", "attention_factor", "mscale"]))
        if which == "attention_factor":
            params["attention_factor"] = draw(st.floats(0.5, 2.0))
        elif which == "mscale":
            params["mscale"], params["mscale_all_dim"] = draw(st.sampled_from([(1.0, 1.0), (0.707, 1.0), (1.0, 0.5)]))
        put(params, "truncate", maybe(draw, draw(st.booleans())))
        return params
    if rope_type == "longrope":
        pairs = rotary_dim // 2
        short = draw(st.lists(st.floats(1.0, 4.0), min_size=pairs, max_size=pairs))
        params.update(short_factor=short, long_factor=[s * draw(st.floats(1.0, 8.0)) for s in short])
        if not top_original:
            params["original_max_position_embeddings"] = original
        put(params, "factor", maybe(draw, draw(FACTORS)))
        put(params, "attention_factor", maybe(draw, draw(st.floats(0.5, 2.0)), st.booleans().map(lambda b: not b)))
        return params
    raise AssertionError(rope_type)


@st.composite
def spelling(draw, params: dict, theta: float | None, *, legacy_ok: bool = True, inside_ok: bool = True):
    """The fields a file writes for ``params`` and the base ``theta`` (None: left out).

    ``rope_parameters`` with the base inside or beside it, or the older ``rope_scaling`` +
    ``rope_theta``, with ``"type"`` for ``"rope_type"`` in some files.
    """
    params = copy.deepcopy(params)
    form = draw(st.sampled_from(["parameters-inside", "parameters-beside", "scaling", "scaling-type"]))
    if not legacy_ok:
        form = "parameters-inside" if inside_ok else "parameters-beside"
    if form == "parameters-inside" and not inside_ok:
        form = "parameters-beside"
    fields: dict = {}
    if form == "parameters-inside":
        put(params, "rope_theta", theta)
        fields["rope_parameters"] = params
        return fields
    put(fields, "rope_theta", theta)
    if form == "parameters-beside":
        fields["rope_parameters"] = params
    elif params.get("rope_type") == "default" and draw(st.booleans()):
        pass  # an older file without any scaling: no rope_scaling at all
    else:
        if form == "scaling-type":
            params["type"] = params.pop("rope_type")
        fields["rope_scaling"] = params
    return fields


# ---------------------------------------------------------------------------
# Strategies: one family each
# ---------------------------------------------------------------------------

#: model_type -> (configuration class, modeling module, class prefix, class default max_position_embeddings)
ROPE_FAMILIES = {
    "llama": ("LlamaConfig", "llama", "Llama", 2048),
    "mistral": ("MistralConfig", "mistral", "Mistral", 131072),
    "qwen2": ("Qwen2Config", "qwen2", "Qwen2", 32768),
    "qwen3": ("Qwen3Config", "qwen3", "Qwen3", 32768),
    "phi3": ("Phi3Config", "phi3", "Phi3", 4096),
    "gpt_neox": ("GPTNeoXConfig", "gpt_neox", "GPTNeoX", 2048),
    "falcon": ("FalconConfig", "falcon", "Falcon", 2048),
    "gemma3_text": ("Gemma3TextConfig", "gemma3", "Gemma3", 131072),
    "qwen2_vl_text": ("Qwen2VLTextConfig", "qwen2_vl", "Qwen2VL", 32768),
}
ROPE_TYPES = ["default", "linear", "dynamic", "yarn", "llama3", "longrope"]
HEAD_DIMS = st.integers(2, 16).map(lambda n: 2 * n)  # 4 .. 32, even


def _length(draw, model_type: str) -> tuple[int | None, int]:
    """``(file's max_position_embeddings or None, the value transformers sees)``."""
    written = maybe(draw, draw(LENGTHS), st.sampled_from([True, True, True, False]))
    return written, written or ROPE_FAMILIES[model_type][3]


def reads_the_length(params: dict) -> bool:
    """Whether transformers reads max_position_embeddings for these parameters: dynamic NTK always;
    llama3, YaRN and LongRoPE for a missing trained length; YaRN and LongRoPE for a missing factor."""
    kind = params.get("rope_type", params.get("type"))
    if kind == "dynamic":
        return True
    if kind in ("llama3", "yarn", "longrope", "su") and params.get("original_max_position_embeddings") is None:
        return True
    return kind in ("yarn", "longrope", "su") and params.get("factor") is None


def write_length(draw, raw: dict, params: dict, written: int | None) -> int | None:
    """A file may leave ``max_position_embeddings`` out: posenc then reads the configuration class's default
    (``posenc.hf.fields.MAX_POSITIONS``), as transformers does. Where that default is shorter than the trained
    length, a YaRN or LongRoPE factor derived from them would be below 1, which posenc refuses on purpose (the
    API page lists it): such files write the field."""
    if written is None and reads_the_length(params):
        default = MAX_POSITIONS.get(raw["model_type"])
        original = params.get("original_max_position_embeddings") or 0
        if default is None or original > default or draw(st.booleans()):
            written = max(draw(LENGTHS), original)  # a factor >= 1
    put(raw, "max_position_embeddings", written)
    return written


@st.composite
def llama_like(draw, model_type: str):
    """Llama, Mistral, Qwen2, Qwen3: every RoPE type, head_dim written or derived, GQA."""
    h_q, h_kv = draw(heads())
    head_dim = draw(HEAD_DIMS)
    explicit = draw(st.booleans())
    raw: dict = {"model_type": model_type, "num_attention_heads": h_q, "num_hidden_layers": draw(st.integers(1, 4))}
    if model_type == "qwen3" and not explicit:
        head_dim = 128  # Qwen3Config's fixed default, whatever the width
        raw["hidden_size"] = h_q * draw(st.sampled_from([8, 16]))
    elif explicit:
        raw["head_dim"] = head_dim
        raw["hidden_size"] = h_q * draw(st.sampled_from([8, 16, head_dim]))
    else:
        raw["hidden_size"] = h_q * head_dim
    # Llama's class default is one key head per query head; Mistral's, Qwen2's and Qwen3's are 8, 32 and 32
    # key heads, which a module of 1 to 4 query heads cannot run: those files write it
    put(raw, "num_key_value_heads", h_kv if model_type != "llama" or h_kv != h_q or draw(st.booleans()) else None)
    written, length = _length(draw, model_type)
    rope_type = draw(st.sampled_from(ROPE_TYPES))
    params = draw(scaling_parameters(rope_type, head_dim, length))
    write_length(draw, raw, params, written)
    raw.update(draw(spelling(params, maybe(draw, draw(BASES)))))
    return raw


@st.composite
def phi3(draw):
    """Phi-3: default or LongRoPE, partial rotary (top level or inside), the top-level trained length."""
    h_q, h_kv = draw(heads())
    head_dim = draw(st.sampled_from([8, 16, 32]))
    raw: dict = {"model_type": "phi3", "num_attention_heads": h_q, "hidden_size": h_q * head_dim,
                 "num_hidden_layers": draw(st.integers(1, 4)), "num_key_value_heads": h_kv}  # fmt: skip
    written, length = _length(draw, "phi3")
    fraction = draw(st.sampled_from([None, 1.0, 0.75, 0.5, 0.25]))
    rotary = int(head_dim * (fraction or 1.0))
    top_original = draw(st.booleans())
    original = draw(st.sampled_from([max(4, length // d) for d in (1, 2, 4, 8)]))
    if top_original:
        raw["original_max_position_embeddings"] = original
    rope_type = draw(st.sampled_from(["default", "longrope", "longrope"]))
    params = draw(scaling_parameters(rope_type, rotary, length, top_original=True))
    if rope_type == "longrope" and not top_original:
        # Phi3Config's class attribute original_max_position_embeddings (4096) wins over the one inside
        params["original_max_position_embeddings"] = original
    write_length(draw, raw, params, written)
    if rope_type == "longrope" and draw(st.booleans()):
        # older Phi-3 files: read as longrope. transformers fills in the trained length before it renames them
        # (a KeyError without one inside), and then keeps the one inside: the files that load write it there
        params["rope_type"] = draw(st.sampled_from(["su", "yarn"]))
        params["original_max_position_embeddings"] = original if top_original else 4096
    fields = draw(spelling(params, maybe(draw, draw(BASES))))
    if fraction is not None:
        where = draw(st.sampled_from(["top", "inside", "both"]))
        inner = fields.get("rope_parameters") or fields.get("rope_scaling")
        if where in ("top", "both") or inner is None:
            raw["partial_rotary_factor"] = fraction if where != "both" else 1.0
        if where in ("inside", "both") and inner is not None:
            inner["partial_rotary_factor"] = fraction
        if where == "both" and inner is None:
            raw["partial_rotary_factor"] = fraction
    raw.update(fields)
    return raw


@st.composite
def gpt_neox(draw):
    """GPT-NeoX: ``rotary_pct`` / ``rotary_emb_base`` (its own spellings) or ``rope_parameters``."""
    h_q = draw(st.integers(1, 4))
    head_dim = draw(st.sampled_from([8, 16, 32]))
    raw: dict = {"model_type": "gpt_neox", "num_attention_heads": h_q, "hidden_size": h_q * head_dim,
                 "num_hidden_layers": draw(st.integers(1, 4))}  # fmt: skip
    written, length = _length(draw, "gpt_neox")
    fraction = draw(st.sampled_from([None, 1.0, 0.5, 0.25]))  # None: the class default 0.25
    rotary = int(head_dim * (fraction or 0.25))
    rope_type = draw(st.sampled_from(["default", "default", "linear", "dynamic", "yarn"]))
    if rope_type == "dynamic" and rotary < 4:
        rope_type = "linear"
    params = draw(scaling_parameters(rope_type, rotary, length))
    write_length(draw, raw, params, written)
    base = maybe(draw, draw(BASES))
    if draw(st.booleans()):  # the original GPT-NeoX files
        put(raw, "rotary_pct", fraction)
        put(raw, "rotary_emb_base", base)
        if rope_type != "default":
            raw["rope_scaling"] = params
    else:
        put(params, "partial_rotary_factor", fraction)
        raw.update(draw(spelling(params, base)))
    return raw


@st.composite
def falcon(draw):
    """Falcon without ALiBi: RoPE on the whole head, head_dim always hidden_size // heads."""
    h_q = draw(st.integers(1, 4))
    head_dim = draw(st.sampled_from([8, 16, 32]))
    raw: dict = {"model_type": "falcon", "num_attention_heads": h_q, "hidden_size": h_q * head_dim,
                 "num_hidden_layers": draw(st.integers(1, 4)), "alibi": False}  # fmt: skip
    arch = draw(st.sampled_from(["multi_query", "mha", "new"]))
    if arch == "mha":
        raw["multi_query"] = False
    elif arch == "new":
        raw["new_decoder_architecture"] = True
        raw["num_kv_heads"] = draw(st.sampled_from([d for d in (1, 2, 4) if h_q % d == 0]))
    written, length = _length(draw, "falcon")
    rope_type = draw(st.sampled_from(ROPE_TYPES))
    params = draw(scaling_parameters(rope_type, head_dim, length))
    write_length(draw, raw, params, written)
    raw.update(draw(spelling(params, maybe(draw, draw(BASES)))))
    return raw


@st.composite
def gemma3(draw):
    """Gemma 3: sliding and full layers (layer_types or sliding_window_pattern), per-type parameters
    (nested rope_parameters) or the older rope_theta / rope_local_base_freq / rope_scaling."""
    h_q, h_kv = draw(heads())
    head_dim = draw(HEAD_DIMS)
    n = draw(st.integers(1, 4))
    raw: dict = {"model_type": "gemma3_text", "num_attention_heads": h_q, "num_key_value_heads": h_kv,
                 "hidden_size": h_q * draw(st.sampled_from([8, 16])), "num_hidden_layers": n,
                 "head_dim": head_dim}  # fmt: skip
    put(raw, "query_pre_attn_scalar", maybe(draw, draw(st.sampled_from([16, 24, 256, head_dim]))))
    written, length = _length(draw, "gemma3_text")
    put(raw, "max_position_embeddings", written)
    if draw(st.booleans()):
        raw["layer_types"] = draw(
            st.lists(st.sampled_from(["sliding_attention", "full_attention"]), min_size=n, max_size=n)
        )
    else:
        raw["sliding_window_pattern"] = draw(st.integers(1, 3))
    full_type = draw(st.sampled_from(ROPE_TYPES))
    full = draw(scaling_parameters(full_type, head_dim, length))
    # FINDING F3 (/tmp/propfind.md): transformers' YaRN reads "truncate" from the top level of rope_parameters,
    # never from a layer type's dict (where Gemma 3's always are, rope_scaling included), so truncate=False is
    # ignored there and honoured by posenc; not drawn for Gemma 3
    full.pop("truncate", None)
    global_base, local_base = maybe(draw, draw(BASES)), maybe(draw, draw(BASES))
    if draw(st.booleans()):  # transformers 5: one dict per layer type
        local = {"rope_type": "default"}
        put(full, "rope_theta", maybe(draw, global_base))
        put(local, "rope_theta", maybe(draw, local_base))
        raw["rope_parameters"] = {"full_attention": full, "sliding_attention": local}
        if full_type == "default" and draw(st.booleans()):
            # beside the nested dicts, rope_scaling updates the global one. FINDING F2 (/tmp/propfind.md): over a
            # global dict of another type the merged dict keeps the old type's keys, which transformers warns
            # about and posenc refuses; drawn over a default global dict only
            scaling = draw(scaling_parameters(draw(st.sampled_from(["linear", "yarn"])), head_dim, length))
            scaling.pop("truncate", None)
            raw["rope_scaling"] = scaling
        if full.get("rope_theta") is None:
            put(raw, "rope_theta", global_base)
        if local.get("rope_theta") is None:
            put(raw, "rope_local_base_freq", local_base)
    else:
        put(raw, "rope_theta", global_base)
        put(raw, "rope_local_base_freq", local_base)
        if full_type != "default" or draw(st.booleans()):
            if draw(st.booleans()):  # transformers updates the filled-in global dict: its rope_type stays default
                full["type"] = full.pop("rope_type")
            raw["rope_scaling"] = full
        if "rope_scaling" not in raw and draw(st.booleans()):
            # a flat dict: transformers adds the two layer types beside it and ignores it (with rope_scaling too:
            # a KeyError in transformers, so not drawn)
            raw["rope_parameters"] = draw(
                scaling_parameters(draw(st.sampled_from(["linear", "default"])), head_dim, length)
            )
    return raw


@st.composite
def qwen2_vl(draw):
    """Qwen2-VL: M-RoPE sections summing to head_dim / 2, inside rope_parameters or the older rope_scaling."""
    h_q, h_kv = draw(heads())
    head_dim = draw(st.integers(3, 16).map(lambda n: 2 * n))
    pairs = head_dim // 2
    t = draw(st.integers(1, pairs - 2))
    h = draw(st.integers(1, pairs - t - 1))
    section = [t, h, pairs - t - h]
    raw: dict = {"model_type": "qwen2_vl_text", "num_attention_heads": h_q, "num_key_value_heads": h_kv,
                 "hidden_size": h_q * head_dim, "num_hidden_layers": draw(st.integers(1, 4))}  # fmt: skip
    written, _ = _length(draw, "qwen2_vl_text")
    put(raw, "max_position_embeddings", written)
    base = maybe(draw, draw(BASES))
    form = draw(st.sampled_from(["parameters", "mrope-type", "mrope-rope_type"]))
    if form == "parameters":
        params = {"rope_type": "default", "mrope_section": section}
        put(params, "rope_theta", base)
        raw["rope_parameters"] = params
    else:
        key = "type" if form == "mrope-type" else "rope_type"
        raw["rope_scaling"] = {key: "mrope", "mrope_section": section}
        put(raw, "rope_theta", base)
    return raw


FAMILY_STRATEGIES = {
    "llama": llama_like("llama"),
    "mistral": llama_like("mistral"),
    "qwen2": llama_like("qwen2"),
    "qwen3": llama_like("qwen3"),
    "phi3": phi3(),
    "gpt_neox": gpt_neox(),
    "falcon": falcon(),
    "gemma3_text": gemma3(),
    "qwen2_vl_text": qwen2_vl(),
}

#: model_type of the multimodal configuration that wraps a text one as ``text_config``
WRAPPERS = {"gemma3_text": ("gemma3", "Gemma3Config"), "qwen2_vl_text": ("qwen2_vl", "Qwen2VLConfig"),
            "llama4_text": ("llama4", "Llama4Config")}  # fmt: skip


# ---------------------------------------------------------------------------
# The configuration in every form from_hf_config reads
# ---------------------------------------------------------------------------


def transformers_config(raw: dict):
    """transformers' configuration object for the file ``raw`` (the class of its model_type)."""
    name = CONFIG_CLASSES[raw["model_type"]]
    fields = json.loads(json.dumps({key: value for key, value in raw.items() if key != "model_type"}))
    return getattr(transformers, name)(**fields)


CONFIG_CLASSES = {key: value[0] for key, value in ROPE_FAMILIES.items()} | {
    "gptj": "GPTJConfig", "llama4_text": "Llama4TextConfig", "deepseek_v2": "DeepseekV2Config",
    "deepseek_v3": "DeepseekV3Config", "bloom": "BloomConfig", "mpt": "MptConfig", "t5": "T5Config",
    "falcon": "FalconConfig",
}  # fmt: skip


def every_form(raw: dict, config, form: str):
    """from_hf_config of the configuration in ``form``; the raw dict is never the one transformers filled in."""
    raw = json.loads(json.dumps(raw))
    if form == "dict":
        return from_hf_config(raw)
    if form == "object":
        return from_hf_config(config)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.json"
        if form == "path":
            path.write_text(json.dumps(raw))
            return from_hf_config(path)
        if form == "saved":  # what save_pretrained writes: the class defaults left out
            config.save_pretrained(folder)
            return from_hf_config(str(path))
    if form == "wrapped":
        outer, _ = WRAPPERS[raw["model_type"]]
        return from_hf_config({"model_type": outer, "text_config": raw})
    raise AssertionError(form)


def forms(model_type: str) -> list[str]:
    return ["dict", "object", "path", "saved"] + (["wrapped"] if model_type in WRAPPERS else [])


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------


@st.composite
def positions(draw, length: int, *, limit: int | None = None, axes: int | None = None):
    """``[2, s]`` positions (``[axes, 2, s]``), each row its own: short ones, around ``length`` and past it."""
    s = draw(st.integers(2, 6))
    top = min(limit or 4 * length, 4 * length, 16_384)
    reach = draw(st.sampled_from([min(length, top), top, max(2, length // 4)]))
    row = st.lists(st.integers(0, max(reach - 1, 0)), min_size=s, max_size=s)
    if axes is None:
        return torch.tensor([draw(row) for _ in range(2)])
    return torch.tensor([[draw(row) for _ in range(2)] for _ in range(axes)])


def hidden(batch: int, s: int, width: int, seed: int) -> torch.Tensor:
    return torch.randn(batch, s, width, generator=torch.Generator().manual_seed(seed))


@contextlib.contextmanager
def recording_apply(module, name: str = "apply_rotary_pos_emb"):
    """Wrap ``module.<name>`` so that the queries and keys it receives (before RoPE) are kept."""
    original = getattr(module, name)

    def wrapper(q, k, *args, **kwargs):
        RECORD.update(q_pre=q.detach().clone(), k_pre=k.detach().clone())
        q_rot, k_rot = original(q, k, *args, **kwargs)
        RECORD.update(q_post=q_rot, k_post=k_rot)
        return q_rot, k_rot

    with mock.patch.object(module, name, wrapper):
        yield


# ---------------------------------------------------------------------------
# RoPE families
# ---------------------------------------------------------------------------


def _rope_reference(model_type: str, config, layer_idx: int, pos: torch.Tensor, seed: int):
    """transformers' cos/sin and logits of layer ``layer_idx``, and the pre-RoPE q and k the module used."""
    _, module_name, prefix, _ = ROPE_FAMILIES[model_type]
    module = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
    config._attn_implementation = "eager" if model_type == "falcon" else "posenc_property"
    rotary = getattr(module, f"{prefix}RotaryEmbedding")(config)  # a fresh one: dynamic NTK keeps state
    attention = getattr(module, f"{prefix}Attention")(config, layer_idx=layer_idx).eval()
    h = hidden(pos.shape[-2], pos.shape[-1], config.hidden_size, seed)
    kwargs = {"layer_type": config.layer_types[layer_idx]} if model_type == "gemma3_text" else {}
    RECORD.clear()
    with torch.no_grad(), recording_apply(module):
        cos, sin = rotary(h, pos, **kwargs)
        if model_type == "falcon":
            s = pos.shape[-1]
            _, probs = attention(h, alibi=None, attention_mask=torch.zeros(pos.shape[-2], 1, s, s),
                                 position_embeddings=(cos, sin), output_attentions=True)  # fmt: skip
            q_rot, k_rot = RECORD["q_post"], RECORD["k_post"]
            logits = torch.matmul(q_rot, repeat_kv(k_rot, q_rot.shape[1] // k_rot.shape[1]).transpose(2, 3))
            logits = logits / math.sqrt(attention.head_dim)
            torch.testing.assert_close(torch.softmax(logits, -1), probs)  # the module's own scale
        else:
            attention(hidden_states=h, position_embeddings=(cos, sin), attention_mask=None)
            q_rot, k_rot, scaling = RECORD["q_rot"], RECORD["k_rot"], RECORD["scaling"]
            logits = torch.matmul(q_rot, repeat_kv(k_rot, q_rot.shape[1] // k_rot.shape[1]).transpose(2, 3)) * scaling
    return (cos, sin), logits, RECORD["q_pre"], RECORD["k_pre"]


def _layers_to_check(model_type: str, config, n: int, draw) -> list[int]:
    if model_type == "gemma3_text":  # the first layer of each type
        return sorted({config.layer_types.index(kind) for kind in set(config.layer_types[:n])})
    return [draw(st.integers(0, n - 1))]


@pytest.mark.parametrize("model_type", sorted(FAMILY_STRATEGIES))
@PROPERTY
@given(data=st.data())
def test_rope_families_match_transformers(model_type, data):
    raw = data.draw(FAMILY_STRATEGIES[model_type], label="config.json")
    config = transformers_config(raw)
    n = config.num_hidden_layers
    length = config.max_position_embeddings
    axes = 3 if model_type == "qwen2_vl_text" and data.draw(st.booleans(), label="3-axis positions") else None
    pos = data.draw(positions(length, axes=axes), label="positions")  # [b, s] or M-RoPE's [3, b, s]
    pmax = int(pos.max())
    seed = data.draw(st.integers(0, 2**16), label="seed")
    for layer_idx in _layers_to_check(model_type, config, n, lambda s: data.draw(s, label="layer")):
        (cos, sin), expected, q, k = _rope_reference(model_type, config, layer_idx, pos, seed)
        for form in forms(model_type):
            layers = every_form(raw, config, form)
            assert len(layers) == n, form
            layer = layers[layer_idx]
            what = f"{form} form, layer {layer_idx}"
            ours = layer.scores(q, k, pos)
            assert_logits_close(ours, expected, q, k, pmax, what)
            factor = max(cos.abs().max().item(), 1.0)
            axes_pos = pos.expand(3, -1, -1) if model_type == "qwen2_vl_text" and pos.dim() == 2 else pos
            assert_cos_sin_close(layer.cos_sin(axes_pos), (cos, sin), factor, pmax, what)
            # decoding: the last queries against every key
            assert_logits_close(layer.scores(q[:, :, -1:], k, pos), expected[:, :, -1:], q, k, pmax, what + " decode")


# ---------------------------------------------------------------------------
# GPT-J: interleaved pairs on the first rotary_dim channels, base 10000, a sinusoid table
# ---------------------------------------------------------------------------


@st.composite
def gptj(draw):
    """GPT-J in its own spellings (n_embd, n_head, n_layer, n_positions) or the common ones."""
    h_q = draw(st.integers(1, 4))
    rotary = draw(st.sampled_from([None, 2, 4, 8, 16]))  # None: the class default, 64
    head_dim = 64 if rotary is None else draw(st.sampled_from([d for d in (8, 16, 32) if d >= rotary]))
    names = draw(st.sampled_from([("n_embd", "n_head", "n_layer", "n_positions"),
                                  ("hidden_size", "num_attention_heads", "num_hidden_layers",
                                   "max_position_embeddings")]))  # fmt: skip
    raw = {"model_type": "gptj", names[0]: h_q * head_dim, names[1]: h_q, names[2]: draw(st.integers(1, 4))}
    put(raw, names[3], maybe(draw, draw(LENGTHS)))
    put(raw, "rotary_dim", rotary)
    return raw


@PROPERTY
@given(data=st.data())
def test_gptj_matches_transformers(data):
    from transformers.models.gptj import modeling_gptj

    raw = data.draw(gptj(), label="config.json")
    config = transformers_config(raw)
    attention = modeling_gptj.GPTJAttention(config, layer_idx=0).eval()
    pos = data.draw(positions(config.n_positions, limit=config.n_positions), label="positions")  # a table
    h = hidden(2, pos.shape[-1], config.n_embd, data.draw(st.integers(0, 2**16), label="seed"))
    seen = {}

    def record(query, key, value, attention_mask=None):
        seen.update(q=query, k=key)
        return torch.zeros_like(value), None

    heads_of = lambda x: x.view(*x.shape[:2], config.n_head, -1).transpose(1, 2)  # noqa: E731
    with torch.no_grad(), mock.patch.object(attention, "_attn", record):
        attention(h, position_ids=pos)
        q, k = heads_of(attention.q_proj(h)), heads_of(attention.k_proj(h))
    expected = torch.matmul(seen["q"], seen["k"].transpose(-1, -2)) / attention.scale_attn
    pmax = int(pos.max())
    for form in forms("gptj"):
        layers = every_form(raw, config, form)
        assert len(layers) == config.n_layer
        assert_logits_close(layers[-1].scores(q, k, pos), expected, q, k, pmax, f"{form} form")


# ---------------------------------------------------------------------------
# Llama 4: RoPE (complex pairs) and NoPE layers with the query temperature
# ---------------------------------------------------------------------------


@st.composite
def llama4(draw):
    h_q, h_kv = draw(heads())
    head_dim = draw(HEAD_DIMS)
    n = draw(st.integers(1, 4))
    raw: dict = {"model_type": "llama4_text", "num_attention_heads": h_q, "num_key_value_heads": h_kv,
                 "head_dim": head_dim, "hidden_size": h_q * draw(st.sampled_from([8, 16])), "num_hidden_layers": n,
                 "intermediate_size": 8, "intermediate_size_mlp": 8, "num_local_experts": 1, "vocab_size": 16,
                 "use_qk_norm": False}  # fmt: skip
    if draw(st.booleans()):
        raw["no_rope_layers"] = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    else:
        put(raw, "no_rope_layer_interval", maybe(draw, draw(st.integers(1, 4))))
    put(raw, "attn_temperature_tuning", maybe(draw, draw(st.booleans())))
    put(raw, "floor_scale", maybe(draw, draw(st.sampled_from([1, 2, 4, 8192]))))
    put(raw, "attn_scale", maybe(draw, draw(st.floats(0.01, 1.0))))
    written = maybe(draw, draw(LENGTHS))
    length = written or 131072
    rope_type = draw(st.sampled_from(["default", "llama3", "linear", "yarn"]))
    params = draw(scaling_parameters(rope_type, head_dim, min(length, 2048)))
    write_length(draw, raw, params, written)
    raw.update(draw(spelling(params, maybe(draw, draw(BASES)))))
    return raw


@PROPERTY
@given(data=st.data())
def test_llama4_matches_transformers(data):
    from transformers.models.llama4 import modeling_llama4 as m

    raw = data.draw(llama4(), label="config.json")
    config = transformers_config(raw)
    config._attn_implementation = "posenc_property"
    drawn = data.draw(positions(min(config.max_position_embeddings, 4096)), label="positions")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    every = {form: every_form(raw, config, form) for form in forms("llama4_text")}
    for i in range(config.num_hidden_layers):
        attention = m.Llama4TextAttention(config, i).eval()
        # NoPE: transformers' temperature reads the cache length, positions 0 .. s - 1 without a cache
        pos = drawn if config.no_rope_layers[i] else torch.arange(drawn.shape[-1]).expand(2, -1)
        h = hidden(2, pos.shape[-1], config.hidden_size, seed)
        RECORD.clear()
        with torch.no_grad():
            attention(h, m.Llama4TextRotaryEmbedding(config)(h, pos), None)
            q, k = (x.view(2, pos.shape[-1], -1, config.head_dim).transpose(1, 2)
                    for x in (attention.q_proj(h), attention.k_proj(h)))  # fmt: skip
        expected = torch.matmul(RECORD["q_rot"], repeat_kv(RECORD["k_rot"], q.shape[1] // k.shape[1]).transpose(2, 3))
        expected = expected * RECORD["scaling"]
        for form, layers in every.items():
            assert len(layers) == config.num_hidden_layers, form
            assert layers[i].kind == ("rope" if config.no_rope_layers[i] else "nope"), form
            assert_logits_close(layers[i].scores(q, k, pos), expected, q, k, int(pos.max()), f"{form} form, layer {i}")


# ---------------------------------------------------------------------------
# DeepSeek-V2/V3: multi-head latent attention, RoPE on the last qk_rope_head_dim channels
# ---------------------------------------------------------------------------


@st.composite
def deepseek(draw):
    version = draw(st.sampled_from([2, 3]))
    h = draw(st.integers(1, 4))
    nope, rope = draw(st.sampled_from([4, 8, 16])), draw(st.sampled_from([4, 8, 16]))
    raw: dict = {"model_type": f"deepseek_v{version}", "num_attention_heads": h, "num_key_value_heads": h,
                 "hidden_size": 8 * h, "num_hidden_layers": draw(st.integers(1, 4)), "q_lora_rank": None,
                 "kv_lora_rank": 8, "qk_nope_head_dim": nope, "qk_rope_head_dim": rope, "v_head_dim": 8,
                 "intermediate_size": 16, "moe_intermediate_size": 8, "n_routed_experts": 2,
                 "vocab_size": 16}  # fmt: skip
    if version == 3:
        put(raw, "rope_interleave", maybe(draw, draw(st.booleans())))
    written = maybe(draw, draw(LENGTHS))
    rope_type = draw(st.sampled_from(["yarn", "default", "yarn", "linear"]))
    params = draw(scaling_parameters(rope_type, rope, written or 2048))
    # DeepSeek's files: mscale_all_dim scales the softmax (with YaRN only: FINDING F2, stray keys in another type)
    if rope_type == "yarn" and draw(st.booleans()):
        params["mscale"], params["mscale_all_dim"] = draw(st.sampled_from([(1.0, 1.0), (0.707, 0.707), (1.0, 0.5)]))
        params.pop("attention_factor", None)
    if rope_type == "yarn" and params["factor"] is None:
        params["factor"] = draw(FACTORS)  # DeepSeek's softmax scale reads the factor itself: a null one crashes it
    write_length(draw, raw, params, written)
    raw.update(draw(spelling(params, maybe(draw, draw(BASES)))))
    return raw, version


@PROPERTY
@given(data=st.data())
def test_deepseek_matches_transformers(data):
    raw, version = data.draw(deepseek(), label="config.json")
    m = importlib.import_module(f"transformers.models.deepseek_v{version}.modeling_deepseek_v{version}")
    prefix = f"DeepseekV{version}"
    config = transformers_config(raw)
    config._attn_implementation = "posenc_property"
    attention = getattr(m, f"{prefix}Attention")(config, 0).eval()
    pos = data.draw(positions(min(config.max_position_embeddings, 4096)), label="positions")
    s, heads_, nope, rope = pos.shape[-1], config.num_attention_heads, config.qk_nope_head_dim, config.qk_rope_head_dim
    h = hidden(2, s, config.hidden_size, data.draw(st.integers(0, 2**16), label="seed"))
    RECORD.clear()
    with torch.no_grad():
        attention(h, position_embeddings=getattr(m, f"{prefix}RotaryEmbedding")(config)(h, pos), attention_mask=None)
        q = attention.q_proj(h).view(2, s, heads_, nope + rope).transpose(1, 2)
        kv_nope, k_rot = torch.split(attention.kv_a_proj_with_mqa(h), [config.kv_lora_rank, rope], dim=-1)
        kv = attention.kv_b_proj(attention.kv_a_layernorm(kv_nope)).view(2, s, heads_, -1).transpose(1, 2)
        k = torch.cat((kv[..., :nope], k_rot[:, None].expand(-1, heads_, -1, -1)), dim=-1)
    expected = torch.matmul(RECORD["q_rot"], RECORD["k_rot"].transpose(2, 3)) * RECORD["scaling"]
    for form in forms(raw["model_type"]):
        layer = every_form(raw, config, form)[0]
        assert layer.softmax_scale == pytest.approx(RECORD["scaling"], rel=1e-12), form
        assert_logits_close(layer.scores(q, k, pos), expected, q, k, int(pos.max()), f"{form} form")


# ---------------------------------------------------------------------------
# ALiBi (BLOOM, MPT, Falcon) and T5's relative bias
# ---------------------------------------------------------------------------


@st.composite
def alibi_family(draw):
    model_type = draw(st.sampled_from(["bloom", "mpt", "falcon"]))
    h, head_dim = draw(st.integers(1, 12)), draw(st.sampled_from([2, 4, 8]))
    if model_type == "bloom":
        names = draw(
            st.sampled_from([("n_head", "hidden_size", "n_layer"), ("num_attention_heads", "n_embed", "n_layer")])
        )
    elif model_type == "mpt":
        names = ("n_heads", "d_model", "n_layers")
    else:
        names = ("num_attention_heads", "hidden_size", "num_hidden_layers")
    raw = {"model_type": model_type, names[0]: h, names[1]: h * head_dim, names[2]: draw(st.integers(1, 3))}
    if model_type == "falcon":
        raw.update(alibi=True, new_decoder_architecture=draw(st.booleans()))
    if model_type == "mpt":
        raw["max_seq_len"] = draw(st.sampled_from([8, 16, 64]))
        scale = maybe(draw, draw(st.floats(0.05, 2.0)))
        if scale is not None or draw(st.booleans()):
            raw["attn_config"] = {"softmax_scale": scale}
    return raw


@PROPERTY
@given(data=st.data())
def test_alibi_families_match_transformers(data):
    raw = data.draw(alibi_family(), label="config.json")
    config = transformers_config(raw)
    model_type = raw["model_type"]
    m = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    heads_ = (
        config.n_head
        if model_type == "bloom"
        else config.n_heads
        if model_type == "mpt"
        else config.num_attention_heads
    )
    head_dim = config.hidden_size // heads_
    s = data.draw(st.integers(2, 8 if model_type == "mpt" else 12), label="s")
    pad = data.draw(st.lists(st.integers(0, s - 1), min_size=2, max_size=2), label="left padding")
    mask = torch.tensor([[0] * p + [1] * (s - p) for p in pad])
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))
    q, k = torch.randn(2, heads_, s, head_dim, generator=g), torch.randn(2, heads_, s, head_dim, generator=g)
    logits = torch.matmul(q, k.transpose(-1, -2))
    if model_type == "mpt":
        bias = m.build_mpt_alibi_tensor(heads_, config.max_seq_len)[:, :, -s:]  # [h, 1, s]: MPT ignores the mask
        expected = logits * m.MptAttention(config, 0).softmax_scale + bias
        pos = torch.arange(s).expand(2, -1)
    else:
        alibi = m.build_alibi_tensor(mask, heads_, torch.float32).view(2, heads_, 1, s)
        pos = (mask.cumsum(-1) - 1) * mask  # the positions build_alibi_tensor reads from the mask
        if model_type == "bloom":
            expected = logits * m.BloomAttention(config, layer_idx=0).inv_norm_factor + alibi
        else:  # Falcon's sdpa path: q k^T / sqrt(d) + alibi / sqrt(d), the bias in the mask
            expected = (logits + alibi) / math.sqrt(head_dim)
    for form in forms(model_type):
        layers = every_form(raw, config, form)
        assert [layer.kind for layer in layers] == ["alibi"] * len(layers), form
        torch.testing.assert_close(layers[0].scores(q, k, pos), expected, atol=1e-5, rtol=1e-5,
                                   msg=lambda msg, f=form: f"{f} form: {msg}")  # fmt: skip


@st.composite
def t5(draw):
    raw = {"model_type": "t5", "num_heads": draw(st.integers(1, 4)), "d_kv": draw(st.sampled_from([4, 8])),
           "num_layers": draw(st.integers(1, 3)), "d_model": 16}  # fmt: skip
    put(raw, "num_decoder_layers", maybe(draw, draw(st.integers(1, 3))))
    buckets = draw(st.sampled_from([None, 4, 8, 32, 33]))
    put(raw, "relative_attention_num_buckets", buckets)
    # the decoder's buckets: (buckets or 32) // 2 exact distances, then logarithmic ones up to max_distance,
    # which must lie past them (else transformers indexes out of its table; posenc refuses the file)
    exact = (buckets or 32) // 2
    put(raw, "relative_attention_max_distance", maybe(draw, draw(st.sampled_from([exact + 1, 2 * exact, 128, 200]))))
    return raw


@PROPERTY
@given(data=st.data())
def test_t5_matches_compute_bias(data):
    from transformers.models.t5 import modeling_t5

    raw = data.draw(t5(), label="config.json")
    config = transformers_config(raw)
    decoder = modeling_t5.T5Config(**{**config.to_dict(), "is_decoder": True})
    attention = modeling_t5.T5Attention(decoder, has_relative_attention_bias=True, layer_idx=0)
    s_k = data.draw(st.integers(1, 300), label="keys")
    s_q = data.draw(st.integers(1, min(s_k, 4)), label="queries")
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))
    q, k = (
        torch.randn(1, config.num_heads, s_q, config.d_kv, generator=g),
        torch.randn(1, config.num_heads, s_k, config.d_kv, generator=g),
    )
    with torch.no_grad():
        attention.relative_attention_bias.weight.normal_(generator=g)
        expected = torch.matmul(q, k.transpose(-1, -2)) + attention.compute_bias(s_q, s_k, past_seen_tokens=s_k - s_q)
    for form in forms("t5"):
        layers = every_form(raw, config, form)
        assert len(layers) == config.num_decoder_layers, form
        with torch.no_grad():
            layers[0].bias_module.embedding.weight.copy_(attention.relative_attention_bias.weight)
            scores = layers[-1].scores(q, k, torch.arange(s_k))
        torch.testing.assert_close(scores, expected, atol=1e-5, rtol=1e-5, msg=lambda msg, f=form: f"{f} form: {msg}")
