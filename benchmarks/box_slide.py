"""BOX-SLIDE (seed 002 Fig. 5): sliding distance of a box against the friction parameter, at several dt.

A 0.2 x 0.2 x 0.1 m box of 1 kg starts on the ground at 2 m/s along x and slides for ``--duration``
seconds (default 3). The friction parameter is ``C_par`` for PBFD (``pbfd``: Eq. 13 with the corrected
tangential force of Eq. 12) and PBD (``pbad`` order 2 with Eq. 11's tangential energy), and ``mu`` for
MuJoCo (its soft contact with a pyramidal and an elliptic cone: the dry-friction model), all in the same
run. Seed 002's claims: PBFD's distance falls monotonically as ``C_par`` grows at every dt; PBD's rises
again past a threshold (its energy underestimates friction); the Newton-Euler dry-friction baseline goes
unstable at large dt while PBFD stays finite. This script prints, per method and dt, the distances along the
parameter grid, whether they are monotone, and the wall time of each run.

The Newton-Euler dry-friction baseline ``ne_dry_friction`` (velocity-level time stepping with a linearised
Coulomb cone, one qpOASES QP per step, the CasADi VM) runs on the same ``mu`` grid; its exact stopping
distance is ``v0^2 / (2 mu g)``.

Usage::

    python benchmarks/box_slide.py                 # dt 0.001 .. 0.1, 3 s
    python benchmarks/box_slide.py --quick         # fewer points (the tests)

Writes ``box_slide.json`` and ``box_slide.png`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pbframework as pbf  # noqa: E402
from pbframework.model import ArticulatedBody, Joint, Link  # noqa: E402

from _common import out_path, write_json  # noqa: E402

HALF = (0.1, 0.1, 0.05)
MASS = 1.0
V0 = 2.0
C_PAR = (1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10)
MU = (0.05, 0.1, 0.2, 0.4, 0.8)
DTS = (0.001, 0.01, 0.05, 0.1)


def box_model() -> ArticulatedBody:
    hx, hy, hz = HALF
    inertia = MASS / 3 * np.diag([hy * hy + hz * hz, hx * hx + hz * hz, hx * hx + hy * hy])
    corners = [(sx * hx, sy * hy, -hz) for sx in (-1, 1) for sy in (-1, 1)]
    return ArticulatedBody([Link("box", mass=MASS, inertia=inertia, contact_points=corners)],
                           [Joint("base", "free", "world", "box")], name="box")


def run_ours(method: str, C_par: float, dt: float, duration: float) -> dict:
    box = box_model()
    q0 = box.neutral()
    q0[2] = HALF[2]                      # resting on the plane (it sinks to its contact depth in the first steps)
    tangential = "corrected" if method == "pbfd" else "pbd"
    integrator, order = ("pbfd", None) if method == "pbfd" else ("pbad", 2)
    forces = ["gravity", ("pbfd_contact", {"normal_stiffness": 1e5, "friction": C_par, "tangential": tangential})]
    sim = pbf.Simulator(box, integrator, order=order, dt=dt, forces=forces, backend="c", on_failure="continue")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = sim.rollout(q0, np.r_[V0, 0, 0, 0, 0, 0], duration=duration)
    finite = bool(np.all(np.isfinite(tr.q)))
    return {"method": method, "param": C_par, "dt": dt, "distance": float(tr.q[-1, 0]) if finite else None,
            "status": tr.status.value, "wall": tr.wall_time}


def mujoco_xml(mu: float, dt: float, cone: str) -> str:
    hx, hy, hz = HALF
    return (f'<mujoco><option timestep="{dt!r}" cone="{cone}"/><worldbody>'
            f'<geom type="plane" size="50 50 0.1" friction="{mu!r} 0.005 0.0001"/>'
            f'<body pos="0 0 {hz!r}"><freejoint/><geom type="box" size="{hx!r} {hy!r} {hz!r}" mass="{MASS!r}" '
            f'friction="{mu!r} 0.005 0.0001"/></body></worldbody></mujoco>')


def run_dry(mu: float, dt: float, duration: float) -> dict:
    box = box_model()
    q0 = box.neutral()
    q0[2] = HALF[2]
    sim = pbf.Simulator(box, "ne_dry_friction", dt=dt, forces=["gravity", ("dry_friction", {"mu": mu})],
                        on_failure="continue")
    tr = sim.rollout(q0, np.r_[V0, 0, 0, 0, 0, 0], duration=duration)
    finite = bool(np.all(np.isfinite(tr.q)))
    return {"method": "ne_dry_friction", "param": mu, "dt": dt, "distance": float(tr.q[-1, 0]) if finite else None,
            "status": tr.status.value, "wall": tr.wall_time}


def run_mujoco(mu: float, dt: float, duration: float, cone: str) -> dict | None:
    try:
        import mujoco
    except ImportError:
        return None
    m = mujoco.MjModel.from_xml_string(mujoco_xml(mu, dt, cone))
    d = mujoco.MjData(m)
    d.qvel[0] = V0
    steps = int(round(duration / dt))
    t0 = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(m, d)
    wall = time.perf_counter() - t0
    finite = bool(np.all(np.isfinite(d.qpos)))
    return {"method": f"mujoco_{cone}", "param": mu, "dt": dt, "distance": float(d.qpos[0]) if finite else None,
            "status": "ok" if finite else "diverged", "wall": wall}


def monotone(values) -> bool:
    v = [x for x in values]
    return all(a is not None and b is not None and a > b for a, b in zip(v, v[1:]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="three parameters, two dt, 1 s")
    ap.add_argument("--duration", type=float, default=None)
    args = ap.parse_args(argv)
    duration = args.duration or (1.0 if args.quick else 3.0)
    c_par = C_PAR[::3] if args.quick else C_PAR
    mus = MU[::2] if args.quick else MU
    dts = (0.01, 0.1) if args.quick else DTS
    rows = []
    print(f"BOX-SLIDE: {duration:g} s from {V0:g} m/s; distance [m] along the friction parameter")
    for method, grid in (("pbfd", c_par), ("pbd", c_par), ("ne_dry_friction", mus), ("mujoco_pyramidal", mus),
                         ("mujoco_elliptic", mus)):
        for dt in dts:
            line = []
            for param in grid:
                if method.startswith("mujoco"):
                    r = run_mujoco(param, dt, duration, method.split("_")[1])
                elif method == "ne_dry_friction":
                    r = run_dry(param, dt, duration)
                else:
                    r = run_ours(method, param, dt, duration)
                if r is None:
                    break
                rows.append(r)
                line.append(r)
            if not line:
                print(f"{method}: mujoco not installed, skipped")
                break
            dist = [r["distance"] for r in line]
            text = " ".join(f"{r['param']:g}:{'-' if r['distance'] is None else format(r['distance'], '.3f')}"
                            + ("" if r["status"] == "ok" else "!") for r in line)
            print(f"{method:<18} dt {dt:<6g} {text}   monotone: {monotone(dist)}   "
                  f"wall {sum(r['wall'] for r in line):.3g} s", flush=True)
    write_json("box_slide.json", {"duration": duration, "rows": rows})
    plot(rows, out_path("box_slide.png"))
    print(f"\nwrote {out_path('box_slide.json')} and {out_path('box_slide.png')}  ('!': a run not ok)")
    return 0


def plot(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig, axes = plt.subplots(1, len(methods), figsize=(4 * len(methods), 3.5), squeeze=False)
    for ax, method in zip(axes[0], methods):
        for dt in sorted({r["dt"] for r in rows if r["method"] == method}):
            pts = [(r["param"], r["distance"]) for r in rows if r["method"] == method and r["dt"] == dt
                   and r["distance"] is not None]
            if pts:
                x, y = zip(*pts)
                ax.semilogx(x, y, "o-", label=f"dt {dt:g}")
        ax.set_title(method)
        ax.set_xlabel("mu" if method.startswith("mujoco") else "C_par")
        ax.set_ylabel("distance [m]")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
