"""RoPE as a module: :class:`RotaryEmbedding` holds the configuration and a cos/sin cache.

The formulas are the functions of :mod:`posenc.rope.rotary`; this module only decides where
cos and sin come from (a float32 cache that grows on demand, or computed afresh for
float64 inputs, float positions and dynamic scaling) and which backend rotates.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from .._checks import (
    CACHE_LIMIT,
    angle_device,
    check_cache_limit,
    check_choice,
    check_even_dim,
    check_nonnegative_int,
    check_qk,
)
from ..layout import ROPE_LAYOUTS
from .cpu import rotate
from .ops import join_rotated, rotary_part
from .rotary import (
    ROPE_BACKENDS,
    TRITON_FLOAT_DTYPES,
    cos_sin_from_inv_freq,
    rope_cos_sin,
    rope_inv_freq,
    use_triton,
)
from .scaling import parse_scaling, resolve_base
from .state import DYNAMIC_STATES, DynamicRopeState


class RotaryEmbedding(nn.Module):
    """Rotates queries and keys by their positions (RoPE), with a cos/sin cache.

    Su et al. 2021. Holds no parameters: the float32 cos/sin tables are
    non-persistent buffers (not in ``state_dict``) that move with ``.to()``
    and grow on demand up to ``cache_limit`` positions. Float64 inputs,
    fractional or negative positions, positions past ``cache_limit`` and
    ``rope_type="dynamic"`` (whose frequencies depend on the current length)
    bypass the cache and call :func:`rope_cos_sin` for just the positions at
    hand, so there is no maximum length and one far position does not leave
    a huge table behind.

    With the ``"triton"`` backend no table is used at all: the fused kernel
    of ``posenc.triton_rope`` forms the angles from the positions and the
    frequencies and rotates ``q`` and ``k`` in one launch.

    Partial rotary (GPT-NeoX, GPT-J, Phi): with ``rotary_dim < head_dim`` only
    the first ``rotary_dim`` channels of each head turn, as full RoPE of
    dimension ``rotary_dim`` (frequencies ``base ** (-2i / rotary_dim)``, as
    ``transformers`` computes them for ``partial_rotary_factor = rotary_dim /
    head_dim``); the tables have ``rotary_dim`` channels and the other channels
    pass through unchanged.

    Args:
        head_dim: Channels per head of ``q`` and ``k``, even.
        base: Frequency base (``rope_theta``), > 1; by default
            ``scaling["rope_theta"]`` if present, else 10000.
        scaling: ``None`` or a ``rope_parameters``-style dict (see
            :func:`rope_inv_freq`).
        layout: ``"half"`` or ``"interleaved"``.
        initial_len: Positions computed up front; the tables double when a
            larger position arrives.
        cache_limit: The most positions the tables grow to, >= ``initial_len``
            (default 65,536: 64 MiB at ``head_dim`` 128).
        backend: ``"auto"``, ``"torch"``, ``"cpu"`` or ``"triton"``; ``"auto"`` uses the
            Triton kernel for 4-D float32/float16/bfloat16 CUDA tensors when
            Triton is installed, and the blocked CPU rotation for CPU tensors
            (see :func:`apply_rope`).
        rotary_dim: Channels rotated, the first of each head: even, from 2 to
            ``head_dim`` (the default, None, means ``head_dim``).
        dynamic_state: For ``rope_type="dynamic"``: ``"stateless"`` (the default: the
            frequencies follow the largest position + 1 of each call) or
            ``"transformers"`` (they follow the length state that ``transformers``
            keeps between calls: the longest length seen, reset below the trained
            length; see :class:`posenc.DynamicRopeState`, held as ``self.state``, and
            :meth:`reset`). Other scalings keep no state, and ignore it.

    Raises:
        ValueError: If ``head_dim`` or ``rotary_dim`` is odd or out of range,
            or the layout, scaling, backend, cache sizes or dynamic state are invalid.
    """

    cos_cached: torch.Tensor
    sin_cached: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        *,
        base: float | None = None,
        scaling: Mapping | None = None,
        layout: str = "half",
        initial_len: int = 512,
        cache_limit: int = CACHE_LIMIT,
        backend: str = "auto",
        rotary_dim: int | None = None,
        dynamic_state: str = "stateless",
    ) -> None:
        super().__init__()
        self.dynamic_state = check_choice("dynamic_state", dynamic_state, DYNAMIC_STATES)
        self.backend = check_choice("backend", backend, ROPE_BACKENDS)
        self.head_dim = check_even_dim("head_dim", head_dim)
        self.rotary_dim = head_dim if rotary_dim is None else check_even_dim("rotary_dim", rotary_dim)
        if self.rotary_dim > head_dim:
            raise ValueError(f"rotary_dim must be <= head_dim ({head_dim}), got {rotary_dim}")
        self.base = resolve_base(base, scaling)
        self.layout = check_choice("layout", layout, ROPE_LAYOUTS)
        self.scaling = parse_scaling(scaling, self.base)
        check_nonnegative_int("initial_len", initial_len)
        self.cache_limit = check_cache_limit(cache_limit, initial_len)
        _, self.attention_factor = rope_inv_freq(self.rotary_dim, base=self.base, scaling=self.scaling)
        self.dynamic = self.scaling["rope_type"] in ("dynamic", "longrope")  # frequencies follow the length
        stateful = dynamic_state == "transformers" and self.scaling["rope_type"] == "dynamic"
        self.state = DynamicRopeState(self.scaling["original_max_position_embeddings"]) if stateful else None
        self._inv_freq = self._frequencies(torch.device("cpu"))  # float64 [d/2], for the tables
        cos, sin = self._table(torch.arange(initial_len), torch.float32)  # 2 x [n, d]
        self.register_buffer("cos_cached", cos, persistent=False)
        self.register_buffer("sin_cached", sin, persistent=False)
        self._split_freqs: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    def extra_repr(self) -> str:
        partial = f", rotary_dim={self.rotary_dim}" if self.rotary_dim != self.head_dim else ""
        state = f", dynamic_state={self.dynamic_state!r}" if self.dynamic_state != "stateless" else ""
        return (
            f"head_dim={self.head_dim}{partial}, base={self.base:g}, layout={self.layout!r}, "
            f"scaling={self.scaling}{state}"
        )

    def reset(self) -> None:
        """Forget the lengths seen (``dynamic_state="transformers"``); nothing to do otherwise."""
        if self.state is not None:
            self.state.reset()

    def _apply(self, fn, recurse=True):
        # The cos/sin tables are computed, never loaded (they are not in state_dict): after any
        # move or cast they are computed again, in float32, where they now live. `to_empty` after
        # meta-device construction would otherwise leave uninitialised memory in them, and
        # `.half()` would lower them below the float32 this module promises.
        super()._apply(fn, recurse)
        device, length = self.cos_cached.device, self.cos_cached.shape[0]
        self._inv_freq = self._frequencies(device)
        if device.type == "meta":
            self.cos_cached = torch.empty(length, self.rotary_dim, device=device)
            self.sin_cached = torch.empty(length, self.rotary_dim, device=device)
        else:
            self.cos_cached, self.sin_cached = self._table(torch.arange(length, device=device), torch.float32)
        self._split_freqs = {}
        return self

    def _frequencies(self, device: torch.device) -> torch.Tensor:
        """The float64 frequencies where the angles of ``device``'s tables are formed (as :func:`rope_cos_sin`)."""
        work = angle_device(device, torch.float64)
        return rope_inv_freq(self.rotary_dim, base=self.base, scaling=self.scaling, device=work)[0]

    def _table(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin for ``positions``, equal to :func:`rope_cos_sin`'s (float64 angles, rounded to ``dtype``)."""
        if self.dynamic:  # the frequencies depend on the largest position
            return rope_cos_sin(
                positions, self.rotary_dim, base=self.base, scaling=self.scaling, layout=self.layout, dtype=dtype
            )
        inv_freq = self._inv_freq
        if inv_freq.device != angle_device(positions.device, torch.float64):
            inv_freq = self._frequencies(positions.device)
        cos, sin = cos_sin_from_inv_freq(
            positions.to(inv_freq.device), inv_freq, layout=self.layout, attention_factor=self.attention_factor
        )
        return cos.to(device=positions.device, dtype=dtype), sin.to(device=positions.device, dtype=dtype)

    def _ensure(self, length: int) -> None:
        if length > self.cos_cached.shape[0]:
            new_len = min(max(length, 2 * self.cos_cached.shape[0]), self.cache_limit)
            positions = torch.arange(new_len, device=self.cos_cached.device)
            self.cos_cached, self.sin_cached = self._table(positions, self.cos_cached.dtype)

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype = torch.float32):
        """``(cos, sin)`` for ``positions``, each ``[*positions.shape, rotary_dim]``, from the cache when possible.

        With ``dynamic_state="transformers"`` each call is one call of ``transformers``' rotary
        module: it updates the length state with the largest position + 1.
        """
        if self.state is not None:
            return self.state.cos_sin(
                positions,
                self.rotary_dim,
                base=self.base,
                scaling=self.scaling,
                layout=self.layout,
                dtype=torch.float64 if dtype == torch.float64 else torch.float32,
            )
        exact = dtype == torch.float64 or self.dynamic or positions.is_floating_point()
        # Traced or compiled: computed, since choosing the cache reads the positions' values (a graph break);
        # on the meta device there are no values to read, only shapes, as from rope_cos_sin
        traced = torch.jit.is_tracing() or torch.compiler.is_compiling() or positions.is_meta
        if exact or traced or positions.numel() == 0:
            return self._table(positions, torch.float64 if dtype == torch.float64 else torch.float32)
        low, high = positions.aminmax()
        if low.item() < 0 or high.item() >= self.cache_limit:
            return self._table(positions, torch.float32)
        self._ensure(high.item() + 1)
        index = positions.to(self.cos_cached.device, torch.long)  # uint8 would index as a mask, int16 not at all
        return self.cos_cached[index].to(positions.device), self.sin_cached[index].to(positions.device)

    def _triton_freqs(self, device: torch.device, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The frequencies as a float32 head and tail on ``device``, cached unless they depend on the length."""
        from ..triton_rope import split_frequencies

        if self.dynamic:
            inv_freq, _ = rope_inv_freq(self.rotary_dim, base=self.base, scaling=self.scaling, seq_len=seq_len)
            return split_frequencies(inv_freq, device=device)
        if device not in self._split_freqs:
            inv_freq, _ = rope_inv_freq(self.rotary_dim, base=self.base, scaling=self.scaling)
            self._split_freqs[device] = split_frequencies(inv_freq, device=device)
        return self._split_freqs[device]

    def _forward_triton(self, q, k, positions, offset, inplace):
        from ..triton_rope import rope_qk_triton

        if positions is None:
            check_nonnegative_int("offset", offset)
            seq_len = offset + q.shape[-2]
        else:
            positions = torch.as_tensor(positions, device=q.device)
            seq_len = positions.max().item() + 1 if self.dynamic and positions.numel() else 0
        if self.state is not None:  # one call of transformers' rotary module
            empty = positions is not None and not positions.numel()
            seq_len = self.state.max_seq_len_cached if empty else self.state.update(seq_len)
        freqs = self._triton_freqs(q.device, seq_len)
        partial = self.rotary_dim != self.head_dim
        q_rot, k_rot = rope_qk_triton(
            rotary_part(q, self.rotary_dim),  # [b, h, s, r]: a view, the kernel takes any strides
            rotary_part(k, self.rotary_dim),
            freqs,
            positions=positions,
            offset=offset,
            layout=self.layout,
            attention_factor=self.attention_factor,
            inplace=inplace and not partial,  # partial and in place: rotated, then copied into q and k
        )
        if not partial:
            return q_rot, k_rot
        return join_rotated(q, q_rot, inplace), join_rotated(k, k_rot, inplace)

    def _cos_sin_for(self, q: torch.Tensor, positions: torch.Tensor | None, offset: int):
        """cos and sin for the tokens of ``q``: from the cache for ``offset .. offset + s - 1``, else computed."""
        seq_len = q.shape[-2]
        dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        if positions is not None:
            cos, sin = self.cos_sin(positions, dtype)  # [s, d] or [b, s, d]
            if positions.dim() == 2 and q.dim() > 3:
                # [b, s, d] -> [b, 1, ..., 1, s, d]: one row per sequence, shared by every head
                shape = (cos.shape[0],) + (1,) * (q.dim() - 3) + cos.shape[1:]
                cos, sin = cos.view(shape), sin.view(shape)
            return cos, sin
        if self.dynamic or dtype == torch.float64 or offset + seq_len > self.cache_limit or torch.jit.is_tracing():
            return self.cos_sin(torch.arange(offset, offset + seq_len, device=q.device), dtype)
        self._ensure(offset + seq_len)
        cos = self.cos_cached[offset : offset + seq_len].to(q.device)  # [s, d]
        return cos, self.sin_cached[offset : offset + seq_len].to(q.device)  # [s, d]

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        positions: torch.Tensor | None = None,
        offset: int = 0,
        *,
        inplace: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate ``q`` and ``k`` by the positions of their tokens.

        Args:
            q: Queries ``[b, h, s, head_dim]`` (any ``[..., s, head_dim]``).
            k: Keys ``[b, h_kv, s, head_dim]``, the same ``s`` as ``q``.
            positions: Optional integer or float positions, ``[s]`` or
                ``[b, s]`` (one row per sequence of the batch).
            offset: Used when ``positions`` is None: the tokens sit at
                ``offset .. offset + s - 1`` (for example, the length of a KV
                cache already filled), >= 0.
            inplace: Write the results into ``q`` and ``k`` and return them
                (they must not be leaves that require grad).

        Returns:
            ``(q, k)`` rotated, with their shapes and dtypes.

        Raises:
            ValueError: If the last dim of ``q`` or ``k`` is not ``head_dim``,
                their lengths differ, ``positions`` has the wrong shape,
                ``offset`` is negative, or both ``positions`` and a nonzero
                ``offset`` are given.
        """
        positions = check_qk(q, k, self.head_dim, positions=positions, offset=offset, inplace=inplace)

        def eligible() -> bool:
            from ..triton_rope import positions_in_range

            fits = q.dim() == 4 and k.dim() == 4 and q.dtype in TRITON_FLOAT_DTYPES and k.dtype in TRITON_FLOAT_DTYPES
            return fits and positions_in_range(positions, offset, q.shape[-2])

        if use_triton(self.backend, (q, k), eligible=eligible):
            return self._forward_triton(q, k, positions, offset, inplace)
        cos, sin = self._cos_sin_for(q, positions, offset)  # [s, r], [b, s, r] or [b, 1, s, r]
        # checked above: the shapes fit; only the first rotary_dim channels turn
        q_rot = rotate(q, cos, sin, self.layout, backend=self.backend, inplace=inplace)  # in blocks on the CPU
        return q_rot, rotate(k, cos, sin, self.layout, backend=self.backend, inplace=inplace)
