"""Symbolic scaling of the PBAD inertia integral (seed 000 §5, Alg. 1-3; DESIGN.md "Math pointers").

For CHAIN-N (N = 10, 20, 40, 80, 160) this builds I(qa, qb), its gradient dI/dqb and its Hessian
d2I/dqb2 as CasADi SX functions and prints, for each: the graph size (instructions), the evaluation time
per call (median, amortised over a batch of evaluations so Python overhead does not count) and the
graph build time; then the fitted growth exponent in N (expected about 1, 1 and 2).

    python benchmarks/symbolic_scaling.py [--sizes 10 20 40 80 160] [--batch 64]

Writes ``symbolic_scaling.json`` and ``symbolic_scaling.png`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT``
(benchmarks/_common.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import casadi as ca
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import growth_exponent, median_time, out_path, write_json  # noqa: E402

import pbframework as pbf  # noqa: E402
from pbframework import inertia  # noqa: E402


def build(n: int) -> dict:
    model = pbf.models.chain(n)
    qa, qb = ca.SX.sym("qa", model.nq), ca.SX.sym("qb", model.nq)
    out = {}
    t0 = time.perf_counter()
    expr = inertia.inertia_integral_expr(model, qa, qb)
    f = ca.Function("I", [qa, qb], [expr])
    out["I"] = (f, time.perf_counter() - t0)
    t0 = time.perf_counter()
    g = ca.gradient(expr, qb)
    out["grad"] = (ca.Function("gradI", [qa, qb], [g]), time.perf_counter() - t0)
    t0 = time.perf_counter()
    H = ca.jacobian(g, qb)
    out["hess"] = (ca.Function("hessI", [qa, qb], [H]), time.perf_counter() - t0)
    return model, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 40, 80, 160])
    ap.add_argument("--batch", type=int, default=64, help="evaluations per timed call (amortises overhead)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'N':>5} {'nq':>5} | {'what':<5} {'instructions':>12} {'eval/call [us]':>15} {'build [s]':>10}")
    for n in args.sizes:
        model, fns = build(n)
        QA = rng.normal(size=(model.nq, args.batch))
        QB = rng.normal(size=(model.nq, args.batch))
        for what, (f, build_s) in fns.items():
            fm = f.map(args.batch, "serial")
            t = median_time(lambda: fm(QA, QB), repeats=5, min_time=0.05) / args.batch
            rows.append(dict(N=n, nq=model.nq, what=what, instructions=f.n_instructions(), eval_s=t,
                             build_s=build_s))
            print(f"{n:>5} {model.nq:>5} | {what:<5} {f.n_instructions():>12} {t * 1e6:>15.2f} {build_s:>10.3f}")
    print()
    fits = {}
    print(f"{'what':<5} {'instructions ~ N^k':>20} {'eval time ~ N^k':>17} {'expected':>9}")
    for what, expected in (("I", 1), ("grad", 1), ("hess", 2)):
        sel = [r for r in rows if r["what"] == what]
        ns = [r["N"] for r in sel]
        k_nodes = growth_exponent(ns, [r["instructions"] for r in sel])
        k_time = growth_exponent(ns, [r["eval_s"] for r in sel])
        fits[what] = dict(nodes=k_nodes, time=k_time, expected=expected)
        print(f"{what:<5} {k_nodes:>20.2f} {k_time:>17.2f} {expected:>9}")
    path = write_json("symbolic_scaling.json", dict(rows=rows, fits=fits))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(10, 4))
        for what in ("I", "grad", "hess"):
            sel = [r for r in rows if r["what"] == what]
            ax[0].loglog([r["N"] for r in sel], [r["instructions"] for r in sel], "o-", label=what)
            ax[1].loglog([r["N"] for r in sel], [r["eval_s"] * 1e6 for r in sel], "o-", label=what)
        ax[0].set(xlabel="links N", ylabel="CasADi instructions", title="graph size")
        ax[1].set(xlabel="links N", ylabel="eval time per call [us]", title="evaluation (CasADi VM)")
        for a in ax:
            a.legend()
            a.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(out_path("symbolic_scaling.png"), dpi=120)
    except ImportError:
        pass
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
