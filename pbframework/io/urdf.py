"""URDF importer: a URDF file to an :class:`~pbframework.model.ArticulatedBody`.

What is read
------------
- ``<link>``: the ``<inertial>`` (mass, inertia tensor, and the ``<origin xyz rpy>`` of the inertial frame;
  the centre of mass and the tensor are converted into the link frame), and each ``<collision>`` whose
  ``<geometry>`` is a ``<sphere radius>``, a ``<box size>`` (full edge lengths) or a ``<capsule radius
  length>`` (a common extension; the segment along the collision frame's z) as a
  :class:`~pbframework.model.Shape` in ``Link.shapes`` (posed by the collision ``<origin>``; kept, moved into
  the absorbing link's frame, when a link is merged). Collision meshes and cylinders and every other child
  are ignored. Shapes are geometry only: :func:`pbframework.geometry.sample_contact_points` makes
  contact points of them.
- ``<visual>``: drawing only, read after the model is built into ``model.display``
  (:func:`pbframework.display.urdf_display`).
- ``<joint>`` of type ``revolute``, ``continuous`` (read as revolute without position limits),
  ``prismatic``, ``fixed`` and ``floating`` (only from the world link; read as this package's 6-coordinate
  floating joint): parent, child, ``<origin>``, ``<axis>`` (default ``1 0 0``) and ``<limit lower upper
  effort velocity>``. ``<mimic>`` is ignored: a mimicking joint is an independent coordinate (as in
  Pinocchio's default ``mimic=False``). Other types (``planar``, unknown) are an error.
- A root link named ``world`` is the inertial frame: its child joints attach to :data:`~pbframework.model.WORLD`
  and its own inertial, if any, is ignored.

Massless and degenerate links
-----------------------------
:class:`~pbframework.model.Link` requires positive mass and a physical inertia tensor, but genuine URDFs
contain sensor / tool frames without mass, point masses with a zero tensor, and dummy root links without
inertia (KDL cannot carry inertia on the root). Such a link is merged, which is exact for the dynamics
because rigidly attached bodies form one rigid body either way (Pinocchio merges them the same way):

1. a link attached to its parent link by a ``fixed`` joint is merged into the parent when it cannot stand
   alone: no mass, a singular inertia tensor (a point mass), or an inertia ``Link`` rejects. Its child
   joints move to the parent with composed origins;
2. a link that must stay a link (the root, or the child of a moving joint) and cannot stand alone absorbs
   the links rigidly attached to it, one child at a time in file order, until it can;
3. a root welded to the world that is still massless is dropped: its single child joint then attaches to
   the world (it is an error if it carries several).

A link left without mass, or with an inertia ``Link`` rejects, is a :class:`~pbframework.model.ModelError`
naming the file, the link and the joint that moves it, unless the only problem is the triangle inequality and
``balance_inertia=True`` asks for MuJoCo's repair. Merged links do not appear in the returned model.

Joint limits
------------
``<limit lower upper>`` of revolute and prismatic joints is kept on the joints (``Joint.lower`` /
``Joint.upper``), and a model with such a joint carries the ``joint_limits`` force in
``model.default_forces`` (``limits=False`` leaves it out); see :mod:`pbframework.limits`.
"""

from __future__ import annotations

import errno
import os
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..display import urdf_display
from ..checks import MAX_LINKS, check_links, check_mass_matrix, integer
from ..limits import default_forces
from ..model import (DEFAULT_GRAVITY, WORLD, ArticulatedBody, Joint, JointType, Link, ModelError, Shape,
                     balance_inertia, rpy_to_matrix)

__all__ = ["load_urdf", "InertiaBalanced", "InertiaMerged", "ROOT_JOINT", "URDF_JOINT_TYPES"]


class InertiaBalanced(UserWarning):
    """``balance_inertia=True`` changed the inertia of links; the message names them with their principal
    moments before and after."""


ROOT_JOINT = "root_joint"
"""Name of the floating joint that ``load_urdf(..., floating_base=True)`` adds (Pinocchio's default name)."""

URDF_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating")
"""The URDF joint types :func:`load_urdf` reads (``floating`` only with the world link as parent)."""

_URDF_TYPE_MAP = {
    "revolute": JointType.REVOLUTE,
    "continuous": JointType.REVOLUTE,
    "prismatic": JointType.PRISMATIC,
    "fixed": JointType.FIXED,
    "floating": JointType.FLOATING,
}


# -- shared XML helpers (also used by the MJCF importer) -------------------------------------------------

def _read_xml(path: str | os.PathLike, kind: str) -> tuple[ET.Element, str]:
    """Parse ``path``; return its root element and the file name to quote in messages."""
    if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
        raise ModelError(f"the {kind} path must be a str or os.PathLike, got {type(path).__name__} {path!r:.60}")
    src = os.fspath(path)
    if not src or "\0" in src:
        raise ModelError(f"{src!r}: not a usable {kind} path")
    p = Path(src)
    if not p.exists():
        raise FileNotFoundError(errno.ENOENT, f"{kind} file not found", src)
    try:
        tree = ET.parse(p)
    except ET.ParseError as exc:
        line, col = exc.position
        reason = str(exc).split(":")[0]
        raise ModelError(f"{src}: malformed XML at line {line}, column {col + 1}: {reason}") from None
    except OSError as exc:
        raise ModelError(f"{src}: cannot read the {kind} file: {exc.strerror or exc}") from None
    except LookupError as exc:                   # <?xml encoding="..."?> names a codec Python does not have
        raise ModelError(f"{src}: unknown XML encoding ({exc}); save the file as UTF-8") from None
    except (UnicodeError, ValueError) as exc:    # bytes that do not decode in the declared encoding, ...
        raise ModelError(f"{src}: cannot decode the {kind} file ({type(exc).__name__}: {exc}); save it as "
                         f"UTF-8") from None
    except (RecursionError, MemoryError):
        raise ModelError(f"{src}: the XML is nested too deeply to read") from None
    return tree.getroot(), src


def _floats(text: str | None, n: int | None, what: str) -> np.ndarray:
    """``text`` as ``n`` finite floats (any count if ``n`` is None); ModelError naming ``what`` otherwise."""
    if text is None:
        raise ModelError(f"{what}: missing")
    try:
        vals = np.array([float(t) for t in text.split()], dtype=float)
    except ValueError:
        raise ModelError(f"{what}: expected numbers, got {text!r}") from None
    if n is not None and vals.size != n:
        raise ModelError(f"{what}: expected {n} numbers, got {text!r}")
    if not np.all(np.isfinite(vals)):
        raise ModelError(f"{what}: expected finite numbers, got {text!r}")
    return vals


def _number(elem: ET.Element, attr: str, what: str, default: float | None = None) -> float:
    """Attribute ``attr`` of ``elem`` as one float; ``default`` when absent (None = required)."""
    text = elem.get(attr)
    if text is None:
        if default is None:
            raise ModelError(f"{what}: <{elem.tag}> has no {attr!r} attribute")
        return default
    try:
        value = float(text)
    except ValueError:
        raise ModelError(f"{what}: <{elem.tag}> attribute {attr}={text!r} is not a number") from None
    if np.isnan(value):
        raise ModelError(f"{what}: <{elem.tag}> attribute {attr}={text!r} is not a number")
    return value


def _homogeneous(R: np.ndarray, p: Sequence[float]) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = p
    return T


def _inverse(T: np.ndarray) -> np.ndarray:
    R, p = T[:3, :3], T[:3, 3]
    return _homogeneous(R.T, -R.T @ p)


# -- the intermediate tree both importers build -----------------------------------------------------------

@dataclass(eq=False)
class _Body:
    """A rigid body as read from a file, before merging (mass may be 0, inertia may be degenerate)."""

    name: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    shapes: list[Shape] = field(default_factory=list)

    def absorb(self, other: "_Body", T: np.ndarray) -> None:
        """Add ``other`` (whose frame is ``T`` in this body's frame) to this body's inertia and shapes."""
        self.shapes.extend(s.moved(T) for s in other.shapes)
        R, p = T[:3, :3], T[:3, 3]
        m2, c2, I2 = other.mass, R @ other.com + p, R @ other.inertia @ R.T
        m1, c1, I1 = self.mass, self.com, self.inertia
        m = m1 + m2
        if m > 0.0:
            c = (m1 * c1 + m2 * c2) / m

            def shift(mi: float, ci: np.ndarray, Ii: np.ndarray) -> np.ndarray:
                d = ci - c
                return Ii + mi * (float(d @ d) * np.eye(3) - np.outer(d, d))

            self.com, self.inertia = c, shift(m1, c1, I1) + shift(m2, c2, I2)
        else:
            self.com, self.inertia = np.zeros(3), I1 + I2
        self.mass = m


@dataclass(eq=False)
class _Edge:
    """A joint as read from a file (the fields of :class:`Joint`; parent and origin change when merging)."""

    name: str
    type: JointType
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    lower: float = -np.inf
    upper: float = np.inf
    effort: float = np.inf
    velocity: float = np.inf
    armature: float = 0.0


def _link_problem(b: _Body) -> str | None:
    """Why ``b`` cannot be a :class:`Link` with mass (None if it can)."""
    if not b.mass > 0.0:
        return f"link {b.name!r}: mass must be positive, got {b.mass!r}"
    try:
        Link(b.name, b.mass, com=b.com, inertia=b.inertia)
    except ModelError as exc:
        return str(exc)
    except np.linalg.LinAlgError:                 # entries near 1e308: no eigen-decomposition converges
        return f"link {b.name!r}: inertia {_moments(b.inertia)} too extreme for double precision"
    return None


def _incomplete(b: _Body) -> bool:
    """True if ``b`` should not stand alone: no mass, a singular tensor (a point mass), or not a valid Link."""
    if b.mass <= 0.0 or not np.all(np.isfinite(b.inertia)):
        return True
    if _eigvalsh(b.inertia)[0] <= 0.0:
        return True
    return _link_problem(b) is not None


class InertiaMerged(UserWarning):
    """A link welded to another by a fixed joint was merged into it although its own inertia describes no
    rigid body (a negative principal moment, or moments breaking the triangle inequality); the message names
    it. Real files carry such tensors on small sensor frames (tiago's antennas, pr2's stereo frame), so this
    is a warning: the merged body is checked as a whole."""


def _unphysical(b: _Body) -> str | None:
    """Why ``b``'s inertia describes no rigid body (None if it does, or is a massless frame or point mass):
    a negative principal moment, or, with mass, moments breaking the triangle inequality."""
    I = 0.5 * (b.inertia + b.inertia.T)
    moments = _eigvalsh(I)
    tol = 1e-9 * float(np.abs(moments).max()) + 1e-15 * max(b.mass, 1.0)
    if moments[0] < -tol:
        return f"a negative principal moment {_moments(I)}"
    if b.mass > 0.0 and moments[0] > 0.0 and moments[0] + moments[1] < moments[2] - 1e-9 * moments.sum():
        return f"principal moments {_moments(I)} that break the triangle inequality"
    return None


def _merge(bodies: dict[str, _Body], into: str, child: str, edge: "_Edge", src: str, link_word: str) -> None:
    """``bodies[into]`` absorbs ``bodies[child]`` (welded by ``edge``): a child whose numbers are not finite
    is an error, one whose inertia is unphysical an :class:`InertiaMerged` warning naming it; the merged
    body's numbers must stay finite."""
    c = bodies[child]
    if not (np.isfinite(c.mass) and np.all(np.isfinite(c.com)) and np.all(np.isfinite(c.inertia))):
        raise ModelError(f"{src}: {link_word} {child!r} (welded to {into!r} by fixed joint {edge.name!r}): its "
                         f"mass, centre of mass or inertia is not finite")
    why = _unphysical(c)
    if why is not None:
        warnings.warn(f"{src}: {link_word} {child!r} has an inertia with {why}; it is welded to {into!r} by fixed "
                      f"joint {edge.name!r} and merged into it (the merged body is checked)", InertiaMerged,
                      stacklevel=4)
    with np.errstate(all="ignore"):
        bodies[into].absorb(bodies[child], edge.origin)
    b = bodies[into]
    if not (np.isfinite(b.mass) and np.all(np.isfinite(b.com)) and np.all(np.isfinite(b.inertia))):
        raise ModelError(f"{src}: merging {link_word} {child!r} into {into!r} (fixed joint {edge.name!r}) gives "
                         f"a non-finite mass or inertia: masses, inertias or offsets too extreme")


def _assemble(bodies: dict[str, _Body], edges: list[_Edge], src: str, name: str, *, link_word: str = "link",
              gravity: Sequence[float] = DEFAULT_GRAVITY,
              add_hint: str = "give it an <inertial> with positive mass", limits: bool = True,
              balance: bool = False,
              balance_flag: str = "balance_inertia=True (pbf simulate --balance-inertia)") -> ArticulatedBody:
    """Merge massless / degenerate bodies (module docstring) and build the validated model.

    ``bodies`` and ``edges`` must already form a tree: every body is the child of at most one edge, and
    exactly one body has no parent edge or hangs from ``WORLD``. ``limits``: give the model the
    ``joint_limits`` default force where a joint is limited. ``balance``: repair, after merging, the
    inertia of links that break the triangle inequality (:func:`~pbframework.model.balance_inertia`) and
    warn naming them; ``balance_flag`` is how the error for such a link says to ask for that.
    """
    children: dict[str, list[_Edge]] = {}
    parent_edge: dict[str, _Edge] = {}
    for e in edges:
        children.setdefault(e.parent, []).append(e)
        parent_edge[e.child] = e

    def topo() -> list[str]:
        tops = [b for b in bodies if b not in parent_edge]
        order, frontier = [], tops + [e.child for e in children.get(WORLD, [])]
        while frontier:
            order.extend(frontier)
            frontier = [e.child for b in frontier for e in children.get(b, [])]
        return order

    def reparent(e_removed: _Edge, new_parent: str, T: np.ndarray) -> None:
        """Move the child edges of ``e_removed.child`` to ``new_parent``, in place of ``e_removed``."""
        moved = children.pop(e_removed.child, [])
        for c in moved:
            c.parent, c.origin = new_parent, T @ c.origin
        sib = children.setdefault(new_parent, [])
        k = sib.index(e_removed) if e_removed in sib else len(sib)
        sib[k:k + 1] = moved
        del parent_edge[e_removed.child]
        for c in moved:
            parent_edge[c.child] = c

    # 1. invalid links welded to a parent link merge into it (leaves first, so mass accumulates upwards).
    for bname in reversed(topo()):
        e = parent_edge.get(bname)
        if e is None or e.type is not JointType.FIXED or e.parent == WORLD:
            continue
        b = bodies[bname]
        if not _incomplete(b):
            continue
        _merge(bodies, e.parent, bname, e, src, link_word)
        reparent(e, e.parent, e.origin)
        del bodies[bname]
    # 2. links that must stay links absorb their rigidly attached children until valid.
    for bname in topo():
        if bname not in bodies:
            continue
        b = bodies[bname]
        while _incomplete(b):
            fixed = [c for c in children.get(bname, []) if c.type is JointType.FIXED]
            if not fixed:
                break
            c = fixed[0]
            _merge(bodies, bname, c.child, c, src, link_word)
            reparent(c, bname, c.origin)
            del bodies[c.child]
    # 3. massless frames welded to the world are dropped; their joints attach to the world.
    for bname in topo():
        b = bodies[bname]
        e = parent_edge.get(bname)
        welded = e is None or (e.type is JointType.FIXED and e.parent == WORLD)
        if not welded or b.mass > 0.0:
            continue
        carried = children.get(bname, [])
        if len(carried) > 1:
            raise ModelError(
                f"{src}: {link_word} {bname!r} is the fixed base but has no mass, and carries "
                f"{len(carried)} moving joints ({', '.join(repr(c.name) for c in carried)}); a model needs "
                f"one base {link_word}: {add_hint}")
        T = np.eye(4) if e is None else e.origin
        for c in carried:
            c.parent, c.origin = WORLD, T @ c.origin
            parent_edge[c.child] = c
        children.setdefault(WORLD, []).extend(carried)
        children.pop(bname, None)
        if e is not None:
            children[WORLD].remove(e)
            del parent_edge[bname]
        del bodies[bname]
        if not bodies:
            raise ModelError(f"{src}: no {link_word} with mass (a model needs at least one)")
    # 4. build the validated model.
    order = topo()
    links: list[Link] = []
    balanced: list[str] = []
    for bname in order:
        b = bodies[bname]
        try:
            repaired = balance_inertia(b.inertia) if b.mass > 0.0 and np.all(np.isfinite(b.inertia)) else b.inertia
        except np.linalg.LinAlgError:             # entries near 1e308: left as they are, refused below
            repaired = b.inertia
        if balance and repaired is not b.inertia:
            balanced.append(f"{bname!r} {_moments(b.inertia)} -> {_moments(repaired)}")
            b.inertia = repaired
        problem = _link_problem(b)
        if problem is not None:
            e = parent_edge.get(bname)
            moved = f" (moved by joint {e.name!r})" if e is not None and e.type is not JointType.FIXED else ""
            if b.mass <= 0.0:
                raise ModelError(f"{src}: {link_word} {bname!r}{moved} has no mass (no inertial, or mass 0) "
                                 f"and no rigidly attached {link_word} with mass: {add_hint}")
            reason = problem.split(": ", 1)[1] if problem.startswith(f"link {bname!r}: ") else problem
            fix = (f"; correct its inertial, or load with {balance_flag} to set its principal moments to their "
                   f"mean as MuJoCo's balanceinertia does") if repaired is not b.inertia else "; correct its inertial"
            raise ModelError(f"{src}: {link_word} {bname!r}{moved}: {reason}{fix}")
        links.append(Link(bname, b.mass, com=b.com, inertia=b.inertia, shapes=b.shapes))
    if balanced:
        noun = link_word if len(balanced) == 1 else {"body": "bodies"}.get(link_word, f"{link_word}s")
        warnings.warn(f"{src}: balanced the inertia of {len(balanced)} {noun} "
                      f"that broke the triangle inequality (principal moments set to their mean, as MuJoCo's "
                      f"balanceinertia does): {'; '.join(balanced)}", InertiaBalanced, stacklevel=3)
    joints: list[Joint] = []
    for bname in order:
        e = parent_edge.get(bname)
        if e is None:
            continue
        try:
            joints.append(Joint(e.name, e.type, e.parent, e.child, origin=e.origin, axis=e.axis,
                                lower=e.lower, upper=e.upper, effort=e.effort, velocity=e.velocity,
                                armature=e.armature))
        except ModelError as exc:
            raise ModelError(f"{src}: {exc}") from None
    try:
        return ArticulatedBody(links, joints, gravity=gravity, name=name,
                               default_forces=default_forces(joints, limits))
    except ModelError as exc:
        raise ModelError(f"{src}: {exc}") from None


def _moments(inertia: np.ndarray) -> str:
    """Principal moments, ascending, for a message: ``(0.000662, 0.000679, 0.00657)``."""
    return "(" + ", ".join(f"{m:.3g}" for m in _eigvalsh(inertia)) + ")"


def _eigvalsh(inertia: np.ndarray) -> np.ndarray:
    """Ascending eigenvalues of the symmetric part of a finite ``inertia``, computed on the tensor scaled to
    unit size (LAPACK fails to converge on entries near 1e308) and scaled back."""
    I = 0.5 * (inertia + inertia.T)
    scale = float(np.max(np.abs(I)))
    if scale == 0.0 or not np.isfinite(scale):
        return np.linalg.eigvalsh(I) if scale == 0.0 else np.full(3, np.nan)
    with np.errstate(over="ignore"):
        return np.linalg.eigvalsh(I / scale) * scale


# -- URDF ------------------------------------------------------------------------------------------------

def _one(elem: ET.Element, tag: str, what: str) -> ET.Element | None:
    """The ``<tag>`` child of ``elem`` (None when absent); URDF allows at most one, so a second one (which
    would be silently ignored) is a :class:`ModelError` naming ``what``."""
    found = elem.findall(tag)
    if len(found) > 1:
        raise ModelError(f"{what}: {len(found)} <{tag}> elements in <{elem.tag}>; URDF allows one (which is meant?)")
    return found[0] if found else None


def _origin(elem: ET.Element, what: str) -> np.ndarray:
    """The 4x4 transform of the ``<origin>`` child of ``elem`` (identity when absent)."""
    o = _one(elem, "origin", what)
    if o is None:
        return np.eye(4)
    xyz = _floats(o.get("xyz", "0 0 0"), 3, f"{what}: <origin> attribute xyz")
    rpy = _floats(o.get("rpy", "0 0 0"), 3, f"{what}: <origin> attribute rpy")
    return _homogeneous(rpy_to_matrix(rpy), xyz)


def _urdf_shapes(link: ET.Element, where: str) -> list[Shape]:
    """The sphere, box and capsule ``<collision>`` geometries of ``link`` (others are ignored)."""
    out = []
    for k, col in enumerate(link.findall("collision")):
        what = f"{where} <collision> number {k + 1}"
        geometry = col.find("geometry")
        if geometry is None:
            raise ModelError(f"{what}: has no <geometry>")
        for g in geometry:
            if g.tag == "sphere":
                size = [_number(g, "radius", what)]
            elif g.tag == "box":
                size = list(_floats(g.get("size"), 3, f"{what}: <box> attribute size") / 2)
            elif g.tag == "capsule":
                size = [_number(g, "radius", what), _number(g, "length", what) / 2]
            else:
                continue
            try:
                out.append(Shape(g.tag, size, _origin(col, what), col.get("name", "")))
            except ModelError as exc:
                raise ModelError(f"{what}: {exc}") from None
    return out


def _urdf_body(link: ET.Element, name: str, src: str) -> _Body:
    where = f"{src}: link {name!r}"
    shapes = _urdf_shapes(link, where)
    inertial = _one(link, "inertial", where)
    if inertial is None:
        return _Body(name, 0.0, np.zeros(3), np.zeros((3, 3)), shapes)
    mass_el = _one(inertial, "mass", where)
    if mass_el is None:
        raise ModelError(f"{where}: <inertial> has no <mass>")
    mass = _number(mass_el, "value", where)
    if not np.isfinite(mass) or mass < 0.0:
        raise ModelError(f"{where}: mass must be finite and non-negative, got {mass_el.get('value')!r}")
    T = _origin(inertial, f"{where} <inertial>")
    inertia_el = _one(inertial, "inertia", where)
    if inertia_el is None:
        raise ModelError(f"{where}: <inertial> has no <inertia> (ixx ixy ixz iyy iyz izz)")
    ixx, ixy, ixz, iyy, iyz, izz = (_number(inertia_el, k, where) for k in
                                    ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
    I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    if not np.all(np.isfinite(I)):
        raise ModelError(f"{where}: <inertia> must be finite")
    R = T[:3, :3]
    return _Body(name, mass, T[:3, 3].copy(), R @ I @ R.T, shapes)


def _urdf_edge(j: ET.Element, src: str, index: int) -> _Edge:
    name = j.get("name")
    if not name:
        raise ModelError(f"{src}: <joint> number {index + 1} has no 'name' attribute")
    refs = {}
    for tag in ("parent", "child"):
        el = _one(j, tag, f"{src}: joint {name!r}")
        if el is None or not el.get("link"):
            raise ModelError(f"{src}: joint {name!r}: missing <{tag} link=\"...\"/>")
        refs[tag] = el.get("link")
    where = f"{src}: joint {name!r} of link {refs['child']!r}"
    jtype = j.get("type")
    if jtype is None:
        raise ModelError(f"{where}: missing attribute 'type' (supported: {', '.join(URDF_JOINT_TYPES)})")
    if jtype not in _URDF_TYPE_MAP:
        raise ModelError(f"{where}: unsupported type {jtype!r} (supported: {', '.join(URDF_JOINT_TYPES)})")
    t = _URDF_TYPE_MAP[jtype]
    axis_el = _one(j, "axis", where)
    axis = np.array([1.0, 0.0, 0.0]) if axis_el is None else _floats(axis_el.get("xyz", "1 0 0"), 3,
                                                                        f"{where}: <axis> attribute xyz")
    if t in (JointType.REVOLUTE, JointType.PRISMATIC) and np.linalg.norm(axis) < 1e-12:
        raise ModelError(f"{where}: <axis xyz> must be non-zero, got {axis_el.get('xyz')!r}")
    lower, upper, effort, velocity = -np.inf, np.inf, np.inf, np.inf
    limit = _one(j, "limit", where)
    if limit is not None:
        effort = _number(limit, "effort", where, np.inf)
        velocity = _number(limit, "velocity", where, np.inf)
        if jtype in ("revolute", "prismatic"):
            # URDF: lower and upper default to 0 when a <limit> is present.
            lower, upper = _number(limit, "lower", where, 0.0), _number(limit, "upper", where, 0.0)
            if lower > upper:
                raise ModelError(f"{where}: <limit> lower={lower} exceeds upper={upper}")
    return _Edge(name, t, refs["parent"], refs["child"], _origin(j, where), axis, lower, upper, effort,
                 velocity)


def load_urdf(path: str | os.PathLike, floating_base: bool | str = False, *, limits: bool = True,
              balance_inertia: bool = False, max_links: int = MAX_LINKS) -> ArticulatedBody:
    """Load a URDF file as an :class:`~pbframework.model.ArticulatedBody`.

    Args:
        path: the ``.urdf`` file (plain URDF; run ``xacro`` on ``.xacro`` sources first).
        floating_base: attach the root link to the world with a ``free`` joint named ``"root_joint"`` (a
            position and a unit quaternion, nq 7 and nv 6: Pinocchio's ``JointModelFreeFlyer`` and its default
            name; no gimbal lock). ``True`` or ``"free"``; ``"floating"``: a 6-coordinate ``floating`` joint
            instead (translations x, y, z then intrinsic rotations x, y, z, the coordinates of Pinocchio's
            composite root joint [PX, PY, PZ, RX, RY, RZ]). If the file fixes the robot to a ``world`` link
            through a fixed joint, that joint is replaced by the floating one (its origin is dropped, so the
            coordinates are the root link's world pose; Pinocchio instead floats the world link, which differs
            from this by that joint's origin when it is not the identity).
        limits: where a revolute or prismatic joint has a ``<limit>``, give the model the ``joint_limits``
            force (default parameters) in ``model.default_forces``, so every Simulator of it holds the joints
            inside their limits. ``False``: the limits stay on the joints as data, and nothing enforces them.
        balance_inertia: repair a link whose inertia breaks the triangle inequality (``A + B >= C`` for its
            principal moments) the way MuJoCo's ``<compiler balanceinertia="true">`` does: its principal
            moments are set to their mean (:func:`~pbframework.model.balance_inertia`). Done after merging
            (so a link welded to another is merged first, exactly), with an :class:`InertiaBalanced` warning
            naming every changed link with its principal moments before and after. ``False`` (default):
            such a link is an error that mentions this option.
        max_links: refuse a file with more ``<link>`` elements, before building anything (default
            :data:`~pbframework.checks.MAX_LINKS`; a :class:`~pbframework.errors.LimitError`).

    Returns:
        The model, named after the robot; 1-DOF coordinates are named after the URDF joints, so they match
        Pinocchio's joint names. Links without a valid inertia are merged as the module docstring explains.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ModelError: malformed XML (or an unknown encoding), a missing element or attribute, an unsupported
            joint type, a moving link without mass, an unphysical inertia on a link that would be merged, a
            mass matrix that is not finite and positive definite at the neutral and a seeded sample
            configuration (:func:`~pbframework.checks.check_mass_matrix`), ... The message starts with the
            file name and names the link or joint.
        LimitError: more links than ``max_links``.
    """
    for name, value in (("limits", limits), ("balance_inertia", balance_inertia)):
        if not isinstance(value, (bool, np.bool_)):
            raise ModelError(f"load_urdf: {name} must be True or False, got {value!r}")
    if not (isinstance(floating_base, (bool, np.bool_)) or floating_base in ("free", "floating")
            if isinstance(floating_base, (bool, np.bool_, str)) else False):
        raise ModelError(f"load_urdf: floating_base must be False, True (or 'floating': Euler angles) or 'free' "
                         f"(a quaternion), got {floating_base!r:.60}")
    floating_base = floating_base if isinstance(floating_base, str) else bool(floating_base)
    max_links = integer(max_links, "max_links", minimum=1)
    root, src = _read_xml(path, "URDF")
    if root.tag != "robot":
        raise ModelError(f"{src}: not a URDF file: the root element is <{root.tag}>, expected <robot>")
    xacro = [el.tag for el in root.iter() if isinstance(el.tag, str) and "xacro" in el.tag]
    if xacro:
        raise ModelError(f"{src}: contains xacro macros ({xacro[0].split('}')[-1]}): run xacro on it first")
    check_links(len(root.findall("link")), src, max_links=max_links)
    bodies: dict[str, _Body] = {}
    for k, link in enumerate(root.findall("link")):
        name = link.get("name")
        if not name:
            raise ModelError(f"{src}: <link> number {k + 1} has no 'name' attribute")
        if name in bodies:
            raise ModelError(f"{src}: duplicate link name {name!r}")
        bodies[name] = _urdf_body(link, name, src)
    if not bodies:
        raise ModelError(f"{src}: the robot has no <link>")
    edges: list[_Edge] = []
    seen: dict[str, _Edge] = {}
    parent_of: dict[str, _Edge] = {}
    for k, j in enumerate(root.findall("joint")):
        e = _urdf_edge(j, src, k)
        where = f"{src}: joint {e.name!r} of link {e.child!r}"
        if e.name in seen:
            raise ModelError(f"{src}: duplicate joint name {e.name!r}")
        for ref in (e.parent, e.child):
            if ref not in bodies:
                raise ModelError(f"{where}: unknown link {ref!r} (no <link name={ref!r}>)")
        if e.child in parent_of:
            raise ModelError(f"{src}: link {e.child!r} is the child of two joints, {parent_of[e.child].name!r} "
                             f"and {e.name!r} (URDF describes a tree)")
        if e.parent == e.child:
            raise ModelError(f"{where}: a link cannot be its own parent")
        seen[e.name], parent_of[e.child] = e, e
        edges.append(e)
    roots = [b for b in bodies if b not in parent_of]
    if len(roots) != 1:
        if not roots:
            raise ModelError(f"{src}: the joints form a cycle (no root link)")
        raise ModelError(f"{src}: expected one root link (not the child of any joint), found {len(roots)}: "
                         f"{roots}")
    root_link = roots[0]
    # Links not reachable from the root lie on a cycle.
    reach, frontier = {root_link}, [root_link]
    while frontier:
        frontier = [e.child for e in edges if e.parent in frontier and e.child not in reach]
        reach.update(frontier)
    if len(reach) != len(bodies):
        cyc = sorted(set(bodies) - reach)
        raise ModelError(f"{src}: the joints form a cycle through links {cyc}")
    if WORLD in bodies and root_link != WORLD:
        raise ModelError(f"{src}: link {WORLD!r} must be the root (it is the inertial frame), but it is the "
                         f"child of joint {parent_of[WORLD].name!r}")
    if root_link == WORLD:
        del bodies[WORLD]
        for e in edges:
            if e.parent == root_link:
                e.parent = WORLD
    for e in edges:
        if e.type is JointType.FLOATING and e.parent != WORLD:
            raise ModelError(f"{src}: joint {e.name!r} of link {e.child!r}: a 'floating' joint must have the "
                             f"world link as parent, got {e.parent!r}")
    base_type = JointType.FLOATING if floating_base == "floating" else JointType.FREE
    if floating_base:
        world_edges = [e for e in edges if e.parent == WORLD]
        if any(e.type is JointType.FLOATING for e in world_edges):
            raise ModelError(f"{src}: floating_base=True but the file already has a floating joint "
                             f"{world_edges[0].name!r}")
        if root_link == WORLD:
            if len(world_edges) != 1 or world_edges[0].type is not JointType.FIXED:
                raise ModelError(f"{src}: floating_base=True needs the world link to hold the robot by one fixed "
                                 f"joint, got {[(e.name, e.type.value) for e in world_edges]}")
            e = world_edges[0]
            e.name, e.type, e.origin = ROOT_JOINT, base_type, np.eye(4)
        else:
            if ROOT_JOINT in seen:
                raise ModelError(f"{src}: floating_base=True adds a joint {ROOT_JOINT!r}, but the file already "
                                 f"has a joint of that name")
            edges.insert(0, _Edge(ROOT_JOINT, base_type, WORLD, root_link, np.eye(4)))
    name = root.get("name") or Path(src).stem
    model = _assemble(bodies, edges, src, name, limits=limits, balance=balance_inertia)
    check_mass_matrix(model, src)
    model.display = urdf_display(model, root, src)         # <visual> elements: drawing only (pbframework.display)
    return model
