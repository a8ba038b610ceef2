"""Query/key alignment, per-batch offsets, custom and named ALiBi slopes, against flash-attention and transformers.

flash-attention cannot be installed here (it needs CUDA to build), so its reference
functions are written below from their published formulas: tests/test_flash_attn.py's
``attn_bias_from_alibi_slopes`` and ``construct_local_mask``, and the rule in
``flash_attn_interface.py``: query ``i`` sits at ``i + seqlen_k - seqlen_q`` (the causal
mask is aligned to the bottom-right corner), ALiBi adds ``-slope * |i + seqlen_k - seqlen_q - j|``.
"""

import warnings

import pytest
import torch
from helpers import rand
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.bias import causal_lower_right, causal_upper_left
from transformers import T5Config
from transformers.models.bloom.modeling_bloom import build_alibi_tensor as bloom_alibi
from transformers.models.falcon.modeling_falcon import build_alibi_tensor as falcon_alibi
from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor
from transformers.models.t5.modeling_t5 import T5Attention

from posenc.alibi import ALIBI_SLOPE_SETS, ALiBiBias, alibi_bias, alibi_slopes
from posenc.alignment import aligned_relative_positions, query_start
from posenc.t5 import T5RelativeBias

# flash-attention's seqlen_q, seqlen_k pairs (test_flash_attn_output), the small ones
FA_SHAPES = [(1, 147), (113, 203), (128, 217), (113, 211), (108, 256), (256, 512), (512, 256), (3, 5), (5, 3)]
# test_flash_attn_kvcache's pairs, the small ones
FA_KVCACHE_SHAPES = [(1, 128), (1, 339), (3, 1024), (64, 800), (64, 256), (3, 799), (128, 128)]
HEAD_COUNTS = [1, 2, 3, 5, 6, 8, 12, 16, 20, 32, 40, 48, 64, 71, 96, 112, 128]


# --- flash-attention's references, from its formulas ---------------------------------------------------------------


def fa_alibi_bias(slopes, seqlen_q, seqlen_k, *, causal, key_padding_mask=None, key_leftpad=None):
    """``attn_bias_from_alibi_slopes``: slopes ``[b, h]`` -> bias broadcastable to ``[b, h, q, k]`` (float32)."""
    m = slopes[:, :, None, None]  # [b, h, 1, 1]
    if causal:  # the row-constant form: m * (j - (seqlen_k - 1)), the causal mask applied separately
        return torch.arange(1 - seqlen_k, 1, dtype=torch.float32) * m
    row, col = fa_rows_cols(seqlen_q, seqlen_k, key_leftpad)
    sk = seqlen_k if key_padding_mask is None else key_padding_mask.sum(-1)[:, None, None, None]
    return -m * (row + sk - seqlen_q - col).abs().to(torch.float32)


def fa_rows_cols(seqlen_q, seqlen_k, key_leftpad):
    """Query index column and key index row; with ``key_leftpad``, key j is at ``j - leftpad`` (pads far away)."""
    row, col = torch.arange(seqlen_q)[:, None], torch.arange(seqlen_k)
    if key_leftpad is not None:
        pad = key_leftpad[:, None, None, None]
        col = torch.where(col >= pad, col - pad, 2**32)  # [b, 1, 1, k]
    return row, col


def fa_causal_mask(seqlen_q, seqlen_k, *, key_padding_mask=None, key_leftpad=None):
    """``construct_local_mask`` with ``window_size=(-1, 0)``: True where key j is after query i (masked)."""
    row, col = fa_rows_cols(seqlen_q, seqlen_k, key_leftpad)
    sk = seqlen_k if key_padding_mask is None else key_padding_mask.sum(-1)[:, None, None, None]
    return col > row + sk - seqlen_q


def fa_weights(scores, bias, mask):
    """``attention_ref``: masked scores plus bias, softmax; rows with every key masked give zeros."""
    scores = scores.masked_fill(mask, float("-inf")) + bias
    weights = torch.softmax(scores, dim=-1)
    return weights.masked_fill(mask.all(-1, keepdim=True), 0.0)


def our_weights(scores, bias):
    """Softmax of scores plus our bias (which holds the causal mask); fully masked rows give zeros, as in flash-attn."""
    weights = torch.softmax(scores + bias, dim=-1)
    return weights.masked_fill(torch.isinf(bias).all(-1, keepdim=True), 0.0)


def fa_slopes(batch, heads, seed):
    """flash-attention's test slopes: uniform in [0, 0.3), one per sequence and head, float32."""
    return torch.rand(batch, heads, generator=torch.Generator().manual_seed(seed)) * 0.3


# --- alignment by hand -----------------------------------------------------------------------------------------------


def test_query_start_by_hand():
    assert query_start(3, 5) == 2 and query_start(5, 3) == -2 and query_start(4, 4) == 0
    assert query_start(3, 5, align="top_left") == 0 and query_start(5, 3, align="top_left") == 0
    assert query_start(5, 3, 7) == 7 and query_start(5, 3, torch.tensor(4)) == 4
    assert query_start(2, 9, torch.tensor([0, 3, 7])).tolist() == [0, 3, 7]
    rel = aligned_relative_positions(3, 5)  # queries at 2, 3, 4
    assert rel.tolist() == [[-2, -1, 0, 1, 2], [-3, -2, -1, 0, 1], [-4, -3, -2, -1, 0]]
    rel = aligned_relative_positions(5, 3)  # queries at -2 .. 2
    assert rel[:, 0].tolist() == [2, 1, 0, -1, -2] and rel.shape == (5, 3)
    both = aligned_relative_positions(2, 4, offset=torch.tensor([0, 2]))
    assert both.shape == (2, 2, 4) and both[1].tolist() == [[-2, -1, 0, 1], [-3, -2, -1, 0]]


@pytest.mark.parametrize("q_len, k_len", [(3, 5), (5, 3), (1, 147), (113, 203), (256, 512), (512, 256), (64, 64)])
def test_causal_masks_are_torchs_lower_right_and_upper_left(q_len, k_len):
    with warnings.catch_warnings():  # torch warns that lower-right with q_len > k_len leaves rows fully masked
        warnings.simplefilter("ignore")
        lower_right = causal_lower_right(q_len, k_len)._materialize()
    upper_left = causal_upper_left(q_len, k_len)._materialize()  # True = keep
    assert torch.equal(torch.isfinite(alibi_bias(2, q_len, k_len)), lower_right.expand(2, -1, -1))
    assert torch.equal(torch.isfinite(alibi_bias(2, q_len, k_len, align="top_left")), upper_left.expand(2, -1, -1))


def test_more_queries_than_keys_bottom_right_by_hand():
    bias = alibi_bias(1, 5, 3)[0] / alibi_slopes(1)  # queries at -2 .. 2, keys at 0 .. 2; m = 1/256
    inf = float("inf")
    assert bias.tolist() == [[-inf] * 3, [-inf] * 3, [0.0, -inf, -inf], [-1.0, 0.0, -inf], [-2.0, -1.0, 0.0]]
    both = alibi_bias(1, 5, 3, causal=False)[0] / alibi_slopes(1)
    assert both[0].tolist() == [-2.0, -3.0, -4.0] and both[-1].tolist() == [-2.0, -1.0, 0.0]


@settings(max_examples=60)
@given(st.integers(1, 6), st.integers(1, 12), st.integers(1, 12), st.booleans(), st.data())
def test_the_last_queries_of_bottom_right_and_the_first_of_top_left_do_not_depend_on_q_len(
    h, q_len, k_len, causal, data
):
    n = data.draw(st.integers(1, q_len))
    bottom = alibi_bias(h, q_len, k_len, causal=causal)
    assert torch.equal(bottom[:, q_len - n :], alibi_bias(h, n, k_len, causal=causal))
    top = alibi_bias(h, q_len, k_len, causal=causal, align="top_left")
    assert torch.equal(top[:, :n], alibi_bias(h, n, k_len, causal=causal, align="top_left"))
    if q_len <= k_len:  # bottom-right is the explicit offset k_len - q_len
        assert torch.equal(bottom, alibi_bias(h, q_len, k_len, causal=causal, offset=k_len - q_len))


# --- ALiBi against flash-attention's reference -----------------------------------------------------------------------


@pytest.mark.parametrize("seqlen_q, seqlen_k", FA_SHAPES)
def test_alibi_equals_flash_attention_reference_non_causal(seqlen_q, seqlen_k):
    slopes = fa_slopes(2, 3, seed=seqlen_q)  # [b, h]
    expected = fa_alibi_bias(slopes, seqlen_q, seqlen_k, causal=False)  # [b, h, q, k]
    assert torch.equal(alibi_bias(3, seqlen_q, seqlen_k, causal=False, slopes=slopes), expected)


@pytest.mark.parametrize("seqlen_q, seqlen_k", FA_SHAPES)
def test_alibi_equals_flash_attention_reference_causal(seqlen_q, seqlen_k):
    slopes = fa_slopes(2, 3, seed=seqlen_k)
    ours = alibi_bias(3, seqlen_q, seqlen_k, slopes=slopes, dtype=torch.float64)  # [b, h, q, k]
    mask = fa_causal_mask(seqlen_q, seqlen_k)  # [q, k]
    assert torch.equal(torch.isinf(ours), mask.expand_as(ours))
    theirs = fa_alibi_bias(slopes, seqlen_q, seqlen_k, causal=True).double().expand_as(ours)
    row_constant = (ours - theirs).masked_fill(mask, 0.0)  # the softmax removes a constant per row
    first = row_constant[..., :1]  # key 0 is visible from every row that sees a key
    spread = (row_constant - first).masked_fill(mask, 0.0).abs().max()
    assert spread <= 2 * torch.finfo(torch.float32).eps * theirs.abs().max()  # their bias is rounded to float32
    scores = rand(2, 3, seqlen_q, seqlen_k, seed=7)
    assert (our_weights(scores, ours) - fa_weights(scores, theirs, mask)).abs().max() < 1e-5


# --- per-batch offsets -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seqlen_q, seqlen_k", FA_KVCACHE_SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_per_batch_offsets_are_flash_attention_kvcache_with_leftpad(seqlen_q, seqlen_k, causal):
    """flash_attn_with_kvcache: sequence b holds cache_seqlens[b] tokens (from slot leftpad[b]) and appends q_len."""
    gen = torch.Generator().manual_seed(seqlen_k)
    cache_seqlens = torch.randint(0, seqlen_k - seqlen_q + 1, (2,), generator=gen)
    leftpad = torch.stack([torch.randint(0, max(int(n), 1), (), generator=gen) for n in cache_seqlens])
    slot = torch.arange(seqlen_k)
    valid = (slot < (cache_seqlens + seqlen_q)[:, None]) & (slot >= leftpad[:, None])  # [b, k]
    slopes = fa_slopes(2, 4, seed=seqlen_q)
    # Slots are positions: leftpad shifts queries and keys alike, so the start is just the cached length.
    ours = alibi_bias(4, seqlen_q, seqlen_k, causal=causal, offset=cache_seqlens, slopes=slopes, dtype=torch.float64)
    keep = valid[:, None, None, :].expand_as(ours)
    kw = dict(key_padding_mask=valid, key_leftpad=leftpad)
    if causal:
        mask = fa_causal_mask(seqlen_q, seqlen_k, **kw).expand_as(ours)
        assert torch.equal(torch.isinf(ours)[keep], mask[keep])
        scores = rand(2, 4, seqlen_q, seqlen_k, seed=3).masked_fill(~keep, float("-inf"))
        theirs = fa_alibi_bias(slopes, seqlen_q, seqlen_k, causal=True, **kw).double()
        assert (our_weights(scores, ours) - fa_weights(scores, theirs, mask)).abs().max() < 1e-5
    else:
        theirs = fa_alibi_bias(slopes, seqlen_q, seqlen_k, causal=False, **kw).expand_as(ours)
        assert torch.equal(ours.float()[keep], theirs[keep])


@settings(max_examples=40)
@given(st.integers(1, 8), st.integers(1, 8), st.lists(st.integers(0, 20), min_size=1, max_size=4), st.booleans())
def test_per_batch_offsets_stack_the_single_sequence_biases(q_len, k_len, offsets, causal):
    offset = torch.tensor(offsets)
    bias = alibi_bias(3, q_len, k_len, causal=causal, offset=offset)
    assert bias.shape == (len(offsets), 3, q_len, k_len)
    assert torch.equal(bias, torch.stack([alibi_bias(3, q_len, k_len, causal=causal, offset=o) for o in offsets]))
    assert torch.equal(ALiBiBias(3, causal=causal)(q_len, k_len, offset=offset), bias)
    torch.manual_seed(0)
    t5 = T5RelativeBias(3, bidirectional=not causal, num_buckets=8, max_distance=20)
    assert torch.equal(t5(q_len, k_len, offset=offset), torch.stack([t5(q_len, k_len, offset=o) for o in offsets]))


def test_batched_slopes_and_offsets_broadcast_and_must_agree():
    slopes = fa_slopes(3, 2, seed=0)
    both = alibi_bias(2, 4, 6, slopes=slopes, offset=torch.tensor([0, 1, 2]))
    for b in range(3):
        assert torch.equal(both[b], alibi_bias(2, 4, 6, slopes=slopes[b], offset=b))
    assert alibi_bias(2, 4, 6, slopes=slopes[:1], offset=torch.tensor([0, 1, 2])).shape == (3, 2, 4, 6)
    with pytest.raises(ValueError, match=r"offset has batch 2 but slopes has batch 3"):
        alibi_bias(2, 4, 6, slopes=slopes, offset=torch.tensor([0, 1]))


# --- T5 against transformers ----------------------------------------------------------------------------------------


def hf_t5(is_decoder):
    config = T5Config(
        d_model=8, d_kv=4, num_heads=3, relative_attention_num_buckets=16, relative_attention_max_distance=40
    )
    config.is_decoder = is_decoder
    return T5Attention(config, has_relative_attention_bias=True, layer_idx=0)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_alignment_and_per_batch_offsets_equal_transformers_compute_bias(bidirectional):
    torch.manual_seed(0)
    theirs = hf_t5(is_decoder=not bidirectional)
    ours = T5RelativeBias(3, bidirectional=bidirectional, num_buckets=16, max_distance=40)
    top_left = T5RelativeBias(3, bidirectional=bidirectional, num_buckets=16, max_distance=40, align="top_left")
    with torch.no_grad():
        ours.embedding.weight.copy_(theirs.relative_attention_bias.weight)
        top_left.embedding.weight.copy_(theirs.relative_attention_bias.weight)
    for q_len, k_len in FA_SHAPES:  # compute_bias places query i at past_seen_tokens + i
        expected = theirs.compute_bias(q_len, k_len, past_seen_tokens=k_len - q_len)[0]
        assert torch.equal(ours(q_len, k_len), expected)
        assert torch.equal(top_left(q_len, k_len), theirs.compute_bias(q_len, k_len)[0])
    offset = torch.tensor([0, 5, 77])
    expected = torch.cat([theirs.compute_bias(6, 90, past_seen_tokens=int(o)) for o in offset])
    assert torch.equal(ours(6, 90, offset=offset), expected)


# --- custom and learned slopes ---------------------------------------------------------------------------------------


def test_custom_slopes_scale_the_distance():
    slopes = torch.tensor([0.5, 0.1, 3.0])
    bias = alibi_bias(3, 4, 4, causal=False, slopes=slopes, dtype=torch.float64)
    distance = aligned_relative_positions(4, 4).abs().double()
    assert torch.equal(bias, -slopes.double()[:, None, None] * distance)
    module = ALiBiBias(3, slopes=slopes)
    assert module.state_dict() == {} and torch.equal(module(4, 4), alibi_bias(3, 4, 4, slopes=slopes))


def test_learned_slopes_are_a_parameter_with_the_same_bias_and_a_gradient():
    module = ALiBiBias(4, learnable=True)
    assert [name for name, _ in module.named_parameters()] == ["slopes"] and "slopes" in module.state_dict()
    bias = module(5, 7)
    with torch.no_grad():
        assert torch.equal(module(5, 7), bias) and torch.equal(bias, alibi_bias(4, 5, 7))
    bias[torch.isfinite(bias)].sum().backward()
    rel = aligned_relative_positions(5, 7)  # d/dm of -m (i - j), summed over the visible keys
    assert torch.equal(module.slopes.grad, torch.full((4,), rel[rel <= 0].sum().item()))
    falcon = ALiBiBias(12, slopes="falcon", learnable=True)
    assert torch.equal(falcon.slopes.detach(), ALIBI_SLOPE_SETS["falcon"](12))


def test_fixed_slopes_survive_casts_and_meta_device_loading():
    for slopes in (None, "falcon", torch.tensor([0.3, 0.2], dtype=torch.float64)):
        reference = ALiBiBias(2, slopes=slopes)
        assert reference.half().slopes.dtype in (torch.float32, torch.float64)
        with torch.device("meta"):
            lazy = ALiBiBias(2, slopes=slopes)
        lazy.to_empty(device="cpu")
        assert torch.equal(lazy.slopes, ALiBiBias(2, slopes=slopes).slopes)
        assert torch.equal(lazy(3, 5), ALiBiBias(2, slopes=slopes)(3, 5))


# --- named slope sets against the transformers function each one names --------------------------------------------


@pytest.mark.parametrize("num_heads", HEAD_COUNTS)
def test_named_slope_sets_are_bit_identical_to_the_models(num_heads):
    ones = torch.ones(1, 2)
    assert torch.equal(ALIBI_SLOPE_SETS["bloom"](num_heads), bloom_alibi(ones, num_heads, torch.float32)[:, 0, 1])
    assert torch.equal(ALIBI_SLOPE_SETS["mpt"](num_heads), -build_mpt_alibi_tensor(num_heads, 2)[:, 0, 0])
    assert torch.equal(ALIBI_SLOPE_SETS["falcon"](num_heads), falcon_alibi(ones, num_heads, torch.float32)[:, 0, 1])
    assert torch.equal(ALIBI_SLOPE_SETS["paper"](num_heads), alibi_slopes(num_heads))
    if num_heads <= 64:
        assert torch.equal(ALIBI_SLOPE_SETS["mpt"](num_heads), alibi_slopes(num_heads))


@pytest.mark.parametrize("num_heads", [3, 8, 12, 40, 71])
def test_full_biases_with_named_slopes_are_the_models_bit_for_bit(num_heads):
    """Each model's bias differs from -m (i - j) by a constant per row; a row where that constant is 0 is equal."""
    length = 37
    mask = torch.ones(1, length)
    # BLOOM and Falcon add +m * j, which is minus the symmetric bias of a query at position 0.
    bloom = bloom_alibi(mask, num_heads, torch.float32)[:, 0]  # [h, k]
    assert torch.equal(-alibi_bias(num_heads, 1, length, causal=False, offset=0, slopes="bloom")[:, 0], bloom)
    falcon = falcon_alibi(mask, num_heads, torch.bfloat16)[:, 0]  # formed in bfloat16
    ours = alibi_bias(num_heads, 1, length, causal=False, offset=0, slopes="falcon", dtype=torch.bfloat16)
    assert torch.equal(-ours[:, 0], falcon)
    # MPT adds m * (j - (L - 1)): the row of the last query.
    assert torch.equal(
        alibi_bias(num_heads, 1, length, slopes="mpt")[:, 0], build_mpt_alibi_tensor(num_heads, length)[:, 0]
    )
    assert torch.equal(
        alibi_bias(num_heads, length, length, slopes="mpt")[:, -1], build_mpt_alibi_tensor(num_heads, length)[:, 0]
    )


@pytest.mark.parametrize("name, build", [("bloom", bloom_alibi), ("falcon", falcon_alibi)])
def test_attention_weights_with_named_slopes_equal_the_models(name, build):
    s, h = 19, 12
    scores = rand(h, s, s, seed=2).float()
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    theirs = torch.softmax(scores + build(torch.ones(1, s), h, torch.float32).masked_fill(mask, float("-inf")), -1)
    ours = torch.softmax(scores + alibi_bias(h, s, s, slopes=name), -1)
    assert (ours - theirs).abs().max() < 1e-6


# --- bad input -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: alibi_bias(2, 3, 3, offset=torch.tensor([0.5])), TypeError, r"offset must be an int or an integer"),
        (lambda: alibi_bias(2, 3, 3, offset=torch.zeros(2, 2, dtype=torch.long)), ValueError, r"1-D tensor \[batch\]"),
        (lambda: alibi_bias(2, 3, 3, offset=torch.tensor([1, -4])), ValueError, r">= 0 everywhere, got -4 \(at batch"),
        (lambda: alibi_bias(2, 3, 3, offset=torch.tensor([], dtype=torch.long)), ValueError, r"got shape \(0,\)"),
        (lambda: alibi_bias(2, 3, 3, align="center"), ValueError, r"align must be one of 'bottom_right', 'top_left'"),
        (lambda: alibi_bias(2, 3, 3, slopes="gpt"), ValueError, r"slopes must be one of 'paper', 'bloom', 'mpt'"),
        (lambda: alibi_bias(2, 3, 3, slopes=torch.ones(3)), ValueError, r"\[num_heads\] or \[batch, num_heads\] with"),
        (lambda: alibi_bias(2, 3, 3, slopes=torch.ones(2, dtype=torch.long)), TypeError, r"slopes must be a floating"),
        (lambda: ALiBiBias(2, slopes=torch.ones(1, 2)), ValueError, r"slopes must have shape \[num_heads\] = \[2\]"),
        (lambda: ALiBiBias(2, align="left"), ValueError, r"align must be one of"),
        (lambda: T5RelativeBias(2)(3, 3, offset=torch.tensor([True])), TypeError, r"got dtype torch.bool"),
        (lambda: T5RelativeBias(2, align="x"), ValueError, r"align must be one of"),
    ],
)
def test_bad_input_names_argument_and_value(call, error, match):
    with pytest.raises(error, match=match):
        call()
