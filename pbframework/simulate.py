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

import dataclasses
import enum
import math
import re
import time
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import casadi as ca
import numpy as np

from .dynamics import crba
from .forces import potential_energy_function
from .model import ArticulatedBody
from .result import BatchTrajectory, Trajectory
from .step import (
    Objective, ProblemKind, SolveResult, StepConfig, StepError, StepProblem, build_step, initial_state,
    input_slices, integrator_info, resolve_forces, restart_state,
)


class FailurePolicy(str, enum.Enum):
    """What a :class:`Simulator` does when the solver does not converge within its iteration limit.

    Attributes:
        HALVE: retry the step as two half steps (recursively, up to ``max_halvings`` levels; seed 001
            Alg. 2's subdivision idea), the state re-expressed for the shorter step without dynamics and
            without gaining kinetic energy; if the deepest level still fails, keep its result, record it as
            unconverged in the statistics and warn at the end of the rollout.
        RECORD: keep the unconverged result, record it, warn at the end of the rollout.
        RAISE: raise :class:`StepFailure`.
    """

    HALVE = "halve"
    RECORD = "record"
    RAISE = "raise"


class StepFailure(RuntimeError):
    """The solver did not converge on a step and the failure policy is ``raise``."""


@dataclass
class StepStats:
    """Statistics of one step (summed over half-step retries)."""

    iterations: int = 0
    grad_norm: float = 0.0
    converged: bool = True
    halvings: int = 0
    evaluations: int = 0

    def add(self, other: "StepStats") -> None:
        self.iterations += other.iterations
        self.grad_norm = max(self.grad_norm, other.grad_norm)
        self.converged = self.converged and other.converged
        self.halvings += other.halvings
        self.evaluations += other.evaluations


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
        objective: ``"auto"``, ``"energy"`` or ``"residual"`` (:class:`~pbframework.step.Objective`);
            ``"auto"`` picks the residual form when the solver only takes least-squares problems.
        precondition: weight residual objectives by the inverse mass matrix (see
            :class:`~pbframework.step.StepConfig`); ``False`` = the literal Eq. 7.
        fd: forward-dynamics plug-in for Newton-Euler integrators and the PBAD start (default ``"aba"``).
        solver_options: options of the solver (e.g. ``{"max_iter": 50, "gtol": 1e-9}``).
        on_failure: a :class:`FailurePolicy` (``"halve"``, ``"record"``, ``"raise"``).
        max_halvings: retry depth of the ``halve`` policy.
        max_speed: a rollout stops as diverged when any |qd| exceeds this (rad/s or m/s) or a state
            becomes non-finite.
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
                 on_failure: FailurePolicy | str = FailurePolicy.HALVE, max_halvings: int = 4,
                 max_speed: float = 1e4, backend: str = "casadi",
                 backend_options: Mapping[str, Any] | None = None) -> None:
        from .registry import get_plugin

        if not isinstance(model, ArticulatedBody):
            raise StepError(f"model must be an ArticulatedBody, got {type(model).__name__}")
        t_start = time.perf_counter()
        self.model = model
        self.config = StepConfig(dt=dt, order=order, objective=objective, fd=fd, precondition=precondition)
        self.forces = resolve_forces(forces)
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
        self.on_failure = FailurePolicy(on_failure) if not isinstance(on_failure, FailurePolicy) else on_failure
        if isinstance(max_halvings, bool) or not isinstance(max_halvings, int) or max_halvings < 0:
            raise StepError(f"max_halvings must be a non-negative integer, got {max_halvings!r}")
        self.max_halvings = max_halvings
        if not (isinstance(max_speed, (int, float)) and max_speed > 0):
            raise StepError(f"max_speed must be a positive number, got {max_speed!r}")
        self.max_speed = float(max_speed)
        self._input_forces = [(f, b - a) for f, (a, b) in zip(self.forces, input_slices(model, self.forces))
                              if b > a]
        self.backend = str(backend)
        self.runner = None                    # backend "casadi": this class runs the loop itself
        if self.backend != "casadi":
            self.runner = get_plugin("backend", self.backend).build(
                self.problem, self.solver_name or "lm", solver_options=dict(solver_options or {}), model=model,
                on_failure=self.on_failure.value, max_halvings=self.max_halvings,
                max_speed=self.max_speed, **dict(backend_options or {}))
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
        states = np.asarray(states, dtype=float)
        nq, shape = self.model.nq, states.shape[:-1]
        flat = states.reshape(-1, states.shape[-1])
        T, V = self.energy(flat[:, :nq], flat[:, nq:2 * nq])
        T, V = T.reshape(shape), V.reshape(shape)
        if self.problem.kinetic is not None:
            step = self.config.dt if dt is None else float(dt)
            chord = np.asarray(self.problem.kinetic.map(len(flat))(flat.T, step)).reshape(shape)
            chord[..., 0] = T[..., 0]
            T = chord
        return T, V

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
        """One step from ``state`` at time ``t``; returns the next state and its statistics."""
        return self._step(np.asarray(state, float), float(t), self.config.dt if dt is None else float(dt), 0)

    def _solve(self, s: np.ndarray, t: float, dt: float) -> tuple[np.ndarray, StepStats]:
        pb = self.problem
        nq = self.model.nq
        p = np.asarray(pb.params(s, t, dt, self.inputs(t, s[:nq], s[nq:2 * nq]))).ravel()
        if not self.implicit:
            return np.asarray(pb.advance(np.zeros(0), p)).ravel(), StepStats()
        x0 = np.asarray(pb.guess(p)).ravel()
        res: SolveResult = self.runner.solve(x0, p) if self.runner is not None else self.solver.solve(pb, x0, p)
        s_next = np.asarray(pb.advance(res.x, p)).ravel()
        return s_next, StepStats(res.iterations, res.grad_norm, bool(res.converged), 0, res.evaluations)

    def _step(self, s: np.ndarray, t: float, dt: float, depth: int) -> tuple[np.ndarray, StepStats]:
        s_next, stats = self._solve(s, t, dt)
        if stats.converged:
            return s_next, stats
        if self.on_failure is FailurePolicy.RAISE:
            raise StepFailure(f"{self.integrator}/{self.solver_name}: step at t={t:.6g} s (dt={dt:.6g}) did not "
                              f"converge in {stats.iterations} iterations (final gradient norm "
                              f"{stats.grad_norm:.3g})")
        if self.on_failure is FailurePolicy.RECORD or depth >= self.max_halvings:
            return s_next, stats
        # retry as two half steps (the state re-expressed for dt/2 without dynamics), then back to dt
        half = dt / 2.0
        total = StepStats(stats.iterations, 0.0, True, 1, stats.evaluations)
        s1, st1 = self._step(self._restart(s, dt, 0.5), t, half, depth + 1)
        total.add(st1)
        s2, st2 = self._step(s1, t + half, half, depth + 1)
        total.add(st2)
        return self._restart(s2, half, 2.0), total

    def _restart(self, s: np.ndarray, dt: float, ratio: float) -> np.ndarray:
        """The state re-expressed for a step ``ratio`` times ``dt`` (:func:`pbframework.step.restart_state`)."""
        return restart_state(self.problem, s, dt, ratio)

    # -- rollout ---------------------------------------------------------------------------------------
    def rollout(self, q0, qd0=None, duration: float | None = None, *, steps: int | None = None,
                t0: float = 0.0, progress: bool = False) -> Trajectory:
        """Simulate from ``(q0, qd0)`` for ``duration`` seconds (or ``steps`` steps).

        Args:
            q0, qd0: initial configuration and velocity, numpy arrays of length ``model.nq`` (qd0 default 0).
            duration: simulated time in seconds (rounded up to whole steps).
            steps: number of steps instead of ``duration``.
            t0: initial time.
            progress: show a tqdm progress bar.

        Returns:
            A :class:`~pbframework.result.Trajectory`. A diverged rollout (non-finite state or a speed
            above ``max_speed``) ends early with ``info["diverged"] = True``. Unconverged steps are
            recorded in ``stats["converged"]`` and reported by a ``RuntimeWarning``.
        """
        dt = self.config.dt
        if steps is None:
            if duration is None:
                raise StepError("rollout: give duration (seconds) or steps")
            try:
                duration = float(duration)
            except (TypeError, ValueError):
                raise StepError(f"duration must be a positive number of seconds, got {duration!r}") from None
            if not math.isfinite(duration) or duration <= 0:
                raise StepError(f"duration must be a positive finite number of seconds, got {duration!r}")
            steps = max(1, int(math.ceil(duration / dt - 1e-9)))
        elif isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
            raise StepError(f"steps must be a positive integer, got {steps!r}")
        nq = self.model.nq
        s = self.initial_state(q0, qd0, t0)
        if self.runner is not None and not self._input_forces:
            return self._rollout_native(q0, qd0, float(t0), steps, progress)
        if not self.implicit and not self._input_forces:
            return self._rollout_explicit(s, float(t0), steps, progress)
        ts = [float(t0)]
        S = [s.copy()]
        cols = {k: [] for k in ("iterations", "grad_norm", "converged", "halvings", "evaluations", "step_time")}
        diverged, diverged_at = False, None
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=steps, unit="step", desc=f"{self.integrator}", leave=False)
        t = float(t0)
        t_loop = time.perf_counter()
        try:
            for k in range(steps):
                t_step = time.perf_counter()
                s, st = self._step(s, t, dt, 0)
                elapsed = time.perf_counter() - t_step
                t = float(t0) + (k + 1) * dt
                if not np.all(np.isfinite(s[:2 * nq])) or np.max(np.abs(s[nq:2 * nq])) > self.max_speed:
                    diverged, diverged_at = True, t
                    break
                ts.append(t)
                S.append(s.copy())
                for name, val in (("iterations", st.iterations), ("grad_norm", st.grad_norm),
                                  ("converged", st.converged), ("halvings", st.halvings),
                                  ("evaluations", st.evaluations), ("step_time", elapsed)):
                    cols[name].append(val)
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        wall = time.perf_counter() - t_loop
        stats = {"iterations": np.array(cols["iterations"], dtype=np.int64),
                 "grad_norm": np.array(cols["grad_norm"], dtype=float),
                 "converged": np.array(cols["converged"], dtype=bool),
                 "halvings": np.array(cols["halvings"], dtype=np.int64),
                 "evaluations": np.array(cols["evaluations"], dtype=np.int64),
                 "step_time": np.array(cols["step_time"], dtype=float)}
        return self._trajectory(np.array(ts), np.array(S), stats, wall, diverged, diverged_at, float(t0))

    def _rollout_native(self, q0, qd0, t0: float, steps: int, progress: bool = False) -> Trajectory:
        """The whole rollout in native calls of the backend's runner (``step_time`` is the mean of a call).

        One call without ``progress``; with it, about :data:`PROGRESS_PIECES` calls that each continue from the
        last state (identical results), updating the progress bar between them.
        """
        nq, dt = self.model.nq, self.config.dt
        q0 = self.model.check_state(q0, "q0")
        qd0 = np.zeros(nq) if qd0 is None else self.model.check_state(qd0, "qd0")
        per = max(1, -(-steps // PROGRESS_PIECES)) if progress else steps
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=steps, unit="step", desc=f"{self.integrator} ({self.backend})", leave=False)
        pieces, state, k = [], None, 0
        try:
            while True:
                out = self.runner.rollout(q0, qd0, t0, dt, min(per, steps - k), state=state, first_step=k)
                pieces.append(out)
                k += out.steps_done
                if bar is not None:
                    bar.update(out.steps_done)
                if out.status != "done" or k >= steps:
                    break
                state = out.states[-1]
        finally:
            if bar is not None:
                bar.close()
        if out.status == "failed":
            raise StepFailure(f"{self.integrator}/{self.solver_name}: step at t={t0 + k * dt:.6g} s (dt={dt:.6g}) "
                              f"did not converge (backend {self.backend!r})")
        diverged = out.status == "diverged"
        wall = sum(p.wall_time for p in pieces)
        states = np.concatenate([pieces[0].states] + [p.states[1:] for p in pieces[1:]])
        stats = {name: np.concatenate([getattr(p, name) for p in pieces])
                 for name in ("iterations", "grad_norm", "converged", "halvings", "evaluations")}
        stats["step_time"] = np.concatenate([np.full(p.steps_done, p.wall_time / max(p.steps_done, 1))
                                             for p in pieces])
        return self._trajectory(t0 + np.arange(k + 1) * dt, states, stats, wall, diverged,
                                t0 + (k + 1) * dt if diverged else None, t0)

    def rollout_batch(self, Q0, QD0=None, duration: float | None = None, *, steps: int | None = None,
                      t0: float = 0.0, threads: int | None = None) -> BatchTrajectory:
        """M rollouts of the same length from the rows of ``Q0`` (and ``QD0``), all at once.

        On the ``c`` backend one native call runs them on ``threads`` threads (default: all cores; each
        trajectory equals its single :meth:`rollout` exactly); other backends, and force models with
        per-step Python inputs, run them one after the other.

        Args:
            Q0: initial configurations, shape (M, nq).
            QD0: initial velocities, shape (M, nq) (default zeros).
            duration, steps, t0: as :meth:`rollout`.
            threads: native threads (``c`` backend).

        Returns:
            A :class:`~pbframework.result.BatchTrajectory`.
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
        if steps is None:
            if duration is None:
                raise StepError("rollout_batch: give duration (seconds) or steps")
            duration = float(duration)
            if not math.isfinite(duration) or duration <= 0:
                raise StepError(f"duration must be a positive finite number of seconds, got {duration!r}")
            steps = max(1, int(math.ceil(duration / dt - 1e-9)))
        elif isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
            raise StepError(f"steps must be a positive integer, got {steps!r}")
        M, t0 = Q0.shape[0], float(t0)
        names = ("iterations", "grad_norm", "converged", "halvings", "evaluations")
        if self.runner is not None and not self._input_forces and hasattr(self.runner, "rollout_batch"):
            out = self.runner.rollout_batch(Q0, QD0, t0, dt, steps, threads=threads)
            states, done, wall, nth = out.states, out.steps_done, out.wall_time, out.threads
            if np.any(out.status == "failed"):
                m = int(np.argmax(out.status == "failed"))
                raise StepFailure(f"{self.integrator}/{self.solver_name}: trajectory {m}: step at "
                                  f"t={t0 + int(done[m]) * dt:.6g} s did not converge (backend {self.backend!r})")
            diverged = out.status == "diverged"
            stats = {k: getattr(out, k) for k in names}
            T, V = self.rollout_energy(states)
        else:
            t_start = time.perf_counter()
            trajs = [self.rollout(Q0[m], QD0[m], steps=steps, t0=t0) for m in range(M)]
            wall, nth = time.perf_counter() - t_start, 1
            states = np.zeros((M, steps + 1, self.problem.ns))
            T, V = np.zeros((M, steps + 1)), np.zeros((M, steps + 1))
            done = np.array([tr.steps for tr in trajs], dtype=np.int64)
            diverged = np.array([tr.diverged for tr in trajs], dtype=bool)
            stats = {k: np.zeros((M, steps), dtype=trajs[0].stats[k].dtype) for k in names}
            for m, tr in enumerate(trajs):
                k = tr.steps
                states[m, :k + 1, :nq], states[m, :k + 1, nq:2 * nq] = tr.q, tr.qd
                states[m, k + 1:] = states[m, k]
                T[m, :k + 1], V[m, :k + 1] = tr.kinetic, tr.potential
                T[m, k + 1:], V[m, k + 1:] = tr.kinetic[-1], tr.potential[-1]
                for name in names:
                    stats[name][m, :k] = tr.stats[name]
        n_bad = int(sum((~stats["converged"][m, :done[m]]).sum() for m in range(M)))
        if n_bad:
            warnings.warn(f"{self.integrator}/{self.solver_name}: {n_bad} steps of the batch did not converge "
                          f"(see batch.stats['converged'])", RuntimeWarning, stacklevel=2)
        pb = self.problem
        info = {"model": self.model.name, "nq": nq, "dof_names": list(self.model.dof_names),
                "integrator": self.integrator, "order": pb.order,
                "objective": pb.objective.value if pb.objective else None, "kind": pb.kind.value,
                "implicit": self.implicit, "solver": self.solver_name, "dt": dt, "t0": t0,
                "forces": list(pb.forces), "energy_scale": self.energy_scale, "backend": self.backend,
                "batch": M, "threads": nth, "velocity": pb.velocity, "start": pb.start}
        build_time = 0.0 if self._build_time_reported else self.build_time
        self._build_time_reported = True
        return BatchTrajectory(t=t0 + np.arange(steps + 1) * dt, q=states[:, :, :nq], qd=states[:, :, nq:2 * nq],
                               kinetic=T, potential=V, energy=T + V, stats=stats, steps_done=np.asarray(done),
                               diverged=np.asarray(diverged, bool), wall_time=wall, build_time=build_time,
                               info=info)

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

    def _rollout_explicit(self, s: np.ndarray, t0: float, steps: int, progress: bool) -> Trajectory:
        """Explicit integrators without per-step inputs: many steps per call (``casadi.Function.mapaccum``)."""
        nq, dt = self.model.nq, self.config.dt
        states = [s[None, :]]
        done, diverged, diverged_at = 0, False, None
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=steps, unit="step", desc=f"{self.integrator}", leave=False)
        t_loop = time.perf_counter()
        try:
            while done < steps:
                n = min(self.CHUNK, steps - done)
                times = t0 + (done + np.arange(n)) * dt
                out = np.asarray(self._multi_step(n)(s, times[None, :], dt)).T      # (n, ns)
                bad = ~np.all(np.isfinite(out[:, :2 * nq]), axis=1) | \
                    (np.max(np.abs(np.nan_to_num(out[:, nq:2 * nq], nan=np.inf)), axis=1) > self.max_speed)
                if bad.any():
                    first = int(np.argmax(bad))
                    states.append(out[:first])
                    done += first
                    diverged, diverged_at = True, t0 + (done + 1) * dt
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
                 "evaluations": np.ones(done, np.int64), "step_time": np.full(done, wall / max(done, 1))}
        return self._trajectory(t0 + np.arange(done + 1) * dt, X, stats, wall, diverged, diverged_at, t0)

    def _trajectory(self, t, states, stats, wall, diverged, diverged_at, t0) -> Trajectory:
        nq, dt = self.model.nq, self.config.dt
        q_arr, qd_arr = states[:, :nq], states[:, nq:2 * nq]
        T, V = self.rollout_energy(states)
        n_bad = int((~stats["converged"]).sum())
        if n_bad:
            warnings.warn(f"{self.integrator}/{self.solver_name}: {n_bad} of {len(stats['converged'])} steps did not "
                          f"converge (see traj.stats['converged'])", RuntimeWarning, stacklevel=3)
        pb = self.problem
        info = {
            "model": self.model.name, "nq": nq, "dof_names": list(self.model.dof_names),
            "integrator": self.integrator, "order": pb.order,
            "objective": pb.objective.value if pb.objective else None, "kind": pb.kind.value,
            "implicit": self.implicit, "solver": self.solver_name,
            "solver_options": repr(self.solver.options) if self.solver is not None else None,
            "dt": dt, "t0": float(t0), "forces": list(pb.forces), "fd": self.config.fd,
            "energy_scale": self.energy_scale, "diverged": diverged, "diverged_at": diverged_at,
            "velocity": pb.velocity, "start": pb.start, "unconverged_steps": n_bad,
            "backend": self.backend,
        }
        build_time = 0.0 if self._build_time_reported else self.build_time
        self._build_time_reported = True
        return Trajectory(t=np.asarray(t, float), q=q_arr, qd=qd_arr, kinetic=T, potential=V, energy=T + V,
                          stats=stats, wall_time=wall, build_time=build_time, info=info)

    def __repr__(self) -> str:
        return (f"Simulator({self.model.name!r}, {self.problem.describe()}, dt={self.config.dt}"
                + (f", solver={self.solver_name!r}" if self.implicit else "") + ")")
