"""FD-SCALING (DESIGN.md; seed 003 Fig. 2-3): forward dynamics on random revolute chains of 2..200 links.

Measured in one run, on this CPU, single thread:

* **ours**: the forward-dynamics plug-ins ``abia``, ``jsiia``, ``cfa`` as generated C (``casadi.CodeGenerator``
  via :mod:`pbframework.codegen`, gcc ``--opt``), evaluated through the emitted ``<f>_batch`` entry point.
  "time per call" = one ``<f>_repeat(reps, B)`` C loop timed as a whole / (reps * B): no Python in the loop.
  Each algorithm in both scan schedules: ``seq`` (recursions, the CPU choice; the plug-in default) and
  ``par`` (pointer-jumping scans, the GPU formulation run serially).
* **Pinocchio** (peer): ``pinocchio.abaInParallel(1 thread, pool, q, v, tau, a)`` on a batch of B states: a
  C++ loop over ``aba`` with no Python per call; time per call = wall / B (one Python call per batch, the same
  as our batch-scaling column). ``pin.aba`` in a Python loop is shown too, to show what Python overhead does.
* **batch scaling** (n = 10 and 200): B = 1..1000 per Python->native call for ours (one ctypes call of
  ``<f>_batch`` on bound arrays, :meth:`BatchRunner.bind`) and Pinocchio (``abaInParallel`` on preallocated
  arrays), time per call = wall / B, so small B includes one Python call overhead (~1-3 us here) each.
* **accuracy**: relative error of every algorithm against Pinocchio's ABA and against an 80-bit
  long-double reference (:func:`pbframework.parallel.globalform.reference_forward_dynamics`), with cond(M).
* **depth**: sequential levels of each algorithm against n (one level = one data-parallel kernel launch),
  the quantity that decides GPU speed; formulas checked against the traced build for every built n.

Every timing is the minimum over ``--repeat`` interleaved repetitions (the machine may be shared).
Writes ``fd_scaling.json`` and ``.png`` to ``--out`` (default ``benchmarks/out/`` or ``$PBF_BENCH_OUT``,
benchmarks/_common.py). ``--quick`` runs a small subset; the tests run
``--n 2 3 --batch-n 2 --batch 1 4 --repeat 1``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from pbframework.parallel import globalform as G
from pbframework.codegen.build import BatchRunner, build_shared, compiler_version
from pbframework.codegen.emit import emit_c
from pbframework.plugins.fd import abia, cfa, jsiia
from pbframework.parallel.scan import Levels, Schedule

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import OUT  # noqa: E402  (same folder)

ALGS = {"abia": abia, "jsiia": jsiia, "cfa": cfa}
SCHED = {"seq": Schedule.SEQUENTIAL, "par": Schedule.PARALLEL}
EPS = np.finfo(float).eps


def _fmt_t(s: float) -> str:
    return f"{s * 1e6:9.2f}"


def build_variant(model, alg: str, sched: str, opt: str):
    lv = Levels()
    t0 = time.perf_counter()
    f = ALGS[alg].build(model, SCHED[sched], lv)
    t_graph = time.perf_counter() - t0
    src = emit_c(f, f"fds_{alg}_{sched}_n{model.nq}")
    lib = build_shared(src, opt=opt)
    if lv.depth != ALGS[alg].depth(model.nq, SCHED[sched]):
        raise AssertionError(f"{alg}/{sched} n={model.nq}: traced depth {lv.depth} != formula")
    return f, lib, BatchRunner(lib, f), {"graph_s": t_graph, "src_kB": src.size / 1e3, "lines": src.lines,
                                         "compile_s": lib.build_seconds, "cached": lib.cached,
                                         "depth": lv.depth, "work_doubles": f.sz_w()}


def time_ours(runner: BatchRunner, inputs, target_s: float = 0.05) -> float:
    t1 = runner.time_per_call(inputs, 1)
    reps = max(1, int(target_s / max(t1 * len(inputs[0]), 1e-9)))
    return runner.time_per_call(inputs, reps)


def time_pin_batch(pin, pool, qT, vT, tT, aT, target_s: float = 0.05) -> float:
    B = qT.shape[1]
    t0 = time.perf_counter()
    pin.abaInParallel(1, pool, qT, vT, tT, aT)
    t1 = time.perf_counter() - t0
    reps = max(1, int(target_s / max(t1, 1e-9)))
    t0 = time.perf_counter()
    for _ in range(reps):
        pin.abaInParallel(1, pool, qT, vT, tT, aT)
    return (time.perf_counter() - t0) / (reps * B)


def time_pin_pyloop(pin, pm, pd, Q, QD, T, target_s: float = 0.03) -> float:
    N = len(Q)
    reps = max(1, int(target_s / (N * 2e-6 * max(1, pm.nv / 10))))
    t0 = time.perf_counter()
    for _ in range(reps):
        for k in range(N):
            pin.aba(pm, pd, Q[k], QD[k], T[k])
    return (time.perf_counter() - t0) / (reps * N)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="*", default=[2, 5, 10, 20, 50, 100, 200])
    ap.add_argument("--batch-n", type=int, nargs="*", default=[10, 200])
    ap.add_argument("--batch", type=int, nargs="*", default=[1, 10, 100, 1000])
    ap.add_argument("--opt", default="-O2", help="gcc optimisation flag for the generated C, e.g. --opt=-O1 "
                    "(default -O2)")
    ap.add_argument("--repeat", type=int, default=5, help="interleaved repetitions; the minimum is kept")
    ap.add_argument("--out", default=str(OUT), help="output folder (default benchmarks/out or $PBF_BENCH_OUT)")
    ap.add_argument("--quick", action="store_true", help="small subset (n = 2, 10, 50; B = 1, 100)")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.batch_n, args.batch, args.repeat = [2, 10, 50], [10], [1, 100], 2
    import pinocchio as pin

    rng = np.random.default_rng(2017)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"machine": {"platform": platform.platform(), "processor": platform.processor(),
                                "python": sys.version.split()[0], "compiler": compiler_version(),
                                "opt": args.opt, "pinocchio": pin.__version__, "cpu_count": os.cpu_count()},
                    "build": [], "accuracy": [], "time_vs_n": [], "batch": [], "depth": []}
    print(f"FD-SCALING on {platform.processor() or platform.machine()}, {compiler_version()} {args.opt}, "
          f"pinocchio {pin.__version__}; min of {args.repeat} interleaved repetitions\n")

    variants = [(a, s) for a in ALGS for s in SCHED]
    built: dict = {}
    # -- build -------------------------------------------------------------------------------------------
    print("Generated C per algorithm and n: source size, compile time (gcc), graph depth")
    print(f"{'n':>4} {'variant':>10} {'src kB':>8} {'lines':>7} {'graph s':>8} {'compile s':>9} {'depth':>6}")
    for n in args.n:
        model = G.random_chain(n, seed=n)
        for a, s in variants:
            f, lib, runner, info = build_variant(model, a, s, args.opt)
            built[(n, a, s)] = (f, runner)
            report["build"].append({"n": n, "alg": a, "schedule": s, **info})
            tag = " (cached build)" if info["cached"] else ""
            print(f"{n:>4} {a + '/' + s:>10} {info['src_kB']:8.1f} {info['lines']:7d} {info['graph_s']:8.2f} "
                  f"{info['compile_s']:9.2f} {info['depth']:6d}{tag}")
    # -- accuracy ------------------------------------------------------------------------------------------
    acc_rows = []
    for n in args.n:
        model = G.random_chain(n, seed=n)
        gf = G.global_form(model)
        pm, _ = G.to_pinocchio(model)
        pd = pm.createData()
        Q, QD, T = rng.normal(size=(3, 2, n))
        errs = {v: [0.0, 0.0] for v in variants}
        pin_err, cond = 0.0, 0.0
        for k in range(2):
            ref_pin = pin.aba(pm, pd, Q[k], QD[k], T[k])
            ref_ld = np.asarray(G.reference_forward_dynamics(gf, Q[k], QD[k], T[k]), float)
            M = pin.crba(pm, pd, Q[k])
            M = np.triu(M) + np.triu(M, 1).T
            cond = max(cond, float(np.linalg.cond(M)))
            pin_err = max(pin_err, float(np.linalg.norm(ref_pin - ref_ld) / np.linalg.norm(ref_ld)))
            for v in variants:
                x = built[(n, *v)][1](Q[k:k + 1], QD[k:k + 1], T[k:k + 1])[0][0]
                errs[v][0] = max(errs[v][0], float(np.linalg.norm(x - ref_pin) / np.linalg.norm(ref_pin)))
                errs[v][1] = max(errs[v][1], float(np.linalg.norm(x - ref_ld) / np.linalg.norm(ref_ld)))
        acc_rows.append((n, cond, pin_err, errs))
        report["accuracy"].append({"n": n, "cond_M": cond, "eps_cond": EPS * cond, "pin_vs_ref": pin_err,
                                   **{f"{a}/{s}": {"vs_pin": e[0], "vs_ref": e[1]} for (a, s), e in errs.items()}})
    head = "".join(f"{a + '/' + s:>11}" for a, s in variants)
    print("\nAccuracy: relative error vs an 80-bit long-double reference (max over 2 random states)")
    print(f"{'n':>4} {'cond(M)':>9} {'eps*cond':>9} {'Pinocchio':>10}{head}  {'worst/(eps*cond)':>16}")
    for n, cond, pin_err, errs in acc_rows:
        worst = max(e[1] for e in errs.values()) / (EPS * cond)
        print(f"{n:>4} {cond:9.1e} {EPS * cond:9.1e} {pin_err:10.1e}"
              + "".join(f"{errs[v][1]:11.1e}" for v in variants) + f"  {worst:16.3f}")
    print("\nAgreement: relative error vs Pinocchio's ABA (tests require < 1e-9 for n <= 50, "
          "< 10 eps cond(M) beyond)")
    print(f"{'n':>4} {'cond(M)':>9}{head}")
    for n, cond, pin_err, errs in acc_rows:
        print(f"{n:>4} {cond:9.1e}" + "".join(f"{errs[v][0]:11.1e}" for v in variants))
    # -- time per call against n ----------------------------------------------------------------------------
    print("\nTime per call [us] against n (generated C, batch of B; Pinocchio abaInParallel, 1 thread)")
    head = "".join(f"{a + '/' + s:>11}" for a, s in variants)
    print(f"{'n':>4} {'B':>5}{head} {'pin ABA':>9} {'pin py':>9} {'abia/pin':>9} {'jsiia/pin':>9} {'cfa/pin':>9}")
    for n in args.n:
        model = G.random_chain(n, seed=n)
        pm, _ = G.to_pinocchio(model)
        pd = pm.createData()
        B = int(min(1000, max(10, 20000 // n)))
        Q, QD, T = rng.normal(size=(3, B, n))
        pool = pin.ModelPool(pm, 1)
        qT, vT, tT = (np.asfortranarray(x.T) for x in (Q, QD, T))
        aT = np.zeros((n, B), order="F")
        best = {v: math.inf for v in variants}
        best_pin = best_py = math.inf
        for _ in range(args.repeat):
            for v in variants:
                budget = 0.05 if v[0] != "jsiia" or n <= 50 else 0.2
                best[v] = min(best[v], time_ours(built[(n, *v)][1], [Q, QD, T], budget))
            best_pin = min(best_pin, time_pin_batch(pin, pool, qT, vT, tT, aT))
            best_py = min(best_py, time_pin_pyloop(pin, pm, pd, Q[:50], QD[:50], T[:50]))
        ratios = {a: best[(a, "seq")] / best_pin for a in ALGS}
        print(f"{n:>4} {B:>5}" + "".join(f"{_fmt_t(best[v]):>11}" for v in variants)
              + f" {_fmt_t(best_pin)} {_fmt_t(best_py)}" + "".join(f" {ratios[a]:9.2f}" for a in ALGS))
        report["time_vs_n"].append({"n": n, "B": B, "pin_aba_s": best_pin, "pin_aba_pyloop_s": best_py,
                                    **{f"{a}/{s}_s": t for (a, s), t in best.items()},
                                    **{f"{a}_over_pin": r for a, r in ratios.items()}})
    # -- batch scaling ---------------------------------------------------------------------------------
    print("\nBatch scaling: time per call [us] = wall of one Python->native batch call / B (default schedule)")
    print(f"{'n':>4} {'B':>5} {'abia':>10} {'jsiia':>10} {'cfa':>10} {'pin ABA':>10} {'abia/pin':>9}")
    for n in args.batch_n:
        if (n, "abia", "seq") not in built:
            model = G.random_chain(n, seed=n)
            for a in ALGS:
                f, lib, runner, info = build_variant(model, a, "seq", args.opt)
                built[(n, a, "seq")] = (f, runner)
        model = G.random_chain(n, seed=n)
        pm, _ = G.to_pinocchio(model)
        for B in args.batch:
            Q, QD, T = rng.normal(size=(3, B, n))
            pool = pin.ModelPool(pm, 1)
            qT, vT, tT = (np.asfortranarray(x.T) for x in (Q, QD, T))
            aT = np.zeros((n, B), order="F")
            best = {a: math.inf for a in ALGS}
            best_pin = math.inf
            for _ in range(args.repeat):
                for a in ALGS:
                    call = built[(n, a, "seq")][1].bind(Q, QD, T)
                    t0 = time.perf_counter()
                    call()
                    reps = max(1, int(0.03 / max(time.perf_counter() - t0, 1e-7)))
                    t0 = time.perf_counter()
                    for _ in range(reps):
                        call()
                    best[a] = min(best[a], (time.perf_counter() - t0) / (reps * B))
                best_pin = min(best_pin, time_pin_batch(pin, pool, qT, vT, tT, aT, 0.03))
            print(f"{n:>4} {B:>5} {_fmt_t(best['abia']):>10} {_fmt_t(best['jsiia']):>10} {_fmt_t(best['cfa']):>10} "
                  f"{_fmt_t(best_pin):>10} {best['abia'] / best_pin:9.2f}")
            report["batch"].append({"n": n, "B": B, "pin_aba_s": best_pin, **{f"{a}_s": t for a, t in best.items()}})
    # -- depth ---------------------------------------------------------------------------------------------
    print("\nDepth (sequential levels; one level = one data-parallel kernel launch) against n")
    ns = sorted(set([2, 5, 10, 20, 50, 100, 200, 500, 1000] + args.n))
    print(f"{'n':>5}" + "".join(f"{a + '/' + s:>11}" for a, s in variants))
    for n in ns:
        row = {f"{a}/{s}": ALGS[a].depth(n, SCHED[s]) for a, s in variants}
        print(f"{n:>5}" + "".join(f"{row[f'{a}/{s}']:>11d}" for a, s in variants))
        report["depth"].append({"n": n, **row})
    (out / "fd_scaling.json").write_text(json.dumps(report, indent=1))
    if not args.no_plot:
        plot(report, out / "fd_scaling.png")
    print(f"\nwrote {out / 'fd_scaling.json'}" + ("" if args.no_plot else f" and {out / 'fd_scaling.png'}"))
    return report


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = [(a, s) for a in ALGS for s in SCHED]
    colors = {"abia": "C0", "jsiia": "C1", "cfa": "C2"}
    fig, ax = plt.subplots(2, 2, figsize=(12, 9))
    tv = report["time_vs_n"]
    ns = [r["n"] for r in tv]
    for a, s in variants:
        ax[0, 0].loglog(ns, [r[f"{a}/{s}_s"] * 1e6 for r in tv], ("-" if s == "seq" else "--") + "o",
                        color=colors[a], label=f"{a} ({s})", ms=3)
    ax[0, 0].loglog(ns, [r["pin_aba_s"] * 1e6 for r in tv], "k-s", label="Pinocchio ABA", ms=3)
    ax[0, 0].set(xlabel="links n", ylabel="time per call [us]", title="time per call (generated C, 1 thread)")
    ax[0, 0].legend(fontsize=7)
    for n, style in zip(sorted({r["n"] for r in report["batch"]}), ["-", "--"]):
        rows = [r for r in report["batch"] if r["n"] == n]
        Bs = [r["B"] for r in rows]
        for a in ALGS:
            ax[0, 1].loglog(Bs, [r[f"{a}_s"] * 1e6 for r in rows], style + "o", color=colors[a],
                            label=f"{a} n={n}", ms=3)
        ax[0, 1].loglog(Bs, [r["pin_aba_s"] * 1e6 for r in rows], style + "s", color="k",
                        label=f"Pinocchio n={n}", ms=3)
    ax[0, 1].set(xlabel="batch size B", ylabel="time per call [us]", title="batch scaling")
    ax[0, 1].legend(fontsize=7)
    dp = report["depth"]
    for a, s in variants:
        ax[1, 0].loglog([r["n"] for r in dp], [r[f"{a}/{s}"] for r in dp], ("-" if s == "seq" else "--") + "o",
                        color=colors[a], label=f"{a} ({s})", ms=3)
    ax[1, 0].set(xlabel="links n", ylabel="sequential levels", title="depth (GPU critical path)")
    ax[1, 0].legend(fontsize=7)
    acc = report["accuracy"]
    na = [r["n"] for r in acc]
    for a, s in variants:
        ax[1, 1].loglog(na, [max(r[f"{a}/{s}"]["vs_ref"], 1e-17) for r in acc], ("-" if s == "seq" else "--") + "o",
                        color=colors[a], label=f"{a} ({s})", ms=3)
    ax[1, 1].loglog(na, [max(r["pin_vs_ref"], 1e-17) for r in acc], "k-s", label="Pinocchio ABA", ms=3)
    ax[1, 1].loglog(na, [r["eps_cond"] for r in acc], "k:", label="eps cond(M)")
    ax[1, 1].set(xlabel="links n", ylabel="relative error vs long double", title="accuracy")
    ax[1, 1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
