"""Every model family :func:`posenc.from_hf_config` knows: one builder per family, and the table.

A builder reads a model's configuration as a plain dict (:func:`posenc.hf.fields.config_dict`
of a ``transformers`` configuration or of its ``config.json``), every field through the
accessors of :mod:`posenc.hf.fields`, and returns one layer object (:mod:`posenc.hf.layers`)
per decoder layer. :data:`FAMILIES` maps each ``model_type`` to its builder: adding a family is
one builder here (or an existing one reused) and one entry in the table. What each reproduces,
read from ``transformers`` 5:

* Llama, Mistral, Qwen2, Qwen3: one RoPE for every layer, ``half`` layout, ``head_dim ** -0.5``.
* Phi-3 / Phi-4-mini: LongRoPE (``"su"`` and ``"yarn"`` read as ``"longrope"``), partial rotary.
* GPT-NeoX (``rotary_pct`` of each head) and GPT-J (interleaved, ``rotary_dim`` channels).
* Gemma 3: local layers at base 10^4 unscaled, every 6th layer global at 10^6 with the scaling.
* Qwen2-VL: M-RoPE, ``position_ids`` ``[3, b, s]``.
* Llama 4 (iRoPE, Meta 2025): ``no_rope_layers[i] == 1`` marks a RoPE layer; by default
  every ``no_rope_layer_interval``-th (4th) layer is NoPE. RoPE layers turn pairs
  ``(2i, 2i + 1)`` as complex numbers, theta 500,000, with ``rope_parameters`` (llama3
  scaling in the released models). NoPE layers scale the queries by a temperature
  (``attn_temperature_tuning``, ``floor_scale``, ``attn_scale``). Softmax scale
  ``head_dim ** -0.5``; the L2 ``qk_norm`` of the RoPE layers is left out.
* DeepSeek-V2/V3 (multi-head latent attention, DeepSeek-AI 2024): q and k are
  ``[nope | rope]`` per head (``qk_nope_head_dim`` then ``qk_rope_head_dim``); only the
  last ``qk_rope_head_dim`` channels turn. The rotary key is one head shared by all:
  pass k with that part already repeated per head, or a single head. V2 multiplies
  pairs ``(2i, 2i + 1)`` as complex numbers; V3 with ``rope_interleave`` reorders them to
  ``(i, i + r/2)`` first, without it pairs ``(i, i + r/2)`` directly. Softmax scale
  ``(nope + rope) ** -0.5``, times ``mscale(factor, mscale_all_dim) ** 2`` for scaled
  RoPE (YaRN's ``0.1 * mscale_all_dim * ln(factor) + 1``).
* BLOOM, MPT, and Falcon with ``alibi``: see :class:`posenc.hf.layers.ALiBiLayer`.
* T5: the decoder's self-attention, causal buckets, no ``1/sqrt(d)``: see
  :class:`posenc.hf.layers.T5BiasLayer`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from .._checks import check_even_dim
from ..rope.rotary import rope_inv_freq
from ..t5 import T5RelativeBias
from .bias_layers import ALiBiLayer, T5BiasLayer
from .fields import (
    MAX_HEAD_DIM,
    MAX_LAYERS,
    config_bool,
    config_flags,
    config_int,
    config_mapping,
    config_number,
    count,
    field,
    raw_rope_parameters,
    rope_parameters,
)
from .layers import NoPELayer, RecurrentLayer, RotaryLayer

__all__ = ["FAMILIES"]

_NESTED = ("full_attention", "sliding_attention")  # Gemma 3's keys of per-layer-type rope_parameters


def _head_dim(cfg: dict, *, explicit: bool = True) -> int:
    """``head_dim`` if given (and ``explicit``), else ``hidden_size // num_attention_heads``."""
    if explicit and field(cfg, "head_dim") is not None:
        return count(cfg, "head_dim", maximum=MAX_HEAD_DIM)
    width, heads = count(cfg, "hidden_size"), count(cfg, "num_attention_heads")
    if width < heads:  # transformers would build heads of width 0
        raise ValueError(
            f"config's hidden_size = {width} is smaller than num_attention_heads = {heads}: each head would have "
            f"hidden_size // num_attention_heads = 0 channels; give head_dim, or check the two (model_type "
            f"{cfg.get('model_type')!r:.80})"
        )
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
    try:
        return RotaryLayer(rotary_dim=rotary_dim, rope_parameters=params, head_dim=head_dim, **kwargs)
    except ValueError as err:  # name the fields the numbers come from
        given = "head_dim" if field(cfg, "head_dim") is not None else "hidden_size // num_attention_heads"
        raise ValueError(
            f"{err}; in the config, head_dim = {head_dim} ({given}) and rotary_dim = {rotary_dim} "
            f"(model_type {cfg.get('model_type')!r:.80})"
        ) from None


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


def _layer_types(cfg: dict, allowed: tuple[str, ...], every: int, other: str) -> list[str]:
    """Each layer's type: ``layer_types`` (one per layer, ``"attention"`` read as ``"full_attention"``,
    as ``transformers`` 5 remaps it), else every ``every``-th layer (1-based) ``"full_attention"``
    and the others ``other``, as the family's configuration class fills it in."""
    n, kinds = _num_layers(cfg), cfg.get("layer_types")
    if kinds is None:
        return [other if (i + 1) % every else "full_attention" for i in range(n)]
    if not isinstance(kinds, (list, tuple)) or len(kinds) != n:
        size = f"{len(kinds)} entries" if isinstance(kinds, (list, tuple)) else f"{kinds!r:.80}"
        raise ValueError(f"config['layer_types'] must be a list of num_hidden_layers = {n} names, got {size}")
    kinds = ["full_attention" if kind == "attention" else kind for kind in kinds]
    bad = [kind for kind in kinds if kind not in allowed]
    if bad:
        raise ValueError(
            f"config['layer_types'] entries must be one of {', '.join(map(repr, allowed))}, got {bad[0]!r:.80}"
        )
    return kinds


def _gemma3_layer_types(cfg: dict) -> list[str]:
    """Gemma 3: every ``sliding_window_pattern``-th layer global unless ``layer_types`` says."""
    every = count(cfg, "sliding_window_pattern") if cfg.get("layer_types") is None else 1
    return _layer_types(cfg, _NESTED, every, "sliding_attention")


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
    if section is not None and (isinstance(section, (str, bytes, dict)) or not isinstance(section, (list, tuple))):
        raise ValueError(
            f"config's mrope_section must be a list of pair counts, one per axis (temporal, height, width), "
            f"got {section!r:.80} (model_type {cfg.get('model_type')!r:.80})"
        )
    params = _flat_rope(cfg, renames={"mrope": "default"}, params=params)
    return build_rope(cfg, params=params, mrope_section=section)


def build_falcon(cfg: dict) -> list:
    """Falcon: ALiBi when ``alibi`` is true (:func:`build_alibi`), else RoPE."""
    if config_bool(cfg, "alibi", False):
        return build_alibi(cfg)
    return build_rope({**cfg, "head_dim": None})  # transformers: hidden_size // num_attention_heads


def build_gpt_oss(cfg: dict) -> list:
    """gpt-oss (OpenAI 2025): RoPE in every layer, ``half`` layout, YaRN with ``truncate: false``
    (the ramp's ends are not rounded to whole pairs), ``head_dim ** -0.5``. Its sliding and full
    layers (``layer_types``, alternating) share the positions; the learned sink logit of each
    head is a term of the softmax's denominator, not a position, and is left out here."""
    _layer_types(cfg, _NESTED, 2, "sliding_attention")  # checked, as transformers reads them
    return build_rope(cfg)


def build_smollm3(cfg: dict) -> list:
    """SmolLM3 (Hugging Face 2025): ``no_rope_layers[i] == 1`` means layer ``i`` *uses* RoPE (``half``
    layout, ``head_dim ** -0.5``); by default every ``no_rope_layer_interval``-th (4th) layer has none."""
    n, head_dim = _num_layers(cfg), _head_dim(cfg)
    given = cfg.get("no_rope_layers")
    if given is None or isinstance(given, (list, tuple)) and not given:
        interval = count(cfg, "no_rope_layer_interval")
        use_rope = [int((i + 1) % interval != 0) for i in range(n)]
    else:
        use_rope = config_flags(cfg, "no_rope_layers", given, n)
    rope = _rotary(cfg, head_dim, head_dim, _flat_rope(cfg), softmax_scale=head_dim**-0.5)
    nope = NoPELayer(softmax_scale=head_dim**-0.5, head_dim=head_dim)
    return [rope if flag else nope for flag in use_rope]


def build_cohere2(cfg: dict) -> list:
    """Cohere Command R7B and Command A (``cohere2``): sliding-window layers turn pairs ``(2i, 2i + 1)``
    (``interleaved``); every ``sliding_window_pattern``-th (4th) layer is global and has no positions."""
    head_dim = _head_dim(cfg)
    every = count(cfg, "sliding_window_pattern", default=4) if cfg.get("layer_types") is None else 1
    kinds = _layer_types(cfg, _NESTED, every, "sliding_attention")
    rope = _rotary(cfg, head_dim, head_dim, _flat_rope(cfg), style="interleaved", softmax_scale=head_dim**-0.5)
    nope = NoPELayer(softmax_scale=head_dim**-0.5, head_dim=head_dim)
    return [rope if kind == "sliding_attention" else nope for kind in kinds]


def build_glm4(cfg: dict) -> list:
    """GLM-4 (dense, ``glm4``): RoPE on the first ``partial_rotary_factor`` (half) of each head, pairs
    ``(2i, 2i + 1)`` (``interleaved``), as its ``apply_rotary_pos_emb`` lays cos and sin out."""
    return build_rope(cfg, params=_flat_rope(cfg), rotary_fraction=_partial(cfg, 0.5), style="interleaved")


def build_glm4_moe(cfg: dict) -> list:
    """GLM-4.5 (``glm4_moe``): RoPE on the first half of each head, pairs ``(i, i + r/2)`` (``half``):
    the dense GLM-4's layout is not this one."""
    return build_rope(cfg, params=_flat_rope(cfg), rotary_fraction=_partial(cfg, 0.5))


def build_qwen3_next(cfg: dict) -> list:
    """Qwen3-Next: every ``full_attention_interval``-th (4th) layer is attention with RoPE on the first
    quarter of each head (``half``); the others are gated linear attention (Gated DeltaNet), a
    recurrence that carries order itself: :class:`~posenc.hf.layers.RecurrentLayer`."""
    head_dim = _head_dim(cfg)
    every = count(cfg, "full_attention_interval", default=4) if cfg.get("layer_types") is None else 1
    kinds = _layer_types(cfg, ("full_attention", "linear_attention"), every, "linear_attention")
    rotary_dim = int(head_dim * _partial(cfg, 0.25))
    rope = _rotary(cfg, head_dim, rotary_dim, _flat_rope(cfg), softmax_scale=head_dim**-0.5)
    recurrent = RecurrentLayer(softmax_scale=head_dim**-0.5, head_dim=head_dim)
    return [rope if kind == "full_attention" else recurrent for kind in kinds]


def _as_dict(cfg) -> dict:
    if not isinstance(cfg, Mapping):
        raise TypeError(f"cfg must be a dict (a model's config.json), got {type(cfg).__name__}")
    return dict(cfg)


def build_llama4(cfg: dict) -> list:
    """Llama 4's layers: RoPE, and NoPE every ``no_rope_layer_interval``-th layer (iRoPE).

    Args:
        cfg: ``Llama4TextConfig.to_dict()`` (``model_type`` ``"llama4_text"``) or the
            multimodal ``Llama4Config``'s (``"llama4"``), whose ``text_config`` is read.

    Returns:
        ``num_hidden_layers`` layers: :class:`~posenc.hf.layers.RotaryLayer` (``kind="rope"``)
        where ``no_rope_layers[i]`` is 1, else :class:`~posenc.hf.layers.NoPELayer`.

    Raises:
        ValueError: If a required field is missing or out of range, or ``rope_parameters`` is invalid.
    """
    cfg = _as_dict(cfg)
    if isinstance(cfg.get("text_config"), Mapping):
        cfg = {"model_type": "llama4_text", **cfg["text_config"]}
    n = count(cfg, "num_hidden_layers", maximum=MAX_LAYERS)
    heads = count(cfg, "num_attention_heads")
    head_dim = check_even_dim("config['head_dim']", count(cfg, "head_dim", maximum=MAX_HEAD_DIM))
    interval = count(cfg, "no_rope_layer_interval")
    # transformers: 1 (RoPE) unless (i + 1) is a multiple of the interval; an empty list means the default
    given = cfg.get("no_rope_layers")
    if given is None or isinstance(given, (list, tuple)) and not given:
        use_rope = [int((i + 1) % interval != 0) for i in range(n)]
    else:  # transformers: exactly one int per layer (a longer list fails its layer_types check)
        use_rope = config_flags(cfg, "no_rope_layers", given, n)
    params = _flat_rope(cfg)
    temperature = None
    if config_bool(cfg, "attn_temperature_tuning", True):
        temperature = tuple(config_number(cfg, key, field(cfg, key)) for key in ("floor_scale", "attn_scale"))
    common = {"softmax_scale": head_dim**-0.5, "num_heads": heads, "head_dim": head_dim}
    return [
        RotaryLayer("rope", rotary_dim=head_dim, rope_parameters=params, style="complex", **common)
        if use_rope[i]
        else NoPELayer(temperature=temperature, **common)
        for i in range(n)
    ]


def _yarn_mscale(scale: float, mscale: float) -> float:
    # mscale(s) = 0.1 * mscale * ln(s) + 1 for s > 1, else 1 (DeepSeek's yarn_get_mscale)
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def deepseek_softmax_scale(qk_head_dim: int, params: Mapping) -> float:
    """DeepSeek's softmax scale: ``qk_head_dim ** -0.5``, times ``mscale(factor, mscale_all_dim) ** 2`` if scaled.

    As ``yarn_apply_mscale`` of ``transformers``: for any ``rope_type`` but ``"default"`` with
    a nonzero ``mscale_all_dim``.
    """
    scale = qk_head_dim**-0.5
    if params.get("rope_type", "default") != "default" and params.get("mscale_all_dim"):
        mscale = _yarn_mscale(params["factor"], params["mscale_all_dim"])
        scale = scale * mscale * mscale
    return scale


def build_deepseek(cfg: dict) -> list:
    """DeepSeek-V2/V3/V3.2's layers: multi-head latent attention with RoPE on the last ``qk_rope_head_dim`` channels.

    Kimi K2 is a DeepSeek-V3 configuration: its ``config.json`` says ``model_type`` ``"kimi_k2"`` and
    loads ``DeepseekV3Config`` through its ``auto_map``, so both names are read as V3. V3.2 always reorders
    MLA's pairs (``deinterleave``); its lightning indexer, which scores which keys to attend to,
    turns its own rope channels in the ``half`` layout, not MLA's: that part is not built here.

    Args:
        cfg: ``DeepseekV2Config``, ``DeepseekV3Config`` or ``DeepseekV32Config`` as a dict (``model_type``
            ``"deepseek_v2"``, ``"deepseek_v3"`` (or Kimi K2's ``"kimi_k2"``) or ``"deepseek_v32"``).

    Returns:
        ``num_hidden_layers`` :class:`~posenc.hf.layers.RotaryLayer` (``kind="mla_rope"``)
        taking q and k of width ``qk_nope_head_dim + qk_rope_head_dim``.

    Raises:
        ValueError: If ``model_type`` is neither, a field is out of range, or ``rope_parameters`` is invalid.
    """
    cfg = _as_dict(cfg)
    model_type = cfg.get("model_type")
    if model_type not in ("deepseek_v2", "deepseek_v3", "kimi_k2", "deepseek_v32"):
        raise ValueError(
            f"model_type must be 'deepseek_v2', 'deepseek_v3', 'kimi_k2' or 'deepseek_v32', got {model_type!r}"
        )
    n = count(cfg, "num_hidden_layers", maximum=MAX_LAYERS)
    heads = count(cfg, "num_attention_heads")
    nope = count(cfg, "qk_nope_head_dim", maximum=MAX_HEAD_DIM)
    rope = check_even_dim("config['qk_rope_head_dim']", count(cfg, "qk_rope_head_dim", maximum=MAX_HEAD_DIM))
    params = _flat_rope(cfg)
    if model_type == "deepseek_v2":
        style = "complex"
    elif model_type == "deepseek_v32":  # MLA always reorders; its indexer (not built here) does not
        style = "deinterleave"
    else:  # transformers tests the flag's truth: None means no
        style = "deinterleave" if config_bool(cfg, "rope_interleave", True) else "half"
    rope_inv_freq(rope, scaling=params)  # bad parameters raise here, before the softmax scale reads them
    common = {"softmax_scale": deepseek_softmax_scale(nope + rope, params), "num_heads": heads}
    return [
        RotaryLayer(
            "mla_rope",
            rotary_dim=rope,
            rope_parameters=params,
            style=style,
            channels="last",
            head_dim=nope + rope,
            **common,
        )
        for _ in range(n)
    ]


def build_alibi(cfg: dict) -> list:
    """BLOOM's, MPT's or Falcon's (``alibi=True``) layers: ALiBi as each adds it.

    Args:
        cfg: ``BloomConfig``, ``MptConfig`` or ``FalconConfig`` as a dict.

    Returns:
        One :class:`~posenc.hf.layers.ALiBiLayer` per layer, softmax scale ``1/sqrt(head_dim)``
        (MPT: ``attn_config["softmax_scale"]`` if set).

    Raises:
        ValueError: If ``model_type`` is none of the three, Falcon has ``alibi`` false
            (RoPE, which :func:`build_falcon` handles), or a field is missing.
    """
    cfg = _as_dict(cfg)
    model_type = cfg.get("model_type")
    if model_type == "falcon" and not config_bool(cfg, "alibi", False):
        raise ValueError("falcon without alibi uses RoPE: build it with build_falcon, not build_alibi")
    if model_type not in ("bloom", "falcon", "mpt"):
        raise ValueError(f"model_type must be 'bloom', 'mpt' or 'falcon' for ALiBi, got {model_type!r}")
    n = count(cfg, "num_hidden_layers", maximum=MAX_LAYERS)
    heads, hidden = count(cfg, "num_attention_heads"), count(cfg, "hidden_size")
    scale, max_seq_len = None, None
    if model_type == "mpt":
        max_seq_len = count(cfg, "max_seq_len")
        scale = config_mapping(cfg, "attn_config", cfg.get("attn_config")).get("softmax_scale")
    if hidden % heads:
        raise ValueError(f"hidden size {hidden} must be divisible by the {heads} heads")
    head_dim = hidden // heads
    # 1 / sqrt(d), MPT's written as 1 / sqrt(hidden / heads)
    scale = config_number(cfg, "softmax_scale", scale) if scale is not None else 1 / math.sqrt(hidden / heads)
    common = {"softmax_scale": scale, "num_heads": heads, "head_dim": head_dim}
    return [ALiBiLayer(model_type, max_seq_len=max_seq_len, **common) for _ in range(n)]


def build_t5(cfg: dict) -> list:
    """T5's decoder self-attention layers: one bucketed bias table, shared by all, no score scaling.

    Args:
        cfg: ``T5Config`` as a dict (``model_type`` ``"t5"``).

    Returns:
        ``num_decoder_layers`` (else ``num_layers``) :class:`~posenc.hf.layers.T5BiasLayer`
        sharing one ``bias_module`` (:class:`posenc.T5RelativeBias`, causal buckets), into
        whose ``embedding.weight`` the decoder's ``block.0`` ``relative_attention_bias.weight`` loads.

    Raises:
        ValueError: If a field is missing or the bucket settings are out of range.
    """
    cfg = _as_dict(cfg)
    decoder = "num_decoder_layers" if cfg.get("num_decoder_layers") is not None else "num_hidden_layers"
    n = count(cfg, decoder, maximum=MAX_LAYERS)
    bias = T5RelativeBias(
        count(cfg, "num_attention_heads"),
        bidirectional=False,
        num_buckets=count(cfg, "relative_attention_num_buckets"),
        max_distance=count(cfg, "relative_attention_max_distance"),
    )
    head_dim = count(cfg, "d_kv", maximum=MAX_HEAD_DIM)
    return [T5BiasLayer(bias, head_dim=head_dim) for _ in range(n)]


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
    "kimi_k2": build_deepseek,  # Kimi K2's config.json: DeepseekV3Config through its auto_map
    "bloom": build_alibi,
    "mpt": build_alibi,
    "t5": build_t5,
    "gpt_oss": build_gpt_oss,
    "smollm3": build_smollm3,
    "cohere2": build_cohere2,
    "glm4": build_glm4,
    "glm4_moe": build_glm4_moe,
    "qwen3_next": build_qwen3_next,
    "deepseek_v32": build_deepseek,
}
