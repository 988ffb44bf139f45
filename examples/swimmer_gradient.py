"""SWIMMER by gradient: the gait of ``swimmer_cmaes.py`` optimised through the rollout's exact gradient.

The same swimmer, drag and gait family as ``examples/swimmer_cmaes.py`` (hinge targets ``A_i sin(2 pi f t +
phi_i)``, ``phi_1 = 0``, stable PD with the same gains, PBAD order 2 at dt = 0.05 s), but the search is
L-BFGS-B (scipy) on the exact gradient of the forward speed with respect to the five gait parameters: the
rollout is ``sim.step_function().mapaccum(...)`` (pbframework.differentiable), the hinge targets of every step
are a CasADi expression of the parameters fed in as per-step inputs, and one reverse sweep through the whole
rollout gives the gradient (the implicit steps are differentiated by the implicit function theorem). The
script prints the forward speed before and after, the number of rollouts (function-and-gradient evaluations)
it took, and plots the speed against rollouts (``swimmer_gradient.png``); ``examples/swimmer_cmaes.py``
prints CMA-ES's numbers for the same problem (10 rollouts per generation).

    python examples/swimmer_gradient.py            # 4 s rollouts, up to 30 iterations
    python examples/swimmer_gradient.py --fast     # 2 s rollouts, up to 4 iterations (also PBF_EXAMPLES_FAST=1)
"""

from __future__ import annotations

import argparse
import os
import time

import casadi as ca
import numpy as np
from scipy.optimize import minimize

import pbframework as pbf
from pbframework import models
from pbframework.forces import ForceForm, ForceModel
from pbframework.plugins.forces._common import cached_function, gather

from _common import output_dir, pyplot, save  # examples/_common.py

FREQUENCY = 1.0                                          # as examples/swimmer_cmaes.py
DRAG = {"coefficient": 0.5, "normal_coefficient": 5.0}
KP, KD = 20.0, 1.0
DT = 0.05
HINGES = ["hinge1", "hinge2", "hinge3"]
HEAD = np.array([-1.0, 0.0, 0.0])                        # swimming head first: along -x


class InputTargetPD(ForceModel):
    """Stable PD on the hinges toward a target given as the step's input ``u`` (one angle per hinge): the
    potential ``kp/2 |q_next - u|^2 + kd/(2 dt) |q_next - q_cur|^2`` of ``stable_pd`` with its target read from
    the per-step inputs, so the target can be a decision variable."""

    name = "input_target_pd"
    forms = frozenset({ForceForm.POTENTIAL})

    def n_inputs(self, model):
        return len(HINGES)

    def input_values(self, model, t, q, qd):
        return np.zeros(len(HINGES))            # the rollout below passes its own inputs

    def potential(self, model, q_next, q_cur, q_prev, dt, t, u=None):
        def build():
            qn, qc, uu, h = ca.SX.sym("qn", model.nq), ca.SX.sym("qc", model.nq), ca.SX.sym("u", 3), ca.SX.sym("dt")
            idx = [model.dof_index(n) for n in HINGES]
            e, s = gather(idx, qn) - uu, gather(idx, qn) - gather(idx, qc)
            return ca.Function("Q", [qn, qc, uu, h], [0.5 * KP * ca.dot(e, e) + KD * ca.dot(s, s) / (2 * h)])

        return cached_function(model, self, "Q", build)(q_next, q_cur, u, dt)


def targets(x, times):
    """Hinge targets (3 x len(times)) at ``times`` for gait parameters ``x = (A1, A2, A3, phi2, phi3)``."""
    w = 2 * np.pi * FREQUENCY
    phase = [0.0, x[3], x[4]]
    return ca.vertcat(*[ca.horzcat(*[x[i] * ca.sin(w * t + phase[i]) for t in times]) for i in range(3)])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="2 s rollouts, 4 iterations (also PBF_EXAMPLES_FAST=1)")
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    args = ap.parse_args(argv)
    fast = args.fast or os.environ.get("PBF_EXAMPLES_FAST") == "1"
    duration, iterations = (2.0, 4) if fast else (4.0, 30)
    out = output_dir(args.out)
    model = models.swimmer()
    sim = pbf.Simulator(model, "pbad", order=2, dt=DT, forces=[("drag", DRAG), InputTargetPD()])
    steps = int(round(duration / DT))
    times = np.arange(steps) * DT
    roll = sim.step_function().mapaccum("roll", steps)
    s0 = sim.initial_state(np.zeros(model.nq), np.zeros(model.nv))
    com = pbf.kinematics.center_of_mass(model)
    x = ca.MX.sym("x", 5)
    S = roll(s0, times[None, :], DT, targets(x, times + DT))      # the target at each step's end, as stable_pd
    speed = ca.dot(com(S[: model.nq, -1]) - com(s0[: model.nq]), HEAD) / duration
    f = ca.Function("speed_and_gradient", [x], [speed, ca.gradient(speed, x)])
    history = []

    def objective(xv):
        v, g = f(xv)
        history.append(float(v))
        return -float(v), -np.asarray(g).ravel()

    x0 = np.array([0.5, 0.5, 0.5, 0.0, 0.0])                     # swimmer_cmaes.py's start
    bounds = [(0.0, 1.2)] * 3 + [(-np.pi, np.pi)] * 2            # and its bounds
    t0 = time.perf_counter()
    res = minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": iterations})
    wall = time.perf_counter() - t0
    result = {"speed_before": history[0], "speed_after": -float(res.fun), "rollouts": len(history),
              "iterations": int(res.nit), "best_gait": res.x.tolist(), "wall_time_s": wall,
              "speed_per_rollout": history, "duration_s": duration}
    print(f"forward speed before {history[0]:+.4f} m/s, after {result['speed_after']:+.4f} m/s in {len(history)} "
          f"rollouts with gradients ({res.nit} L-BFGS-B iterations, {wall:.1f} s; amplitudes "
          f"{np.round(res.x[:3], 3).tolist()} rad, phases {np.round(res.x[3:], 3).tolist()} rad)")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(np.arange(1, len(history) + 1), history, "o-")
    ax.set(xlabel="rollouts (each with its gradient)", ylabel="forward speed (m/s)",
           title="swimmer gait by L-BFGS-B on the exact gradient")
    save(fig, out / "swimmer_gradient.png", out / "swimmer_gradient.json", result)
    return result


if __name__ == "__main__":
    main()
