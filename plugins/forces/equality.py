"""MuJoCo's equality constraints as soft constraints (issue 25): ``joint`` couplings, ``connect`` (ball joints
closing a loop) and ``weld``.

MuJoCo solves its equality constraints softly. With ``solref = (tau, zeta)`` (default 0.02 s, 1) its reference
acceleration on a violation ``r`` is ``-b rdot - k r``, ``k = 1 / (d_max tau zeta)^2``, ``b = 2 / (d_max tau)``,
and with the impedance ``d`` (``solimp``, 0.9 at ``r = 0`` by default) the constraint force cancels the
fraction ``d`` of whatever else accelerates the violation and drives it toward the reference: under a steady
load ``a`` the violation settles at ``(1 - d) a / (d k)``. This model is a spring and damper with that
static response, ``s = d / (1 - d)`` times MuJoCo's reference gains, in the effective inertia
``A^-1 = (J M^-1 J^T)^-1`` of each constraint at the current configuration (as MuJoCo takes it; ``M^-1 J^T``
by the articulated-body algorithm), so the response does not depend on how heavy the bodies are::

    K = s A^-1 / (d_max tau zeta)^2,   B = 2 s A^-1 / (d_max tau),   f = -J^T (K r + B rdot).

It matches MuJoCo in kind and in its static sag, not to the digit: MuJoCo computes its constraint forces
jointly with contacts and limits at every state, and its transients differ (this spring is stiffer and more
damped than MuJoCo's reference dynamics). The residuals ``r`` are MuJoCo's own (``efc_pos``: checked against MuJoCo):

- ``joint``: ``r = (q1 - q1_0) - c0 - (c1 x + c2 x^2 + c3 x^3 + c4 x^4)``, ``x = q2 - q2_0`` (``q_0`` the
  reference positions, MuJoCo's ``qpos0``); without a second joint ``r = q1 - q1_0 - c0``;
- ``connect``: ``r = p1 - p2``, the two anchor points in world coordinates;
- ``weld``: ``r = (p1 - p2, s v)``, ``v`` the vector part of the quaternion of ``R2^T R1`` (taken with a
  non-negative scalar part) and ``s`` the ``torquescale``.

Forms: energy ``V = 1/2 r^T K r`` (the spring stores energy; ``K`` at the configuration, so the reported
energy is the spring's to first order in how fast the effective inertia changes); potential
``1/2 r_{k+1}^T K_k r_{k+1} + (r_{k+1} - r_k)^T B_k (r_{k+1} - r_k) / (2 dt)`` with the gains at the step's
start (the damper at the backward-Euler rate, implicit); generalised force ``-J^T (K r + B J v)``. :func:`~pbframework.io.load_mjcf` fills the parameters from the compiled model.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import casadi as ca
import numpy as np

from pbframework.forces import ForceForm, ForceModel
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.kinematics import link_poses
from pbframework.model import WORLD, ArticulatedBody

from ._common import TangentSymbols, cached_function, finite_number, resolve_dofs

KINDS = ("joint", "connect", "weld")


def _frame(model: ArticulatedBody, poses, link: str, T) -> tuple:
    """World (R, p) of the frame ``T`` (4x4 in ``link``'s frame, or the world's)."""
    T = ca.DM(np.asarray(T, float))
    if link == WORLD:
        return T[:3, :3], T[:3, 3]
    R, p = poses[model.link_index(link)]
    return ca.mtimes(R, T[:3, :3]), p + ca.mtimes(R, T[:3, 3])


def _quat_vector(R):
    """The vector part of the unit quaternion of the rotation ``R`` with a non-negative scalar part."""
    w2 = 1 + R[0, 0] + R[1, 1] + R[2, 2]
    return ca.vertcat(R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]) / (2 * ca.sqrt(ca.fmax(w2, 1e-300)))


class SoftEquality(ForceModel):
    """MuJoCo equality constraints as damped springs on their violation (module docstring).

    Args:
        constraints: one mapping per constraint, with ``kind`` and ``name`` and, by kind,
            ``joint``: ``joint1``, ``joint2`` (coordinate names; ``joint2`` may be None), ``ref1``, ``ref2``,
            ``polycoef`` (5 numbers); ``connect`` / ``weld``: ``link1``, ``frame1``, ``link2``, ``frame2``
            (a link name or ``"world"`` and a 4x4 pose in that link's frame: the anchor point and, for a
            weld, the orientation to match); ``weld`` also ``torquescale``. Every kind: ``timeconst`` (s, > 0)
            and ``dampratio`` (> 0), MuJoCo's ``solref``; ``impedance`` (``d`` in (0, 1), default 0.9) and
            ``dmax`` (default 0.95), MuJoCo's ``solimp[0]`` and ``solimp[1]``.
    """

    name = "soft_equality"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})
    energy_input = False
    dissipative = True
    group = True

    def __init__(self, constraints: Sequence[Mapping[str, Any]] = ()) -> None:
        who = self.name
        if isinstance(constraints, (str, Mapping)) or not isinstance(constraints, Sequence) or not constraints:
            raise ValueError(f"{who}: constraints must be a non-empty list of mappings, got {constraints!r}")
        self.constraints = []
        for k, c in enumerate(constraints):
            if not isinstance(c, Mapping) or c.get("kind") not in KINDS:
                raise ValueError(f"{who}: constraint {k} must be a mapping with kind one of {KINDS}, got {c!r}")
            c = dict(c)
            where = f"{who}: constraint {c.get('name') or k!r}"
            c["timeconst"] = finite_number(where, "timeconst", c.get("timeconst", 0.02), minimum=0.0, strict=True)
            c["dampratio"] = finite_number(where, "dampratio", c.get("dampratio", 1.0), minimum=0.0, strict=True)
            for key, default in (("impedance", 0.9), ("dmax", 0.95)):
                c[key] = finite_number(where, key, c.get(key, default), minimum=0.0, strict=True)
                if c[key] >= 1.0:
                    raise ValueError(f"{where}: {key} must be in (0, 1), got {c[key]!r}")
            if c["kind"] == "joint":
                coef = np.asarray(c.get("polycoef", (0, 1, 0, 0, 0)), float).reshape(-1)
                if coef.shape != (5,) or not np.all(np.isfinite(coef)):
                    raise ValueError(f"{where}: polycoef must be 5 finite numbers, got {c.get('polycoef')!r}")
                c["polycoef"] = coef.tolist()
            else:
                for side in ("1", "2"):
                    T = np.asarray(c.get("frame" + side, np.eye(4)), float)
                    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
                        raise ValueError(f"{where}: frame{side} must be a 4x4 pose, got shape {T.shape}")
                    c["frame" + side] = T.tolist()
                if c["kind"] == "weld":
                    c["torquescale"] = finite_number(where, "torquescale", c.get("torquescale", 1.0))
            self.constraints.append(c)

    def params(self) -> dict[str, Any]:
        return {"constraints": [dict(c) for c in self.constraints]}

    # -- residuals -------------------------------------------------------------------------------------------
    def residual(self, model: ArticulatedBody, q):
        """The stacked violation ``r(q)`` of every constraint (MuJoCo's ``efc_pos`` rows)."""
        poses = link_poses(model, q)
        rows = []
        for c in self.constraints:
            if c["kind"] == "joint":
                i1 = resolve_dofs(self.name, model, (c["joint1"],))[0]
                r = q[i1] - c["ref1"] - c["polycoef"][0]
                if c.get("joint2") is not None:
                    x = q[resolve_dofs(self.name, model, (c["joint2"],))[0]] - c["ref2"]
                    r = r - sum(c["polycoef"][n] * x**n for n in range(1, 5))
                rows.append(r)
                continue
            R1, p1 = _frame(model, poses, c["link1"], c["frame1"])
            R2, p2 = _frame(model, poses, c["link2"], c["frame2"])
            rows.append(p1 - p2)
            if c["kind"] == "weld":
                rows.append(c["torquescale"] * _quat_vector(ca.mtimes(R2.T, R1)))
        return ca.vertcat(*rows)

    def _functions(self, model: ArticulatedBody) -> tuple[ca.Function, ca.Function]:
        """``rJ: q -> (r, J)`` (``J`` along the tangent on ball / free models) and ``gains: q -> (K, B)``, the
        block-diagonal gains with each constraint's effective inertia ``(J M^-1 J^T)^-1`` at ``q``."""
        def build_rj() -> ca.Function:
            ts = TangentSymbols(model)
            r = self.residual(model, ts.qe)
            J = ts.at_zero(ca.jacobian(r, ts.var))
            return ca.Function("soft_equality_rJ", [ts.q], [ts.at_zero(r), J], ["q"], ["r", "J"])

        rJ = cached_function(model, self, "rJ", build_rj)

        def build_gains() -> ca.Function:
            from pbframework.dynamics import aba

            q = ca.SX.sym("q", model.nq)
            J = rJ(q)[1]
            fd = aba(model)
            zero_v = ca.DM.zeros(model.nv)
            a0 = fd(q, zero_v, zero_v)                      # M^-1 x = aba(q, 0, x) - aba(q, 0, 0)
            MinvJT = ca.horzcat(*[fd(q, zero_v, J[i, :].T) - a0 for i in range(J.shape[0])])
            A = ca.mtimes(J, MinvJT)
            K, B = ca.SX.zeros(A.shape), ca.SX.zeros(A.shape)
            row = 0
            for c in self.constraints:
                n = 1 if c["kind"] == "joint" else 3 if c["kind"] == "connect" else 6
                blk = A[row:row + n, row:row + n]
                # a direction the constraint cannot move in (a planar loop's normal) has A = 0 there and a
                # residual that stays 0: the regularisation keeps the inverse finite without acting
                reg = 1e-9 * (ca.trace(blk) / n + 1e-300)
                inv = ca.solve(blk + reg * ca.SX.eye(n), ca.SX.eye(n))
                scale = c["impedance"] / (1.0 - c["impedance"])
                tau = c["dmax"] * c["timeconst"]
                K[row:row + n, row:row + n] = scale * inv / (tau * c["dampratio"]) ** 2
                B[row:row + n, row:row + n] = 2.0 * scale * inv / tau
                row += n
            return ca.Function("soft_equality_gains", [q], [K, B], ["q"], ["K", "B"])

        return rJ, cached_function(model, self, "gains", build_gains)

    # -- forms -----------------------------------------------------------------------------------------------
    def energy(self, model, q):
        rJ, gains = self._functions(model)
        r = rJ(q)[0]
        return 0.5 * ca.dot(r, ca.mtimes(gains(q)[0], r))

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        rJ, gains = self._functions(model)
        K, B = gains(q_cur)                 # the effective inertia where the step starts: a true potential
        r1, r0 = rJ(q_next)[0], rJ(q_cur)[0]
        dr = r1 - r0
        return 0.5 * ca.dot(r1, ca.mtimes(K, r1)) + ca.dot(dr, ca.mtimes(B, dr)) / (2 * dt)

    def generalized_force(self, model, q, qd, t):
        rJ, gains = self._functions(model)
        r, J = rJ(q)
        K, B = gains(q)
        return -ca.mtimes(J.T, ca.mtimes(K, r) + ca.mtimes(B, ca.mtimes(J, qd)))


@hookimpl
def pbf_force_models():
    return [PluginInfo("soft_equality", "MuJoCo equality constraints (joint, connect, weld) as damped springs on "
                       "their violation with MuJoCo's static sag (solref, solimp)", SoftEquality)]
