"""The simulate stage: :class:`Simulator` runs a step problem through a solver, step after step.

::

    import pbframework as pbf
    model = pbf.models.chain(10)
    sim = pbf.Simulator(model, integrator="pbad", order=3, solver="lm", dt=0.05, forces=["gravity"])
    traj = sim.rollout(pbf.models.chain_q0(model), np.zeros(model.nq), duration=10.0)

The step problem and solver are built once per (model, integrator configuration, forces) and cached on
``model.cache``; a second Simulator with the same settings reuses them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import casadi as ca
import numpy as np

from .dynamics import crba
from .forces import potential_energy_function
from .adaptive import AdaptiveOptions, rollout_adaptive
from .model import ArticulatedBody
from .result import ENERGY_SCALE_FLOOR, BatchTrajectory, Trajectory
from .verdict import (
    DEFAULT_ENERGY_LIMIT, DivergenceTest, FailurePolicy, Status, energy_conserving, expected_energy, outcomes,
)
from .step import (
    Objective, ProblemKind, SolveResult, StepConfig, StepError, StepProblem, build_step, initial_state,
    input_slices, integrator_info, resolve_forces, restart_state,
)


class StepFailure(RuntimeError):
    """A step did not converge after its halvings and the failure policy is ``raise``."""


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
    """

    iterations: int = 0
    grad_norm: float = 0.0
    converged: bool = True
    halvings: int = 0
    evaluations: int = 0
    depth: int = 0
    residual: float = 0.0
    reason: str = ""

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


_CHAIN_NAME = re.compile(r"^chain\d+$")
PROGRESS_PIECES = 200
"""A native rollout with a progress bar runs in about this many calls (the bar moves between them)."""


class Simulator:
    """Simulate an articulated body with an integrator plug-in, a solver plug-in and force models.

    Args:
        model: the :class:`~pbframework.model.ArticulatedBody`.
        integrator: integrator plug-in name (``pbf plugins`` lists them): ``"pbad"``, ``"rk4"``, ...
        order: the integrator's order (``None``: its default; ``pbad`` supports 2..8).
        solver: solver plug-in name for implicit integrators (``"lm"``, ``"jtj_lm"``, ``"lbfgs"``), or
            ``"auto"``: ``lm`` for energy (minimize) problems, ``jtj_lm`` for residual (least-squares) ones.
            Ignored by explicit integrators.
        dt: timestep in seconds.
        forces: force models: registered names (``"gravity"``), ``(name, params)`` pairs or
            :class:`~pbframework.forces.ForceModel` instances. Gravity acts only if listed (default: gravity).
            The model's ``default_forces`` are added unless a force of the same name is listed (a URDF or
            MJCF model with limited joints carries ``joint_limits``).
        objective: ``"auto"``, ``"energy"`` or ``"residual"`` (:class:`~pbframework.step.Objective`);
            ``"auto"`` picks the residual form when the solver only takes least-squares problems.
        precondition: weight residual objectives by the inverse mass matrix (see
            :class:`~pbframework.step.StepConfig`); ``False`` = the literal Eq. 7.
        fd: forward-dynamics plug-in for Newton-Euler integrators and the PBAD start (default ``"aba"``).
        solver_options: options of the solver (e.g. ``{"max_iter": 50, "gtol": 1e-9}``).
        on_failure: a :class:`~pbframework.verdict.FailurePolicy`: what a rollout does with a step still
            unconverged after its halvings: ``"stop"`` (default: the run ends there, status
            ``unconverged``), ``"continue"`` (keep it, record it, go on) or ``"raise"``.
        max_halvings: how many levels deep an unconverged step is retried as two half steps (0: never).
        max_speed: a rollout ends as diverged when any |qd| exceeds this (rad/s or m/s) or a state
            becomes non-finite.
        energy_limit: percent of the energy scale (:meth:`divergence_scale`) by which the total energy
            may rise above its start before the rollout ends as diverged; applies where no force model
            has an energy input (``ForceModel.energy_input``; see :mod:`pbframework.verdict`). ``None``
            switches the test off.
        adaptive: adaptive step-size control (:mod:`pbframework.adaptive`): ``True``, a dict of
            :class:`~pbframework.adaptive.AdaptiveOptions` (``{"rtol": 1e-5}``) or an instance; ``dt`` is
            then the output interval and the first step. ``False`` (default): fixed steps of ``dt``.
        backend: where the solver loop runs (``pbf plugins`` lists the backends): ``"casadi"`` (default:
            CasADi VM and the Python solver, step by step) or ``"c"`` (generated C, compiled once per model
            and cached: a whole rollout, or a batch of rollouts on native threads, in one call).
        backend_options: options of the backend (for ``"c"``: ``real``, ``opt``, ``threads``,
            ``derivatives``, ... see ``pbframework.plugins.backends.c``).

    Raises:
        UnknownPluginError: unknown integrator, solver or force name (the message lists the available).
        StepError: bad dt, unsupported order, a force in a form the integrator cannot accept, a solver
            that cannot solve this integrator's problems, bad options.
    """

    def __init__(self, model: ArticulatedBody, integrator: str = "pbad", *, order: int | None = None,
                 solver: str = "auto", dt: float = 0.01, forces: Iterable[Any] | None = ("gravity",),
                 objective: Objective | str = Objective.AUTO, fd: str = "aba", precondition: bool = True,
                 solver_options: Mapping[str, Any] | None = None,
                 on_failure: FailurePolicy | str = FailurePolicy.STOP, max_halvings: int = 4,
                 max_speed: float = 1e4, energy_limit: float | None = DEFAULT_ENERGY_LIMIT,
                 adaptive: AdaptiveOptions | Mapping[str, Any] | bool = False,
                 backend: str = "casadi", backend_options: Mapping[str, Any] | None = None) -> None:
        from .registry import get_plugin

        if not isinstance(model, ArticulatedBody):
            raise StepError(f"model must be an ArticulatedBody, got {type(model).__name__}")
        t_start = time.perf_counter()
        self.model = model
        self.config = StepConfig(dt=dt, order=order, objective=objective, fd=fd, precondition=precondition)
        self.forces = resolve_forces(forces, model)
        integrator_info(integrator)                      # unknown name: lists the available ones
        self.integrator = integrator
        self.solver = None
        config = self.config
        sinfo = None
        if solver != "auto":
            sinfo = get_plugin("solver", solver)
            kinds = frozenset(str(getattr(k, "value", k)) for k in sinfo.meta.get("problems", ()))
            if config.objective is Objective.AUTO and "minimize" not in kinds and "least_squares" in kinds:
                config = dataclasses.replace(config, objective=Objective.RESIDUAL)
        self.problem: StepProblem = build_step(model, integrator, config, self.forces)
        self.implicit = self.problem.kind is not ProblemKind.EXPLICIT
        if not self.implicit:
            if solver_options:
                raise StepError(f"integrator {integrator!r} is explicit and uses no solver; drop solver_options")
            self.solver_name = None
        else:
            if sinfo is None:
                solver = "lm" if self.problem.kind is ProblemKind.MINIMIZE else "jtj_lm"
                sinfo = get_plugin("solver", solver)
            self.solver_name = solver
            try:
                self.solver = sinfo.build(**dict(solver_options or {}))
            except TypeError as exc:
                raise StepError(f"solver {solver!r}: bad options {dict(solver_options or {})}: {exc}") from None
            kinds = {getattr(k, "value", str(k)) for k in self.solver.problems}
            if self.problem.kind.value not in kinds:
                raise StepError(f"solver {solver!r} solves {', '.join(sorted(kinds))} problems, but integrator "
                                f"{integrator!r} (order {self.problem.order}, objective "
                                f"{self.problem.objective.value}) builds a {self.problem.kind.value} problem; "
                                f"use objective='residual' or another solver")
        if self.implicit and hasattr(self.solver, "prepare"):
            self.solver.prepare(self.problem)
        try:
            self.on_failure = FailurePolicy.parse(on_failure)
        except ValueError as exc:
            raise StepError(str(exc)) from None
        if isinstance(max_halvings, bool) or not isinstance(max_halvings, int) or max_halvings < 0:
            raise StepError(f"max_halvings must be a non-negative integer, got {max_halvings!r}")
        self.max_halvings = max_halvings
        if not (isinstance(max_speed, (int, float)) and max_speed > 0):
            raise StepError(f"max_speed must be a positive number, got {max_speed!r}")
        self.max_speed = float(max_speed)
        if energy_limit is not None and (isinstance(energy_limit, bool) or not isinstance(energy_limit, (int, float))
                                         or not math.isfinite(energy_limit) or energy_limit <= 0):
            raise StepError(f"energy_limit must be a positive number (percent of the energy scale) or None, "
                            f"got {energy_limit!r}")
        self.energy_limit = None if energy_limit is None else float(energy_limit)
        self.energy_checked = self.energy_limit is not None and energy_conserving(self.forces)
        self.expected_energy = expected_energy(get_plugin("integrator", integrator).meta.get("energy"),
                                               self.problem.order, self.forces)
        """What the run's energy is expected to do, in words (:func:`pbframework.verdict.expected_energy`)."""
        self.adaptive = AdaptiveOptions.parse(adaptive)
        if self.adaptive is not None:
            if self.problem.error_estimate is None or self.problem.dense is None:
                raise StepError(f"integrator {integrator!r} has no local error estimate, so it cannot take adaptive "
                                f"steps (pbad can, at every order)")
        self._input_forces = [(f, b - a) for f, (a, b) in zip(self.forces, input_slices(model, self.forces))
                              if b > a]
        self.backend = str(backend)
        self.runner = None                    # backend "casadi": this class runs the loop itself
        if self.backend != "casadi":
            self.runner = get_plugin("backend", self.backend).build(
                self.problem, self.solver_name or "lm", solver_options=dict(solver_options or {}), model=model,
                on_failure=self.on_failure.value, max_halvings=self.max_halvings,
                max_speed=self.max_speed,
                **{**dict(backend_options or {}), **({"adaptive": True} if self.adaptive is not None else {})})
        elif backend_options:
            raise StepError(f"backend 'casadi' takes no backend_options, got {dict(backend_options)}")
        self.energy_function = self._energy_function()
        self.build_time = time.perf_counter() - t_start
        self._build_time_reported = False

    # -- energies ---------------------------------------------------------------------------------------
    def _energy_function(self) -> ca.Function:
        key = ("_energy_fn", tuple(repr(f) for f in self.forces))
        fn = self.model.cache.get(key)
        if fn is None:
            q, v = ca.SX.sym("q", self.model.nq), ca.SX.sym("v", self.model.nq)
            T = 0.5 * ca.dot(v, ca.mtimes(crba(self.model)(q), v))
            V = potential_energy_function(self.model, self.forces)(q)
            fn = ca.Function("energy", [q, v], [T, V], ["q", "qd"], ["T", "V"])
            self.model.cache[key] = fn
        return fn

    def energy(self, q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Kinetic and potential energy of states given as arrays of shape (nq,) or (n, nq)."""
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
            nq = self.model.nq
            T[..., 0] = self.energy(states[..., 0, :nq], states[..., 0, nq:2 * nq])[0].reshape(T[..., 0].shape)
        return T, V

    def state_energy(self, states: np.ndarray, dt: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Reported kinetic and potential energy of integrator states (any shape ``(..., ns)``), each as
        a step's result: the problem's own kinetic energy where it has one (see :meth:`rollout_energy`)."""
        states = np.asarray(states, dtype=float)
        nq, shape = self.model.nq, states.shape[:-1]
        flat = states.reshape(-1, states.shape[-1])
        if not len(flat):
            return np.zeros(shape), np.zeros(shape)
        T, V = self.energy(flat[:, :nq], flat[:, nq:2 * nq])
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
        qd0 = np.zeros(self.model.nq) if qd0 is None else self.model.check_state(qd0, "qd0")
        T0 = float(self.energy(q0, qd0)[0][0])
        reach = sum(float(np.linalg.norm(j.origin[:3, 3])) for j in self.model.joints)
        reach += max((float(np.linalg.norm(lk.com)) for lk in self.model.links), default=0.0)
        g = float(np.linalg.norm(self.model.gravity)) if any(
            getattr(f, "name", "") == "gravity" for f in self.forces) else 0.0
        return max(T0 + self.model.total_mass * g * reach, 1e-12)

    def divergence_test(self, q0, qd0=None) -> DivergenceTest:
        """The :class:`~pbframework.verdict.DivergenceTest` of a rollout from ``(q0, qd0)``."""
        q0 = self.model.check_state(q0, "q0")
        qd0 = np.zeros(self.model.nq) if qd0 is None else self.model.check_state(qd0, "qd0")
        scale = self.divergence_scale(q0, qd0) if self.energy_checked else 0.0
        if scale < ENERGY_SCALE_FLOOR:               # no energy scale (no gravity, at rest): no energy test
            return DivergenceTest(self.model.nq, self.max_speed)
        T0, V0 = self.energy(q0, qd0)
        return DivergenceTest(self.model.nq, self.max_speed, self.energy_limit / 100.0 * scale,
                              float(T0[0] + V0[0]))

    @property
    def energy_scale(self) -> float | None:
        """DESIGN.md's CHAIN-N energy scale for chain models, else None."""
        from .models import chain_energy_scale

        return chain_energy_scale(self.model) if _CHAIN_NAME.match(self.model.name) else None

    # -- stepping --------------------------------------------------------------------------------------
    def initial_state(self, q0, qd0=None, t0: float = 0.0) -> np.ndarray:
        """The integrator's state at ``t0`` from configuration ``q0`` and velocity ``qd0`` (default 0)."""
        q0 = self.model.check_state(q0, "q0")
        qd0 = np.zeros(self.model.nq) if qd0 is None else self.model.check_state(qd0, "qd0")
        if not math.isfinite(float(t0)):
            raise StepError(f"t0 must be finite, got {t0!r}")
        return self._init(q0, qd0, float(t0), self.config.dt)

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

    def _init(self, q: np.ndarray, qd: np.ndarray, t: float, dt: float) -> np.ndarray:
        return initial_state(self.problem, q, qd, t, dt, self.inputs(t, q, qd))

    def advance(self, state: np.ndarray, t: float, dt: float | None = None) -> tuple[np.ndarray, StepStats]:
        """One step from ``state`` at time ``t`` (halving retries included); returns the next state and its
        statistics, whose ``converged`` is the verdict. Raises :class:`StepFailure` for an unconverged step
        under the ``raise`` policy."""
        dt = self.config.dt if dt is None else float(dt)
        s, st = self._step(np.asarray(state, float), float(t), dt, 0)
        if not st.converged and self.on_failure is FailurePolicy.RAISE:
            raise self._failure_error(st, float(t), dt)
        return s, st

    def _solve(self, s: np.ndarray, t: float, dt: float) -> tuple[np.ndarray, StepStats]:
        pb = self.problem
        nq = self.model.nq
        p = np.asarray(pb.params(s, t, dt, self.inputs(t, s[:nq], s[nq:2 * nq]))).ravel()
        if not self.implicit:
            return np.asarray(pb.advance(np.zeros(0), p)).ravel(), StepStats()
        x0 = np.asarray(pb.guess(p)).ravel()
        res: SolveResult = self.runner.solve(x0, p) if self.runner is not None else self.solver.solve(pb, x0, p)
        s_next = np.asarray(pb.advance(res.x, p)).ravel()
        return s_next, StepStats(res.iterations, res.grad_norm, bool(res.converged), 0, res.evaluations, 0,
                                 res.residual(pb.kind), str(res.reason))

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
        return self._restart(s2, half, 2.0), total

    def _failure_error(self, stats: StepStats, t: float, dt: float) -> StepFailure:
        return StepFailure(f"{self.integrator}/{self.solver_name}: step at t={t:.6g} s (dt={dt:.6g}) did not converge "
                           f"after {stats.halvings} halvings ({stats.iterations} iterations, residual "
                           f"{stats.residual:.3g}, backend {self.backend!r})")

    def _restart(self, s: np.ndarray, dt: float, ratio: float) -> np.ndarray:
        """The state re-expressed for a step ``ratio`` times ``dt`` (:func:`pbframework.step.restart_state`)."""
        return restart_state(self.problem, s, dt, ratio)

    # -- rollout ---------------------------------------------------------------------------------------
    def steps_for(self, duration: float | None, steps: int | None, dt: float | None = None) -> int:
        """The number of steps of a rollout given ``duration`` (seconds, rounded up to whole steps) or
        ``steps``."""
        dt = self.config.dt if dt is None else dt
        if steps is None:
            if duration is None:
                raise StepError("rollout: give duration (seconds) or steps")
            try:
                duration = float(duration)
            except (TypeError, ValueError):
                raise StepError(f"duration must be a positive number of seconds, got {duration!r}") from None
            if not math.isfinite(duration) or duration <= 0:
                raise StepError(f"duration must be a positive finite number of seconds, got {duration!r}")
            return max(1, int(math.ceil(duration / dt - 1e-9)))
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
            raise StepError(f"steps must be a positive integer, got {steps!r}")
        return int(steps)

    def rollout(self, q0, qd0=None, duration: float | None = None, *, steps: int | None = None,
                t0: float = 0.0, progress: bool = False) -> Trajectory:
        """Simulate from ``(q0, qd0)`` for ``duration`` seconds (or ``steps`` steps).

        Args:
            q0, qd0: initial configuration and velocity, numpy arrays of length ``model.nq`` (qd0 default 0).
            duration: simulated time in seconds (rounded up to whole steps).
            steps: number of steps instead of ``duration``.
            t0: initial time.
            progress: show a tqdm progress bar (on stderr).

        Returns:
            A :class:`~pbframework.result.Trajectory` whose ``status`` says how the run ended (``ok``,
            ``unconverged``, ``diverged``; :mod:`pbframework.verdict`) and ``failure_time`` when the first
            failure happened. A diverged run ends before the state that failed the divergence test; an
            unconverged step ends the run under the ``stop`` policy (everything before it kept, its
            statistics in ``info["failure"]``) and is recorded in ``stats["outcome"]`` under ``continue``.
            Unconverged steps are also reported by a ``RuntimeWarning``.

        Raises:
            StepFailure: an unconverged step under the ``raise`` policy.
        """
        steps = self.steps_for(duration, steps)
        q0 = self.model.check_state(q0, "q0")
        qd0 = np.zeros(self.model.nq) if qd0 is None else self.model.check_state(qd0, "qd0")
        test = self.divergence_test(q0, qd0)
        with single_threaded_blas():
            if self.adaptive is not None:
                bar = self._bar(steps, progress)
                try:
                    return rollout_adaptive(self, self.adaptive, q0, qd0, float(t0), steps, test, bar)
                finally:
                    if bar is not None:
                        bar.close()
            if self.runner is not None and not self._input_forces:
                return self._rollout_native(q0, qd0, float(t0), steps, progress, test)
            s = self.initial_state(q0, qd0, t0)
            if not self.implicit and not self._input_forces:
                return self._rollout_explicit(s, float(t0), steps, progress, test)
            return self._rollout_python(s, float(t0), steps, progress, test)

    def _bar(self, steps: int, progress: bool):
        if not progress:
            return None
        from tqdm import tqdm

        label = self.integrator + (f" ({self.backend})" if self.backend != "casadi" else "")
        return tqdm(total=steps, unit="step", desc=label, leave=False, file=sys.stderr,
                    disable=not sys.stderr.isatty())

    def _energy_of(self, states: np.ndarray, test: DivergenceTest) -> np.ndarray | None:
        """Total energies of step results where the divergence test needs them, else None."""
        if test.energy_limit is None:
            return None
        T, V = self.state_energy(states)
        return T + V

    def _rollout_python(self, s: np.ndarray, t0: float, steps: int, progress: bool,
                        test: DivergenceTest) -> Trajectory:
        """The step loop in Python (the ``casadi`` backend, or force models with per-step Python inputs)."""
        dt = self.config.dt
        ts, S = [t0], [s.copy()]
        cols: dict[str, list] = {k: [] for k in STEP_COLUMNS}
        end = _End()
        bar = self._bar(steps, progress)
        t_loop = time.perf_counter()
        try:
            for k in range(steps):
                t = t0 + k * dt
                t_step = time.perf_counter()
                s_new, st = self._step(s, t, dt, 0)
                elapsed = time.perf_counter() - t_step
                if not st.converged:
                    if self.on_failure is FailurePolicy.RAISE:
                        raise self._failure_error(st, t, dt)
                    if self.on_failure is FailurePolicy.STOP:
                        end.failure = st.as_dict(t, dt)
                        break
                i, why = test.first_bad(s_new[None, :], self._energy_of(s_new[None, :], test))
                if i is not None:
                    end.diverged(t0 + (k + 1) * dt, why)
                    break
                ts.append(t0 + (k + 1) * dt)
                S.append(s_new.copy())
                for name in STEP_COLUMNS[:-1]:
                    cols[name].append(getattr(st, name))
                cols["step_time"].append(elapsed)
                s = s_new
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        wall = time.perf_counter() - t_loop
        return self._trajectory(np.array(ts), np.array(S), _columns(cols), wall, end, t0)

    def _rollout_native(self, q0, qd0, t0: float, steps: int, progress: bool,
                        test: DivergenceTest) -> Trajectory:
        """The whole rollout in native calls of the backend's runner (``step_time`` is the mean of a call).

        One call, or, with a progress bar or the energy test, about :data:`PROGRESS_PIECES` calls that each
        continue from the last state (identical results): the bar moves and the energy test runs between
        them, and a rollout the test ends stops within a piece of it.
        """
        dt = self.config.dt
        per = max(1, -(-steps // PROGRESS_PIECES)) if (progress or test.energy_limit is not None) else steps
        bar = self._bar(steps, progress)
        pieces, state, k = [], None, 0
        end = _End()
        try:
            while True:
                out = self.runner.rollout(q0, qd0, t0, dt, min(per, steps - k), state=state, first_step=k)
                new = out.states[1:]
                i, why = test.first_bad(new, self._energy_of(new, test))
                if i is not None:           # the energy test (the runner applies the others itself)
                    out = _cut(out, i)
                    end.diverged(t0 + (k + i + 1) * dt, why)
                elif out.status == "diverged":
                    end.diverged(t0 + (k + out.steps_done + 1) * dt, "non_finite_or_speed")
                elif out.status == "failed":
                    t_fail = t0 + (k + out.steps_done) * dt
                    stats = StepStats(**{n: out.failure[n] for n in ("iterations", "grad_norm", "converged",
                                                                      "halvings", "evaluations", "depth",
                                                                      "residual", "reason")})
                    if self.on_failure is FailurePolicy.RAISE:
                        raise self._failure_error(stats, t_fail, dt)
                    end.failure = stats.as_dict(t_fail, dt)
                pieces.append(out)
                k += out.steps_done
                if bar is not None:
                    bar.update(out.steps_done)
                if end.status is not Status.OK or out.status != "done" or k >= steps:
                    break
                state = out.states[-1]
        finally:
            if bar is not None:
                bar.close()
        wall = sum(p.wall_time for p in pieces)
        states = np.concatenate([pieces[0].states] + [p.states[1:] for p in pieces[1:]])
        stats = {name: np.concatenate([getattr(p, name) for p in pieces]) for name in STEP_COLUMNS[:-1]
                 if name != "reason"}
        stats["step_time"] = np.concatenate([np.full(p.steps_done, p.wall_time / max(p.steps_done, 1))
                                             for p in pieces])
        return self._trajectory(t0 + np.arange(k + 1) * dt, states, stats, wall, end, t0)

    def rollout_batch(self, Q0, QD0=None, duration: float | None = None, *, steps: int | None = None,
                      t0: float = 0.0, threads: int | None = None) -> BatchTrajectory:
        """M rollouts of the same length from the rows of ``Q0`` (and ``QD0``), all at once.

        On the ``c`` backend one native call runs them on ``threads`` threads (default: all cores; each
        trajectory equals its single :meth:`rollout` exactly); other backends, and force models with
        per-step Python inputs, run them one after the other. Each trajectory has its own status
        (``batch.status``), decided as in :meth:`rollout`.

        Args:
            Q0: initial configurations, shape (M, nq).
            QD0: initial velocities, shape (M, nq) (default zeros).
            duration, steps, t0: as :meth:`rollout`.
            threads: native threads (``c`` backend).

        Returns:
            A :class:`~pbframework.result.BatchTrajectory`.

        Raises:
            StepFailure: an unconverged step under the ``raise`` policy.
        """
        dt, nq = self.config.dt, self.model.nq
        Q0 = np.atleast_2d(np.asarray(Q0, dtype=float))
        if Q0.ndim != 2 or Q0.shape[1] != nq:
            raise StepError(f"Q0 must be an (M, {nq}) array of initial configurations, got shape {Q0.shape}")
        QD0 = np.zeros_like(Q0) if QD0 is None else np.atleast_2d(np.asarray(QD0, dtype=float))
        if QD0.shape != Q0.shape:
            raise StepError(f"QD0 must have the shape of Q0 {Q0.shape}, got {QD0.shape}")
        if not (np.all(np.isfinite(Q0)) and np.all(np.isfinite(QD0))):
            raise StepError("Q0 and QD0 must be finite")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, (int, np.integer))
                                    or threads < 1):
            raise StepError(f"threads must be a positive integer, got {threads!r}")
        steps = self.steps_for(duration, steps)
        M, t0 = Q0.shape[0], float(t0)
        names = ("iterations", "grad_norm", "converged", "halvings", "evaluations", "depth", "residual")
        status = np.full(M, Status.OK.value, dtype=object)
        failure_time = np.full(M, np.nan)
        if self.runner is not None and not self._input_forces and hasattr(self.runner, "rollout_batch"):
            with single_threaded_blas():
                out = self.runner.rollout_batch(Q0, QD0, t0, dt, steps, threads=threads)
            states, done, wall, nth = out.states, out.steps_done.copy(), out.wall_time, out.threads
            failed = out.status == "failed"
            if failed.any() and self.on_failure is FailurePolicy.RAISE:
                m = int(np.argmax(failed))
                raise StepFailure(f"{self.integrator}/{self.solver_name}: trajectory {m}: step at "
                                  f"t={t0 + int(done[m]) * dt:.6g} s did not converge after its halvings "
                                  f"(backend {self.backend!r})")
            stats = {k: getattr(out, k) for k in names}
            status[failed] = Status.UNCONVERGED.value
            failure_time[failed] = t0 + done[failed] * dt
            div = out.status == "diverged"
            status[div] = Status.DIVERGED.value
            failure_time[div] = t0 + (done[div] + 1) * dt
            for m in range(M):            # the energy test, after the native call
                test = self.divergence_test(Q0[m], QD0[m])
                k = int(done[m])
                new = states[m, 1:k + 1]
                i, _ = test.first_bad(new, self._energy_of(new, test))
                if i is not None:
                    done[m], status[m], failure_time[m] = i, Status.DIVERGED.value, t0 + (i + 1) * dt
                    states[m, i + 1:] = states[m, i]
                    for name in names:
                        stats[name][m, i:] = 0
            T, V = self.rollout_energy(states)
        else:
            t_start = time.perf_counter()
            trajs = [self.rollout(Q0[m], QD0[m], steps=steps, t0=t0) for m in range(M)]
            wall, nth = time.perf_counter() - t_start, 1
            states = np.zeros((M, steps + 1, self.problem.ns))
            T, V = np.zeros((M, steps + 1)), np.zeros((M, steps + 1))
            done = np.array([tr.steps for tr in trajs], dtype=np.int64)
            stats = {k: np.zeros((M, steps), dtype=trajs[0].stats[k].dtype) for k in names}
            for m, tr in enumerate(trajs):
                k = tr.steps
                states[m, :k + 1, :nq], states[m, :k + 1, nq:2 * nq] = tr.q, tr.qd
                states[m, k + 1:] = states[m, k]
                T[m, :k + 1], V[m, :k + 1] = tr.kinetic, tr.potential
                T[m, k + 1:], V[m, k + 1:] = tr.kinetic[-1], tr.potential[-1]
                for name in names:
                    stats[name][m, :k] = tr.stats[name]
                status[m] = tr.status.value
                failure_time[m] = np.nan if tr.failure_time is None else tr.failure_time
        unconverged_steps = np.array([(~stats["converged"][m, :done[m]]).any() for m in range(M)], bool)
        for m in np.nonzero(unconverged_steps & (status == Status.OK.value))[0]:
            status[m] = Status.UNCONVERGED.value
            failure_time[m] = t0 + int(np.argmax(~stats["converged"][m, :done[m]])) * dt
        stats["outcome"] = outcomes(stats["converged"], stats["halvings"])
        if np.any(status == Status.UNCONVERGED.value):
            warnings.warn(f"{self.integrator}/{self.solver_name}: {int(np.sum(status == 'unconverged'))} of {M} "
                          f"trajectories ended unconverged (see batch.status)", RuntimeWarning, stacklevel=2)
        pb = self.problem
        info = {"model": self.model.name, "nq": nq, "dof_names": list(self.model.dof_names),
                "integrator": self.integrator, "order": pb.order,
                "objective": pb.objective.value if pb.objective else None, "kind": pb.kind.value,
                "implicit": self.implicit, "solver": self.solver_name, "dt": dt, "t0": t0,
                "forces": list(pb.forces), "energy_scale": self.energy_scale, "backend": self.backend,
                "batch": M, "threads": nth, "velocity": pb.velocity, "start": pb.start,
                "on_failure": self.on_failure.value, "max_halvings": self.max_halvings,
                "energy_limit": self.energy_limit if self.energy_checked else None}
        build_time = 0.0 if self._build_time_reported else self.build_time
        self._build_time_reported = True
        return BatchTrajectory(t=t0 + np.arange(steps + 1) * dt, q=states[:, :, :nq], qd=states[:, :, nq:2 * nq],
                               kinetic=T, potential=V, energy=T + V, stats=stats, steps_done=np.asarray(done),
                               diverged=status == Status.DIVERGED.value, wall_time=wall, build_time=build_time,
                               info=info, status=status.astype(str), failure_time=failure_time)

    CHUNK = 2000
    """Steps per call of the compiled multi-step function of explicit integrators."""

    def _multi_step(self, n: int) -> ca.Function:
        key = ("_multistep", id(self.problem), n)
        fn = self.model.cache.get(key)
        if fn is None:
            pb = self.problem
            s, t, dt = ca.SX.sym("s", pb.ns), ca.SX.sym("t"), ca.SX.sym("dt")
            one = ca.Function("one", [s, t, dt], [pb.advance(ca.SX(0, 1), pb.params(s, t, dt, ca.SX(0, 1)))])
            fn = one.mapaccum("steps", n)
            self.model.cache[key] = fn
        return fn

    def _rollout_explicit(self, s: np.ndarray, t0: float, steps: int, progress: bool,
                          test: DivergenceTest) -> Trajectory:
        """Explicit integrators without per-step inputs: many steps per call (``casadi.Function.mapaccum``)."""
        dt = self.config.dt
        states = [s[None, :]]
        done, end = 0, _End()
        bar = self._bar(steps, progress)
        t_loop = time.perf_counter()
        try:
            while done < steps:
                n = min(self.CHUNK, steps - done)
                times = t0 + (done + np.arange(n)) * dt
                out = np.asarray(self._multi_step(n)(s, times[None, :], dt)).T      # (n, ns)
                i, why = test.first_bad(out, self._energy_of(out, test))
                if i is not None:
                    states.append(out[:i])
                    done += i
                    end.diverged(t0 + (done + 1) * dt, why)
                    break
                states.append(out)
                s = out[-1]
                done += n
                if bar is not None:
                    bar.update(n)
        finally:
            if bar is not None:
                bar.close()
        wall = time.perf_counter() - t_loop
        X = np.concatenate(states, axis=0)
        stats = {"iterations": np.zeros(done, np.int64), "grad_norm": np.zeros(done),
                 "converged": np.ones(done, bool), "halvings": np.zeros(done, np.int64),
                 "evaluations": np.ones(done, np.int64), "depth": np.zeros(done, np.int64),
                 "residual": np.zeros(done), "step_time": np.full(done, wall / max(done, 1))}
        return self._trajectory(t0 + np.arange(done + 1) * dt, X, stats, wall, end, t0)

    def _trajectory(self, t, states, stats, wall, end: "_End", t0, adaptive: dict | None = None) -> Trajectory:
        nq, dt = self.model.nq, self.config.dt
        q_arr, qd_arr = states[:, :nq], states[:, nq:2 * nq]
        if adaptive is None:
            T, V = self.rollout_energy(states)
        else:             # dense output [q; qd]: no history node, the exact kinetic energy
            T, V = self.energy(q_arr, qd_arr) if len(states) else (np.zeros(0), np.zeros(0))
        stats["outcome"] = outcomes(stats["converged"], stats["halvings"])
        unconverged = ~np.asarray(stats["converged"], bool)
        n_bad = int(unconverged.sum())
        status, failure_time = end.status, end.time
        if status is Status.OK and n_bad:
            status = Status.UNCONVERGED
        if unconverged.any():         # the first failure: an unconverged step kept under "continue"
            first = float(t[int(np.argmax(unconverged))])
            failure_time = first if failure_time is None else min(failure_time, first)
        if n_bad or end.failure is not None:
            what = (f"{n_bad} of {len(unconverged)} steps did not converge (see traj.stats['outcome'])" if n_bad else
                    f"the step at t={end.failure['t']:.6g} s did not converge after {end.failure['halvings']} "
                    f"halvings; the run stopped there (on_failure='stop')")
            warnings.warn(f"{self.integrator}/{self.solver_name}: {what}", RuntimeWarning, stacklevel=3)
        pb = self.problem
        info = {
            "model": self.model.name, "nq": nq, "dof_names": list(self.model.dof_names),
            "integrator": self.integrator, "order": pb.order,
            "objective": pb.objective.value if pb.objective else None, "kind": pb.kind.value,
            "implicit": self.implicit, "solver": self.solver_name,
            "solver_options": repr(self.solver.options) if self.solver is not None else None,
            "dt": dt, "t0": float(t0), "forces": list(pb.forces), "fd": self.config.fd,
            "energy_scale": self.energy_scale, "status": status.value, "failure_time": failure_time,
            "diverged": status is Status.DIVERGED, "diverged_at": end.time if status is Status.DIVERGED else None,
            "divergence": end.reason, "failure": end.failure,
            "on_failure": self.on_failure.value, "max_halvings": self.max_halvings,
            "energy_limit": self.energy_limit if self.energy_checked else None,
            "velocity": pb.velocity, "start": pb.start, "unconverged_steps": n_bad,
            "backend": self.backend, "adaptive": adaptive,
            "expected_energy": self.expected_energy,
        }
        build_time = 0.0 if self._build_time_reported else self.build_time
        self._build_time_reported = True
        return Trajectory(t=np.asarray(t, float), q=q_arr, qd=qd_arr, kinetic=T, potential=V, energy=T + V,
                          stats=stats, wall_time=wall, build_time=build_time, info=info)

    def __repr__(self) -> str:
        return (f"Simulator({self.model.name!r}, {self.problem.describe()}, dt={self.config.dt}"
                + (f", solver={self.solver_name!r}" if self.implicit else "") + ")")


STEP_COLUMNS = ("iterations", "grad_norm", "converged", "halvings", "evaluations", "depth", "residual", "reason",
                "step_time")
"""Per-step statistics the Python loop records (``reason`` is kept out of the trajectory's ``stats``)."""

_DTYPES = {"iterations": np.int64, "grad_norm": float, "converged": bool, "halvings": np.int64,
           "evaluations": np.int64, "depth": np.int64, "residual": float, "step_time": float}


def _columns(cols: dict[str, list]) -> dict[str, np.ndarray]:
    return {name: np.array(cols[name], dtype=dtype) for name, dtype in _DTYPES.items()}


def _cut(out, i: int):
    """A native rollout's arrays cut to its first ``i`` steps (the state after step ``i`` failed a test)."""
    return dataclasses.replace(
        out, states=out.states[:i + 1], steps_done=i, status="diverged",
        **{n: getattr(out, n)[:i] for n in ("iterations", "converged", "halvings", "evaluations", "reason",
                                             "grad_norm", "depth", "residual")})


class _End:
    """How a rollout loop ended: diverged (time, reason), stopped at an unconverged step, or not at all."""

    def __init__(self) -> None:
        self.status, self.time, self.reason = Status.OK, None, None
        self._failure: dict | None = None

    def diverged(self, t: float, reason: str) -> None:
        self.status, self.time, self.reason = Status.DIVERGED, float(t), reason

    @property
    def failure(self) -> dict | None:
        return self._failure

    @failure.setter
    def failure(self, stats: dict) -> None:
        self.status, self.time, self._failure = Status.UNCONVERGED, float(stats["t"]), stats


@contextlib.contextmanager
def single_threaded_blas():
    """BLAS and OpenMP pools limited to one thread while a rollout runs (threadpoolctl): the dense algebra of
    one step is small, threads only add overhead, and parallelism comes from batching trajectories."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield
