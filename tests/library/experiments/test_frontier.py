"""FIRE, CoPE and RoPE trained with PoSE on the tiny Transformer (and, for building, running and learning, the
RoPE/NoPE hybrid of ``posenc.experiments.layered``): each is its library module plugged in."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import RotaryEmbedding, fire_distance, fire_mlp, pose_chunks, scaled_dot_product_attention
from posenc.experiments import (
    ALL_SCHEMES,
    CoPEScheme,
    FIREScheme,
    RopePoSEScheme,
    TinyConfig,
    TinyTransformer,
    make_position_scheme,
    make_task,
    position_schemes,
    tiny_accuracy,
    train_tiny,
)

NEW = ["fire", "cope", "rope_nope", "rope_pose"]
SMALL = dict(dim=32, num_heads=4, num_layers=2, max_len=16)
F64 = torch.float64


def _tokens(b, s, seed=0, vocab=20):
    return torch.randint(vocab, (b, s), generator=torch.Generator().manual_seed(seed))


def _model(name, seed=0, **options):
    return TinyTransformer(TinyConfig(20, scheme=name, causal=True, seed=seed, scheme_options=options, **SMALL))


# --- every new scheme ------------------------------------------------------------------------


def test_registered_but_not_in_the_book_experiment():
    assert set(NEW) <= set(position_schemes()) and not set(NEW) & set(ALL_SCHEMES)
    for name, cls in (("fire", FIREScheme), ("cope", CoPEScheme), ("rope_pose", RopePoSEScheme)):
        assert type(make_position_scheme(name, dim=32, num_heads=4, max_len=16, causal=True)) is cls


@pytest.mark.parametrize("name", NEW)
def test_forward_and_backward_at_the_training_length_and_four_times_it(name):
    model = _model(name)
    for mode in ("train", "eval"):
        getattr(model, mode)()
        for length in (16, 64):
            model.zero_grad()
            logits = model(_tokens(2, length, seed=length))
            assert logits.shape == (2, length, 20) and logits.isfinite().all()
            logits.logsumexp(-1).mean().backward()
            grads = [p.grad for p in model.parameters() if p.requires_grad]
            assert all(g is not None and g.isfinite().all() for g in grads)
    own = [p for p in model.scheme.parameters() if p.requires_grad]
    assert all(p.grad.abs().sum() > 0 for p in own)  # the scheme's own weights learn (fire, cope)
    assert len(own) == {"fire": 4, "cope": 1}.get(name, 0)


@pytest.mark.parametrize("name", NEW)
def test_a_packed_row_equals_its_sequences_run_alone(name):
    model = _model(name).double().eval()
    lengths = [3, 9, 1]
    sequences = [_tokens(1, n, seed=n) for n in lengths]
    logits = model(torch.cat(sequences, dim=1), cu_seqlens=torch.tensor([0, 3, 12, 13]))
    start = 0
    for sequence, n in zip(sequences, lengths, strict=True):
        torch.testing.assert_close(logits[:, start : start + n], model(sequence), rtol=0, atol=1e-12)
        start += n


@pytest.mark.parametrize("name", NEW)
def test_each_learns_the_shift_task_far_above_chance(name):
    """100 steps of 16 examples: seeds 0 and 1 reach 0.43 to 1.0 at the training length (FIRE lowest, 0.43 and
    0.48; CoPE and rope_nope 1.0, rope_pose 0.99 and 1.0); chance is 1/16."""
    task = make_task("shift")
    model = TinyTransformer(TinyConfig(task.vocab_size, scheme=name, causal=True, seed=0, **SMALL))
    losses = train_tiny(model, task, steps=100, length=8, seed=0, batch_size=16)
    assert losses[-1] < 0.6 * losses[0]
    assert tiny_accuracy(model, task, length=8, num_examples=128) > 4 * task.chance


# --- options -------------------------------------------------------------------------------

ACCEPTED = {
    "fire": "'c', 'hidden', 'learn_transform', 'threshold', 'transform'",
    "cope": "'num_positions'",
    "rope_nope": "'base', 'layout', 'nope_every', 'window'",
    "rope_pose": "'base', 'layout', 'num_chunks', 'seed', 'target_len'",
}


@pytest.mark.parametrize("name", NEW)
def test_an_unknown_option_is_rejected_with_the_options_the_scheme_takes(name):
    match = rf"position scheme '{name}' has no option\(s\) \['factor'\]; it accepts {ACCEPTED[name]}$"
    with pytest.raises(ValueError, match=match):
        make_position_scheme(name, dim=32, num_heads=4, max_len=16, causal=True, factor=2.0)


@pytest.mark.parametrize(
    ("name", "options", "error", "match"),
    [
        ("fire", {"hidden": 0}, ValueError, r"hidden must be >= 1, got 0"),
        ("fire", {"c": -1.0}, ValueError, r"c must be a finite number > 0, got -1\.0"),
        ("fire", {"threshold": 0.0}, ValueError, r"threshold must be a finite number > 0, got 0\.0"),
        ("fire", {"transform": "sqrt"}, ValueError, r"transform must be one of 'log', 'identity'; got 'sqrt'"),
        ("fire", {"learn_transform": 1}, TypeError, r"learn_transform must be True or False, got 1"),
        ("cope", {"num_positions": 0}, ValueError, r"num_positions must be >= 1, got 0"),
        ("rope_pose", {"target_len": 0}, ValueError, r"target_len must be >= 1, got 0"),
        ("rope_pose", {"num_chunks": 1.5}, ValueError, r"num_chunks must be an int >= 1, got 1\.5"),
        ("rope_pose", {"seed": -1}, ValueError, r"seed must be >= 0, got -1"),
        ("rope_pose", {"base": 1.0}, ValueError, r"base must be a finite number > 1, got 1\.0"),
    ],
)
def test_bad_options(name, options, error, match):
    with pytest.raises(error, match=match):
        make_position_scheme(name, dim=32, num_heads=4, max_len=16, causal=True, **options)
    with pytest.raises(error, match=match):
        _model(name, **options)


@pytest.mark.parametrize("name", ["fire", "cope"])
def test_fire_and_cope_refuse_a_bidirectional_model(name):
    label = {"fire": "FIRE", "cope": "CoPE"}[name]
    with pytest.raises(ValueError, match=rf"causal must be True for {label}, .*got False: build the model with causal"):
        TinyTransformer(TinyConfig(20, scheme=name, causal=False, **SMALL))
    assert type(_model(name).scheme) is {"fire": FIREScheme, "cope": CoPEScheme}[name]


# --- fire --------------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [0, 3, 11])
def test_fire_bias_is_the_function_of_the_distance_over_the_query_position(offset):
    """b(i, j) = f(log(c (i - j) + 1) / log(c max(L, i) + 1)) with the queries at offset .. offset + s - 1."""
    scheme = make_position_scheme("fire", dim=32, num_heads=4, max_len=16, causal=True, threshold=4.0, c=0.5)
    bias = scheme.score_bias(6, 6, offset)  # [h, 6, 6]
    i = torch.arange(offset, offset + 6, dtype=F64)[:, None]
    j = torch.arange(offset, offset + 6, dtype=F64)[None, :]
    x = torch.log1p(0.5 * (i - j).clamp(min=0)) / torch.log1p(0.5 * torch.clamp(i, min=4.0))  # [6, 6]
    expected = fire_mlp(x, scheme.bias.layers()).permute(2, 0, 1).float()  # [h, 6, 6]
    causal = (j <= i).expand(4, 6, 6)
    torch.testing.assert_close(bias[causal], expected[causal], rtol=1e-6, atol=1e-6)
    assert torch.isneginf(bias[~causal]).all()


def test_fire_defaults_threshold_at_the_trained_length_and_fixed_transform():
    scheme = _model("fire").scheme
    assert scheme.bias.threshold.item() == 16.0 and scheme.bias.c.item() == 1.0
    assert not scheme.bias.c.requires_grad and not scheme.bias.threshold.requires_grad
    learned = _model("fire", learn_transform=True).scheme
    assert learned.bias.c.requires_grad and learned.bias.threshold.requires_grad
    # at four times the trained length every distance still maps into [0, 1]
    assert fire_distance(64, 64, threshold=scheme.bias.threshold).max() <= 1.0


def test_fire_sees_the_query_position_beyond_the_threshold():
    """Unlike T5 or ALiBi, a shift of all positions past L changes FIRE's bias: the divisor is psi(i)."""
    model = _model("fire").eval()
    tokens = _tokens(2, 12)
    torch.testing.assert_close(model(tokens), model(tokens, offset=4))  # last position 15 < L = 16: one divisor
    assert not torch.allclose(model(tokens), model(tokens, offset=20), atol=1e-5)


# --- cope --------------------------------------------------------------------------------------


def _cope_inputs(s, open_gates, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 4, s, 8, generator=gen, dtype=F64) for _ in range(3))
    if open_gates:  # q . k / sqrt(8) about 70: sigmoid is 1.0 in float64
        q, k = 5 + 0.1 * q, 5 + 0.1 * k
    return q, k, v


@pytest.mark.parametrize("s", [9, 20])
def test_cope_with_every_gate_open_is_relative_attention(s):
    """Every gate 1: key j sits at i - j + 1 (clamped at P - 1 = 16), one embedding per distance."""
    scheme = make_position_scheme("cope", dim=32, num_heads=4, max_len=16, causal=True).double()
    with torch.no_grad():
        scheme.cope.pos_emb.normal_(generator=torch.Generator().manual_seed(1))
    table = scheme.cope.pos_emb  # [17, 8]
    i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
    distance = (i - j + 1).clamp(min=0, max=16)  # [s, s]

    def relative_attention(q, k, v):
        relative = (q @ table.T).gather(-1, distance.expand(2, 4, s, s))  # q_i . e[i - j + 1]
        return scaled_dot_product_attention(q, k, v, bias=relative, causal=True)

    q, k, v = _cope_inputs(s, open_gates=True)
    assert torch.sigmoid(q @ k.transpose(-1, -2) / math.sqrt(8)).eq(1.0).all()
    out, weights = scheme.attend(q, k, v, causal=True)
    ref_out, ref_weights = relative_attention(q, k, v)
    torch.testing.assert_close(weights, ref_weights, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(out, ref_out, rtol=1e-12, atol=1e-12)
    q, k, v = _cope_inputs(s, open_gates=False)  # gates in (0, 1): positions count less than the distance
    assert not torch.allclose(scheme.attend(q, k, v, causal=True)[1], relative_attention(q, k, v)[1], atol=1e-3)


def test_untrained_cope_is_attention_without_positions_and_ignores_offset():
    """The table starts at zero and draws nothing: at one seed the CoPE and NoPE models are the same."""
    cope, none = _model("cope"), _model("none")
    assert torch.equal(cope.scheme.cope.pos_emb, torch.zeros(17, 8))
    tokens = _tokens(2, 12)
    torch.testing.assert_close(cope(tokens), none(tokens), rtol=0, atol=1e-6)
    with torch.no_grad():
        cope.scheme.cope.pos_emb.normal_(generator=torch.Generator().manual_seed(2))
    assert not torch.allclose(cope(tokens), none(tokens), atol=1e-3)
    assert torch.equal(cope(tokens), cope(tokens, offset=9))  # contextual positions: no absolute position enters


def test_cope_attention_takes_a_mask_and_refuses_bidirectional_calls():
    scheme = make_position_scheme("cope", dim=32, num_heads=4, max_len=16, causal=True).double()
    q, k, v = _cope_inputs(5, open_gates=False)
    keep = torch.ones(5, 5, dtype=torch.bool).tril() & ~torch.eye(5, dtype=torch.bool).roll(1, 0)  # drop key i - 1
    by_mask = scheme.attend(q, k, v, bias=keep, causal=True)[1]
    by_bias = scheme.attend(q, k, v, bias=torch.zeros(5, 5, dtype=F64).masked_fill(~keep, -math.inf), causal=True)[1]
    assert torch.equal(by_mask, by_bias) and (by_mask[..., ~keep] == 0).all() and (by_mask[..., keep] > 0).all()
    with pytest.raises(ValueError, match=r"causal must be True for CoPE"):
        scheme.attend(q, k, v, causal=False)


# --- rope_pose -----------------------------------------------------------------------------------


def test_rope_pose_in_evaluation_mode_is_rope_bit_for_bit():
    pose, rope = _model("rope_pose").eval(), _model("rope").eval()
    assert all(torch.equal(a, b) for a, b in zip(pose.state_dict().values(), rope.state_dict().values(), strict=True))
    state = pose.scheme.generator.get_state()
    for length, offset in ((16, 0), (64, 0), (16, 5)):
        tokens = _tokens(2, length, seed=length)
        assert torch.equal(pose(tokens, offset=offset), rope(tokens, offset=offset))
    assert pose.scheme.position_ids is None and torch.equal(pose.scheme.generator.get_state(), state)  # no draw


def test_rope_pose_in_training_mode_rotates_by_skip_wise_ids():
    model = _model("rope_pose").train()
    scheme, tokens = model.scheme, _tokens(8, 16)
    logits = model(tokens)
    ids = scheme.position_ids  # [8, 16], drawn in this pass
    assert ids.shape == (8, 16) and ids[:, 0].eq(0).all() and ids.diff().gt(0).all() and ids.max() < 64
    assert all(len(pose_chunks(row)) <= 2 for row in ids)
    assert any(not torch.equal(row, torch.arange(16)) for row in ids)  # some skip
    q, k = torch.randn(2, 8, 4, 16, 8, generator=torch.Generator().manual_seed(3)).unbind(0)
    for a, b in zip(scheme.rotate(q, k, 3), RotaryEmbedding(8)(q, k, positions=ids + 3), strict=True):
        assert torch.equal(a, b)  # every layer of the pass rotates by the pass's ids
    with pytest.raises(RuntimeError, match=r"rope_pose draws its training position ids in embed"):
        scheme.rotate(q[:, :, :5], k[:, :, :5], 0)
    model(tokens)
    assert not torch.equal(scheme.position_ids, ids)  # fresh ids for every pass
    assert not torch.allclose(logits, model.eval()(tokens), atol=1e-4)  # the ids matter


@given(st.integers(1, 40), st.integers(1, 100), st.integers(1, 4), st.integers(0, 2**31 - 1))
@settings(max_examples=20, deadline=None)
def test_rope_pose_ids_of_any_input(seq_len, target_len, num_chunks, seed):
    scheme = RopePoSEScheme(dim=8, num_heads=1, max_len=16, target_len=target_len, num_chunks=num_chunks, seed=seed)
    ids = scheme.draw_position_ids(3, seq_len)
    assert ids.shape == (3, seq_len) and ids.dtype == torch.long and ids[:, 0].eq(0).all()
    assert ids.diff().gt(0).all() and ids.max() < max(target_len, seq_len)
    assert all(len(pose_chunks(row)) <= num_chunks for row in ids)
    if seq_len >= target_len:  # no room for a skip
        assert torch.equal(ids, torch.arange(seq_len).expand(3, seq_len))


def test_rope_pose_trains_deterministically_and_leaves_the_global_random_state():
    task = make_task("shift")
    config = TinyConfig(task.vocab_size, scheme="rope_pose", causal=True, **SMALL)
    state = torch.random.get_rng_state()
    runs = [train_tiny(TinyTransformer(config), task, steps=3) for _ in range(2)]
    assert runs[0] == runs[1] and torch.equal(torch.random.get_rng_state(), state)
    other = TinyTransformer(config.replace(scheme_options={"seed": 1}))
    assert train_tiny(other, task, steps=3) != runs[0]  # another seed of the ids, another run
