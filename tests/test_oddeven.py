"""Odd-even elimination (seed 003 Eq. 18-19, Alg. 2) against dense solves.

The numpy version sweeps n = 1..66 and the neighbourhoods of 128 and 256 (powers of two and not) against
LAPACK's banded solver (and a dense solve for small n); the CasADi version runs on a dense subset of small
sizes with two right-hand-side columns.
"""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

from pbframework.parallel import oddeven
from pbframework.parallel.scan import Levels

TOL_DOMINANT = 1e-12      # relative, block diagonally dominant SPD systems (cond ~ 10)
EPS = np.finfo(float).eps

SIZES = list(range(1, 67)) + [127, 128, 129, 255, 256, 257]


@pytest.fixture
def rng():
    return np.random.default_rng(18_19)


def dominant_spd(n: int, m: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """A random symmetric positive-definite, block diagonally dominant block tri-diagonal system."""
    U = rng.normal(size=(max(n - 1, 0), m, m))
    D = np.empty((n, m, m))
    for i in range(n):
        G = rng.normal(size=(m, m))
        r = (np.linalg.norm(U[i], 2) if i < n - 1 else 0.0) + (np.linalg.norm(U[i - 1], 2) if i > 0 else 0.0)
        D[i] = G @ G.T / m + (r + 0.5) * np.eye(m)
    return D, U


def factored_spd(n: int, m: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """``A = L L^T`` with ``L`` block lower bi-diagonal: SPD, not diagonally dominant, often ill-conditioned."""
    L = np.zeros((n * m, n * m))
    for i in range(n):
        L[i * m:(i + 1) * m, i * m:(i + 1) * m] = np.tril(rng.normal(size=(m, m))) + 2 * np.eye(m)
        if i:
            L[i * m:(i + 1) * m, (i - 1) * m:i * m] = rng.normal(size=(m, m))
    A = L @ L.T
    D = np.array([A[i * m:(i + 1) * m, i * m:(i + 1) * m] for i in range(n)])
    U = np.array([A[i * m:(i + 1) * m, (i + 1) * m:(i + 2) * m] for i in range(n - 1)]).reshape(n - 1, m, m)
    return D, U


def banded_solve(D: np.ndarray, U: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Reference: LAPACK banded LU (``scipy.linalg.solve_banded``), cheap for every n."""
    from scipy.linalg import solve_banded

    n, m = D.shape[0], D.shape[1]
    w = 2 * m - 1                                       # half bandwidth of a block tri-diagonal matrix
    ab = np.zeros((2 * w + 1, n * m))

    def put(r0, c0, B):
        for a in range(m):
            for b in range(m):
                ab[w + (r0 + a) - (c0 + b), c0 + b] = B[a, b]

    for i in range(n):
        put(i * m, i * m, D[i])
    for i in range(n - 1):
        put(i * m, (i + 1) * m, U[i])
        put((i + 1) * m, i * m, U[i].T)
    return solve_banded((w, w), ab, R.reshape(n * m, -1)).reshape(R.shape)


def rel(a, b) -> float:
    return float(np.linalg.norm(np.ravel(a) - np.ravel(b)) / np.linalg.norm(np.ravel(b)))


@pytest.mark.parametrize("n", SIZES)
def test_numpy_oee_matches_dense_solve(n, rng):
    m = 5                                               # the CFA block size
    D, U = dominant_spd(n, m, rng)
    R = rng.normal(size=(n, m))
    x = oddeven.solve(D, U, R)
    assert rel(x, banded_solve(D, U, R)) < TOL_DOMINANT
    if n <= 16:
        A = oddeven.dense(D, U)
        assert np.allclose(A, A.T)
        assert rel(x, np.linalg.solve(A, R.ravel())) < TOL_DOMINANT


@pytest.mark.parametrize("n,m,k", [(1, 1, 1), (2, 3, 2), (7, 1, 4), (33, 6, 3), (100, 2, 1)])
def test_numpy_oee_block_sizes_and_multiple_rhs(n, m, k, rng):
    D, U = dominant_spd(n, m, rng)
    R = rng.normal(size=(n, m, k))
    x = oddeven.solve(D, U, R)
    ref = banded_solve(D, U, R)
    assert x.shape == R.shape
    assert rel(x, ref) < TOL_DOMINANT


@pytest.mark.parametrize("n", [2, 3, 5, 8, 13, 16, 17, 24])
def test_numpy_oee_on_ill_conditioned_spd_systems(n, rng):
    """Error within a small multiple of eps * cond(A), like any backward-stable solve."""
    D, U = factored_spd(n, 4, rng)
    A = oddeven.dense(D, U)
    R = rng.normal(size=(n, 4))
    ref = np.linalg.solve(A, R.ravel())
    assert rel(oddeven.solve(D, U, R), ref) < 100 * EPS * np.linalg.cond(A)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33])
def test_symbolic_oee_matches_dense_and_uses_log2_levels(n, rng):
    m, k = 5, 2
    D, U = dominant_spd(n, m, rng)
    R = rng.normal(size=(n, m, k))
    f = oddeven.oee_function(n, m, k)
    Uw = np.hstack(list(U)) if n > 1 else np.zeros((m, 0))
    x = np.asarray(f(np.hstack(list(D)), Uw, np.hstack(list(R))))
    ref = np.linalg.solve(oddeven.dense(D, U), R.reshape(n * m, k)).reshape(n, m, k)
    assert rel(x, np.hstack(list(ref))) < TOL_DOMINANT
    lv = Levels()
    oddeven.solve_symbolic(ca.MX.sym("D", m, m * n), ca.MX.sym("U", m, m * (n - 1)), ca.MX.sym("R", m, n),
                           n, m, 1, lv)
    assert lv.depth == oddeven.levels_needed(n) + 1             # elimination levels + the final block solves


def test_levels_needed():
    assert [oddeven.levels_needed(n) for n in (1, 2, 3, 4, 5, 8, 9, 256, 257)] == [0, 1, 2, 2, 3, 3, 4, 8, 9]


def test_ldl_solve_kernel(rng):
    G = rng.normal(size=(5, 5))
    Dn = G @ G.T + np.eye(5)
    B = rng.normal(size=(5, 3))
    Ds, Bs = ca.SX.sym("D", 5, 5), ca.SX.sym("B", 5, 3)
    f = ca.Function("f", [Ds, Bs], [oddeven.ldl_solve(Ds, Bs)])
    assert rel(np.asarray(f(Dn, B)), np.linalg.solve(Dn, B)) < 1e-13


def test_shape_errors_are_explained():
    with pytest.raises(ValueError, match=r"U: expected \(2, 3, 3\)"):
        oddeven.solve(np.zeros((3, 3, 3)), np.zeros((1, 3, 3)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="R: expected"):
        oddeven.solve(np.eye(2)[None], np.zeros((0, 2, 2)), np.zeros((2, 2)))
