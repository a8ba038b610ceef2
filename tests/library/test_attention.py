"""Scaled dot-product attention: hand-checked cases, symmetry properties, bad input."""

import math

import pytest
import torch
from helpers import rand
from hypothesis import given
from hypothesis import strategies as st

from posenc import MultiHeadSelfAttention, SinusoidalPositionalEncoding, scaled_dot_product_attention


def test_equal_scores_average_the_values():
    q, k = torch.zeros(1, 3, 4), torch.zeros(1, 5, 4)
    v = torch.arange(10.0).view(1, 5, 2)
    out, w = scaled_dot_product_attention(q, k, v)
    assert torch.allclose(w, torch.full((1, 3, 5), 0.2))
    assert torch.allclose(out, torch.tensor([[4.0, 5.0]]).expand(1, 3, 2))


def test_two_keys_by_hand():
    q = torch.tensor([[1.0, 0.0]])
    k = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    v = torch.tensor([[1.0], [0.0]])
    out, w = scaled_dot_product_attention(q, k, v)
    p = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1)
    assert w[0, 0].item() == pytest.approx(p, rel=1e-6)
    assert out.item() == pytest.approx(p, rel=1e-6)


def test_matches_torch_sdpa_with_bias_and_causal():
    q, k, v = rand(2, 3, 6, 8, seed=1), rand(2, 3, 6, 8, seed=2), rand(2, 3, 6, 5, seed=3)
    bias = rand(3, 6, 6, seed=4)
    out, _ = scaled_dot_product_attention(q, k, v, bias=bias)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    assert torch.allclose(out, ref, atol=1e-12)
    out, w = scaled_dot_product_attention(q, k, v, causal=True)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.allclose(out, ref, atol=1e-12)
    assert torch.all(w.triu(1) == 0)


def test_causal_with_cache_sees_all_past_keys():
    q, k, v = rand(2, 4, seed=5), rand(7, 4, seed=6), rand(7, 3, seed=7)
    _, w = scaled_dot_product_attention(q, k, v, causal=True)
    assert (w[0] > 0).tolist() == [True] * 6 + [False]
    assert (w[1] > 0).all()


@pytest.mark.claim("000-01", "002-30", "004-01")
@given(st.integers(2, 12), st.integers(1, 16), st.integers(0, 2**31 - 1))
def test_without_positions_attention_is_permutation_equivariant(s, d, seed):
    x = rand(s, d, seed=seed)
    perm = torch.randperm(s, generator=torch.Generator().manual_seed(seed + 1))
    out, _ = scaled_dot_product_attention(x, x, x)
    out_p, _ = scaled_dot_product_attention(x[perm], x[perm], x[perm])
    assert torch.allclose(out_p, out[perm], rtol=0, atol=1e-12)


@pytest.mark.claim("000-13", "000-15", "002-03", "003-02", "004-14")
@given(st.integers(0, 2**31 - 1))
def test_multihead_layer_is_equivariant_and_positions_break_it(seed):
    torch.manual_seed(seed)
    layer = MultiHeadSelfAttention(16, 4).double()
    x = rand(1, 6, 16, seed=seed)
    perm = torch.tensor([5, 0, 3, 1, 4, 2])
    out, _ = layer(x)
    out_p, _ = layer(x[:, perm])
    assert torch.allclose(out_p, out[:, perm], atol=1e-12)
    pe = SinusoidalPositionalEncoding(16).double()
    with_pe, _ = layer(pe(x))
    with_pe_p, _ = layer(pe(x[:, perm]))
    assert (with_pe_p - with_pe[:, perm]).abs().max() > 1e-3


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: scaled_dot_product_attention(torch.zeros(3, 4), torch.zeros(3, 5), torch.zeros(3, 5)),
            r"k has shape \(3, 5\), expected last dim 4",
        ),
        (
            lambda: scaled_dot_product_attention(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(2, 4)),
            r"v has shape \(2, 4\), expected length 3",
        ),
        (
            lambda: scaled_dot_product_attention(
                torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 4), bias=torch.zeros(3, 2)
            ),
            r"bias has shape \(3, 2\)",
        ),
        (
            lambda: scaled_dot_product_attention(
                torch.zeros(2, 3, 4), torch.zeros(2, 3, 4), torch.zeros(2, 3, 4), bias=torch.zeros(5, 3, 3)
            ),
            r"bias has shape \(5, 3, 3\)",
        ),
        (
            lambda: scaled_dot_product_attention(torch.zeros(5, 4), torch.zeros(3, 4), torch.zeros(3, 4), causal=True),
            r"q_len <= k_len, got q_len=5, k_len=3",
        ),
        (lambda: scaled_dot_product_attention(torch.zeros(4), torch.zeros(4), torch.zeros(4)), r"at least 2 dims"),
        (lambda: MultiHeadSelfAttention(10, 3), r"dim must be divisible by num_heads, got dim=10, num_heads=3"),
        (lambda: MultiHeadSelfAttention(8, 0), r"num_heads must be >= 1, got 0"),
        (lambda: MultiHeadSelfAttention(8, 2)(torch.zeros(1, 3, 6)), r"\[batch, seq_len, 8\], got \(1, 3, 6\)"),
    ],
)
def test_bad_input_names_argument_and_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_boolean_bias_is_a_mask_with_torchs_convention():
    q, k, v = rand(2, 3, 4, 8, seed=1), rand(2, 3, 5, 8, seed=2), rand(2, 3, 5, 8, seed=3)
    keep = torch.rand(4, 5, generator=torch.Generator().manual_seed(4)) > 0.4
    keep[:, 0] = True  # every query may attend somewhere
    out, weights = scaled_dot_product_attention(q, k, v, bias=keep)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    assert torch.allclose(out, expected, atol=1e-12)
    assert torch.all(weights[..., ~keep] == 0)
    additive = torch.zeros(4, 5, dtype=torch.float64).masked_fill(~keep, float("-inf"))
    assert torch.equal(weights, scaled_dot_product_attention(q, k, v, bias=additive)[1])


def test_integer_bias_and_grouped_heads_get_clear_errors():
    q, k = torch.zeros(1, 4, 3, 8), torch.zeros(1, 2, 3, 8)
    with pytest.raises(ValueError, match=r"k has shape \(1, 2, 3, 8\), expected leading dims broadcastable to q's"):
        scaled_dot_product_attention(q, k, k)
    with pytest.raises(TypeError, match=r"bias must be a floating-point tensor .* got dtype torch.int64"):
        scaled_dot_product_attention(q, q, q, bias=torch.zeros(3, 3, dtype=torch.long))


def test_a_query_that_sees_no_key_gets_nan_here_and_zeros_in_torch():
    """What the docstring says, both halves: posenc returns the softmax as computed, 0 / 0 for a
    query whose every key is masked; torch's scaled_dot_product_attention returns zeros there."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 1, 2, 4, 8, generator=gen)
    mask = torch.ones(4, 4, dtype=torch.bool)
    mask[1] = False  # query 1 may see nothing
    out, weights = scaled_dot_product_attention(q, k, v, bias=mask)
    assert out[..., 1, :].isnan().all() and weights[..., 1, :].isnan().all()
    assert not out[..., [0, 2, 3], :].isnan().any()
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert theirs[..., 1, :].eq(0).all()
    assert torch.allclose(theirs[..., [0, 2, 3], :], out[..., [0, 2, 3], :], atol=1e-6)
