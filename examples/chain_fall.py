"""CHAIN-10 falling under gravity: total energy over time (DESIGN.md CHAIN-N, seed 000 Fig. 2a).

Ten 1 m cylinders on 2-DOF ball joints start at rest, horizontal-ish (every z-angle 0.3 rad), and swing down
under gravity. Second-order PBAD is stable at any step and dissipates energy; third-order collocation is
accurate but cannot follow the chain's whips at a fixed large step, so it runs here with adaptive steps
(``--rtol``, default 5e-6 as in the README main job; output every ``--dt``). The script prints each run's
status and its energy error in DESIGN.md's metric (max |E(t) - E(0)| as a percentage of the potential drop
from horizontal to hanging) and plots E(t). Its order-3 run takes the README main job's steps, sampled every
0.01 s instead of 0.05 s; this docstring quotes no figure.

    python examples/chain_fall.py            # 10 s, output every 0.01 s: order 2 fixed, order 3 adaptive
    python examples/chain_fall.py --dt 0.05  # order 2 at a large fixed step
    python examples/chain_fall.py --fast     # a short run (also: PBF_EXAMPLES_FAST=1)
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import pbframework as pbf
from pbframework import models

from _common import output_dir, pyplot, save  # examples/_common.py


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="short run (also PBF_EXAMPLES_FAST=1)")
    ap.add_argument("--links", type=int, default=10, help="number of links (default 10)")
    ap.add_argument("--dt", type=float, default=0.01, help="timestep in seconds (default 0.01)")
    ap.add_argument("--orders", type=int, nargs="+", default=[2, 3], help="PBAD orders to compare")
    ap.add_argument("--rtol", type=float, default=5e-6,
                    help="local-error tolerance of the adaptive steps of orders >= 3 (0: fixed steps)")
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    args = ap.parse_args(argv)
    fast = args.fast or os.environ.get("PBF_EXAMPLES_FAST") == "1"
    duration = 0.5 if fast else 10.0
    out = output_dir(args.out)

    model = models.chain(args.links)
    q0, qd0 = models.chain_q0(model), np.zeros(model.nq)
    results = {}
    curves = []
    for order in args.orders:
        adaptive = {"rtol": args.rtol} if order >= 3 and args.rtol > 0 else False
        sim = pbf.Simulator(model, integrator="pbad", order=order, solver="lm", dt=args.dt, forces=["gravity"],
                            adaptive=adaptive)
        traj = sim.rollout(q0, qd0, duration)
        err = traj.energy_error(cut=False)
        steps = traj.info["adaptive"]["accepted"] if adaptive else traj.steps
        results[f"pbad{order}"] = {"status": traj.status.value, "energy_error_percent": err,
                                   "wall_time_s": traj.wall_time, "steps": steps,
                                   "adaptive_rtol": args.rtol if adaptive else None,
                                   "diverged": traj.diverged}
        curves.append((f"PBAD order {order}" + (f", adaptive rtol {args.rtol:g}" if adaptive else ""),
                       traj.t, traj.energy))
        how = f"adaptive (rtol {args.rtol:g}, {steps} steps)" if adaptive else f"dt = {args.dt} s"
        print(f"CHAIN-{args.links}, pbad order {order}, {how}, {duration:g} s: status {traj.status.value}, energy "
              f"error {err:.3f} % of the potential drop, wall time {traj.wall_time:.2f} s")

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, t, e in curves:
        ax.plot(t, e, label=label)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("kinetic + potential energy [J]")
    ax.set_title(f"CHAIN-{args.links} falling, output every {args.dt} s")
    ax.legend()
    png = save(fig, out / "chain_fall_energy.png", out / "chain_fall.json", results)
    print(f"energy plot written to {png}")
    return results


if __name__ == "__main__":
    main()
