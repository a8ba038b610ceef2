"""FIRE: functional interpolation for relative positions (Li et al. 2024).

A learned additive bias, like T5's, but a function instead of a table: a small MLP
``f`` reads the query-key distance after a log transform and a division by the
query's own position,

    b(i, j) = f( psi(i - j) / psi(max(L, i)) ),    psi(x) = log(c x + 1),

with ``c > 0`` and the threshold ``L`` learned too. Dividing by ``psi(i)`` maps every
distance a query can see into ``[0, 1]`` whatever the sequence length (progressive
interpolation); below the threshold ``L`` the divisor stays ``psi(L)``, so short
sequences keep their absolute distances apart.

The bias is causal, as in the paper's language models: keys after the query get
``-inf``. Queries are the last ``q_len`` of the ``k_len`` keys (bottom-right, as in a KV
cache), so query row ``r`` sits at position ``i = k_len - q_len + r``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from ._checks import check_bias_size, check_choice, check_float_dtype, check_float_tensor, check_positive_int
from .t5 import t5_relative_position_bucket

#: The transforms of the distance :func:`fire_bias` accepts: the paper's ``"log"``,
#: ``psi(x) = log(c x + 1)``, and ``"identity"``, ``psi(x) = x``, its limit as ``c -> 0``
#: (``log(c x + 1) / log(c L + 1) -> x / L``).
FIRE_TRANSFORMS = ("log", "identity")


def _check_scalar(name: str, value, minimum: float) -> torch.Tensor:
    """``value`` (a number or a one-element float tensor, kept differentiable) as a float64 tensor > ``minimum``."""
    if isinstance(value, torch.Tensor):
        check_float_tensor(name, value)
        if value.numel() != 1:
            raise ValueError(f"{name} must be a number or a one-element tensor, got shape {tuple(value.shape)}")
        scalar = value.reshape(()).double()  # [] float64, differentiable
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        scalar = torch.tensor(float(value), dtype=torch.float64)
    else:
        raise TypeError(f"{name} must be a number or a one-element float tensor, got {value!r:.80}")
    if torch.compiler.is_compiling():  # a branch on values breaks the graph: assert instead
        torch._assert_async(
            torch.isfinite(scalar) & (scalar > minimum), f"{name} must be a finite number > {minimum:g}"
        )
        return scalar
    found = float(scalar.detach())
    if not math.isfinite(found) or found <= minimum:
        raise ValueError(f"{name} must be a finite number > {minimum:g}, got {found}")
    return scalar


def fire_distance(
    q_len: int,
    k_len: int,
    *,
    c: float | torch.Tensor = 1.0,
    threshold: float | torch.Tensor = 512.0,
    transform: str = "log",
    device=None,
) -> torch.Tensor:
    """FIRE's normalised distance ``psi(i - j) / psi(max(L, i))``, the input of its MLP.

    Li et al. 2024, "Functional Interpolation for Relative Positions Improves Long
    Context Transformers", equation (5). Query row ``r`` sits at ``i = k_len - q_len + r``,
    key ``j`` at ``j``. Keys after the query (``j > i``) get distance 0 here; :func:`fire_bias`
    masks them.

    Args:
        q_len: Number of queries, >= 1 and <= ``k_len``.
        k_len: Number of keys, >= 1.
        c: The log transform's scale, > 0 (a number or a one-element tensor, which may be learned).
        threshold: ``L``, > 0: below it the divisor is ``psi(L)``.
        transform: ``"log"`` (the paper's) or ``"identity"`` (``psi(x) = x``, the limit ``c -> 0``).
        device: Device of the result (by default that of a tensor ``c`` or ``threshold``).

    Returns:
        float64 tensor ``[q_len, k_len]``, in ``[0, 1]`` (``i - j <= max(L, i)`` and ``psi`` grows);
        differentiable in tensor ``c`` and ``threshold``.

    Raises:
        ValueError: If a length is not an int >= 1, ``q_len > k_len``, ``c`` or ``threshold``
            is not a finite number > 0, or ``transform`` is unknown.
        TypeError: If ``c`` or ``threshold`` is neither a number nor a float tensor.
    """
    check_positive_int("q_len", q_len)
    check_positive_int("k_len", k_len)
    if q_len > k_len:
        raise ValueError(f"q_len must be <= k_len (the queries are the last q_len keys), got {q_len} > {k_len}")
    check_choice("transform", transform, FIRE_TRANSFORMS)
    c_, big_l = _check_scalar("c", c, 0.0), _check_scalar("threshold", threshold, 0.0)
    if device is None:
        device = next((t.device for t in (c, threshold) if isinstance(t, torch.Tensor)), None)
    c_, big_l = c_.to(device), big_l.to(device)
    i = torch.arange(k_len - q_len, k_len, dtype=torch.float64, device=device)[:, None]  # [q, 1]
    j = torch.arange(k_len, dtype=torch.float64, device=device)[None, :]  # [1, k]
    distance = (i - j).clamp(min=0.0)  # [q, k]: i - j at or before the query, 0 after it
    scale = torch.maximum(big_l, i)  # [q, 1]: max(L, i)
    if transform == "identity":
        # psi(x) = x: (i - j) / max(L, i)
        return distance / scale
    # psi(x) = log(c x + 1), taken as log1p(c x)
    return torch.log1p(c_ * distance) / torch.log1p(c_ * scale)


def _check_layers(layers) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``layers`` as a list of ``(weight [out, in], bias [out])`` that chain from 1 input."""
    if not isinstance(layers, Sequence) or isinstance(layers, (str, bytes)) or len(layers) == 0:
        raise TypeError(f"layers must be a non-empty sequence of (weight, bias) pairs, got {layers!r:.80}")
    width = 1
    checked = []
    for n, layer in enumerate(layers):
        if not isinstance(layer, Sequence) or len(layer) != 2:
            raise TypeError(f"layers[{n}] must be a (weight, bias) pair, got {layer!r:.80}")
        weight = check_float_tensor(f"layers[{n}] weight", layer[0])
        bias = check_float_tensor(f"layers[{n}] bias", layer[1])
        if weight.dim() != 2 or weight.shape[1] != width or bias.shape != (weight.shape[0],):
            raise ValueError(
                f"layers[{n}] must be weight [out, {width}] and bias [out], got weight {tuple(weight.shape)} "
                f"and bias {tuple(bias.shape)}"
            )
        width = weight.shape[0]
        checked.append((weight, bias))
    return checked


def fire_mlp(x: torch.Tensor, layers) -> torch.Tensor:
    """FIRE's ``f``: a ReLU MLP from one input to one output per head, applied to every entry of ``x``.

    Args:
        x: Float tensor of normalised distances, any shape ``[*]``.
        layers: ``[(weight [out, in], bias [out]), ...]``, the first with ``in = 1``; ReLU
            between layers, none after the last. Computed in float64.

    Returns:
        float64 tensor ``[*x.shape, out]`` where ``out`` is the last layer's width (the heads).

    Raises:
        TypeError: If ``x`` is not a float tensor or ``layers`` is not a sequence of pairs.
        ValueError: If the layers' shapes do not chain from one input.
    """
    check_float_tensor("x", x)
    layers = _check_layers(layers)
    h = x.double().unsqueeze(-1)  # [*, 1]
    for n, (weight, bias) in enumerate(layers):
        # h W^T + b, then ReLU except after the last layer
        h = torch.nn.functional.linear(h, weight.double(), bias.double())  # [*, out]
        if n < len(layers) - 1:
            h = torch.relu(h)
    return h


def fire_bias(
    q_len: int,
    k_len: int,
    layers,
    *,
    c: float | torch.Tensor = 1.0,
    threshold: float | torch.Tensor = 512.0,
    transform: str = "log",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """FIRE's causal attention bias ``[num_heads, q_len, k_len]``.

    Li et al. 2024, equation (5): ``b(i, j) = f(psi(i - j) / psi(max(L, i)))`` for keys at or
    before the query, ``-inf`` after it. ``f`` is :func:`fire_mlp` with the given layers; the
    distance is :func:`fire_distance`. Computed in float64 and rounded once to ``dtype``.

    Args:
        q_len: Number of queries, >= 1 and <= ``k_len`` (the last ``q_len`` keys).
        k_len: Number of keys, >= 1.
        layers: The MLP's ``[(weight [out, in], bias [out]), ...]``; ``out`` of the last is the
            number of heads.
        c: The log transform's scale, > 0.
        threshold: ``L``, > 0.
        transform: ``"log"`` or ``"identity"`` (see :data:`FIRE_TRANSFORMS`).
        dtype: Floating dtype of the result.

    Returns:
        ``[num_heads, q_len, k_len]``, differentiable in the layers, ``c`` and ``threshold``.

    Raises:
        ValueError: As :func:`fire_distance` and :func:`fire_mlp`, or if the bias would be too large.
        TypeError: If ``dtype`` is not a floating dtype, or as :func:`fire_distance` and :func:`fire_mlp`.
    """
    check_float_dtype("dtype", dtype)
    layers = _check_layers(layers)
    check_bias_size(q_len, k_len, layers[-1][0].shape[0])
    x = fire_distance(q_len, k_len, c=c, threshold=threshold, transform=transform, device=layers[0][0].device)
    bias = fire_mlp(x, layers).permute(2, 0, 1)  # [q, k, h] -> [h, q, k]
    future = torch.ones(q_len, k_len, dtype=torch.bool, device=x.device).triu(k_len - q_len + 1)  # j > i
    return bias.masked_fill(future, float("-inf")).to(dtype)


def fire_alibi_layers(slopes: torch.Tensor, *, threshold: float = 512.0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """FIRE parameters that give ALiBi's causal bias, with ``transform="identity"``.

    With ``psi(x) = x`` and every query at a position ``i <= L``, the input is
    ``(i - j) / L``; the linear ``f(x) = -m L x`` gives ``-m (i - j)``, ALiBi's bias. With
    ``L`` a power of two every step is exact in float64, so :func:`fire_bias` rounds the
    same number as :func:`posenc.alibi_bias` does: the two agree to the last bit. The paper's
    ``psi(x) = log(c x + 1)`` cannot give it with a linear ``f``: ``f`` would have to undo the log.

    Args:
        slopes: Float tensor ``[num_heads]``, ALiBi's slopes (:func:`posenc.alibi_slopes`).
        threshold: ``L``, > 0: the bias is ALiBi's for queries at positions up to ``L``.

    Returns:
        One layer ``[(weight [num_heads, 1], bias [num_heads])]``, float64.

    Raises:
        ValueError: If ``slopes`` is not 1-D or ``threshold`` is not a finite number > 0.
        TypeError: If ``slopes`` is not a float tensor.
    """
    check_float_tensor("slopes", slopes)
    if slopes.dim() != 1 or slopes.numel() == 0:
        raise ValueError(f"slopes must have shape [num_heads], got {tuple(slopes.shape)}")
    big_l = float(_check_scalar("threshold", threshold, 0.0))
    # f(x) = -m L x: weight -m L, no bias
    weight = (-slopes.detach().double() * big_l)[:, None]  # [h, 1]
    return [(weight, torch.zeros_like(weight[:, 0]))]


def fire_t5_layers(
    table: torch.Tensor,
    *,
    num_buckets: int = 32,
    max_distance: int = 128,
    c: float = 1.0,
    threshold: float = 512.0,
    transform: str = "log",
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """FIRE parameters that give T5's causal bucketed bias, for any transform.

    For queries at positions ``i <= L`` the input ``x = psi(i - j) / psi(L)`` grows with
    the distance alone, so a step function of ``x`` that steps between consecutive distances
    where the bucket changes is T5's bias. A ReLU MLP builds it exactly:

    * hidden layer 1, one unit per bucket boundary ``d_k``: a steep ramp
      ``relu(s_k (x - m_k))``, ``m_k`` halfway between the inputs of ``d_k - 1`` and ``d_k``
      and ``s_k`` four over their gap: 0 below the boundary, 2 or more above;
    * hidden layer 2: ``relu(1 - ramp_k)``, exactly 1 before boundary ``k`` and 0 after;
    * hidden layer 3: ``relu(below_{k+1} - below_k)``, exactly 1 for the bucket the distance
      is in and 0 for the others (a one-hot bucket);
    * output: the one-hot times the table, ``table[bucket, h]`` with a single nonzero term.

    Every value that reaches the output is exact, so :func:`fire_bias` returns the table's
    entries to the last bit. The paper's MLP has one hidden layer; with one, the same ramps
    give T5 in exact arithmetic but floating point leaves a rounding error.

    Args:
        table: Float tensor ``[num_buckets, num_heads]`` (``T5RelativeBias(..., bidirectional=False)
            .embedding.weight``).
        num_buckets: T5's number of buckets (causal).
        max_distance: T5's ``max_distance``.
        c: FIRE's ``c`` for ``transform="log"``.
        threshold: ``L``: the bias is T5's for queries at positions up to ``L``.
        transform: ``"log"`` or ``"identity"``.

    Returns:
        Four layers ``[(weight, bias), ...]``, float64.

    Raises:
        ValueError: If ``table`` is not ``[num_buckets, num_heads]``, the bucket arguments are
            out of range, ``c`` or ``threshold`` is not > 0, or ``transform`` is unknown.
        TypeError: If ``table`` is not a float tensor.
    """
    check_float_tensor("table", table)
    if table.dim() != 2 or table.shape[0] != num_buckets:
        raise ValueError(
            f"table must have shape [num_buckets, num_heads] = [{num_buckets}, h], got {tuple(table.shape)}"
        )
    big_l = float(_check_scalar("threshold", threshold, 0.0))
    # every bucket boundary lies below max_distance: distances 0 .. min(floor(L), max_distance) hold them all
    distances = torch.arange(min(int(big_l), max_distance) + 1, dtype=torch.float64)  # [D]
    buckets = t5_relative_position_bucket(
        -distances.long(), bidirectional=False, num_buckets=num_buckets, max_distance=max_distance
    )  # [D]: the bucket of each distance i - j
    fire_distance(1, 1, c=c, threshold=threshold, transform=transform)  # checks c, threshold and transform
    c_ = torch.tensor(float(c), dtype=torch.float64)
    scale = torch.tensor(big_l, dtype=torch.float64)
    # the inputs of every distance for a query at i <= L: psi(d) / psi(L), as fire_distance computes them
    x = distances / scale if transform == "identity" else torch.log1p(c_ * distances) / torch.log1p(c_ * scale)
    edges = torch.nonzero(buckets[1:] != buckets[:-1]).flatten() + 1  # [K]: first distance of each new bucket
    lo, hi = x[edges - 1], x[edges]  # [K] each
    slope = 4.0 / (hi - lo)  # [K]
    middle = (lo + hi) / 2
    n_edges = edges.numel()
    # layer 1: ramp_k = relu(s_k x - s_k m_k)
    w1, b1 = slope[:, None], -slope * middle  # [K, 1], [K]
    # layer 2: below_k = relu(1 - ramp_k)
    w2, b2 = -torch.eye(n_edges, dtype=torch.float64), torch.ones(n_edges, dtype=torch.float64)  # [K, K], [K]
    # layer 3: onehot_b = relu(below_{b+1} - below_b), with below_0 = 0 and below_{K+1} = 1
    w3 = torch.zeros(n_edges + 1, n_edges, dtype=torch.float64)  # [K + 1, K]
    b3 = torch.zeros(n_edges + 1, dtype=torch.float64)
    for b in range(n_edges + 1):
        if b < n_edges:
            w3[b, b] = 1.0
        else:
            b3[b] = 1.0
        if b > 0:
            w3[b, b - 1] = -1.0
    # output: table[bucket of segment b, h]
    segment_bucket = buckets[torch.cat([torch.zeros(1, dtype=torch.long), edges])]  # [K + 1]
    w4 = table.detach().double()[segment_bucket].T.contiguous()  # [h, K + 1]
    b4 = torch.zeros(table.shape[1], dtype=torch.float64)
    return [(w1, b1), (w2, b2), (w3, b3), (w4, b4)]


class FIREBias(nn.Module):
    """FIRE as a module: the MLP, ``c`` and ``L`` as parameters; returns the bias for given lengths.

    Li et al. 2024. The paper's setting: an MLP with one hidden ReLU layer of width 32,
    ``c`` and the threshold ``L`` learned. Pass the result as ``bias`` to
    :func:`posenc.scaled_dot_product_attention`.

    Args:
        num_heads: Number of heads (outputs of the MLP), >= 1.
        hidden: Width of the hidden layer, >= 1.
        c: Initial ``c``, > 0.
        threshold: Initial ``L``, > 0.
        transform: ``"log"`` or ``"identity"``.
        learn_transform: Learn ``c`` and ``L`` (True, the paper's) or keep them fixed.

    Raises:
        ValueError: If a count is not an int >= 1, ``c`` or ``threshold`` is not > 0, or
            ``transform`` is unknown.
        TypeError: If ``learn_transform`` is not a bool.
    """

    def __init__(
        self,
        num_heads: int,
        *,
        hidden: int = 32,
        c: float = 1.0,
        threshold: float = 512.0,
        transform: str = "log",
        learn_transform: bool = True,
    ) -> None:
        super().__init__()
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.hidden = check_positive_int("hidden", hidden)
        self.transform = check_choice("transform", transform, FIRE_TRANSFORMS)
        if not isinstance(learn_transform, bool):
            raise TypeError(f"learn_transform must be True or False, got {learn_transform!r:.80}")
        c_t = _check_scalar("c", c, 0.0).float()
        l_t = _check_scalar("threshold", threshold, 0.0).float()
        self.c = nn.Parameter(c_t, requires_grad=learn_transform)
        self.threshold = nn.Parameter(l_t, requires_grad=learn_transform)
        self.mlp_in = nn.Linear(1, hidden)
        self.mlp_out = nn.Linear(hidden, num_heads)

    def layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The MLP as :func:`fire_bias` takes it."""
        return [(self.mlp_in.weight, self.mlp_in.bias), (self.mlp_out.weight, self.mlp_out.bias)]

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, hidden={self.hidden}, transform={self.transform!r}"

    def forward(self, q_len: int, k_len: int) -> torch.Tensor:
        """The bias ``[num_heads, q_len, k_len]`` in the parameters' dtype (float32 or wider)."""
        dtype = torch.promote_types(self.mlp_out.weight.dtype, torch.float32)
        return fire_bias(
            q_len, k_len, self.layers(), c=self.c, threshold=self.threshold, transform=self.transform, dtype=dtype
        )
