"""Builders for the papers' benchmark models (DESIGN.md "Canonical benchmarks").

Each builder returns an :class:`~pbframework.model.ArticulatedBody`; the matching ``*_q0`` function
returns the benchmark's initial configuration.
"""

from __future__ import annotations

import numpy as np

from .model import WORLD, ArticulatedBody, Joint, JointType, Link, ModelError, transform


def cylinder_inertia(mass: float, length: float, radius: float) -> np.ndarray:
    """Principal inertia about the centre of a solid cylinder whose axis is local x."""
    axial = 0.5 * mass * radius**2
    transverse = mass * (3 * radius**2 + length**2) / 12.0
    return np.array([axial, transverse, transverse])


def box_inertia(mass: float, size) -> np.ndarray:
    """Principal inertia about the centre of a solid box with edge lengths ``size`` (x, y, z)."""
    x, y, z = (float(s) for s in size)
    return mass / 12.0 * np.array([y * y + z * z, x * x + z * z, x * x + y * y])


def _rod(name: str, mass: float, length: float, radius: float, contact_points=()) -> Link:
    return Link(name, mass, com=(0.5 * length, 0.0, 0.0), inertia=cylinder_inertia(mass, length, radius),
                contact_points=np.asarray(contact_points, float).reshape(-1, 3))


def chain(n: int, joint: str = "ball2", *, length: float = 1.0, radius: float = 0.05, mass: float = 1.0,
          axis=(0.0, 1.0, 0.0), floating: bool = False, gravity=(0.0, 0.0, -9.81),
          contact_points: bool = False) -> ArticulatedBody:
    """CHAIN-N of DESIGN.md: ``n`` uniform solid cylinders in series from a fixed base at the origin.

    Args:
        n: number of links (>= 1).
        joint: ``"ball2"`` (hinge about local y then z, the papers' chain, 2n coordinates),
            ``"revolute"`` (one hinge about ``axis`` per joint), ``"spherical"`` or ``"ball"`` (a unit
            quaternion per joint: 4n coordinates, 3n velocities, no gimbal lock).
        length, radius, mass: of each link (defaults 1 m, 0.05 m, 1 kg: inertia
            (0.00125, 0.083958, 0.083958) kg m^2 about the centre of mass (0.5, 0, 0)).
        axis: hinge axis for ``joint="revolute"`` (default local y: swings under gravity).
        floating: attach the first link to the world with a 6-DOF floating joint instead of the first
            ``joint`` (for CHAIN-SLOPE).
        gravity: gravity vector.
        contact_points: put contact points at both ends of every link.

    Each joint sits at the parent's tip (child origin (length, 0, 0) in the parent frame), the first at
    the origin. Use :func:`chain_q0` for the benchmark's initial configuration.
    """
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ModelError(f"chain: n must be a positive integer, got {n!r}")
    JointType.parse(joint, where="chain joint")
    pts = [(0.0, 0.0, 0.0), (length, 0.0, 0.0)] if contact_points else []
    links = [_rod(f"link{i}", mass, length, radius, pts) for i in range(n)]
    joints = []
    for i in range(n):
        parent = WORLD if i == 0 else f"link{i - 1}"
        origin = transform((0.0, 0.0, 0.0) if i == 0 else (length, 0.0, 0.0))
        jtype = "floating" if (floating and i == 0) else joint
        joints.append(Joint(f"joint{i}", jtype, parent, f"link{i}", origin=origin, axis=axis))
    name = f"chain{n}" + ("_floating" if floating else "")
    return ArticulatedBody(links, joints, gravity=gravity, name=name)


def chain_q0(model: ArticulatedBody, z_angle: float = 0.3) -> np.ndarray:
    """CHAIN-N initial configuration: every y-angle 0 and every z-angle ``z_angle`` (rest velocity); a
    ``ball`` joint gets the quaternion of the same rotation, ``Rz(z_angle)``."""
    q = model.neutral()
    for k, name in enumerate(model.dof_names):
        if name.endswith(":rz") and model.joint(name.split(":")[0]).type is not JointType.FLOATING:
            q[k] = z_angle
    for j in model.joints:
        if j.type is JointType.BALL:
            q[model.joint_q_index[j.name]] = (0.0, 0.0, np.sin(z_angle / 2), np.cos(z_angle / 2))
    return q


def chain_energy_scale(model: ArticulatedBody) -> float:
    """The CHAIN-N energy scale of DESIGN.md: potential drop from horizontal to hanging, ``M g sum (i+0.5) L``."""
    g = float(np.linalg.norm(model.gravity))
    total = 0.0
    reach = 0.0
    for link in model.links:
        total += link.mass * g * (reach + link.com[0])
        reach += 2 * link.com[0]
    return total


def swimmer(n_links: int = 4, *, length: float = 1.0, radius: float = 0.05, mass: float = 1.0) -> ArticulatedBody:
    """SWIMMER (seed 000 §6.2): a floating base link and ``n_links - 1`` hinges about local z.

    The default 4-link swimmer has 9 coordinates (6-DOF base + 3 hinges). Neutrally buoyant: gravity is
    zero; propulsion comes from a fluid-drag force model. Links are solid cylinders along local x.
    """
    if n_links < 1:
        raise ModelError(f"swimmer: n_links must be >= 1, got {n_links!r}")
    links = [_rod(f"seg{i}", mass, length, radius) for i in range(n_links)]
    joints = [Joint("root", "floating", WORLD, "seg0")]
    for i in range(1, n_links):
        joints.append(Joint(f"hinge{i}", "revolute", f"seg{i - 1}", f"seg{i}",
                            origin=transform((length, 0, 0)), axis=(0, 0, 1)))
    return ArticulatedBody(links, joints, gravity=(0.0, 0.0, 0.0), name=f"swimmer{n_links}")


def spider(*, torso_size=(0.4, 0.4, 0.1), torso_mass: float = 2.0, thigh: float = 0.3, shin: float = 0.3,
           leg_mass: float = 0.3, leg_radius: float = 0.03) -> ArticulatedBody:
    """SPIDER (seed 000 §6.2, seed 001 §VI): floating torso with 4 legs of ball joint + knee hinge.

    18 coordinates: the 6-DOF base, and per leg a ``ball2`` hip (y then z) and a knee hinge about local y.
    Hips sit at the torso's corners, legs pointing outward along their local x. Contact points: each foot
    (shin tip), each knee, and the torso's 8 corners. Use :func:`spider_q0` for a standing pose.
    """
    sx, sy, sz = (float(s) for s in torso_size)
    corners = [(x, y, z) for x in (-sx / 2, sx / 2) for y in (-sy / 2, sy / 2) for z in (-sz / 2, sz / 2)]
    links = [Link("torso", torso_mass, inertia=box_inertia(torso_mass, torso_size), contact_points=corners)]
    joints = [Joint("root", "floating", WORLD, "torso")]
    for k, (px, py) in enumerate([(1, 1), (-1, 1), (-1, -1), (1, -1)]):
        yaw = np.arctan2(py, px)
        links.append(_rod(f"thigh{k}", leg_mass, thigh, leg_radius, [(thigh, 0, 0)]))
        links.append(_rod(f"shin{k}", leg_mass, shin, leg_radius, [(shin, 0, 0)]))
        joints.append(Joint(f"hip{k}", "ball2", "torso", f"thigh{k}",
                            origin=transform((px * sx / 2, py * sy / 2, 0.0), (0.0, 0.0, yaw))))
        joints.append(Joint(f"knee{k}", "revolute", f"thigh{k}", f"shin{k}",
                            origin=transform((thigh, 0, 0)), axis=(0, 1, 0)))
    return ArticulatedBody(links, joints, name="spider")


def spider_q0(model: ArticulatedBody, hip_lift: float = 0.5, knee: float = 1.4,
              clearance: float = 0.0) -> np.ndarray:
    """A standing pose of :func:`spider`: thighs raised by ``hip_lift``, knees bent by ``knee``, feet
    ``clearance`` above the ground plane z = 0."""
    from .kinematics import contact_positions

    q = np.zeros(model.nq)
    for k in range(4):
        q[model.dof_index(f"hip{k}:ry")] = -hip_lift
        q[model.dof_index(f"knee{k}")] = knee
    P = np.asarray(contact_positions(model)(q))
    q[model.dof_index("root:z")] = -P[2].min() + clearance
    return q


def box(size: float = 0.2, mass: float = 1.0) -> ArticulatedBody:
    """BOX-SLIDE (seed 002 Fig. 5): a cube of edge ``size`` and ``mass`` on a 6-DOF floating joint, with
    contact points at its 8 corners. Resting on the ground z = 0 at ``q[2] = size / 2``."""
    h = size / 2
    corners = [(x, y, z) for x in (-h, h) for y in (-h, h) for z in (-h, h)]
    link = Link("box", mass, inertia=box_inertia(mass, (size, size, size)), contact_points=corners)
    return ArticulatedBody([link], [Joint("root", "floating", WORLD, "box")], name="box")


def chain_slope(n: int = 10, slope_deg: float = 20.0) -> tuple[ArticulatedBody, np.ndarray, tuple[float, float, float]]:
    """CHAIN-SLOPE (seed 002 Fig. 6): CHAIN-N on a free (quaternion) base with contact points at both ends of
    every link, lying straight across a slope of ``slope_deg`` degrees that descends along +x, at rest.

    Returns:
        ``(model, q0, normal)``: the model, its start (the links along the horizontal y direction, on the
        slope's surface, centred on the origin) and the slope's unit outward normal; the slope is the plane
        ``normal . x = 0`` (give it to a contact force model as ``normal=...``).
    """
    if not 0.0 <= float(slope_deg) < 90.0:
        raise ModelError(f"chain_slope: slope_deg must lie in [0, 90), got {slope_deg!r}")
    a = np.radians(float(slope_deg))
    normal = (float(np.sin(a)), 0.0, float(np.cos(a)))
    flat = chain(n, contact_points=True)
    links = list(flat.links)
    joints = [Joint("base", "free", WORLD, links[0].name)] + list(flat.joints[1:])
    model = ArticulatedBody(links, joints, name=f"chain{n}_slope")
    x_axis, z_axis = np.array([0.0, 1.0, 0.0]), np.array(normal)
    R = np.column_stack([x_axis, np.cross(z_axis, x_axis), z_axis])
    w = 0.5 * np.sqrt(1.0 + np.trace(R))                       # the rotation's quaternion (x, y, z, w)
    quat = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]]) / (4 * w)
    q0 = model.neutral()
    q0[3:7] = np.concatenate([quat, [w]])
    q0[:3] = -0.5 * n * x_axis
    return model, q0, normal


SOLO12_FOOT_RADIUS = 0.0175
"""Radius (m) of solo12's spherical feet: contact points sit at the foot centres, so the ground for them is the
plane ``z = SOLO12_FOOT_RADIUS`` (exactly a sphere against the floor ``z = 0``)."""


def example_robot_data_dir():
    """example-robot-data's ``robots`` directory (``pip install example-robot-data``), or ``None``.

    ``$EXAMPLE_ROBOT_DATA_DIR`` (the robots directory or its parent) wins; then the prefixes of the
    ``example_robot_data``, ``cmeel`` and ``pinocchio`` packages, the site-packages directories, the Python
    prefix, ``$CONDA_PREFIX`` and ``/opt/openrobots``."""
    import importlib.util
    import os
    import site
    import sys
    from pathlib import Path

    rel = Path("share", "example-robot-data", "robots")
    env = os.environ.get("EXAMPLE_ROBOT_DATA_DIR")
    candidates = [Path(env), Path(env) / "robots"] if env else []
    for module in ("example_robot_data", "cmeel", "pinocchio"):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            for parent in Path(spec.origin).resolve().parents:
                candidates += [parent / rel, parent / "cmeel.prefix" / rel]
    sites = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
    candidates += [Path(p) / "cmeel.prefix" / rel for p in sites if p]
    candidates += [Path(sys.prefix) / rel, Path(os.environ.get("CONDA_PREFIX", sys.prefix)) / rel,
                   Path("/opt/openrobots") / rel]
    for c in candidates:
        if (c / "solo_description").is_dir() or (c / "panda_description").is_dir():
            return c
    return None


def solo12(*, floating_base: bool | str = True) -> ArticulatedBody:
    """solo12 from example-robot-data (QUADRUPED-TRACK; the stand-in for seed 001's Robosimian): 2.5 kg, 12
    revolute joints on a free (quaternion) base, contact points at the four foot centres
    (:data:`SOLO12_FOOT_RADIUS`). Joint limits are not attached (the tracking targets stay inside them).

    Raises:
        ModelError: example-robot-data is not installed (it is a test / benchmark dependency).
    """
    from .geometry import with_contact_points
    from .io import load_urdf

    root = example_robot_data_dir()
    if root is None:
        raise ModelError("solo12: example-robot-data is not installed (pip install example-robot-data, or set "
                         "EXAMPLE_ROBOT_DATA_DIR to its robots directory)")
    model = load_urdf(root / "solo_description" / "robots" / "solo12.urdf", floating_base=floating_base,
                      limits=False)
    return with_contact_points(model, {f"{leg}_FOOT": [(0.0, 0.0, 0.0)] for leg in ("FL", "FR", "HL", "HR")})


def solo12_q0(model: ArticulatedBody, clearance: float = 0.0) -> np.ndarray:
    """solo12 standing: HFE / KFE 0.8 / -1.6 (front) and -0.8 / 1.6 (hind), the feet ``clearance`` above the
    floor."""
    from .kinematics import contact_positions

    q = np.zeros(model.nq)
    if "root_joint:qw" in model.dof_names:
        q[model.dof_index("root_joint:qw")] = 1.0
    for leg in ("FL", "FR", "HL", "HR"):
        s = 1.0 if leg[0] == "F" else -1.0
        q[model.dof_index(f"{leg}_HFE")] = 0.8 * s
        q[model.dof_index(f"{leg}_KFE")] = -1.6 * s
    P = np.asarray(contact_positions(model)(q))
    q[model.dof_index("root_joint:z")] += -P[2].min() + SOLO12_FOOT_RADIUS + clearance
    return q
