"""Partial rotary (only the first ``rotary_dim`` channels of a head turn) and in-place rotation.

Compared with ``transformers`` (GPT-NeoX and Phi, half layout; GPT-J, interleaved),
rotary-embedding-torch (interleaved) and flash-attention's published formula
(``apply_rotary_emb(x, cos, sin, interleaved, inplace)``, with cos and sin
``[seqlen, rotary_dim / 2]``), on the shapes of flash-attention's own test.
"""

import math

import pytest
import torch
from helpers import randn
from hypothesis import given, settings
from hypothesis import strategies as st
from rotary_embedding_torch import RotaryEmbedding as LucidrainsRotary
from rotary_embedding_torch import apply_rotary_emb as lucidrains_apply
from transformers import GPTNeoXConfig, PhiConfig
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox_apply
from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_apply
from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions
from transformers.models.phi.modeling_phi import PhiRotaryEmbedding
from transformers.models.phi.modeling_phi import apply_rotary_pos_emb as phi_apply

from posenc.layout import ROPE_LAYOUTS, layout_permutation
from posenc.rope.embedding import RotaryEmbedding
from posenc.rope.rotary import apply_rope, rope_cos_sin, rope_inv_freq

F64 = torch.float64


def partial_case(seed, b=2, h=3, s=11, d=16):
    """Queries ``[b, h, s, d]`` drawn with ``seed``."""
    return randn(b, h, s, d, seed=seed)


# ---------------------------------------------------------------------------
# Identities
# ---------------------------------------------------------------------------

pairs = st.tuples(st.integers(1, 8), st.integers(0, 8)).map(lambda t: (2 * t[0], 2 * (t[0] + t[1])))  # (r, d)


@settings(derandomize=True, deadline=None, database=None, max_examples=60)
@given(pairs, st.sampled_from(ROPE_LAYOUTS), st.integers(0, 5000), st.integers(1, 9))
def test_pass_through_unchanged_and_rotated_part_is_full_rope(rd, layout, start, s):
    r, d = rd
    x = randn(2, 3, s, d, seed=r * 100 + d, dtype=F64)
    cos, sin = rope_cos_sin(torch.arange(start, start + s), r, layout=layout, dtype=F64)  # [s, r]
    out = apply_rope(x, cos, sin, layout=layout)
    assert out.shape == x.shape
    assert torch.equal(out[..., r:], x[..., r:])
    assert torch.equal(out[..., :r], apply_rope(x[..., :r].contiguous(), cos, sin, layout=layout))
    # still a rotation: the norm of the rotated part is kept
    torch.testing.assert_close(out[..., :r].norm(dim=-1), x[..., :r].norm(dim=-1), rtol=1e-12, atol=1e-12)
    module = RotaryEmbedding(d, rotary_dim=r, layout=layout)
    assert torch.equal(module(x, x, offset=start)[0], out)


@settings(derandomize=True, deadline=None, database=None, max_examples=40)
@given(pairs, st.sampled_from(ROPE_LAYOUTS), st.sampled_from([torch.float32, torch.bfloat16, F64]))
def test_inplace_equals_out_of_place_and_returns_x(rd, layout, dtype):
    r, d = rd
    x = randn(2, 5, d, seed=d + r, dtype=dtype)
    cos, sin = rope_cos_sin(torch.arange(5), r, layout=layout)  # float32 tables: computed, then copied in
    expected = apply_rope(x, cos, sin, layout=layout)
    for _ in range(2):  # the second call takes the fast path of checked signatures
        y = x.clone()
        out = apply_rope(y, cos, sin, layout=layout, inplace=True)
        assert out is y and torch.equal(y, expected)


def test_interleaved_partial_is_half_partial_after_permuting_the_rotated_channels():
    r, d = 8, 20
    x = partial_case(1, d=d)
    perm = torch.cat((layout_permutation(r, src="interleaved", dst="half"), torch.arange(r, d)))
    ci, si = rope_cos_sin(torch.arange(11), r, layout="interleaved")
    ch, sh = rope_cos_sin(torch.arange(11), r, layout="half")
    torch.testing.assert_close(
        apply_rope(x, ci, si, layout="interleaved")[..., perm], apply_rope(x[..., perm], ch, sh), rtol=0, atol=0
    )


def test_scores_of_partial_rope_depend_on_the_distance_only_through_the_rotated_part():
    r, d = 8, 32
    q, k = randn(d, seed=3, dtype=F64), randn(d, seed=4, dtype=F64)
    module = RotaryEmbedding(d, rotary_dim=r)

    def score(m, n):
        qm, _ = module(q.expand(1, d), q.expand(1, d), positions=torch.tensor([m]))
        kn, _ = module(k.expand(1, d), k.expand(1, d), positions=torch.tensor([n]))
        return (qm @ kn.T).item()

    assert score(7, 3) == pytest.approx(score(107, 103), abs=1e-12)
    # with the rotated channels zeroed, the score is the plain dot product at every distance
    q[:r], k[:r] = 0.0, 0.0
    for m in (0, 5, 500):
        assert score(m, 0) == pytest.approx((q @ k).item(), abs=1e-12)


def test_gradients_flow_through_both_parts_and_through_inplace():
    x = randn(2, 4, 12, dtype=F64, seed=5).requires_grad_()
    cos, sin = rope_cos_sin(torch.arange(4), 4, dtype=F64)
    assert torch.autograd.gradcheck(lambda t: apply_rope(t, cos, sin), (x,))
    assert torch.autograd.gradcheck(lambda t: apply_rope(t * 1.0, cos, sin, inplace=True), (x,))
    g = torch.randn(2, 4, 12, dtype=F64)
    apply_rope(x, cos, sin).backward(g)
    assert torch.equal(x.grad[..., 4:], g[..., 4:])  # the pass-through channels: identity


def test_module_tables_frequencies_and_cache_are_rotary_dim_wide():
    module = RotaryEmbedding(64, rotary_dim=16, initial_len=8)
    assert module.cos_cached.shape == (8, 16)
    assert torch.equal(module._inv_freq, rope_inv_freq(16)[0])
    assert "rotary_dim=16" in repr(module)
    q = randn(1, 2, 40, 64)
    out, _ = module(q, q.clone(), offset=3)  # grows the cache
    cos, sin = rope_cos_sin(torch.arange(3, 43), 16)
    assert torch.equal(out, apply_rope(q, cos, sin))
    meta = RotaryEmbedding(64, rotary_dim=16)
    meta.to("meta").to_empty(device="cpu")  # the tables are computed again, rotary_dim wide
    assert torch.equal(meta.cos_cached, RotaryEmbedding(64, rotary_dim=16).cos_cached)
    q2, k2 = q.clone(), q[:, :1].clone()
    rq, rk = module(q2, k2, offset=3, inplace=True)
    assert rq is q2 and rk is k2 and torch.equal(q2, out) and torch.equal(q2[..., 16:], q[..., 16:])


def test_full_rotary_dim_is_the_default():
    x = partial_case(2)
    assert torch.equal(RotaryEmbedding(16, rotary_dim=16)(x, x)[0], RotaryEmbedding(16)(x, x)[0])


# ---------------------------------------------------------------------------
# Peers
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config, rotary, apply",
    [
        (GPTNeoXConfig(hidden_size=192, num_attention_heads=2), GPTNeoXRotaryEmbedding, neox_apply),  # 25% of 96
        (PhiConfig(hidden_size=128, num_attention_heads=2), PhiRotaryEmbedding, phi_apply),  # 50% of 64
        (
            GPTNeoXConfig(hidden_size=160, num_attention_heads=2, rope_parameters={"partial_rotary_factor": 0.4}),
            GPTNeoXRotaryEmbedding,
            neox_apply,
        ),  # 40% of 80
    ],
)
def test_module_equals_transformers_partial_rotary(config, rotary, apply):
    """GPT-NeoX and Phi: the first ``int(head_dim * partial_rotary_factor)`` channels, half layout."""
    head_dim = config.hidden_size // config.num_attention_heads
    r = int(head_dim * config.rope_parameters["partial_rotary_factor"])
    q, k = randn(2, 2, 300, head_dim, seed=1), randn(2, 2, 300, head_dim, seed=2)
    pos = torch.arange(300).unsqueeze(0)
    cos, sin = rotary(config)(q, pos)  # [1, s, r], float32 angles
    assert cos.shape[-1] == r
    if apply is neox_apply:
        their_q, their_k = apply(q, k, cos, sin)
    else:  # Phi splits in its attention, then rotates the rotary part
        their_rq, their_rk = apply(q[..., :r], k[..., :r], cos, sin)
        their_q, their_k = torch.cat((their_rq, q[..., r:]), -1), torch.cat((their_rk, k[..., r:]), -1)
    # their cos/sin in our apply_rope: the same operations
    assert torch.equal(apply_rope(q, cos.unsqueeze(1), sin.unsqueeze(1)), their_q)
    # our module: float64 angles; theirs float32 angles, a few roundings of position * frequency apart
    ours_q, ours_k = RotaryEmbedding(head_dim, rotary_dim=r)(q, k)
    assert torch.equal(ours_q[..., r:], q[..., r:])
    torch.testing.assert_close(ours_q, their_q, rtol=0, atol=2e-4)
    torch.testing.assert_close(ours_k, their_k, rtol=0, atol=2e-4)


@pytest.mark.parametrize("head_dim, rotary_dim", [(256, 64), (32, 8)])
def test_interleaved_module_equals_transformers_gptj(head_dim, rotary_dim):
    """GPT-J (``rotary_dim`` 64 of 256 in its default config): interleaved pairs within the first channels."""
    s = 200
    q = randn(2, s, 2, head_dim, seed=3)  # GPT-J rotates [b, s, h, d]
    table = create_sinusoidal_positions(s, rotary_dim)  # [s, r]: sines, then cosines
    sin, cos = table[None].chunk(2, dim=-1)  # 2 x [1, s, r/2]
    their = torch.cat((gptj_apply(q[..., :rotary_dim], sin, cos), q[..., rotary_dim:]), dim=-1)
    module = RotaryEmbedding(head_dim, rotary_dim=rotary_dim, layout="interleaved")
    ours, _ = module(q.transpose(1, 2), q.transpose(1, 2))  # [b, h, s, d] views
    torch.testing.assert_close(ours.transpose(1, 2), their, rtol=0, atol=2e-4)


@pytest.mark.parametrize("offset", [0, 100])
@pytest.mark.parametrize("rotary_dim, head_dim", [(8, 32), (16, 16), (32, 64)])
def test_interleaved_equals_rotary_embedding_torch_partial(rotary_dim, head_dim, offset):
    """rotary-embedding-torch rotates the first ``freqs.shape[-1]`` channels (``RotaryEmbedding(dim=r)``)."""
    x = randn(2, 3, 50, head_dim, seed=rotary_dim + head_dim)
    theirs = LucidrainsRotary(rotary_dim).rotate_queries_or_keys(x, offset=offset)
    module = RotaryEmbedding(head_dim, rotary_dim=rotary_dim, layout="interleaved")
    ours, _ = module(x, x, offset=offset)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-4 * (1 + offset / 100))  # theirs: float32 angles
    # their apply_rotary_emb with their freqs: the same as apply_rope with cos/sin of those angles
    freqs = LucidrainsRotary(rotary_dim).forward(torch.arange(50).float())  # [s, r] angles, interleaved
    torch.testing.assert_close(
        apply_rope(x, freqs.cos(), freqs.sin(), layout="interleaved"), lucidrains_apply(freqs, x), rtol=0, atol=1e-6
    )


def flash_reference(x, cos_half, sin_half, interleaved):
    """flash-attention's published formula in float64: ``x`` ``[b, s, h, d]``, cos/sin ``[s, r/2]``.

    ``r = 2 * cos.shape[-1]`` channels rotate; "half" pairs ``(i, i + r/2)``
    (GPT-NeoX style), "interleaved" ``(2i, 2i + 1)`` (GPT-J style); the rest of
    the channels are returned as they are.
    """
    r = 2 * cos_half.shape[-1]
    xr = x[..., :r].double()
    c, s_ = cos_half.double()[:, None], sin_half.double()[:, None]  # [s, 1, r/2]
    if interleaved:
        a, b = xr[..., 0::2], xr[..., 1::2]
        rot = torch.stack((a * c - b * s_, a * s_ + b * c), dim=-1).flatten(-2)
    else:
        a, b = xr[..., : r // 2], xr[..., r // 2 :]
        rot = torch.cat((a * c - b * s_, a * s_ + b * c), dim=-1)
    return torch.cat((rot, x[..., r:].double()), dim=-1)


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rotary_fraction", [1.0, 0.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_equals_flash_attention_formula_on_its_test_shapes(dtype, rotary_fraction, interleaved, inplace):
    """flash-attention's test: batch 4, seqlen 217, 3 heads, headdim 128, random angles, x ``[b, s, h, d]``."""
    b, s, h, d = 4, 217, 3, 128
    r = int(rotary_fraction * d)
    x = randn(b, s, h, d, dtype=dtype, seed=7)
    angle = torch.rand(s, r // 2, generator=torch.Generator().manual_seed(8)) * 2 * math.pi
    cos_half, sin_half = torch.cos(angle), torch.sin(angle)  # flash-attention's [s, r/2]
    expected = flash_reference(x, cos_half, sin_half, interleaved)
    layout = "interleaved" if interleaved else "half"
    widen = (lambda t: t.repeat_interleave(2, -1)) if interleaved else (lambda t: torch.cat((t, t), -1))  # [s, r]
    target = x.clone()
    out = apply_rope(target.transpose(1, 2), widen(cos_half), widen(sin_half), layout=layout, inplace=inplace)
    out = out.transpose(1, 2)  # [b, h, s, d] -> [b, s, h, d]
    if inplace:
        assert out.data_ptr() == target.data_ptr() and torch.equal(target, out)
    else:
        assert torch.equal(target, x)
    assert torch.equal(out[..., r:], x[..., r:])
    # float32 products rounded once to the dtype: within half a unit of it, plus float32 rounding
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(out.double(), expected, rtol=eps, atol=4 * torch.finfo(torch.float32).eps)


# ---------------------------------------------------------------------------
# Triton (through the interpreter)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ROPE_LAYOUTS)
def test_triton_table_kernel_partial_and_inplace_equal_torch(layout):
    triton_rope = pytest.importorskip("posenc.triton_rope")
    pytest.importorskip("triton")
    if not triton_rope.interpreter_mode():  # pragma: no cover
        pytest.skip("runs the kernel through the interpreter")
    x = randn(2, 9, 3, 24, seed=9).transpose(1, 2)  # [b, h, s, d] view of [b, s, h, d]
    cos, sin = rope_cos_sin(torch.arange(9), 8, layout=layout)  # [s, r], r = 8
    expected = apply_rope(x, cos, sin, layout=layout, backend="torch")
    torch.testing.assert_close(apply_rope(x, cos, sin, layout=layout, backend="triton"), expected, rtol=2e-6, atol=0)
    y = x.clone()
    out = apply_rope(y, cos, sin, layout=layout, backend="triton", inplace=True)
    assert out is y
    torch.testing.assert_close(y, expected, rtol=2e-6, atol=0)


@pytest.mark.parametrize("inplace", [False, True])
def test_triton_fused_module_partial_equals_torch(inplace):
    triton_rope = pytest.importorskip("posenc.triton_rope")
    pytest.importorskip("triton")
    if not triton_rope.interpreter_mode():  # pragma: no cover
        pytest.skip("runs the kernel through the interpreter")
    q, k = randn(2, 4, 7, 20, seed=10), randn(2, 2, 7, 20, seed=11)
    torch_q, torch_k = RotaryEmbedding(20, rotary_dim=12, backend="torch")(q, k, offset=5)
    qq, kk = q.clone(), k.clone()
    tri_q, tri_k = RotaryEmbedding(20, rotary_dim=12, backend="triton")(qq, kk, offset=5, inplace=inplace)
    assert (tri_q is qq) == inplace
    torch.testing.assert_close(tri_q, torch_q, rtol=2e-6, atol=1e-6)
    torch.testing.assert_close(tri_k, torch_k, rtol=2e-6, atol=1e-6)
    assert torch.equal(tri_q[..., 12:], q[..., 12:])


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: apply_rope(torch.zeros(3, 8), torch.zeros(3, 10), torch.zeros(3, 10)), ValueError, r"in \[2, 8\].*10"),
        (lambda: apply_rope(torch.zeros(3, 8), torch.zeros(3, 3), torch.zeros(3, 3)), ValueError, r"even rotary_dim"),
        (lambda: apply_rope(torch.zeros(3, 8), torch.zeros(3, 0), torch.zeros(3, 0)), ValueError, r"got 0"),
        (lambda: apply_rope(torch.zeros(3, 8), torch.zeros(5, 4), torch.zeros(5, 4)), ValueError, r"\(5, 4\)"),
        (
            lambda: apply_rope(torch.zeros(3, 8, requires_grad=True), *rope_cos_sin(torch.arange(3), 4), inplace=True),
            ValueError,
            r"inplace=True cannot overwrite x: a leaf tensor that requires grad",
        ),
        (lambda: RotaryEmbedding(8, rotary_dim=10), ValueError, r"rotary_dim must be <= head_dim \(8\), got 10"),
        (lambda: RotaryEmbedding(8, rotary_dim=3), ValueError, r"rotary_dim must be even.*got 3"),
        (lambda: RotaryEmbedding(8, rotary_dim=0), ValueError, r"rotary_dim must be >= 1, got 0"),
    ],
)
def test_bad_input_names_argument_and_limit(call, error, match):
    with pytest.raises(error, match=match):
        call()
