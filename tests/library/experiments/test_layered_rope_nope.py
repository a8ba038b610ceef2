"""The RoPE/NoPE hybrid of Cohere Command R7B on the tiny Transformer: which layer gets what, and that the NoPE
layer sees no positions."""

import pytest
import torch

from posenc.experiments import NoPositions, RopeNopeScheme, TinyConfig, TinyTransformer, make_position_scheme
from posenc.experiments.layered import SlidingWindowRopeScheme

SMALL = dict(dim=32, num_heads=4, num_layers=2, max_len=16)


def _tokens(b, s, seed=0, vocab=20):
    return torch.randint(vocab, (b, s), generator=torch.Generator().manual_seed(seed))


def _model(scheme, causal=True, num_layers=2, **options):
    config = TinyConfig(20, scheme=scheme, causal=causal, scheme_options=options, **SMALL | {"num_layers": num_layers})
    return TinyTransformer(config)


def test_layers_of_the_tiny_model_and_of_command_r7b():
    scheme = make_position_scheme("rope_nope", dim=32, num_heads=4, max_len=16, causal=True)
    assert isinstance(scheme, RopeNopeScheme) and (scheme.window, scheme.nope_every) == (4, 2)
    # the two-layer model: layer 0 local RoPE, layer 1 global NoPE
    assert scheme.for_layer(0) is scheme.rope and isinstance(scheme.rope, SlidingWindowRopeScheme)
    assert scheme.for_layer(1) is scheme.nope and isinstance(scheme.nope, NoPositions)
    r7b = make_position_scheme("rope_nope", dim=32, num_heads=4, max_len=16, nope_every=4, window=4096)
    assert [r7b.is_nope(i) for i in range(8)] == [False, False, False, True] * 2 and r7b.window == 4096


def test_the_nope_layer_is_permutation_equivariant():
    """Permuting the keys and values permutes nothing in the NoPE layer's output, and so does permuting its
    whole input in a bidirectional block; the RoPE layer sees where the tokens stand."""
    scheme = make_position_scheme("rope_nope", dim=32, num_heads=4, max_len=16, window=16)
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 9, 8, generator=gen) for _ in range(3))
    perm = torch.randperm(9, generator=gen)
    for index, equivariant in ((0, False), (1, True)):
        layer = scheme.for_layer(index)
        out, _ = layer.attend(*layer.rotate(q, k, 0), v)
        rq, rk = layer.rotate(q, k[..., perm, :], 0)
        permuted, _ = layer.attend(rq, rk, v[..., perm, :])
        assert torch.allclose(out, permuted, atol=1e-6) is equivariant
    model = _model("rope_nope", causal=False)
    x = torch.randn(2, 9, 32, generator=gen)
    for index, equivariant in ((0, False), (1, True)):
        block, layer = model.blocks[index], model.scheme.for_layer(index)
        out, _ = block(x, layer, bias=None, causal=False, offset=0)
        shuffled, _ = block(x[:, perm], layer, bias=None, causal=False, offset=0)
        assert torch.allclose(out[:, perm], shuffled, atol=1e-5) is equivariant


@pytest.mark.parametrize("causal", [False, True])
def test_with_a_window_over_the_input_it_is_irope_every_second_layer(causal):
    hybrid, irope = _model("rope_nope", causal, window=64), _model("irope", causal, nope_every=2)
    irope.load_state_dict(hybrid.state_dict())  # the same weights: neither scheme holds any
    tokens = _tokens(3, 12)
    with torch.no_grad():
        assert torch.equal(hybrid(tokens), irope(tokens))
        assert not torch.allclose(_model("rope_nope", causal)(tokens), irope(tokens), atol=1e-4)  # window 4


def test_local_rope_layer_and_global_nope_layer_in_the_model():
    model = _model("rope_nope", num_layers=4)  # window 4: layers 0 and 2 local, 1 and 3 global
    _, maps = model(_tokens(2, 10), offset=3, return_attention=True)
    distance = torch.arange(10)[:, None] - torch.arange(10)  # [q, k], query minus key
    for layer, weights in enumerate(maps):
        if layer % 2:  # global NoPE: every earlier key
            assert (weights[..., distance >= 0] > 0).all()
        else:
            assert (weights[..., (distance >= 4) | (distance < 0)] == 0).all()
            assert (weights[..., (distance >= 0) & (distance < 4)] > 0).all()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"window": 0}, r"window must be >= 1, got 0"),
        ({"nope_every": 0}, r"nope_every must be an int >= 1 \(1: every layer\), got 0"),
        ({"base": 1.0}, r"base must be a finite number > 1, got 1\.0"),
        ({"layout": "concat"}, r"layout must be one of 'half', 'interleaved'; got 'concat'"),
        ({"global_base": 1e6}, r"position scheme 'rope_nope' has no option\(s\) \['global_base'\]"),
    ],
)
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        make_position_scheme("rope_nope", dim=32, num_heads=4, max_len=16, **options)
    with pytest.raises(ValueError, match=message):
        _model("rope_nope", **options)


def test_an_odd_head_dim_and_a_negative_layer_are_refused():
    with pytest.raises(ValueError, match=r"head_dim must be even .*got 3"):
        make_position_scheme("rope_nope", dim=12, num_heads=4, max_len=16)
    with pytest.raises(ValueError, match=r"index must be >= 0, got -1"):
        make_position_scheme("rope_nope", dim=32, num_heads=4, max_len=16).for_layer(-1)
