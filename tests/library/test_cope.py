"""CoPE: positions count the open gates; all gates open is a relative encoding; interpolation; module; bad input."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import CoPE, cope_bias, cope_logits, cope_positions, relative_scores

F64 = torch.float64


@given(st.integers(1, 24))
def test_all_gates_open_count_the_tokens_from_key_to_query(s):
    """With every gate 1, p_ij = i - j + 1: the key, the query and everything between."""
    p = cope_positions(torch.ones(s, s, dtype=F64))
    i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
    assert torch.equal(p, torch.where(j <= i, (i - j + 1).to(F64), torch.zeros((), dtype=F64)))


@given(st.integers(1, 12), st.integers(0, 2**31 - 1))
def test_all_gates_open_is_a_relative_encoding_with_one_embedding_per_distance(s, seed):
    """logit term = q_i . e[i - j + 1], as Shaw et al.'s relative scores with rows e[s], ..., e[1]."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(2, s, 8, generator=gen, dtype=F64)
    table = torch.randn(s + 1, 8, generator=gen, dtype=F64)
    bias = cope_bias(q, cope_positions(torch.ones(s, s, dtype=F64)), table)
    every = q @ table.T  # [2, s, s + 1]: q_i . e[n] for every n
    direct = torch.zeros(2, s, s, dtype=F64)
    for a in range(s):
        for b in range(a + 1):
            direct[:, a, b] = every[:, a, a - b + 1]
            assert torch.allclose(direct[:, a, b], q[:, a] @ table[a - b + 1], rtol=1e-13, atol=1e-13)
    assert torch.equal(bias, direct)
    # relative_scores reads row (j - i) + s - 1: rows 0 .. s - 1 are distances s - 1 .. 0, so e[s] .. e[1]
    rel = torch.cat([table.flip(0)[:s], torch.zeros(s - 1, 8, dtype=F64)])  # [2s - 1, d]
    causal = torch.ones(s, s, dtype=torch.bool).tril()
    assert torch.allclose(relative_scores(q, rel)[:, causal], bias[:, causal], rtol=1e-12, atol=1e-12)


def test_gates_on_separators_count_sentences():
    tokens = "a b . c d e . f ."
    sep = torch.tensor([t == "." for t in tokens.split()], dtype=F64)
    s = sep.numel()
    p = cope_positions(sep.expand(s, s))  # every query opens its gate on the separators only
    # from the last token, the keys of the last sentence are at 1, of the one before at 2, ...
    assert p[-1].tolist() == [3, 3, 3, 2, 2, 2, 2, 1, 1]


@given(st.floats(0.0, 6.0), st.integers(0, 2**31 - 1))
def test_fractional_position_interpolates_linearly(p, seed):
    gen = torch.Generator().manual_seed(seed)
    q, table = torch.randn(1, 4, generator=gen, dtype=F64), torch.randn(8, 4, generator=gen, dtype=F64)
    positions = torch.tensor([[p]], dtype=F64)
    low, w = int(p // 1), p - p // 1
    expected = (1 - w) * (q[0] @ table[low]) + w * (q[0] @ table[min(low + 1, 7)])
    assert cope_bias(q, positions, table).item() == pytest.approx(expected.item(), rel=1e-12, abs=1e-12)


def test_positions_are_clamped_and_logits_masked():
    p = cope_positions(torch.ones(6, 6), max_position=3)
    assert p.max() == 3 and p[5, 0] == 3 and p[5, 4] == 2
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 5, 4, generator=gen, dtype=F64)
    table = torch.randn(4, 4, generator=gen, dtype=F64)
    logits = cope_logits(q, k, table)
    assert torch.isneginf(logits[:, ~torch.ones(5, 5, dtype=torch.bool).tril()]).all()
    content = q @ k.transpose(-1, -2) / 2.0
    positions = cope_positions(torch.sigmoid(content), max_position=3)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    assert torch.equal(logits[:, causal], (content + cope_bias(q, positions, table))[:, causal])


def test_module_starts_at_zero_and_learns_its_table():
    module = CoPE(4, 6)
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 5, 4, generator=gen)
    logits = module(q, k)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    assert torch.allclose(logits[causal], (q @ k.T / 2.0)[causal])  # a zero table adds nothing
    logits[causal].sum().backward()
    assert module.pos_emb.grad is not None and module.pos_emb.grad.abs().sum() > 0


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: cope_positions(torch.ones(3, 4)), ValueError, r"gates must have shape \[\.\.\., seq_len, seq_len\]"),
        (lambda: cope_positions(torch.ones(3, 3, dtype=torch.long)), TypeError, r"gates must be a floating-point"),
        (
            lambda: cope_positions(torch.ones(3, 3), max_position=-1),
            ValueError,
            r"max_position must be a finite number >= 0 or None, got -1",
        ),
        (
            lambda: cope_bias(torch.ones(3, 4), torch.full((3, 3), 5.0), torch.ones(4, 4)),
            ValueError,
            r"positions must lie in \[0, 3\] .*got values in \[5\.0, 5\.0\]; pass max_position=3",
        ),
        (
            lambda: cope_bias(torch.ones(3, 4), torch.ones(3, 3), torch.ones(4, 2)),
            ValueError,
            r"pos_emb must have shape",
        ),
        (lambda: cope_logits(torch.ones(3, 4), torch.ones(2, 4), torch.ones(4, 4)), ValueError, r"same shape"),
        (lambda: CoPE(4, 0), ValueError, r"num_positions must be >= 1, got 0"),
        (lambda: cope_positions(torch.ones(3, 3), max_position=float("nan")), ValueError, r"max_position must be a"),
        (
            lambda: cope_bias(torch.ones(2, 4), torch.full((2, 2), float("nan")), torch.ones(4, 4)),
            ValueError,
            r"positions must be finite",
        ),
        (
            lambda: cope_logits(torch.ones(2, 4), torch.ones(2, 4, dtype=F64), torch.ones(4, 4)),
            TypeError,
            r"q and k must have the same dtype, got torch\.float32 and torch\.float64",
        ),
        (
            lambda: CoPE(4, 3)(torch.ones(2, 5), torch.ones(2, 5)),
            ValueError,
            r"q must have shape \[\.\.\., seq_len, 4\]",
        ),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
