"""Sinusoidal absolute position encoding (Vaswani et al. 2017, section 3.5).

For a position ``p`` and pair index ``i`` in ``0 .. d/2 - 1``::

    PE(p, 2i)     = sin(p * w_i)
    PE(p, 2i + 1) = cos(p * w_i),      w_i = base ** (-2i / d)

so the wavelengths ``2*pi / w_i`` run from ``2*pi`` (pair 0) up to
``2*pi * base ** ((d - 2) / d)``, just under ``2*pi * base``.

An odd ``d`` is accepted by the ``"concat"`` layout only, with Marian's
convention (``MarianSinusoidalPositionalEmbedding`` in ``transformers``): the
first ``ceil(d/2)`` channels hold ``sin(p * w_i)``, ``i = 0 .. ceil(d/2) - 1``,
the last ``floor(d/2)`` hold ``cos(p * w_i)``, ``i = 0 .. floor(d/2) - 1``; the
last sine has no cosine. The paper's ``"interleaved"`` layout needs even ``d``.

Angles are computed in float64 by default and only the result is rounded to
the requested dtype: a float32 encoding is then correctly rounded even at
position 10**6, where the usual float32 computation is off by about 0.06.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import (
    CACHE_LIMIT,
    angle_device,
    as_positions,
    check_angle_dtype,
    check_base,
    check_cache_limit,
    check_choice,
    check_even_dim,
    check_float_dtype,
    check_nonnegative_int,
    check_offset,
    check_positive_int,
    check_probability,
    check_real,
    check_sequence_input,
    check_table_size,
)
from .layout import SINUSOIDAL_LAYOUTS


def _check_dim(dim: object, layout: object) -> int:
    """Return ``dim`` if ``layout`` is known and takes it: any positive int for ``"concat"``, even ones otherwise."""
    check_choice("layout", layout, SINUSOIDAL_LAYOUTS)
    check_positive_int("dim", dim)
    check_table_size("dim", dim, dim)
    if layout == "interleaved" and dim % 2:
        raise ValueError(
            f"dim must be even for layout='interleaved' (channels come in sin/cos pairs), got {dim}; "
            f"use {dim - 1} or {dim + 1}, or layout='concat' (Marian's convention for an odd dim)"
        )
    return dim


def check_token_positions(positions, x: torch.Tensor, *, offset: object = 0) -> torch.Tensor:
    """Return the position of every token of ``x [..., s, d]`` as a tensor on ``x``'s device.

    ``positions`` is ``[s]`` (shared by all sequences) or ``[b, s]`` (one row per
    sequence of ``x [b, s, d]``, or one row for all); ``offset`` must then be 0.
    Shared by :class:`SinusoidalPositionalEncoding` and :class:`posenc.LearnedPositionalEmbedding`.

    Raises:
        ValueError: If ``offset`` is also given, ``positions`` holds booleans or
            complex numbers, or its shape does not fit ``x``.
    """
    if offset != 0:
        raise ValueError(f"pass either positions or offset, not both; got offset={offset!r} with positions")
    positions = check_real("positions", as_positions(positions)).to(x.device)
    seq_len = x.shape[-2]
    if positions.dim() not in (1, 2) or positions.shape[-1] != seq_len:
        raise ValueError(
            f"positions must have shape [{seq_len}] or [batch, {seq_len}] (seq_len = x.shape[-2]), "
            f"got {tuple(positions.shape)}"
        )
    if positions.dim() == 2 and (x.dim() != 3 or positions.shape[0] not in (1, x.shape[0])):
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} give one row per sequence: x must be "
            f"[{positions.shape[0]}, {seq_len}, dim] (or positions [1, {seq_len}]), got x {tuple(x.shape)}"
        )
    return positions


def sinusoidal_frequencies(
    dim: int, *, base: float = 10000.0, dtype: torch.dtype = torch.float64, device=None
) -> torch.Tensor:
    """Angular frequencies ``w_i = base ** (-2i / dim)`` of the sinusoidal encoding.

    Args:
        dim: Model dimension ``d``, even.
        base: The constant 10000 of the paper; wavelengths grow up to ``2*pi*base``.
        dtype: Floating dtype of the result. Computed as ``exp(-2i ln(base) / d)``.
        device: Device of the result.

    Returns:
        Tensor of shape ``[dim // 2]``, decreasing from 1.

    Raises:
        ValueError: If ``dim`` is not a positive even int or ``base`` is not > 1.
    """
    check_even_dim("dim", dim)
    base = check_base("base", base)
    check_float_dtype("dtype", dtype)
    two_i = torch.arange(0, dim, 2, dtype=dtype, device=device)  # [d/2]
    return torch.exp(two_i * (-math.log(base) / dim))


def sinusoidal_encoding(
    positions,
    dim: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    dtype: torch.dtype = torch.float32,
    angle_dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Sinusoidal encoding of arbitrary (integer or fractional) positions.

    Vaswani et al., "Attention Is All You Need", 2017, section 3.5.

    Args:
        positions: Tensor (or anything ``torch.as_tensor`` takes) of any shape
            holding integer or float positions.
        dim: Model dimension ``d``: even for ``"interleaved"``, any for ``"concat"``.
        base: Frequency base; 10000 in the paper.
        layout: ``"interleaved"`` puts ``sin`` at channel ``2i`` and ``cos`` at
            ``2i + 1`` (the paper's); ``"concat"`` puts all sines first, then
            all cosines, the paper's numbers in Marian's order (tensor2tensor and fairseq
            use that order with other frequencies, ``10000 ** (-i / (d/2 - 1))``); for an odd ``d``,
            ``ceil(d/2)`` sines then ``floor(d/2)`` cosines, as Marian does.
        dtype: Floating dtype of the result.
        angle_dtype: Dtype in which the angles ``p * w_i`` are formed. The
            default float64 makes float32 results exact to rounding; pass
            ``torch.float32`` to reproduce the usual float32 computation.

    Returns:
        Tensor of shape ``[*positions.shape, dim]`` and dtype ``dtype``, on the
        device of ``positions``.

    Raises:
        ValueError: If ``dim`` is not positive (or odd with ``"interleaved"``),
            ``base`` is not > 1, ``layout`` is unknown, or ``angle_dtype`` is
            not float32 or float64.
    """
    _check_dim(dim, layout)
    check_angle_dtype(angle_dtype)
    check_float_dtype("dtype", dtype)
    positions = check_real("positions", as_positions(positions))  # Python floats as float64, not float32
    check_table_size("dim", dim, positions.numel() * dim)  # the [*positions.shape, dim] result
    return _encode(positions, dim, check_base("base", base), layout, dtype, angle_dtype=angle_dtype)


def _encode(
    positions: torch.Tensor, dim: int, base: float, layout: str, dtype: torch.dtype, *, angle_dtype=torch.float64
) -> torch.Tensor:
    """:func:`sinusoidal_encoding` for checked arguments (the module's path, also under torch.compile)."""
    work = angle_device(positions.device, angle_dtype)
    two_i = torch.arange(0, dim, 2, dtype=angle_dtype, device=work)  # [ceil(d/2)]
    inv_freq = torch.exp(two_i * (-math.log(base) / dim))  # as sinusoidal_frequencies
    angles = positions.to(work, angle_dtype).unsqueeze(-1) * inv_freq  # [*, ceil(d/2)]
    sin, cos = torch.sin(angles), torch.cos(angles)
    if layout == "interleaved":
        out = torch.stack((sin, cos), dim=-1).flatten(-2)  # [*, d/2, 2] -> [*, d]
    else:
        # Marian: ceil(d/2) sines, then the cosines of the first floor(d/2) frequencies
        out = torch.cat((sin, cos[..., : dim // 2]), dim=-1)  # [*, d]
    return out.to(device=positions.device, dtype=dtype)


def sinusoidal_table(
    num_positions: int,
    dim: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    dtype: torch.dtype = torch.float32,
    device=None,
) -> torch.Tensor:
    """The encodings of positions ``0 .. num_positions - 1`` as one table.

    Args:
        num_positions: Number of rows, >= 0.
        dim: Model dimension; even for ``"interleaved"``.
        base: Frequency base.
        layout: ``"interleaved"`` or ``"concat"``, as in :func:`sinusoidal_encoding`.
        dtype: Floating dtype of the table.
        device: Device of the table.

    Returns:
        Tensor of shape ``[num_positions, dim]``.

    Raises:
        ValueError: If ``num_positions`` is negative or not an int, or on any
            error of :func:`sinusoidal_encoding`.
    """
    check_nonnegative_int("num_positions", num_positions)
    check_table_size("num_positions", num_positions, num_positions * _check_dim(dim, layout))
    positions = torch.arange(num_positions, device=device)  # [n]
    return sinusoidal_encoding(positions, dim, base=base, layout=layout, dtype=dtype)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding to a batch of embeddings, then dropout.

    Vaswani et al. 2017, section 3.5. Holds no parameters: the float32 table
    is a non-persistent buffer (not saved in ``state_dict``) that moves with
    ``.to()`` and grows on demand up to ``cache_limit`` rows. Positions past
    the limit, and float64 inputs, get encodings computed for just the tokens
    at hand (float64 ones for float64 inputs), so there is no maximum length
    and one far position does not leave a huge table behind.

    Args:
        dim: Model dimension; even for ``"interleaved"``, any for ``"concat"``
            (Marian's convention for an odd one).
        base: Frequency base.
        layout: ``"interleaved"`` or ``"concat"``.
        dropout: Dropout probability applied after the addition, in [0, 1).
        initial_len: Rows computed up front; the table doubles when a longer
            input arrives.
        cache_limit: The most rows the table grows to, >= ``initial_len``
            (default 65,536: 16 MiB at ``dim`` 64).
    """

    table: torch.Tensor

    def __init__(
        self,
        dim: int,
        *,
        base: float = 10000.0,
        layout: str = "interleaved",
        dropout: float = 0.0,
        initial_len: int = 512,
        cache_limit: int = CACHE_LIMIT,
    ) -> None:
        super().__init__()
        self.dim = _check_dim(dim, layout)
        self.base = check_base("base", base)
        self.layout = layout
        self.dropout = nn.Dropout(check_probability("dropout", dropout))
        check_nonnegative_int("initial_len", initial_len)
        self.cache_limit = check_cache_limit(cache_limit, initial_len)
        table = sinusoidal_table(initial_len, dim, base=self.base, layout=layout)  # [n, d]
        self.register_buffer("table", table, persistent=False)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, base={self.base:g}, layout={self.layout!r}"

    def _apply(self, fn, recurse=True):
        # The table is computed, never loaded (it is not in state_dict): after any move or cast it
        # is computed again, in float32, where it now lives, so that `to_empty` after meta-device
        # construction leaves no uninitialised memory in it and `.half()` does not lower it.
        super()._apply(fn, recurse)
        device, length = self.table.device, self.table.shape[0]
        if device.type == "meta":
            self.table = torch.empty(length, self.dim, device=device)
        else:
            self.table = _encode(torch.arange(length, device=device), self.dim, self.base, self.layout, torch.float32)
        return self

    def _ensure(self, length: int) -> None:
        if length > self.table.shape[0]:
            new_len = min(max(length, 2 * self.table.shape[0]), self.cache_limit)
            positions = torch.arange(new_len, device=self.table.device)
            self.table = _encode(positions, self.dim, self.base, self.layout, torch.float32)

    def forward(self, x: torch.Tensor, offset: int = 0, *, positions=None) -> torch.Tensor:
        """Add the encodings of positions ``offset .. offset + s - 1``, or of ``positions``.

        Args:
            x: Embeddings of shape ``[..., s, dim]`` (batch first: ``[b, s, dim]``).
            offset: Position of the first token (for example the number of
                tokens already in a KV cache), >= 0.
            positions: Instead of ``offset``, the position of every token:
                ``[s]``, or ``[b, s]`` for one row per sequence of ``x [b, s, dim]``
                (left-padded batches, packed sequences); integers or floats.

        Returns:
            ``dropout(x + PE[positions])``, same shape and dtype as ``x``.

        Raises:
            ValueError: If ``x`` has fewer than 2 dims, its last dim is not
                ``dim``, ``offset`` is negative, both ``offset`` and
                ``positions`` are given, or ``positions`` does not fit ``x``.
        """
        check_sequence_input(x, self.dim)
        if positions is not None:
            return self.dropout(x + self._at(check_token_positions(positions, x, offset=offset), x.dtype))
        end = check_offset(offset, x.shape[-2]) + x.shape[-2]
        # Computed for these tokens only: float64, past the cache, or traced (a trace that sliced the
        # cache would hold the table as a constant and fail on longer inputs).
        if x.dtype == torch.float64 or end > self.cache_limit or torch.jit.is_tracing():
            positions = torch.arange(offset, end, device=x.device)
            pe = _encode(positions, self.dim, self.base, self.layout, x.dtype)
        else:
            self._ensure(end)
            pe = self.table[offset:end].to(device=x.device, dtype=x.dtype)  # [s, d]
        return self.dropout(x + pe)

    def _at(self, positions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Encodings ``[*positions.shape, dim]`` in ``dtype``: rows of the table for integer positions inside it."""
        integer = not positions.is_floating_point()
        if integer and positions.numel() and dtype != torch.float64 and not torch.jit.is_tracing():
            low, high = int(positions.min()), int(positions.max())
            if low >= 0 and high < self.cache_limit:
                self._ensure(high + 1)
                return self.table[positions.to(self.table.device)].to(positions.device, dtype)  # [*positions.shape, d]
        return _encode(positions, self.dim, self.base, self.layout, dtype)
