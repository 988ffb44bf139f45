"""A spider jumps: direct transcription through PBFD's contact steps, solved by IPOPT.

The spider (``pbframework.models.spider()``: a 2 kg torso on four legs of a 2-DOF hip and a knee, 18
coordinates, 4.4 kg) stands on the ground z = 0 with seed 002's frictional contact (``pbfd_contact``,
integrated by ``pbfd``, Eq. 13) at its feet, knees and torso corners, and has a torque input on each of
its 12 leg joints (within +-5 N m). ``pbframework.trajopt.Transcription`` makes each 20 ms PBFD step an
equality constraint between consecutive knots, contact forces and all; the last ``FLIGHT`` knots must have
every contact point at least 1 cm above the ground, and the torso may not sink below 6 cm (its corners stay
off the ground while it crouches). IPOPT minimises the integral of the squared torques, from the standing
pose held at every knot. Nothing prescribes the contact sequence: the optimiser finds the crouch, the push
and the take-off through the contact model, where shooting through the step function with its undamped
Newton rootfinder stops at the first impact.

The script prints IPOPT's status, iterations and time, the torso's rise above its standing height, how
long every contact point is off the ground and the feet's highest clearance, and checks each step of the
solution against the Simulator's own PBFD step from that knot with those torques. It plots the torso and
foot heights and the torques (``jump.png``).

    python examples/jump.py            # 30 steps (0.6 s), 8 of them in the air
    python examples/jump.py --fast     # 20 steps (0.4 s), 5 in the air (also PBF_EXAMPLES_FAST=1)
"""

from __future__ import annotations

import argparse
import os

import casadi as ca
import numpy as np

import pbframework as pbf
from pbframework import models
from pbframework.kinematics import contact_positions
from pbframework.trajopt import Transcription

from _common import output_dir, pyplot, save  # examples/_common.py

DT = 0.02
LIMIT = 5.0                                      # N m on every leg joint
CONTACT = {"normal_stiffness": 1e5, "friction": 1e6}
CLEARANCE = 0.01                                 # m: every contact point above the ground in the air
TORSO_MIN = 0.06                                 # m: the torso's lowest allowed height (half-thickness 0.05)


def leg_dofs() -> list[str]:
    return [name for k in range(4) for name in (f"hip{k}:ry", f"hip{k}:rz", f"knee{k}")]


def simulator(model, controller=lambda t, q, qd: np.zeros(12)):
    return pbf.Simulator(model, "pbfd", dt=DT, forces=["gravity", ("pbfd_contact", CONTACT),
                                                       ("joint_torque", {"controller": controller,
                                                                         "dofs": leg_dofs()})])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="20 steps, 5 in the air (also PBF_EXAMPLES_FAST=1)")
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    args = ap.parse_args(argv)
    fast = args.fast or os.environ.get("PBF_EXAMPLES_FAST") == "1"
    steps, flight = (20, 5) if fast else (30, 8)
    out = output_dir(args.out)
    model = models.spider()
    q0 = models.spider_q0(model)
    iz = model.dof_index("root:z")
    points = contact_positions(model)                      # q -> 3 x (contact points)
    feet = [i for i, (link, _) in enumerate(model.contact_points) if model.links[link].name.startswith("shin")]

    tp = Transcription(simulator(model), steps, q0)
    tp.bound_controls(-LIMIT, LIMIT)
    lower = np.full(model.nq, -np.inf)
    lower[iz] = TORSO_MIN
    tp.bound_configurations(lower, np.full(model.nq, np.inf))
    for k in range(steps - flight, steps + 1):
        tp.opti.subject_to(points(tp.q(k))[2, :] >= CLEARANCE)
    tp.minimize(ca.sumsqr(tp.U) * DT)
    tp.set_initial(q=np.repeat(q0[None], steps + 1, axis=0))
    r = tp.solve(max_iter=1000)

    z = r.q[:, iz]
    heights = np.array([np.asarray(points(q))[2] for q in r.q])     # knots x contact points
    lowest = heights.min(axis=1)
    airborne = lowest > 0.0
    foot_z = heights[:, feet]
    apex = int(np.argmax(z))
    sim = simulator(model, lambda t, q, qd: r.u[min(int(round(t / DT)), steps - 1)])
    worst, converged = 0.0, True
    for k in range(steps):
        s1, st = sim.advance(r.s[k], k * DT)
        worst, converged = max(worst, float(np.abs(s1 - r.s[k + 1]).max())), converged and st.converged
    result = {"success": r.success, "status": r.status, "iterations": r.iterations, "wall_time_s": r.wall_time,
              "steps": steps, "dt_s": DT, "cost": r.cost, "max_abs_torque": float(np.abs(r.u).max()),
              "standing_height_m": float(z[0]), "apex_height_m": float(z.max()), "rise_m": float(z.max() - z[0]),
              "crouch_m": float(z[:apex + 1].min()), "airborne_knots": int(airborne.sum()),
              "airborne_s": float(airborne.sum() * DT), "lowest_foot_best_m": float(foot_z.min(axis=1).max()),
              "highest_foot_m": float(foot_z.max()),
              "max_step_mismatch": worst, "replay_converged": bool(converged)}
    print(f"IPOPT: {r.status} after {r.iterations} iterations in {r.wall_time:.1f} s; max |torque| "
          f"{result['max_abs_torque']:.2f} N m (limit {LIMIT:g})")
    print(f"jump: the torso rises {result['rise_m'] * 100:.1f} cm above its standing height "
          f"({z[0]:.3f} -> {z.max():.3f} m at t = {r.t[apex]:.2f} s, after crouching to {result['crouch_m']:.3f} m); "
          f"every contact point is off the ground for {airborne.sum()} knots ({result['airborne_s']:.2f} s), all "
          f"four feet at once up to {result['lowest_foot_best_m'] * 100:.1f} cm, one up to "
          f"{result['highest_foot_m'] * 100:.1f} cm")
    print(f"the Simulator's own PBFD steps from the solution's knots differ from the next knots by at most "
          f"{worst:.1e} (every step converged: {converged})")

    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    ax[0].plot(r.t, z, label="torso")
    ax[0].plot(r.t, foot_z, lw=0.8, c="0.5")
    ax[0].plot([], [], lw=0.8, c="0.5", label="feet")
    ax[0].axhline(0.0, c="k", lw=0.5)
    ax[0].axhline(z[0], ls=":", c="C0", lw=0.8)
    ax[0].fill_between(r.t, 0, 1, where=airborne, transform=ax[0].get_xaxis_transform(), color="C1", alpha=0.15,
                       label="in the air")
    ax[0].set(xlabel="t (s)", ylabel="height (m)", title="spider jump (PBFD contact)")
    ax[0].legend(fontsize=8)
    ax[1].step(r.t[:-1], r.u, where="post", lw=0.8)
    ax[1].set(xlabel="t (s)", ylabel="torque (N m)", title="leg joint torques")
    save(fig, out / "jump.png", out / "jump.json", result)
    return result


if __name__ == "__main__":
    main()
