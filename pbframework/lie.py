"""Configurations on the rotation group: quaternion and SE(3) exponential and logarithm maps in CasADi.

``ball`` and ``free`` joints store their rotation as a unit quaternion ``(x, y, z, w)`` (Pinocchio's and
Eigen's coefficient order), so their configuration has more coordinates than their velocity (nq 4 / 7
against nv 3 / 6). A configuration moves along a velocity by the exponential map and two configurations
differ by the logarithm, the conventions of Pinocchio's ``integrate`` and ``difference``:

* ``ball``: ``q' = q * exp(w)`` with ``w`` the rotation vector in the child frame;
* ``free``: ``M' = M * exp6(v, w)`` with ``(v, w)`` the linear and angular displacement in the child frame,
  ``M = (R(quat), p)`` (``p`` in the parent frame);
* hinges and slides: ``q' = q + v``.

:func:`q_integrate` and :func:`q_difference` build these for a whole model; every map is smooth at the
identity (series expansions below a small angle, chosen so that the unused branch never produces a NaN
that CasADi's ``if_else`` would carry into derivatives), so derivatives of any order come free.
"""

from __future__ import annotations

import casadi as ca

from .model import ArticulatedBody

_SMALL = 1e-6
"""Squared angle (rad^2) below which the maps use their series expansions."""


def _safe(t2, small):
    """``t2`` where it is not small, 1 where it is (the exact branch then stays finite)."""
    return ca.if_else(small, 1.0, t2)


def skew(v):
    return ca.vertcat(ca.horzcat(0, -v[2], v[1]), ca.horzcat(v[2], 0, -v[0]), ca.horzcat(-v[1], v[0], 0))


def quat_multiply(a, b):
    """Hamilton product ``a * b`` of quaternions ``(x, y, z, w)``."""
    av, aw, bv, bw = a[0:3], a[3], b[0:3], b[3]
    return ca.vertcat(aw * bv + bw * av + ca.cross(av, bv), aw * bw - ca.dot(av, bv))


def quat_conjugate(a):
    return ca.vertcat(-a[0:3], a[3])


def quat_exp(w):
    """The unit quaternion of the rotation vector ``w`` (angle ``|w|`` about ``w / |w|``)."""
    t2 = ca.dot(w, w)
    small = t2 < _SMALL
    th = ca.sqrt(_safe(t2, small))
    k = ca.if_else(small, 0.5 - t2 / 48 + t2 * t2 / 3840, ca.sin(th / 2) / th)
    c = ca.if_else(small, 1 - t2 / 8 + t2 * t2 / 384, ca.cos(th / 2))
    return ca.vertcat(k * w, c)


def quat_log(q):
    """The rotation vector of the unit quaternion ``q`` (angle in ``[0, pi]``: ``q`` and ``-q`` agree)."""
    sign = ca.if_else(q[3] < 0, -1.0, 1.0)
    u, w = sign * q[0:3], sign * q[3]
    s2 = ca.dot(u, u)
    small = s2 < _SMALL
    s = ca.sqrt(_safe(s2, small))
    ws = ca.if_else(small, w, 1.0)                     # w is near 1 where s is small
    k = ca.if_else(small, 2 / ws * (1 - s2 / (3 * ws * ws)), 2 * ca.atan2(s, w) / s)
    return k * u


def _v_coefficients(w):
    """``(a, b)`` of ``V(w) = I + a [w] + b [w]^2``, the left Jacobian of SO(3)."""
    t2 = ca.dot(w, w)
    small = t2 < _SMALL
    ts = _safe(t2, small)
    th = ca.sqrt(ts)
    a = ca.if_else(small, 0.5 - t2 / 24 + t2 * t2 / 720, (1 - ca.cos(th)) / ts)
    b = ca.if_else(small, 1.0 / 6 - t2 / 120 + t2 * t2 / 5040, (th - ca.sin(th)) / (ts * th))
    return a, b


def se3_exp_translation(v, w):
    """The translation of ``exp6(v, w)``: ``V(w) v``."""
    a, b = _v_coefficients(w)
    K = skew(w)
    return v + a * ca.mtimes(K, v) + b * ca.mtimes(K, ca.mtimes(K, v))


def se3_log_translation(p, w):
    """The linear part of ``log6`` of the transform ``(exp3(w), p)``: ``V(w)^-1 p``."""
    t2 = ca.dot(w, w)
    small = t2 < _SMALL
    ts = _safe(t2, small)
    th = ca.sqrt(ts)
    c = ca.if_else(small, 1.0 / 12 + t2 / 720 + t2 * t2 / 30240,
                   (1 - th * ca.sin(th) / (2 * (1 - ca.cos(th)))) / ts)
    K = skew(w)
    return p - 0.5 * ca.mtimes(K, p) + c * ca.mtimes(K, ca.mtimes(K, p))


def _element_integrate(kind: str, q, v):
    if kind in ("R", "P"):
        return q + v
    if kind == "S":
        return quat_multiply(q, quat_exp(v))
    from .kinematics import quaternion_matrix

    quat = q[3:7]
    p = q[0:3] + ca.mtimes(quaternion_matrix(quat), se3_exp_translation(v[0:3], v[3:6]))
    return ca.vertcat(p, quat_multiply(quat, quat_exp(v[3:6])))


def _element_difference(kind: str, q0, q1):
    if kind in ("R", "P"):
        return q1 - q0
    if kind == "S":
        return quat_log(quat_multiply(quat_conjugate(q0), q1))
    from .kinematics import quaternion_matrix

    w = quat_log(quat_multiply(quat_conjugate(q0[3:7]), q1[3:7]))
    p = ca.mtimes(quaternion_matrix(q0[3:7]).T, q1[0:3] - q0[0:3])
    return ca.vertcat(se3_log_translation(p, w), w)


def lie_bracket(kind: str, a, b):
    """The Lie bracket of an element's algebra: rotation vectors ``a x b`` (``ball``); twists ``(v, w)``
    of a ``free`` joint ``(w1 x v2 - w2 x v1, w1 x w2)``; zero for hinges and slides."""
    if kind == "S":
        return ca.cross(a, b)
    if kind == "F":
        return ca.vertcat(ca.cross(a[3:6], b[0:3]) - ca.cross(b[3:6], a[0:3]), ca.cross(a[3:6], b[3:6]))
    return ca.SX.zeros(a.shape[0])


def bracket_series(model: ArticulatedBody, c, w, first: float, second: float):
    """``w + first [c, w] + second [c, [c, w]]`` per element (``nv`` entries): truncated series of the
    exponential map's differential (``dexp^-1_{-c}``: 1/2, 1/12; ``dexp_{-c}``: -1/2, 1/6)."""
    from .kinematics import element_tree

    tree = element_tree(model)
    parts = []
    for i, e in enumerate(tree.elements):
        ci, wi = c[tree.v_slice(i)], w[tree.v_slice(i)]
        if e.kind in ("R", "P"):
            parts.append(wi)
        else:
            cw = lie_bracket(e.kind, ci, wi)
            parts.append(wi + first * cw + second * lie_bracket(e.kind, ci, cw))
    return ca.vertcat(*parts)


def _by_element(model: ArticulatedBody, name: str, build):
    from .kinematics import element_tree

    key = ("lie", name)
    if key not in model.cache:
        tree = element_tree(model)
        a = ca.SX.sym("a", model.nq)
        b = ca.SX.sym("b", model.nv if name == "integrate" else model.nq)
        parts = []
        for i, e in enumerate(tree.elements):
            second = b[tree.v_slice(i)] if name == "integrate" else b[tree.q_slice(i)]
            parts.append(build(e.kind, a[tree.q_slice(i)], second))
        out = ca.vertcat(*parts) if parts else ca.SX(0, 1)
        names = (["q", "v"], ["q_next"]) if name == "integrate" else (["q0", "q1"], ["v"])
        model.cache[key] = ca.Function(f"q_{name}", [a, b], [out], *names)
    return model.cache[key]


def q_integrate(model: ArticulatedBody) -> ca.Function:
    """``(q, v) -> q'``: the configuration ``q`` (nq) moved along the velocity displacement ``v`` (nv) by the
    exponential map of every joint (Pinocchio's ``integrate``). Cached on the model."""
    return _by_element(model, "integrate", _element_integrate)


def q_difference(model: ArticulatedBody) -> ca.Function:
    """``(q0, q1) -> v``: the velocity displacement (nv) with ``q_integrate(q0, v) = q1`` (Pinocchio's
    ``difference``; rotations by their shortest angle). Cached on the model."""
    return _by_element(model, "difference", _element_difference)
