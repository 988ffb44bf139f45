"""CHAIN-SLOPE (seed 002 Fig. 6): a floating 10-link chain sliding down a slope; time against dt, and the
time to a consistent answer for PBFD, the Newton-Euler dry-friction baseline and MuJoCo in one run.

The chain of DESIGN.md (1 m links of 1 kg, ball2 joints) on a free base lies straight across a 20-degree
slope (links along the horizontal y direction, at rest) and slides down under gravity for ``--duration``
seconds (default 10). Contact points sit at both ends of every link's axis (22 points); MuJoCo gets tiny
spheres at the same places, so the three methods see the same contact geometry. Friction: ``C_par`` for
PBFD (``pbfd`` + ``pbfd_contact``), ``mu`` for the baseline (``ne_dry_friction`` + ``dry_friction``) and for
MuJoCo (pyramidal cone).

The outcome is the distance the chain's centre of mass slid along the slope at the end. For each method
the script runs every dt of its grid and prints the outcome, the wall time and whether the run ended ok,
then the **time to a consistent answer**: the largest dt whose outcome is within 5% of the same method's
finest-dt outcome, and the wall time of that run; and the ratios of PBFD's to the others'. Wall times are
the rollouts alone (building and compiling the generated C are not counted; the baseline runs in the
CasADi VM, as its QP is a qpOASES call).

Usage::

    python benchmarks/chain_slope.py                  # 10 links, 10 s
    python benchmarks/chain_slope.py --quick          # 3 links, 1 s, two dt per method (the tests)

Writes ``chain_slope.json`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT``.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pbframework as pbf  # noqa: E402

from _common import out_path, size_options, write_json  # noqa: E402

SLOPE = math.radians(20.0)
NORMAL = (math.sin(SLOPE), 0.0, math.cos(SLOPE))      # the slope descends along +x
C_PAR = 1e7
MU = 0.2
GRIDS = {"pbfd": (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1),
         "ne_dry_friction": (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1),
         "mujoco": (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025)}


def chain_on_slope(n: int):
    """``(model, q0, com)``: :func:`pbframework.models.chain_slope` and its centre-of-mass function."""
    model, q0, _ = pbf.models.chain_slope(n, math.degrees(SLOPE))
    return model, q0, pbf.kinematics.center_of_mass(model)


def slid(com, q0, qT) -> float:
    """Distance the centre of mass moved down the slope (along its steepest descent)."""
    down = np.array([math.cos(SLOPE), 0.0, -math.sin(SLOPE)])
    return float(down @ (np.asarray(com(qT)).ravel() - np.asarray(com(q0)).ravel()))


def run_ours(method: str, n: int, dt: float, duration: float) -> dict:
    model, q0, com = chain_on_slope(n)
    if method == "pbfd":
        sim = pbf.Simulator(model, "pbfd", dt=dt, backend="c", on_failure="continue", forces=[
            "gravity", ("pbfd_contact", {"normal_stiffness": 1e5, "friction": C_PAR, "normal": NORMAL})])
    else:
        sim = pbf.Simulator(model, "ne_dry_friction", dt=dt, on_failure="continue", forces=[
            "gravity", ("dry_friction", {"mu": MU, "normal": NORMAL})])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = sim.rollout(q0, None, duration=duration)
    finite = bool(np.all(np.isfinite(tr.q)))
    return {"method": method, "dt": dt, "outcome": slid(com, q0, tr.q[-1]) if finite and tr.ok else None,
            "status": tr.status.value, "wall": tr.wall_time, "steps": tr.steps}


def mujoco_xml(n: int, dt: float) -> str:
    m = pbf.models.chain(n)
    bodies = ""
    for i in reversed(range(n)):
        link = m.links[i]
        I = np.diag(link.inertia)
        pos = "0 0 0" if i == 0 else "1 0 0"
        joint = '<freejoint/>' if i == 0 else ('<joint type="hinge" axis="0 1 0"/><joint type="hinge" axis="0 0 1"/>')
        bodies = (f'<body pos="{pos}">{joint}<inertial pos="0.5 0 0" mass="1" diaginertia="{I[0]:.17g} {I[1]:.17g} {I[2]:.17g}"/>'
                  f'<geom type="sphere" size="0.005" pos="0 0 0" mass="0"/><geom type="sphere" size="0.005" pos="1 0 0" '
                  f'mass="0"/>' + bodies + "</body>")
    nx, ny, nz = NORMAL
    return (f'<mujoco><option timestep="{dt!r}" cone="pyramidal"/><default><geom friction="{MU!r} 0.005 0.0001"/>'
            f'</default><worldbody><geom type="plane" size="100 100 0.1" zaxis="{nx:.17g} {ny:.17g} {nz:.17g}"/>'
            f'{bodies}</worldbody></mujoco>')


def run_mujoco(n: int, dt: float, duration: float) -> dict | None:
    try:
        import mujoco
    except ImportError:
        return None
    model, q0, com = chain_on_slope(n)
    m = mujoco.MjModel.from_xml_string(mujoco_xml(n, dt))
    d = mujoco.MjData(m)
    qpos = np.array(q0)
    qpos[3:7] = np.roll(q0[3:7], 1)                      # MuJoCo's (w, x, y, z)
    qpos[2] += 0.005                                    # the spheres' radius
    d.qpos[:] = qpos
    steps = int(round(duration / dt))
    t0 = time.perf_counter()
    t_bad = None
    for _ in range(steps):
        t_before = d.time
        mujoco.mj_step(m, d)
        if d.warning[mujoco.mjtWarning.mjWARN_BADQACC].number:     # MuJoCo resets the state and goes on
            t_bad = t_before + dt
            break
    wall = time.perf_counter() - t0
    unstable = bool(d.warning[mujoco.mjtWarning.mjWARN_BADQACC].number)
    qT = np.array(d.qpos)
    qT[3:7] = np.roll(qT[3:7], -1)
    finite = bool(np.all(np.isfinite(qT))) and not unstable
    return {"method": "mujoco", "dt": dt, "outcome": slid(com, q0, qT) if finite else None,
            "status": "ok" if finite else f"diverged at {t_bad if t_bad is not None else d.time:.4g} s",
            "wall": wall, "steps": steps}


def consistent(rows) -> dict | None:
    """The largest dt within 5% of the method's finest-dt outcome, with its wall time."""
    ok = [r for r in rows if r["outcome"] is not None]
    if not ok:
        return None
    ref = min(ok, key=lambda r: r["dt"])
    good = [r for r in ok if abs(r["outcome"] - ref["outcome"]) <= 0.05 * abs(ref["outcome"])]
    best = max(good, key=lambda r: r["dt"])
    return {"dt": best["dt"], "wall": best["wall"], "outcome": best["outcome"], "reference": ref["outcome"],
            "reference_dt": ref["dt"]}


def main(argv=None) -> int:
    duration, n, args = size_options(__doc__, argv, 1.0, 10.0)
    rows, summary = [], {}
    print(f"CHAIN-SLOPE: {n} links, {duration:g} s on a {math.degrees(SLOPE):g}-degree slope; C_par {C_PAR:g}, "
          f"mu {MU}; outcome = distance slid by the centre of mass [m]")
    for method, grid in GRIDS.items():
        dts = (grid[1], grid[-2]) if args.quick else grid
        mine = []
        for dt in dts:
            r = run_mujoco(n, dt, duration) if method == "mujoco" else run_ours(method, n, dt, duration)
            if r is None:
                print("mujoco not installed: peer skipped")
                break
            mine.append(r)
            out = "-" if r["outcome"] is None else f"{r['outcome']:.4f}"
            print(f"{method:<16} dt {dt:<7g} {r['status']:<12} slid {out:>9}  wall {r['wall']:.3g} s", flush=True)
        rows += mine
        summary[method] = consistent(mine)
    print("\ntime to a consistent answer (largest dt within 5% of the method's finest-dt outcome)")
    for method, c in summary.items():
        if c:
            print(f"  {method:<16} dt {c['dt']:g}: {c['outcome']:.4f} m (finest, dt {c['reference_dt']:g}: "
                  f"{c['reference']:.4f} m), wall {c['wall']:.3g} s")
    if summary.get("pbfd"):
        for other in ("ne_dry_friction", "mujoco"):
            if summary.get(other):
                print(f"  PBFD / {other}: wall-time ratio {summary['pbfd']['wall'] / summary[other]['wall']:.3g}")
    write_json("chain_slope.json", {"links": n, "duration": duration, "rows": rows, "summary": summary})
    print(f"\nwrote {out_path('chain_slope.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
