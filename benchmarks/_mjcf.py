"""MJCF for MuJoCo from a pbframework :class:`~pbframework.model.ArticulatedBody`, so a MuJoCo peer runs the
same robot: the same masses, centres of mass, full inertia tensors, joint origins and axes, and gravity.

Every link is one ``<body>`` nested as the model's tree, placed at its joint's origin (position and rotation
in the parent link frame); the joint's motion is emitted as MuJoCo joints of that body, which MuJoCo applies
in order about axes of the body frame (intrinsically), as pbframework composes its elements. A fixed joint,
and a base link with no parent joint, is a body with no joints (welded). No joint limits, damping or
armature are emitted (pbframework's limits are a force model, not part of the dynamics).

Coordinate correspondence (``qpos`` / ``qvel`` are MuJoCo's, ``q`` / ``v`` pbframework's; MuJoCo's joints are
named after pbframework's coordinates, ``model.dof_names``, except ``ball`` / ``free`` joints, named after the
joint):

=========== ===================================== ======================================================
pbframework  MuJoCo joints of the child's body     a coordinate's qpos / qvel against q / v
=========== ===================================== ======================================================
fixed        none                                  --
revolute     ``hinge`` about ``axis``              equal
prismatic    ``slide`` along ``axis``              equal
ball2        ``hinge`` y, then ``hinge`` z         equal
spherical    ``hinge`` x, y, z                     equal
floating     ``slide`` x, y, z, ``hinge`` x, y, z  equal
ball         ``ball``                              qpos ``(w, x, y, z)`` against q ``(x, y, z, w)``;
                                                   qvel = v (angular velocity in the child frame)
free         ``free`` (parent: the world)          qpos: the body's world position and quaternion
                                                   ``(w, x, y, z)``, i.e. the joint origin composed with q;
                                                   qvel: linear velocity in the *world* frame, then
                                                   angular velocity in the body frame, against v's
                                                   linear velocity in the body frame: ``qvel[:3] = R v[:3]``
=========== ===================================== ======================================================

``qpos`` holds the same ``model.nq`` coordinates as ``q`` and ``qvel`` the same ``model.nv`` as ``v``, but in
MuJoCo's order, which is the body tree's depth-first order (a link's whole subtree before its next sibling),
while pbframework orders joints breadth-first: the two agree for a chain or a single floating body and differ
for a branched tree (the spider: pbframework's hips, then its knees; MuJoCo's hip0, knee0, hip1, ...).
:func:`mujoco_permutation` gives the index arrays (``qpos[i]`` is ``q[qperm[i]]``), and the converters
:func:`to_mujoco_qpos` / :func:`from_mujoco_qpos`, :func:`to_mujoco_qvel` / :func:`from_mujoco_qvel` apply
the permutation with the ``ball`` / ``free`` conversions above. ``qvel = J v`` with ``J = qvel_map(model,
q)``; generalized forces map with the transpose, ``tau = J.T @ qfrc`` (power is the same in both), and a mass
matrix as ``M = J.T @ M_mujoco @ J``. Position actuators address their joints by name, so ``ctrl[i]`` is the
target of coordinate ``actuated[i]`` whatever the order.

Contact: a sphere geom of radius ``contact_radius`` centred at every contact point of every link
(``Link.contact_points``, named ``<link>:contact<k>``; :func:`contact_geom_names` lists them in pbframework's
contact order, MuJoCo numbers them in body order) and, if ``floor``, a plane at z = 0; spheres collide with
the floor only (``contype=1 conaffinity=0`` against the floor's ``contype=0 conaffinity=1``); friction ``mu``
on both. Geoms carry no mass (``inertiafromgeom="false"``).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from typing import Sequence

import numpy as np

from pbframework.model import WORLD, ArticulatedBody, Joint, JointType

INTEGRATORS = ("Euler", "RK4", "implicit", "implicitfast")
"""MuJoCo's integrators (``<option integrator=...>``)."""

_QUAT_JOINTS = (JointType.BALL, JointType.FREE)


# ---- numbers ---------------------------------------------------------------------------------------------

def _num(x: float) -> str:
    """A float as the shortest string that reads back to the same double."""
    return repr(float(x))


def _nums(xs) -> str:
    return " ".join(_num(x) for x in np.asarray(xs, float).reshape(-1))


def _quat_wxyz(R: np.ndarray) -> np.ndarray:
    """The unit quaternion ``(w, x, y, z)`` of a rotation matrix (Shepperd's method, w >= 0)."""
    R = np.asarray(R, float)
    t = np.trace(R)
    if t > 0.0:
        s = 2.0 * math.sqrt(1.0 + t)
        q = np.array([0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s])
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        q = np.empty(4)
        q[0] = (R[k, j] - R[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (R[j, i] + R[i, j]) / s
        q[1 + k] = (R[k, i] + R[i, k]) / s
    q /= np.linalg.norm(q)
    return q if q[0] >= 0.0 else -q


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of quaternions ``(w, x, y, z)`` (rows broadcast)."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def _quat_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices of unit quaternions ``(w, x, y, z)`` (rows: ``(..., 3, 3)``)."""
    w, x, y, z = np.moveaxis(np.asarray(q, float), -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], axis=-1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], axis=-1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], axis=-1)], axis=-2)


# ---- coordinates -----------------------------------------------------------------------------------------

def _children(model: ArticulatedBody) -> dict[str, list[Joint]]:
    """The joints under each link (and under ``WORLD``), in the model's order."""
    children: dict[str, list[Joint]] = {}
    for j in model.joints:
        children.setdefault(j.parent, []).append(j)
    return children


def mujoco_joint_order(model: ArticulatedBody) -> list[Joint]:
    """pbframework's joints in the order MuJoCo numbers them: the depth-first order of the bodies
    :func:`model_mjcf` nests (siblings in the model's order)."""
    children = _children(model)
    out: list[Joint] = []

    def visit(link: str) -> None:
        for j in children.get(link, []):
            out.append(j)
            visit(j.child)

    for j in children.get(WORLD, []):
        out.append(j)
        visit(j.child)
    if model.base not in model.parent_joint:
        visit(model.base)
    return out


def mujoco_permutation(model: ArticulatedBody) -> tuple[np.ndarray, np.ndarray]:
    """``(qperm, vperm)``: MuJoCo's ``qpos[i]`` is (up to the quaternion conventions) ``q[qperm[i]]`` and
    ``qvel[i]`` is ``v[vperm[i]]``; the identity for chains and single bodies."""
    key = "mjcf_permutation"
    if key not in model.cache:
        order = mujoco_joint_order(model)
        qperm = [i for j in order for i in range(model.nq)[model.joint_q_index[j.name]]]
        vperm = [i for j in order for i in range(model.nv)[model.joint_v_index[j.name]]]
        model.cache[key] = (np.array(qperm, dtype=int), np.array(vperm, dtype=int))
    qperm, vperm = model.cache[key]
    return qperm.copy(), vperm.copy()


def mujoco_joint_names(model: ArticulatedBody) -> list[str]:
    """The names of the MuJoCo joints :func:`model_mjcf` emits, in MuJoCo's order: pbframework's coordinate
    name for every hinge / slide (``model.dof_names``), the joint's name for a ``ball`` / ``free`` joint."""
    return [j.name if kind in ("S", "F") else name
            for j in mujoco_joint_order(model) for kind, _, name in j.elementary()]


def contact_geom_names(model: ArticulatedBody) -> list[str]:
    """The names of the contact spheres in pbframework's contact order (``model.contact_points``, the columns
    of :func:`pbframework.kinematics.contact_positions`); MuJoCo numbers its geoms in body order, so look
    them up by name (``mjmodel.geom(name).id``)."""
    return [f"{link.name}:contact{k}" for link in model.links for k in range(len(link.contact_points))]


def to_mujoco_qpos(model: ArticulatedBody, q) -> np.ndarray:
    """pbframework's configuration ``q`` (or rows of them) as MuJoCo's ``qpos``: quaternions reordered from
    ``(x, y, z, w)`` to ``(w, x, y, z)``, a ``free`` joint's pose composed with its joint origin (MuJoCo's
    free joint holds the body's world pose), the coordinates permuted to MuJoCo's order
    (:func:`mujoco_permutation`)."""
    q = np.asarray(q, dtype=float)
    out = q.copy()
    for j in model.joints:
        if j.type not in _QUAT_JOINTS:
            continue
        sl = model.joint_q_index[j.name]
        quat = np.roll(q[..., sl.stop - 4:sl.stop], 1, axis=-1)
        if j.type is JointType.FREE:
            R0, p0 = j.origin[:3, :3], j.origin[:3, 3]
            out[..., sl.start:sl.start + 3] = p0 + q[..., sl.start:sl.start + 3] @ R0.T
            quat = _quat_mul(np.broadcast_to(_quat_wxyz(R0), quat.shape), quat)
        out[..., sl.stop - 4:sl.stop] = quat
    return out[..., mujoco_permutation(model)[0]]


def from_mujoco_qpos(model: ArticulatedBody, qpos) -> np.ndarray:
    """MuJoCo's ``qpos`` (or rows of them) as pbframework's ``q``: the inverse of :func:`to_mujoco_qpos`."""
    qpos = np.asarray(qpos, dtype=float)
    qperm = mujoco_permutation(model)[0]
    out = np.empty_like(qpos)
    out[..., qperm] = qpos
    for j in model.joints:
        if j.type not in _QUAT_JOINTS:
            continue
        sl = model.joint_q_index[j.name]
        quat = out[..., sl.stop - 4:sl.stop].copy()
        if j.type is JointType.FREE:
            R0, p0 = j.origin[:3, :3], j.origin[:3, 3]
            out[..., sl.start:sl.start + 3] = (out[..., sl.start:sl.start + 3] - p0) @ R0
            inv0 = _quat_wxyz(R0) * np.array([1.0, -1.0, -1.0, -1.0])
            quat = _quat_mul(np.broadcast_to(inv0, quat.shape), quat)
        out[..., sl.stop - 4:sl.stop] = np.roll(quat, -1, axis=-1)
    return out


def _free_rotations(model: ArticulatedBody, q) -> list[tuple[slice, np.ndarray]]:
    """For every ``free`` joint: its slice of ``v`` and the body's world rotation(s) at pbframework's ``q``."""
    q = np.asarray(q, dtype=float)
    out = []
    for j in model.joints:
        if j.type is JointType.FREE:
            sl = model.joint_q_index[j.name]
            R = j.origin[:3, :3] @ _quat_matrix(np.roll(q[..., sl.stop - 4:sl.stop], 1, axis=-1))
            out.append((model.joint_v_index[j.name], R))
    return out


def qvel_map(model: ArticulatedBody, q) -> np.ndarray:
    """The ``nv x nv`` matrix ``J(q)`` with ``qvel = J v`` at pbframework's configuration ``q``: the
    permutation of :func:`mujoco_permutation` times the identity with each ``free`` joint's linear block
    replaced by the body's world rotation. Generalized forces map back with its transpose, ``tau = J.T
    qfrc``, and a mass matrix as ``M = J.T M_mujoco J``."""
    D = np.eye(model.nv)
    for sl, R in _free_rotations(model, model.check_state(q)):
        D[sl.start:sl.start + 3, sl.start:sl.start + 3] = R
    return D[mujoco_permutation(model)[1]]


def to_mujoco_qvel(model: ArticulatedBody, q, v) -> np.ndarray:
    """pbframework's velocity ``v`` at ``q`` (or rows of both) as MuJoCo's ``qvel``: a ``free`` joint's linear
    velocity turned from the body frame to the world frame, the coordinates permuted to MuJoCo's order."""
    v = np.asarray(v, dtype=float)
    out = v.copy()
    for sl, R in _free_rotations(model, q):
        out[..., sl.start:sl.start + 3] = np.einsum("...ij,...j->...i", R, v[..., sl.start:sl.start + 3])
    return out[..., mujoco_permutation(model)[1]]


def from_mujoco_qvel(model: ArticulatedBody, q, qvel) -> np.ndarray:
    """MuJoCo's ``qvel`` as pbframework's ``v`` at pbframework's configuration ``q`` (or rows of both): the
    inverse of :func:`to_mujoco_qvel`."""
    qvel = np.asarray(qvel, dtype=float)
    out = np.empty_like(qvel)
    out[..., mujoco_permutation(model)[1]] = qvel
    for sl, R in _free_rotations(model, q):
        out[..., sl.start:sl.start + 3] = np.einsum("...ji,...j->...i", R, out[..., sl.start:sl.start + 3])
    return out


# ---- the MJCF --------------------------------------------------------------------------------------------

def _check_options(model: ArticulatedBody, dt, integrator, mu, contact_radius, actuated, kp, kd) -> list[str]:
    """Validate :func:`model_mjcf`'s options in the user's words; the actuated coordinates as a list."""
    if not (isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0):
        raise ValueError(f"model_mjcf: dt must be a positive number of seconds, got {dt!r}")
    if integrator not in INTEGRATORS:
        raise ValueError(f"model_mjcf: unknown integrator {integrator!r} (MuJoCo's: {', '.join(INTEGRATORS)})")
    for what, x in (("mu", mu), ("kp", kp), ("kd", kd)):
        if not (isinstance(x, (int, float)) and math.isfinite(x) and x >= 0):
            raise ValueError(f"model_mjcf: {what} must be a finite number >= 0, got {x!r}")
    if not (isinstance(contact_radius, (int, float)) and math.isfinite(contact_radius) and contact_radius > 0):
        raise ValueError(f"model_mjcf: contact_radius must be a positive length, got {contact_radius!r}")
    names = [actuated] if isinstance(actuated, str) else list(actuated)
    hinges = set(mujoco_joint_names(model)) & set(model.dof_names)
    for n in names:
        if n not in model.dof_names:
            raise ValueError(f"model_mjcf: actuated coordinate {n!r} is not one of model {model.name!r}'s "
                             f"coordinates ({', '.join(model.dof_names)})")
        if n not in hinges:
            raise ValueError(f"model_mjcf: actuated coordinate {n!r} is part of a quaternion (ball / free "
                             f"joint), which a MuJoCo position actuator cannot drive; actuate hinge or slide "
                             f"coordinates ({', '.join(sorted(hinges)) or 'the model has none'})")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"model_mjcf: actuated lists coordinate(s) {dup} more than once")
    return names


def _joint_elements(j: Joint) -> list[ET.Element]:
    """The MuJoCo ``<joint>`` elements of a pbframework joint, in pbframework's coordinate order."""
    out = []
    for kind, axis, name in j.elementary():
        if kind == "R":
            out.append(ET.Element("joint", name=name, type="hinge", axis=_nums(axis)))
        elif kind == "P":
            out.append(ET.Element("joint", name=name, type="slide", axis=_nums(axis)))
        elif kind == "S":
            out.append(ET.Element("joint", name=j.name, type="ball"))
        else:
            out.append(ET.Element("joint", name=j.name, type="free"))
    return out


def _body(model: ArticulatedBody, link_name: str, origin: np.ndarray, joint: Joint | None,
          children: dict[str, list[Joint]], mu: float, radius: float) -> ET.Element:
    link = model.link(link_name)
    body = ET.Element("body", name=link.name, pos=_nums(origin[:3, 3]), quat=_nums(_quat_wxyz(origin[:3, :3])))
    if joint is not None:
        body.extend(_joint_elements(joint))
    I = link.inertia
    ET.SubElement(body, "inertial", pos=_nums(link.com), mass=_num(link.mass),
                  fullinertia=_nums([I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]]))
    for k, p in enumerate(link.contact_points):
        ET.SubElement(body, "geom", name=f"{link.name}:contact{k}", type="sphere", size=_num(radius),
                      pos=_nums(p), contype="1", conaffinity="0", friction=f"{_num(mu)} 0.005 0.0001")
    for j in children.get(link.name, []):
        body.append(_body(model, j.child, j.origin, j, children, mu, radius))
    return body


def model_mjcf(model: ArticulatedBody, *, dt: float, integrator: str = "implicitfast", mu: float = 0.8,
               contact_radius: float = 0.005, actuated: Sequence[str] = (), kp: float = 0.0, kd: float = 0.0,
               floor: bool = True) -> str:
    """``model`` as an MJCF document (see the module docstring for the coordinate correspondence).

    Args:
        model: any pbframework model (every joint type maps).
        dt: MuJoCo's time step (s).
        integrator: one of :data:`INTEGRATORS`.
        mu: friction coefficient of the contact spheres and the floor.
        contact_radius: radius of the sphere at every contact point (m).
        actuated: pbframework coordinate names (``model.dof_names``) of hinges / slides that get a
            ``<position kp=.. kv=..>`` actuator each, in this order (actuator ``i`` reads ``ctrl[i]``, the
            target of coordinate ``actuated[i]``): force ``kp (ctrl - q) - kd qdot``.
        kp, kd: the actuators' stiffness and damping.
        floor: add the plane z = 0.

    Returns:
        The MJCF text, for ``mujoco.MjModel.from_xml_string``.

    Raises:
        ValueError: an option out of range, an unknown or quaternion coordinate in ``actuated``.
    """
    names = _check_options(model, dt, integrator, mu, contact_radius, actuated, kp, kd)
    root = ET.Element("mujoco", model=model.name)
    ET.SubElement(root, "compiler", angle="radian", inertiafromgeom="false", autolimits="true")
    ET.SubElement(root, "option", timestep=_num(dt), integrator=integrator, gravity=_nums(model.gravity))
    world = ET.SubElement(root, "worldbody")
    if floor:
        ET.SubElement(world, "geom", name="floor", type="plane", size="0 0 1", contype="0", conaffinity="1",
                      friction=f"{_num(mu)} 0.005 0.0001")
    children = _children(model)
    for j in children.get(WORLD, []):
        world.append(_body(model, j.child, j.origin, j, children, mu, contact_radius))
    if model.base not in model.parent_joint:
        world.append(_body(model, model.base, np.eye(4), None, children, mu, contact_radius))
    if names:
        act = ET.SubElement(root, "actuator")
        for n in names:
            ET.SubElement(act, "position", name=n, joint=n, kp=_num(kp), kv=_num(kd))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")
