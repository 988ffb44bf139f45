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

from .verdict import REASON_TEXT, Outcome, Status

STAT_FIELDS = ("iterations", "grad_norm", "converged", "halvings", "evaluations", "depth", "residual", "outcome",
               "step_time")
"""Per-step statistics kept in :attr:`Trajectory.stats` (one entry per step)."""


ENERGY_SCALE_FLOOR = 1e-9
"""Joules below which a run has no energy scale (a model without forces at rest): drift is then reported
in joules, not as a percentage of nearly nothing."""


def plot_formats() -> tuple[str, ...]:
    """File extensions the ``plot_energy`` methods write (matplotlib's ``savefig`` formats: ``.png``, ``.pdf``,
    ``.svg``, ...)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return tuple(f".{ext}" for ext in sorted(FigureCanvasBase.get_supported_filetypes()))


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
        stats: per-step arrays of length n: ``outcome`` (a :class:`~pbframework.verdict.Outcome` code:
            0 converged, 1 converged after halving, 2 unconverged), ``converged`` (bool), ``halvings`` (how
            many times the step was retried as two half steps) and ``depth`` (the deepest halving level),
            ``residual`` (what the step ended at: ``||W r||_2`` for residual objectives, the gradient norm for
            energies), ``iterations`` (solver iterations, summed over retries), ``grad_norm`` (final
            gradient infinity norm), ``evaluations`` (problem-function calls), ``step_time`` (seconds).
        wall_time: seconds spent in the stepping loop (problem building excluded, see ``build_time``).
        build_time: seconds spent building the step problem and solver (0 when cached).
        force_states: the force models' own states at each time, shape (n+1, na) (actuator activations, a
            PID's integral and set-point: :mod:`pbframework.force_states`); ``None`` without any.
        info: integrator, order, objective, solver, dt, forces, model, nq, dof_names, energy_scale,
            ``status`` and ``failure_time`` (see :attr:`status`), ``diverged``, ``diverged_at``,
            ``divergence`` (which test: ``non_finite``, ``speed``, ``energy``), ``failure`` (the statistics
            of the step a ``stop`` policy ended the run at), ``on_failure``, ``max_halvings``,
            ``energy_limit``, velocity, start; ``substeps`` (Python step loop): ``[k, t, dt]`` for every substep of
            every step ``k`` that was retried as halves (seed 001 Alg. 2's subdivision for the NMDP
            integrators), in order.
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
    force_states: np.ndarray | None = None

    # -- derived figures ---------------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        return len(self.t) - 1

    @property
    def status(self) -> Status:
        """How the run ended: ``ok``, ``unconverged`` or ``diverged`` (:class:`~pbframework.verdict.Status`)."""
        st = self.info.get("status")
        if st is None:
            st = "diverged" if self.info.get("diverged") else "ok"
        return Status(st)

    @property
    def ok(self) -> bool:
        """``status == "ok"``."""
        return self.status is Status.OK

    @property
    def failure_time(self) -> float | None:
        """Start time of the first unconverged step, or the time the run diverged; None for an ``ok`` run."""
        ft = self.info.get("failure_time")
        return None if ft is None else float(ft)

    @property
    def diverged(self) -> bool:
        return self.status is Status.DIVERGED

    @property
    def energy_scale(self) -> float:
        """The joules that energy errors are percentages of: DESIGN.md's CHAIN-N scale (the potential drop
        from horizontal to hanging, ``info["energy_scale"]``) for chain models; for every other model the
        larger of the initial kinetic energy and the potential's range over the run (at least
        :data:`ENERGY_SCALE_FLOOR`; below it :attr:`energy_scale_known` is False and the summary reports
        joules)."""
        s = self.info.get("energy_scale")
        if s:
            return float(s)
        return max(self._run_scale(), ENERGY_SCALE_FLOOR)

    def _run_scale(self) -> float:
        V = self.potential
        vr = float(np.max(V) - np.min(V)) if len(V) else 0.0
        return max(float(self.kinetic[0]) if len(self.kinetic) else 0.0, vr)

    @property
    def energy_scale_known(self) -> bool:
        """Whether :attr:`energy_scale` is meaningful (a chain's, or a run whose kinetic energy or potential
        range reaches :data:`ENERGY_SCALE_FLOOR`)."""
        return bool(self.info.get("energy_scale")) or self._run_scale() >= ENERGY_SCALE_FLOOR

    def energy_error(self, scale: float | None = None, *, cut: bool = True) -> float:
        """``max_t |E(t) - E(0)| / scale * 100`` (percent); ``inf`` for a diverged rollout unless ``cut`` is
        False (then over the states kept before the divergence)."""
        if self.diverged and cut:
            return float("inf")
        s = self.energy_scale if scale is None else float(scale)
        return float(np.max(np.abs(self.energy - self.energy[0]))) / s * 100.0

    def energy_rise(self, scale: float | None = None, *, cut: bool = True) -> float:
        """``max_t (E(t) - E(0)) / scale * 100`` (percent): how far energy ever exceeds its initial value
        (``inf`` for a diverged rollout unless ``cut`` is False)."""
        if self.diverged and cut:
            return float("inf")
        s = self.energy_scale if scale is None else float(scale)
        return float(np.max(self.energy - self.energy[0])) / s * 100.0

    def status_line(self) -> str:
        """One line: the status and, for a failed run, when and why it failed."""
        inf = self.info
        if self.status is Status.OK:
            return "Status: ok."
        if self.status is Status.DIVERGED:
            why = REASON_TEXT.get(inf.get("divergence") or "", "a state that is not finite or a speed above max_speed")
            return f"Status: DIVERGED at t={self.failure_time:.6g} s ({why}); the run ended before that state."
        fail = inf.get("failure")
        if fail:
            return (f"Status: UNCONVERGED at t={self.failure_time:.6g} s: the step there did not converge after "
                    f"{fail.get('halvings', 0)} halvings (residual {fail.get('residual', float('nan')):.3g}, "
                    f"{fail.get('iterations', 0)} iterations{_reason(fail)}); the run stopped there "
                    f"(on_failure='stop').")
        n = int(np.sum(~np.asarray(self.stats.get("converged", np.ones(0, bool)), bool)))
        return (f"Status: UNCONVERGED: {n} step{'s' if n != 1 else ''} did not converge after their halvings, the "
                f"first at t={self.failure_time:.6g} s (kept: on_failure='continue').")

    def summary(self) -> str:
        """One paragraph, the status first: steps, wall time, energy drift, solver iterations, verdicts."""
        inf = self.info
        st = self.stats
        it = np.asarray(st.get("iterations", np.zeros(0)))
        outcome = np.asarray(st.get("outcome", np.zeros(0, np.int8)))
        halv = int(np.sum(st.get("halvings", 0)))
        parts = [self.status_line(),
                 f"{inf.get('model', 'model')} (nq={inf.get('nq', self.q.shape[1])}"
                 + (f", nv={inf['nv']}" if inf.get("nv", inf.get("nq")) != inf.get("nq") else "") + ") with "
                 f"{inf.get('integrator')} order {inf.get('order')}"
                 + (f", solver {inf.get('solver')}" if inf.get("implicit") else "")
                 + f", dt={inf.get('dt')} s: {self.steps} steps to t={self.t[-1]:.4g} s in "
                   f"{self.wall_time:.3g} s wall time ({1e3 * self.wall_time / max(self.steps, 1):.3g} ms/step)."]
        upto = " up to the failure" if self.status is not Status.OK else ""
        if self.energy_scale_known:
            what = "DESIGN.md's chain scale" if self.info.get("energy_scale") else "initial kinetic energy or potential range"
            drift = (f"Energy drift max|E-E0| = {self.energy_error(cut=False):.4g}% of the energy scale "
                     f"{self.energy_scale:.4g} J ({what}; largest rise {self.energy_rise(cut=False):+.4g}%){upto}.")
        else:
            dE = self.energy - self.energy[0] if len(self.energy) else np.zeros(1)
            drift = (f"Energy drift max|E-E0| = {float(np.max(np.abs(dE))):.3g} J{upto} (no energy scale: the run's "
                     f"kinetic energy and potential range stay below {ENERGY_SCALE_FLOOR:g} J).")
        if inf.get("expected_energy"):
            drift = drift[:-1] + f"; expected: {inf['expected_energy']}."
        parts.append(drift)
        ad = inf.get("adaptive")
        if ad:
            hs = (f", h from {ad['h_min']:.3g} to {ad['h_max']:.3g} s (median {ad['h_median']:.3g})"
                  if ad.get("h_median") is not None else "")
            parts.append(f"Adaptive steps (rtol {ad['rtol']:.3g}, atol {ad['atol']:.3g}): {ad['accepted']} accepted, "
                         f"{ad['rejected']} rejected{hs}; output every {inf.get('dt')} s.")
        elif inf.get("implicit") and it.size:
            parts.append(_iterations_text(it, outcome, halv))
        return " ".join(parts)

    def plot_energy(self, path: str | Path) -> Path:
        """Energy against time (total, kinetic, potential) in the format of the file's extension
        (:func:`plot_formats`); the first failure marked, the axis scaled to the run before it."""
        plt, fig, ax = _figure()
        ax.plot(self.t, self.energy, label="total")
        ax.plot(self.t, self.kinetic, label="kinetic", lw=0.8)
        ax.plot(self.t, self.potential, label="potential", lw=0.8)
        inf = self.info
        ft = self.failure_time
        if ft is not None:
            ax.axvline(ft, color="red", ls="--", lw=1.0, label=f"{self.status.value} at t={ft:.4g} s")
            before = self.t <= ft
            vals = np.concatenate([self.energy[before], self.kinetic[before], self.potential[before]])
            vals = vals[np.isfinite(vals)]
            if vals.size:
                lo, hi = float(vals.min()), float(vals.max())
                pad = 0.1 * max(hi - lo, 1e-12)
                ax.set_ylim(lo - pad, hi + pad)
        ax.set_title(f"{inf.get('model')}: {inf.get('integrator')} order {inf.get('order')}, dt={inf.get('dt')} s, "
                     f"status {self.status.value}")
        return _finish(plt, fig, ax, path)

    # -- persistence -------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write an ``.npz`` with ``t, q, qd, kinetic, potential, energy``, ``stats_<name>`` and ``info``
        (JSON); a path without ``.npz`` gets it appended."""
        return _save(self, path, {} if self.force_states is None else {"force_states": self.force_states})

    @classmethod
    def load(cls, path: str | Path) -> "Trajectory":
        """Read a file written by :meth:`save`."""
        fields, extra = _load(path, batch=False)
        return cls(**fields, force_states=extra.get("force_states"))

    def __repr__(self) -> str:
        return (f"Trajectory({self.info.get('integrator')}, steps={self.steps}, t_end={self.t[-1]:.4g}, "
                f"status={self.status.value!r})")


def _reason(fail: dict) -> str:
    """``", reason: <the solver's stopping test>"`` where the failure record names one."""
    r = str(fail.get("reason") or "")
    return f", reason: {r}" if r else ""


def _jsonable(o: Any):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def _iterations_text(iterations: np.ndarray, outcome: np.ndarray | None, halvings: int) -> str:
    """The summaries' solver sentence: iterations per step and, where recorded, the steps' outcomes."""
    text = f"Solver iterations per step: mean {iterations.mean():.3g}, max {iterations.max()}"
    if outcome is not None:
        text += (f"; steps converged {int(np.sum(outcome == Outcome.CONVERGED))}, after halving "
                 f"{int(np.sum(outcome == Outcome.HALVED))} ({halvings} halvings), unconverged "
                 f"{int(np.sum(outcome == Outcome.UNCONVERGED))}")
    return text + "."


_SERIES = ("t", "q", "qd", "kinetic", "potential", "energy")
_BATCH_ARRAYS = ("steps_done", "diverged", "status", "failure_time")


def _save(result: "Trajectory | BatchTrajectory", path: str | Path, extra: dict[str, np.ndarray]) -> Path:
    """The ``.npz`` both result kinds write: the series, ``stats_<name>``, times, ``info`` (JSON), ``extra``."""
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")
    arrays = {k: getattr(result, k) for k in _SERIES}
    arrays.update({f"stats_{k}": np.asarray(v) for k, v in result.stats.items()})
    arrays["wall_time"] = np.float64(result.wall_time)
    arrays["build_time"] = np.float64(result.build_time)
    arrays["info"] = np.array(json.dumps(result.info, default=_jsonable))
    try:
        np.savez(path, **arrays, **extra)
    except OSError as exc:
        from .errors import OutputPathError

        raise OutputPathError(f"{path}: cannot write the trajectory ({exc.strerror or exc})") from None
    return path


def _load(path: str | Path, batch: bool) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The constructor fields of a saved result and its extra arrays; a file of the other kind is refused."""
    from .errors import ResultFileError

    try:
        with np.load(Path(path), allow_pickle=False) as z:
            if ("steps_done" in z.files) != batch:
                kind, other = ("a single trajectory", "Trajectory") if batch else ("a batch", "BatchTrajectory")
                raise ResultFileError(f"{path}: holds {kind}; read it with {other}.load")
            fields = {k: z[k] for k in _SERIES}
            fields["stats"] = {k[len("stats_"):]: z[k] for k in z.files if k.startswith("stats_")}
            fields.update(wall_time=float(z["wall_time"]), build_time=float(z["build_time"]),
                          info=json.loads(str(z["info"])))
            return fields, {k: z[k] for k in (*_BATCH_ARRAYS, "force_states") if k in z.files}
    except (FileNotFoundError, ResultFileError):
        raise
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:     # not an npz, an array missing, bad JSON
        raise ResultFileError(f"{path}: not a trajectory file written by save ({type(exc).__name__}: "
                              f"{' '.join(str(exc).split())[:200]})") from None


def _figure():
    """A non-interactive matplotlib figure for an energy plot: ``(pyplot, figure, axes)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    return plt, fig, ax


def _finish(plt, fig, ax, path: str | Path) -> Path:
    """Label the energy axes, write the figure in the format of ``path``'s extension, close it."""
    path = Path(path)
    ax.set_xlabel("t [s]")
    ax.set_ylabel("energy [J]")
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except (OSError, ValueError) as exc:       # a folder missing, no permission; an extension matplotlib lacks
        from .errors import OutputPathError

        raise OutputPathError(f"{path}: cannot write the energy plot ({getattr(exc, 'strerror', None) or exc})") \
            from None
    finally:
        plt.close(fig)
    return path


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
        status: each trajectory's :class:`~pbframework.verdict.Status` value, shape (M,).
        failure_time: each trajectory's first failure (NaN where ``ok``), shape (M,).
        wall_time: seconds of the whole batch (one native call on the ``c`` backend).
        build_time: seconds spent building the simulator (0 when already reported).
        info: as :attr:`Trajectory.info`, plus ``batch`` (M) and ``threads``.
        force_states: the force models' own states, shape (M, steps+1, na), as :attr:`Trajectory.force_states`;
            ``None`` without any.
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
    status: np.ndarray | None = None
    failure_time: np.ndarray | None = None
    force_states: np.ndarray | None = None

    def __post_init__(self) -> None:
        M = int(self.q.shape[0])
        if self.status is None:
            self.status = np.where(np.asarray(self.diverged, bool), Status.DIVERGED.value, Status.OK.value)
        if self.failure_time is None:
            self.failure_time = np.full(M, np.nan)

    def __len__(self) -> int:
        return int(self.q.shape[0])

    @property
    def trajectories_per_second(self) -> float:
        """``M / wall_time``."""
        return len(self) / self.wall_time if self.wall_time > 0 else float("inf")

    def __getitem__(self, m: int) -> Trajectory:
        """Trajectory ``m`` as a :class:`Trajectory` (cut at its ``steps_done``)."""
        k = int(self.steps_done[m]) + 1
        ft = float(self.failure_time[m])
        info = dict(self.info, diverged=bool(self.diverged[m]), status=str(self.status[m]),
                    failure_time=None if np.isnan(ft) else ft,
                    diverged_at=float(self.t[0] + (k) * (self.t[1] - self.t[0])) if self.diverged[m] and
                    len(self.t) > 1 else None)
        info.pop("batch", None)
        return Trajectory(t=self.t[:k], q=self.q[m, :k], qd=self.qd[m, :k], kinetic=self.kinetic[m, :k],
                          potential=self.potential[m, :k], energy=self.energy[m, :k],
                          stats={name: v[m, :k - 1] for name, v in self.stats.items()},
                          wall_time=self.wall_time / max(len(self), 1), info=info,
                          force_states=None if self.force_states is None else self.force_states[m, :k])

    def energy_error(self, scale: float | None = None) -> np.ndarray:
        """:meth:`Trajectory.energy_error` of every trajectory (``inf`` where diverged), shape (M,)."""
        return np.array([self[m].energy_error(scale) for m in range(len(self))])

    def summary(self) -> str:
        """Statistics across the trajectories: status counts, energy drift quantiles, iterations, wall time."""
        M = len(self)
        counts = {s.value: int(np.sum(self.status == s.value)) for s in Status}
        inf = self.info
        parts = [f"Status: {counts['ok']} of {M} ok, {counts['unconverged']} unconverged, {counts['diverged']} "
                 f"diverged.",
                 f"{inf.get('model')} with {inf.get('integrator')} order {inf.get('order')}, dt={inf.get('dt')} s, "
                 f"{M} trajectories of {len(self.t) - 1} steps in {self.wall_time:.3g} s wall time on "
                 f"{inf.get('threads', 1)} thread(s) ({self.trajectories_per_second:.3g} trajectories/s)."]
        errs = np.array([self[m].energy_error(cut=False) for m in range(M)])
        errs = errs[np.isfinite(errs)]
        if errs.size:
            q = np.quantile(errs, [0.0, 0.5, 0.9, 1.0])
            parts.append(f"Energy drift max|E-E0| (% of the scale, before any failure): min {q[0]:.3g}, median "
                         f"{q[1]:.3g}, 90% {q[2]:.3g}, max {q[3]:.3g}.")
        it = np.asarray(self.stats.get("iterations", np.zeros((M, 0))))
        done = np.asarray(self.steps_done)
        if inf.get("implicit") and it.size:
            def steps_of(name: str) -> np.ndarray:        # every trajectory's completed steps, end to end
                v = np.asarray(self.stats.get(name, np.zeros_like(it)))
                return np.concatenate([v[m, :done[m]] for m in range(M)]) if M else np.zeros(0)

            per = steps_of("iterations")
            if per.size:
                oc = steps_of("outcome") if "outcome" in self.stats else None
                parts.append(_iterations_text(per, oc, int(np.sum(steps_of("halvings")))))
        ft = np.asarray(self.failure_time, float)
        if np.isfinite(ft).any():
            parts.append(f"First failures from t={np.nanmin(ft):.4g} s to t={np.nanmax(ft):.4g} s "
                         f"(batch.status, batch.failure_time).")
        return " ".join(parts)

    def plot_energy(self, path: str | Path) -> Path:
        """Every trajectory's total energy against time (each up to its ``steps_done``), the failures
        marked, in the format of the file's extension (:func:`plot_formats`)."""
        plt, fig, ax = _figure()
        M = len(self)
        width, alpha = (1.0, 0.9) if M <= 10 else (0.6, max(0.15, 3.0 / M))
        for m in range(M):
            k = int(self.steps_done[m]) + 1
            ax.plot(self.t[:k], self.energy[m, :k], lw=width, alpha=alpha, color=f"C{m % 10}" if M <= 10 else "C0",
                    label="total energy, one line a trajectory" if m == 0 else None)
        failed = np.nonzero(np.isfinite(np.asarray(self.failure_time, float)))[0]
        if failed.size:
            ends = [self.energy[m, int(self.steps_done[m])] for m in failed]
            ax.plot(self.failure_time[failed], ends, "x", color="red", label=f"first failure ({failed.size})")
        counts = {s.value: int(np.sum(self.status == s.value)) for s in Status}
        inf = self.info
        ax.set_title(f"{inf.get('model')}: {M} trajectories, {inf.get('integrator')} order {inf.get('order')}, "
                     f"dt={inf.get('dt')} s; {counts['ok']} ok, {counts['unconverged']} unconverged, "
                     f"{counts['diverged']} diverged", fontsize=9)
        return _finish(plt, fig, ax, path)

    def save(self, path: str | Path) -> Path:
        """Write an ``.npz`` as :meth:`Trajectory.save` does (arrays with a leading trajectory axis), with
        ``steps_done``, ``diverged``, ``status`` and ``failure_time``."""
        return _save(self, path, {"steps_done": np.asarray(self.steps_done), "diverged": np.asarray(self.diverged),
                                  "status": np.asarray(self.status, dtype=str),
                                  "failure_time": np.asarray(self.failure_time, float),
                                  **({} if self.force_states is None else {"force_states": self.force_states})})

    @classmethod
    def load(cls, path: str | Path) -> "BatchTrajectory":
        """Read a file written by :meth:`save`."""
        fields, extra = _load(path, batch=True)
        return cls(**fields, **extra)

    def __repr__(self) -> str:
        return (f"BatchTrajectory({self.info.get('integrator')}, M={len(self)}, steps={len(self.t) - 1}, "
                f"diverged={int(np.sum(self.diverged))}, wall_time={self.wall_time:.3g} s)")
