"""SPIDER: a four-legged spider walks on the ground under a periodic stable-PD gait (seed 000 §6.2, Fig. 5b).

The spider (floating torso, four legs of a 2-DOF hip and a knee; 18 coordinates) stands on the plane
z = 0 through penalty contact with friction (``penalty_contact``, seed 000 Eq. 9) at its feet, knees and
torso corners. Stable-PD control (Tan et al., ``stable_pd``) tracks a trot: diagonal leg pairs swing
their hips about the vertical in antiphase, lifting the hip and flexing the knee during the swing. The
script reports the distance walked, the sideways drift and the change of heading. With ``--contact pbfd``
the feet touch the ground through seed 002's frictional contact instead (``pbfd_contact``: the normal force
of Eq. 8-9 and the corrected tangential force of Eq. 12, integrated by ``pbfd``, Eq. 13).

    python examples/spider_walk.py            # 6 s at dt = 0.02 s
    python examples/spider_walk.py --contact pbfd
    python examples/spider_walk.py --fast     # 1 s (also: PBF_EXAMPLES_FAST=1)
"""

from __future__ import annotations

import argparse
import os

import casadi as ca
import numpy as np

import pbframework as pbf
from pbframework import models

from _common import output_dir, pyplot, save  # examples/_common.py

DT = 0.02
CONTACT = {"stiffness": 5e3, "friction": 2e7}   # N/m; N s/m^3 (friction ~ D2 d^2 v, Eq. 9)
PBFD_CONTACT = {"normal_stiffness": 1e5, "friction": 1e10}   # C_perp (alpha = 2), C_par (seed 002)
GAINS = {"kp": 150.0, "kd": 3.0}               # stable PD on every leg joint
FREQUENCY = 1.5                                 # Hz
SWING, LIFT, FLEX = 0.16, 0.15, 0.36            # rad: hip yaw amplitude, hip lift, knee flex
LIFT_PHASE, FLEX_PHASE = -0.5, 0.55             # rad, relative to the hip swing
STANCE_HIP, STANCE_KNEE = -0.5, 1.4             # rad: the standing pose of models.spider_q0


def leg_dofs() -> list[str]:
    return [name for k in range(4) for name in (f"hip{k}:ry", f"hip{k}:rz", f"knee{k}")]


def trot(t):
    """Targets of :func:`leg_dofs` at time ``t`` (a CasADi expression): a diagonal-pair trot toward +x.

    Legs 0 and 2 (front-left, back-right) move in phase, legs 1 and 3 half a period later. A hip yaw
    ``SWING sin(theta)`` moves a foot along x with a sign that depends on the side of the body the leg is
    on, so all four feet push backward during their stance.
    """
    w = 2 * np.pi * FREQUENCY
    side = [1.0, 1.0, -1.0, -1.0]
    out = []
    for k in range(4):
        th = w * t + (np.pi if k % 2 else 0.0)
        out += [STANCE_HIP + LIFT * ca.cos(th + LIFT_PHASE), SWING * side[k] * ca.sin(th),
                STANCE_KNEE + FLEX * ca.cos(th + FLEX_PHASE)]
    return ca.vertcat(*out)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="1 s of walking (also PBF_EXAMPLES_FAST=1)")
    ap.add_argument("--duration", type=float, default=None, help="simulated seconds (default 6, fast 1)")
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    ap.add_argument("--contact", choices=("penalty", "pbfd"), default="penalty",
                    help="penalty contact with PBAD order 2 (default) or seed 002's PBFD contact and integrator")
    args = ap.parse_args(argv)
    fast = args.fast or os.environ.get("PBF_EXAMPLES_FAST") == "1"
    duration = args.duration or (1.0 if fast else 6.0)
    out = output_dir(args.out)

    model = models.spider()
    q0 = models.spider_q0(model)
    gait = ("stable_pd", {**GAINS, "target": trot, "dofs": leg_dofs()})
    if args.contact == "pbfd":
        sim = pbf.Simulator(model, integrator="pbfd", dt=DT, forces=["gravity", ("pbfd_contact", PBFD_CONTACT), gait])
    else:
        sim = pbf.Simulator(model, integrator="pbad", order=2, solver="lm", dt=DT,
                            forces=["gravity", ("penalty_contact", CONTACT), gait])
    traj = sim.rollout(q0, np.zeros(model.nq), duration)
    if traj.diverged:
        raise SystemExit(f"the simulation diverged at t = {traj.info['diverged_at']} s")
    x, y, z, yaw = (traj.q[:, model.dof_index(n)] for n in ("root:x", "root:y", "root:z", "root:rz"))
    distance = float(x[-1] - x[0])
    results = {"distance_m": distance, "speed_m_per_s": distance / duration,
               "sideways_drift_m": float(y[-1] - y[0]), "heading_change_rad": float(yaw[-1] - yaw[0]),
               "torso_height_min_m": float(z.min()), "torso_height_max_m": float(z.max()),
               "duration_s": duration, "dt_s": DT, "wall_time_s": traj.wall_time,
               "mean_iterations": float(np.mean(traj.stats["iterations"])), "contact": args.contact,
               "unconverged_steps": int((~traj.stats["converged"]).sum())}
    print(f"spider walked {distance:.3f} m forward in {duration:g} s ({distance / duration:.3f} m/s); "
          f"sideways drift {results['sideways_drift_m']:+.3f} m, heading change "
          f"{results['heading_change_rad']:+.3f} rad, torso height {z.min():.3f}..{z.max():.3f} m")
    print(f"{sim.integrator} ({args.contact} contact), dt = {DT} s: wall time {traj.wall_time:.2f} s, "
          f"{results['mean_iterations']:.1f} solver iterations per step")

    plt = pyplot()

    fig, (a1, a2) = plt.subplots(2, 1, figsize=(6, 4.5), sharex=True)
    a1.plot(traj.t, x, label="x (forward)")
    a1.plot(traj.t, y, label="y (sideways)")
    a1.set_ylabel("torso position [m]")
    a1.legend()
    a2.plot(traj.t, z)
    a2.set_ylabel("torso height [m]")
    a2.set_xlabel("time [s]")
    fig.suptitle("spider trotting on the ground")
    png = save(fig, out / "spider_walk.png", out / "spider_walk.json", results)
    print(f"torso trajectory written to {png}")
    return results


if __name__ == "__main__":
    main()
