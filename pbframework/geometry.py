"""Contact geometry, shared by every contact model: obstacles, contact points, depths and normals.

Every contact force model (penalty contact, PBFD of seed 002, NMDP of seed 001) asks the same questions of
the same geometry: where are the model's contact points, how deep is each inside an obstacle, and along which
normal does the obstacle push it out. This module answers them once, in CasADi, so derivatives of every order
and generated C come with the answers.

Obstacles
---------
Static obstacles are :class:`Obstacle` objects. Each maps world points ``P`` (3 x n, a CasADi expression)
to a *signed distance* ``phi(P)`` (1 x n: > 0 outside, 0 on the surface, < 0 inside) and an *outward
normal* ``n(P)`` (3 x n, unit columns: the direction that takes the point out of the obstacle, the
direction of the contact force on the point). The *penetration* is ``-phi`` (positive inside).

- :class:`Plane`: the half-space below ``{x : normal . x = offset}`` (or through a ``point``); the ground
  is ``Plane()``, a slope rising along +x by an angle ``a`` is ``Plane((-sin a, 0, cos a))``.
- :class:`Box`: a solid box (centre, half-extents, rotation), with its exact signed distance (outside: the
  distance to the nearest face, edge or corner; inside: minus the distance to the nearest face).
- :class:`Union`: several obstacles; at each point the deepest one counts (the largest penetration, that is
  the nearest obstacle when outside all), exactly, or smoothly with ``smoothing > 0`` (a log-sum-exp of
  width ``smoothing`` in metres; the normal a softmax-weighted mean, renormalised).

A depth for a force law is the penetration clipped at zero, :func:`depth`: exact ``max(0, -phi)`` or, with
``smoothing = eps > 0``, the softplus ``eps log(1 + exp(-phi / eps))``, infinitely smooth, above the exact
depth by at most ``eps log 2`` (at the surface) and converging to it as ``eps -> 0``.

The box's signed distance is continuously differentiable outside the box and non-smooth inside it where
two faces are equally near (its medial surfaces); a contact point sits there only when it is as deep as
half the box, so the force laws see a smooth depth in practice. The normal of a point exactly on an edge
or in the box's centre picks one of the equal candidates.

Contact points
--------------
The model's contact points are ``Link.contact_points`` (link frame), placed in the world by
:func:`pbframework.kinematics.contact_positions`, which handles every joint type (``ball`` / ``free``
quaternions included). Points come from

- the model's builder (``Link(..., contact_points=...)``) or :func:`with_contact_points` (points by link name);
- the links' collision shapes (``Link.shapes``: URDF ``<collision>`` and MJCF ``<geom>`` spheres, boxes and
  capsules, read by the loaders), sampled on their surfaces at a chosen spacing by
  :func:`sample_contact_points` (a box's 8 corners at the coarsest, grids on its faces at finer spacings;
  rings on spheres and capsules), which is how the number of contact points is varied (seed 002 Fig. 6c).

:func:`contact_geometry` is the symbolic function of the model, ``(q) -> (d, n, phi)`` for every contact
point against an obstacle set, ``q`` with ``nq`` entries. On a model with quaternion joints, differentiate it
along the tangent as the force models do (``plugins/forces/_common.py``, ``TangentSymbols``: evaluate at
``q (+) e`` and differentiate by ``e`` at 0).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Iterable, Mapping, Sequence

import casadi as ca
import numpy as np

from .kinematics import contact_positions
from .model import ArticulatedBody, Shape, ShapeType

__all__ = ["Obstacle", "Plane", "Box", "Union", "softplus", "depth", "contact_geometry", "sample_surface",
           "sample_contact_points", "with_contact_points"]


def softplus(x):
    """``log(1 + exp(x))`` without overflow (CasADi expression)."""
    return ca.fmax(x, 0) + ca.log1p(ca.exp(-ca.fabs(x)))


def _width(who: str, smoothing: float) -> float:
    try:
        eps = float(smoothing)
    except (TypeError, ValueError):
        eps = float("nan")
    if isinstance(smoothing, bool) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"{who}: smoothing must be a finite number >= 0 (metres; 0 = exact), got {smoothing!r}")
    return eps


def _vector3(who: str, name: str, value) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        a = np.zeros(0)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise ValueError(f"{who}: {name} must be 3 finite numbers, got {value!r}")
    return a


class Obstacle(abc.ABC):
    """A static obstacle: signed distances and outward normals of world points (CasADi, any of SX / MX / DM)."""

    @abc.abstractmethod
    def signed_distance(self, P):
        """``phi`` (1 x n) of the points ``P`` (3 x n): > 0 outside, < 0 inside."""

    @abc.abstractmethod
    def normal_at(self, P):
        """Outward unit normals (3 x n) at the points ``P`` (3 x n): the direction out of the obstacle."""

    def penetration(self, P):
        """``-phi`` (1 x n): positive inside the obstacle."""
        return -self.signed_distance(P)


@dataclasses.dataclass(frozen=True, eq=False, init=False)
class Plane(Obstacle):
    """The half-space behind the plane ``{x : normal . x = offset}``; ``normal`` points out of it.

    Args:
        normal: 3 numbers, not all zero (normalised here); default ``(0, 0, 1)``, the ground.
        offset: ``h`` in m (default 0); or give ``point``, a point on the plane, instead.
        point: a point on the plane (then ``offset = normal . point``).
    """

    normal: np.ndarray
    offset: float

    def __init__(self, normal: Sequence[float] = (0.0, 0.0, 1.0), offset: float | None = None, *,
                 point: Sequence[float] | None = None) -> None:
        n = _vector3("plane", "normal", normal)
        if np.linalg.norm(n) < 1e-12:
            raise ValueError(f"plane: normal must be 3 finite numbers, not all zero, got {normal!r}")
        n = n / np.linalg.norm(n)
        if point is not None and offset is not None:
            raise ValueError("plane: give offset or point, not both")
        if point is not None:
            h = float(n @ _vector3("plane", "point", point))
        else:
            h = 0.0 if offset is None else float(offset)
            if isinstance(offset, bool) or not math.isfinite(h):
                raise ValueError(f"plane: offset must be a finite number, got {offset!r}")
        n.setflags(write=False)
        object.__setattr__(self, "normal", n)
        object.__setattr__(self, "offset", h)

    def signed_distance(self, P):
        return ca.mtimes(ca.DM(self.normal).T, P) - self.offset

    def normal_at(self, P):
        return ca.repmat(ca.DM(self.normal), 1, P.shape[1])


@dataclasses.dataclass(frozen=True, eq=False, init=False)
class Box(Obstacle):
    """A solid static box.

    Args:
        centre: its centre in world coordinates (m).
        half_extents: 3 numbers > 0 (m), along the box's axes.
        rotation: 3x3 rotation whose columns are the box's axes in world coordinates (default identity).
    """

    centre: np.ndarray
    half_extents: np.ndarray
    rotation: np.ndarray

    def __init__(self, centre: Sequence[float], half_extents: Sequence[float],
                 rotation: np.ndarray | None = None) -> None:
        c = _vector3("box", "centre", centre)
        h = _vector3("box", "half_extents", half_extents)
        if np.any(h <= 0):
            raise ValueError(f"box: half_extents must all be > 0, got {half_extents!r}")
        R = np.eye(3) if rotation is None else np.asarray(rotation, dtype=float)
        if (R.shape != (3, 3) or not np.all(np.isfinite(R)) or not np.allclose(R.T @ R, np.eye(3), atol=1e-9)
                or np.linalg.det(R) < 0):
            raise ValueError(f"box: rotation must be a proper 3x3 rotation matrix (orthonormal, determinant +1), "
                             f"got {np.asarray(rotation).tolist()!r}")
        for name, a in (("centre", c), ("half_extents", h), ("rotation", R.copy())):
            a.setflags(write=False)
            object.__setattr__(self, name, a)

    def _local(self, P):
        """Points in box coordinates and ``q = |x| - h`` (3 x n each)."""
        x = ca.mtimes(ca.DM(self.rotation).T, P - ca.repmat(ca.DM(self.centre), 1, P.shape[1]))
        return x, ca.fabs(x) - ca.repmat(ca.DM(self.half_extents), 1, P.shape[1])

    def signed_distance(self, P):
        _, q = self._local(P)
        inside = ca.fmax(ca.fmax(q[0, :], q[1, :]), q[2, :])   # > 0 iff outside
        qp = ca.fmax(q, 0)
        # sqrt only where outside: its derivative at 0 is not finite, and if_else drops the unused branch.
        return ca.if_else(inside > 0, ca.sqrt(ca.sum1(qp * qp)), inside)

    def normal_at(self, P):
        x, q = self._local(P)
        sign = ca.if_else(x >= 0, 1, -1)
        qp = ca.fmax(q, 0)
        out = qp / ca.repmat(ca.sqrt(ca.fmax(ca.sum1(qp * qp), 1e-300)), 3, 1)
        # inside: the axis of the nearest face (the largest q), ties to the lower axis
        k0 = ca.logic_and(q[0, :] >= q[1, :], q[0, :] >= q[2, :])
        k1 = ca.logic_and(ca.logic_not(k0), q[1, :] >= q[2, :])
        k2 = ca.logic_not(ca.logic_or(k0, k1))
        face = ca.vertcat(k0, k1, k2)
        outside = ca.fmax(ca.fmax(q[0, :], q[1, :]), q[2, :]) > 0
        local = sign * ca.if_else(ca.repmat(outside, 3, 1), out, face)
        return ca.mtimes(ca.DM(self.rotation), local)


@dataclasses.dataclass(frozen=True, eq=False, init=False)
class Union(Obstacle):
    """Several obstacles as one: at each point the deepest counts (the largest penetration).

    Args:
        obstacles: one or more :class:`Obstacle` objects.
        smoothing: 0 (default) = exact maximum, its normal that of the deepest obstacle; ``eps > 0`` (m) = the
            log-sum-exp ``eps log sum exp(-phi_i / eps)`` (above the exact one by at most ``eps log k`` for
            ``k`` obstacles), its normal the mean of the obstacles' normals weighted by ``softmax(-phi /
            eps)``, renormalised.
    """

    obstacles: tuple[Obstacle, ...]
    smoothing: float

    def __init__(self, obstacles: Iterable[Obstacle], smoothing: float = 0.0) -> None:
        obs = tuple(obstacles)
        if not obs:
            raise ValueError("union: needs at least one obstacle")
        for o in obs:
            if not isinstance(o, Obstacle):
                raise ValueError(f"union: expected Obstacle objects (Plane, Box, Union), got {type(o).__name__}")
        object.__setattr__(self, "obstacles", obs)
        object.__setattr__(self, "smoothing", _width("union", smoothing))

    def _weights(self, P):
        """The penetrations (k x n), their maximum (1 x n) and the selection weights (k x n)."""
        S = ca.vertcat(*[o.penetration(P) for o in self.obstacles])
        k = len(self.obstacles)
        m = S[0, :]
        for i in range(1, k):
            m = ca.fmax(m, S[i, :])
        if self.smoothing > 0:
            E = ca.exp((S - ca.repmat(m, k, 1)) / self.smoothing)
            return S, m, E / ca.repmat(ca.sum1(E), k, 1)
        rows, taken = [], 0
        for i in range(k):  # the first obstacle reaching the maximum
            w = ca.logic_and(S[i, :] >= m, ca.logic_not(taken))
            rows.append(w)
            taken = ca.logic_or(taken, w)
        return S, m, ca.vertcat(*rows)

    def penetration(self, P):
        if len(self.obstacles) == 1:
            return self.obstacles[0].penetration(P)
        S, m, _ = self._weights(P)
        if self.smoothing == 0:
            return m
        k = len(self.obstacles)
        return m + self.smoothing * ca.log(ca.sum1(ca.exp((S - ca.repmat(m, k, 1)) / self.smoothing)))

    def signed_distance(self, P):
        return -self.penetration(P)

    def normal_at(self, P):
        if len(self.obstacles) == 1:
            return self.obstacles[0].normal_at(P)
        _, _, W = self._weights(P)
        N = 0
        for i, o in enumerate(self.obstacles):
            N = N + ca.repmat(W[i, :], 3, 1) * o.normal_at(P)
        if self.smoothing == 0:
            return N
        return N / ca.repmat(ca.sqrt(ca.sum1(N * N)), 3, 1)


def as_obstacle(obstacles: Obstacle | Iterable[Obstacle], smoothing: float = 0.0) -> Obstacle:
    """One obstacle as itself; several as their :class:`Union` (with ``smoothing``)."""
    if isinstance(obstacles, Obstacle):
        return obstacles
    return Union(obstacles, smoothing)


def depth(obstacle: Obstacle, P, smoothing: float = 0.0):
    """Penetration depths (1 x n) of the points ``P`` (3 x n): ``max(0, -phi)``, or with ``smoothing = eps > 0``
    the softplus ``eps log(1 + exp(-phi / eps))`` (infinitely smooth, positive everywhere)."""
    eps = _width("depth", smoothing)
    s = obstacle.penetration(P)
    if eps > 0:
        return eps * softplus(s / eps)
    return ca.fmax(s, 0)


def contact_geometry(model: ArticulatedBody, obstacles: Obstacle | Iterable[Obstacle], *,
                     smoothing: float = 0.0) -> ca.Function:
    """``(q) -> (d, n, phi)`` for every contact point of ``model`` against ``obstacles``.

    Args:
        model: a model with contact points (``model.n_contacts > 0``); any joint types, ``q`` has ``nq``
            entries (quaternions of ``ball`` / ``free`` joints included).
        obstacles: an :class:`Obstacle`, or several (their exact :class:`Union`; build a ``Union`` yourself
            for a smooth one).
        smoothing: the width of the softplus of the depth ``d`` (m, 0 = exact ``max(0, -phi)``).

    Returns:
        A ``casadi.Function`` named ``contact_geometry`` with input ``q`` (nq) and outputs ``d`` (1 x nc,
        depths >= 0), ``n`` (3 x nc, outward unit normals) and ``phi`` (1 x nc, signed distances), one column
        per contact point in ``model.contact_points`` order.
    """
    if model.n_contacts == 0:
        raise ValueError(f"contact_geometry: model {model.name!r} has no contact points; give its links contact "
                         f"points (Link(..., contact_points=...), with_contact_points) or sample its collision "
                         f"shapes (sample_contact_points)")
    obstacle = as_obstacle(obstacles)
    q = ca.SX.sym("q", model.nq)
    P = contact_positions(model)(q)
    phi = obstacle.signed_distance(P)
    return ca.Function("contact_geometry", [q], [depth(obstacle, P, smoothing), obstacle.normal_at(P), phi],
                       ["q"], ["d", "n", "phi"])


# -- contact points ---------------------------------------------------------------------------------------------

def _segments(length: float, spacing: float, minimum: int = 1) -> int:
    return max(minimum, math.ceil(length / spacing - 1e-9)) if math.isfinite(spacing) else minimum


def _revolution(radius: float, half_length: float, spacing: float) -> np.ndarray:
    """Points on a capsule about z (a sphere when ``half_length`` is 0): rings along its meridian."""
    nc = _segments(0.5 * math.pi * radius, spacing)
    angles = np.linspace(0.0, 0.5 * math.pi, nc + 1)
    profile = [(radius * math.sin(a), -half_length - radius * math.cos(a)) for a in angles]       # bottom cap
    if half_length > 0:
        nz = _segments(2 * half_length, spacing)
        profile += [(radius, z) for z in np.linspace(-half_length, half_length, nz + 1)[1:]]
    profile += [(radius * math.cos(a), half_length + radius * math.sin(a)) for a in angles[1:]]   # top cap
    pts = []
    for rho, z in profile:
        m = 1 if rho < 1e-12 * radius else _segments(2 * math.pi * rho, spacing, 4)
        pts += [(rho * math.cos(t), rho * math.sin(t), z) for t in 2 * math.pi * np.arange(m) / m]
    return np.array(pts)


def _box_surface(half: np.ndarray, spacing: float) -> np.ndarray:
    """Grid points on a box's faces (its 8 corners at the coarsest), no point twice."""
    grids = [np.linspace(-h, h, _segments(2 * h, spacing) + 1) for h in half]
    idx = np.stack(np.meshgrid(*[np.arange(g.size) for g in grids], indexing="ij"), -1).reshape(-1, 3)
    on_face = np.any((idx == 0) | (idx == np.array([g.size - 1 for g in grids])), axis=1)
    idx = idx[on_face]
    return np.column_stack([grids[k][idx[:, k]] for k in range(3)])


def _spacing(who: str, spacing: float | None) -> float:
    if spacing is None:
        return math.inf
    try:
        s = float(spacing)
    except (TypeError, ValueError):
        s = float("nan")
    if isinstance(spacing, bool) or not s > 0 or math.isnan(s):
        raise ValueError(f"{who}: spacing must be a number > 0 (metres between neighbouring points) or None "
                         f"(the coarsest sampling), got {spacing!r}")
    return s


def sample_surface(shape: Shape, spacing: float | None = None) -> np.ndarray:
    """Points on the surface of ``shape`` (k x 3, in the link frame), neighbours at most ``spacing`` apart.

    A box: a grid on each face with ``ceil(2 h_i / spacing) + 1`` points along axis ``i`` (its 8 corners for a
    spacing of at least its longest edge, or ``None``). A sphere or capsule: rings about its axis along the
    meridian, ``ceil(circumference / spacing)`` points a ring (at least 4), one point at each pole (the
    coarsest: a sphere's 6 axis points; a capsule's poles and the rings where its caps meet the cylinder).
    """
    s = _spacing("sample_surface", spacing)
    if not isinstance(shape, Shape):
        raise ValueError(f"sample_surface: expected a Shape, got {type(shape).__name__}")
    if shape.type is ShapeType.BOX:
        local = _box_surface(shape.size, s)
    else:
        half = float(shape.size[1]) if shape.type is ShapeType.CAPSULE else 0.0
        local = _revolution(float(shape.size[0]), half, s)
    return local @ shape.pose[:3, :3].T + shape.pose[:3, 3]


def _rebuild(model: ArticulatedBody, points: Mapping[str, np.ndarray]) -> ArticulatedBody:
    links = [dataclasses.replace(x, contact_points=points[x.name]) if x.name in points else x for x in model.links]
    out = ArticulatedBody(links, model.joints, gravity=model.gravity, name=model.name,
                          default_forces=model.default_forces, display=model.display)
    out.obstacles = model.obstacles
    for attr in ("mujoco_joints", "mujoco_sizes", "mujoco_quaternions"):     # set by load_mjcf
        if hasattr(model, attr):
            setattr(out, attr, getattr(model, attr))
    return out


def _known_links(who: str, model: ArticulatedBody, names: Iterable[str]) -> None:
    for name in names:
        if name not in {x.name for x in model.links}:
            raise ValueError(f"{who}: model {model.name!r} has no link {name!r} (links: "
                             f"{', '.join(x.name for x in model.links)})")


def with_contact_points(model: ArticulatedBody, points: Mapping[str, Sequence[Sequence[float]]], *,
                        replace: bool = False) -> ArticulatedBody:
    """A copy of ``model`` with contact points added to (or, ``replace=True``, replacing) its links' own.

    Args:
        points: link name -> points in that link's frame (k x 3).
        replace: drop the named links' existing contact points first (other links keep theirs).
    """
    who = "with_contact_points"
    _known_links(who, model, points)
    new = {}
    for name, pts in points.items():
        try:
            a = np.asarray(pts, dtype=float).reshape(-1, 3)
        except (TypeError, ValueError):
            raise ValueError(f"{who}: points of link {name!r} must be a (k, 3) array, got {pts!r}") from None
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{who}: points of link {name!r} must be finite, got {pts!r}")
        new[name] = a if replace else np.vstack([model.link(name).contact_points, a])
    return _rebuild(model, new)


def sample_contact_points(model: ArticulatedBody, spacing: float | None = None, *,
                          links: Iterable[str] | None = None, keep: bool = True) -> ArticulatedBody:
    """A copy of ``model`` whose links carry contact points sampled on their collision shapes.

    Args:
        spacing: the largest distance between neighbouring points on a shape's surface (m); ``None``: the
            coarsest sampling (:func:`sample_surface`). Smaller spacings give more points.
        links: the links to sample (names), default every link with shapes.
        keep: keep the links' existing contact points, the samples after them (``False``: the sampled links
            get the samples only).

    Raises:
        ValueError: an unknown link name, a named link without shapes, a model without any shapes, a spacing
            that is not a positive number.
    """
    who = "sample_contact_points"
    _spacing(who, spacing)
    if links is None:
        names = [x.name for x in model.links if x.shapes]
        if not names:
            raise ValueError(f"{who}: model {model.name!r} has no collision shapes (Link.shapes, read from URDF "
                             f"<collision> / MJCF <geom> spheres, boxes and capsules); give contact points with "
                             f"with_contact_points instead")
    else:
        names = [links] if isinstance(links, str) else list(links)
        _known_links(who, model, names)
        bare = [n for n in names if not model.link(n).shapes]
        if bare:
            raise ValueError(f"{who}: link {bare[0]!r} of model {model.name!r} has no collision shapes to sample")
    new = {}
    for name in names:
        link = model.link(name)
        samples = [sample_surface(s, spacing) for s in link.shapes]
        new[name] = np.vstack(([link.contact_points] if keep else []) + samples)
    return _rebuild(model, new)
