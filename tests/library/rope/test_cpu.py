"""The blocked CPU rotation (``backend="cpu"``; ``"auto"`` on CPU tensors) gives the torch path's numbers bit for bit.

Blocks are made tiny here (a few rows) so that every shape splits into several blocks,
some of them short, and every way of taking the blocks (along the sequence, across
heads, whole) is exercised. Bit for bit means ``torch.equal`` and the same sign bits,
so that signed zeros count too. Nothing here is timed: the speed is a benchmark
(``posenc.benchmark.cpu_rope``), not a test.
"""

import threading
from unittest import mock

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc.rope.cpu as rope_cpu
from posenc import RotaryEmbedding, apply_rope, rope_cos_sin

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f64": torch.float64}
# (x dtype, table dtype): the same, and the mixed pairs models use (products in the promoted dtype)
DTYPE_PAIRS = [("f32", "f32"), ("bf16", "f32"), ("f16", "f32"), ("bf16", "bf16"), ("f32", "f64"), ("f64", "f32")]


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 64 elements: a handful of rows, so every test shape spans many blocks."""
    monkeypatch.setattr(rope_cpu, "BLOCK_ELEMENTS", 64)


def path(name):
    """Make the CPU path take blocks (``"blocked"``) or the one-block operations (``"small"``) at any size."""
    return mock.patch.object(rope_cpu, "SMALL_ELEMENTS", 0 if name == "blocked" else 2**40)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, dtypes and sign bits (``torch.equal`` alone takes -0.0 for 0.0)."""
    return a.dtype == b.dtype and torch.equal(a, b) and torch.equal(torch.signbit(a), torch.signbit(b))


def make_x(lead, head_dim, dtype, memory, seed):
    """``x [*lead, s, d]`` with exact zeros of both signs among normal values, laid out as ``memory`` says."""
    g = torch.Generator().manual_seed(seed)
    *outer, s = lead
    if memory == "bshd" and len(outer) >= 2:  # [b, h, s, d] as a view of [b, s, h, d] memory (a projection's output)
        x = torch.randn(*outer[:-1], s, outer[-1], head_dim, generator=g).transpose(-3, -2)
    elif memory == "strided":  # the last dim too: every other channel of a wider tensor
        x = torch.randn(*lead, 2 * head_dim, generator=g)[..., ::2]
    else:
        x = torch.randn(*lead, head_dim, generator=g)
    x = x.to(dtype)
    flat = x.view(-1) if x.is_contiguous() else None
    if flat is not None and flat.numel() > 4:
        flat[:2], flat[-2:] = 0.0, -0.0
    return x


def tables(lead, rotary_dim, layout, dtype, table_shape):
    """cos and sin of positions 3 .. 3 + s - 1 (or of a per-sequence grid), in ``dtype``."""
    *outer, s = lead
    positions = torch.arange(3, 3 + s)
    if table_shape == "per-sequence" and outer:
        positions = positions + 7 * torch.arange(outer[0])[(...,) + (None,) * len(outer)]  # [b, 1.., s]
    cos, sin = rope_cos_sin(positions, rotary_dim, layout=layout, dtype=dtype)
    return cos, sin


cases = st.fixed_dictionaries(
    {
        "layout": st.sampled_from(["half", "interleaved"]),
        "lead": st.sampled_from([(5,), (2, 7), (1, 4, 9), (2, 3, 5), (1, 8, 1), (2, 2, 3, 4)]),
        "head_dim": st.sampled_from([4, 8, 16]),
        "partial": st.booleans(),
        "dtypes": st.sampled_from(DTYPE_PAIRS),
        "memory": st.sampled_from(["contiguous", "bshd", "strided"]),
        "table_shape": st.sampled_from(["shared", "per-sequence"]),
        "seed": st.integers(0, 2**16),
        "path": st.sampled_from(["blocked", "small"]),
    }
)


def arguments(case):
    x_dtype, table_dtype = (DTYPES[name] for name in case["dtypes"])
    rotary_dim = case["head_dim"] // 2 if case["partial"] and case["head_dim"] % 4 == 0 else case["head_dim"]
    x = make_x(case["lead"], case["head_dim"], x_dtype, case["memory"], case["seed"])
    cos, sin = tables(case["lead"], rotary_dim, case["layout"], table_dtype, case["table_shape"])
    return x, cos, sin


@given(case=cases)
def test_new_tensor_equals_the_torch_path(case):
    x, cos, sin = arguments(case)
    expected = apply_rope(x, cos, sin, layout=case["layout"], backend="torch")
    with path(case["path"]):
        result = apply_rope(x, cos, sin, layout=case["layout"], backend="cpu")
    assert same_bits(result, expected)
    # the same memory layout too, so that a later .view() works alike (a dim of size 1 has no stride to speak of)
    assert [st for st, n in zip(result.stride(), x.shape, strict=True) if n > 1] == [
        st for st, n in zip(expected.stride(), x.shape, strict=True) if n > 1
    ]


@given(case=cases)
def test_in_place_and_out_equal_the_torch_path(case):
    x, cos, sin = arguments(case)
    layout = case["layout"]
    expected = apply_rope(x, cos, sin, layout=layout, backend="torch")
    out = torch.full_like(x, float("nan"))  # an element left unwritten stays NaN
    y = x.clone()
    with path(case["path"]):
        assert apply_rope(x, cos, sin, layout=layout, backend="cpu", out=out) is out
        assert apply_rope(y, cos, sin, layout=layout, backend="cpu", inplace=True) is y
    assert same_bits(out, expected) and same_bits(y, expected)


def test_which_path_each_call_takes(monkeypatch):
    calls = []
    for name in ("rotate_blocked", "rotate_small"):
        real = getattr(rope_cpu, name)
        spy = lambda *a, real=real, name=name, **kw: calls.append(name.removeprefix("rotate_")) or real(*a, **kw)  # noqa: E731
        monkeypatch.setattr(rope_cpu, name, spy)
    cos, sin = rope_cos_sin(torch.arange(6), 8)
    small, large = torch.randn(2, 6, 8), torch.randn(rope_cpu.SMALL_ELEMENTS // 48 + 1, 6, 8)
    for x in (small, large, large.clone()):  # the third call takes apply_rope's cached checks
        assert same_bits(apply_rope(x, cos, sin), apply_rope(x, cos, sin, backend="torch"))
    apply_rope(small, cos, sin, inplace=True)
    apply_rope(large, cos, sin, out=torch.empty_like(large), backend="cpu")
    assert calls == ["small", "blocked", "blocked", "small", "blocked"]
    apply_rope(large, cos, sin, backend="torch")
    apply_rope(large.requires_grad_(), cos, sin)
    assert len(calls) == 5


@pytest.mark.parametrize("name", ["blocked", "small"])
def test_the_module_takes_the_cpu_path_with_the_same_numbers(name):
    q, k = torch.randn(2, 4, 9, 16), torch.randn(2, 2, 9, 16)
    for layout in ("half", "interleaved"):
        before = RotaryEmbedding(16, layout=layout, rotary_dim=8, backend="torch")(q, k, offset=5)
        for backend in ("cpu", "auto"):
            with path(name):
                after = RotaryEmbedding(16, layout=layout, rotary_dim=8, backend=backend)(q, k, offset=5)
            assert all(same_bits(a, b) for a, b in zip(after, before, strict=True))


@pytest.mark.parametrize("name", ["blocked", "small"])
def test_a_one_dim_x(name):
    cos, sin = rope_cos_sin(torch.tensor(5), 8)
    x = torch.randn(8)
    with path(name):
        assert same_bits(apply_rope(x, cos, sin, backend="cpu"), apply_rope(x, cos, sin, backend="torch"))


# ---------------------------------------------------------------------------
# Where the blocks step aside: autograd, other devices
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_autograd_takes_the_differentiable_path(layout):
    cos, sin = rope_cos_sin(torch.arange(5), 8, layout=layout)
    leaf = torch.randn(3, 5, 8, requires_grad=True)
    weight = torch.randn(3, 5, 8)
    grads = []
    for backend in ("torch", "cpu"):
        leaf.grad = None
        y = apply_rope(leaf, cos, sin, layout=layout, backend=backend)
        assert y.grad_fn is not None
        (y * weight).sum().backward()
        grads.append(leaf.grad.clone())
    assert same_bits(grads[0], grads[1])
    # in place on a non-leaf, and into out=: autograd records the writes
    leaf.grad = None
    x = leaf * 1.0
    apply_rope(x, cos, sin, layout=layout, backend="cpu", inplace=True)
    out = torch.empty(3, 5, 8)
    apply_rope(leaf, cos, sin, layout=layout, backend="cpu", out=out)
    assert x.grad_fn is not None and out.grad_fn is not None
    ((x + out) * weight).sum().backward()
    assert same_bits(leaf.grad, 2 * grads[0])
    cos_leaf = cos.clone().requires_grad_()
    assert apply_rope(torch.randn(3, 5, 8), cos_leaf, sin, layout=layout, backend="cpu").grad_fn is not None


@pytest.mark.parametrize("name", ["blocked", "small"])
def test_under_no_grad_and_inference_mode_the_cpu_path_runs(monkeypatch, name):
    calls = []
    real = getattr(rope_cpu, f"rotate_{name}")
    monkeypatch.setattr(rope_cpu, f"rotate_{name}", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    cos, sin = rope_cos_sin(torch.arange(5), 8)
    x = torch.randn(3, 5, 8, requires_grad=True)
    expected = apply_rope(x, cos, sin, backend="torch").detach()
    with path(name):
        with torch.no_grad():
            assert same_bits(apply_rope(x, cos, sin, backend="cpu"), expected)
        with torch.inference_mode():  # its scratch buffers are inference tensors, kept apart from the others
            assert same_bits(apply_rope(x.detach(), cos, sin, backend="cpu"), expected)
        assert same_bits(apply_rope(x.detach(), cos, sin, backend="cpu"), expected)
    assert calls == [1, 1, 1]


def test_threads_do_not_share_scratch_buffers():
    cos, sin = rope_cos_sin(torch.arange(64), 16)
    inputs = [torch.randn(20, 64, 16) for _ in range(4)]
    expected = [apply_rope(x, cos, sin, backend="torch") for x in inputs]
    results = [None] * len(inputs)

    def work(i):
        for _ in range(20):
            results[i] = apply_rope(inputs[i], cos, sin, backend="cpu")

    assert inputs[0].numel() > rope_cpu.SMALL_ELEMENTS  # the blocked path, with its scratch buffers
    workers = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert all(same_bits(r, e) for r, e in zip(results, expected, strict=True))


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::torch.jit.TracerWarning")
def test_meta_tensors_and_tracing_take_the_torch_path():
    cos, sin = rope_cos_sin(torch.arange(5), 8)
    meta = torch.empty(3, 5, 8, device="meta")
    assert apply_rope(meta, cos.to("meta"), sin.to("meta")).shape == (3, 5, 8)
    with pytest.raises(ValueError, match=r"backend='cpu' rotates CPU tensors, got x on meta"):
        apply_rope(meta, cos.to("meta"), sin.to("meta"), backend="cpu")
    x = torch.randn(3, 5, 8)
    traced = torch.jit.trace(lambda t: apply_rope(t, cos, sin, backend="cpu"), (x,), check_trace=False)
    assert same_bits(traced(x), apply_rope(x, cos, sin, backend="torch"))


# ---------------------------------------------------------------------------
# out= that cannot take the result
# ---------------------------------------------------------------------------

X = torch.zeros(2, 3, 8)
COS, SIN = rope_cos_sin(torch.arange(3), 8)


@pytest.mark.parametrize(
    ("out", "error", "match"),
    [
        ([0.0] * 8, TypeError, r"out must be a torch.Tensor or None, got list"),
        (torch.zeros(2, 3, 4), ValueError, r"out must have x's shape \(2, 3, 8\), got \(2, 3, 4\)"),
        (torch.zeros(2, 3, 8, dtype=torch.float64), ValueError, r"out must have x's dtype torch.float32, got .*64"),
        (torch.zeros(2, 3, 8, device="meta"), ValueError, r"out must be on x's device cpu, got meta"),
        (torch.zeros(1, 3, 8).expand(2, 3, 8), ValueError, r"out is expanded \(strides \(0, 8, 1\)\)"),
        (torch.zeros(2, 3, 8, requires_grad=True), ValueError, r"out cannot be a leaf tensor that requires grad"),
        (X, ValueError, r"out overlaps x in memory"),
        (COS.expand(2, 3, 8), ValueError, r"out is expanded"),
    ],
    ids=["list", "shape", "dtype", "device", "expanded", "leaf", "x itself", "a table"],
)
def test_bad_out_names_the_argument(out, error, match):
    for backend in ("auto", "cpu", "torch"):
        with pytest.raises(error, match=match):
            apply_rope(X, COS, SIN, backend=backend, out=out)


def test_out_overlapping_x_or_a_table_and_out_with_inplace_are_refused():
    wide = torch.zeros(2, 3, 16)
    x = wide[..., :8]
    with pytest.raises(ValueError, match=r"out overlaps x in memory"):
        apply_rope(x, COS, SIN, out=wide[..., 4:12])
    with pytest.raises(ValueError, match=r"out overlaps x in memory"):  # the test is by extent, so conservative:
        apply_rope(x, COS, SIN, out=wide[..., 8:])  # rows that interleave with x's count as overlapping
    out = torch.zeros(4, 3, 8)[1:3]  # part of a larger buffer, away from x: fine
    assert apply_rope(x, COS, SIN, out=out) is out
    table = torch.zeros(2, 3, 8)
    with pytest.raises(ValueError, match=r"out overlaps cos in memory"):
        apply_rope(X, table[0], SIN, out=table)
    with pytest.raises(ValueError, match=r"out cannot be given with inplace=True"):
        apply_rope(X.clone(), COS, SIN, out=torch.zeros(2, 3, 8), inplace=True)
