"""CHAIN-SLOPE (seed 002 Fig. 6): a floating 10-link chain sliding down a slope; time against dt (Fig. 6b),
against the number of contact points (Fig. 6c) and against the friction parameter (Fig. 6d), for PBFD, the
Newton-Euler dry-friction baseline and MuJoCo in one run.

The chain of DESIGN.md (1 m links of 1 kg, ball2 joints) on a free base lies straight across a 20-degree
slope (links along the horizontal y direction, at rest) and slides down under gravity. Friction: ``C_par``
for PBFD (``pbfd`` + ``pbfd_contact``), ``mu`` for the baseline (``ne_dry_friction`` + ``dry_friction``)
and for MuJoCo (its soft contact with a pyramidal and with an elliptic cone, side by side). The outcome of
a run is the distance the chain's centre of mass slid along the slope at the end. Wall times are the
rollouts alone (building and compiling the generated C are not counted; the baseline runs in the CasADi
VM, as its QP is a qpOASES call).

1. **dt axis** (Fig. 6b), ``--duration`` seconds (default 10): contact points at both ends of every link's
   axis (22 points); MuJoCo gets tiny spheres (radius 5 mm) at the same places (``mujoco_pyramidal``,
   ``mujoco_elliptic``: the same contact geometry as ours). Two further MuJoCo variants, each a different
   contact geometry, clearly labelled: the chain's real collision shape, a capsule of radius 0.05 m along
   each link (``mujoco_capsule_*``: a capsule chain *rolls* down the slope, it does not slide), and tiny
   spheres on the square prism of the contact-count axis' coarsest sampling (``mujoco_prism_*``: two rows
   of points touch the slope, 3.5 cm below the axis). Every dt of each method's grid runs; then the **time
   to a consistent answer**: the largest dt whose outcome is within 5% of the same method's finest-dt
   outcome, its wall time, and the ratios of PBFD's to the others'.

   Why the variants: on the axis points, friction at the spheres' surface (5 mm below the axis) turns the
   straight chain about its own axis, which nothing resists (the ball2 joints have no twist and the links'
   axial inertia is 0.00125 kg m^2): it spins up at ``mu m g cos a r / I`` = 7.4 rad/s^2 and, spinning, the
   joints start to bend and MuJoCo reports ``BADQACC`` after 3-7 s at every dt, with either cone. Capsules
   make it roll (45 rad/s after 1 s) and fail sooner. On the prism the chain lies on a face and cannot
   turn; there MuJoCo slides as Coulomb says.
2. **contact-count axis** (Fig. 6c, "more contact points derived by refining the mesh"): each link gets a
   capsule (radius 0.05 m, the cylinder's length) sampled by :func:`pbframework.geometry.sample_contact_points`
   at the spacings :data:`SPACINGS` (the coarsest ``None``, then 0.25 m and 0.1 m: 10, 22 and 46 points a
   link, rings of 4 points, turned so that the chain lies on a face of its square prism: two rows of points
   touch the slope). MuJoCo gets a tiny sphere at every sampled point. All methods at dt :data:`AXIS_DT`,
   over a horizon shortened to :data:`CONTACT_DURATION` seconds (printed). Printed: the points of the
   model, the average number of points **in contact** over the run (a point within :data:`CONTACT_TOL` of
   the slope; the baseline's sliding points hover ``dt mu |v_t|`` above it, the known artefact of
   Anitescu's relaxation, so they never penetrate; the number penetrating, depth > 0, is printed too; for
   MuJoCo its contact count ``ncon``), the wall time and the outcome.
3. **friction axis** (Fig. 6d): the dt-axis scene at dt :data:`AXIS_DT` over ``--duration`` seconds,
   ``C_par`` over :data:`C_PAR_GRID` for PBFD and ``mu`` over :data:`MU_GRID` for the baseline and MuJoCo
   (tiny spheres, both cones): time and outcome (the chain sticks for ``mu >= tan 20 deg = 0.364``).

MuJoCo's warnings (``d.warning``: ``BADQACC`` and the others) are recorded for every run, with the time by
which the first was seen (read every 1/200 of the horizon, so that no Python runs between MuJoCo's steps
in the timed loop); its default contact parameters (solref, solimp) are used as they are. When the state
goes bad (``BADQACC``, ``BADQPOS``, ``BADQVEL``) MuJoCo resets it to the model's start and goes on, so the
run stops there and has no outcome.

The default run takes about 2.5 minutes on a 2-core machine with the generated C already compiled (about 5
with the compiles: a C library per contact sampling and per ``C_par``).

Usage::

    python benchmarks/chain_slope.py                  # 10 links, 10 s (the contact axis: 2 s)
    python benchmarks/chain_slope.py --quick          # 3 links, 1 s, two dt, two densities, three frictions

Writes ``chain_slope.json`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT``.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
import warnings
from pathlib import Path

import casadi as ca
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pbframework as pbf  # noqa: E402
from pbframework.model import ArticulatedBody, Shape  # noqa: E402

from _common import out_path, size_options, write_json  # noqa: E402

SLOPE = math.radians(20.0)
NORMAL = (math.sin(SLOPE), 0.0, math.cos(SLOPE))      # the slope descends along +x
C_PAR = 1e7
MU = 0.2
GRIDS = {"pbfd": (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1),
         "ne_dry_friction": (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1),
         "mujoco": (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025)}
MUJOCO_VARIANTS = (("mujoco_pyramidal", "pyramidal", "spheres"), ("mujoco_elliptic", "elliptic", "spheres"),
                   ("mujoco_capsule_pyramidal", "pyramidal", "capsule"),
                   ("mujoco_capsule_elliptic", "elliptic", "capsule"),
                   ("mujoco_prism_pyramidal", "pyramidal", "prism"), ("mujoco_prism_elliptic", "elliptic", "prism"))
"""``(name, cone, geometry)``: ``spheres``: tiny spheres at the contact points; ``capsule``: a capsule geom
along each link; ``prism``: tiny spheres at the points of :func:`capsule_chain` at its coarsest sampling (dt
axis only; on the contact axis every MuJoCo run has its spheres at that axis' points)."""
SPHERE = 0.005
"""Radius of MuJoCo's tiny spheres at the contact points (m)."""
RADIUS = 0.05
"""The links' radius (DESIGN.md CHAIN-N): the capsules' radius (m)."""
AXIS_DT = 0.001
"""The one dt of the contact-count and friction axes, every method (seed 002's safe dt for Newton-Euler)."""
SPACINGS = (None, 0.25, 0.1)
CONTACT_DURATION = 2.0
"""Horizon of the contact-count axis (s), shortened to keep the default run under 10 minutes."""
CONTACT_TOL = 0.005
"""A point is in contact when it lies within this distance of the slope (m)."""
C_PAR_GRID = (1e5, 1e6, 1e7, 1e8, 1e9)
MU_GRID = (0.05, 0.1, 0.2, 0.4, 0.8)
WARNING_CHECKS = 200
"""MuJoCo's warnings are read this many times a run (every ``horizon / 200`` seconds)."""


def chain_on_slope(n: int):
    """``(model, q0, com)``: :func:`pbframework.models.chain_slope` and its centre-of-mass function."""
    model, q0, _ = pbf.models.chain_slope(n, math.degrees(SLOPE))
    return model, q0, pbf.kinematics.center_of_mass(model)


def capsule_chain(n: int, spacing: float | None):
    """``(model, q0, com)``: the chain with a capsule along each link (radius :data:`RADIUS`, the cylinder's
    length) sampled at ``spacing``, lying on a face of the square prism of its 4-point rings."""
    model, q0, com = chain_on_slope(n)
    s = math.sqrt(0.5)
    pose = np.eye(4)
    pose[:3, :3] = np.column_stack([(0.0, s, -s), (0.0, s, s), (1.0, 0.0, 0.0)])    # capsule z: the link's x
    pose[:3, 3] = (0.5, 0.0, 0.0)
    capsule = Shape("capsule", (RADIUS, 0.5), pose)
    links = [dataclasses.replace(x, shapes=(capsule,)) for x in model.links]
    model = pbf.geometry.sample_contact_points(ArticulatedBody(links, model.joints, name=model.name), spacing,
                                               keep=False)
    q0 = np.array(q0)
    q0[:3] += RADIUS * s * np.array(NORMAL)             # the lowest rows of points on the slope
    return model, q0, com


def slid(com, q0, qT) -> float:
    """Distance the centre of mass moved down the slope (along its steepest descent)."""
    down = np.array([math.cos(SLOPE), 0.0, -math.sin(SLOPE)])
    return float(down @ (np.asarray(com(qT)).ravel() - np.asarray(com(q0)).ravel()))


def contacts_of(model, qs, radius: float = 0.0) -> tuple[float, float]:
    """Average number of contact points within :data:`CONTACT_TOL` of the slope, and penetrating it, over
    the configurations ``qs`` (rows); ``radius``: of spheres about the points (MuJoCo's)."""
    geo = pbf.geometry.contact_geometry(model, pbf.geometry.Plane(NORMAL))
    phi = np.array(geo.map(len(qs))(ca.DM(np.asarray(qs).T))[2]).reshape(len(qs), model.n_contacts) - radius
    return float(np.mean(np.sum(phi < CONTACT_TOL, axis=1))), float(np.mean(np.sum(phi < 0, axis=1)))


def run_ours(method: str, scene, dt: float, duration: float, friction: float | None = None,
             count: bool = False) -> dict:
    """One rollout of ``pbfd`` (``friction`` = C_par) or ``ne_dry_friction`` (``friction`` = mu)."""
    model, q0, com = scene
    if method == "pbfd":
        sim = pbf.Simulator(model, "pbfd", dt=dt, backend="c", on_failure="continue", forces=[
            "gravity", ("pbfd_contact", {"normal_stiffness": 1e5, "friction": friction or C_PAR,
                                         "normal": NORMAL})])
    else:
        sim = pbf.Simulator(model, "ne_dry_friction", dt=dt, on_failure="continue", forces=[
            "gravity", ("dry_friction", {"mu": MU if friction is None else friction, "normal": NORMAL})])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = sim.rollout(q0, None, duration=duration)
    finite = bool(np.all(np.isfinite(tr.q)))
    row = {"method": method, "dt": dt, "outcome": slid(com, q0, tr.q[-1]) if finite and tr.ok else None,
           "status": tr.status.value, "wall": tr.wall_time, "steps": tr.steps}
    if count:
        row["in_contact"], row["penetrating"] = contacts_of(model, tr.q) if finite else (None, None)
    return row


def mujoco_xml(model: ArticulatedBody, dt: float, cone: str, capsule: bool = False, mu: float = MU) -> str:
    """MJCF of the chain on the slope: the same links and joints, tiny spheres at the contact points or a
    capsule along each link."""
    bodies = ""
    for i in reversed(range(len(model.links))):
        link = model.links[i]
        I = np.diag(link.inertia)
        pos = "0 0 0" if i == 0 else "1 0 0"
        joint = '<freejoint/>' if i == 0 else ('<joint type="hinge" axis="0 1 0"/><joint type="hinge" axis="0 0 1"/>')
        if capsule:
            geoms = f'<geom type="capsule" size="{RADIUS!r}" fromto="0 0 0 1 0 0" mass="0"/>'
        else:
            geoms = "".join(f'<geom type="sphere" size="{SPHERE!r}" pos="{p[0]:.17g} {p[1]:.17g} {p[2]:.17g}" '
                            f'mass="0"/>' for p in link.contact_points)
        c = link.com
        bodies = (f'<body pos="{pos}">{joint}<inertial pos="{c[0]:.17g} {c[1]:.17g} {c[2]:.17g}" '
                  f'mass="{link.mass!r}" diaginertia="{I[0]:.17g} {I[1]:.17g} {I[2]:.17g}"/>{geoms}'
                  + bodies + "</body>")
    nx, ny, nz = NORMAL
    return (f'<mujoco><option timestep="{dt!r}" cone="{cone}"/><default><geom friction="{mu!r} 0.005 0.0001"/>'
            f'</default><worldbody><geom type="plane" size="100 100 0.1" zaxis="{nx:.17g} {ny:.17g} {nz:.17g}"/>'
            f'{bodies}</worldbody></mujoco>')


def run_mujoco(name: str, scene, dt: float, duration: float, cone: str, capsule: bool = False, mu: float = MU,
               count: bool = False) -> dict | None:
    """One MuJoCo run, its warnings recorded; None when MuJoCo is not installed.

    The timed run steps in :data:`WARNING_CHECKS` chunks (``mj_step`` with ``nstep``, no Python between the
    steps of a chunk) and reads the warnings after each, so the time of a first warning is known to a chunk
    (``first_warning_at``: the end of that chunk). With ``count``, an untimed second run (MuJoCo is
    deterministic) steps one at a time to count the contacts."""
    try:
        import mujoco
    except ImportError:
        return None
    model, q0, com = scene
    m = mujoco.MjModel.from_xml_string(mujoco_xml(model, dt, cone, capsule, mu))
    qpos = np.array(q0)
    qpos[3:7] = np.roll(q0[3:7], 1)                      # MuJoCo's (w, x, y, z)
    qpos[:3] += (RADIUS if capsule else SPHERE) * np.array(NORMAL)     # the geoms' surface on the points
    kinds = {getattr(mujoco.mjtWarning, k): k.removeprefix("mjWARN_") for k in dir(mujoco.mjtWarning)
             if k.startswith("mjWARN_")}
    bad = (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL)
    steps = int(round(duration / dt))
    chunk = max(1, steps // WARNING_CHECKS)
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    first, done = None, 0
    t0 = time.perf_counter()
    while done < steps:
        k = min(chunk, steps - done)
        mujoco.mj_step(m, d, k)
        done += k
        if first is None and any(d.warning[w].number for w in kinds):
            first = done * dt
        if any(d.warning[w].number for w in bad):     # MuJoCo has reset the state to the start
            break
    wall = time.perf_counter() - t0
    warned = {text: int(d.warning[w].number) for w, text in kinds.items() if d.warning[w].number}
    qT = np.array(d.qpos)
    qT[3:7] = np.roll(qT[3:7], -1)
    finite = bool(np.all(np.isfinite(qT))) and not any(d.warning[w].number for w in bad)
    row = {"method": name, "dt": dt, "outcome": slid(com, q0, qT) if finite else None,
           "status": "ok" if finite else f"diverged by {first:.4g} s",
           "wall": wall, "steps": done, "warnings": warned, "first_warning_at": first}
    if count:       # the spheres' centres are the model's points: in contact within SPHERE + CONTACT_TOL
        row["in_contact"] = row["penetrating"] = None
        if finite:
            d = mujoco.MjData(m)
            d.qpos[:] = qpos
            qs, ncon = [], 0
            for _ in range(steps):
                mujoco.mj_step(m, d)
                ncon += d.ncon
                qs.append(np.r_[d.qpos[:3], d.qpos[4:7], d.qpos[3], d.qpos[7:]])
            row["in_contact"] = contacts_of(model, qs, SPHERE)[0]
            row["penetrating"] = ncon / steps
    return row


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


def fmt(x, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def warn_text(r: dict) -> str:
    if "warnings" not in r:
        return ""
    if not r["warnings"]:
        return "  warnings: none"
    return (f"  warnings: {', '.join(f'{k} x{v}' for k, v in r['warnings'].items())} "
            f"(first by {r['first_warning_at']:.4g} s)")


def run_one(method: str, scene, dt: float, duration: float, friction: float | None = None,
            count: bool = False) -> dict | None:
    """A run of any method by its name (MuJoCo's variants by theirs)."""
    for name, cone, geometry in MUJOCO_VARIANTS:
        if method == name:
            return run_mujoco(name, scene, dt, duration, cone, geometry == "capsule",
                              MU if friction is None else friction, count)
    return run_ours(method, scene, dt, duration, friction, count)


def dt_axis(n: int, duration: float, quick: bool) -> tuple[list, dict]:
    rows, summary = [], {}
    scene, prism = chain_on_slope(n), capsule_chain(n, None)
    print(f"\n[dt axis] outcome = distance slid by the centre of mass [m] in {duration:g} s; C_par {C_PAR:g}, "
          f"mu {MU}")
    for method in ("pbfd", "ne_dry_friction") + tuple(v[0] for v in MUJOCO_VARIANTS):
        grid = GRIDS["mujoco" if method.startswith("mujoco") else method]
        mine = []
        for dt in ((grid[1], grid[-2]) if quick else grid):
            r = run_one(method, prism if method.startswith("mujoco_prism") else scene, dt, duration)
            if r is None:
                print(f"{method}: mujoco not installed, skipped")
                break
            mine.append(r)
            print(f"{method:<25} dt {dt:<7g} {r['status']:<20} slid {fmt(r['outcome']):>9}  wall {r['wall']:.3g} s"
                  f"{warn_text(r)}", flush=True)
        rows += mine
        if mine:
            summary[method] = consistent(mine)
    print("\ntime to a consistent answer (largest dt within 5% of the method's finest-dt outcome)")
    for method, c in summary.items():
        if c:
            print(f"  {method:<25} dt {c['dt']:g}: {c['outcome']:.4f} m (finest, dt {c['reference_dt']:g}: "
                  f"{c['reference']:.4f} m), wall {c['wall']:.3g} s")
        else:
            print(f"  {method:<25} no run ended with an answer")
    if summary.get("pbfd"):
        for other, c in summary.items():
            if other != "pbfd" and c:
                print(f"  PBFD / {other}: wall-time ratio {summary['pbfd']['wall'] / c['wall']:.3g}")
    return rows, summary


def contact_axis(n: int, duration: float, quick: bool) -> list:
    spacings = SPACINGS[:2] if quick else SPACINGS
    print(f"\n[contact-count axis] capsule links sampled at spacings {', '.join(str(s) for s in spacings)} m; "
          f"dt {AXIS_DT:g}; horizon shortened to {duration:g} s; in contact = within {CONTACT_TOL * 1e3:g} mm "
          f"of the slope (MuJoCo: its spheres' surfaces); penetrating: depth > 0 (MuJoCo: its contact count)")
    rows = []
    for spacing in spacings:
        scene = capsule_chain(n, spacing)
        for method in ("pbfd", "ne_dry_friction", "mujoco_pyramidal", "mujoco_elliptic"):
            r = run_one(method, scene, AXIS_DT, duration, count=True)
            if r is None:
                continue
            r.update(spacing=spacing, points=scene[0].n_contacts)
            rows.append(r)
            print(f"{method:<18} spacing {str(spacing):<5} points {r['points']:>4}  "
                  f"in contact {fmt(r['in_contact'], '.1f'):>6}  penetrating {fmt(r['penetrating'], '.1f'):>6}  "
                  f"wall {r['wall']:.3g} s  slid {fmt(r['outcome'])} {r['status']}{warn_text(r)}", flush=True)
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        print(f"  {method:<18} wall-time growth from {mine[0]['points']} to {mine[-1]['points']} points: "
              f"x{mine[-1]['wall'] / mine[0]['wall']:.3g}")
    return rows


def friction_axis(n: int, duration: float, quick: bool) -> list:
    print(f"\n[friction axis] dt {AXIS_DT:g}, {duration:g} s; C_par for PBFD, mu for the others")
    scene = chain_on_slope(n)
    rows = []
    for method, grid in (("pbfd", C_PAR_GRID), ("ne_dry_friction", MU_GRID), ("mujoco_pyramidal", MU_GRID),
                         ("mujoco_elliptic", MU_GRID)):
        for param in (grid[::2] if quick else grid):
            r = run_one(method, scene, AXIS_DT, duration, friction=param)
            if r is None:
                break
            r["param"] = param
            rows.append(r)
            print(f"{method:<18} {'C_par' if method == 'pbfd' else 'mu':<5} {param:<6g} {r['status']:<20} slid "
                  f"{fmt(r['outcome']):>9}  wall {r['wall']:.3g} s{warn_text(r)}", flush=True)
    return rows


def main(argv=None) -> int:
    duration, n, args = size_options(__doc__, argv, 1.0, 10.0)
    t0 = time.perf_counter()
    print(f"CHAIN-SLOPE: {n} links on a {math.degrees(SLOPE):g}-degree slope")
    rows, summary = dt_axis(n, duration, args.quick)
    contact_duration = min(duration, CONTACT_DURATION)
    contacts = contact_axis(n, contact_duration, args.quick)
    friction = friction_axis(n, duration, args.quick)
    write_json("chain_slope.json", {
        "links": n, "duration": duration, "rows": rows, "summary": summary,
        "contacts": {"dt": AXIS_DT, "duration": contact_duration, "tolerance": CONTACT_TOL, "rows": contacts},
        "friction": {"dt": AXIS_DT, "duration": duration, "rows": friction}})
    print(f"\ntotal {time.perf_counter() - t0:.0f} s (builds included)")
    print(f"wrote {out_path('chain_slope.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
