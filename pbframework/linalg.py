"""The solve stage's dense arithmetic, in the operation order of the generated C driver.

The Python solver loops (``plugins/solvers``) and :func:`pbframework.step.evaluator` use these instead of
BLAS / LAPACK so that the CasADi-VM backend and the generated-C backend (``codegen/c_src/pbf_linalg.c``:
``pbf_dot``, ``pbf_chol``, ``pbf_chol_solve``, ``pbf_gemv``) round alike: every sum here is the C loop's
sum, term for term, so a solver iteration gives the same bits on both backends. With LAPACK's blocked
Cholesky and BLAS's dot products (their own, CPU-dependent summation orders) the two backends differed
by about one rounding per iteration (1e-15), which a chaotic motion grows without bound and the
stopping tests (``gtol``, ``residual_tol``, halving) turn into different decisions (measured on CHAIN-10,
PBAD order 3, dt = 0.05 s: states apart by 1e-9 at step 51 and by 1e-2 at step 76; now identical).

Sums go through ``numpy.add.accumulate``, which adds strictly in sequence (``numpy.sum`` and ``@`` do not
promise an order). The C driver is compiled without floating-point contraction (no fused multiply-add),
so its products round as NumPy's do.
"""

from __future__ import annotations

import numpy as np


def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray | float:
    """``sum_k a[k] b[k]`` over the first axis as ``pbf_dot`` sums it: four partial sums (entries
    ``k = 0, 1, 2, 3 mod 4``, in order), the tail past the last whole group of four into the first, then
    ``(s0 + s1) + (s2 + s3)``. Trailing axes broadcast: ``dot(J[:, :, None], J[:, None, :])`` is ``J^T J``
    with every entry summed as one C dot product."""
    p = np.multiply(a, b, dtype=float)
    n = p.shape[0]
    n4 = n - n % 4
    if p.ndim == 1:                       # Python floats: the same IEEE sums, less overhead
        s0 = s1 = s2 = s3 = 0.0
        if n4:
            s0, s1, s2, s3 = np.add.accumulate(p[:n4].reshape(-1, 4), axis=0)[-1].tolist()
        for k in range(n4, n):
            s0 += p[k].item()
        return (s0 + s1) + (s2 + s3)
    if n4:
        s = np.add.accumulate(p[:n4].reshape((n4 // 4, 4) + p.shape[1:]), axis=0)[-1]
        s0, s1, s2, s3 = s[0], s[1], s[2], s[3]
    else:
        s0 = s1 = s2 = s3 = np.zeros(p.shape[1:])
    for k in range(n4, n):
        s0 = s0 + p[k]
    return (s0 + s1) + (s2 + s3)


def chol(A: np.ndarray) -> np.ndarray | None:
    """Upper Cholesky factor ``U`` (``U^T U = A``, only the upper triangle of ``A`` read) as ``pbf_chol``
    computes it (LAPACK ``potrf('U')``'s unblocked order), or ``None`` at a pivot that is not positive."""
    A = np.asarray(A, float)
    n = A.shape[0]
    U = np.zeros((n, n))
    for j in range(n):
        a = A[j, j:] - dot(U[:j, j, None], U[:j, j:])     # row j of U before the division by its pivot
        if not a[0] > 0:
            return None
        U[j, j] = np.sqrt(a[0])
        U[j, j + 1:] = a[1:] / U[j, j]
    return U


def chol_solve(U: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``x`` with ``U^T U x = b`` (``U`` from :func:`chol`) as ``pbf_chol_solve``: forward substitution by
    dot products, backward substitution by columns. ``b`` of shape ``(n,)``, or ``(n, m)`` for ``m``
    right-hand sides solved independently."""
    x = np.array(b, dtype=float)
    n = U.shape[0]
    col = (slice(None),) + (None,) * (x.ndim - 1)
    for i in range(n):
        x[i] = (x[i] - dot(U[:i, i][col], x[:i])) / U[i, i]
    for i in range(n - 1, -1, -1):
        x[i] = x[i] / U[i, i]
        x[:i] -= U[:i, i][col] * x[i]
    return x


def gemv(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``A x`` as ``pbf_gemv``: each entry accumulated over the columns in order."""
    A = np.asarray(A, float)
    if A.shape[1] == 0:
        return np.zeros(A.shape[0])
    return np.add.accumulate(A * np.asarray(x, float)[None, :], axis=1)[:, -1]


def norm2(v: np.ndarray) -> float:
    """``sqrt(dot(v, v))`` (``pbf_norm2``)."""
    return float(np.sqrt(dot(v, v)))
