"""solo12 walking with the NMDP integrator (seed 001) at dt = 20 ms.

solo12 (example-robot-data, free base) tracks a periodic trot (``pbframework.gaits.quadruped_targets``) with
stable PD; contact is the wrench polytope of seed 001 (``wrench_polytope``: smoothed linearised Coulomb cone
at the four feet), integrated by ``pbd_nmdp`` (position-based dynamics, Eq. 12) with the first-order projected
gradient solver ``pgm`` (Alg. 1, QPs by qpOASES) and Alg. 2's subdivision where PGM does not converge. The
script prints the distance walked, the largest torso tilt, the PGM iterations per step and the wall time, and
plots the base's x position and height against time (``quadruped_walk.png``).

    python examples/quadruped_walk.py            # 4 s
    python examples/quadruped_walk.py --fast     # 1 s (also: PBF_EXAMPLES_FAST=1)
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import pbframework as pbf
from pbframework import models
from pbframework.gaits import quadruped_targets
from pbframework.kinematics import link_transform

from _common import output_dir, pyplot, save  # examples/_common.py

DT = 0.02
CONTACT = {"mu": 0.8, "force_scale": 2000.0, "depth_scale": 0.01, "zeta": 1e-5,
           "offset": models.SOLO12_FOOT_RADIUS}      # foot centres touch the plane z = foot radius
KP, KD = 8.0, 0.2


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="1 s (also PBF_EXAMPLES_FAST=1)")
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    args = ap.parse_args(argv)
    duration = 1.0 if (args.fast or os.environ.get("PBF_EXAMPLES_FAST") == "1") else 4.0
    out = output_dir(args.out)
    model = models.solo12()
    q0 = models.solo12_q0(model)
    dofs, walk = quadruped_targets(model, "walk")
    forces = ["gravity", ("stable_pd", {"kp": KP, "kd": KD, "target": walk, "dofs": dofs}),
              ("wrench_polytope", CONTACT)]
    sim = pbf.Simulator(model, "pbd_nmdp", solver="pgm", dt=DT, forces=forces, max_halvings=10)
    traj = sim.rollout(q0, np.zeros(model.nv), duration=duration)
    up = link_transform(model, "base_link")
    tilt = max(float(np.degrees(np.arccos(np.clip(np.asarray(up(q))[2, 2], -1, 1)))) for q in traj.q)
    st = traj.stats
    result = {"status": traj.status.value, "duration_s": duration, "dt": DT,
              "walked_m": float(traj.q[-1, 0] - q0[0]), "max_tilt_deg": tilt,
              "iterations_per_step": float(np.mean(st["iterations"])), "halvings": int(np.sum(st["halvings"])),
              "wall_time_s": traj.wall_time}
    print(f"solo12 pbd_nmdp dt = {DT * 1e3:g} ms, {duration:g} s: status {result['status']}, walked "
          f"{result['walked_m']:.3f} m along x, max torso tilt {tilt:.1f} deg, {result['iterations_per_step']:.1f} "
          f"PGM iterations per step, {result['halvings']} halvings (Alg. 2), wall {traj.wall_time:.1f} s")
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    ax[0].plot(traj.t, traj.q[:, 0] - q0[0])
    ax[0].set(xlabel="t (s)", ylabel="base x (m)", title="distance walked")
    ax[1].plot(traj.t, traj.q[:, 2])
    ax[1].set(xlabel="t (s)", ylabel="base z (m)", title="base height")
    fig.suptitle(f"solo12 trot, pbd_nmdp + pgm, dt = {DT * 1e3:g} ms")
    save(fig, out / "quadruped_walk.png", out / "quadruped_walk.json", result)
    return result


if __name__ == "__main__":
    main()
