"""Prescribed joint torques: a constant vector, a CasADi-expressible function of time, or a controller.

A torque ``tau`` on the selected coordinates enters

* the PBAD energy as the potential ``Q = -tau . q_next[dofs]`` (its gradient is ``-tau``: the torque is
  evaluated at the end of the step, like every force of seed 000 Eq. 4);
* residual objectives and Newton-Euler integrators as the generalised force ``tau`` scattered into an
  ``nq`` vector.

A *controller* is arbitrary Python code ``controller(t, q, qd) -> tau`` and cannot live inside a CasADi
graph. It is therefore a per-step **input**: the model declares ``n_inputs(model) = len(dofs)``, the
integrator adds a symbol ``u`` of that length to the step problem's parameters, and the simulator calls
:meth:`JointTorque.input_values` (which runs the controller on the state the step starts from) before
every step. Within the step the torque is then a constant ``u``, exactly like a zero-order-hold actuator.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import casadi as ca
import numpy as np

from pbframework.forces import ForceForm, ForceModel
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.model import ArticulatedBody

from ._common import (DofSpec, TimeSignal, cached_function, check_dof_spec, check_signal_length,
                      check_time_signal, evaluate_signal, gather, resolve_dofs, scatter,
                      velocity_indices)

Controller = Callable[[float, np.ndarray, np.ndarray], Sequence[float]]
"""``controller(t, q, qd) -> tau``: NumPy state in (``q`` of length ``nq``, ``qd`` of ``nv``), one torque per
selected coordinate out."""


class JointTorque(ForceModel):
    """Joint torques (or forces, on prismatic coordinates) on selected coordinates.

    Args:
        torque: a constant (scalar, broadcast to every selected coordinate, or one value per coordinate)
            or a callable ``torque(t)`` that receives the CasADi time symbol ``t`` and returns a CasADi
            expression (e.g. ``lambda t: 2 * casadi.sin(3 * t)``). Mutually exclusive with ``controller``.
        controller: a Python callable ``controller(t, q, qd) -> tau`` (NumPy in, one value per selected
            coordinate out), evaluated once per step on the state the step starts from; the torque is a
            per-step input of the step problem (see the module docstring). Mutually exclusive with ``torque``.
        dofs: the coordinates it acts on: coordinate names (``"knee0"``, ``"hip0:ry"``), joint names (all
            of the joint's coordinates) or indices; ``None`` (default) = every coordinate that does not
            belong to a floating joint.

    Forms: potential ``Q = -tau(t) . q_next[dofs]``; generalised force ``tau(t)`` on ``dofs``. Not
    conservative (``energy`` is ``None``): the actuator does work.
    """

    name = "joint_torque"
    group = True
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})

    def __init__(self, torque: TimeSignal | None = None, *, controller: Controller | None = None,
                 dofs: DofSpec = None) -> None:
        who = self.name
        if (torque is None) == (controller is None):
            raise ValueError(f"{who}: give exactly one of torque (a constant or a function of t) and "
                             f"controller (a Python callable (t, q, qd) -> tau), got "
                             f"{'both' if torque is not None else 'neither'}")
        if controller is not None and not callable(controller):
            raise ValueError(f"{who}: controller must be a callable (t, q, qd) -> tau, got {controller!r}")
        self.torque = None if torque is None else check_time_signal(who, "torque", torque)
        self.controller = controller
        self.dofs = check_dof_spec(who, dofs)

    def params(self) -> dict[str, Any]:
        if self.controller is not None:
            tq: Any = self.controller
        elif callable(self.torque):
            tq = self.torque
        else:
            tq = self.torque.tolist()
        return {"torque" if self.controller is None else "controller": tq,
                "dofs": None if self.dofs is None else list(self.dofs)}

    # -- model-dependent set-up -------------------------------------------------------------------------
    def coordinates(self, model: ArticulatedBody) -> list[int]:
        """Indices into ``q`` of the coordinates this torque acts on (validated against ``model``)."""
        idx = resolve_dofs(self.name, model, self.dofs)
        if self.torque is not None:
            check_signal_length(self.name, "torque", self.torque, len(idx), [model.dof_names[i] for i in idx])
        return idx

    def n_inputs(self, model: ArticulatedBody) -> int:
        return len(self.coordinates(model)) if self.controller is not None else 0

    def input_values(self, model: ArticulatedBody, t: float, q, qd) -> np.ndarray:
        if self.controller is None:
            return super().input_values(model, t, q, qd)
        idx = self.coordinates(model)
        try:
            tau = np.asarray(self.controller(float(t), np.asarray(q, float), np.asarray(qd, float)), float)
        except Exception as exc:  # noqa: BLE001 - re-raised with the force's name and time
            raise RuntimeError(f"{self.name}: the controller raised {type(exc).__name__} at t = {t:g}: "
                               f"{exc}") from exc
        tau = tau.reshape(-1)
        if tau.size != len(idx) or not np.all(np.isfinite(tau)):
            raise ValueError(f"{self.name}: the controller must return {len(idx)} finite torques (for "
                             f"{', '.join(model.dof_names[i] for i in idx)}) at t = {t:g}, got {tau.tolist()}")
        return tau

    def _tau(self, model: ArticulatedBody, t, u):
        n = len(self.coordinates(model))
        if self.controller is not None:
            if u is None:
                raise TypeError(f"{self.name}: a controller torque is a per-step input; the integrator must "
                                f"pass u (length {n}) as declared by n_inputs()")
            return u
        return evaluate_signal(self.torque, t, n)

    def _functions(self, model: ArticulatedBody) -> tuple[ca.Function, ca.Function]:
        idx = self.coordinates(model)
        n = len(idx)

        def build_q() -> ca.Function:
            q, t, u = ca.SX.sym("q_next", model.nq), ca.SX.sym("t"), ca.SX.sym("u", n)
            tau = self._tau(model, t, u)
            return ca.Function("joint_torque_Q", [q, t, u], [-ca.dot(tau, gather(idx, q))],
                               ["q_next", "t", "u"], ["Q"])

        def build_f() -> ca.Function:
            t, u = ca.SX.sym("t"), ca.SX.sym("u", n)
            vidx = velocity_indices(self.name, model, idx)
            return ca.Function("joint_torque_f", [t, u], [scatter(model, vidx, self._tau(model, t, u), model.nv)],
                               ["t", "u"], ["f"])

        return (cached_function(model, self, "Q", build_q), cached_function(model, self, "f", build_f))

    # -- forms --------------------------------------------------------------------------------------------
    def potential(self, model, q_next, q_cur, q_prev, dt, t, u=None):
        n = len(self.coordinates(model))
        u = self._tau(model, t, u) if self.controller is not None else ca.DM.zeros(n, 1)
        return self._functions(model)[0](q_next, t, u)

    def generalized_force(self, model, q, qd, t, u=None):
        n = len(self.coordinates(model))
        u = self._tau(model, t, u) if self.controller is not None else ca.DM.zeros(n, 1)
        return self._functions(model)[1](t, u)


@hookimpl
def pbf_force_models():
    return [PluginInfo("joint_torque", "prescribed joint torques: constant, a function of time, or a "
                       "per-step controller callback", JointTorque)]
