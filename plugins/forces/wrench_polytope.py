r"""Contact wrench polytopes (seed 001 Eq. 5, Remarks 6-7): the feasible contact forces at each contact point
as the convex hull of pose-dependent vertices, for the NMDP integrators (``ne_nmdp``, ``pbd_nmdp``) and the
NE-MDP baseline (``ne_mdp``).

At every contact point ``x`` of the model (``Link.contact_points``) at world position ``P(q)``, the force is
``f_x = v_x(q) w_x`` with ``w_x >= 0``, ``1^T w_x <= 1`` (the integrator finds ``w``). The default vertices
are Remark 7's smoothed, linearised Coulomb cone::

    v_x^i(q) = force_scale ((d(P) / depth_scale)^3 + zeta) (n + mu t_i),     i = 1 .. directions,

``d`` the penetration depth of the point in the obstacles (:func:`pbframework.geometry.depth`), ``n`` the
outward normal there and ``t_i`` unit tangents spread evenly around ``n``. The paper writes
``(d^3 + zeta)`` scaled by "a big constant"; here the depth is measured in units of ``depth_scale`` so that
``force_scale`` is the largest normal force a point can take at that depth (N) and ``zeta`` (default 1e-3,
§VI) is dimensionless: the force a point out of contact can still exert, as a fraction of ``force_scale``
(it keeps ``grad_w G`` of full rank, Remark 7's assumption A 5.4 for the zeroth-order solver; 0 disables it).
``directions`` sets the size of the linearised cone (Remark 6: ``n + mu t_i``).

A plug-in may supply its own differentiable polytope (a learned one, say): pass ``vertices``, a callable
``(P, d, n) -> 3 x V`` CasADi expression of the point's world position ``P`` (3 x 1), depth ``d`` and outward
normal ``n`` (3 x 1), or subclass and override :meth:`WrenchPolytope.vertex_matrix`. It must be smooth in
``P`` for the first-order solver (seed 001 A 5.3); the zeroth-order one never differentiates it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import casadi as ca
import numpy as np

from pbframework.forces import ForceForm, ForceModel
from pbframework.geometry import Obstacle, Plane, as_obstacle, depth
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.kinematics import contact_positions
from pbframework.model import ArticulatedBody

from ._common import cached_function, finite_number, unit_vector


def tangent_basis(n):
    """Two unit tangents ``(t1, t2)`` (3 x 1 each, CasADi) orthogonal to the unit normal ``n`` (3 x 1):
    ``t1 = n x a / |n x a|`` with ``a`` the x axis, or the y axis where ``n`` is within 26 degrees of x."""
    a = ca.if_else(ca.fabs(n[0]) < 0.9, ca.DM([1.0, 0.0, 0.0]), ca.DM([0.0, 1.0, 0.0]))
    t1 = ca.cross(n, a)
    t1 = t1 / ca.norm_2(t1)
    return t1, ca.cross(n, t1)


class WrenchPolytope(ForceModel):
    """Contact forces as convex combinations of wrench-polytope vertices (module docstring).

    Args:
        mu: friction coefficient >= 0 (the cone's half-angle is ``atan(mu)``).
        force_scale: the largest normal force of a point at depth ``depth_scale`` (N, > 0).
        depth_scale: the reference depth (m, > 0).
        zeta: the out-of-contact force floor as a fraction of ``force_scale`` (>= 0; seed 001 §VI: 1e-3).
        directions: vertices of the linearised cone per point (>= 3).
        normal, offset: the ground plane ``normal . x = offset`` (used when ``obstacles`` is not given).
        obstacles: :class:`~pbframework.geometry.Obstacle` objects (planes, boxes, unions) instead.
        smoothing: softplus width of the depth (m; 0 = exact ``max(0, -phi)``).
        vertices: a callable ``(P, d, n) -> 3 x V`` giving a custom polytope (see the module docstring).
    """

    name = "wrench_polytope"
    forms = frozenset({ForceForm.WRENCH_POLYTOPE})
    energy_input = False
    dissipative = True
    group = True

    def __init__(self, mu: float = 0.7, force_scale: float = 100.0, depth_scale: float = 0.01, zeta: float = 1e-3,
                 directions: int = 4, *, normal: Sequence[float] = (0.0, 0.0, 1.0), offset: float = 0.0,
                 obstacles: Obstacle | Iterable[Obstacle] | None = None, smoothing: float = 0.0,
                 vertices: Callable[[Any, Any, Any], Any] | None = None) -> None:
        who = self.name
        self.mu = finite_number(who, "mu", mu, minimum=0.0)
        self.force_scale = finite_number(who, "force_scale", force_scale, minimum=0.0, strict=True)
        self.depth_scale = finite_number(who, "depth_scale", depth_scale, minimum=0.0, strict=True)
        self.zeta = finite_number(who, "zeta", zeta, minimum=0.0)
        if isinstance(directions, bool) or not isinstance(directions, (int, np.integer)) or directions < 3:
            raise ValueError(f"{who}: directions must be an integer >= 3 (vertices of the linearised friction "
                             f"cone), got {directions!r}")
        self.directions = int(directions)
        self.smoothing = finite_number(who, "smoothing", smoothing, minimum=0.0)
        if obstacles is None:
            unit_vector(who, "normal", normal)
            self.obstacle = Plane(np.asarray(normal, dtype=float).reshape(-1), finite_number(who, "offset", offset))
        else:
            if isinstance(obstacles, Obstacle):
                obstacles = [obstacles]
            obstacles = list(obstacles)
            if not obstacles or not all(isinstance(o, Obstacle) for o in obstacles):
                raise ValueError(f"{who}: obstacles must be pbframework.geometry Obstacle objects (Plane, Box, "
                                 f"Union), got {obstacles!r}")
            self.obstacle = as_obstacle(obstacles)
        if vertices is not None and not callable(vertices):
            raise ValueError(f"{who}: vertices must be a callable (P, d, n) -> 3 x V CasADi matrix, got "
                             f"{type(vertices).__name__}")
        self.custom = vertices

    def params(self) -> dict[str, Any]:
        out = {"mu": self.mu, "force_scale": self.force_scale, "depth_scale": self.depth_scale, "zeta": self.zeta,
               "directions": self.directions, "obstacle": repr(self.obstacle), "smoothing": self.smoothing}
        if self.custom is not None:
            out["vertices"] = getattr(self.custom, "__name__", repr(self.custom))
        return out

    def vertex_matrix(self, P, d, n):
        """The vertices (3 x V) at one contact point: world position ``P``, depth ``d``, outward normal ``n``."""
        if self.custom is not None:
            return self.custom(P, d, n)
        t1, t2 = tangent_basis(n)
        scale = self.force_scale * ((d / self.depth_scale) ** 3 + self.zeta)
        angles = 2 * np.pi * np.arange(self.directions) / self.directions
        return ca.horzcat(*[scale * (n + self.mu * (np.cos(a) * t1 + np.sin(a) * t2)) for a in angles])

    def wrench_polytope(self, model: ArticulatedBody, q):
        """The vertices at every contact point: a list of ``nc`` matrices (3 x V_x), in
        ``model.contact_points`` order, for the configuration ``q`` (nq entries)."""
        if model.n_contacts == 0:
            raise ValueError(f"{self.name}: model {model.name!r} has no contact points; give its links "
                             f"contact_points (or pbframework.geometry.sample_contact_points)")

        def build() -> ca.Function:
            qs = ca.SX.sym("q", model.nq)
            P = contact_positions(model)(qs)
            d = depth(self.obstacle, P, self.smoothing)
            N = self.obstacle.normal_at(P)
            out = []
            for i in range(model.n_contacts):
                V = ca.SX(self.vertex_matrix(P[:, i], d[i], N[:, i]))
                if V.shape[0] != 3 or V.shape[1] == 0:
                    raise ValueError(f"{self.name}: the polytope at contact point {i} has shape {V.shape}; it "
                                     f"needs 3 rows and at least one vertex (column)")
                out.append(V)
            return ca.Function("wrench_vertices", [qs], out)

        f = cached_function(model, self, "vertices", build)
        res = f(q)
        return list(res) if isinstance(res, (list, tuple)) else [res]

    def vertex_counts(self, model: ArticulatedBody) -> tuple[int, ...]:
        """Vertices per contact point (``V_x``), in ``model.contact_points`` order."""
        return tuple(int(m.shape[1]) for m in self.wrench_polytope(model, ca.SX.sym("q", model.nq)))


@hookimpl
def pbf_force_models():
    return [PluginInfo("wrench_polytope", "contact forces as convex combinations of pose-dependent wrench-polytope "
                                          "vertices (seed 001 Eq. 5, Remark 7) for ne_nmdp / pbd_nmdp / ne_mdp",
                       WrenchPolytope)]


__all__ = ["WrenchPolytope", "tangent_basis"]
