"""The answers of the exercises of chapters 1-7, checked again outside the notebooks.

Each test recomputes the key answer of one exercise, where it can by another route than the
solution cell (plain math instead of the package, or the package instead of the formula).
"""

import itertools
import math

import torch

from posenc import (
    LearnedPositionalEmbedding,
    MultiHeadSelfAttention,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    axial_cos_sin,
    relative_positions,
    rope_cos_sin,
    rope_inv_freq,
    scaled_dot_product_attention,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_table,
    t5_relative_position_bucket,
    xpos_zeta,
)
from posenc.pairing import sinusoidal_dot_product, sinusoidal_offset_matrix

f64 = torch.float64


# ---------------------------------------------------------------------------
# Chapter 1: why attention needs positions
# ---------------------------------------------------------------------------


def seeded_layer(dim: int, heads: int, seed: int) -> MultiHeadSelfAttention:
    gen = torch.Generator().manual_seed(seed)
    layer = MultiHeadSelfAttention(dim, heads).double()
    with torch.no_grad():
        for weight in layer.parameters():
            weight.copy_(torch.randn(weight.shape, generator=gen, dtype=f64) / dim**0.5)
    return layer


def test_ch1_every_order_pools_alike_without_positions():
    layer = seeded_layer(16, 2, seed=11)
    gen = torch.Generator().manual_seed(12)
    words = {w: torch.randn(16, generator=gen, dtype=f64) for w in "ABC"}
    pe = SinusoidalPositionalEncoding(16).double()
    plain, with_pe = [], []
    for order in itertools.permutations("ABC"):
        x = torch.stack([words[w] for w in order])[None]
        plain.append(layer(x)[0].mean(1)[0])
        with_pe.append(layer(pe(x))[0].mean(1)[0])
    assert len(plain) == 6
    assert all(torch.allclose(v, plain[0], atol=1e-12) for v in plain)
    assert all((a - b).abs().max() > 1e-3 for a, b in itertools.combinations(with_pe, 2))


def test_ch1_two_copies_of_a_word_get_one_output():
    layer = seeded_layer(16, 2, seed=13)
    gen = torch.Generator().manual_seed(14)
    sentence = ["the", "dog", "bites", "the", "man", "."]
    vectors = {w: torch.randn(16, generator=gen, dtype=f64) for w in sorted(set(sentence))}
    x = torch.stack([vectors[w] for w in sentence])[None]
    out, _ = layer(x)
    out_pe, _ = layer(SinusoidalPositionalEncoding(16).double()(x))
    assert torch.allclose(out[0, 0], out[0, 3], atol=1e-12)
    assert (out_pe[0, 0] - out_pe[0, 3]).abs().max() > 1e-2


def test_ch1_a_causal_mask_counts():
    n = 8
    values = torch.zeros(n, 1, dtype=f64)
    values[0] = 1.0
    # uniform weights over the visible keys, by hand
    visible = torch.ones(n, n, dtype=torch.bool).tril()
    by_hand = (visible.double() / visible.sum(-1, keepdim=True)) @ values
    zeros = torch.zeros(n, 1, dtype=f64)
    causal, _ = scaled_dot_product_attention(zeros, zeros, values, causal=True)
    full, _ = scaled_dot_product_attention(zeros, zeros, values)
    assert torch.allclose(causal, by_hand, atol=1e-15)
    assert [round(1 / v - 1) for v in causal[:, 0].tolist()] == list(range(n))
    assert full.unique().tolist() == [1 / n]


# ---------------------------------------------------------------------------
# Chapter 2: the sinusoidal formula
# ---------------------------------------------------------------------------


def test_ch2_encoding_of_position_2_for_d4():
    pe = sinusoidal_encoding(torch.tensor(2), 4, dtype=f64)
    assert [round(v, 4) for v in pe.tolist()] == [0.9093, -0.4161, 0.02, 0.9998]
    by_hand = [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)]
    assert torch.allclose(pe, torch.tensor(by_hand, dtype=f64), atol=1e-15)


def test_ch2_pairs_that_turn_within_512_positions():
    d = 512
    by_loop = sum(2 * math.pi * 10000 ** (2 * i / d) <= 512 for i in range(d // 2))
    by_package = int((2 * math.pi / sinusoidal_frequencies(d) <= 512).sum())
    assert by_loop == by_package == 123


def test_ch2_nearest_position_to_zero():
    nearest = {}
    for d in (2, 4, 8, 16):
        table = sinusoidal_table(1001, d, dtype=f64)
        dist = (table[1:] - table[0]).norm(dim=-1)  # offsets 1 .. 1000
        nearest[d] = (int(dist.argmin()) + 1, dist.min().item())
    assert [k for k, _ in nearest.values()] == [710, 622, 63, 1]
    assert abs(nearest[2][1] - 2 * abs(math.sin(355))) < 1e-12  # |PE(k) - PE(0)| = 2 |sin(k/2)|
    assert nearest[2][1] < 1e-4 and nearest[16][1] > 1


# ---------------------------------------------------------------------------
# Chapter 3: why sines and cosines come in pairs
# ---------------------------------------------------------------------------


def test_ch3_offset_matrix_of_one_pair():
    def m(k):
        c, s = math.cos(k), math.sin(k)
        return torch.tensor([[c, s], [-s, c]], dtype=f64)

    assert torch.allclose(sinusoidal_offset_matrix(3, 2) @ sinusoidal_offset_matrix(4, 2), m(7), atol=1e-15)
    assert torch.allclose(sinusoidal_offset_matrix(-3, 2), m(3).T, atol=1e-15)
    pe5 = sinusoidal_encoding(5.0, 2, dtype=f64)
    assert torch.allclose(m(3) @ pe5, sinusoidal_encoding(8.0, 2, dtype=f64), atol=1e-15)


def test_ch3_a_reflection_sees_the_sum_of_positions():
    d = 16
    w = torch.diag(torch.tensor([1.0, -1.0] * (d // 2), dtype=f64))
    for p, q in [(0, 0), (3, 9), (40, 2), (17, 17)]:
        score = sinusoidal_encoding(float(p), d, dtype=f64) @ w @ sinusoidal_encoding(float(q), d, dtype=f64)
        by_formula = -sum(math.cos((p + q) * om) for om in sinusoidal_frequencies(d).tolist())
        assert abs(score - by_formula) < 1e-12
    table = sinusoidal_table(64, d, dtype=f64)
    scores = table @ w @ table.T
    flipped = scores.flip(1)  # anti-diagonals p + q = const become diagonals
    assert torch.allclose(flipped[1:, 1:], flipped[:-1, :-1], atol=1e-12)
    assert (scores[1:, 1:] - scores[:-1, :-1]).abs().max() > 1.0
    assert torch.allclose(scores[5, 7], -sinusoidal_dot_product(12, d), atol=1e-12)
    m3 = sinusoidal_offset_matrix(3, d)
    assert torch.allclose(w @ m3, sinusoidal_offset_matrix(-3, d) @ w, atol=1e-15)


def test_ch3_signed_offset_from_the_slowest_pair():
    d = 64
    slowest = sinusoidal_frequencies(d)[-1].item()
    gen = torch.Generator().manual_seed(21)
    p, q = torch.randint(0, 10_000, (2, 500), generator=gen)
    pe_p, pe_q = sinusoidal_encoding(p, d, dtype=f64), sinusoidal_encoding(q, d, dtype=f64)
    # the angle of the slowest pair as a complex number (cos + i sin), then the quotient's argument
    z_p = torch.complex(pe_p[:, -1], pe_p[:, -2])
    z_q = torch.complex(pe_q[:, -1], pe_q[:, -2])
    estimate = torch.angle(z_q * z_p.conj()) / slowest
    assert torch.equal(estimate.round().long(), q - p)
    assert round(math.pi / slowest) == 23559
    pe = sinusoidal_encoding(torch.tensor([137.0, 142.0, 132.0]), d, dtype=f64)
    assert abs(pe[0] @ pe[1] - pe[0] @ pe[2]) < 1e-12  # the dot product cannot tell +5 from -5


# ---------------------------------------------------------------------------
# Chapter 4: learned absolute position embeddings
# ---------------------------------------------------------------------------


def test_ch4_decoding_one_token_at_a_time():
    table = LearnedPositionalEmbedding(8, 4)
    x = torch.zeros(1, 5, 4)
    with torch.no_grad():
        steps = torch.cat([table(x[:, t : t + 1], offset=t) for t in range(5)], dim=1)
        assert torch.equal(steps, table(x))
        assert torch.equal(table(torch.zeros(1, 1, 4), offset=7)[0, 0], table.weight[7])
    try:
        table(torch.zeros(1, 2, 4), offset=7)
    except IndexError as err:
        message = str(err)
    else:
        message = ""
    assert "position 8" in message


def test_ch4_truncated_normal_factor():
    # variance of a standard normal restricted to [-2, 2], by numerical integration
    x = torch.linspace(-2, 2, 400_001, dtype=f64)
    density = torch.exp(-(x**2) / 2)
    variance = torch.trapezoid(x**2 * density, x) / torch.trapezoid(density, x)
    factor = variance.sqrt().item()
    closed_form = math.sqrt(1 - 4 * math.exp(-2) / math.sqrt(2 * math.pi) / math.erf(math.sqrt(2)))
    assert abs(factor - closed_form) < 1e-9
    assert round(factor, 4) == 0.8796


def test_ch4_weight_decay_shrinks_unseen_rows():
    def train(optimizer_class, **options):
        gen = torch.Generator().manual_seed(0)
        table = LearnedPositionalEmbedding(8, 4).double()
        table.reset_parameters(gen)
        target = torch.randn(1, 3, 4, generator=gen, dtype=f64)
        initial = table.weight.detach().clone()
        optimizer = optimizer_class(table.parameters(), lr=0.1, **options)
        for _ in range(10):
            loss = (table(torch.zeros(1, 3, 4, dtype=f64)) - target).pow(2).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return initial, table.weight.detach()

    initial, adam = train(torch.optim.Adam)
    _, adamw = train(torch.optim.AdamW, weight_decay=0.5)
    assert torch.equal(adam[3:], initial[3:]) and not torch.equal(adam[:3], initial[:3])
    assert torch.allclose(adamw[3:], initial[3:] * 0.95**10, rtol=1e-12, atol=0)
    assert round(0.95**10, 3) == 0.599


# ---------------------------------------------------------------------------
# Chapter 5: relative position encodings
# ---------------------------------------------------------------------------


def test_ch5_t5_buckets_by_hand():
    # encoder: 16 buckets per side, 8 exact; decoder: 32 buckets, 16 exact
    assert 8 + math.floor(math.log(50 / 8) / math.log(128 / 8) * 8) == 13
    assert 16 + math.floor(math.log(50 / 16) / math.log(128 / 16) * 16) == 24
    encoder = t5_relative_position_bucket(torch.tensor([-5, -50, 50]))
    decoder = t5_relative_position_bucket(torch.tensor([-50]), bidirectional=False)
    assert encoder.tolist() == [5, 13, 29] and decoder.tolist() == [24]


def test_ch5_alibi_slopes_for_six_heads():
    slopes = alibi_slopes(6, dtype=f64).tolist()
    assert [round(-math.log2(m)) for m in slopes] == [2, 4, 6, 8, 1, 3]
    assert slopes == [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8]
    horizons = [math.ceil(math.log(100) / m) for m in slopes]  # ln(100) / m is never an integer here
    assert horizons == [19, 74, 295, 1179, 10, 37]
    bias = alibi_bias(6, 1, 1200, dtype=f64)[:, 0]  # the last query against keys 0 .. 1199
    for h, dist in enumerate(horizons):
        assert math.exp(bias[h, 1199 - dist]) < 0.01 <= math.exp(bias[h, 1199 - dist + 1])


def test_ch5_far_keys_share_a_t5_bucket():
    n = 400
    assert t5_relative_position_bucket(relative_positions(n, n)).unique().numel() == 31
    assert t5_relative_position_bucket(torch.tensor([-130, -250, -10_000])).unique().tolist() == [15]
    t5 = T5RelativeBias(num_heads=4)
    bias = t5(n, n)
    assert torch.equal(bias[:, 300, 170], bias[:, 300, 50])
    alibi = alibi_bias(1, n, n)[0]
    assert alibi[alibi.isfinite()].unique().numel() == n
    assert alibi[300, 170] - alibi[300, 50] == 120 / 256


# ---------------------------------------------------------------------------
# Chapters 6 and 7: rotary position embedding, long context
# ---------------------------------------------------------------------------


def test_ch6_score_for_one_pair():
    q, k = torch.tensor([3.0, 4.0], dtype=f64), torch.tensor([1.0, -2.0], dtype=f64)
    for m, n in [(7, 2), (0, 0), (2, 7), (19, 3)]:
        cos, sin = rope_cos_sin(torch.tensor([m, n]), 2, dtype=f64)
        score = apply_rope(q, cos[0], sin[0]) @ apply_rope(k, cos[1], sin[1])
        # complex form, with the book's offset n - m (key minus query): Re(conj(z_q) z_k e^{i (n - m)})
        by_complex = (complex(3, 4).conjugate() * complex(1, -2) * complex(math.cos(n - m), math.sin(n - m))).real
        assert abs(score.item() - by_complex) < 1e-12
    angle = math.atan2(-2, 1) - math.atan2(4, 3) - 5  # phi_k - phi_q + (n - m), m = 7, n = 2
    assert round(5 * math.sqrt(5) * math.cos(angle), 4) == 8.1709


def test_ch6_rotate_half_by_hand():
    def rotate_half(x):
        first, second = x.chunk(2, dim=-1)
        return torch.cat((-second, first), dim=-1)

    def rotate_interleaved(x):
        return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)

    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(31), dtype=f64)
    positions = torch.tensor([0, 1, 7, 100, 5000])
    for layout, rotate in [("half", rotate_half), ("interleaved", rotate_interleaved)]:
        cos, sin = rope_cos_sin(positions, 8, layout=layout, dtype=f64)
        assert torch.allclose(x * cos + rotate(x) * sin, apply_rope(x, cos, sin, layout=layout), atol=1e-12)
        assert torch.equal(rotate(rotate(x)), -x)
    cos, sin = rope_cos_sin(positions, 8, layout="interleaved", dtype=f64)
    mixed = x * cos + rotate_half(x) * sin
    assert (mixed.norm(dim=-1) / x.norm(dim=-1) - 1).abs().max() > 0.01


def test_ch7_kv_cache_and_dynamic_scaling():
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 24, 16, generator=gen, dtype=f64)
    dynamic = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16}

    def rotate(x, positions, scaling=None):
        cos, sin = rope_cos_sin(torch.as_tensor(positions), 16, scaling=scaling, dtype=f64)
        return apply_rope(x, cos, sin)

    score = rotate(q[:1], [9]) @ rotate(k[:1], [4]).T
    for t in (1, 1000, 100_000):
        assert torch.allclose(rotate(q[:1], [9 + t]) @ rotate(k[:1], [4 + t]).T, score, atol=1e-9)
    cache = torch.cat([rotate(k[n : n + 1], [n], dynamic) for n in range(24)])
    last_q = rotate(q[23:24], [23], dynamic)[0]
    gap = (cache @ last_q - rotate(k, range(24), dynamic) @ last_q).abs()
    assert gap[[0, 23]].max() < 1e-12 and gap[1:23].min() > 1e-3
    assert int((gap > 1e-6).sum()) == 22
    plain = torch.cat([rotate(k[n : n + 1], [n]) for n in range(24)])
    assert torch.allclose(plain, rotate(k, range(24)), atol=1e-12)


def test_ch6_the_fast_pair_comes_round_after_333_positions():
    wrapped = [abs((r + math.pi) % (2 * math.pi) - math.pi) for r in range(1, 400)]  # theta_0 = 1
    assert 1 + next(i for i, w in enumerate(wrapped) if w < 0.01) == 333
    assert rope_inv_freq(8, dtype=f64)[0][0] == 1.0


def test_ch7_ntk_keeps_the_fastest_pair_and_slows_the_slowest_by_s():
    for d, s in ((128, 4.0), (64, 8.0), (16, 2.0)):
        theta = rope_inv_freq(d, dtype=f64)[0]
        ntk = rope_inv_freq(d, base=10000.0 * s ** (d / (d - 2)), dtype=f64)[0]
        i = torch.arange(d // 2, dtype=f64)
        assert torch.allclose(theta / ntk, s ** (2 * i / (d - 2)))
        assert (theta / ntk)[0] == 1.0 and math.isclose((theta / ntk)[-1].item(), s)


def test_ch7_yarn_leaves_21_pairs_and_divides_18_at_factor_16():
    turns = [4096 * 10000 ** (-2 * i / 128) / (2 * math.pi) for i in range(64)]
    assert sum(t > 32 for t in turns) == 21 and sum(t < 1 for t in turns) == 18
    yarn = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096}
    ratio = rope_inv_freq(128, dtype=f64)[0] / rope_inv_freq(128, scaling=yarn, dtype=f64)[0]
    assert int(torch.isclose(ratio, torch.ones(64, dtype=f64)).sum()) == 21
    assert int(torch.isclose(ratio, torch.full((64,), 16.0, dtype=f64)).sum()) == 18


def test_ch8_the_pass_through_channels_add_a_constant():
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 32, generator=gen, dtype=f64)
    for m, n in ((0, 0), (9, 4), (4, 9), (1000, 7)):
        cos, sin = rope_cos_sin(torch.tensor([m, n]), 8, dtype=f64)
        whole = apply_rope(q, cos[0], sin[0]) @ apply_rope(k, cos[1], sin[1])
        angle = (n - m) * rope_inv_freq(8, dtype=f64)[0]  # the rotated part, in complex form
        zq, zk = torch.complex(q[:4], q[4:8]), torch.complex(k[:4], k[4:8])
        rotated = (zq.conj() * zk * torch.exp(1j * angle)).real.sum()
        assert torch.isclose(whole, rotated + q[8:] @ k[8:])


def test_ch8_xpos_amplifies_a_key_ahead_by_one_over_zeta():
    zeta = xpos_zeta(64)
    assert math.isclose(zeta[0].item(), 0.4 / 1.4) and math.isclose(1 / zeta[0].item(), 3.5)


def test_ch8_axial_rope_separates_raster_neighbours():
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 32, generator=gen, dtype=f64)

    def axial(qcell, kcell):
        cos, sin = axial_cos_sin(torch.tensor([qcell, kcell], dtype=f64), 32, dtype=f64)
        return apply_rope(q, cos[0], sin[0], layout="interleaved") @ apply_rope(k, cos[1], sin[1], layout="interleaved")

    assert torch.isclose(axial([0, 0], [0, 1]), axial([3, 2], [3, 3]))
    assert not torch.isclose(axial([0, 5], [1, 0]), axial([0, 0], [0, 1]))


def test_ch1_order_reaches_the_last_token_one_layer_late():
    """One causal layer without positions gives the last token the same output for every order
    of the tokens before it (it sees them as a set); a second layer tells every order apart."""
    layers = [seeded_layer(16, 2, seed=s) for s in (21, 22)]
    gen = torch.Generator().manual_seed(23)
    words = {w: torch.randn(16, generator=gen, dtype=f64) for w in "ABCD"}
    one, two = [], []
    for order in itertools.permutations("ABC"):
        x = torch.stack([words[w] for w in (*order, "D")])[None]
        h = x + layers[0](x, causal=True)[0]
        one.append(h[0, -1])
        two.append((h + layers[1](h, causal=True)[0])[0, -1])
    assert all(torch.allclose(v, one[0], atol=1e-12) for v in one)
    assert all((a - b).abs().max() > 1e-4 for a, b in itertools.combinations(two, 2))
