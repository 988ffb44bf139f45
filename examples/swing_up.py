"""Swinging a double pendulum up with bounded torques: direct transcription with PBAD's own step equations.

The double pendulum (``pbframework.models.chain(2, "revolute")``: two 1 m, 1 kg links, hinges about y) starts hanging
at rest and must stand upright at rest after 3 s, with both joint torques within +-6 N m (the unconstrained
optimum needs 8.8 N m, so the limit is active and the motion has to swing). ``pbframework.trajopt.
Transcription`` makes every step of PBAD order 2 (dt = 0.05 s: 60 steps) an equality constraint between
consecutive knots, and IPOPT minimises the integral of the squared torques. Initial guess: the configurations
interpolated linearly from hanging to upright, torques zero. The script prints IPOPT's status, iterations and
time, checks each step of the solution against the Simulator's own step from that knot with that torque,
and plots the joint angles and torques (``swing_up.png``).

    python examples/swing_up.py            # 60 steps
    python examples/swing_up.py --fast     # the same (it takes under a second; PBF_EXAMPLES_FAST is accepted)
"""

from __future__ import annotations

import argparse

import casadi as ca
import numpy as np

import pbframework as pbf
from pbframework import models
from pbframework.trajopt import Transcription

from _common import output_dir, pyplot, save  # examples/_common.py

DT, STEPS, LIMIT = 0.05, 60, 6.0
DOWN, UP = np.array([np.pi / 2, 0.0]), np.array([-np.pi / 2, 0.0])


def simulator(model, controller=lambda t, q, qd: np.zeros(2)):
    return pbf.Simulator(model, "pbad", order=2, dt=DT,
                         forces=["gravity", ("joint_torque", {"controller": controller, "dofs": ["joint0", "joint1"]})])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="accepted for the test suite; the run is already short")
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    args = ap.parse_args(argv)
    out = output_dir(args.out)
    model = models.chain(2, "revolute")
    tp = Transcription(simulator(model), STEPS, DOWN)
    tp.bound_controls(-LIMIT, LIMIT)
    tp.opti.subject_to(tp.q(STEPS) == UP)
    tp.opti.subject_to(tp.qd(STEPS) == 0)
    tp.minimize(ca.sumsqr(tp.U) * DT)
    tp.set_initial(q=np.linspace(DOWN, UP, STEPS + 1))
    r = tp.solve()
    sim = simulator(model, lambda t, q, qd: r.u[min(int(round(t / DT)), STEPS - 1)])
    worst = max(float(np.abs(sim.advance(r.s[k], k * DT)[0] - r.s[k + 1]).max()) for k in range(STEPS))
    result = {"success": r.success, "status": r.status, "iterations": r.iterations, "wall_time_s": r.wall_time,
              "cost": r.cost, "max_abs_torque": float(np.abs(r.u).max()), "final_q": r.q[-1].tolist(),
              "max_step_mismatch": worst}
    print(f"IPOPT: {r.status} after {r.iterations} iterations in {r.wall_time:.2f} s; cost {r.cost:.2f} N^2 m^2 s, "
          f"max |torque| {result['max_abs_torque']:.2f} N m (limit {LIMIT:g}); the Simulator's own steps from the "
          f"solution's knots differ from the next knots by at most {worst:.1e}")
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    ax[0].plot(r.t, r.q)
    ax[0].set(xlabel="t (s)", ylabel="angle (rad)", title="joint angles (pi/2: hanging, -pi/2: upright)")
    ax[0].legend(["joint0", "joint1"])
    ax[1].step(r.t[:-1], r.u, where="post")
    ax[1].axhline(LIMIT, ls=":", c="k")
    ax[1].axhline(-LIMIT, ls=":", c="k")
    ax[1].set(xlabel="t (s)", ylabel="torque (N m)", title="torques")
    save(fig, out / "swing_up.png", out / "swing_up.json", result)
    return result


if __name__ == "__main__":
    main()
