"""Rotary position embedding: hand values, identities as properties, agreement with
``transformers`` and ``rotary-embedding-torch``, the module's cache, and bad input."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from rotary_embedding_torch import RotaryEmbedding as LucidrainsRotary
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from posenc import (
    ROPE_LAYOUTS,
    RotaryEmbedding,
    apply_rope,
    layout_permutation,
    ntk_scaled_base,
    rope_cos_sin,
    rope_inv_freq,
    rope_weight_permutation,
)

F64 = torch.float64
layouts = st.sampled_from(ROPE_LAYOUTS)
head_dims = st.integers(1, 32).map(lambda n: 2 * n)

LLAMA31 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "original_max_position_embeddings": 8192,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
}
# (head_dim, base, scaling) triples covering every rope type and the optional YaRN keys.
SCALINGS = [
    (128, 10000.0, None),
    (64, 10000.0, {"rope_type": "default"}),
    (128, 10000.0, {"rope_type": "linear", "factor": 4.0}),
    (96, 1e6, {"rope_type": "linear", "factor": 2.5}),
    (128, 10000.0, {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 4096}),
    (128, 10000.0, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}),
    (
        64,
        10000.0,
        {
            "rope_type": "yarn",
            "factor": 16.0,
            "original_max_position_embeddings": 2048,
            "beta_fast": 16,
            "beta_slow": 2,
        },
    ),
    (
        64,
        10000.0,
        {
            "rope_type": "yarn",
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "mscale": 1.0,
            "mscale_all_dim": 0.707,
        },
    ),
    (64, 10000.0, {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 2048, "truncate": False}),
    (
        32,
        10000.0,
        {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 512, "attention_factor": 1.5},
    ),
    (128, 500000.0, LLAMA31),
    (
        64,
        10000.0,
        {
            "rope_type": "llama3",
            "factor": 4.0,
            "original_max_position_embeddings": 2048,
            "low_freq_factor": 2.0,
            "high_freq_factor": 8.0,
        },
    ),
]


def hf_rope_parameters(head_dim, base, scaling, seq_len=None):
    """``(inv_freq, attention_factor)`` as transformers computes them for a LLaMA config."""
    params = dict(scaling or {"rope_type": "default"}, rope_theta=base)
    rope_type = params["rope_type"]
    max_pos = 4096
    if rope_type == "dynamic":  # transformers reads the trained length from max_position_embeddings
        max_pos = params.pop("original_max_position_embeddings")
    elif rope_type in ("yarn", "llama3"):
        max_pos = int(params["factor"] * params["original_max_position_embeddings"])
    config = LlamaConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        head_dim=head_dim,
        max_position_embeddings=max_pos,
        rope_parameters=params,
    )
    if rope_type == "default":
        return LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    return ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)


def llama_rotary(head_dim, base, scaling):
    """transformers' LLaMA rotary module for the same parameters."""
    params = dict(scaling or {"rope_type": "default"}, rope_theta=base)
    max_pos = int(params.get("factor", 1) * params.get("original_max_position_embeddings", 256))
    config = LlamaConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        head_dim=head_dim,
        max_position_embeddings=max_pos,
        rope_parameters=params,
    )
    return LlamaRotaryEmbedding(config)


def reference_rotation(x, positions, inv_freq, layout):
    """RoPE written as complex multiplication, in float64: the definition, not the code under test."""
    d = x.shape[-1]
    if layout == "half":
        z = torch.complex(x[..., : d // 2], x[..., d // 2 :])  # [..., d/2]
    else:
        z = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())  # [..., d/2]
    z = z * torch.polar(torch.ones_like(inv_freq), positions[:, None] * inv_freq)  # [s, d/2] broadcast
    if layout == "half":
        return torch.cat((z.real, z.imag), dim=-1)
    return torch.view_as_real(z).reshape(x.shape)  # [..., d/2, 2] -> [..., d]


# ---------------------------------------------------------------------------
# Hand-checkable values
# ---------------------------------------------------------------------------


def test_default_frequencies_by_hand():
    inv_freq, attention_factor = rope_inv_freq(4)
    assert inv_freq.tolist() == pytest.approx([1.0, 0.01], rel=1e-15)
    assert attention_factor == 1.0
    inv_freq, _ = rope_inv_freq(8, base=16.0)
    assert inv_freq.tolist() == pytest.approx([1.0, 0.5, 0.25, 0.125], rel=1e-15)


def test_cos_sin_layouts_by_hand():
    cos, sin = rope_cos_sin(torch.tensor(2), 4, dtype=F64)
    a, b = 2.0, 0.02
    assert cos.tolist() == pytest.approx([math.cos(a), math.cos(b)] * 2, abs=1e-15)
    assert sin.tolist() == pytest.approx([math.sin(a), math.sin(b)] * 2, abs=1e-15)
    cos, sin = rope_cos_sin(torch.tensor(2), 4, layout="interleaved", dtype=F64)
    assert cos.tolist() == pytest.approx([math.cos(a)] * 2 + [math.cos(b)] * 2, abs=1e-15)
    assert sin.tolist() == pytest.approx([math.sin(a)] * 2 + [math.sin(b)] * 2, abs=1e-15)


def test_two_channels_rotate_like_a_point_on_the_plane():
    x = torch.tensor([1.0, 0.0], dtype=F64)
    for layout in ROPE_LAYOUTS:
        cos, sin = rope_cos_sin(torch.tensor(1.0), 2, layout=layout, dtype=F64)
        assert apply_rope(x, cos, sin, layout=layout).tolist() == pytest.approx([math.cos(1), math.sin(1)])
    # A quarter turn at angle pi/2: (a, b) -> (-b, a).
    quarter = torch.tensor(math.pi / 2, dtype=F64)
    cos, sin = rope_cos_sin(quarter, 2, dtype=F64)
    assert apply_rope(torch.tensor([3.0, 4.0], dtype=F64), cos, sin).tolist() == pytest.approx([-4.0, 3.0])


def test_shapes_and_dtypes():
    cos, sin = rope_cos_sin(torch.arange(6).view(2, 3), 8)
    assert cos.shape == sin.shape == (2, 3, 8) and cos.dtype == torch.float32
    x = torch.randn(2, 4, 3, 8, dtype=torch.bfloat16)
    out = apply_rope(x, cos[0], sin[0])
    assert out.shape == x.shape and out.dtype == torch.bfloat16


def test_bfloat16_input_is_rotated_in_float32_and_rounded_once():
    x = torch.randn(1, 2, 50, 16, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    cos, sin = rope_cos_sin(torch.arange(50), 16)
    expected = apply_rope(x.float(), cos, sin).to(torch.bfloat16)
    assert torch.equal(apply_rope(x, cos, sin), expected)


def test_angles_are_float64_by_default_and_float32_on_request():
    pos = torch.arange(10**6, 10**6 + 64)
    exact, _ = rope_cos_sin(pos, 64, dtype=F64)
    default, _ = rope_cos_sin(pos, 64)
    single, _ = rope_cos_sin(pos, 64, angle_dtype=torch.float32)
    assert (default.double() - exact).abs().max() < 1e-7  # correctly rounded float32
    assert (single.double() - exact).abs().max() > 1e-3  # float32 angles at a million


# ---------------------------------------------------------------------------
# Agreement with transformers (half layout) and rotary-embedding-torch (interleaved)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("head_dim, base, scaling", SCALINGS)
def test_frequencies_and_attention_factor_equal_transformers(head_dim, base, scaling):
    ours, ours_factor = rope_inv_freq(head_dim, base=base, scaling=scaling)
    theirs, their_factor = hf_rope_parameters(head_dim, base, scaling)
    assert ours.dtype == F64 and theirs.shape == ours.shape
    assert torch.allclose(ours, theirs.double(), rtol=1e-6, atol=0)  # float32 rounding of theirs
    assert ours_factor == pytest.approx(their_factor, rel=1e-15)


@pytest.mark.parametrize("seq_len", [None, 1, 4096, 4097, 6000, 20000, 100_000])
def test_dynamic_frequencies_equal_transformers_at_each_length(seq_len):
    scaling = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 4096}
    ours, _ = rope_inv_freq(128, scaling=scaling, seq_len=seq_len)
    theirs, _ = hf_rope_parameters(128, 10000.0, scaling, seq_len=seq_len)
    assert torch.allclose(ours, theirs.double(), rtol=1e-6, atol=0)
    if seq_len is None or seq_len <= 4096:
        assert torch.equal(ours, rope_inv_freq(128)[0])


def test_dynamic_uses_largest_position_plus_one():
    scaling = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64}
    pos = torch.tensor([[3, 150], [7, 99]])
    inv_freq, _ = rope_inv_freq(16, scaling=scaling, seq_len=151)
    cos, _ = rope_cos_sin(pos, 16, scaling=scaling, dtype=F64)
    assert torch.allclose(cos[..., :8], torch.cos(pos.double()[..., None] * inv_freq), atol=1e-15)
    short, _ = rope_cos_sin(torch.arange(64), 16, scaling=scaling, dtype=F64)
    assert torch.equal(short, rope_cos_sin(torch.arange(64), 16, dtype=F64)[0])  # within the trained length


@pytest.mark.claim("004-21")
@pytest.mark.parametrize("head_dim, base, scaling", [SCALINGS[0], SCALINGS[2], SCALINGS[5], SCALINGS[10]])
def test_cos_sin_equal_transformers_llama_rotary_module(head_dim, base, scaling):
    module = llama_rotary(head_dim, base, scaling)
    x = torch.zeros(1, 1, 300, head_dim)
    pos = torch.arange(300).unsqueeze(0)  # [1, s]
    their_cos, their_sin = module(x, pos)
    cos, sin = rope_cos_sin(pos, head_dim, base=base, scaling=scaling, angle_dtype=torch.float32)
    # Both form angles in float32, from inverse frequencies that differ in the last bits (theirs are
    # computed in float32): the angles then differ by a few float32 roundings of position * frequency.
    tol = 1e-6 * (1 + pos[..., None])  # [1, s, 1]
    assert torch.all((cos - their_cos).abs() <= tol) and torch.all((sin - their_sin).abs() <= tol)


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 40), head_dims, st.integers(0, 10_000))
def test_apply_rope_equals_transformers_apply_rotary_pos_emb(b, h, s, d, start):
    g = torch.Generator().manual_seed(s * 131 + d)
    q, k = torch.randn(2, b, h, s, d, generator=g)
    pos = torch.arange(start, start + s).expand(b, s)  # [b, s]
    cos, sin = rope_cos_sin(pos, d)  # [b, s, d]
    their_q, their_k = apply_rotary_pos_emb(q, k, cos, sin)  # unsqueezes the head dim
    assert torch.equal(apply_rope(q, cos.unsqueeze(1), sin.unsqueeze(1)), their_q)
    assert torch.equal(apply_rope(k, cos.unsqueeze(1), sin.unsqueeze(1)), their_k)
    bq, bcos, bsin = q.bfloat16(), cos.bfloat16(), sin.bfloat16()  # transformers rotates in the input dtype
    their_bq, _ = apply_rotary_pos_emb(bq, bq, bcos, bsin)
    assert torch.equal(apply_rope(bq, bcos.unsqueeze(1), bsin.unsqueeze(1)), their_bq)


@pytest.mark.parametrize("offset", [0, 37, 1000])
@pytest.mark.parametrize("d", [4, 16, 64])
def test_interleaved_equals_rotary_embedding_torch(d, offset):
    x = torch.randn(2, 3, 50, d, generator=torch.Generator().manual_seed(d + offset))
    theirs = LucidrainsRotary(d).rotate_queries_or_keys(x, offset=offset)
    cos, sin = rope_cos_sin(torch.arange(offset, offset + 50), d, layout="interleaved")
    ours = apply_rope(x, cos, sin, layout="interleaved")
    assert torch.allclose(ours, theirs, atol=1e-4 * (1 + offset / 100), rtol=0)  # theirs: float32 angles
    module = RotaryEmbedding(d, layout="interleaved")
    assert torch.equal(module(x, x, offset=offset)[0], ours)


def test_linear_scaling_equals_rotary_embedding_torch_interpolation():
    x = torch.randn(1, 2, 64, 32, generator=torch.Generator().manual_seed(1))
    theirs = LucidrainsRotary(32, interpolate_factor=4.0).rotate_queries_or_keys(x)
    cos, sin = rope_cos_sin(torch.arange(64), 32, scaling={"rope_type": "linear", "factor": 4.0}, layout="interleaved")
    assert torch.allclose(apply_rope(x, cos, sin, layout="interleaved"), theirs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("factor, d", [(2.0, 64), (4.0, 128), (8.0, 16)])
def test_ntk_base_equals_rotary_embedding_torch_theta_rescale(factor, d):
    theirs = LucidrainsRotary(d, theta_rescale_factor=factor).freqs.detach().double()
    ours, _ = rope_inv_freq(d, base=ntk_scaled_base(10000.0, factor, d))
    assert torch.allclose(ours, theirs, rtol=1e-6, atol=0)
    # The fastest pair keeps its frequency, the slowest slows down by exactly the factor.
    default, _ = rope_inv_freq(d)
    assert ours[0] == default[0] == 1.0
    assert (default[-1] / ours[-1]).item() == pytest.approx(factor, rel=1e-12)


def test_weight_permutation_turns_rotary_embedding_torch_into_transformers():
    """Interleaved model (rotary-embedding-torch) == half model (transformers) after permuting rows."""
    h, d, hidden, s = 3, 16, 24, 40
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, s, hidden, generator=g)
    w_q, w_k = torch.randn(2, h * d, hidden, generator=g)

    def heads(t):
        return t.view(2, s, h, d).transpose(1, 2)  # [b, s, h*d] -> [b, h, s, d]

    rotary = LucidrainsRotary(d)
    q_i, k_i = rotary.rotate_queries_or_keys(heads(x @ w_q.T)), rotary.rotate_queries_or_keys(heads(x @ w_k.T))
    perm = rope_weight_permutation(d, h)
    cos, sin = rope_cos_sin(torch.arange(s).expand(2, s), d)
    q_h, k_h = apply_rotary_pos_emb(heads(x @ w_q[perm].T), heads(x @ w_k[perm].T), cos, sin)
    assert torch.allclose(q_i @ k_i.transpose(-1, -2), q_h @ k_h.transpose(-1, -2), atol=1e-3, rtol=1e-5)


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------


@given(head_dims, layouts, st.floats(-1e4, 1e4, allow_nan=False), st.integers(0, 2**16))
def test_rotation_keeps_norms_and_is_undone_by_minus_angle(d, layout, p, seed):
    x = torch.randn(5, d, generator=torch.Generator().manual_seed(seed), dtype=F64)
    cos, sin = rope_cos_sin(torch.tensor(p, dtype=F64), d, layout=layout, dtype=F64)
    y = apply_rope(x, cos, sin, layout=layout)
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-12)
    assert torch.allclose(apply_rope(y, cos, -sin, layout=layout), x, atol=1e-12)
    back_cos, back_sin = rope_cos_sin(torch.tensor(-p, dtype=F64), d, layout=layout, dtype=F64)
    assert torch.allclose(apply_rope(y, back_cos, back_sin, layout=layout), x, atol=1e-12)


@pytest.mark.claim("004-20")
@given(head_dims, layouts, st.integers(0, 5000), st.integers(0, 5000), st.integers(-3000, 3000))
def test_score_depends_only_on_the_offset(d, layout, m, n, t):
    g = torch.Generator().manual_seed(m + 7 * n)
    q, k = torch.randn(2, d, generator=g, dtype=F64)
    pos = torch.tensor([m, n, m + t, n + t], dtype=F64)
    cos, sin = rope_cos_sin(pos, d, layout=layout, dtype=F64)  # [4, d]
    qm, kn, qmt, knt = (apply_rope(v, cos[i], sin[i], layout=layout) for i, v in enumerate([q, k, q, k]))
    tol = 1e-9 * (1 + q.norm() * k.norm()).item()
    assert torch.dot(qm, kn).item() == pytest.approx(torch.dot(qmt, knt).item(), abs=tol)


@given(head_dims, layouts, st.integers(1, 30), st.integers(0, 3000))
def test_equals_complex_multiplication(d, layout, s, start):
    x = torch.randn(2, s, d, generator=torch.Generator().manual_seed(s + d), dtype=F64)
    pos = torch.arange(start, start + s, dtype=F64)
    cos, sin = rope_cos_sin(pos, d, layout=layout, dtype=F64)
    expected = reference_rotation(x, pos, rope_inv_freq(d)[0], layout)
    assert torch.allclose(apply_rope(x, cos, sin, layout=layout), expected, atol=1e-12)


@given(head_dims, st.integers(1, 4), st.integers(1, 20), st.integers(0, 500))
def test_layouts_agree_after_the_permutation(d, h, s, start):
    x = torch.randn(h, s, d, generator=torch.Generator().manual_seed(d * h + s), dtype=F64)
    pos = torch.arange(start, start + s)
    cos_i, sin_i = rope_cos_sin(pos, d, layout="interleaved", dtype=F64)
    cos_h, sin_h = rope_cos_sin(pos, d, layout="half", dtype=F64)
    to_half = layout_permutation(d, src="interleaved", dst="half")
    rotated_i = apply_rope(x, cos_i, sin_i, layout="interleaved")
    assert torch.equal(apply_rope(x[..., to_half], cos_h, sin_h, layout="half"), rotated_i[..., to_half])
    perm = rope_weight_permutation(d, h)
    assert torch.equal(perm.view(h, d) - torch.arange(h)[:, None] * d, to_half.expand(h, d))
    back = rope_weight_permutation(d, h, src="half", dst="interleaved")
    assert torch.equal(perm[back], torch.arange(h * d))


def test_layout_mismatch_keeps_position_zero_and_breaks_the_rest():
    d, n = 32, 64
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, d, generator=g, dtype=F64)
    pos = torch.arange(n, dtype=F64)
    right = [rope_cos_sin(pos, d, layout="interleaved", dtype=F64), "interleaved"]
    wrong = [rope_cos_sin(pos, d, layout="half", dtype=F64), "half"]

    def scores(tables):
        (cos, sin), layout = tables
        query = apply_rope(q[None], cos[:1], sin[:1], layout=layout)  # at position 0
        keys = apply_rope(k.expand(n, d), cos, sin, layout=layout)  # at positions 0 .. n-1
        return query @ keys.T  # [1, n]

    assert scores(right)[0, 0] == pytest.approx(scores(wrong)[0, 0].item(), rel=1e-12)
    assert (scores(right) - scores(wrong))[0, 1:].abs().min() > 1e-3


# ---------------------------------------------------------------------------
# The module
# ---------------------------------------------------------------------------


@given(
    st.integers(1, 3), st.integers(1, 3), st.integers(1, 24), st.sampled_from([2, 8, 32]), st.integers(0, 3000), layouts
)
def test_module_at_offset_equals_functional_at_shifted_positions(b, h, s, d, offset, layout):
    module = RotaryEmbedding(d, layout=layout, initial_len=8)
    g = torch.Generator().manual_seed(s + offset)
    q, k = torch.randn(b, h, s, d, generator=g), torch.randn(b, 1, s, d, generator=g)
    rq, rk = module(q, k, offset=offset)
    cos, sin = rope_cos_sin(torch.arange(offset, offset + s), d, layout=layout)
    assert torch.equal(rq, apply_rope(q, cos, sin, layout=layout))
    assert torch.equal(rk, apply_rope(k, cos, sin, layout=layout))
    pq, pk = module(q, k, positions=torch.arange(offset, offset + s))
    assert torch.equal(pq, rq) and torch.equal(pk, rk)


def test_module_token_by_token_equals_full_sequence():
    module = RotaryEmbedding(16, initial_len=4)
    q, k = torch.randn(2, 1, 2, 20, 16, generator=torch.Generator().manual_seed(5))
    full_q, full_k = module(q, k)
    steps = [module(q[..., t : t + 1, :], k[..., t : t + 1, :], offset=t) for t in range(20)]
    assert torch.equal(torch.cat([s[0] for s in steps], dim=-2), full_q)
    assert torch.equal(torch.cat([s[1] for s in steps], dim=-2), full_k)


def test_module_cache_is_a_growing_non_persistent_buffer():
    module = RotaryEmbedding(8, initial_len=4)
    assert module.state_dict() == {} and list(module.parameters()) == []
    assert {name for name, _ in module.named_buffers()} == {"cos_cached", "sin_cached"}
    x = torch.zeros(1, 1, 10, 8)
    module(x, x)
    assert module.cos_cached.shape == (10, 8)
    module(x[..., :3, :], x[..., :3, :], offset=9)
    assert module.cos_cached.shape == (20, 8)
    assert torch.equal(module.cos_cached, rope_cos_sin(torch.arange(20), 8)[0])
    module(x, x, positions=torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 55]))
    assert module.cos_cached.shape == (56, 8)


def test_module_buffers_move_with_to():
    module = RotaryEmbedding(8, initial_len=4).to("meta")
    assert module.cos_cached.device.type == "meta" and module.sin_cached.device.type == "meta"
    module._ensure(100)  # grows on the buffer's device
    assert module.cos_cached.device.type == "meta" and module.cos_cached.shape == (100, 8)
    module = RotaryEmbedding(8).to(F64)  # the tables stay float32; float64 inputs are rotated exactly
    assert module.cos_cached.dtype == torch.float32


def test_module_per_sequence_positions_and_dtypes():
    module = RotaryEmbedding(8)
    q = torch.randn(2, 3, 4, 8, generator=torch.Generator().manual_seed(2))
    pos = torch.tensor([[0, 1, 2, 3], [10, 11, 12, 13]])
    rq, _ = module(q, q, positions=pos)
    assert torch.equal(rq[1], module(q[1:], q[1:], offset=10)[0][0])
    out, _ = module(q.bfloat16(), q.bfloat16())
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, module(q.bfloat16().float(), q.bfloat16().float())[0].bfloat16())
    exact, _ = module(q.double(), q.double())
    assert exact.dtype == F64
    cos, sin = rope_cos_sin(torch.arange(4), 8, dtype=F64)
    assert torch.equal(exact, apply_rope(q.double(), cos, sin))
    half_pos, _ = module(q, q, positions=torch.tensor([0.5, 1.5, 2.5, 3.5]))
    cos, sin = rope_cos_sin(torch.tensor([0.5, 1.5, 2.5, 3.5]), 8)
    assert torch.equal(half_pos, apply_rope(q, cos, sin))


def test_module_dynamic_and_yarn():
    scaling = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16}
    module = RotaryEmbedding(8, scaling=scaling)
    q = torch.randn(1, 1, 4, 8, generator=torch.Generator().manual_seed(4))
    rq, _ = module(q, q, offset=40)
    cos, sin = rope_cos_sin(torch.arange(40, 44), 8, scaling=scaling)
    assert torch.equal(rq, apply_rope(q, cos, sin))
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    module = RotaryEmbedding(8, scaling=yarn)
    assert module.attention_factor == pytest.approx(0.1 * math.log(4.0) + 1.0)
    rq, rk = module(q, q)
    plain, _ = RotaryEmbedding(8)(q, q)
    assert torch.allclose(rq.norm(dim=-1), module.attention_factor * plain.norm(dim=-1), rtol=1e-6)


# ---------------------------------------------------------------------------
# Long-context scaling: what each rope type does to short and long wavelengths
# ---------------------------------------------------------------------------


def test_what_each_scaling_does_to_wavelengths():
    d, original, factor = 128, 4096, 4.0
    default, _ = rope_inv_freq(d)
    wavelength = 2 * math.pi / default

    def ratio(scaling):
        return default / rope_inv_freq(d, scaling=scaling)[0]  # how much longer each wavelength becomes

    linear = ratio({"rope_type": "linear", "factor": factor})
    assert torch.allclose(linear, torch.full_like(linear, factor))
    yarn = ratio({"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": original})
    assert torch.all(yarn[wavelength < original / 32] == 1.0)  # 32+ turns in the context: kept
    assert torch.allclose(yarn[wavelength > original], torch.tensor(factor, dtype=F64))  # under a turn: scaled
    llama3 = ratio(
        {
            "rope_type": "llama3",
            "factor": factor,
            "original_max_position_embeddings": original,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        }
    )
    assert torch.all(llama3[wavelength < original / 4] == 1.0)
    assert torch.allclose(llama3[wavelength > original], torch.tensor(factor, dtype=F64))
    assert torch.all(llama3[1:] >= llama3[:-1]) and torch.all(yarn[1:] >= yarn[:-1])
    ntk = default / rope_inv_freq(d, base=ntk_scaled_base(10000.0, factor, d))[0]
    assert ntk[0] == 1.0 and ntk[-1].item() == pytest.approx(factor) and torch.all(ntk[1:] > ntk[:-1])


def test_linear_scaling_is_position_interpolation():
    pos = torch.arange(0, 5000, 7)
    scaled, _ = rope_cos_sin(pos, 32, scaling={"rope_type": "linear", "factor": 4.0}, dtype=F64)
    interpolated, _ = rope_cos_sin(pos / 4.0, 32, dtype=F64)
    assert torch.allclose(scaled, interpolated, atol=1e-12)


def test_yarn_attention_factor_scales_scores_by_its_square():
    yarn = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 128}
    inv_freq, factor = rope_inv_freq(32, scaling=yarn)
    assert factor == pytest.approx(0.1 * math.log(8.0) + 1.0, rel=1e-15)
    cos, sin = rope_cos_sin(torch.arange(20), 32, scaling=yarn, dtype=F64)
    angles = torch.arange(20, dtype=F64)[:, None] * inv_freq
    assert torch.allclose(cos[:, :16], factor * torch.cos(angles), atol=1e-15)
    q, k = torch.randn(2, 20, 32, generator=torch.Generator().manual_seed(0), dtype=F64)
    unit_cos, unit_sin = cos / factor, sin / factor
    scores = apply_rope(q, cos, sin) @ apply_rope(k, cos, sin).T
    unit = apply_rope(q, unit_cos, unit_sin) @ apply_rope(k, unit_cos, unit_sin).T
    assert torch.allclose(scores, factor**2 * unit, atol=1e-10)


def test_rope_theta_key_is_accepted_when_it_matches_base():
    params = dict(LLAMA31, rope_theta=500000.0)
    assert torch.equal(
        rope_inv_freq(128, base=500000.0, scaling=params)[0], rope_inv_freq(128, base=500000.0, scaling=LLAMA31)[0]
    )


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: rope_inv_freq(7), r"head_dim must be even.*got 7"),
        (lambda: rope_inv_freq(0), r"head_dim must be >= 1, got 0"),
        (lambda: rope_inv_freq(8, base=0.5), r"base must be a finite number > 1, got 0.5"),
        (lambda: rope_inv_freq(8, scaling={"rope_type": "ntk"}), r"scaling\['rope_type'\] must be one of .*'ntk'"),
        (lambda: rope_inv_freq(8, scaling={"rope_type": "linear"}), r"scaling is missing 'factor'.*'linear'"),
        (
            lambda: rope_inv_freq(8, scaling={"rope_type": "yarn", "factor": 2.0}),
            r"missing 'original_max_position_embeddings'.*'yarn'",
        ),
        (
            lambda: rope_inv_freq(
                8, scaling={"rope_type": "llama3", "factor": 2.0, "original_max_position_embeddings": 8}
            ),
            r"missing 'low_freq_factor', 'high_freq_factor'",
        ),
        (
            lambda: rope_inv_freq(8, scaling={"rope_type": "dynamic", "factor": 2.0}),
            r"missing 'original_max_position_embeddings'.*'dynamic'",
        ),
        (
            lambda: rope_inv_freq(8, scaling={"rope_type": "linear", "factor": 0.5}),
            r"scaling\['factor'\] must be a finite number >= 1, got 0.5",
        ),
        (lambda: rope_inv_freq(8, scaling={"rope_type": "linear", "facter": 2.0}), r"unknown key\(s\) 'facter'"),
        (lambda: rope_inv_freq(8, scaling={"rope_type": "linear", "factor": "2"}), r"scaling\['factor'\].*got '2'"),
        (
            lambda: rope_inv_freq(8, scaling=dict(YARN, original_max_position_embeddings=0)),
            r"original_max_position_embeddings'\] must be a finite number > 0, got 0",
        ),
        (
            lambda: rope_inv_freq(8, scaling=dict(YARN, beta_fast=1, beta_slow=2)),
            r"beta_fast'\] must be >= scaling\['beta_slow'\], got beta_fast=1 and beta_slow=2",
        ),
        (
            lambda: rope_inv_freq(8, scaling=dict(LLAMA31, low_freq_factor=8.0)),
            r"high_freq_factor'\] must be >= .*high_freq_factor=4 and low_freq_factor=8",
        ),
        (
            lambda: rope_inv_freq(8, base=10000.0, scaling=dict(YARN, rope_theta=500000.0)),
            r"rope_theta'\] = 500000.0 disagrees",
        ),
        (lambda: rope_inv_freq(8, scaling=[("rope_type", "linear")]), r"scaling must be None or a dict"),
        (
            lambda: rope_inv_freq(
                2, scaling={"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8}
            ),
            r"head_dim must be >= 4.*got 2",
        ),
        (
            lambda: rope_inv_freq(
                8, scaling={"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8}, seq_len=1e999
            ),
            r"seq_len must be a finite number, got inf",
        ),
        (lambda: ntk_scaled_base(10000.0, 0.9, 64), r"factor must be a finite number >= 1, got 0.9"),
        (lambda: ntk_scaled_base(10000.0, 2.0, 9), r"head_dim must be even.*got 9"),
        (lambda: rope_cos_sin(torch.arange(4), 6, layout="concat"), r"layout must be one of 'half', 'interleaved'"),
        (lambda: rope_cos_sin(torch.arange(4), 5), r"head_dim must be even.*got 5"),
        (lambda: rope_cos_sin(torch.tensor([True]), 4), r"positions must hold real numbers"),
        (
            lambda: rope_cos_sin(torch.arange(4), 4, angle_dtype=torch.bfloat16),
            r"angle_dtype must be torch.float32 or torch.float64.*got torch.bfloat16",
        ),
        (
            lambda: apply_rope(torch.zeros(3, 7), torch.zeros(3, 7), torch.zeros(3, 7)),
            r"head_dim \(x.shape\[-1\]\) must be even.*got 7",
        ),
        (
            lambda: apply_rope(torch.zeros(3, 8), torch.zeros(3, 10), torch.zeros(3, 10)),
            r"cos has shape \(3, 10\)",
        ),
        (
            lambda: apply_rope(torch.zeros(3, 8), torch.zeros(5, 8), torch.zeros(5, 8)),
            r"cos has shape \(5, 8\).*broadcastable to x \(3, 8\)",
        ),
        (
            lambda: apply_rope(torch.zeros(3, 8), torch.zeros(2, 3, 8), torch.zeros(2, 3, 8)),
            r"cos has shape \(2, 3, 8\)",
        ),
        (
            lambda: apply_rope(torch.zeros(3, 8), torch.zeros(3, 8), torch.zeros(1, 8)),
            r"cos and sin must have one shape, got cos \(3, 8\) and sin \(1, 8\)",
        ),
        (
            lambda: apply_rope(torch.zeros(3, 8), torch.zeros(3, 8), torch.zeros(3, 8), layout="neox"),
            r"layout must be one of .*'neox'",
        ),
        (lambda: rope_weight_permutation(6, 0), r"num_heads must be >= 1, got 0"),
        (lambda: rope_weight_permutation(6, 2, dst="concat"), r"dst must be one of 'half', 'interleaved'"),
        (lambda: RotaryEmbedding(6, layout="gptj"), r"layout must be one of"),
        (lambda: RotaryEmbedding(5), r"head_dim must be even.*got 5"),
        (lambda: RotaryEmbedding(8, scaling={"rope_type": "su"}), r"rope_type'\] must be one of"),
        (
            lambda: RotaryEmbedding(8)(torch.zeros(1, 2, 3, 6), torch.zeros(1, 2, 3, 8)),
            r"q must have shape \[..., seq_len, 8\].*got \(1, 2, 3, 6\)",
        ),
        (
            lambda: RotaryEmbedding(8)(torch.zeros(1, 2, 3, 8), torch.zeros(1, 2, 4, 8)),
            r"k has length 4 \(dim -2\), expected q's length 3",
        ),
        (
            lambda: RotaryEmbedding(8)(torch.zeros(1, 3, 8), torch.zeros(1, 3, 8), offset=-1),
            r"offset must be >= 0, got -1",
        ),
        (
            lambda: RotaryEmbedding(8)(torch.zeros(1, 3, 8), torch.zeros(1, 3, 8), positions=torch.arange(4)),
            r"positions must have shape \[3\] or \[batch, 3\].*got \(4,\)",
        ),
        (
            lambda: RotaryEmbedding(8)(torch.zeros(1, 3, 8), torch.zeros(1, 3, 8), positions=torch.arange(3), offset=2),
            r"either positions or offset, not both; got offset=2",
        ),
    ],
)
def test_bad_input_names_argument_and_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_module_positions_of_every_integer_dtype_index_the_cache(dtype):
    module = RotaryEmbedding(8, initial_len=4, backend="torch")
    x = torch.randn(1, 2, 4, 8, generator=torch.Generator().manual_seed(3))
    expected = module(x, x, positions=torch.arange(4))[0]
    assert torch.equal(module(x, x, positions=torch.arange(4, dtype=dtype))[0], expected)


def test_module_rejects_boolean_positions_on_the_cached_path():
    x = torch.zeros(1, 2, 4, 8)
    with pytest.raises(ValueError, match=r"positions must hold real numbers, got dtype torch\.bool"):
        RotaryEmbedding(8, backend="torch")(x, x, positions=torch.tensor([True] * 4))


def test_per_sequence_positions_reach_every_head_of_a_5d_input():
    q5 = torch.randn(2, 3, 2, 4, 8, generator=torch.Generator().manual_seed(4))  # [b, groups, heads, s, d]
    pos = torch.stack([torch.arange(4), torch.arange(4) + 100])  # [b, s], b == heads: must not broadcast onto heads
    module = RotaryEmbedding(8, backend="torch")
    out = module(q5, q5, positions=pos)[0]
    for b in range(2):
        assert torch.equal(out[b], module(q5[b], q5[b], positions=pos[b])[0])


def test_python_float_positions_keep_float64_precision():
    cos, _ = rope_cos_sin([1e6 + 0.1], 64, dtype=torch.float64)
    exact, _ = rope_cos_sin(torch.tensor([1e6 + 0.1], dtype=torch.float64), 64, dtype=torch.float64)
    assert torch.equal(cos, exact)


def test_meta_tensors_give_shapes_and_a_mix_gives_a_clear_error():
    """On the meta device (shape propagation, meta-device initialisation) the module computes the
    tables rather than reading its cache, as rope_cos_sin does; meta positions with real queries,
    whose values cannot be copied, are refused by name."""
    meta = torch.zeros(2, 3, 5, 8, device="meta")
    module = RotaryEmbedding(8)
    for positions in (None, torch.arange(5, device="meta"), torch.arange(10, device="meta").view(2, 5)):
        q, k = module(meta, meta, positions=positions)
        assert q.is_meta and k.is_meta and q.shape == k.shape == meta.shape
    real = torch.zeros(2, 3, 5, 8)
    with pytest.raises(ValueError, match="positions are on meta but q on cpu"):
        module(real, real, positions=torch.arange(5, device="meta"))
