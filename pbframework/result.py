"""The result stage: a simulated trajectory with energies and per-step solver statistics.

Energies are exact given the states: kinetic ``1/2 qd^T M(q) qd`` from CRBA with the integrator's velocity
estimate, potential from the conservative force models' ``energy`` (for example gravity), so they compare
across integrators. :meth:`Trajectory.energy_error` is DESIGN.md's CHAIN-N metric.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

STAT_FIELDS = ("iterations", "grad_norm", "converged", "halvings", "evaluations", "step_time")
"""Per-step statistics kept in :attr:`Trajectory.stats` (one entry per step)."""


@dataclass
class Trajectory:
    """A rollout.

    Attributes:
        t: times, shape (n+1,).
        q: configurations, shape (n+1, nq).
        qd: velocity estimates, shape (n+1, nq) (the integrator's; see ``info["velocity"]``).
        kinetic, potential, energy: shape (n+1,); ``energy = kinetic + potential``. Kinetic energy is
            ``qd^T M(q) qd / 2`` (CRBA), except where the integrator reports its own (PBAD order 2: the
            kinetic energy of the chord velocity ``(P(q_{k+1}) - P(q_k)) / dt`` of every body point) after
            the first step; at t0 it is always the exact ``qd0^T M(q0) qd0 / 2`` of the start, so
            ``energy[0]`` is the physical initial energy that ``energy_error`` and ``energy_rise`` measure
            from. Potential energy is the sum of the conservative force models' ``energy``.
        stats: per-step arrays of length n: ``iterations`` (solver iterations, summed over retries),
            ``grad_norm`` (final gradient infinity norm), ``converged`` (bool), ``halvings`` (how many times
            the step was retried as two half steps), ``evaluations`` (problem-function calls),
            ``step_time`` (seconds).
        wall_time: seconds spent in the stepping loop (problem building excluded, see ``build_time``).
        build_time: seconds spent building the step problem and solver (0 when cached).
        info: integrator, order, objective, solver, dt, forces, model, nq, dof_names, energy_scale, diverged,
            diverged_at, velocity, start.
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    kinetic: np.ndarray
    potential: np.ndarray
    energy: np.ndarray
    stats: dict[str, np.ndarray] = field(default_factory=dict)
    wall_time: float = 0.0
    build_time: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    # -- derived figures ---------------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        return len(self.t) - 1

    @property
    def diverged(self) -> bool:
        return bool(self.info.get("diverged", False))

    @property
    def energy_scale(self) -> float:
        """DESIGN.md's CHAIN-N scale (``info["energy_scale"]``) where known, otherwise
        ``max(|E(0)|, max_t T(t))`` (floored at 1e-12)."""
        s = self.info.get("energy_scale")
        if s:
            return float(s)
        return max(abs(float(self.energy[0])), float(np.max(self.kinetic, initial=0.0)), 1e-12)

    def energy_error(self, scale: float | None = None) -> float:
        """``max_t |E(t) - E(0)| / scale * 100`` (percent); ``inf`` for a diverged rollout."""
        if self.diverged:
            return float("inf")
        s = self.energy_scale if scale is None else float(scale)
        return float(np.max(np.abs(self.energy - self.energy[0]))) / s * 100.0

    def energy_rise(self, scale: float | None = None) -> float:
        """``max_t (E(t) - E(0)) / scale * 100`` (percent): how far energy ever exceeds its initial value."""
        if self.diverged:
            return float("inf")
        s = self.energy_scale if scale is None else float(scale)
        return float(np.max(self.energy - self.energy[0])) / s * 100.0

    def summary(self) -> str:
        """One paragraph: steps, wall time, energy drift, solver iterations, convergence."""
        inf = self.info
        st = self.stats
        it = np.asarray(st.get("iterations", np.zeros(0)))
        conv = np.asarray(st.get("converged", np.ones(0, bool)), bool)
        halv = int(np.sum(st.get("halvings", 0)))
        parts = [f"{inf.get('model', 'model')} (nq={inf.get('nq', self.q.shape[1])}) with "
                 f"{inf.get('integrator')} order {inf.get('order')}"
                 + (f", solver {inf.get('solver')}" if inf.get("implicit") else "")
                 + f", dt={inf.get('dt')} s: {self.steps} steps to t={self.t[-1]:.4g} s in "
                   f"{self.wall_time:.3g} s wall time ({1e3 * self.wall_time / max(self.steps, 1):.3g} ms/step)."]
        if self.diverged:
            parts.append(f"DIVERGED at t={inf.get('diverged_at')} s.")
        else:
            parts.append(f"Energy drift max|E-E0| = {self.energy_error():.4g}% of the energy scale "
                         f"{self.energy_scale:.4g} J (largest rise {self.energy_rise():+.4g}%).")
        if inf.get("implicit") and it.size:
            parts.append(f"Solver iterations per step: mean {it.mean():.3g}, max {it.max()}; "
                         f"{int((~conv).sum())} of {it.size} steps unconverged, {halv} step halvings.")
        return " ".join(parts)

    # -- persistence -------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write an ``.npz`` with ``t, q, qd, kinetic, potential, energy``, ``stats_<name>`` and ``info``
        (JSON)."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")
        arrays = {k: getattr(self, k) for k in ("t", "q", "qd", "kinetic", "potential", "energy")}
        arrays.update({f"stats_{k}": np.asarray(v) for k, v in self.stats.items()})
        arrays["wall_time"] = np.float64(self.wall_time)
        arrays["build_time"] = np.float64(self.build_time)
        arrays["info"] = np.array(json.dumps(self.info, default=_jsonable))
        np.savez(path, **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Trajectory":
        """Read a file written by :meth:`save`."""
        with np.load(Path(path), allow_pickle=False) as z:
            stats = {k[len("stats_"):]: z[k] for k in z.files if k.startswith("stats_")}
            return cls(t=z["t"], q=z["q"], qd=z["qd"], kinetic=z["kinetic"], potential=z["potential"],
                       energy=z["energy"], stats=stats, wall_time=float(z["wall_time"]),
                       build_time=float(z["build_time"]), info=json.loads(str(z["info"])))

    def __repr__(self) -> str:
        return (f"Trajectory({self.info.get('integrator')}, steps={self.steps}, t_end={self.t[-1]:.4g}, "
                f"diverged={self.diverged})")


def _jsonable(o: Any):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


@dataclass
class BatchTrajectory:
    """M rollouts of the same length from one simulator (:meth:`pbframework.simulate.Simulator.rollout_batch`).

    Attributes:
        t: times, shape (steps+1,).
        q, qd: shape (M, steps+1, nq); rows past ``steps_done[m]`` (a diverged or failed trajectory) repeat
            that trajectory's last state, so the arrays stay rectangular.
        kinetic, potential, energy: shape (M, steps+1), as in :class:`Trajectory` (column 0: each start's
            exact energy).
        stats: per-step arrays of shape (M, steps): ``iterations``, ``grad_norm``, ``converged``,
            ``halvings``, ``evaluations`` (zero / False past ``steps_done[m]``).
        steps_done: steps each trajectory completed, shape (M,).
        diverged: shape (M,).
        wall_time: seconds of the whole batch (one native call on the ``c`` backend).
        build_time: seconds spent building the simulator (0 when already reported).
        info: as :attr:`Trajectory.info`, plus ``batch`` (M) and ``threads``.
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    kinetic: np.ndarray
    potential: np.ndarray
    energy: np.ndarray
    stats: dict[str, np.ndarray] = field(default_factory=dict)
    steps_done: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    diverged: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    wall_time: float = 0.0
    build_time: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.q.shape[0])

    @property
    def trajectories_per_second(self) -> float:
        """``M / wall_time``."""
        return len(self) / self.wall_time if self.wall_time > 0 else float("inf")

    def __getitem__(self, m: int) -> Trajectory:
        """Trajectory ``m`` as a :class:`Trajectory` (cut at its ``steps_done``)."""
        k = int(self.steps_done[m]) + 1
        info = dict(self.info, diverged=bool(self.diverged[m]),
                    diverged_at=float(self.t[0] + (k) * (self.t[1] - self.t[0])) if self.diverged[m] and
                    len(self.t) > 1 else None)
        info.pop("batch", None)
        return Trajectory(t=self.t[:k], q=self.q[m, :k], qd=self.qd[m, :k], kinetic=self.kinetic[m, :k],
                          potential=self.potential[m, :k], energy=self.energy[m, :k],
                          stats={name: v[m, :k - 1] for name, v in self.stats.items()},
                          wall_time=self.wall_time / max(len(self), 1), info=info)

    def energy_error(self, scale: float | None = None) -> np.ndarray:
        """:meth:`Trajectory.energy_error` of every trajectory (``inf`` where diverged), shape (M,)."""
        return np.array([self[m].energy_error(scale) for m in range(len(self))])

    def __repr__(self) -> str:
        return (f"BatchTrajectory({self.info.get('integrator')}, M={len(self)}, steps={len(self.t) - 1}, "
                f"diverged={int(np.sum(self.diverged))}, wall_time={self.wall_time:.3g} s)")
