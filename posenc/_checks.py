"""Argument checks shared by every module.

Each helper raises a ``ValueError`` whose message names the argument, the
value it got and the limit it broke, so that bad input never surfaces as a
broadcasting error from deep inside torch.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import torch

#: Dtypes in which angles may be formed: anything coarser loses the position.
ANGLE_DTYPES = (torch.float32, torch.float64)


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int >= 1, got {value!r} ({type(value).__name__})")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def check_nonnegative_int(name: str, value: object) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= 0 (a symbolic one under torch.compile too)."""
    if isinstance(value, bool) or not isinstance(value, (int, torch.SymInt)):
        raise ValueError(f"{name} must be an int >= 0, got {value!r} ({type(value).__name__})")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


#: The most positions a module's cos/sin or sinusoidal table grows to by default.
CACHE_LIMIT = 1 << 16


#: The most elements a table built for a requested size may hold (2**31, 8 GiB of float32): a larger
#: size is refused before any memory is taken.
MAX_TABLE_ELEMENTS = 1 << 31


def check_table_size(name: str, value: object, elements: int) -> None:
    """Raise if the table built for the argument ``name`` = ``value`` would hold more than ``MAX_TABLE_ELEMENTS``."""
    if elements > MAX_TABLE_ELEMENTS:
        raise ValueError(
            f"{name} = {value!r:.80} needs a table of {elements} elements, more than MAX_TABLE_ELEMENTS = 2**31"
        )


def check_bias_size(q_len: object, k_len: object, num_heads: int) -> None:
    """Raise unless the lengths are ints >= 1 and a ``[num_heads, q_len, k_len]`` bias fits ``MAX_TABLE_ELEMENTS``."""
    check_positive_int("q_len", q_len)
    check_positive_int("k_len", k_len)
    check_table_size("q_len * k_len", f"{q_len} * {k_len}", q_len * k_len * num_heads)  # type: ignore[operator]


def check_cache_limit(value: object, initial_len: int) -> int:
    """Return ``cache_limit`` if it is an int >= ``initial_len`` (the rows computed up front)."""
    value = check_nonnegative_int("cache_limit", value)
    if value < initial_len:
        raise ValueError(f"cache_limit must be >= initial_len ({initial_len}), got {value}")
    return value


def check_even_dim(name: str, value: object) -> int:
    """Return ``value`` if it is a positive even int (sin/cos or rotation pairs) whose table of one
    position fits ``MAX_TABLE_ELEMENTS``."""
    value = check_positive_int(name, value)
    check_table_size(name, value, value)
    if value % 2:
        raise ValueError(
            f"{name} must be even (channels come in sin/cos pairs), got {value}; use {value - 1} or {value + 1}"
        )
    return value


def check_base(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite number > 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number > 1, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 1.0:
        raise ValueError(f"{name} must be a finite number > 1, got {value}")
    return value


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value  # type: ignore[return-value]


def check_probability(name: str, value: object) -> float:
    """Return ``value`` as a float in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    value = float(value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return value


def check_sequence_input(x, dim: int) -> None:
    """Raise unless ``x`` is a floating-point tensor shaped ``[..., seq_len, dim]`` (at least 2 dims)."""
    check_float_tensor("x", x)
    if x.dim() < 2 or x.shape[-1] != dim:
        raise ValueError(f"x must have shape [..., seq_len, {dim}] (last dim = dim = {dim}), got {tuple(x.shape)}")


def check_positive_number(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number > 0, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return value


def check_number(name: str, value: object, *, minimum: float, inclusive: bool) -> float:
    """Return ``value`` as a float if it is a finite number above ``minimum`` (or equal, if ``inclusive``)."""
    bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number {bound}, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < minimum or (value == minimum and not inclusive):
        raise ValueError(f"{name} must be a finite number {bound}, got {value}")
    return value


def check_heads(dim: object, num_heads: object) -> int:
    """Return the head dimension ``dim // num_heads``, or raise unless the heads divide ``dim``."""
    check_positive_int("dim", dim)
    check_positive_int("num_heads", num_heads)
    if dim % num_heads:
        raise ValueError(f"dim must be divisible by num_heads, got dim={dim}, num_heads={num_heads}")
    return dim // num_heads


def check_float_dtype(name: str, dtype: object) -> torch.dtype:
    """Return ``dtype`` if it is a floating-point ``torch.dtype`` (a table or bias of integers would be wrong)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point torch.dtype such as torch.float32, got {dtype!r}")
    return dtype


def check_float_tensor(name: str, tensor: object) -> torch.Tensor:
    """Return ``tensor`` if it is a floating-point tensor (queries, keys, values, embeddings)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if not tensor.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {tensor.dtype}")
    return tensor


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (a flag read by truthiness would take "no" as true)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r:.80}")
    return value


def check_input_dtype(name: str, x: object, weight: torch.Tensor) -> torch.Tensor:
    """Return ``x`` if it is a floating-point tensor of the layer's dtype (that of ``weight``)."""
    check_float_tensor(name, x)
    if x.dtype != weight.dtype:  # type: ignore[union-attr]
        raise TypeError(
            f"{name} has dtype {x.dtype} but the layer's weights are {weight.dtype}: "  # type: ignore[union-attr]
            f"convert one of them, layer.to({x.dtype}) or {name}.to({weight.dtype})"  # type: ignore[union-attr]
        )
    return x  # type: ignore[return-value]


def check_real(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """Return ``tensor`` unless it holds booleans or complex numbers (positions, angles)."""
    if tensor.dtype.is_complex or tensor.dtype == torch.bool:
        raise ValueError(f"{name} must hold real numbers, got dtype {tensor.dtype}")
    return tensor


def check_angle_dtype(angle_dtype: object) -> torch.dtype:
    """Return ``angle_dtype`` if it is float32 or float64, the dtypes angles may be formed in."""
    if angle_dtype not in ANGLE_DTYPES:
        raise ValueError(
            f"angle_dtype must be torch.float32 or torch.float64 (angles need at least float32), got {angle_dtype}"
        )
    return angle_dtype  # type: ignore[return-value]


def angle_device(device: torch.device, angle_dtype: torch.dtype) -> torch.device:
    """Where angles are formed: on the input's device, or the CPU where it has no float64 (MPS)."""
    if angle_dtype == torch.float64 and device.type == "mps":
        return torch.device("cpu")
    return device


def as_positions(positions, name: str = "positions") -> torch.Tensor:
    """``positions`` as a tensor; Python floats become float64, not float32 as ``torch.as_tensor`` makes them."""
    if isinstance(positions, torch.Tensor):
        return positions
    try:
        tensor = torch.as_tensor(positions)
        return torch.as_tensor(positions, dtype=torch.float64) if tensor.is_floating_point() else tensor
    except (TypeError, ValueError, RuntimeError, OverflowError):
        raise TypeError(
            f"{name} must be a tensor, or numbers in (nested) lists of one shape within int64, got {positions!r:.80}"
        ) from None


#: The largest position a tensor of integer positions can hold.
INT64_MAX = 2**63 - 1


def check_offset(offset: object, seq_len: int) -> int:
    """Return ``offset`` if it is an int >= 0 and ``offset + seq_len`` (the end of the positions) fits in int64."""
    check_nonnegative_int("offset", offset)
    if offset + seq_len > INT64_MAX:
        limit = "offset + seq_len must fit in int64 (<= 2**63 - 1)"
        raise ValueError(f"{limit}, got offset={offset}, seq_len={seq_len}")
    return offset


def check_qk(q: torch.Tensor, k: torch.Tensor, head_dim: int, *, positions, offset: int, inplace: bool):
    """Check queries and keys about to be rotated; return ``positions`` as a tensor on ``q``'s device (or None).

    ``q`` and ``k`` are ``[..., s, head_dim]`` with the same ``s``; the positions
    are either ``positions`` (``[s]`` or ``[b, s]``) or ``offset .. offset + s - 1``,
    never both; ``inplace`` cannot overwrite a leaf that requires grad. Shared by
    :class:`posenc.RotaryEmbedding` and the Triton entry point.

    Raises:
        ValueError: Naming the argument, its shape or value, and what was expected.
    """
    for name, t in (("q", q), ("k", k)):
        check_float_tensor(name, t)
        if t.dim() < 2 or t.shape[-1] != head_dim:
            raise ValueError(
                f"{name} must have shape [..., seq_len, {head_dim}] (last dim = head_dim = "
                f"{head_dim}), got {tuple(t.shape)}"
            )
    seq_len = q.shape[-2]
    if k.shape[-2] != seq_len:
        raise ValueError(f"k has length {k.shape[-2]} (dim -2), expected q's length {seq_len}")
    if inplace and torch.is_grad_enabled() and any(t.requires_grad and t.is_leaf for t in (q, k)):
        raise ValueError("inplace=True cannot overwrite q or k: a leaf tensor that requires grad")
    if positions is None:
        check_offset(offset, seq_len)
        return None
    if offset != 0:
        raise ValueError(f"pass either positions or offset, not both; got offset={offset} with positions")
    positions = as_positions(positions)
    if positions.is_meta != q.is_meta:  # a meta tensor has no values to copy, and q's values have no meta place
        where = f"positions are on {positions.device} but q on {q.device}"
        raise ValueError(f"{where}: put both on the meta device or neither")
    positions = check_real("positions", positions.to(q.device))
    if positions.dim() not in (1, 2) or positions.shape[-1] != seq_len:
        raise ValueError(
            f"positions must have shape [{seq_len}] or [batch, {seq_len}] (seq_len = q.shape[-2]), "
            f"got {tuple(positions.shape)}"
        )
    batch = q.shape[0] if q.dim() >= 3 else None
    if positions.dim() == 2 and batch is not None and positions.shape[0] not in (1, batch):
        raise ValueError(
            f"positions has {positions.shape[0]} rows but q has batch {batch} (q.shape[0]); "
            f"pass one row per sequence or one row for all, got {tuple(positions.shape)}"
        )
    return positions


def check_rope_args(x, cos, sin, *, inplace: bool = False) -> None:
    """Raise unless ``x``, ``cos`` and ``sin`` fit :func:`posenc.apply_rope` (floating, shapes; the
    caller checks the layout).

    ``cos``'s last dim is the rotary dim ``r``: ``x``'s last dim, or an even
    ``r < head_dim`` (partial rotary); its other dims broadcast to ``x``'s.
    ``inplace`` cannot overwrite a leaf that requires grad, nor an expanded ``x`` (a stride 0).
    """
    try:
        floating = x.is_floating_point() and cos.is_floating_point() and sin.is_floating_point()
    except AttributeError:  # not tensors
        floating = False
    if not floating:
        for name, t in (("x", x), ("cos", cos), ("sin", sin)):
            check_float_tensor(name, t)  # raises, naming the argument
    shape, table = x.shape, cos.shape
    if not shape:
        raise ValueError(f"x must have shape [..., seq_len, head_dim], got {tuple(shape)}")
    check_even_dim("head_dim (x.shape[-1])", int(shape[-1]))  # int(): torch.jit.trace gives sizes as tensors
    if table != sin.shape:
        raise ValueError(f"cos and sin must have one shape, got cos {tuple(table)} and sin {tuple(sin.shape)}")
    head_dim, rotary_dim = int(shape[-1]), int(table[-1]) if table else 0
    if rotary_dim != head_dim and (rotary_dim < 2 or rotary_dim > head_dim or rotary_dim % 2):
        raise ValueError(
            f"cos has shape {tuple(table)}, expected last dim {head_dim} (head_dim = x.shape[-1]) or an even "
            f"rotary_dim in [2, {head_dim}] to rotate only the first rotary_dim channels, got {rotary_dim}"
        )
    # Broadcastable to x without enlarging it (a loop: torch.broadcast_shapes costs more than a decode-step rotation)
    lead, x_lead = table[:-1], shape[:-1]
    fits = len(lead) <= len(x_lead) and all(c in (1, n) for c, n in zip(reversed(lead), reversed(x_lead), strict=False))
    if not fits:
        raise ValueError(
            f"cos has shape {tuple(table)}, expected last dim {rotary_dim} and a shape broadcastable "
            f"to x {tuple(shape)} (for example [seq_len, rotary_dim] = [{shape[-2] if len(shape) > 1 else 1}, "
            f"{rotary_dim}])"
        )
    if inplace and torch.is_grad_enabled() and x.requires_grad and x.is_leaf:
        raise ValueError("inplace=True cannot overwrite x: a leaf tensor that requires grad")
    if inplace and any(n > 1 and step == 0 for n, step in zip(shape, x.stride(), strict=True)):
        raise ValueError(
            f"inplace=True cannot write into x: it is expanded (shape {tuple(shape)}, strides {x.stride()}), so "
            "several elements share one memory location; pass x.contiguous() or inplace=False"
        )


def check_rope_out(out, x, cos, sin, *, inplace: bool) -> None:
    """Raise unless ``out`` can take :func:`posenc.apply_rope`'s result: ``x``'s shape, dtype and device, no overlap."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
    if inplace:
        raise ValueError("out cannot be given with inplace=True, which writes into x; pass one of them")
    if out.shape != x.shape:
        raise ValueError(f"out must have x's shape {tuple(x.shape)}, got {tuple(out.shape)}")
    if out.dtype != x.dtype:
        raise ValueError(f"out must have x's dtype {x.dtype}, got {out.dtype}")
    if not (out.is_cpu and x.is_cpu) and out.device != x.device:
        raise ValueError(f"out must be on x's device {x.device}, got {out.device}")
    if not out.is_contiguous() and any(n > 1 and step == 0 for n, step in zip(out.shape, out.stride(), strict=True)):
        raise ValueError(f"out is expanded (strides {out.stride()}): several elements share one memory location")
    if out.requires_grad and out.is_leaf and torch.is_grad_enabled():
        raise ValueError("out cannot be a leaf tensor that requires grad: it would be overwritten")
    _check_apart(out, {"x": x, "cos": cos, "sin": sin})


def _check_apart(out: torch.Tensor, others: dict[str, torch.Tensor]) -> None:
    """Raise if ``out``'s memory extent meets one of ``others``': conservative, as torch's own out= checks are."""

    def span(t: torch.Tensor) -> tuple[int, int]:  # first and one past the last byte of its elements
        n = t.numel() if t.is_contiguous() else sum((k - 1) * j for k, j in zip(t.shape, t.stride(), strict=True)) + 1
        return t.data_ptr(), t.data_ptr() + n * t.element_size()

    low, high = span(out) if out.numel() and not out.is_meta else (0, 0)
    for name, t in others.items():
        if low < high and t.numel() and (t.is_cpu if out.is_cpu else t.device == out.device):
            if low < span(t)[1] and span(t)[0] < high:
                raise ValueError(f"out overlaps {name} in memory; pass a separate tensor (or inplace=True to write x)")


def check_output_file(
    path: Path, *, force: bool, replaceable: bool = False, hint: str = "", exists_note: str = ""
) -> Path:
    """Make sure a command can write ``path`` at the end of its work: check it now, before the work.

    Creates the folder and writes (then removes) a trial file in it. Shared by the
    command lines of :mod:`posenc.experiments` and :mod:`posenc.benchmark`.

    Args:
        path: The output file.
        force: Replace an existing file.
        replaceable: The existing file may be replaced without ``force`` (a partial file of the same command).
        hint: Appended to the message for a directory (for example a file name to suggest).
        exists_note: Appended to "exists" in the message for an existing file.

    Raises:
        ValueError: If ``path`` is a directory, a link, a device, a pipe or anything but
            a regular file (``--force`` or not: the result is written beside it and moved
            over it, which would replace the thing itself), exists without ``force``, or
            its folder cannot be looked into, created or written to.
    """
    try:
        if path.is_dir():
            raise ValueError(f"--out {path} is a directory; give a file name{hint}")
        if path.is_symlink() or (path.exists() and not path.is_file()):
            kind = "a link" if path.is_symlink() else "not a regular file (a device, a pipe or a socket)"
            raise ValueError(f"--out {path} is {kind}; give the name of a regular file to write")
        exists = path.exists()
    except OSError as err:  # a folder on the way that may not be entered
        raise ValueError(f"--out {path} cannot be written: {err.strerror or err} ({err.filename})") from None
    if exists and not force and not replaceable:
        raise ValueError(f"--out {path} exists{exists_note}; pass --force to replace it")
    trial = path.parent / f".{path.name}.{os.getpid()}.trial"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        trial.open("x").close()
        trial.unlink()
    except (FileExistsError, NotADirectoryError) as err:  # a file where a folder should be
        raise ValueError(f"--out {path} cannot be written: {err.filename} is a file, not a folder") from None
    except OSError as err:
        where = f"writing in {path.parent}" if err.filename == str(trial) else f"creating {err.filename}"
        raise ValueError(f"--out {path} cannot be written: {err.strerror or err} ({where})") from None
    return path


def check_unique_list(name: str, values: object, check, kind: str = "ints") -> tuple:
    """``values`` as a tuple, if it is a non-empty list whose items pass ``check(name, item)`` and differ."""
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        raise ValueError(f"{name} must be a non-empty list of {kind}, got {values!r}")
    for value in values:
        check(name, value)
    if len(set(values)) != len(values):
        raise ValueError(f"{name} must not repeat a {'name' if kind == 'names' else 'value'}, got {list(values)}")
    return tuple(values)
