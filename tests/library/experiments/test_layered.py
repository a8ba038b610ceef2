"""Per-layer position schemes: Llama 4's iRoPE and Gemma 3's local and global layers on the tiny Transformer."""

import pytest
import torch

from posenc import apply_rope, rope_cos_sin, scaled_dot_product_attention
from posenc.experiments import (
    ALL_SCHEMES,
    IRopeScheme,
    LocalGlobalScheme,
    NoPositions,
    RopeScheme,
    ShiftTask,
    TinyConfig,
    TinyTransformer,
    make_position_scheme,
    train_tiny,
)
from posenc.experiments.layered import SlidingWindowRopeScheme, sliding_window_bias

LAYERED = ["irope", "local_global"]
SMALL = dict(dim=32, num_heads=4, num_layers=4, max_len=16)


def _tokens(b, s, seed=0, vocab=20):
    return torch.randint(vocab, (b, s), generator=torch.Generator().manual_seed(seed))


def _qkv(b=2, h=4, s=9, d=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, s, d, generator=gen) for _ in range(3))


def _model(scheme, causal=True, **options):
    return TinyTransformer(TinyConfig(20, scheme=scheme, causal=causal, scheme_options=options, **SMALL))


def _run_by_hand(model, tokens, layer_schemes):
    """The model's forward pass with ``layer_schemes[i]`` in block ``i`` instead of ``for_layer(i)``."""
    x = model.scheme.embed(model.embed(tokens), 0)
    for block, scheme in zip(model.blocks, layer_schemes, strict=True):
        x, _ = block(x, scheme, bias=None, causal=model.causal, offset=0)
    return model.head(model.norm(x))


# --- the default hook ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_SCHEMES)
def test_the_book_schemes_use_themselves_in_every_layer(name):
    assert "irope" not in ALL_SCHEMES and "local_global" not in ALL_SCHEMES
    scheme = _model(name).scheme
    assert all(scheme.for_layer(i) is scheme for i in range(8))


def test_for_layer_must_hand_out_a_submodule(monkeypatch):
    stranger = RopeScheme(dim=32, num_heads=4)
    monkeypatch.setattr(IRopeScheme, "for_layer", lambda self, index: stranger)
    with pytest.raises(ValueError, match=r"for_layer\(0\) must return the scheme or one of its submodules"):
        _model("irope")


# --- irope ---------------------------------------------------------------------------------


def test_irope_layers():
    scheme = make_position_scheme("irope", dim=32, num_heads=4, max_len=16, causal=True)
    assert isinstance(scheme, IRopeScheme)
    kinds = [type(scheme.for_layer(i)) for i in range(8)]
    assert kinds == [RopeScheme, RopeScheme, RopeScheme, NoPositions] * 2
    assert {scheme.for_layer(i) for i in range(8)} == {scheme.rope, scheme.nope}
    every_other = make_position_scheme("irope", dim=32, num_heads=4, max_len=16, nope_every=2)
    assert [every_other.is_nope(i) for i in range(4)] == [False, True, False, True]
    all_nope = make_position_scheme("irope", dim=32, num_heads=4, max_len=16, nope_every=1)
    assert all(isinstance(all_nope.for_layer(i), NoPositions) for i in range(4))


@pytest.mark.parametrize("causal", [False, True])
def test_irope_is_rope_with_the_fourth_layer_unrotated(causal):
    irope, rope = _model("irope", causal), _model("rope", causal)
    rope.load_state_dict(irope.state_dict())  # the same weights: schemes without parameters draw nothing
    tokens = _tokens(3, 11)
    with torch.no_grad():
        expected = _run_by_hand(rope, tokens, [rope.scheme] * 3 + [NoPositions()])
        assert torch.equal(irope(tokens), expected)
        assert not torch.allclose(rope(tokens), expected)  # the fourth layer's rotation matters


def test_the_nope_layer_is_permutation_equivariant_over_keys():
    scheme = make_position_scheme("irope", dim=32, num_heads=4, max_len=16)
    q, k, v = _qkv()
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(1))
    for index, equivariant in ((2, False), (3, True)):
        layer = scheme.for_layer(index)
        out, _ = layer.attend(*layer.rotate(q, k, 0), v)
        rq, rk = layer.rotate(q, k[..., perm, :], 0)
        permuted, _ = layer.attend(rq, rk, v[..., perm, :])
        assert torch.allclose(out, permuted, atol=1e-6) is equivariant


# --- local_global --------------------------------------------------------------------------


def test_local_global_layers_and_defaults():
    scheme = make_position_scheme("local_global", dim=32, num_heads=4, max_len=64, causal=True)
    assert isinstance(scheme, LocalGlobalScheme) and scheme.window == 16 and scheme.global_every == 4
    kinds = [type(scheme.for_layer(i)) for i in range(8)]
    assert kinds == [SlidingWindowRopeScheme] * 3 + [RopeScheme] + [SlidingWindowRopeScheme] * 3 + [RopeScheme]
    assert scheme.for_layer(0).rotary.base == 1e4 and scheme.for_layer(3).rotary.base == 1e6
    assert make_position_scheme("local_global", dim=32, num_heads=4, max_len=3).window == 1
    every = make_position_scheme("local_global", dim=32, num_heads=4, max_len=16, global_every=1)
    assert all(every.for_layer(i) is every.global_scheme for i in range(4))


@pytest.mark.parametrize("offset", [0, 5])
def test_local_layers_give_no_weight_beyond_the_window(offset):
    model = _model("local_global", causal=True, window=3)
    _, maps = model(_tokens(2, 10), offset=offset, return_attention=True)
    distance = torch.arange(10)[:, None] - torch.arange(10)  # [q, k], query minus key
    for layer, weights in enumerate(maps):
        if layer == 3:  # global: every earlier key
            assert (weights[..., distance >= 0] > 0).all()
        else:
            assert (weights[..., (distance >= 3) | (distance < 0)] == 0).all()
            assert (weights[..., (distance >= 0) & (distance < 3)] > 0).all()


def test_a_bidirectional_window_is_symmetric():
    bias = sliding_window_bias(5, 5, 2, causal=False)
    distance = (torch.arange(5)[:, None] - torch.arange(5)).abs()
    assert torch.equal(bias == 0, distance < 2)
    model = _model("local_global", causal=False, window=2)
    _, maps = model(_tokens(2, 7), return_attention=True)
    distance = (torch.arange(7)[:, None] - torch.arange(7)).abs()
    assert (maps[0][..., distance >= 2] == 0).all() and (maps[0][..., distance < 2] > 0).all()
    assert (maps[3] > 0).all()


def test_the_window_counts_from_the_last_queries():
    bias = sliding_window_bias(2, 6, 3, causal=True)  # queries at key positions 4 and 5
    assert torch.equal(bias == 0, torch.tensor([[0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1]], dtype=torch.bool))
    assert sliding_window_bias(4, 6, 6, causal=True) is None


@pytest.mark.parametrize("causal", [False, True])
def test_a_window_over_the_whole_input_is_a_global_layer(causal):
    local = SlidingWindowRopeScheme(dim=32, num_heads=4, window=9, base=500.0)
    global_ = RopeScheme(dim=32, num_heads=4, base=500.0)
    q, k, v = _qkv()
    for a, b in zip(
        local.attend(*local.rotate(q, k, 2), v, causal=causal),
        global_.attend(*global_.rotate(q, k, 2), v, causal=causal),
        strict=True,
    ):
        assert torch.equal(a, b)
    narrow = SlidingWindowRopeScheme(dim=32, num_heads=4, window=8, base=500.0)
    assert not torch.equal(
        narrow.attend(*narrow.rotate(q, k, 2), v, causal=causal)[0],
        local.attend(*local.rotate(q, k, 2), v, causal=causal)[0],
    )
    # the whole model: every layer local with a wide window and the RoPE base is plain RoPE, bit for bit
    layered = _model("local_global", causal, window=16, global_base=1e4)
    tokens = _tokens(3, 12)
    assert torch.equal(layered(tokens), _model("rope", causal)(tokens))


def test_global_layers_rotate_with_base_a_million():
    scheme = make_position_scheme("local_global", dim=32, num_heads=4, max_len=16)
    q, k, _ = _qkv()
    cos, sin = rope_cos_sin(torch.arange(3, 12), 8, base=1e6)
    for index, base_matches in ((3, True), (0, False)):
        rq, rk = scheme.for_layer(index).rotate(q, k, 3)
        expected = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        assert (torch.equal(rq, expected[0]) and torch.equal(rk, expected[1])) is base_matches
    cos, sin = rope_cos_sin(torch.arange(3, 12), 8, base=1e4)
    assert torch.equal(scheme.for_layer(0).rotate(q, k, 3)[0], apply_rope(q, cos, sin))


def test_the_window_joins_a_mask_or_a_bias():
    local = SlidingWindowRopeScheme(dim=32, num_heads=4, window=2)
    q, k, v = _qkv(s=5)
    keep = torch.ones(5, 5, dtype=torch.bool).tril()
    by_mask = local.attend(q, k, v, bias=keep)[1]
    by_bias = local.attend(q, k, v, bias=torch.zeros(5, 5).masked_fill(~keep, float("-inf")))[1]
    by_causal = local.attend(q, k, v, causal=True)[1]
    assert torch.equal(by_mask, by_bias) and torch.equal(by_mask, by_causal)
    window = sliding_window_bias(5, 5, 2, causal=True)
    assert torch.equal(by_causal, scaled_dot_product_attention(q, k, v, bias=window, causal=True)[1])


def test_the_top_level_scheme_has_no_rotation_of_its_own():
    q, k, v = _qkv()
    for name in LAYERED:
        scheme = make_position_scheme(name, dim=32, num_heads=4, max_len=16)
        with pytest.raises(RuntimeError, match=r"call rotate on for_layer\(index\)"):
            scheme.rotate(q, k, 0)
        with pytest.raises(RuntimeError, match=r"call attend on for_layer\(index\)"):
            scheme.attend(q, k, v)


# --- in the model --------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", LAYERED)
def test_a_packed_row_equals_its_sequences_run_alone(name, causal):
    # window 2 and a 1-token sequence beside a 9-token one: padding queries far past their sequence
    # see no real key in the window, which must not turn into NaN in the real rows
    model = _model(name, causal, **({"window": 2} if name == "local_global" else {})).double().eval()
    lengths = [3, 9, 1]
    sequences = [_tokens(1, n, seed=n) for n in lengths]
    logits, maps = model(torch.cat(sequences, dim=1), cu_seqlens=torch.tensor([0, 3, 12, 13]), return_attention=True)
    assert logits.isfinite().all()
    start = 0
    for sequence, n in zip(sequences, lengths, strict=True):
        alone, alone_maps = model(sequence, return_attention=True)
        torch.testing.assert_close(logits[:, start : start + n], alone, rtol=0, atol=1e-12)
        for packed, single in zip(maps, alone_maps, strict=True):
            torch.testing.assert_close(packed[..., start : start + n, start : start + n], single, rtol=0, atol=1e-12)
        start += n


@pytest.mark.parametrize("name", LAYERED)
def test_each_layered_scheme_trains_and_round_trips(name):
    model = _model(name, causal=True)
    losses = train_tiny(model, ShiftTask(num_symbols=8, shift=1), steps=4, length=8, batch_size=8, warmup=1)
    assert len(losses) == 4 and all(torch.isfinite(torch.tensor(losses)))
    fresh = _model(name, causal=True)
    fresh.load_state_dict(model.state_dict())
    model.eval(), fresh.eval()
    tokens = _tokens(2, 8, vocab=model.vocab_size)
    with torch.no_grad():
        assert torch.equal(model(tokens), fresh(tokens))
        assert not torch.equal(_model(name, causal=True).eval()(tokens), model(tokens))  # training changed it


# --- bad options ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("local_global", {"window": 0}, r"window must be >= 1, got 0"),
        ("local_global", {"window": 2.5}, r"window must be an int >= 1, got 2\.5"),
        ("local_global", {"global_every": 0}, r"global_every must be an int >= 1 \(1: every layer\), got 0"),
        ("local_global", {"local_base": 1.0}, r"local_base must be a finite number > 1, got 1\.0"),
        ("local_global", {"global_base": 0.5}, r"global_base must be a finite number > 1, got 0\.5"),
        ("local_global", {"layout": "concat"}, r"layout must be one of 'half', 'interleaved'; got 'concat'"),
        ("irope", {"base": 1}, r"base must be a finite number > 1, got 1\.0"),
        ("irope", {"nope_every": -4}, r"nope_every must be an int >= 1 \(1: every layer\), got -4"),
        ("irope", {"window": 4}, r"position scheme 'irope' has no option\(s\) \['window'\]"),
    ],
)
def test_bad_options_are_refused(name, options, message):
    with pytest.raises(ValueError, match=message):
        make_position_scheme(name, dim=32, num_heads=4, max_len=16, **options)
    with pytest.raises(ValueError, match=message):
        _model(name, **options)


@pytest.mark.parametrize("name", LAYERED)
def test_an_odd_head_dim_is_refused(name):
    with pytest.raises(ValueError, match=r"head_dim must be even .*got 3"):
        make_position_scheme(name, dim=12, num_heads=4, max_len=16)


def test_a_layer_index_must_be_a_nonnegative_int():
    for name in LAYERED:
        scheme = make_position_scheme(name, dim=32, num_heads=4, max_len=16)
        with pytest.raises(ValueError, match=r"index must be >= 0, got -1"):
            scheme.for_layer(-1)
