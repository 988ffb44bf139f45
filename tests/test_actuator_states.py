"""Force models with states of their own (issue 25): MuJoCo's actuator activations (``dyntype`` integrator,
filter, filterexact, ``actearly``, ``actrange``) and the ``mujoco.pid`` plug-in actuator (an integral and a
slew-limited set-point), carried in the step state by :mod:`pbframework.force_states`; checked against MuJoCo
itself on small MJCF files of our own."""

from __future__ import annotations

import sys
from pathlib import Path

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework.errors import StepError
from pbframework.forces import ForceForm, ForceModel, force_model
from pbframework.io import actuator_force
from pbframework.model import ModelError

mujoco = pytest.importorskip("mujoco")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _mujoco_check import compare  # noqa: E402

TOL = 1e-9

ARM = """<mujoco model="stateful">
  <option><flag constraint="disable"/></option>
  <extension>
    <plugin plugin="mujoco.pid">
      <instance name="pid"><config key="kp" value="8"/><config key="ki" value="5"/><config key="kd" value="0.4"/>
        <config key="imax" value="2"/><config key="slewmax" value="2"/></instance>
    </plugin>
  </extension>
  <worldbody>
    <body pos="0 0 1"><joint name="a" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body pos="0.3 0 0"><joint name="b" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body pos="0.3 0 0"><joint name="c" type="slide" axis="1 0 0"/><geom type="sphere" size="0.05"/>
          <body pos="0.1 0 0"><joint name="d" axis="0 0 1"/><geom type="box" size="0.05 0.06 0.06" pos="0.05 0 0"/>
            <body pos="0.1 0 0"><joint name="e" axis="1 0 0"/><geom type="box" size="0.05 0.06 0.06" pos="0.05 0 0"/>
              <body pos="0.1 0 0"><joint name="f" axis="0 1 0"/><geom type="box" size="0.05 0.06 0.06" pos="0.05 0 0"/>
              </body></body></body></body></body></body>
  </worldbody>
  <actuator>
    <general name="integ" joint="a" dyntype="integrator" gainprm="4" biastype="affine" biasprm="0 -4 -0.5"
             actlimited="true" actrange="-1 1"/>
    <general name="filt" joint="b" dyntype="filter" dynprm="0.05" gainprm="3" biastype="affine" biasprm="0 -3 -0.3"
             ctrlrange="-1 1"/>
    <general name="exact" joint="c" dyntype="filterexact" dynprm="0.02" gainprm="20" biastype="affine"
             biasprm="0 -20 -2" actearly="true"/>
    <plugin name="pid" joint="d" plugin="mujoco.pid" instance="pid" forcerange="-3 3" actdim="2"/>
    <position name="servo" joint="e" kp="2" kv="0.1" timeconst="0.03"/>
    <plugin name="inline" joint="f" plugin="mujoco.pid" actdim="1">
      <config key="kp" value="3"/><config key="ki" value="2"/>
    </plugin>
  </actuator>
</mujoco>
"""

CTRL = [0.3, -0.8, -0.4, 0.6, 0.2, 0.5]


def ctrl(t, q, qd):
    return [0.5 * np.sin(3 * t), 0.3, -0.4, 0.6 * np.cos(2 * t), 0.2, -0.5 * np.sin(t)]


@pytest.fixture
def arm(tmp_path) -> Path:
    p = tmp_path / "stateful.xml"
    p.write_text(ARM)
    return p


def test_the_loader_maps_activation_dynamics_and_pid_plugins(arm):
    model = pbf.load_mjcf(arm)
    acts = {a["name"]: a for a in dict(model.default_forces)["mj_actuators"]["actuators"]}
    assert acts["integ"]["dynamics"] == {"type": "integrator", "tau": 1.0, "actrange": [-1.0, 1.0], "actearly": False}
    assert acts["filt"]["dynamics"]["type"] == "filter" and acts["filt"]["dynamics"]["tau"] == 0.05
    assert acts["exact"]["dynamics"]["actearly"] is True
    assert acts["servo"]["dynamics"]["type"] == "filterexact"      # position with timeconst
    assert acts["pid"]["pid"] == {"kp": 8.0, "ki": 5.0, "kd": 0.4, "imax": 2.0, "slewmax": 2.0}
    assert acts["inline"]["pid"] == {"kp": 3.0, "ki": 2.0, "kd": 0.0, "imax": None, "slewmax": None}
    assert "gain" not in acts["pid"]
    f = actuator_force(model, CTRL)
    assert f.n_inputs(model) == 6 and f.n_states(model) == mujoco.MjModel.from_xml_path(str(arm)).na == 7


def test_forces_and_next_states_are_mujocos_at_random_states_activations_and_times(arm, rng):
    worst = compare(arm, rng, states=20)
    assert set(worst) >= {"actuator", "states"}
    assert max(worst.values()) <= TOL, worst


@pytest.mark.parametrize("mj_integrator, ours", [("EULER", "semi_implicit_euler"), ("RK4", "rk4")])
def test_semi_implicit_euler_and_rk4_follow_mujocos_euler_and_rk4_step_for_step(arm, mj_integrator, ours):
    """MuJoCo's Euler (no damping: no implicit damping) is the semi-implicit Euler step, the states advanced as
    ``mj_advance`` does; MuJoCo's RK4 integrates ``act`` in its stages, and so does ``rk4``. A 1 s rollout under
    a time-varying ctrl agrees to round-off with each."""
    model = pbf.load_mjcf(arm)
    m = mujoco.MjModel.from_xml_path(str(arm))
    m.opt.integrator, m.opt.timestep = getattr(mujoco.mjtIntegrator, f"mjINT_{mj_integrator}"), 1e-3
    d = mujoco.MjData(m)
    qs, acts = [d.qpos.copy()], [d.act.copy()]
    for _ in range(1000):
        d.ctrl[:] = ctrl(d.time, None, None)
        mujoco.mj_step(m, d)
        qs.append(d.qpos.copy())
        acts.append(d.act.copy())
    sim = pbf.Simulator(model, ours, dt=1e-3, forces=["gravity", actuator_force(model, ctrl)])
    tr = sim.rollout(model.neutral(), None, duration=1.0)
    assert tr.status.value == "ok" and tr.force_states.shape == (1001, 7)
    assert np.abs(tr.q - np.array(qs)).max() < 1e-9
    assert np.abs(tr.force_states - np.array(acts)).max() < 1e-9
    assert np.abs(tr.force_states[-1]).max() > 0.05               # the states did move


def test_a_pid_removes_the_steady_state_error_a_p_servo_leaves_under_gravity(tmp_path):
    """A pendulum held horizontal against gravity: the integral term drives the error to zero, where a pure P
    servo keeps ``m g l / kp``. Implicit (pbad at 20 ms) and explicit (rk4 at 2 ms) steps agree on it."""
    pendulum = """<mujoco><extension><plugin plugin="mujoco.pid"><instance name="p">
      <config key="kp" value="40"/><config key="ki" value="{ki}"/><config key="kd" value="4"/></instance></plugin>
      </extension><worldbody><body><joint name="j" axis="0 1 0"/>
      <geom type="sphere" size="0.05" pos="0.5 0 0" mass="1"/></body></worldbody>
      <actuator><plugin joint="j" plugin="mujoco.pid" instance="p" actdim="{n}"/></actuator></mujoco>"""
    errors = {}
    for ki, n in ((0, 0), (60, 1)):
        p = tmp_path / f"pendulum{ki}.xml"
        p.write_text(pendulum.format(ki=ki, n=n))
        model = pbf.load_mjcf(p)
        for integ, dt in (("pbad", 0.02), ("rk4", 0.002)):
            sim = pbf.Simulator(model, integ, dt=dt, forces=["gravity", actuator_force(model, [0.0])])
            tr = sim.rollout(model.neutral(), None, duration=6.0)
            assert tr.status.value == "ok"
            errors[ki, integ] = float(tr.q[-1, 0])
    # MuJoCo's hinge about +y: gravity turns the arm to positive angles; P alone settles at tau = kp q
    expected = 1.0 * 9.81 * 0.5 / 40
    for integ in ("pbad", "rk4"):
        assert errors[0, integ] == pytest.approx(expected, rel=1e-2)
        assert abs(errors[60, integ]) < 1e-3 * expected


def test_a_saved_trajectory_keeps_its_force_states(arm, tmp_path):
    model = pbf.load_mjcf(arm)
    sim = pbf.Simulator(model, "rk4", dt=2e-3, forces=["gravity", actuator_force(model, CTRL)])
    tr = sim.rollout(model.neutral(), None, steps=20)
    back = pbf.Trajectory.load(tr.save(tmp_path / "run"))
    np.testing.assert_array_equal(back.force_states, tr.force_states)
    chain = pbf.models.chain(2)
    plain = pbf.Simulator(chain, "rk4", dt=2e-3, forces=["gravity"]).rollout(chain.neutral(), None, steps=3)
    assert plain.force_states is None
    assert pbf.Trajectory.load(plain.save(tmp_path / "plain")).force_states is None


def test_the_step_function_and_the_c_backend_carry_the_states(arm):
    model = pbf.load_mjcf(arm)
    forces = ["gravity", actuator_force(model, CTRL)]
    sim = pbf.Simulator(model, "pbad", dt=0.01, forces=forces)
    s0 = sim.initial_state(model.neutral())
    assert sim.problem.nu == 6 and s0.size == sim.problem.ns and sim.problem.meta["force_states"][1] == s0.size
    s1, _ = sim.advance(s0, 0.0)
    f = sim.step_function()
    np.testing.assert_allclose(np.asarray(f(s0, 0.0, 0.01, CTRL)).ravel(), s1, atol=1e-9)
    a = sim.problem.meta["force_states"]
    assert np.abs(s1[a[0]:a[1]]).max() > 0
    ours = sim.rollout(model.neutral(), None, steps=30)
    c = pbf.Simulator(model, "pbad", dt=0.01, forces=forces, backend="c").rollout(model.neutral(), None, steps=30)
    np.testing.assert_allclose(c.q, ours.q, atol=1e-8)
    np.testing.assert_allclose(c.force_states, ours.force_states, atol=1e-8)


class _Counter(ForceModel):
    """A force model with one state that counts time (a_next = a + dt) and pushes joint 0 with it."""

    name = "counter"
    forms = frozenset({ForceForm.GENERALIZED_FORCE})
    group = True

    def __init__(self, n=1, start=(0.0,)):
        self.n, self.start = n, start

    def n_states(self, model):
        return self.n

    def initial_states(self, model):
        return list(self.start)

    def next_states(self, model, q, qd, t, dt, u, a):
        return a + dt

    def generalized_force(self, model, q, qd, t, u=None):
        return ca.vertcat(u[1], ca.SX.zeros(model.nv - 1))       # u = [a; a_next]


def test_a_plug_in_force_model_with_a_state_and_its_errors():
    model = pbf.models.chain(2)
    sim = pbf.Simulator(model, "rk4", dt=0.01, forces=[_Counter(start=[0.5])])
    tr = sim.rollout(model.neutral(), None, steps=10)
    np.testing.assert_allclose(tr.force_states[:, 0], 0.5 + 0.01 * np.arange(11), atol=1e-14)
    with pytest.raises(StepError, match="initial_states must be 1 finite numbers"):
        pbf.Simulator(model, "rk4", dt=0.01, forces=[_Counter(start=[0.0, 1.0])])
    with pytest.raises(StepError, match="n_states must be an integer >= 0, got -1"):
        pbf.Simulator(model, "rk4", dt=0.01, forces=[_Counter(n=-1)])
    with pytest.raises(StepError, match="adaptive steps do not carry the states"):
        pbf.Simulator(model, "pbad", dt=0.01, forces=[_Counter()], adaptive=True)


def test_the_nmdp_integrators_refuse_force_states_in_one_line():
    model = pbf.models.chain(2)
    with pytest.raises(StepError, match="does not carry the states of force models yet"):
        pbf.Simulator(model, "ne_nmdp", dt=0.01, forces=[_Counter()])


@pytest.mark.parametrize("entry, match", [
    ({"dynamics": {"type": "user", "tau": 0.1, "actrange": None, "actearly": False}}, "dynamics must be"),
    ({"dynamics": {"type": "muscle", "tau": 0.1, "actrange": None, "actearly": False}}, "three numbers"),
    ({"dynamics": {"type": "filter", "tau": -1.0, "actrange": None, "actearly": False}}, "non-negative"),
    ({"pid": {"kp": 1.0, "ki": 0.0, "kd": 0.0, "imax": -1.0, "slewmax": None}}, "imax must be"),
    ({"pid": {"kp": 1.0}}, "pid must be"),
])
def test_bad_dynamics_and_pid_parameters_are_one_clear_error(entry, match):
    base = {"name": "x", "joints": {"j0": 1.0}, "gear": 1.0, "gain": [1, 0, 0], "bias": [0, 0, 0],
            "ctrlrange": None, "forcerange": None}
    if "pid" in entry:
        del base["gain"], base["bias"]
    with pytest.raises(ValueError, match=match):
        force_model("mj_actuators", actuators=[{**base, **entry}])


def test_the_parameters_round_trip_through_force_model(arm):
    model = pbf.load_mjcf(arm)
    f = actuator_force(model, CTRL)
    again = force_model("mj_actuators", **f.params())
    q, v = np.linspace(-0.3, 0.4, model.nq), np.linspace(0.5, -0.2, model.nv)
    u = np.r_[CTRL, np.linspace(-0.5, 0.5, 7), np.linspace(0.2, -0.1, 7)]
    np.testing.assert_array_equal(np.asarray(f.generalized_force(model, q, v, 0.0, u=u)),
                                  np.asarray(again.generalized_force(model, q, v, 0.0, u=u)))


@pytest.mark.parametrize("xml, fragments", [
    ('<actuator><general joint="j" dyntype="user"/></actuator>', ["actuator", "dyntype='user'", "activation dynamics"]),
    ('<actuator><general joint="j" gaintype="muscle" gainprm="0.75 1.05 -1 200 0.5 1.6 1.5 1.3 1.2"/></actuator>',
     ["actuator", "a muscle gain without the muscle bias"]),
    ('<extension><plugin plugin="mujoco.pid"><instance name="p"><config key="kp" value="1"/></instance></plugin>'
     '</extension><actuator><plugin joint="j" plugin="mujoco.pid" instance="p" dyntype="filter" dynprm="0.1" '
     'actdim="1"/></actuator>', ["mujoco.pid actuator with activation dynamics"]),
])
def test_unsupported_actuator_states_are_refused_in_one_line(tmp_path, xml, fragments):
    p = tmp_path / "bad.xml"
    p.write_text(f'<mujoco><worldbody><body><joint name="j" axis="0 1 0" range="-1 1"/><geom size="0.1"/></body>'
                 f'</worldbody>{xml}</mujoco>')
    with pytest.raises(ModelError) as err:
        pbf.load_mjcf(p)
    assert all(f in str(err.value) for f in fragments), str(err.value)
    assert "\n" not in str(err.value)


WRIST = """<mujoco><worldbody><site name="ref" pos="0 0 0.5"/>
  <body pos="0 0 0.5"><joint name="roll" axis="0 0 1"/><geom type="box" size="0.1 0.05 0.02"/>
    <site name="tool" pos="0 0 0"/></body></worldbody>
  <actuator><general name="yaw" site="tool" refsite="ref" gear="0 0 0 0 0 1" dyntype="filterexact" dynprm="0.05"
    gainprm="50" biastype="affine" biasprm="0 -50 -5"/></actuator></mujoco>"""


@pytest.mark.parametrize("dyn", ["filterexact", "filter", "integrator"])
def test_a_wrapping_rotational_servos_activation_is_taken_nearest_its_length(tmp_path, rng, dyn):
    """A servo with activation dynamics on a rotation relative to a reference site: MuJoCo 4.0.0 takes a
    filter's control to its representative (modulo 2 pi) nearest the activation, and the activation after the
    step to its representative nearest the actuator length (measured)."""
    p = tmp_path / "wrist.xml"
    p.write_text(WRIST.replace("filterexact", dyn))
    model = pbf.load_mjcf(p)
    f = actuator_force(model)
    wrapped = 0
    for _ in range(40):
        q, act, c = rng.uniform(-np.pi, np.pi, 1), rng.uniform(-4, 4, 1), rng.uniform(-9, 9, 1)
        nxt = float(ca.evalf(f.next_states(model, q, np.zeros(1), 0.0, 0.002, c, act)))
        plain = act[0] + (0.002 * c[0] if dyn == "integrator" else (c[0] - act[0]) * (1 - np.exp(-0.002 / 0.05))
                          if dyn == "filterexact" else 0.002 * (c[0] - act[0]) / 0.05)
        wrapped += abs(nxt - plain) > 1e-9
        assert abs(nxt - q[0]) <= np.pi + 1e-12
    assert wrapped >= 10                                     # the rules did act
    worst = compare(p, rng, states=100)
    assert max(worst.values()) <= TOL, worst


MUSCLES = """<mujoco><option><flag constraint="disable"/></option>
  <worldbody><site name="s0" pos="-0.1 0 0.1"/>
    <body><joint name="j" axis="0 1 0" range="-1 1" limited="true"/>
      <geom size="0.05" fromto="0 0 0 0.3 0 0" type="capsule"/><site name="s1" pos="0.2 0 0.05"/>
      <body pos="0.3 0 0"><joint name="k" axis="0 1 0" range="-1.5 1.5" limited="true"/>
        <geom size="0.04" fromto="0 0 0 0.3 0 0" type="capsule"/><site name="s2" pos="0.1 0 -0.04"/></body></body>
  </worldbody>
  <tendon><spatial name="t"><site site="s0"/><site site="s1"/></spatial>
    <spatial name="t2"><site site="s1"/><site site="s2"/></spatial></tendon>
  <actuator><muscle name="m_t" tendon="t"/><muscle name="m_j" joint="j" force="30" tausmooth="0.2"/>
    <muscle name="m_t2" tendon="t2" force="50" lmin="0.6" lmax="1.4" vmax="2"/>
    <general name="g_k" joint="k" actearly="true" dyntype="muscle" dynprm="0.02 0.05 0" gaintype="muscle"
      biastype="muscle" gainprm="0.7 1.1 40 200 0.5 1.6 1.5 1.3 1.2" biasprm="0.7 1.1 40 200 0.5 1.6 1.5 1.3 1.2"
      lengthrange="-1.5 1.5"/></actuator></mujoco>"""


def test_muscles_are_mujocos_force_length_velocity_curves_and_activation_dynamics(tmp_path, rng):
    """MuJoCo's muscle model: the force-length-velocity gain, the passive bias, the activation dynamics with
    hard and smooth switching (``tausmooth``), on tendon and joint transmissions, the force scaled from
    ``acc0`` where it is negative."""
    p = tmp_path / "muscles.xml"
    p.write_text(MUSCLES)
    model = pbf.load_mjcf(p)
    acts = {a["name"]: a for a in dict(model.default_forces)["mj_actuators"]["actuators"]}
    m = mujoco.MjModel.from_xml_path(str(p))
    assert acts["m_t"]["muscle"]["force"] == pytest.approx(200 / m.actuator_acc0[0], rel=1e-15)
    assert acts["m_j"]["dynamics"] == {"type": "muscle", "tau": [0.01, 0.04, 0.2], "actrange": None, "actearly": False}
    f = actuator_force(model)
    assert f.n_states(model) == 4 and f.forms == {ForceForm.GENERALIZED_FORCE}
    worst = compare(p, rng, states=100)
    assert max(worst.values()) <= TOL, worst


@pytest.mark.parametrize("mj_integrator, ours", [("EULER", "semi_implicit_euler"), ("RK4", "rk4")])
def test_a_muscle_arm_follows_mujocos_euler_and_rk4_step_for_step(tmp_path, mj_integrator, ours):
    p = tmp_path / "muscles.xml"
    p.write_text(MUSCLES)
    model = pbf.load_mjcf(p)

    def excite(t, q, qd):
        return [0.5 + 0.5 * np.sin(4 * t), 0.8, 0.5 + 0.5 * np.cos(3 * t), 0.3]

    m = mujoco.MjModel.from_xml_path(str(p))
    m.opt.integrator, m.opt.timestep = getattr(mujoco.mjtIntegrator, f"mjINT_{mj_integrator}"), 1e-3
    d = mujoco.MjData(m)
    for _ in range(1000):
        d.ctrl[:] = excite(d.time, None, None)
        mujoco.mj_step(m, d)
    forces = ["gravity", actuator_force(model, excite)]
    tr = pbf.Simulator(model, ours, dt=1e-3, forces=forces).rollout(model.neutral(), None, duration=1.0)
    assert np.abs(tr.q[-1] - d.qpos).max() < 1e-9 and np.abs(tr.force_states[-1] - d.act).max() < 1e-9
    assert np.abs(d.act).max() > 0.2                                            # the muscles did activate
    # the activation update is MuJoCo's explicit one: within bounds at 5 ms (tau_act 5-20 ms), and close to the
    # 1 ms activations; at 20 ms the first step overshoots to 4 (docs/mjcf.md)
    big = pbf.Simulator(model, "pbad", dt=0.005, forces=forces).rollout(model.neutral(), None, duration=1.0)
    assert big.status.value == "ok" and np.abs(big.force_states).max() <= 1.0 + 1e-12
    assert np.abs(big.force_states[-1] - d.act).max() < 2e-3


def test_the_runge_kutta_methods_carry_the_states_in_their_stages(arm):
    """rk2 / rk3 / rk4 put the states in their own state (``meta["force_states"]``), the Euler methods leave them
    to the wrapper; either way the state ends with them and the step function takes the controls alone."""
    model = pbf.load_mjcf(arm)
    for name in ("rk2", "rk3", "rk4", "forward_euler", "semi_implicit_euler"):
        sim = pbf.Simulator(model, name, dt=1e-3, forces=["gravity", actuator_force(model, CTRL)])
        pb = sim.problem
        assert pb.meta["force_states"] == (model.nq + model.nv, pb.ns) and pb.nu == 6, name
        s1, st = sim.advance(sim.initial_state(model.neutral()), 0.0)
        assert st.converged and np.all(np.isfinite(s1)), name
        np.testing.assert_allclose(np.asarray(sim.step_function()(sim.initial_state(model.neutral()), 0.0, 1e-3,
                                                                  CTRL)).ravel(), s1, atol=1e-12)


PID_BY_INSTANCE = """<mujoco><option><flag clampctrl="disable"/></option>
  <extension><plugin plugin="mujoco.pid"><instance name="p"><config key="kp" value="8"/><config key="ki" value="5"/>
    <config key="slewmax" value="3"/></instance></plugin></extension>
  <worldbody><body><joint name="j" axis="0 1 0"/><geom size="0.1" fromto="0 0 0 0.3 0 0" type="capsule"/></body>
  </worldbody><actuator><plugin instance="p" joint="j" actdim="2" ctrlrange="-0.5 0.5"/></actuator></mujoco>"""


def test_a_pid_named_by_its_instance_alone_keeps_its_ctrlrange_with_clampctrl_off(tmp_path, rng):
    """The actuator names only its plug-in instance (no ``plugin=``), and ``clampctrl`` is off: MuJoCo's PID
    plug-in still clamps its control to ``ctrlrange`` (measured)."""
    p = tmp_path / "pid.xml"
    p.write_text(PID_BY_INSTANCE)
    model = pbf.load_mjcf(p)
    (act,) = dict(model.default_forces)["mj_actuators"]["actuators"]
    assert act["ctrlrange"] == [-0.5, 0.5] and act["pid"]["slewmax"] == 3.0
    worst = compare(p, rng, states=40)
    assert max(worst.values()) <= TOL, worst


class _Bad(_Counter):
    name = "bad"

    def __init__(self, out):
        super().__init__()
        self.out = out

    def next_states(self, model, q, qd, t, dt, u, a):
        return self.out(a, dt)


@pytest.mark.parametrize("out, match", [
    (lambda a, dt: ca.vertcat(a, a), "next_states returned 2 values, n_states declares 1"),
    (lambda a, dt: "a string", "next_states must return a CasADi expression"),
])
def test_a_force_model_whose_states_have_the_wrong_size_is_one_clear_error(out, match):
    with pytest.raises(StepError, match=match):
        pbf.Simulator(pbf.models.chain(2), "semi_implicit_euler", dt=0.01, forces=[_Bad(out)])


def test_a_list_of_next_states_is_taken_and_sizes_must_be_integers():
    model = pbf.models.chain(2)
    tr = pbf.Simulator(model, "rk4", dt=0.01, forces=[_Bad(lambda a, dt: [a[0] + dt])]).rollout(
        model.neutral(), None, steps=3)
    np.testing.assert_allclose(tr.force_states[:, 0], 0.01 * np.arange(4), atol=1e-15)

    class Fractional(_Counter):
        def n_states(self, model):
            return 1.7

    with pytest.raises(StepError, match="n_states must be an integer >= 0, got 1.7"):
        pbf.Simulator(model, "rk4", dt=0.01, forces=[Fractional()])

    class Undeclared(_Counter):
        name = "undeclared"
        next_states = ForceModel.next_states
        state_rates = ForceModel.state_rates

    with pytest.raises(TypeError, match="declares n_states = 1 but does not implement next_states"):
        pbf.Simulator(model, "semi_implicit_euler", dt=0.01, forces=[Undeclared()])


@pytest.mark.parametrize("backend", ["casadi", "c"])
def test_batch_rollouts_keep_the_force_states(arm, tmp_path, backend):
    model = pbf.load_mjcf(arm)
    sim = pbf.Simulator(model, "rk4", dt=2e-3, forces=["gravity", actuator_force(model, CTRL)], backend=backend)
    Q0 = np.array([model.neutral(), model.neutral() + 0.1])
    batch = sim.rollout_batch(Q0, None, steps=10)
    assert batch.force_states.shape == (2, 11, 7)
    single = sim.rollout(Q0[1], None, steps=10)
    np.testing.assert_allclose(batch[1].force_states, single.force_states, atol=1e-12)
    back = pbf.BatchTrajectory.load(batch.save(tmp_path / "batch"))
    np.testing.assert_array_equal(back.force_states, batch.force_states)


def test_a_pid_with_activation_dynamics_is_refused_by_the_force_model():
    with pytest.raises(ValueError, match="a 'pid' actuator takes no 'dynamics'"):
        force_model("mj_actuators", actuators=[{
            "name": "x", "joints": {"j0": 1.0}, "gear": 1.0, "ctrlrange": None, "forcerange": None,
            "pid": {"kp": 1.0, "ki": 0.0, "kd": 0.0, "imax": None, "slewmax": None},
            "dynamics": {"type": "filter", "tau": 0.1, "actrange": None, "actearly": False}}])


@pytest.mark.parametrize("integrator, backend", [("rk4", "casadi"), ("pbad", "casadi"), ("pbad", "c")])
def test_a_run_in_two_pieces_continues_its_force_states(arm, integrator, backend):
    """``rollout(..., force_states0=traj.force_states[-1])`` continues a run with its activations, integrals and
    set-points instead of starting them at zero."""
    model = pbf.load_mjcf(arm)
    sim = pbf.Simulator(model, integrator, dt=0.01, forces=["gravity", actuator_force(model, CTRL)], backend=backend)
    first = sim.rollout(model.neutral(), None, steps=20)
    assert np.abs(first.force_states[-1]).max() > 0.05
    second = sim.rollout(first.q[-1], first.qd[-1], steps=5, t0=float(first.t[-1]),
                         force_states0=first.force_states[-1])
    np.testing.assert_array_equal(second.force_states[0], first.force_states[-1])
    fresh = sim.rollout(first.q[-1], first.qd[-1], steps=5, t0=float(first.t[-1]))
    assert np.abs(fresh.force_states[0]).max() == 0 and np.abs(second.q[-1] - fresh.q[-1]).max() > 1e-6
    with pytest.raises(StepError, match="force_states0: expected a vector of length 7"):
        sim.rollout(model.neutral(), None, steps=2, force_states0=[0.0, 1.0])
    chain = pbf.models.chain(2)
    with pytest.raises(StepError, match="force_states0: this Simulator's force models keep no states"):
        pbf.Simulator(chain, "rk4", dt=0.01).rollout(chain.neutral(), None, steps=2, force_states0=[0.0])


@pytest.mark.parametrize("backend", ["casadi", "c"])
def test_force_states0_in_the_native_and_compiled_loops(backend):
    """A force model with a state and no per-step inputs runs in the backends' own loops (the explicit
    multi-step function, the C runner); ``force_states0`` starts it there too."""
    model = pbf.models.chain(2)
    sim = pbf.Simulator(model, "rk4", dt=0.01, forces=[_Counter()], backend=backend)
    assert not sim._input_forces
    tr = sim.rollout(model.neutral(), None, steps=4, force_states0=[2.0])
    np.testing.assert_allclose(tr.force_states[:, 0], 2.0 + 0.01 * np.arange(5), atol=1e-14)
