"""Viscous joint damping ``tau = -b qd`` on selected coordinates.

Potential form (PBAD, seed 000 Eq. 5): ``Q = sum_j b_j / (2 dt) (q_{k+1,j} - q_{k,j})^2`` whose gradient in
``q_{k+1}`` is ``b (q_{k+1} - q_k) / dt``, minus the damping torque at the backward-Euler velocity -- the
damper is implicit and unconditionally stable. Generalised-force form: ``-b qd``. Dissipative, so no
``energy``.

On models with ``ball`` / ``free`` joints (``group``) the damper acts on velocity coordinates
(``model.velocity_names``: a ball joint's angular velocity in its child frame), and the potential form's
displacement is the tangent chord ``q_k (-) q_{k+1}`` (:func:`pbframework.lie.q_difference`), which is
``q_{k+1} - q_k`` on every other joint.
"""

from __future__ import annotations

from typing import Any

import casadi as ca

from pbframework.forces import ForceForm, ForceModel
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.model import ArticulatedBody

from ._common import (DofSpec, cached_function, check_dof_spec, fit_length, gain_vector, gather, resolve_dofs,
                      resolve_velocity_dofs, scatter)


class JointDamping(ForceModel):
    """Viscous damping on joint coordinates.

    Args:
        damping: coefficient ``b`` >= 0 (N m s / rad on hinges, N s / m on slides); a scalar or one value
            per selected coordinate.
        dofs: coordinate names, joint names (all of a joint's coordinates) or indices; ``None`` = every
            coordinate not belonging to a floating joint.
    """

    name = "joint_damping"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})
    energy_input = False
    dissipative = True
    group = True

    def __init__(self, damping: Any = 0.1, *, dofs: DofSpec = None) -> None:
        self.damping = gain_vector(self.name, "damping", damping)
        self.dofs = check_dof_spec(self.name, dofs)

    def params(self) -> dict[str, Any]:
        return {"damping": self.damping.tolist(), "dofs": None if self.dofs is None else list(self.dofs)}

    def coordinates(self, model: ArticulatedBody) -> list[int]:
        """Indices into ``q`` of the damped coordinates (validated against ``model``)."""
        idx = resolve_dofs(self.name, model, self.dofs)
        fit_length(self.name, "damping", self.damping, len(idx), [model.dof_names[i] for i in idx])
        return idx

    def _b(self, model: ArticulatedBody) -> tuple[list[int], ca.DM]:
        if model.on_group:
            idx = resolve_velocity_dofs(self.name, model, self.dofs)
            names = [model.velocity_names[i] for i in idx]
        else:
            idx = self.coordinates(model)
            names = [model.dof_names[i] for i in idx]
        return idx, ca.DM(fit_length(self.name, "damping", self.damping, len(idx), names))

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        def build() -> ca.Function:
            qn, qc, h = ca.SX.sym("q_next", model.nq), ca.SX.sym("q_cur", model.nq), ca.SX.sym("dt")
            idx, b = self._b(model)
            if model.on_group:
                from pbframework.lie import q_difference

                s = gather(idx, q_difference(model)(qc, qn))
            else:
                s = gather(idx, qn) - gather(idx, qc)
            return ca.Function("joint_damping_Q", [qn, qc, h], [ca.dot(b * s, s) / (2 * h)],
                               ["q_next", "q_cur", "dt"], ["Q"])

        return cached_function(model, self, "Q", build)(q_next, q_cur, dt)

    def generalized_force(self, model, q, qd, t):
        def build() -> ca.Function:
            qds = ca.SX.sym("qd", model.nv)
            idx, b = self._b(model)
            return ca.Function("joint_damping_f", [qds], [scatter(model, idx, -b * gather(idx, qds), model.nv)],
                               ["qd"], ["f"])

        return cached_function(model, self, "f", build)(qd)


@hookimpl
def pbf_force_models():
    return [PluginInfo("joint_damping", "viscous joint damping -b qd (implicit in the potential form)",
                       JointDamping)]
