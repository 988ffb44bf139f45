"""Work-precision on CHAIN-10 (DESIGN.md, 10 s): wall time against energy error for every integrator and dt.

Energy error is DESIGN.md's ``max_t |E(t) - E(0)|`` in percent of ``M g sum (i + 0.5) L``; a rollout that
diverges (non-finite state or |qd| > 1e4) counts as failed. pbframework runs forward Euler,
semi-implicit Euler, RK2, RK3 and RK4 on ABA, PBAD order 2 (``lm``) and PBAD order 3 (``jtj_lm``); MuJoCo's
RK4 and Euler run in the same process on the same MJCF chain (identical coordinates; energies evaluated
with pbframework's exact energy function) when ``mujoco`` is installed.

Adaptive rows (``pbad2_adaptive`` ... ``pbad4_adaptive``): PBAD with adaptive step-size control
(:mod:`pbframework.adaptive`) at each ``--rtols`` tolerance, output every 0.05 s, on the same backend as
the fixed-step rows (generated C by default: the driver's adaptive loop, ``pbf_adaptive.c``). Each adaptive row is paired with the fastest MuJoCo RK4 run of this same run whose
energy error is at most the adaptive row's, and the ratio of wall times is printed (no target: a
measurement). The default tolerance grid is 1e-3 .. 1e-7 for orders 3 and 4 and stops at 1e-6 for order 2
(its error is O(h^2), so its steps grow as rtol^-1/2: ~2e5 steps of 10 s at 1e-7). On ``--backend casadi``
the grid stops two decades earlier (the VM's Python loop is 10-50x slower per step).

The summary gives, per error budget (1%, 10%, 50%), the fastest configuration of each method that meets it
and its wall-time ratio to MuJoCo RK4's fastest one. pbframework runs as generated C by default (one
native call per rollout; ``--backend casadi`` for the CasADi virtual machine with the Python solver loop,
whose results agree to rounding and whose wall times are 10-50x longer). Wall time is the rollout alone;
building (and, on a cold cache, compiling) is not counted.

Usage::

    python benchmarks/work_precision.py           # 10 s rollouts
    python benchmarks/work_precision.py --quick   # 2 s rollouts, fewer steps
    python benchmarks/work_precision.py --backend casadi
    python benchmarks/work_precision.py --links 3 --duration 0.2 --largest-dts 2   # tiny (the tests)

Writes ``work_precision.json`` and ``work_precision.png`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT``
(benchmarks/_common.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

import pbframework as pbf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import OUT  # noqa: E402
from energy import RunOptions, run_mujoco, run_pbf  # noqa: E402  (same folder, shared helpers)

GRID = {   # method: (integrator, order, solver, dts)
    "forward_euler": ("forward_euler", None, "auto", [0.0005, 0.001, 0.0025]),
    "semi_implicit_euler": ("semi_implicit_euler", None, "auto", [0.0005, 0.001, 0.0025, 0.005]),
    "rk2": ("rk2", None, "auto", [0.0005, 0.001, 0.0025, 0.005, 0.01]),
    "rk3": ("rk3", None, "auto", [0.0005, 0.001, 0.0025, 0.005, 0.01]),
    "rk4": ("rk4", None, "auto", [0.0005, 0.001, 0.0025, 0.005, 0.01]),
    "pbad2": ("pbad", 2, "lm", [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1]),
    "pbad3": ("pbad", 3, "jtj_lm", [0.0025, 0.005, 0.01, 0.025]),
    "pbad4": ("pbad", 4, "jtj_lm", [0.005, 0.01, 0.025, 0.05]),
}
ADAPTIVE = {2: [1e-3, 1e-4, 1e-5, 1e-6], 3: [1e-3, 1e-4, 1e-5, 1e-6, 1e-7], 4: [1e-3, 1e-4, 1e-5, 1e-6, 1e-7]}
"""Adaptive PBAD: order -> rtol grid (``--rtols`` replaces every order's grid; the casadi backend drops the
grid's last two tolerances)."""
ADAPTIVE_OUTPUT_DT = 0.05
MUJOCO = {"mujoco_rk4": ("RK4", [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01]),
          "mujoco_euler": ("Euler", [0.0005, 0.001, 0.0025, 0.005])}
BUDGETS = (1.0, 10.0, 50.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--backend", choices=("c", "casadi"), default="c")
    ap.add_argument("--links", type=int, default=10, help="CHAIN-N (default 10)")
    ap.add_argument("--joint", choices=("ball2", "ball"), default="ball2",
                    help="CHAIN-N's joints: ball2 (the papers': hinge y then z) or ball (a quaternion, 3 DOF); "
                         "MuJoCo's chain uses the same joints")
    ap.add_argument("--largest-dts", type=int, default=None,
                    help="run only this many of the largest dt of each method (default: all)")
    ap.add_argument("--rtols", default=None,
                    help="comma list of adaptive tolerances for every order (default: a grid per order, see "
                         "ADAPTIVE); 'none' skips the adaptive rows")
    ap.add_argument("--adaptive-orders", default="2,3,4", help="orders of the adaptive rows (default 2,3,4)")
    args = ap.parse_args(argv)
    opts = RunOptions(backend=args.backend)
    duration = args.duration or (2.0 if args.quick else 10.0)
    n = args.links
    model = pbf.models.chain(n, args.joint)
    scale = pbf.models.chain_energy_scale(model)
    energy_fn = pbf.Simulator(model, "semi_implicit_euler", dt=0.01).energy   # exact T + V of (q, qd)
    rows = []
    print(f"CHAIN-{n} ({args.joint} joints), {duration:g} s; energy error in % of {scale:.1f} J")
    print(f"{'method':<22}{'dt [s]':>8}{'wall [s]':>10}{'error %':>12}{'iter/step':>10}")

    def show(r):
        err = "diverged" if r["diverged"] else f"{r['error']:.4g}"
        print(f"{r['method']:<22}{r['dt']:>8.4g}{r['wall']:>10.3g}{err:>12}{r['iterations']:>10.3g}", flush=True)

    def grid(dts):
        return sorted(dts)[-args.largest_dts:] if args.largest_dts else dts

    for method, (integ, order, solver, dts) in GRID.items():
        if model.on_group and not pbf.step.integrator_info(integ).meta.get("group", False):
            print(f"{method:<22}skipped: {integ} does not step on the rotation group yet (ball joints)")
            continue
        for dt in grid(dts):
            r = run_pbf(opts, model, integ, dt, duration, order=order, solver=solver)
            r["method"] = method
            rows.append(r)
            show(r)
    if args.rtols != "none":
        for order in [int(o) for o in args.adaptive_orders.split(",") if o]:
            if args.rtols is None:
                rtols = ADAPTIVE.get(order, [])[:None if args.backend == "c" else -2]
            else:
                rtols = [float(r) for r in args.rtols.split(",")]
            for rtol in rtols:
                r = run_adaptive(model, order, rtol, duration, args.backend)
                rows.append(r)
                show(r)
    for method, (mj_int, dts) in MUJOCO.items():
        for dt in grid(dts):
            r = run_mujoco(n, dt, duration, mj_int, energy_fn, scale, joint=args.joint)
            if r is None:
                print("mujoco not installed: peer skipped")
                break
            r["method"] = method
            rows.append(r)
            show(r)
    adaptive_ratios(rows)
    print("\nfastest configuration within each error budget (ratio = wall / MuJoCo RK4's fastest)")
    summary = {}
    methods = list(GRID) + [m for m in MUJOCO if any(r["method"] == m for r in rows)]
    for budget in BUDGETS:
        best = {}
        for m in methods:
            ok = [r for r in rows if r["method"] == m and not r["diverged"] and r["error"] <= budget]
            if ok:
                best[m] = min(ok, key=lambda r: r["wall"])
        ref = best.get("mujoco_rk4")
        parts = []
        for m in methods:
            if m in best:
                b = best[m]
                ratio = f", x{b['wall'] / ref['wall']:.3g}" if ref else ""
                parts.append(f"{m} dt={b['dt']:g} {b['wall']:.3g}s{ratio}")
            else:
                parts.append(f"{m} none")
        print(f"  <= {budget:g}%: " + "; ".join(parts))
        summary[str(budget)] = {m: {"dt": b["dt"], "wall": b["wall"], "error": b["error"]} for m, b in best.items()}
    plot(rows, OUT / "work_precision.png", n, duration)
    OUT.mkdir(parents=True, exist_ok=True)
    slim = [{k: v for k, v in r.items() if k not in ("t", "E")} for r in rows]
    (OUT / "work_precision.json").write_text(json.dumps({"links": n, "joint": args.joint, "duration": duration,
                                                         "scale": scale,
                                                         "rows": slim, "summary": summary}, indent=1, default=str))
    print(f"\nwrote {OUT / 'work_precision.png'} and {OUT / 'work_precision.json'}")
    return 0


def run_adaptive(model, order: int, rtol: float, duration: float, backend: str = "c") -> dict:
    """One adaptive PBAD rollout, as a row of the table (``dt``: the tolerance; wall: the rollout alone)."""
    sim = pbf.Simulator(model, "pbad", order=order, dt=ADAPTIVE_OUTPUT_DT, adaptive={"rtol": rtol},
                        on_failure="continue", energy_limit=None, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = sim.rollout(pbf.models.chain_q0(model), duration=duration)
    ad = tr.info["adaptive"]
    return {"method": f"pbad{order}_adaptive", "dt": rtol, "rtol": rtol, "wall": tr.wall_time,
            "diverged": tr.diverged, "error": tr.energy_error(), "rise": tr.energy_rise(), "status": tr.status.value,
            "iterations": float(np.sum(tr.stats["iterations"])) / max(ad["accepted"], 1),
            "accepted": ad["accepted"], "rejected": ad["rejected"], "h_median": ad["h_median"],
            "backend": backend}


def adaptive_ratios(rows) -> None:
    """Each adaptive row against the fastest MuJoCo RK4 run at an energy error no larger (same run)."""
    mj = [r for r in rows if r["method"] == "mujoco_rk4" and not r["diverged"]]
    ad = [r for r in rows if r["method"].endswith("_adaptive")]
    if not ad:
        return
    print(f"\nadaptive PBAD ({ad[0]['backend']} backend) against MuJoCo RK4 at equal or smaller energy error (same run)")
    print(f"{'method':<18}{'rtol':>8}{'error %':>11}{'accepted':>10}{'rejected':>9}{'h median':>10}{'wall [s]':>10}"
          f"{'MuJoCo dt':>11}{'MuJoCo %':>10}{'MuJoCo wall':>12}{'ratio':>9}")
    for r in ad:
        good = [m for m in mj if m["error"] <= r["error"]] if not r["diverged"] else []
        best = min(good, key=lambda m: m["wall"]) if good else None
        tail = (f"{best['dt']:>11g}{best['error']:>10.3g}{best['wall']:>12.3g}{r['wall'] / best['wall']:>9.3g}"
                if best else f"{'none as accurate':>42}")
        r["mujoco_ratio"] = r["wall"] / best["wall"] if best else None
        err = "diverged" if r["diverged"] else f"{r['error']:.3g}"
        print(f"{r['method']:<18}{r['rtol']:>8g}{err:>11}{r['accepted']:>10}{r['rejected']:>9}"
              f"{r['h_median'] or 0:>10.3g}{r['wall']:>10.3g}" + tail)


def plot(rows, path: Path, n: int, duration: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for m in dict.fromkeys(r["method"] for r in rows):
        pts = [(r["wall"], r["error"], r["dt"]) for r in rows if r["method"] == m and not r["diverged"]]
        if not pts:
            continue
        w, e, dts = zip(*pts)
        style = "s--" if m.startswith("mujoco") else "o-"
        ax.loglog(w, np.maximum(e, 1e-8), style, label=m)
        for wi, ei, di in zip(w, e, dts):
            ax.annotate(f"{di:g}", (wi, max(ei, 1e-8)), fontsize=6)
    ax.axhline(1.0, color="gray", lw=0.5)
    ax.set_xlabel(f"wall time for {duration:g} s [s]")
    ax.set_ylabel("energy error max|E-E0| [% of scale]")
    ax.set_title(f"CHAIN-{n} work-precision (labels: dt; diverged runs omitted)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
