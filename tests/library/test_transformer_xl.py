"""Transformer-XL's learnable relative attention (attn_type=1) against the authors' forward, re-written here.

The reference follows ``RelLearnableMultiHeadAttn.forward`` and ``RelMultiHeadAttn._rel_shift`` of
kimiyoung/transformer-xl, ``pytorch/mem_transformer.py``: sequence-first tensors, one fused
``qkv_net``, the tables cut to the last ``klen`` rows or padded in front with copies of row 0,
``AC + rel_shift(B_ + D_)`` scaled, the decoder's causal mask, softmax over the keys, ``o_net``.
Dropout (0 here), the residual and the layer norm are outside the attention and left out.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from posenc import TransformerXLLearnableAttention

DIM, HEADS = 8, 2


def rel_shift(x: torch.Tensor) -> torch.Tensor:
    """The original ``_rel_shift`` (zero_triu=False): x is [qlen, klen, bsz, n_head]."""
    zero_pad = torch.zeros((x.size(0), 1, *x.size()[2:]), dtype=x.dtype)
    x_padded = torch.cat([zero_pad, x], dim=1).view(x.size(1) + 1, x.size(0), *x.size()[2:])
    return x_padded[1:].view_as(x)


def original_forward(layer, w, r_emb, r_w_bias, r_bias, mems=None):
    """The original's forward with the layer's weights; w [qlen, bsz, d_model], mems [mlen, bsz, d_model]."""
    n_head, d_head = layer.num_heads, layer.head_dim
    qkv_weight = torch.cat([layer.q.weight, layer.kv.weight], 0)  # qkv_net: [3 * n_head * d_head, d_model]
    qlen, bsz = w.size(0), w.size(1)
    cat = w if mems is None else torch.cat([mems, w], 0)
    w_head_q, w_head_k, w_head_v = torch.chunk(F.linear(cat, qkv_weight), 3, dim=-1)
    w_head_q = w_head_q[-qlen:]
    klen = w_head_k.size(0)
    w_head_q = w_head_q.view(qlen, bsz, n_head, d_head)
    w_head_k = w_head_k.view(klen, bsz, n_head, d_head)
    w_head_v = w_head_v.view(klen, bsz, n_head, d_head)
    if klen > r_emb.size(0):
        r_emb = torch.cat([r_emb[0:1].expand(klen - r_emb.size(0), -1, -1), r_emb], 0)
        r_bias = torch.cat([r_bias[0:1].expand(klen - r_bias.size(0), -1), r_bias], 0)
    else:
        r_emb, r_bias = r_emb[-klen:], r_bias[-klen:]
    rw_head_q = w_head_q + r_w_bias[None]
    AC = torch.einsum("ibnd,jbnd->ijbn", rw_head_q, w_head_k)  # noqa: N806 (the original's names)
    B_ = torch.einsum("ibnd,jnd->ijbn", w_head_q, r_emb)  # noqa: N806
    D_ = r_bias[None, :, None]  # noqa: N806
    attn_score = (AC + rel_shift(B_ + D_)) * (1 / d_head**0.5)
    mlen = klen - qlen
    attn_mask = torch.triu(torch.ones(qlen, klen), diagonal=1 + mlen).bool()  # the decoder's mask
    attn_score = attn_score.masked_fill(attn_mask[:, :, None, None], -float("inf"))
    attn_prob = F.softmax(attn_score, dim=1)  # [qlen, klen, bsz, n_head]
    attn_vec = torch.einsum("ijbn,jbnd->ibnd", attn_prob, w_head_v).reshape(qlen, bsz, n_head * d_head)
    return F.linear(attn_vec, layer.out.weight), attn_prob


def layer_with_weights(max_len: int, method: str = "shift", seed: int = 0) -> TransformerXLLearnableAttention:
    torch.manual_seed(seed)
    layer = TransformerXLLearnableAttention(DIM, HEADS, max_len=max_len, method=method).double()
    with torch.no_grad():  # non-zero biases, so that every term counts
        layer.r_bias.normal_()
        layer.r_w_bias.normal_()
        layer.r_emb.normal_()
    return layer


@pytest.mark.parametrize("method", ["shift", "materialize"])
@pytest.mark.parametrize(
    "seq_len, mem_len, max_len",
    [(5, 0, 12), (5, 4, 12), (5, 4, 9), (4, 6, 5), (6, 0, 3), (1, 7, 4), (3, 3, 20)],  # klen <, =, > max_len
)
def test_equals_the_original_forward(method, seq_len, mem_len, max_len):
    layer = layer_with_weights(max_len, method)
    g = torch.Generator().manual_seed(seq_len * 31 + mem_len)
    x = torch.randn(2, seq_len, DIM, generator=g, dtype=torch.float64)
    memory = torch.randn(2, mem_len, DIM, generator=g, dtype=torch.float64) if mem_len else None
    out, weights = layer(x, memory=memory)
    mems = None if memory is None else memory.transpose(0, 1)  # [b, m, d] -> [m, b, d]
    their_out, their_prob = original_forward(layer, x.transpose(0, 1), layer.r_emb, layer.r_w_bias, layer.r_bias, mems)
    assert torch.allclose(out, their_out.transpose(0, 1), atol=1e-12)
    assert torch.allclose(weights, their_prob.permute(2, 3, 0, 1), atol=1e-12)  # [q, k, b, h] -> [b, h, q, k]


def test_scores_are_the_four_terms_by_distance():
    layer = layer_with_weights(6)
    x = torch.randn(1, 4, DIM, dtype=torch.float64)
    memory = torch.randn(1, 5, DIM, dtype=torch.float64)
    scores = layer.scores(x, memory=memory)  # [1, h, 4, 9]
    context = torch.cat([memory, x], 1)
    q = layer.q(x).view(1, 4, HEADS, -1).transpose(1, 2)[0]  # [h, 4, dh]
    k = layer.kv(context)[..., :DIM].view(1, 9, HEADS, -1).transpose(1, 2)[0]  # [h, 9, dh]
    for i in range(4):
        for j in range(9):
            d = 5 + i - j
            if d < 0:
                assert torch.all(scores[0, :, i, j] == -math.inf)
                continue
            row = 6 - 1 - min(d, 5)
            want = (q[:, i] + layer.r_w_bias) * k[:, j] + q[:, i] * layer.r_emb[row]
            want = (want.sum(-1) + layer.r_bias[row]) / math.sqrt(layer.head_dim)
            assert torch.allclose(scores[0, :, i, j], want, atol=1e-12)


def test_shifting_every_position_leaves_the_scores_unchanged():
    layer = layer_with_weights(40)
    z = torch.randn(1, 6, DIM, dtype=torch.float64)
    prefix = torch.randn(1, 9, DIM, dtype=torch.float64)
    alone = layer.scores(z)  # z at positions 0 .. 5
    shifted = layer.scores(torch.cat([prefix, z], 1))[..., 9:, 9:]  # z at positions 9 .. 14
    assert torch.allclose(alone, shifted, atol=1e-12)
    as_memory = layer.scores(z[:, 2:], memory=z[:, :2])  # the same tokens split into memory and segment
    assert torch.allclose(as_memory, alone[..., 2:, :], atol=1e-12)


def test_gradients_reach_every_table():
    layer = TransformerXLLearnableAttention(DIM, HEADS, max_len=8)
    with torch.no_grad():
        layer.r_bias.normal_()
    x = torch.randn(2, 5, DIM)
    out, _ = layer(x, memory=torch.randn(2, 3, DIM))
    out.square().sum().backward()
    for p in (layer.r_emb, layer.r_bias, layer.r_w_bias):
        assert p.grad is not None and p.grad.abs().sum() > 0
    assert torch.all(layer.r_emb.grad.abs().sum((1, 2)) > 0)  # 8 keys: distances 0 .. 7, every row used
    short = TransformerXLLearnableAttention(DIM, HEADS, max_len=20)
    short(x)[0].sum().backward()
    assert torch.all(short.r_emb.grad[:15] == 0) and short.r_emb.grad[15:].abs().sum() > 0  # distances 0 .. 4


def test_memory_is_not_a_query_and_gets_no_weight_after_the_query():
    layer = layer_with_weights(10)
    x, memory = torch.randn(1, 3, DIM, dtype=torch.float64), torch.randn(1, 4, DIM, dtype=torch.float64)
    out, weights = layer(x, memory=memory)
    assert out.shape == (1, 3, DIM) and weights.shape == (1, HEADS, 3, 7)
    assert torch.all(weights[..., 0, 5:] == 0) and torch.all(weights[..., 1, 6:] == 0)
    assert torch.allclose(weights.sum(-1), torch.ones(1, HEADS, 3, dtype=torch.float64))
    assert "max_len=10" in repr(layer)


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"max_len must be >= 1, got 0"):
        TransformerXLLearnableAttention(8, 2, max_len=0)
    with pytest.raises(ValueError, match=r"dim must be divisible by num_heads, got dim=8, num_heads=3"):
        TransformerXLLearnableAttention(8, 3, max_len=4)
    with pytest.raises(ValueError, match=r"memory must have shape \[2, mem_len, 8\], got \(2, 5, 4\)"):
        TransformerXLLearnableAttention(8, 2, max_len=4)(torch.zeros(2, 3, 8), memory=torch.zeros(2, 5, 4))
