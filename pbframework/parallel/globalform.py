"""The Lie-group global matrix form of the equations of motion (seed 003 Eq. 2, Ploen & Park).

For a model expanded to elements (:func:`pbframework.kinematics.element_tree`: one elementary hinge or
slide per coordinate, numbered parents first), the global form stacks per-element quantities:

* ``S = diag(S_1 .. S_n)`` (``6n x n``): the joint twists ``S_i`` in element coordinates (``[axis; 0]`` for
  a hinge, ``[0; axis]`` for a slide, unit length, so ``S^T S = I``);
* ``Gamma`` (``6n x 6n``): block ``(i, parent(i))`` is the adjoint ``X_i = Ad_{f_i^{-1}}`` mapping twists
  from the parent element's frame to element ``i``'s frame (block lower bi-diagonal for a chain);
* ``J = diag(J_1 .. J_n)``: the 6x6 spatial inertias.

With twists ``[omega; v]`` and wrenches ``[moment; force]`` (Featherstone's coordinates, so ``ad_V`` is the
motion cross-product matrix ``crm(V)`` and ``ad_V^T = -crf(V)``), Eq. 2 reads

* (2a) ``(I - Gamma) V = S qd``                                    (velocity propagation, forward scan)
* (2b) ``(I - Gamma) Vd = S qdd + ad_V (S qd) + e_0 a_0``          (acceleration propagation, forward)
* (2c) ``(I - Gamma)^T F = J Vd - ad_V^T (J V)``                   (force propagation, backward scan)
* (2d) ``tau = S^T F``

where ``ad_V (S qd)`` is ``V_i x S_i qd_i`` and the constant ``a_0 = [0; -g]`` (the base accelerating
against gravity) enters the roots. ``M(q) = S^T (I-Gamma)^{-T} J (I-Gamma)^{-1} S``.

This module gives (1) :class:`GlobalForm`, the numeric data of a model; (2) dense numeric operators for
checking Eq. 2 (:func:`operators`, :func:`mass_matrix`); (3) the per-element SX kernels and the symbolic
propagations built from :mod:`pbframework.parallel.scan` (:func:`adjoints`, :func:`velocities`,
:func:`accelerations`, :func:`forces`, :func:`inverse_dynamics`), on which the forward-dynamics plug-ins
``abia``, ``jsiia`` and ``cfa`` are built; (4) the FD-SCALING model (:func:`random_chain`) and its Pinocchio
twin (:func:`to_pinocchio`) for reference tests and benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import casadi as ca
import numpy as np

from ..dynamics import motion_subspace, spatial_inertia
from ..kinematics import element_tree
from ..model import WORLD, ArticulatedBody, Joint, Link
from .scan import (AffineStep, Levels, Schedule, backward_scan, column_kernel, depth_levels, forward_scan,
                   take)

__all__ = [
    "GlobalForm", "global_form", "operators", "mass_matrix", "numeric_adjoints", "reference_forward_dynamics",
    "wide", "as_column", "parent_values", "adjoints", "velocities", "local_velocity_terms", "accelerations",
    "forces", "torques",
    "inverse_dynamics",
    "random_chain", "to_pinocchio",
]


# ======================================================================================================
# Numeric data of a model
# ======================================================================================================

@dataclass(frozen=True, eq=False)
class GlobalForm:
    """The per-element data of Eq. 2 for one model (numeric, q-independent).

    Attributes:
        model_name: the model's name (for messages).
        n: number of elements (= coordinates).
        parent: parent element per element, -1 for the world; parents first.
        S: ``(n, 6)`` unit joint twists in element coordinates.
        J: ``(n, 6, 6)`` spatial inertias in element coordinates (zero for the massless intermediate
            elements of a multi-DOF joint).
        kin: ``(n, 33)`` kinematic parameters of the adjoint kernel: ``R0, R0 K, R0 K^2`` (column-major
            3x3 each), ``p0``, ``R0 s_v`` where ``(R0, p0)`` is the joint origin and ``K`` the axis' skew
            matrix, so ``R(q) = R0 + sin q R0 K + (1 - cos q) R0 K^2`` and ``p(q) = p0 + q R0 s_v``.
        a0: ``(6,)`` the spatial acceleration of the world, ``[0; -gravity]``.
        joint: per element, the name of the model joint it belongs to.
        link: per element, the name of the link its frame carries (the joint's child link).
    """

    model_name: str
    n: int
    parent: tuple[int, ...]
    S: np.ndarray
    J: np.ndarray
    kin: np.ndarray
    a0: np.ndarray
    joint: tuple[str, ...]
    link: tuple[str, ...]

    @property
    def is_chain(self) -> bool:
        return all(p == i - 1 for i, p in enumerate(self.parent))

    @property
    def height(self) -> int:
        return len(depth_levels(self.parent))

    def children(self, i: int) -> list[int]:
        return [k for k, p in enumerate(self.parent) if p == i]

    def complement(self) -> np.ndarray:
        """``(n, 6, 5)``: per element an orthonormal basis ``W_i`` of the constraint wrenches, ``W_i^T S_i = 0``."""
        W = np.empty((self.n, 6, 5))
        for i, s in enumerate(self.S):
            U, _, _ = np.linalg.svd(s.reshape(6, 1))
            W[i] = U[:, 1:]
        return W


def global_form(model: ArticulatedBody) -> GlobalForm:
    """The :class:`GlobalForm` of ``model`` (cached on the model)."""
    key = "globalform"
    if key in model.cache:
        return model.cache[key]
    tree = element_tree(model)
    if tree.on_group:
        bad = sorted({j.name for j in model.joints if j.type.value in ("ball", "free")})
        raise ValueError(f"model {model.name!r}: the seed-003 global form takes hinges and slides (revolute, "
                         f"prismatic and the Euler-angle joints built from them); ball / free joints "
                         f"({', '.join(bad)}) are quaternions: use fd='aba'")
    n = len(tree.elements)
    S = np.zeros((n, 6))
    J = np.zeros((n, 6, 6))
    kin = np.zeros((n, 33))
    for i, e in enumerate(tree.elements):
        s = motion_subspace(e)
        S[i] = s
        J[i] = spatial_inertia(e.mass, e.com, e.inertia)
        R0, p0 = e.origin[:3, :3], e.origin[:3, 3]
        K = _skew_np(s[:3])
        kin[i] = np.concatenate([R0.ravel("F"), (R0 @ K).ravel("F"), (R0 @ K @ K).ravel("F"), p0, R0 @ s[3:]])
    joint, link = [], []
    for j in model.joints:
        for _ in range(j.nq):
            joint.append(j.name)
            link.append(j.child)
    gf = GlobalForm(model.name, n, tuple(e.parent for e in tree.elements), S, J, kin,
                    np.concatenate([np.zeros(3), -np.asarray(model.gravity, float)]), tuple(joint), tuple(link))
    model.cache[key] = gf
    return gf


def _skew_np(v) -> np.ndarray:
    return np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]], dtype=float)


# ======================================================================================================
# Dense numeric operators (to check Eq. 2 and for reference)
# ======================================================================================================

def numeric_adjoints(gf: GlobalForm, q: np.ndarray) -> np.ndarray:
    """``(n, 6, 6)``: the adjoints ``X_i(q_i)`` (parent-element to element coordinates of twists)."""
    q = np.asarray(q, float)
    X = np.zeros((gf.n, 6, 6))
    for i in range(gf.n):
        k = gf.kin[i]
        R = (k[0:9] + np.sin(q[i]) * k[9:18] + (1 - np.cos(q[i])) * k[18:27]).reshape(3, 3, order="F")
        p = k[27:30] + q[i] * k[30:33]
        E = R.T
        X[i, :3, :3] = E
        X[i, 3:, 3:] = E
        X[i, 3:, :3] = -E @ _skew_np(p)
    return X


def operators(gf: GlobalForm, q: np.ndarray) -> dict[str, np.ndarray]:
    """The dense operators of Eq. 2 at ``q``: ``Gamma``, ``I_minus_Gamma`` (``6n x 6n``), ``S`` (``6n x n``),
    ``J`` (``6n x 6n``). For checking and teaching; the algorithms never form them."""
    n = gf.n
    X = numeric_adjoints(gf, q)
    G = np.zeros((6 * n, 6 * n))
    for i, p in enumerate(gf.parent):
        if p >= 0:
            G[6 * i:6 * i + 6, 6 * p:6 * p + 6] = X[i]
    S = np.zeros((6 * n, n))
    Jm = np.zeros((6 * n, 6 * n))
    for i in range(n):
        S[6 * i:6 * i + 6, i] = gf.S[i]
        Jm[6 * i:6 * i + 6, 6 * i:6 * i + 6] = gf.J[i]
    roots = np.zeros((6 * n, 6))
    for i, p in enumerate(gf.parent):
        if p < 0:
            roots[6 * i:6 * i + 6] = X[i]
    return {"Gamma": G, "I_minus_Gamma": np.eye(6 * n) - G, "S": S, "J": Jm, "roots": roots, "X": X}


def mass_matrix(gf: GlobalForm, q: np.ndarray) -> np.ndarray:
    """``M(q) = S^T (I-Gamma)^{-T} J (I-Gamma)^{-1} S`` by dense solves (reference only)."""
    op = operators(gf, q)
    Phi = np.linalg.solve(op["I_minus_Gamma"], op["S"])
    return Phi.T @ op["J"] @ Phi


def reference_forward_dynamics(gf: GlobalForm, q, qd, tau, dtype=np.longdouble) -> np.ndarray:
    """``qdd = M^{-1} (tau - C qd - N)`` evaluated in ``dtype`` (default: x87 80-bit ``long double``).

    An accuracy reference independent of every algorithm here: ``Phi = (I - Gamma)^{-1} S`` by block
    forward substitution, ``M = Phi^T J Phi``, the bias torques by Eq. 2a-2d, and a Cholesky solve, all in
    ``dtype``. The model data (``gf``) are the double-precision numbers that define the problem.
    """
    n = gf.n
    q, qd, tau = (np.asarray(v, dtype=dtype) for v in (q, qd, tau))
    X = np.zeros((n, 6, 6), dtype=dtype)
    kin = gf.kin.astype(dtype)
    for i in range(n):
        k = kin[i]
        R = (k[0:9] + np.sin(q[i]) * k[9:18] + (1 - np.cos(q[i])) * k[18:27]).reshape(3, 3, order="F")
        p = k[27:30] + q[i] * k[30:33]
        E = R.T
        P = np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]], dtype=dtype)
        X[i, :3, :3] = E
        X[i, 3:, 3:] = E
        X[i, 3:, :3] = -E @ P
    S, J = gf.S.astype(dtype), gf.J.astype(dtype)

    def cross_m(v):
        w, u = v[:3], v[3:]
        W = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]], dtype=dtype)
        Uu = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]], dtype=dtype)
        out = np.zeros((6, 6), dtype=dtype)
        out[:3, :3] = W
        out[3:, 3:] = W
        out[3:, :3] = Uu
        return out

    V = np.zeros((n, 6), dtype=dtype)
    A = np.zeros((n, 6), dtype=dtype)
    F = np.zeros((n, 6), dtype=dtype)
    Phi = np.zeros((n, 6, n), dtype=dtype)
    a0 = gf.a0.astype(dtype)
    for i, p in enumerate(gf.parent):
        vp = V[p] if p >= 0 else np.zeros(6, dtype=dtype)
        ap = A[p] if p >= 0 else a0
        V[i] = X[i] @ vp + S[i] * qd[i]
        A[i] = X[i] @ ap + cross_m(V[i]) @ (S[i] * qd[i])
        F[i] = J[i] @ A[i] - cross_m(V[i]).T @ (J[i] @ V[i])
        if p >= 0:
            Phi[i] = X[i] @ Phi[p]
        Phi[i, :, i] += S[i]
    for i in range(n - 1, -1, -1):
        if gf.parent[i] >= 0:
            F[gf.parent[i]] += X[i].T @ F[i]
    bias = np.einsum("ij,ij->i", S, F)
    Pm = Phi.reshape(n * 6, n) if n else np.zeros((0, 0), dtype=dtype)
    Jb = np.zeros((6 * n, 6 * n), dtype=dtype)
    for i in range(n):
        Jb[6 * i:6 * i + 6, 6 * i:6 * i + 6] = J[i]
    M = Pm.T @ Jb @ Pm
    M = 0.5 * (M + M.T)
    L = np.zeros_like(M)
    for j in range(n):                                    # Cholesky in dtype
        d = M[j, j] - L[j, :j] @ L[j, :j]
        L[j, j] = np.sqrt(d)
        L[j + 1:, j] = (M[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    y = tau - bias
    z = np.zeros(n, dtype=dtype)
    for i in range(n):
        z[i] = (y[i] - L[i, :i] @ z[:i]) / L[i, i]
    x = np.zeros(n, dtype=dtype)
    for i in range(n - 1, -1, -1):
        x[i] = (z[i] - L[i + 1:, i] @ x[i + 1:]) / L[i, i]
    return x


# ======================================================================================================
# Spatial algebra on SX (X packed as 12 numbers: E column-major, then p)
# ======================================================================================================

def _skew(v) -> ca.SX:
    return ca.vertcat(ca.horzcat(0, -v[2], v[1]), ca.horzcat(v[2], 0, -v[0]), ca.horzcat(-v[1], v[0], 0))


def _unpack_X(X) -> tuple[ca.SX, ca.SX]:
    return ca.reshape(X[0:9], 3, 3), X[9:12]


def motion_transform(X, v) -> ca.SX:
    """``X v`` for twists ``v`` (``6 x k``): ``[E w; E (v - p x w)]``."""
    E, p = _unpack_X(X)
    w, u = v[0:3, :], v[3:6, :]
    return ca.vertcat(ca.mtimes(E, w), ca.mtimes(E, u - ca.mtimes(_skew(p), w)))


def force_transform_T(X, f) -> ca.SX:
    """``X^T f`` for wrenches ``f`` (``6 x k``), child to parent: ``[E^T n + p x E^T f; E^T f]``."""
    E, p = _unpack_X(X)
    n_, f_ = ca.mtimes(E.T, f[0:3, :]), ca.mtimes(E.T, f[3:6, :])
    return ca.vertcat(n_ + ca.mtimes(_skew(p), f_), f_)


def inertia_congruence(X, M) -> ca.SX:
    """``X^T M X`` for a symmetric 6x6 ``M`` in child coordinates (result in parent coordinates)."""
    E, p = _unpack_X(X)
    R = E.T
    A, B, C = M[0:3, 0:3], M[0:3, 3:6], M[3:6, 3:6]
    A1, B1, C1 = ca.mtimes([R, A, E]), ca.mtimes([R, B, E]), ca.mtimes([R, C, E])
    P = _skew(p)
    B2 = B1 + ca.mtimes(P, C1)
    PC = ca.mtimes(P, C1)
    BP = ca.mtimes(B1, P)
    A2 = A1 - BP - BP.T - ca.mtimes(PC, P)
    return symmetric_from_lower(ca.vertcat(ca.horzcat(A2, B2), ca.horzcat(B2.T, C1)))


def symmetric_from_lower(M) -> ca.SX:
    """Rebuild ``M`` from its lower triangle so the upper half costs nothing."""
    n = M.shape[0]
    out = ca.SX.zeros(n, n)
    for j in range(n):
        for i in range(j, n):
            out[i, j] = M[i, j]
            if i != j:
                out[j, i] = M[i, j]
    return out


def crm(v) -> ca.SX:
    """Motion cross-product matrix ``ad_v`` of a twist ``v``."""
    w, u = _skew(v[0:3]), _skew(v[3:6])
    return ca.vertcat(ca.horzcat(w, ca.SX.zeros(3, 3)), ca.horzcat(u, w))


def crf(v) -> ca.SX:
    """Force cross-product matrix ``-ad_v^T``."""
    return -crm(v).T


# ======================================================================================================
# Kernels (model independent: every element-specific number is an input)
# ======================================================================================================

_K: dict[str, ca.Function] = {}
_STEPS: dict[str, AffineStep] = {}


def _kernel(name: str, build) -> ca.Function:
    if name not in _K:
        _K[name] = build()
    return _K[name]


def adjoint_kernel() -> ca.Function:
    """``(q_i, kin_i) -> X_i`` (12): the adjoint of element ``i`` at coordinate ``q_i``."""
    def build():
        q, k = ca.SX.sym("q"), ca.SX.sym("kin", 33)
        R = ca.reshape(k[0:9] + ca.sin(q) * k[9:18] + (1 - ca.cos(q)) * k[18:27], 3, 3)
        p = k[27:30] + q * k[30:33]
        return ca.Function("pbf_adjoint", [q, k], [ca.vertcat(ca.vec(R.T), p)], ["q", "kin"], ["X"])
    return _kernel("adjoint", build)


def local_velocity_kernel() -> ca.Function:
    """``(V_i, S_i, qd_i, J_i) -> (ad_V (S qd), -ad_V^T (J V))``: velocity-product acceleration and bias wrench."""
    def build():
        V, S, qd, J = ca.SX.sym("V", 6), ca.SX.sym("S", 6), ca.SX.sym("qd"), ca.SX.sym("J", 6, 6)
        c = ca.mtimes(crm(V), S * qd)
        pB = ca.mtimes(crf(V), ca.mtimes(J, V))
        return ca.Function("pbf_local_velocity", [V, S, qd, J], [c, pB], ["V", "S", "qd", "J"], ["c", "pB"])
    return _kernel("local_velocity", build)


def local_force_kernel(k: int = 1) -> ca.Function:
    """``(Vd_i, pB_i, J_i) -> J Vd + pB``: the right-hand side of (2c) for one element, ``k`` columns."""
    def build():
        def make(kk):
            Vd, pB, J = ca.SX.sym("Vd", 6, kk), ca.SX.sym("pB", 6, kk), ca.SX.sym("J", 6, 6)
            return [Vd, pB, J], [ca.mtimes(J, Vd) + pB], None
        return column_kernel(f"pbf_local_force{k}", k, make, [True, True, False], [True])
    return _kernel(f"local_force{k}", build)


def torque_kernel(k: int = 1) -> ca.Function:
    """``(F_i, S_i) -> S_i^T F_i`` (2d), ``k`` columns."""
    def build():
        def make(kk):
            F, S = ca.SX.sym("F", 6, kk), ca.SX.sym("S", 6)
            return [F, S], [ca.mtimes(S.T, F)], None
        return column_kernel(f"pbf_torque{k}", k, make, [True, False], [True])
    return _kernel(f"torque{k}", build)


VELOCITY_STEP = AffineStep("pbf_vel", lambda x, X, S, qd: motion_transform(X, x) + S * qd, 6,
                           [(12, 1), (6, 1), (1, 1)])
"""(2a): ``V_i = X_i V_parent + S_i qd_i``."""

ACCELERATION_STEP = AffineStep("pbf_acc", lambda x, X, S, qdd, c: motion_transform(X, x) + S * qdd + c, 6,
                               [(12, 1), (6, 1), (1, 1), (6, 1)])
"""(2b): ``Vd_i = X_i Vd_parent + S_i qdd_i + ad_{V_i}(S_i qd_i)``."""

FORCE_STEP = AffineStep("pbf_force", lambda x, X: force_transform_T(X, x), 6, [(12, 1)])
"""(2c): a child's wrench seen by its parent, ``X_i^T F_i``."""


# ======================================================================================================
# Symbolic propagations (Eq. 2 as block bi-diagonal solves) on wide arrays
# ======================================================================================================
#
# A wide array holds one block per element side by side (see pbframework.parallel.scan): twists are (6, n), adjoints
# (12, n), inertias (6, 6n), coordinates (1, n).

def as_column(a: np.ndarray) -> ca.DM:
    """A numpy vector as a DM column."""
    return ca.DM(np.asarray(a, float).reshape(-1, 1))


def wide(gf: GlobalForm, what: str) -> ca.DM:
    """Constant wide arrays of the model: ``"S"`` (6, n), ``"J"`` (6, 6n), ``"kin"`` (33, n)."""
    if what == "S":
        return ca.DM(gf.S.T)
    if what == "J":
        return ca.DM(np.hstack(list(gf.J))) if gf.n else ca.DM(6, 0)
    if what == "kin":
        return ca.DM(gf.kin.T)
    raise KeyError(f"wide: unknown array {what!r} (S, J, kin)")


def _row(x) -> ca.MX:
    """A coordinate vector ``(n, 1)`` as a wide ``(1, n)`` array."""
    return x.T if x.size2() == 1 else x


def parent_values(A: ca.MX, parent: Sequence[int], root: ca.DM, m: int, k: int = 1) -> ca.MX:
    """Wide array whose block ``i`` is block ``parent(i)`` of ``A`` (``root`` for the roots): one gather."""
    n = len(parent)
    if all(p == i - 1 for i, p in enumerate(parent)):
        return ca.horzcat(root, A[:, :(n - 1) * k]) if n > 1 else root
    both = ca.horzcat(A, root)
    return take(both, [n if p < 0 else p for p in parent], k)


def adjoints(gf: GlobalForm, q: ca.MX, levels: Levels) -> ca.MX:
    """All ``X_i(q_i)``, wide ``(12, n)``, in one level."""
    return levels.apply(adjoint_kernel(), [_row(q), wide(gf, "kin")], gf.n, "adjoint")[0]


def velocities(gf: GlobalForm, X: ca.MX, qd: ca.MX, schedule: Schedule | str, levels: Levels) -> ca.MX:
    """(2a) ``(I - Gamma) V = S qd`` by a forward scan; wide ``(6, n)``."""
    return forward_scan(VELOCITY_STEP, [X, wide(gf, "S"), _row(qd)], gf.parent, ca.DM.zeros(6, 1), 1,
                        schedule, levels, "velocity")


def local_velocity_terms(gf: GlobalForm, V: ca.MX, qd: ca.MX, levels: Levels) -> tuple[ca.MX, ca.MX]:
    """Per element ``c_i = ad_{V_i}(S_i qd_i)`` and ``pB_i = -ad_{V_i}^T (J_i V_i)`` in one level."""
    c, pB = levels.apply(local_velocity_kernel(), [V, wide(gf, "S"), _row(qd), wide(gf, "J")], gf.n,
                         "local_velocity")
    return c, pB


def accelerations(gf: GlobalForm, X: ca.MX, qdd: ca.MX | None, c: ca.MX | None, gravity: bool,
                  schedule: Schedule | str, levels: Levels) -> ca.MX:
    """(2b) ``(I - Gamma) Vd = S qdd + ad_V(S qd) + e_0 a_0`` by a forward scan; ``qdd``/``c`` None = 0."""
    U = [X, wide(gf, "S"), ca.DM.zeros(1, gf.n) if qdd is None else _row(qdd),
         ca.DM.zeros(6, gf.n) if c is None else c]
    x0 = as_column(gf.a0) if gravity else ca.DM.zeros(6, 1)
    return forward_scan(ACCELERATION_STEP, U, gf.parent, x0, 1, schedule, levels, "acceleration")


def forces(gf: GlobalForm, X: ca.MX, rhs: ca.MX, schedule: Schedule | str, levels: Levels,
           k: int = 1) -> ca.MX:
    """(2c) ``(I - Gamma)^T F = rhs`` by a backward scan (``rhs_i = J_i Vd_i - ad^T(J V)``); ``k`` columns."""
    step = FORCE_STEP if k == 1 else _force_step(k)
    return backward_scan(step, [X], rhs, gf.parent, k, schedule, levels, "force")


def _force_step(k: int) -> AffineStep:
    name = f"pbf_force{k}"
    if name not in _STEPS:
        _STEPS[name] = AffineStep(name, lambda x, X: force_transform_T(X, x), 6, [(12, 1)])
    return _STEPS[name]


def torques(gf: GlobalForm, F: ca.MX, levels: Levels, k: int = 1) -> ca.MX:
    """(2d) ``tau_i = S_i^T F_i`` in one level; wide ``(1, k n)``."""
    return levels.apply(torque_kernel(k), [F, wide(gf, "S")], gf.n, "torque")[0]


def inverse_dynamics(gf: GlobalForm, X: ca.MX, qd: ca.MX | None, qdd: ca.MX | None, gravity: bool,
                     schedule: Schedule | str, levels: Levels) -> ca.MX:
    """Inverse dynamics by Eq. 2a-2d, ``tau`` wide ``(1, n)``; ``qd``/``qdd`` None means zero.

    With ``qdd = None`` this is the bias torque ``C(q, qd) qd + N(q)`` of Eq. 6 (JSIIA, CFA).
    """
    if qd is not None:
        V = velocities(gf, X, qd, schedule, levels)
        c, pB = local_velocity_terms(gf, V, qd, levels)
    else:
        c, pB = None, ca.DM.zeros(6, 1)
    Vd = accelerations(gf, X, qdd, c, gravity, schedule, levels)
    rhs = levels.apply(local_force_kernel(1), [Vd, pB, wide(gf, "J")], gf.n, "local_force")[0]
    F = forces(gf, X, rhs, schedule, levels)
    return torques(gf, F, levels)


# ======================================================================================================
# The FD-SCALING model (seed 003 §V) and its Pinocchio twin
# ======================================================================================================

def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q @ np.diag(np.sign(np.diag(R)))
    if np.linalg.det(Q) < 0:
        Q[:, 0] *= -1
    return Q


def random_chain(n: int, seed: int = 0, *, offset: float = 0.3, gravity=(0.0, 0.0, -9.81)) -> ArticulatedBody:
    """A serial chain of ``n`` revolute links with random twists and inertias (DESIGN FD-SCALING).

    Joint ``i`` sits at a random pose in link ``i-1`` (uniform random rotation, offset ``N(0, offset^2)``
    per axis) with a uniformly random unit axis. Link ``i`` has mass ``U(0.5, 2)`` kg, centre of mass
    ``N(0, 0.2^2)`` per axis, and the inertia of a random ellipsoid-like mass distribution (second moments
    ``U(0.01, 0.2)`` along random principal axes), so it is positive definite and satisfies the triangle
    inequality.
    """
    if int(n) < 1:
        raise ValueError(f"random_chain: n must be >= 1, got {n!r}")
    rng = np.random.default_rng(seed)
    links, joints = [], []
    for i in range(int(n)):
        sig = rng.uniform(0.01, 0.2, 3)
        Rp = _random_rotation(rng)
        inertia = Rp @ np.diag([sig[1] + sig[2], sig[0] + sig[2], sig[0] + sig[1]]) @ Rp.T
        links.append(Link(f"link{i}", rng.uniform(0.5, 2.0), rng.normal(0.0, 0.2, 3), inertia))
        T = np.eye(4)
        T[:3, :3] = _random_rotation(rng)
        T[:3, 3] = rng.normal(0.0, offset, 3) if i > 0 else 0.0
        axis = rng.normal(size=3)
        joints.append(Joint(f"joint{i}", "revolute", WORLD if i == 0 else f"link{i - 1}", f"link{i}",
                            origin=T, axis=axis / np.linalg.norm(axis)))
    return ArticulatedBody(links, joints, gravity=gravity, name=f"random_chain{n}_s{seed}")


def to_pinocchio(model: ArticulatedBody):
    """The same articulated body as a ``pinocchio.Model``: one unaligned revolute / prismatic joint per
    element, same placements, inertias and gravity. For reference tests and benchmarks.

    Pinocchio numbers joints depth first (its CRBA assumes contiguous subtrees), ours breadth first, so the
    coordinates may be permuted on trees.

    Returns:
        ``(pin_model, order)`` where ``order[k]`` is our coordinate index of Pinocchio's coordinate ``k``:
        ``q_pin = q[order]`` and ``qdd[order] = qdd_pin``. ``order`` is the identity for a chain.

    Raises:
        ImportError: Pinocchio is not installed (``pip install pin``).
    """
    import pinocchio as pin

    tree = element_tree(model)
    gf = global_form(model)
    pm = pin.Model()
    pm.gravity = pin.Motion(np.concatenate([np.asarray(model.gravity, float), np.zeros(3)]))
    children: dict[int, list[int]] = {}
    for i, e in enumerate(tree.elements):
        children.setdefault(e.parent, []).append(i)
    order: list[int] = []
    stack = list(reversed(children.get(-1, [])))
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(children.get(i, [])))
    pin_id = {-1: 0}
    for i in order:
        e = tree.elements[i]
        jm = (pin.JointModelRevoluteUnaligned(np.asarray(e.axis, float)) if e.kind == "R"
              else pin.JointModelPrismaticUnaligned(np.asarray(e.axis, float)))
        placement = pin.SE3(np.asarray(e.origin[:3, :3], float), np.asarray(e.origin[:3, 3], float))
        jid = pm.addJoint(pin_id[e.parent], jm, placement, f"{gf.joint[i]}_{i}")
        pm.appendBodyToJoint(jid, pin.Inertia(float(e.mass), np.asarray(e.com, float),
                                              np.asarray(e.inertia, float)), pin.SE3.Identity())
        pin_id[i] = jid
    return pm, np.asarray(order, dtype=int)
