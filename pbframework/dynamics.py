"""The dynamics stage: Newton-Euler rigid-body algorithms as CasADi functions.

Public entry points (each resolves its algorithm through the plug-in registry, so a third-party plug-in
can replace or add one, and caches the ``casadi.Function`` on the model):

- :func:`rnea` ``(q, v, a) -> tau``   inverse dynamics (recursive Newton-Euler)
- :func:`crba` ``q -> M``            joint-space mass matrix (composite rigid body)
- :func:`aba` ``(q, v, tau) -> a``   forward dynamics (articulated body)
- :func:`nonlinear_effects` ``(q, v) -> h = C(q, v) v + g(q)``, :func:`gravity_torque` ``q -> g(q)``
- :func:`forward_dynamics` ``(model, algorithm)``: any registered forward-dynamics plug-in.

Velocities are the time derivatives of the model's coordinates (``v = dq/dt``) for hinges, slides and
Euler-angle joints; for ``ball`` and ``free`` joints they are Pinocchio's (angular, and linear then angular,
velocity in the child frame), so ``q`` has ``model.nq`` entries and ``v``, ``a``, ``tau`` ``model.nv``.
Gravity is ``model.gravity``. The ``build_*`` functions below are the built-in implementations; they run over the
elements of :func:`pbframework.kinematics.element_tree` in body coordinates (Featherstone's spatial
algebra, motion vectors ``[omega; v]``).
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from .kinematics import Element, element_coordinates, element_tree, joint_motion
from .model import ArticulatedBody


# -- spatial algebra ---------------------------------------------------------------------------------

def _skew(v) -> ca.SX:
    return ca.vertcat(ca.horzcat(0, -v[2], v[1]), ca.horzcat(v[2], 0, -v[0]), ca.horzcat(-v[1], v[0], 0))


def _crm(v) -> ca.SX:
    """Spatial motion cross product matrix ``v x``."""
    w, u = _skew(v[:3]), _skew(v[3:])
    return ca.vertcat(ca.horzcat(w, ca.SX.zeros(3, 3)), ca.horzcat(u, w))


def _crf(v) -> ca.SX:
    """Spatial force cross product matrix ``v x*`` = -crm(v)^T."""
    return -_crm(v).T


def spatial_inertia(mass: float, com: np.ndarray, inertia: np.ndarray) -> np.ndarray:
    """6x6 spatial inertia in a body frame from mass, centre of mass and inertia about the centre of mass."""
    cx = np.array([[0, -com[2], com[1]], [com[2], 0, -com[0]], [-com[1], com[0], 0]])
    out = np.zeros((6, 6))
    out[:3, :3] = inertia + mass * cx @ cx.T
    out[:3, 3:] = mass * cx
    out[3:, :3] = mass * cx.T
    out[3:, 3:] = mass * np.eye(3)
    return out


def motion_subspace(e: Element) -> np.ndarray:
    """The motion subspace of a hinge or slide element: a 6-vector ``[omega; v]`` per unit rate."""
    if e.nv != 1:
        raise ValueError(f"element kind {e.kind!r} has {e.nv} velocities: use motion_subspace_matrix")
    s = np.zeros(6)
    if e.kind == "R":
        s[:3] = e.axis
    else:
        s[3:] = e.axis
    return s


def motion_subspace_matrix(e: Element) -> np.ndarray:
    """The motion subspace ``S`` (6 x nv) of any element: spatial velocity ``[omega; v] = S v_e`` in the
    element frame (spherical: the angular velocity; free: Pinocchio's linear-then-angular order)."""
    if e.kind == "S":
        return np.vstack([np.eye(3), np.zeros((3, 3))])
    if e.kind == "F":
        return np.block([[np.zeros((3, 3)), np.eye(3)], [np.eye(3), np.zeros((3, 3))]])
    return motion_subspace(e)[:, None]


def _group_rnea(model: ArticulatedBody) -> ca.Function:
    """RNEA over elements of any size (``ball`` / ``free`` among them): ``(q, v, a) -> tau``."""
    tree = element_tree(model)
    q, v, a = ca.SX.sym("q", model.nq), ca.SX.sym("v", model.nv), ca.SX.sym("a", model.nv)
    X, vel, acc, f = [], [], [], []
    for i, e in enumerate(tree.elements):
        S = ca.DM(motion_subspace_matrix(e))
        vs, As = ca.mtimes(S, v[tree.v_slice(i)]), ca.mtimes(S, a[tree.v_slice(i)])
        Xi = parent_to_child(e, element_coordinates(tree, q, i))
        vp = ca.SX.zeros(6) if e.parent < 0 else vel[e.parent]
        ap = _gravity_accel(model) if e.parent < 0 else acc[e.parent]
        vi = ca.mtimes(Xi, vp) + vs
        ai = ca.mtimes(Xi, ap) + As + ca.mtimes(_crm(vi), vs)
        I = ca.DM(spatial_inertia(e.mass, e.com, e.inertia))
        X.append(Xi)
        vel.append(vi)
        acc.append(ai)
        f.append(ca.mtimes(I, ai) + ca.mtimes(_crf(vi), ca.mtimes(I, vi)))
    tau: list = [None] * len(tree.elements)
    for i in reversed(range(len(tree.elements))):
        e = tree.elements[i]
        tau[i] = ca.mtimes(ca.DM(motion_subspace_matrix(e)).T, f[i]) + e.armature * a[tree.v_slice(i)]
        if e.parent >= 0:
            f[e.parent] = f[e.parent] + ca.mtimes(X[i].T, f[i])
    return ca.Function("rnea", [q, v, a], [ca.vertcat(*tau)], ["q", "v", "a"], ["tau"])


def _group_crba(model: ArticulatedBody) -> ca.Function:
    """CRBA over elements of any size: ``q -> M`` (nv x nv)."""
    tree = element_tree(model)
    q = ca.SX.sym("q", model.nq)
    n = len(tree.elements)
    X = [parent_to_child(e, element_coordinates(tree, q, i)) for i, e in enumerate(tree.elements)]
    Ic = [ca.SX(spatial_inertia(e.mass, e.com, e.inertia)) for e in tree.elements]
    for i in reversed(range(n)):
        p = tree.elements[i].parent
        if p >= 0:
            Ic[p] = Ic[p] + ca.mtimes([X[i].T, Ic[i], X[i]])
    M = ca.SX.zeros(model.nv, model.nv)
    for i, e in enumerate(tree.elements):
        Si = ca.DM(motion_subspace_matrix(e))
        F = ca.mtimes(Ic[i], Si)
        vi = tree.v_slice(i)
        M[vi, vi] = ca.mtimes(Si.T, F) + e.armature * ca.DM.eye(e.nv)
        j = i
        while tree.elements[j].parent >= 0:
            F = ca.mtimes(X[j].T, F)
            j = tree.elements[j].parent
            blk = ca.mtimes(ca.DM(motion_subspace_matrix(tree.elements[j])).T, F)
            M[tree.v_slice(j), vi] = blk
            M[vi, tree.v_slice(j)] = blk.T
    return ca.Function("crba", [q], [M], ["q"], ["M"])


def _group_aba(model: ArticulatedBody) -> ca.Function:
    """ABA over elements of any size: ``(q, v, tau) -> a`` (the k x k articulated inertias of multi-DOF
    elements solved by a symbolic LDL^T)."""
    tree = element_tree(model)
    q, v, tau = ca.SX.sym("q", model.nq), ca.SX.sym("v", model.nv), ca.SX.sym("tau", model.nv)
    n = len(tree.elements)
    S = [ca.DM(motion_subspace_matrix(e)) for e in tree.elements]
    X, vel, c, IA, pA = [], [], [], [], []
    for i, e in enumerate(tree.elements):
        Xi = parent_to_child(e, element_coordinates(tree, q, i))
        vp = ca.SX.zeros(6) if e.parent < 0 else vel[e.parent]
        vs = ca.mtimes(S[i], v[tree.v_slice(i)])
        vi = ca.mtimes(Xi, vp) + vs
        I = ca.SX(spatial_inertia(e.mass, e.com, e.inertia))
        X.append(Xi)
        vel.append(vi)
        c.append(ca.mtimes(_crm(vi), vs))
        IA.append(I)
        pA.append(ca.mtimes(_crf(vi), ca.mtimes(I, vi)))
    U, Dinv, u = [None] * n, [None] * n, [None] * n
    for i in reversed(range(n)):
        U[i] = ca.mtimes(IA[i], S[i])
        D = ca.mtimes(S[i].T, U[i]) + tree.elements[i].armature * ca.DM.eye(tree.elements[i].nv)
        Dinv[i] = 1 / D if D.shape == (1, 1) else ca.inv(D)
        u[i] = tau[tree.v_slice(i)] - ca.mtimes(S[i].T, pA[i])
        p = tree.elements[i].parent
        if p >= 0:
            UD = ca.mtimes(U[i], Dinv[i])
            Ia = IA[i] - ca.mtimes(UD, U[i].T)
            pa = pA[i] + ca.mtimes(Ia, c[i]) + ca.mtimes(UD, u[i])
            IA[p] = IA[p] + ca.mtimes([X[i].T, Ia, X[i]])
            pA[p] = pA[p] + ca.mtimes(X[i].T, pa)
    acc, qdd = [None] * n, [None] * n
    for i, e in enumerate(tree.elements):
        ap = _gravity_accel(model) if e.parent < 0 else acc[e.parent]
        a1 = ca.mtimes(X[i], ap) + c[i]
        qdd[i] = ca.mtimes(Dinv[i], u[i] - ca.mtimes(U[i].T, a1))
        acc[i] = a1 + ca.mtimes(S[i], qdd[i])
    return ca.Function("aba", [q, v, tau], [ca.vertcat(*qdd)], ["q", "v", "tau"], ["a"])


def parent_to_child(e: Element, qi) -> ca.SX:
    """Plücker transform (6x6) of motion vectors from the parent element frame to the element frame."""
    Rj, pj = joint_motion(e, qi)
    R0, p0 = ca.DM(e.origin[:3, :3]), ca.DM(e.origin[:3, 3])
    R = ca.mtimes(R0, Rj)                 # child axes in parent coordinates
    p = p0 + ca.mtimes(R0, pj)            # child origin in parent coordinates
    E = R.T
    return ca.vertcat(ca.horzcat(E, ca.SX.zeros(3, 3)), ca.horzcat(-ca.mtimes(E, _skew(p)), E))


def _gravity_accel(model: ArticulatedBody) -> ca.DM:
    return ca.DM(np.concatenate([np.zeros(3), -model.gravity]))


# -- built-in algorithms -----------------------------------------------------------------------------

def build_rnea(model: ArticulatedBody) -> ca.Function:
    """Recursive Newton-Euler inverse dynamics ``(q, v, a) -> tau``, O(N)."""
    tree = element_tree(model)
    if tree.on_group:
        return _group_rnea(model)
    n = model.nq
    q, v, a = ca.SX.sym("q", n), ca.SX.sym("v", n), ca.SX.sym("a", n)
    X, vel, acc, f = [], [], [], []
    for i, e in enumerate(tree.elements):
        s = ca.DM(motion_subspace(e))
        Xi = parent_to_child(e, q[i])
        vp = ca.SX.zeros(6) if e.parent < 0 else vel[e.parent]
        ap = _gravity_accel(model) if e.parent < 0 else acc[e.parent]
        vi = ca.mtimes(Xi, vp) + s * v[i]
        ai = ca.mtimes(Xi, ap) + s * a[i] + ca.mtimes(_crm(vi), s * v[i])
        I = ca.DM(spatial_inertia(e.mass, e.com, e.inertia))
        X.append(Xi)
        vel.append(vi)
        acc.append(ai)
        f.append(ca.mtimes(I, ai) + ca.mtimes(_crf(vi), ca.mtimes(I, vi)))
    tau = [None] * n
    for i in reversed(range(n)):
        e = tree.elements[i]
        tau[i] = ca.dot(ca.DM(motion_subspace(e)), f[i]) + e.armature * a[i]
        if e.parent >= 0:
            f[e.parent] = f[e.parent] + ca.mtimes(X[i].T, f[i])
    out = ca.vertcat(*tau) if n else ca.SX(0, 1)
    return ca.Function("rnea", [q, v, a], [out], ["q", "v", "a"], ["tau"])


def build_crba(model: ArticulatedBody) -> ca.Function:
    """Composite rigid body algorithm ``q -> M(q)``, O(N * depth)."""
    tree = element_tree(model)
    if tree.on_group:
        return _group_crba(model)
    n = model.nq
    q = ca.SX.sym("q", n)
    X = [parent_to_child(e, q[i]) for i, e in enumerate(tree.elements)]
    Ic = [ca.SX(spatial_inertia(e.mass, e.com, e.inertia)) for e in tree.elements]
    for i in reversed(range(n)):
        p = tree.elements[i].parent
        if p >= 0:
            Ic[p] = Ic[p] + ca.mtimes([X[i].T, Ic[i], X[i]])
    M = ca.SX.zeros(n, n)
    for i, e in enumerate(tree.elements):
        F = ca.mtimes(Ic[i], ca.DM(motion_subspace(e)))
        M[i, i] = ca.dot(ca.DM(motion_subspace(e)), F) + e.armature
        j = i
        while tree.elements[j].parent >= 0:
            F = ca.mtimes(X[j].T, F)
            j = tree.elements[j].parent
            M[i, j] = M[j, i] = ca.dot(ca.DM(motion_subspace(tree.elements[j])), F)
    return ca.Function("crba", [q], [M], ["q"], ["M"])


def build_aba(model: ArticulatedBody) -> ca.Function:
    """Articulated body algorithm ``(q, v, tau) -> a``, O(N)."""
    tree = element_tree(model)
    if tree.on_group:
        return _group_aba(model)
    n = model.nq
    q, v, tau = ca.SX.sym("q", n), ca.SX.sym("v", n), ca.SX.sym("tau", n)
    S = [ca.DM(motion_subspace(e)) for e in tree.elements]
    X, vel, c, IA, pA = [], [], [], [], []
    for i, e in enumerate(tree.elements):
        Xi = parent_to_child(e, q[i])
        vp = ca.SX.zeros(6) if e.parent < 0 else vel[e.parent]
        vi = ca.mtimes(Xi, vp) + S[i] * v[i]
        I = ca.SX(spatial_inertia(e.mass, e.com, e.inertia))
        X.append(Xi)
        vel.append(vi)
        c.append(ca.mtimes(_crm(vi), S[i] * v[i]))
        IA.append(I)
        pA.append(ca.mtimes(_crf(vi), ca.mtimes(I, vi)))
    U, D, u = [None] * n, [None] * n, [None] * n
    for i in reversed(range(n)):
        U[i] = ca.mtimes(IA[i], S[i])
        D[i] = ca.dot(S[i], U[i]) + tree.elements[i].armature
        u[i] = tau[i] - ca.dot(S[i], pA[i])
        p = tree.elements[i].parent
        if p >= 0:
            Ia = IA[i] - ca.mtimes(U[i], U[i].T) / D[i]
            pa = pA[i] + ca.mtimes(Ia, c[i]) + U[i] * (u[i] / D[i])
            IA[p] = IA[p] + ca.mtimes([X[i].T, Ia, X[i]])
            pA[p] = pA[p] + ca.mtimes(X[i].T, pa)
    acc, qdd = [None] * n, [None] * n
    for i, e in enumerate(tree.elements):
        ap = _gravity_accel(model) if e.parent < 0 else acc[e.parent]
        a1 = ca.mtimes(X[i], ap) + c[i]
        qdd[i] = (u[i] - ca.dot(U[i], a1)) / D[i]
        acc[i] = a1 + S[i] * qdd[i]
    out = ca.vertcat(*qdd) if n else ca.SX(0, 1)
    return ca.Function("aba", [q, v, tau], [out], ["q", "v", "tau"], ["a"])


def build_nonlinear_effects(model: ArticulatedBody) -> ca.Function:
    """``(q, v) -> C(q, v) v + g(q)`` (the bias torques)."""
    q, v = ca.SX.sym("q", model.nq), ca.SX.sym("v", model.nv)
    h = rnea(model)(q, v, ca.SX.zeros(model.nv))
    return ca.Function("nle", [q, v], [h], ["q", "v"], ["h"])


def build_gravity_torque(model: ArticulatedBody) -> ca.Function:
    """``q -> g(q)``: the generalised gravity force opposing motion (``tau`` that holds the body still)."""
    q = ca.SX.sym("q", model.nq)
    z = ca.SX.zeros(model.nv)
    return ca.Function("gravity_torque", [q], [rnea(model)(q, z, z)], ["q"], ["g"])


# -- public front, through the plug-in registry -------------------------------------------------------

def _cached(model: ArticulatedBody, family: str, name: str) -> ca.Function:
    key = (family, name)
    if key not in model.cache:
        from .registry import get_plugin

        model.cache[key] = get_plugin(family, name).build(model)
    return model.cache[key]


def rnea(model: ArticulatedBody) -> ca.Function:
    """Inverse dynamics ``(q, v, a) -> tau`` (plug-in ``dynamics:rnea``)."""
    return _cached(model, "dynamics", "rnea")


def crba(model: ArticulatedBody) -> ca.Function:
    """Mass matrix ``q -> M`` (plug-in ``dynamics:crba``)."""
    return _cached(model, "dynamics", "crba")


def nonlinear_effects(model: ArticulatedBody) -> ca.Function:
    """Bias torques ``(q, v) -> h`` (plug-in ``dynamics:nle``)."""
    return _cached(model, "dynamics", "nle")


def gravity_torque(model: ArticulatedBody) -> ca.Function:
    """Gravity torques ``q -> g`` (plug-in ``dynamics:gravity_torque``)."""
    return _cached(model, "dynamics", "gravity_torque")


def forward_dynamics(model: ArticulatedBody, algorithm: str = "aba") -> ca.Function:
    """Forward dynamics ``(q, qd, tau) -> qdd`` by any registered forward-dynamics plug-in.

    Raises:
        ModelError: the model has joint armature and the plug-in says it does not include it
            (``meta["armature"] is False``: the seed-003 algorithms).
    """
    armed = [j.name for j in model.joints if j.armature > 0]
    if armed:
        from .registry import get_plugin

        if get_plugin("fd", algorithm).meta.get("armature", True) is False:
            from .model import ModelError

            raise ModelError(f"forward-dynamics plug-in {algorithm!r} does not include joint armature yet, and "
                             f"model {model.name!r} has armature on {', '.join(armed)}; use 'aba'")
    return _cached(model, "fd", algorithm)


def aba(model: ArticulatedBody) -> ca.Function:
    """Forward dynamics ``(q, v, tau) -> a`` by the articulated body algorithm (plug-in ``fd:aba``)."""
    return forward_dynamics(model, "aba")
