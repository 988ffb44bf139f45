"""QUADRUPED-TRACK (seed 001 Fig. 2-6, Table I): quadrupeds tracking periodic walk and jump targets with stable
PD, for NE-MDP, NE-NMDP, PBD-NMDP, their zeroth-order variants and MuJoCo, across dt.

For each robot (solo12 from example-robot-data; the spider of DESIGN.md), task (``walk``: a trot;
``jump``: crouch and extend once per 2 s) and method, every dt of ``--dts`` (default 5, 7, 10, 20, 30, 50 ms)
is run for ``--duration`` seconds and the script prints: stable or not (the run ended ok, its states are finite
and the torso never tilted past 60 degrees), the max torso tilt, the walking distance (base x travelled), the
jump height (mean over jumps of the peak base height above standing) and the wall time, with the mean outer
PGM iterations per step and Alg. 2's halvings for the NMDP methods (a run that needs more than
``--max-run-seconds`` of wall stops there with status ``timeout`` and is not counted as stable). Then:

* which dt each method and task is stable at; the NE-MDP baselines also run ``--small-dts`` (0.25-3 ms),
  printed apart and left out of the two summaries below (where both converge, their common answer is the
  dt -> 0 reference the grid's runs can be read against);
* **Table I** of seed 001: the standard deviation across dt (stable runs) of walking distance and jump height
  per method;
* **time to a consistent answer**: the largest dt whose walking distance is within 5% of the method's own
  5 ms result, the wall time of that run, and the ratio PBD-NMDP / MuJoCo;
* **Fig. 6** at dt = 50 ms (NMDP methods, walk and jump): the instantaneous frame rate (1 / wall time per
  step), outer iterations per step and the substep sizes Alg. 2 chose (``dt / 2^depth``, the smallest of each
  step), as summaries and in ``quadruped_track.png``.

Methods: ``ne_mdp_pd`` (integrator ``ne_mdp`` with the PD torque taken at the step's start, as seed 001's authors'
C++ runs its NE-MDP baseline), ``ne_mdp`` (the same with Tan et al.'s semi-implicit stable PD), ``ne_nmdp`` / ``ne_zonmdp`` (``ne_nmdp`` with ``pgm`` / ``zopgm``),
``pbd_nmdp`` / ``pbd_zonmdp`` (``pbd_nmdp`` with ``pgm`` / ``zopgm``): the NMDP functions as generated C
(``native``; ``--vm``: the CasADi VM), the PGM loop and its qpOASES QPs in Python (qpOASES is not
code-generated); wall times are the rollouts alone, the compile is the row's ``build``. ``mujoco`` (MuJoCo's
default solver and contact, ``implicitfast``, position actuators with the same gains; solo12 from its URDF with
the meshes stripped and spheres at the feet, the spider from ``benchmarks/_mjcf.py`` with 5 mm spheres at its
contact points). The contact model,
gains and targets are in ``benchmarks/_quadruped.py``.

Shortened horizons: seed 001 runs 10 s; the full grid of 5 methods x 6 dt x 2 tasks x 2 robots at 10 s takes
hours here (one PGM step of solo12 costs 0.2-0.5 s of wall at 5 ms... see the printed wall times), so the
default is solo12 for ``--duration 4`` s (two jumps) with the zeroth-order variants at 50 ms only (Fig. 6's
step; they run last), and a global ``--budget`` of wall seconds after which remaining runs are skipped (and
listed as skipped).

Usage::

    python benchmarks/quadruped_track.py                          # solo12, 4 s, within --budget 420 s
    python benchmarks/quadruped_track.py --robots solo12 spider --duration 10 --budget 3600
    python benchmarks/quadruped_track.py --quick                  # solo12, 0.4 s, two dt (the tests)

Writes ``quadruped_track.json`` and ``quadruped_track.png`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _quadruped as Q  # noqa: E402
from _common import out_path, write_json  # noqa: E402

import pbframework as pbf  # noqa: E402

METHODS = {"ne_mdp_pd": ("ne_mdp", None), "ne_mdp": ("ne_mdp", None), "ne_nmdp": ("ne_nmdp", "pgm"),
           "pbd_nmdp": ("pbd_nmdp", "pgm"), "ne_zonmdp": ("ne_nmdp", "zopgm"), "pbd_zonmdp": ("pbd_nmdp", "zopgm"),
           "mujoco": (None, None)}
LAW = {"ne_mdp_pd": "pd"}
"""The tracking law where it is not ``stable_pd``: ``ne_mdp_pd`` is NE-MDP as seed 001's authors run it (their
``MDPSimulator::forwardRK1F`` takes the PD torque at the step's start, ``getCtrl(tau0, qdq)``); ``ne_mdp`` gives
NE-MDP Tan et al.'s semi-implicit stable PD."""
DTS = (0.005, 0.007, 0.01, 0.02, 0.03, 0.05)
ZERO_ORDER_DTS = (0.05,)
SMALL_DTS = (0.00025, 0.0005, 0.001, 0.002, 0.003)
"""Below the grid, for the NE-MDP baselines only (cheap): where the explicit-PD baseline is stable and what it
walks there; these rows are printed apart and not counted in Table I or the consistency test."""
TILT_LIMIT = 60.0


def rollout_pieces(sim, q0, duration: float, max_wall: float, piece: float = 0.2):
    """``sim.rollout`` in pieces of ``piece`` seconds, each from where the last ended (exact for these
    integrators, whose state is ``[q; v]``), until ``duration`` or ``max_wall`` seconds of wall time; returns
    ``(t, q, stats, status, wall)``, status ``"timeout"`` where the wall limit ended it."""
    t0, q, v = 0.0, np.asarray(q0, float), np.zeros(sim.model.nv)
    ts, qs, stats, wall, status = [np.zeros(1)], [q[None, :]], {}, 0.0, "ok"
    while t0 < duration - 1e-9:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tr = sim.rollout(q, v, duration=min(piece, duration - t0), t0=t0)
        wall += tr.wall_time
        ts.append(tr.t[1:])
        qs.append(tr.q[1:])
        for k, a in tr.stats.items():
            stats.setdefault(k, []).append(np.asarray(a))
        if tr.status.value != "ok":
            status = tr.status.value
            break
        t0, q, v = float(tr.t[-1]), tr.q[-1], tr.qd[-1]
        if wall > max_wall and t0 < duration - 1e-9:
            status = "timeout"
            break
    return (np.concatenate(ts), np.vstack(qs), {k: np.concatenate(v) for k, v in stats.items()}, status, wall)


def run_ours(robot: str, method: str, task: str, dt: float, duration: float, native: bool = True,
             max_wall: float = float("inf")) -> dict:
    integrator, solver = METHODS[method]
    model, q0, offset = Q.robot(robot)
    kw = {} if solver is None else {"solver": solver, "max_halvings": 10, "solver_options": {"native": native}}
    sim = pbf.Simulator(model, integrator, dt=dt, forces=Q.forces(robot, model, task, offset,
                                                                  LAW.get(method, "stable_pd")),
                        on_failure="stop", **kw)
    t, q, st, status, wall = rollout_pieces(sim, q0, duration, max_wall)
    out = Q.outcomes(model, t, q, q0, task)
    row = {"robot": robot, "method": method, "task": task, "dt": dt, "wall": wall, "build": sim.build_time,
           "status": status, "t_end": float(t[-1]), **out,
           "stable": bool(status == "ok" and np.all(np.isfinite(q)) and out["tilt_deg"] < TILT_LIMIT)}
    if solver is not None:
        row.update(iterations=float(np.mean(st["iterations"])), halvings=int(np.sum(st["halvings"])),
                   step_time=st["step_time"].tolist(), outer=st["iterations"].tolist(),
                   substep=(dt / 2.0 ** np.asarray(st["depth"])).tolist())
    return row


def run_peer(robot: str, task: str, dt: float, duration: float) -> dict | None:
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return None
    r = Q.run_mujoco(robot, task, dt, duration)
    out = Q.outcomes(r["model"], r["t"], r["q"], r["q0"], task)
    return {"robot": robot, "method": "mujoco", "task": task, "dt": dt, "wall": r["wall"],
            "status": "ok" if r["ok"] else "failed", "t_end": float(r["t"][-1]), "warnings": r["warnings"], **out,
            "stable": bool(r["ok"] and out["tilt_deg"] < TILT_LIMIT)}


def table_one(rows) -> dict:
    """Seed 001 Table I: std across dt of walking distance / jump height per (robot, method), stable runs."""
    out = {}
    for r in rows:
        if not r.get("stable") or r.get("small"):
            continue
        key = (r["robot"], r["method"])
        qty = "walk_x" if r["task"] == "walk" else "jump_height"
        out.setdefault(key, {}).setdefault(qty, []).append(r[qty])
    return {f"{k[0]}/{k[1]}": {q: (float(np.std(v)) if len(v) > 1 else None, len(v)) for q, v in d.items()}
            for k, d in out.items()}


def consistent(rows, robot: str, method: str) -> dict | None:
    runs = sorted((r for r in rows if r["robot"] == robot and r["method"] == method and r["task"] == "walk"
                   and r.get("stable") and not r.get("small")), key=lambda r: r["dt"])
    if not runs or runs[0]["dt"] != min(DTS):
        return None
    ref = runs[0]["walk_x"]
    good = [r for r in runs if abs(r["walk_x"] - ref) <= 0.05 * abs(ref)]
    best = max(good, key=lambda r: r["dt"])
    return {"dt": best["dt"], "wall": best["wall"], "walk_x": best["walk_x"], "reference": ref}


def against_reference(rows, robot: str) -> dict:
    """The dt -> 0 answer (the smallest-dt stable run of the explicit-PD NE-MDP baseline, among the small-dt
    rows) and every stable grid run's walking distance / jump height as a fraction of it."""
    ref = {}
    for task, qty in (("walk", "walk_x"), ("jump", "jump_height")):
        small = sorted((r for r in rows if r["robot"] == robot and r["method"] == "ne_mdp_pd" and r["task"] == task
                        and r.get("small") and r["stable"]), key=lambda r: r["dt"])
        if small:
            ref[task] = {"dt": small[0]["dt"], "value": small[0][qty],
                         "runs": {f"{r['method']}/{1e3 * r['dt']:g}": r[qty] / small[0][qty]
                                  for r in rows if r["robot"] == robot and r["task"] == task and r["stable"]
                                  and not r.get("small") and np.isfinite(r.get(qty, np.nan))}}
    return ref


def summary(values) -> str:
    a = np.asarray(values, float)
    if a.size == 0:
        return "-"
    return f"median {np.median(a):.3g}, 10% {np.percentile(a, 10):.3g}, 90% {np.percentile(a, 90):.3g}"


def plot(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    at50 = [r for r in rows if r["dt"] == 0.05 and "outer" in r]
    for r in at50:
        label = f"{r['robot']} {r['method']} {r['task']}"
        ax[0, 0].hist(1.0 / np.maximum(np.asarray(r["step_time"]), 1e-9), bins=30, alpha=0.5, label=label)
        ax[0, 1].hist(r["outer"], bins=30, alpha=0.5, label=label)
        ax[1, 1].plot(np.arange(len(r["substep"])) * 0.05, r["substep"], label=label)
    ax[0, 0].set(title="(a) frame rate at dt = 50 ms", xlabel="1 / wall time per step (Hz)")
    ax[0, 1].set(title="(b) outer iterations per step at dt = 50 ms", xlabel="iterations")
    ax[1, 1].set(title="(d) smallest substep of Alg. 2 at dt = 50 ms", xlabel="t (s)", ylabel="alpha dt (s)")
    for method, task in sorted({(r["method"], r["task"]) for r in rows if "outer" in r}):
        pts = sorted((r["dt"], r["iterations"]) for r in rows
                     if r["method"] == method and r["task"] == task and "iterations" in r)
        if pts:
            ax[1, 0].plot(*zip(*pts), "o-", label=f"{method} {task}")
    ax[1, 0].set(title="(c) mean outer iterations against dt", xlabel="dt (s)", ylabel="iterations")
    for a in ax.ravel():
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    global DTS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--robots", nargs="+", default=["solo12"], choices=["solo12", "spider"])
    ap.add_argument("--tasks", nargs="+", default=["walk", "jump"], choices=["walk", "jump"])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--dts", nargs="+", type=float, default=list(DTS))
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--budget", type=float, default=420.0,
                    help="wall seconds (building included) after which runs stop and the rest are skipped")
    ap.add_argument("--max-run-seconds", type=float, default=40.0,
                    help="wall seconds after which one run stops (status 'timeout', not counted as stable)")
    ap.add_argument("--vm", action="store_true", help="evaluate the NMDP functions in the CasADi VM, not as "
                                                      "generated C (pgm's native option)")
    ap.add_argument("--small-dts", nargs="*", type=float, default=list(SMALL_DTS),
                    help="dts below the grid run for the NE-MDP baselines only (printed apart)")
    ap.add_argument("--quick", action="store_true", help="solo12, 0.4 s, dt 5 and 50 ms, first-order methods, VM")
    args = ap.parse_args(argv)
    if args.quick:
        args.robots, args.duration, args.dts = ["solo12"], 0.4, [0.005, 0.05]
        args.methods = [m for m in args.methods if "zo" not in m]
        args.vm, args.small_dts = True, []
    DTS = tuple(sorted(args.dts))
    print(f"QUADRUPED-TRACK: {args.duration:g} s per run (seed 001: 10 s), robots {args.robots}, dt {list(DTS)}, "
          f"budget {args.budget:g} s")
    rows, skipped = [], []
    start = time.perf_counter()
    hdr = f"{'robot':7s} {'task':5s} {'method':11s} {'dt ms':>6s} {'stable':>6s} {'tilt':>6s} {'walk x':>8s} " \
          f"{'jump h':>8s} {'wall s':>8s} {'iters':>6s} {'halv':>5s}"
    print(hdr)
    # the zeroth-order variants last: where the budget runs out, it cuts them first
    methods = sorted(args.methods, key=lambda m: "zo" in m)
    for robot in args.robots:
        for method in methods:
            for task in args.tasks:
                small = sorted(args.small_dts) if method.startswith("ne_mdp") else []
                for dt in small + list(DTS):
                    if "zo" in method and not args.quick and dt not in ZERO_ORDER_DTS and len(DTS) > 2:
                        continue
                    if time.perf_counter() - start > args.budget:
                        skipped.append(f"{robot}/{task}/{method}/{dt:g}")
                        continue
                    r = run_peer(robot, task, dt, args.duration) if method == "mujoco" else \
                        run_ours(robot, method, task, dt, args.duration, native=not args.vm,
                                 max_wall=min(args.max_run_seconds,
                                              max(args.budget - (time.perf_counter() - start), 1.0)))
                    if r is None:
                        continue
                    r["small"] = dt in small and dt not in DTS
                    rows.append(r)
                    print(f"{robot:7s} {task:5s} {method:11s} {1e3 * dt:6.2f} {str(r['stable']):>6s} "
                          f"{r['tilt_deg']:6.1f} {r['walk_x']:8.3f} {r.get('jump_height', float('nan')):8.3f} "
                          f"{r['wall']:8.2f} {r.get('iterations', float('nan')):6.1f} {r.get('halvings', 0):5d}",
                          flush=True)
    print("\nStable or not per method and task (dt in ms; stable: ended ok, finite, tilt < 60 deg):")
    for robot in args.robots:
        for method in args.methods:
            for task in args.tasks:
                mine = sorted((r for r in rows if (r["robot"], r["method"], r["task"]) == (robot, method, task)),
                              key=lambda r: r["dt"])
                if mine:
                    yes = [f"{1e3 * r['dt']:g}" for r in mine if r["stable"]]
                    no = [f"{1e3 * r['dt']:g} ({r['status']})" for r in mine if not r["stable"]]
                    print(f"  {robot}/{method}/{task}: stable at {', '.join(yes) or '-'}; not at {', '.join(no) or '-'}")
    print("\nTable I (std across the grid's dt of stable runs; n = runs):")
    t1 = table_one(rows)
    for key, d in sorted(t1.items()):
        parts = [f"{q} {('%.3f' % s) if s is not None else '-'} (n={n})" for q, (s, n) in d.items()]
        print(f"  {key:22s} " + ", ".join(parts))
    print("\nTime to a consistent answer (walk distance within 5% of the method's own 5 ms result):")
    cons = {}
    for robot in args.robots:
        for method in args.methods:
            c = consistent(rows, robot, method)
            cons[f"{robot}/{method}"] = c
            if c:
                print(f"  {robot}/{method:11s} dt {c['dt']:.3f}  wall {c['wall']:.2f} s  walk {c['walk_x']:.3f} m "
                      f"(5 ms: {c['reference']:.3f} m)")
            else:
                print(f"  {robot}/{method:11s} no stable 5 ms walk run")
        a, b = cons.get(f"{robot}/pbd_nmdp"), cons.get(f"{robot}/mujoco")
        if a and b:
            print(f"  {robot}: PBD-NMDP / MuJoCo wall time at their consistent dt: {a['wall'] / b['wall']:.3g}")
    print("\nAgainst the dt -> 0 answer (NE-MDP with the PD at the step's start, its smallest stable dt):")
    refs = {}
    for robot in args.robots:
        refs[robot] = against_reference(rows, robot)
        if not refs[robot]:
            print(f"  {robot}: no stable small-dt run of ne_mdp_pd")
        for task, d in refs[robot].items():
            runs = ", ".join(f"{k} {v:.2f}" for k, v in d["runs"].items())
            print(f"  {robot}/{task}: {d['value']:.3f} m at {1e3 * d['dt']:g} ms; fraction of it per method/dt ms: "
                  f"{runs}")
    print("\nFig. 6 at dt = 50 ms:")
    for r in rows:
        if r["dt"] == 0.05 and "outer" in r:
            rate = 1.0 / np.maximum(np.asarray(r["step_time"]), 1e-9)
            print(f"  {r['robot']}/{r['method']}/{r['task']}: frame rate (Hz) {summary(rate)}; outer iterations "
                  f"{summary(r['outer'])}; smallest substep (s) {summary(r['substep'])}, min {min(r['substep']):.4g}")
    if skipped:
        print(f"\nSkipped (budget of {args.budget:g} s spent): {', '.join(skipped)}")
    path = write_json("quadruped_track.json", {"duration": args.duration, "rows": rows, "table_one": t1,
                                          "consistent": cons, "reference": refs, "skipped": skipped})
    png = out_path("quadruped_track.png")
    plot(rows, png)
    print(f"\nwrote {path} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
