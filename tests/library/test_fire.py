"""FIRE: the normalised distance by hand, its range, ALiBi and T5 reproduced to the last bit, the module, bad input."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import (
    FIREBias,
    T5RelativeBias,
    alibi_bias,
    alibi_slopes,
    fire_alibi_layers,
    fire_bias,
    fire_distance,
    fire_mlp,
    fire_t5_layers,
)


def test_distance_by_hand():
    x = fire_distance(3, 5, c=2.0, threshold=3.0)  # queries at 2, 3, 4
    # query 4 > L = 3: divisor log(2 * 4 + 1); key 1 at distance 3
    assert x[2, 1].item() == pytest.approx(math.log(7) / math.log(9), rel=1e-15)
    # query 2 < L: divisor log(2 * 3 + 1)
    assert x[0, 0].item() == pytest.approx(math.log(5) / math.log(7), rel=1e-15)
    assert x[1, 3].item() == 0.0  # the query itself
    ident = fire_distance(2, 4, threshold=2.0, transform="identity")
    assert ident.tolist() == [[2 / 2, 1 / 2, 0.0, 0.0], [3 / 3, 2 / 3, 1 / 3, 0.0]]


@given(st.integers(1, 40), st.integers(0, 40), st.floats(0.01, 100.0), st.floats(0.5, 64.0))
def test_distance_lies_in_unit_interval_and_grows_with_distance(q_len, extra, c, threshold):
    k_len = q_len + extra
    x = fire_distance(q_len, k_len, c=c, threshold=threshold)
    assert x.min() >= 0.0 and x.max() <= 1.0 + 1e-15
    causal = torch.ones(q_len, k_len, dtype=torch.bool).tril(k_len - q_len)
    # along a row, nearer keys (larger j) have smaller inputs
    assert (x.diff(dim=1)[causal[:, 1:]] <= 0).all()


def test_interpolation_maps_every_length_into_the_same_range():
    """Past the threshold, the farthest key is always at input 1, whatever the length."""
    for n in (64, 512, 4096):
        x = fire_distance(1, n, c=1.0, threshold=32.0)[0]  # the query at n - 1 > L
        assert x[0].item() == 1.0  # the farthest key
        half = (n - 1) // 2  # a key halfway back: log(half + 1) / log(n)
        assert x[n - 1 - half].item() == pytest.approx(math.log1p(half) / math.log(n), rel=1e-14)


@pytest.mark.parametrize("num_heads", [1, 4, 8, 12])
@pytest.mark.parametrize("threshold", [256.0, 1024.0])
def test_identity_transform_reproduces_alibi_to_the_last_bit(num_heads, threshold):
    layers = fire_alibi_layers(alibi_slopes(num_heads), threshold=threshold)
    n = 200
    fire = fire_bias(n, n, layers, transform="identity", threshold=threshold)
    assert torch.equal(fire, alibi_bias(num_heads, n, n))
    # queries as the last rows of a longer cache: still ALiBi's bottom-right bias
    assert torch.equal(fire_bias(7, n, layers, transform="identity", threshold=threshold), alibi_bias(num_heads, 7, n))


def test_alibi_reproduction_stops_at_the_threshold():
    """Past L the divisor is i, not L: the bias is no longer ALiBi's."""
    layers = fire_alibi_layers(alibi_slopes(2), threshold=64.0)
    fire, alibi = fire_bias(100, 100, layers, transform="identity", threshold=64.0), alibi_bias(2, 100, 100)
    assert torch.equal(fire[:, :65], alibi[:, :65])
    assert not torch.equal(fire[:, 65:], alibi[:, 65:])


def _t5(seed: int, heads: int = 4, num_buckets: int = 32, max_distance: int = 128) -> T5RelativeBias:
    module = T5RelativeBias(num_heads=heads, bidirectional=False, num_buckets=num_buckets, max_distance=max_distance)
    with torch.no_grad():
        module.embedding.weight.copy_(torch.randn(num_buckets, heads, generator=torch.Generator().manual_seed(seed)))
    return module


@pytest.mark.parametrize("transform", ["log", "identity"])
@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (8, 20), (16, 300)])
def test_reproduces_t5_to_the_last_bit(transform, num_buckets, max_distance):
    t5 = _t5(num_buckets, num_buckets=num_buckets, max_distance=max_distance)
    layers = fire_t5_layers(
        t5.embedding.weight, num_buckets=num_buckets, max_distance=max_distance, threshold=400.0, transform=transform
    )
    n = 401  # queries at 0 .. 400 = L
    fire, table = fire_bias(n, n, layers, threshold=400.0, transform=transform), t5(n, n)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    assert torch.equal(fire[:, causal], table[:, causal])
    assert torch.isneginf(fire[:, ~causal]).all()


@given(st.integers(0, 2**31 - 1), st.floats(0.05, 20.0))
def test_reproduces_t5_for_any_table_and_c(seed, c):
    t5 = _t5(seed, heads=2)
    layers = fire_t5_layers(t5.embedding.weight, c=c, threshold=160.0)
    fire, table = fire_bias(161, 161, layers, c=c, threshold=160.0), t5(161, 161)
    causal = torch.ones(161, 161, dtype=torch.bool).tril()
    assert torch.equal(fire[:, causal], table[:, causal])


def test_mlp_by_hand():
    layers = [
        (torch.tensor([[1.0], [-1.0]]), torch.tensor([0.0, 0.5])),
        (torch.tensor([[2.0, 3.0]]), torch.tensor([1.0])),
    ]
    x = torch.tensor([0.25, 1.0])
    # relu([x, 0.5 - x]) . [2, 3] + 1
    assert fire_mlp(x, layers)[:, 0].tolist() == [1 + 2 * 0.25 + 3 * 0.25, 1 + 2 * 1.0]


def test_module_learns_c_and_threshold_and_gives_the_functional_bias():
    torch.manual_seed(0)
    module = FIREBias(3, hidden=8)
    bias = module(5, 9)
    assert bias.shape == (3, 5, 9) and bias.dtype == torch.float32
    expected = fire_bias(5, 9, module.layers(), c=module.c, threshold=module.threshold)
    assert torch.equal(bias, expected)
    bias[torch.isfinite(bias)].sum().backward()
    assert module.c.grad is not None and module.threshold.grad is not None and module.mlp_in.weight.grad is not None
    fixed = FIREBias(2, learn_transform=False)
    assert not fixed.c.requires_grad and {n for n, p in fixed.named_parameters() if p.requires_grad} == {
        "mlp_in.weight",
        "mlp_in.bias",
        "mlp_out.weight",
        "mlp_out.bias",
    }


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: fire_distance(5, 3), ValueError, r"q_len must be <= k_len .*got 5 > 3"),
        (lambda: fire_distance(2, 3, c=0.0), ValueError, r"c must be a finite number > 0, got 0\.0"),
        (lambda: fire_distance(2, 3, threshold=float("nan")), ValueError, r"threshold must be a finite number > 0"),
        (lambda: fire_distance(2, 3, transform="sqrt"), ValueError, r"transform must be one of 'log', 'identity'"),
        (lambda: fire_distance(2, 3, c="1"), TypeError, r"c must be a number or a one-element float tensor"),
        (lambda: fire_bias(2, 3, []), TypeError, r"layers must be a non-empty sequence"),
        (
            lambda: fire_bias(2, 3, [(torch.zeros(4, 2), torch.zeros(4))]),
            ValueError,
            r"layers\[0\] must be weight \[out, 1\] and bias \[out\], got weight \(4, 2\)",
        ),
        (
            lambda: fire_alibi_layers(torch.zeros(2, 2)),
            ValueError,
            r"slopes must have shape \[num_heads\], got \(2, 2\)",
        ),
        (lambda: fire_t5_layers(torch.zeros(8, 2)), ValueError, r"table must have shape \[num_buckets, num_heads\]"),
        (lambda: FIREBias(0), ValueError, r"num_heads must be >= 1, got 0"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_t5_layers_for_a_huge_threshold_stay_small():
    """Every bucket boundary lies below max_distance: the network does not grow with L."""
    t5 = _t5(1, heads=2)
    layers = fire_t5_layers(t5.embedding.weight, threshold=1e9)
    assert [tuple(w.shape) for w, _ in layers] == [(31, 1), (31, 31), (32, 31), (2, 32)]
    causal = torch.ones(300, 300, dtype=torch.bool).tril()
    assert torch.equal(fire_bias(300, 300, layers, threshold=1e9)[:, causal], t5(300, 300)[:, causal])
