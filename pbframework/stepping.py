"""One step of a Simulator: the integrator's state, its force inputs, the solve, and the halving retries.

:class:`Stepping` is the part of :class:`~pbframework.simulate.Simulator` that takes one step from a state
(``advance``): it builds the step's parameters, solves the step problem with the solver plug-in, retries an
unconverged step as two half steps (``max_halvings`` levels deep) and reports what happened in a
:class:`StepStats`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .checks import real
from .errors import StepFailure
from .solving import SolveResult, restart_state, solve_step
from .step import StepError, initial_state
from .verdict import FailurePolicy


def evaluation_failure(exc: Exception) -> str:
    """The reason recorded for a step whose evaluation raised (CasADi's error, e.g. a QP that qpOASES could not
    solve): its first line that names a Function, else its last line."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    named = [ln for ln in lines if "for '" in ln]
    return "evaluation failed: " + (named[-1] if named else lines[-1] if lines else type(exc).__name__)


@dataclass
class StepStats:
    """Statistics of one step (summed over half-step retries; ``depth``, ``grad_norm`` and ``residual``:
    the largest over them).

    Attributes:
        iterations, evaluations: solver iterations and problem-function calls.
        grad_norm: final gradient infinity norm.
        converged: the verdict (every solve of the step converged).
        halvings: retries as two half steps; ``depth``: the deepest halving level reached.
        residual: the residual the step ended at (least squares: ``||W r||_2``; minimize: ``grad_norm``).
        reason: the stopping test of the (last unconverged, else first) solve.
        substeps: for a step retried as halves (Alg. 2 of seed 001 for the NMDP integrators), the
            ``(t, dt)`` of every substep actually taken, in order; empty for a step taken whole.
    """

    iterations: int = 0
    grad_norm: float = 0.0
    converged: bool = True
    halvings: int = 0
    evaluations: int = 0
    depth: int = 0
    residual: float = 0.0
    reason: str = ""
    substeps: list = field(default_factory=list)

    def add(self, other: "StepStats") -> None:
        self.iterations += other.iterations
        self.grad_norm = max(self.grad_norm, other.grad_norm)
        self.residual = max(self.residual, other.residual)
        if self.converged and not other.converged:
            self.reason = other.reason
        self.converged = self.converged and other.converged
        self.halvings += other.halvings
        self.evaluations += other.evaluations

    def as_dict(self, t: float, dt: float) -> dict[str, Any]:
        """The statistics with the step's start time and size (a trajectory's ``info["failure"]``)."""
        return {"t": float(t), "dt": float(dt), **dataclasses.asdict(self)}


class Stepping:
    """Mixin of :class:`~pbframework.simulate.Simulator`: one step (needs ``model``, ``problem``, ``solver``,
    ``config``, ``max_halvings``, ``on_failure`` and the input forces set up by the Simulator)."""

    def initial_state(self, q0, qd0=None, t0: float = 0.0) -> np.ndarray:
        """The integrator's state at ``t0`` from configuration ``q0`` and velocity ``qd0`` (default 0)."""
        q0, qd0 = self.check_start(q0, qd0)
        return self._init(q0, qd0, real(t0, "t0"), self.config.dt)

    def check_start(self, q0, qd0=None) -> tuple[np.ndarray, np.ndarray]:
        """``(q0, qd0)`` as float vectors of lengths ``nq`` and ``nv`` (``qd0`` None: at rest), finite, unit
        quaternions; a :class:`StepError` naming the argument otherwise."""
        try:
            q0 = self.model.check_state(q0, "q0")
            qd0 = np.zeros(self.model.nv) if qd0 is None else self.model.check_velocity(qd0, "qd0")
        except StepError:
            raise
        except (TypeError, ValueError) as exc:
            raise StepError(str(exc)) from None
        return q0, qd0

    def inputs(self, t: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """The per-step force inputs ``u`` (``ForceModel.input_values``) for a step starting at ``(t, q, qd)``."""
        if not self._input_forces:
            return np.zeros(0)
        parts = []
        for f, n in self._input_forces:
            v = np.asarray(f.input_values(self.model, t, q, qd), float).ravel()
            if v.size != n:
                raise StepError(f"force model {getattr(f, 'name', f)!r}: input_values returned {v.size} values, "
                                f"n_inputs declared {n}")
            parts.append(v)
        return np.concatenate(parts)

    def step_function(self, *, tol: float = 1e-12, max_iter: int = 50, rootfinder: str | None = None,
                      jacobian: bool = False, backend: str = "casadi", **build: Any):
        """One step as a differentiable ``casadi.Function`` ``(s, t, dt, u) -> s_next`` with exact derivatives
        (implicit function theorem for implicit steps; ``jacobian=True`` adds the outputs ``jac_s``,
        ``jac_u``; ``rootfinder="fast_newton"`` makes it code-generatable; ``backend="c"`` compiles it, ``build``:
        ``opt``, ``cache``): :mod:`pbframework.differentiable`."""
        from .differentiable import step_function

        return step_function(self.problem, tol=tol, max_iter=max_iter, rootfinder=rootfinder, jacobian=jacobian,
                             backend=backend, **build)

    def _init(self, q: np.ndarray, qd: np.ndarray, t: float, dt: float) -> np.ndarray:
        return initial_state(self.problem, q, qd, t, dt, self.inputs(t, q, qd))

    def advance(self, state: np.ndarray, t: float, dt: float | None = None) -> tuple[np.ndarray, StepStats]:
        """One step from ``state`` at time ``t`` (halving retries included); returns the next state and its
        statistics, whose ``converged`` is the verdict. Raises :class:`StepFailure` for an unconverged step
        under the ``raise`` policy."""
        dt = self.config.dt if dt is None else real(dt, "dt", positive=True, unit="seconds")
        t = real(t, "t")
        s, st = self._step(self.check_integrator_state(state), t, dt, 0)
        if not st.converged and self.on_failure is FailurePolicy.RAISE:
            raise self._failure_error(st, t, dt)
        return s, st

    @staticmethod
    def check_array(x, what: str) -> np.ndarray:
        """``x`` as a real float array (any shape); a :class:`StepError` naming ``what`` for a string, a
        complex array or anything NumPy cannot read as real numbers."""
        if isinstance(x, (str, bytes)) or np.iscomplexobj(x):
            raise StepError(f"{what}: expected real numbers, got {type(x).__name__}")
        try:
            return np.asarray(x, dtype=float)
        except (TypeError, ValueError):
            raise StepError(f"{what}: expected real numbers, got {type(x).__name__}") from None

    def check_integrator_state(self, state, what: str = "state") -> np.ndarray:
        """``state`` as the integrator's state vector (length ``problem.ns``, real, finite), else a
        :class:`StepError` that says what it should be (:meth:`initial_state` makes one from ``q0, qd0``)."""
        from .checks import vector

        ns = self.problem.ns
        return vector(state, what, ns, f"{ns} (the {self.integrator} state; initial_state(q0, qd0) makes one)")

    def _solve(self, s: np.ndarray, t: float, dt: float) -> tuple[np.ndarray, StepStats]:
        pb = self.problem
        nq, nv = self.model.nq, self.model.nv
        p = np.asarray(pb.params(s, t, dt, self.inputs(t, s[:nq], s[nq:nq + nv]))).ravel()
        if not self.implicit:
            try:
                return np.asarray(pb.advance(np.zeros(0), p)).ravel(), StepStats()
            except RuntimeError as exc:       # a QP inside the step (ne_mdp, ne_dry_friction) that failed
                self._renew_problem()
                return np.full(pb.ns, np.nan), StepStats(converged=False, evaluations=1,
                                                         residual=float("nan"), reason=evaluation_failure(exc))
        x0 = np.asarray(pb.guess(p)).ravel()
        res: SolveResult = self.runner.solve(x0, p) if self.runner is not None else solve_step(self.solver, pb, x0, p)
        s_next = np.asarray(pb.advance(res.x, p)).ravel()
        return s_next, StepStats(res.iterations, res.grad_norm, bool(res.converged), 0, res.evaluations, 0,
                                 res.residual(pb.kind), str(res.reason))

    def _renew_problem(self) -> None:
        """After a step whose evaluation raised: the step problem built anew (``build_step(fresh=True)``), so
        that a QP in its graph starts cold instead of hot-starting from qpOASES's failed state, which fails
        every later call; the compiled multi-step functions of the old one are dropped."""
        from .step import build_step

        old = id(self.problem)
        for key in [k for k in self.model.cache if isinstance(k, tuple) and len(k) > 1 and k[1] == old]:
            del self.model.cache[key]
        self.problem = build_step(self.model, self.integrator, self.config, self.forces, fresh=True)

    def _step(self, s: np.ndarray, t: float, dt: float, depth: int) -> tuple[np.ndarray, StepStats]:
        """Solve one step; where it does not converge, retry it as two half steps, ``max_halvings`` levels
        deep. The verdict is ``converged`` of the result; the failure policy is the caller's."""
        s_next, stats = self._solve(s, t, dt)
        if stats.converged or depth >= self.max_halvings:
            return s_next, stats
        # retry as two half steps (the state re-expressed for dt/2 without dynamics), then back to dt
        half = dt / 2.0
        total = StepStats(stats.iterations, 0.0, True, 1, stats.evaluations, 0, 0.0, stats.reason)
        s1, st1 = self._step(self._restart(s, dt, 0.5), t, half, depth + 1)
        total.add(st1)
        s2, st2 = self._step(s1, t + half, half, depth + 1)
        total.add(st2)
        total.depth = 1 + max(st1.depth, st2.depth)
        total.substeps = (st1.substeps or [(t, half)]) + (st2.substeps or [(t + half, half)])
        return self._restart(s2, half, 2.0), total

    def _failure_error(self, stats: StepStats, t: float, dt: float) -> StepFailure:
        return StepFailure(f"{self.integrator}/{self.solver_name}: step at t={t:.6g} s (dt={dt:.6g}) did not converge "
                           f"after {stats.halvings} halvings ({stats.iterations} iterations, residual "
                           f"{stats.residual:.3g}, backend {self.backend!r})")

    def _restart(self, s: np.ndarray, dt: float, ratio: float) -> np.ndarray:
        """The state re-expressed for a step ``ratio`` times ``dt`` (:func:`pbframework.step.restart_state`)."""
        return restart_state(self.problem, s, dt, ratio)
