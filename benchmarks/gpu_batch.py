"""Batched rollouts on the GPU (backend cuda, one LM iteration per launch) against the C backend's threads.

M = 256, 1024, 4096 CHAIN-``--links`` rollouts of ``--duration`` s (``pbad`` order 2, ``lm``, dt = 0.01 s) from
DESIGN.md's start perturbed per trajectory (seeded), run by ``Simulator.rollout_batch`` on backend ``cuda``
(one thread per trajectory, ``--block`` threads per block) and, in the same run, on backend ``c`` (all
cores). Prints wall time, trajectories per second, launches, the GPU / C ratio, and whether the two batches
agree bit for bit (the device kernels are built with -fmad=false).

Not measured yet: no GPU was available when this script was written, so it has never produced a figure.
Without pycuda or a CUDA device it prints why and exits with status 2, writing nothing. The comparison of one
thread per trajectory against a group of threads per trajectory (issue 22 item 2) needs the group kernel,
which is not built.

    python benchmarks/gpu_batch.py [--sizes 256 1024 4096] [--links 10] [--duration 1.0] [--block 128]

Writes ``gpu_batch.json`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT`` (benchmarks/_common.py).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from _common import write_json


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--links", type=int, default=10)
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--block", type=int, default=128)
    args = ap.parse_args(argv)

    from pbframework.codegen.cuda_device import device_status

    ok, why = device_status()
    if not ok:
        print(f"gpu_batch: no GPU to measure on: {why}", file=sys.stderr)
        return 2
    import pbframework as pbf
    from pbframework import models

    m = models.chain(args.links)
    dt = 0.01
    steps = round(args.duration / dt)
    sims = {b: pbf.Simulator(m, "pbad", order=2, dt=dt, forces=["gravity"], backend=b,
                             backend_options={"block": args.block} if b == "cuda" else None)
            for b in ("cuda", "c")}
    rng = np.random.default_rng(22)
    rows = []
    print(f"device: {why}; CHAIN-{args.links}, {steps} steps of {dt} s, block {args.block}")
    print(f"{'M':>6} {'cuda s':>9} {'c s':>9} {'cuda/s':>10} {'c/s':>10} {'ratio':>7} {'launches':>9} same")
    for M in args.sizes:
        Q0 = models.chain_q0(m) + rng.normal(scale=0.1, size=(M, m.nq))
        QD0 = rng.normal(scale=0.5, size=(M, m.nv))
        out, wall = {}, {}
        for b, sim in sims.items():
            t0 = time.perf_counter()
            out[b] = sim.runner.rollout_batch(Q0, QD0, 0.0, dt, steps)
            wall[b] = time.perf_counter() - t0
        same = bool(np.array_equal(out["cuda"].states, out["c"].states))
        launches = sims["cuda"].runner.device.launches
        rows.append({"M": M, "cuda_s": wall["cuda"], "c_s": wall["c"], "launches": launches, "identical": same})
        print(f"{M:>6} {wall['cuda']:>9.3f} {wall['c']:>9.3f} {M / wall['cuda']:>10.1f} {M / wall['c']:>10.1f} "
              f"{wall['c'] / wall['cuda']:>7.2f} {launches:>9} {same}")
    path = write_json("gpu_batch.json", {"device": why, "links": args.links, "steps": steps, "block": args.block,
                                         "rows": rows})
    print(f"wrote {path.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
