"""The step stage: StepConfig validation, the PBAD objective against the inertia integral, derivatives
against finite differences, collocation weights, force-form checks, caching."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework.forces import ForceForm, ForceModel
from pbframework.inertia import inertia_integral
from pbframework.plugins.integrators.pbad import (collocation_nodes, inertia_force_function,
                                                  lagrange_derivative_weights)
from pbframework.step import StepConfig, StepError, build_step, initial_state, resolve_forces, taylor_start

FD_TOL = 1e-6     # relative tolerance of central finite differences (step 1e-6)


def _problem(model, integrator="pbad", dt=0.05, forces=("gravity",), **cfg):
    return build_step(model, integrator, StepConfig(dt=dt, **cfg), resolve_forces(forces))


def _params(pb, s, t=0.0, dt=0.05):
    return np.asarray(pb.params(s, t, dt, np.zeros(pb.nu))).ravel()


def _random_state(model, rng, scale=0.3):
    nq = model.nq
    return np.concatenate([rng.normal(0, scale, nq), rng.normal(0, 1.0, nq), rng.normal(0, scale, nq)])


# -- StepConfig ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [0.0, -0.1, float("nan"), float("inf"), "x"])
def test_config_rejects_bad_dt(dt):
    with pytest.raises(StepError, match="dt must be a positive"):
        StepConfig(dt=dt)


def test_config_rejects_bad_order_and_objective():
    with pytest.raises(StepError, match="order must be an integer"):
        StepConfig(dt=0.1, order=2.5)
    with pytest.raises(StepError, match="objective: unknown value 'fast'.*'energy'"):
        StepConfig(dt=0.1, objective="fast")


def test_unsupported_order_names_allowed_orders():
    m = pbf.models.chain(2)
    with pytest.raises(StepError, match=r"'rk4' does not support order=2 \(supported orders: 4\)"):
        _problem(m, "rk4", order=2)
    with pytest.raises(StepError, match=r"'pbad' does not support order=1 \(supported orders: 2, 3, 4"):
        _problem(m, "pbad", order=1)


def test_unknown_integrator_lists_available():
    with pytest.raises(pbf.UnknownPluginError, match="unknown integrator 'verlet' .*pbad.*rk4"):
        _problem(pbf.models.chain(2), "verlet")


class _WrenchOnly(ForceModel):
    name = "wrench_only"
    forms = frozenset({ForceForm.WRENCH_POLYTOPE})


class _PotentialOnly(ForceModel):
    name = "potential_only"
    forms = frozenset({ForceForm.POTENTIAL})

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        return 0.5 * ca.sumsqr(q_next)


@pytest.mark.parametrize("integrator", ["pbad", "rk4", "semi_implicit_euler"])
def test_force_form_not_accepted(integrator):
    with pytest.raises(StepError, match=r"'wrench_only' offers the form\(s\) \[wrench_polytope\]"):
        _problem(pbf.models.chain(2), integrator, forces=[_WrenchOnly()])


def test_potential_only_force_rejected_where_not_usable():
    m = pbf.models.chain(2)
    with pytest.raises(StepError, match=r"offers the form\(s\) \[potential\]; integrator .rk4. accepts \[generalized_force\]"):
        _problem(m, "rk4", forces=[_PotentialOnly()])
    with pytest.raises(StepError, match="pbad order 3 cannot accept"):
        _problem(m, "pbad", order=3, forces=[_PotentialOnly()])
    with pytest.raises(StepError, match="order 2 only"):
        _problem(m, "pbad", order=3, objective="energy")
    # order 2 takes it in both objectives
    assert _problem(m, "pbad", forces=[_PotentialOnly()]).kind is pbf.ProblemKind.MINIMIZE
    assert _problem(m, "pbad", forces=[_PotentialOnly()], objective="residual").kind is \
        pbf.ProblemKind.LEAST_SQUARES


def test_forces_spec_forms():
    fs = resolve_forces(["gravity", ("gravity", {"scale": 0.5}), pbf.force_model("gravity", scale=2.0)])
    assert [f.scale for f in fs] == [1.0, 0.5, 2.0]
    with pytest.raises(StepError, match="cannot use 3"):
        resolve_forces([3])


# -- the PBAD objective --------------------------------------------------------------------------------

def test_energy_objective_is_the_inertia_integral_combination(rng):
    """dt^2 E = 1/2 (I(q,q) - 4 I(q,qk) + 2 I(q,qm) + 4 I(qk,qk) - 4 I(qk,qm) + I(qm,qm)) + dt^2 V(q)."""
    m = pbf.models.chain(4)
    pb = _problem(m, dt=0.05)
    I = inertia_integral(m)
    V = pbf.forces.potential_energy_function(m, resolve_forces(["gravity"]))
    for _ in range(3):
        s = _random_state(m, rng)
        qk, qm = s[:m.nq], s[2 * m.nq:]
        q = rng.normal(0, 0.3, m.nq)
        p = _params(pb, s, dt=0.05)
        expect = 0.5 * float(I(q, q) - 4 * I(q, qk) + 2 * I(q, qm) + 4 * I(qk, qk) - 4 * I(qk, qm) + I(qm, qm)) \
            + 0.05**2 * float(V(q))
        got = float(pb.objective_function(q, p))
        assert got == pytest.approx(expect, rel=1e-9, abs=1e-9)


def test_energy_limit_is_the_kinetic_energy(rng):
    """Gravity off and history at rest (q_k = q_{k-1} = q): dt^2 E(q + h v) = 1/2 int ||P(q + h v) - P(q)||^2
    = 1/2 h^2 v^T M(q) v + O(h^3) (DESIGN.md's limit of the inertia integral)."""
    m = pbf.models.chain(3)
    pb = _problem(m, forces=[])
    q, v = rng.normal(0, 0.4, m.nq), rng.normal(0, 1, m.nq)
    M = np.asarray(pbf.dynamics.crba(m)(q))
    h = 1e-4
    s = np.concatenate([q, np.zeros(m.nq), q])       # q_k = q_{k-1} = q
    E = float(pb.objective_function(q + h * v, _params(pb, s)))
    assert E / h**2 == pytest.approx(0.5 * v @ M @ v, rel=1e-3)


def _fd_jacobian(fun, x, h=1e-6):
    return np.array([(np.asarray(fun(x + h * e)).ravel() - np.asarray(fun(x - h * e)).ravel()) / (2 * h)
                     for e in np.eye(len(x))]).T


@pytest.mark.parametrize("order,objective", [(2, "energy"), (2, "residual"), (3, "residual")])
def test_derivatives_match_finite_differences(rng, order, objective):
    """Gradient, exact Hessian and Gauss-Newton pieces of every objective against central differences."""
    m = pbf.models.chain(3)
    pb = _problem(m, order=order, objective=objective, dt=0.05)
    s = _random_state(m, rng)
    p = _params(pb, s)
    x = np.asarray(pb.guess(p)).ravel() + rng.normal(0, 0.05, pb.nx)
    fg = pbf.step.evaluator(pb, p, "gradient")
    f, g, H = pbf.step.evaluator(pb, p, "hessian")(x)
    f2, g2 = fg(x)
    assert f2 == pytest.approx(f, rel=1e-12) and np.allclose(g2, g, rtol=1e-9, atol=1e-12)
    fd_g = _fd_jacobian(lambda y: fg(y)[0], x).ravel()
    fd_H = _fd_jacobian(lambda y: fg(y)[1], x)
    assert np.abs(fd_g - g).max() <= FD_TOL * max(1.0, np.abs(g).max()) * 10
    assert np.abs(fd_H - H).max() <= FD_TOL * max(1.0, np.abs(H).max()) * 10
    if pb.kind is pbf.ProblemKind.LEAST_SQUARES:
        r, J = (np.asarray(a) for a in pb.residual_jacobian(x, p))
        fd_J = _fd_jacobian(lambda y: pb.residual(y, p), x)
        assert np.abs(fd_J - J).max() <= FD_TOL * max(1.0, np.abs(J).max()) * 10
        w = rng.normal(size=r.size)
        assert np.allclose(np.asarray(pb.residual_vjp(x, p, w)).ravel(), J.T @ w, rtol=1e-9, atol=1e-9)
        _, g_gn, H_gn = pbf.step.evaluator(pb, p, "gauss_newton")(x)
        assert np.allclose(g_gn, g, rtol=1e-9, atol=1e-12)
        assert np.all(np.linalg.eigvalsh(H_gn) > -1e-9 * np.abs(H_gn).max())   # J^T J is PSD
    else:
        with pytest.raises(StepError, match="no residual for a Gauss-Newton Hessian"):
            pbf.step.evaluator(pb, p, "gauss_newton")


def test_order2_residual_is_the_energy_gradient(rng):
    """Eq. 4 = grad of Eq. 5: the unpreconditioned order-2 residual equals dt^2 grad E."""
    m = pbf.models.chain(3)
    pe = _problem(m, objective="energy")
    pr = _problem(m, objective="residual", precondition=False)
    s = _random_state(m, rng)
    p = _params(pe, s)
    x = np.asarray(pe.guess(p)).ravel() + rng.normal(0, 0.05, pe.nx)
    g = np.asarray(pe.gradient(x, p)[1]).ravel()
    r = np.asarray(pr.residual(x, p)).ravel()
    assert np.allclose(r, g, rtol=1e-8, atol=1e-9)


def test_preconditioned_objective_weights_residual_by_inverse_mass(rng):
    """With precondition (default) f = 1/2 sum_i ||M(q_k)^-1 r_i||^2; without, the literal Eq. 7."""
    m = pbf.models.chain(3)
    raw = _problem(m, order=3, precondition=False)
    pre = _problem(m, order=3)
    assert raw.metric is None and pre.metric is not None
    s = _random_state(m, rng)
    p = _params(raw, s)
    x = np.asarray(raw.guess(p)).ravel() + rng.normal(0, 0.05, raw.nx)
    Mk = np.asarray(pbf.dynamics.crba(m)(s[:m.nq]))
    r = np.asarray(raw.residual(x, p)).reshape(-1, m.nq)
    assert np.allclose(np.asarray(pre.residual(x, p)).reshape(-1, m.nq), r)     # same raw residual
    f_raw = pbf.step.evaluator(raw, p, "gradient")(x)[0]
    f_pre = pbf.step.evaluator(pre, p, "gradient")(x)[0]
    assert f_raw == pytest.approx(0.5 * np.sum(r**2), rel=1e-12)
    assert f_pre == pytest.approx(0.5 * np.sum(np.linalg.solve(Mk, r.T) ** 2), rel=1e-9)


def test_inertia_force_is_the_inertia_integral_gradient(rng):
    """G(qa, D) with D = T(qb) - T(qc) equals d/dqa [I(qa, qb) - I(qa, qc)]."""
    from pbframework.kinematics import element_poses, element_tree

    m = pbf.models.chain(3)
    I = inertia_integral(m)
    qa, qb, qc = (rng.normal(0, 0.5, m.nq) for _ in range(3))
    pb_, pc_ = element_poses(m, ca.DM(qb)), element_poses(m, ca.DM(qc))
    D = []
    for i, e in enumerate(element_tree(m).elements):
        if e.mass > 0:
            D += [ca.reshape(pb_[i][0] - pc_[i][0], 9, 1), pb_[i][1] - pc_[i][1]]
    G = np.asarray(inertia_force_function(m)(qa, ca.vertcat(*D))).ravel()
    h = 1e-6
    fd = np.array([(float(I(qa + h * e, qb) - I(qa + h * e, qc)) - float(I(qa - h * e, qb) - I(qa - h * e, qc)))
                   / (2 * h) for e in np.eye(m.nq)])
    assert np.allclose(G, fd, rtol=1e-6, atol=1e-6)


# -- collocation nodes ---------------------------------------------------------------------------------

def test_collocation_nodes_are_legendre_roots_plus_one():
    assert np.allclose(collocation_nodes(2), [-1, 0, 1])
    assert np.allclose(collocation_nodes(3), [-0.5, 0, 0.5, 1])
    a = (1 - 1 / np.sqrt(3)) / 2                      # roots of L_2(2a - 1)
    assert np.allclose(collocation_nodes(4), [-a, 0, a, 1 - a, 1])
    for K in range(3, 7):
        alphas = collocation_nodes(K)[2:-1]
        assert np.allclose(np.polynomial.legendre.legval(2 * alphas - 1, [0] * (K - 2) + [1]), 0, atol=1e-12)


@pytest.mark.parametrize("K", [2, 3, 4, 5])
def test_lagrange_weights_differentiate_polynomials_exactly(K):
    tau = collocation_nodes(K)
    W1 = lagrange_derivative_weights(tau, tau, 1)
    W2 = lagrange_derivative_weights(tau, tau, 2)
    for deg in range(K + 1):
        y = tau**deg
        d1 = deg * tau ** max(deg - 1, 0) if deg else 0 * tau
        d2 = deg * (deg - 1) * tau ** max(deg - 2, 0) if deg > 1 else 0 * tau
        assert np.allclose(W1 @ y, d1, atol=1e-9)
        assert np.allclose(W2 @ y, d2, atol=1e-8)


# -- start and structure -------------------------------------------------------------------------------

def test_start_history_is_the_exact_motion_to_fifth_order():
    """The PBAD start node q(t0 - dt): 16 RK4 steps backwards vs a fine RK4 reference, error O(dt^5)."""
    m = pbf.models.chain(2)
    q0, qd0 = pbf.models.chain_q0(m), np.linspace(-0.5, 0.5, m.nq)
    pb = _problem(m, order=2)
    assert pb.start_offset == -1.0 and pb.start_substeps == 8
    errs = []
    for dt in (0.4, 0.2):
        s0 = initial_state(pb, q0, qd0, 0.0, dt)
        # q(-t) from (q0, qd0) is the forward motion from (q0, -qd0): gravity alone is time-reversible
        tr = pbf.Simulator(m, "rk4", dt=1e-5).rollout(q0, -qd0, steps=int(round(dt / 1e-5)))
        errs.append(np.abs(s0[2 * m.nq:] - tr.q[-1]).max())
    assert errs[1] < 1e-6 and errs[0] / errs[1] > 2**4.5


def _taylor_node(m, pb, q0, qd0, dt):
    q, v = ca.SX.sym("q", m.nq), ca.SX.sym("v", m.nq)
    f = ca.Function("t", [q, v], [taylor_start(m, resolve_forces(["gravity"]), q, v, 0.0, pb.start_offset * dt)])
    return np.asarray(f(q0, qd0)).ravel()


def test_start_node_takes_rk4_where_resolved_else_taylor():
    """``init`` keeps the RK4 node where its half-step run and its reversed-dissipation run both agree with
    it to a tenth of its distance from the Taylor node, and the Taylor node otherwise (nan and inf too)."""
    m = pbf.models.chain(2)
    pb = _problem(m, order=3)
    q0, qd0, dt = pbf.models.chain_q0(m), np.linspace(-0.5, 0.5, m.nq), 0.1
    taylor = _taylor_node(m, pb, q0, qd0, dt)
    qs, qc, qr = pbf.step.start_configurations(pb, q0, qd0, 0.0, dt)
    assert 0 < np.abs(qs - qc).max() < 1e-3 * np.abs(qs - taylor).max()
    assert np.abs(qs - qr).max() < 1e-12, "gravity and the Coriolis terms are time-reversible"

    def node(q_start, q_check, q_reverse):
        return np.asarray(pb.init(q0, qd0, 0.0, dt, np.zeros(0), q_start, q_check, q_reverse)).ravel()[2 * m.nq:]

    assert np.array_equal(node(qs, qc, qr), qs)
    assert np.array_equal(initial_state(pb, q0, qd0, 0.0, dt)[2 * m.nq:], qs)
    off = qs - taylor
    for near, far in (((qs + 0.09 * off, qs), (qs + 0.11 * off, qs)), ((qs, qs + 0.09 * off), (qs, qs + 0.11 * off))):
        assert np.array_equal(node(qs, *near), qs)
        np.testing.assert_allclose(node(qs, *far), taylor, rtol=0, atol=1e-15)
    for bad in (np.nan, np.inf):
        qb = qs.copy()
        qb[1] = bad
        for runs in ((qb, qs, qs), (qs, qb, qs), (qs, qs, qb)):
            np.testing.assert_allclose(node(*runs), taylor, rtol=0, atol=1e-15)


def test_start_keeps_the_taylor_node_where_damping_shapes_the_backward_motion():
    """A pendulum with joint damping 15 1/s at dt = 0.1 s: the RK4 runs backwards are resolved, but the
    reversed-dissipation run departs from them, so ``init`` keeps the Taylor node; without damping the same
    start takes the RK4 node."""
    m = pbf.models.chain(1, joint="revolute")
    q0, qd0 = np.array([0.3]), np.array([1.0])
    inertia = float(pbf.Simulator(m, "rk4", dt=0.1).energy(q0, np.ones(1))[0][0]) * 2
    for damping, expect_rk4 in ((15.0 * inertia, False), (0.0, True)):
        forces = ["gravity", ("joint_damping", {"damping": damping})]
        sim = pbf.Simulator(m, "pbad", order=2, dt=0.1, forces=forces)
        pb = sim.problem
        qs, qc, qr = pbf.step.start_configurations(pb, q0, qd0, 0.0, 0.1)
        q, v = ca.SX.sym("q", 1), ca.SX.sym("v", 1)
        taylor = np.asarray(ca.Function("t", [q, v], [taylor_start(m, sim.forces, q, v, 0.0, -0.1)])(q0, qd0)).ravel()
        node = sim.initial_state(q0, qd0)[2:]
        if expect_rk4:
            assert np.array_equal(node, qs)
        else:
            assert np.abs(qs - qc).max() < 0.1 * np.abs(qs - taylor).max() < np.abs(qs - qr).max()
            np.testing.assert_allclose(node, taylor, rtol=0, atol=1e-15)


def test_problem_structure_and_cache():
    m = pbf.models.chain(3)
    pb = _problem(m, order=3)
    assert (pb.nq, pb.nx, pb.ns, pb.np) == (6, 12, 18, 20)
    assert pb.kind is pbf.ProblemKind.LEAST_SQUARES and pb.order == 3
    assert _problem(m, order=3, dt=0.1) is pb            # dt is a parameter, not structure
    assert _problem(m, order=4) is not pb
    ne = _problem(m, "rk4")
    assert (ne.nx, ne.ns, ne.kind) == (0, 12, pbf.ProblemKind.EXPLICIT)
    s = initial_state(ne, np.ones(6), np.zeros(6), 0.0, 0.01)
    assert np.allclose(s, np.r_[np.ones(6), np.zeros(6)])
    for fn in (pb.init, pb.params, pb.guess, pb.advance, pb.residual):
        assert isinstance(fn, ca.Function)
