"""Chapter 6's derivation of RoPE: a rotation by m * theta per pair is what makes the score a function of m - n."""

import cmath

import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import apply_rope, rope_cos_sin

F64 = torch.float64
positions = st.integers(-4096, 4096)
coordinates = st.floats(-10, 10, allow_nan=False, allow_infinity=False)
vectors_2d = st.tuples(coordinates, coordinates).map(lambda v: torch.tensor(v, dtype=F64))
head_dims = st.integers(1, 32).map(lambda n: 2 * n)


def rotated(x, m, layout="interleaved"):
    """x turned to position m by posenc."""
    cos, sin = rope_cos_sin(torch.tensor(m), x.shape[-1], layout=layout, dtype=F64)
    return apply_rope(x, cos, sin, layout=layout)


def block_diagonal_rotation(m, d, base=10000.0):
    """R_m built by hand: a 2 x 2 rotation per pair (2i, 2i+1) at theta_i = base^(-2i/d)."""
    theta = base ** (-torch.arange(0, d, 2, dtype=F64) / d)  # [d/2]
    c, s = torch.cos(m * theta), torch.sin(m * theta)
    return torch.block_diag(*torch.stack([c, -s, s, c], dim=-1).view(-1, 2, 2))  # [d, d]


@given(q=vectors_2d, k=vectors_2d, m=positions, n=positions, s=positions)
def test_moving_both_positions_keeps_the_2d_score(q, k, m, n, s):
    before = rotated(q, m) @ rotated(k, n)
    after = rotated(q, m + s) @ rotated(k, n + s)
    tol = 1e-12 * (1 + q.norm() * k.norm())
    assert abs(after - before) <= tol
    # the closed form of the derivation, theta = 1 for d = 2: Re(q conj(k) e^{i (m - n)})
    closed = complex(*q.tolist()) * complex(*k.tolist()).conjugate() * cmath.exp(1j * (m - n))
    assert abs(before - closed.real) <= tol


@given(q=vectors_2d, m=positions)
def test_the_2d_encoding_keeps_lengths_and_fixes_position_zero(q, m):
    assert abs(rotated(q, m).norm() - q.norm()) <= 1e-12 * (1 + q.norm())
    assert torch.equal(rotated(q, 0), q)


@given(d=head_dims, m=positions, seed=st.integers(0, 2**16))
def test_block_diagonal_matrix_equals_apply_rope_interleaved(d, m, seed):
    x = torch.randn(d, generator=torch.Generator().manual_seed(seed), dtype=F64)
    # theta_i may differ from posenc's in the last bit; m times that is the angle's error
    tol = 1e-15 * (1 + abs(m)) * (1 + x.norm())
    assert torch.allclose(block_diagonal_rotation(m, d) @ x, rotated(x, m), rtol=0, atol=tol)


@given(d=head_dims, m=positions, n=positions)
def test_r_m_transposed_times_r_n_is_r_n_minus_m(d, m, n):
    product = block_diagonal_rotation(m, d).T @ block_diagonal_rotation(n, d)
    tol = 1e-15 * (1 + abs(m) + abs(n))  # m * theta_i is rounded to its last bit
    assert torch.allclose(product, block_diagonal_rotation(n - m, d), rtol=0, atol=tol)


def test_the_block_diagonal_matrix_has_nothing_outside_its_blocks():
    r = block_diagonal_rotation(3, 8)
    outside = torch.ones(8, 8, dtype=torch.bool)
    for i in range(0, 8, 2):
        outside[i : i + 2, i : i + 2] = False
    assert (r[outside] == 0).all()


def mirrored(x, p):
    """The text's odd solution f(x, p) = S^p x, with S(a, b) = (a, -b)."""
    return x * torch.tensor([1.0, -1.0], dtype=F64) if p % 2 else x


@given(q=vectors_2d, k=vectors_2d, m=positions, n=positions)
def test_mirroring_at_odd_positions_meets_the_dot_product_requirement(q, k, m, n):
    assert mirrored(q, m) @ mirrored(k, n) == mirrored(q, m - n) @ k


def test_mirroring_fails_the_complex_product_requirement():
    q, k = torch.tensor([1.0, 2.0], dtype=F64), torch.tensor([3.0, -1.0], dtype=F64)

    def product(m, n):  # f(q, m) conj(f(k, n))
        return complex(*mirrored(q, m).tolist()) * complex(*mirrored(k, n).tolist()).conjugate()

    assert product(0, 0) != product(1, 1)  # same offset m - n = 0, different products
