"""Training-free position remapping: maps from (query i, key j) to the distance RoPE sees.

RoPE's score of a query at position ``a`` and a key at ``b`` depends only on ``a - b``. A
model trained on ``L`` tokens has seen distances ``0 .. L - 1`` and no others; past that its
scores are out of distribution. The methods here extend the context without training by
choosing, for every causal pair ``j <= i``, a distance that the model has seen:

* ReRoPE (Su, 2023): distances clipped at a window ``w``: ``min(i - j, w)``.
* Self-Extend (Jin et al., "LLM Maybe LongLM", ICML 2024): ``i - j`` inside a neighbour
  window ``w``; beyond it the grouped distance ``i // G - j // G + w - w // G``.
* Dual Chunk Attention (An et al., "Training-Free Long-Context Scaling of Large Language
  Models", ICML 2024): keys at ``j mod s`` (chunks of ``s``); the query at ``i mod s`` for a
  key in its own chunk, at ``min(s + i mod s, s + w)`` for one in the previous chunk, and at
  ``s + w`` for older ones.
* STRING (An et al., "Why Does the Effective Context Length of LLMs Fall Short?", ICLR 2025):
  distances below a shift ``S`` unchanged, the others moved down to ``i - j - S + w``, so the
  rarely trained largest distances are never used.

Each ``*_distances`` function returns the ``[seq_len, seq_len]`` long tensor of distances
for causal attention (entry ``[i, j]`` for ``j <= i``; above the diagonal it keeps ``i - j``,
which is negative and which a causal mask removes). :func:`remapped_rope_scores` turns any
such matrix into RoPE scores.
"""

from __future__ import annotations

import torch

from .._checks import check_base, check_float_tensor, check_positive_int
from .rotary import rope_inv_freq


def _plain(seq_len: int) -> torch.Tensor:
    """``i - j`` for every ``[i, j]``, ``[seq_len, seq_len]`` int64."""
    seq_len = check_positive_int("seq_len", seq_len)
    pos = torch.arange(seq_len)
    return pos[:, None] - pos[None, :]  # [s, s]


def _causal(rel: torch.Tensor, remapped: torch.Tensor) -> torch.Tensor:
    """``remapped`` on and below the diagonal, ``rel`` above it."""
    return torch.where(rel >= 0, remapped, rel)


def _window_within(outer_name: str, outer: object, inner_name: str, inner: object) -> tuple[int, int]:
    """``outer`` and ``inner`` checked as ints >= 1, ``inner`` no larger than ``outer``."""
    outer = check_positive_int(outer_name, outer)
    inner = check_positive_int(inner_name, inner)
    if inner > outer:
        raise ValueError(f"{inner_name} must be <= {outer_name} ({outer}), got {inner}")
    return outer, inner


def rerope_distances(seq_len: int, window: int) -> torch.Tensor:
    """ReRoPE's distances: ``min(i - j, w)``, clipped at the window.

    Su, "Rectified Rotary Position Embeddings" (ReRoPE), kexue.fm 9708, 2023. Inside the
    window the distances are RoPE's; every farther key is seen at distance ``w``.

    Args:
        seq_len: Sequence length, an int >= 1.
        window: Window ``w``, an int >= 1; the largest distance used.

    Returns:
        ``[seq_len, seq_len]`` int64 distances.

    Raises:
        ValueError: If ``seq_len`` or ``window`` is not an int >= 1.
    """
    rel = _plain(seq_len)
    window = check_positive_int("window", window)
    # d(i, j) = min(i - j, w)
    return _causal(rel, rel.clamp(max=window))


def self_extend_distances(seq_len: int, group_size: int, window: int) -> torch.Tensor:
    """Self-Extend's distances: ``i - j`` within the window, grouped positions beyond it.

    Jin et al., "LLM Maybe LongLM: Self-Extend LLM Context Window Without Tuning", ICML 2024:
    neighbour attention for ``i - j < w``; grouped attention elsewhere, with the
    query at ``i // G + w - w // G`` and the key at ``j // G``, the shift ``w - w // G``
    joining the two regions.

    Args:
        seq_len: Sequence length, an int >= 1.
        group_size: Group size ``G``, an int >= 1.
        window: Neighbour window ``w``, an int >= 1.

    Returns:
        ``[seq_len, seq_len]`` int64 distances; the largest is
        ``(seq_len - 1) // G + w - w // G`` (when ``seq_len > w``).

    Raises:
        ValueError: If ``seq_len``, ``group_size`` or ``window`` is not an int >= 1.
    """
    rel = _plain(seq_len)
    group_size = check_positive_int("group_size", group_size)
    window = check_positive_int("window", window)
    pos = torch.arange(seq_len)
    # grouped: (i // G + w - w // G) - j // G
    grouped = (pos[:, None] // group_size + window - window // group_size) - pos[None, :] // group_size
    return _causal(rel, torch.where(rel < window, rel, grouped))


def dual_chunk_distances(seq_len: int, chunk_len: int, local_window: int) -> torch.Tensor:
    """Dual Chunk Attention's distances: intra-chunk, successive-chunk and inter-chunk.

    An et al., "Training-Free Long-Context Scaling of Large Language Models", ICML 2024:
    as ChunkLlama computes it: chunks of ``s`` tokens, keys at ``j mod s``.
    The query sits at ``i mod s`` for keys of its own chunk, at ``min(s + i mod s, s + w)``
    for keys of the previous chunk, and at ``min(2s - 1, s + w)`` (``s + w`` unless
    ``w = s``) for older chunks, so that no distance
    exceeds ``s + w`` (the trained length the method is set up for, ``c = s + w``).

    Args:
        seq_len: Sequence length, an int >= 1.
        chunk_len: Chunk length ``s``, an int >= 1.
        local_window: Window ``w`` kept exact across a chunk boundary, an int >= 1 and
            <= ``chunk_len``.

    Returns:
        ``[seq_len, seq_len]`` int64 distances, at most ``s + w``.

    Raises:
        ValueError: If an argument is not an int >= 1, or ``local_window`` exceeds ``chunk_len``.
    """
    rel = _plain(seq_len)
    s, w = _window_within("chunk_len", chunk_len, "local_window", local_window)
    pos = torch.arange(seq_len)
    apart = pos[:, None] // s - pos[None, :] // s  # [s, s]: chunks between query and key
    q_intra = (pos % s)[:, None]
    q_succ = (s + pos % s).clamp(max=s + w)[:, None]
    q_inter = torch.full_like(q_succ, min(2 * s - 1, s + w))  # the successive position of i mod s = s - 1
    # query position by case, minus the key's j mod s
    q_pos = torch.where(apart == 0, q_intra, torch.where(apart == 1, q_succ, q_inter))
    return _causal(rel, q_pos - (pos % s)[None, :])


def string_distances(seq_len: int, shift: int, window: int) -> torch.Tensor:
    """STRING's distances: those of at least ``S`` moved down by ``S - w``.

    An et al., "Why Does the Effective Context Length of LLMs Fall Short?", ICLR 2025:
    the largest distances are rarely trained, so they are dropped and the
    well-trained smaller ones shifted into their place; a small window ``w`` keeps the
    nearest tokens' distances. The paper's defaults are ``S = L / 3`` and ``w = 128``.

    Args:
        seq_len: Sequence length, an int >= 1.
        shift: Shift offset ``S``, an int >= 1.
        window: Local window ``w``, an int >= 1 and <= ``shift``.

    Returns:
        ``[seq_len, seq_len]`` int64 distances: ``i - j`` below ``S``, ``i - j - S + w``
        from it; the largest is ``seq_len - 1 - S + w``.

    Raises:
        ValueError: If an argument is not an int >= 1, or ``window`` exceeds ``shift``.
    """
    rel = _plain(seq_len)
    shift, window = _window_within("shift", shift, "window", window)
    # d(i, j) = i - j if i - j < S, else i - j - S + w
    return _causal(rel, torch.where(rel < shift, rel, rel - shift + window))


def remapped_rope_scores(q: torch.Tensor, k: torch.Tensor, distances, *, base: float = 10000.0) -> torch.Tensor:
    """RoPE's scores ``q_i . k_j`` with the pair seen at ``distances[i, j]`` instead of ``i - j``.

    With the half layout, pair ``c`` of a vector is the complex number
    ``x_c + 1j * x_{c + d/2}``; RoPE multiplies it by ``exp(1j * p * theta_c)`` at position
    ``p``, so a query at ``a`` and a key at ``b`` score
    ``sum_c Re(q_c * conj(k_c) * exp(1j * (a - b) * theta_c))``. This evaluates that sum at
    ``a - b = distances[i, j]``, which equals rotating the query to ``distances[i, j]`` and
    the key to 0 and taking the dot product.

    Args:
        q: ``[..., q_len, d]`` queries before rotation, floating, ``d`` even.
        k: ``[..., k_len, d]`` keys before rotation, broadcastable to ``q`` in the leading dims.
        distances: ``[q_len, k_len]`` distances (any real numbers).
        base: RoPE's base, a finite number > 1.

    Returns:
        ``[..., q_len, k_len]`` scores, float64.

    Raises:
        ValueError: If ``q`` or ``k`` is not floating, has fewer than 2 dims or an odd or
            different last dim, or ``distances`` is not ``[q_len, k_len]``.
    """
    check_float_tensor("q", q)
    check_float_tensor("k", k)
    if q.dim() < 2 or k.dim() < 2 or q.shape[-1] != k.shape[-1] or q.shape[-1] % 2:
        raise ValueError(f"q and k must be [..., s, d] with one even d, got {tuple(q.shape)} and {tuple(k.shape)}")
    base = check_base("base", base)
    rel = torch.as_tensor(distances)
    if rel.shape != (q.shape[-2], k.shape[-2]) or rel.dtype in (torch.bool, torch.complex64, torch.complex128):
        raise ValueError(
            f"distances must be real numbers of shape [q_len, k_len] = {[q.shape[-2], k.shape[-2]]}, "
            f"got {tuple(rel.shape)} of dtype {rel.dtype}"
        )
    half = q.shape[-1] // 2
    inv_freq, _ = rope_inv_freq(2 * half, base=base)  # [d/2]
    qc = torch.complex(q[..., :half].double(), q[..., half:].double())  # [..., q_len, d/2]
    kc = torch.complex(k[..., :half].double(), k[..., half:].double())  # [..., k_len, d/2]
    # score = sum_c Re(q_c conj(k_c) exp(1j * rel * theta_c))
    turn = torch.polar(torch.ones(()).double(), rel.double()[..., None] * inv_freq)  # [q_len, k_len, d/2]
    return (qc[..., :, None, :] * kc.conj()[..., None, :, :] * turn).real.sum(-1)
