"""What a rollout loop records and how it becomes a :class:`~pbframework.result.Trajectory`.

The per-step statistic columns (:data:`STEP_COLUMNS`), how a loop ended (:class:`_End`: diverged, stopped
at an unconverged step, or not at all), and :class:`Records`, the part of
:class:`~pbframework.simulate.Simulator` that turns states, statistics and the end into a trajectory with
its verdict, energies and ``info``.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from .result import Trajectory
from .verdict import Status, outcomes


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



class Records:
    """Mixin of :class:`~pbframework.simulate.Simulator`: a loop's records as a trajectory."""

    def _trajectory(self, t, states, stats, wall, end: "_End", t0, adaptive: dict | None = None) -> Trajectory:
        nq, nv, dt = self.model.nq, self.model.nv, self.config.dt
        q_arr, qd_arr = states[:, :nq], states[:, nq:nq + nv]
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
            "model": self.model.name, "nq": nq, "nv": nv, "dof_names": list(self.model.dof_names),
            "velocity_names": list(self.model.velocity_names),
            "integrator": self.integrator, "order": pb.order,
            "objective": pb.objective.value if pb.objective else None, "kind": pb.kind.value,
            "implicit": self.implicit, "solver": self.solver_name,
            "solver_options": repr(self.solver.options) if self.solver is not None else None,
            "dt": dt, "t0": float(t0), "forces": list(pb.forces), "force_specs": force_specs(self.forces),
            "fd": self.config.fd,
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
        fs = pb.meta.get("force_states")
        return Trajectory(t=np.asarray(t, float), q=q_arr, qd=qd_arr, kinetic=T, potential=V, energy=T + V,
                          stats=stats, wall_time=wall, build_time=build_time, info=info,
                          force_states=None if fs is None or adaptive is not None else states[:, fs[0]:fs[1]])


def force_specs(forces) -> list:
    """``[name, params]`` of each force model whose parameters are plain data (JSON: numbers, strings, lists,
    dicts), so a saved trajectory can rebuild them (the viewer draws contact forces from them); models with a
    callable among their parameters (a controller) are left out."""
    import json

    out = []
    for f in forces:
        try:
            params = f.params() if hasattr(f, "params") else None
            json.dumps(params, allow_nan=True)
        except (TypeError, ValueError):
            continue
        if params is not None and getattr(f, "name", None):
            out.append([f.name, params])
    return out
