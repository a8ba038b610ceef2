"""The real-text experiment: the corpus, next-character windows, bits per character, the runner and its command."""

import json
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc.experiments import (
    OTHER,
    VOCAB,
    VOCAB_SIZE,
    TextConfig,
    TextTask,
    TinyConfig,
    TinyTransformer,
    decode_text,
    encode_text,
    evaluate_text,
    load_text_results,
    main,
    run_text_experiment,
    stdlib_corpus,
    text_summary,
)

#: Trains in well under a second per run.
TINY = dict(
    steps=4,
    checkpoints=(2,),
    train_length=8,
    multipliers=(1, 2),
    dim=16,
    num_heads=2,
    num_layers=1,
    batch_size=4,
    warmup=1,
    train_chars=5000,
    eval_chars=64,
)


@given(st.text(alphabet=VOCAB, max_size=50))
def test_vocabulary_characters_round_trip(text):
    assert decode_text(encode_text(text).long()) == text


def test_other_characters_share_one_id():
    ids = encode_text("a\tb\u00e9\x7f")
    assert ids.tolist() == [VOCAB.index("a"), OTHER, VOCAB.index("b"), OTHER, OTHER]
    assert VOCAB_SIZE == 97 == len(VOCAB) + 1
    assert decode_text(ids.long()) == "a\ufffdb\ufffd\ufffd"


def test_corpus_is_deterministic_and_validation_files_are_unseen():
    a, b = stdlib_corpus(train_chars=20_000), stdlib_corpus(train_chars=20_000)
    assert torch.equal(a.train, b.train) and a.sha256 == b.sha256
    assert len(a.train) == 20_000 and len(a.validation) == 65_537
    assert not set(a.train_files) & set(a.validation_files)
    assert a.summary()["train_files"] == len(a.train_files)


def test_corpus_from_a_folder_without_enough_text(tmp_path):
    (tmp_path / "m.py").write_text("x = 1\n")
    with pytest.raises(FileNotFoundError, match=r"holds \d+ characters of train text .*fewer than the 100 asked"):
        stdlib_corpus(train_chars=100, validation_chars=1, folder=tmp_path)
    with pytest.raises(ValueError, match=r"holdout_every must be >= 2, got 1"):
        stdlib_corpus(holdout_every=1)


def test_text_task_targets_are_the_next_characters():
    ids = encode_text("".join(VOCAB[i % 90] for i in range(300)))
    batch = TextTask(ids).sample(5, 12, torch.Generator().manual_seed(0))
    assert batch.inputs.shape == batch.targets.shape == (5, 12)
    assert torch.equal(batch.inputs[:, 1:], batch.targets[:, :-1])
    assert ((batch.targets - batch.inputs) % 90 == 1).all()  # the text counts up
    with pytest.raises(ValueError, match=r"length must be < the text's 300 characters, got 300"):
        TextTask(ids).sample(1, 300)
    with pytest.raises(TypeError, match=r"ids must be a 1-D torch.uint8 tensor"):
        TextTask(ids.long())


def test_bits_per_char_covers_the_same_characters_at_every_length():
    """A model that ignores its input predicts the same distribution everywhere: equal bits at every length."""
    model = TinyTransformer(TinyConfig(VOCAB_SIZE, scheme="none", dim=16, num_heads=2, causal=True))
    with torch.no_grad():
        for p in model.head.parameters():
            p.zero_()
        model.head.bias[:10] = torch.arange(10.0)
    ids = stdlib_corpus(train_chars=10, validation_chars=257).validation
    results = [evaluate_text(model, ids, length=n, chars=256) for n in (16, 32, 64)]
    assert len({round(r["bits_per_char"], 12) for r in results}) == 1
    log_probs = torch.log_softmax(model.head.bias.double(), 0)
    expected = -log_probs[ids[1:257].long()].mean().item() / math.log(2)
    assert results[0]["bits_per_char"] == pytest.approx(expected, rel=1e-6)
    assert len(results[0]["by_position"]) == 16
    with pytest.raises(ValueError, match=r"chars must be a multiple of length = 48"):
        evaluate_text(model, ids, length=48, chars=256)


@pytest.fixture(scope="module")
def tiny_results():
    return run_text_experiment(TextConfig(schemes=("learned", "rope", "rope_pi"), seeds=(0, 1), **TINY))


def test_rope_pi_is_evaluated_from_the_rope_weights(tiny_results):
    runs = {(r["scheme"], r["seed"]): r for r in tiny_results["runs"]}
    assert [(r["scheme"], r["seed"]) for r in tiny_results["runs"]] == [
        (s, seed) for s in ("learned", "rope", "rope_pi") for seed in (0, 1)
    ]
    for seed in (0, 1):
        rope, pi = runs["rope", seed], runs["rope_pi", seed]
        assert pi["trained_as"] == "rope" and pi["losses"] == rope["losses"]
        # at the training length the factor is 1: the same model, the same numbers
        assert pi["evaluations"][0] == rope["evaluations"][0]
        assert pi["evaluations"][1]["bits_per_char"] != rope["evaluations"][1]["bits_per_char"]
        assert [c["step"] for c in rope["checkpoints"]] == [2, 4]
    assert [e["status"] for e in runs["learned", 0]["evaluations"]] == ["ok", "cannot run"]


def test_summary_over_seeds(tiny_results):
    rows = text_summary(tiny_results)
    row = rows["rope", 8]
    assert row["status"] == "ok" and row["min"] <= row["mean"] <= row["max"]
    assert rows["learned", 16]["status"] == "cannot run" and rows["learned", 16]["mean"] is None
    assert text_summary(tiny_results, step=2)["rope", 8]["values"] != row["values"]
    with pytest.raises(ValueError, match=r"step must be a checkpoint, one of \[2, 4\]; got 3"):
        text_summary(tiny_results, step=3)


def test_command_line_writes_what_load_reads(tmp_path, capsys):
    out = tmp_path / "text.json"
    options = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items() if not isinstance(v, tuple)]
    argv = ["text", "--schemes", "alibi", "--seeds", "3", "--checkpoints", "2", "--multipliers", "1", "2"]
    assert main([*argv, *options, "--quiet", "--out", str(out)]) == 0
    document = load_text_results(out)
    assert document["config"]["schemes"] == ["alibi"] and document["corpus"]["train_chars"] == 5000
    with pytest.raises(SystemExit) as stop:
        main([*argv, *options, "--quiet", "--out", str(out)])
    assert stop.value.code == 2 and "exists; pass --force" in capsys.readouterr().err
    out.write_text(json.dumps({"schema": "posenc.experiments/2"}))
    with pytest.raises(ValueError, match=r"not a posenc text results file: schema must be 'posenc.text/1'"):
        load_text_results(out)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"eval_chars": 1000}, r"eval_chars must be a multiple of the longest evaluation length 512, got 1000"),
        ({"checkpoints": (1000, 500)}, r"checkpoints must be ascending steps below steps = 2000"),
        ({"checkpoints": (2000,)}, r"checkpoints must be ascending steps below steps = 2000"),
        ({"dim": 12}, r"scheme 'rope' cannot be built with dim=12, num_heads=4: head_dim must be even"),
        ({"seeds": (-1,)}, r"seeds must hold ints >= 0, got -1"),
        ({"schedule": "linear"}, r"schedule must be one of 'cosine', 'constant'; got 'linear'"),
    ],
)
def test_bad_configurations(change, message):
    with pytest.raises(ValueError, match=message):
        TextConfig(**change)
