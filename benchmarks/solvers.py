"""Seed 000 Fig. 3: LM against L-BFGS for PBAD order 2.

(a, b) iterations per step on CHAIN-10 and CHAIN-40 at dt = 0.05 s, for both objectives of seed 000:
       Eq. 5 (the energy; ``lm`` = exact-Hessian LM, ``lbfgs``) and Eq. 7 (the residual; ``jtj_lm`` =
       the paper's J^T J LM, ``lbfgs``);
(c)    mean time per step against the number of links N = 10..40 (dt = 0.05), with the fitted growth
       exponent ``time ~ N^p``, and the same per solver iteration (the first steps of a longer chain need
       more iterations: CHAIN-40 with ``lm`` needs 3-8 per step at first and 66-233 at t ~ 1.9 s);
(d)    mean time per step against dt = 0.001 .. 0.128 s on CHAIN-10.

The peer is the solver pair itself: the script prints the LBFGS / LM ratios of iterations and of time the
figure is about. All solves use the default tolerances (``lm`` / ``jtj_lm`` gtol 1e-10, ``lbfgs`` gtol 1e-8,
on the dt^2-scaled objectives; see plugins/solvers/).

Usage::

    python benchmarks/solvers.py            # (a, b): 10 s; (c), (d): 40 steps per point
    python benchmarks/solvers.py --quick    # (a, b): 2 s; (c), (d) 15 steps per point, fewer points
    python benchmarks/solvers.py --parts c,d --name solvers_cd   # only (c) and (d)
    python benchmarks/solvers.py --backend casadi   # CasADi VM with the Python solver loop (default: c)
    python benchmarks/solvers.py --ab-chains 3 --c-sizes 3 5 --d-chain 3 --d-dts 0.01 0.05 \
        --duration 0.2 --steps 4                   # tiny (tests/test_benchmarks.py)

Writes ``<name>.json`` and ``<name>.png`` (``--name``, default ``solvers``) to ``benchmarks/out/`` or
``$PBF_BENCH_OUT`` (benchmarks/_common.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import pbframework as pbf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import OUT  # noqa: E402  (same folder)

VARIANTS = {          # label: (solver, objective)
    "LM / Eq.5": ("lm", "energy"),
    "LBFGS / Eq.5": ("lbfgs", "energy"),
    "JtJ-LM / Eq.7": ("jtj_lm", "residual"),
    "LBFGS / Eq.7": ("lbfgs", "residual"),
}


BACKEND = "c"
"""Backend of every run (``--backend``): the generated C driver runs all three solvers natively."""


def rollout(n: int, dt: float, solver: str, objective: str, duration=None, steps=None) -> dict:
    model = pbf.models.chain(n)
    t0 = time.perf_counter()
    sim = pbf.Simulator(model, "pbad", order=2, solver=solver, objective=objective, dt=dt, backend=BACKEND,
                        on_failure="continue", energy_limit=None)
    build = time.perf_counter() - t0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = sim.rollout(pbf.models.chain_q0(model), None, duration=duration, steps=steps)
    it = tr.stats["iterations"]
    return {"n": n, "dt": dt, "solver": solver, "objective": objective, "steps": tr.steps,
            "iterations": it.tolist(), "mean_iter": float(it.mean()), "median_iter": float(np.median(it)),
            "max_iter": int(it.max()), "unconverged": int((~tr.stats["converged"]).sum()),
            "halvings": int(tr.stats["halvings"].sum()), "time_per_step": tr.wall_time / max(tr.steps, 1),
            "build": build, "diverged": tr.diverged, "energy_rise": tr.energy_rise()}


def part_ab(chains, duration) -> dict:
    out = {}
    for n in chains:
        print(f"\n(a/b) CHAIN-{n}, dt = 0.05 s, {duration:g} s")
        print(f"{'variant':<16}{'mean it':>9}{'median':>8}{'max':>6}{'unconv':>8}{'halv':>6}{'ms/step':>10}"
              f"{'rise %':>9}")
        rows = {}
        for label, (solver, objective) in VARIANTS.items():
            r = rollout(n, 0.05, solver, objective, duration=duration)
            rows[label] = r
            print(f"{label:<16}{r['mean_iter']:>9.3g}{r['median_iter']:>8.3g}{r['max_iter']:>6}"
                  f"{r['unconverged']:>8}{r['halvings']:>6}{1e3 * r['time_per_step']:>10.3g}"
                  f"{r['energy_rise']:>+9.3g}", flush=True)
        for eq in ("5", "7"):
            lm = rows["LM / Eq.5" if eq == "5" else "JtJ-LM / Eq.7"]
            lb = rows[f"LBFGS / Eq.{eq}"]
            print(f"Eq.{eq}: LBFGS / LM  iterations {lb['mean_iter'] / lm['mean_iter']:.3g}x, "
                  f"time per step {lb['time_per_step'] / lm['time_per_step']:.3g}x")
        out[n] = rows
    return out


def part_c(ns, steps) -> dict:
    print(f"\n(c) time per step against N (dt = 0.05 s, {steps} steps each)")
    out = {}
    for label in ("LM / Eq.5", "LBFGS / Eq.5", "JtJ-LM / Eq.7"):
        solver, objective = VARIANTS[label]
        rows = [rollout(n, 0.05, solver, objective, steps=steps) for n in ns]
        t = np.array([r["time_per_step"] for r in rows])
        p = float(np.polyfit(np.log(ns), np.log(t), 1)[0])
        it = [r["mean_iter"] for r in rows]
        # per iteration (the algorithm's cost, free of how many iterations the first steps of a longer
        # chain happen to need)
        ti = t / np.maximum(it, 1e-300)
        pi = float(np.polyfit(np.log(ns), np.log(ti), 1)[0])
        print(f"{label:<16} ms/step " + " ".join(f"N={n}:{1e3 * x:.3g}" for n, x in zip(ns, t))
              + f"   fitted growth time ~ N^{p:.2f}   (iterations/step {min(it):.3g}..{max(it):.3g})",
              flush=True)
        print(f"{'':<16} ms/iter " + " ".join(f"N={n}:{1e3 * x:.3g}" for n, x in zip(ns, ti))
              + f"   fitted growth time per iteration ~ N^{pi:.2f}", flush=True)
        out[label] = {"n": list(ns), "time_per_step": t.tolist(), "mean_iter": it, "growth_exponent": p,
                      "time_per_iteration": ti.tolist(), "iteration_growth_exponent": pi}
    return out


def part_d(n, dts, steps) -> dict:
    print(f"\n(d) time per step against dt (CHAIN-{n}, {steps} steps each)")
    out = {}
    for label in ("LM / Eq.5", "LBFGS / Eq.5"):
        solver, objective = VARIANTS[label]
        rows = [rollout(n, dt, solver, objective, steps=steps) for dt in dts]
        t = [r["time_per_step"] for r in rows]
        print(f"{label:<16} ms/step " + " ".join(f"{dt:g}:{1e3 * x:.3g}" for dt, x in zip(dts, t))
              + f"   max/min {max(t) / min(t):.2f}", flush=True)
        out[label] = {"dt": list(dts), "time_per_step": t, "mean_iter": [r["mean_iter"] for r in rows]}
    return out


def plot(ab, c, d, d_chain, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.2))
    for ax, (n, rows), tag in zip(axes[:2], ab.items(), "ab"):
        for label, r in rows.items():
            ax.plot(np.arange(1, len(r["iterations"]) + 1) * 0.05, r["iterations"], label=label, lw=0.9)
        ax.set_yscale("log")
        ax.set_title(f"({tag}) CHAIN-{n}, dt=0.05: iterations per step")
        ax.set_xlabel("t [s]")
        ax.legend(fontsize=7)
    for label, r in c.items():
        line, = axes[2].loglog(r["n"], np.array(r["time_per_step"]) * 1e3, "o-",
                               label=f"{label} per step (~N^{r['growth_exponent']:.2f})")
        axes[2].loglog(r["n"], np.array(r["time_per_iteration"]) * 1e3, "x--", color=line.get_color(),
                       label=f"{label} per iteration (~N^{r['iteration_growth_exponent']:.2f})")
    axes[2].set_title("(c) time per step and per iteration against N")
    axes[2].set_xlabel("N links")
    axes[2].set_ylabel("ms")
    if c:
        axes[2].legend(fontsize=7)
    for label, r in d.items():
        axes[3].semilogx(r["dt"], np.array(r["time_per_step"]) * 1e3, "o-", label=label)
    axes[3].set_title(f"(d) time per step against dt (CHAIN-{d_chain})")
    axes[3].set_xlabel("dt [s]")
    if d:
        axes[3].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--parts", default="ab,c,d", help="which parts to run (default ab,c,d)")
    ap.add_argument("--name", default="solvers", help="output file stem in the output folder")
    ap.add_argument("--backend", choices=("c", "casadi"), default="c",
                    help="c (generated C driver, default) or casadi (VM, Python solver loop)")
    ap.add_argument("--ab-chains", type=int, nargs="+", default=[10, 40], help="N of (a, b) (default 10 40)")
    ap.add_argument("--c-sizes", type=int, nargs="+", default=None,
                    help="N of (c) (default 10 15 .. 40; quick 10 20 30 40)")
    ap.add_argument("--d-chain", type=int, default=10, help="N of (d) (default 10)")
    ap.add_argument("--d-dts", type=float, nargs="+", default=None,
                    help="dt of (d) (default 0.001 0.002 .. 0.128; quick 0.001 0.004 0.016 0.064 0.128)")
    ap.add_argument("--duration", type=float, default=None, help="simulated seconds of (a, b) (default 10; quick 2)")
    ap.add_argument("--steps", type=int, default=None, help="steps per point of (c) and (d) (default 40; quick 15)")
    args = ap.parse_args(argv)
    global BACKEND
    BACKEND = args.backend
    parts = set(args.parts.split(","))
    if not parts <= {"ab", "c", "d"}:
        ap.error(f"--parts: choose from ab, c, d (got {args.parts!r})")
    duration = args.duration or (2.0 if args.quick else 10.0)
    steps = args.steps or (15 if args.quick else 40)
    ns = args.c_sizes or ([10, 20, 30, 40] if args.quick else [10, 15, 20, 25, 30, 35, 40])
    dts = args.d_dts or ([0.001, 0.004, 0.016, 0.064, 0.128] if args.quick else
                         [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128])
    OUT.mkdir(parents=True, exist_ok=True)
    ab = part_ab(args.ab_chains, duration) if "ab" in parts else {}
    c = part_c(ns, steps) if "c" in parts else {}
    d = part_d(args.d_chain, dts, steps) if "d" in parts else {}
    png, js = OUT / f"{args.name}.png", OUT / f"{args.name}.json"
    plot(ab, c, d, args.d_chain, png)
    js.write_text(json.dumps({"backend": BACKEND, "ab": {str(k): v for k, v in ab.items()}, "c": c, "d": d},
                             indent=1))
    print(f"\nwrote {png} and {js}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
