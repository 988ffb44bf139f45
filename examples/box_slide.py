"""A box sliding to rest with position-based frictional dynamics (seed 002, PBFD), at a small and a large step.

A 0.2 x 0.2 x 0.1 m box of 1 kg, on a free (quaternion) joint, starts on the ground at 2 m/s. Contact is
``pbfd_contact``: the normal force of a penetration depth (Eq. 8-9) and the corrected tangential friction of
Eq. 12 as a step force, integrated by ``pbfd`` (Eq. 13, JTJ-LM, generated C). The script runs the same slide
at dt = 0.01 s and dt = 0.1 s and prints, for each, the distance slid, when the box came to rest (speed
below 1 cm/s) and the wall time, and plots the box's x position against time for both. The two distances
differ: Eq. 12's friction grows with the step's displacement ``|Pi D|^(beta + 1)``, so the same ``C_par``
brakes harder at a larger step (the script prints how much); seed 002 looks ``C_par`` up per step size
for a wanted distance (its Fig. 5, ``benchmarks/box_slide.py``).

    python examples/box_slide.py            # 3 s
    python examples/box_slide.py --fast     # 1 s (also: PBF_EXAMPLES_FAST=1)
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import pbframework as pbf
from pbframework.model import ArticulatedBody, Joint, Link

from _common import output_dir, pyplot, save  # examples/_common.py

CONTACT = {"normal_stiffness": 1e5, "friction": 1e8}     # C_perp (N/m^2 at alpha = 2), C_par
V0 = 2.0                                                 # m/s along x


def box() -> ArticulatedBody:
    corners = [(sx * 0.1, sy * 0.1, -0.05) for sx in (-1, 1) for sy in (-1, 1)]
    return ArticulatedBody([Link("box", mass=1.0, inertia=np.diag([0.0042, 0.0042, 0.0067]), contact_points=corners)],
                           [Joint("base", "free", "world", "box")], name="box")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="1 s (also PBF_EXAMPLES_FAST=1)")
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    args = ap.parse_args(argv)
    duration = 1.0 if (args.fast or os.environ.get("PBF_EXAMPLES_FAST") == "1") else 3.0
    out = output_dir(args.out)
    model = box()
    q0 = model.neutral()
    q0[2] = 0.05
    results, curves = {}, []
    for dt in (0.01, 0.1):
        sim = pbf.Simulator(model, "pbfd", dt=dt, forces=["gravity", ("pbfd_contact", CONTACT)], backend="c")
        traj = sim.rollout(q0, np.r_[V0, 0, 0, 0, 0, 0], duration=duration)
        speed = np.abs(traj.qd[:, 0])
        rest = np.flatnonzero(speed < 0.01)
        results[f"dt={dt:g}"] = {"status": traj.status.value, "distance_m": float(traj.q[-1, 0]),
                                 "rest_time_s": float(traj.t[rest[0]]) if rest.size else None,
                                 "steps": traj.steps, "wall_time_s": traj.wall_time}
        r = results[f"dt={dt:g}"]
        rest_text = f"at rest from t = {r['rest_time_s']:.2f} s" if rest.size else "still sliding"
        print(f"pbfd dt = {dt:g} s: status {r['status']}, slid {r['distance_m']:.3f} m, {rest_text}, "
              f"{traj.steps} steps in {traj.wall_time * 1e3:.1f} ms")
        curves.append((dt, traj.t, traj.q[:, 0]))

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for dt, t, x in curves:
        ax.plot(t, x, "o-" if dt >= 0.1 else "-", label=f"pbfd dt = {dt:g} s")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("box x [m]")
    ax.legend()
    png = save(fig, out / "box_slide.png", out / "box_slide.json", results)
    print(f"positions plotted to {png}")
    return results


if __name__ == "__main__":
    main()
