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

Reported energies are ``qd^T M(q) qd / 2 + V(q)`` of the dense states (there is no history node to take a
chord to). Runs on the ``casadi`` backend; the generated-C driver has no adaptive loop yet (a
:class:`~pbframework.step.StepError` says so).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from .step import StepError, restart_state
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


def rollout_adaptive(sim: "Simulator", opts: AdaptiveOptions, q0: np.ndarray, qd0: np.ndarray, t0: float,
                     steps: int, test: DivergenceTest, bar=None) -> "Trajectory":
    """An adaptive rollout of ``sim`` from ``(q0, qd0)`` at ``t0``, with output every ``dt`` for ``steps``
    outputs. Until a step is accepted the state is built for each tried step size from ``(q0, qd0)``
    (the integrator's ``init``: PBAD's history node from the exact motion), not re-expressed from another
    size: PBAD order 2's chord velocity to a history node ``h`` back is the mean velocity over that step,
    and re-expressing it for a shorter first step would carry an ``O(h)`` velocity error into the run that
    no tolerance removes (measured on CHAIN-3: the error at rtol 1e-6 stalled at 5.7e-2 rad)."""
    from .simulate import STEP_COLUMNS, StepStats, _columns, _End

    pb, nq, dt = sim.problem, sim.model.nq, sim.config.dt
    if pb.error_estimate is None or pb.dense is None:
        raise StepError(f"integrator {sim.integrator!r} has no error estimate: adaptive steps need one "
                        f"(pbad has it at every order)")
    k_err = max(int(pb.error_order), 1)
    atol = opts.rtol if opts.atol is None else opts.atol
    h_max = 10.0 * dt if opts.h_max is None else opts.h_max
    t_end = t0 + steps * dt
    grid = t0 + dt * np.arange(1, steps + 1)
    out_states = [np.concatenate([q0, qd0])]
    cols: dict[str, list] = {k: [] for k in STEP_COLUMNS}
    acc = {"iterations": 0, "halvings": 0, "evaluations": 0, "residual": 0.0, "converged": True}
    h_taken, t_taken = [], []
    end = _End()
    s, h_state = None, None             # the state and the step length it is expressed for (None: at the start)
    h = min(opts.first_step or dt, h_max)
    err_prev, rejected, j = 1.0, 0, 0
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
        u = sim.inputs(t, sh[:nq], sh[nq:2 * nq])
        p = np.asarray(pb.params(sh, t, h, u)).ravel()
        res = sim.solver.solve(pb, np.asarray(pb.guess(p)).ravel(), p)
        acc["iterations"] += res.iterations
        acc["evaluations"] += res.evaluations
        err = math.inf
        s_new = np.asarray(pb.advance(res.x, p)).ravel()
        if res.converged:
            e = np.asarray(pb.error_estimate(res.x, p)).ravel()
            scale = atol + opts.rtol * np.maximum(np.abs(sh[:nq]), np.abs(s_new[:nq]))
            err = float(np.sqrt(np.mean((e / scale) ** 2))) if nq else 0.0
        at_floor = h <= opts.h_min
        if not res.converged and at_floor and sim.on_failure is FailurePolicy.CONTINUE:
            acc["converged"] = False          # kept unconverged, recorded, the run goes on
            err = 1.0
        if not err <= 1.0:                    # rejected (nan included)
            rejected += 1
            acc["halvings"] += 1
            factor = 0.25 if not res.converged or not math.isfinite(err) else \
                max(opts.min_factor, opts.safety * err ** (-1.0 / k_err))
            if at_floor:
                st = StepStats(acc["iterations"], res.grad_norm, False, acc["halvings"], acc["evaluations"], 0,
                               res.residual(pb.kind), str(res.reason))
                if sim.on_failure is FailurePolicy.RAISE:
                    raise sim._failure_error(st, t, h)
                end.failure = st.as_dict(t, h)
                break
            h = max(h * factor, opts.h_min)
            continue
        # accepted: dense output on the grid points inside (t, t + h]
        energy_rows = None
        if test.energy_limit is not None:
            T, V = sim.state_energy(s_new[None, :], h)
            energy_rows = T + V
        i_bad, why = test.first_bad(s_new[None, :], energy_rows)
        if i_bad is not None:
            end.diverged(t + h, why)
            break
        acc["residual"] = max(acc["residual"], res.residual(pb.kind))
        t_taken.append(t)
        h_taken.append(h)
        t_new = t + h
        while j < steps and grid[j] <= t_new + 1e-12 * max(1.0, abs(t_new)):
            theta = 1.0 if abs(grid[j] - t_new) <= 1e-12 * max(1.0, abs(t_new)) else (grid[j] - t) / h
            out_states.append(np.asarray(pb.dense(res.x, p, theta)).ravel())
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
        s, h_state, t = s_new, h, t_new
        factor = opts.safety * max(err, 1e-10) ** (-0.7 / k_err) * err_prev ** (0.4 / k_err)
        h = min(h * min(opts.max_factor, max(opts.min_factor, factor)), h_max)
        err_prev = max(err, 1e-4)
    wall = time.perf_counter() - t_loop
    X = np.array(out_states)
    n = len(X) - 1
    stats = _columns(cols)
    stats = {k: v[:n] for k, v in stats.items()}
    info_adaptive = {"rtol": opts.rtol, "atol": atol, "accepted": len(h_taken), "rejected": rejected,
                     "h_min": float(min(h_taken)) if h_taken else None,
                     "h_max": float(max(h_taken)) if h_taken else None,
                     "h_median": float(np.median(h_taken)) if h_taken else None,
                     "t": [float(v) for v in t_taken], "h": [float(v) for v in h_taken]}
    return sim._trajectory(t0 + dt * np.arange(n + 1), X, stats, wall, end, t0, adaptive=info_adaptive)
