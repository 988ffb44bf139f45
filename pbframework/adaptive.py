"""Adaptive step-size control: a local error estimate per step, a PI controller, dense output on a grid.

The seeds use fixed steps; a large-step method stays honest through a whip only if it shortens its steps
there. With ``Simulator(..., adaptive=True)`` (or an :class:`AdaptiveOptions`) a rollout

1. solves a step of size ``h`` from ``t`` (the state re-expressed for ``h`` by the problem's ``restart``
   when ``h`` changed: the same re-expression the halving retry uses);
2. measures its local error with the problem's ``error_estimate`` (PBAD: the end configuration against the
   lower-degree polynomial's prediction, ``O(h^K)``), scaled componentwise by ``atol + rtol |q|`` and
   combined as a root mean square: ``err <= 1`` accepts the step;
3. chooses the next ``h`` with the PI controller of Hairer & Wanner (Solving ODEs II, IV.2; Gustafsson):
   ``h * safety * err^(-0.7/k) * err_prev^(0.4/k)`` after an accepted step, ``h * safety * err^(-1/k)``
   after a rejected one (``k`` the estimate's order), the factor clipped to ``[min_factor, max_factor]``
   and ``h`` to ``[h_min, h_max]``; a solve that does not converge is a rejection with ``h / 4``;
4. writes the states on the output grid ``t0 + j dt`` (``dt`` of the Simulator) from the accepted steps'
   polynomials (the problem's ``dense``), so a trajectory has the same rows whatever steps were taken.

A step that cannot be taken even at ``h_min`` is an unconverged step, handled by the failure policy as in
a fixed-step run (``stop`` ends the run there). Per output interval the statistics count the accepted
steps' solver iterations (``iterations``), the rejected attempts (``halvings``: the adaptive retries) and
the largest residual; ``info["adaptive"]`` holds the totals and every accepted step's start time and size.

The divergence test checks each accepted step's end state (not finite, a speed above ``max_speed``) and
the output rows' energies (the energy limit). Reported energies are ``qd^T M(q) qd / 2 + V(q)`` of the dense
states (there is no history node to take a chord to).

On models with ``ball`` / ``free`` joints the estimate compares configurations (quaternion entries among
them) and the dense output is the chart polynomial mapped back by the exponential map
(:mod:`pbframework.plugins.integrators.pbad_group`).

Both backends run this loop: the ``casadi`` backend in Python (:func:`rollout_adaptive`), the ``c``
backend in the generated driver (``codegen/c_src/pbf_adaptive.c``, the same decisions in the same order,
the error norm summed as :func:`pbframework.linalg.dot` sums), called in pieces so that the progress bar
moves and the energy test runs between them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from .linalg import dot
from .records import STEP_COLUMNS, _columns, _End
from .solving import restart_state, solve_step
from .step import StepError
from .stepping import StepStats
from .verdict import DivergenceTest, FailurePolicy

if TYPE_CHECKING:  # pragma: no cover
    from .result import Trajectory
    from .simulate import Simulator


@dataclass(frozen=True)
class AdaptiveOptions:
    """Options of adaptive step-size control (see the module docstring).

    Attributes:
        rtol: relative tolerance of the local error (per configuration coordinate).
        atol: absolute tolerance (rad or m); ``None``: equal to ``rtol``.
        first_step: the first step's size in seconds; ``None``: the Simulator's ``dt``.
        h_min: smallest step in seconds; a step that fails below it is unconverged.
        h_max: largest step in seconds; ``None``: ten times the Simulator's ``dt``.
        safety: the controller's safety factor.
        min_factor, max_factor: bounds of the step-size change per step.
    """

    rtol: float = 1e-4
    atol: float | None = None
    first_step: float | None = None
    h_min: float = 1e-7
    h_max: float | None = None
    safety: float = 0.9
    min_factor: float = 0.2
    max_factor: float = 5.0

    def __post_init__(self) -> None:
        for name in ("rtol", "atol", "first_step", "h_min", "h_max", "safety", "min_factor", "max_factor"):
            v = getattr(self, name)
            if v is None and name in ("atol", "first_step", "h_max"):
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise StepError(f"adaptive: {name} must be a positive finite number, got {v!r}")
        if not self.min_factor < 1.0 < self.max_factor:
            raise StepError(f"adaptive: need min_factor < 1 < max_factor, got {self.min_factor}, {self.max_factor}")
        if self.safety > 1.0:
            raise StepError(f"adaptive: safety must be at most 1, got {self.safety}")

    @classmethod
    def parse(cls, value: Any) -> "AdaptiveOptions | None":
        """``False`` / ``None``: None (fixed steps); ``True``: the defaults; a mapping: those options."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            names = set(cls.__dataclass_fields__)
            unknown = sorted(set(value) - names)
            if unknown:
                raise StepError(f"adaptive: unknown option(s) {unknown} (allowed: {', '.join(sorted(names))})")
            return cls(**value)
        raise StepError(f"adaptive must be True, False, a dict of options or an AdaptiveOptions, got {value!r}")


class _Record:
    """What an adaptive rollout has written: output rows, their statistics, the accepted steps, the end."""

    def __init__(self, q0: np.ndarray, qd0: np.ndarray) -> None:
        self.states = [np.concatenate([q0, qd0])]
        self.cols: dict[str, list] = {k: [] for k in STEP_COLUMNS}
        self.t_taken: list[float] = []
        self.h_taken: list[float] = []
        self.end = _End()

    def energy_cut(self, sim: "Simulator", test: DivergenceTest, first: int, grid: np.ndarray) -> bool:
        """Apply the energy test to the rows written from index ``first`` (0: the first output row); cut
        everything from the first bad row on. True where the run diverged."""
        if test.energy_limit is None or len(self.states) - 1 <= first:
            return False
        rows = np.array(self.states[1 + first:])
        T, V = sim.energy(rows[:, :sim.model.nq], rows[:, sim.model.nq:sim.model.nq + sim.model.nv])
        i, why = test.first_bad(rows, T + V)
        if i is None:
            return False
        j = first + i
        t_bad = float(grid[j])
        del self.states[1 + j:]
        for v in self.cols.values():
            del v[j:]
        keep = int(np.searchsorted(np.asarray(self.t_taken), t_bad, side="left"))
        del self.t_taken[keep:], self.h_taken[keep:]
        self.end.diverged(t_bad, why)
        return True

    def trajectory(self, sim: "Simulator", opts: "AdaptiveOptions", t0: float, dt: float, wall: float) -> "Trajectory":
        X = np.array(self.states)
        n = len(X) - 1
        stats = {k: v[:n] for k, v in _columns(self.cols).items()}
        h = self.h_taken
        failure = self.end.failure
        rejected = int(np.sum(stats["halvings"])) + (int(failure["halvings"]) if failure else 0)
        info = {"rtol": opts.rtol, "atol": opts.rtol if opts.atol is None else opts.atol,
                "accepted": len(h), "rejected": rejected,
                "h_min": float(min(h)) if h else None, "h_max": float(max(h)) if h else None,
                "h_median": float(np.median(h)) if h else None,
                "t": [float(v) for v in self.t_taken], "h": [float(v) for v in h]}
        return sim._trajectory(t0 + dt * np.arange(n + 1), X, stats, wall, self.end, t0, adaptive=info)


def error_norm(e: np.ndarray, s: np.ndarray, s_new: np.ndarray, rtol: float, atol: float) -> float:
    """The step's error ``e`` scaled componentwise by ``atol + rtol max(|q|, |q_new|)``, root mean square
    (summed as the C driver sums it)."""
    nq = len(e)
    if not nq:
        return 0.0
    v = e / (atol + rtol * np.maximum(np.abs(s[:nq]), np.abs(s_new[:nq])))
    return math.sqrt(dot(v, v) / nq)


def rollout_adaptive(sim: "Simulator", opts: AdaptiveOptions, q0: np.ndarray, qd0: np.ndarray, t0: float,
                     steps: int, test: DivergenceTest, bar=None) -> "Trajectory":
    """An adaptive rollout of ``sim`` from ``(q0, qd0)`` at ``t0``, with output every ``dt`` for ``steps``
    outputs: in the backend's runner where it has the adaptive loop (``c``), else in Python.

    Until a step is accepted the state is built for each tried step size from ``(q0, qd0)`` (the
    integrator's ``init``: PBAD's history node from the exact motion), not re-expressed from another size:
    PBAD order 2's chord velocity to a history node ``h`` back is the mean velocity over that step, and
    re-expressing it for a shorter first step would carry an ``O(h)`` velocity error into the run that no
    tolerance removes (measured on CHAIN-3: the error at rtol 1e-6 stalled at 5.7e-2 rad)."""
    pb = sim.problem
    if pb.error_estimate is None or pb.dense is None:
        raise StepError(f"integrator {sim.integrator!r} has no error estimate: adaptive steps need one "
                        f"(pbad has it at every order)")
    if sim.runner is not None and hasattr(sim.runner, "rollout_adaptive") and not sim._input_forces:
        return _rollout_native(sim, opts, q0, qd0, t0, steps, test, bar)
    return _rollout_python(sim, opts, q0, qd0, t0, steps, test, bar)


def _rollout_native(sim: "Simulator", opts: AdaptiveOptions, q0: np.ndarray, qd0: np.ndarray, t0: float,
                    steps: int, test: DivergenceTest, bar) -> "Trajectory":
    """The adaptive loop in the backend's runner, in pieces of about ``steps / PROGRESS_PIECES`` rows when
    a progress bar or the energy test needs them (identical results)."""
    from .rollouts import PROGRESS_PIECES

    dt = sim.config.dt
    grid = t0 + dt * np.arange(1, steps + 1)
    per = max(1, -(-steps // PROGRESS_PIECES)) if (bar is not None or test.energy_limit is not None) else steps
    rec = _Record(q0, qd0)
    carry, j, wall = None, 0, 0.0
    while j < steps:
        out = sim.runner.rollout_adaptive(q0, qd0, t0, dt, steps, opts, carry=carry, first_row=j,
                                          rows=min(per, steps - j))
        wall += out.wall_time
        carry = out.carry
        rec.states.extend(out.states)
        per_row = out.wall_time / max(out.rows, 1)
        for name in ("iterations", "converged", "halvings", "evaluations", "grad_norm", "residual"):
            rec.cols[name].extend(getattr(out, name).tolist())
        rec.cols["depth"].extend([0] * out.rows)
        rec.cols["reason"].extend([""] * out.rows)
        rec.cols["step_time"].extend([per_row] * out.rows)
        rec.t_taken.extend(out.history[:, 0].tolist())
        rec.h_taken.extend(out.history[:, 1].tolist())
        if rec.energy_cut(sim, test, j, grid):
            break
        j += out.rows
        if bar is not None:
            bar.update(out.rows)
        if out.status == "diverged":
            rec.end.diverged(out.end_time, "non_finite_or_speed")
            break
        if out.status == "failed":
            st = StepStats(**{n: out.failure[n] for n in ("iterations", "grad_norm", "converged", "halvings",
                                                          "evaluations", "depth", "residual", "reason")})
            if sim.on_failure is FailurePolicy.RAISE:
                raise sim._failure_error(st, out.end_time, out.end_step)
            rec.end.failure = st.as_dict(out.end_time, out.end_step)
            break
    return rec.trajectory(sim, opts, t0, dt, wall)


def _rollout_python(sim: "Simulator", opts: AdaptiveOptions, q0: np.ndarray, qd0: np.ndarray, t0: float,
                    steps: int, test: DivergenceTest, bar) -> "Trajectory":
    """The adaptive loop in Python (the ``casadi`` backend); ``pbf_adaptive.c`` is this loop in C."""
    pb, nq, nv, dt = sim.problem, sim.model.nq, sim.model.nv, sim.config.dt
    k_err = max(int(pb.error_order), 1)
    atol = opts.rtol if opts.atol is None else opts.atol
    h_max = 10.0 * dt if opts.h_max is None else opts.h_max
    t_end = t0 + steps * dt
    grid = t0 + dt * np.arange(1, steps + 1)
    rec = _Record(q0, qd0)
    cols = rec.cols
    acc = {"iterations": 0, "halvings": 0, "evaluations": 0, "residual": 0.0, "converged": True}
    s, h_state = None, None             # the state and the step length it is expressed for (None: at the start)
    h = min(opts.first_step or dt, h_max)
    err_prev, j = 1.0, 0
    t = t0
    t_loop = time.perf_counter()
    t_interval = t_loop
    while j < steps:
        h = min(h, t_end - t)
        if t + h > t_end - 1e-12 * max(1.0, abs(t_end)):
            h = t_end - t                     # land on the end
        if s is None:
            sh = sim._init(q0, qd0, t0, h)
        else:
            sh = s if h == h_state else restart_state(pb, s, h_state, h / h_state)
        u = sim.inputs(t, sh[:nq], sh[nq:nq + nv])
        p = np.asarray(pb.params(sh, t, h, u)).ravel()
        res = solve_step(sim.solver, pb, np.asarray(pb.guess(p)).ravel(), p)
        acc["iterations"] += res.iterations
        acc["evaluations"] += res.evaluations
        err = math.inf
        s_new = np.asarray(pb.advance(res.x, p)).ravel()
        if res.converged:
            err = error_norm(np.asarray(pb.error_estimate(res.x, p)).ravel(), sh, s_new, opts.rtol, atol)
        at_floor = h <= opts.h_min
        if not res.converged and at_floor and sim.on_failure is FailurePolicy.CONTINUE:
            acc["converged"] = False          # kept unconverged, recorded, the run goes on
            err = 1.0
        if not err <= 1.0:                    # rejected (nan included)
            acc["halvings"] += 1
            factor = 0.25 if not res.converged or not math.isfinite(err) else \
                max(opts.min_factor, opts.safety * err ** (-1.0 / k_err))
            if at_floor:
                st = StepStats(acc["iterations"], res.grad_norm, False, acc["halvings"], acc["evaluations"], 0,
                               res.residual(pb.kind), str(res.reason))
                if sim.on_failure is FailurePolicy.RAISE:
                    raise sim._failure_error(st, t, h)
                rec.end.failure = st.as_dict(t, h)
                break
            h = max(h * factor, opts.h_min)
            continue
        # accepted: the divergence test on the end state, then dense output on the grid points in (t, t + h]
        i_bad, why = test.first_bad(s_new[None, :], None)
        if i_bad is not None:
            rec.end.diverged(t + h, why)
            break
        acc["residual"] = max(acc["residual"], res.residual(pb.kind))
        rec.t_taken.append(t)
        rec.h_taken.append(h)
        t_new = t + h
        tol_new = 1e-12 * max(1.0, abs(t_new))
        j_first = j
        while j < steps and grid[j] <= t_new + tol_new:
            theta = 1.0 if abs(grid[j] - t_new) <= tol_new else (grid[j] - t) / h
            rec.states.append(np.asarray(pb.dense(res.x, p, theta)).ravel())
            now = time.perf_counter()
            for name in ("iterations", "halvings", "evaluations", "residual", "converged"):
                cols[name].append(acc[name])
            cols["grad_norm"].append(float(res.grad_norm))
            cols["depth"].append(0)
            cols["reason"].append("")
            cols["step_time"].append(now - t_interval)
            t_interval = now
            acc = {"iterations": 0, "halvings": 0, "evaluations": 0, "residual": 0.0, "converged": True}
            j += 1
            if bar is not None:
                bar.update(1)
        if rec.energy_cut(sim, test, j_first, grid):
            break
        s, h_state, t = s_new, h, t_new
        factor = opts.safety * max(err, 1e-10) ** (-0.7 / k_err) * err_prev ** (0.4 / k_err)
        h = min(h * min(opts.max_factor, max(opts.min_factor, factor)), h_max)
        err_prev = max(err, 1e-4)
    return rec.trajectory(sim, opts, t0, dt, time.perf_counter() - t_loop)
