"""Batches on Dask: trajectories per second for 1 and 2 local worker processes against the threaded batch.

M = 256 CHAIN-10 rollouts of 1 s (``pbad`` order 2, ``lm``, dt = 0.01 s: 100 steps each), from the chain's
initial state perturbed per trajectory (seeded), run three ways on this machine's cores:

* ``threads``: ``sim.rollout_batch`` in this process on all cores (the peer, measured in the same run);
* ``dask-1``: a ``LocalCluster`` of 1 worker process holding all cores, one chunk;
* ``dask-2``: 2 worker processes sharing the cores, one chunk each.

Every result is checked to equal the threaded batch bit for bit. Also printed: the size of the step library
that travels to the workers and the time to ship it (scatter to every worker, install into its cache), the
overhead per chunk (the wall time of chunks of one 1-step trajectory, minus their native time), and from
these the smallest chunk that keeps a worker 90% busy (docs/distributed.md works the 100-machine case), and
the time per trajectory that stays on this machine (energies and the divergence test, after the chunks).

    python benchmarks/dask_batch.py [--size 256] [--links 10]
    python benchmarks/dask_batch.py --links 3 --size 8 --duration 0.1 --repeats 1   # tiny (the tests)

Writes ``distributed.json`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT`` (benchmarks/_common.py).
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import write_json  # noqa: E402

import pbframework as pbf  # noqa: E402
from pbframework.distributed import DaskExecutor, rollout_batch  # noqa: E402

EFFICIENCY = 0.9


def same(a, b) -> bool:
    return all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("q", "qd", "steps_done", "status"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256, help="trajectories in the batch")
    ap.add_argument("--links", type=int, default=10, help="CHAIN-N (default 10)")
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--dt", type=float, default=0.01)
    ap.add_argument("--repeats", type=int, default=3, help="runs per configuration (the best is kept)")
    ap.add_argument("--overhead-chunks", type=int, default=64, help="1-trajectory chunks timed for the overhead")
    args = ap.parse_args(argv)
    from dask.distributed import Client, LocalCluster

    warnings.simplefilter("ignore", RuntimeWarning)
    cores = os.cpu_count() or 1
    model = pbf.models.chain(args.links)
    rng = np.random.default_rng(20261124)
    Q0 = pbf.models.chain_q0(model) + 0.05 * rng.standard_normal((args.size, model.nq))
    QD0 = np.zeros((args.size, model.nv))
    t0 = time.perf_counter()
    sim = pbf.Simulator(model, "pbad", order=2, solver="lm", dt=args.dt, backend="c")
    print(f"machine: {cores} cores, load average {os.getloadavg()[0]:.2f}; simulator built in "
          f"{time.perf_counter() - t0:.1f} s")
    library = sim.runner.native.library
    lib_bytes = library.path.stat().st_size
    payload_bytes = len(pickle.dumps(sim.runner.native))          # library + compressed source + options

    def best(run):
        out, walls = None, []
        for _ in range(args.repeats):
            t = time.perf_counter()
            out = run()
            walls.append(time.perf_counter() - t)
        return out, min(walls)

    ref, wall_threads = best(lambda: sim.rollout_batch(Q0, QD0, args.duration, threads=cores))
    native_per_traj = ref.wall_time / args.size * cores          # core-seconds per trajectory
    # what stays on this machine however many workers: the energies and the divergence test of every trajectory
    local_per_traj = max(wall_threads - ref.wall_time, 0.0) / args.size
    rows = [{"config": "threads", "workers": 0, "wall": wall_threads, "throughput": args.size / wall_threads,
             "identical": True}]
    ship = overhead = None
    for workers in (1, 2):
        with tempfile.TemporaryDirectory(prefix="pbf-dask-workers-") as cache, \
                LocalCluster(n_workers=workers, threads_per_worker=max(1, cores // workers), processes=True,
                             dashboard_address=None, env={"PBF_CACHE_DIR": cache}) as cluster, \
                Client(cluster) as client:
            client.wait_for_workers(workers, timeout=60)
            t = time.perf_counter()                              # shipping: scatter + install, once per worker
            shipped = client.scatter(sim.runner.native, broadcast=True)
            client.submit(lambda native: native.nq, shipped, pure=False).result()
            ship_s = time.perf_counter() - t
            batch, wall = best(lambda: rollout_batch(client, sim, Q0, QD0, args.duration))
            rows.append({"config": f"dask-{workers}", "workers": workers, "wall": wall,
                         "throughput": args.size / wall, "identical": same(batch, ref),
                         "chunks": batch.info["chunks"], "ship": ship_s})
            if workers == 1:
                ship = ship_s
                n = args.overhead_chunks                         # chunks of one 1-step trajectory each
                small = np.repeat(Q0[:1], n, axis=0)
                ex = DaskExecutor(client)
                sim.rollout_batch(small, None, steps=1, executor=ex, chunk_size=1)     # warm
                t = time.perf_counter()
                b = sim.rollout_batch(small, None, steps=1, executor=ex, chunk_size=1)
                native1 = sim.runner.rollout_batch(small[:1], np.zeros((1, model.nv)), 0.0, args.dt, 1).wall_time
                overhead = max((time.perf_counter() - t) / n - native1, 0.0)
                assert b.info["chunks"] == n
    steps = int(round(args.duration / args.dt))
    # a chunk of c trajectories on k cores: c * tau / k of work, plus the overhead o; efficient above
    # EFFICIENCY when c >= EFFICIENCY / (1 - EFFICIENCY) * o * k / tau
    min_chunk = EFFICIENCY / (1 - EFFICIENCY) * overhead * cores / native_per_traj
    print(f"CHAIN-{args.links}, M = {args.size}, {steps} steps per trajectory; native "
          f"{native_per_traj * 1e3:.3f} core-ms per trajectory")
    print(f"on this machine after the native batch (energies, divergence test): {local_per_traj * 1e3:.3f} ms per "
          f"trajectory, a ceiling of {1 / max(local_per_traj, 1e-12):.0f} traj/s however many workers")
    print(f"step library: {lib_bytes / 1e6:.2f} MB ({payload_bytes / 1e6:.2f} MB with its source), shipped to "
          f"the workers and installed in {ship * 1e3:.0f} ms")
    print(f"overhead per chunk: {overhead * 1e3:.2f} ms; a chunk of >= {min_chunk:.0f} trajectories keeps a "
          f"{cores}-core worker {EFFICIENCY:.0%} busy")
    for r in rows:
        extra = f", {r['chunks']} chunk(s), ship {r['ship'] * 1e3:.0f} ms" if r["workers"] else ""
        print(f"  {r['config']:8s} {r['throughput']:9.1f} traj/s  ({r['wall']:.3f} s, "
              f"{r['throughput'] / rows[0]['throughput']:.2f}x threads, identical {r['identical']}{extra})")
    path = write_json("distributed.json", {
        "links": args.links, "size": args.size, "duration": args.duration, "dt": args.dt, "cores": cores,
        "library_bytes": lib_bytes, "payload_bytes": payload_bytes, "ship_seconds": ship,
        "overhead_per_chunk": overhead,
        "core_seconds_per_trajectory": native_per_traj, "local_seconds_per_trajectory": local_per_traj,
        "min_chunk_90": min_chunk, "rows": rows})
    print(f"wrote {path}")
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
