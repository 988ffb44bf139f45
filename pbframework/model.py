"""The model stage: an articulated tree of rigid links connected by joints.

An :class:`ArticulatedBody` is plain, validated, immutable data. Everything numeric about it (kinematics,
inertia integral, dynamics) is built later as CasADi functions by the symbolic modules and cached on the
model (``model.cache``), so a model must not be mutated after construction.

Coordinates
-----------
Every joint contributes ``JointType.nq`` configuration coordinates and ``JointType.nv`` velocity
coordinates, in the order the joints appear in ``model.joints`` (topological: a parent's joint before its
children's); ``model.nq`` and ``model.nv`` are their totals, equal unless the model has ``ball`` or ``free``
joints. Euler-angle joints are compositions of elementary hinges / slides about fixed local axes, applied in
this order; ``ball`` and ``free`` are Pinocchio's spherical and free-flyer joints, on the rotation group:

========== ==== ===========================================================================
type        nq   motion (intrinsic, applied left to right after the joint origin)
========== ==== ===========================================================================
fixed       0    none
revolute    1    rotation about ``axis`` (URDF ``continuous`` is read as revolute, no limits)
prismatic   1    translation along ``axis``
ball2       2    rotation about local y, then about local z (the papers' ball joint)
spherical   3    rotations about local x, y, z (intrinsic XYZ Euler angles)
floating    6    translations along x, y, z, then rotations about x, y, z (intrinsic)
ball        4    unit quaternion ``(qx, qy, qz, qw)`` of the child in the joint frame; nv = 3: the
                 angular velocity in the child frame
free        7    position ``(x, y, z)`` in the parent (world) frame, then a unit quaternion; nv = 6: the
                 linear and then the angular velocity, both in the child frame (Pinocchio's order)
========== ==== ===========================================================================

``model.dof_names`` names each configuration coordinate: the joint's name for a 1-DOF joint,
``<joint>:<axis>`` otherwise (axes ``x y z`` for translations, ``rx ry rz`` for rotations, ``qx qy qz qw``
for quaternions); ``model.velocity_names`` names the velocity coordinates (the same for every joint but
``ball`` / ``free``: ``vx vy vz`` and ``wx wy wz``). Configurations of ``ball`` / ``free`` joints move on the
group: :func:`pbframework.kinematics.q_integrate` and :func:`~pbframework.kinematics.q_difference`.
"""

from __future__ import annotations

import math

import enum
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .errors import ModelError

WORLD = "world"
"""Parent name of a joint that attaches its child link to the inertial frame."""

DEFAULT_GRAVITY = (0.0, 0.0, -9.81)


class JointType(str, enum.Enum):
    """The joint types a model supports.

    Attributes:
        FIXED: no motion; the child is rigidly attached (0 coordinates).
        REVOLUTE: hinge about ``Joint.axis`` (1 coordinate, radians).
        PRISMATIC: slide along ``Joint.axis`` (1 coordinate, metres).
        BALL2: hinge about local y then local z (2 coordinates), the papers' 2-DOF ball joint.
        SPHERICAL: intrinsic x-y-z Euler angles (3 coordinates).
        FLOATING: translation x, y, z then intrinsic x-y-z Euler angles (6 coordinates), the papers'
            "6-DOF rigid transformation" of a free base.
        BALL: a unit quaternion (4 coordinates, 3 velocities), Pinocchio's spherical joint.
        FREE: a position and a unit quaternion (7 coordinates, 6 velocities), Pinocchio's free flyer.
    """

    FIXED = "fixed"
    REVOLUTE = "revolute"
    PRISMATIC = "prismatic"
    BALL2 = "ball2"
    SPHERICAL = "spherical"
    FLOATING = "floating"
    BALL = "ball"
    FREE = "free"

    @property
    def nq(self) -> int:
        """Configuration coordinates."""
        return sum(ELEMENT_NQ[kind] for kind, _, _ in _ELEMENTARY[self])

    @property
    def nv(self) -> int:
        """Velocity coordinates."""
        return sum(ELEMENT_NV[kind] for kind, _, _ in _ELEMENTARY[self])

    @classmethod
    def parse(cls, value: "JointType | str", *, where: str) -> "JointType":
        if isinstance(value, JointType):
            return value
        v = str(value).lower()
        if v == "continuous":
            return cls.REVOLUTE
        try:
            return cls(v)
        except ValueError:
            allowed = ", ".join(t.value for t in cls) + ", continuous"
            raise ModelError(f"{where}: unsupported type {value!r} (supported: {allowed})") from None


_EX, _EY, _EZ = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
ELEMENT_NQ = {"R": 1, "P": 1, "S": 4, "F": 7}
"""Configuration coordinates of an element kind: hinge ``R``, slide ``P``, spherical ``S``, free ``F``."""
ELEMENT_NV = {"R": 1, "P": 1, "S": 3, "F": 6}
"""Velocity coordinates of an element kind."""
_Q_LABELS = {"S": ("qx", "qy", "qz", "qw"), "F": ("x", "y", "z", "qx", "qy", "qz", "qw")}
_V_LABELS = {"S": ("wx", "wy", "wz"), "F": ("vx", "vy", "vz", "wx", "wy", "wz")}
# Elementary motions of each joint type: (kind, axis, axis label); axis None = use Joint.axis.
_ELEMENTARY: dict[JointType, tuple[tuple[str, tuple[float, float, float] | None, str], ...]] = {
    JointType.FIXED: (),
    JointType.REVOLUTE: (("R", None, ""),),
    JointType.PRISMATIC: (("P", None, ""),),
    JointType.BALL2: (("R", _EY, "ry"), ("R", _EZ, "rz")),
    JointType.SPHERICAL: (("R", _EX, "rx"), ("R", _EY, "ry"), ("R", _EZ, "rz")),
    JointType.FLOATING: (
        ("P", _EX, "x"), ("P", _EY, "y"), ("P", _EZ, "z"),
        ("R", _EX, "rx"), ("R", _EY, "ry"), ("R", _EZ, "rz"),
    ),
    JointType.BALL: (("S", _EZ, "ball"),),
    JointType.FREE: (("F", _EZ, "free"),),
}


def _vec3(value, what: str) -> np.ndarray:
    a = np.asarray(value, dtype=float).reshape(-1)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise ModelError(f"{what}: expected 3 finite numbers, got {value!r}")
    return a


def _rigid_transform(value, what: str) -> np.ndarray:
    """``value`` as a 4x4 rigid transform (a proper rotation, last row ``0 0 0 1``); ModelError naming ``what``."""
    if isinstance(value, (str, bytes)) or np.iscomplexobj(value):
        raise ModelError(f"{what} must be a finite 4x4 transform, got {type(value).__name__}")
    try:
        T = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{what} must be a finite 4x4 transform, got {type(value).__name__}") from None
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise ModelError(f"{what} must be a finite 4x4 transform, got shape {T.shape}")
    R = T[:3, :3]
    if not np.allclose(R.T @ R, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0:
        raise ModelError(f"{what} rotation is not a proper rotation matrix")
    T = T.copy()
    T[3] = (0.0, 0.0, 0.0, 1.0)
    return T


def rpy_to_matrix(rpy: Sequence[float]) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed-axis X, Y, Z) to a rotation matrix: ``Rz(y) @ Ry(p) @ Rx(r)``."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def transform(xyz: Sequence[float] = (0.0, 0.0, 0.0), rpy: Sequence[float] = (0.0, 0.0, 0.0)) -> np.ndarray:
    """A 4x4 homogeneous transform from a translation and URDF roll-pitch-yaw angles."""
    T = np.eye(4)
    T[:3, :3] = rpy_to_matrix(rpy)
    T[:3, 3] = _vec3(xyz, "translation")
    return T


def _violates_triangle(moments: np.ndarray) -> bool:
    """Whether ascending principal moments break ``A + B >= C`` (to a relative 1e-9 of their sum)."""
    return bool(moments[0] + moments[1] < moments[2] - 1e-9 * moments.sum())


def balance_inertia(inertia: np.ndarray) -> np.ndarray:
    """The inertia tensor repaired the way MuJoCo's ``<compiler balanceinertia="true">`` repairs it.

    A tensor whose principal moments are non-negative but break the triangle inequality ``A + B >= C``
    (no rigid body of non-negative density has it) becomes ``(A + B + C) / 3`` times the identity: all three
    moments set to their mean, which keeps the trace (so ``sum_i m r_i^2``, the mass's spread about the
    centre of mass) and satisfies the inequality. MuJoCo makes the same replacement, in its compiler, for
    every body whose diagonal inertia breaks the rule. Any other tensor (valid, or with a negative moment,
    which no repair makes physical) is returned unchanged, as the same object.

    Args:
        inertia: 3x3 symmetric tensor about the centre of mass.

    Returns:
        ``inertia`` itself, or the balanced tensor (a new array).
    """
    I = np.asarray(inertia, dtype=float)
    moments = np.linalg.eigvalsh(0.5 * (I + I.T))
    if moments[0] < 0.0 or not _violates_triangle(moments):
        return inertia
    return np.eye(3) * (moments.sum() / 3.0)


class ShapeType(str, enum.Enum):
    """The primitive collision shapes a link can carry (:class:`Shape`).

    Attributes:
        SPHERE: a sphere of ``size = (radius,)`` about the shape frame's origin.
        BOX: a box of ``size = (hx, hy, hz)``, half-extents along the shape frame's axes.
        CAPSULE: a capsule of ``size = (radius, half_length)``: the segment from ``-half_length`` to
            ``+half_length`` along the shape frame's z axis, swept by a sphere of ``radius``.
    """

    SPHERE = "sphere"
    BOX = "box"
    CAPSULE = "capsule"


_SHAPE_SIZE = {ShapeType.SPHERE: ("radius",), ShapeType.BOX: ("hx", "hy", "hz"),
               ShapeType.CAPSULE: ("radius", "half_length")}


@dataclass(frozen=True, eq=False)
class Shape:
    """A primitive collision shape fixed to a link (read from URDF ``<collision>`` / MJCF ``<geom>``).

    Shapes are geometry only: they carry no mass and no force model reads them directly;
    :func:`pbframework.geometry.sample_contact_points` turns them into contact points.

    Attributes:
        type: a :class:`ShapeType` (or its name).
        size: the type's dimensions, all > 0: sphere ``(radius,)``, box half-extents ``(hx, hy, hz)``,
            capsule ``(radius, half_length)``.
        pose: 4x4 transform of the shape frame in the link frame (use :func:`transform`).
        name: a label from the source file (may be empty).
    """

    type: ShapeType | str
    size: Sequence[float]
    pose: np.ndarray = field(default_factory=lambda: np.eye(4))
    name: str = ""

    def __post_init__(self) -> None:
        where = f"shape {self.name!r}" if self.name else "shape"
        try:
            kind = ShapeType(str(getattr(self.type, "value", self.type)).lower())
        except ValueError:
            raise ModelError(f"{where}: unsupported type {self.type!r} (supported: "
                             f"{', '.join(t.value for t in ShapeType)})") from None
        object.__setattr__(self, "type", kind)
        names = _SHAPE_SIZE[kind]
        try:
            size = np.asarray(self.size, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            size = np.zeros(0)
        if size.shape != (len(names),) or not np.all(np.isfinite(size)):
            raise ModelError(f"{where}: a {kind.value} takes {len(names)} finite sizes ({', '.join(names)}), got "
                             f"{self.size!r}")
        if np.any(size <= 0.0):
            bad = names[int(np.argmax(size <= 0.0))]
            raise ModelError(f"{where}: {kind.value} {bad} must be > 0, got {self.size!r}")
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "pose", _rigid_transform(self.pose, f"{where}: pose"))
        for a in (self.size, self.pose):
            a.setflags(write=False)

    def moved(self, T: np.ndarray) -> "Shape":
        """The same shape with its frame given in another frame: pose ``T @ pose``."""
        return Shape(self.type, self.size, np.asarray(T, float) @ self.pose, self.name)


@dataclass(frozen=True, eq=False)
class Link:
    """A rigid link.

    Attributes:
        name: unique link name.
        mass: mass in kg (> 0), or 0 for a massless frame (with zero inertia): the intermediate frame of a body
            moved by several joints (MJCF), whose dynamics the next link carries.
        com: centre of mass in the link frame (m).
        inertia: 3x3 inertia tensor about the centre of mass, in link-frame axes (kg m^2); symmetric
            positive definite and satisfying the triangle inequality.
        contact_points: (k, 3) points in the link frame used by contact force models (may be empty).
        shapes: primitive collision shapes (:class:`Shape`) fixed to the link, read from URDF / MJCF files;
            geometry only, turned into contact points by :func:`pbframework.geometry.sample_contact_points`.
    """

    name: str
    mass: float
    com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    inertia: np.ndarray = field(default_factory=lambda: np.eye(3) * 1e-3)
    contact_points: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    shapes: tuple[Shape, ...] = ()

    def __post_init__(self) -> None:
        where = f"link {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ModelError(f"link name must be a non-empty string, got {self.name!r}")
        try:
            mass = float(self.mass)
        except (TypeError, ValueError):
            raise ModelError(f"{where}: mass must be a number, got {self.mass!r}") from None
        if not np.isfinite(mass) or mass < 0.0:
            raise ModelError(f"{where}: mass must be finite and >= 0 (0: a massless frame), got {self.mass!r}")
        object.__setattr__(self, "mass", mass)
        object.__setattr__(self, "com", _vec3(self.com, f"{where}: centre of mass"))
        inertia = np.asarray(self.inertia, dtype=float)
        if inertia.shape == (3,):
            inertia = np.diag(inertia)
        if inertia.shape != (3, 3) or not np.all(np.isfinite(inertia)):
            raise ModelError(f"{where}: inertia must be a 3x3 matrix (or 3 principal moments), got shape "
                             f"{inertia.shape}")
        if mass == 0.0:
            if np.any(inertia != 0.0):
                raise ModelError(f"{where}: a massless link (a frame between joints) must have zero inertia, got "
                                 f"{inertia.tolist()}")
            object.__setattr__(self, "inertia", inertia)
            self._finish_geometry(where)
            return
        scale = max(1.0, float(np.abs(inertia).max()))
        if not np.allclose(inertia, inertia.T, atol=1e-12 * scale, rtol=1e-9):
            raise ModelError(f"{where}: inertia is not symmetric: {inertia.tolist()}")
        inertia = 0.5 * (inertia + inertia.T)
        eig = np.linalg.eigvalsh(inertia)
        if eig[0] <= 0.0:
            raise ModelError(f"{where}: inertia is not positive definite (eigenvalues {eig.tolist()})")
        if _violates_triangle(eig):
            raise ModelError(
                f"{where}: inertia violates the triangle inequality: principal moments {eig.tolist()} "
                f"(each must be at most the sum of the other two)")
        object.__setattr__(self, "inertia", inertia)
        self._finish_geometry(where)

    def _finish_geometry(self, where: str) -> None:
        pts = np.asarray(self.contact_points, dtype=float)
        if pts.size == 0:
            pts = np.zeros((0, 3))
        if pts.ndim != 2 or pts.shape[1] != 3 or not np.all(np.isfinite(pts)):
            raise ModelError(f"{where}: contact_points must be a (k, 3) array, got shape {pts.shape}")
        object.__setattr__(self, "contact_points", pts)
        shapes = tuple(self.shapes)
        for sh in shapes:
            if not isinstance(sh, Shape):
                raise ModelError(f"{where}: shapes must be Shape objects, got {type(sh).__name__}")
        object.__setattr__(self, "shapes", shapes)
        for a in (self.com, self.inertia, self.contact_points):
            a.setflags(write=False)

    @property
    def second_moment(self) -> np.ndarray:
        """The 4x4 second-moment matrix ``M~ = int (p;1)(p;1)^T dm`` in the link frame (seed 000 Eq. 8)."""
        m, c, Ic = self.mass, self.com, self.inertia
        sigma = 0.5 * np.trace(Ic) * np.eye(3) - Ic + m * np.outer(c, c)
        M = np.empty((4, 4))
        M[:3, :3] = sigma
        M[:3, 3] = M[3, :3] = m * c
        M[3, 3] = m
        return M


@dataclass(frozen=True, eq=False)
class Joint:
    """A joint connecting ``parent`` (a link name, or ``"world"``) to ``child``.

    Attributes:
        name: unique joint name.
        type: a :class:`JointType` (or its name; ``"continuous"`` is accepted as revolute).
        parent: parent link name, or ``WORLD`` to attach the child to the inertial frame.
        child: child link name.
        origin: 4x4 transform of the joint frame in the parent link frame (use :func:`transform`).
        axis: unit axis in the joint frame for revolute and prismatic joints (normalised here).
        lower, upper: position limits (may be infinite); informational unless a force model uses them.
        effort, velocity: actuator limits from the source file (informational).
        armature: reflected rotor inertia (kg m^2 or kg) added to the mass matrix's diagonal on each of the
            joint's coordinates (MJCF ``armature``); hinges and slides only (revolute, prismatic, ``ball2``,
            ``spherical``), >= 0. ``pbad`` (every order, also on ball / free models) and ``pbfd`` add
            ``1/2 a qd^2`` to their kinetic term; ``pbd_nmdp`` and the seed-003 forward-dynamics plug-ins refuse
            a model with armature rather than ignore it.
    """

    name: str
    type: JointType | str
    parent: str
    child: str
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))
    axis: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    lower: float = -np.inf
    upper: float = np.inf
    effort: float = np.inf
    velocity: float = np.inf
    armature: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ModelError(f"joint name must be a non-empty string, got {self.name!r}")
        where = f"joint {self.name!r} of link {self.child!r}"
        object.__setattr__(self, "type", JointType.parse(self.type, where=where))
        object.__setattr__(self, "origin", _rigid_transform(self.origin, f"{where}: origin"))
        axis = _vec3(self.axis, f"{where}: axis")
        object.__setattr__(self, "axis", _unit_axis(axis, self.type in (JointType.REVOLUTE, JointType.PRISMATIC),
                                                    f"{where}: axis", self.axis))
        for attr in ("lower", "upper", "effort", "velocity"):
            v = getattr(self, attr)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or math.isnan(v):
                raise ModelError(f"{where}: {attr} must be a number (infinite for none), got {v!r}")
            object.__setattr__(self, attr, float(v))
        if self.lower > self.upper:
            raise ModelError(f"{where}: lower limit {self.lower} exceeds upper limit {self.upper}")
        if self.lower == math.inf or self.upper == -math.inf:
            raise ModelError(f"{where}: limits [{self.lower}, {self.upper}] admit no finite position")
        for attr in ("effort", "velocity"):
            if getattr(self, attr) < 0:
                raise ModelError(f"{where}: {attr} limit must be >= 0 (infinite for none), got {getattr(self, attr)}")
        arm = self.armature
        if isinstance(arm, bool) or not isinstance(arm, (int, float, np.integer, np.floating)) \
                or not math.isfinite(arm) or arm < 0:
            raise ModelError(f"{where}: armature must be a finite number >= 0, got {arm!r}")
        object.__setattr__(self, "armature", float(arm))
        if arm > 0 and self.type in (JointType.FLOATING, JointType.FREE, JointType.BALL, JointType.FIXED):
            raise ModelError(f"{where}: armature is supported on hinges and slides only, not on a "
                             f"{self.type.value} joint")
        for a in (self.origin, self.axis):
            a.setflags(write=False)

    @property
    def nq(self) -> int:
        return self.type.nq

    @property
    def nv(self) -> int:
        return self.type.nv

    def elementary(self) -> list[tuple[str, np.ndarray, str]]:
        """The joint's motion as elements: hinges ('R') / slides ('P') about a unit axis, or one spherical
        ('S', quaternion) / free ('F', position and quaternion) element: (kind, unit axis, name)."""
        out = []
        for kind, ax, label in _ELEMENTARY[self.type]:
            axis = self.axis if ax is None else np.asarray(ax)
            out.append((kind, axis, self.name if not label else f"{self.name}:{label}"))
        return out

    def q_names(self) -> list[str]:
        """Names of the joint's configuration coordinates."""
        out = []
        for kind, _, name in self.elementary():
            out.extend([f"{self.name}:{x}" for x in _Q_LABELS[kind]] if kind in _Q_LABELS else [name])
        return out

    def v_names(self) -> list[str]:
        """Names of the joint's velocity coordinates."""
        out = []
        for kind, _, name in self.elementary():
            out.extend([f"{self.name}:{x}" for x in _V_LABELS[kind]] if kind in _V_LABELS else [name])
        return out


def _force_specs(entries: Iterable[Any], model_name: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    """``default_forces`` entries (names or ``(name, params)`` pairs) as ``(name, params)`` pairs."""
    out = []
    for e in entries:
        name, params = (e, {}) if isinstance(e, str) else (e if isinstance(e, (tuple, list)) and len(e) == 2
                                                            else (None, None))
        if not isinstance(name, str) or not isinstance(params, Mapping):
            raise ModelError(f"model {model_name!r}: default_forces entries must be force-model names or (name, "
                             f"params dict) pairs, got {e!r}")
        out.append((name, dict(params)))
    return tuple(out)


class ArticulatedBody:
    """A validated articulated tree: links, the joints connecting them, gravity.

    The model is one or several trees. Their roots (``bases``) are at most one link that is not the child of any
    joint (fixed to the world at the origin) and every link that is the child of a joint whose parent is
    ``"world"`` (two arms in one world, a robot and a free object). Joints are reordered topologically.

    Args:
        links: the rigid links.
        joints: the joints; each link except the base is the child of exactly one joint.
        gravity: gravitational acceleration in world coordinates (default (0, 0, -9.81)).
        name: a label for messages and caches.
        default_forces: force models that belong to the model itself, as registered names or ``(name,
            params)`` pairs: a :class:`~pbframework.simulate.Simulator` adds each one to the forces it is
            given unless a force model of that name is among them already (so passing your own
            ``("joint_limits", {...})`` replaces the default). :func:`~pbframework.io.load_urdf` and
            :func:`~pbframework.io.load_mjcf` add ``joint_limits`` when a joint declares limits. Kept in
            ``model.default_forces`` as a tuple of ``(name, params)`` pairs.
        display: the model's display geometry (:class:`pbframework.display.Display`), drawing only;
            :func:`~pbframework.io.load_urdf` stores the file's ``<visual>`` elements here. None: drawn from
            the links' shapes or inertia (:func:`pbframework.display.display_geometry`).

    Raises:
        ModelError: naming the offending link or joint (duplicate names, unknown parent or child, a link
            with two parent joints, cycles, two links without a parent joint, ...).
    """

    def __init__(self, links: Iterable[Link], joints: Iterable[Joint] = (),
                 gravity: Sequence[float] = DEFAULT_GRAVITY, name: str = "model",
                 default_forces: Iterable[str | tuple[str, Mapping[str, Any]]] = (), display: Any = None) -> None:
        try:
            links, joints = list(links), list(joints)
        except TypeError:
            raise ModelError(f"model {name!r}: links and joints must be iterables of Link and Joint objects, got "
                             f"{type(links).__name__} and {type(joints).__name__}") from None
        self.name = str(name)
        self.default_forces = _force_specs(default_forces, self.name)
        self.display = display
        if not links:
            raise ModelError(f"model {self.name!r}: needs at least one link")
        for x in links:
            if not isinstance(x, Link):
                raise ModelError(f"model {self.name!r}: expected Link objects, got {type(x).__name__}")
        for j in joints:
            if not isinstance(j, Joint):
                raise ModelError(f"model {self.name!r}: expected Joint objects, got {type(j).__name__}")
        by_name: dict[str, Link] = {}
        for link in links:
            if link.name in by_name:
                raise ModelError(f"duplicate link name {link.name!r}")
            if link.name == WORLD:
                raise ModelError(f"link name {WORLD!r} is reserved for the inertial frame")
            by_name[link.name] = link
        seen_j: set[str] = set()
        parent_joint: dict[str, Joint] = {}
        for j in joints:
            if j.name in seen_j:
                raise ModelError(f"duplicate joint name {j.name!r}")
            seen_j.add(j.name)
            if j.child not in by_name:
                raise ModelError(f"joint {j.name!r}: unknown child link {j.child!r}")
            if j.parent != WORLD and j.parent not in by_name:
                raise ModelError(f"joint {j.name!r} of link {j.child!r}: unknown parent link {j.parent!r}")
            if j.parent == j.child:
                raise ModelError(f"joint {j.name!r}: link {j.child!r} cannot be its own parent")
            if j.child in parent_joint:
                raise ModelError(f"link {j.child!r} has two parent joints: {parent_joint[j.child].name!r} "
                                 f"and {j.name!r} (a tree allows one)")
            parent_joint[j.child] = j
        for j in joints:
            if j.type in (JointType.FLOATING, JointType.FREE) and j.parent != WORLD:
                raise ModelError(f"joint {j.name!r} of link {j.child!r}: a {j.type.value} joint must have parent "
                                 f"{WORLD!r}, got {j.parent!r}")
        roots = [x.name for x in links if x.name not in parent_joint]
        world_children = [j.child for j in joints if j.parent == WORLD]
        bases = roots + world_children
        # Cycle detection: walk parents from every link, stopping at links already known to reach a root
        # (linear in the number of links, however deep the tree).
        reaches_root: set[str] = set()
        for link in links:
            path, on_path, cur = [link.name], {link.name}, link.name
            while cur not in reaches_root and cur in parent_joint and parent_joint[cur].parent != WORLD:
                cur = parent_joint[cur].parent
                if cur in on_path:
                    cyc = " -> ".join(path[path.index(cur):] + [cur])
                    raise ModelError(f"joints form a cycle through links {cyc} (joint "
                                     f"{parent_joint[link.name].name!r})")
                path.append(cur)
                on_path.add(cur)
            reaches_root.update(path)
        if len(roots) > 1:
            raise ModelError(f"model {self.name!r}: links {sorted(roots)} have no parent joint; at most one link may "
                             f"be welded to the world that way (attach the others by a joint to {WORLD!r})")
        if not bases:
            raise ModelError(f"model {self.name!r}: no base link (every link has a parent joint, none to "
                             f"{WORLD!r})")
        self.base = bases[0]
        self.bases: tuple[str, ...] = tuple(bases)
        """The roots of the model's trees: a link without a parent joint (welded to the world at the origin),
        then each link attached to the world by a joint, in the user's order. ``base`` is the first."""
        # Topological order: breadth-first from the bases, keeping the user's order among siblings.
        children: dict[str, list[Joint]] = {}
        for j in joints:
            children.setdefault(j.parent, []).append(j)
        order: list[Joint] = list(children.get(WORLD, []))
        frontier = list(bases)
        while frontier:
            nxt = []
            for name in frontier:
                for j in children.get(name, []):
                    order.append(j)
                    nxt.append(j.child)
            frontier = nxt
        link_order = roots + [j.child for j in order]
        self.links: tuple[Link, ...] = tuple(by_name[n] for n in link_order)
        self.joints: tuple[Joint, ...] = tuple(order)
        self._link_index = {x.name: i for i, x in enumerate(self.links)}
        self._joint_index = {j.name: i for i, j in enumerate(self.joints)}
        self.parent_joint = dict(parent_joint)
        self.gravity = _vec3(gravity, f"model {self.name!r}: gravity")
        self.gravity.setflags(write=False)
        names: list[str] = []
        vnames: list[str] = []
        self.joint_q_index: dict[str, slice] = {}
        self.joint_v_index: dict[str, slice] = {}
        for j in self.joints:
            start, vstart = len(names), len(vnames)
            names.extend(j.q_names())
            vnames.extend(j.v_names())
            self.joint_q_index[j.name] = slice(start, len(names))
            self.joint_v_index[j.name] = slice(vstart, len(vnames))
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ModelError(f"model {self.name!r}: coordinate names collide: {dup}")
        self.dof_names: tuple[str, ...] = tuple(names)
        self.velocity_names: tuple[str, ...] = tuple(vnames)
        self.obstacles: tuple = ()
        """Static contact geometry of the model's world (:class:`~pbframework.geometry.Plane` / ``Box``), set by
        :func:`~pbframework.io.load_mjcf` from the geoms welded to the world (a scene's floor)."""
        self.cache: dict = {}

    # -- sizes and look-ups ------------------------------------------------------------------------
    @property
    def nq(self) -> int:
        """Number of configuration coordinates."""
        return len(self.dof_names)

    @property
    def nv(self) -> int:
        """Number of velocity coordinates (``nq`` minus one per ``ball`` and ``free`` joint)."""
        return len(self.velocity_names)

    @property
    def on_group(self) -> bool:
        """Whether some joint's configuration lives on the rotation group (``ball`` / ``free``: nq != nv)."""
        return any(j.type in (JointType.BALL, JointType.FREE) for j in self.joints)

    def neutral(self) -> np.ndarray:
        """The neutral configuration: zeros, with every quaternion the identity ``(0, 0, 0, 1)``."""
        q = np.zeros(self.nq)
        for j in self.joints:
            if j.type in (JointType.BALL, JointType.FREE):
                q[self.joint_q_index[j.name].stop - 1] = 1.0
        return q

    @property
    def nlinks(self) -> int:
        return len(self.links)

    @property
    def total_mass(self) -> float:
        return float(sum(x.mass for x in self.links))

    @property
    def has_floating_base(self) -> bool:
        return any(j.type in (JointType.FLOATING, JointType.FREE) for j in self.joints)

    def link(self, name: str) -> Link:
        try:
            return self.links[self._link_index[name]]
        except KeyError:
            raise KeyError(f"model {self.name!r} has no link {name!r} (links: "
                           f"{', '.join(x.name for x in self.links)})") from None

    def link_index(self, name: str) -> int:
        self.link(name)
        return self._link_index[name]

    def joint(self, name: str) -> Joint:
        try:
            return self.joints[self._joint_index[name]]
        except KeyError:
            raise KeyError(f"model {self.name!r} has no joint {name!r} (joints: "
                           f"{', '.join(j.name for j in self.joints)})") from None

    def dof_index(self, name: str) -> int:
        try:
            return self.dof_names.index(name)
        except ValueError:
            raise KeyError(f"model {self.name!r} has no coordinate {name!r}") from None

    @property
    def contact_points(self) -> list[tuple[int, np.ndarray]]:
        """All contact points as (link index, point in link frame), in link order."""
        return [(i, p) for i, x in enumerate(self.links) for p in x.contact_points]

    @property
    def n_contacts(self) -> int:
        return sum(len(x.contact_points) for x in self.links)

    def check_state(self, q, what: str = "q") -> np.ndarray:
        """Return ``q`` as a float vector of length ``nq``; raise ValueError naming what is wrong (a
        quaternion of a ``ball`` / ``free`` joint must have unit norm to 1e-9)."""
        a = self._check_vector(q, what, self.nq, "nq", self.dof_names)
        for j in self.joints:
            if j.type in (JointType.BALL, JointType.FREE):
                sl = self.joint_q_index[j.name]
                n = float(np.linalg.norm(a[sl.stop - 4:sl.stop]))
                if abs(n - 1.0) > 1e-9:
                    raise ModelError(f"{what}: the quaternion of {j.type.value} joint {j.name!r} has norm {n:.12g}, "
                                     f"not 1 (see model.neutral() for the identity)")
        return a

    def check_velocity(self, v, what: str = "v") -> np.ndarray:
        """Return ``v`` as a float vector of length ``nv``; raise ValueError naming what is wrong."""
        return self._check_vector(v, what, self.nv, "nv", self.velocity_names)

    def _check_vector(self, x, what: str, n: int, size: str, names: Sequence[str]) -> np.ndarray:
        """``x`` as a real float vector of length ``n``; a :class:`ModelError` (a ``ValueError``) otherwise."""
        from .checks import vector

        return vector(x, what, n, f"{size}={n} for model {self.name!r}", names=names, error=ModelError)

    def __repr__(self) -> str:
        return (f"ArticulatedBody({self.name!r}, links={self.nlinks}, joints={len(self.joints)}, "
                f"nq={self.nq}" + (f", nv={self.nv}" if self.nv != self.nq else "") + ")")


def _unit_axis(axis: np.ndarray, required: bool, what: str, given: Any) -> np.ndarray:
    """``axis`` (3 finite numbers) scaled to unit length without overflow or underflow (its largest entry
    first, so ``1e200 1e200 0`` is the diagonal, not a null axis). ``required``: a zero axis (largest entry
    below 1e-12) is a :class:`ModelError` naming ``what``; otherwise it is returned as given."""
    big = float(np.max(np.abs(axis)))
    if big < 1e-12:
        if required:
            raise ModelError(f"{what} must be non-zero, got {given!r}")
        return axis
    unit = axis / big
    unit = unit / np.linalg.norm(unit)
    if not (np.all(np.isfinite(unit)) and abs(float(np.linalg.norm(unit)) - 1.0) < 1e-12):
        raise ModelError(f"{what}: {given!r} does not normalise to a unit vector")
    return unit
