"""CFA: the constraint force algorithm (seed 003 Eq. 9-17, Alg. 1), as a plug-in ``cfa``.

Eliminating ``qdd`` instead of the forces gives ``M^{-1} = C - B^T A^{-1} B`` (Eq. 17), with the interbody
wrench split as ``F = S tau_d + W F_c`` (Eq. 14; ``W_i`` an orthonormal basis of the 5 constraint wrenches
of joint ``i``, ``W_i^T S_i = 0``) and ``P = (I-Gamma) J^{-1} (I-Gamma)^T`` block tri-diagonal:

    A = W^T P W  (block tri-diagonal, 5x5 blocks),   B = W^T P S,   C = S^T P S

Algorithm 1:

1. ``tau_bias`` by inverse dynamics with ``qdd = 0`` (scans); ``tau_d = tau - tau_bias``;
2. ``A``, ``B``, ``C`` from the local quantities ``J_i^{-1}``, ``X_i``, ``W_i``, ``S_i`` (one level: every
   block depends on one or two neighbouring elements only);
3. ``R = -B tau_d`` (one level);
4. ``A F_c = R`` by odd-even elimination (:mod:`pbframework.parallel.oddeven`, ``ceil(log2 n)`` levels + 1);
5. ``qdd = C tau_d + B^T F_c`` (one level).

Depth on a chain of ``n``: ``4 ceil(log2 n) + 12`` with parallel scans (``O(log n)``, seed 003 §III),
``3n + ceil(log2 n) + 8`` with sequential scans.

Supported models: serial chains of 1-DOF joints (revolute or prismatic) whose every link has a
positive-definite inertia: ``P`` is block tri-diagonal only for a chain, and ``J^{-1}`` must exist (a
multi-DOF joint's elements are massless but for the last). Other shapes raise
:class:`~pbframework.model.ModelError` in one line saying what was found and which joint types CFA supports
(use ``aba``, ``abia`` or ``jsiia``): CHAIN-N's ``ball2`` joints and the panda's branching fingers are both
refused this way.
"""

from __future__ import annotations

import math

import casadi as ca
import numpy as np

from pbframework.parallel import oddeven
from pbframework.parallel.globalform import GlobalForm, adjoints, global_form, inverse_dynamics, symmetric_from_lower
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.model import ArticulatedBody, ModelError
from pbframework.parallel.scan import Levels, Schedule

_KERNELS: dict[str, ca.Function] = {}


def check_supported(model: ArticulatedBody) -> GlobalForm:
    """The model's global form if CFA supports it; otherwise :class:`ModelError` in the user's words."""
    gf = global_form(model)
    scope = "cfa supports serial chains of 1-DOF joints (revolute, prismatic; fixed ones merged) only"
    hint = "; use aba, abia or jsiia (any tree, every joint type)"
    kids: dict[int, int] = {}
    for p in gf.parent:
        kids[p] = kids.get(p, 0) + 1
    for p, count in sorted(kids.items()):
        if count > 1:
            at = model.base if p < 0 else gf.link[p]
            raise ModelError(f"{scope} (model {model.name!r} branches at link {at!r} into {count} chains){hint}")
    for j in model.joints:
        if j.nq > 1:
            raise ModelError(f"{scope} (model {model.name!r}: joint {j.name!r} of link {j.child!r} has type "
                             f"{j.type.value!r} with {j.nq} coordinates){hint}")
    for i in range(gf.n):
        eig = np.linalg.eigvalsh(gf.J[i])
        if eig[0] <= 1e-12 * max(eig[-1], 1.0):
            raise ModelError(f"cfa needs a positive-definite spatial inertia on every moving link (model "
                             f"{model.name!r}: link {gf.link[i]!r} of joint {gf.joint[i]!r} has smallest "
                             f"eigenvalue {eig[0]:.3g}){hint}")
    return gf


def _X6(X) -> ca.SX:
    E, p = ca.reshape(X[0:9], 3, 3), X[9:12]
    P = ca.vertcat(ca.horzcat(0, -p[2], p[1]), ca.horzcat(p[2], 0, -p[0]), ca.horzcat(-p[1], p[0], 0))
    return ca.vertcat(ca.horzcat(E, ca.SX.zeros(3, 3)), ca.horzcat(-ca.mtimes(E, P), E))


def blocks_kernel() -> ca.Function:
    """Element ``i``'s blocks of ``A``, ``B``, ``C`` (Eq. 15, 17).

    Inputs ``(X_i, X_{i+1}, Jinv_{i-1}, Jinv_i, W_i, W_{i+1}, S_i, S_{i+1})`` (zeros past the ends);
    outputs ``D_i = A_ii``, ``U_i = A_{i,i+1}``, ``B_ii``, ``B_{i,i+1}``, ``B_{i+1,i}``, ``C_ii``, ``C_{i,i+1}``.
    """
    if "blocks" not in _KERNELS:
        X, Xn = ca.SX.sym("X", 12), ca.SX.sym("Xn", 12)
        Jp, Ji = ca.SX.sym("Jinv_prev", 6, 6), ca.SX.sym("Jinv", 6, 6)
        W, Wn, S, Sn = ca.SX.sym("W", 6, 5), ca.SX.sym("Wn", 6, 5), ca.SX.sym("S", 6), ca.SX.sym("Sn", 6)
        Xm = _X6(X)
        Pii = Ji + symmetric_from_lower(ca.mtimes([Xm, Jp, Xm.T]))
        Pup = -ca.mtimes(Ji, _X6(Xn).T)                     # P_{i,i+1}
        outs = [symmetric_from_lower(ca.mtimes([W.T, Pii, W])), ca.mtimes([W.T, Pup, Wn]),
                ca.mtimes([W.T, Pii, S]), ca.mtimes([W.T, Pup, Sn]), ca.mtimes([Wn.T, Pup.T, S]),
                ca.mtimes([S.T, Pii, S]), ca.mtimes([S.T, Pup, Sn])]
        _KERNELS["blocks"] = ca.Function("pbf_cfa_blocks", [X, Xn, Jp, Ji, W, Wn, S, Sn], outs,
                                         ["X", "Xn", "Jinv_prev", "Jinv", "W", "Wn", "S", "Sn"],
                                         ["D", "U", "Bd", "Bup", "Blo_next", "Cd", "Cup"])
    return _KERNELS["blocks"]


def rhs_kernel() -> ca.Function:
    """``R_i = -(B_{i,i-1} tau_{i-1} + B_ii tau_i + B_{i,i+1} tau_{i+1})``."""
    if "rhs" not in _KERNELS:
        Blo, Bd, Bup = ca.SX.sym("Blo", 5), ca.SX.sym("Bd", 5), ca.SX.sym("Bup", 5)
        tp, ti, tn = ca.SX.sym("tp"), ca.SX.sym("ti"), ca.SX.sym("tn")
        _KERNELS["rhs"] = ca.Function("pbf_cfa_rhs", [Blo, Bd, Bup, tp, ti, tn], [-(Blo * tp + Bd * ti + Bup * tn)])
    return _KERNELS["rhs"]


def qdd_kernel() -> ca.Function:
    """``qdd_i = (C tau_d)_i + (B^T F_c)_i`` from the neighbouring blocks."""
    if "qdd" not in _KERNELS:
        Cp, Cd, Cu = ca.SX.sym("Cup_prev"), ca.SX.sym("Cd"), ca.SX.sym("Cup")
        tp, ti, tn = ca.SX.sym("tp"), ca.SX.sym("ti"), ca.SX.sym("tn")
        Bp, Bd, Bn = ca.SX.sym("Bup_prev", 5), ca.SX.sym("Bd", 5), ca.SX.sym("Blo_next", 5)
        Fp, Fi, Fn = ca.SX.sym("Fp", 5), ca.SX.sym("Fi", 5), ca.SX.sym("Fn", 5)
        qdd = Cp * tp + Cd * ti + Cu * tn + ca.dot(Bp, Fp) + ca.dot(Bd, Fi) + ca.dot(Bn, Fn)
        _KERNELS["qdd"] = ca.Function("pbf_cfa_qdd", [Cp, Cd, Cu, tp, ti, tn, Bp, Bd, Bn, Fp, Fi, Fn], [qdd])
    return _KERNELS["qdd"]


def _shift_prev(A, k: int, zero) -> ca.MX:
    """Block ``i`` of the result is block ``i-1`` of ``A`` (``zero`` for ``i = 0``)."""
    return ca.horzcat(zero, A[:, :A.shape[1] - k])


def _shift_next(A, k: int, zero) -> ca.MX:
    """Block ``i`` of the result is block ``i+1`` of ``A`` (``zero`` for the last)."""
    return ca.horzcat(A[:, k:], zero)


def build(model: ArticulatedBody, schedule: Schedule | str = Schedule.SEQUENTIAL,
          levels: Levels | None = None) -> ca.Function:
    """CFA forward dynamics ``(q, qd, tau) -> qdd`` for a serial chain (see the module docstring).

    Raises:
        ModelError: the model is not a serial chain of 1-DOF joints with positive-definite link inertias.
    """
    schedule = Schedule.parse(schedule)
    gf = check_supported(model)
    lv = levels if levels is not None else Levels()
    n = gf.n
    q, qd, tau = ca.MX.sym("q", n), ca.MX.sym("qd", n), ca.MX.sym("tau", n)
    if n == 0:
        return ca.Function("cfa", [q, qd, tau], [ca.MX(0, 1)], ["q", "qd", "tau"], ["qdd"])
    X = adjoints(gf, q, lv)
    tau_d = tau.T - inverse_dynamics(gf, X, qd, None, True, schedule, lv)      # (1, n)
    Jinv = np.linalg.inv(gf.J)
    W = gf.complement()
    z6, z65 = ca.DM.zeros(6, 6), ca.DM.zeros(6, 5)
    Jinv_w = ca.DM(np.hstack(list(Jinv)))
    W_w = ca.DM(np.hstack(list(W)))
    S_w = ca.DM(gf.S.T)
    D, U, Bd, Bup, Blo_next, Cd, Cup = lv.apply(blocks_kernel(), [
        X, _shift_next(X, 1, ca.DM.zeros(12, 1)), _shift_prev(Jinv_w, 6, z6), Jinv_w,
        W_w, _shift_next(W_w, 5, z65), S_w, _shift_next(S_w, 1, ca.DM.zeros(6, 1))], n, "blocks")
    z1, z5 = ca.DM.zeros(1, 1), ca.DM.zeros(5, 1)
    t_prev, t_next = _shift_prev(tau_d, 1, z1), _shift_next(tau_d, 1, z1)
    R = lv.apply(rhs_kernel(), [_shift_prev(Blo_next, 1, z5), Bd, Bup, t_prev, tau_d, t_next], n, "rhs")[0]
    Fc = oddeven.solve_symbolic(D, U[:, :5 * (n - 1)], R, n, 5, 1, lv)
    qdd = lv.apply(qdd_kernel(), [_shift_prev(Cup, 1, z1), Cd, Cup, t_prev, tau_d, t_next,
                                  _shift_prev(Bup, 1, z5), Bd, Blo_next,
                                  _shift_prev(Fc, 1, z5), Fc, _shift_next(Fc, 1, z5)], n, "qdd")[0]
    return ca.Function("cfa", [q, qd, tau], [qdd.T], ["q", "qd", "tau"], ["qdd"])


def depth(n: int, schedule: Schedule | str = Schedule.PARALLEL) -> int:
    """Sequential levels of CFA on a chain of ``n`` elements (matches :class:`Levels` of a build)."""
    L = math.ceil(math.log2(n)) if n > 1 else 0
    if Schedule.parse(schedule) is Schedule.SEQUENTIAL:
        return 3 * n + L + 8
    return 4 * L + 12


@hookimpl
def pbf_forward_dynamics():
    return [PluginInfo("cfa", "constraint force algorithm (seed 003 Eq. 9-17, Alg. 1): A, B, C and odd-even "
                       "elimination, serial chains of 1-DOF joints, O(log n) depth", build,
                       meta={"depth": depth, "trees": False, "armature": False})]
