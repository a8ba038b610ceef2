"""Per-layer position encodings of Llama 4, DeepSeek-V2/V3, BLOOM, MPT, Falcon (ALiBi) and T5.

Each builder reads a model's configuration as a plain dict (``config.to_dict()`` of the
``transformers`` configuration, or its ``config.json``) and returns one layer object
(:mod:`posenc.hf_layers`) per decoder layer, with ``kind``, ``scores``, ``apply`` and
``row``. What each reproduces, read from ``transformers`` 5:

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
* BLOOM, MPT, Falcon with ``alibi``: see :class:`posenc.hf_layers.ALiBiLayer`.
* T5: the decoder's self-attention, causal buckets, no ``1/sqrt(d)``: see
  :class:`posenc.hf_layers.T5BiasLayer`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ._checks import check_even_dim
from .hf_fields import (
    MAX_HEAD_DIM,
    MAX_LAYERS,
    config_flags,
    config_mapping,
    config_number,
    count,
    field,
    raw_rope_parameters,
    rope_parameters,
)
from .hf_layers import ALiBiLayer, NoPELayer, RotaryLayer, T5BiasLayer
from .rotary import rope_inv_freq
from .t5 import T5RelativeBias


def _as_dict(cfg) -> dict:
    if not isinstance(cfg, Mapping):
        raise TypeError(f"cfg must be a dict (a model's config.json), got {type(cfg).__name__}")
    return dict(cfg)


def _rope(cfg: Mapping) -> dict:
    """The model's ``rope_parameters``, filled in (:func:`posenc.hf_fields.rope_parameters`)."""
    return rope_parameters(cfg, raw_rope_parameters(cfg), theta=field(cfg, "rope_theta", 10_000.0))


def build_llama4(cfg: dict) -> list:
    """Llama 4's layers: RoPE, and NoPE every ``no_rope_layer_interval``-th layer (iRoPE).

    Args:
        cfg: ``Llama4TextConfig.to_dict()`` (``model_type`` ``"llama4_text"``) or the
            multimodal ``Llama4Config``'s (``"llama4"``), whose ``text_config`` is read.

    Returns:
        ``num_hidden_layers`` layers: :class:`~posenc.hf_layers.RotaryLayer` (``kind="rope"``)
        where ``no_rope_layers[i]`` is 1, else :class:`~posenc.hf_layers.NoPELayer`.

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
    params = _rope(cfg)
    temperature = None
    if cfg.get("attn_temperature_tuning", True):
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
    """DeepSeek-V2/V3's layers: multi-head latent attention with RoPE on the last ``qk_rope_head_dim`` channels.

    Args:
        cfg: ``DeepseekV2Config`` or ``DeepseekV3Config`` as a dict (``model_type``
            ``"deepseek_v2"`` or ``"deepseek_v3"``).

    Returns:
        ``num_hidden_layers`` :class:`~posenc.hf_layers.RotaryLayer` (``kind="mla_rope"``)
        taking q and k of width ``qk_nope_head_dim + qk_rope_head_dim``.

    Raises:
        ValueError: If ``model_type`` is neither, a field is out of range, or ``rope_parameters`` is invalid.
    """
    cfg = _as_dict(cfg)
    model_type = cfg.get("model_type")
    if model_type not in ("deepseek_v2", "deepseek_v3"):
        raise ValueError(f"model_type must be 'deepseek_v2' or 'deepseek_v3', got {model_type!r}")
    n = count(cfg, "num_hidden_layers", maximum=MAX_LAYERS)
    heads = count(cfg, "num_attention_heads")
    nope = count(cfg, "qk_nope_head_dim", maximum=MAX_HEAD_DIM)
    rope = check_even_dim("config['qk_rope_head_dim']", count(cfg, "qk_rope_head_dim", maximum=MAX_HEAD_DIM))
    params = _rope(cfg)
    if model_type == "deepseek_v2":
        style = "complex"
    else:  # transformers tests the flag's truth: None means no
        style = "deinterleave" if cfg.get("rope_interleave", True) else "half"
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
        One :class:`~posenc.hf_layers.ALiBiLayer` per layer, softmax scale ``1/sqrt(head_dim)``
        (MPT: ``attn_config["softmax_scale"]`` if set).

    Raises:
        ValueError: If ``model_type`` is none of the three, Falcon has ``alibi`` false
            (RoPE, which :mod:`posenc.hf_config` handles), or a field is missing.
    """
    cfg = _as_dict(cfg)
    model_type = cfg.get("model_type")
    if model_type == "falcon" and not cfg.get("alibi"):
        raise ValueError("falcon without alibi uses RoPE: handled by hf_config, not build_alibi")
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
        ``num_decoder_layers`` (else ``num_layers``) :class:`~posenc.hf_layers.T5BiasLayer`
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
