"""Source size and compile time of the C backend for the three models of the issue's budget.

=================================  =========  ===========
model                               target     (source + compile, gcc -O1, this 2-core machine)
=================================  =========  ===========
CHAIN-10, pbad order 3 (jtj_lm)     20 s
CHAIN-40, pbad order 3 (jtj_lm)     60 s
CHAIN-100, pbad order 2 (lm)        120 s
=================================  =========  ===========

Each model is built from scratch into an empty, private cache folder (``Simulator(backend="c")`` with
default options, a new model object so nothing is reused from memory): the step problem (symbolic,
Python), the kernels (symbolic derivatives and hoisting), the C text, and gcc. Then the same model is
built a second time against the same cache: it must compile nothing.

Peer, measured in the same run on the first model (CHAIN-10 order 3 by default): the flattened
alternative, the problem's own ``residual_jacobian`` (the CasADi-VM path's derivative function) emitted with
``casadi.CodeGenerator`` (:func:`pbframework.codegen.emit.emit_c`) and compiled with the same gcc -O1, alone,
without the solver loop. (For CHAIN-40 and CHAIN-100 the flattened function has millions of instructions
and is not built.)

    python benchmarks/compile_time.py                              # the three models above
    python benchmarks/compile_time.py --models chain3:3,chain5:2   # other models (chainN:order), no target

Writes ``compile_time.json`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT`` (benchmarks/_common.py).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import out_path, write_json  # noqa: E402

import pbframework as pbf  # noqa: E402

TARGETS = {(10, 3): 20.0, (40, 3): 60.0, (100, 2): 120.0}
"""Budget in seconds (source + compile) per (N, order) of the issue; the default ``--models``."""


def parse_models(text: str) -> list[tuple[int, int]]:
    """``chain10:3,chain40:3`` -> [(10, 3), (40, 3)]."""
    models = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*chain-?(\d+):(\d+)\s*", item, flags=re.I)
        if m is None:
            raise argparse.ArgumentTypeError(f"{item!r} is not chainN:order (e.g. chain10:3)")
        models.append((int(m[1]), int(m[2])))
    return models


def build(n: int, order: int, cache: str) -> dict:
    os.environ["PBF_CACHE_DIR"] = cache
    model = pbf.models.chain(n)                      # a fresh model: nothing cached in memory
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    sim = pbf.Simulator(model, "pbad", order=order, dt=0.05, backend="c")
    total = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    rn = sim.runner
    problem_s = total - rn.timings["build_total"]
    return {"total_s": total, "problem_s": problem_s, "kernels_s": rn.timings["plan"], "emit_s": rn.timings["emit"],
            "compile_s": rn.library.compile_seconds, "gcc_cpu_s": (r1.ru_utime + r1.ru_stime)
            - (r0.ru_utime + r0.ru_stime), "cached": rn.library.cached, "source_bytes": rn.source_bytes,
            "instructions": sum(rn.plan.instructions.values()), "plan": rn.plan.describe(),
            "solver": sim.solver_name, "per_kernel": rn.plan.instructions, "nx": sim.problem.nx}


def flattened_peer(n: int, order: int) -> dict:
    """The flattened derivative function of the CasADi-VM path, emitted by casadi.CodeGenerator and compiled."""
    from pbframework.codegen.build import build_shared
    from pbframework.codegen.emit import emit_c

    model = pbf.models.chain(n)
    t0 = time.perf_counter()
    sim = pbf.Simulator(model, "pbad", order=order, dt=0.05)
    least_squares = sim.problem.kind.value == "least_squares"
    fn = sim.problem.residual_jacobian if least_squares else sim.problem.hessian
    src = emit_c(fn, name=f"pbf_flat_chain{n}_k{order}", batch=False)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pbf-compile-peer-") as cache:
        lib = build_shared(src, cache=cache)
    return {"function": "residual_jacobian" if least_squares else "hessian", "instructions": fn.n_instructions(),
            "source_bytes": src.size, "source_s": t1 - t0, "compile_s": lib.compile_seconds,
            "total_s": time.perf_counter() - t0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=parse_models, default=list(TARGETS),
                    help="comma-separated chainN:order (default chain10:3,chain40:3,chain100:2); the peer is "
                         "built for the first")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; gcc -O1")
    rows = []
    user_cache = os.environ.get("PBF_CACHE_DIR")
    for n, order in args.models:
        name, target = f"CHAIN-{n}", TARGETS.get((n, order))
        try:
            with tempfile.TemporaryDirectory(prefix="pbf-compile-time-") as cache:
                first = build(n, order, cache)
                second = build(n, order, cache)
        finally:                                     # build() pointed the cache at the (deleted) folder
            if user_cache is None:
                os.environ.pop("PBF_CACHE_DIR", None)
            else:
                os.environ["PBF_CACHE_DIR"] = user_cache
        row = {"model": name, "order": order, "target_s": target, "first": first, "second": second}
        rows.append(row)
        src_s = first["total_s"] - first["compile_s"]
        print(f"  {name} order {order}: {first['plan']}", flush=True)
        print(f"    first build {first['total_s']:.1f} s = source {src_s:.1f} s (problem {first['problem_s']:.1f}, "
              f"kernels {first['kernels_s']:.1f}, C text {first['emit_s']:.1f}) + gcc {first['compile_s']:.1f} s; "
              f"second build {second['total_s']:.1f} s, compiled: {'no' if second['cached'] else 'YES'}", flush=True)
    print("\nCompile budget (source + compile, empty cache; second run against the same cache)")
    print(f"{'model':10s} {'order':>5s} {'solver':>7s} {'nx':>4s} {'instructions':>12s} {'source MB':>9s} "
          f"{'source s':>8s} {'gcc s':>7s} {'gcc cpu s':>9s} {'total s':>8s} {'target s':>8s} {'met':>4s} | "
          f"{'2nd run s':>9s} {'compiled':>8s}")
    for r in rows:
        f, s = r["first"], r["second"]
        src_s = f["total_s"] - f["compile_s"]
        target, met = ("-", "-") if r["target_s"] is None else \
            (f"{r['target_s']:.0f}", "yes" if f["total_s"] <= r["target_s"] else "NO")
        print(f"{r['model']:10s} {r['order']:5d} {f['solver']:>7s} {f['nx']:4d} {f['instructions']:12d} "
              f"{f['source_bytes'] / 1e6:9.2f} {src_s:8.1f} {f['compile_s']:7.1f} {f['gcc_cpu_s']:9.1f} "
              f"{f['total_s']:8.1f} {target:>8s} {met:>4s} | "
              f"{s['total_s']:9.1f} {'no' if s['cached'] else 'YES':>8s}")
    n, order = args.models[0]
    peer = flattened_peer(n, order)
    ours = rows[0]["first"]
    print(f"\nPeer (same run): CHAIN-{n} order {order} flattened {peer['function']} via casadi.CodeGenerator: "
          f"{peer['instructions']} instructions, {peer['source_bytes'] / 1e6:.2f} MB, source {peer['source_s']:.1f} s "
          f"+ gcc {peer['compile_s']:.1f} s = {peer['total_s']:.1f} s (derivative function only, no solver loop)")
    print(f"  ratio backend c / flattened peer: total {ours['total_s'] / peer['total_s']:.2f}, "
          f"gcc {ours['compile_s'] / peer['compile_s']:.2f}")
    write_json("compile_time.json", {"rows": rows, f"peer_flattened_chain{n}": peer,
                                     "load_average": os.getloadavg()[0]})
    print(f"\nwrote {out_path('compile_time.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
