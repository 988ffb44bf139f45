r"""Position-based frictional contact against a plane (seed 002 §IV): the normal force of a penetration
depth (Eq. 8-9), the PBD tangential energy (Eq. 11) for comparison, and the corrected tangential force
(Eq. 12) as a step force for the gradient-level objective (Eq. 13, integrator ``pbfd``).

For every contact point ``p`` of the model (``Link.contact_points``) at world position ``P(q)`` against the
plane ``n . x = offset`` (``n`` the unit outward normal), with penetration depth ``d = max(offset - n . P, 0)``:

* normal potential ``C_perp P_perp = C_perp / (alpha + 1) sum_p d^(alpha + 1)`` (Eq. 9), whose force is
  ``C_perp d^alpha n`` (Eq. 8);
* PBD tangential energy (``tangential="pbd"``, Eq. 11): ``C_par sum_p |Pi D|^(beta + 1) d^(gamma + 1)``
  with the step's displacement ``D = P(q_next) - P(q_cur)`` and ``Pi = I - n n^T``; its gradient carries
  the spurious normal term ``f*`` the paper identifies;
* corrected tangential force (``tangential="corrected"``, the default, Eq. 12): only
  ``f_par = -(beta + 1) Pi D |Pi D|^beta d^(gamma + 1)``, applied as ``C_par sum_p J_p^T f_par``
  (``J_p = dP/dq`` at ``q_next``): a :attr:`~pbframework.forces.ForceForm.STEP_FORCE`, which ``pbfd``
  subtracts from the energy's gradient.

Lemma 4.2's conditions: ``alpha > 1``, ``beta > 0``, ``gamma > 0``; ``C_perp, C_par >= 0``. ``|Pi D|^beta``
is evaluated as ``(|Pi D|^2 + eps^2)^(beta / 2)`` with ``eps = norm_smoothing`` (default 1e-9 m), so its
derivative stays finite where a point does not slide.
Models with ``ball`` / ``free`` joints differentiate along the tangent.
"""

from __future__ import annotations

from typing import Any, Sequence

import casadi as ca
import numpy as np

from pbframework.forces import ForceForm, ForceModel
from pbframework.geometry import Plane, depth
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.kinematics import contact_positions
from pbframework.model import ArticulatedBody

from ._common import TangentSymbols, cached_function, finite_number, unit_vector

TANGENTIAL = ("corrected", "pbd", "none")


class PBFDContact(ForceModel):
    """Seed 002's frictional contact against a plane (module docstring).

    Args:
        normal_stiffness: ``C_perp`` >= 0 (N / m^alpha).
        friction: ``C_par`` >= 0.
        alpha: exponent of the normal force, > 1.
        beta: exponent of the tangential displacement, > 0.
        gamma: exponent of the depth weighting the tangential force, > 0.
        normal: the plane's outward normal (3 numbers, not all zero; normalised).
        offset: the plane is ``normal . x = offset``.
        tangential: ``"corrected"`` (Eq. 12, a step force: integrator ``pbfd``), ``"pbd"`` (Eq. 11, a
            potential: any position-based integrator) or ``"none"`` (normal force only).
        norm_smoothing: ``eps`` in ``(|Pi D|^2 + eps^2)^(beta / 2)``, metres (> 0).
    """

    name = "pbfd_contact"
    energy_input = False
    dissipative = True
    group = True

    def __init__(self, normal_stiffness: float = 1e4, friction: float = 1.0, alpha: float = 2.0, beta: float = 1.0,
                 gamma: float = 1.0, *, normal: Sequence[float] = (0.0, 0.0, 1.0), offset: float = 0.0,
                 tangential: str = "corrected", norm_smoothing: float = 1e-9) -> None:
        who = self.name
        self.normal_stiffness = finite_number(who, "normal_stiffness", normal_stiffness, minimum=0.0)
        self.friction = finite_number(who, "friction", friction, minimum=0.0)
        self.alpha = finite_number(who, "alpha", alpha)
        self.beta = finite_number(who, "beta", beta)
        self.gamma = finite_number(who, "gamma", gamma)
        if not self.alpha > 1.0:
            raise ValueError(f"{who}: alpha must be > 1 (seed 002 Lemma 4.2: the normal potential must be C^2), "
                             f"got {alpha!r}")
        for label, v in (("beta", self.beta), ("gamma", self.gamma)):
            if not v > 0.0:
                raise ValueError(f"{who}: {label} must be > 0 (seed 002 Lemma 4.2: the tangential force must be "
                                 f"C^1), got {v!r}")
        unit_vector(who, "normal", normal)                   # the one-line error for a bad normal
        self.offset = finite_number(who, "offset", offset)
        self.plane = Plane(np.asarray(normal, dtype=float).reshape(-1), self.offset)
        self.normal = self.plane.normal
        if tangential not in TANGENTIAL:
            raise ValueError(f"{who}: tangential must be one of {', '.join(map(repr, TANGENTIAL))}, got "
                             f"{tangential!r}")
        self.tangential = tangential
        self.norm_smoothing = finite_number(who, "norm_smoothing", norm_smoothing, minimum=0.0, strict=True)
        forms = {ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE}
        if tangential == "corrected":
            forms.add(ForceForm.STEP_FORCE)
        self.forms = frozenset(forms)

    def params(self) -> dict[str, Any]:
        return {"normal_stiffness": self.normal_stiffness, "friction": self.friction, "alpha": self.alpha,
                "beta": self.beta, "gamma": self.gamma, "normal": self.normal.tolist(), "offset": self.offset,
                "tangential": self.tangential, "norm_smoothing": self.norm_smoothing}

    # -- geometry ------------------------------------------------------------------------------------------
    def _positions(self, model: ArticulatedBody, q):
        if model.n_contacts == 0:
            raise ValueError(f"{self.name}: model {model.name!r} has no contact points; give its links "
                             f"contact_points (Link(..., contact_points=[(x, y, z), ...]))")
        return contact_positions(model)(q)

    def depth(self, P):
        """Penetration depths (1 x nc) of world points ``P`` (3 x nc): positive below the plane
        (:func:`pbframework.geometry.depth`, exact: seed 002's ``d`` is only C^0, made C^2 by ``alpha > 1``)."""
        return depth(self.plane, P)

    def _tangent(self, D):
        n = self.normal.reshape(3, 1)
        return ca.mtimes(ca.DM(np.eye(3) - n @ n.T), D)

    def _norm_pow(self, T, power: float):
        """``|T_j|^power`` per column, smoothed by ``norm_smoothing``."""
        return (ca.sum1(T * T) + self.norm_smoothing ** 2) ** (power / 2)

    def normal_potential(self, model: ArticulatedBody, q):
        """``C_perp P_perp(q)`` (Eq. 9)."""
        d = self.depth(self._positions(model, q))
        return self.normal_stiffness / (self.alpha + 1) * ca.sum2(d ** (self.alpha + 1))

    def contact_forces(self, model, q, qd, t):
        """The normal force ``C_perp d^alpha n`` per contact point (3 x nc). The tangential force of Eq. 12 is a
        function of a step's displacement, not of the state, and is not included."""
        d = self.depth(self._positions(model, q))
        return ca.mtimes(ca.DM(self.normal.reshape(3, 1)), self.normal_stiffness * d ** self.alpha)

    def tangential_force_points(self, P_next, P_cur):
        """Eq. 12's ``f_par`` per contact point (3 x nc), for end and start positions."""
        d = self.depth(P_next)
        T = self._tangent(P_next - P_cur)
        return -(self.beta + 1) * T * ca.repmat(self._norm_pow(T, self.beta) * d ** (self.gamma + 1), 3, 1)

    # -- forms -----------------------------------------------------------------------------------------------
    def energy(self, model, q):
        return self.normal_potential(model, q)

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        def build() -> ca.Function:
            qn, qc = ca.SX.sym("q_next", model.nq), ca.SX.sym("q_cur", model.nq)
            Q = self.normal_potential(model, qn)
            if self.tangential == "pbd":            # Eq. 11
                Pn, Pc = self._positions(model, qn), self._positions(model, qc)
                T = self._tangent(Pn - Pc)
                Q = Q + self.friction * ca.sum2(self._norm_pow(T, self.beta + 1) * self.depth(Pn) ** (self.gamma + 1))
            return ca.Function("pbfd_contact_Q", [qn, qc], [Q], ["q_next", "q_cur"], ["Q"])

        return cached_function(model, self, "Q", build)(q_next, q_cur)

    def generalized_force(self, model, q, qd, t):
        def build() -> ca.Function:
            ts = TangentSymbols(model)
            f = -ca.gradient(self.normal_potential(model, ts.qe), ts.var)
            return ca.Function("pbfd_contact_f", [ts.q, ts.qd], [ts.at_zero(f)], ["q", "qd"], ["f"])

        return cached_function(model, self, "f", build)(q, qd)

    def step_force(self, model, q_next, q_cur, dt, t):
        if self.tangential != "corrected":
            return super().step_force(model, q_next, q_cur, dt, t)

        def build() -> ca.Function:
            ts = TangentSymbols(model)
            qc = ca.SX.sym("q_cur", model.nq)
            P = self._positions(model, ts.qe)
            f = self.tangential_force_points(ts.at_zero(P), self._positions(model, qc))
            J = ca.jacobian(ca.vec(P), ts.var)                 # (3 nc) x nv, along the tangent at q_next
            tau = self.friction * ca.mtimes(ts.at_zero(J).T, ca.vec(f))
            return ca.Function("pbfd_contact_step", [ts.q, qc], [tau], ["q_next", "q_cur"], ["f"])

        return cached_function(model, self, "step", build)(q_next, q_cur)


@hookimpl
def pbf_force_models():
    return [PluginInfo("pbfd_contact", "seed 002 frictional contact against a plane: normal force d^alpha n "
                                       "(Eq. 8-9), corrected tangential step force (Eq. 12) or the PBD energy "
                                       "(Eq. 11)", PBFDContact)]
