"""Claims of the source documents that no other test file decides; each is named in posenc_book/data/claims.yaml."""

import math
import warnings

import pytest
import torch
from repo import ROOT
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from posenc import (
    LearnedPositionalEmbedding,
    MultiHeadSelfAttention,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
    relative_scores,
    rope_inv_freq,
    scaled_dot_product_attention,
    sinusoidal_dot_product,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_offset_matrix,
    sinusoidal_table,
)

f64 = torch.float64
SEEDS = [0, 1, 2, 3, 4]


# Order: recurrence, attention, a causal mask -------------------------------------------------


@pytest.mark.claim("000-02", "001-01", "002-01", "002-31")
@pytest.mark.parametrize("seed", SEEDS)
def test_a_recurrent_network_sees_order_and_attention_does_not(seed):
    torch.manual_seed(seed)
    rnn = nn.RNN(8, 16, batch_first=True).double()
    a, b = torch.randn(2, 8, generator=torch.Generator().manual_seed(seed), dtype=f64)
    ab, ba = torch.stack([a, b])[None], torch.stack([b, a])[None]  # [1, 2, 8] each
    _, h_ab = rnn(ab)
    _, h_ba = rnn(ba)
    assert (h_ab - h_ba).abs().max() > 0.1  # the final state knows which token came first
    out_ab, _ = scaled_dot_product_attention(ab, ab, ab)
    out_ba, _ = scaled_dot_product_attention(ba, ba, ba)
    assert torch.allclose(out_ab.flip(-2), out_ba, rtol=0, atol=1e-12)  # the same outputs, reordered


@pytest.mark.claim("004-13", "001-20")
@pytest.mark.parametrize("seed", SEEDS)
def test_a_b_and_b_a_pool_to_the_same_vector_only_without_positions(seed):
    torch.manual_seed(seed)
    layer = MultiHeadSelfAttention(16, 2).double()
    a, b = torch.randn(2, 16, dtype=f64)
    ab, ba = torch.stack([a, b])[None], torch.stack([b, a])[None]  # [1, 2, 16] each
    assert torch.allclose(layer(ab)[0].mean(1), layer(ba)[0].mean(1), rtol=0, atol=1e-12)
    pe = SinusoidalPositionalEncoding(16).double()
    assert (layer(pe(ab))[0].mean(1) - layer(pe(ba))[0].mean(1)).abs().max() > 0.01


@pytest.mark.claim("000-16", "003-01", "004-26", "001-15")
@pytest.mark.parametrize("seed", SEEDS)
def test_a_causal_mask_alone_breaks_permutation_equivariance(seed):
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(seed), dtype=f64)
    perm = torch.tensor([5, 0, 3, 1, 4, 2])
    out, _ = scaled_dot_product_attention(x, x, x, causal=True)
    out_p, _ = scaled_dot_product_attention(x[perm], x[perm], x[perm], causal=True)
    assert (out_p - out[perm]).abs().max() > 0.3
    assert torch.equal(out[0], x[0])  # the first token sees only itself


@pytest.mark.claim("001-07")
def test_attention_cost_grows_with_the_square_of_the_length():
    d = 16
    attention, recurrence = {}, {}
    w, u = torch.randn(d, d), torch.randn(d, d)
    for n in (64, 128, 256):
        x = torch.randn(n, d)
        with FlopCounterMode(display=False) as counter:
            scaled_dot_product_attention(x, x, x)
        attention[n] = counter.get_total_flops()
        with FlopCounterMode(display=False) as counter:
            h = torch.zeros(1, d)
            for t in range(n):  # an Elman recurrence, one step per token
                h = torch.tanh(x[t : t + 1] @ w + h @ u)
        recurrence[n] = counter.get_total_flops()
    assert attention[64] == 2 * (2 * 64 * 64 * d)  # q k^T and weights @ v: 2 n^2 d each
    assert attention[128] == 4 * attention[64] and attention[256] == 16 * attention[64]
    assert recurrence[64] == 64 * 2 * (2 * d * d)  # two [1, d] x [d, d] products per step
    assert recurrence[128] == 2 * recurrence[64] and recurrence[256] == 4 * recurrence[64]


# The sinusoidal encoding ---------------------------------------------------------------------


@pytest.mark.claim("000-05", "001-10", "002-12", "003-03", "004-02", "004-06")
def test_distinct_positions_get_distinct_vectors():
    table = sinusoidal_table(2048, 64, dtype=f64)
    dist = torch.cdist(table, table)  # [n, n]
    closest = (dist + torch.eye(2048, dtype=f64) * 1e9).min()
    assert closest > 1.4  # no two of the first 2048 positions are close, let alone equal
    assert closest == pytest.approx(dist[0, 1].item(), abs=1e-9)  # the closest pairs are neighbours


@pytest.mark.claim("001-09", "002-05")
def test_each_channel_repeats_with_its_own_wavelength_but_the_vector_does_not():
    d = 16
    wavelength = 2 * math.pi / sinusoidal_frequencies(d)  # [d/2], float64
    p = torch.linspace(0, 50, 101, dtype=f64)
    pe = sinusoidal_encoding(p, d, dtype=f64)
    for i, lam in enumerate(wavelength.tolist()):
        shifted = sinusoidal_encoding(p + lam, d, dtype=f64)
        assert torch.allclose(shifted[:, 2 * i : 2 * i + 2], pe[:, 2 * i : 2 * i + 2], rtol=0, atol=1e-9)
        assert (shifted - pe).abs().max() > 0.1  # the other pairs have moved on
    table = sinusoidal_table(20001, d, dtype=f64)
    assert (table[1:] - table[0]).norm(dim=-1).min() > 1.0  # no integer position up to 20000 returns to PE(0)


@pytest.mark.claim("002-08")
def test_channel_index_reading_of_seed_002_is_not_the_paper_encoding():
    d = 8
    pos = torch.arange(2048, dtype=f64)
    c = torch.arange(d, dtype=f64)
    angle = pos[:, None] / 10000.0 ** (2 * c / d)  # [n, d]: i read as the channel index
    literal = torch.where(c % 2 == 0, torch.sin(angle), torch.cos(angle))
    paper = sinusoidal_encoding(pos, d, dtype=f64)
    assert literal[3, 0] == paper[3, 0] == math.sin(3.0)
    assert literal[3, 1].item() == pytest.approx(math.cos(0.3), abs=1e-15)  # cos(3 / 10000^(2/8))
    assert paper[3, 1].item() == pytest.approx(math.cos(3.0), abs=1e-15)
    radius2 = literal.view(-1, d // 2, 2).pow(2).sum(-1)  # [n, d/2]: sin^2 + cos^2 of each channel pair
    assert radius2[:, 0].min() < 0.1 and radius2[:, 0].max() > 1.9  # pair 0 leaves the unit circle


@pytest.mark.claim("004-05")
def test_seed_004_conditions_read_literally_define_half_the_channels():
    d = 8
    # "i even: PE(pos, 2i) = sin(...)", "i odd: PE(pos, 2i+1) = cos(...)", i = 0 .. d/2 - 1
    defined = {2 * i for i in range(d // 2) if i % 2 == 0} | {2 * i + 1 for i in range(d // 2) if i % 2 == 1}
    assert sorted(defined) == [0, 3, 4, 7]
    # with i counting pairs and no condition, every channel has its value
    pe = sinusoidal_encoding(torch.tensor(1.0, dtype=f64), d, dtype=f64)
    assert pe.tolist() == pytest.approx(
        [f(10000.0 ** (-2 * i / d)) for i in range(d // 2) for f in (math.sin, math.cos)], abs=1e-15
    )


@pytest.mark.claim("002-14")
def test_seed_002_d4_table_is_not_the_sinusoidal_encoding():
    seed_table = torch.tensor(
        [[0.0, 1.0, 0.0, 0.0], [0.0001, 0.9999, 0.0, 0.0], [0.0002, 0.9998, 0.0, 0.0], [0.0003, 0.9997, 0.0, 0.0]],
        dtype=f64,
    )
    correct = sinusoidal_table(4, 4, dtype=f64)
    assert correct[0].tolist() == [0.0, 1.0, 0.0, 1.0]  # cos 0 = 1 in every cosine channel
    assert seed_table[0, 3] == 0.0
    wrong = (correct - seed_table).abs() > 1e-4  # beyond the table's four decimals
    assert wrong[1:].all().item()  # every entry after position 0 is off
    assert (correct - seed_table).abs().max() > 0.9
    assert [round(math.sin(p / 10000), 4) for p in range(4)] == seed_table[:, 0].tolist()  # frequency 1/10000
    assert [round(1 - p / 10000, 4) for p in range(4)] == seed_table[:, 1].tolist()  # a line, not a cosine


# Relative encodings -------------------------------------------------------------------------


@pytest.mark.claim("002-10", "002-15")
@pytest.mark.parametrize("seed", SEEDS)
def test_a_vector_added_to_the_input_is_an_absolute_encoding(seed):
    d, n = 16, 30
    g = torch.Generator().manual_seed(seed)
    w_q, w_k = torch.randn(2, d, d, generator=g, dtype=f64) / math.sqrt(d)
    a, b = torch.randn(2, d, generator=g, dtype=f64)

    def score(p, reference):
        """Score of token a at position p on token b at p + 1, encodings added to the inputs."""
        pe = sinusoidal_encoding(torch.tensor([p, p + 1]) - reference, d, dtype=f64)
        return ((a + pe[0]) @ w_q) @ ((b + pe[1]) @ w_k) / math.sqrt(d)

    for reference in (0, n):  # positions counted from the first token or from the last
        scores = torch.stack([score(p, reference) for p in range(n)])
        assert scores.max() - scores.min() > 0.5  # the same pair scores differently at each place
    bias = T5RelativeBias(1).double()(n + 1, n + 1)[0]  # [q, k]
    assert len({bias[p, p + 1].item() for p in range(n)}) == 1  # a term on the scores does not


class _LargestNewTensor(TorchDispatchMode):
    """Records the number of elements of the largest new tensor an operation returns (views of inputs excluded)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        sizes = [
            t.numel()
            for t in tree_leaves(out)
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs
        ]
        self.largest = max([self.largest, *sizes])
        return out


@pytest.mark.claim("002-26")
def test_shaw_direct_form_builds_an_l_by_l_by_d_tensor():
    L, d = 32, 64
    g = torch.Generator().manual_seed(0)
    q, table = torch.randn(L, d, generator=g), torch.randn(2 * L - 1, d, generator=g)
    largest = {}
    for method in ("materialize", "shift"):
        with _LargestNewTensor() as counter:
            relative_scores(q, table, method=method)
        largest[method] = counter.largest
    assert largest["materialize"] == L * L * d  # one d-vector per pair
    assert largest["shift"] == L * 2 * L  # the padded [L, 2L] score matrix, d / 2 = 32 times smaller
    assert torch.allclose(
        relative_scores(q, table, method="shift"), relative_scores(q, table, method="materialize"), atol=1e-4
    )
    flops = {}
    for method in ("materialize", "shift"):
        with FlopCounterMode(display=False) as counter:
            relative_scores(q, table, method=method)
        flops[method] = counter.get_total_flops()
    # the saving is memory, not arithmetic: the smaller route does about twice the multiply-adds
    assert flops["materialize"] == 2 * L * L * d
    assert flops["shift"] == 2 * L * (2 * L - 1) * d > flops["materialize"]


# Learned tables and RoPE in published models ---------------------------------------------------


@pytest.mark.claim("004-12")
def test_bert_and_gpt2_learn_their_position_tables():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import BertConfig, BertModel, GPT2Config, GPT2Model
    bert = BertModel(
        BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, vocab_size=100)
    )
    gpt2 = GPT2Model(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=100, bos_token_id=None, eos_token_id=None))
    tables = {"BERT": (bert, "embeddings.position_embeddings.weight", 512), "GPT-2": (gpt2, "wpe.weight", 1024)}
    for model, name, rows in tables.values():
        table = dict(model.named_parameters())[name]  # a parameter: trained with the rest
        assert table.requires_grad and table.shape == (rows, 32)
        out = model(torch.zeros(1, 4, dtype=torch.long)).last_hidden_state  # [1, 4, 32]
        (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(0))).sum().backward()
        used = table.grad.abs().sum(-1) > 0
        assert used[:4].all() and not used[4:].any()  # the rows of positions 0..3 get a gradient


@pytest.mark.claim("004-22")
def test_llama2_rope_has_pairs_that_never_turn_within_its_context():
    theta, _ = rope_inv_freq(128, base=10000.0)  # LLaMA 2: head dim 128, base 10000, 4096 positions
    wavelength = 2 * math.pi / theta
    assert (wavelength > 4096).nonzero().flatten().tolist() == list(range(46, 64))  # 18 of 64 pairs
    assert wavelength[45] < 4096 < wavelength[46]


# What an added encoding carries, and where it fits ----------------------------------------------


@pytest.mark.claim("001-19")
@pytest.mark.parametrize("seed", SEEDS)
def test_embedding_plus_encoding_keeps_both_the_token_and_the_position(seed):
    vocab, n, d = 50, 64, 64
    embedding = torch.randn(vocab, d, generator=torch.Generator().manual_seed(seed), dtype=f64)  # nn.Embedding's init
    pe = sinusoidal_table(n, d, dtype=f64)
    x = (embedding[:, None, :] + pe[None]).reshape(vocab * n, d)  # row t * n + p: token t at position p
    dist = torch.cdist(x, x) + torch.eye(vocab * n, dtype=f64) * 1e9
    # every (token, position) has a sum of its own, no closer to another than neighbouring positions'
    # encodings are (about 1.47 apart): from the sum, both the token and the position can be read back
    assert dist.min() > 1.4
    assert dist.min() == pytest.approx((pe[1] - pe[0]).norm().item(), abs=1e-9)  # the same token, one place on


@pytest.mark.claim("001-16")
@pytest.mark.parametrize("seed", range(3))
def test_the_encoding_carries_offsets_but_projected_scores_depend_on_where_the_pair_stands(seed):
    n, d, k = 200, 32, 5
    pe = sinusoidal_table(n, d, dtype=f64)
    # the encodings carry the offset: one fixed matrix moves every position k places on
    assert torch.allclose(pe[k:], pe[:-k] @ sinusoidal_offset_matrix(k, d).T, rtol=0, atol=1e-12)
    dots = (pe[:-k] * pe[k:]).sum(-1)  # PE(p) . PE(p + k) for every p
    assert dots.max() - dots.min() < 1e-12  # a function of k alone ...
    assert sinusoidal_dot_product(k, d) == sinusoidal_dot_product(-k, d)  # ... that cannot tell +k from -k
    # after a query and a key projection, the same offset scores differently at different places
    w_q, w_k = torch.randn(2, d, d, generator=torch.Generator().manual_seed(seed), dtype=f64) / math.sqrt(d)
    scores = ((pe[:-k] @ w_q) * (pe[k:] @ w_k)).sum(-1) / math.sqrt(d)  # [n - k]
    assert scores.max() - scores.min() > 1.0


@pytest.mark.claim("002-35")
def test_a_learned_encoding_is_a_table_looked_up_by_position():
    max_len, d, s = 16, 8, 5
    torch.manual_seed(0)
    learned = LearnedPositionalEmbedding(max_len, d).double()
    (table,) = learned.parameters()
    assert table.shape == (max_len, d)  # one parameter: a row per position
    x, y = torch.randn(2, 1, s, d, dtype=f64)
    added = learned(x) - x
    assert torch.allclose(added, learned(y) - y, rtol=0, atol=1e-15)  # whatever the input
    assert torch.allclose(added[0], table[:s], rtol=0, atol=1e-15)  # row p goes to position p
    one_hot = nn.functional.one_hot(torch.arange(s), max_len).double()  # [s, max_len]
    assert torch.allclose(one_hot @ table, added[0], rtol=0, atol=1e-15)  # a linear map of the position
    # a linear layer applied to the input, the document's example, adds something that follows the input
    layer = nn.Linear(d, d).double()
    assert (layer(x) - layer(y)).abs().max() > 0.1


@pytest.mark.claim("002-36")
@pytest.mark.parametrize("seed", range(3))
def test_a_position_encoding_gives_a_convolution_positions(seed):
    torch.manual_seed(seed)
    conv = nn.Conv1d(16, 16, 3, padding=1, padding_mode="circular").double()  # no edge to tell where it is

    def run(x):  # [batch, seq, d] -> the same
        return conv(x.transpose(1, 2)).transpose(1, 2)

    x = torch.randn(1, 12, 16, dtype=f64)
    moved = x.roll(3, dims=1)
    with torch.no_grad():
        assert torch.allclose(run(moved), run(x).roll(3, dims=1), rtol=0, atol=1e-12)  # the output only moves along
        pe = SinusoidalPositionalEncoding(16).double()
        assert (run(pe(moved)) - run(pe(x)).roll(3, dims=1)).abs().max() > 0.3  # with positions added, it changes


# Longer sequences, and the recorded language models -----------------------------------------------


def _text_bits():
    """Bits per character of chapter 11's language models: {(step, scheme, length): [one value per seed]}."""
    from posenc.experiments import load_text_results, text_summary

    document = load_text_results(ROOT / "posenc_book" / "data" / "text_lm.json")
    config = document["config"]
    assert config["train_length"] == 64 and config["multipliers"] == [1, 2, 4, 8] and len(config["seeds"]) >= 3
    bits = {}
    for step in [*config["checkpoints"], config["steps"]]:
        for (scheme, length), entry in text_summary(document, step).items():
            bits[step, scheme, length] = entry["values"]
    return bits, config


@pytest.mark.claim("000-12")
def test_attention_reaches_any_distance_and_longer_text_hurts_some_encodings_only():
    # within a sequence: one fixed linear map of the sinusoidal query (the offset matrix) picks out the
    # token k places back, for k = 1000 as sharply as for k = 1
    n, d = 2048, 64
    pe = sinusoidal_table(n, d, dtype=f64)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    for k in (1, 1000):
        query = pe @ sinusoidal_offset_matrix(-k, d).T  # PE(p - k), from PE(p)
        weights = torch.softmax((8.0 * query @ pe.T).masked_fill(~causal, -math.inf), -1)
        p = torch.arange(k, n)
        assert weights[p, p - k].min() > 0.99
    # past the trained length (64 characters, 512 here) it depends on the encoding, at every budget
    bits, config = _text_bits()
    for step in [*config["checkpoints"], config["steps"]]:

        def lost(scheme, step=step):
            return [b - a for a, b in zip(bits[step, scheme, 64], bits[step, scheme, 512], strict=True)]

        assert max(abs(c) for c in lost("alibi") + lost("shaw")) < 0.05
        assert min(lost("t5")) > 0.9 and min(lost("rope")) > 1.5 and min(lost("sinusoidal")) > 1.9
        assert all(b is None for b in bits[step, "learned", 128])  # a learned table has no row for it


@pytest.mark.claim("002-46")
def test_on_text_every_encoding_beats_no_encoding_at_the_training_length():
    bits, config = _text_bits()
    encodings = [s for s in config["schemes"] if s != "none"]
    assert len(encodings) == 7
    for step in [*config["checkpoints"], config["steps"]]:
        best_without = min(bits[step, "none", 64])
        assert best_without > 3.0
        assert max(b for s in encodings for b in bits[step, s, 64]) < best_without - 0.3
