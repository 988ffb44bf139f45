"""Penalty contact with viscous friction against a plane (seed 000 §6.2, Eq. 9, Fig. 5c).

The model's contact points (``Link.contact_points``, positions ``P_j(q)``) are pushed out of the half-space
behind the plane ``{x : n . x = h}`` (unit normal ``n`` pointing out of the obstacle, offset ``h``). The
penetration depth of a point is ``d = max(0, h - n . P)`` (positive inside, zero outside), optionally
smoothed (see ``smoothing``). Seed 000 Eq. 9, per contact point and step, reads

    Q = D1 d(P_{k+1})^2 + D2 d(P_{k+1})^2 ||Proj_par (P_{k+1} - P_k) / dt||^2,

with ``Proj_par = 1 - n n^T`` the projector onto the plane. We implement

    Q = D1/2 d(P_{k+1})^2 + D2/(2 dt) d(P_k)^p ||Proj_par (P_{k+1} - P_k)||^2.

The first term is a normal spring of stiffness ``D1`` (N/m) on the penetration; the second damps the
tangential velocity of penetrating points with coefficient ``D2 d^p`` (friction grows with penetration,
Fig. 5c). Three deliberate differences from the literal Eq. 9:

* the factors 1/2 and ``1/(2 dt)`` make the gradient in ``q_{k+1}`` exactly the spring force ``D1 d n``
  and the friction force ``-D2 d^p v_par`` at the backward-Euler velocity ``v = (P_{k+1} - P_k)/dt``, so
  ``D1`` and ``D2`` mean the same in every integrator (the literal form scales friction by ``2/dt``);
* the exponent ``p`` is a parameter: 2 (default) is the paper's choice; 1 makes the friction
  proportional to the normal force (a velocity-dependent friction coefficient ``mu = D2 |v_par| / D1``);
* the friction weight ``d^p`` is taken at the known ``P_k`` (``friction_depth="current"``, default).
  With Eq. 9's ``d(P_{k+1})`` the friction energy shrinks when a point rises, which adds a spurious normal
  force ``D2 p d^(p-1) |v_par|^2 dt`` pushing sliding points out of the obstacle; with strong friction it
  exceeds the contact force and a box sliding down a slope hovers and slides as if frictionless.
  ``friction_depth="next"`` keeps the literal choice for comparison.

Generalised-force form (for Newton-Euler integrators and residual objectives), summed over points with
``J_j = dP_j/dq`` and ``v_j = J_j qd``:

    f = -d/dq [sum D1/2 d_j^2] - sum J_j^T D2 d_j^p Proj_par v_j.

The normal spring is conservative: ``energy = sum D1/2 d_j(q)^2``, so energy reports stay exact.

Smoothing: with ``smoothing = 0`` (default) ``d`` is the exact ``max``; the potential ``d^2`` is then
continuously differentiable with a jump in curvature at the surface, which Levenberg-Marquardt handles
(its J^T J model simply switches on with the contact). ``smoothing = eps > 0`` uses the softplus
``d = eps log(1 + exp((h - n . P)/eps))``, infinitely smooth, at the price of a small force (about
``D1 eps exp(-s/eps)``) at a distance ``s`` above the plane; choose ``eps`` well below the expected
penetration ``weight / (D1 * points in contact)``.

The plane and its depth are :class:`pbframework.geometry.Plane` and :func:`pbframework.geometry.depth`, the
contact geometry every contact model shares.
"""

from __future__ import annotations

import enum
from typing import Any, Sequence

import casadi as ca
import numpy as np

from pbframework.forces import ForceForm, ForceModel
from pbframework.geometry import Plane, depth, softplus  # noqa: F401 - softplus kept importable from here
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.kinematics import contact_positions
from pbframework.model import ArticulatedBody

from ._common import TangentSymbols, cached_function, finite_number, unit_vector


class FrictionDepth(str, enum.Enum):
    """Where the potential form evaluates the penetration weight ``d^p`` of the friction term.

    Attributes:
        CURRENT: at the known configuration ``q_k`` (default). The friction term is then a pure tangential
            damper: its gradient has no normal component.
        NEXT: at ``q_{k+1}``, literally as in seed 000 Eq. 9. Differentiating ``d(q_{k+1})^p`` adds a normal
            force ``D2 p d^(p-1) |v_par|^2 dt`` that pushes sliding points *out* of the obstacle (lowering
            the penetration lowers the friction energy); with strong friction it exceeds the contact force
            and a sliding body hovers and loses its friction. Kept for comparison with the paper.
    """

    CURRENT = "current"
    NEXT = "next"


class PenaltyContact(ForceModel):
    """Penalty contact with viscous friction between the model's contact points and a plane (Eq. 9).

    Args:
        stiffness: ``D1`` in N/m, > 0: normal penalty (spring) per contact point.
        friction: ``D2`` >= 0 in N s / m^(1+p): friction damping per contact point per unit ``d^p``.
        normal: the plane's normal, pointing out of the obstacle (normalised here); default ``(0, 0, 1)``,
            the ground. A slope rising along +x by an angle ``a``: ``(-sin a, 0, cos a)``.
        offset: ``h`` in m: the plane is ``{x : normal . x = h}`` (default 0).
        friction_power: ``p`` >= 1, the exponent of the penetration weight of friction (2 = the paper).
        smoothing: ``eps`` >= 0 in m: 0 = exact ``max`` for the depth, > 0 = softplus of that width.
        friction_depth: a :class:`FrictionDepth`: where the potential form evaluates the friction weight
            ``d^p``, ``"current"`` (``q_k``, default) or ``"next"`` (``q_{k+1}``, the paper's literal Eq. 9).
    """

    name = "penalty_contact"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})
    energy_input = False
    group = True
    dissipative = True

    def __init__(self, stiffness: float = 1e4, friction: float = 0.0, *, normal: Sequence[float] = (0.0, 0.0, 1.0),
                 offset: float = 0.0, friction_power: float = 2.0, smoothing: float = 0.0,
                 friction_depth: FrictionDepth | str = FrictionDepth.CURRENT) -> None:
        who = self.name
        self.stiffness = finite_number(who, "stiffness", stiffness, minimum=0.0, strict=True)
        self.friction = finite_number(who, "friction", friction, minimum=0.0)
        unit_vector(who, "normal", normal)                   # the one-line error for a bad normal
        self.offset = finite_number(who, "offset", offset)
        self.plane = Plane(np.asarray(normal, dtype=float).reshape(-1), self.offset)   # normalised once, there
        self.normal = self.plane.normal
        self.friction_power = finite_number(who, "friction_power", friction_power, minimum=1.0)
        self.smoothing = finite_number(who, "smoothing", smoothing, minimum=0.0)
        try:
            self.friction_depth = FrictionDepth(friction_depth)
        except ValueError:
            raise ValueError(f"{who}: friction_depth must be one of "
                             f"{', '.join(repr(x.value) for x in FrictionDepth)}, got {friction_depth!r}") from None

    def params(self) -> dict[str, Any]:
        return {"stiffness": self.stiffness, "friction": self.friction, "normal": self.normal.tolist(),
                "offset": self.offset, "friction_power": self.friction_power, "smoothing": self.smoothing,
                "friction_depth": self.friction_depth.value}

    # -- geometry -----------------------------------------------------------------------------------------
    def _positions(self, model: ArticulatedBody, q):
        if model.n_contacts == 0:
            raise ValueError(f"{self.name}: model {model.name!r} has no contact points; give its links "
                             f"contact_points (Link(..., contact_points=[(x, y, z), ...])) to collide with "
                             f"the plane")
        return contact_positions(model)(q)

    def depth(self, P):
        """Penetration depths (1 x nc) of the world points ``P`` (3 x nc): positive inside the obstacle."""
        return depth(self.plane, P, self.smoothing)

    def _weight(self, d):
        p = self.friction_power
        return d if p == 1.0 else (d * d if p == 2.0 else d ** p)

    def _projector(self) -> ca.DM:
        n = self.normal.reshape(3, 1)
        return ca.DM(np.eye(3) - n @ n.T)

    # -- forms --------------------------------------------------------------------------------------------
    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        def build() -> ca.Function:
            qn, qc, h = ca.SX.sym("q_next", model.nq), ca.SX.sym("q_cur", model.nq), ca.SX.sym("dt")
            Pn, Pc = self._positions(model, qn), self._positions(model, qc)
            d = self.depth(Pn)
            slide = ca.mtimes(self._projector(), Pn - Pc)
            Q = 0.5 * self.stiffness * ca.sumsqr(d)
            if self.friction > 0:
                dw = d if self.friction_depth is FrictionDepth.NEXT else self.depth(Pc)
                Q = Q + self.friction / (2 * h) * ca.sum2(self._weight(dw) * ca.sum1(slide * slide))
            return ca.Function("penalty_contact_Q", [qn, qc, h], [Q], ["q_next", "q_cur", "dt"], ["Q"])

        return cached_function(model, self, "Q", build)(q_next, q_cur, dt)

    def generalized_force(self, model, q, qd, t):
        def build() -> ca.Function:
            ts = TangentSymbols(model)          # ball / free joints: gradients along the tangent
            qds = ts.qd
            P = self._positions(model, ts.qe)
            d = self.depth(P)
            f = -ca.gradient(0.5 * self.stiffness * ca.sumsqr(d), ts.var)
            if self.friction > 0:
                v = ca.reshape(ca.jtimes(ca.vec(P), ts.var, qds), 3, P.size2())
                vt = ca.mtimes(self._projector(), v)
                # 1/2 sum D2 d^p |v_par|^2 is quadratic in qd: its qd-gradient is sum J^T D2 d^p Proj v
                f = f - ca.gradient(0.5 * self.friction * ca.sum2(self._weight(d) * ca.sum1(vt * vt)), qds)
            return ca.Function("penalty_contact_f", [ts.q, qds], [ts.at_zero(f)], ["q", "qd"], ["f"])

        return cached_function(model, self, "f", build)(q, qd)

    def energy(self, model, q):
        return 0.5 * self.stiffness * ca.sumsqr(self.depth(self._positions(model, q)))

    def contact_forces(self, model, q, qd, t):
        """Per contact point ``D1 d n - D2 d^p Proj v`` (3 x nc), the terms of the generalised-force form."""
        def build() -> ca.Function:
            ts = TangentSymbols(model)
            P = self._positions(model, ts.qe)
            d = self.depth(P)
            F = ca.mtimes(ca.DM(self.normal.reshape(3, 1)), self.stiffness * d)
            if self.friction > 0:
                v = ca.reshape(ca.jtimes(ca.vec(P), ts.var, ts.qd), 3, P.size2())
                F = F - ca.mtimes(self._projector(), v) * ca.repmat(self.friction * self._weight(d), 3, 1)
            return ca.Function("penalty_contact_points", [ts.q, ts.qd], [ts.at_zero(F)], ["q", "qd"], ["F"])

        return cached_function(model, self, "points", build)(q, qd)


@hookimpl
def pbf_force_models():
    return [PluginInfo("penalty_contact", "penalty contact with viscous friction against a plane (seed 000 "
                       "Eq. 9)", PenaltyContact)]
