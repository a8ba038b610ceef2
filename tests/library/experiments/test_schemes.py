"""The relative and rotary position schemes of the tiny Transformer: registry, plug-in identities, training."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc.experiments.registry as registry
from posenc import RotaryEmbedding, ShawRelativeAttention, alibi_bias, scaled_dot_product_attention
from posenc.experiments import (
    PositionScheme,
    TinyConfig,
    TinyTransformer,
    make_position_scheme,
    make_task,
    position_schemes,
    register_position_scheme,
    tiny_accuracy,
    train_tiny,
)
from posenc.experiments.schemes import ALiBiScheme, LearnedScheme, RopePIScheme, RopeScheme, ShawScheme, T5Scheme
from posenc.relative import ShawRelativeEmbeddings

NEW = ["shaw", "t5", "alibi", "rope", "rope_pi"]
SMALL = dict(dim=32, num_heads=4, num_layers=1, max_len=16)


def _tokens(b, s, seed=0, vocab=20):
    return torch.randint(vocab, (b, s), generator=torch.Generator().manual_seed(seed))


def _qkv(b=2, h=4, s=7, d=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, s, d, generator=gen) for _ in range(3))


# --- registry ----------------------------------------------------------------------------


def test_every_scheme_of_the_book_is_registered():
    # the book's eight, the per-layer patterns of today's models, and the schemes of recent papers
    layered, frontier = {"irope", "local_global", "rope_nope"}, {"fire", "cope", "rope_pose"}
    assert set(position_schemes()) == {"none", "sinusoidal", "learned", *NEW, *layered, *frontier}
    expected = {"shaw": ShawScheme, "t5": T5Scheme, "alibi": ALiBiScheme, "rope": RopeScheme, "rope_pi": RopePIScheme}
    for name, cls in expected.items():
        scheme = make_position_scheme(name, dim=32, num_heads=4, max_len=16)
        assert type(scheme) is cls and isinstance(scheme, PositionScheme)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", NEW)
def test_every_scheme_runs_in_the_model(name, causal):
    model = TinyTransformer(TinyConfig(20, scheme=name, causal=causal, **SMALL))
    logits, maps = model(_tokens(3, 9), return_attention=True)
    assert logits.shape == (3, 9, 20) and logits.isfinite().all()
    assert all(torch.allclose(w.sum(-1), torch.ones(3, 4, 9)) for w in maps)


def test_default_attend_hook_is_the_book_attention():
    q, k, v = _qkv()
    bias = torch.randn(4, 7, 7)
    out, weights = PositionScheme().attend(q, k, v, bias=bias, causal=True, offset=3)
    ref_out, ref_weights = scaled_dot_product_attention(q, k, v, bias=bias, causal=True)
    assert torch.equal(out, ref_out) and torch.equal(weights, ref_weights)


def test_an_attend_override_reaches_every_layer(monkeypatch):
    monkeypatch.setattr(registry, "_SCHEMES", dict(registry._SCHEMES))
    calls = []

    class Uniform(PositionScheme):
        def attend(self, q, k, v, *, bias=None, causal=False, offset=0):
            calls.append((tuple(q.shape), bias, causal, offset))
            weights = torch.full((*q.shape[:-1], k.shape[-2]), 1 / k.shape[-2])  # [b, h, q, k]
            return weights @ v, weights

    register_position_scheme("uniform", lambda **_: Uniform())
    model = TinyTransformer(TinyConfig(10, scheme="uniform", causal=True, **SMALL | {"num_layers": 3}))
    _, maps = model(_tokens(2, 5, vocab=10), offset=4, return_attention=True)
    assert calls == [((2, 4, 5, 8), None, True, 4)] * 3
    assert all(torch.equal(w, torch.full((2, 4, 5, 5), 0.2)) for w in maps)


# --- each scheme is its module of chapters 5 and 6, plugged in -------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_t5_scheme_is_the_t5_bias_of_its_direction(causal):
    scheme = make_position_scheme("t5", dim=32, num_heads=4, max_len=16, causal=causal)
    assert scheme.bias.bidirectional is not causal
    assert (scheme.bias.num_buckets, scheme.bias.max_distance) == (32, 128)
    assert torch.equal(scheme.score_bias(6, 6, offset=5), scheme.bias(6, 6))
    assert torch.equal(scheme.score_bias(2, 6), scheme.bias(2, 6, offset=4))  # queries are the last keys


@pytest.mark.parametrize("causal", [False, True])
def test_alibi_scheme_is_alibi_bias(causal):
    scheme = make_position_scheme("alibi", dim=32, num_heads=4, max_len=16, causal=causal)
    assert torch.equal(scheme.score_bias(5, 5, offset=9), alibi_bias(4, 5, 5, causal=causal))
    assert list(scheme.parameters()) == []


@pytest.mark.parametrize("causal", [False, True])
def test_shaw_scheme_computes_shaw_attention(causal):
    torch.manual_seed(0)
    module = ShawRelativeAttention(32, 4, max_relative_position=3)
    scheme = make_position_scheme("shaw", dim=32, num_heads=4, max_len=16, max_relative_position=3)
    with torch.no_grad():
        scheme.rel_k.copy_(module.rel_k)
        scheme.rel_v.copy_(module.rel_v)
    x = torch.randn(2, 9, 32)
    q = module.q(x).view(2, 9, 4, 8).transpose(1, 2)  # [b, s, dim] -> [b, h, s, dh]
    k, v = module.kv(x).view(2, 9, 2, 4, 8).permute(2, 0, 3, 1, 4).unbind(0)  # 2 x [b, h, s, dh]
    out, weights = scheme.attend(q, k, v, causal=causal, offset=5)
    out = module.out(out.transpose(1, 2).reshape(2, 9, 32))  # [b, h, s, dh] -> [b, s, dim]
    ref_out, ref_weights = module(x, causal=causal)
    assert torch.allclose(out, ref_out, atol=1e-6) and torch.allclose(weights, ref_weights, atol=1e-7)


def test_shaw_scheme_adds_a_given_bias_and_clips():
    scheme = make_position_scheme("shaw", dim=32, num_heads=4, max_len=16, max_relative_position=2)
    a_k, a_v = scheme.relative_embeddings(4, 4)  # relative positions -3 .. 3, clipped to -2 .. 2
    assert torch.equal(a_k[0], scheme.rel_k[0]) and torch.equal(a_k[1], scheme.rel_k[0])
    assert torch.equal(a_v[3], scheme.rel_v[2]) and torch.equal(a_v[6], scheme.rel_v[4])
    q, k, v = _qkv(s=4)
    mask = torch.zeros(4, 4).masked_fill(torch.eye(4, dtype=torch.bool).logical_not(), float("-inf"))
    _, weights = scheme.attend(q, k, v, bias=mask)
    assert torch.equal(weights, torch.eye(4).expand(2, 4, 4, 4))


def test_rope_scheme_is_the_rotary_embedding():
    q, k, _ = _qkv(d=8)
    scheme = make_position_scheme("rope", dim=32, num_heads=4, max_len=16)
    rq, rk = scheme.rotate(q, k, offset=3)
    eq, ek = RotaryEmbedding(8)(q, k, offset=3)
    assert torch.equal(rq, eq) and torch.equal(rk, ek)


def test_rope_pi_is_rope_up_to_the_trained_length_bit_for_bit():
    q, k, _ = _qkv(s=10, d=8)
    rope = make_position_scheme("rope", dim=32, num_heads=4, max_len=16)
    pi = make_position_scheme("rope_pi", dim=32, num_heads=4, max_len=16)
    for offset in (0, 6):  # last position 9 and 15: inside the trained range
        assert all(torch.equal(a, b) for a, b in zip(pi.rotate(q, k, offset), rope.rotate(q, k, offset), strict=True))
    assert pi.factor_for(16) == 1.0 and pi.factor_for(40) == 2.5


@given(st.integers(17, 80), st.integers(0, 20))
@settings(max_examples=25, deadline=None)
def test_rope_pi_beyond_the_trained_length_is_linear_scaling(seq_len, offset):
    q, k, _ = _qkv(b=1, h=1, s=seq_len, d=8, seed=seq_len)
    pi = make_position_scheme("rope_pi", dim=8, num_heads=1, max_len=16)
    factor = (offset + seq_len) / 16
    reference = RotaryEmbedding(8, scaling={"rope_type": "linear", "factor": factor})
    for a, b in zip(pi.rotate(q, k, offset), reference(q, k, offset=offset), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    # positions are compressed into the trained range [0, 16)
    compressed = torch.arange(offset, offset + seq_len, dtype=torch.float64) / factor
    assert compressed.max() < 16
    for a, b in zip(pi.rotate(q, k, offset), RotaryEmbedding(8)(q, k, positions=compressed), strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def test_rope_pi_with_a_fixed_factor():
    q, k, _ = _qkv(s=6, d=8)
    pi = make_position_scheme("rope_pi", dim=32, num_heads=4, max_len=16, factor=4)
    assert pi.factor_for(6) == 4.0 and pi.factor_for(1000) == 4.0
    reference = RotaryEmbedding(8, scaling={"rope_type": "linear", "factor": 4.0})
    for a, b in zip(pi.rotate(q, k), reference(q, k), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


# --- properties that follow from where each scheme acts -------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", NEW)
def test_relative_schemes_ignore_a_shift_of_all_positions(name, causal):
    model = TinyTransformer(TinyConfig(20, scheme=name, causal=causal, **SMALL | {"max_len": 64}))
    tokens = _tokens(2, 12)
    out0, out9 = model(tokens), model(tokens, offset=9)
    if name.startswith("rope"):  # rotations by different angles: equal up to rounding
        assert torch.allclose(out0, out9, atol=1e-4)
    else:
        assert torch.equal(out0, out9)
    absolute = TinyTransformer(TinyConfig(20, scheme="sinusoidal", causal=causal, **SMALL | {"max_len": 64}))
    assert not torch.allclose(absolute(tokens), absolute(tokens, offset=9), atol=1e-3)


def test_bidirectional_alibi_cannot_tell_left_from_right():
    """The symmetric bias makes the whole model commute with reversing the sequence."""
    model = TinyTransformer(TinyConfig(20, scheme="alibi", **SMALL))
    tokens = _tokens(2, 11)
    assert torch.allclose(model(tokens.flip(1)), model(tokens).flip(1), atol=1e-5)
    for name in ("t5", "rope", "shaw"):  # direction-aware relative schemes
        other = TinyTransformer(TinyConfig(20, scheme=name, **SMALL))
        assert not torch.allclose(other(tokens.flip(1)), other(tokens).flip(1), atol=1e-3)


def test_new_schemes_keep_the_global_random_state_and_are_seeded():
    state = torch.random.get_rng_state()
    a = TinyTransformer(TinyConfig(20, scheme="shaw", seed=1, **SMALL))
    b = TinyTransformer(TinyConfig(20, scheme="shaw", seed=1, **SMALL))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a.scheme.rel_k, b.scheme.rel_k)


# --- training ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NEW)
def test_each_scheme_learns_the_shift_task_far_above_chance(name):
    task = make_task("shift")
    model = TinyTransformer(TinyConfig(task.vocab_size, scheme=name, causal=True, seed=0, **SMALL | {"num_layers": 2}))
    losses = train_tiny(model, task, steps=150, length=8, seed=0, batch_size=32)
    assert losses[-1] < 0.6 * losses[0]
    # chance is 1/16; ALiBi, whose slopes only favour nearby keys, learns slowest (about 0.3 here)
    assert tiny_accuracy(model, task, length=8, num_examples=128) > 4 * task.chance


def test_rope_and_rope_pi_train_to_the_same_model():
    task = make_task("shift")
    config = TinyConfig(task.vocab_size, scheme="rope", causal=True, seed=2, **SMALL)
    models = [TinyTransformer(config.replace(scheme=s)) for s in ("rope", "rope_pi")]
    losses = [train_tiny(m, task, steps=10, length=8, seed=2, batch_size=8) for m in models]
    assert losses[0] == losses[1]
    tokens = _tokens(2, 16, vocab=task.vocab_size)
    assert torch.equal(models[0](tokens), models[1](tokens))  # 16 = max_len: no interpolation yet
    longer = _tokens(2, 32, vocab=task.vocab_size)
    assert not torch.allclose(models[0](longer), models[1](longer), atol=1e-3)


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, options, match",
    [
        ("rope_pi", {"factor": 0.5}, r"factor must be None or a finite number >= 1, got 0\.5"),
        ("rope_pi", {"factor": math.inf}, r"factor must be None or a finite number >= 1, got inf"),
        ("shaw", {"max_relative_position": -1}, r"max_relative_position must be >= 0, got -1"),
        ("t5", {"num_buckets": 2}, r"num_buckets must be >= 4 with bidirectional=True"),
        ("rope", {"base": 1.0}, r"base must be a finite number > 1, got 1\.0"),
        ("rope", {"layout": "zigzag"}, r"layout must be one of 'half', 'interleaved'; got 'zigzag'"),
    ],
)
def test_bad_scheme_options(name, options, match):
    with pytest.raises(ValueError, match=match):
        make_position_scheme(name, dim=32, num_heads=4, max_len=16, **options)


def test_rope_needs_an_even_head_dimension():
    with pytest.raises(ValueError, match=r"head_dim must be even .*got 3"):
        TinyTransformer(TinyConfig(10, scheme="rope", dim=12, num_heads=4))


# --- strict options: no option is silently dropped ------------------------------------------

ACCEPTED = {
    "none": "no options",
    "sinusoidal": "'base', 'layout'",
    "learned": "'std', 'truncated'",
    "shaw": "'max_relative_position'",
    "t5": "'max_distance', 'num_buckets'",
    "alibi": "no options",
    "rope": "'base', 'layout', 'scaling'",
    "rope_pi": "'base', 'factor', 'layout'",
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_an_unknown_option_is_rejected_with_the_options_the_scheme_takes(name):
    match = rf"position scheme '{name}' has no option\(s\) \['bsae'\]; it accepts {ACCEPTED[name]}$"
    with pytest.raises(ValueError, match=match):
        make_position_scheme(name, dim=32, num_heads=4, max_len=16, bsae=500)
    with pytest.raises(ValueError, match=match):
        TinyConfig(20, scheme=name, dim=32, num_heads=4, scheme_options={"bsae": 500})


def test_every_option_listed_as_accepted_is_taken():
    valid = {
        "none": {},
        "sinusoidal": {"base": 500.0, "layout": "concat"},
        "learned": {"std": 0.5, "truncated": True},
        "shaw": {"max_relative_position": 3},
        "t5": {"max_distance": 64, "num_buckets": 16},
        "alibi": {},
        "rope": {"base": 500.0, "layout": "interleaved", "scaling": {"rope_type": "linear", "factor": 2.0}},
        "rope_pi": {"base": 500.0, "factor": 2.0, "layout": "interleaved"},
    }
    for name, options in valid.items():
        assert (", ".join(map(repr, sorted(options))) or "no options") == ACCEPTED[name]
        scheme = make_position_scheme(name, dim=32, num_heads=4, max_len=16, **options)
        model = TinyTransformer(TinyConfig(20, scheme=name, dim=32, num_heads=4, max_len=16, scheme_options=options))
        assert type(model.scheme) is type(scheme) and model.config.scheme_options == options
    assert make_position_scheme("rope", dim=32, num_heads=4, max_len=16, base=500.0).rotary.base == 500.0
    assert make_position_scheme("rope_pi", dim=32, num_heads=4, max_len=16, factor=2.0).factor == 2.0
    assert make_position_scheme("shaw", dim=32, num_heads=4, max_len=16, max_relative_position=3).rel_k.shape == (7, 8)
    assert make_position_scheme("t5", dim=32, num_heads=4, max_len=16, num_buckets=16).bias.num_buckets == 16


def test_model_keywords_are_not_scheme_options():
    with pytest.raises(ValueError, match=r"\['dim', 'causal'\] are set by the model, not by scheme options"):
        TinyConfig(20, scheme="rope", scheme_options={"causal": True, "dim": 8})


def test_factories_get_only_the_model_keywords_they_name(monkeypatch):
    monkeypatch.setattr(registry, "_SCHEMES", dict(registry._SCHEMES))
    calls = []

    def heads_only(*, num_heads, width=3):
        calls.append({"num_heads": num_heads, "width": width})
        return PositionScheme()

    def anything(**kwargs):
        calls.append(kwargs)
        return PositionScheme()

    register_position_scheme("heads_only", heads_only)
    register_position_scheme("anything", anything)
    make_position_scheme("heads_only", dim=32, num_heads=4, max_len=16, causal=True, width=5)
    make_position_scheme("anything", dim=32, num_heads=4, max_len=16, causal=True, bsae=500)
    assert calls == [
        {"num_heads": 4, "width": 5},
        {"dim": 32, "num_heads": 4, "max_len": 16, "causal": True, "bsae": 500},
    ]
    with pytest.raises(ValueError, match=r"scheme 'heads_only' has no option\(s\) \['bsae'\]; it accepts 'width'$"):
        make_position_scheme("heads_only", dim=32, num_heads=4, max_len=16, bsae=500)
    assert type(make_position_scheme("learned", dim=4, num_heads=1, max_len=4)) is LearnedScheme


# --- Shaw holds the module of chapter 5, and the seed draws the weights in construction order ----


def test_shaw_scheme_holds_shaw_relative_embeddings():
    scheme = make_position_scheme("shaw", dim=32, num_heads=4, max_len=16, max_relative_position=3)
    assert isinstance(scheme.relative, ShawRelativeEmbeddings)
    assert scheme.rel_k is scheme.relative.rel_k and scheme.rel_v is scheme.relative.rel_v
    assert list(scheme.parameters()) == [scheme.rel_k, scheme.rel_v]
    assert (scheme.head_dim, scheme.max_relative_position) == (8, 3)
    for q_len, k_len in [(5, 5), (2, 6)]:
        tables = scheme.relative.tables(q_len, k_len, offset=k_len - q_len)
        assert all(torch.equal(a, b) for a, b in zip(scheme.relative_embeddings(q_len, k_len), tables, strict=True))


def test_the_seed_draws_the_weights_in_construction_order():
    """Token embeddings, then the scheme's tables, then the blocks: the order the saved experiments were run in."""
    model = TinyTransformer(TinyConfig(20, scheme="shaw", dim=32, num_heads=4, num_layers=1, seed=5))
    names = [name for name, _ in model.named_parameters()]
    assert names[:4] == ["embed.weight", "scheme.relative.rel_k", "scheme.relative.rel_v", "blocks.0.norm1.weight"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        embed = torch.nn.init.normal_(torch.nn.Embedding(20, 32).weight, std=0.3)
        rel_k, rel_v = (torch.randn(33, 8) * 8**-0.5 for _ in range(2))
        qkv = torch.nn.Linear(32, 96)
    assert torch.equal(model.embed.weight, embed)
    assert torch.equal(model.scheme.rel_k, rel_k) and torch.equal(model.scheme.rel_v, rel_v)
    assert torch.equal(model.blocks[0].attn.qkv.weight, qkv.weight)
