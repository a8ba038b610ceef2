"""Rotary position embedding (RoPE; Su et al., RoFormer, 2021) and its long-context scalings.

RoPE splits a query or key of ``head_dim = d`` channels into ``d/2`` pairs and
rotates pair ``i`` of the vector at position ``m`` by the angle ``m * theta_i``,
with ``theta_i = base ** (-2i / d)``. Read each pair as a complex number
``z_i``: the rotation is ``z_i -> z_i * exp(1j * m * theta_i)``. A rotation is
orthogonal, so norms are kept, and the rotations of a query at ``m`` and a key
at ``n`` combine into one rotation by ``(n - m) * theta_i``: the score
``<R_m q, R_n k>`` depends on the positions only through ``n - m``.

Two channel layouts of the pairs are in use, holding the same numbers in a
different order:

* ``"half"``: pair ``i`` is channels ``(i, i + d/2)`` (GPT-NeoX; LLaMA in
  Hugging Face ``transformers``).
* ``"interleaved"``: pair ``i`` is channels ``(2i, 2i + 1)`` (RoFormer, GPT-J,
  Meta's reference LLaMA code).

A checkpoint trained in one layout runs in the other after its query and key
projection rows are permuted by :func:`rope_weight_permutation`.

Partial rotary (GPT-NeoX, GPT-J, Phi) turns only the first ``rotary_dim``
channels of each head, as full RoPE of that dimension, and passes the rest
through: :func:`apply_rope` does so when ``cos`` is narrower than ``x``, and
:class:`RotaryEmbedding` takes ``rotary_dim`` (see :mod:`posenc.rope.ops`).

Long-context scaling follows the vocabulary of Hugging Face's
``rope_parameters``; for the same parameters the frequencies and the attention
factor equal those of ``transformers``:

* ``"default"``: ``theta_i = base ** (-2i / d)``.
* ``"linear"``: position interpolation (Chen et al. 2023), ``theta_i / factor``.
* ``"dynamic"``: dynamic NTK scaling (the r/LocalLLaMA post by emozilla, 2023):
  the NTK-aware base change with a factor that grows with the current length.
* ``"yarn"``: YaRN (Peng et al. 2023): high frequencies kept, low frequencies
  interpolated, a linear ramp between, and an attention factor.
* ``"llama3"``: the rule of Llama 3.1 (Meta, 2024): like YaRN with the ramp
  placed by wavelength, and no attention factor.

The static NTK-aware base change (the r/LocalLLaMA post by bloc97, 2023) is
:func:`ntk_scaled_base`.

Angles ``m * theta_i`` are formed in float64 by default and never in less than
float32; cos and sin come back in the requested dtype and the rotated tensors
in the input's dtype.

:func:`apply_rope` and :class:`RotaryEmbedding` take ``backend="auto"``,
``"torch"``, ``"cpu"`` or ``"triton"``. ``"triton"`` runs the fused kernel of
``posenc.triton_rope`` (queries and keys in one launch, angles formed in
registers); ``"cpu"`` computes the torch operations' numbers in cache-sized blocks
(``posenc.rope.cpu``); ``"auto"`` picks Triton for CUDA tensors when it is installed,
the blocks for CPU tensors, and the torch operations otherwise. Triton is imported
only when it is used.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from .._checks import (
    angle_device,
    as_positions,
    check_angle_dtype,
    check_choice,
    check_even_dim,
    check_float_dtype,
    check_positive_int,
    check_real,
    check_rope_args,
    check_rope_out,
    check_table_size,
)
from ..layout import ROPE_LAYOUTS, layout_permutation
from .cpu import rotate
from .ops import apply_rotation, cos_sin_from_inv_freq, join_rotated, rotary_part  # noqa: F401  (re-exported)
from .scaling import (  # noqa: F401  (re-exported)
    ROPE_SCALINGS,
    ROPE_TYPES,
    ntk_scaled_base,
    parse_scaling,
    resolve_base,
)

#: Implementations of the rotation: ``"auto"`` picks ``"triton"`` for CUDA tensors when Triton is installed
#: and ``"cpu"`` (blocks that stay in cache, :mod:`posenc.rope.cpu`) for CPU tensors.
ROPE_BACKENDS = ("auto", "torch", "triton", "cpu")
TRITON_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def rope_inv_freq(
    head_dim: int,
    *,
    base: float | None = None,
    scaling: Mapping | None = None,
    seq_len: float | None = None,
    dtype: torch.dtype = torch.float64,
    device=None,
) -> tuple[torch.Tensor, float]:
    """Rotation frequencies ``theta_i`` of RoPE, after any long-context scaling.

    Su et al., "RoFormer: Enhanced Transformer with Rotary Position Embedding",
    2021, section 3.2.2: ``theta_i = base ** (-2i / d)``, ``i = 0 .. d/2 - 1``.
    ``scaling`` changes them as Hugging Face's ``rope_parameters`` do (see the
    module docstring); for the same parameters the result equals what
    ``transformers`` computes, to float32 rounding (it computes in float32,
    this function in float64).

    ``scaling`` keys, by ``rope_type``:

    * ``"default"`` (or ``scaling=None``): none.
    * ``"linear"``: ``factor``.
    * ``"dynamic"``: ``factor`` and ``original_max_position_embeddings``, the
      length the model was trained on (``transformers`` reads the latter from
      ``config.max_position_embeddings``).
    * ``"yarn"``: ``factor``, ``original_max_position_embeddings``; optional
      ``beta_fast`` (32), ``beta_slow`` (1), ``attention_factor``, ``mscale``,
      ``mscale_all_dim`` and ``truncate`` (True).
    * ``"longrope"``: ``short_factor`` and ``long_factor`` (``head_dim / 2``
      numbers > 0), ``original_max_position_embeddings``, and ``factor`` or
      ``attention_factor`` (transformers derives a missing factor from the config).
    * ``"llama3"``: ``factor``, ``original_max_position_embeddings``,
      ``low_freq_factor``, ``high_freq_factor``.

    A ``rope_theta`` key (``transformers`` v5 keeps it in ``rope_parameters``)
    gives the base when ``base`` is None, and must equal ``base`` otherwise.

    Args:
        head_dim: Rotary dimension ``d`` (the head dimension), even.
        base: The base of the frequencies (``rope_theta``), > 1; by default
            ``scaling["rope_theta"]`` if present, else 10000.
        scaling: ``None`` or a dict as above.
        seq_len: For ``"dynamic"`` and ``"longrope"`` only: the current length, normally the
            largest position + 1. Lengths up to
            ``original_max_position_embeddings`` (and ``None``) leave the
            frequencies unscaled.
        dtype: Floating dtype of the result.
        device: Device of the result.

    Returns:
        ``(inv_freq, attention_factor)``: ``inv_freq`` has shape
        ``[head_dim // 2]``, ``attention_factor`` is a float that multiplies
        cos and sin (1.0 except for ``"yarn"`` and ``"longrope"``).

    Raises:
        ValueError: If ``head_dim`` is odd or not positive, ``base`` is not > 1,
            ``scaling`` has an unknown ``rope_type`` or key, misses a parameter
            its type needs, or holds an out-of-range value.
    """
    check_even_dim("head_dim", head_dim)
    base = resolve_base(base, scaling)
    check_float_dtype("dtype", dtype)
    params = parse_scaling(scaling, base)
    work = angle_device(torch.device(device) if device is not None else torch.device("cpu"), torch.float64)
    inv_freq, attention_factor = ROPE_SCALINGS[params["rope_type"]].frequencies(head_dim, base, params, seq_len, work)
    return inv_freq.to(device=device if device is not None else work, dtype=dtype), float(attention_factor)


# ---------------------------------------------------------------------------
# cos/sin tables and the rotation
# ---------------------------------------------------------------------------


def rope_cos_sin(
    positions,
    head_dim: int,
    *,
    base: float | None = None,
    scaling: Mapping | None = None,
    layout: str = "half",
    dtype: torch.dtype = torch.float32,
    angle_dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The cos and sin of the rotation angles ``position * theta_i``, laid out per channel.

    Each angle appears twice, once for each channel of its pair: at ``i`` and
    ``i + d/2`` for ``layout="half"``, at ``2i`` and ``2i + 1`` for
    ``"interleaved"``. Both are multiplied by the attention factor of the
    scaling (1 except for YaRN), as ``transformers`` does, so that every
    attention score is multiplied by its square.

    For ``rope_type="dynamic"`` and ``"longrope"`` the current length is the largest position + 1.
    ``transformers`` decides per forward call of its rotary module instead: it
    rescales when that length exceeds the longest seen so far and goes back to
    the unscaled frequencies when it falls under the trained length, so the two
    agree whenever lengths only grow (as in generation) or stay short.

    Args:
        positions: Tensor (or anything ``torch.as_tensor`` takes) of any shape
            with integer or float positions.
        head_dim: Rotary dimension, even.
        base: Frequency base (``rope_theta``), > 1; by default
            ``scaling["rope_theta"]`` if present, else 10000.
        scaling: ``None`` or a ``rope_parameters``-style dict, as in
            :func:`rope_inv_freq`.
        layout: ``"half"`` or ``"interleaved"``.
        dtype: Floating dtype of cos and sin.
        angle_dtype: ``torch.float64`` (default) or ``torch.float32``, the
            dtype in which the angles are formed; float32 reproduces the
            computation of ``transformers``.

    Returns:
        ``(cos, sin)``, each ``[*positions.shape, head_dim]`` of dtype ``dtype``
        on the device of ``positions``.

    Raises:
        ValueError: On any error of :func:`rope_inv_freq`, an unknown layout,
            positions that are not real numbers, or an ``angle_dtype`` other
            than float32 or float64.
    """
    check_even_dim("head_dim", head_dim)
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_angle_dtype(angle_dtype)
    check_float_dtype("dtype", dtype)
    positions = as_positions(positions)
    check_real("positions", positions)
    check_table_size("head_dim", head_dim, positions.numel() * head_dim)  # the [*positions.shape, d] tables
    params = parse_scaling(scaling, resolve_base(base, scaling))
    seq_len = None
    if ROPE_SCALINGS[params["rope_type"]].length_dependent and positions.numel():
        seq_len = positions.max().item() + 1
    work = angle_device(positions.device, angle_dtype)
    inv_freq, attention_factor = rope_inv_freq(
        head_dim, base=base, scaling=params, seq_len=seq_len, dtype=angle_dtype, device=work
    )  # [d/2]
    cos, sin = cos_sin_from_inv_freq(positions.to(work), inv_freq, layout=layout, attention_factor=attention_factor)
    return cos.to(device=positions.device, dtype=dtype), sin.to(device=positions.device, dtype=dtype)


def _triton_ready(tensors: tuple[torch.Tensor, ...]) -> bool:
    """Whether ``backend="auto"`` may use the Triton kernel for these tensors."""
    if not all(t.is_cuda for t in tensors):
        return False
    from ..triton_rope import triton_available  # imports Triton, which CUDA users have

    return triton_available()


def use_triton(backend: str, tensors: tuple[torch.Tensor, ...], *, eligible) -> bool:
    """Resolve ``backend``: True for the Triton kernel, False for the torch operations.

    ``eligible()`` says whether the call is one the kernel handles (dtypes,
    dimensions, no gradient for the tables); ``"auto"`` needs it, and
    ``"triton"`` leaves the kernel's own checks to raise. It is a callable so
    that CPU tensors, the common case, cost one device test and nothing more.
    """
    if backend in ("torch", "cpu"):
        return False
    if backend == "triton":
        return True
    check_choice("backend", backend, ROPE_BACKENDS)
    return _triton_ready(tensors) and eligible()


def apply_rope(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    layout: str = "half",
    backend: str = "auto",
    inplace: bool = False,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rotate the channel pairs of ``x`` by the angles whose cos and sin are given.

    Su et al. 2021, section 3.4.2: ``x * cos + rotate(x) * sin``, where
    ``rotate`` turns each pair ``(a, b)`` into ``(-b, a)``. With ``cos``,
    ``sin`` from :func:`rope_cos_sin` of the same layout this is RoPE; with
    ``-sin`` it undoes it.

    Partial rotary (GPT-NeoX, GPT-J, Phi): tables narrower than ``x``, last
    dim ``r < head_dim``, rotate only the first ``r`` channels (pairs laid out
    within them) and pass the rest through unchanged, as ``transformers``,
    rotary-embedding-torch and flash-attention do. Make such tables with
    ``rope_cos_sin(positions, r)``.

    The products are formed in the promoted dtype of ``x`` and ``cos`` (so a
    bfloat16 ``x`` with float32 tables is rotated in float32), and the result
    is rounded once to ``x``'s dtype.

    Two mistakes no shape check can see: tables of the other layout (the
    result is then not a rotation: norms change by up to 20%), and ``x`` laid
    out ``[b, s, h, d]`` with ``[s, d]`` tables (the heads are then rotated as
    if they were positions). Transpose such ``x`` to ``[b, h, s, d]`` first.

    Args:
        x: Queries or keys ``[..., s, head_dim]``, for example ``[b, h, s, d]``.
        cos: Broadcastable to ``x`` except in the last dim, which is ``r``:
            ``head_dim``, or an even ``rotary_dim < head_dim`` for partial
            rotary; for example ``[s, r]``.
        sin: Same shape as ``cos``.
        layout: ``"half"`` or ``"interleaved"``; must match how ``cos`` and
            ``sin`` were laid out and how the model's weights expect pairs.
        backend: ``"torch"`` (the operations above), ``"cpu"`` (the same
            numbers, bit for bit, computed in cache-sized blocks straight into
            the output, CPU tensors only; see :mod:`posenc.rope.cpu`),
            ``"triton"`` (one kernel that reads ``cos`` and ``sin``, products
            in float32; ``x`` float32, float16 or bfloat16 with at most 4 dims,
            on a CUDA device) or ``"auto"`` (``"triton"`` where it applies and
            Triton is installed, ``"cpu"`` for CPU tensors, else ``"torch"``).
            Where autograd must record the call, ``"cpu"`` runs the torch operations.
        inplace: Write the result into ``x`` (only its first ``r`` channels
            change) and return ``x``, like flash-attention's
            ``apply_rotary_emb(..., inplace=True)``; ``x`` must not be a leaf
            that requires grad.
        out: A tensor of ``x``'s shape, dtype and device to write the result
            into and return, not overlapping ``x``, ``cos`` or ``sin``; on the
            CPU this saves allocating (and first touching) a new tensor.

    Returns:
        Tensor of ``x``'s shape and dtype (``x`` itself if ``inplace``, ``out`` if given).

    Raises:
        ValueError: If the layout or backend is unknown, ``x``'s last dim is
            odd, ``cos`` and ``sin`` do not have one shape broadcastable to
            ``x`` with an even last dim ``<= head_dim``, ``inplace`` would
            overwrite a leaf that requires grad or an expanded ``x``, ``backend="triton"``
            cannot run on these tensors or ``backend="cpu"`` gets tensors off the CPU, or ``out``
            differs from ``x`` in shape, dtype or device, overlaps ``x``, ``cos`` or ``sin``, is
            expanded or a leaf that requires grad, or comes with ``inplace=True``.
        TypeError: If ``out`` is not a tensor.
    """
    signature = _signature(x, cos, sin, layout, backend, inplace=inplace)
    if signature in _CHECKED and not torch.compiler.is_compiling():
        if out is not None:  # out's checks read its memory: they run every time
            check_rope_out(out, x, cos, sin, inplace=inplace)
        return rotate(x, cos, sin, layout, backend=backend, inplace=inplace, out=out)
    check_choice("layout", layout, ROPE_LAYOUTS)
    check_rope_args(x, cos, sin, inplace=inplace)
    if out is not None:
        check_rope_out(out, x, cos, sin, inplace=inplace)

    def eligible() -> bool:
        return x.dtype in TRITON_FLOAT_DTYPES and x.dim() <= 4 and not (cos.requires_grad or sin.requires_grad)

    if use_triton(backend, (x, cos, sin), eligible=eligible):
        from ..triton_rope import apply_rope_triton

        # the kernel takes any strides: it reads the first r channels as a view
        rotated = apply_rope_triton(rotary_part(x, cos.shape[-1]), cos, sin, layout=layout)  # [..., r]
        return join_rotated(x, rotated, inplace) if out is None else out.copy_(join_rotated(x, rotated, False))
    safe = signature is not None and not (inplace and x.requires_grad)  # the leaf test reads more than it holds
    if safe and (backend == "torch" or not x.is_cuda) and not (torch.jit.is_tracing() or torch.compiler.is_compiling()):
        if len(_CHECKED) >= 4096:  # bounded: a model uses a handful of shapes
            _CHECKED.clear()
        _CHECKED.add(signature)  # the torch or CPU path, decided without the tensors' values
    return rotate(x, cos, sin, layout, backend=backend, inplace=inplace, out=out)


# Signatures of apply_rope calls that passed its checks and took the torch path: at a decode
# step, the checks would otherwise cost about as much as the rotation itself.
_CHECKED: set[tuple] = set()


def _signature(x, cos, sin, layout: str, backend: str, *, inplace: bool) -> tuple | None:
    """All that apply_rope's checks and its choice of path depend on (None if an argument is not a tensor)."""
    try:
        shapes = (x.shape, cos.shape, sin.shape, x.dtype, cos.dtype, sin.dtype)
        written = x.stride() if inplace else None  # an expanded x (a stride 0) cannot be written in place
        return (*shapes, layout, backend, x.is_cuda, bool(inplace), bool(inplace) and x.requires_grad, written)
    except AttributeError:
        return None


def rope_weight_permutation(
    head_dim: int, num_heads: int = 1, *, src: str = "interleaved", dst: str = "half"
) -> torch.Tensor:
    """Row order that converts query/key projection weights between RoPE layouts.

    A model trained with ``src`` layout, with projection ``W`` of shape
    ``[num_heads * head_dim, hidden]`` (heads stacked along the rows, as in
    ``nn.Linear``), computes the same attention with ``dst`` layout when its
    query and key weights (and biases) are replaced by ``W[perm]``. The value
    and output projections stay as they are. Built from
    :func:`posenc.layout_permutation`, repeated per head.

    Args:
        head_dim: Rotary dimension per head, even.
        num_heads: Number of heads stacked in the weight, >= 1 (use the number
            of key/value heads for the key weight of a grouped-query model).
        src: Layout the weights were trained with, ``"interleaved"`` or ``"half"``.
        dst: Layout of the code that will run them.

    Returns:
        ``torch.long`` tensor ``[num_heads * head_dim]``, a permutation.

    Raises:
        ValueError: If ``head_dim`` is odd, ``num_heads`` is not >= 1, or a
            layout is unknown.
    """
    check_even_dim("head_dim", head_dim)
    check_positive_int("num_heads", num_heads)
    check_choice("src", src, ROPE_LAYOUTS)
    check_choice("dst", dst, ROPE_LAYOUTS)
    within = layout_permutation(head_dim, src=src, dst=dst)  # [d]
    offsets = torch.arange(num_heads).unsqueeze(-1) * head_dim  # [h, 1]
    return (offsets + within).reshape(num_heads * head_dim)  # [h, d] -> [h * d]
