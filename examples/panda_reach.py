"""The panda reaching a target through a via-point within its URDF limits: direct transcription with PBAD.

The panda (example-robot-data, 7 arm joints and 2 fingers, gravity) starts at rest mid-range in its joint
limits and must pass its hand (``panda_hand``'s origin) through a via-point at half time and stop at rest at a
target at the end of 2 s. ``pbframework.trajopt.Transcription`` makes each of the 40 PBAD order-2 steps
(dt = 0.05 s) an equality constraint; the joint positions stay within the URDF's limits and the seven arm
torques within its effort limits; the fingers are passive. IPOPT minimises the integral of the squared
torques from a documented initial guess: the start configuration held at every knot, zero torques. The script
prints IPOPT's status, iterations and time and how far the hand is from each goal, and plots the hand's path
and the torques (``panda_reach.png``).

    python examples/panda_reach.py
    python examples/panda_reach.py --fast     # accepted for the test suite (the run is the same)
"""

from __future__ import annotations

import argparse

import casadi as ca
import numpy as np

import pbframework as pbf
from pbframework import models
from pbframework.io import load_urdf
from pbframework.kinematics import point_position
from pbframework.trajopt import Transcription

from _common import output_dir, pyplot, save  # examples/_common.py

DT, STEPS = 0.05, 40
ARM = [f"panda_joint{i}" for i in range(1, 8)]
VIA, TARGET = np.array([0.45, 0.25, 0.55]), np.array([0.35, -0.3, 0.35])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="accepted for the test suite; the run is the same")
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    args = ap.parse_args(argv)
    out = output_dir(args.out)
    root = models.example_robot_data_dir()
    if root is None:
        raise SystemExit("panda_reach: example-robot-data is not installed (pip install example-robot-data)")
    model = load_urdf(root / "panda_description" / "urdf" / "panda.urdf", limits=False)
    movable = [j for j in model.joints if j.type.value != "fixed"]
    lower, upper = np.array([j.lower for j in movable]), np.array([j.upper for j in movable])
    effort = np.array([j.effort for j in movable if j.name in ARM])          # in ARM's order (the model's)
    q0 = 0.5 * (lower + upper)
    sim = pbf.Simulator(model, "pbad", order=2, dt=DT,
                        forces=["gravity", ("joint_torque", {"controller": lambda t, q, qd: np.zeros(7), "dofs": ARM})])
    tp = Transcription(sim, STEPS, q0)
    tp.bound_configurations(lower, upper)
    for k in range(STEPS):
        tp.opti.subject_to(tp.opti.bounded(-effort, tp.U[:, k], effort))
    hand = point_position(model, "panda_hand")
    tp.opti.subject_to(hand(tp.q(STEPS // 2), np.zeros(3)) == VIA)
    tp.opti.subject_to(hand(tp.q(STEPS), np.zeros(3)) == TARGET)
    tp.opti.subject_to(tp.qd(STEPS) == 0)
    tp.minimize(ca.sumsqr(tp.U) * DT)
    r = tp.solve()
    path = np.array([np.asarray(hand(q, np.zeros(3))).ravel() for q in r.q])
    result = {"success": r.success, "status": r.status, "iterations": r.iterations, "wall_time_s": r.wall_time,
              "via_error_m": float(np.linalg.norm(path[STEPS // 2] - VIA)),
              "target_error_m": float(np.linalg.norm(path[-1] - TARGET)),
              "max_torque_fraction": float(np.max(np.abs(r.u) / effort)),
              "within_limits": bool(np.all(r.q >= lower - 1e-6) and np.all(r.q <= upper + 1e-6))}
    print(f"IPOPT: {r.status} after {r.iterations} iterations in {r.wall_time:.2f} s; hand {result['via_error_m']:.1e} m "
          f"from the via-point and {result['target_error_m']:.1e} m from the target; torques at most "
          f"{100 * result['max_torque_fraction']:.0f}% of the effort limits; joints within limits: "
          f"{result['within_limits']}")
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    ax[0].plot(path[:, 0], path[:, 1], "o-", ms=2)
    ax[0].plot(*VIA[:2], "s", label="via-point")
    ax[0].plot(*TARGET[:2], "*", ms=12, label="target")
    ax[0].set(xlabel="x (m)", ylabel="y (m)", title="hand path (top view)")
    ax[0].legend()
    ax[1].step(r.t[:-1], r.u, where="post")
    ax[1].set(xlabel="t (s)", ylabel="torque (N m)", title="arm torques")
    save(fig, out / "panda_reach.png", out / "panda_reach.json", result)
    return result


if __name__ == "__main__":
    main()
