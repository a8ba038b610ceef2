"""The RoPE cases: shapes, inputs, and every implementation the harness times.

An implementation is a :class:`RopeImpl` whose ``build(shape, device, dtype)``
returns ``fn(q, k) -> (q_rot, k_rot)``, or raises :class:`Unavailable` when a
package or a device it needs is missing. Triton, ``transformers`` and
``liger-kernel`` are imported only when their implementation is built.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .._checks import check_choice
from ..rope.embedding import RotaryEmbedding
from ..rope.rotary import apply_rope, rope_cos_sin
from .check import standard_normal


@dataclass(frozen=True)
class RopeShape:
    """One RoPE case: ``q [b, q_heads, s, d]`` and ``k [b, kv_heads, s, d]`` at positions ``offset ..``."""

    batch: int
    seq_len: int
    q_heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    offset: int = 0

    @property
    def phase(self) -> str:
        """``"decode"`` for one token after cached ones, else ``"prefill"``."""
        return "decode" if self.seq_len == 1 and self.offset > 0 else "prefill"


def default_rope_shapes(device_type: str = "cuda", *, quick: bool = False) -> list[RopeShape]:
    """The LLaMA-like cases: 32 query heads, 8 key/value heads, head_dim 128.

    On a GPU: batch 1 and 4 at sequence lengths 512, 4096 and 16384, and
    decoding one token after 4095 cached ones at batch 1 and 4. On the CPU
    (the fallback) and with ``quick``: shorter sequences.

    Args:
        device_type: ``"cuda"`` or ``"cpu"``.
        quick: Fewer and shorter sequences.

    Returns:
        The prefill shapes, then the decode shapes.

    Raises:
        ValueError: For another device type.
    """
    check_choice("device_type", device_type, ("cuda", "cpu"))
    if device_type == "cpu":
        lengths, batches = ((128, 512) if quick else (256, 1024, 4096)), (1,)
    else:
        lengths, batches = ((512, 4096) if quick else (512, 4096, 16384)), (1, 4)
    shapes = [RopeShape(b, s) for b in batches for s in lengths]
    return shapes + [RopeShape(b, 1, offset=4095) for b in batches]


def rope_positions(shape: RopeShape, device) -> torch.Tensor:
    """The positions of the case's tokens, ``offset .. offset + seq_len - 1``: ``[s]`` int64."""
    return torch.arange(shape.offset, shape.offset + shape.seq_len, device=device)


def rope_inputs(
    shape: RopeShape, dtype: torch.dtype, device, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ``q, k`` as a projection produces them: ``[b, h, s, d]`` views of ``[b, s, h, d]`` memory.

    Args:
        shape: The case.
        dtype: Element type.
        device: Where to allocate.
        generator: Seeded generator on ``device`` (standard normal values, never zeros).

    Returns:
        ``(q [b, q_heads, s, d], k [b, kv_heads, s, d])``, non-contiguous views.
    """
    q = standard_normal((shape.batch, shape.seq_len, shape.q_heads, shape.head_dim), dtype, device, generator)
    k = standard_normal((shape.batch, shape.seq_len, shape.kv_heads, shape.head_dim), dtype, device, generator)
    return q.transpose(1, 2), k.transpose(1, 2)  # [b, s, h, d] -> [b, h, s, d], views


class Unavailable(Exception):
    """An implementation that cannot run here (a package or a device is missing)."""


@dataclass(frozen=True)
class RopeImpl:
    """A RoPE implementation: ``build(shape, device, dtype)`` returns ``fn(q, k) -> (q_rot, k_rot)``."""

    name: str
    label: str
    inplace: bool
    build: Callable
    traceable: bool = True  # may run under a TorchDispatchMode (compiled code may not)


def _hf_tables(shape: RopeShape, device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin ``[1, s, d]`` as transformers' LLaMA rotary module returns them: float32 angles, x's dtype."""
    cos, sin = rope_cos_sin(rope_positions(shape, device)[None], shape.head_dim, angle_dtype=torch.float32)
    return cos.to(dtype), sin.to(dtype)  # [1, s, d]


def _require_cuda(device) -> None:
    """Triton kernels need a CUDA device, or CPU tensors in Triton's interpreter (``TRITON_INTERPRET=1``)."""
    if torch.device(device).type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise Unavailable("needs a CUDA device")


def _transformers_apply() -> Callable:
    """transformers' ``apply_rotary_pos_emb`` for LLaMA, imported on first use."""
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except ImportError as exc:
        raise Unavailable("transformers is not installed") from exc
    return apply_rotary_pos_emb


def _build_naive(shape: RopeShape, device, dtype: torch.dtype) -> Callable:
    def naive(q, k):
        positions = torch.arange(shape.offset, shape.offset + q.shape[-2], device=q.device)
        cos, sin = rope_cos_sin(positions, q.shape[-1], angle_dtype=torch.float32)  # [s, d], every call
        return apply_rope(q, cos, sin, backend="torch"), apply_rope(k, cos, sin, backend="torch")

    return naive


def _build_posenc_torch(shape: RopeShape, device, dtype: torch.dtype) -> Callable:
    rope = RotaryEmbedding(shape.head_dim, backend="torch", initial_len=shape.offset + shape.seq_len).to(device)
    return lambda q, k: rope(q, k, offset=shape.offset)


def _build_posenc_apply(shape: RopeShape, device, dtype: torch.dtype) -> Callable:
    """:func:`posenc.apply_rope` on transformers' tables: the same work, plus posenc's argument checks."""
    cos, sin = (t[0] for t in _hf_tables(shape, device, dtype))  # [1, s, d] -> [s, d], views
    return lambda q, k: (apply_rope(q, cos, sin), apply_rope(k, cos, sin))


def _build_transformers(shape: RopeShape, device, dtype: torch.dtype) -> Callable:
    apply_rotary_pos_emb = _transformers_apply()
    cos, sin = _hf_tables(shape, device, dtype)
    return lambda q, k: apply_rotary_pos_emb(q, k, cos, sin)


def _build_transformers_module(shape: RopeShape, device, dtype: torch.dtype) -> Callable:
    """transformers' LLaMA rotary module, then ``apply_rotary_pos_emb``: cos and sin made at every call."""
    apply_rotary_pos_emb = _transformers_apply()
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    heads = {"num_attention_heads": shape.q_heads, "num_key_value_heads": shape.kv_heads}
    config = LlamaConfig(hidden_size=shape.q_heads * shape.head_dim, head_dim=shape.head_dim, **heads)
    rotary = LlamaRotaryEmbedding(config=config).to(device)
    position_ids = rope_positions(shape, device)[None]  # [1, s]

    def run(q, k):
        cos, sin = rotary(q, position_ids)
        return apply_rotary_pos_emb(q, k, cos, sin)

    return run


def _eager_rope(q, k, cos, sin):
    """posenc's torch path with transformers' argument order, for when transformers is missing."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [1, s, d] -> [1, 1, s, d]
    return apply_rope(q, cos, sin, backend="torch"), apply_rope(k, cos, sin, backend="torch")


def _build_compile(shape: RopeShape, device, dtype: torch.dtype) -> Callable:
    try:
        eager = _transformers_apply()
    except Unavailable:
        eager = _eager_rope
    torch._dynamo.reset()  # one fresh compilation per shape
    compiled = torch.compile(eager, dynamic=False, fullgraph=True)
    cos, sin = _hf_tables(shape, device, dtype)
    return lambda q, k: compiled(q, k, cos, sin)


def _build_triton(inplace: bool) -> Callable:
    def build(shape: RopeShape, device, dtype: torch.dtype) -> Callable:
        _require_cuda(device)
        from ..triton_rope import triton_available  # the Triton path stays lazy

        if not triton_available():
            raise Unavailable("triton is not installed")
        rope = RotaryEmbedding(shape.head_dim, backend="triton").to(device)
        return lambda q, k: rope(q, k, offset=shape.offset, inplace=inplace)

    return build


def _build_liger(shape: RopeShape, device, dtype: torch.dtype) -> Callable:
    _require_cuda(device)
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb
    except ImportError as exc:
        raise Unavailable("liger-kernel is not installed") from exc
    cos, sin = _hf_tables(shape, device, dtype)
    return lambda q, k: liger_rotary_pos_emb(q, k, cos, sin)


#: Every RoPE implementation the harness knows, in plotting order.
ROPE_IMPLS = (
    RopeImpl("naive", "naive: cos/sin recomputed each call", False, _build_naive),
    RopeImpl("posenc_torch", "posenc eager, cached table", False, _build_posenc_torch),
    RopeImpl("posenc_apply", "posenc apply_rope, given tables", False, _build_posenc_apply),
    RopeImpl("transformers", "transformers apply_rotary_pos_emb", False, _build_transformers),
    RopeImpl("transformers_module", "transformers rotary module + apply", False, _build_transformers_module),
    RopeImpl("compile", "torch.compile of the eager path", False, _build_compile, traceable=False),
    RopeImpl("posenc_triton", "posenc Triton, fused", False, _build_triton(False)),
    RopeImpl("posenc_triton_inplace", "posenc Triton, fused, in place", True, _build_triton(True)),
    RopeImpl("liger", "Liger-Kernel RoPE (in place)", True, _build_liger),
)
#: Names of :data:`ROPE_IMPLS`, in the same order.
ROPE_IMPL_NAMES = tuple(impl.name for impl in ROPE_IMPLS)


def rope_impl(name: str) -> RopeImpl:
    """The implementation of :data:`ROPE_IMPLS` called ``name``.

    Args:
        name: One of :data:`ROPE_IMPL_NAMES`.

    Returns:
        The :class:`RopeImpl`.

    Raises:
        ValueError: For an unknown name.
    """
    check_choice("name", name, ROPE_IMPL_NAMES)
    return ROPE_IMPLS[ROPE_IMPL_NAMES.index(name)]
