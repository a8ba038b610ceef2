"""Dynamic NTK scaling with memory: the length state that ``transformers`` keeps between calls.

posenc's ``rope_type="dynamic"`` is stateless: the frequencies follow the current length,
the largest position + 1 (:func:`posenc.rope_cos_sin`). ``transformers`` decides per forward
call of its rotary module instead (``dynamic_rope_update`` and its inner
``dynamic_frequency_update`` in ``transformers/modeling_rope_utils.py``, v5), keeping
``max_seq_len_cached`` (the length whose frequencies are in use, at first the trained length
``L0 = config.max_position_embeddings``) between calls. With ``L`` the current length::

    if L > max_seq_len_cached:                         # growth
        frequencies for L (_compute_dynamic_ntk_parameters); max_seq_len_cached = L
    if L < L0 and max_seq_len_cached (before this call) > L0:   # reset
        the unscaled frequencies; max_seq_len_cached = L0

So a call whose length lies in ``[L0, longest length seen)`` keeps the frequencies of the
longest length seen, where the stateless rule would use its own length; every other call
gets the same frequencies either way. A prompt shorter than ``L0`` after a long one is
reset, not rescaled; a prompt of exactly ``L0`` tokens (the test is strict) or longer is not.

:class:`DynamicRopeState` holds that state; :class:`posenc.RotaryEmbedding` takes
``dynamic_state="transformers"`` to use one, and a :class:`posenc.hf.layers.RotaryLayer` takes one (``dynamic_state``)
(shared by the layers of a model, as ``transformers`` shares one rotary module).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from .._checks import angle_device, as_positions, check_angle_dtype, check_float_dtype, check_real
from .ops import cos_sin_from_inv_freq
from .rotary import rope_cos_sin, rope_inv_freq
from .scaling import parse_scaling, resolve_base

#: How a module with ``rope_type="dynamic"`` picks the length of its frequencies: ``"stateless"``
#: (the current length) or ``"transformers"`` (the length state of :class:`DynamicRopeState`).
DYNAMIC_STATES = ("stateless", "transformers")


class DynamicRopeState:
    """The longest length seen, reset below the trained length: ``transformers``' dynamic-RoPE state.

    See the module docstring for the rule, which :meth:`update` applies; the names of the
    attributes are those of ``LlamaRotaryEmbedding``.

    Example: Llama 2's head (``head_dim`` 128, base 10000, ``L0`` = 4096, factor 2). After a
    16,384-token call, a 100-token prompt is reset (``update(100)`` returns 4096) and gets the
    frequencies of the stateless rule, while a 4,096- or 8,192-token prompt keeps the frequencies
    of 16,384 (the NTK factor ``2 * 16384 / 4096 - 1 = 7``, where the stateless rule uses 1
    and 3): their cos tables differ from the stateless ones by up to 1.99996 and 1.999998,
    angles half a turn apart (float64, positions ``0 .. L - 1``; ``tests/library/rope/test_state.py``
    checks these numbers)::

        state = DynamicRopeState(4096)
        state.update(16384), state.update(8192), state.update(100)   # (16384, 16384, 4096)

    Args:
        original_max_position_embeddings: The trained length ``L0``, > 0.

    Raises:
        ValueError: If ``original_max_position_embeddings`` is not a finite number > 0.
    """

    def __init__(self, original_max_position_embeddings: float) -> None:
        value = original_max_position_embeddings
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"original_max_position_embeddings must be a finite number > 0, got {value!r}")
        self.original_max_seq_len = value
        self.max_seq_len_cached = value

    def __repr__(self) -> str:
        lengths = f"original_max_seq_len={self.original_max_seq_len}, max_seq_len_cached={self.max_seq_len_cached}"
        return f"DynamicRopeState({lengths})"

    def reset(self) -> None:
        """Forget every length seen: back to the trained length, as a freshly built module."""
        self.max_seq_len_cached = self.original_max_seq_len

    def update(self, seq_len: float) -> float:
        """Apply one call of length ``seq_len`` (the largest position + 1); return the length of its frequencies.

        Raises:
            ValueError: If ``seq_len`` is not a finite number.
        """
        if isinstance(seq_len, bool) or not isinstance(seq_len, (int, float)) or not math.isfinite(seq_len):
            raise ValueError(f"seq_len must be a finite number, got {seq_len!r}")
        before = self.max_seq_len_cached
        if seq_len > before:  # growth
            self.max_seq_len_cached = seq_len
        if seq_len < self.original_max_seq_len and before > self.original_max_seq_len:  # reset
            self.max_seq_len_cached = self.original_max_seq_len
        return self.max_seq_len_cached

    def cos_sin(
        self,
        positions,
        head_dim: int,
        *,
        base: float | None = None,
        scaling: Mapping | None = None,
        layout: str = "half",
        dtype: torch.dtype = torch.float32,
        angle_dtype: torch.dtype = torch.float64,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`posenc.rope_cos_sin` after :meth:`update` with the largest position + 1.

        For ``rope_type="dynamic"`` the frequencies are those of the length the state returns;
        any other type keeps no state in ``transformers`` and is computed as
        :func:`posenc.rope_cos_sin` does, leaving the state alone. Empty ``positions`` leave it
        alone too. Arguments, result and errors as :func:`posenc.rope_cos_sin`.

        Raises:
            ValueError: Also if the scaling's ``original_max_position_embeddings`` is not this
                state's trained length.
        """
        params = parse_scaling(scaling, resolve_base(base, scaling))
        if params["rope_type"] != "dynamic":
            return rope_cos_sin(
                positions, head_dim, base=base, scaling=params, layout=layout, dtype=dtype, angle_dtype=angle_dtype
            )
        if params["original_max_position_embeddings"] != self.original_max_seq_len:
            raise ValueError(
                f"scaling['original_max_position_embeddings'] = {params['original_max_position_embeddings']:g} "
                f"differs from the state's trained length {self.original_max_seq_len:g}"
            )
        check_angle_dtype(angle_dtype)
        check_float_dtype("dtype", dtype)
        positions = check_real("positions", as_positions(positions))
        length = self.max_seq_len_cached
        if positions.numel():
            length = self.update(positions.max().item() + 1)
        work = angle_device(positions.device, angle_dtype)
        inv_freq, _ = rope_inv_freq(head_dim, base=base, scaling=params, seq_len=length, dtype=angle_dtype, device=work)
        cos, sin = cos_sin_from_inv_freq(positions.to(work), inv_freq, layout=layout)
        return cos.to(device=positions.device, dtype=dtype), sin.to(device=positions.device, dtype=dtype)
