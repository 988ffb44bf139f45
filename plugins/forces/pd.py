"""PD joint control, explicit (``pd``) and stable (``stable_pd``, Tan, Liu and Turk 2011; seed 001 §VI).

Both track targets ``qbar(t)`` on selected coordinates with gains ``kp`` (N m / rad) and ``kd``
(N m s / rad), each a scalar or one value per coordinate. Targets are constants or CasADi-expressible
functions of time (periodic gaits), e.g. ``target=lambda t: 0.4 * casadi.sin(2 * casadi.pi * t)``. With
``track_velocity=True`` the damping term tracks the target's time derivative ``qbar'(t)`` (computed
symbolically) instead of zero velocity.

**pd** -- the textbook controller, evaluated at the known state:

* generalised force ``tau = kp (qbar(t) - q) + kd (qbar'(t) - qd)``;
* potential (PBAD): the torque of the state the step starts from, ``tau_k = kp (qbar(t - dt) - q_k) +
  kd (qbar'(t - dt) - (q_k - q_{k-1}) / dt)``, enters as ``Q = -tau_k . q_{k+1}``. Explicit, so large
  gains at large ``dt`` go unstable -- which is why ``stable_pd`` exists.

**stable_pd** -- Tan et al. evaluate the PD at the *next* state. In PBAD's potential form this is exact and
natural:

    Q = kp/2 ||q_{k+1} - qbar(t)||^2 + kd/(2 dt) ||q_{k+1} - q_k - dt qbar'(t)||^2,
    dQ/dq_{k+1} = kp (q_{k+1} - qbar(t)) + kd ((q_{k+1} - q_k)/dt - qbar'(t)) = -tau(q_{k+1}, qd_{k+1}),

i.e. minus the implicit PD torque at the end of the step, with ``qd_{k+1} = (q_{k+1} - q_k)/dt`` the
backward-Euler velocity. For Newton-Euler integrators the generalised force is Tan et al.'s predictive
form with lookahead ``dt`` (a constructor parameter, normally the simulator's timestep):

    tau = -kp (q + dt qd - qbar(t + dt)) - kd (qd - qbar'(t + dt)).

Tan et al.'s full form also has ``-kd dt qdd`` on the right; moving it to the left adds ``kd dt`` to the
diagonal of the mass matrix. That term needs ``qdd`` and cannot be expressed as a force ``f(q, qd, t)``;
an integrator that wants it must add ``diag(kd dt)`` (see :meth:`StablePD.mass_matrix_term`) to ``M``.

Energy: with a constant target the proportional part is a spring, ``kp/2 ||q - qbar||^2``, reported by
``energy``; a time-varying target does work, so ``energy`` is ``None`` then.
"""

from __future__ import annotations

from typing import Any

import casadi as ca
import numpy as np

from pbframework.forces import ForceForm, ForceModel
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.lie import q_difference
from pbframework.model import ArticulatedBody

from ._common import (DofSpec, TimeSignal, cached_function, check_dof_spec, check_signal_length,
                      check_time_signal, evaluate_signal, finite_number, fit_length, gain_vector, gather,
                      resolve_dofs, scatter, velocity_indices)


class PD(ForceModel):
    """Explicit PD joint control ``tau = kp (qbar(t) - q) + kd (qbar'(t) - qd)`` (see the module docstring).

    Args:
        kp: proportional gain, >= 0; a scalar or one per selected coordinate.
        kd: derivative gain, >= 0; a scalar or one per selected coordinate.
        target: the target ``qbar``: a constant (scalar or one per coordinate) or a callable ``target(t)``
            returning a CasADi expression of the time symbol ``t``.
        dofs: coordinate names, joint names (all of a joint's coordinates) or indices; ``None`` = every
            coordinate not belonging to a floating joint.
        track_velocity: damp toward ``qbar'(t)`` instead of toward zero velocity.
    """

    name = "pd"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})
    group = True            # on hinge and slide coordinates of models with ball / free joints too

    def __init__(self, kp: Any = 1.0, kd: Any = 0.0, target: TimeSignal = 0.0, *, dofs: DofSpec = None,
                 track_velocity: bool = False) -> None:
        who = self.name
        self.kp = gain_vector(who, "kp", kp)
        self.kd = gain_vector(who, "kd", kd)
        self.target = check_time_signal(who, "target", target)
        self.dofs = check_dof_spec(who, dofs)
        if not isinstance(track_velocity, bool):
            raise ValueError(f"{who}: track_velocity must be True or False, got {track_velocity!r}")
        self.track_velocity = track_velocity

    def params(self) -> dict[str, Any]:
        return {"kp": self.kp.tolist(), "kd": self.kd.tolist(),
                "target": self.target if callable(self.target) else self.target.tolist(),
                "dofs": None if self.dofs is None else list(self.dofs), "track_velocity": self.track_velocity}

    # -- model-dependent set-up -------------------------------------------------------------------------
    def coordinates(self, model: ArticulatedBody) -> list[int]:
        """Indices into ``q`` of the controlled coordinates (validated against ``model``)."""
        idx = resolve_dofs(self.name, model, self.dofs)
        names = [model.dof_names[i] for i in idx]
        fit_length(self.name, "kp", self.kp, len(idx), names)
        fit_length(self.name, "kd", self.kd, len(idx), names)
        check_signal_length(self.name, "target", self.target, len(idx), names)
        return idx

    def _gains(self, model: ArticulatedBody) -> tuple[list[int], ca.DM, ca.DM]:
        idx = self.coordinates(model)
        names = [model.dof_names[i] for i in idx]
        return (idx, ca.DM(fit_length(self.name, "kp", self.kp, len(idx), names)),
                ca.DM(fit_length(self.name, "kd", self.kd, len(idx), names)))

    def _target(self, t, n: int):
        """``(qbar(t), qbar'(t))`` as n-vectors for a (symbolic) time ``t``."""
        ts = ca.SX.sym("t")
        qbar = evaluate_signal(self.target, ts, n)
        vbar = ca.jacobian(qbar, ts) if (self.track_velocity and callable(self.target)) else ca.DM.zeros(n, 1)
        f = ca.Function("target", [ts], [qbar, vbar])
        return f(t)

    def _pd_torque(self, model: ArticulatedBody, q, qd, t):
        """``(velocity indices, tau)``; ``qd`` has ``nv`` entries."""
        idx, kp, kd = self._gains(model)
        vidx = velocity_indices(self.name, model, idx)
        qbar, vbar = self._target(t, len(idx))
        return vidx, kp * (qbar - gather(idx, q)) + kd * (vbar - gather(vidx, qd))

    # -- forms --------------------------------------------------------------------------------------------
    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        def build() -> ca.Function:
            qn, qc, qp = (ca.SX.sym(s, model.nq) for s in ("q_next", "q_cur", "q_prev"))
            h, ts = ca.SX.sym("dt"), ca.SX.sym("t")
            chord = q_difference(model)(qp, qc) if model.on_group else qc - qp
            _, tau = self._pd_torque(model, qc, chord / h, ts - h)
            idx = self.coordinates(model)
            return ca.Function("pd_Q", [qn, qc, qp, h, ts], [-ca.dot(tau, gather(idx, qn))],
                               ["q_next", "q_cur", "q_prev", "dt", "t"], ["Q"])

        return cached_function(model, self, "Q", build)(q_next, q_cur, q_prev, dt, t)

    def generalized_force(self, model, q, qd, t):
        def build() -> ca.Function:
            qs, qds, ts = ca.SX.sym("q", model.nq), ca.SX.sym("qd", model.nv), ca.SX.sym("t")
            vidx, tau = self._pd_torque(model, qs, qds, ts)
            return ca.Function("pd_f", [qs, qds, ts], [scatter(model, vidx, tau, model.nv)], ["q", "qd", "t"],
                               ["f"])

        return cached_function(model, self, "f", build)(q, qd, t)

    def energy(self, model, q):
        if callable(self.target):
            return None
        idx, kp, _ = self._gains(model)
        qbar = evaluate_signal(self.target, 0.0, len(idx))
        e = gather(idx, q) - qbar
        return 0.5 * ca.dot(kp * e, e)


class StablePD(PD):
    """Stable PD (Tan et al.): the PD evaluated at the next state (see the module docstring).

    Args:
        kp, kd, target, dofs, track_velocity: as for :class:`PD`.
        dt: lookahead of the predictive generalised-force form, normally the simulator's timestep (s);
            needed only by integrators that use the generalised-force form (Newton-Euler, collocation
            residuals of order >= 3). The potential form uses the step's own ``dt``. Without ``dt`` the
            instance offers the potential form only (``forms == {POTENTIAL}``).
    """

    name = "stable_pd"

    def __init__(self, kp: Any = 1.0, kd: Any = 0.0, target: TimeSignal = 0.0, *, dofs: DofSpec = None,
                 track_velocity: bool = False, dt: float | None = None) -> None:
        super().__init__(kp, kd, target, dofs=dofs, track_velocity=track_velocity)
        self.dt = None if dt is None else finite_number(self.name, "dt", dt, minimum=0.0, strict=True)
        # Without its lookahead the model has the potential form only (integrators then say so).
        self.forms = PD.forms if self.dt is not None else frozenset({ForceForm.POTENTIAL})

    def params(self) -> dict[str, Any]:
        return {**super().params(), "dt": self.dt}

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        def build() -> ca.Function:
            qn, qc, qp = (ca.SX.sym(s, model.nq) for s in ("q_next", "q_cur", "q_prev"))
            h, ts = ca.SX.sym("dt"), ca.SX.sym("t")
            idx, kp, kd = self._gains(model)
            qbar, vbar = self._target(ts, len(idx))
            e = gather(idx, qn) - qbar
            s = gather(idx, qn) - gather(idx, qc) - h * vbar
            Q = 0.5 * ca.dot(kp * e, e) + ca.dot(kd * s, s) / (2 * h)
            return ca.Function("stable_pd_Q", [qn, qc, qp, h, ts], [Q],
                               ["q_next", "q_cur", "q_prev", "dt", "t"], ["Q"])

        return cached_function(model, self, "Q", build)(q_next, q_cur, q_prev, dt, t)

    def generalized_force(self, model, q, qd, t):
        if self.dt is None:
            raise ValueError(f"{self.name}: the generalised-force form (used by Newton-Euler and collocation "
                             f"integrators) is Tan et al.'s predictive PD and needs its lookahead: build it "
                             f"with dt=<the simulator's timestep>, e.g. ('stable_pd', {{'kp': ..., 'dt': 0.01}})")

        def build() -> ca.Function:
            qs, qds, ts = ca.SX.sym("q", model.nq), ca.SX.sym("qd", model.nv), ca.SX.sym("t")
            idx, kp, kd = self._gains(model)
            vidx = velocity_indices(self.name, model, idx)
            qbar, vbar = self._target(ts + self.dt, len(idx))
            qi, qdi = gather(idx, qs), gather(vidx, qds)
            tau = -kp * (qi + self.dt * qdi - qbar) - kd * (qdi - vbar)
            return ca.Function("stable_pd_f", [qs, qds, ts], [scatter(model, vidx, tau, model.nv)],
                               ["q", "qd", "t"], ["f"])

        return cached_function(model, self, "f", build)(q, qd, t)

    def mass_matrix_term(self, model: ArticulatedBody) -> np.ndarray:
        """``diag(kd dt)`` on the controlled coordinates (nv x nv): what Tan et al.'s full stable PD adds
        to the mass matrix of a Newton-Euler step, ``(M + kd dt) qdd = ...`` (requires ``dt``)."""
        if self.dt is None:
            raise ValueError(f"{self.name}: mass_matrix_term needs the lookahead dt; build with dt=<timestep>")
        idx, _, kd = self._gains(model)
        out = np.zeros((model.nv, model.nv))
        for k, i in enumerate(velocity_indices(self.name, model, idx)):
            out[i, i] = float(kd[k]) * self.dt
        return out


@hookimpl
def pbf_force_models():
    return [
        PluginInfo("pd", "explicit PD joint control toward constant or time-varying targets", PD),
        PluginInfo("stable_pd", "stable PD joint control (Tan et al. 2011): the PD at the next state", StablePD),
    ]
