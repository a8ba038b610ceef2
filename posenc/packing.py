"""Packed variable-length batches: several sequences laid end to end in one row.

Training on documents of different lengths wastes compute on padding. Packing
lays them end to end instead, ``total = L_0 + L_1 + ...`` tokens in one row,
and describes the boundaries by the *cumulative sequence lengths*, the
convention of FlashAttention's ``flash_attn_varlen_func`` (Dao 2023)::

    cu_seqlens = [0, L_0, L_0 + L_1, ..., total]      # int32, [n + 1]
    max_seqlen = max(L_k)                              # a Python int

Sequence ``k`` holds the tokens ``cu_seqlens[k] .. cu_seqlens[k + 1] - 1``.
Two things keep a packed batch equal to its sequences run one by one:

* positions restart at 0 in every sequence
  (:func:`positions_from_cu_seqlens`, the ``position_ids`` of Hugging Face's
  packed batches); absolute encodings and RoPE take them per token;
* attention stays inside each sequence: the block-diagonal
  :func:`packed_attention_mask`, causal within a block for a decoder.

Relative biases (ALiBi, T5) depend only on ``j - i``, which inside one
sequence is the same in packed and in per-sequence coordinates, so the bias of
the whole packed row with ``-inf`` across sequences is exactly the
per-sequence biases (:func:`packed_relative_bias`, :func:`packed_alibi_bias`).
"""

from __future__ import annotations

import torch

from ._checks import as_positions, check_bool, check_float_dtype
from .alibi import alibi_bias

__all__ = [
    "check_cu_seqlens",
    "cu_seqlens_from_position_ids",
    "cu_seqlens_from_seqlens",
    "max_seqlen_from_cu_seqlens",
    "packed_alibi_bias",
    "packed_attention_mask",
    "packed_relative_bias",
    "positions_from_attention_mask",
    "positions_from_cu_seqlens",
    "sequence_ids_from_cu_seqlens",
]

#: The largest offset FlashAttention's ``int32`` ``cu_seqlens`` can hold.
INT32_MAX = 2**31 - 1


def _integer_tensor(name: str, value) -> torch.Tensor:
    """``value`` as a tensor of integers, or a ``TypeError`` naming ``name`` and the dtype it has."""
    tensor = as_positions(value, name)
    if not isinstance(value, torch.Tensor) and tensor.numel() == 0:
        tensor = tensor.long()  # an empty list holds no floats
    if tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers (torch.int32 as in FlashAttention), got dtype {tensor.dtype}")
    return tensor


def check_cu_seqlens(cu_seqlens, *, total: int | None = None) -> torch.Tensor:
    """Return ``cu_seqlens`` as a tensor if it is a valid set of cumulative sequence lengths.

    Valid means FlashAttention's convention: integers, one dimension of
    ``n + 1`` entries for ``n`` sequences, starting at 0 and never decreasing
    (a repeated value is an empty sequence).

    Args:
        cu_seqlens: Tensor or list of ints, ``[n + 1]``.
        total: If given, the number of packed tokens ``cu_seqlens[-1]`` must equal.

    Returns:
        ``cu_seqlens`` as a tensor (its dtype and device kept).

    Raises:
        TypeError: If ``cu_seqlens`` does not hold integers.
        ValueError: If it is not 1-D with at least one entry, does not start
            at 0, decreases, ends past ``INT32_MAX`` tokens, or does not end at ``total``.
    """
    cu = _integer_tensor("cu_seqlens", cu_seqlens)
    if cu.dim() != 1 or cu.numel() == 0:
        raise ValueError(
            f"cu_seqlens must be 1-D with n + 1 >= 1 entries [0, L_0, L_0 + L_1, ...], got {tuple(cu.shape)}"
        )
    values = cu.tolist()
    if values[0] != 0:
        raise ValueError(f"cu_seqlens must start at 0, got cu_seqlens[0] = {values[0]}")
    drops = [k for k in range(1, len(values)) if values[k] < values[k - 1]]
    if drops:
        k = drops[0]
        raise ValueError(
            f"cu_seqlens must be nondecreasing (sequence lengths >= 0), got cu_seqlens[{k}] = {values[k]} "
            f"< cu_seqlens[{k - 1}] = {values[k - 1]}"
        )
    if values[-1] > INT32_MAX:  # positions and ids are one entry per token: refused before they are built
        raise ValueError(f"cu_seqlens must end at most at {INT32_MAX} (int32 cu_seqlens), got {values[-1]}")
    if total is not None and values[-1] != total:
        raise ValueError(
            f"cu_seqlens must end at the number of packed tokens {total}, got cu_seqlens[-1] = {values[-1]}"
        )
    return cu


def cu_seqlens_from_seqlens(seqlens, *, device=None) -> torch.Tensor:
    """Cumulative sequence lengths ``[0, L_0, L_0 + L_1, ...]`` of the lengths ``seqlens``.

    Args:
        seqlens: Lengths ``[n]``, integers >= 0 (tensor or list).
        device: Device of the result (default: that of ``seqlens``).

    Returns:
        ``torch.int32`` tensor ``[n + 1]``, as ``flash_attn_varlen_func`` takes it.

    Raises:
        TypeError: If ``seqlens`` does not hold integers.
        ValueError: If it is not 1-D, holds a negative length, or the lengths add
            up to more than int32 holds (2**31 - 1).
    """
    lengths = _integer_tensor("seqlens", seqlens)
    if lengths.dim() != 1:
        raise ValueError(f"seqlens must be 1-D [n], got shape {tuple(lengths.shape)}")
    if lengths.numel() and int(lengths.min()) < 0:
        raise ValueError(f"seqlens must be >= 0, got {lengths.tolist()}")
    total = torch.cumsum(lengths.to(torch.int64), 0)  # [n], summed where it cannot wrap
    if total.numel() and int(total[-1]) > INT32_MAX:
        raise ValueError(f"seqlens must add up to at most {INT32_MAX} (int32 cu_seqlens), got {int(total[-1])}")
    zero = torch.zeros(1, dtype=torch.int32, device=lengths.device)
    return torch.cat([zero, total.to(torch.int32)]).to(device or lengths.device)  # [n + 1]


def max_seqlen_from_cu_seqlens(cu_seqlens) -> int:
    """The longest sequence, ``max(cu_seqlens[k + 1] - cu_seqlens[k])``: FlashAttention's ``max_seqlen`` (0 if none)."""
    cu = check_cu_seqlens(cu_seqlens)
    return int(cu.diff().max()) if cu.numel() > 1 else 0


def sequence_ids_from_cu_seqlens(cu_seqlens) -> torch.Tensor:
    """The sequence each packed token belongs to: ``k`` for the tokens ``cu_seqlens[k] .. cu_seqlens[k + 1] - 1``.

    Returns:
        ``torch.long`` tensor ``[total]``, nondecreasing; empty sequences get no token.

    Raises:
        TypeError, ValueError: As :func:`check_cu_seqlens`.
    """
    cu = check_cu_seqlens(cu_seqlens).long()
    ids = torch.arange(cu.numel() - 1, device=cu.device)  # [n]
    return torch.repeat_interleave(ids, cu.diff())  # [total]


def positions_from_cu_seqlens(cu_seqlens) -> torch.Tensor:
    """The position of each packed token inside its own sequence: ``0 .. L_k - 1`` for every sequence ``k``.

    These are the ``position_ids`` of a packed batch in Hugging Face's
    convention; ``transformers``' ``prepare_fa_kwargs_from_position_ids``
    recovers ``cu_seqlens`` from them when no sequence is empty.

    Returns:
        ``torch.long`` tensor ``[total]``.

    Raises:
        TypeError, ValueError: As :func:`check_cu_seqlens`.
    """
    cu = check_cu_seqlens(cu_seqlens).long()
    ids = sequence_ids_from_cu_seqlens(cu)  # [total]
    # position = token index - start of its sequence
    return torch.arange(ids.numel(), device=cu.device) - cu[ids]


def cu_seqlens_from_position_ids(position_ids) -> torch.Tensor:
    """The ``cu_seqlens`` of a packed row whose positions restart at 0 in every sequence.

    The inverse of :func:`positions_from_cu_seqlens` (a new sequence starts at
    every 0), as ``transformers``' ``prepare_fa_kwargs_from_position_ids`` does
    for a row starting at position 0.

    Args:
        position_ids: ``[total]`` or ``[1, total]``, integers, starting with 0.

    Returns:
        ``torch.int32`` tensor ``[n + 1]``.

    Raises:
        TypeError: If ``position_ids`` does not hold integers.
        ValueError: If it is not one row, or is not empty and does not start at 0.
    """
    positions = _integer_tensor("position_ids", position_ids)
    if positions.dim() == 2 and positions.shape[0] == 1:
        positions = positions[0]  # [1, total] -> [total]
    if positions.dim() != 1:
        raise ValueError(f"position_ids must be one packed row [total] or [1, total], got {tuple(positions.shape)}")
    if positions.numel() and int(positions[0]) != 0:
        raise ValueError(f"position_ids must start at 0 (a sequence starts at every 0), got {int(positions[0])}")
    starts = (positions == 0).nonzero().flatten()  # [n]
    end = torch.tensor([positions.numel()], device=positions.device)
    return torch.cat([starts, end]).to(torch.int32)  # [n + 1]


def positions_from_attention_mask(attention_mask) -> torch.Tensor:
    """Positions ``[b, s]`` of a padded batch: each sequence counts its own tokens from 0.

    With left padding, ``[[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]`` gives
    ``[[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]``: the first real token of every row
    is at position 0, as if unpadded. Padding gets 0 (masked anyway). This is
    ``transformers``' rule in ``generate``: ``cumsum(mask) - 1``, 0 at padding.

    Args:
        attention_mask: ``[b, s]``, 1 (or True) for real tokens, 0 for padding.

    Returns:
        ``torch.long`` tensor ``[b, s]``, to pass as ``positions`` to the
        absolute encodings and to :class:`posenc.RotaryEmbedding`.

    Raises:
        ValueError: If ``attention_mask`` is not 2-D or holds values other than 0 and 1.
    """
    mask = as_positions(attention_mask, "attention_mask")
    if mask.dim() != 2 or not ((mask == 0) | (mask == 1)).all():
        raise ValueError(f"attention_mask must be [batch, seq_len] of 0 and 1, got shape {tuple(mask.shape)}")
    mask = mask.long()
    # position = (real tokens so far) - 1, 0 at padding
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)


def packed_attention_mask(cu_seqlens, *, causal: bool = False) -> torch.Tensor:
    """Which packed key each packed query may attend to: the block-diagonal mask.

    Entry ``[i, j]`` is True when tokens ``i`` and ``j`` belong to the same
    sequence (and ``j <= i`` when ``causal``). Pass it as ``bias`` to
    :func:`posenc.scaled_dot_product_attention` (a boolean bias is a mask,
    True = may attend), as FlashAttention's ``flash_attn_varlen_func`` applies it.

    Args:
        cu_seqlens: Cumulative sequence lengths ``[n + 1]``.
        causal: Also mask the keys after each query.

    Returns:
        ``torch.bool`` tensor ``[total, total]``.

    Raises:
        TypeError, ValueError: As :func:`check_cu_seqlens`.
    """
    causal = check_bool("causal", causal)
    ids = sequence_ids_from_cu_seqlens(cu_seqlens)  # [total]
    mask = ids.unsqueeze(-1) == ids  # [total, total]
    if causal:
        mask = torch.tril(mask)  # j <= i
    return mask


def packed_relative_bias(bias: torch.Tensor, cu_seqlens) -> torch.Tensor:
    """A relative bias computed on the whole packed row, with ``-inf`` between different sequences.

    ALiBi's and T5's biases depend only on ``j - i``; inside one sequence that
    difference is the same in packed and in per-sequence coordinates, so this
    equals each sequence's own bias on its diagonal block, and masks the rest.

    Args:
        bias: Floating tensor ``[..., total, total]``, for example
            ``T5RelativeBias(h)(total, total, offset=0)``.
        cu_seqlens: Cumulative sequence lengths ``[n + 1]`` ending at ``total``.

    Returns:
        ``bias`` with ``-inf`` wherever query and key are in different sequences.

    Raises:
        TypeError: If ``bias`` is not floating point, or as :func:`check_cu_seqlens`.
        ValueError: If ``bias`` is not ``[..., total, total]``, or as :func:`check_cu_seqlens`.
    """
    if not isinstance(bias, torch.Tensor) or not bias.is_floating_point():
        raise TypeError(f"bias must be a floating-point tensor [..., total, total], got {type(bias).__name__}")
    if bias.dim() < 2 or bias.shape[-1] != bias.shape[-2]:
        raise ValueError(f"bias must be [..., total, total], got {tuple(bias.shape)}")
    cu = check_cu_seqlens(cu_seqlens, total=bias.shape[-1])
    return bias.masked_fill(~packed_attention_mask(cu.to(bias.device)), float("-inf"))


def packed_alibi_bias(
    num_heads: int, cu_seqlens, *, causal: bool = True, dtype: torch.dtype = torch.float32, device=None
) -> torch.Tensor:
    """ALiBi's bias ``[num_heads, total, total]`` for a packed batch (Press et al. 2022).

    ``-m_h * (i - j)`` (``causal``, with ``-inf`` for later keys) or
    ``-m_h * |i - j|`` inside each sequence, ``-inf`` between sequences:
    FlashAttention's ``alibi_slopes`` with ``cu_seqlens``, as a dense bias.

    Args:
        num_heads: Number of heads, >= 1.
        cu_seqlens: Cumulative sequence lengths ``[n + 1]``, at least one token.
        causal: Causal bias (with the mask) or symmetric.
        dtype: Floating dtype of the result.
        device: Device of the result (default: that of ``cu_seqlens``).

    Returns:
        Tensor ``[num_heads, total, total]``.

    Raises:
        ValueError: If ``num_heads`` is not an int >= 1, there is no token, or as :func:`check_cu_seqlens`.
    """
    check_float_dtype("dtype", dtype)
    cu = check_cu_seqlens(cu_seqlens)
    total = int(cu[-1])
    if total < 1:
        raise ValueError(f"cu_seqlens must describe at least one token, got cu_seqlens[-1] = {total}")
    device = cu.device if device is None else device
    bias = alibi_bias(num_heads, total, total, causal=causal, offset=0, dtype=dtype, device=device)  # [h, t, t]
    return packed_relative_bias(bias, cu)
