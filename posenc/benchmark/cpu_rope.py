"""RoPE on the CPU against its two ceilings, a copy into existing buffers and a clone, timed in the same run.

On a CPU, a rotation that returns a new tensor pays for allocating it and touching its
fresh pages, as ``clone()`` does; one that writes into buffers the caller already holds
(``out=``, or in place) pays only for moving the bytes, as a copy into existing buffers
does. So every implementation is timed beside both, at its own shape and thread count,
and each record gets ``vs_copy = ms / copy ms`` and ``vs_clone = ms / clone ms``; its
``ceiling`` names the one that applies (``"copy"`` when it writes into existing memory,
``"clone"`` when it returns new tensors) and ``vs_ceiling`` is that ratio.

A new tensor's cost depends on the allocator as much as on the code: glibc hands a freed
block back (its pages already touched, often still in cache) for requests up to a threshold
that grows to 32 MiB with use, and maps fresh pages, each faulted in on first write, above it.
At 512 tokens (``q`` is 8 MiB) a clone mostly reuses the block the previous call freed and
costs less than the copy; at 2048 (32 MiB) every clone faults its pages in. Which one a case
gets can change with what ran before it in the same process, so read new-tensor ratios
across runs, not from one.

The cases (:func:`default_cpu_rope_shapes`): LLaMA-like ``q [1, 32, s, 128]`` and
``k [1, 8, s, 128]``, contiguous, float32, tables from :func:`posenc.rope_cos_sin`;
prefill at ``s`` = 512 and 2048 and one decoding step (``s = 1`` at position 4095),
each with 1 and 2 threads. They run as the ``"rope_cpu"`` operation of
:func:`~posenc.benchmark.run_benchmark` (``python -m posenc.benchmark --device cpu``), and
are checked against float64 before they are timed, like every case of the harness.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial

import torch

from .._checks import check_choice, check_positive_int
from ..rope.rotary import apply_rope, rope_cos_sin, rope_inv_freq
from .cases import Case
from .check import call_poisoned, relative_error, rope_reference, standard_normal
from .results import load_results, result_label
from .rope_impls import Unavailable
from .traffic import rope_bytes


@dataclass(frozen=True)
class CpuRopeShape:
    """One CPU case: ``q [b, q_heads, s, d]``, ``k [b, kv_heads, s, d]`` at positions ``offset ..``, on ``threads``."""

    batch: int = 1
    seq_len: int = 2048
    q_heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    offset: int = 0
    threads: int = 1

    @property
    def phase(self) -> str:
        """``"decode"`` for one token after cached ones, else ``"prefill"``."""
        return "decode" if self.seq_len == 1 and self.offset > 0 else "prefill"


def default_cpu_rope_shapes(*, quick: bool = False) -> list[CpuRopeShape]:
    """Prefill at 512 and 2048 tokens and one decoding step at position 4095, with 1 and 2 threads.

    Args:
        quick: Only 512 tokens and the decoding step, one thread.

    Returns:
        The shapes, by thread count, then prefill before decode.
    """
    lengths, threads = ((512,), (1,)) if quick else ((512, 2048), (1, 2))
    shapes = []
    for t in threads:
        shapes += [CpuRopeShape(seq_len=s, threads=t) for s in lengths]
        shapes.append(CpuRopeShape(seq_len=1, offset=4095, threads=t))  # one token after 4095 cached
    return shapes


@dataclass(frozen=True)
class CpuRopeImpl:
    """What one CPU case times: ``build(shape)`` returns ``fn(q, k[, q_out, k_out])``.

    ``writes`` is ``"out"`` (into the buffers that follow ``q`` and ``k`` in its
    input set), ``"inplace"`` (into ``q`` and ``k``) or ``"new"`` (new tensors);
    ``ceiling`` marks the copy and the clone, which move ``q`` and ``k`` unrotated;
    an ``optional`` one runs only when named (its compilation takes seconds per case).
    """

    name: str
    label: str
    writes: str
    build: Callable
    ceiling: bool = False
    optional: bool = False
    traceable: bool = True  # may run under a TorchDispatchMode (compiled code may not)


def _tables(shape: CpuRopeShape) -> tuple[torch.Tensor, torch.Tensor]:
    positions = torch.arange(shape.offset, shape.offset + shape.seq_len)
    return rope_cos_sin(positions, shape.head_dim)  # [s, d] float32 each


def _posenc(backend: str, writes: str) -> Callable:
    def build(shape: CpuRopeShape) -> Callable:
        cos, sin = _tables(shape)
        if writes == "out":
            return lambda q, k, qo, ko: (
                apply_rope(q, cos, sin, backend=backend, out=qo),
                apply_rope(k, cos, sin, backend=backend, out=ko),
            )
        inplace = writes == "inplace"
        return lambda q, k: (
            apply_rope(q, cos, sin, backend=backend, inplace=inplace),
            apply_rope(k, cos, sin, backend=backend, inplace=inplace),
        )

    return build


def _transformers(shape: CpuRopeShape) -> Callable:
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except ImportError as exc:
        raise Unavailable("transformers is not installed") from exc
    cos, sin = (t[None] for t in _tables(shape))  # [1, s, d], as its rotary module returns them
    return lambda q, k: apply_rotary_pos_emb(q, k, cos, sin)


def _compiled(shape: CpuRopeShape) -> Callable:
    cos, sin = _tables(shape)

    def rotate(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return apply_rope(q, cos, sin, backend="torch"), apply_rope(k, cos, sin, backend="torch")

    # compiled on the first call (the check), for this shape and thread count only
    return torch.compile(rotate, dynamic=False, fullgraph=True)


def _copy(shape: CpuRopeShape) -> Callable:
    return lambda q, k, qo, ko: (qo.copy_(q), ko.copy_(k))


def _clone(shape: CpuRopeShape) -> Callable:
    return lambda q, k: (q.clone(), k.clone())


#: The ceilings, then the rotations: posenc before (``"torch"``) and after (``"cpu"``, ``"auto"``), transformers,
#: and (only when named) the formula compiled by TorchInductor.
CPU_ROPE_IMPLS = (
    CpuRopeImpl("copy", "copy into existing buffers (ceiling)", "out", _copy, ceiling=True),
    CpuRopeImpl("clone", "q.clone(), k.clone() (ceiling)", "new", _clone, ceiling=True),
    CpuRopeImpl("posenc_torch", "apply_rope, backend='torch'", "new", _posenc("torch", "new")),
    CpuRopeImpl("posenc_torch_inplace", "apply_rope, backend='torch', inplace", "inplace", _posenc("torch", "inplace")),
    CpuRopeImpl("posenc_auto", "apply_rope, default backend", "new", _posenc("auto", "new")),
    CpuRopeImpl("posenc_cpu_out", "apply_rope, backend='cpu', out=", "out", _posenc("cpu", "out")),
    CpuRopeImpl("posenc_cpu_inplace", "apply_rope, backend='cpu', inplace", "inplace", _posenc("cpu", "inplace")),
    CpuRopeImpl("transformers", "transformers apply_rotary_pos_emb", "new", _transformers),
    CpuRopeImpl("compile", "torch.compile of the formula", "new", _compiled, optional=True, traceable=False),
)
#: Names of :data:`CPU_ROPE_IMPLS`, in the same order.
CPU_ROPE_IMPL_NAMES = tuple(impl.name for impl in CPU_ROPE_IMPLS)


def _make_set(shape: CpuRopeShape, writes: str, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Random contiguous ``q, k`` (never zeros), and NaN-filled outputs (their pages touched) for ``writes="out"``."""
    q = standard_normal((shape.batch, shape.q_heads, shape.seq_len, shape.head_dim), torch.float32, "cpu", generator)
    k = standard_normal((shape.batch, shape.kv_heads, shape.seq_len, shape.head_dim), torch.float32, "cpu", generator)
    if writes != "out":
        return q, k
    return q, k, torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))


def _check(impl: CpuRopeImpl, shape: CpuRopeShape, generator: torch.Generator, fn: Callable) -> float:
    """Relative error against float64: of the rotation, or of the unrotated inputs for a ceiling."""
    inputs = _make_set(shape, impl.writes, generator)
    q, k = inputs[:2]
    if impl.ceiling:
        refs = [q.to(torch.float64), k.to(torch.float64)]
    else:
        inv_freq, _ = rope_inv_freq(shape.head_dim)  # [d/2] float64
        positions = torch.arange(shape.offset, shape.offset + shape.seq_len)
        refs = [rope_reference(q, inv_freq, positions), rope_reference(k, inv_freq, positions)]
    out = call_poisoned(fn, inputs, (q, k), "cpu", traceable=impl.traceable)  # in place: q, k not used again
    return relative_error(out, refs)


def cpu_rope_cases(
    shapes: Sequence[CpuRopeShape] | None = None, impls: Sequence[str] | None = None, *, quick: bool = False
) -> list[Case]:
    """Every implementation at every shape, shape by shape, each ceiling first.

    Args:
        shapes: The cases; default :func:`default_cpu_rope_shapes`.
        impls: Names from :data:`CPU_ROPE_IMPL_NAMES` (default all but the
            optional ``"compile"``); the two ceilings are always included,
            since the ratios need them.
        quick: Passed to :func:`default_cpu_rope_shapes` when ``shapes`` is None.

    Returns:
        ``len(shapes) * len(impls)`` cases of op ``"rope_cpu"``; their fields
        hold the shape, ``phase``, ``threads`` and ``writes``.

    Raises:
        ValueError: If a name is unknown, or a shape holds a count that is not an int >= 1.
    """
    shapes = default_cpu_rope_shapes(quick=quick) if shapes is None else shapes
    if impls is None:
        names = [impl.name for impl in CPU_ROPE_IMPLS if not impl.optional]
    else:
        names = [check_choice("impls", n, CPU_ROPE_IMPL_NAMES) for n in impls]
    chosen = [impl for impl in CPU_ROPE_IMPLS if impl.ceiling or impl.name in names]
    cases = []
    for shape in shapes:
        check_positive_int("threads", shape.threads)
        heads = (shape.q_heads, shape.kv_heads)
        nbytes = rope_bytes(shape.batch, shape.seq_len, *heads, shape.head_dim, dtype=torch.float32)
        generator = torch.Generator().manual_seed(shape.seq_len * 10 + shape.threads)
        for impl in chosen:
            fields = {**asdict(shape), "phase": shape.phase, "writes": impl.writes}
            cases.append(
                Case(
                    "rope_cpu",
                    impl.name,
                    impl.label,
                    fields,
                    nbytes,
                    build=partial(impl.build, shape),
                    check=partial(_check, impl, shape, generator),
                    make_set=partial(_make_set, shape, impl.writes, generator),
                    set_bytes=nbytes if impl.writes == "out" else nbytes // 2,
                    host=False,
                )
            )
    return cases


def _key(record: dict) -> tuple:
    return tuple(record.get(k) for k in ("batch", "seq_len", "q_heads", "kv_heads", "head_dim", "offset", "threads"))


def add_ceiling_ratios(records: list[dict]) -> list[dict]:
    """Give every timed ``"rope_cpu"`` record its ratios to the copy and the clone of the same shape and threads.

    Adds ``copy_ms``, ``clone_ms``, ``vs_copy``, ``vs_clone``, ``ceiling``
    (``"copy"`` for writes into existing memory, ``"clone"`` for new tensors) and
    ``vs_ceiling``; a ratio is None where its ceiling or the record was not timed.

    Args:
        records: Records of a run, of any operations (the others are left alone).

    Returns:
        ``records``, updated in place.
    """
    mine = [r for r in records if r["op"] == "rope_cpu"]
    ceilings = {(r["impl"], _key(r)): r["ms"] for r in mine if r["impl"] in ("copy", "clone")}
    for r in mine:
        copy_ms, clone_ms = ceilings.get(("copy", _key(r))), ceilings.get(("clone", _key(r)))
        ratios = {
            "copy": r["ms"] / copy_ms if r["ms"] and copy_ms else None,
            "clone": r["ms"] / clone_ms if r["ms"] and clone_ms else None,
        }
        ceiling = "clone" if r.get("writes") == "new" else "copy"
        r.update(
            copy_ms=copy_ms,
            clone_ms=clone_ms,
            vs_copy=ratios["copy"],
            vs_clone=ratios["clone"],
            ceiling=ceiling,
            vs_ceiling=ratios[ceiling],
        )
    return records


def load_cpu_results(directory="data", pattern: str = "cpu_*.json") -> list[dict]:
    """Recorded results that hold ``"rope_cpu"`` records, oldest first (:func:`~posenc.benchmark.load_results`).

    Args:
        directory: Folder to search (the book's recorded data, ``posenc_book/data``).
        pattern: Glob pattern of the files, by default the CPU runs.

    Returns:
        One dict per file that has CPU rotation records, each with its ``path``.

    Raises:
        FileNotFoundError: If there is no folder ``directory``.
        ValueError: As :func:`~posenc.benchmark.load_results`, for a file that is not a result.
    """
    results = load_results(directory, pattern)
    return [r for r in results if any(record["op"] == "rope_cpu" for record in r["results"])]


_ROW_KEYS = ("phase", "seq_len", "threads", "impl")


def _cells(record: dict | None) -> str:
    if record is None or record.get("ms") is None:
        return f"{'-':>9} {'-':>7} {'-':>7}"
    ratios = [f"{record[k]:>7.2f}" if record.get(k) is not None else f"{'-':>7}" for k in ("vs_copy", "vs_clone")]
    return f"{record['ms']:>9.3f} {ratios[0]} {ratios[1]}"


def cpu_rope_table(recorded: dict | None, live: dict | None = None) -> str:
    """Recorded and live CPU rotation numbers side by side, one line per shape, thread count and implementation.

    Each side shows the median ms per call (``q`` and ``k``) and its ratios to
    the copy into existing buffers and to the clone of the same run.

    Args:
        recorded: A result from :func:`load_cpu_results` (or None).
        live: A result of :func:`~posenc.benchmark.run_benchmark` with op
            ``"rope_cpu"``, measured now on this machine (or None).

    Returns:
        Text: a line naming each result (device, versions, date), a header,
        then the rows; ``-`` where a side has no timed record.
    """
    sides = [("recorded", recorded), ("live", live)]
    by_side, rows = [], {}
    for _, result in sides:
        found = {}
        for r in (result or {}).get("results", []):
            if r["op"] == "rope_cpu" and r["status"] == "ok":
                key = tuple(r.get(k) for k in _ROW_KEYS)
                found[key] = r
                rows.setdefault(key, None)
        by_side.append(found)
    lines = [f"{name}: {result_label(result)}" for name, result in sides if result]
    head = " ".join(f"{f'{name} ms':>9} {'x copy':>7} {'x clone':>7}" for name, _ in sides)
    lines.append(f"{'phase':<8} {'s':>5} {'thr':>3} {'implementation':<22} {head}")
    for key in rows:
        phase, seq_len, threads, impl = key
        cells = " ".join(_cells(found.get(key)) for found in by_side)
        lines.append(f"{phase:<8} {seq_len:>5} {threads:>3} {impl:<22} {cells}")
    return "\n".join(lines)
