"""Caches a module computes (not in state_dict) survive every move, cast and meta-device load."""

import warnings

import pytest
import torch

from posenc import RotaryEmbedding, SinusoidalPositionalEncoding, apply_rope, rope_cos_sin, sinusoidal_encoding
from posenc.experiments import TinyConfig, TinyTransformer

SCHEMES = ["rope", "rope_pi", "sinusoidal", "learned", "alibi", "t5", "shaw", "none"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_meta_init_then_to_empty_then_load_state_dict_gives_the_same_model(scheme):
    """The large-model loading path: build on meta, allocate with to_empty, load the weights."""
    config = TinyConfig(16, scheme=scheme, dim=16, num_heads=2, max_len=32, causal=True)
    reference = TinyTransformer(config).eval()
    with torch.device("meta"):
        lazy = TinyTransformer(config)
    lazy = lazy.to_empty(device="cpu").eval()
    lazy.load_state_dict(reference.state_dict())
    tokens = torch.randint(16, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(lazy(tokens), reference(tokens))


def test_rotary_tables_stay_float32_after_half_and_give_the_same_rotation():
    q = torch.randn(1, 2, 6, 16, generator=torch.Generator().manual_seed(1))
    full = RotaryEmbedding(16, initial_len=4)
    half = RotaryEmbedding(16, initial_len=4).half()
    assert half.cos_cached.dtype == half.sin_cached.dtype == torch.float32
    grown = [m(q.half(), q.half(), offset=100)[0] for m in (full, half)]  # grows the cache past 4
    assert half.cos_cached.dtype == torch.float32 and torch.equal(grown[0], grown[1])


def test_sinusoidal_table_stays_float32_after_bfloat16():
    module = SinusoidalPositionalEncoding(8, initial_len=4).to(torch.bfloat16)
    assert module.table.dtype == torch.float32
    assert torch.equal(module.table, SinusoidalPositionalEncoding(8, initial_len=4).table)


def test_to_empty_recomputes_the_tables_on_their_device():
    for module, name in ((RotaryEmbedding(8, initial_len=5), "cos_cached"), (SinusoidalPositionalEncoding(8), "table")):
        before = getattr(module, name).clone()
        with torch.device("meta"):
            lazy = type(module)(8, initial_len=5) if name == "cos_cached" else type(module)(8)
        assert getattr(lazy, name).device.type == "meta"
        lazy.to_empty(device="cpu")
        assert torch.equal(getattr(lazy, name), before)


def test_a_far_rotary_position_is_computed_not_cached():
    """One stray position far past the limit costs its own row, not a table up to it."""
    module = RotaryEmbedding(64, initial_len=8, cache_limit=1024)
    q = torch.randn(1, 2, 4, 64, generator=torch.Generator().manual_seed(2))
    positions = torch.tensor([0, 1, 2, 4_000_000])
    rotated, _ = module(q, q, positions=positions)
    assert module.cos_cached.shape[0] == 8
    cos, sin = rope_cos_sin(positions, 64)
    assert torch.equal(rotated, apply_rope(q, cos, sin))
    rotated, _ = module(q, q, offset=10**9)  # a KV cache far along: no 10^9-row table
    assert module.cos_cached.shape[0] == 8
    cos, sin = rope_cos_sin(torch.arange(10**9, 10**9 + 4), 64)
    assert torch.equal(rotated, apply_rope(q, cos, sin))


def test_rotary_cache_growth_stops_at_the_limit_and_agrees_across_it():
    module = RotaryEmbedding(16, initial_len=4, cache_limit=100)
    q = torch.randn(1, 1, 2, 16, generator=torch.Generator().manual_seed(3))
    module(q, q, offset=60)
    assert module.cos_cached.shape[0] == 62
    inside, _ = module(q, q, offset=90)  # would double to 124: capped at 100
    assert module.cos_cached.shape[0] == 100
    past, _ = RotaryEmbedding(16, initial_len=4, cache_limit=4)(q, q, offset=90)
    assert torch.equal(inside, past)  # cached and computed rows are the same numbers


def test_a_far_sinusoidal_offset_is_computed_not_cached():
    module = SinusoidalPositionalEncoding(32, initial_len=8, cache_limit=64)
    x = torch.zeros(1, 2, 32)
    out = module(x, offset=1_000_000)
    assert module.table.shape[0] == 8
    assert torch.equal(out[0], sinusoidal_encoding(torch.arange(1_000_000, 1_000_002), 32))


def test_float64_input_gets_float64_accurate_sinusoidal_encodings():
    x = torch.zeros(1, 5, 16, dtype=torch.float64)
    out = SinusoidalPositionalEncoding(16)(x, offset=3)
    assert torch.equal(out[0], sinusoidal_encoding(torch.arange(3, 8), 16, dtype=torch.float64))


@pytest.mark.parametrize(
    "make", [lambda **k: RotaryEmbedding(8, **k), lambda **k: SinusoidalPositionalEncoding(8, **k)]
)
def test_cache_limit_below_initial_len_is_refused(make):
    with pytest.raises(ValueError, match=r"cache_limit must be >= initial_len \(16\), got 8"):
        make(initial_len=16, cache_limit=8)


@pytest.mark.parametrize("kind", ["rotary", "sinusoidal"])
def test_fullgraph_dynamic_compile_follows_the_cache_as_it_grows(kind):
    """torch.compile(dynamic=True, fullgraph=True): lengths and offsets past the first table, one graph family."""
    torch._dynamo.reset()
    module = RotaryEmbedding(8, initial_len=4) if kind == "rotary" else SinusoidalPositionalEncoding(8, initial_len=4)
    compiled = torch.compile(module, fullgraph=True, dynamic=True, backend="eager")
    gen = torch.Generator().manual_seed(4)
    for seq_len, offset in [(3, 0), (5, 0), (2, 9), (3, 40)]:
        shape = (1, 2, seq_len, 8) if kind == "rotary" else (1, seq_len, 8)
        args = [torch.randn(shape, generator=gen) for _ in range(2 if kind == "rotary" else 1)]
        got = torch.utils._pytree.tree_leaves(compiled(*args, offset=offset))
        want = torch.utils._pytree.tree_leaves(module(*args, offset=offset))
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True)), (seq_len, offset)


@pytest.mark.parametrize("kind", ["rotary", "sinusoidal"])
def test_a_traced_module_serves_lengths_it_was_not_traced_with(kind):
    """torch.jit.trace records the computation, not a slice of the table it happened to hold."""
    module = RotaryEmbedding(8, initial_len=4) if kind == "rotary" else SinusoidalPositionalEncoding(8, initial_len=4)
    gen = torch.Generator().manual_seed(5)

    def inputs(seq_len):
        shape = (1, 2, seq_len, 8) if kind == "rotary" else (1, seq_len, 8)
        return tuple(torch.randn(shape, generator=gen) for _ in range(2 if kind == "rotary" else 1))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(module, inputs(3))
    for seq_len in (3, 9):
        args = inputs(seq_len)
        got, want = torch.utils._pytree.tree_leaves(traced(*args)), torch.utils._pytree.tree_leaves(module(*args))
        assert all(torch.allclose(g, w, rtol=0, atol=1e-6) for g, w in zip(got, want, strict=True)), seq_len


def test_rope_pi_checkpoint_carries_its_trained_length():
    """Interpolation divides by length / max_len: a checkpoint loaded elsewhere must rotate as it was trained."""
    trained = TinyTransformer(TinyConfig(16, scheme="rope_pi", dim=16, num_heads=2, max_len=8, causal=True)).eval()
    other = TinyTransformer(TinyConfig(16, scheme="rope_pi", dim=16, num_heads=2, max_len=32, causal=True)).eval()
    state = trained.state_dict()
    assert any(key.endswith("_extra_state") for key in state)
    other.load_state_dict(state)
    tokens = torch.randint(16, (1, 20), generator=torch.Generator().manual_seed(6))  # longer than 8: interpolated
    with torch.no_grad():
        assert torch.equal(other(tokens), trained(tokens))
    state[next(key for key in state if key.endswith("_extra_state"))] = {"max_len": 0, "factor": None}
    with pytest.raises(ValueError, match="max_len must be >= 1, got 0"):
        other.load_state_dict(state)


def test_a_plain_rope_checkpoint_loads_into_rope_pi_keeping_its_max_len():
    """Interpolating a RoPE-trained model is what rope_pi is for: there is no trained length to restore."""
    rope = TinyTransformer(TinyConfig(16, scheme="rope", dim=16, num_heads=2, max_len=8, causal=True)).eval()
    pi = TinyTransformer(TinyConfig(16, scheme="rope_pi", dim=16, num_heads=2, max_len=8, causal=True)).eval()
    pi.load_state_dict(rope.state_dict())
    assert pi.scheme.max_len == 8
    tokens = torch.randint(16, (1, 8), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        assert torch.equal(pi(tokens), rope(tokens))  # up to the trained length, the same model
