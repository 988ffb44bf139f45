"""``casadi``: the reference backend: the step problem's CasADi functions on the CasADi virtual machine,
driven by the Python solver plug-in, one step at a time.

``build(problem, **options)`` returns a :class:`VMRunner` with the same interface as the ``c`` backend's
runner (``solve``, ``init``, ``step``, ``rollout``, ``rollout_batch``), so tests and scripts can run one
problem on every backend. :class:`pbframework.simulate.Simulator` runs this path itself when
``backend="casadi"`` (the default).
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import numpy as np

from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.solving import restart_state
from pbframework.step import ProblemKind, initial_state
from pbframework.verdict import FailurePolicy

_POLICIES = tuple(p.value for p in FailurePolicy)


class VMRunner:
    """Run a step problem with a Python solver plug-in on the CasADi VM.

    Args:
        problem: the :class:`~pbframework.step.StepProblem`.
        solver: solver plug-in name (any registered solver).
        solver_options: the solver's options.
        on_failure, max_halvings, max_speed: as :class:`~pbframework.simulate.Simulator`.
        **ignored: options of other backends (``model``, ``forces``, ``threads``, ...) are accepted and
            ignored, so one option set serves every backend.
    """

    def __init__(self, problem, solver: str = "lm", solver_options: Mapping[str, Any] | None = None, *,
                 on_failure: str = "stop", max_halvings: int = 4, max_speed: float = 1e4,
                 **ignored: Any) -> None:
        from pbframework.registry import get_plugin
        from pbframework.step import StepError

        if on_failure not in _POLICIES:
            raise StepError(f"on_failure must be one of {', '.join(_POLICIES)}, got {on_failure!r}")
        self.problem = problem
        self.explicit = problem.kind is ProblemKind.EXPLICIT or problem.nx == 0
        self.solver = None if self.explicit else get_plugin("solver", solver).build(**dict(solver_options or {}))
        self.on_failure = on_failure
        self.max_halvings = int(max_halvings)
        self.max_speed = float(max_speed)
        self.nq, self.nx, self.ns, self.np, self.nu = problem.nq, problem.nx, problem.ns, problem.np, problem.nu

    def _u(self, u) -> np.ndarray:
        return np.zeros(0) if self.nu == 0 else np.asarray(u, float).ravel()

    def solve(self, x0: np.ndarray, p: np.ndarray):
        """The Python solver's :class:`~pbframework.step.SolveResult`."""
        return self.solver.solve(self.problem, np.asarray(x0, float), np.asarray(p, float))

    def init(self, q0, qd0, t0: float, dt: float, u=None) -> np.ndarray:
        return initial_state(self.problem, q0, qd0, t0, dt, self._u(u))

    def _solve_step(self, s, t, dt, u):
        pb = self.problem
        p = np.asarray(pb.params(s, t, dt, u)).ravel()
        if self.explicit:
            return np.asarray(pb.advance(np.zeros(0), p)).ravel(), dict(iterations=0, grad_norm=0.0, converged=True,
                                                                        halvings=0, evaluations=0, depth=0,
                                                                        residual=0.0)
        res = self.solver.solve(pb, np.asarray(pb.guess(p)).ravel(), p)
        return np.asarray(pb.advance(res.x, p)).ravel(), dict(iterations=res.iterations, grad_norm=res.grad_norm,
                                                              converged=bool(res.converged), halvings=0,
                                                              evaluations=res.evaluations, depth=0,
                                                              residual=res.residual(pb.kind))

    def _step(self, s, t, dt, u, depth):
        """``Simulator._step``: solve, halve where unconverged; returns ``(s_next, stats)``."""
        sn, st = self._solve_step(s, t, dt, u)
        if st["converged"] or depth >= self.max_halvings:
            return sn, st
        half = dt / 2.0
        s1, st1 = self._step(self._restart(s, dt, 0.5), t, half, u, depth + 1)
        s2, st2 = self._step(s1, t + half, half, u, depth + 1)
        tot = dict(iterations=st["iterations"] + st1["iterations"] + st2["iterations"],
                   grad_norm=max(0.0, st1["grad_norm"], st2["grad_norm"]),
                   converged=st1["converged"] and st2["converged"], halvings=1 + st1["halvings"] + st2["halvings"],
                   evaluations=st["evaluations"] + st1["evaluations"] + st2["evaluations"],
                   depth=1 + max(st1["depth"], st2["depth"]), residual=max(0.0, st1["residual"], st2["residual"]))
        return self._restart(s2, half, 2.0), tot

    def _stops(self, st) -> bool:
        return not st["converged"] and self.on_failure != "continue"

    def _restart(self, s, dt: float, ratio: float) -> np.ndarray:
        """``Simulator._restart`` (:func:`pbframework.step.restart_state`)."""
        return restart_state(self.problem, s, dt, ratio)

    def step(self, s, t: float, dt: float, u=None) -> tuple[np.ndarray, dict]:
        """One step with its halvings; stats as the ``c`` backend's (``failed``: unconverged under the ``stop`` or
        ``raise`` policy)."""
        sn, st = self._step(np.asarray(s, float), float(t), float(dt), self._u(u), 0)
        st["failed"] = self._stops(st)
        return sn, st

    def rollout(self, q0, qd0, t0: float, dt: float, steps: int, u=None, *, state=None, first_step: int = 0):
        """``steps`` steps in a Python loop (continuing from the integrator state ``state``, row ``first_step``
        of a rollout started at ``t0``, when given); returns :class:`~pbframework.codegen.step_runner.RolloutArrays`."""
        from pbframework.codegen.step_runner import RolloutArrays

        nq, uu = self.nq, self._u(u)
        t_start = time.perf_counter()
        s = self.init(q0, qd0, t0, dt, uu) if state is None else np.asarray(state, float).ravel()
        S, rows = [s.copy()], []
        status, failure = "done", None
        first = int(first_step) if state is not None else 0
        for k in range(int(steps)):
            sn, st = self._step(s, t0 + (first + k) * dt, dt, uu, 0)
            if self._stops(st):
                status, failure = "failed", dict(st, reason="")
                break
            if not np.all(np.isfinite(sn[:2 * nq])) or np.max(np.abs(sn[nq:2 * nq]), initial=0.0) > self.max_speed:
                status = "diverged"
                break
            S.append(sn.copy())
            rows.append(st)
            s = sn
        wall = time.perf_counter() - t_start
        col = (lambda k, dtype: np.array([r[k] for r in rows], dtype=dtype))
        return RolloutArrays(states=np.array(S), nq=nq, iterations=col("iterations", np.int64),
                             converged=col("converged", bool), halvings=col("halvings", np.int64),
                             evaluations=col("evaluations", np.int64), reason=np.zeros(len(rows), np.int64),
                             grad_norm=col("grad_norm", float), steps_done=len(rows), status=status, wall_time=wall,
                             depth=col("depth", np.int64), residual=col("residual", float), failure=failure)

    def rollout_batch(self, Q0, QD0, t0: float, dt: float, steps: int, U=None, threads: int | None = None):
        """Rollouts one after the other (the VM path has no threads); a
        :class:`~pbframework.codegen.step_runner.BatchArrays`."""
        from pbframework.codegen.step_runner import BatchArrays

        Q0, QD0 = np.atleast_2d(np.asarray(Q0, float)), np.atleast_2d(np.asarray(QD0, float))
        M, steps = Q0.shape[0], int(steps)
        t_start = time.perf_counter()
        outs = [self.rollout(Q0[m], QD0[m], t0, dt, steps, None if U is None else np.asarray(U)[m]) for m in range(M)]
        wall = time.perf_counter() - t_start
        S = np.zeros((M, steps + 1, self.ns))
        st = {k: np.zeros((M, steps), dtype) for k, dtype in (("iterations", np.int64), ("converged", bool),
                                                              ("halvings", np.int64), ("evaluations", np.int64),
                                                              ("grad_norm", float), ("depth", np.int64),
                                                              ("residual", float))}
        for m, o in enumerate(outs):
            k = o.steps_done
            S[m, :k + 1] = o.states
            S[m, k + 1:] = o.states[-1]
            for name in st:
                st[name][m, :k] = getattr(o, name)
        return BatchArrays(states=S, nq=self.nq, steps_done=np.array([o.steps_done for o in outs]),
                           status=np.array([o.status for o in outs]), wall_time=wall, threads=1, **st)

    def __repr__(self) -> str:
        return f"VMRunner({self.problem.describe()}, solver={self.solver!r})"


def build_vm_backend(problem, solver: str = "lm", **options: Any) -> VMRunner:
    """A :class:`VMRunner` (see the module docstring)."""
    return VMRunner(problem, solver, **options)


@hookimpl
def pbf_backends():
    return [PluginInfo("casadi", "CasADi virtual machine with the Python solver loop (the reference path)",
                       build_vm_backend, meta={"batch_threads": False})]
