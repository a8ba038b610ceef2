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


@pytest.mark.claim("003-09", "003-10")
def test_seed_003_shape_comments():
    """Seed 003 comments `position` as a vector of shape (seq_len) and `div_term` as one of shape (d_model)."""
    seq_len, d_model = 10, 512
    # Create a vector of shape (seq_len)
    position = torch.arange(0, seq_len, dtype=torch.float).unsqueeze(1)  # (seq_len, 1)
    # Create a vector of shape (d_model)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))  # (d_model / 2)
    assert position.shape == (seq_len, 1)  # a column, as the line's own end-of-line comment says
    assert div_term.shape == (d_model // 2,)  # half of d_model: one frequency per pair of channels
