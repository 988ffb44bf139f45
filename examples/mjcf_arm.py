"""A MuJoCo model driven through its actuators: load an MJCF arm with MuJoCo's compiler, reach with position servos.

``examples/data/arm7.xml`` is a 7-joint arm written the way MuJoCo Menagerie writes its arms: ``position``
actuators with a force range, joint damping and armature, inertia from the geoms. ``pbf.load_mjcf`` compiles it
with MuJoCo and gives the model its passive forces and actuators as force models (``model.default_forces``);
``pbf.io.actuator_force(model, ctrl)`` drives the actuators with MuJoCo's ``ctrl`` (here: targets that move
from the start pose to a reach pose in 1 s). The script runs the reach three ways and prints how far each ends
from MuJoCo's own run (RK4 at 0.5 ms, constraints off as the file says):

- ``rk4`` at 0.5 ms (the same integrator as MuJoCo: it must agree to round-off);
- ``pbad`` order 3 at 10 ms and order 2 at 10 ms (20x fewer steps).

It plots the seven joint angles of each run (``mjcf_arm.png``).

    python examples/mjcf_arm.py
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

import pbframework as pbf
from pbframework.io import actuator_force, from_mujoco, to_mujoco

from _common import output_dir, pyplot, save  # examples/_common.py

ARM = Path(__file__).resolve().parent / "data" / "arm7.xml"
REACH = np.array([0.8, 0.9, -0.5, -1.6, 0.4, 1.8, 0.3])
DURATION = 2.0


def targets(t: float) -> np.ndarray:
    """Position targets: a smooth (cosine) move from zero to REACH over the first second, then held."""
    s = min(t, 1.0)
    return REACH * 0.5 * (1 - np.cos(np.pi * s))


def mujoco_reach(duration: float, dt: float) -> tuple[np.ndarray, float]:
    import mujoco

    m = mujoco.MjModel.from_xml_path(str(ARM))
    m.opt.timestep = dt
    d = mujoco.MjData(m)
    qpos = [d.qpos.copy()]
    t0 = time.perf_counter()
    for _ in range(int(round(duration / dt))):
        d.ctrl[:] = targets(d.time)
        mujoco.mj_step(m, d)
        qpos.append(d.qpos.copy())
    return np.array(qpos), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    args = ap.parse_args(argv)
    out = output_dir(args.out)
    duration = 1.0 if os.environ.get("PBF_EXAMPLES_FAST") else DURATION
    model = pbf.load_mjcf(ARM)
    print(f"{model.name}: {model.nq} joints, forces from the file: {', '.join(n for n, _ in model.default_forces)}")
    reference, t_mj = mujoco_reach(duration, 5e-4)
    drive = actuator_force(model, lambda t, q, qd: targets(t))
    q0, v0 = from_mujoco(model, reference[0], np.zeros(model.nv))
    runs, results = {}, {"mujoco_wall_s": t_mj, "runs": {}}
    for label, integrator, order, dt in (("rk4 0.5 ms", "rk4", None, 5e-4), ("pbad3 10 ms", "pbad", 3, 0.01),
                                         ("pbad2 10 ms", "pbad", 2, 0.01)):
        sim = pbf.Simulator(model, integrator, order=order, dt=dt, forces=["gravity", drive])
        t0 = time.perf_counter()
        tr = sim.rollout(q0, v0, duration=duration)
        wall = time.perf_counter() - t0
        end = to_mujoco(model, tr.q[-1])[0]
        dev = float(np.abs(end - reference[-1]).max())
        reach_error = float(np.abs(tr.q[-1] - REACH).max())
        runs[label] = tr
        results["runs"][label] = {"status": tr.status.value, "steps": len(tr.t) - 1, "wall_s": wall,
                                  "final_deviation_from_mujoco_rad": dev, "final_reach_error_rad": reach_error}
        print(f"{label:12s} {tr.status.value:4s} {len(tr.t) - 1:5d} steps {wall:6.2f} s   final pose vs MuJoCo "
              f"{dev:.2e} rad, vs the reach target {reach_error:.3f} rad")
    print(f"MuJoCo RK4 0.5 ms: {len(reference) - 1} steps in {t_mj:.3f} s")
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), sharey=True)
    t_ref = np.arange(len(reference)) * 5e-4
    for ax, (label, tr) in zip(axes, runs.items()):
        ax.plot(t_ref, reference, color="0.75", lw=3)
        ax.plot(tr.t, tr.q, lw=1.2)
        ax.set(title=f"{label} (grey: MuJoCo)", xlabel="t (s)")
    axes[0].set_ylabel("joint angle (rad)")
    save(fig, out / "mjcf_arm.png", out / "mjcf_arm.json", results)
    return results


if __name__ == "__main__":
    main()
