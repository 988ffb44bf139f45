"""Odd-even elimination for symmetric block tri-diagonal systems (seed 003 §IV, Eq. 18-19, Alg. 2).

The system ``A x = R`` with

    A = [[D_0, U_0,                 ],
         [U_0^T, D_1, U_1,          ],
         [        ...               ],
         [            U_{n-2}^T, D_{n-1}]]

(``D_i`` symmetric, ``m x m``; ``R_i`` ``m x k``) is diagonalised in ``ceil(log2 n)`` levels. At level ``j``
(stride ``s = 2^(j-1)``) every row ``i`` is coupled only to rows ``i - s`` and ``i + s``, through ``U_{i-s}^T``
and ``U_i``. Row ``i`` subtracts ``E_i`` times row ``i + s`` and ``K_i`` times row ``i - s``:

    E_i = U_i D_{i+s}^{-1},      K_i = U_{i-s}^T D_{i-s}^{-1}          (from linear solves, never inverses)
    D_i <- D_i - E_i U_i^T - K_i U_{i-s}                               (Eq. 19)
    R_i <- R_i - E_i R_{i+s} - K_i R_{i-s}
    U_i <- -E_i U_{i+s}                                                 (now couples i and i + 2s)

which keeps the matrix symmetric (so only the upper blocks are stored), and every update of a level reads
only the previous level: one data-parallel operation per level. Afterwards ``x_i = D_i^{-1} R_i``
(one more level). Each ``D_i`` stays a Schur complement of a principal submatrix of ``A``, so for an SPD
``A`` every solve is with an SPD block; the symbolic kernels use an unrolled ``L D L^T`` factorisation.

:func:`solve` is the numpy version (each level a batched ``np.linalg.solve``); :func:`solve_symbolic`
builds the same levels as CasADi kernels on wide arrays (see :mod:`pbframework.parallel.scan`), and
:func:`oee_function` wraps it as a ``casadi.Function`` ``(D, U, R) -> x`` for any symmetric block
tri-diagonal system.
"""

from __future__ import annotations

import math

import casadi as ca
import numpy as np

from .scan import Levels, take

__all__ = ["levels_needed", "dense", "solve", "ldl_solve", "solve_symbolic", "oee_function"]


def levels_needed(n: int) -> int:
    """Elimination levels for ``n`` diagonal blocks: ``ceil(log2 n)`` (0 for ``n <= 1``)."""
    return math.ceil(math.log2(n)) if n > 1 else 0


def dense(D: np.ndarray, U: np.ndarray) -> np.ndarray:
    """The dense matrix of Eq. 18 from ``D`` ``(n, m, m)`` and ``U`` ``(n-1, m, m)``."""
    n, m = D.shape[0], D.shape[1]
    A = np.zeros((n * m, n * m))
    for i in range(n):
        A[i * m:(i + 1) * m, i * m:(i + 1) * m] = D[i]
    for i in range(n - 1):
        A[i * m:(i + 1) * m, (i + 1) * m:(i + 2) * m] = U[i]
        A[(i + 1) * m:(i + 2) * m, i * m:(i + 1) * m] = U[i].T
    return A


def _check(D, U, R):
    D = np.asarray(D, float)
    U = np.asarray(U, float)
    R = np.asarray(R, float)
    if D.ndim != 3 or D.shape[1] != D.shape[2]:
        raise ValueError(f"D: expected (n, m, m) diagonal blocks, got shape {D.shape}")
    n, m = D.shape[0], D.shape[1]
    if n == 0:
        raise ValueError("D: at least one diagonal block is needed")
    if U.shape != (n - 1, m, m) and not (n == 1 and U.size == 0):
        raise ValueError(f"U: expected ({n - 1}, {m}, {m}) upper blocks for {n} diagonal blocks, got {U.shape}")
    U = U.reshape(max(n - 1, 0), m, m)
    if R.shape[:2] != (n, m):
        raise ValueError(f"R: expected ({n}, {m}) or ({n}, {m}, k), got shape {R.shape}")
    return D, U, R


def solve(D: np.ndarray, U: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Solve the symmetric block tri-diagonal system by odd-even elimination (Alg. 2), numerically.

    Args:
        D: ``(n, m, m)`` symmetric diagonal blocks.
        U: ``(n-1, m, m)`` upper off-diagonal blocks (``A[i, i+1] = U_i``, ``A[i+1, i] = U_i^T``).
        R: ``(n, m)`` or ``(n, m, k)`` right-hand side.
    Returns:
        ``x`` with the shape of ``R``.
    """
    D, U, R = _check(D, U, R)
    vec = R.ndim == 2
    R = R[:, :, None] if vec else R.copy()
    n = D.shape[0]
    D = D.copy()
    s = 1
    while s < n:
        npair = n - s                                   # pairs (i, i+s), i = 0 .. n-s-1
        Ui = U[:npair]
        Et = np.linalg.solve(D[s:], np.swapaxes(Ui, 1, 2))      # D_{i+s} E_i^T = U_i^T
        Kt = np.linalg.solve(D[:npair], Ui)                     # D_i K_{i+s}^T = U_i
        E, K = np.swapaxes(Et, 1, 2), np.swapaxes(Kt, 1, 2)
        Dn, Rn = D.copy(), R.copy()
        Dn[:npair] -= E @ np.swapaxes(Ui, 1, 2)
        Dn[s:] -= K @ Ui
        Rn[:npair] -= E @ R[s:]
        Rn[s:] -= K @ R[:npair]
        U = -E[:max(n - 2 * s, 0)] @ U[s:s + max(n - 2 * s, 0)]
        D, R = 0.5 * (Dn + np.swapaxes(Dn, 1, 2)), Rn
        s *= 2
    x = np.linalg.solve(D, R)
    return x[:, :, 0] if vec else x


# ======================================================================================================
# Symbolic (CasADi) version
# ======================================================================================================

def ldl_solve(D: ca.SX, B: ca.SX) -> ca.SX:
    """``D^{-1} B`` for a symmetric positive-definite ``D`` by an unrolled ``L D L^T`` factorisation (SX)."""
    m = D.shape[0]
    L = [[None] * m for _ in range(m)]
    d = [None] * m
    for j in range(m):
        dj = D[j, j]
        for k in range(j):
            dj = dj - L[j][k] * L[j][k] * d[k]
        d[j] = dj
        for i in range(j + 1, m):
            lij = D[i, j]
            for k in range(j):
                lij = lij - L[i][k] * L[j][k] * d[k]
            L[i][j] = lij / dj
    cols = []
    for c in range(B.shape[1]):
        y = [None] * m
        for i in range(m):
            yi = B[i, c]
            for k in range(i):
                yi = yi - L[i][k] * y[k]
            y[i] = yi
        x = [None] * m
        for i in range(m - 1, -1, -1):
            xi = y[i] / d[i]
            for k in range(i + 1, m):
                xi = xi - L[k][i] * x[k]
            x[i] = xi
        cols.append(ca.vertcat(*x))
    return ca.horzcat(*cols) if cols else ca.SX(m, 0)


_KERNELS: dict[tuple, ca.Function] = {}


def _kernel(kind: str, m: int, k: int) -> ca.Function:
    """Level kernels, node-centric (Eq. 19): ``both`` neighbours, ``up`` only, ``down`` only; ``final``."""
    key = (kind, m, k)
    if key in _KERNELS:
        return _KERNELS[key]
    D, R = ca.SX.sym("D", m, m), ca.SX.sym("R", m, k)
    if kind == "final":
        f = ca.Function(f"pbf_oee_final{m}x{k}", [D, R], [ldl_solve(D, R)])
    else:
        ins, Dn, Rn, Un = [D, R], D, R, None
        if kind in ("both", "down"):
            Dl, Rl, Ul = ca.SX.sym("Dlo", m, m), ca.SX.sym("Rlo", m, k), ca.SX.sym("Ulo", m, m)
            K = ldl_solve(Dl, Ul).T                          # K = U_{i-s}^T D_{i-s}^{-1}
            Dn, Rn = Dn - ca.mtimes(K, Ul), Rn - ca.mtimes(K, Rl)
            ins += [Dl, Rl, Ul]
        if kind in ("both", "up"):
            Du, Ru = ca.SX.sym("Dup", m, m), ca.SX.sym("Rup", m, k)
            Uu, Ux = ca.SX.sym("U", m, m), ca.SX.sym("Unext", m, m)
            E = ldl_solve(Du, Uu.T).T                        # E = U_i D_{i+s}^{-1}
            Dn, Rn = Dn - ca.mtimes(E, Uu.T), Rn - ca.mtimes(E, Ru)
            Un = -ca.mtimes(E, Ux)
            ins += [Du, Ru, Uu, Ux]
        Dn = 0.5 * (Dn + Dn.T)
        outs = [Dn, Rn] + ([Un] if Un is not None else [])
        f = ca.Function(f"pbf_oee_{kind}{m}x{k}", ins, outs)
    _KERNELS[key] = f
    return f


def solve_symbolic(D: ca.MX, U: ca.MX, R: ca.MX, n: int, m: int, k: int, levels: Levels,
                   label: str = "oee") -> ca.MX:
    """Odd-even elimination on wide arrays: ``D`` ``(m, m n)``, ``U`` ``(m, m (n-1))``, ``R`` ``(m, k n)``.

    Each elimination level is one data-parallel operation (recorded once in ``levels``; inside it the
    interior rows and the two boundary ranges run as up to three mapped kernels). Returns ``x`` wide.
    """
    s = 1
    j = 0
    Z = ca.DM.zeros(m, m)
    while s < n:
        lo_end = min(s, n - s)                    # rows [0, lo_end): upper neighbour only
        both = (s, n - s)                         # rows [s, n-s): both neighbours
        dn_start = max(s, n - s)                  # rows [dn_start, n): lower neighbour only
        nU = max(n - 2 * s, 0)                    # couplings after this level
        Upad = ca.horzcat(U, *([Z] * s)) if s else U   # U_{i+s} for i+s >= n-s reads zero
        Dp, Rp, Up = [], [], []
        with levels.group(f"{label}[level{j}]"):
            r0 = range(0, lo_end)
            if len(r0):
                Dn, Rn, Un = levels.apply(_kernel("up", m, k), [
                    take(D, r0, m), take(R, r0, k),
                    take(D, range(s, s + len(r0)), m), take(R, range(s, s + len(r0)), k),
                    take(U, r0, m), take(Upad, range(s, s + len(r0)), m)], len(r0), "up")
                Dp.append(Dn), Rp.append(Rn), Up.append(Un)
            if both[1] > both[0]:
                rb = range(*both)
                Dn, Rn, Un = levels.apply(_kernel("both", m, k), [
                    take(D, rb, m), take(R, rb, k),
                    take(D, range(0, len(rb)), m), take(R, range(0, len(rb)), k), take(U, range(0, len(rb)), m),
                    take(D, range(2 * s, 2 * s + len(rb)), m), take(R, range(2 * s, 2 * s + len(rb)), k),
                    take(U, rb, m), take(Upad, range(2 * s, 2 * s + len(rb)), m)], len(rb), "both")
                Dp.append(Dn), Rp.append(Rn), Up.append(Un)
            if n - s < s:                          # rows [n-s, s): already decoupled
                rn = range(n - s, s)
                Dp.append(take(D, rn, m)), Rp.append(take(R, rn, k))
            rd = range(dn_start, n)
            if len(rd):
                Dn, Rn = levels.apply(_kernel("down", m, k), [
                    take(D, rd, m), take(R, rd, k),
                    take(D, range(dn_start - s, n - s), m), take(R, range(dn_start - s, n - s), k),
                    take(U, range(dn_start - s, n - s), m)], len(rd), "down")
                Dp.append(Dn), Rp.append(Rn)
        D, R = ca.horzcat(*Dp), ca.horzcat(*Rp)
        U = ca.horzcat(*Up)[:, :nU * m] if nU else ca.DM(m, 0)
        s *= 2
        j += 1
    return levels.apply(_kernel("final", m, k), [D, R], n, f"{label}[final]")[0]


def oee_function(n: int, m: int, k: int = 1, name: str = "oee") -> ca.Function:
    """``casadi.Function`` ``(D (m, m n), U (m, m (n-1)), R (m, k n)) -> x (m, k n)`` solving a symmetric
    (positive-definite) block tri-diagonal system by odd-even elimination; usable on its own."""
    D, U, R = ca.MX.sym("D", m, m * n), ca.MX.sym("U", m, m * max(n - 1, 0)), ca.MX.sym("R", m, k * n)
    x = solve_symbolic(D, U, R, n, m, k, Levels())
    return ca.Function(name, [D, U, R], [x], ["D", "U", "R"], ["x"])
