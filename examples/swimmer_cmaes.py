"""SWIMMER: a 4-link swimmer learns to swim forward with CMA-ES (seed 000 §6.2, Fig. 5a).

The swimmer (a floating base link and three hinges, neutrally buoyant) is driven by stable-PD control of
its hinges toward periodic targets ``A_i sin(2 pi f t + phi_i)``; the fluid acts through the ``drag``
force model. CMA-ES (package ``cma``) searches the amplitudes and phases that maximise the forward speed
of the centre of mass (head first, i.e. along -x).

Drag is anisotropic (``normal_coefficient`` > ``coefficient``): a thin segment is resisted more across
its axis than along it. With the paper's isotropic, mass-proportional drag the total momentum obeys
``dp/dt = -D p`` and a swimmer starting at rest cannot move its centre of mass at all; the script shows
that too.

    python examples/swimmer_cmaes.py            # 25 generations of 4 s rollouts
    python examples/swimmer_cmaes.py --fast     # 3 small generations (also: PBF_EXAMPLES_FAST=1)
    python examples/swimmer_cmaes.py --scheduler tcp://host:8786   # each population on a Dask cluster
    python examples/swimmer_cmaes.py --scheduler local             # ... on 2 local worker processes

With ``--scheduler`` every generation's gaits are rolled out as tasks on the cluster's workers (extra
``distributed``: ``pip install "pbframework[distributed]"``); each worker builds the swimmer once, and the
search takes the same steps as on one machine.
"""

from __future__ import annotations

import argparse
import os

import casadi as ca
import numpy as np

import pbframework as pbf
from pbframework import models

from _common import output_dir, pyplot, save  # examples/_common.py

FREQUENCY = 1.0          # Hz, of the hinge targets
DRAG = {"coefficient": 0.5, "normal_coefficient": 5.0}   # 1/s along / across each segment
GAINS = {"kp": 20.0, "kd": 1.0}                           # stable PD on the hinges
DT = 0.05


def gait(x: np.ndarray):
    """Hinge targets for the search vector ``x = (A1, A2, A3, phi2, phi3)`` (phi1 = 0) as a CasADi function of t."""
    amp, phase = x[:3], np.concatenate([[0.0], x[3:]])
    w = 2 * np.pi * FREQUENCY
    return lambda t: ca.vertcat(*[float(amp[i]) * ca.sin(w * t + float(phase[i])) for i in range(3)])


def swim(model, x: np.ndarray, duration: float, drag: dict = DRAG):
    """Roll out one gait; return (forward speed of the centre of mass in m/s, COM path (n, 3))."""
    sim = pbf.Simulator(model, integrator="pbad", order=2, solver="lm", dt=DT,
                        forces=[("drag", drag), ("stable_pd", {**GAINS, "target": gait(x)})])
    traj = sim.rollout(np.zeros(model.nq), np.zeros(model.nq), duration)
    if traj.diverged:
        return -np.inf, np.zeros((1, 3))
    com = pbf.kinematics.center_of_mass(model).map(len(traj.t))(traj.q.T)
    path = np.asarray(com).T
    head = np.array([-1.0, 0.0, 0.0])  # from the tail toward the head (link seg0) at t = 0
    return float((path[-1] - path[0]) @ head) / (traj.t[-1] - traj.t[0]), path


_SWIMMER: list = []


def swim_speed(x: np.ndarray, duration: float) -> float:
    """A population member's forward speed, on whatever process runs it (the model built once there)."""
    if not _SWIMMER:
        _SWIMMER.append(models.swimmer())
    return swim(_SWIMMER[0], np.asarray(x), duration)[0]


def main(argv: list[str] | None = None) -> dict:
    import cma

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="a few small generations (also PBF_EXAMPLES_FAST=1)")
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    ap.add_argument("--seed", type=int, default=3, help="CMA-ES seed")
    ap.add_argument("--scheduler", metavar="ADDRESS",
                    help="roll out each population on this Dask scheduler (tcp://host:8786), or 'local': a "
                         "LocalCluster of 2 worker processes")
    args = ap.parse_args(argv)
    fast = args.fast or os.environ.get("PBF_EXAMPLES_FAST") == "1"
    generations, popsize, duration = (3, 6, 2.0) if fast else (25, 10, 4.0)
    out = output_dir(args.out)
    model = models.swimmer()

    x0 = np.array([0.5, 0.5, 0.5, 0.0, 0.0])   # all hinges in phase: a standing wave, barely swims
    v0, path0 = swim(model, x0, duration)
    v_iso, _ = swim(model, x0 + [0, 0, 0, 1.2, 2.4], duration, drag={"coefficient": 1.0})
    print(f"initial gait: forward speed {v0:+.4f} m/s")
    print(f"a travelling wave under isotropic drag (the paper's model): forward speed {v_iso:+.2e} m/s "
          f"(zero: isotropic drag conserves zero momentum)")

    lower, upper = [0.0] * 3 + [-np.pi] * 2, [1.2] * 3 + [np.pi] * 2
    es = cma.CMAEvolutionStrategy(x0, 0.5, {"popsize": popsize, "seed": args.seed, "bounds": [lower, upper],
                                            "verbose": -9})
    history = []
    client = cluster = None
    if args.scheduler:
        from dask.distributed import Client, LocalCluster

        if args.scheduler == "local":
            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster or args.scheduler)
        print(f"population on {len(client.nthreads())} Dask worker(s) at {client.scheduler.address}")
    for g in range(generations):
        xs = es.ask()
        if client is not None:
            speeds = client.gather(client.map(swim_speed, [np.asarray(x) for x in xs], duration=duration,
                                              pure=False))
        else:
            speeds = [swim(model, np.asarray(x), duration)[0] for x in xs]
        es.tell(xs, [-v if np.isfinite(v) else 1e3 for v in speeds])
        history.append(max(speeds))
        print(f"generation {g + 1}/{generations}: best forward speed {max(speeds):+.4f} m/s")
    if client is not None:
        client.close()
        if cluster is not None:
            cluster.close()
    x_best = np.asarray(es.result.xbest)
    v_best, path = swim(model, x_best, duration)
    print(f"forward speed before CMA-ES {v0:+.4f} m/s, after {v_best:+.4f} m/s "
          f"(amplitudes {np.round(x_best[:3], 3).tolist()} rad, phases {np.round(x_best[3:], 3).tolist()} rad)")

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(path0[:, 0], path0[:, 1], label=f"initial gait ({v0:+.3f} m/s)")
    ax.plot(path[:, 0], path[:, 1], label=f"after CMA-ES ({v_best:+.3f} m/s)")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title("swimmer centre of mass")
    ax.legend()
    results = {"speed_before": v0, "speed_after": v_best, "speed_isotropic_drag": v_iso,
               "best_gait": x_best.tolist(), "best_speed_per_generation": history,
               "population_on": "dask" if args.scheduler else "this process"}
    png = save(fig, out / "swimmer_com.png", out / "swimmer_cmaes.json", results)
    print(f"centre-of-mass paths written to {png}")
    return results


if __name__ == "__main__":
    main()
