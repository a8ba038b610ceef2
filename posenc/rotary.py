"""Rotary position embedding (RoPE; Su et al., RoFormer, 2021) and its long-context scalings.

RoPE splits a query or key of ``head_dim = d`` channels into ``d/2`` pairs and
rotates pair ``i`` of the vector at position ``m`` by the angle ``m * theta_i``,
with ``theta_i = base ** (-2i / d)``. Read each pair as a complex number
``z_i``: the rotation is ``z_i -> z_i * exp(1j * m * theta_i)``. A rotation is
orthogonal, so norms are kept, and the rotations of a query at ``m`` and a key
at ``n`` combine into one rotation by ``(n - m) * theta_i``: the score
``<R_m q, R_n k>`` depends on the positions only through ``m - n``.

Two channel layouts of the pairs are in use, holding the same numbers in a
different order:

* ``"half"``: pair ``i`` is channels ``(i, i + d/2)`` (GPT-NeoX; LLaMA in
  Hugging Face ``transformers``).
* ``"interleaved"``: pair ``i`` is channels ``(2i, 2i + 1)`` (RoFormer, GPT-J,
  Meta's reference LLaMA code).

A checkpoint trained in one layout runs in the other after its query and key
projection rows are permuted by :func:`rope_weight_permutation`.

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
``"torch"`` or ``"triton"``. ``"triton"`` runs the fused kernel of
``posenc.triton_rope`` (queries and keys in one launch, angles formed in
registers); ``"auto"`` picks it for CUDA tensors when Triton is installed and
the torch operations otherwise. Triton is imported only when it is used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn

from ._checks import (
    angle_device,
    check_angle_dtype,
    check_base,
    check_choice,
    check_even_dim,
    check_nonnegative_int,
    check_number,
    check_positive_int,
    check_real,
)
from .layout import ROPE_LAYOUTS, layout_permutation
from .sinusoidal import sinusoidal_frequencies

#: Values of ``scaling["rope_type"]``, in Hugging Face's vocabulary.
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3")

#: Implementations of the rotation: ``"auto"`` picks ``"triton"`` for CUDA tensors when Triton is installed.
ROPE_BACKENDS = ("auto", "torch", "triton")
_TRITON_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

_REQUIRED = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor", "original_max_position_embeddings"),
    "yarn": ("factor", "original_max_position_embeddings"),
    "llama3": ("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"),
}
_OPTIONAL = {
    "yarn": ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"),
}


# ---------------------------------------------------------------------------
# Argument checks specific to the scaling dictionary
# ---------------------------------------------------------------------------


def _parse_scaling(scaling: Mapping | None, base: float) -> dict:
    """Validate a ``rope_parameters``-style dict; return it with ``rope_type`` filled in."""
    if scaling is None:
        return {"rope_type": "default"}
    if not isinstance(scaling, Mapping):
        raise ValueError(
            f"scaling must be None or a dict like {{'rope_type': 'linear', 'factor': 4.0}}, got {scaling!r}"
        )
    params = dict(scaling)
    rope_type = params.setdefault("rope_type", "default")
    check_choice("scaling['rope_type']", rope_type, ROPE_TYPES)
    required = _REQUIRED[rope_type]
    allowed = {"rope_type", "rope_theta", *required, *_OPTIONAL.get(rope_type, ())}
    unknown = sorted(set(params) - allowed, key=str)
    if unknown:
        raise ValueError(
            f"scaling has unknown key(s) {', '.join(map(repr, unknown))} for rope_type {rope_type!r}; "
            f"allowed: {', '.join(map(repr, sorted(allowed)))}"
        )
    missing = [key for key in required if params.get(key) is None]
    if missing:
        raise ValueError(
            f"scaling is missing {', '.join(map(repr, missing))}, which rope_type {rope_type!r} needs "
            f"(it needs {', '.join(map(repr, required))})"
        )
    if "rope_theta" in params and float(params["rope_theta"]) != base:
        raise ValueError(
            f"scaling['rope_theta'] = {params['rope_theta']!r} disagrees with base = {base:g}; pass the same value"
        )
    if "factor" in params:
        params["factor"] = check_number("scaling['factor']", params["factor"], minimum=1.0, inclusive=True)
    if "original_max_position_embeddings" in params:
        check_positive_int("scaling['original_max_position_embeddings']", params["original_max_position_embeddings"])
    if rope_type == "llama3":
        low = check_number("scaling['low_freq_factor']", params["low_freq_factor"], minimum=0.0, inclusive=False)
        high = check_number("scaling['high_freq_factor']", params["high_freq_factor"], minimum=0.0, inclusive=False)
        if high <= low:
            raise ValueError(
                f"scaling['high_freq_factor'] must be > scaling['low_freq_factor'], got high_freq_factor={high:g} "
                f"and low_freq_factor={low:g}"
            )
    if rope_type == "yarn":
        for key in ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim"):
            if params.get(key) is not None:
                params[key] = check_number(f"scaling[{key!r}]", params[key], minimum=0.0, inclusive=False)
        beta_fast, beta_slow = params.get("beta_fast") or 32.0, params.get("beta_slow") or 1.0
        if beta_fast <= beta_slow:
            raise ValueError(
                f"scaling['beta_fast'] must be > scaling['beta_slow'], got beta_fast={beta_fast:g} "
                f"and beta_slow={beta_slow:g}"
            )
    return params


# ---------------------------------------------------------------------------
# Frequencies
# ---------------------------------------------------------------------------


def ntk_scaled_base(base: float, factor: float, head_dim: int) -> float:
    """The NTK-aware base change: ``base * factor ** (head_dim / (head_dim - 2))``.

    Proposed by bloc97 in the r/LocalLLaMA post "NTK-Aware Scaled RoPE allows
    LLaMA models to have extended (8k+) context size without any fine-tuning
    and minimal perplexity degradation" (June 2023); written down as
    "NTK-aware" interpolation in section 3.1 of the YaRN paper (Peng et al.
    2023). The exponent is chosen so that the slowest pair, ``i = d/2 - 1``,
    turns ``factor`` times more slowly (exactly like position interpolation),
    while the fastest pair, ``i = 0``, is left unchanged; the pairs between
    are slowed by ``factor ** (2i / (d - 2))``, a geometric blend.

    Use the result as ``base`` of any function here; it is a static change,
    made once for a target length. ``scaling={"rope_type": "dynamic", ...}``
    applies the same change with a factor that follows the current length.

    Args:
        base: The model's RoPE base (``rope_theta``), > 1.
        factor: How many times longer the context should become, >= 1.
        head_dim: Rotary dimension ``d``, even and >= 4.

    Returns:
        The new base, a float.

    Raises:
        ValueError: If ``base`` is not > 1, ``factor`` is below 1, or
            ``head_dim`` is not an even int >= 4.
    """
    base = check_base("base", base)
    factor = check_number("factor", factor, minimum=1.0, inclusive=True)
    _check_ntk_dim(head_dim)
    return base * factor ** (head_dim / (head_dim - 2))


def _check_ntk_dim(head_dim: int) -> None:
    check_even_dim("head_dim", head_dim)
    if head_dim < 4:
        raise ValueError(f"head_dim must be >= 4 for the NTK-aware base change (exponent d/(d-2)), got {head_dim}")


def _yarn_ramp(head_dim: int, base: float, params: dict, device) -> torch.Tensor:
    """YaRN's blend weight per pair: 0 keeps the frequency, 1 divides it by the factor."""
    original = params["original_max_position_embeddings"]
    beta_fast, beta_slow = params.get("beta_fast") or 32.0, params.get("beta_slow") or 1.0

    def pair_index(num_rotations: float) -> float:
        # The (fractional) pair whose wavelength fits num_rotations times into the original context.
        return head_dim * math.log(original / (num_rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_index(beta_fast), pair_index(beta_slow)
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    # The reference implementation clamps to [0, head_dim - 1], in channel rather than pair units.
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # a step instead of a ramp, without dividing by zero
    pairs = torch.arange(head_dim // 2, dtype=torch.float64, device=device)  # [d/2]
    return ((pairs - low) / (high - low)).clamp(0.0, 1.0)


def _yarn_attention_factor(params: dict) -> float:
    if params.get("attention_factor") is not None:
        return params["attention_factor"]

    def mscale(scale: float, weight: float = 1.0) -> float:
        return 1.0 if scale <= 1.0 else 0.1 * weight * math.log(scale) + 1.0

    factor = params["factor"]
    if params.get("mscale") and params.get("mscale_all_dim"):
        return mscale(factor, params["mscale"]) / mscale(factor, params["mscale_all_dim"])
    return mscale(factor)


def rope_inv_freq(
    head_dim: int,
    *,
    base: float = 10000.0,
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
    * ``"llama3"``: ``factor``, ``original_max_position_embeddings``,
      ``low_freq_factor``, ``high_freq_factor``.

    A ``rope_theta`` key, if present, must equal ``base``.

    Args:
        head_dim: Rotary dimension ``d`` (the head dimension), even.
        base: The base of the frequencies (``rope_theta``), > 1.
        scaling: ``None`` or a dict as above.
        seq_len: For ``"dynamic"`` only: the current length, normally the
            largest position + 1. Lengths up to
            ``original_max_position_embeddings`` (and ``None``) leave the
            frequencies unscaled.
        dtype: Floating dtype of the result.
        device: Device of the result.

    Returns:
        ``(inv_freq, attention_factor)``: ``inv_freq`` has shape
        ``[head_dim // 2]``, ``attention_factor`` is a float that multiplies
        cos and sin (1.0 except for ``"yarn"``).

    Raises:
        ValueError: If ``head_dim`` is odd or not positive, ``base`` is not > 1,
            ``scaling`` has an unknown ``rope_type`` or key, misses a parameter
            its type needs, or holds an out-of-range value.
    """
    check_even_dim("head_dim", head_dim)
    base = check_base("base", base)
    params = _parse_scaling(scaling, base)
    rope_type = params["rope_type"]
    work = angle_device(torch.device(device) if device is not None else torch.device("cpu"), torch.float64)
    attention_factor = 1.0

    if rope_type == "dynamic":
        _check_ntk_dim(head_dim)
        original, factor = params["original_max_position_embeddings"], params["factor"]
        length = original
        if seq_len is not None:
            length = max(check_number("seq_len", seq_len, minimum=0.0, inclusive=False), original)
        # The NTK-aware base for the factor s * L / L0 - (s - 1): 1 up to L = L0, then growing by s per L0.
        base = ntk_scaled_base(base, factor * length / original - (factor - 1), head_dim)

    inv_freq = sinusoidal_frequencies(head_dim, base=base, dtype=torch.float64, device=work)  # [d/2]

    if rope_type == "linear":
        inv_freq = inv_freq / params["factor"]
    elif rope_type == "yarn":
        ramp = _yarn_ramp(head_dim, base, params, work)  # [d/2]
        inv_freq = inv_freq * (1 - ramp) + inv_freq / params["factor"] * ramp
        attention_factor = _yarn_attention_factor(params)
    elif rope_type == "llama3":
        factor, original = params["factor"], params["original_max_position_embeddings"]
        low_ff, high_ff = params["low_freq_factor"], params["high_freq_factor"]
        wavelength = 2 * math.pi / inv_freq  # [d/2]
        # 0 for wavelengths >= original / low_ff (divide by factor), 1 for <= original / high_ff (keep).
        smooth = ((original / wavelength - low_ff) / (high_ff - low_ff)).clamp(0.0, 1.0)
        inv_freq = (1 - smooth) * inv_freq / factor + smooth * inv_freq

    return inv_freq.to(device=device if device is not None else work, dtype=dtype), float(attention_factor)


# ---------------------------------------------------------------------------
# cos/sin tables and the rotation
# ---------------------------------------------------------------------------


def rope_cos_sin(
    positions,
    head_dim: int,
    *,
    base: float = 10000.0,
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

    For ``rope_type="dynamic"`` the current length is the largest position + 1.
    ``transformers`` decides per forward call of its rotary module instead: it
    rescales when that length exceeds the longest seen so far and goes back to
    the unscaled frequencies when it falls under the trained length, so the two
    agree whenever lengths only grow (as in generation) or stay short.

    Args:
        positions: Tensor (or anything ``torch.as_tensor`` takes) of any shape
            with integer or float positions.
        head_dim: Rotary dimension, even.
        base: Frequency base (``rope_theta``).
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
    positions = torch.as_tensor(positions)
    check_real("positions", positions)
    params = _parse_scaling(scaling, check_base("base", base))
    seq_len = None
    if params["rope_type"] == "dynamic" and positions.numel():
        seq_len = positions.max().item() + 1
    work = angle_device(positions.device, angle_dtype)
    inv_freq, attention_factor = rope_inv_freq(
        head_dim, base=base, scaling=params, seq_len=seq_len, dtype=angle_dtype, device=work
    )  # [d/2]
    angles = positions.to(work, angle_dtype).unsqueeze(-1) * inv_freq  # [*, d/2]
    cos, sin = torch.cos(angles), torch.sin(angles)
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    if layout == "half":
        cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)  # [*, d]
    else:
        cos, sin = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)  # [*, d]
    return cos.to(device=positions.device, dtype=dtype), sin.to(device=positions.device, dtype=dtype)


def _rotate_pairs(x: torch.Tensor, layout: str) -> torch.Tensor:
    """Each pair ``(a, b)`` turned by 90 degrees to ``(-b, a)``, in the given layout."""
    if layout == "half":
        first, second = x.chunk(2, dim=-1)  # 2 x [..., d/2]
        return torch.cat((-second, first), dim=-1)  # [..., d]
    pairs = x.unflatten(-1, (-1, 2))  # [..., d] -> [..., d/2, 2]
    return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)  # [..., d/2, 2] -> [..., d]


def _triton_ready(tensors: tuple[torch.Tensor, ...]) -> bool:
    """Whether ``backend="auto"`` may use the Triton kernel for these tensors."""
    if not all(t.is_cuda for t in tensors):
        return False
    from .triton_rope import triton_available  # imports Triton, which CUDA users have

    return triton_available()


def _use_triton(backend: str, tensors: tuple[torch.Tensor, ...], *, eligible: bool) -> bool:
    """Resolve ``backend``: True for the Triton kernel, False for the torch operations.

    ``eligible`` says whether the call is one the kernel handles (dtypes,
    dimensions, no gradient for the tables); ``"auto"`` needs it, and
    ``"triton"`` leaves the kernel's own checks to raise.
    """
    check_choice("backend", backend, ROPE_BACKENDS)
    if backend == "torch":
        return False
    if backend == "triton":
        return True
    return eligible and _triton_ready(tensors)


def apply_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str = "half", backend: str = "auto"
) -> torch.Tensor:
    """Rotate every channel pair of ``x`` by the angles whose cos and sin are given.

    Su et al. 2021, section 3.4.2: ``x * cos + rotate(x) * sin``, where
    ``rotate`` turns each pair ``(a, b)`` into ``(-b, a)``. With ``cos``,
    ``sin`` from :func:`rope_cos_sin` of the same layout this is RoPE; with
    ``-sin`` it undoes it.

    The products are formed in the promoted dtype of ``x`` and ``cos`` (so a
    bfloat16 ``x`` with float32 tables is rotated in float32), and the result
    is rounded once to ``x``'s dtype.

    Args:
        x: Queries or keys ``[..., s, head_dim]``, for example ``[b, h, s, d]``.
        cos: Broadcastable to ``x``, last dim ``head_dim``, for example ``[s, d]``.
        sin: Same shape as ``cos``.
        layout: ``"half"`` or ``"interleaved"``; must match how ``cos`` and
            ``sin`` were laid out and how the model's weights expect pairs.
        backend: ``"torch"`` (the operations above), ``"triton"`` (one
            kernel that reads ``cos`` and ``sin``, products in float32; ``x``
            float32, float16 or bfloat16 with at most 4 dims, on a CUDA
            device) or ``"auto"`` (``"triton"`` where it applies and Triton is
            installed, else ``"torch"``).

    Returns:
        Tensor of ``x``'s shape and dtype.

    Raises:
        ValueError: If the layout or backend is unknown, ``x``'s last dim is
            odd, ``cos`` and ``sin`` do not have one shape broadcastable to
            ``x`` with last dim ``head_dim``, or ``backend="triton"`` cannot
            run on these tensors.
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    if x.dim() < 1:
        raise ValueError(f"x must have shape [..., seq_len, head_dim], got {tuple(x.shape)}")
    check_even_dim("head_dim (x.shape[-1])", x.shape[-1])
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have one shape, got cos {tuple(cos.shape)} and sin {tuple(sin.shape)}")
    try:
        fits = torch.broadcast_shapes(cos.shape, x.shape) == x.shape
    except RuntimeError:
        fits = False
    if not fits or cos.shape[-1:] != x.shape[-1:]:
        raise ValueError(
            f"cos has shape {tuple(cos.shape)}, expected last dim {x.shape[-1]} and a shape broadcastable "
            f"to x {tuple(x.shape)} (for example [seq_len, head_dim] = [{x.shape[-2] if x.dim() > 1 else 1}, "
            f"{x.shape[-1]}])"
        )
    eligible = x.dtype in _TRITON_DTYPES and x.dim() <= 4 and not (cos.requires_grad or sin.requires_grad)
    if _use_triton(backend, (x, cos, sin), eligible=eligible):
        from .triton_rope import apply_rope_triton

        return apply_rope_triton(x, cos, sin, layout=layout)
    return (x * cos + _rotate_pairs(x, layout) * sin).to(x.dtype)


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


# ---------------------------------------------------------------------------
# The module
# ---------------------------------------------------------------------------


class RotaryEmbedding(nn.Module):
    """Rotates queries and keys by their positions (RoPE), with a cos/sin cache.

    Su et al. 2021. Holds no parameters: the float32 cos/sin tables are
    non-persistent buffers (not in ``state_dict``) that move with ``.to()``
    and grow on demand, so there is no maximum length. Float64 inputs,
    fractional or negative positions and ``rope_type="dynamic"`` (whose
    frequencies depend on the current length) bypass the cache and call
    :func:`rope_cos_sin` directly.

    With the ``"triton"`` backend no table is used at all: the fused kernel
    of ``posenc.triton_rope`` forms the angles from the positions and the
    frequencies and rotates ``q`` and ``k`` in one launch.

    Args:
        head_dim: Rotary dimension per head, even.
        base: Frequency base (``rope_theta``).
        scaling: ``None`` or a ``rope_parameters``-style dict (see
            :func:`rope_inv_freq`).
        layout: ``"half"`` or ``"interleaved"``.
        initial_len: Positions computed up front; the tables double when a
            larger position arrives.
        backend: ``"auto"``, ``"torch"`` or ``"triton"``; ``"auto"`` uses the
            Triton kernel for 4-D float32/float16/bfloat16 CUDA tensors when
            Triton is installed (see :func:`apply_rope`).
    """

    cos_cached: torch.Tensor
    sin_cached: torch.Tensor

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        scaling: Mapping | None = None,
        layout: str = "half",
        initial_len: int = 512,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        self.backend = check_choice("backend", backend, ROPE_BACKENDS)
        self.head_dim = check_even_dim("head_dim", head_dim)
        self.base = check_base("base", base)
        self.layout = check_choice("layout", layout, ROPE_LAYOUTS)
        self.scaling = _parse_scaling(scaling, self.base)
        check_nonnegative_int("initial_len", initial_len)
        _, self.attention_factor = rope_inv_freq(head_dim, base=self.base, scaling=self.scaling)
        self.dynamic = self.scaling["rope_type"] == "dynamic"
        cos, sin = self._table(torch.arange(initial_len), torch.float32)  # 2 x [n, d]
        self.register_buffer("cos_cached", cos, persistent=False)
        self.register_buffer("sin_cached", sin, persistent=False)
        self._split_freqs: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base:g}, layout={self.layout!r}, scaling={self.scaling}"

    def _table(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        return rope_cos_sin(
            positions, self.head_dim, base=self.base, scaling=self.scaling, layout=self.layout, dtype=dtype
        )

    def _ensure(self, length: int) -> None:
        if length > self.cos_cached.shape[0]:
            new_len = max(length, 2 * self.cos_cached.shape[0])
            positions = torch.arange(new_len, device=self.cos_cached.device)
            self.cos_cached, self.sin_cached = self._table(positions, self.cos_cached.dtype)

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype = torch.float32):
        """``(cos, sin)`` for ``positions``, each ``[*positions.shape, head_dim]``, from the cache when possible."""
        exact = dtype == torch.float64 or self.dynamic or positions.is_floating_point()
        if exact or positions.numel() == 0 or positions.min().item() < 0:
            return self._table(positions, torch.float64 if dtype == torch.float64 else torch.float32)
        self._ensure(positions.max().item() + 1)
        index = positions.to(self.cos_cached.device)
        return self.cos_cached[index].to(positions.device), self.sin_cached[index].to(positions.device)

    def _triton_freqs(self, device: torch.device, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The frequencies as a float32 head and tail on ``device``, cached unless they depend on the length."""
        from .triton_rope import split_frequencies

        if self.dynamic:
            inv_freq, _ = rope_inv_freq(self.head_dim, base=self.base, scaling=self.scaling, seq_len=seq_len)
            return split_frequencies(inv_freq, device=device)
        if device not in self._split_freqs:
            inv_freq, _ = rope_inv_freq(self.head_dim, base=self.base, scaling=self.scaling)
            self._split_freqs[device] = split_frequencies(inv_freq, device=device)
        return self._split_freqs[device]

    def _forward_triton(self, q, k, positions, offset, inplace):
        from .triton_rope import rope_qk_triton

        if positions is None:
            check_nonnegative_int("offset", offset)
            seq_len = offset + q.shape[-2]
        else:
            positions = torch.as_tensor(positions, device=q.device)
            seq_len = positions.max().item() + 1 if self.dynamic and positions.numel() else 0
        freqs = self._triton_freqs(q.device, seq_len)
        return rope_qk_triton(
            q, k, freqs, positions=positions, offset=offset, layout=self.layout,
            attention_factor=self.attention_factor, inplace=inplace,
        )

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
        for name, t in (("q", q), ("k", k)):
            if t.dim() < 2 or t.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} must have shape [..., seq_len, {self.head_dim}] (last dim = head_dim = "
                    f"{self.head_dim}), got {tuple(t.shape)}"
                )
        seq_len = q.shape[-2]
        if k.shape[-2] != seq_len:
            raise ValueError(f"k has length {k.shape[-2]} (dim -2), expected q's length {seq_len}")
        eligible = q.dim() == 4 and k.dim() == 4 and q.dtype in _TRITON_DTYPES and k.dtype in _TRITON_DTYPES
        if _use_triton(self.backend, (q, k), eligible=eligible):
            return self._forward_triton(q, k, positions, offset, inplace)
        if inplace and torch.is_grad_enabled() and any(t.requires_grad and t.is_leaf for t in (q, k)):
            raise ValueError("inplace=True cannot overwrite q or k: a leaf tensor that requires grad")
        dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        if positions is None:
            check_nonnegative_int("offset", offset)
            if self.dynamic or dtype == torch.float64:
                cos, sin = self.cos_sin(torch.arange(offset, offset + seq_len, device=q.device), dtype)
            else:
                self._ensure(offset + seq_len)
                cos = self.cos_cached[offset : offset + seq_len].to(q.device)  # [s, d]
                sin = self.sin_cached[offset : offset + seq_len].to(q.device)  # [s, d]
        else:
            if offset != 0:
                raise ValueError(f"pass either positions or offset, not both; got offset={offset} with positions")
            positions = torch.as_tensor(positions, device=q.device)
            if positions.dim() not in (1, 2) or positions.shape[-1] != seq_len:
                raise ValueError(
                    f"positions must have shape [{seq_len}] or [batch, {seq_len}] (seq_len = q.shape[-2]), "
                    f"got {tuple(positions.shape)}"
                )
            cos, sin = self.cos_sin(positions, dtype)  # [s, d] or [b, s, d]
            if positions.dim() == 2 and q.dim() == 4:
                cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [b, s, d] -> [b, 1, s, d]
        q_rot = apply_rope(q, cos, sin, layout=self.layout, backend="torch")
        k_rot = apply_rope(k, cos, sin, layout=self.layout, backend="torch")
        if inplace:
            return q.copy_(q_rot), k.copy_(k_rot)
        return q_rot, k_rot
