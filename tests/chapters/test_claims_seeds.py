"""Claims of the source documents added to the ledger after the review; each is named in posenc_book/data/claims.yaml.

The seeds' own lines are written out where a claim is about them (the comments on a line of code), so the test
computes exactly what the document's code computes.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from posenc import sinusoidal_table
from posenc_book.tutorial import tutorial_table


@pytest.mark.claim("000-14", "003-11", "004-27")
def test_sine_fills_the_even_channels_of_every_position():
    """Seed 000's comment says even *positions* use sin; seeds 003 and 004 say even indices or dimensions do."""
    n, d = 8, 16
    table = tutorial_table(n, d).double()  # [n, d], the seeds' `pe` before the batch dimension
    position = torch.arange(n, dtype=torch.float64)[:, None]  # [n, 1]
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # [d/2]
    for p in range(n):  # odd positions as well as even ones: sines in the even channels, cosines in the odd ones
        assert torch.allclose(table[p, 0::2], torch.sin(position[p] * omega), atol=1e-6), p
        assert torch.allclose(table[p, 1::2], torch.cos(position[p] * omega), atol=1e-6), p
    # read as rows, the comment would make every channel of an even position a sine: position 2 is not
    assert not torch.allclose(table[2], torch.sin(2 * omega).repeat_interleave(2), atol=1e-3)


@pytest.mark.claim("001-13")
def test_each_channel_has_one_frequency_at_every_position():
    """Seed 001: frequencies differ between dimensions; between positions only the phase differs."""
    n, d = 512, 32
    table = sinusoidal_table(n, d, dtype=torch.float64)  # [n, d]
    angle = torch.atan2(table[:, 0::2], table[:, 1::2])  # [n, d/2], the angle of each pair, wrapped to (-pi, pi]
    step = torch.remainder(angle.diff(dim=0), 2 * math.pi)  # [n - 1, d/2]
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # [d/2]
    assert torch.allclose(step, omega.expand_as(step), atol=1e-9)  # the same step at every position
    assert len(set(omega.tolist())) == d // 2  # and a different one in every pair


@pytest.mark.claim("002-32")
@pytest.mark.parametrize("seed", range(3))
def test_rnn_gradient_to_early_inputs_vanishes_with_distance(seed):
    """Seed 002 §1.2: vanishing gradients make long-range dependencies hard for a recurrence to learn."""
    torch.manual_seed(seed)
    rnn = nn.RNN(8, 16, batch_first=True).double()  # PyTorch's default initialisation
    x = torch.randn(1, 64, 8, dtype=torch.float64, requires_grad=True)  # [batch, seq, features]
    _, state = rnn(x)
    state.sum().backward()
    reach = x.grad[0].norm(dim=-1)  # [seq], how much each input can move the final state
    assert reach[-32] < 1e-6 * reach[-1]
    assert reach[0] < 1e-12 * reach[-1]


@pytest.mark.claim("003-09", "003-10", "003-13", "003-14")
def test_seed_003_shape_comments():
    """Seed 003 comments `position` as a vector of shape (seq_len) and `div_term` as one of shape (d_model) above
    the lines, and as (seq_len, 1) and (d_model / 2) at their ends (lines 37-40)."""
    seq_len, d_model = 10, 512
    # Create a vector of shape (seq_len)
    position = torch.arange(0, seq_len, dtype=torch.float).unsqueeze(1)  # (seq_len, 1)
    # Create a vector of shape (d_model)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))  # (d_model / 2)
    assert position.shape == (seq_len, 1)  # a column, as the line's own end-of-line comment says
    assert div_term.shape == (d_model // 2,)  # half of d_model: one frequency per pair of channels


# The seeds' modules, written out as the documents give them (seeds 000 and 002 lack `from torch import nn`,
# seed 003 shows no imports; this file's imports stand in).


class _Seed002PositionalEncoding(nn.Module):
    """Seed 002, §5.1, lines 118-133: the table kept sequence-first, [max_len, 1, d_model]."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super(_Seed002PositionalEncoding, self).__init__()  # noqa: UP008 (the seed's own line)
        self.dropout = nn.Dropout(p=dropout)

        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[: x.size(0), :]
        return self.dropout(x)


class _Seed003PositionalEncoding(nn.Module):
    """Seed 003, lines 28-52: the table kept batch-first, [1, seq_len, d_model], then dropout."""

    def __init__(self, d_model: int, seq_len: int, dropout: float) -> None:
        super().__init__()
        self.d_model = d_model
        self.seq_len = seq_len
        self.dropout = nn.Dropout(dropout)
        # Create a matrix of shape (seq_len, d_model)
        pe = torch.zeros(seq_len, d_model)
        self.table_as_created = tuple(pe.shape)  # (not the seed's: what line 36 made)
        # Create a vector of shape (seq_len)
        position = torch.arange(0, seq_len, dtype=torch.float).unsqueeze(1)  # (seq_len, 1)
        # Create a vector of shape (d_model)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))  # (d_model / 2)
        # Apply sine to even indices
        pe[:, 0::2] = torch.sin(position * div_term)  # sin(position * (10000 ** (2i / d_model))
        # Apply cosine to odd indices
        pe[:, 1::2] = torch.cos(position * div_term)  # cos(position * (10000 ** (2i / d_model))
        # Add a batch dimension to the positional encoding
        pe = pe.unsqueeze(0)  # (1, seq_len, d_model)
        # Register the positional encoding as a buffer
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + (self.pe[:, : x.shape[1], :]).requires_grad_(False)  # (batch, seq_len, d_model)
        return self.dropout(x)


class _Seed004PositionalEncoding(nn.Module):
    """Seed 004, §3, lines 57-92, complete with its imports: batch-first, no dropout."""

    def __init__(self, d_model, max_len=5000):
        """
        Args:
            d_model (int): 词嵌入的维度.
            max_len (int): 句子的最大长度.
        """
        super(_Seed004PositionalEncoding, self).__init__()  # noqa: UP008 (the seed's own line)

        # 创建一个足够大的位置编码矩阵
        pe = torch.zeros(max_len, d_model)

        # 创建一个代表位置的张量 [max_len, 1]
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)

        # 计算分母部分
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))

        # 计算偶数维度的 sin 值
        pe[:, 0::2] = torch.sin(position * div_term)

        # 计算奇数维度的 cos 值
        pe[:, 1::2] = torch.cos(position * div_term)

        # 增加一个 batch 维度，并注册为 buffer (不参与模型训练)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x):
        """
        Args:
            x: 输入张量, shape [batch_size, seq_len, d_model]
        """
        # 将 x 与其位置编码相加
        # x.size(1) 是当前输入的序列长度
        x = x + self.pe[:, : x.size(1)]
        return x


# Seed 000 ------------------------------------------------------------------------------------------------


@pytest.mark.claim("000-18")
def test_seed_000_unsqueeze_adds_the_batch_dimension():
    """Seed 000, line 58: `pe = pe.unsqueeze(0)  # 增加 batch 維度`."""
    max_len, embed_size, batch_size, seq_len = 100, 16, 32, 10
    pe = torch.zeros(max_len, embed_size)
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, embed_size, 2).float() * -(math.log(10000.0) / embed_size))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    table = pe
    pe = pe.unsqueeze(0)  # 增加 batch 維度
    assert pe.shape == (1, max_len, embed_size)  # a new leading dimension of size 1, the batch's
    x = torch.rand(batch_size, seq_len, embed_size)  # the example's batch-first input
    added = x + pe[:, :seq_len] - x  # broadcast over the batch: every sequence gets rows 0 .. seq_len - 1
    assert added.shape == (batch_size, seq_len, embed_size)
    assert torch.allclose(added, table[:seq_len].expand_as(added), atol=1e-6)


# Seed 002 ------------------------------------------------------------------------------------------------


@pytest.mark.claim("002-38")
def test_seed_002_pe_is_a_table_one_row_per_position():
    """Seed 002, §5.2, line 141: "`pe`: the position encoding vector"."""
    module = _Seed002PositionalEncoding(8)  # max_len 5000, as in the document
    assert module.pe.shape == (5000, 1, 8)  # not one vector: a row for every position, sequence first
    expected = sinusoidal_table(5000, 8)  # [5000, 8], float32
    assert torch.allclose(module.pe[:, 0], expected, atol=1e-3)  # row p is PE(p) (angles formed in float32)
    assert module.pe[:, 0].unique(dim=0).shape[0] == 5000  # 5000 different vectors


@pytest.mark.claim("002-39")
def test_seed_002_position_holds_the_integers_0_to_max_len_minus_1():
    """Seed 002, §5.2, line 142: "`position`: the position vector, the integers from 0 to `max_len-1`"."""
    max_len = 5000
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)  # line 124
    assert position.shape == (max_len, 1) and position.dtype == torch.float32  # a column of floats
    assert torch.equal(position[:, 0], torch.arange(max_len).float())  # 0 .. 4999, each exact
    assert torch.equal(position, position.round()) and position.max() == max_len - 1


@pytest.mark.claim("002-42")
def test_seed_002_d_model_is_the_width_of_the_encoding():
    """Seed 002, §5.2, line 138: "`d_model`: the dimension of the position encoding vector"."""
    module = _Seed002PositionalEncoding(d_model=16, dropout=0.0, max_len=50)
    assert module.pe.shape[-1] == 16
    assert module(torch.zeros(10, 2, 16)).shape == (10, 2, 16)  # added to inputs of that width
    with pytest.raises(RuntimeError):
        module(torch.zeros(10, 2, 12))  # and to no other


@pytest.mark.claim("002-43")
def test_seed_002_dropout_is_the_probability_of_dropping_an_entry():
    """Seed 002, §5.2, line 139: "`dropout`: the probability of the dropout layer"."""
    module = _Seed002PositionalEncoding(d_model=16, dropout=0.25, max_len=50)
    assert module.dropout.p == 0.25
    torch.manual_seed(0)
    x = torch.ones(50, 400, 16)  # [seq_len, batch, d_model], 320,000 entries
    kept = module(x) != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.005  # a quarter of the entries dropped
    module.eval()
    assert torch.equal(module(x), x + module.pe[:50])  # none at evaluation


@pytest.mark.claim("002-44")
def test_seed_002_max_len_is_the_longest_sequence():
    """Seed 002, §5.2, line 140: "`max_len`: the maximum sequence length"."""
    module = _Seed002PositionalEncoding(d_model=16, dropout=0.0, max_len=50)
    assert module(torch.zeros(50, 2, 16)).shape == (50, 2, 16)  # [seq_len, batch, d_model]
    with pytest.raises(RuntimeError):
        module(torch.zeros(51, 2, 16))  # one position more has no row


# Seed 003 ------------------------------------------------------------------------------------------------


@pytest.mark.claim("003-12")
def test_seed_003_the_table_is_created_seq_len_by_d_model():
    """Seed 003, line 35: `# Create a matrix of shape (seq_len, d_model)`."""
    module = _Seed003PositionalEncoding(d_model=16, seq_len=10, dropout=0.0)
    assert module.table_as_created == (10, 16)
    assert torch.allclose(module.pe[0], tutorial_table(10, 16), atol=0)  # filled in place, row p = PE(p)


@pytest.mark.claim("003-15")
def test_seed_003_unsqueeze_adds_a_batch_dimension():
    """Seed 003, line 45: `# Add a batch dimension to the positional encoding`."""
    module = _Seed003PositionalEncoding(d_model=16, seq_len=10, dropout=0.0)
    assert module.pe.shape == (1, 10, 16)
    x = torch.randn(4, 7, 16)  # [batch, seq_len, d_model]
    added = module(x) - x
    assert added.shape == (4, 7, 16)
    assert torch.allclose(added, module.pe[0, :7].expand(4, 7, 16), atol=1e-6)  # the same rows for every sequence


@pytest.mark.claim("003-16")
def test_seed_003_the_table_is_registered_as_a_buffer():
    """Seed 003, line 47: `# Register the positional encoding as a buffer`."""
    module = _Seed003PositionalEncoding(d_model=16, seq_len=10, dropout=0.0)
    assert "pe" in dict(module.named_buffers()) and not list(module.parameters())
    assert "pe" in module.state_dict()  # persistent, the default: saved with the module
    assert module.double().pe.dtype == torch.float64  # and moved with it


# Seed 004 ------------------------------------------------------------------------------------------------


@pytest.mark.claim("004-28")
def test_seed_004_div_term_is_the_reciprocal_of_the_denominator():
    """Seed 004, line 72: `# 计算分母部分` (compute the denominator) above the div_term line."""
    d_model, max_len = 16, 100
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    # 计算分母部分
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    denominator = 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # 10000^(2i/d)
    assert torch.allclose(div_term.double(), 1 / denominator, rtol=1e-6)  # its reciprocal
    assert (div_term[1:] < 1).all() and (denominator[1:] > 1).all()  # not the denominator itself
    # multiplying by it is dividing by the denominator
    assert torch.allclose((position * div_term).double(), position.double() / denominator, rtol=1e-5, atol=1e-5)


@pytest.mark.claim("004-30")
def test_seed_004_position_is_a_max_len_by_1_column_of_positions():
    """Seed 004, line 69: `# 创建一个代表位置的张量 [max_len, 1]`."""
    max_len = 5000
    # 创建一个代表位置的张量 [max_len, 1]
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    assert position.shape == (max_len, 1)
    assert torch.equal(position[:, 0], torch.arange(max_len).float())  # position p in row p


@pytest.mark.claim("004-32")
def test_seed_004_d_model_is_the_embedding_width():
    """Seed 004, line 61: `d_model (int): 词嵌入的维度.`"""
    module = _Seed004PositionalEncoding(d_model=16, max_len=50)
    assert module.pe.shape[-1] == 16
    assert module(torch.zeros(2, 10, 16)).shape == (2, 10, 16)
    with pytest.raises(RuntimeError):
        module(torch.zeros(2, 10, 12))  # embeddings of another width cannot take it


@pytest.mark.claim("004-33")
def test_seed_004_max_len_is_the_longest_input():
    """Seed 004, line 62: `max_len (int): 句子的最大长度.`"""
    module = _Seed004PositionalEncoding(d_model=16, max_len=50)
    assert module(torch.zeros(2, 50, 16)).shape == (2, 50, 16)
    with pytest.raises(RuntimeError):
        module(torch.zeros(2, 51, 16))


@pytest.mark.claim("004-34")
def test_seed_004_reads_the_length_from_dim_1_of_batch_first_input():
    """Seed 004, line 90: `# x.size(1) 是当前输入的序列长度`, for x of shape [batch_size, seq_len, d_model]."""
    module = _Seed004PositionalEncoding(d_model=16, max_len=50)
    x = torch.randn(3, 7, 16)  # [batch_size, seq_len, d_model], as the docstring says
    added = module(x) - x
    assert x.size(1) == 7 and added.shape == (3, 7, 16)
    expected = tutorial_table(7, 16)  # PE(p) for p = 0 .. 6
    for b in range(3):  # every sequence of the batch gets PE(p) at its position p
        assert torch.allclose(added[b], expected, atol=1e-6)
