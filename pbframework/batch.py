"""Batches of rollouts: M starts at once, on native threads where the backend has them.

:class:`Batches` is the part of :class:`~pbframework.simulate.Simulator` that runs ``rollout_batch`` and
gathers the trajectories, each with its own verdict, into a :class:`~pbframework.result.BatchTrajectory`.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from .result import BatchTrajectory
from .rollouts import single_threaded_blas
from .step import StepError
from .stepping import StepFailure
from .verdict import FailurePolicy, Status, outcomes


class Batches:
    """Mixin of :class:`~pbframework.simulate.Simulator`: batches of rollouts."""

    def rollout_batch(self, Q0, QD0=None, duration: float | None = None, *, steps: int | None = None,
                      t0: float = 0.0, threads: int | None = None, executor: Any = None,
                      chunk_size: int | None = None) -> BatchTrajectory:
        """M rollouts of the same length from the rows of ``Q0`` (and ``QD0``), all at once.

        On the ``c`` backend one native call runs them on ``threads`` threads (default: all cores; each
        trajectory equals its single :meth:`rollout` exactly); other backends, and force models with
        per-step Python inputs, run them one after the other. Each trajectory has its own status
        (``batch.status``), decided as in :meth:`rollout`.

        Args:
            Q0: initial configurations, shape (M, nq).
            QD0: initial velocities, shape (M, nv) (default zeros).
            duration, steps, t0: as :meth:`rollout`.
            threads: native threads (``c`` backend; with an executor: per chunk).
            executor: run the batch in chunks on this executor (``c`` backend): any object with
                ``submit(fn, *args)`` returning futures, a ``concurrent.futures.ProcessPoolExecutor`` or a
                ``dask.distributed.Client`` (:mod:`pbframework.distributed`); the result equals the run
                without one bit for bit. None: native threads on this machine.
            chunk_size: trajectories per chunk (default: the batch split evenly over the executor's
                workers).

        Returns:
            A :class:`~pbframework.result.BatchTrajectory`.

        Raises:
            StepFailure: an unconverged step under the ``raise`` policy.
        """
        dt, nq, nv = self.config.dt, self.model.nq, self.model.nv
        Q0 = np.atleast_2d(self.check_array(Q0, "Q0"))
        if Q0.ndim != 2 or Q0.shape[1] != nq:
            raise StepError(f"Q0 must be an (M, {nq}) array of initial configurations, got shape {Q0.shape}")
        QD0 = np.zeros((Q0.shape[0], nv)) if QD0 is None else np.atleast_2d(self.check_array(QD0, "QD0"))
        if QD0.shape != (Q0.shape[0], nv):
            raise StepError(f"QD0 must be an ({Q0.shape[0]}, {nv}) array of initial velocities, got shape {QD0.shape}")
        if not (np.all(np.isfinite(Q0)) and np.all(np.isfinite(QD0))):
            raise StepError("Q0 and QD0 must be finite")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, (int, np.integer))
                                    or threads < 1):
            raise StepError(f"threads must be a positive integer, got {threads!r}")
        if executor is not None and (getattr(self.runner, "native", None) is None or self._input_forces):
            why = (f"force models with per-step inputs ({', '.join(f.name for f, _ in self._input_forces)})"
                   if self.runner is not None else f"backend {self.backend!r}")
            raise StepError(f"executor= runs chunks of the native batch of the 'c' backend; this Simulator has "
                            f"{why}: use backend='c' without per-step inputs, or drop executor")
        if chunk_size is not None and executor is None:
            raise StepError("chunk_size applies to a batch run on an executor; pass executor= too")
        steps = self.steps_for(duration, steps, count=Q0.shape[0])     # limits: steps, and memory of all M
        M, t0 = Q0.shape[0], float(t0)
        chunks = None
        names = ("iterations", "grad_norm", "converged", "halvings", "evaluations", "depth", "residual")
        status = np.full(M, Status.OK.value, dtype=object)
        failure_time = np.full(M, np.nan)
        if self.runner is not None and not self._input_forces and hasattr(self.runner, "rollout_batch"):
            if executor is not None:
                from .distributed import run_chunks

                out, chunks = run_chunks(self.runner.native, Q0, QD0, t0, dt, steps, executor,
                                         chunk_size=chunk_size, threads=threads)
            else:
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
            fs = self.problem.meta.get("force_states")
            for m, tr in enumerate(trajs):
                k = tr.steps
                states[m, :k + 1, :nq], states[m, :k + 1, nq:nq + nv] = tr.q, tr.qd
                if fs is not None:
                    states[m, :k + 1, fs[0]:fs[1]] = tr.force_states
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
        if executor is not None:
            info.update(executor=type(executor).__name__, chunks=chunks)
        build_time = 0.0 if self._build_time_reported else self.build_time
        self._build_time_reported = True
        return BatchTrajectory(t=t0 + np.arange(steps + 1) * dt, q=states[:, :, :nq], qd=states[:, :, nq:nq + nv],
                               kinetic=T, potential=V, energy=T + V, stats=stats, steps_done=np.asarray(done),
                               diverged=status == Status.DIVERGED.value, wall_time=wall, build_time=build_time,
                               info=info, status=status.astype(str), failure_time=failure_time,
                               force_states=None if pb.meta.get("force_states") is None else
                               states[:, :, pb.meta["force_states"][0]:pb.meta["force_states"][1]])
