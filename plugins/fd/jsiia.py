"""JSIIA: forward dynamics by inverting the joint-space inertia (seed 003 Eq. 7), as a plug-in ``jsiia``.

``qdd = M(q)^{-1} (tau - tau_bias)``:

1. ``X_i(q_i)`` for all elements (one level);
2. ``tau_bias = C(q, qd) qd + N(q)`` by inverse dynamics with ``qdd = 0`` (Eq. 2a-2d, three scans);
3. ``M`` column by column by inverse dynamics with unit accelerations (``qd = 0``, no gravity): all ``n``
   columns at once, as scans over ``6 x n`` blocks: ``Vd = (I-Gamma)^{-1} S``, ``F = (I-Gamma)^{-T} J Vd``,
   ``M = S^T F``;
4. ``M qdd = tau - tau_bias`` by an ``L D L^T`` (square-root-free Cholesky) factorisation, written out as
   scalar operations (CasADi's symbolic ``ldl``, no pivoting: ``M`` is positive definite), so the function
   evaluates on SX symbols as well as MX (integrators build their steps in SX) and generates C.

Works on any tree. Work ``O(n^2)`` for ``M`` and ``O(n^3)`` for the factorisation. Depth on a chain of ``n``
(the factorisation counted as ``n`` column steps plus ``2n`` substitution steps): ``8n + 6`` sequential,
``3n + 5 ceil(log2 n) + 12`` with parallel scans.
"""

from __future__ import annotations

import math

import casadi as ca
import numpy as np

from pbframework.parallel.globalform import (GlobalForm, adjoints, forces, inverse_dynamics, local_force_kernel,
                                    global_form, motion_transform, torques, wide)
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.model import ArticulatedBody
from pbframework.parallel.scan import AffineStep, Levels, Schedule, forward_scan

_STEPS: dict[int, AffineStep] = {}


def unit_acceleration_step(n: int) -> AffineStep:
    """``Vd_i = X_i Vd_parent + S_i e_i^T`` on ``6 x n`` blocks; ``e_i`` is built in the kernel from the
    element's index and the column indices (one comparison per column), so no ``n x n`` constant enters the
    generated code."""
    if n not in _STEPS:
        def fn(x, X, S, idx, cols):
            onehot = ca.if_else(ca.eq(ca.repmat(idx, 1, cols.shape[1]), cols), 1.0, 0.0)
            return motion_transform(X, x) + ca.mtimes(S, onehot)

        _STEPS[n] = AffineStep(f"pbf_jsiia_unit{n}", fn, 6, [(12, 1), (6, 1), (1, 1)], columns=True)
    return _STEPS[n]


_SOLVES: dict[int, ca.Function] = {}


def ldl_solve_kernel(n: int) -> ca.Function:
    """``(M, b) -> M^{-1} b`` for a symmetric positive-definite ``n x n`` ``M`` by ``L D L^T`` in SX.

    CasADi's ``ldl`` linear-solver plug-in is an MX node without an SX evaluation, so a function holding
    it cannot be called on SX symbols; this kernel can.
    """
    if n not in _SOLVES:
        M, b = ca.SX.sym("M", n, n), ca.SX.sym("b", n)
        D, LT, p = ca.ldl(M, False)
        _SOLVES[n] = ca.Function(f"pbf_jsiia_ldl{n}", [M, b], [ca.ldl_solve(b, D, LT, p)], ["M", "b"], ["x"])
    return _SOLVES[n]


def mass_matrix_by_unit_accelerations(gf: GlobalForm, X: ca.MX, schedule: Schedule | str,
                                      levels: Levels) -> ca.MX:
    """``M(q)`` (``n x n``) from ``n`` inverse-dynamics problems with unit accelerations, solved together."""
    n = gf.n
    idx = ca.DM(np.arange(n, dtype=float)).T
    Vd = forward_scan(unit_acceleration_step(n), [X, wide(gf, "S"), idx], gf.parent, ca.DM.zeros(6, n), n,
                      schedule, levels, "unit_acceleration")
    rhs = levels.apply(local_force_kernel(n), [Vd, ca.DM.zeros(6, n), wide(gf, "J")], n, "unit_local_force")[0]
    F = forces(gf, X, rhs, schedule, levels, k=n)
    Mw = torques(gf, F, levels, k=n)                   # block i is row i of M
    M = ca.reshape(Mw, n, n).T
    return 0.5 * (M + M.T)


def build(model: ArticulatedBody, schedule: Schedule | str = Schedule.SEQUENTIAL,
          levels: Levels | None = None) -> ca.Function:
    """JSIIA forward dynamics ``(q, qd, tau) -> qdd`` for any tree (see the module docstring)."""
    schedule = Schedule.parse(schedule)
    gf = global_form(model)
    lv = levels if levels is not None else Levels()
    n = gf.n
    q, qd, tau = ca.MX.sym("q", n), ca.MX.sym("qd", n), ca.MX.sym("tau", n)
    if n == 0:
        return ca.Function("jsiia", [q, qd, tau], [ca.MX(0, 1)], ["q", "qd", "tau"], ["qdd"])
    X = adjoints(gf, q, lv)
    bias = inverse_dynamics(gf, X, qd, None, True, schedule, lv).T
    M = mass_matrix_by_unit_accelerations(gf, X, schedule, lv)
    for label in ("cholesky", "forward_substitution", "back_substitution"):
        for i in range(n):
            lv.record(f"{label}[{i}]", n - i)
    qdd = ldl_solve_kernel(n)(M, tau - bias)
    return ca.Function("jsiia", [q, qd, tau], [qdd], ["q", "qd", "tau"], ["qdd"])


def depth(n: int, schedule: Schedule | str = Schedule.PARALLEL) -> int:
    """Sequential levels of JSIIA on a chain of ``n`` elements (matches :class:`Levels` of a build)."""
    if Schedule.parse(schedule) is Schedule.SEQUENTIAL:
        return 8 * n + 6
    L = math.ceil(math.log2(n)) if n > 1 else 0
    return 3 * n + 5 * L + 12


@hookimpl
def pbf_forward_dynamics():
    return [PluginInfo("jsiia", "joint-space inertia inversion (seed 003 Eq. 7): M by unit-acceleration "
                       "inverse dynamics, then LDL^T (Cholesky), any tree", build,
                       meta={"depth": depth, "trees": True, "armature": False})]
