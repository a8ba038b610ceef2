"""Relative positions, rel-shift, Shaw, Transformer-XL and T5: hand values, the equations, transformers."""

import math

import pytest
import torch
import torch.nn.functional as F
from helpers import rand
from hypothesis import given
from hypothesis import strategies as st
from transformers import T5Config
from transformers.models.t5.modeling_t5 import T5Attention
from transformers.models.xlnet.modeling_xlnet import XLNetRelativeAttention

from posenc import (
    MultiHeadSelfAttention,
    ShawRelativeAttention,
    T5RelativeBias,
    TransformerXLRelativeAttention,
    alibi_bias,
    rel_shift,
    relative_position_range,
    relative_positions,
    relative_scores,
    relative_values,
    scaled_dot_product_attention,
    sinusoidal_encoding,
    t5_relative_position_bucket,
)
from posenc.relative import _rel_unshift

hf_bucket = T5Attention._relative_position_bucket
lengths = st.integers(1, 9)
lead_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


# --- relative positions -------------------------------------------------------------------------------------------


def test_relative_positions_by_hand():
    assert relative_positions(3, 3).tolist() == [[0, 1, 2], [-1, 0, 1], [-2, -1, 0]]
    assert relative_positions(2, 4, offset=2).tolist() == [[-2, -1, 0, 1], [-3, -2, -1, 0]]
    assert relative_positions(1, 1).dtype == torch.long
    assert relative_position_range(2, 4, offset=2).tolist() == [-3, -2, -1, 0, 1]
    assert relative_position_range(3, 3).tolist() == [-2, -1, 0, 1, 2]


@pytest.mark.claim("002-07")
@given(lengths, lengths, st.integers(0, 50), st.integers(0, 50))
def test_relative_positions_depend_only_on_the_pair(q_len, k_len, offset, t):
    rel = relative_positions(q_len, k_len, offset=offset)
    # constant along diagonals: entry (i, j) is j - i - offset
    assert torch.equal(rel[1:, 1:], rel[:-1, :-1])
    # every position moved by t: queries at offset + t + i, keys at t + j
    assert torch.equal(relative_positions(q_len, k_len + t, offset=offset + t)[:, t:], rel)
    # the range holds every value once, in order, at row j - i + q_len - 1
    r = relative_position_range(q_len, k_len, offset=offset)
    i, j = torch.meshgrid(torch.arange(q_len), torch.arange(k_len), indexing="ij")
    assert torch.equal(r[j - i + q_len - 1], rel)
    assert r.numel() == q_len + k_len - 1 and torch.all(r[1:] - r[:-1] == 1)


# --- rel_shift ----------------------------------------------------------------------------------------------------


def test_rel_shift_by_hand():
    x = torch.arange(21.0).view(3, 7)  # q_len = 3, k_len = 5
    assert rel_shift(x).tolist() == [[2, 3, 4, 5, 6], [8, 9, 10, 11, 12], [14, 15, 16, 17, 18]]
    assert rel_shift(torch.arange(4.0).view(1, 4)).tolist() == [[0, 1, 2, 3]]  # one query: nothing moves


def explicit_gather(x):
    q_len, m = x.shape[-2:]
    k_len = m - q_len + 1
    i, j = torch.meshgrid(torch.arange(q_len), torch.arange(k_len), indexing="ij")
    index = (j - i + q_len - 1).expand(*x.shape[:-2], q_len, k_len)
    return x.gather(-1, index)


@given(lead_shapes, lengths, lengths, st.integers(0, 2**31 - 1))
def test_rel_shift_equals_an_explicit_gather(lead, q_len, k_len, seed):
    x = rand(*lead, q_len, q_len + k_len - 1, seed=seed)
    out = rel_shift(x)
    assert out.shape == (*lead, q_len, k_len)
    assert torch.equal(out, explicit_gather(x))


@given(st.integers(1, 3), st.integers(1, 3), lengths, lengths, st.integers(0, 2**31 - 1))
def test_rel_shift_equals_xlnet_in_transformers(b, n, q_len, k_len, seed):
    # XLNet orders the same columns with one extra in front (it is never read).
    x = rand(b, n, q_len, q_len + k_len - 1, seed=seed)
    theirs = XLNetRelativeAttention.rel_shift_bnij(F.pad(x, (1, 0), value=float("nan")), klen=k_len)
    assert torch.equal(rel_shift(x), theirs)


@given(lead_shapes, lengths, lengths, st.integers(0, 2**31 - 1))
def test_unshift_is_the_transpose_of_rel_shift(lead, q_len, k_len, seed):
    x = rand(*lead, q_len, q_len + k_len - 1, seed=seed)
    y = rand(*lead, q_len, k_len, seed=seed + 1)
    assert torch.allclose((rel_shift(x) * y).sum(), (x * _rel_unshift(y)).sum(), atol=1e-12)
    z = _rel_unshift(y)
    assert torch.equal(explicit_gather(z), y)
    assert (z != 0).sum() == (y != 0).sum()  # nothing else is written


@given(lead_shapes, lengths, lengths, st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_shift_and_materialize_agree(lead, q_len, k_len, d, seed):
    q = rand(*lead, q_len, d, seed=seed)
    table = rand(q_len + k_len - 1, d, seed=seed + 1)
    scores = relative_scores(q, table)
    assert scores.shape == (*lead, q_len, k_len)
    assert torch.allclose(scores, relative_scores(q, table, method="materialize"), atol=1e-12)
    first_q, first_scores = q.reshape(-1, q_len, d)[0], scores.reshape(-1, q_len, k_len)[0]
    for i in range(q_len):
        for j in range(k_len):
            assert first_scores[i, j].item() == pytest.approx((first_q[i] @ table[j - i + q_len - 1]).item(), abs=1e-12)
    w = torch.softmax(rand(*lead, q_len, k_len, seed=seed + 2), -1)
    out = relative_values(w, table)
    assert out.shape == (*lead, q_len, d)
    assert torch.allclose(out, relative_values(w, table, method="materialize"), atol=1e-12)


# --- Shaw et al. 2018 ---------------------------------------------------------------------------------------------


def shaw_by_the_equations(layer, x, memory=None):
    """Shaw et al. 2018, eqs. (3)-(5), one pair at a time."""
    context = x if memory is None else torch.cat([memory, x], 1)
    s, t, h, dh, k = x.shape[1], context.shape[1], layer.num_heads, layer.head_dim, layer.max_relative_position
    q = layer.q(x)[0].view(s, h, dh)
    key, value = layer.kv(context)[0].view(t, 2, h, dh).unbind(1)
    z = torch.zeros(s, h, dh, dtype=x.dtype)
    for head in range(h):
        for i in range(s):
            pos_i = (t - s) + i
            clip = [max(-k, min(k, j - pos_i)) + k for j in range(t)]
            e = torch.stack([q[i, head] @ (key[j, head] + layer.rel_k[clip[j]]) for j in range(t)]) / math.sqrt(dh)
            alpha = torch.softmax(e, 0)
            z[i, head] = sum(alpha[j] * (value[j, head] + layer.rel_v[clip[j]]) for j in range(t))
    return layer.out(z.reshape(1, s, h * dh))


@pytest.mark.parametrize("method", ["shift", "materialize"])
@pytest.mark.parametrize("mem_len", [0, 3])
def test_shaw_matches_the_equations(method, mem_len):
    torch.manual_seed(0)
    layer = ShawRelativeAttention(8, 2, max_relative_position=2, method=method).double()
    x, memory = rand(1, 5, 8, seed=1), rand(1, mem_len, 8, seed=2) if mem_len else None
    out, weights = layer(x, memory=memory)
    assert weights.shape == (1, 2, 5, 5 + mem_len)
    assert torch.allclose(out, shaw_by_the_equations(layer, x, memory), atol=1e-12)


def test_shaw_clips_distances_beyond_k():
    layer = ShawRelativeAttention(4, 1, max_relative_position=2)
    a_k, a_v = layer.relative_embeddings(4, 4)  # relative positions -3 .. 3
    assert a_k.shape == (7, 4)
    assert torch.equal(a_k[0], a_k[1]) and torch.equal(a_k[5], a_k[6])  # -3 -> -2 and 3 -> 2
    assert torch.equal(a_k[1:6], layer.rel_k) and torch.equal(a_v[1:6], layer.rel_v)


def test_shaw_with_zero_clip_distance_sees_no_order():
    torch.manual_seed(3)
    layer = ShawRelativeAttention(8, 2, max_relative_position=0).double()
    x, perm = rand(1, 6, 8, seed=4), torch.tensor([3, 0, 5, 1, 4, 2])
    assert torch.allclose(layer(x[:, perm])[0], layer(x)[0][:, perm], atol=1e-12)
    layer = ShawRelativeAttention(8, 2, max_relative_position=1).double()
    assert (layer(x[:, perm])[0] - layer(x)[0][:, perm]).abs().max() > 1e-3


def renormalized_tail(weights, mem_len):
    tail = weights[..., mem_len:]
    return tail / tail.sum(-1, keepdim=True)


@pytest.mark.claim("004-18")
@given(
    st.integers(1, 6),
    st.integers(0, 7),
    st.booleans(),
    st.sampled_from([ShawRelativeAttention, TransformerXLRelativeAttention]),
)
def test_shifting_every_position_leaves_the_scores_unchanged(s, mem_len, causal, cls):
    # With m earlier tokens the segment sits at m .. m + s - 1; among its own tokens nothing changes.
    torch.manual_seed(s + mem_len)
    layer = cls(8, 2).double()
    x, memory = rand(2, s, 8, seed=s), rand(2, mem_len, 8, seed=mem_len + 10)
    _, w0 = layer(x, causal=causal)
    _, w = layer(x, memory=memory, causal=causal)
    assert torch.allclose(renormalized_tail(w, mem_len), w0, atol=1e-12)


def test_modules_keep_the_input_dtype_and_learn_their_tables():
    torch.manual_seed(0)
    for layer in (ShawRelativeAttention(8, 2), TransformerXLRelativeAttention(8, 2)):
        out, w = layer(torch.randn(2, 5, 8), causal=True)
        assert out.dtype == torch.float32 and torch.all(w.triu(1) == 0)
        out.square().sum().backward()
        shaw = isinstance(layer, ShawRelativeAttention)
        names = ("relative.rel_k", "relative.rel_v") if shaw else ("u", "v", "r.weight")
        params = dict(layer.named_parameters())
        assert all(params[n].grad is not None and params[n].grad.abs().sum() > 0 for n in names)


# --- Transformer-XL -----------------------------------------------------------------------------------------------


def transformer_xl_by_the_equations(layer, x, memory=None):
    """Dai et al. 2019, eq. (3): the four terms (a) + (b) + (c) + (d), one pair at a time."""
    context = x if memory is None else torch.cat([memory, x], 1)
    s, t, h, dh = x.shape[1], context.shape[1], layer.num_heads, layer.head_dim
    q = layer.q(x)[0].view(s, h, dh)
    key, value = layer.kv(context)[0].view(t, 2, h, dh).unbind(1)
    scores = torch.zeros(h, s, t, dtype=x.dtype)
    for i in range(s):
        for j in range(t):
            distance = (t - s) + i - j
            r = sinusoidal_encoding(torch.tensor(distance), layer.dim, layout="concat", dtype=x.dtype)
            w_r = layer.r(r).view(h, dh)
            for head in range(h):
                a = q[i, head] @ key[j, head]
                b = q[i, head] @ w_r[head]
                c = layer.u[head] @ key[j, head]
                d = layer.v[head] @ w_r[head]
                scores[head, i, j] = (a + b + c + d) / math.sqrt(dh)
    weights = torch.softmax(scores, -1)
    z = torch.einsum("hij,jhd->ihd", weights, value)
    return layer.out(z.reshape(1, s, h * dh)), weights


@pytest.mark.parametrize("method", ["shift", "materialize"])
@pytest.mark.parametrize("mem_len", [0, 4])
def test_transformer_xl_matches_the_equations(method, mem_len):
    torch.manual_seed(1)
    layer = TransformerXLRelativeAttention(8, 2, method=method).double()
    with torch.no_grad():
        layer.u.normal_()  # large u, v so that terms (c) and (d) matter
        layer.v.normal_()
    x, memory = rand(1, 5, 8, seed=1), rand(1, mem_len, 8, seed=2) if mem_len else None
    out, weights = layer(x, memory=memory)
    ref_out, ref_weights = transformer_xl_by_the_equations(layer, x, memory)
    assert torch.allclose(weights[0], ref_weights, atol=1e-12)
    assert torch.allclose(out, ref_out, atol=1e-12)


def test_transformer_xl_position_embeddings_are_sinusoids_of_the_distance():
    layer = TransformerXLRelativeAttention(8, 2)
    rel = layer.position_embeddings(2, 5, offset=3)  # j - i from -4 to 1, i.e. distances 4 .. -1
    assert rel.shape == (6, 8)
    expected = sinusoidal_encoding(torch.tensor([4, 3, 2, 1, 0, -1]), 8, layout="concat")
    assert torch.equal(rel, expected)
    assert rel[4].tolist() == [0.0] * 4 + [1.0] * 4  # distance 0


# --- T5 -----------------------------------------------------------------------------------------------------------


def test_t5_buckets_by_hand():
    r = torch.tensor([0, -1, -7, -8, -15, -16, -127, -128, -5000, 1, 8, 16, 5000])
    # bidirectional, 32 buckets: 16 per side, 8 exact; bucket 8 + floor(8 log(d/8) / log 16) above
    assert t5_relative_position_bucket(r).tolist() == [0, 1, 7, 8, 9, 10, 15, 15, 15, 17, 24, 26, 31]
    # causal, 32 buckets: 16 exact; keys after the query fall into bucket 0
    causal = t5_relative_position_bucket(r, bidirectional=False)
    assert causal.tolist() == [0, 1, 7, 8, 15, 16, 31, 31, 31, 0, 0, 0, 0]
    assert t5_relative_position_bucket(-3).tolist() == 3 and t5_relative_position_bucket(-3).dtype == torch.long


configs = [
    (bi, nb, md)
    for bi in (True, False)
    for nb in (4, 5, 8, 18, 32, 33, 64)
    for md in (9, 20, 128, 1000)
    if md > (nb // 2 if bi else nb) // 2
]


@pytest.mark.parametrize("bidirectional, num_buckets, max_distance", configs)
def test_t5_buckets_equal_transformers(bidirectional, num_buckets, max_distance):
    r = torch.arange(-3000, 3001).view(6001, 1) + torch.tensor([0, 7])  # 2-d input as well
    ours = t5_relative_position_bucket(
        r, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    theirs = hf_bucket(r, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    assert torch.equal(ours, theirs)
    assert ours.min() >= 0 and ours.max() < num_buckets


@given(st.booleans(), st.integers(2, 300), st.integers(1, 5000), st.lists(st.integers(-(10**6), 10**6), min_size=1))
def test_t5_buckets_equal_transformers_property(bidirectional, num_buckets, extra, rel):
    num_buckets += 2 * bidirectional
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    max_distance = exact + extra
    r = torch.tensor(rel)
    kw = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    assert torch.equal(t5_relative_position_bucket(r, **kw), hf_bucket(r, **kw))


def test_t5_buckets_are_monotone_in_the_distance():
    d = torch.arange(0, 400)
    back = t5_relative_position_bucket(-d)
    ahead = t5_relative_position_bucket(d[1:])
    assert torch.all(back[1:] >= back[:-1]) and torch.all(ahead[1:] >= ahead[:-1])
    assert back.unique().tolist() == list(range(16)) and ahead.unique().tolist() == list(range(17, 32))


def test_t5_logarithm_in_float32_is_what_the_published_models_use():
    # 18 buckets, bidirectional: 9 per side, 4 exact; distance 8 is exactly one log bucket past 4.
    d = torch.tensor([8, 16, 64])
    ours = t5_relative_position_bucket(-d, num_buckets=18, max_distance=128)
    assert torch.equal(ours, hf_bucket(-d, bidirectional=True, num_buckets=18, max_distance=128))
    in_float64 = 4 + (torch.log(d.double() / 4) / math.log(128 / 4) * 5).long()
    assert not torch.equal(ours, in_float64)


def hf_t5_attention(is_decoder, num_heads=3, num_buckets=32, max_distance=128):
    config = T5Config(
        d_model=12,
        d_kv=4,
        num_heads=num_heads,
        relative_attention_num_buckets=num_buckets,
        relative_attention_max_distance=max_distance,
        is_decoder=is_decoder,
    )
    return T5Attention(config, has_relative_attention_bias=True, layer_idx=0)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bias_equals_transformers_compute_bias(bidirectional):
    torch.manual_seed(0)
    theirs = hf_t5_attention(is_decoder=not bidirectional, num_buckets=16, max_distance=40)
    ours = T5RelativeBias(3, bidirectional=bidirectional, num_buckets=16, max_distance=40)
    with torch.no_grad():
        ours.embedding.weight.copy_(theirs.relative_attention_bias.weight)
    for q_len, k_len, offset in [(7, 7, 0), (1, 60, 59), (5, 30, 25), (50, 50, 0)]:
        expected = theirs.compute_bias(q_len, k_len, past_seen_tokens=offset)
        assert torch.equal(ours(q_len, k_len, offset=offset).unsqueeze(0), expected)


@given(lengths, lengths, st.integers(0, 300), st.booleans())
def test_t5_bias_depends_only_on_the_relative_position(q_len, k_len, t, bidirectional):
    torch.manual_seed(0)
    module = T5RelativeBias(2, bidirectional=bidirectional, num_buckets=8, max_distance=20)
    bias = module(q_len, k_len, offset=0)
    assert bias.shape == (2, q_len, k_len)
    assert torch.equal(module(q_len, k_len + t, offset=t)[..., t:], bias)  # every position moved by t
    assert torch.equal(bias[:, 1:, 1:], bias[:, :-1, :-1])


def test_t5_bias_plugs_into_attention():
    torch.manual_seed(0)
    module, layer = T5RelativeBias(2), MultiHeadSelfAttention(8, 2)
    x = torch.randn(3, 6, 8)
    out, w = layer(x, bias=module(6, 6))
    q = torch.randn(1, 2, 1, 4)
    k = torch.randn(1, 2, 6, 4)
    full, _ = scaled_dot_product_attention(q.expand(1, 2, 6, 4), k, k, bias=module(6, 6))
    step, _ = scaled_dot_product_attention(q, k, k, bias=module(1, 6, offset=5))  # the last query, from a cache
    assert out.shape == (3, 6, 8) and torch.allclose(step[..., 0, :], full[..., 5, :], atol=1e-6)
    assert len(module.state_dict()) == 1 and module.embedding.weight.shape == (32, 2)


# --- bad input ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: relative_positions(0, 3), r"q_len must be >= 1, got 0"),
        (lambda: relative_positions(3, 2, offset=-1), r"offset must be >= 0, got -1"),
        (lambda: relative_position_range(2, 0), r"k_len must be >= 1, got 0"),
        (lambda: rel_shift(torch.zeros(4, 3)), r"q_len <= m .* got \(4, 3\)"),
        (lambda: rel_shift(torch.zeros(5)), r"got \(5,\)"),
        (lambda: relative_scores(torch.zeros(3, 4), torch.zeros(5, 2)), r"rel_emb has shape \(5, 2\), expected"),
        (lambda: relative_scores(torch.zeros(3, 4), torch.zeros(2, 4)), r"at least q_len = 3 rows"),
        (lambda: relative_scores(torch.zeros(2, 3, 4), torch.zeros(3, 5, 4)), r"rel_emb has leading dims \(3,\)"),
        (lambda: relative_scores(torch.zeros(3, 4), torch.zeros(5, 4), method="gather"), r"method must be one of"),
        (lambda: relative_values(torch.zeros(3, 4), torch.zeros(5, 2)), r"expected \[\.\.\., 6, d_v\]"),
        (lambda: ShawRelativeAttention(8, 2, max_relative_position=-1), r"max_relative_position must be >= 0, got -1"),
        (lambda: ShawRelativeAttention(8, 0), r"num_heads must be >= 1, got 0"),
        (lambda: ShawRelativeAttention(10, 3), r"dim must be divisible by num_heads, got dim=10, num_heads=3"),
        (lambda: ShawRelativeAttention(8, method="fast"), r"method must be one of 'shift', 'materialize'; got 'fast'"),
        (lambda: ShawRelativeAttention(8)(torch.zeros(1, 3, 6)), r"\[batch, seq_len >= 1, 8\], got \(1, 3, 6\)"),
        (
            lambda: ShawRelativeAttention(8)(torch.zeros(2, 3, 8), memory=torch.zeros(1, 3, 8)),
            r"memory must have shape \[2, mem_len, 8\], got \(1, 3, 8\)",
        ),
        (lambda: TransformerXLRelativeAttention(9, 3), r"dim must be even .* got 9"),
        (lambda: TransformerXLRelativeAttention(8, -2), r"num_heads must be >= 1, got -2"),
        (lambda: TransformerXLRelativeAttention(8, base=0.5), r"base must be a finite number > 1, got 0.5"),
        (lambda: TransformerXLRelativeAttention(8)(torch.zeros(3, 8)), r"got \(3, 8\)"),
        (lambda: t5_relative_position_bucket(torch.arange(3), num_buckets=0), r"num_buckets must be >= 1, got 0"),
        (
            lambda: t5_relative_position_bucket(torch.arange(3), num_buckets=3),
            r"num_buckets must be >= 4 with bidirectional=True .* got 3",
        ),
        (
            lambda: t5_relative_position_bucket(torch.arange(3), bidirectional=False, num_buckets=1),
            r"num_buckets must be >= 2 with bidirectional=False .* got 1",
        ),
        (
            lambda: t5_relative_position_bucket(torch.arange(3), max_distance=8),
            r"max_distance must be larger than the 8 exact buckets .* got 8",
        ),
        (
            lambda: t5_relative_position_bucket(torch.arange(3), bidirectional=False, num_buckets=8, max_distance=3),
            r"max_distance must be larger than the 4 exact buckets .* got 3",
        ),
        (lambda: t5_relative_position_bucket(torch.arange(3.0)), r"integer tensor, got dtype torch.float32"),
        (lambda: T5RelativeBias(0), r"num_heads must be >= 1, got 0"),
        (lambda: T5RelativeBias(4, num_buckets=-32), r"num_buckets must be >= 1, got -32"),
        (lambda: T5RelativeBias(4, max_distance=2), r"max_distance must be larger than the 8 exact buckets"),
        (lambda: T5RelativeBias(4)(3, 3, offset=-2), r"offset must be >= 0, got -2"),
    ],
)
def test_bad_input_names_argument_and_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@given(lengths, lengths, st.booleans())
def test_relative_biases_put_the_queries_at_the_end_of_the_keys_by_default(q_len, k_len, bidirectional):
    """Bottom-right, as flash-attention >= 2.1: the last query at the last key, the first ones before key 0."""
    t5 = T5RelativeBias(2, bidirectional=bidirectional, num_buckets=8, max_distance=20)
    causal = not bidirectional
    if q_len <= k_len:  # a KV cache: the queries are the last q_len keys
        assert torch.equal(t5(q_len, k_len), t5(q_len, k_len, offset=k_len - q_len))
        assert torch.equal(
            alibi_bias(2, q_len, k_len, causal=causal), alibi_bias(2, q_len, k_len, causal=causal, offset=k_len - q_len)
        )
    else:  # the last k_len queries sit at the keys; the first q_len - k_len come before key 0
        extra = q_len - k_len
        assert torch.equal(t5(q_len, k_len)[:, extra:], t5(k_len, k_len))
        biased = alibi_bias(2, q_len, k_len, causal=causal)[:, extra:]
        assert torch.equal(biased, alibi_bias(2, k_len, k_len, causal=causal))


def test_a_decoding_step_with_alibi_sees_every_cached_key():
    q, k = rand(1, 4, 1, 8, seed=5), rand(1, 4, 10, 8, seed=6)
    _, weights = scaled_dot_product_attention(q, k, k, bias=alibi_bias(4, 1, 10, dtype=torch.float64), causal=True)
    assert torch.all(weights > 0)  # the one query is the last of the ten positions
    explicit = alibi_bias(4, 1, 10, offset=9, dtype=torch.float64)
    assert torch.equal(weights, scaled_dot_product_attention(q, k, k, bias=explicit, causal=True)[1])
