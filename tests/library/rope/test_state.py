"""Dynamic NTK with transformers' length state: posenc's opt-in against LlamaRotaryEmbedding, call by call."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from posenc import DynamicRopeState, RotaryEmbedding, apply_rope, rope_cos_sin, rope_inv_freq
from posenc.hf.layers import RotaryLayer

L0, HEAD_DIM, FACTOR = 64, 32, 2.0
SCALING = {"rope_type": "dynamic", "factor": FACTOR, "original_max_position_embeddings": L0}
# long, shorter but above L0, longer, exactly L0 (the reset test is strict), below L0, above again,
# shorter, below, L0 + 1 after a reset, a batch whose longest row decides, L0 again
CALLS = [300, 100, 500, 64, 20, 200, 150, 63, 65, [[0, 1, 2], [400, 401, 402]], 64]


def llama_rotary() -> LlamaRotaryEmbedding:
    config = LlamaConfig(
        hidden_size=2 * HEAD_DIM,
        num_attention_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=L0,  # transformers' trained length for "dynamic"
        rope_parameters={"rope_type": "dynamic", "factor": FACTOR, "rope_theta": 10000.0},
    )
    return LlamaRotaryEmbedding(config)


def positions_of(call) -> torch.Tensor:
    return torch.tensor(call) if isinstance(call, list) else torch.arange(call)[None]  # [b, s]


def close(ours: torch.Tensor, theirs: torch.Tensor, pos: torch.Tensor) -> bool:
    """Equal up to float32 angles: transformers forms them in float32 from float32 frequencies."""
    return bool(torch.all((ours - theirs).abs() <= 1e-6 * (1 + pos[..., None])))


def expected_length(calls) -> list[int]:
    """transformers' max_seq_len_cached after each call, from dynamic_frequency_update's two tests."""
    cached, out = L0, []
    for call in calls:
        seq_len = int(positions_of(call).max()) + 1
        before = cached
        if seq_len > before:
            cached = seq_len
        if seq_len < L0 and before > L0:
            cached = L0
        out.append(cached)
    return out


def test_state_follows_transformers_call_by_call():
    theirs = llama_rotary()
    ours = RotaryEmbedding(HEAD_DIM, scaling=SCALING, dynamic_state="transformers")
    stateless = RotaryEmbedding(HEAD_DIM, scaling=SCALING)
    differs = []
    for call, length in zip(CALLS, expected_length(CALLS), strict=True):
        pos = positions_of(call)
        their_cos, their_sin = theirs(torch.zeros(1, dtype=torch.float32), pos)  # [b, s, d]
        cos, sin = ours.cos_sin(pos)
        assert int(theirs.max_seq_len_cached) == ours.state.max_seq_len_cached == length
        inv_freq, _ = rope_inv_freq(HEAD_DIM, scaling=SCALING, seq_len=length)
        assert torch.allclose(inv_freq, theirs.inv_freq.double(), rtol=1e-6, atol=0)
        assert close(cos, their_cos, pos) and close(sin, their_sin, pos)
        plain_cos, _ = stateless.cos_sin(pos)
        seq_len = int(pos.max()) + 1
        # the state matters exactly for lengths in [L0, longest seen): there the stateless rule differs
        matters = L0 <= seq_len < length
        assert close(plain_cos, their_cos, pos) != matters, (call, length)
        differs.append(matters)
    assert differs == [False, True, False, True, False, False, True, False, False, False, True]


def test_reset_returns_to_a_fresh_module():
    ours = RotaryEmbedding(HEAD_DIM, scaling=SCALING, dynamic_state="transformers")
    ours.cos_sin(torch.arange(300))
    assert ours.state.max_seq_len_cached == 300
    ours.reset()
    assert ours.state.max_seq_len_cached == L0
    cos, _ = ours.cos_sin(torch.arange(100))
    assert torch.equal(cos, rope_cos_sin(torch.arange(100), HEAD_DIM, scaling=SCALING)[0])
    RotaryEmbedding(HEAD_DIM).reset()  # no state: nothing to do


def test_forward_updates_once_per_call():
    ours = RotaryEmbedding(HEAD_DIM, scaling=SCALING, dynamic_state="transformers")
    q = torch.randn(1, 2, 4, HEAD_DIM, generator=torch.Generator().manual_seed(0))
    ours(q, q, offset=296)  # positions 296 .. 299: length 300
    assert ours.state.max_seq_len_cached == 300
    rq, _ = ours(q, q, offset=96)  # length 100 keeps the frequencies of 300
    inv_freq, _ = rope_inv_freq(HEAD_DIM, scaling=SCALING, seq_len=300)
    angles = torch.arange(96, 100).double()[:, None] * inv_freq
    cos = torch.cat([angles.cos(), angles.cos()], -1).float()
    sin = torch.cat([angles.sin(), angles.sin()], -1).float()
    assert torch.equal(rq, apply_rope(q, cos, sin))
    stateless, _ = RotaryEmbedding(HEAD_DIM, scaling=SCALING)(q, q, offset=96)
    assert not torch.allclose(rq, stateless, atol=1e-3)
    assert "dynamic_state='transformers'" in repr(ours)


def test_other_scalings_keep_no_state():
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    module = RotaryEmbedding(HEAD_DIM, scaling=yarn, dynamic_state="transformers")
    assert module.state is None
    state = DynamicRopeState(64)
    cos, _ = state.cos_sin(torch.arange(500), HEAD_DIM, scaling=yarn)
    assert state.max_seq_len_cached == 64
    assert torch.equal(cos, rope_cos_sin(torch.arange(500), HEAD_DIM, scaling=yarn)[0])
    state.cos_sin(torch.arange(0), HEAD_DIM, scaling=SCALING)  # empty: no call length
    assert state.max_seq_len_cached == 64


def test_rope_layers_share_one_state_as_transformers_shares_its_module():
    theirs = llama_rotary()
    state = DynamicRopeState(L0)
    layers = [
        RotaryLayer(
            rotary_dim=HEAD_DIM,
            rope_parameters={**SCALING, "rope_theta": 10000.0},
            head_dim=HEAD_DIM,
            softmax_scale=1.0,
        )
        for _ in range(3)
    ]
    for layer in layers:
        layer.dynamic_state = state
    g = torch.Generator().manual_seed(1)
    for length in (300, 100, 20, 100):
        q, k = torch.randn(2, 1, 2, length, HEAD_DIM, generator=g)
        pos = torch.arange(length)[None]
        cos, sin = theirs(q, pos)
        for layer in layers:  # every layer sees the same call: the state is updated once in effect
            ours = layer.scores(q, k, pos)
            their_q, their_k = apply_rotary_pos_emb(q, k, cos, sin)
            assert torch.allclose(ours, their_q @ their_k.transpose(-1, -2), atol=2e-3)
        assert state.max_seq_len_cached == int(theirs.max_seq_len_cached)
    with pytest.raises(TypeError, match="dynamic_state must be None or a DynamicRopeState, got str"):
        RotaryLayer(rotary_dim=8, rope_parameters=SCALING, head_dim=8, softmax_scale=1.0, dynamic_state="x")


def short_after_long(prompt: int, *, longest: int = 16384, factor: float = 2.0) -> float:
    """max |cos difference| over positions 0 .. prompt - 1 between the stateful and the stateless tables,
    for a prompt after a ``longest``-token call; Llama 2's head: d = 128, base 10000, L0 = 4096."""
    scaling = {"rope_type": "dynamic", "factor": factor, "original_max_position_embeddings": 4096}
    state = DynamicRopeState(4096)
    state.cos_sin(torch.arange(longest), 128, scaling=scaling, dtype=torch.float64)
    cos, _ = state.cos_sin(torch.arange(prompt), 128, scaling=scaling, dtype=torch.float64)
    plain, _ = rope_cos_sin(torch.arange(prompt), 128, scaling=scaling, dtype=torch.float64)
    return (cos - plain).abs().max().item()


def test_short_prompt_after_long_one_numbers_of_the_docstring():
    assert short_after_long(100) == 0.0  # reset: below the trained length
    assert short_after_long(4095) == 0.0
    assert short_after_long(4096) == pytest.approx(2.0, abs=1e-4)  # kept the frequencies of 16,384
    assert short_after_long(8192) == pytest.approx(2.0, abs=1e-4)
    state = DynamicRopeState(4096)
    assert (state.update(16384), state.update(8192), state.update(100)) == (16384, 16384, 4096)


def test_bad_state_arguments():
    with pytest.raises(ValueError, match=r"original_max_position_embeddings must be a finite number > 0, got 0"):
        DynamicRopeState(0)
    with pytest.raises(ValueError, match=r"seq_len must be a finite number, got nan"):
        DynamicRopeState(64).update(float("nan"))
    with pytest.raises(ValueError, match=r"differs from the state's trained length 32"):
        DynamicRopeState(32).cos_sin(torch.arange(4), 8, scaling=SCALING)
    with pytest.raises(ValueError, match=r"dynamic_state must be one of 'stateless', 'transformers'; got 'hf'"):
        RotaryEmbedding(8, dynamic_state="hf")
