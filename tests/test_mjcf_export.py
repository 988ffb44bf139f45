"""benchmarks/_mjcf.py: the MJCF written for the MuJoCo peer describes the same robot as the pbframework model.

Reference tests (STYLE.md 8) against MuJoCo itself, an independent implementation: at random configurations and
velocities from the seeded generator, MuJoCo's mass matrix (``mj_fullM``), bias force (``qfrc_bias``: Coriolis,
centrifugal and gravity) and contact-sphere centres (``geom_xpos``) equal pbframework's CRBA, RNEA ``(q, v, 0)``
and ``contact_positions``, after the coordinate map of the module (MuJoCo's depth-first order, quaternions
``(w, x, y, z)``, a free joint's linear velocity in the world frame). Then the position actuators, the contact
filtering and the option checks. Skipped without mujoco.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _mjcf  # noqa: E402

from pbframework import dynamics, kinematics, models  # noqa: E402
from pbframework.model import WORLD, ArticulatedBody, Joint, JointType, Link, transform  # noqa: E402

DYNAMICS_TOL = 1e-9
"""Mass matrix and bias force, absolute (N, N m, kg, kg m^2 at unit-scale models): both are exact algorithms in
double precision (measured agreement ~3e-14)."""
POSITION_TOL = 1e-12
"""Contact-sphere centres (m): the same kinematics composed by quaternions in MuJoCo, by matrices here (measured
~1e-15)."""
N_STATES = 3


def zoo() -> ArticulatedBody:
    """A branched tree with every joint type the brief's models leave out: a free base with a rotated and
    shifted joint origin, a revolute joint about a skew axis, a prismatic, a fixed, a spherical and a ball
    joint; full (non-diagonal) inertias, off-origin centres of mass, contact points on a welded link, and
    gravity off the z axis."""
    rng = np.random.default_rng(7)

    def link(name: str, points=()) -> Link:
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        inertia = 0.05 * Q @ np.diag(rng.uniform(1.0, 2.0, 3)) @ Q.T
        return Link(name, 0.5 + rng.random(), com=0.1 * rng.normal(size=3), inertia=inertia,
                    contact_points=np.reshape(points, (-1, 3)))

    links = [link("base", [(0.1, 0.2, 0.3)]), link("a", [(0.3, 0.0, 0.0)]), link("b", [(0.0, 0.2, 0.0)]),
             link("c", [(0.1, 0.1, 0.1), (0.2, 0.0, 0.0)]), link("d"), link("e", [(0.0, 0.0, 0.4)])]
    joints = [Joint("free", "free", WORLD, "base", origin=transform((0.1, -0.2, 0.3), (0.3, -0.5, 1.0))),
              Joint("rev", "revolute", "base", "a", origin=transform((0.2, 0.1, 0.0), (0.1, 0.2, 0.3)),
                    axis=(1.0, 2.0, 3.0)),
              Joint("pri", "prismatic", "a", "b", origin=transform((0.3, 0.0, 0.0), (0.5, 0.0, 0.0)),
                    axis=(0.0, 1.0, 1.0)),
              Joint("weld", "fixed", "b", "c", origin=transform((0.0, 0.2, 0.0), (0.0, 0.0, 0.7))),
              Joint("sph", "spherical", "base", "d", origin=transform((-0.2, 0.0, 0.1), (0.2, 0.3, -0.1))),
              Joint("bal", "ball", "d", "e", origin=transform((0.0, 0.0, -0.3), (1.0, 0.0, 0.0)))]
    return ArticulatedBody(links, joints, gravity=(0.3, -0.2, -9.7), name="zoo")


def welded_tree() -> ArticulatedBody:
    """A base welded to the world (no parent joint, carrying a contact point) with two branches, so MuJoCo's
    depth-first order differs from pbframework's breadth-first one."""
    rod = models.chain(1).links[0]

    def link(name: str) -> Link:
        return Link(name, rod.mass, com=rod.com, inertia=rod.inertia, contact_points=[(1.0, 0.0, 0.0)])

    links = [link(n) for n in ("base", "l0", "l1", "r0", "r1")]
    joints = [Joint("l0", "ball2", "base", "l0", origin=transform((1.0, 0.0, 0.0), (0.0, 0.0, 0.5))),
              Joint("r0", "revolute", "base", "r0", origin=transform((0.0, 0.0, 0.2), (0.0, 0.0, -0.5))),
              Joint("l1", "revolute", "l0", "l1", origin=transform((1.0, 0.0, 0.0)), axis=(0.0, 1.0, 0.0)),
              Joint("r1", "spherical", "r0", "r1", origin=transform((1.0, 0.0, 0.0)))]
    return ArticulatedBody(links, joints, name="welded_tree")


MODELS = {
    "spider": models.spider,
    "chain4_ball2": lambda: models.chain(4, contact_points=True),
    "chain3_ball": lambda: models.chain(3, "ball", contact_points=True),
    "box": models.box,
    "swimmer": models.swimmer,
    "chain3_slope_free": lambda: models.chain_slope(3)[0],
    "zoo": zoo,
    "welded_tree": welded_tree,
}


def random_state(model: ArticulatedBody, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    q = rng.uniform(-np.pi, np.pi, model.nq)
    for j in model.joints:
        if j.type in (JointType.BALL, JointType.FREE):
            sl = model.joint_q_index[j.name]
            u = rng.normal(size=4)
            q[sl.stop - 4:sl.stop] = u / np.linalg.norm(u)
    return q, rng.normal(size=model.nv)


def compiled(model: ArticulatedBody, **options):
    mj = mujoco.MjModel.from_xml_string(_mjcf.model_mjcf(model, dt=options.pop("dt", 1e-3), **options))
    return mj, mujoco.MjData(mj)


def qvel_map_rate(model: ArticulatedBody, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``dJ/dt v`` for ``J = qvel_map(model, q)``: a free joint's world linear velocity ``R v_lin`` changes at
    ``R (w x v_lin)`` (``w`` the body-frame angular velocity)."""
    out = np.zeros(model.nv)
    J = _mjcf.qvel_map(model, q)
    vperm = _mjcf.mujoco_permutation(model)[1]
    for j in model.joints:
        if j.type is JointType.FREE:
            vs = model.joint_v_index[j.name]
            rows = [int(np.flatnonzero(vperm == i)[0]) for i in range(vs.start, vs.start + 3)]
            R = J[np.ix_(rows, range(vs.start, vs.start + 3))]
            out[vs.start:vs.start + 3] = R @ np.cross(v[vs.start + 3:vs.stop], v[vs.start:vs.start + 3])
    return out[vperm]


def max_errors(model: ArticulatedBody, rng: np.random.Generator) -> dict[str, float]:
    """Largest differences between MuJoCo and pbframework over :data:`N_STATES` random states."""
    mj, d = compiled(model)
    assert (mj.nq, mj.nv) == (model.nq, model.nv)
    M_fn, rnea_fn, P_fn = dynamics.crba(model), dynamics.rnea(model), kinematics.contact_positions(model)
    geoms = [mj.geom(name).id for name in _mjcf.contact_geom_names(model)]
    err = {"mass_matrix": 0.0, "bias": 0.0, "contacts": 0.0}
    for _ in range(N_STATES):
        q, v = random_state(model, rng)
        d.qpos[:] = _mjcf.to_mujoco_qpos(model, q)
        d.qvel[:] = _mjcf.to_mujoco_qvel(model, q, v)
        mujoco.mj_forward(mj, d)
        M_mj = np.zeros((mj.nv, mj.nv))
        mujoco.mj_fullM(mj, d, M_mj)
        J = _mjcf.qvel_map(model, q)
        # qvel = J v, so M = J^T M_mj J and h = J^T (qfrc_bias + M_mj dJ/dt v) (the same power in both)
        M = J.T @ M_mj @ J
        h = J.T @ (d.qfrc_bias + M_mj @ qvel_map_rate(model, q, v))
        err["mass_matrix"] = max(err["mass_matrix"], float(np.abs(M - np.asarray(M_fn(q))).max()))
        h_ref = np.asarray(rnea_fn(q, v, np.zeros(model.nv))).ravel()
        err["bias"] = max(err["bias"], float(np.abs(h - h_ref).max()))
        if geoms:
            P = np.asarray(P_fn(q)).T
            err["contacts"] = max(err["contacts"], float(np.abs(d.geom_xpos[geoms] - P).max()))
    return err


@pytest.mark.parametrize("name", list(MODELS))
def test_mujoco_dynamics_and_contacts_match(name, rng):
    model = MODELS[name]()
    err = max_errors(model, rng)
    print(f"{name}: max |dM| {err['mass_matrix']:.2e}, |dh| {err['bias']:.2e}, |dp| {err['contacts']:.2e}")
    assert err["mass_matrix"] <= DYNAMICS_TOL, err
    assert err["bias"] <= DYNAMICS_TOL, err
    assert err["contacts"] <= POSITION_TOL, err


@pytest.mark.parametrize("name", list(MODELS))
def test_coordinate_map(name, rng):
    """Every hinge / slide coordinate sits at its MuJoCo joint's address; the converters invert each other;
    the mjcf's geoms are the contact spheres (plus the floor)."""
    model = MODELS[name]()
    mj, d = compiled(model)
    q, v = random_state(model, rng)
    qpos, qvel = _mjcf.to_mujoco_qpos(model, q), _mjcf.to_mujoco_qvel(model, q, v)
    assert [mj.joint(i).name for i in range(mj.njnt)] == _mjcf.mujoco_joint_names(model)
    for k, coord in enumerate(model.dof_names):
        if coord in _mjcf.mujoco_joint_names(model):
            jid = mj.joint(coord).id
            assert qpos[mj.jnt_qposadr[jid]] == q[k]
            assert qvel[mj.jnt_dofadr[jid]] == v[model.velocity_names.index(coord)]
    np.testing.assert_allclose(_mjcf.from_mujoco_qpos(model, qpos), q, rtol=0, atol=1e-15)
    np.testing.assert_allclose(_mjcf.from_mujoco_qvel(model, q, qvel), v, rtol=0, atol=1e-15)
    np.testing.assert_allclose(_mjcf.qvel_map(model, q) @ v, qvel, rtol=0, atol=1e-15)
    rows = np.stack([q, q])
    np.testing.assert_array_equal(_mjcf.to_mujoco_qpos(model, rows), np.stack([qpos, qpos]))
    assert mj.ngeom == model.n_contacts + 1
    np.testing.assert_allclose(mj.opt.gravity, model.gravity, rtol=0, atol=0)


def test_spider_order_is_depth_first():
    model = models.spider()
    assert model.dof_names[14] == "knee0"
    mj, _ = compiled(model)
    assert mj.jnt_qposadr[mj.joint("knee0").id] == 8          # after root (6) and hip0 (2), before hip1
    qperm, vperm = _mjcf.mujoco_permutation(model)
    assert sorted(qperm) == list(range(model.nq)) and qperm[8] == 14
    np.testing.assert_array_equal(qperm, vperm)


def test_position_actuators(rng):
    """``<position kp kv>`` on the named coordinates, in the given order: force ``kp (ctrl - q) - kd qdot`` on
    exactly those coordinates, in pbframework's order after the map back."""
    model = models.spider()
    actuated = ["knee2", "hip0:ry", "hip3:rz", "root:z"]
    kp, kd = 37.0, 1.5
    mj, d = compiled(model, actuated=actuated, kp=kp, kd=kd)
    assert mj.nu == len(actuated)
    assert [mj.actuator(i).name for i in range(mj.nu)] == actuated
    q, v = random_state(model, rng)
    ctrl = rng.normal(size=len(actuated))
    d.qpos[:] = _mjcf.to_mujoco_qpos(model, q)
    d.qvel[:] = _mjcf.to_mujoco_qvel(model, q, v)
    d.ctrl[:] = ctrl
    mujoco.mj_forward(mj, d)
    idx = [model.dof_index(c) for c in actuated]
    expected = kp * (ctrl - q[idx]) - kd * v[idx]
    np.testing.assert_allclose(d.actuator_force, expected, rtol=1e-14, atol=1e-12)
    tau = _mjcf.qvel_map(model, q).T @ d.qfrc_actuator
    tau_expected = np.zeros(model.nv)
    tau_expected[idx] = expected
    np.testing.assert_allclose(tau, tau_expected, rtol=1e-14, atol=1e-12)


def test_spheres_touch_only_the_floor():
    """Spheres overlapping one another and the floor: every contact MuJoCo finds pairs a sphere with the
    floor; without ``floor`` there are none."""
    link = Link("blob", 1.0, contact_points=[(0.0, 0.0, 0.0), (0.001, 0.0, 0.0), (0.0, 0.001, 0.0)])
    model = ArticulatedBody([link], [Joint("root", "floating", WORLD, "blob")], name="blob")
    for floor, expected in ((True, 3), (False, 0)):
        mj, d = compiled(model, floor=floor, contact_radius=0.01)
        mujoco.mj_forward(mj, d)                                   # centres at z = 0: all under the floor
        assert d.ncon == expected
        pairs = {tuple(sorted(map(int, c.geom))) for c in d.contact[:d.ncon]}
        floor_id = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_GEOM, "floor") if floor else -1
        assert all(floor_id in p for p in pairs)
        np.testing.assert_allclose(mj.geom_size[mj.geom_type == mujoco.mjtGeom.mjGEOM_SPHERE, 0], 0.01)


def test_options_reach_mujoco():
    mj, _ = compiled(models.box(), dt=0.0025, integrator="Euler", mu=0.3)
    assert mj.opt.timestep == 0.0025
    assert mj.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER
    np.testing.assert_array_equal(mj.geom_friction[:, 0], 0.3)
    np.testing.assert_allclose(mj.body_mass[1:], [x.mass for x in models.box().links], rtol=1e-15)


@pytest.mark.parametrize("options, message", [
    ({"dt": 0.0}, "dt must be a positive"),
    ({"integrator": "rk4"}, "unknown integrator 'rk4'"),
    ({"actuated": ["knee9"]}, "'knee9' is not one of"),
    ({"actuated": ["knee0", "knee0"]}, "more than once"),
    ({"kp": -1.0}, "kp must be"),
    ({"contact_radius": 0.0}, "contact_radius"),
])
def test_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        _mjcf.model_mjcf(models.spider(), **{"dt": 1e-3, **options})


def test_quaternion_coordinate_cannot_be_actuated():
    with pytest.raises(ValueError, match="quaternion"):
        _mjcf.model_mjcf(models.chain(2, "ball"), dt=1e-3, actuated=["joint0:qx"])
