"""A chain sliding down a slope (seed 002's CHAIN-SLOPE): Coulomb dry friction against PBFD's frictional contact.

CHAIN-10 on a free base lies across a 20-degree slope and slides down under gravity. The script runs it with
the Newton-Euler dry-friction baseline (``ne_dry_friction`` + ``dry_friction``, mu 0.2: one qpOASES QP per
step) and with position-based frictional dynamics (``pbfd`` + ``pbfd_contact``, generated C), both at
dt = 0.01 s, and prints how far the chain's centre of mass slid next to the rigid slider's Coulomb answer,
``g (sin a - mu cos a) t^2 / 2``. The baseline follows it; PBFD's friction is a different model (Eq. 12,
growing with each step's displacement), so its distance depends on ``C_par`` and on dt
(``benchmarks/chain_slope.py`` measures both). The centre of mass along the slope is plotted for both.

    python examples/chain_slide.py            # CHAIN-10, 3 s
    python examples/chain_slide.py --fast     # CHAIN-3, 1 s (also: PBF_EXAMPLES_FAST=1)
"""

from __future__ import annotations

import argparse
import math
import os

import numpy as np

import pbframework as pbf

from _common import output_dir, pyplot, save  # examples/_common.py

SLOPE_DEG, MU, DT = 20.0, 0.2, 0.01
PBFD_CONTACT = {"normal_stiffness": 1e5, "friction": 1e8}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="CHAIN-3 for 1 s (also PBF_EXAMPLES_FAST=1)")
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    args = ap.parse_args(argv)
    fast = args.fast or os.environ.get("PBF_EXAMPLES_FAST") == "1"
    links, duration = (3, 1.0) if fast else (10, 3.0)
    out = output_dir(args.out)
    model, q0, normal = pbf.models.chain_slope(links, SLOPE_DEG)
    com = pbf.kinematics.center_of_mass(model)
    a = math.radians(SLOPE_DEG)
    down = np.array([math.cos(a), 0.0, -math.sin(a)])
    coulomb = 0.5 * 9.81 * (math.sin(a) - MU * math.cos(a)) * duration ** 2
    runs = {
        "ne_dry_friction": pbf.Simulator(model, "ne_dry_friction", dt=DT,
                                         forces=["gravity", ("dry_friction", {"mu": MU, "normal": normal})]),
        "pbfd": pbf.Simulator(model, "pbfd", dt=DT, backend="c",
                              forces=["gravity", ("pbfd_contact", {**PBFD_CONTACT, "normal": normal})]),
    }
    results, curves = {"coulomb_m": coulomb}, []
    c0 = np.asarray(com(q0)).ravel()
    for name, sim in runs.items():
        traj = sim.rollout(q0, None, duration=duration)
        along = np.array([down @ (np.asarray(com(q)).ravel() - c0) for q in traj.q])
        results[name] = {"status": traj.status.value, "slid_m": float(along[-1]), "wall_time_s": traj.wall_time}
        print(f"{name:<16} status {traj.status.value}: slid {along[-1]:.3f} m in {duration:g} s "
              f"(wall {traj.wall_time:.2f} s)")
        curves.append((name, traj.t, along))
    print(f"{'Coulomb':<16} a rigid slider with mu = {MU}: {coulomb:.3f} m")

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, t, s in curves:
        ax.plot(t, s, label=name)
    t = np.linspace(0, duration, 50)
    ax.plot(t, 0.5 * 9.81 * (math.sin(a) - MU * math.cos(a)) * t ** 2, "k:", label="Coulomb, rigid")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("centre of mass down the slope [m]")
    ax.legend()
    png = save(fig, out / "chain_slide.png", out / "chain_slide.json", results)
    print(f"plotted to {png}")
    return results


if __name__ == "__main__":
    main()
