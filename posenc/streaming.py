"""Attention sinks: a streaming KV cache with positions in the cache, and gpt-oss's sink logit.

Xiao et al., "Efficient Streaming Language Models with Attention Sinks" (StreamingLLM),
ICLR 2024: a model keeps most of its attention on the first few tokens whatever they say,
so evicting them from a rolling KV cache breaks it. StreamingLLM keeps the first
``num_sinks`` tokens plus the last ``window`` ones, and gives every cached token its slot in
the cache as its position: keys are cached *before* RoPE and rotated by their
slot at each step, so the distances stay below the cache size, inside the trained range.

gpt-oss (OpenAI, 2025; ``transformers``' ``GptOssAttention``) builds the sink into the
softmax instead: each head has one learned logit that joins the denominator and takes a
share of the probability, so a head may attend to nothing.
"""

from __future__ import annotations

import torch

from ._checks import check_base, check_float_tensor, check_nonnegative_int, check_positive_int
from .rope.rotary import apply_rope, rope_cos_sin


def streaming_kept(seq_len: int, *, num_sinks: int, window: int) -> torch.Tensor:
    """Indices of the tokens a StreamingLLM cache holds after ``seq_len`` tokens.

    Xiao et al., "Efficient Streaming Language Models with Attention Sinks", ICLR 2024:
    the first ``num_sinks`` tokens (the attention sinks) and the last ``window`` tokens.

    Args:
        seq_len: Tokens seen so far, an int >= 1.
        num_sinks: Sink tokens kept from the start, an int >= 0.
        window: Recent tokens kept, an int >= 1.

    Returns:
        ``[min(seq_len, num_sinks + window)]`` int64 indices, increasing: the cache in order.

    Raises:
        ValueError: If ``seq_len`` or ``window`` is not an int >= 1, or ``num_sinks`` not an
            int >= 0.
    """
    seq_len = check_positive_int("seq_len", seq_len)
    num_sinks = check_nonnegative_int("num_sinks", num_sinks)
    window = check_positive_int("window", window)
    if seq_len <= num_sinks + window:
        return torch.arange(seq_len)
    return torch.cat((torch.arange(num_sinks), torch.arange(seq_len - window, seq_len)))


def streaming_scores(q: torch.Tensor, keys: torch.Tensor, *, base: float = 10000.0) -> torch.Tensor:
    """Scores of the newest query against a cache of unrotated keys, positions taken in the cache.

    StreamingLLM's rule (Xiao et al., ICLR 2024): the ``n`` cached keys sit at
    positions ``0 .. n - 1`` in cache order, the newest token (the last key) included, so the
    query is at ``n - 1``; both are rotated (RoPE, half layout) at those positions when the
    scores are formed, never before caching.

    Args:
        q: ``[..., d]`` the newest query, before rotation, floating, ``d`` even.
        keys: ``[..., n, d]`` the cached keys before rotation, the newest last.
        base: RoPE's base, a finite number > 1.

    Returns:
        ``[..., n]`` scores ``q . k`` (not divided by ``sqrt(d)``), in ``q``'s dtype.

    Raises:
        ValueError: If ``q`` or ``keys`` is not floating, the last dims differ or are odd, or
            ``keys`` has fewer than 2 dims.
    """
    check_float_tensor("q", q)
    check_float_tensor("keys", keys)
    if keys.dim() < 2 or q.dim() < 1 or q.shape[-1] != keys.shape[-1] or q.shape[-1] % 2:
        raise ValueError(
            f"q must be [..., d] and keys [..., n, d] with one even d, got {tuple(q.shape)} and {tuple(keys.shape)}"
        )
    base = check_base("base", base)
    n, d = keys.shape[-2], keys.shape[-1]
    cos, sin = rope_cos_sin(torch.arange(n), d, base=base, dtype=keys.dtype)  # [n, d]: the cache slots
    k_rot = apply_rope(keys, cos, sin)
    q_rot = apply_rope(q, cos[-1], sin[-1])  # the query's slot is the last one
    return (k_rot @ q_rot[..., :, None])[..., 0]  # [..., n, d] @ [..., d, 1] -> [..., n]


def sink_softmax(scores: torch.Tensor, sinks: torch.Tensor) -> torch.Tensor:
    """Softmax over the keys with one learned sink logit per head in the denominator (gpt-oss).

    ``p_j = exp(s_j) / (sum_k exp(s_k) + exp(sink_h))``: the sink takes the share
    ``exp(sink_h) / (sum_k exp(s_k) + exp(sink_h))`` and the keys' probabilities sum to one
    minus it; ``sink_h = -inf`` gives the plain softmax. As ``transformers``' gpt-oss eager
    attention does, the logits are shifted by their maximum (sink included) first.

    Args:
        scores: ``[..., h, q_len, k_len]`` attention logits (masked entries ``-inf``), floating.
        sinks: ``[h]`` sink logits, one per head, floating (``-inf`` allowed).

    Returns:
        ``[..., h, q_len, k_len]`` probabilities, in the dtype of ``scores``.

    Raises:
        ValueError: If ``scores`` has fewer than 3 dims, or ``sinks`` is not ``[h]``.
    """
    check_float_tensor("scores", scores)
    check_float_tensor("sinks", sinks)
    if scores.dim() < 3 or sinks.shape != (scores.shape[-3],):
        raise ValueError(
            f"scores must be [..., h, q_len, k_len] and sinks [h], got {tuple(scores.shape)} and {tuple(sinks.shape)}"
        )
    sink = sinks.to(scores.dtype)[:, None, None].expand(scores.shape[:-1] + (1,))  # [..., h, q_len, 1]
    logits = torch.cat((scores, sink), dim=-1)  # [..., h, q_len, k_len + 1]
    # p = exp(l - max) / sum exp(l - max), the sink's column dropped after
    logits = logits - logits.amax(dim=-1, keepdim=True).clamp(min=torch.finfo(scores.dtype).min)
    return torch.softmax(logits, dim=-1)[..., :-1]
