"""Unilateral contact with Coulomb friction against a plane, for velocity-level time stepping (seed 002 Eq. 1
and 7, the Newton-Euler dry-friction baseline ``ne_dry_friction``).

The model does not produce a force by itself: it describes, for every contact point of the model
(``Link.contact_points``), the constraints a time-stepping integrator imposes on the next velocity ``v+``
(the friction cone linearised into a pyramid of ``directions`` facets, Stewart and Trinkle; Anitescu's
convex relaxation, which makes the step a quadratic program)::

    phi_i + dt (n + mu d_ij)^T J_i v+ >= 0       for every contact i and friction direction j,

``phi_i`` the signed distance of the point to the plane (:class:`pbframework.geometry.Plane`), ``n`` its
outward normal, ``d_ij`` unit tangent directions spread evenly around ``n``, ``J_i`` the point's
translational Jacobian (along the tangent on models with ``ball`` / ``free`` joints).
"""

from __future__ import annotations

from typing import Any, Sequence

import casadi as ca
import numpy as np

from pbframework.forces import ForceForm, ForceModel
from pbframework.geometry import Plane
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.kinematics import contact_positions
from pbframework.model import ArticulatedBody

from ._common import TangentSymbols, cached_function, finite_number, unit_vector


class DryFriction(ForceModel):
    """Coulomb contact against the plane ``normal . x = offset`` (module docstring).

    Args:
        mu: friction coefficient >= 0.
        normal: the plane's outward normal (3 numbers, not all zero).
        offset: the plane is ``normal . x = offset``.
        directions: facets of the linearised friction cone (>= 3; 4: a square pyramid).
    """

    name = "dry_friction"
    forms = frozenset({ForceForm.COMPLEMENTARITY})
    energy_input = False
    dissipative = True
    group = True

    def __init__(self, mu: float = 0.5, *, normal: Sequence[float] = (0.0, 0.0, 1.0), offset: float = 0.0,
                 directions: int = 4) -> None:
        who = self.name
        self.mu = finite_number(who, "mu", mu, minimum=0.0)
        unit_vector(who, "normal", normal)
        self.offset = finite_number(who, "offset", offset)
        self.plane = Plane(np.asarray(normal, dtype=float).reshape(-1), self.offset)
        self.normal = self.plane.normal
        if isinstance(directions, bool) or not isinstance(directions, (int, np.integer)) or directions < 3:
            raise ValueError(f"{who}: directions must be an integer >= 3 (facets of the friction pyramid), "
                             f"got {directions!r}")
        self.directions = int(directions)

    def params(self) -> dict[str, Any]:
        return {"mu": self.mu, "normal": self.normal.tolist(), "offset": self.offset, "directions": self.directions}

    def facet_normals(self) -> np.ndarray:
        """``(directions, 3)``: ``n + mu d_j`` for unit tangents ``d_j`` spread evenly around ``n``."""
        n = self.normal
        a = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
        t1 = np.cross(n, a)
        t1 /= np.linalg.norm(t1)
        t2 = np.cross(n, t1)
        angles = 2 * np.pi * np.arange(self.directions) / self.directions
        return np.array([n + self.mu * (np.cos(w) * t1 + np.sin(w) * t2) for w in angles])

    def contact_constraints(self, model: ArticulatedBody, q):
        """``(phi, G)`` at ``q``: the rows of ``phi + dt G v+ >= 0`` without ``dt`` -- ``phi`` (m, one per
        contact and facet) and ``G`` (m x nv)."""
        def build() -> ca.Function:
            if model.n_contacts == 0:
                raise ValueError(f"{self.name}: model {model.name!r} has no contact points; give its links "
                                 f"contact_points (or pbframework.geometry.sample_contact_points)")
            ts = TangentSymbols(model)
            P = contact_positions(model)(ts.qe)
            J = ca.jacobian(ca.vec(P), ts.var)                  # (3 nc) x nv
            phi = ts.at_zero(self.plane.signed_distance(P))     # 1 x nc
            F = ca.DM(self.facet_normals())                     # k x 3
            rows_phi, rows_G = [], []
            for i in range(model.n_contacts):
                Ji = ts.at_zero(J[3 * i:3 * i + 3, :])
                for j in range(self.directions):
                    rows_phi.append(phi[i])
                    rows_G.append(ca.mtimes(F[j, :], Ji))
            return ca.Function("dry_friction_rows", [ts.q], [ca.vertcat(*rows_phi), ca.vertcat(*rows_G)],
                               ["q"], ["phi", "G"])

        return cached_function(model, self, "rows", build)(q)


@hookimpl
def pbf_force_models():
    return [PluginInfo("dry_friction", "unilateral contact with Coulomb friction against a plane (linearised "
                                       "cone) for the ne_dry_friction time stepping baseline", DryFriction)]
