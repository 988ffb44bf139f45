"""Work-precision on CHAIN-10 (DESIGN.md, 10 s): wall time against energy error for every integrator and dt.

Energy error is DESIGN.md's ``max_t |E(t) - E(0)|`` in percent of ``M g sum (i + 0.5) L``; a rollout that
diverges (non-finite state or |qd| > 1e4) counts as failed. pbframework runs forward Euler,
semi-implicit Euler, RK2, RK3 and RK4 on ABA, PBAD order 2 (``lm``) and PBAD order 3 (``jtj_lm``); MuJoCo's
RK4 and Euler run in the same process on the same MJCF chain (identical coordinates; energies evaluated
with pbframework's exact energy function) when ``mujoco`` is installed.

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
}
MUJOCO = {"mujoco_rk4": ("RK4", [0.0005, 0.001, 0.0025, 0.005, 0.01]),
          "mujoco_euler": ("Euler", [0.0005, 0.001, 0.0025, 0.005])}
BUDGETS = (1.0, 10.0, 50.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--backend", choices=("c", "casadi"), default="c")
    ap.add_argument("--links", type=int, default=10, help="CHAIN-N (default 10)")
    ap.add_argument("--largest-dts", type=int, default=None,
                    help="run only this many of the largest dt of each method (default: all)")
    args = ap.parse_args(argv)
    opts = RunOptions(backend=args.backend)
    duration = args.duration or (2.0 if args.quick else 10.0)
    n = args.links
    model = pbf.models.chain(n)
    scale = pbf.models.chain_energy_scale(model)
    energy_fn = pbf.Simulator(model, "rk4", dt=0.01).energy
    rows = []
    print(f"CHAIN-{n}, {duration:g} s; energy error in % of {scale:.1f} J")
    print(f"{'method':<22}{'dt [s]':>8}{'wall [s]':>10}{'error %':>12}{'iter/step':>10}")

    def show(r):
        err = "diverged" if r["diverged"] else f"{r['error']:.4g}"
        print(f"{r['method']:<22}{r['dt']:>8.4g}{r['wall']:>10.3g}{err:>12}{r['iterations']:>10.3g}", flush=True)

    def grid(dts):
        return sorted(dts)[-args.largest_dts:] if args.largest_dts else dts

    for method, (integ, order, solver, dts) in GRID.items():
        for dt in grid(dts):
            r = run_pbf(opts, model, integ, dt, duration, order=order, solver=solver)
            r["method"] = method
            rows.append(r)
            show(r)
    for method, (mj_int, dts) in MUJOCO.items():
        for dt in grid(dts):
            r = run_mujoco(n, dt, duration, mj_int, energy_fn, scale)
            if r is None:
                print("mujoco not installed: peer skipped")
                break
            r["method"] = method
            rows.append(r)
            show(r)
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
    (OUT / "work_precision.json").write_text(json.dumps({"links": n, "duration": duration, "scale": scale,
                                                         "rows": slim, "summary": summary}, indent=1, default=str))
    print(f"\nwrote {OUT / 'work_precision.png'} and {OUT / 'work_precision.json'}")
    return 0


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
