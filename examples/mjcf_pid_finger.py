"""Actuators with states: a two-joint finger held by MuJoCo's PID plug-in and a filtered servo, against MuJoCo.

``FINGER`` (below) is written the way MuJoCo Menagerie's shadow_dexee writes its fingers: the base joint is
driven by a ``mujoco.pid`` plug-in actuator (proportional, integral with a clamp, derivative, a slew limit on the
set-point), the tip joint by a ``position`` servo with a ``timeconst`` (a first-order filter on its command:
MuJoCo's ``filterexact`` activation). ``pbf.load_mjcf`` keeps MuJoCo's ``act`` -- the PID's integral and
slew-limited set-point, the servo's activation -- as states of the ``mj_actuators`` force model
(``pbframework.force_states``), advanced once per step as MuJoCo's Euler step advances them.

The finger holds its tip out horizontally against gravity, then flexes. The script runs

- MuJoCo (Euler, 2 ms, its implicit joint damping off) and ``semi_implicit_euler`` at 2 ms: the same step, so
  the joints and the states must agree to round-off;
- ``pbad`` at 20 ms (10x fewer steps), and a P-only PID (``ki = 0``) to show what the integral does: without it
  the base joint sags by ``m g l / kp`` under gravity.

It prints the final deviations and the base joint's steady-state error, and plots the joints and the PID's
integral state (``mjcf_pid_finger.png``).

    python examples/mjcf_pid_finger.py
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

import pbframework as pbf
from pbframework.io import actuator_force

from _common import output_dir, pyplot, save  # examples/_common.py

FINGER = """<mujoco model="finger">
  <option timestep="0.002"><flag constraint="disable" eulerdamp="disable"/></option>
  <extension><plugin plugin="mujoco.pid"><instance name="base_pid">
    <config key="kp" value="4"/><config key="ki" value="{ki}"/><config key="kd" value="0.05"/>
    <config key="imax" value="0.5"/><config key="slewmax" value="3"/></instance></plugin></extension>
  <default><joint damping="0.01" armature="0.0001"/></default>
  <worldbody>
    <body name="proximal" pos="0 0 0.2"><joint name="base" axis="0 -1 0"/>
      <geom type="capsule" fromto="0 0 0 0.06 0 0" size="0.01" mass="0.05"/>
      <body name="distal" pos="0.06 0 0"><joint name="tip" axis="0 -1 0"/>
        <geom type="capsule" fromto="0 0 0 0.04 0 0" size="0.008" mass="0.03"/></body></body>
  </worldbody>
  <actuator>
    <plugin name="base" joint="base" plugin="mujoco.pid" instance="base_pid" actdim="{actdim}" ctrlrange="-1.5 1.5"
            forcerange="-0.6 0.6"/>
    <position name="tip" joint="tip" kp="0.4" kv="0.01" timeconst="0.05" ctrlrange="-1.5 1.5"/>
  </actuator>
</mujoco>"""
DURATION = 2.0


def command(t: float) -> list[float]:
    """Hold the finger straight for 0.8 s, then flex both joints smoothly to 0.6 rad."""
    s = float(np.clip((t - 0.8) / 0.5, 0.0, 1.0))
    flex = 0.6 * 0.5 * (1 - np.cos(np.pi * s))
    return [flex, flex]


def mujoco_run(path: Path, duration: float) -> tuple[np.ndarray, np.ndarray, float]:
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    d = mujoco.MjData(m)
    qpos, act = [d.qpos.copy()], [d.act.copy()]
    t0 = time.perf_counter()
    for _ in range(int(round(duration / m.opt.timestep))):
        d.ctrl[:] = command(d.time)
        mujoco.mj_step(m, d)
        qpos.append(d.qpos.copy())
        act.append(d.act.copy())
    return np.array(qpos), np.array(act), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    args = ap.parse_args(argv)
    out = output_dir(args.out)
    duration = 1.2 if os.environ.get("PBF_EXAMPLES_FAST") else DURATION
    folder = Path(tempfile.mkdtemp())
    path, p_only = folder / "finger.xml", folder / "finger_p.xml"
    path.write_text(FINGER.format(ki=20, actdim=2))
    p_only.write_text(FINGER.format(ki=0, actdim=1))
    model = pbf.load_mjcf(path)
    drive = actuator_force(model, lambda t, q, qd: command(t))
    print(f"{model.name}: {model.nq} joints, {drive.n_states(model)} actuator states "
          f"(the PID's integral and set-point, the servo's activation)")
    qpos, act, t_mj = mujoco_run(path, duration)
    results: dict = {"mujoco_wall_s": t_mj, "runs": {}}
    runs = {}
    for label, integrator, dt, m in (("semi-implicit Euler 2 ms", "semi_implicit_euler", 0.002, model),
                                     ("pbad 20 ms", "pbad", 0.02, model),
                                     ("pbad 20 ms, P only", "pbad", 0.02, pbf.load_mjcf(p_only))):
        sim = pbf.Simulator(m, integrator, dt=dt,
                            forces=["gravity", actuator_force(m, lambda t, q, qd: command(t))])
        t0 = time.perf_counter()
        tr = sim.rollout(m.neutral(), None, duration=duration)
        wall = time.perf_counter() - t0
        stride = int(round(dt / 0.002))
        dev = float(np.abs(tr.q - qpos[::stride][:len(tr.q)]).max())
        sag = float(np.abs(tr.q[int(round(0.8 / dt)), 0]))           # base joint error just before the flex
        entry = {"status": tr.status.value, "steps": len(tr.t) - 1, "wall_s": wall, "max_deviation_rad": dev,
                 "base_error_at_0.8s_rad": sag}
        if m is model and integrator == "semi_implicit_euler":
            entry["max_state_deviation"] = float(np.abs(tr.force_states - act).max())
        results["runs"][label] = entry
        runs[label] = tr
        extra = f", states {entry['max_state_deviation']:.1e}" if "max_state_deviation" in entry else ""
        print(f"{label:26s} {tr.status.value:3s} {len(tr.t) - 1:5d} steps {wall:6.2f} s   deviation from MuJoCo "
              f"{dev:.2e} rad{extra}; base joint error at 0.8 s {sag:.4f} rad")
    print(f"MuJoCo Euler 2 ms: {len(qpos) - 1} steps in {t_mj:.3f} s")
    plt = pyplot()
    fig, (ax_q, ax_i) = plt.subplots(1, 2, figsize=(11, 3.6))
    t_ref = np.arange(len(qpos)) * 0.002
    ax_q.plot(t_ref, qpos, color="0.75", lw=4)
    for label, tr in runs.items():
        ax_q.plot(tr.t, tr.q, lw=1.2, label=label)
    ax_q.set(title="joints (grey: MuJoCo)", xlabel="t (s)", ylabel="angle (rad)")
    ax_q.legend(fontsize=7)
    ax_i.plot(t_ref, act[:, 0], color="0.75", lw=4)
    ax_i.plot(runs["pbad 20 ms"].t, runs["pbad 20 ms"].force_states[:, 0], lw=1.2)
    ax_i.set(title="the PID's integral state (grey: MuJoCo)", xlabel="t (s)")
    save(fig, out / "mjcf_pid_finger.png", out / "mjcf_pid_finger.json", results)
    return results


if __name__ == "__main__":
    main()
