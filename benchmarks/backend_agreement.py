"""The CasADi-VM and generated-C backends on the same PBAD rollout: where their trajectories part, and why.

Both backends run the same solver loop with the same dense arithmetic (``pbframework.linalg`` mirrors the
C driver's sums), so where the C library evaluates the VM's own derivative graphs (``--derivatives full``,
the C default for small problems) the two rollouts are identical bit for bit, unconverged steps included.
With directional derivative kernels (the C default above ``full_max_instructions`` instructions) a few
Jacobian entries round differently (1e-14 relative), and a chaotic motion grows that difference.

The script runs CHAIN-``--links`` with PBAD order ``--order`` at ``--dt`` for ``--duration`` seconds on both
backends (gravity, from DESIGN.md's start), compares the integrator states step by step (relative per
state: ``max |s_vm - s_c| / max(1, max |s_c|)``, as tests/test_backend_c.py) and prints

* the first step at which they differ at all, by more than 1e-9 and by more than 1e-6, and the largest
  difference;
* at each of those steps the solver state of both: the rollout's statistics (iterations, converged,
  halvings, gradient norm) and the first solve of that step redone from each backend's own state (reason,
  iterations, gradient norm, objective);
* the first step whose iterations or halvings differ, and each backend's energy error (DESIGN.md's scale).

    python benchmarks/backend_agreement.py                       # CHAIN-10, order 3, dt 0.05 s, 10 s
    python benchmarks/backend_agreement.py --derivatives full    # the same, C on the VM's derivative graphs
    python benchmarks/backend_agreement.py --order 2             # the energy objective: lm on full kernels

Measured (2-core machine, CHAIN-10, order 3, dt 0.05 s, 10 s, 200 steps; steps counted from 0): with the
default C plan (directional derivatives) the states differ after step 0 (7e-14), by > 1e-9 after step 42
(t = 2.1 s, both converged after one halving), by > 1e-6 after step 75 (1.4e-2: both unconverged after 13
halvings, the answer there is wherever the solver stalled); iterations first differ at step 17; max
difference 34 (relative), unconverged steps VM 40 and C 3, energy errors 4701% (VM) and 286% (C). With
``--derivatives full``: identical, 4701% on both. Before the Python solvers used the C driver's arithmetic
(LAPACK Cholesky, BLAS sums) the default plan parted by > 1e-9 after step 50 and by > 1e-6 after step 75.
The VM rollout takes 2-3 minutes, the C one 4 s (plus its compile).

Writes ``backend_agreement.json`` and ``backend_agreement.png`` (``--name``) to ``benchmarks/out/`` or
``$PBF_BENCH_OUT`` (benchmarks/_common.py).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import pbframework as pbf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import energy_error, out_path, write_json  # noqa: E402  (same folder)

TOLERANCES = (0.0, 1e-9, 1e-6)
"""Differences reported: any, the issue's agreement tolerance on converged steps, and a visible one."""


def rel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row: ``max |a - b| / max(1, max |b|)`` (tests/test_backend_c.py's ``rel``)."""
    return np.max(np.abs(a - b), axis=-1) / np.maximum(1.0, np.max(np.abs(b), axis=-1))


def vm_rollout(sim: pbf.Simulator, q0: np.ndarray, steps: int) -> tuple[np.ndarray, dict, float]:
    """The Simulator's own loop (``advance``, as ``rollout`` runs it), keeping the integrator states."""
    nq, dt = sim.model.nq, sim.config.dt
    s = sim.initial_state(q0)
    states, cols = [s], {k: [] for k in ("iterations", "converged", "halvings", "grad_norm")}
    t0 = time.perf_counter()
    for k in range(steps):
        s, st = sim.advance(s, k * dt)
        if not np.all(np.isfinite(s[:2 * nq])) or np.max(np.abs(s[nq:2 * nq])) > sim.max_speed:
            break
        states.append(s)
        for name in cols:
            cols[name].append(getattr(st, name))
    return np.array(states), {k: np.array(v) for k, v in cols.items()}, time.perf_counter() - t0


def first_solve(sim: pbf.Simulator, s: np.ndarray, t: float) -> dict:
    """Step ``s`` at ``t``'s first solve (no halving) on ``sim``'s backend."""
    pb, nq = sim.problem, sim.model.nq
    p = np.asarray(pb.params(s, t, sim.config.dt, sim.inputs(t, s[:nq], s[nq:2 * nq]))).ravel()
    x0 = np.asarray(pb.guess(p)).ravel()
    res = sim.runner.solve(x0, p) if sim.runner is not None else sim.solver.solve(pb, x0, p)
    return {"reason": res.reason, "converged": bool(res.converged), "iterations": int(res.iterations),
            "grad_norm": float(res.grad_norm), "objective": float(res.objective)}


def solver_state(sim: pbf.Simulator, states: np.ndarray, stats: dict, k: int) -> dict:
    """Step ``k``'s rollout statistics and its first solve redone from the state before it."""
    row = {name: (v[k].item() if hasattr(v[k], "item") else v[k]) for name, v in stats.items()}
    row["first_solve"] = first_solve(sim, states[k], k * sim.config.dt)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--links", type=int, default=10, help="CHAIN-N (default 10)")
    ap.add_argument("--order", type=int, default=3, help="PBAD order (default 3)")
    ap.add_argument("--dt", type=float, default=0.05, help="step in seconds (default 0.05)")
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds (default 10)")
    ap.add_argument("--solver", default="auto", help="solver plug-in (default: the integrator's choice)")
    ap.add_argument("--derivatives", default="auto", choices=("auto", "full", "directional"),
                    help="the C library's derivative kernels (default auto: full for small problems)")
    ap.add_argument("--name", default="backend_agreement", help="output file stem (default backend_agreement)")
    args = ap.parse_args(argv)
    if args.links < 1 or not args.dt > 0 or not args.duration > 0:
        ap.error("--links must be >= 1, --dt and --duration positive")

    model = pbf.models.chain(args.links)
    q0 = pbf.models.chain_q0(model)
    steps = max(1, int(math.ceil(args.duration / args.dt - 1e-9)))
    common = dict(order=args.order, dt=args.dt, forces=["gravity"], solver=args.solver)
    sim_c = pbf.Simulator(model, "pbad", backend="c", backend_options={"derivatives": args.derivatives}, **common)
    sim_v = pbf.Simulator(model, "pbad", **common)
    print(f"CHAIN-{args.links}, PBAD order {args.order}, dt {args.dt} s, {steps} steps, {sim_v.solver_name}; "
          f"C plan: {sim_c.runner.plan.describe()}", flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)           # unconverged steps: counted below
        out = sim_c.runner.rollout(q0, np.zeros(model.nq), 0.0, args.dt, steps)
    S_c = out.states
    stats_c = {"iterations": out.iterations, "converged": out.converged, "halvings": out.halvings,
               "grad_norm": out.grad_norm}
    S_v, stats_v, wall_v = vm_rollout(sim_v, q0, steps)
    n = min(len(S_c), len(S_v))
    d = rel(S_v[:n], S_c[:n])

    first = {}
    for tol in TOLERANCES:
        above = np.nonzero(d > tol)[0]
        first[tol] = int(above[0]) if above.size else None
    same_work = [(stats_v["iterations"][k] == stats_c["iterations"][k]
                  and stats_v["halvings"][k] == stats_c["halvings"][k]) for k in range(n - 1)]
    first_work = next((k for k, same in enumerate(same_work) if not same), None)
    scale = sim_v.energy_scale or 1.0
    errors = {name: energy_error(sum(sim.rollout_energy(S[:n])), scale)
              for name, sim, S in (("vm", sim_v, S_v), ("c", sim_c, S_c))}

    print(f"wall: VM {wall_v:.2f} s, C {out.wall_time:.3f} s; steps compared {n - 1}; "
          f"unconverged steps: VM {int(np.sum(~stats_v['converged'][:n - 1]))}, "
          f"C {int(np.sum(~stats_c['converged'][:n - 1]))}")
    print(f"max difference {d.max():.3g} (relative per state); energy error VM {errors['vm']:.4g}%, "
          f"C {errors['c']:.4g}%")
    print("first step whose iterations or halvings differ:", first_work)
    where = {}
    for tol in TOLERANCES:
        k = first[tol]
        label = "differ at all" if tol == 0 else f"differ by > {tol:g}"
        if k is None:
            print(f"states {label}: never in {n - 1} steps")
            continue
        # state k is the result of step k - 1: show that step, from each backend's own state before it
        rows = {"vm": solver_state(sim_v, S_v, stats_v, k - 1), "c": solver_state(sim_c, S_c, stats_c, k - 1)}
        where[str(tol)] = {"step": k - 1, "t": (k - 1) * args.dt, "difference": float(d[k]), **rows}
        print(f"states {label}: after step {k - 1} (t = {(k - 1) * args.dt:.4g} s), difference {d[k]:.3g}")
        for name, r in rows.items():
            fs = r["first_solve"]
            print(f"  {name:>2}: {r['iterations']} iterations, {r['halvings']} halvings, converged "
                  f"{bool(r['converged'])}, |g| {r['grad_norm']:.3g}; first solve: {fs['reason']} after "
                  f"{fs['iterations']} iterations, |g| {fs['grad_norm']:.3g}, f {fs['objective']:.3g}")

    data = {"links": args.links, "order": args.order, "dt": args.dt, "duration": args.duration, "steps": steps,
            "solver": sim_v.solver_name, "c_plan": sim_c.runner.plan.describe(), "steps_compared": n - 1,
            "first_differing_step": {str(t): (None if k is None else k - 1) for t, k in first.items()},
            "first_different_work": first_work, "max_difference": float(d.max()),
            "difference": [float(v) for v in d], "energy_error": errors, "wall": {"vm": wall_v, "c": out.wall_time},
            "unconverged": {"vm": int(np.sum(~stats_v["converged"][:n - 1])),
                            "c": int(np.sum(~stats_c["converged"][:n - 1]))},
            "at": where}
    path = write_json(f"{args.name}.json", data)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    t = np.arange(n) * args.dt
    ax.semilogy(t, np.maximum(d, 1e-18), lw=1)
    for tol in (1e-9, 1e-6):
        ax.axhline(tol, color="gray", ls=":", lw=0.8)
    ax.set_xlabel("t [s]")
    ax.set_ylabel("VM vs C, relative per state")
    ax.set_title(f"CHAIN-{args.links}, PBAD order {args.order}, dt {args.dt} s ({sim_c.runner.plan.derivatives})")
    fig.tight_layout()
    fig.savefig(out_path(f"{args.name}.png"), dpi=120)
    print(f"wrote {path} and {args.name}.png to {path.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
