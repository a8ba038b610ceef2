"""RoPE beyond one dimension: axial RoPE against rotary-embedding-torch and Qwen2-VL's vision tower,
M-RoPE against transformers' Qwen2-VL and Qwen3-VL rotary modules, identities as properties, bad input."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rotary_embedding_torch import RotaryEmbedding as LucidrainsRotary
from rotary_embedding_torch import apply_rotary_emb
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig, Qwen2VLVisionConfig
from transformers.models.qwen2_vl.modeling_qwen2_vl import (
    Qwen2VLModel,
    Qwen2VLRotaryEmbedding,
    Qwen2VLVisionRotaryEmbedding,
    apply_rotary_pos_emb,
)
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding
from transformers.vision_utils import get_vision_position_ids

from posenc import ROPE_LAYOUTS, apply_rope, rope_cos_sin
from posenc.rope.nd import AxialRotaryEmbedding, axial_cos_sin, axial_rope_angles, mrope_cos_sin, mrope_pair_axes

F64 = torch.float64
PROPERTY = settings(derandomize=True, deadline=None, database=None, max_examples=60)

# ---------------------------------------------------------------------------
# Axial RoPE against rotary-embedding-torch (interleaved) and Qwen2-VL's vision tower (half)
# ---------------------------------------------------------------------------

# (grid, axis_dim = rotary-embedding-torch's dim, head_dim): square, oblong, one-cell, 3-D, partial rotation
AXIAL_CASES = [
    ((16, 16), 32, 64),
    ((5, 7), 16, 64),
    ((3, 9), 8, 20),
    ((1, 1), 4, 8),
    ((2, 3, 4), 8, 24),
    ((14, 14), 16, 48),
]


@pytest.mark.parametrize("freqs_for, max_freq", [("lang", 10.0), ("pixel", 10.0), ("pixel", 256.0)])
@pytest.mark.parametrize("grid, axis_dim, head_dim", AXIAL_CASES)
def test_axial_equals_rotary_embedding_torch(grid, axis_dim, head_dim, freqs_for, max_freq):
    peer = LucidrainsRotary(axis_dim, freqs_for=freqs_for, max_freq=max_freq)
    x = torch.randn(2, 3, *grid, head_dim, generator=torch.Generator().manual_seed(head_dim))
    theirs = apply_rotary_emb(peer.get_axial_freqs(*grid), x)  # rotates the first len(grid) * axis_dim channels
    kw = {"axis_dim": axis_dim, "freqs_for": freqs_for, "max_freq": max_freq}
    # float32 angles, as the peer forms them: equal but for the last bit of the "lang" frequencies
    cos, sin = axial_cos_sin(grid, head_dim, angle_dtype=torch.float32, **kw)  # [*grid, d]
    assert torch.allclose(apply_rope(x, cos, sin, layout="interleaved"), theirs, atol=2e-6, rtol=0)
    # float64 angles: differ from the peer's float32 angles by their rounding (angles up to max_freq/2 * pi)
    cos, sin = axial_cos_sin(grid, head_dim, **kw)
    ours = apply_rope(x, cos, sin, layout="interleaved")
    assert torch.allclose(ours, theirs, atol=1e-6 * (10 + max_freq), rtol=0)
    assert torch.equal(ours[..., len(grid) * axis_dim :], x[..., len(grid) * axis_dim :])  # the rest untouched


@pytest.mark.parametrize("freqs_for", ["lang", "pixel"])
@pytest.mark.parametrize("offsets", [(0, 0), (3, 0), (0.5, -2.0)])
def test_axial_offsets_equal_rotary_embedding_torch(freqs_for, offsets):
    peer = LucidrainsRotary(16, freqs_for=freqs_for, cache_if_possible=False)
    theirs = peer.get_axial_freqs(6, 6, offsets=offsets)  # [6, 6, 32]: one angle per channel
    ours = axial_rope_angles(
        _grid(6, 6, freqs_for, offsets), 16, freqs_for=freqs_for, angle_dtype=torch.float32
    )  # [6, 6, 16]: one per pair
    assert torch.allclose(ours.repeat_interleave(2, dim=-1), theirs, atol=1e-5, rtol=1e-6)
    cos, _ = axial_cos_sin((6, 6), 32, freqs_for=freqs_for, offsets=offsets, angle_dtype=torch.float32)
    assert torch.allclose(cos, theirs.cos(), atol=1e-6, rtol=0)


def _grid(h, w, freqs_for, offsets=(0, 0)):
    """Positions [h, w, 2] as rotary-embedding-torch places them."""
    line = (lambda n: torch.linspace(-1, 1, n)) if freqs_for == "pixel" else (lambda n: torch.arange(n).float())
    rows, cols = torch.meshgrid(line(h) + offsets[0], line(w) + offsets[1], indexing="ij")
    return torch.stack((rows, cols), dim=-1)


@pytest.mark.parametrize("grid, head_dim", [((6, 10), 64), ((4, 4), 80), ((1, 7), 16)])
def test_axial_half_equals_qwen2_vl_vision_rotary(grid, head_dim):
    """Qwen2-VL's vision tower: axial RoPE, half layout, head_dim / 2 channels per axis."""
    peer = Qwen2VLVisionRotaryEmbedding(Qwen2VLVisionConfig(embed_dim=4 * head_dim, num_heads=4))
    pos = get_vision_position_ids(torch.tensor([[1, *grid]]), 1)  # [H * W, 2], raster order
    their_cos, their_sin = peer(torch.zeros(1), pos)  # [H * W, d]
    cos, sin = axial_cos_sin(grid, head_dim, layout="half", angle_dtype=torch.float32)  # [H, W, d]
    assert torch.allclose(cos.flatten(0, 1), their_cos, atol=1e-6, rtol=0)  # [H, W, d] -> [H * W, d]
    assert torch.allclose(sin.flatten(0, 1), their_sin, atol=1e-6, rtol=0)
    from_positions = axial_cos_sin(pos, head_dim, layout="half")  # positions [N, 2] give the same
    assert torch.allclose(from_positions[0], their_cos, atol=1e-6, rtol=0)


def test_axial_module_equals_functional_and_peer():
    q, k = torch.randn(2, 2, 4, 5, 7, 64, generator=torch.Generator().manual_seed(0))  # [b, h, H, W, d]
    module = AxialRotaryEmbedding(64, axis_dim=16, freqs_for="pixel", max_freq=64)
    rq, rk = module(q, k)
    cos, sin = axial_cos_sin((5, 7), 64, axis_dim=16, freqs_for="pixel", max_freq=64)
    assert torch.equal(rq, apply_rope(q, cos, sin, layout="interleaved"))
    assert torch.equal(rk, apply_rope(k, cos, sin, layout="interleaved"))
    theirs = apply_rotary_emb(LucidrainsRotary(16, freqs_for="pixel", max_freq=64).get_axial_freqs(5, 7), q)
    assert torch.allclose(rq, theirs, atol=1e-4, rtol=0)
    assert rq.dtype == q.dtype and module(q.double(), k.double())[0].dtype == F64
    assert torch.equal(module.to(torch.float16)(q, k)[0], rq)  # the tables are computed, not cast
    assert "freqs_for='pixel'" in repr(module)


def test_axial_module_three_axes_and_default_split():
    module = AxialRotaryEmbedding(48, num_axes=3)  # 16 channels per axis
    x = torch.randn(1, 2, 3, 4, 48, generator=torch.Generator().manual_seed(1), dtype=F64)
    theirs = apply_rotary_emb(LucidrainsRotary(16).get_axial_freqs(2, 3, 4).double(), x)
    assert torch.allclose(module(x, x)[0], theirs, atol=1e-6, rtol=0)


def test_axial_module_built_on_meta_works_after_to_empty():
    with torch.device("meta"):
        lazy = AxialRotaryEmbedding(32, freqs_for="pixel")
    lazy = lazy.to_empty(device="cpu")
    q = torch.randn(1, 3, 4, 32, generator=torch.Generator().manual_seed(2))
    assert torch.equal(lazy(q, q)[0], AxialRotaryEmbedding(32, freqs_for="pixel")(q, q)[0])
    assert lazy.cos_sin((3, 4))[0].device.type == "cpu" and not lazy.state_dict()


# ---------------------------------------------------------------------------
# Axial identities
# ---------------------------------------------------------------------------


@PROPERTY
@given(
    st.sampled_from(ROPE_LAYOUTS),
    st.sampled_from(["lang", "pixel"]),
    st.lists(st.integers(-20, 20), min_size=6, max_size=6),
    st.integers(0, 1000),
)
def test_axial_score_depends_only_on_row_and_column_differences(layout, freqs_for, ints, seed):
    q, k = torch.randn(2, 32, generator=torch.Generator().manual_seed(seed), dtype=F64)
    r1, c1, r2, c2, dr, dc = ints
    pos = torch.tensor([[r1, c1], [r2, c2], [r1 + dr, c1 + dc], [r2 + dr, c2 + dc]], dtype=F64)  # [4, 2]
    cos, sin = axial_cos_sin(pos, 32, freqs_for=freqs_for, layout=layout, dtype=F64)  # [4, d]
    rq = apply_rope(q.expand(4, 32), cos, sin, layout=layout)
    rk = apply_rope(k.expand(4, 32), cos, sin, layout=layout)
    # the pair (0, 1) shifted by (dr, dc) is the pair (2, 3): same score
    assert abs(rq[0] @ rk[1] - rq[2] @ rk[3]) < 1e-10 * (1 + q.norm() * k.norm())
    assert torch.allclose(rq.norm(dim=-1), q.norm().expand(4), rtol=1e-12)  # a rotation


def test_axial_blocks_turn_with_their_own_axis():
    cos, _ = axial_cos_sin((3, 4), 16)  # interleaved: channels 0..7 with the row, 8..15 with the column
    assert torch.equal(cos[:, 0, :8], cos[:, 3, :8])  # same row, any column
    assert torch.equal(cos[0, :, 8:], cos[2, :, 8:])  # same column, any row
    assert torch.all(cos[0, 0] == 1)  # the origin is not rotated


# ---------------------------------------------------------------------------
# M-RoPE against transformers
# ---------------------------------------------------------------------------

# (peer module, config class, mrope_section, interleaved, rope_theta, scaling)
MROPE_CASES = [
    (Qwen2VLRotaryEmbedding, Qwen2VLTextConfig, [16, 24, 24], False, 1e6, None),
    (Qwen2VLRotaryEmbedding, Qwen2VLTextConfig, [2, 3, 3], False, 1e4, None),
    (Qwen2VLRotaryEmbedding, Qwen2VLTextConfig, [8, 12, 12], False, 1e4, {"rope_type": "linear", "factor": 2.0}),
    (Qwen3VLTextRotaryEmbedding, Qwen3VLTextConfig, [24, 20, 20], True, 5e6, None),
    (Qwen3VLTextRotaryEmbedding, Qwen3VLTextConfig, [4, 4, 4], True, 1e4, None),
]


def _peer(module_cls, config_cls, section, theta, scaling):
    params = {"rope_type": "default", "rope_theta": theta, "mrope_section": section, **(scaling or {})}
    head_dim = 2 * sum(section)
    config = config_cls(hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim, rope_parameters=params)
    return module_cls(config)


def _mixed_positions():
    """[3, 1, s] as Qwen2-VL's get_rope_index builds them: 5 text tokens, a 4 x 6 image, 3 text tokens."""
    text = torch.arange(5).expand(3, 5)  # t = h = w
    image = Qwen2VLModel.get_vision_position_ids(None, 5, torch.tensor([1, 4, 6]))  # [3, 24]
    after = torch.arange(3).expand(3, 3) + 5 + 6  # resumes after max(h, w)
    return torch.cat((text, image, after), dim=1).unsqueeze(1)  # [3, 1, 32]


@pytest.mark.parametrize("module_cls, config_cls, section, interleaved, theta, scaling", MROPE_CASES)
@pytest.mark.parametrize("kind", ["mixed", "random"])
def test_mrope_equals_transformers(module_cls, config_cls, section, interleaved, theta, scaling, kind):
    peer, d = _peer(module_cls, config_cls, section, theta, scaling), 2 * sum(section)
    g = torch.Generator().manual_seed(d)
    pos = _mixed_positions() if kind == "mixed" else torch.randint(0, 2000, (3, 2, 17), generator=g)  # [3, b, s]
    q, k = torch.randn(2, pos.shape[1], 4, pos.shape[2], d, generator=g)  # [b, h, s, d]
    their_cos, their_sin = peer(q, pos)  # [b, s, d]
    their_q, their_k = apply_rotary_pos_emb(q, k, their_cos, their_sin)
    kw = {"base": theta, "scaling": scaling, "interleaved": interleaved}
    cos, sin = mrope_cos_sin(pos, d, section, angle_dtype=torch.float32, **kw)  # [b, s, d]
    # Both form float32 angles from frequencies that differ in the last bits: a few roundings of pos * freq.
    tol = 1e-6 * (1 + pos.amax(0)[..., None])  # [b, s, 1]
    assert torch.all((cos - their_cos).abs() <= tol) and torch.all((sin - their_sin).abs() <= tol)
    cos, sin = mrope_cos_sin(pos, d, section, **kw)  # float64 angles
    ours_q = apply_rope(q, cos.unsqueeze(1), sin.unsqueeze(1))  # [b, s, d] -> [b, 1, s, d]
    ours_k = apply_rope(k, cos.unsqueeze(1), sin.unsqueeze(1))
    scale = 1e-6 * (1 + pos.amax(0)[:, None, :, None]) * 8  # [b, 1, s, 1]; |q| entries below ~8
    assert torch.all((ours_q - their_q).abs() <= scale) and torch.all((ours_k - their_k).abs() <= scale)


def test_mrope_pair_axes_qwen_sections():
    contiguous = mrope_pair_axes([16, 24, 24])
    assert contiguous.tolist() == [0] * 16 + [1] * 24 + [2] * 24
    interleaved = mrope_pair_axes([24, 20, 20], interleaved=True)
    assert interleaved[:6].tolist() == [0, 1, 2, 0, 1, 2] and interleaved[60:].tolist() == [0, 0, 0, 0]
    assert torch.bincount(interleaved).tolist() == [24, 20, 20]


@PROPERTY
@given(
    st.lists(st.integers(0, 12), min_size=1, max_size=4).filter(lambda s: sum(s) > 0),
    st.sampled_from(ROPE_LAYOUTS),
    st.lists(st.integers(-500, 10**6), min_size=1, max_size=12),
)
def test_mrope_of_text_tokens_is_1d_rope(section, layout, positions):
    """t = h = w: every pair turns by the one position, whatever section it is in."""
    d, pos = 2 * sum(section), torch.tensor(positions)
    stacked = pos.expand(len(section), -1)  # [n, s]
    for interleaved in (False, True):
        try:
            cos, sin = mrope_cos_sin(stacked, d, section, interleaved=interleaved, layout=layout, dtype=F64)
        except ValueError:  # an interleaving these sections cannot have
            assert interleaved
            continue
        plain_cos, plain_sin = rope_cos_sin(pos, d, layout=layout, dtype=F64)
        assert torch.equal(cos, plain_cos) and torch.equal(sin, plain_sin)


@PROPERTY
@given(st.lists(st.integers(-50, 50), min_size=9, max_size=9), st.integers(0, 1000))
def test_mrope_score_depends_only_on_axis_differences(ints, seed):
    q, k = torch.randn(2, 128, generator=torch.Generator().manual_seed(seed), dtype=F64)
    a, b, shift = torch.tensor(ints, dtype=F64).view(3, 3)  # two (t, h, w) positions and a shift
    pos = torch.stack((a, b, a + shift, b + shift), dim=1)  # [3, 4]
    cos, sin = mrope_cos_sin(pos, 128, [16, 24, 24], dtype=F64)  # [4, d]
    rq, rk = apply_rope(q.expand(4, 128), cos, sin), apply_rope(k.expand(4, 128), cos, sin)
    assert abs(rq[0] @ rk[1] - rq[2] @ rk[3]) < 1e-10 * (1 + q.norm() * k.norm())


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

BAD = [
    (lambda: axial_cos_sin((4, 4), 10), ValueError, r"head_dim=10 does not split into 2 even blocks; pass axis_dim"),
    (lambda: axial_cos_sin((4, 4), 16, axis_dim=10), ValueError, r"axis_dim \* num_axes must be <= head_dim \(16\)"),
    (lambda: axial_cos_sin((4, 4), 16, axis_dim=3), ValueError, r"axis_dim must be even .*got 3"),
    (lambda: axial_cos_sin((4, 0), 16), ValueError, r"shape\[1\] must be >= 1, got 0"),
    (lambda: axial_cos_sin(4, 16), ValueError, r"shape must be a non-empty tuple of axis lengths .*got 4"),
    (lambda: axial_cos_sin((4, 4), 16, freqs_for="text"), ValueError, r"freqs_for must be one of 'lang', 'pixel'"),
    (lambda: axial_cos_sin((4, 4), 16, offsets=(1,)), ValueError, r"offsets must have one number per axis \(2\)"),
    (lambda: axial_cos_sin((4, 4), 16, layout="concat"), ValueError, r"layout must be one of 'half', 'interleaved'"),
    (lambda: axial_rope_angles(torch.zeros(3, 2), 8, max_freq=1.0), ValueError, r"max_freq must be a finite number"),
    (lambda: axial_rope_angles(torch.zeros(3, 2), 8, base=1.0), ValueError, r"base must be a finite number > 1"),
    (lambda: axial_rope_angles(torch.tensor(1.0), 8), ValueError, r"positions must have shape \[\.\.\., num_axes\]"),
    (lambda: AxialRotaryEmbedding(16)(torch.zeros(4, 16), torch.zeros(4, 16)), ValueError, r"q must have shape"),
    (
        lambda: AxialRotaryEmbedding(16)(torch.zeros(2, 3, 16), torch.zeros(3, 2, 16)),
        ValueError,
        r"k has grid \(3, 2\), expected q's grid \(2, 3\)",
    ),
    (lambda: mrope_cos_sin(torch.zeros(3, 1, 4), 128, [16, 24, 16]), ValueError, r"must sum to head_dim / 2 = 64"),
    (lambda: mrope_cos_sin(torch.zeros(2, 1, 4), 128, [16, 24, 24]), ValueError, r"position_ids must have shape \[3"),
    (lambda: mrope_cos_sin(torch.zeros(3, 4), 127, [16, 24, 24]), ValueError, r"head_dim must be even"),
    (lambda: mrope_pair_axes([16, -1, 24]), ValueError, r"mrope_section\[1\] must be >= 0, got -1"),
    (lambda: mrope_pair_axes("16,24,24"), ValueError, r"mrope_section must be a non-empty list of ints"),
    (lambda: mrope_pair_axes([4, 10, 10], interleaved=True), ValueError, r"cannot be interleaved over 24 pairs"),
]


@pytest.mark.parametrize("call, error, match", BAD)
def test_bad_input_names_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize(
    "scaling",
    [
        {"rope_type": "longrope", "factor": 4.0, "original_max_position_embeddings": 16,
         "short_factor": [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0],
         "long_factor": [2.0, 2.4, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]},
        {"type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 16},  # transformers' older spelling
    ],
    ids=["longrope", "legacy-dynamic"],
)  # fmt: skip
def test_mrope_of_text_tokens_scales_by_length_as_1d_rope(scaling):
    """Past the original length, M-RoPE of text tokens (all three rows alike) uses the long factors, or
    the dynamic base, exactly as 1-D RoPE does for the same positions."""
    positions = torch.arange(40, 44)
    ours = mrope_cos_sin(positions.expand(3, -1), 16, [2, 3, 3], scaling=scaling, dtype=torch.float64)
    one_d = rope_cos_sin(positions, 16, scaling=scaling, dtype=torch.float64)
    for a, b in zip(ours, one_d, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    plain = rope_cos_sin(positions, 16, dtype=torch.float64)
    assert (ours[0] - plain[0]).abs().max() > 1e-3  # and the scaling did something


def test_axial_offsets_as_a_nested_list_are_read_like_a_flat_one():
    """R9: offsets=[[0, 0]] went into the table cache's key as an unhashable list (a raw TypeError)."""
    rope = AxialRotaryEmbedding(8)
    q = torch.randn(1, 1, 2, 3, 8)
    nested, flat = rope(q, q, offsets=[[1, 2]]), rope(q, q, offsets=(1, 2))
    torch.testing.assert_close(nested, flat)
    torch.testing.assert_close(rope(q, q, offsets=torch.tensor([1, 2]))[0], flat[0])


def test_an_axial_grid_past_the_table_bound_is_refused_before_allocating():
    """H3: a (100000, 100000) grid asked for 8 * 10**10 table entries (a memory error after a long wait)."""
    with pytest.raises(ValueError, match=r"grid = \(100000, 100000\) needs a table of 80000000000 elements, more than"):
        axial_cos_sin((100000, 100000), 8)
    with pytest.raises(ValueError, match=r"MAX_TABLE_ELEMENTS = 2\*\*31"):
        AxialRotaryEmbedding(8).cos_sin((100000, 100000))
