"""The step as a differentiable CasADi function (pbframework.differentiable, issue 20 item 1)."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.step import StepError

H = 1e-5            # central differences: error O(H^2) ~ 1e-9 relative, above the solve's noise


def _jacobians(sim, s0, dt, h=H):
    F = sim.step_function()
    S, U = ca.MX.sym("s", s0.size), ca.MX.sym("u", sim.problem.nu)
    out = F(S, 0.0, dt, U)
    J = np.asarray(ca.Function("J", [S, U], [ca.jacobian(out, S)])(s0, np.zeros(sim.problem.nu)))
    fd = np.column_stack([(np.asarray(F(s0 + h * e, 0.0, dt, [])) - np.asarray(F(s0 - h * e, 0.0, dt, []))).ravel()
                          / (2 * h) for e in np.eye(s0.size)])
    return F, J, fd


@pytest.mark.parametrize("integrator,order", [("pbad", 2), ("pbad", 3), ("pbad", 4), ("rk4", None),
                                              ("semi_implicit_euler", None)])
def test_step_function_takes_the_simulators_step_and_its_jacobian_matches_finite_differences(integrator, order):
    m = models.chain(3)
    sim = pbf.Simulator(m, integrator, order=order, dt=0.02)
    s0 = sim.initial_state(models.chain_q0(m), np.full(m.nq, 0.3))
    F, J, fd = _jacobians(sim, s0, 0.02)
    s1, st = sim.advance(s0, 0.0)
    assert st.converged
    assert np.allclose(np.asarray(F(s0, 0.0, 0.02, [])).ravel(), s1, rtol=0, atol=1e-8)
    assert np.abs(J - fd).max() <= 1e-6 * np.abs(J).max()


def test_pbfd_contact_step_jacobian():
    """A contact scene: a box sliding on the ground under PBFD's frictional contact (Eq. 13)."""
    m = models.box()
    sim = pbf.Simulator(m, "pbfd", dt=0.01, forces=["gravity", ("pbfd_contact", {"normal_stiffness": 1e5,
                                                                                  "friction": 1e6})])
    q0 = np.zeros(m.nq)
    q0[2] = 0.098
    s0 = sim.initial_state(q0, np.array([1.0, 0, 0, 0, 0, 0]))
    _, J, fd = _jacobians(sim, s0, 0.01, h=1e-6)      # stiff contact: the O(h^2) error is 1e-4 at h = 1e-5
    assert np.abs(J - fd).max() <= 1e-6 * np.abs(J).max()


def test_panda_step_jacobian(robots_dir):
    from pbframework.io import load_urdf

    m = load_urdf(robots_dir / "panda_description" / "urdf" / "panda.urdf")
    sim = pbf.Simulator(m, "pbad", order=2, dt=0.01, forces=["gravity"])
    q0 = np.array([0.5 * (j.lower + j.upper) for j in m.joints if j.type.value != "fixed"])   # mid-range
    s0 = sim.initial_state(q0, np.full(m.nv, 0.2))
    _, J, fd = _jacobians(sim, s0, 0.01)
    assert np.abs(J - fd).max() <= 1e-6 * np.abs(J).max()


def test_second_derivatives_of_a_cost_match_finite_differences_of_its_gradient():
    m = models.chain(3)
    sim = pbf.Simulator(m, "pbad", order=3, dt=0.02)
    s0 = sim.initial_state(models.chain_q0(m), np.zeros(m.nq))
    F = sim.step_function()
    S = ca.MX.sym("s", s0.size)
    c = ca.sumsqr(F(S, 0.0, 0.02, ca.MX(0, 1))[: m.nq])
    Hc, g = ca.hessian(c, S)
    grad, hess = ca.Function("g", [S], [g]), np.asarray(ca.Function("H", [S], [Hc])(s0))
    fd = np.column_stack([(np.asarray(grad(s0 + H * e)) - np.asarray(grad(s0 - H * e))).ravel() / (2 * H)
                          for e in np.eye(s0.size)])
    assert np.abs(hess - fd).max() <= 1e-6 * np.abs(hess).max()


def test_rollout_as_mapaccum_matches_the_simulator():
    m = models.chain(2)
    sim = pbf.Simulator(m, "pbad", order=2, dt=0.05)
    s0 = sim.initial_state(models.chain_q0(m), np.zeros(m.nq))
    roll = sim.step_function().mapaccum("roll", 20)
    out = np.asarray(roll(s0, np.arange(20)[None, :] * 0.05, 0.05, np.zeros((0, 20))))
    tr = sim.rollout(models.chain_q0(m), np.zeros(m.nq), steps=20)
    assert np.allclose(out[: m.nq, -1], tr.q[-1], rtol=0, atol=1e-8)


@pytest.mark.parametrize("integrator", ["ne_nmdp", "ne_mdp"])
def test_non_smooth_steps_are_refused_in_one_line(integrator):
    sim = pbf.Simulator(models.box(), integrator, dt=0.02, forces=["gravity", "wrench_polytope"])
    with pytest.raises(StepError, match="not a smooth function"):
        sim.step_function()


@pytest.mark.parametrize("rootfinder", ["newton", "fast_newton"])
def test_assembled_jacobian_outputs_equal_casadis_jacobian(rootfinder):
    m = models.chain(3)
    sim = pbf.Simulator(m, "pbad", order=2, dt=0.02,
                        forces=["gravity", ("joint_torque", {"controller": lambda t, q, qd: np.zeros(6)})])
    s0 = sim.initial_state(models.chain_q0(m), np.full(m.nq, 0.2))
    u0 = np.full(sim.problem.nu, 0.3)
    F = sim.step_function(rootfinder=rootfinder, jacobian=True)
    s1, Js, Ju = (np.asarray(a) for a in F(s0, 0.0, 0.02, u0))
    G = sim.step_function()
    S, U = ca.MX.sym("s", s0.size), ca.MX.sym("u", sim.problem.nu)
    out = G(S, 0.0, 0.02, U)
    ref = ca.Function("J", [S, U], [out, ca.jacobian(out, S), ca.jacobian(out, U)])(s0, u0)
    assert np.allclose(s1, np.asarray(ref[0]), atol=1e-10)
    assert np.allclose(Js, np.asarray(ref[1]), rtol=1e-7, atol=1e-9)
    assert np.allclose(Ju, np.asarray(ref[2]), rtol=1e-7, atol=1e-9)


def test_unknown_rootfinder_is_one_clear_line():
    sim = pbf.Simulator(models.chain(2), "pbad", order=2, dt=0.02)
    with pytest.raises(StepError, match="rootfinder"):
        sim.step_function(rootfinder="bisection")


# -- backend="c": the step function compiled (generated C, cached library, casadi.external) --------------

C_TOL = 1e-10          # the compiled step and its Jacobian against the VM's (same Newton iterations, same formulas)


def _c_scenes():
    chain = models.chain(3)
    torque = ("joint_torque", {"controller": lambda t, q, qd: np.zeros(6)})
    ball = models.chain(2, "ball")             # quaternions: nq 8, nv 6
    box = models.box()
    qb = np.zeros(box.nq)
    qb[2] = 0.098
    return {
        "pbad2": (pbf.Simulator(chain, "pbad", order=2, dt=0.02, forces=["gravity", torque]),
                  models.chain_q0(chain), np.full(chain.nq, 0.3), 0.02),
        "rk4": (pbf.Simulator(chain, "rk4", dt=0.02, forces=["gravity", torque]),
                models.chain_q0(chain), np.full(chain.nq, 0.3), 0.02),
        "pbfd": (pbf.Simulator(box, "pbfd", dt=0.01, forces=["gravity", ("pbfd_contact", {"normal_stiffness": 1e5,
                                                                                           "friction": 1e6})]),
                 qb, np.array([1.0, 0, 0, 0, 0, 0]), 0.01),
        "ball": (pbf.Simulator(ball, "pbad", order=2, dt=0.02, forces=["gravity"]), models.chain_q0(ball),
                 np.full(ball.nv, 0.3), 0.02),
    }


@pytest.mark.parametrize("scene", ["pbad2", "rk4", "pbfd", "ball"])
def test_c_step_function_and_its_jacobian_match_the_vm(scene):
    sim, q0, v0, dt = _c_scenes()[scene]
    nu = sim.problem.nu
    s0 = sim.initial_state(q0, v0)
    u0 = np.linspace(-0.5, 0.5, nu)
    F, C = sim.step_function(), sim.step_function(backend="c")
    assert "external" in C.class_name().lower()
    S, U = ca.MX.sym("s", s0.size), ca.MX.sym("u", nu)
    T, DT = ca.MX.sym("t"), ca.MX.sym("dt")

    def jac(G):
        o = G(S, T, DT, U)
        return ca.Function("J", [S, T, DT, U], [o, ca.jacobian(o, S), ca.jacobian(o, U), ca.jacobian(o, DT)])

    ref = [np.asarray(ca.densify(a)) for a in jac(F)(s0, 0.1, dt, u0)]
    got = [np.asarray(ca.densify(a)) for a in jac(C)(s0, 0.1, dt, u0)]
    for name, a, b in zip(("s_next", "d/ds", "d/du", "d/ddt"), got, ref):
        scale = max(1.0, np.abs(b).max(initial=0.0))
        assert a.shape == b.shape and np.abs(a - b).max(initial=0.0) <= C_TOL * scale, name
    assert np.abs(ref[1]).max() > 0.5          # a real Jacobian (the identity-like part of the state map)


def test_c_step_function_jacobian_outputs_gradients_and_mapaccum():
    sim, q0, v0, dt = _c_scenes()["pbad2"]
    nu = sim.problem.nu
    s0, u0 = sim.initial_state(q0, v0), np.full(nu, 0.3)
    FJ, CJ = sim.step_function(jacobian=True), sim.step_function(jacobian=True, backend="c")
    for a, b in zip(CJ(s0, 0.0, dt, u0), FJ(s0, 0.0, dt, u0)):
        assert np.abs(np.asarray(a) - np.asarray(b)).max() <= C_TOL
    # a 10-step rollout and the reverse-mode gradient of a cost on it (through the compiled jac_step)
    S, U = ca.MX.sym("s", s0.size), ca.MX.sym("u", nu, 10)
    grads = []
    for G in (sim.step_function(), sim.step_function(backend="c")):
        out = G.mapaccum("roll", 10)(S, ca.DM(np.arange(10) * dt).T, dt, U)
        c = ca.sumsqr(out[: sim.model.nq, -1])
        cost = ca.Function("cost", [S, U], [c, ca.gradient(c, ca.vertcat(S, ca.vec(U)))])
        grads.append([np.asarray(a) for a in cost(s0, np.tile(u0[:, None], (1, 10)))])
    assert abs(grads[0][0].item() - grads[1][0].item()) <= C_TOL
    assert np.abs(grads[0][1] - grads[1][1]).max() <= C_TOL * max(1.0, np.abs(grads[0][1]).max())
    tr = sim.rollout(q0, v0, steps=10)      # zero torque (the Simulator's controller); the mapaccum with u = 0
    zero = sim.step_function(backend="c").mapaccum("roll", 10)(s0, ca.DM(np.arange(10) * dt).T, dt,
                                                               np.zeros((nu, 10)))
    assert np.allclose(np.asarray(zero)[: sim.model.nq, -1], tr.q[-1], atol=1e-8)


def test_c_step_function_is_built_once_and_cached(tmp_path):
    from pbframework.differentiable import compile_step

    sim, *_ = _c_scenes()["rk4"]
    first = compile_step(sim.problem, cache=tmp_path)
    again = compile_step(pbf.Simulator(models.chain(3), "rk4", dt=0.02, forces=["gravity", (
        "joint_torque", {"controller": lambda t, q, qd: np.zeros(6)})]).problem, cache=tmp_path)
    assert not first.library.cached and again.library.cached and again.library.path == first.library.path
    assert set(first.library.functions) == {"step", "step_jacobian", "jac_step"} and first.source_bytes > 0


def test_c_backend_refuses_the_newton_rootfinder_and_unknown_backends_in_one_line():
    sim = pbf.Simulator(models.chain(2), "pbad", order=2, dt=0.02)
    with pytest.raises(StepError, match="cannot code-generate the 'newton' rootfinder"):
        sim.step_function(backend="c", rootfinder="newton")
    with pytest.raises(StepError, match="unknown backend 'cuda'.*casadi, c"):
        sim.step_function(backend="cuda")
    with pytest.raises(StepError, match="not a smooth function"):
        pbf.Simulator(models.box(), "ne_nmdp", dt=0.02, forces=["gravity", "wrench_polytope"]).step_function(
            backend="c")


def test_c_step_function_documented_limits():
    """What docs/trajopt.md says the compiled function does not do: second derivatives are not compiled
    (CasADi refuses to build them), and generated fast_newton returns its last iterate where the VM raises."""
    m = models.chain(2)
    sim = pbf.Simulator(m, "pbad", order=2, dt=0.05)
    s0 = sim.initial_state(models.chain_q0(m), np.full(m.nq, 0.3))
    S = ca.MX.sym("s", s0.size)
    cost = ca.sumsqr(sim.step_function(backend="c")(S, 0.0, 0.05, ca.MX(0, 1)))
    with pytest.raises(RuntimeError):
        ca.hessian(cost, S)
    with pytest.raises(RuntimeError, match="step"):
        sim.step_function(max_iter=1)(s0, 0.0, 0.05, [])
    one = np.asarray(sim.step_function(backend="c", max_iter=1)(s0, 0.0, 0.05, [])).ravel()
    full = np.asarray(sim.step_function(backend="c")(s0, 0.0, 0.05, [])).ravel()
    assert np.all(np.isfinite(one)) and 0 < np.abs(one - full).max() < 1e-3
