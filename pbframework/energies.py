"""Energies of a Simulator's states and the divergence test built on them.

:class:`Energies` is the part of :class:`~pbframework.simulate.Simulator` that evaluates kinetic and
potential energy (of configurations and velocities, of integrator states with their history node), the
energy scale a run's drift is measured against, and the :class:`~pbframework.verdict.DivergenceTest` of a
rollout.
"""

from __future__ import annotations

import re

import casadi as ca
import numpy as np

from .dynamics import crba
from .forces import potential_energy_function
from .result import ENERGY_SCALE_FLOOR
from .verdict import DivergenceTest

_CHAIN_NAME = re.compile(r"^chain\d+$")


class Energies:
    """Mixin of :class:`~pbframework.simulate.Simulator`: energies, energy scales, the divergence test."""

    def _energy_function(self) -> ca.Function:
        key = ("_energy_fn", tuple(repr(f) for f in self.forces))
        fn = self.model.cache.get(key)
        if fn is None:
            q, v = ca.SX.sym("q", self.model.nq), ca.SX.sym("v", self.model.nv)
            T = 0.5 * ca.dot(v, ca.mtimes(crba(self.model)(q), v))
            V = potential_energy_function(self.model, self.forces)(q)
            fn = ca.Function("energy", [q, v], [T, V], ["q", "qd"], ["T", "V"])
            self.model.cache[key] = fn
        return fn

    def energy(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Kinetic and potential energy of configurations ``q`` (shape (nq,) or (n, nq)) and velocities ``qd``
        ((nv,) or (n, nv))."""
        q, qd = np.atleast_2d(q), np.atleast_2d(qd)
        n = q.shape[0]
        T, V = self.energy_function.map(n)(q.T, qd.T)
        return np.asarray(T).ravel(), np.asarray(V).ravel()

    def rollout_energy(self, states: np.ndarray, dt: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Reported kinetic and potential energy of the integrator states of rollouts from their start.

        ``states`` has shape (n+1, ns) or (M, n+1, ns), row 0 of each rollout its initial state; ``dt`` is
        the rollout's step (default: the Simulator's). Potential energy is exact. Kinetic energy is
        ``qd^T M qd / 2`` of the velocity slots, or the problem's own where it has one (PBAD order 2: the
        chord velocity to the history node), except at row 0, which is always the start's exact
        ``qd0^T M qd0 / 2``: there the history node comes from the start (the exact motion backwards, or
        a Taylor expansion), not from a step, and its chord is the mean velocity over the step before t0,
        an O(dt) estimate of ``qd0`` (CHAIN-100 at rest, dt = 0.1 s: 0.022% of the energy scale, where the
        exact value is 0).

        Returns:
            ``(T, V)``, each of shape ``states.shape[:-1]``.
        """
        T, V = self.state_energy(states, dt)
        if self.problem.kinetic is not None:
            states = np.asarray(states, dtype=float)
            nq, nv = self.model.nq, self.model.nv
            T[..., 0] = self.energy(states[..., 0, :nq], states[..., 0, nq:nq + nv])[0].reshape(T[..., 0].shape)
        return T, V

    def state_energy(self, states: np.ndarray, dt: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Reported kinetic and potential energy of integrator states (any shape ``(..., ns)``), each as
        a step's result: the problem's own kinetic energy where it has one (see :meth:`rollout_energy`)."""
        try:
            states = np.asarray(states, dtype=float)
        except (TypeError, ValueError):
            from .errors import ArgumentTypeError

            raise ArgumentTypeError(f"state_energy: states must be an array of numbers, got {states!r}"[:200]) \
                from None
        if states.ndim == 0 or states.shape[-1] != self.problem.ns:
            from .errors import StepError

            raise StepError(f"state_energy: states must have {self.problem.ns} entries in their last axis (the "
                            f"integrator's state), got shape {states.shape}")
        nq, nv, shape = self.model.nq, self.model.nv, states.shape[:-1]
        flat = states.reshape(-1, states.shape[-1])
        if not len(flat):
            return np.zeros(shape), np.zeros(shape)
        T, V = self.energy(flat[:, :nq], flat[:, nq:nq + nv])
        T, V = T.reshape(shape), V.reshape(shape)
        if self.problem.kinetic is not None:
            step = self.config.dt if dt is None else float(dt)
            T = np.asarray(self.problem.kinetic.map(len(flat))(flat.T, step)).reshape(shape)
        return T, V

    def divergence_scale(self, q0, qd0=None) -> float:
        """The energy scale of the divergence test's ``energy_limit``, in joules: DESIGN.md's CHAIN-N scale
        for chain models; otherwise the start's kinetic energy plus ``m g L``, the potential range of the
        whole mass over ``L``, the sum of the joint offsets and the largest centre-of-mass offset (a bound
        on how far any point can fall relative to the base)."""
        if self.energy_scale is not None:
            return float(self.energy_scale)
        q0 = self.model.check_state(q0, "q0")
        qd0 = np.zeros(self.model.nv) if qd0 is None else self.model.check_velocity(qd0, "qd0")
        T0 = float(self.energy(q0, qd0)[0][0])
        reach = sum(float(np.linalg.norm(j.origin[:3, 3])) for j in self.model.joints)
        reach += max((float(np.linalg.norm(lk.com)) for lk in self.model.links), default=0.0)
        g = float(np.linalg.norm(self.model.gravity)) if any(
            getattr(f, "name", "") == "gravity" for f in self.forces) else 0.0
        return max(T0 + self.model.total_mass * g * reach, 1e-12)

    def divergence_test(self, q0, qd0=None) -> DivergenceTest:
        """The :class:`~pbframework.verdict.DivergenceTest` of a rollout from ``(q0, qd0)``."""
        q0 = self.model.check_state(q0, "q0")
        qd0 = np.zeros(self.model.nv) if qd0 is None else self.model.check_velocity(qd0, "qd0")
        scale = self.divergence_scale(q0, qd0) if self.energy_checked else 0.0
        if scale < ENERGY_SCALE_FLOOR:               # no energy scale (no gravity, at rest): no energy test
            return DivergenceTest(self.model.nq, self.max_speed, nv=self.model.nv)
        T0, V0 = self.energy(q0, qd0)
        return DivergenceTest(self.model.nq, self.max_speed, self.energy_limit / 100.0 * scale,
                              float(T0[0] + V0[0]), nv=self.model.nv)

    @property
    def energy_scale(self) -> float | None:
        """DESIGN.md's CHAIN-N energy scale for chain models, else None."""
        from .models import chain_energy_scale

        return chain_energy_scale(self.model) if _CHAIN_NAME.match(self.model.name) else None
