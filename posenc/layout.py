"""Channel layouts for paired encodings (sinusoidal pairs, rotary pairs).

Two layouts are in use for the same set of (sin, cos) or (x, y) pairs:

* ``"interleaved"``: pair ``i`` sits at channels ``2i`` and ``2i + 1``
  (Vaswani et al. 2017; RoFormer, GPT-J and Meta's LLaMA for rotary).
* ``"concat"``: the first members of all pairs, then all second members; pair
  ``i`` sits at channels ``i`` and ``i + d/2`` (the order of tensor2tensor and fairseq
  for sinusoidal, whose frequencies also differ from the paper's; GPT-NeoX and Hugging
  Face's LLaMA for rotary, where it is called ``"half"``).

They hold the same numbers in a different order; :func:`layout_permutation`
gives that order.
"""

from __future__ import annotations

import torch

from ._checks import check_choice, check_even_dim

#: Layouts of the sinusoidal encoding: the paper's, and the order tensor2tensor and fairseq use.
SINUSOIDAL_LAYOUTS = ("interleaved", "concat")
#: Layouts of the rotary pairs: GPT-NeoX's and Hugging Face LLaMA's, and RoFormer's, GPT-J's and Meta's.
ROPE_LAYOUTS = ("half", "interleaved")
#: Layout names accepted wherever pairs are laid out; ``"half"`` is rotary's
#: name for ``"concat"``.
PAIR_LAYOUTS = ("interleaved", "concat", "half")


def canonical(name: str, value: object) -> str:
    """``value`` checked against :data:`PAIR_LAYOUTS`, with rotary's ``"half"`` read as ``"concat"``."""
    check_choice(name, value, PAIR_LAYOUTS)
    return "concat" if value == "half" else value  # type: ignore[return-value]


def layout_permutation(dim: int, *, src: str = "interleaved", dst: str = "concat") -> torch.Tensor:
    """Index that reorders channels from one pair layout to another.

    ``y = x[..., layout_permutation(d, src=a, dst=b)]`` turns a tensor laid out
    as ``a`` into the same pairs laid out as ``b``. For weights, index the
    output rows of a projection the same way.

    Args:
        dim: Number of channels, even.
        src: Layout of the input: ``"interleaved"``, ``"concat"`` or ``"half"``.
        dst: Layout wanted.

    Returns:
        ``torch.long`` tensor of shape ``[dim]``, a permutation of ``0..dim-1``.

    Raises:
        ValueError: If ``dim`` is not a positive even int or a layout is unknown.
    """
    check_even_dim("dim", dim)
    src, dst = canonical("src", src), canonical("dst", dst)
    if src == dst:
        return torch.arange(dim)
    half = dim // 2
    # interleaved -> concat: first the even channels, then the odd ones.
    to_concat = torch.cat([torch.arange(0, dim, 2), torch.arange(1, dim, 2)])  # [dim]
    if src == "interleaved":
        return to_concat
    # concat -> interleaved: channel 2i takes i, channel 2i + 1 takes i + d/2.
    return torch.stack([torch.arange(half), torch.arange(half) + half], dim=-1).reshape(dim)


def cos_sin_from_angles(
    angles: torch.Tensor, head_dim: int, layout: str, attention_factor: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin ``[..., head_dim]`` laid out as ``layout`` (a rotary one) from one angle per pair
    ``[..., p]``, times ``attention_factor``; pairs past ``p`` get angle 0 (axial RoPE, M-RoPE)."""
    angles = torch.nn.functional.pad(angles, (0, head_dim // 2 - angles.shape[-1]))  # [..., p] -> [..., d/2]
    cos, sin = torch.cos(angles) * attention_factor, torch.sin(angles) * attention_factor  # x 1.0 is exact
    if layout == "half":
        return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)  # [..., d]
    return cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)  # [..., d]
