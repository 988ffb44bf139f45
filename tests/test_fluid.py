"""The ``fluid_drag`` plug-in (MuJoCo's inertia-box fluid model) on models of our own, without MuJoCo: the
analytic force on a box moving along its principal axes, the principal axes it finds by itself, and its
derivatives against finite differences (STYLE.md 9). Against MuJoCo itself: ``tests/test_mjcf_mujoco.py``."""

from __future__ import annotations

import math

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework.lie import q_integrate
from pbframework.model import ArticulatedBody, Joint, Link
from pbframework.models import box_inertia

from _fd import fd_jacobian

EXACT_TOL = 1e-12      # relative: closed forms evaluated two ways
FD_TOL = 1e-6          # relative: CasADi Jacobians vs central differences (h = 1e-6)
EDGES, MASS = (0.4, 0.2, 0.1), 2.0


def free_box(R=np.eye(3)) -> ArticulatedBody:
    """A solid box of edges EDGES on a free joint, its principal axes turned by ``R`` in its link frame."""
    inertia = R @ np.diag(box_inertia(MASS, EDGES)) @ R.T
    return ArticulatedBody([Link("box", MASS, com=(0.1, -0.05, 0.02), inertia=inertia)],
                           [Joint("root", "free", "world", "box")], name="box")


def force(f, model, q, v) -> np.ndarray:
    return np.asarray(f.generalized_force(model, q, v, 0.0)).ravel()


def test_a_box_feels_stokes_and_quadratic_drag_along_its_axes():
    """The box of the inertia is the box itself; along each axis, f = -3 pi d mu u - rho b_i b_j |u| u / 2 and
    g = -pi d^3 mu w - rho b_k (b_i^4 + b_j^4) |w| w / 64, with d the mean edge."""
    model = free_box()
    rho, mu = 1000.0, 0.3
    fluid = pbf.force_model("fluid_drag", density=rho, viscosity=mu)
    b, d = np.array(EDGES), sum(EDGES) / 3
    q, com = model.neutral(), np.array([0.1, -0.05, 0.02])
    for k in range(3):
        i, j = [x for x in range(3) if x != k]
        for u in (1.7, -0.6):
            v = np.zeros(6)
            v[k] = u                            # the centre of mass moves along axis k (no turning)
            f = force(fluid, model, q, v)
            expect = -3 * math.pi * d * mu * u - 0.5 * rho * b[i] * b[j] * abs(u) * u
            assert f[k] == pytest.approx(expect, rel=EXACT_TOL)
            assert np.abs(np.delete(f[:3], k)).max() <= EXACT_TOL * abs(expect)
            assert np.abs(f[3:] - np.cross(com, f[:3])).max() <= EXACT_TOL * abs(expect)   # no torque at the com
    w = np.array([0.0, 0.0, 2.5])             # spin about z: the centre of mass moves on a circle too
    v = np.r_[-np.cross(w, com), w]           # ... unless the frame's origin moves the other way
    f = force(fluid, model, q, v)
    expect = -math.pi * d ** 3 * mu * 2.5 - rho * b[2] * (b[0] ** 4 + b[1] ** 4) * 2.5 ** 2 / 64
    torque_at_com = f[3:] - np.cross(com, f[:3])
    assert np.abs(f[:3]).max() <= EXACT_TOL * abs(expect) and torque_at_com[2] == pytest.approx(expect, rel=EXACT_TOL)


def test_the_principal_axes_are_found_from_the_inertia_and_the_wind_is_relative(rng):
    """Turned principal axes: the eigenvectors of the link's inertia give the force that the axes given
    explicitly give; a body at rest in a wind feels what it feels moving against still air."""
    x = rng.normal(size=4)
    R = np.asarray(ca.DM(pbf.kinematics.quaternion_matrix(x / np.linalg.norm(x))))
    model = free_box(R)
    found = pbf.force_model("fluid_drag", density=1.2, viscosity=0.1)
    given = pbf.force_model("fluid_drag", density=1.2, viscosity=0.1, axes={"box": R})
    windy = pbf.force_model("fluid_drag", density=1.2, viscosity=0.1, wind=(1.0, -2.0, 0.5))
    for _ in range(5):
        q, v = model.neutral(), rng.uniform(-2, 2, 6)
        q[:3], q[3:] = rng.uniform(-1, 1, 3), (lambda y: y / np.linalg.norm(y))(rng.normal(size=4))
        a, g = force(found, model, q, v), force(given, model, q, v)
        assert np.abs(a - g).max() <= EXACT_TOL * np.abs(g).max()
        Rq = np.asarray(ca.DM(pbf.kinematics.quaternion_matrix(q[3:])))
        still = np.r_[-Rq.T @ np.array([1.0, -2.0, 0.5]), 0, 0, 0]    # body-frame velocity against the wind
        assert np.abs(force(windy, model, q, np.zeros(6)) - force(found, model, q, still)).max() \
            <= EXACT_TOL * np.abs(force(found, model, q, still)).max()


def test_its_derivatives_match_finite_differences(rng):
    """d tau / d qd and d tau / d e (the tangent displacement q (+) e) on a free box and on a three-link chain,
    with inertia boxes and with MuJoCo's ellipsoid model (every lift and drag coefficient non-zero)."""
    frame = np.eye(4)
    turn = np.array([0.3, -0.2, 0.1, 0.9])
    frame[:3, :3] = np.asarray(ca.DM(pbf.kinematics.quaternion_matrix(turn / np.linalg.norm(turn))))
    frame[:3, 3] = (0.05, 0.1, -0.02)
    shell = {"frame": frame.tolist(), "semiaxes": [0.2, 0.1, 0.05],
             "coefficients": [1.0, 0.5, 0.25, 1.5, 1.0, 1.0, 0.01, 0.02, 0.005, 1e-4, 2e-4, 3e-4]}
    for model, ellipsoids in ((free_box(), None), (free_box(), {"box": [shell]}),
                              (pbf.models.chain(3, "revolute"), None), (pbf.models.chain(3, "revolute"),
                                                                        {"link1": [shell, shell]})):
        fluid = pbf.force_model("fluid_drag", density=50.0, viscosity=0.2, wind=(0.3, 0.0, -0.4),
                                ellipsoids=ellipsoids)
        q, e, v = ca.SX.sym("q", model.nq), ca.SX.sym("e", model.nv), ca.SX.sym("v", model.nv)
        qe = q_integrate(model)(q, e) if model.on_group else q + e
        tau = fluid.generalized_force(model, qe, v, 0.0)
        F = ca.Function("F", [q, e, v], [tau, ca.jacobian(tau, e), ca.jacobian(tau, v)])
        for _ in range(3):
            q0 = model.neutral() + (0 if model.on_group else rng.uniform(-1, 1, model.nq))
            v0, e0 = rng.uniform(-2, 2, model.nv), np.zeros(model.nv)
            _, Je, Jv = (np.asarray(x) for x in F(q0, e0, v0))
            fd_e = fd_jacobian(lambda x: np.asarray(F(q0, x, v0)[0]), e0)
            fd_v = fd_jacobian(lambda x: np.asarray(F(q0, e0, x)[0]), v0)
            assert np.abs(Je - fd_e).max() <= FD_TOL * max(1.0, np.abs(Je).max())
            assert np.abs(Jv - fd_v).max() <= FD_TOL * max(1.0, np.abs(Jv).max())
            assert np.abs(Jv).max() > 0.1 and np.abs(Je).max() > 0.01      # the checks check something


def test_parameters_are_checked_where_they_are_given():
    with pytest.raises(ValueError, match="fluid_drag: density"):
        pbf.force_model("fluid_drag", density=-1.0)
    with pytest.raises(ValueError, match=r"fluid_drag: wind must be 3 finite numbers"):
        pbf.force_model("fluid_drag", wind=(1.0, float("nan"), 0.0))
    with pytest.raises(ValueError, match=r"fluid_drag: axes\['box'\] must be a 3 x 3 rotation"):
        pbf.force_model("fluid_drag", axes={"box": np.diag([1.0, 1.0, -1.0])})
    with pytest.raises(ValueError, match=r"fluid_drag: ellipsoids\['box'\]\[0\] must be \{'frame'"):
        pbf.force_model("fluid_drag", ellipsoids={"box": [{"frame": np.eye(4), "semiaxes": [0.1, 0.1]}]})
    with pytest.raises(ValueError, match=r"fluid_drag: model 'box' has no link\(s\) \['hull'\]"):
        pbf.force_model("fluid_drag", density=1.0, links=["hull"]).generalized_force(free_box(), free_box().neutral(),
                                                                                   np.zeros(6), 0.0)
