"""ALiBi: slopes by hand and against transformers (MPT, BLOOM), the bias, the module, bad input."""

import math
import subprocess
import sys

import pytest
import torch
from helpers import rand
from hypothesis import given
from hypothesis import strategies as st
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

from posenc import ALiBiBias, MultiHeadSelfAttention, alibi_bias, alibi_slopes, scaled_dot_product_attention

lengths = st.integers(1, 12)


def test_slopes_by_hand():
    assert alibi_slopes(8).tolist() == [2.0**-k for k in range(1, 9)]  # the paper's 1/2 .. 1/256
    assert alibi_slopes(1).tolist() == [2.0**-8]
    assert alibi_slopes(2).tolist() == [2.0**-4, 2.0**-8]
    assert alibi_slopes(3).tolist() == [2.0**-4, 2.0**-8, 2.0**-2]  # 2 heads, then the first odd one of 4
    sixteen = alibi_slopes(16, dtype=torch.float64)
    assert sixteen[0].item() == pytest.approx(2**-0.5, rel=1e-15)
    assert torch.allclose(sixteen[1:] / sixteen[:-1], torch.full((15,), 2**-0.5, dtype=torch.float64), rtol=1e-15)
    twelve = alibi_slopes(12, dtype=torch.float64)
    expected = [2.0**-k for k in range(1, 9)] + [2.0 ** -(k / 2) for k in (1, 3, 5, 7)]
    assert twelve.tolist() == pytest.approx(expected, rel=1e-15)


@given(st.integers(1, 256))
def test_slopes_are_the_rule_for_any_head_count(n):
    slopes = alibi_slopes(n, dtype=torch.float64)
    n0 = 2 ** math.floor(math.log2(n))
    expected = [2.0 ** (-8 * k / n0) for k in range(1, n0 + 1)] + [
        2.0 ** (-8 * k / (2 * n0)) for k in range(1, 2 * (n - n0), 2)
    ]
    assert slopes.tolist() == pytest.approx(expected, rel=1e-15)
    assert slopes.unique().numel() == n and 0 < slopes.min() and slopes.max() < 1
    assert torch.equal(alibi_slopes(n), slopes.float())  # float32: one rounding of the exact value


@pytest.mark.parametrize("num_heads", range(1, 65))
def test_slopes_identical_to_mpt_in_transformers(num_heads):
    mpt = -build_mpt_alibi_tensor(num_heads, 2)[:, 0, 0]  # [h, 1, s]: slope * (j - (s - 1)), j = 0
    assert torch.equal(alibi_slopes(num_heads), mpt)


def float32_ulps(a, b):
    return (a.view(torch.int32).long() - b.view(torch.int32).long()).abs().max().item()


@pytest.mark.parametrize("num_heads", range(1, 65))
def test_slopes_match_bloom_in_transformers(num_heads):
    bloom = build_alibi_tensor(torch.ones(1, 2), num_heads, torch.float32)[:, 0, 1]  # slope * key position 1
    ours = alibi_slopes(num_heads)
    if num_heads <= 9:  # powers of exactly representable ratios, and 2 ** -0.5 itself
        assert torch.equal(ours, bloom)
    # BLOOM raises a float32 ratio to integer powers; the rounding of the ratio grows with the power
    # (6 ulp at most here; 8 leaves room for a pow that is faithful rather than correctly rounded).
    assert float32_ulps(ours, bloom) <= 8
    assert torch.allclose(ours, bloom, rtol=1e-6, atol=0)


@pytest.mark.parametrize("num_heads", range(1, 65))
def test_geometric_slopes_identical_to_bloom_in_transformers(num_heads):
    bloom = build_alibi_tensor(torch.ones(1, 2), num_heads, torch.float32)[:, 0, 1]  # slope * key position 1
    geometric = alibi_slopes(num_heads, method="geometric")
    assert torch.equal(geometric, bloom)
    exact = alibi_slopes(num_heads, dtype=torch.float64)
    assert torch.allclose(geometric.double(), exact, rtol=1e-6, atol=0)  # both are the paper's rule


@pytest.mark.parametrize("num_heads", [1, 3, 8, 12, 16, 40, 64])
def test_attention_with_bloom_alibi_is_the_same(num_heads):
    # BLOOM adds +m * j; the paper's -m * (i - j) differs by m * i per row, which the softmax removes.
    s = 9
    q, k, v = rand(num_heads, s, 8, seed=1), rand(num_heads, s, 8, seed=2), rand(num_heads, s, 4, seed=3)
    bloom = build_alibi_tensor(torch.ones(1, s), num_heads, torch.float32).double()  # [h, 1, s]
    ref, ref_w = scaled_dot_product_attention(q, k, v, bias=bloom, causal=True)
    out, w = scaled_dot_product_attention(q, k, v, bias=alibi_bias(num_heads, s, s, dtype=torch.float64))
    assert torch.allclose(w, ref_w, atol=1e-6) and torch.allclose(out, ref, atol=1e-6)


def test_bias_by_hand():
    bias = alibi_bias(2, 2, 4, offset=1)  # queries at 1, 2; slopes 1/16, 1/256
    inf = float("inf")
    assert bias[0].tolist() == [[-1 / 16, 0.0, -inf, -inf], [-2 / 16, -1 / 16, 0.0, -inf]]
    assert bias[1].tolist() == [[-1 / 256, 0.0, -inf, -inf], [-2 / 256, -1 / 256, 0.0, -inf]]
    both = alibi_bias(2, 2, 4, offset=1, causal=False)
    assert both[0].tolist() == [[-1 / 16, 0.0, -1 / 16, -2 / 16], [-2 / 16, -1 / 16, 0.0, -1 / 16]]
    assert alibi_bias(1, 1, 1).tolist() == [[[0.0]]]


@given(st.integers(1, 16), lengths, lengths, st.integers(0, 40), st.integers(0, 40), st.booleans())
def test_bias_depends_only_on_the_relative_position(h, q_len, k_len, offset, t, causal):
    bias = alibi_bias(h, q_len, k_len, offset=offset, causal=causal)
    assert bias.shape == (h, q_len, k_len) and bias.dtype == torch.float32
    assert torch.equal(alibi_bias(h, q_len, k_len + t, offset=offset + t, causal=causal)[..., t:], bias)
    assert torch.equal(bias[:, 1:, 1:], bias[:, :-1, :-1])
    if not causal:
        assert torch.all(bias <= 0) and torch.isfinite(bias).all()


@given(st.integers(1, 16), st.integers(1, 30))
def test_causal_bias_masks_the_future_and_serves_a_kv_cache(h, s):
    full = alibi_bias(h, s, s)
    future = torch.ones(s, s, dtype=torch.bool).triu(1)
    assert torch.all(full[:, future] == -torch.inf) and torch.isfinite(full[:, ~future]).all()
    assert torch.all(full.diagonal(dim1=-2, dim2=-1) == 0)
    assert torch.equal(alibi_bias(h, 1, s, offset=s - 1), full[:, -1:])  # decoding the last token


def test_bias_in_other_dtypes_is_rounded_once():
    exact = alibi_bias(12, 20, 20, causal=False, dtype=torch.float64)
    for dtype in (torch.bfloat16, torch.float16):
        assert torch.equal(alibi_bias(12, 20, 20, causal=False, dtype=dtype), exact.to(dtype))
    slopes = alibi_slopes(12).double().view(-1, 1)  # float32 slopes times exact distances
    assert torch.equal(exact[:, -1, :], -slopes * torch.arange(19, -1, -1, dtype=torch.float64))


def test_module_has_no_state_and_plugs_into_attention():
    module = ALiBiBias(4)
    assert module.state_dict() == {} and list(module.parameters()) == []
    assert torch.equal(module.slopes, alibi_slopes(4))
    assert torch.equal(module(5, 7, offset=2), alibi_bias(4, 5, 7, offset=2))
    assert torch.equal(ALiBiBias(4, causal=False)(3, 3), alibi_bias(4, 3, 3, causal=False))
    torch.manual_seed(0)
    layer = MultiHeadSelfAttention(16, 4)
    _, w = layer(torch.randn(2, 6, 16), bias=module(6, 6))
    assert torch.all(w.triu(1) == 0) and torch.allclose(w.sum(-1), torch.ones(2, 4, 6))


def test_no_maximum_length():
    far = alibi_bias(8, 1, 100_000, offset=99_999)  # one query after 100k tokens
    assert far[0, 0, 0].item() == pytest.approx(-0.5 * 99_999)
    assert far[-1, 0, -1].item() == 0.0


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: alibi_slopes(0), r"num_heads must be >= 1, got 0"),
        (lambda: alibi_slopes(-3), r"num_heads must be >= 1, got -3"),
        (lambda: alibi_slopes(8.0), r"num_heads must be an int >= 1, got 8.0"),
        (lambda: alibi_bias(0, 3, 3), r"num_heads must be >= 1, got 0"),
        (lambda: alibi_bias(4, 0, 3), r"q_len must be >= 1, got 0"),
        (lambda: alibi_bias(4, 3, 0), r"k_len must be >= 1, got 0"),
        (lambda: alibi_bias(4, 3, 3, offset=-1), r"offset must be >= 0, got -1"),
        (lambda: ALiBiBias(0), r"num_heads must be >= 1, got 0"),
    ],
)
def test_bad_input_names_argument_and_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in kilobytes on Linux")
def test_alibi_bias_peak_memory_stays_near_its_output_size():
    """32 heads x 2048 x 2048 in bfloat16 is 256 MiB; building it must not need 8x that in float64 on the way."""
    code = (
        "import resource, torch, posenc\n"
        "posenc.alibi_bias(2, 8, 8)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "bias = posenc.alibi_bias(32, 2048, 2048, dtype=torch.bfloat16)\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print((after - before) * 1024 / (bias.numel() * bias.element_size()))\n"
    )
    ratio = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert ratio < 2.0, f"peak memory grew by {ratio:.2f}x the result's size"
