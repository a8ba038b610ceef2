"""Why the sinusoidal encoding pairs a sine with a cosine of the same frequency.

Shifting a position by ``k`` turns each (sin, cos) pair through the angle
``k * w_i``::

    [sin((p + k) w)]   [ cos(k w)  sin(k w)] [sin(p w)]
    [cos((p + k) w)] = [-sin(k w)  cos(k w)] [cos(p w)]

so ``PE(p + k) = M_k @ PE(p)`` with ``M_k`` block-diagonal, built from 2x2
rotations and independent of ``p`` (Vaswani et al. 2017, section 3.5: "for any
fixed offset k, PE(pos+k) can be represented as a linear function of
PE(pos)"). The same identity makes the dot product of two encodings a function
of their offset alone: ``PE(p) . PE(p + k) = sum_i cos(k w_i)``.
"""

from __future__ import annotations

import torch

from ._checks import as_positions, check_choice, check_even_dim, check_float_dtype, check_real
from .layout import SINUSOIDAL_LAYOUTS
from .sinusoidal import sinusoidal_frequencies


def _real_tensor(name: str, value, dtype: torch.dtype) -> torch.Tensor:
    """``value`` (a number, nested lists of them, or a tensor) as a ``dtype`` tensor; a clear
    ``TypeError`` naming ``name`` for anything else (``None``, a string)."""
    if isinstance(value, (str, bytes)):  # torch.as_tensor reads a string as a dtype name
        raise TypeError(f"{name} must be a number or a tensor of them, got {value!r:.80}")
    tensor = check_real(name, as_positions(value, name))  # Python floats straight to float64
    return tensor.to(dtype)


def _pair_channels(dim: int, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Channels of the sines and of the cosines, pair by pair: two ``[dim/2]`` index tensors."""
    pairs = torch.arange(dim // 2)
    if layout == "interleaved":
        return 2 * pairs, 2 * pairs + 1
    return pairs, pairs + dim // 2


def sinusoidal_offset_matrix(
    k,
    dim: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """The matrix ``M_k`` with ``PE(p + k) = M_k @ PE(p)`` for every position ``p``.

    Vaswani et al. 2017, section 3.5. Pair ``i`` of the encoding is the point
    ``(sin(p w_i), cos(p w_i))`` on the unit circle; moving ``k`` positions
    turns it by the angle ``k w_i``. ``M_k`` holds one 2x2 rotation per pair:
    block-diagonal in the interleaved layout, the same entries permuted in the
    concat layout. It is orthogonal, ``M_a @ M_b = M_{a+b}`` and
    ``M_{-k} = M_k^T``.

    Args:
        k: Offset, a number or a tensor of any shape; negative and fractional
            offsets are allowed.
        dim: Model dimension ``d``, even.
        base: Frequency base, as in :func:`posenc.sinusoidal_encoding`.
        layout: ``"interleaved"`` or ``"concat"``: the layout of the encodings
            the matrix acts on.
        dtype: Floating dtype of the result; the angles are formed in float64.

    Returns:
        Tensor of shape ``[*k.shape, dim, dim]``.

    Raises:
        ValueError: If ``dim`` is not a positive even int, ``base`` is not > 1,
            ``layout`` is unknown or ``k`` is complex or boolean.
        TypeError: If ``k`` is not a number or a tensor (``None``, a string), or
            ``dtype`` is not a floating-point dtype.
    """
    check_even_dim("dim", dim)
    check_choice("layout", layout, SINUSOIDAL_LAYOUTS)
    check_float_dtype("dtype", dtype)  # a rotation in integers would be all zeros
    k = _real_tensor("k", k, torch.float64)
    inv_freq = sinusoidal_frequencies(dim, base=base, device=k.device)  # [d/2]
    angles = k.unsqueeze(-1) * inv_freq  # [*k, d/2]
    cos, sin = torch.cos(angles), torch.sin(angles)
    s_ch, c_ch = _pair_channels(dim, layout)
    # [*k, d, d]: block-diagonal, one 2 x 2 rotation per pair
    m = torch.zeros(*k.shape, dim, dim, dtype=torch.float64, device=k.device)
    m[..., s_ch, s_ch] = cos  # new sin = cos(kw) sin(pw) + sin(kw) cos(pw)
    m[..., s_ch, c_ch] = sin
    m[..., c_ch, s_ch] = -sin  # new cos = -sin(kw) sin(pw) + cos(kw) cos(pw)
    m[..., c_ch, c_ch] = cos
    return m.to(dtype)


def sinusoidal_dot_product(offset, dim: int, *, base: float = 10000.0) -> torch.Tensor:
    """``PE(p) . PE(p + offset) = sum_i cos(offset * w_i)``, the same for every ``p``.

    The dot product of two sinusoidal encodings depends only on the offset
    between them, and only through ``cos``: it is even in the offset, so it
    cannot tell "k positions before" from "k positions after". The layout does
    not matter (a permutation preserves dot products).

    Args:
        offset: Offset ``q - p``, a number or a tensor of any shape.
        dim: Model dimension ``d``, even.
        base: Frequency base.

    Returns:
        float64 tensor of the shape of ``offset``; ``dim / 2`` at offset 0.

    Raises:
        ValueError: If ``dim`` is not a positive even int, ``base`` is not > 1
            or ``offset`` is complex or boolean.
        TypeError: If ``offset`` is not a number or a tensor (``None``, a string).
    """
    check_even_dim("dim", dim)
    offset = _real_tensor("offset", offset, torch.float64)
    inv_freq = sinusoidal_frequencies(dim, base=base, device=offset.device)  # [d/2]
    return torch.cos(offset.unsqueeze(-1) * inv_freq).sum(-1)
