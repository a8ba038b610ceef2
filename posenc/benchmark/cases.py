"""Benchmark cases: one :class:`Case` per operation, implementation and shape.

A case knows how to build its implementation, check it against float64, and make the
input sets it is timed on; :func:`posenc.benchmark.run.run_case` does the rest, the same
way for every operation. One small function per operation defines its cases:
:func:`rope_cases`, :func:`sinusoidal_add_cases` and :func:`alibi_bias_cases`, with
their default shapes next to them.

Cases of one shape share one seeded generator, drawn from in the order the cases run, so
a run is reproducible: the same seed gives the same inputs to the same checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial

import torch

from .._checks import check_choice
from ..alibi import alibi_bias
from ..rope.rotary import rope_inv_freq
from ..sinusoidal import SinusoidalPositionalEncoding, sinusoidal_encoding, sinusoidal_table
from .check import call_poisoned, relative_error, rope_reference, standard_normal
from .rope_impls import RopeImpl, RopeShape, rope_inputs, rope_positions
from .traffic import alibi_bias_bytes, rope_bytes, sinusoidal_add_bytes


@dataclass(frozen=True)
class Case:
    """One implementation of one operation at one shape, ready to be checked and timed.

    Attributes:
        op: The operation, ``"rope"``, ``"sinusoidal"`` or ``"alibi"``.
        impl: Short name of the implementation.
        label: Its name in figures.
        fields: The shape, as recorded in the result (including ``"phase"``).
        nbytes: Fewest bytes one call must move (the bytes model).
        build: ``build() -> fn``; raises :class:`~posenc.benchmark.Unavailable`
            when the implementation cannot run here.
        check: ``check(fn) -> relative error`` against the float64 reference.
        make_set: ``make_set() -> args``, one fresh input set: ``fn(*args)``.
        set_bytes: Bytes of one input set.
        host: Whether to also time back-to-back calls as a Python loop issues
            them (decoding, where host dispatch is most of the time).
    """

    op: str
    impl: str
    label: str
    fields: dict = field(repr=False)
    nbytes: int
    build: Callable[[], Callable] = field(repr=False)
    check: Callable[[Callable], float] = field(repr=False)
    make_set: Callable[[], tuple] = field(repr=False)
    set_bytes: int
    host: bool = False


# ---------------------------------------------------------------------------
# RoPE on q and k
# ---------------------------------------------------------------------------


def _rope_case(shape: RopeShape, impl: RopeImpl, device, dtype: torch.dtype, generator: torch.Generator) -> Case:
    def check(fn: Callable) -> float:
        q, k = rope_inputs(shape, dtype, device, generator)
        inv_freq, _ = rope_inv_freq(shape.head_dim, device=device)  # [d/2] float64
        positions = rope_positions(shape, device)
        refs = [rope_reference(q, inv_freq, positions), rope_reference(k, inv_freq, positions)]
        # an in-place implementation overwrites q and k, which are not used again
        out = call_poisoned(fn, (q, k), (q, k), device, traceable=impl.traceable)
        return relative_error(out, refs)

    nbytes = rope_bytes(shape.batch, shape.seq_len, shape.q_heads, shape.kv_heads, shape.head_dim, dtype=dtype)
    return Case(
        "rope",
        impl.name,
        impl.label,
        {**asdict(shape), "phase": shape.phase},
        nbytes,
        build=partial(impl.build, shape, device, dtype),
        check=check,
        make_set=partial(rope_inputs, shape, dtype, device, generator),
        set_bytes=nbytes // 2,
        host=shape.phase == "decode",
    )


def rope_cases(shapes: Sequence[RopeShape], impls: Sequence[RopeImpl], device, dtype: torch.dtype) -> list[Case]:
    """Every implementation at every shape, shape by shape.

    Args:
        shapes: The cases, for example :func:`~posenc.benchmark.default_rope_shapes`.
        impls: The implementations, for example :data:`~posenc.benchmark.ROPE_IMPLS`.
        device: Where to run.
        dtype: Element type of ``q`` and ``k``.

    Returns:
        ``len(shapes) * len(impls)`` cases.

    Raises:
        ValueError: If a shape holds a count that is not an int >= 1.
    """
    cases = []
    for shape in shapes:
        generator = torch.Generator(device=device).manual_seed(shape.seq_len * 10 + shape.batch)
        cases += [_rope_case(shape, impl, device, dtype, generator) for impl in impls]
    return cases


# ---------------------------------------------------------------------------
# x + PE[:s]
# ---------------------------------------------------------------------------

#: The two sinusoidal implementations: name and label.
SINUSOIDAL_IMPLS = (
    ("module", "SinusoidalPositionalEncoding (cached table)"),
    ("recompute", "table recomputed each call + add"),
)


def default_sinusoidal_shapes(device_type: str = "cuda", *, quick: bool = False) -> list[tuple[int, int, int]]:
    """``(batch, seq_len, dim)`` of ``x + PE``: model dimension 4096 on a GPU, 1024 on the CPU.

    Args:
        device_type: ``"cuda"`` or ``"cpu"``.
        quick: Fewer and shorter sequences.

    Returns:
        The triples, batch by batch.

    Raises:
        ValueError: For another device type.
    """
    check_choice("device_type", device_type, ("cuda", "cpu"))
    on_gpu = device_type == "cuda"
    lengths = (512, 4096) if quick else ((512, 4096, 16384) if on_gpu else (256, 1024))
    return [(b, s, 4096 if on_gpu else 1024) for b in ((1, 4) if on_gpu else (1,)) for s in lengths]


def _recompute_sinusoidal(x: torch.Tensor) -> torch.Tensor:
    """``x + PE[:s]`` with the table recomputed at every call (float32 angles)."""
    positions = torch.arange(x.shape[-2], device=x.device)
    return x + sinusoidal_encoding(positions, x.shape[-1], angle_dtype=torch.float32).to(x.dtype)


def _sinusoidal_cases_at(batch: int, seq_len: int, dim: int, device, dtype: torch.dtype) -> list[Case]:
    generator = torch.Generator(device=device).manual_seed(seq_len + batch)

    def make_set() -> tuple[torch.Tensor]:
        return (standard_normal((batch, seq_len, dim), dtype, device, generator),)

    def check(fn: Callable) -> float:
        (x,) = make_set()  # [b, s, dim]
        ref = x.to(torch.float64) + sinusoidal_table(seq_len, dim, dtype=torch.float64, device=device)
        return relative_error([call_poisoned(fn, (x,), (x,), device)], [ref])

    builds = {
        "module": lambda: SinusoidalPositionalEncoding(dim, initial_len=seq_len).to(device).eval(),
        "recompute": lambda: _recompute_sinusoidal,
    }
    fields = {"batch": batch, "seq_len": seq_len, "dim": dim, "phase": "prefill"}
    nbytes = sinusoidal_add_bytes(batch, seq_len, dim, dtype)
    return [
        Case(
            "sinusoidal",
            name,
            label,
            fields,
            nbytes,
            build=builds[name],
            check=check,
            make_set=make_set,
            set_bytes=batch * seq_len * dim * dtype.itemsize,
        )
        for name, label in SINUSOIDAL_IMPLS
    ]


def sinusoidal_add_cases(shapes: Sequence[tuple[int, int, int]], device, dtype: torch.dtype) -> list[Case]:
    """The cached module and the recomputed table at every ``(batch, seq_len, dim)``.

    Args:
        shapes: Triples, for example :func:`default_sinusoidal_shapes`.
        device: Where to run.
        dtype: Element type of ``x``.

    Returns:
        Two cases per shape.

    Raises:
        ValueError: If a count is not an int >= 1.
    """
    return [case for batch, seq_len, dim in shapes for case in _sinusoidal_cases_at(batch, seq_len, dim, device, dtype)]


# ---------------------------------------------------------------------------
# ALiBi's bias
# ---------------------------------------------------------------------------


def default_alibi_shapes(device_type: str = "cuda", *, quick: bool = False) -> list[tuple[int, int, int]]:
    """``(num_heads, q_len, k_len)`` of the causal bias: 32 heads, square prefills, then one decoding step.

    Args:
        device_type: ``"cuda"`` or ``"cpu"``.
        quick: Shorter sequences.

    Returns:
        The triples; the last decodes one query against the longest keys.

    Raises:
        ValueError: For another device type.
    """
    check_choice("device_type", device_type, ("cuda", "cpu"))
    lengths = (512, 2048, 4096) if device_type == "cuda" and not quick else (256, 1024)
    return [(32, s, s) for s in lengths] + [(32, 1, lengths[-1])]


def _alibi_case(num_heads: int, q_len: int, k_len: int, device, dtype: torch.dtype) -> Case:
    bias = partial(alibi_bias, num_heads, q_len, k_len, causal=True, offset=k_len - q_len, device=device)

    def check(fn: Callable) -> float:
        ref = bias(dtype=torch.float64)  # [h, q_len, k_len]
        return relative_error([call_poisoned(fn, (), (ref.to(dtype),), device)], [ref])

    fields = {"num_heads": num_heads, "q_len": q_len, "k_len": k_len, "phase": "decode" if q_len == 1 else "prefill"}
    return Case(
        "alibi",
        "posenc",
        "posenc alibi_bias (causal)",
        fields,
        alibi_bias_bytes(num_heads, q_len, k_len, dtype),
        build=lambda: partial(bias, dtype=dtype),
        check=check,
        make_set=tuple,
        set_bytes=0,
        host=q_len == 1,
    )


def alibi_bias_cases(shapes: Sequence[tuple[int, int, int]], device, dtype: torch.dtype) -> list[Case]:
    """posenc's causal :func:`~posenc.alibi_bias` at every ``(num_heads, q_len, k_len)``.

    Args:
        shapes: Triples, for example :func:`default_alibi_shapes`; keys end at
            the last query (``offset = k_len - q_len``).
        device: Where to run.
        dtype: Element type of the bias.

    Returns:
        One case per shape.

    Raises:
        ValueError: If a count is not an int >= 1.
    """
    return [_alibi_case(num_heads, q_len, k_len, device, dtype) for num_heads, q_len, k_len in shapes]
