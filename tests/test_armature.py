"""Joint armature (reflected rotor inertia) on the mass matrix's diagonal (issue 25, item 2 in part)."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest

import pbframework as pbf
from pbframework.model import ModelError
from pbframework.step import StepError

MJCF = """<mujoco><worldbody>
  <body name="a"><joint name="j0" type="hinge" axis="0 1 0" armature="0.3"/>
    <inertial pos="0.5 0 0" mass="1" diaginertia="0.01 0.1 0.1"/>
    <body name="b" pos="1 0 0"><joint name="j1" type="hinge" axis="0 0 1" armature="0.7"/>
      <inertial pos="0.5 0 0" mass="2" diaginertia="0.02 0.2 0.2"/>
      <body name="c" pos="1 0 0"><joint name="j2" type="slide" axis="1 0 0" armature="0.2"/>
        <inertial pos="0.2 0 0" mass="0.5" diaginertia="0.01 0.01 0.01"/></body></body></body>
</worldbody></mujoco>"""


def _armed_chain():
    m = pbf.models.chain(3, "revolute")
    joints = [dataclasses.replace(j, armature=0.1 * (k + 1)) for k, j in enumerate(m.joints)]
    return pbf.ArticulatedBody(list(m.links), joints, name="armed_chain")


def test_dynamics_with_armature_equal_pinocchio(robots_dir):
    pin = pytest.importorskip("pinocchio", reason="needs pin (Pinocchio) as the dynamics oracle")
    from pbframework.io import load_urdf

    path = robots_dir / "panda_description" / "urdf" / "panda.urdf"
    m = load_urdf(path, limits=False)
    arm = np.linspace(0.1, 0.9, 9)
    it = iter(arm)
    joints = [dataclasses.replace(j, armature=float(next(it))) if j.type.value != "fixed" else j for j in m.joints]
    ma = pbf.ArticulatedBody(list(m.links), joints, name="panda_armature")
    pm = pin.buildModelFromUrdf(str(path))
    pm.armature[:] = arm
    d = pm.createData()
    rng = np.random.default_rng(25)
    for _ in range(3):
        q, v, a = rng.uniform(-1, 1, 9), rng.normal(size=9), rng.normal(size=9)
        pin.crba(pm, d, q)
        Mp = np.triu(d.M) + np.triu(d.M, 1).T
        assert np.abs(np.asarray(pbf.dynamics.crba(ma)(q)) - Mp).max() < 1e-12
        tau = np.asarray(pbf.dynamics.rnea(ma)(q, v, a)).ravel()
        assert np.abs(tau - pin.rnea(pm, d, q, v, a)).max() < 1e-11
        assert np.abs(np.asarray(pbf.dynamics.aba(ma)(q, v, tau)).ravel() - a).max() < 1e-10


@pytest.mark.skipif(importlib.util.find_spec("mujoco") is None, reason="needs mujoco")
def test_mjcf_armature_gives_mujocos_mass_matrix(tmp_path):
    import mujoco

    path = tmp_path / "armed.xml"
    path.write_text(MJCF)
    model = pbf.load_mjcf(path)
    assert [j.armature for j in model.joints] == [0.3, 0.7, 0.2]
    mm = mujoco.MjModel.from_xml_string(MJCF)
    d = mujoco.MjData(mm)
    rng = np.random.default_rng(3)
    for _ in range(3):
        d.qpos[:] = rng.uniform(-1, 1, 3)
        mujoco.mj_forward(mm, d)
        M = np.zeros((3, 3))
        mujoco.mj_fullM(mm, d, M)
        assert np.abs(np.asarray(pbf.dynamics.crba(model)(d.qpos.copy())) - M).max() < 1e-12


def test_newton_euler_conserves_the_energy_including_the_rotors():
    m = _armed_chain()
    sim = pbf.Simulator(m, "rk4", dt=0.001)
    tr = sim.rollout(np.array([0.3, 0.2, -0.4]), np.zeros(3), duration=1.0)
    assert tr.status.value == "ok" and np.ptp(tr.energy) < 1e-8 * np.abs(tr.energy).max() + 1e-9


@pytest.mark.parametrize("order, rate", [(2, 1.0), (3, 2.0)])
def test_pbad_includes_the_armature_at_its_order(order, rate):
    """pbad's kinetic term gains 1/2 a qd^2 per coordinate (energy form at order 2, residual at order 3):
    against an rk4 reference at 0.1 ms the error falls at the scheme's order (1 and 2), and it is far
    smaller than the error of the same step that leaves the armature out."""
    m = _armed_chain()
    bare = pbf.ArticulatedBody(list(m.links), [dataclasses.replace(j, armature=0.0) for j in m.joints])
    q0, v0 = np.array([0.6, -0.3, 0.4]), np.array([0.5, 0.0, -1.0])
    ref = pbf.Simulator(m, "rk4", dt=1e-4).rollout(q0, v0, duration=0.4).q[-1]
    err = {}
    for dt in (0.004, 0.002):
        tr = pbf.Simulator(m, "pbad", order=order, dt=dt).rollout(q0, v0, duration=0.4)
        assert tr.status.value == "ok"
        err[dt] = np.abs(tr.q[-1] - ref).max()
    assert np.log2(err[0.004] / err[0.002]) == pytest.approx(rate, abs=0.3)
    without = pbf.Simulator(bare, "pbad", order=order, dt=0.002).rollout(q0, v0, duration=0.4).q[-1]
    assert np.abs(without - ref).max() > 5 * err[0.002]


FREE_ARMED = """<mujoco><option gravity="0 0 0"/><worldbody>
  <body name="base" pos="0 0 1"><freejoint/><geom type="box" size="0.2 0.1 0.05"/>
    <body name="arm" pos="0.2 0 0"><joint name="h" axis="0 1 0" armature="0.2"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/>
      <body name="tip" pos="0.4 0 0"><joint name="s" type="slide" axis="1 0 0" armature="0.5"/>
        <geom type="sphere" size="0.05"/></body></body></body></worldbody></mujoco>"""


@pytest.mark.parametrize("order, rate", [(2, 1.0), (3, 2.0)])
def test_pbad_on_the_group_includes_the_armature(tmp_path, order, rate):
    """A free base carrying an armatured hinge and slide (quaternion model, PBAD in the chart at q_k)."""
    path = tmp_path / "free.xml"
    path.write_text(FREE_ARMED)
    m = pbf.load_mjcf(path)
    bare = pbf.ArticulatedBody(list(m.links), [dataclasses.replace(j, armature=0.0) for j in m.joints])
    q0 = m.neutral()
    q0[m.joint_q_index["h"]] = 0.4
    v0 = np.array([0.1, 0.0, 0.2, 0.3, -0.5, 0.2, 2.0, -0.4])
    ref = pbf.Simulator(m, "rk4", dt=1e-4, forces=()).rollout(q0, v0, duration=0.3).q[-1]
    err = {}
    for dt in (0.004, 0.002):
        tr = pbf.Simulator(m, "pbad", order=order, dt=dt, forces=()).rollout(q0, v0, duration=0.3)
        assert tr.status.value == "ok"
        err[dt] = np.abs(tr.q[-1] - ref).max()
    assert np.log2(err[0.004] / err[0.002]) == pytest.approx(rate, abs=0.35)
    without = pbf.Simulator(bare, "pbad", order=order, dt=0.002, forces=()).rollout(q0, v0, duration=0.3).q[-1]
    assert np.abs(without - ref).max() > 5 * err[0.002]


def test_pbad_order_2_with_armature_never_gains_energy():
    tr = pbf.Simulator(_armed_chain(), "pbad", dt=0.05).rollout(np.array([1.0, 0.5, -0.5]), np.zeros(3),
                                                                 duration=3.0)
    assert tr.status.value == "ok" and np.all(np.diff(tr.energy[1:]) <= 1e-9 * np.abs(tr.energy).max())


def test_pbfd_builds_on_pbads_energy_with_the_armature():
    """Without step forces PBFD's gradient-level step (Eq. 13) has PBAD order 2's solution."""
    m = _armed_chain()
    q0, v0 = np.array([0.6, -0.3, 0.4]), np.array([0.5, 0.0, -1.0])
    a = pbf.Simulator(m, "pbfd", dt=0.01).rollout(q0, v0, duration=0.3)
    b = pbf.Simulator(m, "pbad", order=2, dt=0.01).rollout(q0, v0, duration=0.3)
    assert a.status.value == b.status.value == "ok" and np.abs(a.q - b.q).max() < 1e-7


def test_what_does_not_include_armature_refuses_it():
    m = _armed_chain()
    with pytest.raises(StepError, match="does not include joint armature"):
        pbf.Simulator(m, "pbd_nmdp", dt=0.01, forces=["gravity"])
    with pytest.raises(StepError, match="'abia' does not include joint armature"):
        pbf.Simulator(m, "rk4", dt=0.01, fd="abia")
    with pytest.raises(ModelError, match="does not include joint armature"):
        pbf.dynamics.forward_dynamics(m, "cfa")
    with pytest.raises(ModelError, match="armature must be a finite number >= 0"):
        pbf.Joint("j", "revolute", pbf.WORLD, "l", armature=-1.0)
    with pytest.raises(ModelError, match="hinges and slides only"):
        pbf.Joint("j", "free", pbf.WORLD, "l", armature=0.1)
