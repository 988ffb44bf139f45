"""Menagerie-style robots driven by one control sequence in MuJoCo and in pbframework (issue 25).

Usage::

    python benchmarks/menagerie_rollout.py [--duration 2] [--menagerie PATH]

Two robots written the way Menagerie writes them (``examples/data/arm7.xml``: a 7-joint arm with ``position`` actuators,
``forcerange``, damping and armature; ``QUADRUPED``: a free-floating base with 12 ``motor`` actuators, damped
and armatured legs), or with ``--menagerie PATH`` Menagerie's own ``franka_emika_panda/panda_nohand.xml`` and
``anybotics_anymal_c/anymal_c.xml``. MuJoCo's constraints are off (``<flag constraint="disable"/>``:
limits, contacts and frictionloss are constraints there) and both simulators integrate with RK4 at 0.5 ms
for ``--duration`` s (pbframework: ``rk4`` with the generated-C backend), the control held over each step
(``data.ctrl`` set before ``mj_step``; :func:`pbframework.io.actuator_force`). Printed: the largest
deviation of the joint coordinates over the run (quaternions compared as rotations, MuJoCo's state mapped by
:func:`pbframework.io.from_mujoco`), both wall times and their ratio. Target: deviation below 1e-6.

Then the arm with ``pbad`` (orders 2 and 3, generated C) at 10 and 50 ms: its deviation from MuJoCo's 0.5 ms run at
the pbad step times, and its wall time.

Last, actuators with states (:mod:`pbframework.force_states`): ``STATEFUL`` (activation dynamics of each kind and
two ``mujoco.pid`` plug-in actuators), or with ``--menagerie`` Menagerie's ``shadow_dexee`` (twelve PIDs), at
2 ms. MuJoCo's Euler (its implicit joint damping off, ``eulerdamp="disable"``) against ``semi_implicit_euler``
(generated C): the same step, so the joints and the states
(``act``) agree to round-off. MuJoCo's RK4 against ``rk4``: both integrate ``act`` in the four stages, so these
agree to round-off too.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import pbframework as pbf
from pbframework.io import actuator_force, from_mujoco

ARM = Path(__file__).resolve().parents[1] / "examples" / "data" / "arm7.xml"
"""The arm: MuJoCo Menagerie's style (position actuators with forcerange, damping, armature)."""

QUADRUPED = """<mujoco model="quadruped">
  <option timestep="0.0005" integrator="RK4"><flag constraint="disable"/></option>
  <default>
    <joint damping="0.5" armature="0.01"/>
    <motor ctrlrange="-30 30"/>
    <geom type="capsule" size="0.02" density="1000"/>
  </default>
  <worldbody>
    <body name="trunk" pos="0 0 0.5"><freejoint name="root"/>
      <geom type="box" size="0.25 0.1 0.05" density="500"/>
      {legs}
    </body>
  </worldbody>
  <actuator>{motors}</actuator>
</mujoco>"""

LEG = """<body name="{n}_hip" pos="{x} {y} 0"><joint name="{n}_abd" axis="1 0 0"/>
        <geom fromto="0 0 0 0 {s}0.08 0"/>
        <body name="{n}_thigh" pos="0 {s}0.08 0"><joint name="{n}_hip" axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.2"/>
          <body name="{n}_calf" pos="0 0 -0.2"><joint name="{n}_knee" axis="0 1 0"/>
            <geom fromto="0 0 0 0 0 -0.2" size="0.015"/></body></body></body>"""


STATEFUL = """<mujoco model="stateful">
  <option timestep="0.002"><flag constraint="disable"/></option>
  <extension><plugin plugin="mujoco.pid"><instance name="pid"><config key="kp" value="8"/>
    <config key="ki" value="5"/><config key="kd" value="0.4"/><config key="imax" value="2"/>
    <config key="slewmax" value="2"/></instance></plugin></extension>
  <default><geom type="box" size="0.05 0.06 0.06" pos="0.05 0 0"/></default>
  <worldbody>
    <body pos="0 0 1"><joint name="a" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" pos="0 0 0"/>
      <body pos="0.3 0 0"><joint name="b" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" pos="0 0 0"/>
        <body pos="0.3 0 0"><joint name="c" type="slide" axis="1 0 0"/><geom type="sphere" size="0.05" pos="0 0 0"/>
          <body pos="0.1 0 0"><joint name="d" axis="0 0 1"/><geom/>
            <body pos="0.1 0 0"><joint name="e" axis="1 0 0"/><geom/>
              <body pos="0.1 0 0"><joint name="f" axis="0 1 0"/><geom/></body></body></body></body></body></body>
  </worldbody>
  <actuator>
    <general joint="a" dyntype="integrator" gainprm="4" biastype="affine" biasprm="0 -4 -0.5" actlimited="true"
             actrange="-1 1" ctrlrange="-1 1"/>
    <general joint="b" dyntype="filter" dynprm="0.05" gainprm="3" biastype="affine" biasprm="0 -3 -0.3" ctrlrange="-1 1"/>
    <general joint="c" dyntype="filterexact" dynprm="0.02" gainprm="20" biastype="affine" biasprm="0 -20 -2"
             actearly="true" ctrlrange="-0.3 0.3"/>
    <plugin joint="d" plugin="mujoco.pid" instance="pid" forcerange="-3 3" actdim="2" ctrlrange="-1 1"/>
    <position joint="e" kp="2" kv="0.1" timeconst="0.03" ctrlrange="-1 1"/>
    <plugin joint="f" plugin="mujoco.pid" actdim="1" ctrlrange="-1 1"><config key="kp" value="3"/>
      <config key="ki" value="2"/></plugin>
  </actuator>
</mujoco>"""
"""Actuators with states: activation dynamics of each kind and two ``mujoco.pid`` plug-in actuators."""


def quadruped_xml() -> str:
    legs, motors = [], []
    for n, x, y in (("FL", 0.2, 0.1), ("FR", 0.2, -0.1), ("RL", -0.2, 0.1), ("RR", -0.2, -0.1)):
        legs.append(LEG.format(n=n, x=x, y=y, s="" if y > 0 else "-"))
        motors += [f'<motor name="{n}_{j}_m" joint="{n}_{j}" gear="{g}"/>' for j, g in (("abd", 1), ("hip", 1),
                                                                                      ("knee", 1.5))]
    return QUADRUPED.format(legs="\n      ".join(legs), motors="".join(motors))


def controls(m, t: float) -> np.ndarray:
    """The control sequence: smooth sinusoids about the middle of each control range (or zero)."""
    k = np.arange(m.nu)
    lo, hi = m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1]
    mid = np.where(m.actuator_ctrllimited.astype(bool), 0.5 * (lo + hi), 0.0)
    amp = np.where(m.actuator_ctrllimited.astype(bool), 0.25 * (hi - lo), 1.0)
    return mid + amp * np.sin(2 * np.pi * (0.5 + 0.15 * k) * t + k)


def mujoco_run(path: Path, duration: float, dt: float, ctrl_fn, integrator: str = "RK4", acts: list | None = None):
    """MuJoCo's run (``acts``: a list that gets ``data.act`` at every step)."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.timestep, m.opt.integrator = dt, getattr(mujoco.mjtIntegrator, f"mjINT_{integrator}")
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    if integrator == "EULER":     # Euler's implicit joint damping off: the plain semi-implicit Euler step
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    d = mujoco.MjData(m)
    steps = int(round(duration / dt))
    qpos, qvel = np.empty((steps + 1, m.nq)), np.empty((steps + 1, m.nv))
    qpos[0], qvel[0] = d.qpos, d.qvel
    if acts is not None:
        acts.append(d.act.copy())
    t0 = time.perf_counter()
    for k in range(steps):
        d.ctrl[:] = ctrl_fn(m, d.time)
        mujoco.mj_step(m, d)
        qpos[k + 1], qvel[k + 1] = d.qpos, d.qvel
        if acts is not None:
            acts.append(d.act.copy())
    return m, qpos, qvel, time.perf_counter() - t0


def deviation(model, q_ours: np.ndarray, qpos_mj: np.ndarray) -> float:
    """Largest coordinate deviation; a quaternion joint by its rotation angle (rad)."""
    worst = 0.0
    for k in range(len(q_ours)):
        q_mj = from_mujoco(model, qpos_mj[k])[0]
        for j in model.joints:
            s = model.joint_q_index[j.name]
            a, b = q_ours[k][s], q_mj[s]
            if j.type.value in ("ball", "free"):
                qa, qb = a[-4:], b[-4:]
                worst = max(worst, 2 * np.arccos(min(1.0, abs(float(qa @ qb)))))
                if j.type.value == "free":
                    worst = max(worst, float(np.abs(a[:3] - b[:3]).max()))
            elif a.size:
                worst = max(worst, float(np.abs(a - b).max()))
    return worst


def ours_run(path: Path, integrator: str, dt: float, duration: float, m, q0, v0, order: int | None = None):
    model = _load(path)
    forces = ["gravity", actuator_force(model, lambda t, q, qd: controls(m, t))]
    t0 = time.perf_counter()
    sim = pbf.Simulator(model, integrator, dt=dt, forces=forces, backend="c", order=order)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    tr = sim.rollout(q0, v0, duration=duration)
    return model, tr, build, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--menagerie", type=Path, default=None, help="run Menagerie's panda_nohand and anymal_c")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp())
    if args.menagerie:
        robots = [("arm", args.menagerie / "franka_emika_panda" / "panda_nohand.xml"),
                  ("quadruped", args.menagerie / "anybotics_anymal_c" / "anymal_c.xml")]
    else:
        (tmp / "quadruped.xml").write_text(quadruped_xml())
        robots = [("arm", ARM), ("quadruped", tmp / "quadruped.xml")]
    dt = 5e-4
    ok = True
    print(f"RK4 at {dt * 1e3:g} ms for {args.duration:g} s, MuJoCo's constraints off, the same ctrl sequence")
    print(f"{'robot':10s} {'nq':>3s} {'nu':>3s} {'max deviation':>14s} {'MuJoCo s':>9s} {'pbf rk4 C s':>11s} "
          f"{'(build s)':>9s} {'pbf/MuJoCo':>10s}")
    reference = {}
    for label, path in robots:
        m, qpos, qvel, t_mj = mujoco_run(path, args.duration, dt, controls)
        model, tr, build, t_ours = ours_run(path, "rk4", dt, args.duration, m,
                                            *from_mujoco(_load(path), qpos[0], qvel[0]))
        dev = deviation(model, tr.q, qpos)
        ok &= dev < 1e-6
        reference[label] = (m, qpos, qvel, model)
        print(f"{label:10s} {m.nq:3d} {m.nu:3d} {dev:14.2e} {t_mj:9.3f} {t_ours:11.3f} {build:9.1f} "
              f"{t_ours / t_mj:10.1f}")
    m, qpos, qvel, model = reference["arm"]
    print("\nthe arm with pbad (generated C) against MuJoCo's 0.5 ms RK4 run")
    print(f"{'order':>5s} {'dt ms':>6s} {'status':>11s} {'steps':>9s} {'max deviation rad':>18s} "
          f"{'final deviation':>16s} {'wall s':>7s}")
    for order, big in ((2, 0.01), (2, 0.05), (3, 0.01), (3, 0.05)):
        _, tr, build, t_ours = ours_run(robots[0][1], "pbad", big, args.duration, m,
                                        *from_mujoco(model, qpos[0], qvel[0]), order=order)
        stride = int(round(big / dt))
        ref = qpos[::stride][:len(tr.q)]
        dev = deviation(model, tr.q[:len(ref)], ref)
        final = deviation(model, tr.q[-1:], qpos[-1:]) if len(tr.q) == len(qpos[::stride]) else float("nan")
        done = f"{len(tr.q) - 1}/{len(qpos[::stride]) - 1}"   # the deviation covers the steps a run completed
        print(f"{order:5d} {big * 1e3:6.0f} {tr.status.value:>11s} {done:>9s} {dev:18.3e} {final:16.3e} "
              f"{t_ours:7.3f}")
    stateful = args.menagerie / "shadow_dexee" / "shadow_dexee.xml" if args.menagerie else tmp / "stateful.xml"
    if not args.menagerie:
        stateful.write_text(STATEFUL)
    print(f"\nactuators with states ({stateful.stem}), 2 ms, MuJoCo against pbframework (generated C)")
    print(f"{'MuJoCo':>6s} {'pbf':>19s} {'na':>3s} {'max deviation':>14s} {'max act dev':>12s} {'MuJoCo s':>9s} "
          f"{'pbf s':>7s}")
    for mj_int, ours in (("EULER", "semi_implicit_euler"), ("RK4", "rk4")):
        acts: list = []
        m, qpos, qvel, t_mj = mujoco_run(stateful, args.duration, 2e-3, controls, mj_int, acts)
        model, tr, build, t_ours = ours_run(stateful, ours, 2e-3, args.duration, m,
                                            *from_mujoco(_load(stateful), qpos[0], qvel[0]))
        dev, adev = deviation(model, tr.q, qpos), float(np.abs(tr.force_states - np.array(acts)).max())
        ok &= dev < 1e-6 and adev < 1e-6
        print(f"{mj_int:>6s} {ours:>19s} {m.na:3d} {dev:14.2e} {adev:12.2e} {t_mj:9.3f} {t_ours:7.3f}")
    print(f"\ntarget (RK4 trajectories, and Euler and RK4 with actuator states, agree to 1e-6): "
          f"{'met' if ok else 'NOT met'}")
    return 0 if ok else 1


def _load(path: Path) -> pbf.ArticulatedBody:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pbf.io.UnsupportedGeoms)
        return pbf.load_mjcf(path, disable=("constraint",))   # as MuJoCo runs it here: no limits, no frictionloss


if __name__ == "__main__":
    sys.exit(main())
