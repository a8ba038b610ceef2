"""Chapter 6's claim about a KV cache: keys are rotated once, at their own position, and never again."""

import torch

from posenc import apply_rope, rope_cos_sin, scaled_dot_product_attention


def test_decoding_with_a_cache_of_rotated_keys_equals_one_pass():
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(3, 2, 3, 10, 8, generator=g, dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.arange(10), 8, dtype=torch.float64)
    full, _ = scaled_dot_product_attention(apply_rope(q, cos, sin), apply_rope(k, cos, sin), v, causal=True)
    cached_k, outputs = [], []
    for t in range(10):
        c, s = cos[t : t + 1], sin[t : t + 1]
        cached_k.append(apply_rope(k[..., t : t + 1, :], c, s))
        out, _ = scaled_dot_product_attention(
            apply_rope(q[..., t : t + 1, :], c, s), torch.cat(cached_k, -2), v[..., : t + 1, :]
        )
        outputs.append(out)
    assert torch.allclose(torch.cat(outputs, -2), full, rtol=0, atol=1e-12)


def test_a_common_extra_angle_changes_no_score():
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(2, 6, 16, generator=g, dtype=torch.float64)
    cos, sin = rope_cos_sin(torch.arange(6), 16, dtype=torch.float64)
    shift_cos, shift_sin = rope_cos_sin(torch.full((6,), 5), 16, dtype=torch.float64)
    qr, kr = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    moved = apply_rope(qr, shift_cos, shift_sin) @ apply_rope(kr, shift_cos, shift_sin).T
    assert torch.allclose(moved, qr @ kr.T, atol=1e-12)
