"""Packed variable-length batches (FlashAttention's cu_seqlens) and per-sequence positions [b, s].

Every scheme on a packed row must equal the same scheme on each sequence alone.
FlashAttention cannot be installed here (it needs CUDA to build), so its
``flash_attn_varlen_func`` is checked through a reference written in this file
from its documented semantics (cu_seqlens int32 [n + 1]; ALiBi adds
``-slope * |i + seqlen_k - seqlen_q - j|``), on the shapes of its own
``test_flash_attn_varlen_output`` (batch 9, 6 heads, head dims 32 and 59,
random lengths in ``[max_seqlen - 20, max_seqlen]``). transformers' own helpers
are the peer for position_ids.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
    alibi_slopes,
    scaled_dot_product_attention,
    sinusoidal_encoding,
)
from posenc.experiments import TinyConfig, TinyTransformer
from posenc.packing import (
    check_cu_seqlens,
    cu_seqlens_from_position_ids,
    cu_seqlens_from_seqlens,
    max_seqlen_from_cu_seqlens,
    packed_alibi_bias,
    packed_attention_mask,
    packed_relative_bias,
    positions_from_attention_mask,
    positions_from_cu_seqlens,
    sequence_ids_from_cu_seqlens,
)

SETTINGS = settings(derandomize=True, deadline=None, database=None, max_examples=60)
lengths_st = st.lists(st.integers(0, 7), min_size=0, max_size=6)
CU = torch.tensor([0, 3, 7, 9], dtype=torch.int32)  # the book's example


def segments(cu):
    """(start, end) of every nonempty sequence."""
    values = torch.as_tensor(cu).tolist()
    return [(a, b) for a, b in zip(values[:-1], values[1:], strict=True) if b > a]


def flash_lengths(seed, batch=9, max_seqlen=113):
    """Lengths as flash-attention's generate_random_padding_mask(mode="random") draws them."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(max(1, max_seqlen - 20), max_seqlen + 1, (batch,), generator=g)


# ---------------------------------------------------------------------------
# cu_seqlens helpers


def test_book_example():
    assert positions_from_cu_seqlens(CU).tolist() == [0, 1, 2, 0, 1, 2, 3, 0, 1]
    assert sequence_ids_from_cu_seqlens(CU).tolist() == [0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert max_seqlen_from_cu_seqlens(CU) == 4
    assert torch.equal(cu_seqlens_from_seqlens([3, 4, 2]), CU)
    assert cu_seqlens_from_seqlens([3, 4, 2]).dtype == torch.int32  # flash_attn_varlen_func's dtype
    mask = packed_attention_mask(CU, causal=True)
    assert mask.dtype == torch.bool and mask.shape == (9, 9)
    assert mask[3:7, 3:7].equal(torch.ones(4, 4, dtype=torch.bool).tril())
    assert not mask[3:7, :3].any() and not mask[:3, 3:].any()


@SETTINGS
@given(lengths_st)
def test_positions_ids_and_mask_are_those_of_the_sequences(lengths):
    cu = cu_seqlens_from_seqlens(lengths)
    pos, ids = positions_from_cu_seqlens(cu), sequence_ids_from_cu_seqlens(cu)
    assert pos.tolist() == [p for n in lengths for p in range(n)]
    assert ids.tolist() == [k for k, n in enumerate(lengths) for _ in range(n)]
    assert max_seqlen_from_cu_seqlens(cu) == max(lengths, default=0)
    for causal in (False, True):
        mask = packed_attention_mask(cu, causal=causal)
        i, j = torch.meshgrid(torch.arange(len(ids)), torch.arange(len(ids)), indexing="ij")
        expected = (ids[i] == ids[j]) & ((j <= i) if causal else True)
        assert torch.equal(mask, expected)
    nonempty = cu_seqlens_from_seqlens([n for n in lengths if n])  # position ids cannot show empty sequences
    assert torch.equal(cu_seqlens_from_position_ids(pos), nonempty)


@SETTINGS
@given(st.lists(st.integers(1, 9), min_size=1, max_size=6))
def test_round_trip_with_transformers_prepare_fa_kwargs(lengths):
    fa = pytest.importorskip("transformers.modeling_flash_attention_utils")
    cu = cu_seqlens_from_seqlens(lengths)
    position_ids = positions_from_cu_seqlens(cu).unsqueeze(0)  # [1, total]: a packed batch in transformers
    (cu_q, cu_k), (max_q, max_k) = fa.prepare_fa_kwargs_from_position_ids(position_ids)
    assert torch.equal(cu_q, cu) and torch.equal(cu_k, cu) and cu_q.dtype == cu.dtype == torch.int32
    assert int(max_q) == int(max_k) == max_seqlen_from_cu_seqlens(cu)
    q = torch.zeros(1, position_ids.shape[1], 2, 4)
    *_, (cu_q, _), _ = fa._prepare_from_posids(q, q, q, position_ids)
    assert torch.equal(positions_from_cu_seqlens(cu_q), position_ids[0])


def test_left_padded_positions_match_transformers_generate():
    gen = pytest.importorskip("transformers.generation.utils")
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1], [0, 1, 1, 1, 1]])
    ids = torch.ones_like(mask)
    expected = gen.GenerationMixin._prepare_position_ids_for_generation(None, ids, {"attention_mask": mask})
    assert torch.equal(positions_from_attention_mask(mask), expected)
    assert torch.equal(positions_from_attention_mask(mask.bool()), expected)


def test_transformers_unpad_data_gives_the_same_cu_seqlens():
    fa = pytest.importorskip("transformers.modeling_flash_attention_utils")
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    _, cu, max_len = fa._get_unpad_data(mask)
    assert torch.equal(cu, cu_seqlens_from_seqlens(mask.sum(-1)))
    assert max_len == max_seqlen_from_cu_seqlens(cu)


@pytest.mark.parametrize(
    "cu, error, match",
    [
        (torch.tensor([0.0, 3.0]), TypeError, r"cu_seqlens must hold integers .*got dtype torch.float32"),
        (torch.tensor([True, False]), TypeError, r"cu_seqlens must hold integers .*torch.bool"),
        (torch.tensor([[0, 3]]), ValueError, r"cu_seqlens must be 1-D .*got \(1, 2\)"),
        (torch.tensor([], dtype=torch.int32), ValueError, r"cu_seqlens must be 1-D .*got \(0,\)"),
        (torch.tensor([1, 3]), ValueError, r"cu_seqlens must start at 0, got cu_seqlens\[0\] = 1"),
        ([0, 5, 3], ValueError, r"nondecreasing .*cu_seqlens\[2\] = 3 < cu_seqlens\[1\] = 5"),
        ("0,3", TypeError, r"cu_seqlens must be a tensor, or numbers"),
    ],
)
def test_bad_cu_seqlens(cu, error, match):
    with pytest.raises(error, match=match):
        check_cu_seqlens(cu)
    with pytest.raises(error, match=match):
        positions_from_cu_seqlens(cu)


def test_bad_input_of_the_other_helpers():
    with pytest.raises(ValueError, match=r"must end at the number of packed tokens 8, got cu_seqlens\[-1\] = 9"):
        packed_relative_bias(torch.zeros(8, 8), CU)
    with pytest.raises(ValueError, match=r"bias must be \[\.\.\., total, total\], got \(9, 8\)"):
        packed_relative_bias(torch.zeros(9, 8), CU)
    with pytest.raises(TypeError, match=r"bias must be a floating-point tensor"):
        packed_relative_bias(torch.zeros(9, 9, dtype=torch.long), CU)
    with pytest.raises(ValueError, match=r"seqlens must be >= 0, got \[3, -1\]"):
        cu_seqlens_from_seqlens([3, -1])
    with pytest.raises(ValueError, match=r"position_ids must start at 0 .*got 2"):
        cu_seqlens_from_position_ids([2, 3, 0])
    with pytest.raises(ValueError, match=r"attention_mask must be \[batch, seq_len\] of 0 and 1"):
        positions_from_attention_mask([[0, 2]])
    with pytest.raises(ValueError, match=r"at least one token, got cu_seqlens\[-1\] = 0"):
        packed_alibi_bias(4, [0, 0])


# ---------------------------------------------------------------------------
# Per-sequence positions [b, s] in the absolute encodings


def test_absolute_modules_take_per_sequence_positions():
    torch.manual_seed(0)
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    positions = positions_from_attention_mask(mask)  # [2, 5]
    x = torch.randn(2, 5, 8)
    sin = SinusoidalPositionalEncoding(8, layout="concat", initial_len=2)
    assert torch.equal(sin(x, positions=positions), x + sinusoidal_encoding(positions, 8, layout="concat"))
    assert torch.equal(sin(x, positions=positions[1]), sin(x))  # [s] is the offset-0 positions
    learned = LearnedPositionalEmbedding(6, 8)
    assert torch.equal(learned(x, positions=positions), x + learned.weight[positions])
    assert torch.equal(learned(x[:1], positions=positions[:1]), x[:1] + learned.weight[positions[0]])
    # the left-padded row equals its unpadded tokens
    assert torch.equal(sin(x[:1, 2:]), sin(x, positions=positions)[:1, 2:])
    assert torch.equal(learned(x[:1, 2:]), learned(x, positions=positions)[:1, 2:])
    far = torch.tensor([[0, 70_000.5, 3]], dtype=torch.float64)  # past the cache, fractional: computed
    assert torch.equal(sin(x[:1, :3], positions=far), x[:1, :3] + sinusoidal_encoding(far, 8, layout="concat"))


def test_bad_positions():
    x = torch.zeros(2, 4, 8)
    sin, learned = SinusoidalPositionalEncoding(8), LearnedPositionalEmbedding(6, 8)
    cases = [
        (lambda: sin(x, offset=1, positions=torch.arange(4)), ValueError, "either positions or offset"),
        (lambda: sin(x, positions=torch.arange(5)), ValueError, r"positions must have shape \[4\] or \[batch, 4\]"),
        (lambda: sin(x, positions=torch.zeros(3, 4)), ValueError, r"x must be \[3, 4, dim\] .*got x \(2, 4, 8\)"),
        (lambda: sin(x, positions=torch.ones(4, dtype=torch.bool)), ValueError, "positions must hold real numbers"),
        (lambda: learned(x, positions=torch.arange(4.0)), TypeError, "positions must hold integers"),
        (lambda: learned(x, positions=torch.tensor([0, 1, 6, 2])), IndexError, "position 6 is past .*max_len=6"),
        (lambda: learned(x, positions=torch.tensor([0, -1, 2, 2])), IndexError, "position -1 is before"),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match):
            call()


# ---------------------------------------------------------------------------
# Packed == each sequence alone


@pytest.mark.parametrize("cu", [CU, torch.tensor([0, 0, 5, 5, 6, 13], dtype=torch.int32)])
def test_absolute_and_rotary_packed_equal_separate(cu):
    torch.manual_seed(1)
    total, pos = int(cu[-1]), positions_from_cu_seqlens(cu)
    x = torch.randn(1, total, 12)
    sin, learned = SinusoidalPositionalEncoding(12), LearnedPositionalEmbedding(8, 12)
    rotary = RotaryEmbedding(12)
    q, k = torch.randn(1, 3, total, 12), torch.randn(1, 3, total, 12)
    packed_q, packed_k = rotary(q, k, positions=pos)
    for a, b in segments(cu):
        assert torch.equal(sin(x, positions=pos)[:, a:b], sin(x[:, a:b]))
        assert torch.equal(learned(x, positions=pos)[:, a:b], learned(x[:, a:b]))
        alone_q, alone_k = rotary(q[..., a:b, :], k[..., a:b, :])
        assert torch.equal(packed_q[..., a:b, :], alone_q) and torch.equal(packed_k[..., a:b, :], alone_k)


@pytest.mark.parametrize("causal", [False, True])
def test_relative_biases_packed_equal_separate(causal):
    cu = cu_seqlens_from_seqlens(flash_lengths(0, batch=5, max_seqlen=40))
    total, heads = int(cu[-1]), 6
    alibi = packed_alibi_bias(heads, cu, causal=causal)
    t5 = T5RelativeBias(heads, bidirectional=not causal)
    with torch.no_grad():
        t5_packed = packed_relative_bias(t5(total, total, offset=0), cu)
    outside = ~packed_attention_mask(cu)
    assert alibi[:, outside].eq(-math.inf).all() and t5_packed[:, outside].eq(-math.inf).all()
    slopes = alibi_slopes(heads).double()
    for a, b in segments(cu):
        n = b - a
        i, j = torch.arange(n).unsqueeze(-1), torch.arange(n)
        # flash-attention: -slope * |i + seqlen_k - seqlen_q - j|, causal keys j <= i
        ref = (-slopes[:, None, None] * (i - j).abs()).float()
        if causal:
            ref = ref.masked_fill(j > i, -math.inf)
        assert torch.equal(alibi[:, a:b, a:b], ref)
        with torch.no_grad():
            assert torch.equal(t5_packed[:, a:b, a:b], t5(n, n, offset=0))


def attention_reference(q, k, v, cu, *, causal, slopes=None):
    """flash_attn_varlen_func's output from its documented semantics, one sequence at a time, in float64."""
    out = torch.zeros_like(q, dtype=torch.float64)  # [total, h, d]
    for a, b in segments(cu):
        qs, ks, vs = (t[a:b].double().transpose(0, 1) for t in (q, k, v))  # [h, n, d]
        scores = qs @ ks.transpose(-1, -2) / math.sqrt(q.shape[-1])  # [h, n, n]
        i, j = torch.arange(b - a).unsqueeze(-1), torch.arange(b - a)
        if slopes is not None:
            scores = scores - slopes.double()[:, None, None] * (i - j).abs()
        if causal:
            scores = scores.masked_fill(j > i, -math.inf)
        out[a:b] = (scores.softmax(-1) @ vs).transpose(0, 1)
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [32, 59])
@pytest.mark.parametrize("alibi", [False, True])
def test_packed_attention_matches_flash_varlen_semantics(causal, head_dim, alibi):
    cu = cu_seqlens_from_seqlens(flash_lengths(head_dim))  # batch 9, max_seqlen 113, as flash-attention tests
    total, heads = int(cu[-1]), 6
    g = torch.Generator().manual_seed(head_dim)
    q, k, v = (torch.randn(total, heads, head_dim, generator=g) for _ in range(3))  # flash's [total, h, d]
    if alibi:
        bias, slopes = packed_alibi_bias(heads, cu, causal=causal), alibi_slopes(heads)
    else:
        bias, slopes = packed_attention_mask(cu, causal=causal), None
    out, weights = scaled_dot_product_attention(*(t.transpose(0, 1) for t in (q, k, v)), bias=bias)  # [h, t, d]
    ref = attention_reference(q, k, v, cu, causal=causal, slopes=slopes)
    assert (out.transpose(0, 1) - ref).abs().max() < 1e-5  # float32 against float64
    assert weights[:, ~packed_attention_mask(cu)].eq(0).all()  # no attention across sequences


@pytest.mark.parametrize("scheme", ["none", "sinusoidal", "learned", "shaw", "t5", "alibi", "rope", "rope_pi"])
@pytest.mark.parametrize("causal", [False, True])
def test_tiny_model_packed_equals_separate(scheme, causal):
    cu = torch.tensor([0, 3, 3, 7, 9, 15], dtype=torch.int32)  # with an empty sequence
    model = TinyTransformer(TinyConfig(11, scheme=scheme, causal=causal, max_len=8, dim=16)).double().eval()
    tokens = torch.randint(0, 11, (1, 15), generator=torch.Generator().manual_seed(0))
    logits, maps = model(tokens, cu_seqlens=cu, return_attention=True)
    assert logits.shape == (1, 15, 11) and maps[0].shape == (1, 2, 15, 15)
    outside = ~packed_attention_mask(cu)
    for weights in maps:
        assert weights[0][:, outside].eq(0).all()  # no attention across sequence boundaries
    for a, b in segments(cu):
        alone, alone_maps = model(tokens[:, a:b], return_attention=True)
        torch.testing.assert_close(logits[:, a:b], alone, rtol=0, atol=1e-12)
        for packed, single in zip(maps, alone_maps, strict=True):
            torch.testing.assert_close(packed[..., a:b, a:b], single, rtol=0, atol=1e-12)


def test_tiny_model_bad_packed_input():
    model = TinyTransformer(TinyConfig(11, scheme="rope"))
    tokens = torch.zeros(1, 9, dtype=torch.long)
    with pytest.raises(ValueError, match=r"tokens must be \[1, total\] with offset=0, got tokens \(2, 9\)"):
        model(tokens.expand(2, 9), cu_seqlens=CU)
    with pytest.raises(ValueError, match=r"offset=0, got tokens \(1, 9\), offset=2"):
        model(tokens, cu_seqlens=CU, offset=2)
    with pytest.raises(ValueError, match=r"must end at the number of packed tokens 9, got cu_seqlens\[-1\] = 7"):
        model(tokens, cu_seqlens=CU[:3])


def test_cu_seqlens_past_int32_are_refused_before_positions_are_built():
    """H3: positions_from_cu_seqlens([0, 2**40]) tried to build 2**40 positions (a memory error)."""
    for build in (positions_from_cu_seqlens, sequence_ids_from_cu_seqlens, check_cu_seqlens):
        with pytest.raises(ValueError, match=r"cu_seqlens must end at most at 2147483647 .*got 1099511627776"):
            build([0, 2**40])


def test_positions_from_a_left_padded_mask_are_those_generate_uses():
    """Chapter 10: the positions of a left-padded batch are the ones `transformers`' `generate`
    computes from the attention mask, padding slots included (0 there, in the pinned version)."""
    from transformers.generation.utils import GenerationMixin

    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    theirs = GenerationMixin._prepare_position_ids_for_generation(
        None, torch.zeros_like(mask), {"attention_mask": mask}
    )
    assert torch.equal(positions_from_attention_mask(mask), theirs)
    assert positions_from_attention_mask(mask)[0].tolist() == [0, 0, 0, 1, 2]
