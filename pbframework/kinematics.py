"""The kinematics stage: CasADi forward kinematics of an :class:`~pbframework.model.ArticulatedBody`.

The model's joints are expanded into *elements*: one per coordinate of a hinge, slide or Euler-angle joint
(an elementary hinge or slide), one per ``ball`` joint (a quaternion) or ``free`` joint (a position and a
quaternion); fixed joints are merged into their parent element. Every symbolic algorithm (inertia integral,
RNEA, CRBA, ABA) runs over these elements, link by link, so graph size grows linearly with the model.

All functions are built once per model and cached on ``model.cache``.
"""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from .model import ELEMENT_NQ, ELEMENT_NV, WORLD, ArticulatedBody


@dataclass(frozen=True)
class Element:
    """One elementary joint: a coordinate of a hinge / slide, or a whole ``ball`` / ``free`` joint.

    Attributes:
        parent: index of the parent element, -1 for the world.
        origin: 4x4 transform of the joint frame in the parent element's frame.
        kind: ``"R"`` (hinge), ``"P"`` (slide), ``"S"`` (spherical: a unit quaternion ``(x, y, z, w)``,
            angular velocity in the element frame) or ``"F"`` (free: a position in the parent frame and a
            unit quaternion; linear then angular velocity in the element frame).
        axis: unit axis in the joint frame.
        mass, com, inertia: rigid-body inertia carried by this element's frame (links merged through
            fixed joints included; zero mass for the intermediate elements of a multi-DOF joint).
        armature: the joint's reflected rotor inertia on this coordinate (hinges and slides; 0 otherwise).
    """

    parent: int
    origin: np.ndarray
    kind: str
    axis: np.ndarray
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    armature: float = 0.0

    @property
    def nq(self) -> int:
        return ELEMENT_NQ[self.kind]

    @property
    def nv(self) -> int:
        return ELEMENT_NV[self.kind]

    @property
    def second_moment(self) -> np.ndarray:
        m, c, Ic = self.mass, self.com, self.inertia
        M = np.zeros((4, 4))
        M[:3, :3] = 0.5 * np.trace(Ic) * np.eye(3) - Ic + m * np.outer(c, c)
        M[:3, 3] = M[3, :3] = m * c
        M[3, 3] = m
        return M


@dataclass(frozen=True)
class ElementTree:
    """A model expanded to one element per coordinate.

    Attributes:
        elements: element ``i`` moves the configuration coordinates ``q[q_slice(i)]`` (``q[i]`` where every
            element is a hinge or slide) with the velocities ``v[v_slice(i)]``.
        link_frame: for each link (model order), ``(element index or -1 for world, 4x4 offset)`` such that
            ``T_link = T_element @ offset``. Links welded to the world carry no dynamics.
        q_start, v_start: first configuration / velocity coordinate of each element.
    """

    elements: tuple[Element, ...]
    link_frame: tuple[tuple[int, np.ndarray], ...]
    q_start: tuple[int, ...] = ()
    v_start: tuple[int, ...] = ()

    def q_slice(self, i: int) -> slice:
        return slice(self.q_start[i], self.q_start[i] + self.elements[i].nq)

    def v_slice(self, i: int) -> slice:
        return slice(self.v_start[i], self.v_start[i] + self.elements[i].nv)

    @property
    def on_group(self) -> bool:
        """Whether an element is spherical or free (configuration and velocity sizes differ)."""
        return any(e.kind in ("S", "F") for e in self.elements)


def _add_inertia(m1, c1, I1, m2, c2, I2):
    """Combine two rigid bodies given in the same frame (inertias about their own centres of mass)."""
    m = m1 + m2
    if m <= 0.0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    c = (m1 * c1 + m2 * c2) / m

    def shift(mi, ci, Ii):
        d = ci - c
        return Ii + mi * (np.dot(d, d) * np.eye(3) - np.outer(d, d))

    return m, c, shift(m1, c1, I1) + shift(m2, c2, I2)


def element_tree(model: ArticulatedBody) -> ElementTree:
    """Expand ``model`` into elements (cached)."""
    if "element_tree" in model.cache:
        return model.cache["element_tree"]
    elems: list[dict] = []
    link_frame: dict[str, tuple[int, np.ndarray]] = {model.base: (-1, np.eye(4))}

    def attach(idx: int, offset: np.ndarray, link) -> None:
        if idx < 0:
            return  # welded to the world: contributes nothing to the dynamics
        e = elems[idx]
        R, p = offset[:3, :3], offset[:3, 3]
        m, c, I = _add_inertia(e["mass"], e["com"], e["inertia"],
                               link.mass, R @ link.com + p, R @ link.inertia @ R.T)
        e.update(mass=m, com=c, inertia=I)

    base_joint = model.parent_joint.get(model.base)
    if base_joint is None:
        attach(-1, np.eye(4), model.link(model.base))
    for j in model.joints:
        parent_idx, parent_off = (-1, np.eye(4)) if j.parent == WORLD else link_frame[j.parent]
        origin = parent_off @ j.origin
        idx = parent_idx
        for n, (kind, axis, _) in enumerate(j.elementary()):
            elems.append(dict(parent=idx, origin=origin if n == 0 else np.eye(4), kind=kind,
                              axis=np.asarray(axis, float), mass=0.0, com=np.zeros(3),
                              inertia=np.zeros((3, 3)), armature=j.armature if kind in ("R", "P") else 0.0))
            idx = len(elems) - 1
        offset = origin if not j.elementary() else np.eye(4)
        link_frame[j.child] = (idx, offset)
        attach(idx, offset, model.link(j.child))
    elements = tuple(Element(**e) for e in elems)
    q_start = tuple(int(v) for v in np.cumsum([0] + [e.nq for e in elements])[:-1])
    v_start = tuple(int(v) for v in np.cumsum([0] + [e.nv for e in elements])[:-1])
    tree = ElementTree(elements=elements, link_frame=tuple(link_frame[x.name] for x in model.links),
                       q_start=q_start, v_start=v_start)
    model.cache["element_tree"] = tree
    return tree


# -- symbolic helpers (work for SX and MX) ----------------------------------------------------------

def axis_rotation(axis: np.ndarray, angle) -> ca.SX:
    """Rotation matrix about a constant unit ``axis`` by a symbolic ``angle`` (Rodrigues)."""
    c, s = ca.cos(angle), ca.sin(angle)
    x, y, z = (float(v) for v in axis)
    if (x, y, z) == (1.0, 0.0, 0.0):
        return ca.vertcat(ca.horzcat(1, 0, 0), ca.horzcat(0, c, -s), ca.horzcat(0, s, c))
    if (x, y, z) == (0.0, 1.0, 0.0):
        return ca.vertcat(ca.horzcat(c, 0, s), ca.horzcat(0, 1, 0), ca.horzcat(-s, 0, c))
    if (x, y, z) == (0.0, 0.0, 1.0):
        return ca.vertcat(ca.horzcat(c, -s, 0), ca.horzcat(s, c, 0), ca.horzcat(0, 0, 1))
    K = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return ca.DM.eye(3) + s * ca.DM(K) + (1 - c) * ca.DM(K @ K)


def quaternion_matrix(quat) -> ca.SX:
    """Rotation matrix of a unit quaternion ``(x, y, z, w)`` (Pinocchio's / Eigen's coefficient order)."""
    x, y, z, w = quat[0], quat[1], quat[2], quat[3]
    return ca.vertcat(
        ca.horzcat(1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
        ca.horzcat(2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
        ca.horzcat(2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)))


def joint_motion(element: Element, qi) -> tuple[ca.SX, ca.SX]:
    """(R, p) of the element frame in its joint frame for the element's coordinates ``qi`` (a scalar for
    hinges and slides, the quaternion for ``S``, position and quaternion for ``F``)."""
    if element.kind == "R":
        return axis_rotation(element.axis, qi), ca.DM.zeros(3, 1)
    if element.kind == "P":
        return ca.DM.eye(3), ca.DM(element.axis) * qi
    if element.kind == "S":
        return quaternion_matrix(qi), ca.DM.zeros(3, 1)
    return quaternion_matrix(qi[3:7]), qi[0:3]


def element_coordinates(tree: ElementTree, q, i: int):
    """Element ``i``'s configuration coordinates in ``q`` (a scalar for hinges and slides)."""
    e = tree.elements[i]
    if e.nq == 1:
        return q[tree.q_start[i]] if tree.q_start else q[i]
    return q[tree.q_slice(i)]


def element_poses(model: ArticulatedBody, q) -> list[tuple]:
    """World (R, p) of every element frame for the symbolic configuration ``q``, built link by link."""
    tree = element_tree(model)
    poses: list[tuple] = []
    for i, e in enumerate(tree.elements):
        Rj, pj = joint_motion(e, element_coordinates(tree, q, i))
        R0, p0 = ca.DM(e.origin[:3, :3]), ca.DM(e.origin[:3, 3])
        if e.parent < 0:
            Rp, pp = ca.DM.eye(3), ca.DM.zeros(3, 1)
        else:
            Rp, pp = poses[e.parent]
        Rw = ca.mtimes(Rp, R0)
        poses.append((ca.mtimes(Rw, Rj), pp + ca.mtimes(Rp, p0) + ca.mtimes(Rw, pj)))
    return poses


def _homogeneous(R, p):
    return ca.vertcat(ca.horzcat(R, p), ca.DM([[0, 0, 0, 1]]))


def link_poses(model: ArticulatedBody, q) -> list[tuple]:
    """World (R, p) of every link frame (model order) for the symbolic configuration ``q``."""
    tree = element_tree(model)
    poses = element_poses(model, q)
    out = []
    for idx, off in tree.link_frame:
        Re, pe = (ca.DM.eye(3), ca.DM.zeros(3, 1)) if idx < 0 else poses[idx]
        out.append((ca.mtimes(Re, ca.DM(off[:3, :3])), pe + ca.mtimes(Re, ca.DM(off[:3, 3]))))
    return out


def forward_kinematics(model: ArticulatedBody) -> ca.Function:
    """``fk: q -> T`` where ``T`` is 4 x (4 * nlinks): the world transforms of all links side by side."""
    key = "fk"
    if key not in model.cache:
        q = ca.SX.sym("q", model.nq)
        T = ca.horzcat(*[_homogeneous(R, p) for R, p in link_poses(model, q)])
        model.cache[key] = ca.Function("fk", [q], [T], ["q"], ["T"])
    return model.cache[key]


def link_transform(model: ArticulatedBody, link: str) -> ca.Function:
    """``T_link: q -> 4x4`` world transform of one link."""
    key = ("T", link)
    if key not in model.cache:
        i = model.link_index(link)
        q = ca.SX.sym("q", model.nq)
        R, p = link_poses(model, q)[i]
        model.cache[key] = ca.Function(f"T_{link}", [q], [_homogeneous(R, p)], ["q"], ["T"])
    return model.cache[key]


def point_position(model: ArticulatedBody, link: str) -> ca.Function:
    """``X: (q, x) -> p``: world position of the body point ``x`` (link frame) of ``link``."""
    key = ("X", link)
    if key not in model.cache:
        i = model.link_index(link)
        q, x = ca.SX.sym("q", model.nq), ca.SX.sym("x", 3)
        R, p = link_poses(model, q)[i]
        model.cache[key] = ca.Function(f"X_{link}", [q, x], [p + ca.mtimes(R, x)], ["q", "x"], ["p"])
    return model.cache[key]


def point_jacobian(model: ArticulatedBody, link: str) -> ca.Function:
    """``J: (q, x) -> dX/dq`` (3 x nq): the translational Jacobian of a body point of ``link``."""
    key = ("J", link)
    if key not in model.cache:
        q, x = ca.SX.sym("q", model.nq), ca.SX.sym("x", 3)
        p = point_position(model, link)(q, x)
        model.cache[key] = ca.Function(f"J_{link}", [q, x], [ca.jacobian(p, q)], ["q", "x"], ["J"])
    return model.cache[key]


def contact_positions(model: ArticulatedBody) -> ca.Function:
    """``P: q -> (3 x n_contacts)`` world positions of every contact point (``model.contact_points``)."""
    key = "contacts"
    if key not in model.cache:
        q = ca.SX.sym("q", model.nq)
        poses = link_poses(model, q)
        cols = [poses[i][1] + ca.mtimes(poses[i][0], ca.DM(p)) for i, p in model.contact_points]
        P = ca.horzcat(*cols) if cols else ca.SX(3, 0)
        model.cache[key] = ca.Function("contacts", [q], [P], ["q"], ["P"])
    return model.cache[key]


def center_of_mass(model: ArticulatedBody) -> ca.Function:
    """``com: q -> c`` the world centre of mass of the whole body."""
    key = "com"
    if key not in model.cache:
        q = ca.SX.sym("q", model.nq)
        acc = ca.DM.zeros(3, 1)
        for (R, p), link in zip(link_poses(model, q), model.links):
            acc = acc + link.mass * (p + ca.mtimes(R, ca.DM(link.com)))
        model.cache[key] = ca.Function("com", [q], [acc / model.total_mass], ["q"], ["c"])
    return model.cache[key]
