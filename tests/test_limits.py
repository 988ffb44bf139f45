"""Joint limits (pbframework.limits and the joint_limits force): what a loaded model carries, the force's
shape, rollouts held inside the limits on every backend, the report, and the panda of issue 16."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework.cli import main
from pbframework.limits import (PRISMATIC_TOLERANCE, REVOLUTE_TOLERANCE, clip_to_limits, limit_report,
                                limited_coordinates)
from pbframework.plugins.forces.joint_limits import FREQUENCY, JointLimits, effective_inertia

PENDULUM = """<robot name="pendulum">
  <link name="base"/>
  <link name="rod"><inertial><origin xyz="0.5 0 0"/><mass value="1"/>
    <inertia ixx="0.00125" iyy="0.084" izz="0.084" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="rod"/><axis xyz="0 1 0"/>
    <limit lower="-0.5" upper="0.5" effort="1" velocity="1"/></joint>
</robot>"""
"""A 1 m rod on a hinge about y, held horizontal at q = 0: gravity swings it to +pi/2 without limits."""


@pytest.fixture
def pendulum(tmp_path):
    path = tmp_path / "pendulum.urdf"
    path.write_text(PENDULUM)
    return path


def test_a_limited_urdf_model_carries_the_joint_limits_force(pendulum):
    model = pbf.load_urdf(pendulum)
    assert model.default_forces == (("joint_limits", {}),)
    assert [(c.name, c.lower, c.upper, c.prismatic) for c in limited_coordinates(model)] == [
        ("hinge", -0.5, 0.5, False)]
    assert pbf.load_urdf(pendulum, limits=False).default_forces == ()
    assert pbf.models.chain(3).default_forces == ()


def test_the_simulator_adds_the_default_unless_one_of_that_name_is_given(pendulum):
    model = pbf.load_urdf(pendulum)
    forces = pbf.Simulator(model, "rk4", dt=0.01, forces=["gravity"]).forces
    assert [f.name for f in forces] == ["gravity", "joint_limits"]
    mine = pbf.Simulator(model, "rk4", dt=0.01, forces=["gravity", ("joint_limits", {"stiffness": 50.0})]).forces
    assert [f.name for f in mine] == ["gravity", "joint_limits"] and mine[1].stiffness.tolist() == [50.0]
    off = pbf.load_urdf(pendulum, limits=False)
    assert [f.name for f in pbf.Simulator(off, "rk4", dt=0.01, forces=["gravity"]).forces] == ["gravity"]


def test_mjcf_range_gives_the_default_force(tmp_path):
    xml = tmp_path / "slide.xml"
    xml.write_text("""<mujoco model="slide"><worldbody><body name="cart">
      <joint name="rail" type="slide" axis="1 0 0" range="-0.2 0.3"/>
      <inertial pos="0 0 0" mass="2" diaginertia="0.01 0.01 0.01"/></body></worldbody></mujoco>""")
    model = pbf.load_mjcf(xml)
    assert model.default_forces == (("joint_limits", {}),)
    assert [(c.lower, c.upper, c.prismatic) for c in limited_coordinates(model)] == [(-0.2, 0.3, True)]
    assert pbf.load_mjcf(xml, limits=False).default_forces == ()


def test_spring_is_one_sided_and_smooth(pendulum):
    model = pbf.load_urdf(pendulum)
    f = JointLimits(stiffness=100.0, width=1e-4)
    V = ca.Function("V", [q := ca.SX.sym("q", 1)], [f.energy(model, q)])
    assert float(V(0.0)) < 1e-12 and float(V(0.49)) < 1e-10            # inside: nothing to speak of
    assert float(V(0.6)) == pytest.approx(0.5 * 100.0 * 0.1 ** 2, rel=1e-6)   # k/2 d^2 past the upper
    assert float(V(-0.7)) == pytest.approx(0.5 * 100.0 * 0.2 ** 2, rel=1e-6)  # and past the lower
    H = ca.Function("H", [q], [ca.hessian(f.energy(model, q), q)[0]])
    assert all(np.isfinite(float(H(x))) for x in (0.5, 0.5 + 1e-9, -0.5))    # no kink at the limit


def test_default_gains_scale_with_the_effective_inertia(pendulum):
    model = pbf.load_urdf(pendulum)
    _, k, b = JointLimits().gains(model)
    m = effective_inertia(model)
    assert m[0] == pytest.approx(0.084 + 1.0 * 0.5 ** 2, rel=1e-12)     # rod about its end
    assert k[0] == pytest.approx(FREQUENCY ** 2 * m[0]) and b[0] == pytest.approx(2 * FREQUENCY * m[0])


def test_joint_limits_errors_name_the_model_and_coordinates(pendulum):
    with pytest.raises(ValueError, match="joint_limits: model 'chain3' has no joint with position limits"):
        pbf.Simulator(pbf.models.chain(3), "rk4", dt=0.01, forces=["joint_limits"])
    links = [pbf.Link("a", 1.0), pbf.Link("b", 1.0)]
    joints = [pbf.Joint("free_hinge", "revolute", pbf.WORLD, "a"),
              pbf.Joint("stop", "revolute", "a", "b", lower=-1, upper=1)]
    model = pbf.ArticulatedBody(links, joints, name="two")
    with pytest.raises(ValueError, match=r"coordinates free_hinge of model 'two' have no position limits "
                                         r"\(limited: stop\)"):
        pbf.Simulator(model, "rk4", dt=0.01, forces=[("joint_limits", {"dofs": ["free_hinge", "stop"]})])


@pytest.mark.parametrize("integrator, order, dt, backend", [
    ("pbad", 2, 0.01, "casadi"), ("pbad", 2, 0.01, "c"), ("pbad", 3, 0.01, "casadi"), ("rk4", None, 0.001, "casadi"),
])
def test_a_falling_pendulum_stops_at_its_limit(pendulum, integrator, order, dt, backend):
    model = pbf.load_urdf(pendulum)
    sim = pbf.Simulator(model, integrator, order=order, dt=dt, forces=["gravity"], backend=backend)
    traj = sim.rollout(np.zeros(1), None, duration=1.0)
    assert traj.ok
    report = limit_report(model, traj.q, traj.t)
    assert report.ok and 0.0 < report.excess[0] < REVOLUTE_TOLERANCE
    assert traj.q[-1, 0] == pytest.approx(0.5, abs=REVOLUTE_TOLERANCE)      # resting on the upper limit
    free = pbf.Simulator(pbf.load_urdf(pendulum, limits=False), integrator, order=order, dt=dt, forces=["gravity"],
                         backend=backend).rollout(np.zeros(1), None, duration=1.0)
    assert not limit_report(model, free.q, free.t).ok                     # the limit is what held it


def test_report_measures_the_excess_and_says_it_in_one_line(pendulum):
    model = pbf.load_urdf(pendulum)
    t = np.array([0.0, 0.5, 1.0])
    inside = limit_report(model, np.array([[0.0], [0.505], [0.5]]), t)
    assert inside.ok and inside.excess[0] == pytest.approx(0.005) and inside.when[0] == 0.5
    assert str(inside) == ("Joint limits: all 1 limited joints within limits + 0.01 rad (worst excess 0.005 rad at "
                           "hinge, t=0.5 s).")
    outside = limit_report(model, np.array([[0.0], [-0.6], [0.5]]), t)
    assert not outside.ok and outside.outside[0].name == "hinge"
    assert str(outside) == "Joint limits: 1 of 1 limited joints beyond limits + 0.01 rad: 0.1 rad at hinge, t=0.5 s."
    assert limit_report(pbf.models.chain(2), np.zeros((3, 4)), t) is None
    assert PRISMATIC_TOLERANCE == 1e-3


def test_clip_to_limits_moves_only_what_is_outside(pendulum):
    model = pbf.load_urdf(pendulum)
    assert clip_to_limits(model, [0.7]).tolist() == [0.5]
    assert clip_to_limits(model, [-0.2]).tolist() == [-0.2]


def test_panda_order_2_stays_within_its_limits_and_says_so(robots_dir, capsys):
    """Issue 16: without limits the fingers swing to +-53.8 m; with the default joint_limits every joint stays
    within its URDF limits + 0.01 rad / 1 mm, and pbf simulate prints it."""
    panda = robots_dir / "panda_description/urdf/panda.urdf"
    rc = main(["simulate", "--model", str(panda), "--integrator", "pbad", "--order", "2", "--dt", "0.01",
               "--duration", "2", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0 and "Status: ok." in out
    line = next(ln for ln in out.splitlines() if ln.startswith("Joint limits:"))
    assert line.startswith("Joint limits: all 9 limited joints within limits + 0.01 rad / 1 mm (worst excess ")
    # the figures README quotes for this command, within 10%
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    quoted = re.search(r"worst excess ([\d.]+) rad at\s+#?\s*(\w+), t=[\d.]+ s; ([\d.]+) mm", readme)
    ran = re.search(r"worst excess ([\d.]+) rad at\s+(\w+), t=[\d.]+ s; ([\d.]+) mm", line)
    assert quoted and ran, line
    assert float(ran.group(1)) == pytest.approx(float(quoted.group(1)), rel=0.1)
    assert float(ran.group(3)) == pytest.approx(float(quoted.group(3)), rel=0.1)
    assert ran.group(2) == quoted.group(2)
