"""Learned absolute position embeddings: lookup, initialisation, the hard length limit, training."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import LearnedPositionalEmbedding
from posenc.experiments import TinyConfig, TinyTransformer, make_task, tiny_accuracy_by_position, train_tiny


def test_adds_rows_offset_to_offset_plus_s():
    module = LearnedPositionalEmbedding(10, 3)
    with torch.no_grad():
        module.weight.copy_(torch.arange(30.0).view(10, 3))
    out = module(torch.zeros(2, 4, 3), offset=5)
    assert out.shape == (2, 4, 3)
    assert out[0].tolist() == [[15.0, 16.0, 17.0], [18.0, 19.0, 20.0], [21.0, 22.0, 23.0], [24.0, 25.0, 26.0]]
    assert torch.equal(out[0], out[1])


@given(st.integers(1, 4), st.integers(1, 20), st.integers(0, 30), st.sampled_from([1, 5, 16]))
def test_module_adds_exactly_the_table_rows(b, s, offset, d):
    module = LearnedPositionalEmbedding(64, d)
    x = torch.randn(b, s, d, generator=torch.Generator().manual_seed(s))
    out = module(x, offset=offset)
    assert torch.equal(out, x + module.weight[offset : offset + s])


def test_extra_leading_dims_and_dtype():
    module = LearnedPositionalEmbedding(8, 4)
    x = torch.zeros(2, 3, 5, 4, dtype=torch.bfloat16)
    out = module(x)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 3, 5, 4)
    assert torch.equal(out[1, 2], module.weight[:5].to(torch.bfloat16))


@pytest.mark.claim("002-28")
def test_last_row_is_usable_and_the_next_position_is_not():
    module = LearnedPositionalEmbedding(16, 4)
    module(torch.zeros(1, 16, 4))  # positions 0..15: fine
    module(torch.zeros(1, 1, 4), offset=15)  # position 15: fine
    with pytest.raises(IndexError, match=r"position 16 is past the learned table: max_len=16 covers positions 0\.\.15"):
        module(torch.zeros(1, 17, 4))
    with pytest.raises(IndexError, match=r"position 16 .*max_len=16.*offset=14, seq_len=3"):
        module(torch.zeros(1, 3, 4), offset=14)


def test_initialisation_bert_and_gpt2_style():
    torch.manual_seed(0)
    normal = LearnedPositionalEmbedding(512, 768)  # BERT-base's table shape
    assert abs(normal.weight.std().item() - 0.02) < 5e-4
    assert abs(normal.weight.mean().item()) < 5e-4
    truncated = LearnedPositionalEmbedding(512, 768, truncated=True)
    assert truncated.weight.abs().max().item() <= 0.04
    assert abs(truncated.weight.std().item() - 0.02 * 0.8796) < 5e-4  # truncation at 2 std shrinks it
    gpt2_tf = LearnedPositionalEmbedding(1024, 64, std=0.01)  # OpenAI's GPT-2 code uses 0.01
    assert abs(gpt2_tf.weight.std().item() - 0.01) < 5e-4


def test_reset_with_generator_is_reproducible_and_state_is_the_table():
    module = LearnedPositionalEmbedding(32, 8)
    module.reset_parameters(torch.Generator().manual_seed(3))
    first = module.weight.detach().clone()
    module.reset_parameters(torch.Generator().manual_seed(3))
    assert torch.equal(module.weight, first)
    assert list(module.state_dict()) == ["weight"] and module.weight.shape == (32, 8)
    assert module.weight.requires_grad


@pytest.mark.claim("002-06", "002-09", "004-10", "004-11")
def test_gradient_reaches_only_the_rows_used():
    module = LearnedPositionalEmbedding(12, 4)
    module(torch.randn(2, 5, 4), offset=3).pow(2).sum().backward()
    used = module.weight.grad.abs().sum(-1) > 0
    assert used.tolist() == [False] * 3 + [True] * 5 + [False] * 4


@pytest.mark.claim("004-17")
def test_hugging_face_configs_bert_512_gpt2_1024():
    transformers = pytest.importorskip("transformers")
    bert, gpt2 = transformers.BertConfig(), transformers.GPT2Config()
    assert bert.max_position_embeddings == 512 and gpt2.n_positions == 1024
    assert bert.initializer_range == 0.02 and gpt2.initializer_range == 0.02


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_after_training_unseen_positions_keep_their_initial_values(seed):
    task = make_task("shift")
    model = TinyTransformer(TinyConfig(task.vocab_size, scheme="learned", max_len=32, dim=32, num_layers=1, seed=seed))
    table = model.scheme.table.weight
    initial = table.detach().clone()
    train_tiny(model, task, steps=150, length=8, seed=seed)
    assert torch.equal(table[8:], initial[8:])  # never in a batch: exactly as initialised
    moved = (table[:8] - initial[:8]).norm(dim=-1)
    assert moved.min() > 5 * initial.norm(dim=-1).max()
    unit = torch.nn.functional.normalize(table.detach()[:8].double(), dim=-1)
    cos = unit @ unit.T  # [8, 8]
    spread = max((cos.diagonal(o).max() - cos.diagonal(o).min()).item() for o in range(-4, 5))
    assert spread > 0.4  # similarity is not a function of the offset, unlike the sinusoidal table
    assert cos[~torch.eye(8, dtype=torch.bool)].max() < 0.8  # each trained position has its own direction
    per_position = tiny_accuracy_by_position(model, task, length=16, num_examples=256)
    assert per_position[2:8].min() > 0.9  # positions seen in training
    assert per_position[8:].max() < 0.3  # positions never seen: near chance (1/16)
    with pytest.raises(IndexError, match=r"position 32 .*max_len=32"):
        model(torch.zeros(1, 33, dtype=torch.long))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: LearnedPositionalEmbedding(0, 4), r"max_len must be >= 1, got 0"),
        (lambda: LearnedPositionalEmbedding(8, -1), r"dim must be >= 1, got -1"),
        (lambda: LearnedPositionalEmbedding(8.0, 4), r"max_len must be an int"),
        (lambda: LearnedPositionalEmbedding(8, 4, std=0.0), r"std must be a finite number > 0, got 0.0"),
        (lambda: LearnedPositionalEmbedding(8, 4, std="a"), r"std must be a number > 0, got 'a'"),
        (lambda: LearnedPositionalEmbedding(8, 4, dropout=1.5), r"dropout must be in \[0, 1\), got 1.5"),
        (lambda: LearnedPositionalEmbedding(8, 4)(torch.zeros(2, 3, 5)), r"last dim = dim = 4.*\(2, 3, 5\)"),
        (lambda: LearnedPositionalEmbedding(8, 4)(torch.zeros(4)), r"got \(4,\)"),
        (lambda: LearnedPositionalEmbedding(8, 4)(torch.zeros(1, 2, 4), offset=-1), r"offset must be >= 0, got -1"),
    ],
)
def test_bad_input_names_argument_and_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()
