"""ABIA: forward dynamics through the articulated-body inertias (seed 003 Eq. 8), as a plug-in ``abia``.

``M^{-1} = [I - S^T Y Pi]^T (S^T Jhat S)^{-1} [I - S^T Y Pi]``, ``Y = (I - Xi^T)^{-1}``: the articulated-body
inertias ``Jhat_i`` come from a *nonlinear* backward recursion (the one part no scan parallelises), and
everything else is block bi-diagonal solves with the projected adjoints as coefficients:

1. ``X_i(q_i)`` for all elements (one level);
2. velocities ``(I - Gamma) V = S qd`` (forward scan) and the local velocity terms (one level);
3. ``Jhat_i = J_i + sum_k X_k^T (Jhat_k - U_k U_k^T / D_k) X_k`` with ``U = Jhat S``, ``D = S^T U``
   (backward recursion, one level per tree depth);
4. bias wrenches ``p_i = pB_i + sum_k X_k^T (I - U_k S_k^T / D_k) p_k + X_k^T (Ia_k c_k + U_k tau_k / D_k)``
   (backward scan with coefficients ``Xi^T = X^T (I - U S^T / D)``);
5. accelerations ``a_i = (I - S U^T / D)(X_i a_parent + c_i) + S (tau_i - S^T p_i) / D`` (forward scan),
   and ``qdd_i = (tau_i - S^T p_i - U_i^T (X_i a_parent + c_i)) / D_i`` (one level).

Works on any tree. Depth on a chain of ``n``: ``4n + 3`` levels sequential; ``n + 3 ceil(log2 n) + 7``
with parallel scans (the ``n`` of step 3 remains: seed 003 §III).
"""

from __future__ import annotations

import math

import casadi as ca

from pbframework.parallel.globalform import (GlobalForm, adjoints, as_column, force_transform_T, global_form,
                                    inertia_congruence, local_velocity_terms, motion_transform, parent_values,
                                    velocities, wide)
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.model import ArticulatedBody
from pbframework.parallel.scan import AffineStep, Levels, Schedule, backward_recursion, backward_scan, forward_scan

_KERNELS: dict[str, ca.Function] = {}


def abi_kernel() -> ca.Function:
    """``(acc, J, X, S, c) -> (X^T Ia X, U, 1/D, Ia c)``: one step of the articulated-body-inertia recursion.

    ``acc`` is the sum of the children's ``X^T Ia X``; ``Jhat = J + acc``, ``U = Jhat S``, ``D = S^T U``,
    ``Ia = Jhat - U U^T / D``.
    """
    if "abi" not in _KERNELS:
        acc, J, X = ca.SX.sym("acc", 6, 6), ca.SX.sym("J", 6, 6), ca.SX.sym("X", 12)
        S, c = ca.SX.sym("S", 6), ca.SX.sym("c", 6)
        IA = J + acc
        U = ca.mtimes(IA, S)
        Dinv = 1.0 / ca.dot(S, U)
        Ia = IA - ca.mtimes(U, U.T) * Dinv
        _KERNELS["abi"] = ca.Function("pbf_abia_abi", [acc, J, X, S, c],
                                      [inertia_congruence(X, Ia), U, Dinv, ca.mtimes(Ia, c)],
                                      ["acc", "J", "X", "S", "c"], ["contrib", "U", "Dinv", "Iac"])
    return _KERNELS["abi"]


def qdd_kernel() -> ca.Function:
    """``(a_parent, X, c, U, Dinv, S, tau, p) -> qdd``."""
    if "qdd" not in _KERNELS:
        ap, X, c, U = ca.SX.sym("ap", 6), ca.SX.sym("X", 12), ca.SX.sym("c", 6), ca.SX.sym("U", 6)
        Dinv, S, tau, p = ca.SX.sym("Dinv"), ca.SX.sym("S", 6), ca.SX.sym("tau"), ca.SX.sym("p", 6)
        a1 = motion_transform(X, ap) + c
        qdd = Dinv * (tau - ca.dot(S, p) - ca.dot(U, a1))
        _KERNELS["qdd"] = ca.Function("pbf_abia_qdd", [ap, X, c, U, Dinv, S, tau, p], [qdd])
    return _KERNELS["qdd"]


def _bias(x, X, U, Dinv, S, Iac, tau):
    return force_transform_T(X, x + Iac + U * (Dinv * (tau - ca.mtimes(S.T, x))))


def _accel(x, X, c, U, Dinv, S, tau, p):
    a1 = motion_transform(X, x) + c
    return a1 + S * (Dinv * (tau - ca.mtimes(S.T, p) - ca.mtimes(U.T, a1)))


BIAS_STEP = AffineStep("pbf_abia_bias", _bias, 6, [(12, 1), (6, 1), (1, 1), (6, 1), (6, 1), (1, 1)])
ACCEL_STEP = AffineStep("pbf_abia_accel", _accel, 6, [(12, 1), (6, 1), (6, 1), (1, 1), (6, 1), (1, 1), (6, 1)])


def build(model: ArticulatedBody, schedule: Schedule | str = Schedule.SEQUENTIAL,
          levels: Levels | None = None) -> ca.Function:
    """ABIA forward dynamics ``(q, qd, tau) -> qdd`` for any tree.

    Args:
        model: the articulated body.
        schedule: how the linear propagations (steps 2, 4, 5) run; the ABI recursion is always sequential.
        levels: optional recorder of the data-parallel levels (its ``depth`` is the algorithm's depth).
    """
    schedule = Schedule.parse(schedule)
    gf = global_form(model)
    lv = levels if levels is not None else Levels()
    n = gf.n
    q, qd, tau = ca.MX.sym("q", n), ca.MX.sym("qd", n), ca.MX.sym("tau", n)
    qdd = _abia(gf, q, qd, tau, schedule, lv)
    return ca.Function("abia", [q, qd, tau], [qdd], ["q", "qd", "tau"], ["qdd"])


def _abia(gf: GlobalForm, q, qd, tau, schedule: Schedule, lv: Levels) -> ca.MX:
    n = gf.n
    if n == 0:
        return ca.MX(0, 1)
    S, J, tau = wide(gf, "S"), wide(gf, "J"), tau.T
    X = adjoints(gf, q, lv)
    V = velocities(gf, X, qd, schedule, lv)
    c, pB = local_velocity_terms(gf, V, qd, lv)
    _contrib, U, Dinv, Iac = backward_recursion(abi_kernel(), [J, X, S, c], gf.parent, lv, "abi")
    p = backward_scan(BIAS_STEP, [X, U, Dinv, S, Iac, tau], pB, gf.parent, 1, schedule, lv, "bias")
    a = forward_scan(ACCEL_STEP, [X, c, U, Dinv, S, tau, p], gf.parent, as_column(gf.a0), 1, schedule, lv,
                     "acceleration")
    a_parent = parent_values(a, gf.parent, as_column(gf.a0), 6)
    qdd = lv.apply(qdd_kernel(), [a_parent, X, c, U, Dinv, S, tau, p], n, "qdd")[0]
    return qdd.T


def depth(n: int, schedule: Schedule | str = Schedule.PARALLEL) -> int:
    """Sequential levels of ABIA on a chain of ``n`` elements (matches :class:`Levels` of a build)."""
    if Schedule.parse(schedule) is Schedule.SEQUENTIAL:
        return 4 * n + 3
    L = math.ceil(math.log2(n)) if n > 1 else 0
    return n + 3 * L + 7


@hookimpl
def pbf_forward_dynamics():
    return [PluginInfo("abia", "articulated-body inertia algorithm in the global matrix form (seed 003 Eq. 8): "
                       "ABI recursion + scans, any tree, O(n) depth", build,
                       meta={"depth": depth, "trees": True, "armature": False})]
