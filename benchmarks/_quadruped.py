"""QUADRUPED-TRACK scenes shared by ``quadruped_track.py`` and ``examples/quadruped_walk.py``: the robots with
their contact model and tracking controller in pbframework, the same robots in MuJoCo, and the outcomes
(walking distance, jump height, torso tilt).

Both simulators get the same robot (solo12's URDF inertias; the spider of DESIGN.md), the same targets
(:func:`pbframework.gaits.quadruped_targets`), the same PD law ``kp (qbar(t) - q) - kd qdot`` on the 12 leg
coordinates, the same friction coefficient and gravity. Contact differs by design: pbframework's is the
wrench polytope of seed 001 (a smooth penetration force law), MuJoCo's its own soft contact with default
solver parameters (a sphere at each foot, radius :data:`pbframework.models.SOLO12_FOOT_RADIUS`, or the
spider's contact points).
"""

from __future__ import annotations

import math
import time
import xml.etree.ElementTree as ET

import numpy as np

from pbframework import models
from pbframework.gaits import quadruped_targets

MU = 0.8
GAINS = {"solo12": (8.0, 0.2), "spider": (300.0, 5.0)}          # kp (N m / rad), kd (N m s / rad)
CONTACT = {"solo12": {"force_scale": 2000.0, "depth_scale": 0.01, "zeta": 1e-5},
           "spider": {"force_scale": 5000.0, "depth_scale": 0.01, "zeta": 1e-5}}


def robot(name: str):
    """``(model, q0, ground_offset)``: the model, its standing start and the plane its contact points touch."""
    if name == "solo12":
        m = models.solo12()
        return m, models.solo12_q0(m), models.SOLO12_FOOT_RADIUS
    if name == "spider":
        m = models.spider()
        return m, models.spider_q0(m), 0.0
    raise ValueError(f"unknown robot {name!r} (solo12, spider)")


def forces(name: str, model, task: str, offset: float, law: str = "stable_pd"):
    """Gravity, the tracking PD (``law``: ``stable_pd``, or ``pd`` evaluated where the integrator evaluates its
    forces) and the wrench-polytope contact."""
    dofs, target = quadruped_targets(model, task)
    kp, kd = GAINS[name]
    return ["gravity",
            (law, {"kp": kp, "kd": kd, "target": target, "dofs": dofs}),
            ("wrench_polytope", {"mu": MU, "offset": offset, **CONTACT[name]})]


def base_indices(model):
    """``(x, y, z)`` position indices and the orientation representation of the floating base."""
    names = model.dof_names
    root = names[0].split(":")[0]
    return [model.dof_index(f"{root}:{c}") for c in "xyz"], root


def torso_up(model, q: np.ndarray) -> np.ndarray:
    """The torso's z axis in the world for each configuration row (its tilt is ``acos(up_z)``)."""
    from pbframework.kinematics import link_transform

    T = link_transform(model, model.links[0].name)
    return np.array([np.asarray(T(qi))[:3, 2] for qi in q])


def outcomes(model, t: np.ndarray, q: np.ndarray, q0: np.ndarray, task: str) -> dict:
    """Walking distance (base x travelled at the end; also the planar distance), jump height (mean over
    periods of the peak base height above the standing height) and max torso tilt (degrees)."""
    (ix, iy, iz), _ = base_indices(model)
    up = torso_up(model, q[:: max(1, len(q) // 400)])
    tilt = float(np.degrees(np.arccos(np.clip(up[:, 2], -1, 1))).max())
    out = {"tilt_deg": tilt, "walk_x": float(q[-1, ix] - q0[ix]),
           "walk_dist": float(math.hypot(q[-1, ix] - q0[ix], q[-1, iy] - q0[iy])),
           "tracking": tracking_ratio(model, t, q, task)}
    if task == "jump":
        period = 2.0
        peaks = []
        for k in range(int(round(t[-1] / period))):
            sel = (t >= k * period) & (t < (k + 1) * period)
            if np.any(sel):
                peaks.append(float(q[sel, iz].max() - q0[iz]))
        out["jump_height"] = float(np.mean(peaks)) if peaks else float("nan")
    return out


def tracking_ratio(model, t: np.ndarray, q: np.ndarray, task: str) -> float:
    """How much of the targets' motion the legs reproduce: the standard deviation over time of the leg
    coordinates divided by that of their targets, summed over the coordinates (1: full amplitude), over the
    second half of the run."""
    import casadi as ca

    dofs, target = quadruped_targets(model, task)
    ts = ca.SX.sym("t")
    f = ca.Function("target", [ts], [target(ts)]).map(len(t))
    T = np.asarray(f(t[None, :])).T                          # (len(t), n)
    idx = [model.dof_index(d) for d in dofs]
    half = slice(len(t) // 2, None)
    return float(np.std(q[half][:, idx], axis=0).sum() / max(np.std(T[half], axis=0).sum(), 1e-12))


# -- MuJoCo -------------------------------------------------------------------------------------------------

def _strip_urdf(path) -> str:
    """solo12's URDF without meshes: visuals and collisions dropped, a sphere on each foot."""
    tree = ET.parse(path)
    root = tree.getroot()
    for link in root.iter("link"):
        for tag in ("visual", "collision"):
            for el in list(link.findall(tag)):
                link.remove(el)
        if link.get("name", "").endswith("_FOOT"):
            col = ET.SubElement(link, "collision")
            geo = ET.SubElement(col, "geometry")
            ET.SubElement(geo, "sphere", radius=repr(models.SOLO12_FOOT_RADIUS))
    mj = ET.SubElement(root, "mujoco")
    ET.SubElement(mj, "compiler", discardvisual="true", fusestatic="false", balanceinertia="false")
    return ET.tostring(root, encoding="unicode")


def mujoco_solo12(dt: float, integrator: str = "implicitfast"):
    """``(MjModel, joint order)``: solo12 with a free joint, position actuators (kp, kv = the PD gains) on the 12
    leg joints, a floor plane, friction ``MU``, MuJoCo's default contact and solver settings otherwise."""
    import mujoco

    urdf = models.example_robot_data_dir() / "solo_description" / "robots" / "solo12.urdf"
    spec = mujoco.MjSpec.from_string(_strip_urdf(urdf))
    spec.option.timestep = dt
    spec.option.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    base = spec.worldbody.first_body()
    base.add_freejoint()
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1], friction=[MU, 0.005, 0.0001])
    for g in spec.geoms:
        g.friction = [MU, 0.005, 0.0001]
    kp, kd = GAINS["solo12"]
    names = [f"{leg}_{j}" for j in ("HAA", "HFE", "KFE") for leg in ("FL", "FR", "HL", "HR")]
    for n in names:
        a = spec.add_actuator(name=n, target=n, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        a.set_to_position(kp=kp, kv=kd)
    return spec.compile(), names


SPIDER_SPHERE = 0.005
"""Radius (m) of MuJoCo's contact spheres at the spider's contact points (ours are points on the floor)."""


def run_mujoco(robot_name: str, task: str, dt: float, duration: float, integrator: str = "implicitfast") -> dict:
    """``robot_name`` tracking ``task`` in MuJoCo; the outcome in pbframework's coordinates. The targets are
    evaluated for every step before the loop, so the wall time is MuJoCo's stepping alone."""
    import casadi as ca
    import mujoco

    model, q0, _ = robot(robot_name)
    dofs, target = quadruped_targets(model, task)
    if robot_name == "solo12":
        m, names = mujoco_solo12(dt, integrator)
        adr = [m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n)] for n in names]
        ours = [model.dof_index(n) for n in names]

        def to_qpos(q):
            qpos = np.zeros(m.nq)
            qpos[:3] = q[:3]
            qpos[3:7] = [q[6], q[3], q[4], q[5]]
            qpos[adr] = q[ours]
            return qpos

        def from_qpos(qpos):
            q = np.zeros(model.nq)
            q[:3] = qpos[:3]
            q[3:7] = [qpos[4], qpos[5], qpos[6], qpos[3]]
            q[ours] = qpos[adr]
            return q
        start = q0
    else:
        import _mjcf

        kp, kd = GAINS[robot_name]
        m = mujoco.MjModel.from_xml_string(_mjcf.model_mjcf(model, dt=dt, integrator=integrator, mu=MU,
                                                              contact_radius=SPIDER_SPHERE, actuated=dofs,
                                                              kp=kp, kd=kd))
        names = dofs

        def to_qpos(q):
            return _mjcf.to_mujoco_qpos(model, q)

        def from_qpos(qpos):
            return _mjcf.from_mujoco_qpos(model, qpos)
        start = q0.copy()
        start[base_indices(model)[0][2]] += SPIDER_SPHERE        # the spheres' bottoms on the floor
    d = mujoco.MjData(m)
    d.qpos[:] = to_qpos(start)
    mujoco.mj_forward(m, d)
    steps = int(round(duration / dt))
    times = np.arange(steps + 1) * dt
    ts = ca.SX.sym("t")
    order = [dofs.index(n) for n in names]
    ctrl = np.asarray(ca.Function("target", [ts], [target(ts)]).map(steps)(times[None, 1:])).T[:, order]
    qpos = np.empty((steps + 1, m.nq))
    qpos[0] = d.qpos
    ok = True
    t0 = time.perf_counter()
    for k in range(steps):
        d.ctrl[:] = ctrl[k]
        mujoco.mj_step(m, d)
        qpos[k + 1] = d.qpos
        if not np.all(np.isfinite(d.qpos)):
            ok = False
            qpos, times = qpos[:k + 2], times[:k + 2]
            break
    wall = time.perf_counter() - t0
    qs = np.array([from_qpos(x) for x in qpos])
    if robot_name != "solo12":
        qs[:, base_indices(model)[0][2]] -= SPIDER_SPHERE
    warned = int(sum(d.warning[i].number for i in range(len(d.warning))))
    return {"t": times, "q": qs, "ok": ok and warned == 0, "wall": wall, "warnings": warned, "q0": q0,
            "model": model}
