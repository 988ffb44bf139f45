"""Native cost of a PBAD step against chain length: per step, per LM iteration, per gradient (backend c).

CHAIN-N for N = 10 .. 100, ``pbad`` order 2 (the energy of seed 000 Eq. 5) solved by ``lm``, compiled
with directional derivatives (the default for large N). Measured with the loops running in C (the caller
times one native call):

* ``gradient``: one evaluation of the objective and its gradient (reverse mode; O(N) expected, seed 000
  Table 1),
* ``LM iteration``: the exact Hessian assembled column block by column block plus one dense Cholesky
  solve (O(N^2) for the Hessian, O(N^3) for the factorisation: exponent 2-3 expected),
* ``step``: one full step (guess, solve, advance) averaged over a 0.5 s rollout at dt = 0.01 s from the
  benchmark's initial state, with its iterations per step.

Growth exponents are least-squares slopes of log(time) against log(N). The peer is the CasADi VM path of
the same step problem measured in the same run (``Simulator(backend="casadi")``), at the sizes where it
finishes in reasonable time.

    python benchmarks/step_cost.py [--sizes 10 20 40 70 100]

Writes ``step_cost.json`` and ``step_cost.png`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT``
(benchmarks/_common.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import growth_exponent, median_time, out_path, write_json  # noqa: E402

import pbframework as pbf  # noqa: E402


def reps_for(seconds_per_call: float, budget: float = 0.3) -> int:
    return int(max(3, min(10000, budget / max(seconds_per_call, 1e-7))))


def measure(n: int, dt: float, duration: float, vm_limit: int) -> dict:
    model = pbf.models.chain(n)
    q0 = pbf.models.chain_q0(model)
    t0 = time.perf_counter()
    sim = pbf.Simulator(model, "pbad", order=2, solver="lm", dt=dt, backend="c",
                        backend_options={"derivatives": "directional"})
    build = time.perf_counter() - t0
    r = sim.runner
    s = sim.initial_state(q0)
    p = np.asarray(sim.problem.params(s, 0.0, dt, np.zeros(0))).ravel()
    x = np.asarray(sim.problem.guess(p)).ravel()
    row = {"N": n, "nq": model.nq, "build_s": build, "cached": r.library.cached,
           "instructions": sum(r.plan.instructions.values())}
    for what in ("gradient", "hessian", "solve"):
        once = r.time_kernel(p, x, what, 3)
        row[what] = min(r.time_kernel(p, x, what, reps_for(once)) for _ in range(3))
    row["iteration"] = row["hessian"] + row["solve"]
    steps = int(round(duration / dt))
    best = None
    for _ in range(3):
        out = r.rollout(q0, np.zeros(model.nq), 0.0, dt, steps)
        best = out if best is None or out.wall_time < best.wall_time else best
    row["step"] = best.wall_time / max(best.steps_done, 1)
    row["iterations_per_step"] = float(best.iterations.mean())
    row["status"] = best.status
    if n <= vm_limit:                      # the CasADi VM peer on the same problem
        vm = pbf.Simulator(model, "pbad", order=2, solver="lm", dt=dt)
        pb = vm.problem
        row["vm_gradient"] = median_time(lambda: pb.gradient(x, p), repeats=5, min_time=0.05)
        row["vm_hessian"] = median_time(lambda: pb.hessian(x, p), repeats=5, min_time=0.05)
        tr = vm.rollout(q0, steps=min(steps, 20))
        row["vm_step"] = tr.wall_time / max(tr.steps, 1)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 40, 70, 100])
    ap.add_argument("--dt", type=float, default=0.01)
    ap.add_argument("--duration", type=float, default=0.5)
    ap.add_argument("--vm-limit", type=int, default=40, help="largest N also measured on the CasADi VM")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    rows = []
    for n in args.sizes:
        row = measure(n, args.dt, args.duration, args.vm_limit)
        rows.append(row)
        print(f"  CHAIN-{n}: built in {row['build_s']:.1f} s ({'cache hit' if row['cached'] else 'compiled'}), "
              f"{row['iterations_per_step']:.2f} LM iterations per step", flush=True)
    ns = [r["N"] for r in rows]
    expo = {k: growth_exponent(ns, [r[k] for r in rows]) for k in ("gradient", "hessian", "iteration", "step")}
    print("\nNative (backend c) time per call, pbad order 2 / lm, directional derivatives")
    print(f"{'N':>4s} {'nq':>4s} {'gradient':>10s} {'Hessian':>10s} {'Cholesky':>10s} {'LM iter':>10s} "
          f"{'step':>10s} {'it/step':>7s} | {'VM grad':>9s} {'VM Hess':>9s} {'VM step':>9s} {'step VM/c':>9s}")
    for r in rows:
        vm = (f"{r['vm_gradient'] * 1e6:8.0f}u {r['vm_hessian'] * 1e6:8.0f}u {r['vm_step'] * 1e6:8.0f}u "
              f"{r['vm_step'] / r['step']:9.1f}") if "vm_step" in r else f"{'-':>9s} {'-':>9s} {'-':>9s} {'-':>9s}"
        print(f"{r['N']:4d} {r['nq']:4d} {r['gradient'] * 1e6:9.1f}u {r['hessian'] * 1e6:9.1f}u "
              f"{r['solve'] * 1e6:9.1f}u {r['iteration'] * 1e6:9.1f}u {r['step'] * 1e6:9.1f}u "
              f"{r['iterations_per_step']:7.2f} | {vm}")
    print("(u = microseconds)")
    print(f"\nGrowth exponents in N (log-log slope over N = {ns}):")
    print(f"  gradient       {expo['gradient']:.2f}   (expected ~1: reverse mode over a link-by-link graph)")
    print(f"  Hessian        {expo['hessian']:.2f}   (O(N) per column block x O(N) blocks: ~2)")
    print(f"  LM iteration   {expo['iteration']:.2f}   (Hessian + Cholesky: expected 2-3)")
    print(f"  step           {expo['step']:.2f}")
    write_json("step_cost.json", {"rows": rows, "exponents": expo, "dt": args.dt,
                                  "load_average": os.getloadavg()[0]})
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for k, label in (("gradient", "gradient"), ("iteration", "LM iteration"), ("step", "step")):
        ax.loglog(ns, [r[k] for r in rows], "o-", label=f"{label} (slope {expo[k]:.2f})")
    vm_rows = [r for r in rows if "vm_step" in r]
    if vm_rows:
        ax.loglog([r["N"] for r in vm_rows], [r["vm_step"] for r in vm_rows], "x--", color="0.4",
                  label="step, CasADi VM")
    ax.set_xlabel("links N")
    ax.set_ylabel("seconds")
    ax.set_title("pbad order 2 / lm, backend c: native cost against N")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_path("step_cost.png"), dpi=130)
    plt.close(fig)
    print(f"\nwrote {out_path('step_cost.json')} and {out_path('step_cost.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
