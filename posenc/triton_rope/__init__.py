"""Fused Triton kernels for rotary position embedding (RoPE).

One launch of :func:`rope_qk_triton` rotates the queries and the keys of a
grouped-query layer (fewer key/value heads than query heads). Each program
takes one token of one sequence: it forms the ``d/2`` angles ``position *
theta_i`` in registers from the token's position and the frequencies, takes
their cos and sin once, and rotates every query head and every key head of that
token with them. No cos/sin table is read, so the kernel moves the fewest bytes
RoPE can move: ``q`` and ``k`` read once and written once.

* Both channel layouts, ``"half"`` and ``"interleaved"`` (see
  :mod:`posenc.rope.rotary`).
* float32, float16 and bfloat16 inputs; arithmetic in float32, one rounding
  to the input's dtype at the store.
* Any strides: ``[b, h, s, d]`` views of ``[b, s, h, d]`` memory, as a
  projection followed by ``.transpose(1, 2)`` produces them, need no copy.
* Positions as an offset (``offset .. offset + s - 1``, a KV cache already
  filled) or as a tensor ``[s]`` or ``[b, s]``.
* In place or into new tensors; autograd, whose backward is the rotation by
  ``-theta`` (the transpose of a rotation is its inverse).

**Angles.** A float32 product ``position * theta_i`` is off by up to half a
unit in the last place of the angle, about ``1e-3`` radian at position 16384.
The kernel avoids that error without float64: ``theta_i`` comes split into a
float32 head and tail (``hi + lo`` equals the float64 value to about
``2**-48``), the rounding error of ``position * hi`` is recovered exactly with
one fused multiply-add, and the angle is reduced to ``[-pi, pi]`` with ``2*pi``
split the same way before cos and sin are taken. The angles are then as
accurate as float64 ones rounded to float32, so the kernel agrees with the
float64 cos/sin tables of :func:`posenc.rope_cos_sin` to float32 rounding at
any position below ``2**24`` (positions are converted to float32, exact for
integers up to that bound). Beyond it the kernel would be silently wrong, so
:func:`rope_qk_triton` refuses such positions and ``backend="auto"`` leaves
them to the torch path (:func:`positions_in_range`).

A second kernel, behind :func:`apply_rope_triton`, reads ``cos`` and ``sin``
from tables, for :func:`posenc.apply_rope` with ``backend="triton"``, whose
caller supplies them.

Modules: ``kernel`` (the ``@triton.jit`` code), ``launch`` (checks, launch,
autograd and the entry points) and ``ptx`` (:func:`ptx_summary`). Importing
this package is cheap and never imports Triton; the entry points load
``launch`` on first use, and with it Triton and the kernels. Set
``TRITON_INTERPRET=1`` before that first use to run the kernels on CPU tensors
through Triton's interpreter: that is how the tests check them on a machine
without a GPU.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from .launch import apply_rope_triton, rope_qk_triton, split_frequencies
    from .ptx import ptx_summary

#: Input dtypes the kernels accept.
TRITON_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

#: Positions must lie in ``(-MAX_EXACT_POSITION, MAX_EXACT_POSITION)`` for the fused kernel:
#: it converts them to float32, which holds every integer only up to ``2**24``.
MAX_EXACT_POSITION = 1 << 24

# The entry points, each loaded from its module on first access.
_LAZY = {
    "apply_rope_triton": "launch",
    "rope_qk_triton": "launch",
    "split_frequencies": "launch",
    "ptx_summary": "ptx",
}


def triton_available() -> bool:
    """Whether Triton could be imported, so that the ``"triton"`` backend can run.

    This imports Triton and the kernels when they are there.
    """
    from . import launch

    return launch.kernel is not None


def positions_in_range(positions: torch.Tensor | None, offset: int, seq_len: int) -> bool:
    """Whether the fused kernel represents every position exactly (below :data:`MAX_EXACT_POSITION`).

    ``positions`` (any shape; reading its largest magnitude synchronises with
    the device) or, when it is None, ``offset .. offset + seq_len - 1``.
    :func:`posenc.RotaryEmbedding` with ``backend="auto"`` uses the torch
    path, with its float64 angles, where this is False; :func:`rope_qk_triton`
    raises.
    """
    if positions is None:
        return offset + seq_len <= MAX_EXACT_POSITION
    return positions.numel() == 0 or positions.abs().max().item() < MAX_EXACT_POSITION


def check_range(positions: torch.Tensor | None, offset: int, seq_len: int) -> None:
    if not positions_in_range(positions, offset, seq_len):
        raise ValueError(
            f"positions must lie within +-{MAX_EXACT_POSITION - 1} (2**24 - 1) for the Triton kernel, which "
            "forms angles from float32 positions; use backend='torch' (float64 angles) for larger ones"
        )


def interpreter_mode() -> bool:
    """Whether ``TRITON_INTERPRET`` is set, so that the kernels run on CPU tensors."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "yes", "on")


def __getattr__(name: str):
    """Load an entry point from its module on first access (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "MAX_EXACT_POSITION",
    "TRITON_DTYPES",
    "apply_rope_triton",
    "interpreter_mode",
    "positions_in_range",
    "ptx_summary",
    "rope_qk_triton",
    "split_frequencies",
    "triton_available",
]
