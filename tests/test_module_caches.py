"""Caches a module computes (not in state_dict) survive every move, cast and meta-device load."""

import pytest
import torch

from posenc import RotaryEmbedding, SinusoidalPositionalEncoding, TinyConfig, TinyTransformer

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
