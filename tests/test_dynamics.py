"""Internal consistency of RNEA / CRBA / ABA / bias terms (the Pinocchio reference is in
test_reference_pinocchio.py): M a + h = rnea, aba inverts rnea, M symmetric positive definite, and the
power balance d/dt (T + V) = qd . tau."""

from __future__ import annotations

import numpy as np
import pytest

import pbframework as pbf
from pbframework import dynamics as D
from pbframework import inertia
from pbframework.models import chain

MODELS = {
    "chain5": lambda: chain(5),
    "chain4_revolute": lambda: chain(4, joint="revolute"),
    "spider": pbf.models.spider,
    "swimmer": pbf.models.swimmer,
    "box": pbf.models.box,
}
REL_TOL = 1e-11


@pytest.fixture(params=sorted(MODELS))
def model(request):
    return MODELS[request.param]()


def test_rnea_equals_mass_matrix_plus_bias(model, rng):
    q, v, a = (rng.normal(size=model.nq) for _ in range(3))
    M = np.array(D.crba(model)(q))
    h = np.array(D.nonlinear_effects(model)(q, v)).ravel()
    tau = np.array(D.rnea(model)(q, v, a)).ravel()
    np.testing.assert_allclose(M @ a + h, tau, rtol=REL_TOL, atol=REL_TOL * np.abs(tau).max())
    g = np.array(D.gravity_torque(model)(q)).ravel()
    np.testing.assert_allclose(g, np.array(D.rnea(model)(q, 0 * v, 0 * a)).ravel(), atol=1e-12)


def test_aba_inverts_rnea(model, rng):
    q, v, a = (rng.normal(size=model.nq) for _ in range(3))
    tau = np.array(D.rnea(model)(q, v, a)).ravel()
    np.testing.assert_allclose(np.array(D.aba(model)(q, v, tau)).ravel(), a, rtol=1e-9, atol=1e-9)


def test_mass_matrix_symmetric_positive_definite(model, rng):
    M = np.array(D.crba(model)(rng.normal(size=model.nq)))
    np.testing.assert_allclose(M, M.T, atol=1e-13)
    assert np.linalg.eigvalsh(M)[0] > 0


def test_mass_matrix_matches_inertia_integral_hessian(model, rng):
    """d^2/dqa dqb I(qa, qb) at qa = qb = q is M(q) (both are int J^T J dm)."""
    import casadi as ca

    qa, qb = ca.SX.sym("qa", model.nq), ca.SX.sym("qb", model.nq)
    H = ca.Function("H", [qa, qb], [ca.jacobian(ca.gradient(inertia.inertia_integral(model)(qa, qb), qb), qa)])
    q = rng.normal(size=model.nq)
    np.testing.assert_allclose(np.array(H(q, q)), np.array(D.crba(model)(q)), rtol=1e-10, atol=1e-10)


def test_power_balance_under_aba(rng):
    """Along the flow of qdd = aba(q, qd, tau): dE/dt = qd . tau for the mechanical energy E = T + V."""
    model = chain(3)
    grav = pbf.force_model("gravity")
    import casadi as ca

    qs = ca.SX.sym("q", model.nq)
    V = ca.Function("V", [qs], [grav.energy(model, qs)])
    q, v, tau = (rng.normal(size=model.nq) for _ in range(3))

    def energy(q_, v_):
        return 0.5 * v_ @ np.array(D.crba(model)(q_)) @ v_ + float(V(q_))

    a = np.array(D.aba(model)(q, v, tau)).ravel()
    h = 1e-6
    dE = (energy(q + h * v, v + h * a) - energy(q - h * v, v - h * a)) / (2 * h)
    assert dE == pytest.approx(v @ tau, rel=1e-6, abs=1e-8)


def test_dynamics_functions_come_from_plugins():
    reg = pbf.registry()
    assert {"rnea", "crba", "nle", "gravity_torque"} <= set(reg.names("dynamics"))
    assert "aba" in reg.names("fd")
    m = chain(2)
    assert D.rnea(m) is D.rnea(m)  # cached on the model


def test_gravity_force_model_matches_gravity_torque(rng):
    """The gravity plug-in's generalised force is -g(q) from RNEA, for numeric and symbolic q."""
    import casadi as ca

    model = pbf.models.spider()
    grav = pbf.force_model("gravity")
    q = rng.normal(size=model.nq)
    expected = -np.array(D.gravity_torque(model)(q)).ravel()
    np.testing.assert_allclose(np.array(grav.generalized_force(model, q, None, 0.0)).ravel(), expected,
                               rtol=1e-12, atol=1e-12)
    qs = ca.SX.sym("q", model.nq)
    f = ca.Function("f", [qs], [grav.generalized_force(model, qs, None, 0.0)])
    np.testing.assert_allclose(np.array(f(q)).ravel(), expected, rtol=1e-12, atol=1e-12)
