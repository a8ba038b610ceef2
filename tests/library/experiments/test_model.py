"""The tiny Transformer: its config, scheme registry and hooks, tasks, determinism, and that it learns."""

import dataclasses

import pytest
import torch

import posenc.experiments.registry as schemes
from posenc import SinusoidalPositionalEncoding
from posenc.experiments import (
    IGNORE,
    LookupTask,
    PositionScheme,
    ReverseTask,
    ShiftTask,
    TinyConfig,
    TinyTransformer,
    make_position_scheme,
    make_task,
    position_schemes,
    register_position_scheme,
    tiny_accuracy,
    tiny_accuracy_by_position,
    train_tiny,
)

SMALL = dict(dim=32, num_heads=2, num_layers=1, max_len=32)


@pytest.fixture
def registry(monkeypatch):
    """A private copy of the scheme registry, so test schemes do not leak."""
    monkeypatch.setattr(schemes, "_SCHEMES", dict(schemes._SCHEMES))
    return schemes._SCHEMES


# --- tasks -------------------------------------------------------------------


def test_reverse_task_by_hand():
    batch = ReverseTask(num_symbols=5).sample(3, 4, torch.Generator().manual_seed(0))
    assert batch.inputs.shape == (3, 4) and batch.inputs.dtype == torch.long
    assert torch.equal(batch.targets, batch.inputs.flip(-1))
    assert batch.inputs.min() >= 0 and batch.inputs.max() < 5


def test_shift_task_by_hand():
    batch = ShiftTask(num_symbols=7, shift=2).sample(2, 6, torch.Generator().manual_seed(1))
    assert batch.targets[:, :2].eq(IGNORE).all()
    assert torch.equal(batch.targets[:, 2:], batch.inputs[:, :4])


def test_lookup_task_by_hand():
    task = LookupTask(num_symbols=4, num_queries=3, max_length=10)
    assert task.vocab_size == 14 and task.seq_len(5) == 8
    batch = task.sample(4, 5, torch.Generator().manual_seed(2))
    data, queries = batch.inputs[:, :5], batch.inputs[:, 5:]
    assert data.max() < 4 and queries.min() >= 4 and queries.max() < 4 + 5
    assert batch.targets[:, :5].eq(IGNORE).all()
    assert torch.equal(batch.targets[:, 5:], data.gather(1, queries - 4))


@pytest.mark.parametrize("name", ["reverse", "shift", "lookup"])
def test_tasks_are_seeded_and_take_any_length(name):
    task = make_task(name)
    a = task.sample(8, 16, torch.Generator().manual_seed(5))
    b = task.sample(8, 16, torch.Generator().manual_seed(5))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    for length in (16, 32, 64):  # 2x and 4x a training length of 16
        batch = task.sample(2, length, torch.Generator().manual_seed(length))
        assert batch.inputs.shape == (2, task.seq_len(length)) == batch.targets.shape
        assert batch.inputs.max() < task.vocab_size
    assert task.chance == 1 / 16


# --- the scheme interface ------------------------------------------------------


def test_unknown_scheme_is_rejected_with_the_known_names():
    with pytest.raises(
        ValueError, match=r"scheme must be one of 'alibi', 'cope', 'fire', 'irope', 'learned', .*got 'rotary'"
    ):
        TinyTransformer(TinyConfig(10, scheme="rotary"))
    with pytest.raises(ValueError, match=r"scheme must be one of .*got 'Learned'"):
        make_position_scheme("Learned", dim=8, num_heads=2, max_len=8)


def test_builtin_schemes():
    assert {"none", "sinusoidal", "learned"} <= set(position_schemes())
    x = torch.randn(2, 5, 8)
    none = make_position_scheme("none", dim=8, num_heads=2, max_len=16)
    assert torch.equal(none.embed(x, 3), x) and none.score_bias(5, 5) is None
    sinusoidal = make_position_scheme("sinusoidal", dim=8, num_heads=2, max_len=16)
    assert torch.equal(sinusoidal.embed(x, 3), SinusoidalPositionalEncoding(8)(x, offset=3))
    learned = make_position_scheme("learned", dim=8, num_heads=2, max_len=16, std=0.5)
    assert torch.equal(learned.embed(x, 3), x + learned.table.weight[3:8])
    assert abs(learned.table.weight.std().item() - 0.5) < 0.2
    q, k = torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    for scheme in (none, sinusoidal, learned):
        assert scheme.rotate(q, k, 0) == (q, k)


def test_a_score_bias_scheme_reaches_every_layer(registry):
    calls = []

    @register_position_scheme("diagonal")
    class Diagonal(PositionScheme):
        def __init__(self, *, num_heads, **_):
            super().__init__()
            self.num_heads = num_heads

        def score_bias(self, q_len, k_len, offset=0):
            calls.append((q_len, k_len, offset))
            eye = torch.eye(q_len, k_len, dtype=torch.bool)
            return torch.zeros(self.num_heads, q_len, k_len).masked_fill(~eye, float("-inf"))  # [h, q, k]

    model = TinyTransformer(TinyConfig(10, scheme="diagonal", **SMALL | {"num_layers": 3}))
    _, maps = model(torch.randint(10, (2, 6)), offset=4, return_attention=True)
    assert calls == [(6, 6, 4)]  # computed once per forward pass
    assert len(maps) == 3 and all(torch.equal(w, torch.eye(6).expand(2, 2, 6, 6)) for w in maps)


def test_a_rotary_scheme_transforms_q_and_k_in_every_layer(registry):
    calls = []

    class FlattenQueries(PositionScheme):
        def rotate(self, q, k, offset=0):
            calls.append((tuple(q.shape), tuple(k.shape), offset))
            return torch.zeros_like(q), k  # equal scores: uniform attention

    register_position_scheme("flatten", lambda **_: FlattenQueries())
    model = TinyTransformer(TinyConfig(10, scheme="flatten", **SMALL | {"num_layers": 2}))
    _, maps = model(torch.randint(10, (3, 5)), offset=2, return_attention=True)
    assert calls == [((3, 2, 5, 16), (3, 2, 5, 16), 2)] * 2
    assert all(torch.allclose(w, torch.full((3, 2, 5, 5), 0.2)) for w in maps)


def test_registry_rejects_duplicates_and_bad_factories(registry):
    with pytest.raises(ValueError, match=r"position scheme 'learned' is already registered"):
        register_position_scheme("learned", PositionScheme)
    register_position_scheme("learned", PositionScheme, replace=True)
    assert type(make_position_scheme("learned", dim=4, num_heads=1, max_len=4)) is PositionScheme
    with pytest.raises(ValueError, match=r"name must be a non-empty string, got ''"):
        register_position_scheme("", PositionScheme)
    with pytest.raises(ValueError, match=r"factory for scheme 'x' must be callable, got 3"):
        register_position_scheme("x", 3)
    register_position_scheme("not_a_scheme", lambda **_: torch.nn.Identity())
    with pytest.raises(ValueError, match=r"returned Identity, not a PositionScheme"):
        make_position_scheme("not_a_scheme", dim=4, num_heads=1, max_len=4)


# --- the model ---------------------------------------------------------------


def test_same_seed_same_weights_and_global_rng_untouched():
    state = torch.random.get_rng_state()
    config = TinyConfig(20, scheme="learned", seed=3)
    a, b = TinyTransformer(config), TinyTransformer(config)
    c = TinyTransformer(config.replace(seed=4))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert not torch.equal(a.embed.weight, c.embed.weight)


def test_without_positions_bidirectional_model_is_permutation_equivariant():
    model = TinyTransformer(TinyConfig(20, scheme="none", **SMALL))
    tokens = torch.randint(20, (2, 9), generator=torch.Generator().manual_seed(0))
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(model(tokens[:, perm]), model(tokens)[:, perm], atol=1e-5)
    with_positions = TinyTransformer(TinyConfig(20, scheme="sinusoidal", **SMALL))
    assert not torch.allclose(with_positions(tokens[:, perm]), with_positions(tokens)[:, perm], atol=1e-3)


def test_causal_model_does_not_look_ahead():
    model = TinyTransformer(TinyConfig(20, scheme="sinusoidal", causal=True, **SMALL))
    tokens = torch.randint(20, (1, 8), generator=torch.Generator().manual_seed(0))
    changed = tokens.clone()
    changed[0, 5:] = (changed[0, 5:] + 1) % 20
    assert torch.equal(model(tokens)[:, :5], model(changed)[:, :5])
    assert not torch.allclose(model(tokens)[:, 5:], model(changed)[:, 5:])


def test_learned_scheme_limit_and_offset():
    model = TinyTransformer(TinyConfig(12, scheme="learned", **SMALL))
    assert model(torch.zeros(2, 32, dtype=torch.long)).shape == (2, 32, 12)
    with pytest.raises(IndexError, match=r"position 32 .*max_len=32"):
        model(torch.zeros(1, 30, dtype=torch.long), offset=3)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda m: m(torch.zeros(2, 3)), r"tokens must be integer ids of shape \[batch, seq_len\], got torch.float32"),
        (lambda m: m(torch.zeros(3, dtype=torch.long)), r"got torch.int64 \(3,\)"),
        (lambda m: m(torch.full((1, 3), 12)), r"tokens must lie in \[0, vocab_size = 12\), got values in \[12, 12\]"),
        (lambda m: m(torch.zeros(1, 3, dtype=torch.long), offset=-1), r"offset must be >= 0, got -1"),
    ],
)
def test_bad_model_input(call, match):
    with pytest.raises(ValueError, match=match):
        call(TinyTransformer(TinyConfig(12, **SMALL)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(dim=30, num_heads=4), r"dim must be divisible by num_heads, got dim=30, num_heads=4"),
        (dict(num_layers=0), r"num_layers must be >= 1, got 0"),
        (dict(embed_std=-1.0), r"embed_std must be a finite number > 0, got -1.0"),
        (dict(scheme="learned", scheme_options={"std": 0}), r"std must be a finite number > 0, got 0"),
    ],
)
def test_bad_model_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TinyTransformer(TinyConfig(12, **kwargs))


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: make_task("sort"),
            r"task must be one of 'reverse', 'shift', 'lookup', 'passkey', 'count'; got 'sort'",
        ),
        (lambda: ShiftTask(shift=4).sample(2, 4), r"length must be > shift = 4, got 4"),
        (lambda: LookupTask(max_length=8).sample(2, 9), r"length must be <= max_length = 8, got 9"),
        (lambda: ReverseTask(num_symbols=1), r"num_symbols must be >= 2, got 1"),
        (lambda: ReverseTask().sample(0, 4), r"batch_size must be >= 1, got 0"),
        (lambda: ReverseTask().sample(2, 0), r"length must be >= 1, got 0"),
    ],
)
def test_bad_task_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- training ----------------------------------------------------------------


def test_same_seed_gives_identical_losses():
    task = make_task("reverse")
    runs = []
    for seed in (0, 0, 1):
        model = TinyTransformer(TinyConfig(task.vocab_size, scheme="learned", seed=seed, **SMALL))
        runs.append(train_tiny(model, task, steps=15, length=(4, 8), seed=seed, batch_size=16))
    assert runs[0] == runs[1]  # bit for bit
    assert runs[0] != runs[2]
    assert len(runs[0]) == 15


def test_training_restores_global_settings():
    threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    task = make_task("shift")
    train_tiny(TinyTransformer(TinyConfig(task.vocab_size, **SMALL)), task, steps=2, length=4, batch_size=4)
    assert torch.get_num_threads() == threads and torch.are_deterministic_algorithms_enabled() == det


@pytest.mark.parametrize(
    "length, match", [((8, 4), r"min <= max, got \(8, 4\)"), ([4, 8], r"an int or a \(min, max\) tuple")]
)
def test_bad_training_length(length, match):
    task = make_task("shift")
    with pytest.raises(ValueError, match=match):
        train_tiny(TinyTransformer(TinyConfig(task.vocab_size, **SMALL)), task, steps=1, length=length)


@pytest.mark.parametrize("scheme", ["sinusoidal", "learned"])
@pytest.mark.parametrize("name", ["reverse", "shift", "lookup"])
@pytest.mark.parametrize("seed", [0, 1])
def test_trained_model_beats_chance_by_a_wide_margin(name, scheme, seed):
    task = make_task(name)
    model = TinyTransformer(TinyConfig(task.vocab_size, scheme=scheme, seed=seed, **SMALL))
    losses = train_tiny(model, task, steps=150, length=8, seed=seed)
    assert losses[-1] < 0.5 * losses[0]
    assert tiny_accuracy(model, task, length=8, num_examples=256) > 8 * task.chance  # chance is 1/16


@pytest.mark.parametrize("name", ["reverse", "shift"])
def test_without_positions_the_tasks_stay_hard(name):
    task = make_task(name)
    model = TinyTransformer(TinyConfig(task.vocab_size, scheme="none", **SMALL))
    train_tiny(model, task, steps=150, length=8)
    assert tiny_accuracy(model, task, length=8, num_examples=256) < 0.4


def test_accuracy_by_position_marks_unanswered_positions():
    task = ShiftTask(shift=3)
    model = TinyTransformer(TinyConfig(task.vocab_size, **SMALL))
    per_position = tiny_accuracy_by_position(model, task, length=6, num_examples=8)
    assert per_position[:3].isnan().all() and not per_position[3:].isnan().any()


# --- the configuration ---------------------------------------------------------


def test_tiny_config_defaults_reach_the_model():
    config = TinyConfig(12)
    assert (config.scheme, config.dim, config.num_heads, config.num_layers, config.max_len) == (
        "sinusoidal",
        64,
        2,
        2,
        64,
    )
    assert (config.causal, config.mlp_ratio, config.embed_std, config.seed) == (False, 2, 0.3, 0)
    assert config.scheme_options == {} and config.head_dim == 32
    model = TinyTransformer(config)
    assert model.config is config
    assert (model.vocab_size, model.dim, model.num_heads, model.max_len, model.causal, model.scheme_name) == (
        12,
        64,
        2,
        64,
        False,
        "sinusoidal",
    )
    assert model.embed.weight.shape == (12, 64) and model.head.out_features == 12 and len(model.blocks) == 2
    assert model.blocks[0].mlp[0].out_features == 128 and model.blocks[0].attn.head_dim == 32
    assert abs(model.embed.weight.std().item() - 0.3) < 0.05


def test_tiny_config_is_frozen_keyword_only_and_copies_its_options():
    options = {"std": 0.5}
    config = TinyConfig(12, scheme="learned", scheme_options=options)
    options["std"] = 0.0
    assert config.scheme_options == {"std": 0.5}
    assert abs(TinyTransformer(config).scheme.table.weight.std().item() - 0.5) < 0.2
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.dim = 32
    with pytest.raises(TypeError):
        TinyConfig(12, "learned")
    assert config.replace(seed=1) == TinyConfig(12, scheme="learned", seed=1, scheme_options={"std": 0.5})
    assert TinyConfig(12, scheme_options=None) == TinyConfig(12)


def test_the_model_takes_one_config():
    with pytest.raises(
        ValueError,
        match=r"config must be a TinyConfig, got 12 \(int\); build the model as "
        r"TinyTransformer\(TinyConfig\(vocab_size, scheme=\.\.\., \.\.\.\)\)",
    ):
        TinyTransformer(12)
    with pytest.raises(TypeError):
        TinyTransformer(12, scheme="learned")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(vocab_size=0), r"vocab_size must be >= 1, got 0"),
        (dict(vocab_size=12, max_len=0), r"max_len must be >= 1, got 0"),
        (dict(vocab_size=12, mlp_ratio=0), r"mlp_ratio must be >= 1, got 0"),
        (dict(vocab_size=12, causal=1), r"causal must be True or False, got 1"),
        (dict(vocab_size=12, seed=-1), r"seed must be >= 0, got -1"),
        (dict(vocab_size=12, scheme="rotary"), r"scheme must be one of .*'rope'.*; got 'rotary'"),
        (
            dict(vocab_size=12, scheme="rope", scheme_options={"bsae": 500}),
            r"position scheme 'rope' has no option\(s\) \['bsae'\]; it accepts 'base', 'layout'",
        ),
        (
            dict(vocab_size=12, scheme="learned", scheme_options={"max_len": 8}),
            r"\['max_len'\] are set by the model, not by scheme options",
        ),
        (dict(vocab_size=12, scheme_options=[("base", 500.0)]), r"scheme options must be a mapping"),
    ],
)
def test_bad_tiny_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TinyConfig(**kwargs)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int32])
def test_token_ids_of_any_integer_dtype_give_the_same_logits(dtype):
    model = TinyTransformer(TinyConfig(16, **SMALL)).eval()
    tokens = torch.randint(16, (2, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(model(tokens.to(dtype)), model(tokens))
