"""The tutorial pattern of chapter 10 against posenc: each pitfall the chapter shows, asserted again."""

from __future__ import annotations

import importlib.util
import io
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

import posenc
from posenc import (
    ALiBiBias,
    LearnedPositionalEmbedding,
    MultiHeadSelfAttention,
    RotaryEmbedding,
    ShawRelativeAttention,
    ShawRelativeEmbeddings,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
    TransformerXLLearnableAttention,
    TransformerXLRelativeAttention,
    sinusoidal_table,
)
from posenc.experiments import TinyConfig, TinyTransformer
from posenc_book.tutorial import TutorialPositionalEncoding, tutorial_table

even_dims = st.integers(1, 16).map(lambda n: 2 * n)


def _save(module: nn.Module) -> int:
    buffer = io.BytesIO()
    torch.save(module.state_dict(), buffer)
    return buffer.getbuffer().nbytes


# The pattern itself ---------------------------------------------------------------------


def test_tutorial_table_hand_values():
    table = tutorial_table(3, 4)  # frequencies 1 and 1/100
    expected = [f(p * w) for p in range(3) for w in (1.0, 0.01) for f in (math.sin, math.cos)]
    assert table.dtype == torch.float32
    assert table.flatten().tolist() == pytest.approx(expected, abs=1e-7)


@given(st.integers(1, 300), even_dims)
def test_tutorial_table_is_the_sinusoidal_encoding_up_to_float32_angles(n, d):
    assert torch.allclose(tutorial_table(n, d), sinusoidal_table(n, d), atol=2e-5)


def test_float32_angles_cost_accuracy_at_position_5000():
    exact = sinusoidal_table(5000, 64, dtype=torch.float64)
    assert (tutorial_table(5000, 64).double() - exact).abs().max() > 1e-4
    assert (sinusoidal_table(5000, 64).double() - exact).abs().max() <= 2**-24


@pytest.mark.claim("003-06")
@given(st.integers(1, 4), st.integers(1, 30), even_dims)
def test_both_layouts_add_the_table_when_given_their_own_layout(b, s, d):
    x = torch.randn(b, s, d, generator=torch.Generator().manual_seed(s))
    table = tutorial_table(32, d)
    batch_first = TutorialPositionalEncoding(d, max_len=32)
    seq_first = TutorialPositionalEncoding(d, max_len=32, seq_first=True)
    assert batch_first.pe.shape == (1, 32, d) and seq_first.pe.shape == (32, 1, d)
    assert torch.equal(batch_first(x), x + table[:s])
    assert torch.equal(seq_first(x.transpose(0, 1)).transpose(0, 1), x + table[:s])


@pytest.mark.claim("000-08", "002-16")
def test_missing_nn_import_is_a_name_error():
    source = "import math\nimport torch\nclass PositionalEncoding(nn.Module):\n    pass\n"
    with pytest.raises(NameError, match="name 'nn' is not defined"):
        exec(source, {})
    namespace: dict = {}
    exec("from torch import nn\n" + source, namespace)
    assert issubclass(namespace["PositionalEncoding"], nn.Module)


# Layout -----------------------------------------------------------------------------------


def test_pytorch_transformer_layers_default_to_sequence_first():
    assert nn.TransformerEncoderLayer(8, 2).self_attn.batch_first is False


@pytest.mark.claim("002-17")
@given(st.integers(2, 5), st.integers(2, 12))
def test_batch_first_input_to_sequence_first_module_gets_the_batch_index(b, s):
    module = TutorialPositionalEncoding(8, max_len=16, seq_first=True)
    x = torch.randn(b, s, 8)
    added = module(x) - x
    table = tutorial_table(b, 8)
    for i in range(b):  # sequence i got PE(i) on every token
        assert torch.allclose(added[i], table[i].expand(s, 8), atol=1e-6)
    assert (module(x) - SinusoidalPositionalEncoding(8)(x)).abs().max() > 0.5


def test_sequence_first_input_to_batch_first_module_gets_the_batch_column():
    module = TutorialPositionalEncoding(8, max_len=16)
    out = module(torch.zeros(10, 3, 8))  # [seq, batch, d] read as [batch, seq, d]
    assert torch.equal(out, tutorial_table(3, 8).expand(10, 3, 8))


# Length and dimension -----------------------------------------------------------------------


@pytest.mark.claim("002-04")
def test_longer_than_max_len_is_a_broadcasting_error_without_max_len():
    with pytest.raises(RuntimeError, match=r"must match the size of tensor b \(32\)") as info:
        TutorialPositionalEncoding(8, max_len=32)(torch.zeros(1, 40, 8))
    assert "max_len" not in str(info.value)
    grows = SinusoidalPositionalEncoding(8, initial_len=32)
    assert torch.equal(grows(torch.zeros(1, 40, 8))[0], sinusoidal_table(40, 8))
    assert grows.table.shape[0] == 64


@pytest.mark.parametrize("d", [3, 7, 513])
def test_odd_d_model_fails_inside_the_pattern_and_is_refused_by_posenc(d):
    with pytest.raises(RuntimeError, match="expanded size"):
        TutorialPositionalEncoding(d, max_len=8)
    with pytest.raises(ValueError, match=rf"dim must be even .*got {d}; use {d - 1} or {d + 1}"):
        SinusoidalPositionalEncoding(d)


# dtype and device ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_float32_buffer_promotes_half_input_while_posenc_keeps_it(dtype):
    x = torch.randn(2, 5, 8).to(dtype)
    assert TutorialPositionalEncoding(8, max_len=16)(x).dtype == torch.float32
    assert SinusoidalPositionalEncoding(8)(x).dtype == dtype
    with pytest.raises(RuntimeError, match="dtype"):
        nn.Linear(8, 8).to(dtype)(TutorialPositionalEncoding(8, max_len=16)(x))


def test_to_bfloat16_rounds_the_table_within_2_to_minus_9():
    module = TutorialPositionalEncoding(512, max_len=1100).to(torch.bfloat16)
    assert module.pe.dtype == torch.bfloat16
    assert (module.pe[0].float() - tutorial_table(1100, 512)).abs().max() <= 2**-9
    same_bf16 = (module.pe[0, 1000] == module.pe[0, 1001]).sum().item()
    table32 = tutorial_table(1100, 512)
    assert same_bf16 > 100 and (table32[1000] == table32[1001]).sum().item() == 0


def test_buffers_follow_to_and_plain_attributes_do_not():
    module = TutorialPositionalEncoding(8, max_len=16)
    module.plain = torch.zeros(3)
    module.to("meta")
    assert module.pe.device.type == "meta" and module.plain.device.type == "cpu"
    ours = SinusoidalPositionalEncoding(8).to("meta")
    assert ours.table.device.type == "meta"
    assert ours(torch.zeros(1, 4, 8, device="meta")).device.type == "meta"


# Checkpoints --------------------------------------------------------------------------------


def test_persistent_table_costs_its_size_in_every_checkpoint():
    tutorial = _save(TutorialPositionalEncoding(512))
    assert set(TutorialPositionalEncoding(512).state_dict()) == {"pe"}
    assert tutorial >= 5000 * 512 * 4
    assert _save(TutorialPositionalEncoding(512, persistent=False)) < 2_000
    assert SinusoidalPositionalEncoding(512).state_dict() == {}
    assert RotaryEmbedding(64).state_dict() == {} and ALiBiBias(8).state_dict() == {}
    assert _save(SinusoidalPositionalEncoding(512)) < 2_000


def test_persistent_table_ties_the_checkpoint_to_max_len():
    saved = TutorialPositionalEncoding(16, max_len=50).state_dict()
    with pytest.raises(RuntimeError, match=r"size mismatch for pe"):
        TutorialPositionalEncoding(16, max_len=20).load_state_dict(saved)
    TutorialPositionalEncoding(16, max_len=20, persistent=False).load_state_dict({})
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "pe"'):
        SinusoidalPositionalEncoding(16).load_state_dict(saved)
    assert not SinusoidalPositionalEncoding(16).load_state_dict({}, strict=True).missing_keys


# Gradients and dropout ------------------------------------------------------------------------


@pytest.mark.claim("003-07", "004-15")
def test_requires_grad_false_on_a_buffer_slice_is_a_no_op():
    module = TutorialPositionalEncoding(8, max_len=16)
    piece = module.pe[:, :5]
    assert not module.pe.requires_grad and not piece.requires_grad
    assert piece.requires_grad_(False) is piece and list(module.parameters()) == []
    x = torch.randn(2, 5, 8, requires_grad=True)
    (x + module.pe[:, :5]).square().sum().backward()
    plain, x.grad = x.grad.clone(), None
    (x + module.pe[:, :5].requires_grad_(False)).square().sum().backward()
    assert torch.equal(plain, x.grad) and module.pe.grad is None


def test_requires_grad_false_on_a_parameter_slice_raises():
    weight = nn.Parameter(torch.randn(16, 8))
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf variables"):
        weight[:5].requires_grad_(False)
    assert not weight[:5].detach().requires_grad


@pytest.mark.claim("002-18", "003-08")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dropout_after_the_addition_same_mask_as_posenc(seed):
    p = 0.1
    tutorial = TutorialPositionalEncoding(32, max_len=64, dropout=p)
    ours = SinusoidalPositionalEncoding(32, dropout=p)
    x = torch.randn(8, 64, 32, generator=torch.Generator().manual_seed(seed))
    clean = x + sinusoidal_table(64, 32)
    torch.manual_seed(seed)
    a = tutorial(x)
    torch.manual_seed(seed)
    b = ours(x)
    kept = a != 0
    assert abs((1 - kept.float().mean().item()) - p) < 0.02  # 16,384 entries
    assert torch.equal(kept, b != 0)
    assert torch.allclose(a[kept], clean[kept] / (1 - p), atol=1e-5)
    tutorial.eval(), ours.eval()
    assert torch.allclose(tutorial(x), clean, atol=1e-5) and torch.equal(ours(x), clean)


# torch.compile --------------------------------------------------------------------------------


def _compile_examples():
    gen = torch.Generator().manual_seed(0)
    x, qk = torch.randn(2, 12, 16, generator=gen), torch.randn(2, 2, 12, 8, generator=gen)
    tokens = torch.randint(16, (2, 12), generator=gen)
    return {  # id: (module class, build, positional args, keyword args)
        "sinusoidal, cache growing": (
            SinusoidalPositionalEncoding,
            lambda: SinusoidalPositionalEncoding(16, initial_len=4),
            (x,),
            {"offset": 5},
        ),
        "learned": (LearnedPositionalEmbedding, lambda: LearnedPositionalEmbedding(32, 16), (x,), {"offset": 3}),
        "rotary, cache growing": (RotaryEmbedding, lambda: RotaryEmbedding(8, initial_len=4), (qk, qk), {"offset": 2}),
        "rotary, partial": (RotaryEmbedding, lambda: RotaryEmbedding(8, rotary_dim=4), (qk, qk), {"offset": 2}),
        "xpos": (posenc.XPosRotaryEmbedding, lambda: posenc.XPosRotaryEmbedding(8), (qk, qk), {}),
        "axial": (
            posenc.AxialRotaryEmbedding,
            lambda: posenc.AxialRotaryEmbedding(8),
            (qk.view(2, 2, 3, 4, 8), qk.view(2, 2, 3, 4, 8)),
            {},
        ),
        "rotary, float positions": (
            RotaryEmbedding,
            lambda: RotaryEmbedding(8),
            (qk, qk),
            {"positions": torch.arange(12) * 0.5},
        ),
        "multi-head attention": (MultiHeadSelfAttention, lambda: MultiHeadSelfAttention(16, 2), (x,), {"causal": True}),
        "shaw": (ShawRelativeAttention, lambda: ShawRelativeAttention(16, 2), (x,), {"causal": True}),
        "shaw tables": (ShawRelativeEmbeddings, lambda: ShawRelativeEmbeddings(8, 4), (12, 12), {"offset": 0}),
        "transformer-xl": (
            TransformerXLRelativeAttention,
            lambda: TransformerXLRelativeAttention(16, 2),
            (x,),
            {"memory": x},
        ),
        "transformer-xl learnable": (
            TransformerXLLearnableAttention,
            lambda: TransformerXLLearnableAttention(16, 2, max_len=16),
            (x,),
            {"memory": x},
        ),
        "t5 bias": (T5RelativeBias, lambda: T5RelativeBias(2), (12, 12), {"offset": 0}),
        "alibi bias": (ALiBiBias, lambda: ALiBiBias(2), (12, 12), {}),
        "fire bias": (posenc.FIREBias, lambda: posenc.FIREBias(2, hidden=8), (12, 12), {}),
        "cope": (posenc.CoPE, lambda: posenc.CoPE(8, 16), (qk, qk), {}),
        # Once graph breaks (a branch on tensor values), now computed or asserted on the device when compiled.
        "rotary, integer positions": (
            RotaryEmbedding,
            lambda: RotaryEmbedding(8),
            (qk, qk),
            {"positions": torch.arange(12)},
        ),
        "tiny transformer": (TinyTransformer, lambda: TinyTransformer(TinyConfig(16, dim=16)), (tokens,), {}),
    }


GRAPH_BREAKS: dict[str, str] = {}  # name -> why fullgraph cannot capture it (none at present)
COMPILE_CASES = [
    pytest.param(
        name,
        marks=pytest.mark.xfail(reason=GRAPH_BREAKS[name], raises=torch._dynamo.exc.TorchDynamoException, strict=True),
    )
    if name in GRAPH_BREAKS
    else name
    for name in _compile_examples()
]


@pytest.mark.parametrize("name", COMPILE_CASES)
def test_fullgraph_compile_captures_one_graph(name):
    _, build, args, kwargs = _compile_examples()[name]
    graphs = []

    def count_graphs(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.manual_seed(0)
    module = build()
    compiled = torch.compile(module, fullgraph=True, backend=count_graphs)(*args, **kwargs)
    eager = module(*args, **kwargs)
    assert len(graphs) == 1
    compiled, eager = torch.utils._pytree.tree_leaves(compiled), torch.utils._pytree.tree_leaves(eager)
    assert len(compiled) == len(eager) and all(torch.equal(c, e) for c, e in zip(compiled, eager, strict=True))


def test_every_public_module_has_a_compile_example():
    # the library's modules and the experiments' main ones (those the root used to re-export)
    public = [getattr(posenc, name) for name in posenc.__all__]
    public += [getattr(posenc.experiments, name) for name in sorted(posenc._MOVED_TO_EXPERIMENTS)]
    modules = {obj for obj in public if isinstance(obj, type) and issubclass(obj, torch.nn.Module)}
    covered = {cls for cls, *_ in _compile_examples().values()}
    assert modules - covered == {posenc.experiments.PositionScheme}  # a base class of no-op hooks


def test_cache_growth_inside_a_compiled_forward_is_kept():
    torch._dynamo.reset()
    module = SinusoidalPositionalEncoding(8, initial_len=4)
    out = torch.compile(module, fullgraph=True, backend="eager")(torch.zeros(1, 10, 8))
    assert module.table.shape[0] == 10
    assert torch.equal(out[0], sinusoidal_table(10, 8))


# Claims of the source documents ---------------------------------------------------------------


@pytest.mark.claim("002-19", "003-05")
def test_seed_003_comment_has_the_exponent_sign_wrong():
    two_i = torch.arange(0, 64, 2, dtype=torch.float64)
    div_term = torch.exp(two_i * (-math.log(10000.0) / 64))  # what the code computes
    assert torch.allclose(div_term, 10000.0 ** (-two_i / 64))
    assert not torch.allclose(div_term, 10000.0 ** (two_i / 64))  # what the comment says


@pytest.mark.claim("000-09")
def test_seed_000_example_shapes():
    assert TutorialPositionalEncoding(512)(torch.rand(32, 10, 512)).shape == (32, 10, 512)


@pytest.mark.claim("002-21")
def test_torch_nn_has_no_positional_encoding_module():
    assert not hasattr(torch.nn, "PositionalEncoding")


@pytest.mark.claim("002-23")
def test_transformers_defines_position_modules_per_model():
    spec = importlib.util.find_spec("transformers")  # locates the package without importing it
    llama = Path(spec.origin).parent / "models" / "llama" / "modeling_llama.py"
    assert "class LlamaRotaryEmbedding(nn.Module)" in llama.read_text(encoding="utf-8")
