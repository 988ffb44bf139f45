"""Fluid drag over whole bodies (seed 000 §6.2), isotropic or anisotropic (slender-body / resistive force).

**Isotropic** (the paper's model). Every body point is damped toward rest, per unit mass:

    Q_drag = D / (2 dt) int ||P(q_{k+1}, p) - P(q_k, p)||^2 dm
           = D / (2 dt) [I(q_{k+1}, q_{k+1}) - 2 I(q_{k+1}, q_k) + I(q_k, q_k)],

a combination of the inertia integral ``I`` of seed 000 Eq. 8 (:mod:`pbframework.inertia`), so value and
derivatives cost what the inertial term costs. The integral is **mass-weighted** (``dm = rho dp``): ``D`` is
a drag rate in 1/s, the drag force density is ``-D rho v``, a body of mass ``m`` moving at ``v`` feels
``-D m v``. The paper writes ``D ||dP / dt||^2``; we use ``D/(2 dt) ||dP||^2`` so the gradient in
``q_{k+1}`` is exactly the drag force at the backward-Euler velocity (``D ||dP/dt||^2`` would scale the
force by ``2/dt``). Generalised-force form: differentiating ``1/2 int D ||v||^2 dm = D/2 qd^T M(q) qd``
with respect to ``qd`` gives ``f = -D M(q) qd`` (``M`` the joint-space mass matrix).

**Anisotropic** (``normal_coefficient`` given). Isotropic mass-proportional drag cannot propel anything:
summing the force over the body gives ``dp/dt = -D p`` for the total momentum ``p``, so a swimmer that
starts at rest keeps its centre of mass where it is whatever its joints do. Real slender swimmers move
because the fluid resists motion across a segment more than along it (resistive force theory; drag ratio
about 2 for a thin rod). With a unit axis ``a`` per link (the link's local ``axis``, default x, taken in
world coordinates at ``q_k`` so the potential stays a convex quadratic in the new positions), the metric

    W = D_t a a^T + D_n (1 - a a^T)

replaces ``D``: ``Q = 1 / (2 dt) int (dP)^T W (dP) dm``. Per link with ``dR = R(q_{k+1}) - R(q_k)``,
``dt_ = t(q_{k+1}) - t(q_k)``, second moment ``S = int x x^T dm``, first moment ``m c`` (link frame):

    int (dR x + dt_)^T W (dR x + dt_) dm = tr(dR^T W dR S) + 2 (W dt_) . (dR m c) + m dt_^T W dt_,

the same algebra as the inertia integral with ``W`` in the middle (``W = D 1`` recovers the isotropic
form). Generalised force: ``f = -M_W(q) qd`` with ``M_W = int J^T W J dm``, obtained as
``-d/dqd`` of the same expression with ``dR, dt_`` replaced by the velocities ``R', t'``.
"""

from __future__ import annotations

from typing import Any, Sequence

import casadi as ca
import numpy as np

from pbframework.forces import ForceForm, ForceModel
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.inertia import inertia_integral
from pbframework.kinematics import link_poses
from pbframework.model import ArticulatedBody

from ._common import TangentSymbols, cached_function, finite_number


def weighted_displacement_integral(link, Ra, ta, Rb, tb, W):
    """``int (P_a - P_b)^T W (P_a - P_b) dm`` over ``link`` for the world poses ``(Ra, ta)``, ``(Rb, tb)``.

    ``W`` is a constant or symbolic symmetric 3x3 metric. Exact for any mass distribution with the link's
    mass, centre of mass and inertia (only its first and second moments enter).
    """
    M = link.second_moment
    S, mc, m = ca.DM(M[:3, :3]), ca.DM(M[:3, 3]), float(M[3, 3])
    dR, dt_ = Ra - Rb, ta - tb
    WdR = ca.mtimes(W, dR)
    return (ca.sum1(ca.sum2(ca.mtimes(dR.T, WdR) * S)) + 2 * ca.dot(ca.mtimes(W, dt_), ca.mtimes(dR, mc))
            + m * ca.dot(dt_, ca.mtimes(W, dt_)))


class Drag(ForceModel):
    """Mass-weighted fluid drag on whole bodies (see the module docstring for the formulas).

    Args:
        coefficient: ``D`` in 1/s, >= 0: the isotropic drag rate, or with ``normal_coefficient`` the rate
            along each link's axis (tangential).
        normal_coefficient: ``D_n`` in 1/s, >= 0: the rate across each link's axis; ``None`` (default) =
            isotropic drag, exactly the paper's model.
        axis: the links' long axis in their own frames (default local x, the axis of the built-in rods);
            used only by anisotropic drag.
        links: names of the links in the fluid; ``None`` (default) = every link.
    """

    name = "drag"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})
    energy_input = False
    group = True
    dissipative = True

    def __init__(self, coefficient: float = 1.0, normal_coefficient: float | None = None, *,
                 axis: Sequence[float] = (1.0, 0.0, 0.0), links: Sequence[str] | None = None) -> None:
        who = self.name
        self.coefficient = finite_number(who, "coefficient", coefficient, minimum=0.0)
        self.normal_coefficient = (None if normal_coefficient is None else
                                   finite_number(who, "normal_coefficient", normal_coefficient, minimum=0.0))
        try:
            a = np.asarray(axis, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            a = np.zeros(0)
        if a.shape != (3,) or not np.all(np.isfinite(a)) or np.linalg.norm(a) < 1e-12:
            raise ValueError(f"{who}: axis must be 3 finite numbers, not all zero, got {axis!r}")
        self.axis = a / np.linalg.norm(a)
        if links is not None:
            if isinstance(links, str):
                links = [links]
            links = list(links)
            if not links or not all(isinstance(x, str) for x in links):
                raise ValueError(f"{who}: links must be a non-empty list of link names (or None for every "
                                 f"link), got {links!r}")
        self.links = None if links is None else tuple(links)

    @property
    def isotropic(self) -> bool:
        return self.normal_coefficient is None

    def params(self) -> dict[str, Any]:
        return {"coefficient": self.coefficient, "normal_coefficient": self.normal_coefficient,
                "axis": self.axis.tolist(), "links": None if self.links is None else list(self.links)}

    def link_indices(self, model: ArticulatedBody) -> list[int]:
        """Indices of the links in the fluid (validated against ``model``)."""
        if self.links is None:
            return list(range(model.nlinks))
        names = [x.name for x in model.links]
        bad = [x for x in self.links if x not in names]
        if bad:
            raise ValueError(f"{self.name}: model {model.name!r} has no link(s) {bad} (links: {', '.join(names)})")
        return [names.index(x) for x in self.links]

    def _metric(self, R):
        """``W`` for a link whose world rotation is ``R`` (constant ``D 1`` when isotropic)."""
        if self.isotropic:
            return self.coefficient * ca.DM.eye(3)
        a = ca.mtimes(R, ca.DM(self.axis))
        return self.normal_coefficient * ca.DM.eye(3) + (self.coefficient - self.normal_coefficient) * ca.mtimes(a, a.T)

    def displacement_integral(self, model: ArticulatedBody, qa, qb):
        """``int (P(qa) - P(qb))^T W (P(qa) - P(qb)) dm`` over the selected links, ``W`` frozen at ``qb``."""
        if self.isotropic and self.links is None:
            f = inertia_integral(model)
            return self.coefficient * (f(qa, qa) - 2 * f(qa, qb) + f(qb, qb))
        pa, pb = link_poses(model, qa), link_poses(model, qb)
        total = 0
        for i in self.link_indices(model):
            (Ra, ta), (Rb, tb) = pa[i], pb[i]
            total = total + weighted_displacement_integral(model.links[i], Ra, ta, Rb, tb, self._metric(Rb))
        return total

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        def build() -> ca.Function:
            qn, qc, h = ca.SX.sym("q_next", model.nq), ca.SX.sym("q_cur", model.nq), ca.SX.sym("dt")
            return ca.Function("drag_Q", [qn, qc, h], [self.displacement_integral(model, qn, qc) / (2 * h)],
                               ["q_next", "q_cur", "dt"], ["Q"])

        return cached_function(model, self, "Q", build)(q_next, q_cur, dt)

    def generalized_force(self, model, q, qd, t):
        def build() -> ca.Function:
            ts = TangentSymbols(model)          # ball / free joints: velocities along the tangent
            qds = ts.qd
            poses = link_poses(model, ts.qe)
            K = 0
            for i in self.link_indices(model):
                R, p = poses[i]
                if isinstance(R, ca.DM) and isinstance(p, ca.DM):
                    continue  # welded to the world: never moves, feels no drag
                Rd = ca.reshape(ca.jtimes(ca.vec(R), ts.var, qds), 3, 3)
                pd = ca.jtimes(p, ts.var, qds)
                # velocities as a "displacement" from zero: the same quadratic form, 1/2 int v^T W v dm
                K = K + 0.5 * weighted_displacement_integral(model.links[i], Rd, pd, ca.DM.zeros(3, 3),
                                                             ca.DM.zeros(3, 1), self._metric(R))
            f = ts.at_zero(-ca.gradient(K, qds)) if isinstance(K, ca.SX) else ca.SX.zeros(model.nv, 1)
            return ca.Function("drag_f", [ts.q, qds], [f], ["q", "qd"], ["f"])

        return cached_function(model, self, "f", build)(q, qd)


@hookimpl
def pbf_force_models():
    return [PluginInfo("drag", "fluid drag over whole bodies (seed 000 §6.2), isotropic or anisotropic "
                       "(normal/tangential per link)", Drag)]
