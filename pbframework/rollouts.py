"""The rollout loops of a Simulator: Python step by step, native in the backend's runner, explicit in
compiled multi-step chunks, adaptive (:mod:`pbframework.adaptive`).

:class:`Rollouts` is the part of :class:`~pbframework.simulate.Simulator` that runs ``rollout``: it checks
the start, picks the loop, applies the divergence test and the failure policy, and hands the records to
:class:`~pbframework.records.Records`.
"""

from __future__ import annotations

import contextlib
import sys
import time

import casadi as ca
import numpy as np

from .adaptive import rollout_adaptive
from .checks import check_memory, check_steps, flag, real
from .force_states import start_with_states
from .records import STEP_COLUMNS, _columns, _cut, _End
from .result import Trajectory
from .stepping import StepStats
from .verdict import DivergenceTest, FailurePolicy, Status

PROGRESS_PIECES = 200
"""A native rollout with a progress bar runs in about this many calls (the bar moves between them)."""


class Rollouts:
    """Mixin of :class:`~pbframework.simulate.Simulator`: single rollouts."""

    def steps_for(self, duration: float | None, steps: int | None, dt: float | None = None, *,
                  count: int = 1) -> int:
        """The number of steps of a rollout given ``duration`` (seconds, rounded up to whole steps) or
        ``steps`` (exactly one), checked before any work against the Simulator's ``max_steps`` and, for
        ``count`` trajectories, ``max_memory`` (:class:`~pbframework.errors.LimitError`)."""
        dt = self.config.dt if dt is None else real(dt, "dt", positive=True, unit="seconds")
        n = check_steps(duration, steps, dt, max_steps=self.max_steps)
        check_memory(n, self.problem.ns + self.model.nq + self.model.nv, count, max_memory=self.max_memory)
        return n

    def rollout(self, q0, qd0=None, duration: float | None = None, *, steps: int | None = None,
                t0: float = 0.0, progress: bool = False, force_states0=None) -> Trajectory:
        """Simulate from ``(q0, qd0)`` for ``duration`` seconds (or ``steps`` steps).

        Args:
            q0, qd0: initial configuration (length ``model.nq``) and velocity (length ``model.nv``; default 0).
            duration: simulated time in seconds (rounded up to whole steps).
            steps: number of steps instead of ``duration``.
            t0: initial time.
            progress: show a tqdm progress bar (on stderr).
            force_states0: the force models' states to start from (actuator activations, a PID's integral:
                ``problem.meta["force_states"]``; e.g. ``traj.force_states[-1]`` to continue a run); default their
                ``initial_states``.

        Returns:
            A :class:`~pbframework.result.Trajectory` whose ``status`` says how the run ended (``ok``,
            ``unconverged``, ``diverged``; :mod:`pbframework.verdict`) and ``failure_time`` when the first
            failure happened. A diverged run ends before the state that failed the divergence test; an
            unconverged step ends the run under the ``stop`` policy (everything before it kept, its
            statistics in ``info["failure"]``) and is recorded in ``stats["outcome"]`` under ``continue``.
            Unconverged steps are also reported by a ``RuntimeWarning``.

        Raises:
            StepError: a bad argument (neither or both of duration and steps, a q0 of the wrong length, ...).
            LimitError: more steps than ``max_steps``, or more memory than ``max_memory``.
            StepFailure: an unconverged step under the ``raise`` policy.
        """
        steps = self.steps_for(duration, steps)
        t0 = real(t0, "t0")
        progress = flag(progress, "progress")
        q0, qd0 = self.check_start(q0, qd0)
        test = self.divergence_test(q0, qd0)
        s0 = None if force_states0 is None else start_with_states(self, q0, qd0, t0, force_states0)
        with single_threaded_blas():
            if self.adaptive is not None:
                bar = self._bar(steps, progress)
                try:
                    return rollout_adaptive(self, self.adaptive, q0, qd0, float(t0), steps, test, bar)
                finally:
                    if bar is not None:
                        bar.close()
            if self.runner is not None and not self._input_forces:
                return self._rollout_native(q0, qd0, float(t0), steps, progress, test, s0)
            s = self.initial_state(q0, qd0, t0) if s0 is None else s0
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
        subs: list[list[float]] = []
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
                subs.extend([k, a, b] for a, b in st.substeps)
                cols["step_time"].append(elapsed)
                s = s_new
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        wall = time.perf_counter() - t_loop
        traj = self._trajectory(np.array(ts), np.array(S), _columns(cols), wall, end, t0)
        traj.info["substeps"] = subs
        return traj

    def _rollout_native(self, q0, qd0, t0: float, steps: int, progress: bool,
                        test: DivergenceTest, s0: np.ndarray | None = None) -> Trajectory:
        """The whole rollout in native calls of the backend's runner (``step_time`` is the mean of a call).

        One call, or, with a progress bar or the energy test, about :data:`PROGRESS_PIECES` calls that each
        continue from the last state (identical results): the bar moves and the energy test runs between
        them, and a rollout the test ends stops within a piece of it.
        """
        dt = self.config.dt
        per = max(1, -(-steps // PROGRESS_PIECES)) if (progress or test.energy_limit is not None) else steps
        bar = self._bar(steps, progress)
        pieces, state, k = [], s0, 0          # s0: a start state of the caller's (force states set)
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

    CHUNK = 2000
    """Steps per call of the compiled multi-step function of explicit integrators."""

    def _multi_step(self, n: int) -> ca.Function:
        key = ("_multistep", id(self.problem), n)
        fn = self.model.cache.get(key)
        if fn is None:
            pb = self.problem
            # an MX step (a QP or a linear solve inside: ne_dry_friction, ne_mdp) cannot be evaluated on SX
            X = ca.MX if pb.advance.is_a("MXFunction") else ca.SX
            s, t, dt = X.sym("s", pb.ns), X.sym("t"), X.sym("dt")
            one = ca.Function("one", [s, t, dt], [pb.advance(X(0, 1), pb.params(s, t, dt, X(0, 1)))])
            fn = one.mapaccum("steps", n)
            self.model.cache[key] = fn
        return fn

    def _quiet(self):
        """A QP inside the step (qpOASES) prints a banner whenever an instance is created: keep it off stdout."""
        if self.problem.advance.is_a("MXFunction"):
            from .nmdp import silenced_stdout

            return silenced_stdout()
        return contextlib.nullcontext()

    def _explicit_until_failure(self, s: np.ndarray, times: np.ndarray, dt: float):
        """The steps of a chunk that raised, taken one at a time up to the first that fails (explicit steps are
        not retried as halves): ``(states, stats of the failed step)``, ``None`` for the stats where none
        failed."""
        out = []
        with self._quiet():
            for t in times:
                s_new, st = self._solve(s, float(t), dt)
                if not st.converged:
                    return np.asarray(out).reshape(len(out), len(s)), st
                out.append(s_new)
                s = s_new
        return np.asarray(out), None

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
                failed = None
                try:
                    with self._quiet():
                        out = np.asarray(self._multi_step(n)(s, times[None, :], dt)).T      # (n, ns)
                except RuntimeError:        # a step of the chunk raised (its QP failed): find it, one by one,
                    self._renew_problem()   # from a fresh build (the failed QP's memory fails every hot start)
                    out, failed = self._explicit_until_failure(s, times, dt)
                i, why = test.first_bad(out, self._energy_of(out, test))
                if i is not None:
                    states.append(out[:i])
                    done += i
                    end.diverged(t0 + (done + 1) * dt, why)
                    break
                if failed is not None:
                    states.append(out)
                    done += len(out)
                    t_fail = t0 + done * dt
                    if self.on_failure is FailurePolicy.RAISE:
                        raise self._failure_error(failed, t_fail, dt)
                    end.failure = failed.as_dict(t_fail, dt)
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


@contextlib.contextmanager
def single_threaded_blas():
    """BLAS and OpenMP pools limited to one thread while a rollout runs (threadpoolctl): the dense algebra of
    one step is small, threads only add overhead, and parallelism comes from batching trajectories."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield
