"""Force-model plug-ins: registration, the two forms agreeing, reference values, parameter validation.

Tolerances are named at the top. Random states come from the seeded ``rng`` fixture (STYLE.md 9).
"""

from __future__ import annotations

import math
import warnings

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.dynamics import crba
from pbframework.forces import ForceForm, ForceModel

EXACT_TOL = 1e-9       # identities that hold to round-off
CONSISTENT_TOL = 1e-4  # relative: gradient of the potential vs generalised force at dt = H_CONSISTENT
H_CONSISTENT = 1e-6
FD_STEP = 1e-6
FD_TOL = 1e-5          # relative: CasADi gradient vs central finite differences
QUADRATURE_TOL = 1e-10  # relative: analytic drag integral vs Gauss quadrature (exact for quadratics)

BUILTIN_FORCES = ["gravity", "joint_torque", "pd", "stable_pd", "joint_damping", "drag", "penalty_contact",
                  "joint_limits"]


def _gait(t):
    return 0.3 * ca.sin(2 * ca.pi * t)


def _limited_arm() -> pbf.ArticulatedBody:
    """Two hinges (+-0.3 rad) and a slide ([0, 0.05] m): random states of scale 0.4 lie past the limits."""
    links = [pbf.Link(f"l{i}", 1.0, com=(0.2, 0, 0), inertia=(0.01, 0.02, 0.02)) for i in range(3)]
    joints = [pbf.Joint("j0", "revolute", pbf.WORLD, "l0", axis=(0, 0, 1), lower=-0.3, upper=0.3),
              pbf.Joint("j1", "revolute", "l0", "l1", origin=pbf.transform((0.4, 0, 0)), axis=(0, 1, 0),
                        lower=-0.3, upper=0.3),
              pbf.Joint("j2", "prismatic", "l1", "l2", origin=pbf.transform((0.4, 0, 0)), axis=(1, 0, 0),
                        lower=0.0, upper=0.05)]
    return pbf.ArticulatedBody(links, joints, name="limited_arm")


# name -> (model builder, params): one representative configuration per built-in force model.
CASES = {
    "gravity": (models.spider, {}),
    "joint_torque": (models.spider, {"torque": lambda t: 2.0 * ca.cos(3 * t)}),
    "pd": (models.spider, {"kp": 40.0, "kd": 2.0, "target": _gait, "track_velocity": True}),
    "stable_pd": (models.spider, {"kp": [30.0, 40.0], "kd": 1.5, "target": _gait, "dofs": ["hip0"],
                                  "dt": H_CONSISTENT}),
    "joint_damping": (models.spider, {"damping": 0.7, "dofs": ["knee0", "knee1", 8]}),
    "drag": (models.swimmer, {"coefficient": 0.4, "normal_coefficient": 3.0}),
    "penalty_contact": (models.spider, {"stiffness": 2e3, "friction": 5e4}),
    "joint_limits": (_limited_arm, {"damping": [3.0, 4.0, 5.0], "width": 1e-3}),
}


def _state(model, rng, scale=0.4):
    return rng.normal(scale=scale, size=model.nq), rng.normal(scale=1.0, size=model.nq)


def _spider_state_in_contact(model, rng):
    """A random spider state with its feet pushed a few cm into the ground (so contact is active)."""
    q = models.spider_q0(model) + rng.normal(scale=0.05, size=model.nq)
    lowest = float(np.min(np.asarray(pbf.kinematics.contact_positions(model)(q))[2]))
    q[model.dof_index("root:z")] -= lowest + 0.02  # the lowest point 2 cm deep
    return q, rng.normal(scale=1.0, size=model.nq)


def _vec(x) -> np.ndarray:
    return np.asarray(ca.DM(x)).ravel()


def _force_at(f, model, q, qd, t) -> np.ndarray:
    """The generalised force at a numeric state, through symbols (some models differentiate their input)."""
    qs, qds = ca.SX.sym("q", model.nq), ca.SX.sym("qd", model.nq)
    return _vec(ca.Function("f", [qs, qds], [f.generalized_force(model, qs, qds, t)])(q, qd))


# -- registration -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", BUILTIN_FORCES)
def test_registered_and_buildable_by_name(name):
    assert name in pbf.available("force")
    builder, params = CASES[name]
    f = pbf.force_model(name, **params)
    assert isinstance(f, ForceModel) and f.name == name
    assert {ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE} <= f.forms
    assert name in repr(f) or type(f).__name__ in repr(f)
    model = builder()
    q = ca.SX.sym("q", model.nq)
    Q = f.potential(model, q, q, q, 0.05, 0.0)
    g = f.generalized_force(model, q, q, 0.0)
    assert Q.shape == (1, 1) and g.shape == (model.nq, 1)


def test_unknown_force_lists_available():
    with pytest.raises(pbf.UnknownPluginError, match="penalty_contact"):
        pbf.force_model("penalty_contcat")


# -- the two forms agree (gradient of the potential = minus the generalised force) -------------------------

@pytest.mark.parametrize("name", BUILTIN_FORCES)
def test_potential_gradient_is_minus_generalized_force(name, rng):
    """At q_next = q_cur + h qd, dQ/dq_next = -f to O(h); exactly for the joint-space models.

    Explicit PD is evaluated at the step's start (q_cur, time t - h); stable PD at its end, which its
    predictive generalised force (lookahead h) reproduces exactly; contact at q_next.
    """
    builder, params = CASES[name]
    model = builder()
    f = pbf.force_model(name, **params)
    h, t = H_CONSISTENT, 0.37
    for _ in range(3):
        q, qd = _spider_state_in_contact(model, rng) if name == "penalty_contact" else _state(model, rng)
        q_next, q_prev = q + h * qd, q - h * qd
        qs = ca.SX.sym("q", model.nq)
        grad = _vec(ca.Function("g", [qs], [ca.gradient(f.potential(model, qs, q, q_prev, h, t), qs)])(q_next))
        if name in ("pd", "stable_pd"):
            ref = _force_at(f, model, q, qd, t - h)
        elif name in ("joint_damping", "joint_torque"):
            ref = _force_at(f, model, q, qd, t)
        else:
            ref = _force_at(f, model, q_next, qd, t)
        scale = max(1.0, np.abs(ref).max())
        assert np.abs(grad + ref).max() <= CONSISTENT_TOL * scale, (name, grad, -ref)
        assert np.abs(ref).max() > 0, f"{name}: force is zero at a random state; the test checks nothing"


@pytest.mark.parametrize("name", BUILTIN_FORCES)
def test_potential_gradient_matches_finite_differences(name, rng):
    builder, params = CASES[name]
    model = builder()
    f = pbf.force_model(name, **params)
    dt, t = 0.05, 0.21
    q, qd = _spider_state_in_contact(model, rng) if name == "penalty_contact" else _state(model, rng)
    q_cur, q_prev = q - dt * qd, q - 2 * dt * qd
    qs = ca.SX.sym("q", model.nq)
    Q = f.potential(model, qs, q_cur, q_prev, dt, t)
    fQ = ca.Function("Q", [qs], [Q, ca.gradient(Q, qs)])
    grad = _vec(fQ(q)[1])
    fd = np.array([(float(fQ(q + FD_STEP * e)[0]) - float(fQ(q - FD_STEP * e)[0])) / (2 * FD_STEP)
                   for e in np.eye(model.nq)])
    assert np.abs(grad - fd).max() <= FD_TOL * max(1.0, np.abs(grad).max())


@pytest.mark.parametrize("name", ["pd", "stable_pd", "penalty_contact", "drag", "joint_limits"])
def test_generalized_force_velocity_jacobian_matches_finite_differences(name, rng):
    builder, params = CASES[name]
    model = builder()
    f = pbf.force_model(name, **params)
    q, qd = _spider_state_in_contact(model, rng) if name == "penalty_contact" else _state(model, rng)
    qds = ca.SX.sym("qd", model.nq)
    F = ca.Function("F", [qds], [f.generalized_force(model, q, qds, 0.3)])
    J = np.asarray(ca.Function("J", [qds], [ca.jacobian(F(qds), qds)])(qd))
    fd = np.column_stack([(_vec(F(qd + FD_STEP * e)) - _vec(F(qd - FD_STEP * e))) / (2 * FD_STEP)
                          for e in np.eye(model.nq)])
    assert np.abs(J - fd).max() <= FD_TOL * max(1.0, np.abs(J).max())


def test_forms_accept_mx_and_numbers():
    model = models.swimmer()
    f = pbf.force_model("drag", coefficient=1.0)
    q = ca.MX.sym("q", model.nq)
    assert isinstance(f.potential(model, q, q, q, 0.1, 0.0), ca.MX)
    assert isinstance(f.generalized_force(model, q, q, 0.0), ca.MX)
    assert float(f.potential(model, np.zeros(model.nq), np.zeros(model.nq), np.zeros(model.nq), 0.1, 0.0)) == 0.0


# -- PD and stable PD -----------------------------------------------------------------------------------------

def test_stable_pd_potential_gradient_is_implicit_pd():
    """dQ/dq_next = kp (q_next - qbar(t)) + kd ((q_next - q_cur)/dt - qbar'(t)) on the chosen coordinates."""
    model = models.chain(2, "revolute")
    kp, kd, dt, t = np.array([50.0, 20.0]), 3.0, 0.05, 0.4
    f = pbf.force_model("stable_pd", kp=kp, kd=kd, target=_gait, track_velocity=True)
    qn, qc = np.array([0.2, -0.1]), np.array([0.15, -0.05])
    qs = ca.SX.sym("q", 2)
    grad = _vec(ca.Function("g", [qs], [ca.gradient(f.potential(model, qs, qc, qc, dt, t), qs)])(qn))
    qbar = 0.3 * np.sin(2 * np.pi * t)
    vbar = 0.3 * 2 * np.pi * np.cos(2 * np.pi * t)
    implicit_tau = kp * (qbar - qn) + kd * (vbar - (qn - qc) / dt)
    assert np.allclose(grad, -implicit_tau, atol=EXACT_TOL)


def test_pd_drives_toward_target_and_damps():
    model = models.chain(3, "revolute")
    f = pbf.force_model("pd", kp=10.0, kd=2.0, target=[0.5, 0.0, -0.5])
    tau = _vec(f.generalized_force(model, np.zeros(3), np.array([0.0, 1.0, 0.0]), 0.0))
    assert np.allclose(tau, [5.0, -2.0, -5.0], atol=EXACT_TOL)


def test_pd_energy_only_for_constant_targets():
    model = models.chain(2, "revolute")
    spring = pbf.force_model("stable_pd", kp=4.0, target=0.25)
    assert float(spring.energy(model, np.array([0.75, 0.25]))) == pytest.approx(0.5 * 4.0 * 0.25)
    assert pbf.force_model("pd", kp=4.0, target=_gait).energy(model, np.zeros(2)) is None


def test_pd_selects_by_joint_name_and_leaves_other_coordinates_alone():
    model = models.spider()
    f = pbf.force_model("pd", kp=1.0, target=1.0, dofs=["hip2", "knee3"])
    tau = _vec(f.generalized_force(model, np.zeros(model.nq), np.zeros(model.nq), 0.0))
    hit = {model.dof_index("hip2:ry"), model.dof_index("hip2:rz"), model.dof_index("knee3")}
    assert all((tau[i] == 1.0) == (i in hit) for i in range(model.nq))


def test_default_dofs_exclude_the_floating_base():
    model = models.swimmer()
    tau = _vec(pbf.force_model("joint_torque", torque=1.0).generalized_force(
        model, np.zeros(model.nq), np.zeros(model.nq), 0.0))
    assert np.all(tau[:6] == 0.0) and np.all(tau[6:] == 1.0)


def test_stable_pd_full_form_mass_matrix_term():
    model = models.chain(2, "revolute")
    f = pbf.force_model("stable_pd", kp=1.0, kd=[2.0, 4.0], dt=0.01)
    assert np.allclose(f.mass_matrix_term(model), np.diag([0.02, 0.04]))


# -- joint torques -------------------------------------------------------------------------------------------

def test_joint_torque_function_of_time():
    model = models.chain(2, "revolute")
    f = pbf.force_model("joint_torque", torque=lambda t: ca.vertcat(ca.sin(t), 2 * t), dofs=[1, 0])
    tau = _vec(f.generalized_force(model, np.zeros(2), np.zeros(2), 0.5))
    assert np.allclose(tau, [1.0, np.sin(0.5)], atol=EXACT_TOL)
    assert f.n_inputs(model) == 0


def test_joint_torque_controller_is_a_per_step_input():
    model = models.chain(3, "revolute")
    calls = []

    def controller(t, q, qd):
        calls.append(t)
        return -5.0 * q[:2] - qd[:2]

    f = pbf.force_model("joint_torque", controller=controller, dofs=["joint0", "joint1"])
    assert f.n_inputs(model) == 2
    u_val = f.input_values(model, 0.1, np.array([0.2, -0.4, 9.0]), np.array([1.0, 0.0, 9.0]))
    assert np.allclose(u_val, [-2.0, 2.0]) and calls == [0.1]
    u, q = ca.SX.sym("u", 2), ca.SX.sym("q", 3)
    Q = f.potential(model, q, q, q, 0.05, 0.0, u=u)
    g = ca.Function("g", [q, u], [ca.gradient(Q, q), f.generalized_force(model, q, q, 0.0, u=u)])
    grad, force = g(np.zeros(3), u_val)
    assert np.allclose(_vec(grad), [2.0, -2.0, 0.0]) and np.allclose(_vec(force), [-2.0, 2.0, 0.0])
    with pytest.raises(TypeError, match="per-step input"):
        f.potential(model, q, q, q, 0.05, 0.0)


def test_joint_torque_controller_output_checked():
    model = models.chain(2, "revolute")
    f = pbf.force_model("joint_torque", controller=lambda t, q, qd: [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"controller must return 2 finite torques .* got \[1.0, 2.0, 3.0\]"):
        f.input_values(model, 0.0, np.zeros(2), np.zeros(2))


# -- joint damping -----------------------------------------------------------------------------------------

def test_joint_damping_force():
    model = models.chain(2, "revolute")
    f = pbf.force_model("joint_damping", damping=[0.5, 2.0])
    assert np.allclose(_vec(f.generalized_force(model, np.zeros(2), np.array([2.0, -1.0]), 0.0)), [-1.0, 2.0])
    assert f.energy(model, np.zeros(2)) is None


# -- drag ----------------------------------------------------------------------------------------------------

def _cylinder_quadrature(length: float, radius: float, mass: float, n: int = 4):
    """Gauss nodes and weights (mass) over a solid cylinder along local x from 0 to ``length``; exact for
    polynomials of degree <= 2n-1 in x and r and trigonometric polynomials of degree < 2n in theta."""
    gx, wx = np.polynomial.legendre.leggauss(n)
    xs, wxs = 0.5 * length * (gx + 1), 0.5 * length * wx
    # radial weight r dr on [0, R]: Gauss-Legendre on r with the Jacobian r folded into the weight
    rs, wrs = 0.5 * radius * (gx + 1), 0.5 * radius * wx * 0.5 * radius * (gx + 1)
    th = 2 * np.pi * np.arange(2 * n) / (2 * n)
    wth = np.full(2 * n, 2 * np.pi / (2 * n))
    rho = mass / (np.pi * radius**2 * length)
    pts, w = [], []
    for x, a in zip(xs, wxs):
        for r, b in zip(rs, wrs):
            for t, c in zip(th, wth):
                pts.append((x, r * np.cos(t), r * np.sin(t)))
                w.append(rho * a * b * c)
    return np.array(pts), np.array(w)


@pytest.mark.parametrize("normal", [None, 2.5])
def test_drag_integral_matches_quadrature_over_cylinder_links(normal, rng):
    model = models.swimmer()
    D = 0.8
    f = pbf.force_model("drag", coefficient=D, normal_coefficient=normal)
    pts, w = _cylinder_quadrature(1.0, 0.05, 1.0)
    assert np.isclose(w.sum(), 1.0)
    fk = pbf.kinematics.forward_kinematics(model)
    for _ in range(3):
        qa, qb = rng.normal(size=model.nq), rng.normal(size=model.nq)
        Ta, Tb = np.asarray(fk(qa)), np.asarray(fk(qb))
        ref = 0.0
        for i in range(model.nlinks):
            A, B = Ta[:, 4 * i:4 * i + 4], Tb[:, 4 * i:4 * i + 4]
            dP = (pts @ A[:3, :3].T + A[:3, 3]) - (pts @ B[:3, :3].T + B[:3, 3])
            if normal is None:
                W = D * np.eye(3)
            else:
                a = B[:3, 0]
                W = D * np.outer(a, a) + normal * (np.eye(3) - np.outer(a, a))
            ref += np.einsum("k,ki,ij,kj->", w, dP, W, dP)
        got = float(f.displacement_integral(model, ca.DM(qa), ca.DM(qb)))
        assert got == pytest.approx(ref, rel=QUADRATURE_TOL)


def test_isotropic_drag_is_minus_D_M_qd(rng):
    model = models.swimmer()
    f = pbf.force_model("drag", coefficient=0.6)
    q, qd = _state(model, rng)
    M = np.asarray(crba(model)(q))
    assert np.allclose(_vec(f.generalized_force(model, q, qd, 0.0)), -0.6 * M @ qd, atol=1e-12, rtol=1e-10)


def test_isotropic_drag_paths_agree_and_link_selection(rng):
    """The inertia-integral path (all links) equals the per-link path; selecting links restricts it."""
    model = models.swimmer()
    qa, qb = ca.DM(rng.normal(size=model.nq)), ca.DM(rng.normal(size=model.nq))
    all_links = float(pbf.force_model("drag", coefficient=1.3).displacement_integral(model, qa, qb))
    per_link = [float(pbf.force_model("drag", coefficient=1.3, links=[x.name]).displacement_integral(model, qa, qb))
                for x in model.links]
    assert sum(per_link) == pytest.approx(all_links, rel=1e-12)


def test_isotropic_drag_conserves_zero_momentum_anisotropic_does_not(rng):
    """Summed over the body, isotropic drag is -D p (no thrust from rest); anisotropic drag is not."""
    model = models.swimmer()
    q, qd = _state(model, rng)
    qd[:3] = 0.0
    # choose base velocity so that the total linear momentum is zero
    Jc = np.asarray(ca.Function("J", [s := ca.SX.sym("q", model.nq)],
                                [ca.jacobian(pbf.kinematics.center_of_mass(model)(s), s)])(q))
    qd[:3] = -np.linalg.lstsq(Jc[:, :3], Jc[:, 3:] @ qd[3:], rcond=None)[0]
    assert np.allclose(Jc @ qd, 0.0, atol=1e-12)
    # the world-frame net force is the generalised force on the base translation (x, y, z are world axes)
    iso = _vec(pbf.force_model("drag", coefficient=1.0).generalized_force(model, q, qd, 0.0))
    aniso = _vec(pbf.force_model("drag", coefficient=0.2, normal_coefficient=2.0).generalized_force(model, q, qd, 0.0))
    assert np.abs(iso[:3]).max() < 1e-12
    assert np.abs(aniso[:3]).max() > 1e-3


# -- penalty contact -------------------------------------------------------------------------------------------

def _box_q(z, x=0.0):
    q = np.zeros(6)
    q[0], q[2] = x, z
    return q


def test_contact_zero_above_the_plane():
    model = models.box()
    f = pbf.force_model("penalty_contact", stiffness=1e4, friction=1e6)
    q, qd = _box_q(0.1 + 1e-3), np.array([1.0, 0, -1.0, 0, 0, 0])
    assert np.all(_vec(f.generalized_force(model, q, qd, 0.0)) == 0.0)
    qs = ca.SX.sym("q", 6)
    grad = ca.Function("g", [qs], [ca.gradient(f.potential(model, qs, q, q, 0.05, 0.0), qs)])(q)
    assert np.all(_vec(grad) == 0.0)
    assert float(f.energy(model, q)) == 0.0


def test_contact_restoring_force_below_the_plane():
    model = models.box()
    k, depth = 1e4, 2e-3
    f = pbf.force_model("penalty_contact", stiffness=k)
    force = _vec(f.generalized_force(model, _box_q(0.1 - depth), np.zeros(6), 0.0))
    assert force[2] == pytest.approx(4 * k * depth, rel=1e-12)  # 4 bottom corners, spring k d each
    assert np.allclose(force[[0, 1, 3, 4, 5]], 0.0, atol=1e-9)
    assert float(f.energy(model, _box_q(0.1 - depth))) == pytest.approx(4 * 0.5 * k * depth**2)


@pytest.mark.parametrize("power", [1.0, 2.0])
def test_contact_friction_opposes_sliding(power):
    model = models.box()
    D2, depth, v = 3e5, 2e-3, 0.7
    f = pbf.force_model("penalty_contact", stiffness=1e4, friction=D2, friction_power=power)
    for direction in (np.array([1.0, 0.0]), np.array([-0.6, 0.8])):
        qd = np.zeros(6)
        qd[:2] = v * direction
        qd[2] = -0.3  # normal velocity is not damped by the friction term
        force = _vec(f.generalized_force(model, _box_q(0.1 - depth), qd, 0.0))
        assert np.allclose(force[:2], -4 * D2 * depth**power * v * direction, rtol=1e-9)


def test_contact_on_a_tilted_plane_pushes_along_its_normal():
    model = models.box()
    a = 0.3
    n = np.array([-np.sin(a), 0.0, np.cos(a)])
    f = pbf.force_model("penalty_contact", stiffness=1e4, normal=n, offset=-0.5)
    q = np.zeros(6)
    q[:3] = -0.5 * n + 0.09 * n  # the box centre 0.09 m above the plane: some corners penetrate
    q[4] = -a  # pitch the box onto the slope (rotation about y by -a aligns its bottom face with the plane)
    force = _vec(f.generalized_force(model, q, np.zeros(6), 0.0))[:3]
    assert np.linalg.norm(force) > 0
    assert np.allclose(np.cross(force, n), 0.0, atol=1e-9 * np.linalg.norm(force)) and force @ n > 0


def test_contact_smoothing_is_small_above_and_smooth():
    model = models.box()
    eps = 1e-4
    f = pbf.force_model("penalty_contact", stiffness=1e4, smoothing=eps)
    above = _vec(f.generalized_force(model, _box_q(0.1 + 2e-3), np.zeros(6), 0.0))[2]
    below = _vec(f.generalized_force(model, _box_q(0.1 - 2e-3), np.zeros(6), 0.0))[2]
    assert 0 < above < 1e-6 and below == pytest.approx(4 * 1e4 * 2e-3, rel=1e-6)


def test_contact_needs_contact_points():
    with pytest.raises(ValueError, match="penalty_contact: model 'swimmer4' has no contact points"):
        pbf.force_model("penalty_contact").generalized_force(models.swimmer(), np.zeros(9), np.zeros(9), 0.0)


# -- parameter validation (errors name the force and the parameter) ----------------------------------------

@pytest.mark.parametrize("name, params, message", [
    ("joint_torque", {}, "joint_torque: give exactly one of torque"),
    ("joint_torque", {"torque": 1.0, "controller": lambda t, q, qd: q}, "got both"),
    ("joint_torque", {"torque": lambda t: {"t": t}}, "joint_torque: torque is a callable, so it must build a CasADi"),
    ("joint_torque", {"torque": lambda t: math.sin(t)}, r"joint_torque: torque\(t\) returned a non-finite value"),
    ("pd", {"target": lambda t: t * ca.SX.sym("w")}, r"pd: target\(t\) must depend on the time symbol t only"),
    ("joint_torque", {"torque": [1.0, np.nan]}, "torque must be finite"),
    ("pd", {"kp": -1.0}, r"pd: kp must be >= 0 .* got -1.0"),
    ("pd", {"kd": "stiff"}, "pd: kd must be a number or a list of numbers"),
    ("pd", {"target": "up"}, "pd: target must be a number, a list of numbers or a callable"),
    ("pd", {"dofs": []}, "pd: dofs is empty"),
    ("pd", {"dofs": [1.5]}, "pd: dofs entries must be coordinate names"),
    ("pd", {"track_velocity": "yes"}, "pd: track_velocity must be True or False"),
    ("stable_pd", {"dt": 0.0}, r"stable_pd: dt must be > 0, got 0.0"),
    ("joint_damping", {"damping": [1.0, -2.0]}, "joint_damping: damping must be >= 0"),
    ("drag", {"coefficient": -0.1}, r"drag: coefficient must be >= 0, got -0.1"),
    ("drag", {"normal_coefficient": float("inf")}, "drag: normal_coefficient must be finite"),
    ("drag", {"axis": (0, 0, 0)}, "drag: axis must be 3 finite numbers, not all zero"),
    ("drag", {"links": []}, "drag: links must be a non-empty list of link names"),
    ("penalty_contact", {"stiffness": 0.0}, r"penalty_contact: stiffness must be > 0, got 0.0"),
    ("penalty_contact", {"friction": -1}, "penalty_contact: friction must be >= 0"),
    ("penalty_contact", {"normal": (0, 1)}, "penalty_contact: normal must be 3 finite numbers"),
    ("penalty_contact", {"friction_power": 0.5}, r"penalty_contact: friction_power must be >= 1"),
    ("penalty_contact", {"smoothing": -1e-3}, "penalty_contact: smoothing must be >= 0"),
    ("penalty_contact", {"offset": True}, "penalty_contact: offset must be a number"),
    ("penalty_contact", {"friction_depth": "later"},
     "penalty_contact: friction_depth must be one of 'current', 'next'"),
    ("joint_limits", {"stiffness": -1.0}, "joint_limits: stiffness must be >= 0"),
    ("joint_limits", {"frequency": 0.0}, r"joint_limits: frequency must be > 0, got 0.0"),
    ("joint_limits", {"damping_ratio": -0.5}, r"joint_limits: damping_ratio must be >= 0"),
    ("joint_limits", {"width": 0.0}, r"joint_limits: width must be > 0, got 0.0"),
])
def test_invalid_parameters_are_named(name, params, message):
    with pytest.raises(ValueError, match=message):
        pbf.force_model(name, **params)


@pytest.mark.parametrize("name, params, message", [
    ("pd", {"dofs": ["hip0", "kneee1"]}, "pd: model 'spider' has no coordinate or joint 'kneee1' "
                                         r"\(coordinates: root:x, "),
    ("pd", {"dofs": [40]}, "pd: coordinate index 40 is out of range for model 'spider' with 18 coordinates"),
    ("pd", {"dofs": ["hip0", "hip0:ry"]}, "pd: coordinate 'hip0:ry' is selected twice"),
    ("pd", {"kp": [1.0, 2.0, 3.0], "dofs": ["hip0"]}, r"pd: kp has 3 entries but the force acts on 2 "
                                                      r"coordinates \(hip0:ry, hip0:rz\)"),
    ("stable_pd", {"target": lambda t: ca.vertcat(t, t, t), "dofs": "knee0"}, "stable_pd: target has 3 entries"),
    ("joint_damping", {"damping": [1.0, 2.0]}, "joint_damping: damping has 2 entries but the force acts on 12"),
    ("drag", {"links": ["torso", "tail"]}, r"drag: model 'spider' has no link\(s\) \['tail'\]"),
])
def test_model_dependent_errors_are_named(name, params, message):
    f = pbf.force_model(name, **params)
    model = models.spider()
    q = ca.SX.sym("q", model.nq)
    with pytest.raises(ValueError, match=message):
        f.potential(model, q, q, q, 0.05, 0.0)


def test_stable_pd_generalized_force_needs_dt():
    f = pbf.force_model("stable_pd", kp=1.0)
    assert f.forms == {ForceForm.POTENTIAL}
    assert ForceForm.GENERALIZED_FORCE in pbf.force_model("stable_pd", kp=1.0, dt=0.01).forms
    with pytest.raises(ValueError, match=r"stable_pd: the generalised-force form .* needs its lookahead"):
        f.generalized_force(models.chain(2, "revolute"), np.zeros(2), np.zeros(2), 0.0)


# -- through the simulator (cross-plug-in behaviour) -----------------------------------------------------------

def test_stable_pd_is_stable_where_explicit_pd_diverges():
    """Stiff gains at dt = 0.05 s: explicit PD blows up, stable PD settles; at dt = 0.01 s both agree."""
    model = models.chain(3, "revolute")
    q0 = np.array([0.5, 0.2, 0.1])
    gains = {"kp": 50.0, "kd": 5.0}

    def rollout(name, dt):
        # a settling 3-link arm never moves at 100 rad/s: faster means the controller blew up
        sim = pbf.Simulator(model, dt=dt, forces=["gravity", (name, gains)], on_failure="continue", max_halvings=0,
                            max_speed=100.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the diverging run reports unconverged steps
            return sim.rollout(q0, None, 6.0)

    assert rollout("pd", 0.05).diverged
    stable = rollout("stable_pd", 0.05)
    assert not stable.diverged and np.abs(stable.qd[-1]).max() < 0.1
    # after 6 s all runs sit near the same equilibrium kp q = gravity torque (differences O(dt))
    fine_pd, fine_spd = rollout("pd", 0.01).q[-1], rollout("stable_pd", 0.01).q[-1]
    assert np.abs(fine_pd - fine_spd).max() < 0.005
    assert np.abs(stable.q[-1] - fine_spd).max() < 0.02


def test_controller_torque_matches_the_same_constant_torque():
    model = models.chain(3, "revolute")
    tau = [1.0, 0.5, 0.2]
    runs = [pbf.Simulator(model, dt=0.05, forces=["gravity", ("joint_torque", params)]).rollout(
        np.array([0.5, 0.2, 0.1]), None, 1.0)
        for params in ({"torque": tau}, {"controller": lambda t, q, qd: np.array(tau)})]
    assert np.array_equal(runs[0].q, runs[1].q)


@pytest.mark.parametrize("slope", [0.0, 0.35])
def test_box_on_a_plane(slope):
    """A box released on a plane of slope ``a`` (ground for a = 0): it stays put on flat ground; without
    friction it accelerates down the slope at g sin(a); with friction it creeps at its terminal speed
    m g sin(a) / (4 D2 d^2); with Eq. 9's literal friction weight it hovers and slides almost freely."""
    a, k, D2, m = slope, 1e4, 1e9, 1.0
    n = np.array([-np.sin(a), 0.0, np.cos(a)])
    down = np.array([-np.cos(a), 0.0, -np.sin(a)])  # down the slope
    model = models.box()
    depth = m * 9.81 * np.cos(a) / (4 * k)         # static penetration of the 4 bottom corners
    q0 = np.zeros(6)
    q0[:3] = (0.1 - depth) * n
    q0[4] = -a                                     # bottom face on the plane
    moved = {}
    for label, params in {"frictionless": {}, "friction": {"friction": D2},
                          "literal": {"friction": D2, "friction_depth": "next"}}.items():
        sim = pbf.Simulator(model, dt=0.01, forces=["gravity", ("penalty_contact", {
            "stiffness": k, "normal": n.tolist(), **params})])
        traj = sim.rollout(q0, None, 0.5)
        moved[label] = float((traj.q[-1, :3] - q0[:3]) @ down)
    if a == 0.0:
        assert max(abs(v) for v in moved.values()) < 1e-6
        return
    assert moved["frictionless"] == pytest.approx(0.5 * 9.81 * np.sin(a) * 0.5**2, rel=0.01)
    # terminal speed with the static penetration; the friction torque tips the box forward a little,
    # which raises sum d^2 and slows it slightly more (about 13 % here)
    terminal = m * 9.81 * np.sin(a) / (4 * D2 * depth**2)
    assert 0.8 * terminal * 0.5 < moved["friction"] <= terminal * 0.5
    assert moved["literal"] > 0.8 * moved["frictionless"]
    # the generalised-force form through Newton-Euler RK4 agrees with the potential form through PBAD
    sim = pbf.Simulator(model, integrator="rk4", dt=0.002, forces=["gravity", ("penalty_contact", {
        "stiffness": k, "normal": n.tolist(), "friction": D2})])
    rk4 = float((sim.rollout(q0, None, 0.5).q[-1, :3] - q0[:3]) @ down)
    assert rk4 == pytest.approx(moved["friction"], rel=0.03)


def test_swimmer_potential_and_force_forms_agree():
    """Anisotropic drag + stable PD: PBAD (potential forms) and RK4 (generalised forces) swim alike."""
    model = models.swimmer()
    target = lambda t: ca.vertcat(*[0.6 * ca.sin(2 * ca.pi * t + p) for p in (0.0, 1.2, 2.4)])  # noqa: E731
    com = pbf.kinematics.center_of_mass(model)
    finals = []
    for integrator, dt in (("pbad", 0.005), ("rk4", 0.004)):
        sim = pbf.Simulator(model, integrator=integrator, dt=dt, forces=[
            ("drag", {"coefficient": 0.5, "normal_coefficient": 5.0}),
            ("stable_pd", {"kp": 20.0, "kd": 1.0, "target": target, "dt": dt})])
        traj = sim.rollout(np.zeros(model.nq), None, 2.0)
        finals.append((_vec(com(traj.q[-1])) - _vec(com(traj.q[0])), traj.q[-1, 6:]))
    (d_pbad, hinges_pbad), (d_rk4, hinges_rk4) = finals
    assert d_rk4[0] > 0.2                                   # it swims
    assert d_pbad[0] == pytest.approx(d_rk4[0], rel=0.06)   # O(dt) apart
    assert np.abs(hinges_pbad - hinges_rk4).max() < 0.03
