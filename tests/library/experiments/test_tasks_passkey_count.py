"""The passkey and count tasks: where the answers are, answers from the content alone, seeds, lengths, chance."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.experiments import IGNORE, TASKS, CountTask, ExperimentConfig, PasskeyTask, build_task, make_task


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _count_by_hand(row, max_count):
    """The count task's answers for one sequence, by a loop: earlier occurrences of each token, capped."""
    tokens = row.tolist()
    return [min(tokens[:i].count(token), max_count) for i, token in enumerate(tokens)]


# --- passkey -------------------------------------------------------------------------------


def test_passkey_by_hand():
    task = PasskeyTask(num_symbols=5)
    assert (task.key_token, task.query_token, task.vocab_size, task.seq_len(6)) == (5, 6, 7, 7)
    batch = task.sample(3, 6, _gen(0))
    assert batch.inputs.shape == batch.targets.shape == (3, 7) and batch.inputs.dtype == torch.long
    assert batch.inputs[:, -1].eq(6).all() and batch.inputs[:, :-1].ne(6).all()  # the query ends the input
    assert batch.inputs[:, :-1].eq(5).sum(1).tolist() == [1, 1, 1]  # one key marker per input
    assert batch.targets[:, :-1].eq(IGNORE).all()  # only the query has an answer
    assert batch.targets[:, -1].lt(5).all()


@given(st.integers(2, 64), st.integers(2, 12), st.integers(0, 2**31 - 1))
@settings(max_examples=20, deadline=None)
def test_passkey_answer_is_the_token_after_the_marker(length, num_symbols, seed):
    """The answer is read off the input alone: find the marker, take the token after it."""
    task = PasskeyTask(num_symbols=num_symbols)
    batch = task.sample(4, length, _gen(seed))
    data = batch.inputs[:, :-1]
    marker = (data == task.key_token).int().argmax(1)  # [b], the only marker
    assert data.eq(task.key_token).sum(1).eq(1).all()
    assert marker.max() <= length - 2  # room for the key after it
    key = data.gather(1, marker[:, None] + 1).squeeze(1)
    assert key.lt(num_symbols).all()
    assert torch.equal(batch.targets[:, -1], key)
    haystack = data.masked_fill(data == task.key_token, 0)
    assert haystack.lt(num_symbols).all()  # the haystack holds digits only


def test_passkey_marker_stands_anywhere_the_key_fits():
    task = PasskeyTask(num_symbols=3)
    batch = task.sample(400, 5, _gen(1))
    where = (batch.inputs[:, :5] == task.key_token).int().argmax(1)
    assert sorted(set(where.tolist())) == [0, 1, 2, 3]  # never 4: the key must follow
    assert sorted(set(batch.targets[:, -1].tolist())) == [0, 1, 2]  # every digit is a key


def test_passkey_needs_the_marker_and_the_key():
    with pytest.raises(ValueError, match=r"length must be >= 2 \(the key marker and the key\), got 1"):
        PasskeyTask().sample(2, 1)
    assert PasskeyTask().sample(2, 2, _gen(0)).inputs[:, 0].eq(10).all()  # the marker must stand first


# --- count ---------------------------------------------------------------------------------


@given(st.integers(1, 48), st.integers(2, 9), st.integers(1, 9), st.integers(0, 2**31 - 1))
@settings(max_examples=20, deadline=None)
def test_count_answers_are_earlier_occurrences_capped(length, num_symbols, max_count, seed):
    task = CountTask(num_symbols=num_symbols, max_count=max_count)
    batch = task.sample(3, length, _gen(seed))
    assert batch.inputs.shape == batch.targets.shape == (3, length)
    assert batch.inputs.min() >= 0 and batch.inputs.max() < num_symbols
    for row, answers in zip(batch.inputs, batch.targets, strict=True):
        assert answers.tolist() == _count_by_hand(row, max_count)
    assert batch.targets.min() >= 0 and batch.targets.max() <= max_count < task.vocab_size  # every position answered


def test_count_by_hand_on_a_fixed_sequence():
    batch = CountTask(num_symbols=4, max_count=2).sample(1, 12, _gen(3))
    tokens = batch.inputs[0].tolist()
    seen = {}
    for i, token in enumerate(tokens):
        assert batch.targets[0, i] == min(seen.get(token, 0), 2)
        seen[token] = seen.get(token, 0) + 1


def test_count_ignores_where_the_earlier_tokens_stand():
    """Shuffling the tokens before the last one changes no answer at the last one: counting by content."""
    batch = CountTask(num_symbols=3, max_count=9).sample(20, 16, _gen(4))
    for row, answers in zip(batch.inputs, batch.targets, strict=True):
        shuffled = torch.cat([row[:-1][torch.randperm(15, generator=_gen(5))], row[-1:]])
        assert _count_by_hand(shuffled, 9)[-1] == answers[-1]


def test_count_cap_grows_more_frequent_on_longer_inputs():
    task = CountTask()  # 4 symbols, answers 0 .. 7
    capped = [task.sample(64, n, _gen(n)).targets.eq(7).double().mean().item() for n in (16, 64)]
    assert capped[0] < 0.05 and capped[1] > 0.5  # why chance (1/8) is a floor, not the majority-class score


# --- both ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["passkey", "count"])
def test_new_tasks_are_seeded_and_take_any_length(name):
    task = make_task(name)
    a, b = task.sample(8, 16, _gen(5)), task.sample(8, 16, _gen(5))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    other = task.sample(8, 16, _gen(6))
    assert not torch.equal(a.inputs, other.inputs)
    for length in (16, 32, 64):  # 2x and 4x a training length of 16
        batch = task.sample(2, length, _gen(length))
        assert batch.inputs.shape == (2, task.seq_len(length)) == batch.targets.shape
        assert batch.inputs.min() >= 0 and batch.inputs.max() < task.vocab_size
        answered = batch.targets[batch.targets != IGNORE]
        assert answered.numel() > 0 and answered.max() < task.vocab_size


def test_chance_vocabulary_and_repr():
    assert PasskeyTask().chance == 1 / 10 and PasskeyTask(num_symbols=4).chance == 1 / 4
    assert CountTask().chance == 1 / 8 and CountTask(max_count=3).chance == 1 / 4
    assert (PasskeyTask().vocab_size, CountTask().vocab_size, CountTask(num_symbols=10, max_count=3).vocab_size) == (
        12,
        8,
        10,
    )
    assert repr(PasskeyTask()) == "PasskeyTask(num_symbols=10)"
    assert repr(CountTask()) == "CountTask(num_symbols=4, max_count=7)"


def test_registered_and_usable_by_the_experiments():
    assert TASKS["passkey"] is PasskeyTask and TASKS["count"] is CountTask
    assert make_task("count", max_count=3).max_count == 3
    config = ExperimentConfig(schemes=("rope",), tasks=("passkey", "count"), seeds=(0,))
    assert isinstance(build_task(config, "passkey"), PasskeyTask) and isinstance(build_task(config, "count"), CountTask)


@pytest.mark.parametrize(
    ("name", "options", "match"),
    [
        ("count", {"max_count": 0}, r"max_count must be >= 1, got 0"),
        ("count", {"max_count": 2.5}, r"max_count must be an int >= 1, got 2\.5"),
        ("count", {"num_symbols": 1}, r"num_symbols must be >= 2, got 1"),
        ("passkey", {"num_symbols": 1}, r"num_symbols must be >= 2, got 1"),
        ("passkey", {"num_symbols": True}, r"num_symbols must be an int >= 1, got True"),
    ],
)
def test_bad_options(name, options, match):
    with pytest.raises(ValueError, match=match):
        make_task(name, **options)


# --- count: the exact class probabilities and the two answers that never read the input -------


def _every_input(num_symbols: int, max_count: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every one of the num_symbols ** length inputs (equally likely) and its capped counts, computed
    here independently of CountTask: ``([inputs, length], [inputs, length])``."""
    grids = torch.meshgrid(*[torch.arange(num_symbols)] * length, indexing="ij")
    inputs = torch.stack([g.reshape(-1) for g in grids], dim=1)
    seen = torch.nn.functional.one_hot(inputs, num_symbols).cumsum(1)
    return inputs, (seen.gather(2, inputs.unsqueeze(-1)).squeeze(-1) - 1).clamp(max=max_count)


@settings(max_examples=40, deadline=None)
@given(num_symbols=st.integers(2, 4), max_count=st.integers(1, 6), length=st.integers(1, 7))
def test_count_class_probabilities_equal_the_frequencies_over_every_input(num_symbols, max_count, length):
    """Every one of the num_symbols ** length inputs, equally likely: the share of inputs whose answer at
    position i is k equals the binomial formula's probability, to rounding."""
    task = CountTask(num_symbols=num_symbols, max_count=max_count)
    inputs, answers = _every_input(num_symbols, max_count, length)
    assert answers[:3].tolist() == [_count_by_hand(row, max_count) for row in inputs[:3]]
    shares = torch.nn.functional.one_hot(answers, max_count + 1).double().mean(0)  # [length, classes]
    probs = task.class_probabilities(length)
    assert probs.shape == (length, max_count + 1) and probs.dtype == torch.float64
    torch.testing.assert_close(probs, shares, rtol=0, atol=1e-12)
    always_cap, by_position = task.baselines(length)
    assert always_cap == pytest.approx(shares[:, -1].mean().item(), abs=1e-12)
    assert by_position == pytest.approx(shares.max(1).values.mean().item(), abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    num_symbols=st.integers(2, 4),
    max_count=st.integers(1, 6),
    length=st.integers(1, 7),
    data=st.data(),
)
def test_no_answer_blind_to_the_input_beats_the_likeliest_count(num_symbols, max_count, length, data):
    """Chapter 15: answering at each position its likeliest count is the most an answer that never reads
    the input can score. Any such answer is a table of position -> class (or, guessing, of position ->
    probabilities of the classes); scored exactly over every input, none beats by_position, and the
    table of each position's likeliest class reaches it."""
    task = CountTask(num_symbols=num_symbols, max_count=max_count)
    _, answers = _every_input(num_symbols, max_count, length)
    _, by_position = task.baselines(length)
    classes = st.integers(0, max_count)
    table = torch.tensor(data.draw(st.lists(classes, min_size=length, max_size=length)))
    assert (answers == table).double().mean().item() <= by_position + 1e-12
    weights = torch.tensor(
        data.draw(st.lists(st.lists(st.floats(0, 1), min_size=max_count + 1, max_size=max_count + 1)
                           .filter(lambda w: sum(w) > 0), min_size=length, max_size=length)),
        dtype=torch.float64,
    )  # fmt: skip
    guesses = weights / weights.sum(1, keepdim=True)  # [length, classes]: a guessing answer's odds
    scored = guesses.gather(1, answers.T).mean().item()  # its expected accuracy over every input
    assert scored <= by_position + 1e-12
    likeliest = task.class_probabilities(length).argmax(1)
    assert (answers == likeliest).double().mean().item() == pytest.approx(by_position, abs=1e-12)


@settings(max_examples=15, deadline=None)
@given(num_symbols=st.integers(2, 8), max_count=st.integers(1, 9), length=st.integers(1, 300))
def test_count_baselines_match_sampled_inputs(num_symbols, max_count, length):
    """Long inputs, where enumerating is out of reach: 4,000 sampled inputs agree with the exact values
    within five standard errors (at least 1 / 4,000: a rare input may be missing from the sample), and the
    rows stay distributions."""
    task = CountTask(num_symbols=num_symbols, max_count=max_count)
    probs = task.class_probabilities(length)
    assert probs.min() >= 0 and (probs.sum(1) - 1).abs().max() < 1e-9
    targets = task.sample(4000, length, _gen(length)).targets
    always_cap, by_position = task.baselines(length)
    modes = probs.argmax(1)
    for exact, hits in ((always_cap, targets == max_count), (by_position, targets == modes)):
        per_input = hits.double().mean(1)
        assert abs(per_input.mean().item() - exact) < 5 * max(per_input.std().item() / 4000**0.5, 1 / 4000)


def test_count_baselines_of_the_book():
    """Chapter 15's bars, four symbols and answers capped at 7: 0.56 and 0.67 at 64 tokens, 0.40 at 16."""
    always_cap, by_position = make_task("count").baselines(64)
    assert (round(always_cap, 2), round(by_position, 2)) == (0.56, 0.67)
    assert round(make_task("count").baselines(16)[1], 2) == 0.40


@pytest.mark.parametrize("length", [0, -3, 2.0, True, "8"])
def test_count_class_probabilities_refuse_a_wrong_length(length):
    with pytest.raises(ValueError, match=r"length must be (an int )?>= 1"):
        CountTask().class_probabilities(length)
    with pytest.raises(ValueError, match=r"length must be (an int )?>= 1"):
        CountTask().baselines(length)
