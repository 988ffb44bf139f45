"""Display geometry: what a link looks like, for the viewer (:mod:`pbframework.view`) and ``pbf render``.

Display geometry is drawing only; no force model or integrator reads it. Each link carries a list of
:class:`Visual` objects posed in the link frame: a mesh file (with scale) or a primitive (box, sphere,
cylinder, capsule). :func:`display_geometry` gives a model's, from the first source that has any:

1. the URDF ``<visual>`` elements, read by :func:`~pbframework.io.load_urdf` and stored with the model
   (``model.display``): meshes (``package://`` and ``file://`` URIs, or paths relative to the file) and
   primitives, with their ``<origin>`` and ``<material><color rgba>``; the visuals of links merged into
   another (massless frames, see :mod:`pbframework.io.urdf`) move into that link's frame, and those of a
   base dropped from the model are fixed to the world. A mesh file that is not there is drawn as the
   primitive of its link's inertia (below), with one warning naming the missing files when the model is
   drawn (not when it is loaded: a simulation does not need its meshes);
   :func:`~pbframework.io.load_mjcf` stores the geoms MuJoCo shows by default (groups 0-2) the same way:
   primitives, ellipsoids and meshes as MuJoCo compiled them (vertices held in memory, ``Visual.triangles``),
   with their colours;
2. the link's collision shapes (``Link.shapes``: URDF collision primitives, or shapes added by hand);
3. primitives consistent with the link's inertia (the built-in models): a link whose centre of mass is off
   its frame origin is a rod, one capsule from the origin to each child joint (a leaf: to twice the centre
   of mass), of the radius ``sqrt(2 I_axial / m)`` of a uniform cylinder with the link's moment about that
   axis; a link with its centre of mass at the origin is the box of the same mass and principal moments
   (``a_i = sqrt(6 (I_j + I_k - I_i) / m)``), along its principal axes.

Meshes are read by ``trimesh`` (extra ``view`` or ``render``); primitives are tessellated here with numpy,
so a model without mesh files draws with the package's own dependencies.
"""

from __future__ import annotations

import enum
import functools
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .model import ArticulatedBody, Link, ModelError

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

__all__ = ["VisualType", "Visual", "Display", "display_geometry", "urdf_display", "inertia_visuals",
           "visual_mesh", "load_mesh", "MeshesMissing", "MissingExtra", "missing_extra"]


class MissingExtra(ImportError):
    """An optional package is not installed; the message names the pip command that installs it."""


class MeshesMissing(UserWarning):
    """Mesh files named by a model are not there (or cannot be read); their links are drawn as primitives."""


def missing_extra(extra: str, what: str, package: str) -> MissingExtra:
    """The one-line error for an optional package that is not installed: names the pip command."""
    return MissingExtra(f"{what} needs the optional package {package!r}: pip install 'pbframework[{extra}]'")


class VisualType(str, enum.Enum):
    """What a :class:`Visual` draws.

    Attributes:
        MESH: a mesh file (``Visual.mesh``) scaled by ``Visual.scale``.
        BOX: ``size = (hx, hy, hz)``, half-extents along the visual frame's axes.
        SPHERE: ``size = (radius,)``.
        CYLINDER: ``size = (radius, half_length)`` along the visual frame's z axis.
        CAPSULE: ``size = (radius, half_length)``: the segment along z swept by a sphere.
    """

    MESH = "mesh"
    BOX = "box"
    SPHERE = "sphere"
    CYLINDER = "cylinder"
    CAPSULE = "capsule"


@dataclass(frozen=True, eq=False)
class Visual:
    """One piece of a link's display geometry.

    Attributes:
        type: a :class:`VisualType`.
        pose: 4x4 transform of the visual frame in the link frame.
        size: the primitive's dimensions (:class:`VisualType`); empty for a mesh.
        mesh: the mesh file (absolute path) of a ``mesh`` visual.
        scale: per-axis scale of the mesh.
        color: RGBA in [0, 1], or None (the drawing's default).
        name: a label from the source file (may be empty).
    """

    type: VisualType
    pose: np.ndarray = field(default_factory=lambda: np.eye(4))
    size: tuple[float, ...] = ()
    mesh: Path | None = None
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    color: tuple[float, float, float, float] | None = None
    name: str = ""
    triangles: tuple[np.ndarray, np.ndarray] | None = None
    """A ``mesh`` visual's ``(vertices (n, 3), faces (k, 3))`` held in memory (MJCF meshes as MuJoCo compiled
    them) instead of a file."""

    def moved(self, T: np.ndarray) -> "Visual":
        """The same visual with its frame given in another frame: pose ``T @ pose``."""
        return Visual(self.type, np.asarray(T, float) @ self.pose, self.size, self.mesh, self.scale, self.color,
                      self.name, self.triangles)


@dataclass(frozen=True, eq=False)
class Display:
    """A model's display geometry.

    Attributes:
        links: link name -> its visuals (in the link frame); every link of the model has an entry.
        world: visuals fixed to the world frame (a URDF base the model dropped).
        source: where it came from: ``"urdf"``, ``"shapes"`` or ``"inertia"``.
        notes: what could not be drawn as the file says (mesh files not found, malformed visuals): one
            :class:`MeshesMissing` warning each time the geometry is drawn (:func:`display_geometry`), none
            when the model is only simulated.
    """

    links: dict[str, tuple[Visual, ...]]
    world: tuple[Visual, ...] = ()
    source: str = "inertia"
    notes: tuple[str, ...] = ()

    @property
    def meshes(self) -> list[Path]:
        """Every mesh file the display names."""
        vs = [v for group in (*self.links.values(), self.world) for v in group]
        return [v.mesh for v in vs if v.type is VisualType.MESH and v.mesh is not None]


# -- sources -----------------------------------------------------------------------------------------------

def display_geometry(model: ArticulatedBody) -> Display:
    """The display geometry of ``model``: its stored one (URDF visuals), else its collision shapes, else
    primitives from its inertia (module docstring)."""
    stored = getattr(model, "display", None)
    if stored is not None:
        if stored.notes:
            warnings.warn("; ".join(stored.notes), MeshesMissing, stacklevel=2)
        return stored
    if any(link.shapes for link in model.links):
        return Display({link.name: tuple(_shape_visual(s) for s in link.shapes) or inertia_visuals(model, link.name)
                        for link in model.links}, source="shapes")
    return Display({link.name: inertia_visuals(model, link.name) for link in model.links}, source="inertia")


def _shape_visual(shape) -> Visual:
    return Visual(VisualType(shape.type.value), np.asarray(shape.pose, float), tuple(float(s) for s in shape.size),
                  name=shape.name)


def _child_origins(model: ArticulatedBody, name: str) -> list[np.ndarray]:
    return [np.asarray(j.origin, float)[:3, 3] for j in model.joints if j.parent == name]


def inertia_visuals(model: ArticulatedBody, name: str) -> tuple[Visual, ...]:
    """Primitives consistent with link ``name``'s inertia: capsules for a rod, the equivalent box otherwise
    (module docstring)."""
    link: Link = model.link(name)
    m, c, I = link.mass, np.asarray(link.com, float), np.asarray(link.inertia, float)
    if np.linalg.norm(c) > 1e-9:
        ends = [p for p in _child_origins(model, name) if np.linalg.norm(p) > 1e-9] or [2.0 * c]
        out = []
        for p in ends:
            L = float(np.linalg.norm(p))
            d = p / L
            r = float(np.sqrt(max(2.0 * float(d @ I @ d) / m, 0.0)))
            r = min(max(r, 0.02 * L), 0.25 * L)
            out.append(Visual(VisualType.CAPSULE, _frame_along(d, 0.5 * p), (r, 0.5 * L), name=f"{name} rod"))
        return tuple(out)
    moments, axes = np.linalg.eigh(0.5 * (I + I.T))
    total = moments.sum()
    edges = np.sqrt(np.maximum(6.0 * (total - 2.0 * moments) / m, 1e-12))   # I_i = m (a_j^2 + a_k^2) / 12
    R = axes if np.linalg.det(axes) > 0 else axes * np.array([1.0, 1.0, -1.0])
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, c
    return (Visual(VisualType.BOX, T, tuple(float(e) / 2 for e in edges), name=f"{name} box"),)


def _frame_along(d: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """A frame at ``centre`` whose z axis is the unit vector ``d``."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(d[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, d)
    x /= np.linalg.norm(x)
    T = np.eye(4)
    T[:3, :3] = np.column_stack([x, np.cross(d, x), d])
    T[:3, 3] = centre
    return T


# -- URDF <visual> ---------------------------------------------------------------------------------------------

def resolve_uri(uri: str, base: Path) -> Path:
    """A URDF mesh ``filename`` as a path: ``package://pkg/rest`` is looked up as a folder ``pkg`` beside the
    URDF file or one of its ancestors, then in ``$ROS_PACKAGE_PATH``; ``file://`` is a path; anything else is
    relative to the URDF's folder. Returns the first candidate that exists (the last tried otherwise)."""
    if uri.startswith("package://"):
        pkg, _, rest = uri[len("package://"):].partition("/")
        roots = [*base.parents, base]
        roots += [Path(p) for p in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if p]
        candidates = [r / pkg / rest for r in roots] + [r / rest for r in roots if r.name == pkg]
        for c in candidates:
            if c.is_file():
                return c.resolve()
        return candidates[0]
    if uri.startswith("file://"):
        return Path(uri[len("file://"):])
    p = Path(uri)
    return p if p.is_absolute() else (base / p).resolve()


def urdf_display(model: ArticulatedBody, root: "ET.Element", src: str) -> Display | None:
    """The display geometry of the URDF document ``root`` (file ``src``) for ``model``, the model
    :func:`~pbframework.io.load_urdf` built of it (module docstring); None when the file has no visuals."""
    from .io.urdf import _origin

    base = Path(src).resolve().parent
    materials = {m.get("name"): m for m in root.findall("material")}
    parent: dict[str, tuple[str, np.ndarray]] = {}
    for j in root.findall("joint"):
        p, c = j.find("parent"), j.find("child")
        if p is not None and c is not None:
            parent[c.get("link", "")] = (p.get("link", ""), _origin(j, f"{src}: joint {j.get('name')!r}"))
    links: dict[str, list[Visual]] = {link.name: [] for link in model.links}
    names = set(links)
    world: list[Visual] = []
    missing: list[str] = []
    skipped: list[str] = []
    fallback: set[str] = set()
    for el in root.findall("link"):
        lname = el.get("name", "")
        target, T = lname, np.eye(4)
        while target not in names and target in parent:          # merged into an ancestor through fixed joints
            target, Tj = parent[target]
            T = Tj @ T
        for k, vis in enumerate(el.findall("visual")):
            what = f"{src}: link {lname!r} <visual> number {k + 1}"
            try:
                v = _urdf_visual(vis, what, base, materials)
            except ModelError as exc:                            # drawing only: the model still loads
                skipped.append(str(exc))
                continue
            if v is None:
                continue
            if v.type is VisualType.MESH and not (v.mesh and v.mesh.is_file()):
                missing.append(str(v.mesh))
                if target in names:
                    fallback.add(target)
                continue
            (links[target] if target in names else world).append(v.moved(T))
    for n in fallback:
        links[n].extend(inertia_visuals(model, n))
    notes = []
    if missing:
        notes.append(f"{src}: {len(missing)} mesh file{'s' if len(missing) > 1 else ''} not found (first: "
                     f"{missing[0]}); link{'s' if len(fallback) > 1 else ''} {', '.join(sorted(fallback))} drawn as "
                     f"primitives from the inertia")
    if skipped:
        notes.append(f"{len(skipped)} <visual> element{'s' if len(skipped) > 1 else ''} not drawn: {skipped[0]}")
    if not any(links.values()) and not world:
        return None                                              # no visuals: shapes or inertia decide
    return Display({n: tuple(v) for n, v in links.items()}, tuple(world), source="urdf", notes=tuple(notes))


def _urdf_visual(vis: "ET.Element", what: str, base: Path, materials: dict) -> Visual | None:
    """One ``<visual>``: a mesh or a primitive; None for a geometry this does not draw."""
    from .io.urdf import _floats, _number, _origin

    geometry = vis.find("geometry")
    if geometry is None or len(geometry) == 0:
        raise ModelError(f"{what}: has no <geometry>")
    g = geometry[0]
    pose = _origin(vis, what)
    color = _urdf_color(vis.find("material"), materials, what)
    name = vis.get("name", "")
    if g.tag == "mesh":
        if not g.get("filename"):
            raise ModelError(f"{what}: <mesh> has no 'filename' attribute")
        scale = tuple(_floats(g.get("scale", "1 1 1"), 3, f"{what}: <mesh> attribute scale"))
        return Visual(VisualType.MESH, pose, (), resolve_uri(g.get("filename"), base), scale, color, name)
    if g.tag == "box":
        size = tuple(_floats(g.get("size"), 3, f"{what}: <box> attribute size") / 2)
    elif g.tag == "sphere":
        size = (_number(g, "radius", what),)
    elif g.tag in ("cylinder", "capsule"):
        size = (_number(g, "radius", what), _number(g, "length", what) / 2)
    else:
        return None
    if min(size) <= 0.0:
        raise ModelError(f"{what}: <{g.tag}> sizes must be > 0, got {size}")
    return Visual(VisualType(g.tag), pose, tuple(float(s) for s in size), None, (1.0, 1.0, 1.0), color, name)


def _urdf_color(mat: "ET.Element | None", materials: dict, what: str) -> tuple[float, ...] | None:
    """``<material><color rgba>``, or the colour of the robot-level material it names; None without one."""
    from .io.urdf import _floats

    if mat is None:
        return None
    col = mat.find("color")
    if col is None and mat.get("name") in materials:
        col = materials[mat.get("name")].find("color")
    if col is None or col.get("rgba") is None:
        return None
    return tuple(float(x) for x in np.clip(_floats(col.get("rgba"), 4, f"{what}: <color> attribute rgba"), 0, 1))


# -- triangles -----------------------------------------------------------------------------------------------

def _trimesh():
    try:
        import trimesh
    except ImportError:
        raise missing_extra("view", "drawing mesh files", "trimesh") from None
    return trimesh


@functools.lru_cache(maxsize=64)
def load_mesh(path: Path, max_faces: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(vertices (n, 3), faces (k, 3))`` of a mesh file, read by trimesh (one mesh of all its parts, in
    the file's frame); ``max_faces``: decimated to about that many triangles (fast-simplification) where it
    has more.

    Raises:
        ImportError: trimesh (or, for ``.dae``, pycollada) is not installed: one line naming the pip command.
        ModelError: the file cannot be read.
    """
    trimesh = _trimesh()
    try:
        mesh = trimesh.load(str(path), force="mesh")
    except ImportError as exc:
        raise missing_extra("view", f"reading {Path(path).suffix} meshes", getattr(exc, "name", None) or "pycollada") \
            from None
    except Exception as exc:                                      # trimesh raises many kinds on bad files
        raise ModelError(f"mesh {str(path)!r}: cannot read it ({type(exc).__name__}: {exc})") from None
    if mesh.is_empty:
        raise ModelError(f"mesh {str(path)!r}: no triangles")
    if max_faces is not None and len(mesh.faces) > max_faces:
        return _decimated(mesh, max_faces)
    return np.asarray(mesh.vertices, float), np.asarray(mesh.faces, np.int64)


def _decimated(mesh, max_faces: int) -> tuple[np.ndarray, np.ndarray]:
    """A trimesh mesh decimated to about ``max_faces`` triangles (fast-simplification)."""
    mesh.merge_vertices()                                         # shared vertices, so edges can collapse
    try:
        mesh = mesh.simplify_quadric_decimation(face_count=max_faces)
    except ImportError:
        raise missing_extra("render", "decimating meshes for drawing", "fast-simplification") from None
    return np.asarray(mesh.vertices, float), np.asarray(mesh.faces, np.int64)


def visual_mesh(v: Visual, *, max_faces: int | None = None, segments: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """``(vertices, faces)`` of a visual in its link's frame: the mesh file read by trimesh, or the primitive
    tessellated (``segments`` around its axis)."""
    if v.type is VisualType.MESH and v.triangles is not None:
        V, F = (np.asarray(x) for x in v.triangles)
        if max_faces is not None and len(F) > max_faces:
            mesh = _trimesh().Trimesh(vertices=V, faces=F, process=False)
            V, F = _decimated(mesh, max_faces)
        V = V * np.asarray(v.scale, float)
    elif v.type is VisualType.MESH:
        V, F = load_mesh(v.mesh, max_faces)
        V = V * np.asarray(v.scale, float)
    else:
        V, F = _primitive(v.type, v.size, segments)
    return V @ v.pose[:3, :3].T + v.pose[:3, 3], F


def _primitive(kind: VisualType, size: Sequence[float], n: int) -> tuple[np.ndarray, np.ndarray]:
    if kind is VisualType.BOX:
        h = np.asarray(size, float)
        V = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * h
        F = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                      [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
        return V, F
    r = float(size[0])
    if kind is VisualType.SPHERE:
        lat = np.linspace(-np.pi / 2, np.pi / 2, n // 2 + 1)
        return _lathe(np.column_stack([r * np.cos(lat), r * np.sin(lat)]), n)
    half = float(size[1])
    if kind is VisualType.CYLINDER:
        rings = np.array([[0.0, -half], [r, -half], [r, half], [0.0, half]])
        return _lathe(rings, n)
    lat = np.linspace(-np.pi / 2, np.pi / 2, 2 * (n // 4) + 1)           # capsule: two hemispheres, split at 0
    lo, hi = lat[lat <= 0], lat[lat >= 0]
    prof = np.concatenate([np.column_stack([r * np.cos(lo), r * np.sin(lo) - half]),
                           np.column_stack([r * np.cos(hi), r * np.sin(hi) + half])])
    return _lathe(prof, n)


def _lathe(profile: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The surface of ``profile`` ((radius, z) rows, bottom to top) revolved about z in ``n`` steps."""
    a = np.linspace(0.0, 2 * np.pi, n, endpoint=False)
    rad, z = profile[:, 0], profile[:, 1]
    V = np.stack([np.outer(rad, np.cos(a)), np.outer(rad, np.sin(a)), np.repeat(z[:, None], n, 1)], -1).reshape(-1, 3)
    F = []
    for i in range(len(profile) - 1):
        for k in range(n):
            a0, a1 = i * n + k, i * n + (k + 1) % n
            b0, b1 = a0 + n, a1 + n
            F += [[a0, a1, b1], [a0, b1, b0]]
    F = np.asarray(F, np.int64)
    area = np.linalg.norm(np.cross(V[F[:, 1]] - V[F[:, 0]], V[F[:, 2]] - V[F[:, 0]]), axis=1)
    return V, F[area > 1e-18]                                      # the poles' collapsed triangles dropped
