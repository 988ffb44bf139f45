"""Direct transcription with the integrator's own step equations (pbframework.trajopt, issue 20 item 2)."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.differentiable import _conditions
from pbframework.model import ArticulatedBody
from pbframework.step import StepError
from pbframework.trajopt import Transcription

DT, N = 0.05, 60
LIMIT = 6.0                      # N m: below the 8.8 N m the unconstrained swing-up uses
DOWN, UP = np.array([np.pi / 2, 0.0]), np.array([-np.pi / 2, 0.0])


def double_pendulum() -> ArticulatedBody:
    return models.chain(2, "revolute")


def _sim(model, controller=lambda t, q, qd: np.zeros(2)):
    return pbf.Simulator(model, "pbad", order=2, dt=DT,
                         forces=["gravity", ("joint_torque", {"controller": controller, "dofs": ["joint0", "joint1"]})])


@pytest.fixture(scope="module")
def swing_up():
    m = double_pendulum()
    tp = Transcription(_sim(m), N, DOWN)
    tp.bound_controls(-LIMIT, LIMIT)
    tp.opti.subject_to(tp.q(N) == UP)
    tp.opti.subject_to(tp.qd(N) == 0)
    tp.minimize(ca.sumsqr(tp.U) * DT)
    tp.set_initial(q=np.linspace(DOWN, UP, N + 1))
    return m, tp, tp.solve()


def test_swing_up_converges_within_its_torque_limits(swing_up):
    _, _, r = swing_up
    assert r.success and r.status == "Solve_Succeeded" and 0 < r.iterations < 500
    assert np.abs(r.u).max() <= LIMIT + 1e-6 and np.abs(r.u).max() > 0.99 * LIMIT     # the limit is active
    assert np.allclose(r.q[-1], UP, atol=1e-8) and np.allclose(r.q[0], DOWN)


def test_the_solution_is_what_the_simulator_steps(swing_up):
    """Every knot-to-knot step of the solution is the Simulator's own step from that knot with that torque
    (open-loop replay over the whole horizon diverges: the swing-up passes through unstable poses and
    amplifies the solver's 1e-12 differences about 30-fold per step)."""
    m, _, r = swing_up
    sim = _sim(m, lambda t, q, qd: r.u[min(int(round(t / DT)), N - 1)])
    for k in range(N):
        s1, st = sim.advance(r.s[k], k * DT)
        assert st.converged and np.abs(s1 - r.s[k + 1]).max() < 1e-6, k


def test_a_simulated_trajectory_satisfies_the_constraints():
    m = double_pendulum()
    sim = _sim(m)
    pb = sim.problem
    g = _conditions(pb)
    s = sim.initial_state(DOWN + 0.4, np.zeros(2))
    for k in range(20):
        p = np.asarray(pb.params(s, k * DT, DT, np.zeros(2))).ravel()
        x = sim.solver.solve(pb, np.asarray(pb.guess(p)).ravel(), p).x
        assert np.abs(np.asarray(g(x, p))).max() < 1e-9
        s_next, _ = sim.advance(s, k * DT)
        assert np.allclose(np.asarray(pb.advance(x, p)).ravel(), s_next, atol=1e-12)
        s = s_next


def test_bad_input_is_one_clear_line():
    m = double_pendulum()
    tp = Transcription(_sim(m), 5, DOWN)
    with pytest.raises(StepError, match="control bounds must be a scalar or 2 values"):
        tp.bound_controls([-1.0, -1.0, -1.0], 1.0)
    with pytest.raises(StepError, match="does not depend on them"):
        tp.minimize(ca.MX(3.0))
    with pytest.raises(StepError, match="set a cost"):
        tp.solve()
    with pytest.raises(StepError, match="initial u must have shape"):
        tp.set_initial(u=np.zeros((5, 3)))
    with pytest.raises(StepError, match="steps must be a positive integer"):
        Transcription(_sim(m), 0, DOWN)
    with pytest.raises(StepError, match="no controls to bound"):
        Transcription(pbf.Simulator(m, "pbad", order=2, dt=DT), 3, DOWN).bound_controls(-1, 1)
    with pytest.raises(StepError, match="not smooth"):
        Transcription(pbf.Simulator(models.box(), "ne_nmdp", dt=DT, forces=["gravity", "wrench_polytope"]), 3,
                      models.box().neutral() if hasattr(models.box(), "neutral") else np.r_[0, 0, 0.1, 0, 0, 0])
