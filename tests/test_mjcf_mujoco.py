"""load_mjcf through MuJoCo's compiler, checked against MuJoCo itself (issue 25): the mass matrix (armature
included), bias forces, passive forces and actuator forces at random states, to 1e-9 relative, on small MJCF
files of our own (no network)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import pbframework as pbf
from pbframework import dynamics
from pbframework.forces import force_model
from pbframework.io.mjcf import to_mujoco
from pbframework.model import ModelError
from pbframework.plugins.forces.actuators import site_transmission

mujoco = pytest.importorskip("mujoco")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _mujoco_check import PASSIVE, compare, random_state, rel_err  # noqa: E402

TOL = 1e-9
"""Norm-wise relative tolerance against MuJoCo, ``||ours - mj|| / max(||mj||, 1)``."""


def forces_of(model: pbf.ArticulatedBody, names) -> list:
    return [force_model(n, **p) for n, p in model.default_forces if n in names]


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


ARM = """<mujoco model="arm">
  <option gravity="0.3 -0.2 -9.81"/>
  <default><joint damping="0.7" armature="0.05"/><geom type="capsule" size="0.04"/></default>
  <worldbody>
    <body name="base" pos="0 0 0.5" euler="0 0 30">
      <geom type="box" size="0.1 0.1 0.05"/>
      <body name="upper" pos="0 0 0.1">
        <joint name="shoulder" axis="0 1 0" range="-90 90" stiffness="3" springref="0.2" frictionloss="0.1"/>
        <geom fromto="0 0 0 0.4 0 0"/>
        <body name="fore" pos="0.4 0 0" gravcomp="0.5">
          <joint name="elbow" axis="0 0.6 0.8" pos="0.01 0 0" ref="0.3" damping="1.3"/>
          <geom fromto="0 0 0 0.3 0 0" size="0.03"/>
          <body name="slider" pos="0.3 0 0">
            <joint name="extend" type="slide" axis="1 0 0" range="-0.1 0.1" stiffness="20" armature="0.2"/>
            <geom type="sphere" size="0.05"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="m_shoulder" joint="shoulder" gear="2" ctrlrange="-1 1"/>
    <position name="p_elbow" joint="elbow" kp="30" kv="2" forcerange="-5 5"/>
    <velocity name="v_extend" joint="extend" kv="4"/>
    <general name="g_shoulder" joint="shoulder" gaintype="affine" gainprm="1.5 0.4 0.1" biastype="affine"
             biasprm="0.2 -1 -0.3" gear="1.5"/>
  </actuator>
</mujoco>
"""


def test_an_arm_with_armature_passive_forces_and_four_actuator_kinds_matches_mujoco(tmp_path, rng):
    path = write(tmp_path, "arm.xml", ARM)
    model = pbf.load_mjcf(path)
    names = [n for n, _ in model.default_forces]
    assert names == ["joint_limits", "joint_damping", "joint_stiffness", "gravity_compensation", "joint_friction",
                     "mj_actuators"]
    assert [j.armature for j in model.joints if j.type.value != "fixed"] == [0.05, 0.05, 0.2]
    worst = compare(path, rng)
    assert max(worst.values()) <= TOL, worst


def test_each_passive_force_alone_matches_mujoco(tmp_path, rng):
    for attr in ('damping="0.9"', 'stiffness="4" springref="0.3"', ''):
        grav = ' gravcomp="1"' if not attr else ""
        text = f"""<mujoco><worldbody><body name="a"{grav}><joint name="j" axis="1 0 0" {attr}/>
          <geom type="capsule" fromto="0 0 0 0 0.3 0" size="0.03"/>
          <body name="b" pos="0 0.3 0"><joint name="k" type="slide" axis="0 1 0" {attr}/>
          <geom type="sphere" size="0.05"/></body></body></worldbody></mujoco>"""
        worst = compare(write(tmp_path, "one.xml", text), rng)
        assert worst["passive"] <= TOL and worst["M"] <= TOL, (attr, worst)
        model = pbf.load_mjcf(tmp_path / "one.xml")
        f = sum(np.asarray(x.generalized_force(model, np.array([0.4, 0.1]), np.array([1.0, -2.0]), 0.0)).ravel()
                for x in forces_of(model, PASSIVE))
        assert np.abs(f).max() > 0.01                           # the force is there, not just zero on both sides


INERTIA_FROM_GEOMS = """<mujoco>
  <asset><mesh name="tet" vertex="0 0 0  0.2 0 0  0 0.3 0  0 0 0.25"/></asset>
  <worldbody>
    <body name="a"><joint name="j1" axis="0 0 1"/>
      <geom type="box" size="0.1 0.05 0.02" pos="0.1 0 0" euler="10 20 30" density="800"/>
      <geom type="cylinder" size="0.03 0.1" pos="0 0.1 0"/>
      <body name="b" pos="0.2 0 0"><joint name="j2" axis="0 1 0"/>
        <geom type="mesh" mesh="tet" density="2000"/>
        <geom type="ellipsoid" size="0.05 0.03 0.02" pos="0.1 0 0" mass="0.3"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_inertia_from_primitive_and_mesh_geoms_is_mujocos(tmp_path, rng):
    with pytest.warns(pbf.io.mjcf.UnsupportedGeoms, match="cylinder.*mesh.*ellipsoid|cylinder"):
        model = pbf.load_mjcf(write(tmp_path, "geoms.xml", INERTIA_FROM_GEOMS))
    m = mujoco.MjModel.from_xml_string(INERTIA_FROM_GEOMS)
    assert model.total_mass == pytest.approx(float(m.body_mass.sum()), rel=1e-14)
    with pytest.warns(pbf.io.mjcf.UnsupportedGeoms):
        worst = compare(tmp_path / "geoms.xml", rng)
    assert worst["M"] <= TOL and worst["bias"] <= TOL, worst


TWO_TREES = """<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <body name="left_base" pos="-0.5 0 0.2"><geom type="box" size="0.1 0.1 0.1"/>
      <body name="l1"><joint name="l1" axis="0 0 1" damping="0.4"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="l2" pos="0.3 0 0"><joint name="l2" axis="0 1 0"/><geom type="sphere" size="0.05"/></body></body>
    </body>
    <body name="r1" pos="0.5 0 0.2" euler="0 0 180"><joint name="r1" axis="0 0 1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="r2" pos="0.3 0 0"><joint name="r2" axis="0 1 0"/><geom type="sphere" size="0.05"/></body>
    </body>
    <body name="box" pos="0 0 1"><freejoint name="box"/><geom type="box" size="0.1 0.2 0.05"/></body>
  </worldbody>
  <actuator><motor joint="l1"/><motor joint="r2" gear="3"/></actuator>
</mujoco>"""


def test_two_arms_and_a_free_box_in_one_world(tmp_path, rng):
    model = pbf.load_mjcf(write(tmp_path, "two.xml", TWO_TREES))
    assert model.bases == ("l1", "r1", "box") and (model.nq, model.nv) == (11, 10)
    assert "left_base" not in {x.name for x in model.links}       # welded to the world: no dynamics
    assert len(model.obstacles) == 2                                  # the floor and the static base box
    worst = compare(tmp_path / "two.xml", rng)
    assert max(worst.values()) <= TOL, worst
    arms = pbf.load_mjcf(write(tmp_path, "arms.xml", TWO_TREES.replace(
        '<body name="box" pos="0 0 1"><freejoint name="box"/><geom type="box" size="0.1 0.2 0.05"/></body>', '')))
    for fd, model in (("aba", model), ("abia", arms), ("jsiia", arms)):   # forward dynamics on a forest
        q, v = random_state(model, rng)
        tau = rng.normal(size=model.nv)
        a = np.asarray(dynamics.forward_dynamics(model, fd)(q, v, tau)).ravel()
        assert rel_err(dynamics.rnea(model)(q, v, a), tau) <= TOL, fd


MOBILE_BASE = """<mujoco>
  <worldbody>
    <body name="base" pos="0 0 0.1">
      <joint name="x" type="slide" axis="1 0 0"/><joint name="y" type="slide" axis="0 1 0"/>
      <joint name="yaw" axis="0 0 1" pos="0.05 0.02 0"/>
      <geom type="box" size="0.3 0.2 0.05"/>
      <body name="mast" pos="0.1 0 0.05"><joint name="tilt" axis="1 0 0" pos="0 0 0.02" damping="0.3"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.5" size="0.02"/></body>
    </body>
  </worldbody>
  <actuator><velocity joint="x" kv="10"/><position joint="yaw" kp="5"/></actuator>
</mujoco>"""


def test_three_joints_in_one_body_compose_in_mujocos_order(tmp_path, rng):
    model = pbf.load_mjcf(write(tmp_path, "mobile.xml", MOBILE_BASE))
    assert [x.name for x in model.links] == ["base/x", "base/y", "base", "mast"]
    worst = compare(tmp_path / "mobile.xml", rng)
    assert max(worst.values()) <= TOL, worst
    m = mujoco.MjModel.from_xml_string(MOBILE_BASE)
    d = mujoco.MjData(m)
    q, _ = random_state(model, rng)
    d.qpos[:] = to_mujoco(model, q)[0]
    mujoco.mj_kinematics(m, d)
    for body in ("base", "mast"):                 # MuJoCo's body frames from ours
        T = np.asarray(pbf.kinematics.link_transform(model, body)(q))
        off = {"base": np.array([-0.05, -0.02, 0]), "mast": np.array([0, 0, -0.02])}[body]
        np.testing.assert_allclose(T[:3, :3], d.xmat[m.body(body).id].reshape(3, 3), atol=1e-12)
        np.testing.assert_allclose(T[:3, :3] @ off + T[:3, 3], d.xpos[m.body(body).id], atol=1e-12)


FREE = """<mujoco><worldbody>
  <body name="torso" pos="0 0 1" quat="0.9 0.1 0.3 -0.2"><freejoint name="root"/>
    <geom type="box" size="0.2 0.1 0.05"/>
    <body name="leg" pos="0.2 0 0"><joint name="ball" type="ball" damping="0.2"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
      <body name="foot" pos="0 0 -0.3"><joint name="knee" axis="0 1 0" stiffness="2"/><geom type="sphere" size="0.04"/></body>
    </body>
  </body>
</worldbody><actuator><motor joint="knee"/></actuator></mujoco>"""


def test_a_free_joint_at_random_orientations_and_a_damped_ball(tmp_path, rng):
    worst = compare(write(tmp_path, "free.xml", FREE), rng, states=8)
    assert max(worst.values()) <= TOL, worst


def test_frictionloss_is_a_smooth_dry_friction_model(tmp_path):
    model = pbf.load_mjcf(write(tmp_path, "arm.xml", ARM))
    (friction,) = forces_of(model, ("joint_friction",))
    assert friction.params()["friction"] == [0.1] and friction.smoothing == 1e-3
    q = model.neutral()
    for qd, expect in ((5.0, -0.1), (-5.0, 0.1), (0.0, 0.0)):
        v = np.zeros(model.nv)
        v[0] = qd
        f = np.asarray(friction.generalized_force(model, q, v, 0.0)).ravel()
        assert f[0] == pytest.approx(expect, abs=1e-12) and not f[1:].any()


def test_an_actuated_arm_simulates_with_ctrl_as_the_input(tmp_path):
    model = pbf.load_mjcf(write(tmp_path, "arm.xml", ARM))
    sim = pbf.Simulator(model, "rk4", dt=0.002,
                        forces=["gravity", pbf.io.actuator_force(model, lambda t, q, qd: [0.5, 0.3, 0.0, 0.0])])
    assert sim.problem.nu == 4
    tr = sim.rollout(model.neutral(), np.zeros(model.nv), duration=0.2)
    assert tr.status.value == "ok" and np.all(np.isfinite(tr.q))


def test_conversions_need_a_model_from_load_mjcf():
    with pytest.raises(ModelError, match="was not loaded by load_mjcf"):
        to_mujoco(pbf.models.chain(2), np.zeros(4))


GRIPPER = """<mujoco model="gripper"><worldbody>
  <body name="palm"><joint name="lift" type="slide" axis="0 0 1" damping="2"/><geom type="box" size="0.05 0.05 0.02"/>
    <body name="left" pos="0 0.03 -0.05"><joint name="l" type="slide" axis="0 1 0" range="0 0.04"/>
      <geom type="box" size="0.01 0.005 0.03"/></body>
    <body name="right" pos="0 -0.03 -0.05"><joint name="r" type="slide" axis="0 -1 0" range="0 0.04"/>
      <geom type="box" size="0.01 0.005 0.03"/></body>
  </body></worldbody>
  <tendon><fixed name="split"><joint joint="l" coef="0.5"/><joint joint="r" coef="0.5"/></fixed></tendon>
  <equality><joint joint1="l" joint2="r"/></equality>
  <actuator><general name="grip" tendon="split" ctrlrange="0 255" forcerange="-5 5" gainprm="0.01568"
     biastype="affine" biasprm="0 -100 -10"/><motor joint="lift" gear="10"/></actuator>
</mujoco>"""


def test_a_fixed_tendon_actuator_and_an_equality_disabled_on_request(tmp_path, rng):
    path = write(tmp_path, "gripper.xml", GRIPPER)
    with pytest.raises(ModelError, match=r"gripper.xml: <equality> \(1 in the model.*refused \(equality=\"error\"\)"):
        pbf.load_mjcf(path, equality="error")
    soft = pbf.load_mjcf(path)                                     # the default: a soft constraint
    assert dict(soft.default_forces)["soft_equality"]["constraints"][0]["kind"] == "joint"
    with pytest.warns(pbf.io.mjcf.EqualityDisabled, match=r"1 <equality> constraint\(s\) disabled"):
        model = pbf.load_mjcf(path, equality="disable")
    acts = dict(model.default_forces)["mj_actuators"]["actuators"]
    assert acts[0]["joints"] == {"l": 0.5, "r": 0.5}
    worst = compare(path, rng, model=model)
    assert max(worst.values()) <= TOL, worst
    disabled = GRIPPER.replace("<worldbody>", '<option><flag equality="disable"/></option><worldbody>', 1)
    with warnings.catch_warnings():                                 # MuJoCo's own flag: loads, nothing to warn
        warnings.simplefilter("error", pbf.io.mjcf.EqualityDisabled)
        pbf.load_mjcf(write(tmp_path, "flagged.xml", disabled))


SPRINGS = """<mujoco><option gravity="0 0 -9.81"/><worldbody>
  <body name="a" gravcomp="0.4"><joint name="j" axis="1 0 0" stiffness="6" springref="0.3"/>
    <geom type="capsule" fromto="0 0 0 0 0.3 0" size="0.03"/>
    <body name="b" pos="0 0.3 0"><joint name="k" type="slide" axis="0 1 0" stiffness="40"/>
      <geom type="sphere" size="0.05"/></body></body></worldbody></mujoco>"""


def test_springs_and_gravity_compensation_store_energy_damping_and_friction_dissipate(tmp_path):
    model = pbf.load_mjcf(write(tmp_path, "springs.xml", SPRINGS))
    q0, v0 = np.array([0.8, 0.05]), np.array([0.0, 0.3])
    tr = pbf.Simulator(model, "rk4", dt=1e-3).rollout(q0, v0, duration=1.0)
    assert tr.status.value == "ok" and np.ptp(tr.energy) < 1e-7 * np.abs(tr.energy).max()   # stored: conserved
    damped = pbf.load_mjcf(write(tmp_path, "damped.xml", SPRINGS.replace('stiffness="6"',
                                                                          'stiffness="6" damping="0.2" frictionloss="0.05"')))
    assert [n for n, _ in damped.default_forces] == ["joint_damping", "joint_stiffness", "gravity_compensation",
                                                     "joint_friction"]
    tr = pbf.Simulator(damped, "rk4", dt=1e-3).rollout(q0, v0, duration=1.0)
    assert tr.status.value == "ok" and np.all(np.diff(tr.energy) <= 1e-9) and tr.energy[-1] < tr.energy[0] - 0.05
    for integrator in ("pbad",):                    # the potential forms: implicit, never gaining energy
        tr = pbf.Simulator(damped, integrator, dt=0.05).rollout(q0, v0, duration=2.0)
        assert tr.status.value == "ok" and np.all(np.diff(tr.energy[1:]) <= 1e-9)


def test_disable_flags_load_the_model_as_mujoco_runs_it(tmp_path):
    path = write(tmp_path, "arm.xml", ARM)
    names = [n for n, _ in pbf.load_mjcf(path, disable=("constraint",)).default_forces]
    assert "joint_limits" not in names and "joint_friction" not in names and "joint_damping" in names
    names = [n for n, _ in pbf.load_mjcf(path, disable=("damper", "spring", "actuation")).default_forces]
    assert names == ["joint_limits", "gravity_compensation", "joint_friction"]
    assert pbf.load_mjcf(path, disable=["gravity"]).gravity.tolist() == [0, 0, 0]
    with pytest.raises(ModelError, match=r"disable must be a list of MuJoCo flag names \(constraint, equality"):
        pbf.load_mjcf(path, disable=("friction",))
    with pytest.raises(ModelError, match="disable must be a list"):
        pbf.load_mjcf(path, disable="constraint")


def test_actuator_force_drives_the_model_with_ctrl(tmp_path):
    model = pbf.load_mjcf(write(tmp_path, "arm.xml", ARM))
    f = pbf.io.actuator_force(model, [0.5, 0.2, -0.1, 1.0])
    assert f.name == "mj_actuators" and f.n_inputs(model) == 4
    np.testing.assert_array_equal(f.input_values(model, 0.0, model.neutral(), np.zeros(model.nv)), [0.5, 0.2, -0.1, 1.0])
    with pytest.raises(ValueError, match=r"ctrl must be 4 finite numbers"):
        pbf.io.actuator_force(model, [1.0])
    with pytest.raises(ModelError, match="has no MuJoCo actuators"):
        pbf.io.actuator_force(pbf.load_mjcf(write(tmp_path, "s.xml", SPRINGS)))


def test_the_geoms_mujoco_shows_are_the_display_geometry_at_mujocos_poses(tmp_path, rng):
    """Visible geoms (groups 0-2) become the model's display: primitives, and meshes / ellipsoids as MuJoCo
    compiled them, each in its link frame so that forward kinematics puts it where MuJoCo puts the geom."""
    path = write(tmp_path, "geoms.xml", INERTIA_FROM_GEOMS.replace(
        '<worldbody>', '<worldbody><geom name="hidden" type="box" size="1 1 1" group="3" contype="0" conaffinity="0"/>'))
    with pytest.warns(pbf.io.UnsupportedGeoms):
        model = pbf.load_mjcf(path)
    d_ = model.display
    assert d_.source == "mjcf" and set(d_.links) == {x.name for x in model.links} and d_.world == ()
    kinds = [v.type.value for vs in d_.links.values() for v in vs]
    assert kinds == ["box", "cylinder", "mesh", "mesh"]               # the ellipsoid is a scaled sphere mesh
    mesh = d_.links["b"][0]
    assert mesh.triangles is not None and mesh.triangles[1].shape == (4, 3)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    q, _ = random_state(model, rng)
    d.qpos[:] = to_mujoco(model, q)[0]
    mujoco.mj_kinematics(m, d)
    poses = [np.asarray(pbf.kinematics.link_transform(model, link)(q)) @ v.pose
             for link, vs in d_.links.items() for v in vs]
    for g, T in zip([1, 2, 3, 4], poses):                              # geom 0 is the hidden box
        np.testing.assert_allclose(T[:3, 3], d.geom_xpos[g], atol=1e-12)
        np.testing.assert_allclose(T[:3, :3], d.geom_xmat[g].reshape(3, 3), atol=1e-12)


LOOPS = """<mujoco model="loops"><worldbody>
  <site name="ground_pin" pos="0.6 0 0"/>
  <body name="crank" pos="0 0 0"><joint name="a" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
    <body name="coupler" pos="0.2 0 0"><joint name="b" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.5 0 0.1" size="0.02"/>
      <site name="coupler_tip" pos="0.5 0 0.1"/>
      <body name="rocker" pos="0.5 0 0.1"><joint name="c" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 -0.1 0 -0.1" size="0.02"/>
      </body></body></body>
  <body name="box" pos="0 0.5 0.3" euler="10 20 30"><freejoint/><geom type="box" size="0.05 0.05 0.05"/></body>
  <body name="finger1" pos="0 -0.5 0"><joint name="f1" type="slide" axis="1 0 0"/><geom type="box" size="0.01 0.01 0.03"/></body>
  <body name="finger2" pos="0 -0.6 0"><joint name="f2" type="slide" axis="1 0 0" ref="0.01"/><geom type="box" size="0.01 0.01 0.03"/></body>
</worldbody>
<equality>
  <connect name="close" body1="rocker" body2="world" anchor="-0.1 0 -0.1"/>
  <connect name="sites" site1="coupler_tip" site2="ground_pin"/>
  <weld name="hold" body1="box" body2="coupler" relpose="0.1 0.4 0.2 0.9 0.1 0.2 0.3" torquescale="2"/>
  <joint name="mimic" joint1="f1" joint2="f2" polycoef="0.01 -1 0.5 0 0" solref="0.05 1.2"/>
</equality></mujoco>"""


def test_soft_equality_residuals_are_mujocos_efc_pos(tmp_path, rng):
    """Joint (polynomial coupling), connect (body and site semantic) and weld: our violation r(q) equals the
    equality rows of MuJoCo's efc_pos at states near MuJoCo's qpos0 (the weld's quaternion then has w > 0)."""
    path = write(tmp_path, "loops.xml", LOOPS)
    model = pbf.load_mjcf(path)
    (eq,) = forces_of(model, ("soft_equality",))
    assert [c["kind"] for c in eq.constraints] == ["connect", "connect", "weld", "joint"]
    assert eq.constraints[3]["timeconst"] == 0.05 and eq.constraints[3]["dampratio"] == 1.2
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    q_sym = casadi_sym(model)
    residual = casadi_function(q_sym, eq.residual(model, q_sym))
    for _ in range(5):
        qpos = m.qpos0 + rng.normal(scale=0.3, size=m.nq)
        qpos[m.jnt_qposadr[3] + 3:m.jnt_qposadr[3] + 7] /= np.linalg.norm(qpos[m.jnt_qposadr[3] + 3:m.jnt_qposadr[3] + 7])
        d.qpos[:] = qpos
        mujoco.mj_forward(m, d)
        rows = d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY
        q, _ = pbf.io.from_mujoco(model, qpos)
        np.testing.assert_allclose(np.asarray(residual(q)).ravel(), d.efc_pos[rows], atol=1e-12)


def casadi_sym(model):
    import casadi as ca
    return ca.SX.sym("q", model.nq)


def casadi_function(q, expr):
    import casadi as ca
    return ca.Function("r", [q], [expr])


def test_soft_equality_holds_a_four_bar_closed_and_couples_the_fingers(tmp_path):
    """Under gravity for 2 s the loops stay closed within millimetres and the mimic joint follows its
    polynomial, with rk4 and with pbad at 10 ms; without the constraints the crank falls freely."""
    path = write(tmp_path, "loops.xml", LOOPS.replace('<connect name="sites" site1="coupler_tip" site2="ground_pin"/>', '')
                  .replace('<weld name="hold" body1="box" body2="coupler" relpose="0.1 0.4 0.2 0.9 0.1 0.2 0.3" '
                           'torquescale="2"/>', ''))
    model = pbf.load_mjcf(path)
    (eq,) = forces_of(model, ("soft_equality",))
    q0, _ = pbf.io.from_mujoco(model, mujoco.MjModel.from_xml_path(str(path)).qpos0)
    q_sym = casadi_sym(model)
    residual = casadi_function(q_sym, eq.residual(model, q_sym))
    for integrator, dt in (("rk4", 1e-3), ("pbad", 0.01)):
        tr = pbf.Simulator(model, integrator, dt=dt, forces=["gravity", ("joint_damping", {"damping": 0.02})]
                           ).rollout(q0, np.zeros(model.nv), duration=2.0)
        assert tr.status.value == "ok", integrator
        settled = [np.abs(np.asarray(residual(q)).ravel()) for t, q in zip(tr.t, tr.q) if t >= 0.2]
        worst = np.max(settled, axis=0)          # the mimic starts 0.01 off (polycoef[0])
        # MuJoCo (1 ms, contacts off) on the same file from t = 0.2 s: loop 0.46 mm, mimic 2.36 mm; at 2 s 0.3 mm
        # and 6e-10 (measured)
        assert worst[:3].max() < 3e-3 and worst[3] < 3e-3 and settled[-1][3] < 1e-4, (integrator, worst)
    with pytest.warns(pbf.io.EqualityDisabled):
        free = pbf.load_mjcf(path, equality="disable")
    tr = pbf.Simulator(free, "rk4", dt=1e-3).rollout(q0, np.zeros(free.nv), duration=1.0)
    assert max(np.abs(np.asarray(residual(q))).max() for q in tr.q) > 0.05


COUPLED = """<mujoco><worldbody>
  <body name="a"><joint name="j1" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
    <body name="b" pos="0.3 0 0"><joint name="j2" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
    </body></body></worldbody>
  <tendon><fixed name="waist" range="-0.2 0.2"><joint joint="j1" coef="1"/><joint joint="j2" coef="0.5"/></fixed></tendon>
</mujoco>"""


def test_a_fixed_tendon_limit_holds_its_length(tmp_path):
    """The tendon l = j1 + 0.5 j2 limited to [-0.2, 0.2]: the chain falls from horizontal and the limit holds
    the length within a few hundredths of a radian (a stiff one-sided spring, like joint_limits); without
    limits the length runs far past it."""
    path = write(tmp_path, "coupled.xml", COUPLED)
    model = pbf.load_mjcf(path)
    (lim,) = forces_of(model, ("tendon_limits",))
    assert lim.tendons == [{"name": "waist", "joints": {"j1": 1.0, "j2": 0.5}, "lower": -0.2, "upper": 0.2}]
    for integrator, dt in (("rk4", 1e-3), ("pbad", 0.01)):
        tr = pbf.Simulator(model, integrator, dt=dt).rollout(np.zeros(2), np.zeros(2), duration=1.5)
        length = tr.q[:, 0] + 0.5 * tr.q[:, 1]
        assert tr.status.value == "ok" and length.max() < 0.2 + 0.03 and length.min() > -0.2 - 0.03, integrator
    free = pbf.load_mjcf(path, limits=False)
    assert "tendon_limits" not in dict(free.default_forces)
    tr = pbf.Simulator(free, "rk4", dt=1e-3).rollout(np.zeros(2), np.zeros(2), duration=1.5)
    assert np.abs(tr.q[:, 0] + 0.5 * tr.q[:, 1]).max() > 0.5


GRAVCOMP_TO_ACTUATORS = """<mujoco><option gravity="0.3 -0.2 -9.81"/><worldbody>
  <body name="base" pos="0 0 0.3"><freejoint name="root"/><geom type="box" size="0.1 0.1 0.05"/>
    <body name="a" gravcomp="0.7"><joint name="j1" axis="1 0 0" actuatorgravcomp="true" actuatorfrcrange="-0.5 0.5"/>
      <geom type="capsule" fromto="0 0 0 0 0.3 0" size="0.03"/>
      <body name="b" pos="0 0.3 0" gravcomp="1"><joint name="j2" axis="0 1 1" stiffness="2"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="c" pos="0.3 0 0" gravcomp="0.5"><joint name="j3" type="slide" axis="0 0.3 1" actuatorgravcomp="true"/>
          <geom type="sphere" size="0.05"/></body></body></body></body></worldbody>
  <actuator><motor joint="j2"/><position name="servo" joint="j1" kp="3" kv="0.5"/></actuator></mujoco>"""


def test_actuatorgravcomp_moves_gravity_compensation_into_the_clamped_actuator_force(tmp_path, rng):
    """On joints with actuatorgravcomp MuJoCo adds the gravity compensation to qfrc_actuator, not qfrc_passive,
    and clamps it with the actuators' force by the joint's actuatorfrcrange (j1 here, with no actuator of its
    own at the bound); the other joints' share stays passive. Without actuation (nu = 0 or the flag) MuJoCo
    drops that share, and so does the mapping."""
    path = write(tmp_path, "gc.xml", GRAVCOMP_TO_ACTUATORS)
    model = pbf.load_mjcf(path)
    forces = dict(model.default_forces)
    assert forces["gravity_compensation"]["joints"] == ["root", "j2"]
    assert forces["mj_actuators"]["gravcomp"] == {"links": {"a": 0.7, "b": 1.0, "c": 0.5}, "joints": ["j1", "j3"]}
    (acts,) = forces_of(model, ("mj_actuators",))
    (passive,) = forces_of(model, ("gravity_compensation",))
    assert acts.forms == passive.forms == {pbf.ForceForm.GENERALIZED_FORCE}      # no potential: implicit
    worst = compare(path, rng, states=8)                                          # integrators take the force
    assert max(worst.values()) <= TOL, worst
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    q, v = random_state(model, rng)
    d.qpos[:], d.qvel[:] = to_mujoco(model, q, v)
    d.ctrl[:] = [0.0, 3.0]
    mujoco.mj_forward(m, d)
    f = np.asarray(acts.generalized_force(model, q, v, 0.0, u=d.ctrl.copy())).ravel()
    j1, j3 = model.joint_v_index["j1"].start, model.joint_v_index["j3"].start
    assert d.qfrc_actuator[m.joint("j1").dofadr[0]] == f[j1] == 0.5                # at the bound
    assert d.qfrc_gravcomp[m.joint("j3").dofadr[0]] != 0 and f[j3] == pytest.approx(
        d.qfrc_actuator[m.joint("j3").dofadr[0]], rel=1e-12)
    off = write(tmp_path, "off.xml", GRAVCOMP_TO_ACTUATORS.replace("<worldbody>", '<option><flag actuation='
                                                                   '"disable"/></option><worldbody>', 1))
    assert "mj_actuators" not in dict(pbf.load_mjcf(off).default_forces)
    worst = compare(off, rng)
    assert max(worst.values()) <= TOL, worst
    for integrator, dt in (("rk4", 1e-3), ("pbad", 0.01)):
        tr = pbf.Simulator(model, integrator, dt=dt, forces=["gravity", pbf.io.actuator_force(model, [0.2, 0.1])]
                           ).rollout(model.neutral(), np.zeros(model.nv), duration=0.1)
        assert tr.status.value == "ok" and np.all(np.isfinite(tr.q)), integrator


SITE_THRUST = """<mujoco><option gravity="0 0 -9.81"/><worldbody>
  <body name="hull" pos="0 0 1" euler="10 -20 30"><freejoint name="root"/><geom type="box" size="0.2 0.1 0.05"/>
    <site name="prop" pos="0.15 0.05 0.06" euler="5 10 -15"/>
    <body name="arm" pos="-0.2 0 0"><joint name="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 -0.3 0 0" size="0.03"/>
      <site name="nozzle" pos="-0.3 0.02 0" euler="0 90 0"/>
      <body name="slider" pos="-0.3 0 0"><joint name="slide" type="slide" axis="1 0 0"/>
        <geom type="sphere" size="0.04"/></body></body></body></worldbody>
  <actuator>
    <motor name="thrust" site="prop" gear="0 0 1 0 0 -0.1" ctrlrange="0 5"/>
    <general name="jet" site="nozzle" gear="0.3 -1 0.2 0.05 0.1 -0.4" gaintype="affine" gainprm="2 0 0.4"
             biastype="affine" biasprm="0.1 0 -0.7" forcerange="-2 2"/>
    <motor joint="slide" gear="3"/>
  </actuator></mujoco>"""


def test_site_transmissions_apply_mujocos_wrench_at_the_site(tmp_path, rng):
    """A motor and a general actuator (affine gain and bias in MuJoCo's V = gear . J v) on sites of a free hull
    and of an arm: J^T (gear F) to 1e-9 against qfrc_actuator at free-base orientations; no potential form, so
    pbad takes it as a generalised force."""
    path = write(tmp_path, "thrust.xml", SITE_THRUST)
    model = pbf.load_mjcf(path)
    (acts,) = forces_of(model, ("mj_actuators",))
    assert acts.actuators[0]["site"]["link"] == "hull" and acts.actuators[1]["site"]["link"] == "arm"
    assert acts.actuators[1]["gear"] == [0.3, -1.0, 0.2, 0.05, 0.1, -0.4]
    assert acts.forms == {pbf.ForceForm.GENERALIZED_FORCE}
    worst = compare(path, rng, states=8)
    assert max(worst.values()) <= TOL and worst["M"] <= TOL, worst
    q, v = random_state(model, rng)
    assert np.abs(np.asarray(acts.generalized_force(model, q, v, 0.0, u=[2.0, 1.0, 0.0]))).max() > 0.1
    for integrator, dt in (("rk4", 1e-3), ("pbad", 0.01)):
        tr = pbf.Simulator(model, integrator, dt=dt, forces=["gravity", pbf.io.actuator_force(model, [3.0, 0.5, 0.1])]
                           ).rollout(model.neutral(), np.zeros(model.nv), duration=0.1)
        assert tr.status.value == "ok" and np.all(np.isfinite(tr.q)), integrator


REFSITE = """<mujoco><worldbody>
  <site name="w" pos="0.3 0.2 0.1" euler="5 5 5"/>
  <body name="base" pos="0 0 0.3" euler="10 -20 30"><freejoint name="root"/><geom type="box" size="0.1 0.1 0.05"/>
    <body name="a" euler="10 20 30"><joint name="j1" axis="1 0 0"/><geom type="capsule" fromto="0 0 0 0 0.3 0" size="0.03"/>
      <site name="r" pos="0.05 0.1 0.02" euler="30 -10 50"/>
      <body name="b" pos="0 0.3 0"><joint name="j2" type="ball"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="c" pos="0.3 0 0"><joint name="j3" type="slide" axis="0 0.3 1"/><geom type="sphere" size="0.05"/>
          <site name="s" pos="0.02 0.01 0.05" euler="10 20 30"/></body></body></body>
    <body name="d" pos="0 -0.2 0"><joint name="j4" axis="0 1 0"/><geom type="sphere" size="0.05"/>
      <site name="t" pos="0.1 0 0"/></body>
  </body></worldbody>
  <actuator>
    <general site="s" refsite="r" gear="0.3 -1 0.2 0.5 0.7 -0.4" gaintype="affine" gainprm="1 0.5 0.2"
             biastype="affine" biasprm="0.2 -3 -0.5"/>
    <position site="t" refsite="s" gear="1 0.5 0 0 0 0.3" kp="4" kv="0.3"/>
    <motor site="s" refsite="w" gear="0 0 0 1 0 0"/>
    <motor site="t" refsite="w" gear="1 0 0 0 0 0"/>
    <general site="s" refsite="r" gear="0 0 0 1 1 0" gainprm="50" biastype="affine" biasprm="0.3 -50 -2"/>
    <general site="t" refsite="w" gear="0 0 0 0 0.6 -0.8" gainprm="50" biastype="affine" biasprm="0 -50 0"/>
    <general site="t" refsite="w" gear="0 0 0 0 0.6 -0.8" gainprm="50" biastype="affine" biasprm="0 -40 0"/>
    <general site="t" refsite="w" gear="0 0 0 0 0.6 -0.8" gaintype="affine" gainprm="50" biastype="affine"
             biasprm="0 -50 0"/>
  </actuator></mujoco>"""


def test_site_transmissions_with_a_refsite_are_mujocos_length_and_moment(tmp_path, rng):
    """With a refsite the length is the site's position and rotation vector in the reference frame (affine
    gains and a position servo read it) and the moment MuJoCo's (J_s - J_r)^T R_r gear, zero on the joints
    that move both sites (the free base here, for t and s): to 1e-9 against qfrc_actuator, a reference site
    on the world too. A position servo (b1 = -g0, fixed gain) on a purely rotational gear takes its error
    c - L modulo 2 pi |gear[3:6]|, as MuJoCo 4 does (measured: not with b1 = -40 g0 / 50, nor an affine gain);
    with ctrl in [-3, 3] and angles up to pi the error crosses the wrap."""
    path = write(tmp_path, "refsite.xml", REFSITE)
    model = pbf.load_mjcf(path)
    (acts,) = forces_of(model, ("mj_actuators",))
    assert [a["refsite"]["link"] for a in acts.actuators] == ["a", "c", "world", "world", "a", "world", "world",
                                                              "world"]
    assert [a["wrap"] for a in acts.actuators] == [None] * 4 + [pytest.approx(2 * np.pi * 2 ** 0.5),
                                                                pytest.approx(2 * np.pi), None, None]
    worst = compare(path, rng, states=20)
    assert max(worst.values()) <= TOL, worst
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    q, v = random_state(model, rng)
    d.qpos[:], d.qvel[:] = to_mujoco(model, q, v)
    mujoco.mj_forward(m, d)
    moment = np.zeros((m.nu, m.nv))
    mujoco.mju_sparse2dense(moment, d.actuator_moment, d.moment_rownnz, d.moment_rowadr, d.moment_colind)
    T = pbf.io.mjcf.mujoco_velocity_map(model, q)
    qs = casadi_sym(model)
    for k, a in enumerate(acts.actuators):                  # MuJoCo's actuator_length and actuator_moment
        length, mom = site_transmission(model, a["site"], a["refsite"], a["gear"], qs)
        ours = np.asarray(casadi_function(qs, length)(q)).ravel()[0]
        assert ours == pytest.approx(d.actuator_length[k], abs=1e-12) and abs(ours) > 0.01
        np.testing.assert_allclose(np.asarray(casadi_function(qs, mom)(q)).ravel(), T.T @ moment[k], atol=1e-12)


def test_joint_actuators_keep_a_potential_whose_gradient_is_minus_their_force(tmp_path, rng):
    """The arm's joint actuators (no site, no actuatorgravcomp, no actuatorfrcrange): dQ/dq_{k+1} = -tau at
    q_{k+1} with the backward-Euler velocity, at small controls (no force clamp reached); the site and
    actuatorgravcomp models above offer the force form only."""
    import casadi as ca

    model = pbf.load_mjcf(write(tmp_path, "arm.xml", ARM))
    (acts,) = forces_of(model, ("mj_actuators",))
    assert pbf.ForceForm.POTENTIAL in acts.forms
    qn = ca.SX.sym("qn", model.nq)
    for h in (1e-3, 1e-2):
        qc, qd, u = rng.uniform(-0.5, 0.5, model.nq), rng.uniform(-1, 1, model.nv), rng.uniform(-0.3, 0.3, 4)
        q1 = qc + h * qd
        grad = ca.Function("g", [qn], [ca.gradient(acts.potential(model, qn, qc, qc, h, 0.0, u=u), qn)])
        tau = np.asarray(acts.generalized_force(model, q1, qd, 0.0, u=u)).ravel()
        assert rel_err(-np.asarray(grad(q1)).ravel(), tau) <= TOL and np.abs(tau).max() > 0.1


FLUID = """<mujoco><option gravity="0 0 -9.81" density="1.225" viscosity="1.8e-5" wind="0.7 -0.3 0.2"
    magnetic="0.1 0.2 -0.4"/>
  <worldbody>
    <body name="hull" pos="0 0 1"><freejoint/>
      <geom type="box" size="0.2 0.1 0.05" euler="10 20 30"/><geom type="sphere" size="0.05" pos="0.2 0.1 0" mass="0.3"/>
    </body>
    <body name="cube" pos="1 0 1" euler="0 30 0"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body name="upper" pos="0 1 0.5"><joint name="shoulder" axis="0 1 0" damping="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
      <body name="fore" pos="0.4 0 0"><joint name="elbow" axis="0 0.6 0.8" pos="0.02 0 0"/>
        <geom type="sphere" size="0.06" pos="0.15 0 0"/><geom type="capsule" fromto="0 0 0 0.3 0.05 0" size="0.02"/>
        <body name="tip" pos="0.3 0 0"><site name="s"/></body></body></body>
  </worldbody></mujoco>"""
"""A free box with a sphere (no repeated moments), a free cube (three equal ones: MuJoCo's principal axes
matter) and a two-link arm with a massless tip, in air with a wind; the magnetic field does nothing."""


def _fluid_against_mujoco(path, model, fluid, rng, states=8):
    """The largest relative error of ``fluid``'s generalised force against MuJoCo's ``qfrc_fluid`` at random
    states (velocities in [-10, 10])."""
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    worst = 0.0
    for _ in range(states):
        q, v = random_state(model, rng)
        v *= 5
        d.qpos[:], d.qvel[:] = to_mujoco(model, q, v)
        mujoco.mj_forward(m, d)
        T = pbf.io.mjcf.mujoco_velocity_map(model, q)
        f = np.asarray(fluid.generalized_force(model, q, v, 0.0)).ravel()
        assert np.linalg.norm(d.qfrc_fluid) > 0.1
        worst = max(worst, rel_err(f, T.T @ d.qfrc_fluid))
    return worst


@pytest.mark.parametrize("option", ['density="1.225" viscosity="1.8e-5"', 'density="0" viscosity="0.3"',
                                    'density="1000" viscosity="0"'], ids=["air", "viscous", "water"])
def test_fluid_forces_are_mujocos_inertia_box_model(tmp_path, rng, option):
    """fluid_drag against MuJoCo's qfrc_fluid alone, and in the total qfrc_passive (with the arm's damping), at
    random states (free bodies at random orientations, velocities in [-10, 10]): each term on its own (viscous
    only, quadratic only) and both, all with the wind."""
    path = write(tmp_path, "fluid.xml", FLUID.replace('density="1.225" viscosity="1.8e-5"', option))
    model = pbf.load_mjcf(path)
    assert [n for n, _ in model.default_forces] == ["joint_damping", "fluid_drag"]
    (fluid,) = forces_of(model, ("fluid_drag",))
    assert fluid.forms == {pbf.ForceForm.GENERALIZED_FORCE} and fluid.params()["links"] == ["hull", "cube", "upper",
                                                                                              "fore"]
    worst = _fluid_against_mujoco(path, model, fluid, rng)
    assert worst <= TOL, worst
    total = compare(path, rng, states=8)
    assert max(total.values()) <= TOL, total


@pytest.mark.parametrize("model_text", ["FLUID", "ELLIPSOIDS"])
def test_fluid_forces_dissipate_in_still_air_and_a_wind_can_push(tmp_path, rng, model_text):
    """Power tau . qd < 0 at random states in still air (the ellipsoids' added mass and lift do no work), > 0
    somewhere at rest in a wind; an rk4 rollout's energy (no gravity) only falls."""
    text = globals()[model_text]
    still = pbf.load_mjcf(write(tmp_path, "still.xml", text.replace('wind="0.7 -0.3 0.2"', "")))
    windy = pbf.load_mjcf(write(tmp_path, "windy.xml", text))
    (calm,) = forces_of(still, ("fluid_drag",))
    (wind,) = forces_of(windy, ("fluid_drag",))
    assert calm.dissipative and not calm.energy_input and wind.energy_input and not wind.dissipative
    powers = []
    for _ in range(20):
        q, v = random_state(still, rng)
        assert float(np.asarray(calm.generalized_force(still, q, v, 0.0)).ravel() @ v) < 0
        powers.append(float(np.asarray(wind.generalized_force(windy, q, 0.0 * v, 0.0)).ravel() @ v))
    assert max(powers) > 0                                # at rest in a wind: pushed, energy in
    q0, v0 = still.neutral(), np.r_[0.5, -0.2, 0.3, 2.0, -1.0, 3.0, 0.1, 0.2, 0.3, -4.0, 2.0, 1.0, 3.0, -2.0]
    tr = pbf.Simulator(still, "rk4", dt=1e-3, forces=[]).rollout(q0, v0, duration=0.2)
    assert tr.status.value == "ok" and np.all(np.diff(tr.energy) <= 1e-12) and tr.energy[-1] < tr.energy[0]


def test_a_cube_falls_at_its_terminal_velocity_in_water(tmp_path):
    """Quadratic drag alone: a cube of side s falling face first along z reaches rho s^2 v^2 / 2 = m g (within
    2e-7 after 2 s with rk4 at 2 ms, 2e-5 with pbad at 50 ms, measured)."""
    text = """<mujoco><option gravity="0 0 -9.81" density="1000"/><worldbody><body name="cube"><freejoint/>
      <geom type="box" size="0.05 0.05 0.05" density="3000"/></body></worldbody></mujoco>"""
    model = pbf.load_mjcf(write(tmp_path, "cube.xml", text))
    terminal = np.sqrt(2 * 3.0 * 9.81 / (1000 * 0.1 ** 2))
    for integrator, dt, tol in (("rk4", 2e-3, 1e-6), ("pbad", 0.05, 1e-4)):   # pbad takes it as a force
        tr = pbf.Simulator(model, integrator, dt=dt).rollout(model.neutral(), np.zeros(model.nv), duration=2.0)
        assert tr.status.value == "ok" and tr.qd[-1][2] == pytest.approx(-terminal, rel=tol), integrator


ELLIPSOIDS = FLUID.replace('<geom type="box" size="0.2 0.1 0.05" euler="10 20 30"/>', '<geom type="box" size="0.2 '
                           '0.1 0.05" euler="10 20 30" fluidshape="ellipsoid" fluidcoef="0.5 0.25 1.5 1.0 1.0"/><geom '
                           'type="capsule" size="0.05 0.1" pos="-0.2 0 0" euler="0 40 10" fluidshape="ellipsoid"/>'
                           ).replace('<geom type="capsule" fromto="0 0 0 0.3 0.05 0" size="0.02"/>', '<geom '
                           'type="cylinder" fromto="0 0 0 0.3 0.05 0" size="0.02" contype="0" conaffinity="0" '
                           'fluidshape="ellipsoid" fluidcoef="0.3 0.2 1.2 2.0 0.5"/>')
"""FLUID with MuJoCo's ellipsoid model on the hull (a box with its own coefficients, a capsule with the default
ones; its sphere, without fluidshape, feels nothing) and the forearm (a cylinder that does not collide; its
sphere feels nothing);
the cube and the upper arm keep the inertia box."""


@pytest.mark.parametrize("option", ['density="1.225" viscosity="1.8e-5"', 'density="0" viscosity="0.3"',
                                    'density="1000" viscosity="0"'], ids=["air", "viscous", "water"])
def test_the_ellipsoid_fluid_model_is_mujocos(tmp_path, rng, option):
    """Added mass, Magnus and Kutta lift, blunt / slender / angular drag per geom, against qfrc_fluid and in
    qfrc_passive, beside inertia boxes, at random states; at rest in still water no force and a finite
    Jacobian."""
    path = write(tmp_path, "ellipsoids.xml", ELLIPSOIDS.replace('density="1.225" viscosity="1.8e-5"', option))
    model = pbf.load_mjcf(path)
    spec = dict(model.default_forces)["fluid_drag"]
    assert {k: len(v) for k, v in spec["ellipsoids"].items()} == {"hull": 2, "fore": 1}
    (fluid,) = forces_of(model, ("fluid_drag",))
    worst = _fluid_against_mujoco(path, model, fluid, rng)
    assert worst <= TOL, worst
    total = compare(path, rng, states=8)
    assert max(total.values()) <= TOL, total
    import casadi as ca

    still = force_model("fluid_drag", **{**spec, "wind": [0.0, 0.0, 0.0]})
    qs, vs = ca.SX.sym("q", model.nq), ca.SX.sym("v", model.nv)
    tau = still.generalized_force(model, qs, vs, 0.0)
    at_rest = ca.Function("f", [qs, vs], [tau, ca.jacobian(tau, vs)])(model.neutral(), np.zeros(model.nv))
    assert not np.asarray(at_rest[0]).any() and np.all(np.isfinite(np.asarray(at_rest[1])))


def test_fluid_forces_go_with_mujocos_passive_forces_flags(tmp_path, rng):
    """MuJoCo skips every passive force, fluid forces included, only when springs and dampers are both off."""
    path = write(tmp_path, "fluid.xml", FLUID)
    assert "fluid_drag" in dict(pbf.load_mjcf(path, disable=("damper",)).default_forces)
    flagged = write(tmp_path, "off.xml", FLUID.replace('<worldbody>', '<option><flag spring="disable" '
                                                       'damper="disable"/></option><worldbody>', 1))
    assert dict(pbf.load_mjcf(flagged).default_forces) == {}
    for p in (path, flagged):
        worst = compare(p, rng)
        assert max(worst.values()) <= TOL, (p.name, worst)
TENDON_ARM = """<mujoco model="tendon_arm">
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <site name="anchor" pos="-0.05 0.02 0.62"/>
    <body name="upper" pos="0 0 0.5">
      <joint name="shoulder" axis="0 1 0" damping="0.3"/>
      <joint name="twist" axis="1 0 0" pos="0 0 0.01"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/>
      <site name="u0" pos="0.05 0.01 0.05"/>
      <site name="u1" pos="0.3 -0.01 0.06"/>
      <site name="u2" pos="0.3 0.02 -0.05"/>
      <body name="fore" pos="0.4 0 0">
        <joint name="elbow" axis="0 1 0"/>
        <geom name="pulleywheel" type="cylinder" fromto="0 -0.03 0 0 0.03 0" size="0.04" contype="0" conaffinity="0"/>
        <geom name="ball" type="sphere" pos="0 0.0 0" size="0.035" contype="0" conaffinity="0"/>
        <site name="side_up" pos="0 0 0.1"/>
        <site name="side_down" pos="0.01 0.003 -0.1"/>
        <site name="rim" pos="0 0.01 -0.04000000000001"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.025"/>
        <site name="f0" pos="0.2 0.01 0.05"/>
        <site name="f1" pos="0.25 -0.02 -0.04"/>
        <body name="hand" pos="0.3 0 0">
          <joint name="wrist" type="slide" axis="1 0 0"/>
          <geom type="sphere" size="0.03"/>
          <site name="h0" pos="0.02 0 0.01"/>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <spatial name="sites" stiffness="40" springlength="0.5 0.7" damping="0.8">
      <site site="anchor"/><site site="u0"/><site site="f0"/><site site="h0"/>
    </spatial>
    <spatial name="pulley" damping="0.5" stiffness="12" range="0.45 0.7" limited="true">
      <site site="anchor"/><site site="u1"/>
      <pulley divisor="2"/>
      <site site="u1"/><site site="f0"/>
      <pulley divisor="3"/>
      <site site="u1"/><site site="h0"/>
    </spatial>
    <spatial name="cyl" stiffness="30" damping="0.4" frictionloss="0.4">
      <site site="u1"/><geom geom="pulleywheel"/><site site="f0"/>
    </spatial>
    <spatial name="cyl_side" stiffness="25" damping="0.2">
      <site site="u2"/><geom geom="pulleywheel" sidesite="side_down"/><site site="f1"/>
    </spatial>
    <spatial name="sphere" stiffness="20" damping="0.3">
      <site site="u1"/><geom geom="ball"/><site site="f0"/>
    </spatial>
    <spatial name="sphere_side" stiffness="15" damping="0.6">
      <site site="u1"/><geom geom="ball" sidesite="side_up"/><site site="f1"/><site site="h0"/>
    </spatial>
    <spatial name="twice" damping="0.1">
      <site site="u1"/><geom geom="pulleywheel"/><site site="f0"/><geom geom="ball"/><site site="f0"/><site site="h0"/>
    </spatial>
    <fixed name="fixed" stiffness="5" springlength="0.1" damping="0.7">
      <joint joint="shoulder" coef="1"/><joint joint="elbow" coef="-0.5"/>
    </fixed>
  </tendon>
  <actuator>
    <position name="servo" tendon="cyl" kp="10000" kv="3"/>
    <motor name="pull" tendon="sphere_side" gear="2"/>
  </actuator>
</mujoco>
"""

TENDON_FREE = """<mujoco model="tendon_free">
  <worldbody>
    <site name="anchor" pos="0 0 1"/>
    <body name="hull" pos="0 0 0.5">
      <freejoint name="float"/>
      <geom type="box" size="0.1 0.05 0.05"/>
      <geom name="drum" type="cylinder" size="0.04 0.03" pos="0.1 0 0" euler="90 0 0" contype="0" conaffinity="0"/>
      <site name="drum_side" pos="0.1 0 -0.2"/>
      <site name="h0" pos="-0.1 0.02 0.06"/>
      <body name="arm" pos="0.2 0 0">
        <joint name="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
        <site name="a0" pos="0.15 0.01 -0.03"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <spatial name="sling" stiffness="50" damping="2" springlength="0.6">
      <site site="anchor"/><site site="h0"/><geom geom="drum" sidesite="drum_side"/><site site="a0"/>
    </spatial>
  </tendon>
  <actuator><position name="reel" tendon="sling" kp="300" kv="5"/></actuator>
</mujoco>
"""


def _tendons(model) -> dict:
    return {t["name"]: t for n, p in model.default_forces if n in ("tendon_passive", "tendon_limits")
            for t in p["tendons"]}


@pytest.mark.parametrize("text", [TENDON_ARM, TENDON_FREE], ids=["arm", "free"])
def test_spatial_tendon_lengths_and_moments_are_mujocos(tmp_path, rng, text):
    """Sites, pulleys (divisors 2 and 3), a sphere and a cylinder wrap with and without a sidesite, a geom
    between one site and itself (as in Menagerie's aero hand: no NaN in the moment), a fixed tendon; on a free hull too: ten_length and ten_J (mapped by T) to 1e-9 at 200 random states, each wrapping
    tendon seen both wrapped and straight. The moment is ca.gradient of the length."""
    import casadi as ca

    from pbframework.tendons import tendon_moment

    path = write(tmp_path, "tendons.xml", text)
    model = pbf.load_mjcf(path)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    specs = _tendons(model)
    assert sorted(specs) == sorted(m.tendon(k).name for k in range(m.ntendon))
    qs = casadi_sym(model)
    fns = {k: ca.Function("t", [qs], list(tendon_moment(model, t, qs))) for k, t in specs.items()}
    seen: dict[str, set] = {}
    worst = 0.0
    for _ in range(200):
        q, v = random_state(model, rng)
        J = _tendon_moments_at(m, d, model, q, v)
        for k in range(m.ntendon):
            length, moment = fns[m.tendon(k).name](q)
            worst = max(worst, abs(float(length) - d.ten_length[k]) / max(abs(d.ten_length[k]), 1.0),
                        rel_err(np.asarray(moment).ravel(), J[k]))
            objs = d.wrap_obj.ravel()[d.ten_wrapadr[k]:d.ten_wrapadr[k] + d.ten_wrapnum[k]]
            seen.setdefault(m.tendon(k).name, set()).add(bool((objs >= 0).any()))
    assert worst <= TOL, worst
    for name in ("cyl", "cyl_side", "sphere", "sphere_side", "sling"):
        assert name not in seen or seen[name] == {True, False}, name


def _tendon_moments_at(m, d, model, q, v):
    """MuJoCo's data at our state ``(q, v)`` (``mj_forward``), and its tendon moments ``ten_J`` in our velocity
    coordinates (ntendon x nv)."""
    d.qpos[:], d.qvel[:] = to_mujoco(model, q, v)
    mujoco.mj_forward(m, d)
    J = np.zeros((m.ntendon, m.nv))
    mujoco.mju_sparse2dense(J, d.ten_J, m.ten_J_rownnz, m.ten_J_rowadr, m.ten_J_colind)
    return J @ pbf.io.mjcf.mujoco_velocity_map(model, q)


@pytest.mark.parametrize("text", [TENDON_ARM, TENDON_FREE], ids=["arm", "free"])
def test_tendon_springs_dampers_and_tendon_servos_are_mujocos_forces(tmp_path, rng, text):
    """Tendon stiffness about springlength (a deadband [0.5, 0.7] on one), damping -b V along dL/dq, fixed and
    spatial; position servos (kp 10000) and a motor on spatial tendons: qfrc_passive and qfrc_actuator to 1e-9."""
    path = write(tmp_path, "tendons.xml", text)
    model = pbf.load_mjcf(path)
    assert "tendon_passive" in dict(model.default_forces) and "mj_actuators" in dict(model.default_forces)
    worst = compare(path, rng, states=30)
    assert max(worst.values()) <= TOL, worst


def test_a_spatial_tendon_limit_pushes_along_its_moment_and_is_the_gradient_of_its_energy(tmp_path, rng):
    """tendon_limits on the pulley tendon: a vanishing force inside [0.45, 0.7] (below 1e-6: the smooth onset),
    outside it along MuJoCo's ten_J (the
    direction of MuJoCo's limit constraint row), and at rest minus the gradient of its energy (central
    differences)."""
    path = write(tmp_path, "tendons.xml", TENDON_ARM)
    model = pbf.load_mjcf(path)
    (limits,) = forces_of(model, ("tendon_limits",))
    assert [t["name"] for t in limits.tendons] == ["pulley"]
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    k = m.tendon("pulley").id
    outside = 0
    for _ in range(40):
        q, v = random_state(model, rng)
        j = _tendon_moments_at(m, d, model, q, v)[k]
        f = np.asarray(limits.generalized_force(model, q, np.zeros(model.nv), 0.0)).ravel()
        if 0.45 + 0.02 < d.ten_length[k] < 0.7 - 0.02:
            assert np.abs(f).max() < 1e-6
            continue
        outside += 1
        assert np.linalg.norm(f - (f @ j) / (j @ j) * j) <= 1e-9 * max(np.linalg.norm(f), 1.0)
        h = 1e-6
        grad = np.array([(float(limits.energy(model, q + h * e)) - float(limits.energy(model, q - h * e))) / (2 * h)
                         for e in np.eye(model.nq)])
        np.testing.assert_allclose(f, -grad, rtol=1e-5, atol=1e-5 * max(np.abs(f).max(), 1.0))
    assert outside >= 3


@pytest.mark.parametrize("xml,fragments", [
    ('<geom geom="ball" sidesite="inner"/>', ["<tendon name='t'>", "sidesite", "inside the geom"]),
    ('<geom geom="ball" sidesite="elsewhere"/>', ["<tendon name='t'>", "another body than the geom"]),
], ids=["inside", "other-body"])
def test_unsupported_tendon_wraps_are_refused_naming_the_tendon(tmp_path, xml, fragments):
    text = TENDON_ARM.replace('<site name="side_up" pos="0 0 0.1"/>',
                              '<site name="side_up" pos="0 0 0.1"/><site name="inner" pos="0.01 0 0"/>').replace(
        '<site name="u0" pos="0.05 0.01 0.05"/>', '<site name="u0" pos="0.05 0.01 0.05"/><site name="elsewhere"/>')
    text = text.replace("<tendon>", f'<tendon><spatial name="t"><site site="u1"/>{xml}<site site="f0"/></spatial>')
    with pytest.raises(ModelError) as exc:
        pbf.load_mjcf(write(tmp_path, "bad.xml", text))
    for frag in fragments:
        assert frag in str(exc.value)


def test_tendon_frictionloss_is_a_smooth_dry_friction_along_the_moment(tmp_path, rng):
    """tendon_friction: -f tanh(V / v_s) J with MuJoCo's ten_velocity and ten_J (to 1e-9); off with MuJoCo's
    frictionloss flag (MuJoCo's own friction is a constraint: not compared)."""
    path = write(tmp_path, "tendons.xml", TENDON_ARM)
    model = pbf.load_mjcf(path)
    (friction,) = forces_of(model, ("tendon_friction",))
    assert [(t["name"], t["friction"]) for t in friction.tendons] == [("cyl", 0.4)]
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    k = m.tendon("cyl").id
    for _ in range(20):
        q, v = random_state(model, rng)
        J = _tendon_moments_at(m, d, model, q, v)
        ref = -0.4 * np.tanh(d.ten_velocity[k] / 1e-3) * J[k]
        assert rel_err(np.asarray(friction.generalized_force(model, q, v, 0.0)).ravel(), ref) <= TOL
    assert "tendon_friction" not in dict(pbf.load_mjcf(path, disable=("frictionloss",)).default_forces)


def test_spatial_tendon_actuators_keep_a_potential_whose_gradient_is_minus_their_force(tmp_path, rng):
    """A position servo and a motor on spatial tendons: dQ/dq_{k+1} = -gear J(q_{k+1}) F with F at the length
    l(q_{k+1}) and the backward-Euler rate (l(q_{k+1}) - l(q_k)) / h (for a nonlinear l not J qd)."""
    import casadi as ca

    from pbframework.tendons import tendon_moment

    model = pbf.load_mjcf(write(tmp_path, "tendons.xml", TENDON_ARM))
    (acts,) = forces_of(model, ("mj_actuators",))
    assert pbf.ForceForm.POTENTIAL in acts.forms and all("path" in a for a in acts.actuators)
    qn = ca.SX.sym("qn", model.nq)
    lengths = [ca.Function("l", [qn], list(tendon_moment(model, a, qn))) for a in acts.actuators]
    for h in (1e-3, 1e-2):
        qc, qd, u = random_state(model, rng)[0], rng.uniform(-1, 1, model.nv), rng.uniform(-0.3, 0.3, 2)
        q1 = qc + h * qd
        grad = ca.Function("g", [qn], [ca.gradient(acts.potential(model, qn, qc, qc, h, 0.0, u=u), qn)])
        tau = np.zeros(model.nv)
        for a, fn, c in zip(acts.actuators, lengths, u):
            l1, J = (np.asarray(x, float).ravel() for x in fn(q1))
            L, V = a["gear"] * l1[0], a["gear"] * (l1[0] - float(fn(qc)[0])) / h
            g, b = a["gain"], a["bias"]
            tau += a["gear"] * J * ((g[0] + g[1] * L + g[2] * V) * c + b[0] + b[1] * L + b[2] * V)
        assert rel_err(-np.asarray(grad(q1)).ravel(), tau) <= TOL and np.abs(tau).max() > 0.1


def test_a_wrap_on_one_link_is_a_constant_even_from_a_site_on_the_geoms_surface(tmp_path, rng):
    """Two sites and a cylinder on one link (as on Menagerie's aero hand fingers, where a site lies on the
    cylinder's surface and the wrap's own gradient is singular): the segment is a constant, its moment zero and
    finite. (Not compared with MuJoCo: from a site on the surface its wrap / no-wrap test is decided by
    rounding.)"""
    import casadi as ca

    from pbframework.tendons import tendon_moment

    text = TENDON_ARM.replace('<site name="side_down" pos="0.01 0.003 -0.1"/>',
                              '<site name="side_down" pos="0.01 0.003 -0.1"/><site name="onrim" pos="0 0.01 -0.04"/>')
    text = text.replace("<tendon>", '<tendon><spatial name="rim" damping="0.2"><site site="onrim"/>'
                                    '<geom geom="pulleywheel" sidesite="side_down"/><site site="f0"/></spatial>')
    model = pbf.load_mjcf(write(tmp_path, "rim.xml", text))
    (rim,) = [t for t in _tendons(model).values() if t["name"] == "rim"]
    qs = casadi_sym(model)
    fn = ca.Function("t", [qs], list(tendon_moment(model, rim, qs)))
    lengths = []
    for _ in range(10):
        length, moment = (np.asarray(x, float).ravel() for x in fn(random_state(model, rng)[0]))
        assert np.all(moment == 0.0)
        lengths.append(length[0])
    assert np.ptp(lengths) == 0.0 and np.isfinite(lengths[0])
