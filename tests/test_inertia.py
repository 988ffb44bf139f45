"""The PBAD inertia integral (seed 000 Eq. 8): hand-computed second moments, its limit to the kinetic
energy from CRBA, and its gradient and Hessian against finite differences."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework import dynamics, inertia
from pbframework import kinematics as K
from pbframework.models import chain

from _fd import fd_jacobian

REL_TOL = 1e-12


def _single_link():
    link = pbf.Link("rod", 2.0, com=(0.5, 0.1, -0.2), inertia=[[0.2, 0.01, 0], [0.01, 0.3, 0.02], [0, 0.02, 0.4]])
    return pbf.ArticulatedBody([link], [pbf.Joint("free", "floating", pbf.WORLD, "rod")]), link


def test_I_qq_equals_hand_second_moments(rng):
    model, link = _single_link()
    m, c, Ic = link.mass, link.com, link.inertia
    int_pp = 0.5 * np.trace(Ic) + m * c @ c  # int |p|^2 dm in the link frame
    f = inertia.inertia_integral(model)
    for _ in range(5):
        q = rng.normal(size=6)
        T = np.array(K.link_transform(model, "rod")(q))
        R, t = T[:3, :3], T[:3, 3]
        # int |R p + t|^2 dm + m  (the homogeneous coordinate contributes m)
        expected = int_pp + 2 * t @ R @ (m * c) + m * t @ t + m
        assert float(f(q, q)) == pytest.approx(expected, rel=REL_TOL)


def test_squared_distance_integral_against_hand_formula(rng):
    model, link = _single_link()
    f = inertia.inertia_integral(model)
    Mt = link.second_moment
    for _ in range(5):
        qa, qb = rng.normal(size=6), rng.normal(size=6)
        Ta = np.array(K.link_transform(model, "rod")(qa))
        Tb = np.array(K.link_transform(model, "rod")(qb))
        D = Ta - Tb  # int ||(Ta - Tb)(p;1)||^2 dm = tr(D^T D M~)
        expected = np.trace(D.T @ D @ Mt)
        got = float(f(qa, qa) - 2 * f(qa, qb) + f(qb, qb))
        assert got == pytest.approx(expected, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("builder", [lambda: chain(6), pbf.models.spider, pbf.models.swimmer])
def test_second_difference_tends_to_kinetic_energy(builder, rng):
    m = builder()
    f = inertia.inertia_integral(m)
    M = dynamics.crba(m)
    q, v = rng.normal(size=m.nq), rng.normal(size=m.nq)
    exact = float(v @ np.array(M(q)) @ v)
    errs = []
    for h in (1e-1, 1e-2, 1e-3):
        q1 = q + h * v
        approx = float(f(q1, q1) - 2 * f(q1, q) + f(q, q)) / h**2
        errs.append(abs(approx - exact) / exact)
    # first-order convergence in h: each tenfold reduction of h cuts the error about tenfold
    assert errs[2] < 2e-3
    assert errs[0] / errs[1] > 5 and errs[1] / errs[2] > 5


@pytest.mark.parametrize("builder", [lambda: chain(4), pbf.models.spider])
def test_gradient_and_hessian_of_I_match_finite_differences(builder, rng):
    m = builder()
    f = inertia.inertia_integral(m)
    qa, qb = ca.SX.sym("qa", m.nq), ca.SX.sym("qb", m.nq)
    expr = f(qa, qb)
    grad = ca.Function("g", [qa, qb], [ca.gradient(expr, qb)])
    hess_bb = ca.Function("h", [qa, qb], [ca.hessian(expr, qb)[0]])
    hess_ab = ca.Function("hab", [qa, qb], [ca.jacobian(ca.gradient(expr, qb), qa)])
    for _ in range(2):
        a, b = rng.normal(size=m.nq), rng.normal(size=m.nq)
        g_fd = fd_jacobian(lambda x: np.array(f(a, x)), b).ravel()
        np.testing.assert_allclose(np.array(grad(a, b)).ravel(), g_fd, rtol=1e-6, atol=1e-6)
        H_fd = fd_jacobian(lambda x: np.array(grad(a, x)), b)
        np.testing.assert_allclose(np.array(hess_bb(a, b)), H_fd, rtol=1e-6, atol=1e-6)
        Hab_fd = fd_jacobian(lambda x: np.array(grad(x, b)), a)
        np.testing.assert_allclose(np.array(hess_ab(a, b)), Hab_fd, rtol=1e-6, atol=1e-6)


def test_graph_grows_linearly_with_links():
    sizes = []
    for n in (10, 20, 40):
        m = chain(n)
        qa, qb = ca.SX.sym("qa", m.nq), ca.SX.sym("qb", m.nq)
        g = ca.Function("g", [qa, qb], [ca.gradient(inertia.inertia_integral(m)(qa, qb), qb)])
        sizes.append(g.n_instructions())
    assert sizes[1] / sizes[0] == pytest.approx(2, rel=0.15)
    assert sizes[2] / sizes[1] == pytest.approx(2, rel=0.15)
