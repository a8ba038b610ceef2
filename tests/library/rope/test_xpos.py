"""xPos: RoPE times zeta_i ** ((n - c) / B) on queries and its inverse on keys, against rotary-embedding-torch."""

import math

import pytest
import torch
from helpers import rand
from hypothesis import given, settings
from hypothesis import strategies as st
from rotary_embedding_torch import RotaryEmbedding as PeerRotaryEmbedding

from posenc import apply_rope, rope_cos_sin
from posenc.rope.xpos import XPosRotaryEmbedding, apply_xpos, xpos_scales, xpos_zeta

SHAPES = [(8, 1), (16, 7), (32, 64), (64, 300), (128, 1024), (96, 2048)]  # (head_dim, seq_len)


def peer_float64(q, k):
    """rotary-embedding-torch in float64: its frequencies given in float64 (its own formula), no cache."""
    d = q.shape[-1]
    freqs = 1.0 / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    peer = PeerRotaryEmbedding(d, use_xpos=True, custom_freqs=freqs, cache_if_possible=False).double()
    return peer.rotate_queries_and_keys(q, k)


@pytest.mark.parametrize(("head_dim", "seq_len"), SHAPES)
def test_equal_to_rotary_embedding_torch_in_float64(head_dim, seq_len):
    q, k = rand(2, 2, 3, seq_len, head_dim, seed=head_dim + seq_len)
    theirs_q, theirs_k = peer_float64(q, k)
    ours_q, ours_k = apply_xpos(q, k, layout="interleaved")
    # its zeta is a float32 buffer (rounded before .double()): relative 6e-8 on zeta, times the power
    assert torch.allclose(ours_q, theirs_q, rtol=1e-6, atol=1e-12)
    assert torch.allclose(ours_k, theirs_k, rtol=1e-6, atol=1e-12)


def test_the_largest_float64_difference_from_rotary_embedding_torch():
    largest = 0.0
    for head_dim, seq_len in SHAPES:
        q, k = rand(2, 2, 3, seq_len, head_dim, seed=head_dim + seq_len)
        for ours, theirs in zip(apply_xpos(q, k, layout="interleaved"), peer_float64(q, k), strict=True):
            largest = max(largest, ((ours - theirs).abs() / theirs.abs().clamp_min(1e-3)).max().item())
    assert largest < 1e-6, largest  # seen: 2.0e-7


@pytest.mark.parametrize(("head_dim", "seq_len"), [(16, 7), (32, 64), (64, 256)])
def test_equal_to_rotary_embedding_torch_as_it_runs_in_float32(head_dim, seq_len):
    q, k = rand(2, 1, 2, seq_len, head_dim, seed=seq_len, dtype=torch.float32)
    theirs = PeerRotaryEmbedding(head_dim, use_xpos=True).rotate_queries_and_keys(q, k)
    ours = apply_xpos(q, k, layout="interleaved")
    for mine, their in zip(ours, theirs, strict=True):
        assert mine.dtype == torch.float32
        # its angles are float32: position * theta rounded, about seq_len * 6e-8 radians
        assert torch.allclose(mine, their, atol=2e-7 * seq_len * their.abs().max().item(), rtol=0)


def test_the_module_and_the_function_agree_with_offsets_and_batched_positions():
    q, k = rand(2, 2, 4, 5, 16, seed=1)
    module = XPosRotaryEmbedding(16, scale_base=64.0)
    assert "scale_base=64" in repr(module)
    by_offset = module(q, k, offset=7)
    by_positions = module(q, k, torch.arange(7, 12))
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(by_offset, by_positions, strict=True))
    rows = torch.stack([torch.arange(5), torch.arange(7, 12)])  # [b, s]: one row per sequence
    batched_q, _ = module(q, k, rows, center=3.0)
    for row in range(2):
        alone_q, _ = apply_xpos(q[row], k[row], rows[row], scale_base=64.0, center=3.0)
        assert torch.allclose(batched_q[row], alone_q, atol=1e-12)


def test_zeta_is_the_papers_and_the_peers():
    zeta = xpos_zeta(8)
    i = torch.arange(4, dtype=torch.float64)
    assert torch.allclose(zeta, (i / 4 + 0.4) / 1.4, rtol=1e-15)  # (i / (d/2) + gamma) / (1 + gamma)
    peer = (torch.arange(0, 8, 2, dtype=torch.float64) + 0.4 * 8) / (1.4 * 8)  # the peer's line, in float64
    assert torch.allclose(zeta, peer, rtol=1e-15)
    assert zeta[0] == pytest.approx(0.4 / 1.4) and torch.all(zeta < 1)
    # each scale is zeta_i ** ((n - c) / B), on both channels of pair i
    scales = xpos_scales(torch.tensor([0, 512, 1024]), 8, center=512.0, dtype=torch.float64)
    assert torch.allclose(scales[:, :4], torch.stack([1 / zeta, torch.ones(4, dtype=torch.float64), zeta]))
    assert torch.equal(scales[:, :4], scales[:, 4:])
    interleaved = xpos_scales(torch.tensor([1024]), 8, center=512.0, layout="interleaved", dtype=torch.float64)
    assert torch.allclose(interleaved[0], zeta.repeat_interleave(2))


def xpos_scores(head_dim: int, seq_len: int, **kwargs) -> torch.Tensor:
    """Scores [n, m] of one query vector and one key vector repeated at every position."""
    q, k = rand(2, head_dim, seed=head_dim)
    q_rot, k_rot = apply_xpos(q.expand(seq_len, head_dim), k.expand(seq_len, head_dim), **kwargs)
    return q_rot @ k_rot.T


@settings(derandomize=True, deadline=None, database=None, max_examples=40)
@given(
    half=st.integers(1, 16),
    seq_len=st.integers(2, 40),
    offset=st.integers(0, 5000),
    scale_base=st.floats(16.0, 4096.0),
    gamma=st.floats(0.05, 2.0),
    center=st.floats(-3000.0, 3000.0),
    layout=st.sampled_from(["half", "interleaved"]),
)
def test_scores_depend_on_the_distance_only_and_not_on_the_centre(
    half, seq_len, offset, scale_base, gamma, center, layout
):
    kwargs = {"offset": offset, "scale_base": scale_base, "gamma": gamma, "layout": layout}
    scores = xpos_scores(2 * half, seq_len, **kwargs)
    # Toeplitz: the score of (n, m) equals that of (n + 1, m + 1)
    assert torch.allclose(scores[1:, 1:], scores[:-1, :-1], rtol=1e-9, atol=1e-9)
    # any center in range gives the same scores; one so far that a scale leaves float64 is refused, never NaN
    far = max(abs(offset - center), abs(offset + seq_len - 1 - center)) / scale_base
    reach = far * -math.log(xpos_zeta(2 * half, gamma=gamma)[0].item())
    if reach > -math.log(torch.finfo(torch.float64).tiny):
        with pytest.raises(ValueError, match=r"positions must lie within .* of center"):
            xpos_scores(2 * half, seq_len, center=center, **kwargs)
    else:
        assert torch.allclose(xpos_scores(2 * half, seq_len, center=center, **kwargs), scores, rtol=1e-9, atol=1e-9)


def test_a_center_far_from_the_positions_is_refused_not_nan():
    q, k = rand(2, 2, seed=2)
    with pytest.raises(
        ValueError, match=r"positions must lie within 250 \* scale_base of center = 0 .*the farthest is 250\.6"
    ):
        apply_xpos(q.expand(2, 2), k.expand(2, 2), offset=4008, scale_base=16.0, gamma=0.0625, center=0.0)


def test_each_pair_of_the_score_is_ropes_times_zeta_to_the_distance_over_b():
    d, length, scale_base = 16, 600, 512.0
    q, k = rand(2, d, seed=3)
    positions = torch.arange(length)
    q_x, k_x = apply_xpos(q.expand(length, d), k.expand(length, d), scale_base=scale_base)
    cos, sin = rope_cos_sin(positions, d, dtype=torch.float64)
    q_r, k_r = apply_rope(q.expand(length, d), cos, sin), apply_rope(k.expand(length, d), cos, sin)
    # per pair i (half layout: channels i and i + d/2): the query at n = length - 1, the keys at m = 0 .. n
    pair = lambda a, b: (a.unflatten(-1, (2, d // 2)) * b.unflatten(-1, (2, d // 2))).sum(-2)  # noqa: E731
    xpos_pairs = pair(q_x[-1].expand(length, d), k_x)  # [m, d/2]
    rope_pairs = pair(q_r[-1].expand(length, d), k_r)
    distance = (length - 1 - positions).double()[:, None]  # n - m >= 0
    assert torch.allclose(xpos_pairs, rope_pairs * xpos_zeta(d) ** (distance / scale_base), atol=1e-12)
    # hence a bound that decays with the distance: |score| <= sum_i zeta_i^(r/B) |q_i| |k_i|
    norms = q.unflatten(-1, (2, d // 2)).norm(dim=-2) * k.unflatten(-1, (2, d // 2)).norm(dim=-2)
    bound = (xpos_zeta(d) ** (distance / scale_base) * norms).sum(-1)  # [m]
    assert torch.all(xpos_pairs.sum(-1).abs() <= bound + 1e-12)
    assert torch.all(bound.flip(0).diff() < 0)  # strictly smaller at every larger distance


def test_float32_and_float64_inputs_keep_their_dtype():
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        q, k = rand(2, 1, 3, 8, seed=0, dtype=dtype)
        q_x, k_x = XPosRotaryEmbedding(8)(q, k)
        assert q_x.dtype == k_x.dtype == dtype and q_x.shape == q.shape


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: xpos_zeta(7), r"head_dim must be even .*got 7"),
        (lambda: xpos_zeta(8, gamma=0.0), r"gamma must be a finite number > 0, got 0.0"),
        (lambda: xpos_scales(torch.arange(3), 8, scale_base=0), r"scale_base must be a finite number > 0, got 0"),
        (lambda: xpos_scales(torch.arange(3), 8, center=math.nan), r"center must be a finite number, got nan"),
        (lambda: xpos_scales(torch.arange(3), 8, layout="concat"), r"layout must be one of 'half', 'interleaved'"),
        (lambda: xpos_scales(torch.tensor([True]), 8), r"positions must hold real numbers, got dtype torch.bool"),
        (lambda: XPosRotaryEmbedding(7), r"head_dim must be even .*got 7"),
        (lambda: XPosRotaryEmbedding(8, base=1.0), r"base must be a finite number > 1, got 1.0"),
        (lambda: XPosRotaryEmbedding(8, gamma=-1), r"gamma must be a finite number > 0, got -1"),
        (lambda: XPosRotaryEmbedding(8, scale_base=math.inf), r"scale_base must be a finite number > 0, got inf"),
        (
            lambda: XPosRotaryEmbedding(8)(torch.zeros(1, 3, 6), torch.zeros(1, 3, 6)),
            r"q must have shape \[\.\.\., seq_len, 8\]",
        ),
        (lambda: apply_xpos(torch.zeros(3, 7), torch.zeros(3, 7)), r"head_dim \(q.shape\[-1\]\) must be even"),
        (lambda: apply_xpos(torch.zeros(3, 8), torch.zeros(4, 8)), r"k has length 4 \(dim -2\), expected q's"),
        (lambda: apply_xpos(torch.zeros(3, 8), torch.zeros(3, 8), offset=-1), r"offset must be >= 0, got -1"),
        (lambda: apply_xpos(torch.zeros(3, 8), torch.zeros(3, 8), torch.arange(4)), r"positions must have shape \[3\]"),
    ],
)
def test_bad_input_raises_naming_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    "positions",
    [
        torch.arange(123, 128, dtype=torch.int8),  # 123 + 127 + 1 wraps in int8
        torch.arange(200, 245, dtype=torch.uint8),
        torch.arange(2**31 - 5, 2**31, dtype=torch.int32),  # the sum overflows int32
    ],
    ids=["int8", "uint8", "int32-near-max"],
)
def test_the_default_centre_does_not_depend_on_the_positions_dtype(positions):
    """The default centre is the middle position, formed in float64: narrow integer positions give
    the same outputs as the same positions in int64."""
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 1, 2, positions.numel(), 8, generator=gen, dtype=torch.float64)
    ours = apply_xpos(q, k, positions=positions)
    wide = apply_xpos(q, k, positions=positions.long())
    assert all(torch.equal(a, b) for a, b in zip(ours, wide, strict=True))
