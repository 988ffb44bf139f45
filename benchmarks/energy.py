"""Seed 000 Fig. 2 (a, b): total energy against time on CHAIN-10 and CHAIN-100, plus PBAD stability at
large steps.

Part 1 (Fig. 2): the CHAIN-N benchmark of DESIGN.md (start at rest, z-angles 0.3 rad, gravity, 10 s) with
forward Euler, semi-implicit Euler (seed 000 Eq. 3), RK2, RK3 and RK4 on ABA at dt = 2.5 ms (the figure's
step), and PBAD orders 2 (energy form, ``lm``) and 3 (collocation, ``jtj_lm``), also at 2.5 ms on
CHAIN-10 and CHAIN-100 ("we redo the experiment"; ``--pbad-dt`` per chain, 5 ms on the quick CHAIN-40).
CHAIN-100 at order 3 is a long run: solves with a 400 x 400 Jacobian, 0.1 s of simulated time per
~10 s of wall time at the start, per ~100 s once the chain whips (t = 1.6-2 s) and per 650-1560 s from
t = 2.6 s on (measured on 2 cores; 11202 s of wall to its energy-limit verdict at t = 3.26 s). At 10 ms
it is no cheaper: 0.1 s per 6 s at the start but per ~230 s at t = 2 s, where every step needs ~200
iterations and halvings. Run it in pieces with ``--max-run-seconds`` and ``--resume`` (below).
MuJoCo's RK4 at the same dt runs alongside as the peer when ``mujoco`` is installed, and our RK4 at
``--reference-dt`` (0.1 ms) as the reference of what the exact motion's energy does.

A rollout has diverged where a state turns non-finite or a speed exceeds 1e4 (the Simulator's test, and
the same for MuJoCo), or where its total energy rises more than ``--energy-limit`` percent of the scale
above its start (default 100: the chain has no energy source, and 100% is its whole potential range gained
from nowhere; the table marks it ``(E)``). Its series ends before that state, for every method alike; a
native PBAD rollout stops there, without running the rest of its 10 s.

Measured on CHAIN-100 (DESIGN.md's 1 m links: the tip whips from t ~ 1.5 s on): every Newton-Euler method
at 2.5 ms diverges by t = 2.6 s, MuJoCo's RK4 too; our RK4 diverges at 0.5 ms (t = 4.2 s) and holds the
energy within 4.7% at 0.25 ms (21 s of wall) and 3.0% at 0.1 ms (54 s; +0.18% at 3 s, +0.32% at 10 s).
With the energy limit every Newton-Euler method at 2.5 ms has diverged by t = 2.59 s (forward and
semi-implicit Euler at 1.43 and 1.49 s, RK2-RK4 and MuJoCo's RK4 at 2.56-2.59 s). Order-2 PBAD at 2.5 ms
runs the 10 s and loses 92% of the scale. Order 3 holds the energy until the whip (within 0.12% to t = 1.6
s at 2.5 ms), then *gains* energy: at 2.5 ms +3.6% at 2 s, +10.9% at 2.5 s, +61% at 3.0 s, +88% at 3.2 s
and past +100% at t = 3.26 s, where the series ends as diverged (130 iterations per step, 2794 halvings, 5
unconverged steps; ``whip_steps.py`` shows where the energy comes from). Seed 000 Fig. 2(b) (order 3 and RK3
stable on its 100-link chain) is not reproduced on DESIGN.md's CHAIN-100. With the earlier third-order
Taylor start node, order 3 at 0.625 ms (``--pbad-dt 100:0.000625``) gained +0.15% at 2 s, +2.0% at 2.5 s,
+20% at 3.0 s (0 halvings before 2.6 s; 1838 s of wall to t = 3.0 s).

Part 2 (stability, the issue's must-show at full length): ``pbad`` order 2 with ``lm`` on CHAIN-10, -40 and
-100 at dt = 0.05 and 0.1 for 10 s: diverged or not, and how far the total energy ever rises above its
initial value, in percent of DESIGN.md's scale ``M g sum (i + 0.5) L``.

Usage::

    python benchmarks/energy.py                 # full: 10 s, both parts
    python benchmarks/energy.py --quick         # 2 s, CHAIN-10 and CHAIN-40 instead of CHAIN-100
    python benchmarks/energy.py --no-stability  # part 1 only
    python benchmarks/energy.py --chains 3 --pbad-dt 3:0.02 --stability-chains 3 --duration 0.2
                                                # tiny: CHAIN-3 in both parts (tests/test_benchmarks.py)
    python benchmarks/energy.py --backend casadi  # the CasADi VM instead of generated C (slower)
    python benchmarks/energy.py --chains 100 --pbad-duration 3:1 --no-stability --name energy_chain100
                                                # CHAIN-100 alone, order 3 for 1 s only
    python benchmarks/energy.py --chains 100 --no-stability --name energy_chain100 --log-every 0.1 \
        --max-run-seconds 3600 --resume         # CHAIN-100 in pieces of at most an hour per rollout:
                                                # each run continues every PBAD rollout from its
                                                # checkpoint (identical results; wall times add up)
    python benchmarks/energy.py --chains 100 --no-stability --name energy_chain100 --resume --report-only
                                                # the table and figure of the checkpoints as they are

The "build" column is the Simulator's set-up (for ``c`` the C source generation and compilation on a cold
cache; nothing on a warm one); wall is the rollout alone.

Writes ``<name>.json`` (every series and figure) and ``<name>.png`` (``--name``, default ``energy``) to
``benchmarks/out/`` or ``$PBF_BENCH_OUT`` (benchmarks/_common.py).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import pbframework as pbf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import OUT, energy_error, energy_rise, first_above  # noqa: E402  (same folder)
from peer_mujoco import chain_mjcf, chunked_rollout, mujoco_qpos, rollout_steps, trajectory_energy  # noqa: E402

NE_METHODS = ("forward_euler", "semi_implicit_euler", "rk2", "rk3", "rk4")


def run_mujoco(n: int, dt: float, duration: float, integrator: str, energy_fn, scale: float,
               energy_limit: float = math.inf, joint: str = "ball2") -> dict | None:
    """MuJoCo rollout; energy from pbframework's exact energy function on MuJoCo's (identical) coordinates;
    ended by ``energy_limit`` as ours are (:func:`energy_limit_cut`)."""
    try:
        import mujoco
    except ImportError:
        return None
    chain = pbf.models.chain(n, joint)
    model = mujoco.MjModel.from_xml_string(chain_mjcf(chain, integrator, dt, energy=False))
    data = mujoco.MjData(model)
    data.qpos[:] = mujoco_qpos(chain, pbf.models.chain_q0(chain))
    steps = int(round(duration / dt))
    Q, V = np.empty((steps + 1, model.nq)), np.empty((steps + 1, model.nv))
    Q[0], V[0] = data.qpos, data.qvel
    diverged_at = None
    t0 = time.perf_counter()
    for k in range(steps):
        mujoco.mj_step(model, data)
        Q[k + 1], V[k + 1] = data.qpos, data.qvel
        if not np.all(np.isfinite(data.qvel)) or np.abs(data.qvel).max() > 1e4:
            diverged_at = (k + 1) * dt
            Q, V = Q[:k + 1], V[:k + 1]
            break
    wall = time.perf_counter() - t0
    T, P = energy_fn(mujoco_qpos(chain, Q, inverse=True), V)
    E = T + P
    row = {"name": f"mujoco_{integrator.lower()}", "dt": dt, "wall": wall, "diverged": diverged_at is not None,
           "diverged_at": diverged_at, "t": (np.arange(len(E)) * dt), "E": E,
           "error": energy_error(E, scale, diverged_at is not None),
           "rise": energy_rise(E, scale, diverged_at is not None),
           "iterations": 0.0, "build": 0.0}
    return energy_limit_cut(row, scale, energy_limit)


@dataclass(frozen=True)
class RunOptions:
    """How the PBAD rollouts of a run are made (the command line's options).

    Attributes:
        backend: ``--backend``: ``"c"`` (generated C, default) or ``"casadi"`` (the VM; the series equal the
            C ones to rounding, see tests/test_backend_c.py; only the wall times differ).
        pbad_orders: ``--pbad-orders``: the PBAD orders of Fig. 2.
        pbad_duration: ``--pbad-duration``: per order, a shorter series for a costly order (e.g. ``{3: 1.0}``).
        max_run_seconds: ``--max-run-seconds``: a native PBAD rollout still running after this much wall
            time is stopped and its series reported up to the time it reached (``timeout`` in the table).
        log_every: ``--log-every``: a progress line every this many simulated seconds of a native PBAD
            rollout (0: none).
        checkpoint_stem: ``--name`` when checkpoints are on (``--checkpoint-every`` or ``--resume``), else
            None: native PBAD rollouts then save their states and counters to
            ``<stem>_chain<N>_<row>_dt<dt>.ckpt.npz``, at most every ``checkpoint_every`` seconds of wall
            time and when they stop.
        checkpoint_every: seconds of wall time between checkpoints.
        resume: ``--resume``: continue every native PBAD rollout from its checkpoint (the results of an
            uninterrupted run; a checkpoint of another build, solver, dt or start, or a longer one, is
            refused).
        report_only: ``--report-only``: report every native PBAD rollout as its checkpoint left it, without
            a further step (a missing checkpoint is an error): the figure and table of a long run stopped
            part-way.
        reference_dt: ``--reference-dt``: the step of an RK4 reference series (0: none), fine enough to show
            what the energy of the exact motion does through the chain's whips.
        energy_limit: ``--energy-limit``: a rollout whose total energy rises more than this many percent of
            the energy scale above its start has diverged (inf: no limit); see :func:`energy_limit_cut`. A
            checkpoint stopped by the limit stays stopped when resumed under a higher one (remove it to run
            on); one that ran past a lower limit is cut where it crossed it.
    """

    backend: str = "c"
    pbad_orders: tuple[int, ...] = (2, 3)
    pbad_duration: dict = field(default_factory=dict)
    max_run_seconds: float = math.inf
    log_every: float = 0.0
    checkpoint_stem: str | None = None
    checkpoint_every: float = 120.0
    resume: bool = False
    report_only: bool = False
    reference_dt: float = 1e-4
    energy_limit: float = 100.0


def energy_limit_cut(row: dict, scale: float, limit: float) -> dict:
    """``row`` ended at its first state whose total energy lies more than ``limit`` percent of ``scale``
    above the start's, as diverged there (``diverged_by`` ``"energy"``), unless it diverged earlier. The
    chain has no energy source: 100% is its whole potential range, gained from nowhere. The series keeps the
    states before that one, as a rollout stopped by the Simulator's speed test does; the row's wall time and
    counters stay those of the rollout as run (a native PBAD rollout is stopped at the state itself by
    :func:`peer_mujoco.chunked_rollout`, with its counters over the steps kept)."""
    j = first_above(row["E"], scale, limit)       # the series holds only states before any other divergence
    if not j:
        if row["diverged"]:
            row.setdefault("diverged_by", "state")
        return row
    t = np.asarray(row["t"])
    row.update(t=t[:j], E=np.asarray(row["E"])[:j], diverged=True, diverged_at=float(t[j]), diverged_by="energy",
               error=math.inf, rise=math.inf)
    if "status" in row:
        row["status"] = "diverged"
        row["name"] = row["name"].split(" [to ")[0]
    return row


def _checkpoint_path(opts: RunOptions, model, name: str, dt: float) -> Path:
    label = model.name + ("_ball" if model.on_group else "")
    return OUT / f"{opts.checkpoint_stem}_{label}_{name}_dt{dt:g}.ckpt.npz"


def _signature(sim) -> str:
    """What a checkpoint must match to be continued: the compiled step (its hash covers the model, the
    integrator, the solver and the driver), the solver and failure options, dt and q0."""
    return repr((sim.runner.library.key, repr(sim.solver.options), sim.on_failure.value, sim.max_halvings,
                 sim.max_speed, sim.config.dt, pbf.models.chain_q0(sim.model).tobytes().hex()))


def _load_checkpoint(path: Path, sim, steps: int) -> dict | None:
    if not path.is_file():
        return None
    with np.load(path) as z:
        ck = {k: z[k].item() if z[k].ndim == 0 else z[k] for k in z.files}
    if ck.get("signature") != _signature(sim):
        raise SystemExit(f"{path}: a checkpoint of a different run (another build, solver, dt or start); "
                         f"remove it or choose another --name")
    if ck["steps_done"] > steps:
        raise SystemExit(f"{path}: the checkpoint has {ck['steps_done']} steps, this run asks for {steps}; "
                         f"remove it or choose another --name")
    print(f"    resuming from {path.name} at t={ck['steps_done'] * ck['dt']:g} s "
          f"(wall so far {ck['wall']:.3g} s)", flush=True)
    return ck


def _save_checkpoint(path: Path, sim, result: dict) -> None:
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, nq=sim.model.nq, dt=sim.config.dt, signature=_signature(sim), **result)
    tmp.replace(path)


def run_pbf(opts: RunOptions, model, integrator: str, dt: float, duration: float, order=None,
            solver="auto") -> dict:
    t0 = time.perf_counter()
    sim = pbf.Simulator(model, integrator, order=order, solver=solver, dt=dt, backend=opts.backend,
                        on_failure="continue", energy_limit=None)   # this script applies its own divergence rule to every method
    build = time.perf_counter() - t0
    name = integrator if order is None or integrator != "pbad" else f"pbad{order}"
    q0 = pbf.models.chain_q0(model)
    if sim.runner is not None and sim.implicit:
        # the native rollout in pieces (identical results): progress lines and a wall-time limit
        logged = [0]

        def log(t, wall, iters, halv):
            if opts.log_every and (int(t / opts.log_every + 1e-9) > logged[0] or t >= duration - 1e-9):
                logged[0] = int(t / opts.log_every + 1e-9)
                print(f"    {name} CHAIN-{model.nlinks} t={t:.3f} s  wall {wall:.1f} s  iterations {iters}  "
                      f"halvings {halv}", flush=True)

        ck_path = _checkpoint_path(opts, model, name, dt) if opts.checkpoint_stem else None
        steps = rollout_steps(duration, dt)
        last_save = [time.perf_counter()]

        def checkpoint(snapshot):
            if time.perf_counter() - last_save[0] >= opts.checkpoint_every:
                _save_checkpoint(ck_path, sim, snapshot())
                last_save[0] = time.perf_counter()

        E0 = float(np.sum(sim.energy(q0, np.zeros(model.nv))))

        def stop(rows):             # the energy limit, on a piece's new states (row 0 stands in for the start)
            return first_above(trajectory_energy(sim, np.vstack([rows[:1], rows]), dt)[1:], sim.energy_scale,
                               opts.energy_limit, E0) if len(rows) else None

        resume = _load_checkpoint(ck_path, sim, steps) if ck_path and opts.resume else None
        if opts.report_only:
            if resume is None:
                raise SystemExit(f"--report-only: no checkpoint {ck_path.name} to report")
            status = resume.get("status")
            if status not in ("done", "diverged", "failed"):
                status = "done" if resume["steps_done"] >= steps else "timeout"
            out = {**resume, "states": np.asarray(resume["states"], float), "status": status}
        else:
            out = chunked_rollout(sim, q0, dt, duration, opts.max_run_seconds, 0.1, log, resume=resume,
                                  checkpoint=checkpoint if ck_path else None, stop=stop)
            if ck_path:
                _save_checkpoint(ck_path, sim, out)
        S, k = out["states"], out["steps_done"]
        E = trajectory_energy(sim, S, dt)
        diverged = out["status"] in ("diverged", "failed")
        scale = sim.energy_scale
        row = {"name": name + (f" [to {k * dt:g} s]" if out["status"] == "timeout" else ""), "dt": dt,
               "wall": out["wall"], "build": build, "diverged": diverged,
               "diverged_at": (k + 1) * dt if diverged else None, "t": np.arange(len(E)) * dt, "E": E,
               "error": energy_error(E, scale, diverged), "rise": energy_rise(E, scale, diverged),
               "iterations": out["iterations"] / max(k, 1), "unconverged": out["unconverged"],
               "halvings": out["halvings"], "solver": sim.solver_name, "status": out["status"]}
        if out.get("stopped"):
            row["diverged_by"] = "energy"
        return energy_limit_cut(row, scale, opts.energy_limit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = sim.rollout(q0, None, duration=duration)
    row = {"name": name, "dt": dt, "wall": tr.wall_time, "build": build, "diverged": tr.diverged,
           "diverged_at": tr.info["diverged_at"], "t": tr.t, "E": tr.energy, "error": tr.energy_error(),
           "rise": tr.energy_rise(), "iterations": float(np.mean(tr.stats["iterations"])) if tr.steps else 0.0,
           "unconverged": int((~tr.stats["converged"]).sum()), "halvings": int(tr.stats["halvings"].sum()),
           "solver": tr.info["solver"]}
    return energy_limit_cut(row, sim.energy_scale, opts.energy_limit)


def _downsample(t, E, n=2000):
    k = max(1, len(t) // n)
    return np.asarray(t)[::k].tolist(), np.asarray(E)[::k].tolist()


def _error_text(r: dict) -> str:
    return f"diverged at {r['diverged_at']:.2f} s" if r["diverged"] else f"{r['error']:.3g}%"


def table(rows, title: str, scale: float) -> None:
    print(f"\n{title}   (energy scale {scale:.1f} J)")
    print(f"{'method':<30}{'dt [s]':>8}{'diverged':>16}{'max|E-E0| %':>14}{'max rise %':>12}{'wall [s]':>10}"
          f"{'iter/step':>10}")
    for r in rows:
        div = (f"at {r['diverged_at']:.2f}s" + (" (E)" if r.get("diverged_by") == "energy" else "")
               if r["diverged"] else "no")
        err = "-" if r["diverged"] else f"{r['error']:.4g}"
        rise = "-" if r["diverged"] else f"{r['rise']:+.4g}"
        label = r["name"] + (f" ({r['solver']})" if r.get("solver") else "")
        print(f"{label:<30}{r['dt']:>8.4g}{div:>16}{err:>14}{rise:>12}{r['wall']:>10.3g}{r['iterations']:>10.3g}")


def fig2(opts: RunOptions, chains, duration, ne_dt, pbad_dt) -> dict:
    results = {}
    for n in chains:
        model = pbf.models.chain(n)
        scale = pbf.models.chain_energy_scale(model)
        rows = [run_pbf(opts, model, name, ne_dt, duration) for name in NE_METHODS]
        if opts.reference_dt:
            rows.append(run_pbf(opts, model, "rk4", opts.reference_dt, duration))
            rows[-1]["name"] = "rk4 (reference)"
        sim = pbf.Simulator(model, "rk4", dt=ne_dt)
        mj = run_mujoco(n, ne_dt, duration, "RK4", sim.energy, scale, opts.energy_limit)
        if mj:
            rows.append(mj)
        pdt = pbad_dt.get(n, ne_dt)
        for order in opts.pbad_orders:
            d = opts.pbad_duration.get(order) or duration
            rows.append(run_pbf(opts, model, "pbad", pdt, d, order=order, solver="lm" if order == 2 else "jtj_lm"))
            if d != duration:
                rows[-1]["name"] += f" [{d:g} s]"
        table(rows, f"Fig. 2: CHAIN-{n}, {duration:g} s", scale)
        ours = next(r for r in rows if r["name"] == "rk4")
        if mj:
            print(f"peer ratio, RK4 at dt={ne_dt}: pbframework wall / MuJoCo wall = "
                  f"{ours['wall'] / max(mj['wall'], 1e-12):.2f}; energy error {_error_text(ours)} vs "
                  f"{_error_text(mj)}")
        results[n] = {"scale": scale, "rows": rows}
    return results


def stability(opts: RunOptions, chains, dts, duration) -> list[dict]:
    rows = []
    for n in chains:
        model = pbf.models.chain(n)
        for dt in dts:
            r = run_pbf(opts, model, "pbad", dt, duration, order=2, solver="lm")
            r["chain"] = n
            rows.append(r)
            print(f"  CHAIN-{n:<4} dt={dt:<5} {r.get('status', 'done'):<8} "
                  f"diverged={'yes' if r['diverged'] else 'no':<4} "
                  f"max rise {r['rise']:+.4f}%  max|E-E0| {r['error']:.3g}%  wall {r['wall']:.3g}s  "
                  f"build {r['build']:.2g}s  iter/step {r['iterations']:.3g}  unconverged {r['unconverged']}  "
                  f"halvings {r['halvings']}", flush=True)
    return rows


def plot(results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6.5 * len(results), 4.5), squeeze=False)
    panels = {10: "Fig. 2(a) ", 100: "Fig. 2(b) "}        # seed 000's panels; other chains have none
    for ax, (n, res) in zip(axes[0], results.items()):
        for r in res["rows"]:
            E = (np.asarray(r["E"]) - r["E"][0]) / res["scale"] * 100
            ax.plot(r["t"], np.clip(E, -150, 150), label=f"{r['name']} dt={r['dt']:g}"
                    + (" (diverged)" if r["diverged"] else ""), lw=1)
        ax.set_ylim(-110, 110)
        ax.set_title(f"{panels.get(n, '')}CHAIN-{n}: total energy")
        ax.set_xlabel("t [s]")
        ax.set_ylabel("E(t) - E(0)  [% of M g sum (i+0.5) L]")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 s, CHAIN-10 and CHAIN-40")
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--ne-dt", type=float, default=0.0025)
    ap.add_argument("--pbad-dt", default="10:0.0025,40:0.005,100:0.0025",
                    help="PBAD step per chain, e.g. 10:0.0025,100:0.01")
    ap.add_argument("--chains", default=None, help="comma-separated N (default 10,100; quick 10,40)")
    ap.add_argument("--no-stability", action="store_true")
    ap.add_argument("--stability-chains", default=None,
                    help="comma-separated N of part 2 (default 10,40,100; quick 10,40)")
    ap.add_argument("--no-fig2", action="store_true")
    ap.add_argument("--pbad-orders", default="2,3", help="PBAD orders to run (default 2,3)")
    ap.add_argument("--pbad-duration", default="", help="per-order duration, e.g. 3:1 (default: --duration)")
    ap.add_argument("--name", default="energy", help="output file stem in the output folder (default energy)")
    ap.add_argument("--backend", choices=("c", "casadi"), default="c",
                    help="pbframework backend (default c: generated C; builds are cached)")
    ap.add_argument("--max-run-seconds", type=float, default=math.inf,
                    help="stop a native PBAD rollout after this much wall time and report it up to where it got")
    ap.add_argument("--log-every", type=float, default=0.0,
                    help="print a progress line every this many simulated seconds of a native PBAD rollout")
    ap.add_argument("--checkpoint-every", type=float, default=None, metavar="SECONDS",
                    help="save native PBAD rollouts to <name>_..._dt<dt>.ckpt.npz every this many seconds of wall "
                         "time and when they stop (default: no checkpoints unless --resume)")
    ap.add_argument("--resume", action="store_true",
                    help="continue native PBAD rollouts from their checkpoints (identical results), e.g. a run "
                         "stopped by --max-run-seconds; implies checkpoints every 120 s")
    ap.add_argument("--report-only", action="store_true",
                    help="with --resume: report the PBAD rollouts as their checkpoints left them, no further step")
    ap.add_argument("--reference-dt", type=float, default=1e-4,
                    help="step of the RK4 reference series (default 1e-4 s; 0: none)")
    ap.add_argument("--energy-limit", type=float, default=100.0, metavar="PERCENT",
                    help="a rollout whose total energy rises more than this many percent of the energy scale "
                         "above its start has diverged there (default 100: the whole potential range; inf: none)")
    args = ap.parse_args(argv)
    if args.report_only and not args.resume:
        ap.error("--report-only reports checkpoints: give --resume too")
    if not (math.isfinite(args.reference_dt) and args.reference_dt >= 0):
        ap.error(f"--reference-dt must be 0 (none) or a positive step in seconds, got {args.reference_dt}")
    if not args.energy_limit > 0:
        ap.error(f"--energy-limit must be a positive percentage (inf: none), got {args.energy_limit}")
    checkpoints = args.checkpoint_every is not None or args.resume
    opts = RunOptions(
        backend=args.backend, pbad_orders=tuple(int(k) for k in args.pbad_orders.split(",")),
        pbad_duration={int(k): float(v) for k, v in (kv.split(":") for kv in args.pbad_duration.split(",") if kv)},
        max_run_seconds=args.max_run_seconds, log_every=args.log_every,
        checkpoint_stem=args.name if checkpoints else None, resume=args.resume,
        checkpoint_every=120.0 if args.checkpoint_every is None else args.checkpoint_every,
        report_only=args.report_only, reference_dt=args.reference_dt, energy_limit=args.energy_limit)
    duration = args.duration or (2.0 if args.quick else 10.0)
    chains = [int(c) for c in (args.chains or ("10,40" if args.quick else "10,100")).split(",")]
    pbad_dt = {int(k): float(v) for k, v in (kv.split(":") for kv in args.pbad_dt.split(","))}
    OUT.mkdir(parents=True, exist_ok=True)
    out = {"duration": duration, "ne_dt": args.ne_dt, "pbad_dt": pbad_dt}
    if not args.no_fig2:
        results = fig2(opts, chains, duration, args.ne_dt, pbad_dt)
        plot(results, OUT / f"{args.name}.png")
        out["fig2"] = {str(n): {"scale": res["scale"], "rows": [
            {**{k: v for k, v in r.items() if k not in ("t", "E")},
             **dict(zip(("t", "E"), _downsample(r["t"], r["E"])))} for r in res["rows"]]}
            for n, res in results.items()}
        print(f"\nwrote {OUT / (args.name + '.png')}")
    if not args.no_stability:
        st_chains = [int(c) for c in (args.stability_chains or ("10,40" if args.quick else "10,40,100")).split(",")]
        print(f"\nStability: pbad order 2 (lm), {duration:g} s; max rise must stay <= 1% of the scale")
        rows = stability(opts, st_chains, [0.05, 0.1], duration)
        out["stability"] = [{k: v for k, v in r.items() if k not in ("t", "E")} for r in rows]
        ok = all(not r["diverged"] and r.get("status", "done") == "done" and r["rise"] <= 1.0 for r in rows)
        print(f"stability criterion met: {'yes' if ok else 'NO'}")
    (OUT / f"{args.name}.json").write_text(json.dumps(out, default=_json, indent=1))
    print(f"wrote {OUT / (args.name + '.json')}")
    return 0


def _json(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    return str(o)


if __name__ == "__main__":
    raise SystemExit(main())
