"""The fused Triton RoPE kernels, run on the CPU through Triton's interpreter.

``tests/conftest.py`` sets ``TRITON_INTERPRET=1`` where there is no GPU, before
``posenc.triton_rope`` first decorates its kernels. Every check compares the
kernels with posenc's torch path or with a float64 reference: forward and
backward, both layouts, float32/float16/bfloat16, odd lengths, offsets and
position tensors, grouped-query head counts, in place and out of place.
"""

import json
import os
import subprocess
import sys

import pytest
import torch
from helpers import randn
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc.triton_rope as triton_rope
from posenc import (
    ROPE_BACKENDS,
    ROPE_LAYOUTS,
    RotaryEmbedding,
    apply_rope,
    rope_cos_sin,
    rope_inv_freq,
)
from posenc.benchmark import rope_reference
from posenc.triton_rope import (
    TRITON_DTYPES,
    interpreter_mode,
    launch,
    rope_qk_triton,
    split_frequencies,
)

pytest.importorskip("triton")
if not interpreter_mode():  # pragma: no cover - a GPU run: these tests use CPU tensors
    pytest.skip("these tests run the kernel through the interpreter", allow_module_level=True)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Largest difference allowed from the torch path: both round float32 values that agree to a few float32
# units to the output dtype, so they are equal or one unit of the output dtype apart.
RTOL = {torch.float32: 2e-6, torch.float16: 2**-10, torch.bfloat16: 2**-7}


def qk(batch, q_heads, kv_heads, seq_len, head_dim, dtype, *, seed=0, projected=False):
    """Queries and keys; ``projected`` gives ``[b, h, s, d]`` views of ``[b, s, h, d]`` memory."""
    if projected:
        q = randn(batch, seq_len, q_heads, head_dim, dtype=dtype, seed=seed).transpose(1, 2)
        k = randn(batch, seq_len, kv_heads, head_dim, dtype=dtype, seed=seed + 1).transpose(1, 2)
        return q, k
    return (
        randn(batch, q_heads, seq_len, head_dim, dtype=dtype, seed=seed),
        randn(batch, kv_heads, seq_len, head_dim, dtype=dtype, seed=seed + 1),
    )


def assert_close(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=RTOL[actual.dtype], atol=1e-6)


# ---------------------------------------------------------------------------
# Forward: the fused kernel against the torch path
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ROPE_LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_kernel_equals_torch_path(layout, dtype):
    q, k = qk(2, 4, 2, 3, 16, dtype, projected=True)
    torch_rope = RotaryEmbedding(16, layout=layout, backend="torch")
    triton_module = RotaryEmbedding(16, layout=layout, backend="triton")
    q_out, k_out = triton_module(q, k, offset=37)
    q_ref, k_ref = torch_rope(q, k, offset=37)
    assert_close(q_out, q_ref)
    assert_close(k_out, k_ref)
    assert q_out.stride() == q.stride()  # a [b, s, h, d] memory layout is kept, not copied


@pytest.mark.parametrize(
    "batch, q_heads, kv_heads, seq_len, head_dim",
    [
        (1, 1, 1, 1, 2),  # the smallest: one pair
        (1, 3, 1, 5, 12),  # head_dim 12: 6 pairs in a block of 8
        (2, 6, 3, 7, 10),  # odd pair count, head counts not powers of two
        (1, 40, 8, 1, 128),  # more query heads than one block holds: the head loop runs twice
    ],
)
@pytest.mark.parametrize("layout", ROPE_LAYOUTS)
def test_odd_shapes_and_grouped_query_heads(batch, q_heads, kv_heads, seq_len, head_dim, layout):
    q, k = qk(batch, q_heads, kv_heads, seq_len, head_dim, torch.float32, seed=seq_len)
    out = RotaryEmbedding(head_dim, layout=layout, backend="triton")(q, k, offset=1000)
    ref = RotaryEmbedding(head_dim, layout=layout, backend="torch")(q, k, offset=1000)
    assert_close(out[0], ref[0])
    assert_close(out[1], ref[1])


def test_position_tensors_one_row_or_one_per_sequence():
    q, k = qk(2, 2, 1, 3, 8, torch.float32)
    torch_rope, triton_module = RotaryEmbedding(8, backend="torch"), RotaryEmbedding(8, backend="triton")
    for positions in (torch.tensor([7, 0, 3]), torch.tensor([[5, 9, 2], [0, 1, 11]]), torch.tensor([[4, 4, 4]])):
        out, ref = triton_module(q, k, positions), torch_rope(q, k, positions)
        assert_close(out[0], ref[0])
        assert_close(out[1], ref[1])
    # Fractional positions too (converted to float32 inside the kernel).
    pos = torch.tensor([0.5, 2.25, 3.75])
    assert_close(triton_module(q, k, pos)[0], torch_rope(q, k, pos)[0])


def test_offset_equals_explicit_positions():
    q, k = qk(1, 2, 2, 5, 8, torch.bfloat16)
    module = RotaryEmbedding(8, backend="triton")
    by_offset = module(q, k, offset=4090)
    by_positions = module(q, k, torch.arange(4090, 4095))
    assert torch.equal(by_offset[0], by_positions[0]) and torch.equal(by_offset[1], by_positions[1])


def test_large_positions_are_as_accurate_as_float64_angles():
    """Angles are carried beyond float32 inside the kernel: float32 output within 1e-6 of float64 at 10**5."""
    q, k = qk(1, 2, 1, 4, 64, torch.float32)
    inv_freq, _ = rope_inv_freq(64)
    positions = torch.arange(100_000, 100_004)
    q_out, _ = rope_qk_triton(q, k, inv_freq, positions=positions)
    exact = rope_reference(q, inv_freq, positions)
    assert (q_out.double() - exact).abs().max() < 1e-6
    # A plain float32 product position * theta is off by up to ~4e-3 radian here.
    plain = rope_reference(q, inv_freq, positions, angle_dtype=torch.float32)
    assert (plain - exact).abs().max() > 1e-4


def test_positions_past_float32_integers_are_refused_not_rounded():
    """From 2**24 on float32 cannot hold every integer: the kernel would rotate by a neighbour's angle."""
    q, k = qk(1, 2, 1, 2, 8, torch.float32)
    inv_freq, _ = rope_inv_freq(8)
    rope_qk_triton(q, k, inv_freq, positions=torch.tensor([2**24 - 2, 2**24 - 1]))  # the last exact ones
    for bad in (
        {"positions": torch.tensor([0, 2**24 + 1])},
        {"offset": 2**24 - 1},
        {"positions": -torch.tensor([0, 2**24])},
    ):
        with pytest.raises(ValueError, match=r"within \+-16777215 \(2\*\*24 - 1\).*backend='torch'"):
            rope_qk_triton(q, k, inv_freq, **bad)
    with pytest.raises(ValueError, match="2\\*\\*24"):
        RotaryEmbedding(8, backend="triton")(q, k, offset=2**25 + 3)


def test_auto_leaves_positions_past_the_kernels_range_to_the_torch_path(triton_calls):
    calls = triton_calls
    q, k = qk(1, 2, 1, 3, 8, torch.float32)
    module = RotaryEmbedding(8)
    far = torch.tensor([0, 5, 2**25 + 3])
    assert torch.equal(module(q, k, far)[0], RotaryEmbedding(8, backend="torch")(q, k, far)[0])
    module(q, k, offset=2**24)
    assert calls == []
    module(q, k, offset=2**24 - 3)  # the last three exact positions: the kernel
    assert calls == [1]


def test_scalings_attention_factor_and_dynamic_frequencies():
    q, k = qk(1, 2, 1, 3, 16, torch.float32)
    for scaling in (
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
        {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64},
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "original_max_position_embeddings": 64,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    ):
        triton_module = RotaryEmbedding(16, scaling=scaling, backend="triton")
        torch_rope = RotaryEmbedding(16, scaling=scaling, backend="torch")
        for kwargs in ({"offset": 200}, {"positions": torch.tensor([3, 150, 90])}):
            out, ref = triton_module(q, k, **kwargs), torch_rope(q, k, **kwargs)
            assert_close(out[0], ref[0])
            assert_close(out[1], ref[1])


def test_agrees_with_float64_reference_within_dtype_rounding():
    for dtype, bound in ((torch.float32, 1e-6), (torch.float16, 1e-3), (torch.bfloat16, 5e-3)):
        q, k = qk(2, 4, 2, 5, 32, dtype, seed=3)
        inv_freq, _ = rope_inv_freq(32)
        positions = torch.arange(11, 16)
        q_out, _ = rope_qk_triton(q, k, inv_freq, positions=positions)
        exact = rope_reference(q, inv_freq, positions)
        assert ((q_out.double() - exact).norm() / exact.norm()).item() < bound


# ---------------------------------------------------------------------------
# Outputs, in place, empty inputs
# ---------------------------------------------------------------------------


def test_every_output_element_is_written_over_poison():
    q, k = qk(2, 3, 1, 5, 12, torch.bfloat16, projected=True)
    f_hi, f_lo = split_frequencies(rope_inv_freq(12)[0])
    for interleaved in (False, True):
        q_out = torch.full_like(q, float("nan"))
        k_out = torch.full_like(k, float("nan"))
        launch._launch_angles(
            q, q_out, k, k_out, (f_hi, f_lo), positions=None, offset=3, scale=1.0, interleaved=interleaved
        )
        assert torch.isfinite(q_out).all() and torch.isfinite(k_out).all()
        layout = "interleaved" if interleaved else "half"
        assert_close(q_out, RotaryEmbedding(12, layout=layout, backend="torch")(q, k, offset=3)[0])
    x = randn(1, 40, 2, 128, dtype=torch.bfloat16)  # 40 heads: the table kernel's head loop runs twice
    for layout in ROPE_LAYOUTS:
        cos, sin = rope_cos_sin(torch.arange(2), 128, layout=layout)  # [s, d]
        out = torch.full_like(x, float("nan"))
        launch._launch_table(x, out, cos.expand(x.shape), sin.expand(x.shape), interleaved=layout == "interleaved")
        assert torch.isfinite(out).all()
        assert torch.equal(out, apply_rope(x, cos, sin, layout=layout, backend="torch"))


def test_in_place_returns_the_inputs_rotated():
    for layout in ROPE_LAYOUTS:
        q, k = qk(1, 4, 2, 3, 8, torch.float16, projected=True)
        expected = RotaryEmbedding(8, layout=layout, backend="torch")(q, k, offset=2)
        q_ptr = q.data_ptr()
        q_out, k_out = RotaryEmbedding(8, layout=layout, backend="triton")(q, k, offset=2, inplace=True)
        assert q_out is q and k_out is k and q.data_ptr() == q_ptr
        assert_close(q, expected[0])
        assert_close(k, expected[1])


def test_torch_backend_in_place_matches():
    q, k = qk(1, 2, 1, 3, 8, torch.float32)
    expected = RotaryEmbedding(8, backend="torch")(q, k)
    q_out, k_out = RotaryEmbedding(8, backend="torch")(q, k, inplace=True)
    assert q_out is q and torch.equal(q, expected[0]) and torch.equal(k, expected[1])


def test_empty_sequence():
    q, k = qk(2, 2, 1, 0, 8, torch.float32)
    q_out, k_out = RotaryEmbedding(8, backend="triton")(q, k)
    assert q_out.shape == q.shape and k_out.shape == k.shape


@pytest.mark.parametrize("layout", ROPE_LAYOUTS)
@pytest.mark.parametrize(("split_qk", "tile"), [(False, 2048), (True, 2048), (False, 32), (True, 64)])
def test_every_launch_choice_gives_the_same_bits(layout, split_qk, tile):
    """scripts/triton_sweep.py times these choices on a GPU; each must compute exactly what the default does."""
    q, k = qk(2, 6, 3, 5, 16, torch.bfloat16, projected=True)  # tile 32: 4 of 6 query heads per step
    freqs = split_frequencies(rope_inv_freq(16)[0])
    common = {"positions": None, "offset": 3, "scale": 1.0, "interleaved": layout == "interleaved"}
    want_q, want_k = torch.empty_like(q), torch.empty_like(k)
    launch._launch_angles(q, want_q, k, want_k, freqs, **common)
    got_q, got_k = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
    launch._launch_angles(q, got_q, k, got_k, freqs, **common, split_qk=split_qk, num_warps=8, tile=tile)
    assert torch.equal(got_q, want_q) and torch.equal(got_k, want_k)
    ref_q, ref_k = RotaryEmbedding(16, layout=layout, backend="torch")(q, k, offset=3)
    assert_close(want_q, ref_q)
    assert_close(want_k, ref_k)


# ---------------------------------------------------------------------------
# Backward: the rotation by -theta
# ---------------------------------------------------------------------------


def grads(module, q, k, grad_q, grad_k, **kwargs):
    q, k = q.clone().requires_grad_(), k.clone().requires_grad_()
    q_out, k_out = module(q, k, **kwargs)
    ((q_out * grad_q).sum() + (k_out * grad_k).sum()).backward()
    return q.grad, k.grad


@pytest.mark.parametrize("layout", ROPE_LAYOUTS)
def test_backward_equals_torch_autograd(layout):
    q, k = qk(2, 4, 2, 3, 12, torch.float32, projected=True)
    grad_q, grad_k = randn(*q.shape, seed=7), randn(*k.shape, seed=8)
    for kwargs in ({"offset": 5}, {"positions": torch.tensor([[1, 8, 3], [2, 2, 0]])}):
        ours = grads(RotaryEmbedding(12, layout=layout, backend="triton"), q, k, grad_q, grad_k, **kwargs)
        ref = grads(RotaryEmbedding(12, layout=layout, backend="torch"), q, k, grad_q, grad_k, **kwargs)
        assert_close(ours[0], ref[0])
        assert_close(ours[1], ref[1])


def test_backward_is_the_inverse_rotation():
    """The gradient of a rotation is the rotation back: rotating the gradient forward gives it back."""
    q, k = qk(1, 2, 1, 3, 8, torch.float32)
    grad_q, grad_k = randn(*q.shape, seed=4), randn(*k.shape, seed=5)
    module = RotaryEmbedding(8, backend="triton")
    gq, gk = grads(module, q, k, grad_q, grad_k, offset=9)
    back_q, back_k = module(gq, gk, offset=9)
    assert_close(back_q, grad_q)
    assert_close(back_k, grad_k)


def test_backward_through_in_place_rotation_of_an_intermediate():
    leaf_q, leaf_k = qk(1, 2, 1, 3, 8, torch.float32)
    leaf_q.requires_grad_()
    leaf_k.requires_grad_()
    q, k = leaf_q * 2, leaf_k * 2  # not leaves: may be overwritten
    q_out, k_out = RotaryEmbedding(8, backend="triton")(q, k, offset=1, inplace=True)
    (q_out.sum() + 2 * k_out.sum()).backward()
    expected = grads(
        RotaryEmbedding(8, backend="torch"),
        leaf_q.detach() * 2,
        leaf_k.detach() * 2,
        torch.ones_like(q),
        2 * torch.ones_like(k),
        offset=1,
    )
    assert_close(leaf_q.grad, 2 * expected[0])
    assert_close(leaf_k.grad, 2 * expected[1])


# ---------------------------------------------------------------------------
# Table mode: apply_rope(..., backend="triton")
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ROPE_LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_apply_rope_triton_reads_tables_like_torch(layout, dtype):
    x = randn(2, 3, 5, 12, dtype=dtype)
    cos, sin = rope_cos_sin(torch.arange(5, 10), 12, layout=layout)  # [s, d]
    assert torch.equal(
        apply_rope(x, cos, sin, layout=layout, backend="triton"),
        apply_rope(x, cos, sin, layout=layout, backend="torch"),
    )


def test_apply_rope_triton_broadcasts_and_takes_fewer_dims():
    positions = torch.tensor([[0, 4, 9], [3, 3, 1]])
    cos, sin = rope_cos_sin(positions, 8)  # [b, s, d]
    x = randn(2, 2, 3, 8)
    per_batch = apply_rope(x, cos[:, None], sin[:, None], backend="triton")  # cos [b, 1, s, d]
    assert torch.equal(per_batch, apply_rope(x, cos[:, None], sin[:, None], backend="torch"))
    for y, c, s in (
        (randn(3, 8, seed=2), cos[0], sin[0]),  # [s, d]
        (randn(4, 3, 8, seed=3), cos[1], sin[1]),  # [h, s, d]
        (randn(8, seed=4), cos[0, 1], sin[0, 1]),  # one vector
    ):
        assert torch.equal(apply_rope(y, c, s, backend="triton"), apply_rope(y, c, s, backend="torch"))


def test_apply_rope_triton_writes_into_out():
    x = randn(2, 3, 5, 12)
    cos, sin = rope_cos_sin(torch.arange(5), 8)  # partial rotary: 8 of 12 channels
    out = torch.full_like(x, float("nan"))
    assert apply_rope(x, cos, sin, backend="triton", out=out) is out
    assert torch.equal(out, apply_rope(x, cos, sin, backend="torch"))


def test_apply_rope_triton_backward_is_the_transpose():
    x = randn(1, 2, 4, 8).requires_grad_()
    cos, sin = rope_cos_sin(torch.arange(4), 8)
    grad = randn(1, 2, 4, 8, seed=3)
    (apply_rope(x, cos, sin, backend="triton") * grad).sum().backward()
    ours = x.grad.clone()
    x.grad = None
    (apply_rope(x, cos, sin, backend="torch") * grad).sum().backward()
    torch.testing.assert_close(ours, x.grad, rtol=2e-6, atol=1e-6)


# ---------------------------------------------------------------------------
# Property: any small shape, any offset, either layout
# ---------------------------------------------------------------------------


@settings(max_examples=12)
@given(
    batch=st.integers(1, 2),
    kv_heads=st.integers(1, 2),
    group=st.integers(1, 3),
    seq_len=st.integers(1, 4),
    pairs=st.integers(1, 9),
    offset=st.integers(0, 50_000),
    layout=st.sampled_from(ROPE_LAYOUTS),
    dtype=st.sampled_from(DTYPES),
)
def test_any_shape_equals_torch_path(batch, kv_heads, group, seq_len, pairs, offset, layout, dtype):
    q, k = qk(batch, kv_heads * group, kv_heads, seq_len, 2 * pairs, dtype, seed=offset)
    out = RotaryEmbedding(2 * pairs, layout=layout, backend="triton")(q, k, offset=offset)
    ref = RotaryEmbedding(2 * pairs, layout=layout, backend="torch")(q, k, offset=offset)
    assert_close(out[0], ref[0])
    assert_close(out[1], ref[1])


# ---------------------------------------------------------------------------
# Backend choice
# ---------------------------------------------------------------------------


def test_backends_listed():
    assert ROPE_BACKENDS == ("auto", "torch", "triton", "cpu")
    assert TRITON_DTYPES == (torch.float32, torch.float16, torch.bfloat16)


def test_auto_uses_torch_for_cpu_tensors(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the Triton path ran for CPU tensors")

    monkeypatch.setattr(triton_rope, "rope_qk_triton", refuse)
    monkeypatch.setattr(triton_rope, "apply_rope_triton", refuse)
    q, k = qk(1, 2, 1, 3, 8, torch.float32)
    RotaryEmbedding(8)(q, k)
    cos, sin = rope_cos_sin(torch.arange(3), 8)
    apply_rope(q, cos, sin)


@pytest.fixture
def triton_calls(monkeypatch):
    """Pretend the tensors are on a CUDA device; count the calls that reach the fused kernel."""
    import posenc.rope.rotary

    calls = []
    real = triton_rope.rope_qk_triton
    monkeypatch.setattr(posenc.rope.rotary, "_triton_ready", lambda tensors: True)  # as if on a CUDA device
    monkeypatch.setattr(triton_rope, "rope_qk_triton", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    return calls


def test_auto_uses_triton_when_tensors_qualify(triton_calls):
    calls = triton_calls
    q, k = qk(1, 2, 1, 3, 8, torch.float32)
    RotaryEmbedding(8)(q, k)
    assert calls == [1]
    RotaryEmbedding(8)(q.double(), k.double())  # float64 is not for the kernel: auto falls back to torch
    RotaryEmbedding(8)(q[0], k[0])  # neither are 3-D tensors
    assert calls == [1]


def test_import_posenc_and_cpu_rotation_never_import_triton():
    code = (
        "import sys, torch, posenc, posenc.triton_rope\n"
        "assert 'triton' not in sys.modules, 'importing posenc.triton_rope imported triton'\n"
        "m = posenc.RotaryEmbedding(8)\n"
        "m(torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 8))\n"
        "c, s = posenc.rope_cos_sin(torch.arange(3), 8)\n"
        "posenc.apply_rope(torch.randn(3, 8), c, s)\n"
        "assert 'triton' not in sys.modules, 'triton was imported'\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_kernel_compiles_for_the_h100_with_vector_memory_access():
    """The interpreter accepts code the compiler may not: compile every mode for sm_90 (no GPU needed)."""
    code = (
        "import json\n"
        "from posenc.triton_rope import ptx_summary\n"
        "modes = [(layout, table) for layout in ('half', 'interleaved') for table in (False, True)]\n"
        "print(json.dumps([ptx_summary(layout=layout, from_table=table) for layout, table in modes]))\n"
    )
    modes = [(layout, table) for layout in ("half", "interleaved") for table in (False, True)]
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    for (_, table), counts in zip(modes, json.loads(done.stdout.strip().splitlines()[-1]), strict=True):
        assert counts.get("ld.global.v4.b32", 0) > 0 and counts.get("st.global.v4.b32", 0) > 0  # 16-byte accesses
        assert not any(".b16" in kind for kind in counts)  # no 2-byte scalar loads or stores of q and k
        # the only scalar loads outside the read-only cache: the angles kernel's f_hi and f_lo
        assert counts.get("ld.global.b32", 0) == (0 if table else 2)
        assert all(".v" in kind for kind in counts if ".nc" not in kind and kind != "ld.global.b32")


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


def test_bad_backend_names_the_argument():
    with pytest.raises(ValueError, match=r"backend must be one of 'auto', 'torch', 'triton', 'cpu'; got 'cuda'"):
        RotaryEmbedding(8, backend="cuda")
    cos, sin = rope_cos_sin(torch.arange(3), 8)
    with pytest.raises(ValueError, match=r"backend must be one of .*got 'gpu'"):
        apply_rope(torch.randn(3, 8), cos, sin, backend="gpu")


def test_triton_backend_refuses_what_the_kernel_cannot_do():
    module = RotaryEmbedding(8, backend="triton")
    q, k = qk(1, 2, 1, 3, 8, torch.float32)
    with pytest.raises(ValueError, match=r"q must be float32, float16 or bfloat16 for backend='triton', got .*float64"):
        module(q.double(), k.double())
    with pytest.raises(ValueError, match=r"q must have shape \[batch, heads, seq_len, head_dim\], got \(2, 3, 8\)"):
        module(q[0], k[0])
    with pytest.raises(ValueError, match=r"k must have shape \[1, h_kv, 3, 8\] to match q .* got \(2, 1, 3, 8\)"):
        module(q, torch.cat([k, k]))
    with pytest.raises(ValueError, match=r"positions has 2 rows but q has batch 1 .*got \(2, 3\)"):
        module(q, k, torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"pass either positions or offset, not both; got offset=2"):
        rope_qk_triton(q, k, rope_inv_freq(8)[0], positions=torch.arange(3), offset=2)
    with pytest.raises(ValueError, match=r"offset must be >= 0, got -1"):
        module(q, k, offset=-1)
    with pytest.raises(ValueError, match=r"inv_freq must have shape \[4\] \(head_dim / 2\), got \(3,\)"):
        rope_qk_triton(q, k, torch.ones(3))
    with pytest.raises(ValueError, match=r"layout must be one of 'half', 'interleaved'; got 'concat'"):
        rope_qk_triton(q, k, rope_inv_freq(8)[0], layout="concat")
    with pytest.raises(ValueError, match=r"head_dim \(q.shape\[-1\]\) must be even .* got 7"):
        rope_qk_triton(torch.randn(1, 1, 2, 7), torch.randn(1, 1, 2, 7), torch.ones(3))
    with pytest.raises(ValueError, match=r"inplace=True cannot overwrite q or k: a leaf tensor that requires grad"):
        module(q.requires_grad_(), k, inplace=True)
    with pytest.raises(ValueError, match=r"inplace=True cannot overwrite q or k"):
        RotaryEmbedding(8, backend="torch")(q, k, inplace=True)


def test_triton_table_mode_refuses_what_it_cannot_do():
    cos, sin = rope_cos_sin(torch.arange(3), 8)
    with pytest.raises(ValueError, match=r"x must be float32, float16 or bfloat16 for backend='triton', got .*float64"):
        apply_rope(torch.randn(3, 8, dtype=torch.float64), cos, sin, backend="triton")
    with pytest.raises(ValueError, match=r"x must have at most 4 dims for backend='triton', got \(1, 1, 1, 3, 8\)"):
        apply_rope(torch.randn(1, 1, 1, 3, 8), cos, sin, backend="triton")
    with pytest.raises(ValueError, match=r"cos and sin must have one shape, got cos \(3, 8\) and sin \(1, 3, 8\)"):
        triton_rope.apply_rope_triton(torch.randn(3, 8), cos, sin[None])
    with pytest.raises(ValueError, match=r"does not differentiate with respect to cos and sin"):
        apply_rope(torch.randn(3, 8), cos.requires_grad_(), sin, backend="triton")


def test_triton_backend_needs_cuda_tensors_outside_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET")
    assert not interpreter_mode()
    q, k = qk(1, 2, 1, 3, 8, torch.float32)
    with pytest.raises(ValueError, match=r"backend='triton' needs CUDA tensors .* got a tensor on cpu"):
        RotaryEmbedding(8, backend="triton")(q, k)
    cos, sin = rope_cos_sin(torch.arange(3), 8)
    with pytest.raises(ValueError, match=r"backend='triton' needs CUDA tensors .* got a tensor on cpu"):
        apply_rope(q, cos, sin, backend="triton")
    monkeypatch.setattr(launch, "kernel", None)  # as where Triton is not installed
    assert not triton_rope.triton_available()
    with pytest.raises(ValueError, match=r"backend='triton' needs the triton package"):
        RotaryEmbedding(8, backend="triton")(q, k)
    with pytest.raises(ValueError, match=r"backend='triton' needs the triton package"):
        apply_rope(q, cos, sin, backend="triton")
