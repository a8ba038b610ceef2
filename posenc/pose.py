"""PoSE: positional skip-wise training (Zhu et al. 2024).

Fine-tune for a long context window without long inputs: each training window of
``train_len`` tokens is cut into ``num_chunks`` contiguous chunks, and every chunk's
position ids are moved right by a skip, so that the ids of one short window reach
anywhere up to the target length:

    chunk c holds ids  start_c + u_c, ..., start_c + l_c - 1 + u_c,
    start_c = l_0 + ... + l_{c-1},    0 = u_0 <= u_1 <= ... <= u_{N-1} <= target_len - train_len,

with the chunk lengths ``l_c >= 1`` and the skips ``u_c`` drawn afresh for every window
(``u_c`` uniform between ``u_{c-1}`` and ``target_len - train_len``, as in the paper, section 3.2).
The first chunk starts at 0, as in the paper's code. The tokens themselves stay
contiguous text; only their position ids jump.
"""

from __future__ import annotations

import torch

from ._checks import check_positive_int


def pose_position_ids(
    train_len: int,
    target_len: int,
    *,
    num_chunks: int = 2,
    generator: torch.Generator | None = None,
    device=None,
) -> torch.Tensor:
    """One window's PoSE position ids: ``train_len`` ids in ``[0, target_len)``, in ``num_chunks`` runs.

    Zhu et al. 2024, "PoSE: Efficient Context Window Extension of LLMs via Positional
    Skip-wise Training", section 3.2. Chunk lengths: the ``num_chunks - 1`` cut points are
    distinct and uniform in ``1 .. train_len - 1``. Skips: ``u_0 = 0``, then each ``u_c``
    uniform in ``u_{c-1} .. target_len - train_len``.

    Args:
        train_len: Length of the training window, >= ``num_chunks``.
        target_len: The context length to reach, >= ``train_len``.
        num_chunks: ``N``, >= 1 (the paper uses 2).
        generator: A seeded ``torch.Generator`` for reproducible draws (``None``: the global one).
        device: Device of the result.

    Returns:
        ``torch.long`` tensor ``[train_len]``, strictly increasing, first id 0, last id below
        ``target_len``; consecutive within each chunk.

    Raises:
        ValueError: If a length or ``num_chunks`` is not an int >= 1, ``target_len < train_len``,
            or ``num_chunks > train_len``.
        TypeError: If ``generator`` is not a ``torch.Generator``.
    """
    check_positive_int("train_len", train_len)
    check_positive_int("target_len", target_len)
    check_positive_int("num_chunks", num_chunks)
    if target_len < train_len:
        raise ValueError(f"target_len must be >= train_len = {train_len}, got {target_len}")
    if num_chunks > train_len:
        raise ValueError(f"num_chunks must be <= train_len = {train_len} (each chunk holds a token), got {num_chunks}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    # chunk boundaries: 0 < cut_1 < ... < cut_{N-1} < train_len
    cuts = torch.randperm(train_len - 1, generator=generator)[: num_chunks - 1] + 1  # [N - 1]
    starts = torch.cat([torch.zeros(1, dtype=torch.long), cuts.sort().values])  # [N]: start_c
    room = target_len - train_len
    skips = [0]  # u_0 = 0
    for _ in range(num_chunks - 1):
        # u_c uniform in u_{c-1} .. room
        skips.append(int(torch.randint(skips[-1], room + 1, (), generator=generator)))
    chunk = torch.zeros(train_len, dtype=torch.long)
    chunk[starts[1:]] = 1
    chunk = chunk.cumsum(0)  # [train_len]: the chunk of each token
    # id = index in the window + the skip of its chunk
    ids = torch.arange(train_len) + torch.tensor(skips, dtype=torch.long)[chunk]
    return ids.to(device)


def pose_chunks(position_ids: torch.Tensor) -> list[torch.Tensor]:
    """Split position ids into their runs of consecutive ids (the chunks PoSE moved apart).

    Args:
        position_ids: Integer tensor ``[seq_len]``, strictly increasing.

    Returns:
        The runs, in order; two chunks whose skips are equal join into one run.

    Raises:
        ValueError: If ``position_ids`` is not a 1-D integer tensor that increases strictly.
    """
    if not isinstance(position_ids, torch.Tensor) or position_ids.dim() != 1 or position_ids.is_floating_point():
        raise ValueError(f"position_ids must be a 1-D integer tensor, got {position_ids!r:.80}")
    step = position_ids.diff()
    if (step <= 0).any():
        raise ValueError(f"position_ids must increase strictly, got a step of {int(step.min())}")
    breaks = (torch.nonzero(step != 1).flatten() + 1).tolist()
    return list(torch.tensor_split(position_ids, breaks))
