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


# -- models with quaternion joints (nq != nv) -------------------------------------------------------------

def free_arm() -> ArticulatedBody:
    """A free (quaternion) base link with one hinged link, in zero gravity: nq 8, nv 7."""
    from pbframework.model import Joint

    m0 = models.chain(2, "revolute", floating=True)
    joints = [Joint(j.name, "free" if j.type.value == "floating" else j.type, j.parent, j.child, origin=j.origin,
                    axis=j.axis) for j in m0.joints]
    return ArticulatedBody(m0.links, joints, gravity=(0.0, 0.0, 0.0), name="free_arm")


def _arm_sim(model, controller=lambda t, q, qd: np.zeros(1), integrator="pbad", order=2):
    return pbf.Simulator(model, integrator, order=order, dt=DT,
                         forces=[("joint_torque", {"controller": controller, "dofs": ["joint1"]})])


@pytest.mark.parametrize("integrator,order", [("pbad", 2), ("pbad", 3), ("pbfd", None)])
def test_quaternion_model_a_simulated_trajectory_satisfies_the_transcription(integrator, order):
    """The transcription's own constraints (step conditions, state update with the exponential map, the
    tangent max_step bound) evaluated at a trajectory the Simulator took: residual below IPOPT's tolerance,
    for every integrator on the group."""
    m = free_arm()
    assert m.on_group and (m.nq, m.nv) == (8, 7)
    n = 12
    torque = lambda t, q, qd: np.array([0.3 * np.sin(3 * t)])           # noqa: E731
    sim = _arm_sim(m, torque, integrator, order)
    pb = sim.problem
    s = sim.initial_state(m.neutral(), np.r_[0.0, 0.0, 0.0, 0.1, 0.2, 0.0, 0.5])
    S, X, U = [s], [], []
    for k in range(n):
        u = sim.inputs(k * DT, s[:m.nq], s[m.nq:m.nq + m.nv])
        p = np.asarray(pb.params(s, k * DT, DT, u)).ravel()
        res = sim.solver.solve(pb, np.asarray(pb.guess(p)).ravel(), p)
        s, st = sim.advance(s, k * DT)
        assert res.converged and st.converged
        S.append(s), X.append(res.x), U.append(u)
    tp = Transcription(_arm_sim(m, integrator=integrator, order=order), n, m.neutral(),
                       np.r_[0.0, 0.0, 0.0, 0.1, 0.2, 0.0, 0.5])
    opti = tp.opti
    at = [tp.S == np.array(S).T, tp.X == np.array(X).T, tp.U == np.array(U).T]
    g, lbg, ubg = (np.asarray(opti.value(e, at)).ravel() for e in (opti.g, opti.lbg, opti.ubg))
    violation = np.maximum(lbg - g, g - ubg).max()
    assert violation < 1e-8
    q = np.array(S)[:, :m.nq]
    assert np.abs(np.linalg.norm(q[:, 3:7], axis=1) - 1).max() < 1e-12    # the Simulator's quaternions: unit


def test_quaternion_model_small_problem_solves_and_replays():
    """Turn the hinge of the free arm from 0 to 1 rad in 1 s, at rest at the end, with |torque| <= 1 N m: the
    base turns the other way (zero angular momentum), its quaternion stays unit, and the Simulator's own step
    from every knot lands on the next knot."""
    m = free_arm()
    n = 20
    q0 = m.neutral()
    goal = q0.copy()
    goal[-1] = 1.0
    tp = Transcription(_arm_sim(m), n, q0)
    tp.bound_controls(-1.0, 1.0)
    with pytest.raises(StepError, match="q_ref needs 8 values"):
        tp.q_error(n, goal[:7])
    tp.opti.subject_to(tp.q_error(n, goal)[6] == 0)             # the hinge's tangent entry
    tp.opti.subject_to(tp.qd(n) == 0)
    tp.minimize(ca.sumsqr(tp.U) * DT)
    r = tp.solve()
    assert r.success and 0 < r.iterations < 100
    assert abs(r.q[-1, -1] - 1.0) < 1e-8 and np.abs(r.u).max() <= 1.0 + 1e-6
    assert np.abs(np.linalg.norm(r.q[:, 3:7], axis=1) - 1).max() < 1e-9
    assert abs(r.q[-1, 4]) > 0.05                                # the base turned about y (qy of the quaternion)
    sim = _arm_sim(m, lambda t, q, qd: r.u[min(int(round(t / DT)), n - 1)])
    for k in range(n):
        s1, st = sim.advance(r.s[k], k * DT)
        assert st.converged and np.abs(s1 - r.s[k + 1]).max() < 1e-6, k


def test_jit_solve_gives_the_virtual_machines_solution(tmp_path, monkeypatch):
    """solve(jit=True): the NLP's functions as compiled C (CasADi's jit): same iterations, same optimum, and
    CasADi's C and object files are not left in the working directory."""
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("jit needs gcc")
    monkeypatch.chdir(tmp_path)
    m = double_pendulum()
    out = []
    for jit in (False, True):
        tp = Transcription(_sim(m), 10, DOWN)
        tp.bound_controls(-LIMIT, LIMIT)
        tp.opti.subject_to(tp.q(10) == DOWN + np.array([-0.2, 0.1]))
        tp.minimize(ca.sumsqr(tp.U) * DT)
        out.append(tp.solve(jit=jit))
    vm, c = out
    assert vm.success and c.success and vm.iterations == c.iterations
    assert np.abs(vm.u - c.u).max() < 1e-8 and abs(vm.cost - c.cost) < 1e-10 * max(1.0, vm.cost)
    assert list(tmp_path.iterdir()) == []


def test_quaternion_model_initial_guess_has_tangent_velocities():
    """set_initial(q) on the group: a path at constant body velocity v (q_{k+1} = q_k (+) v dt) gives knot
    states whose velocity entries are v (finite differences of q_difference), and a wrong shape is one line."""
    from pbframework.lie import q_integrate

    m = free_arm()
    n = 6
    v = np.array([0.1, -0.2, 0.05, 0.3, -0.4, 0.2, 0.5])
    q = [m.neutral()]
    for _ in range(n):
        q.append(np.asarray(q_integrate(m)(q[-1], v * DT)).ravel())
    tp = Transcription(_arm_sim(m), n, q[0], v)
    tp.set_initial(q=np.array(q))
    S = np.asarray(tp.opti.debug.value(tp.S, tp.opti.initial()))
    assert np.allclose(S[m.nq:m.nq + m.nv, :].T, v, atol=1e-12)
    assert np.allclose(S[: m.nq, :].T, np.array(q), atol=1e-15)
    with pytest.raises(StepError, match="initial q must have shape"):
        tp.set_initial(q=np.zeros((n + 1, m.nv)))
