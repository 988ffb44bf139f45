"""pbframework.linalg: the C driver's dense arithmetic in NumPy. Reference: plain Python loops written as
pbf_linalg.c's (pbf_dot, pbf_chol, pbf_chol_solve), compared bitwise; and scipy for the mathematics."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from pbframework import linalg


def c_dot(a, b) -> float:
    """pbf_dot, line for line."""
    s0 = s1 = s2 = s3 = 0.0
    n, i = len(a), 0
    while i + 4 <= n:
        s0 += a[i] * b[i]; s1 += a[i + 1] * b[i + 1]; s2 += a[i + 2] * b[i + 2]; s3 += a[i + 3] * b[i + 3]  # noqa: E702
        i += 4
    while i < n:
        s0 += a[i] * b[i]
        i += 1
    return (s0 + s1) + (s2 + s3)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 7, 20, 41])
def test_dot_is_pbf_dot(rng, n):
    a, b = rng.standard_normal(n) * 1e3, rng.standard_normal(n)
    assert linalg.dot(a, b) == c_dot(a.tolist(), b.tolist())
    B = rng.standard_normal((n, 5))
    assert linalg.dot(a[:, None], B).tolist() == [c_dot(a.tolist(), B[:, j].tolist()) for j in range(5)]


@pytest.mark.parametrize("n", [1, 5, 20, 40])
def test_chol_and_solve(rng, n):
    A = rng.standard_normal((n, n))
    A = A @ A.T + n * np.eye(n)
    U = linalg.chol(A)
    np.testing.assert_allclose(U, scipy.linalg.cholesky(A), rtol=1e-12, atol=1e-12)
    for j in range(n):                                      # pbf_chol's sums, bitwise
        assert U[j, j] == np.sqrt(A[j, j] - c_dot(U[:j, j].tolist(), U[:j, j].tolist()))
    b = rng.standard_normal((n, 3))
    x = linalg.chol_solve(U, b)
    np.testing.assert_allclose(x, scipy.linalg.solve(A, b), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(x[:, 1], linalg.chol_solve(U, b[:, 1]))    # columns independent
    assert linalg.chol(A - 2 * n * np.eye(n) * 10) is None                  # not positive definite
