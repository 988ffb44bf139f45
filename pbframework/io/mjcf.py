"""MJCF importer: the kinematic tree of a MuJoCo XML model as an :class:`~pbframework.model.ArticulatedBody`.

The subset read
---------------
- ``<worldbody>`` with nested ``<body>`` elements (``pos`` and one of ``quat`` / ``euler`` / ``axisangle`` /
  ``xyaxes`` / ``zaxis``), ``<frame>`` elements (their pose is composed into the bodies they hold) and
  ``<include file>`` (spliced in, relative to the including file).
- ``<compiler angle eulerseq autolimits balanceinertia>`` (MuJoCo's defaults: degrees, ``xyz``, ``true``,
  ``false``) and ``<option gravity>``.
- ``<inertial pos [orientation] mass diaginertia|fullinertia>``. Inertia computed from geoms is **not**
  supported: a body that has geoms but no ``<inertial>`` is an error unless ``<compiler
  inertiafromgeom="false">`` says geoms carry no mass.
- ``<geom>`` of type ``sphere``, ``box`` and ``capsule`` (``size``, or ``fromto`` for a capsule; pose by ``pos``
  and an orientation, ``<default>`` classes honoured) on moving bodies, as
  :class:`~pbframework.model.Shape` entries of ``Link.shapes`` in the link frame (geometry only, for
  :func:`pbframework.geometry.sample_contact_points`). A geom with ``contype="0" conaffinity="0"`` (visual
  only) and every other geom type are ignored, as are ``<worldbody>`` geoms (static scenery).
- ``<joint>`` (with ``<default>`` classes, ``class`` and ``childclass``) and ``<freejoint>``: ``pos``,
  ``axis``, ``ref``, ``range``, ``limited`` and ``armature`` (on the mass matrix's diagonal, as MuJoCo does;
  hinges and slides). Damping, stiffness and friction loss are not part of the rigid-body model and are
  ignored.

How MuJoCo joints map to this package's joints
----------------------------------------------
A body's joints act in the body frame, in document order (MuJoCo's ``mj_kinematics``). They become:

- no joint: ``fixed`` (the body is welded to its parent);
- one ``hinge`` / ``slide``: ``revolute`` / ``prismatic``, with q = MuJoCo's qpos (a ``ref`` is honoured);
- one ``ball``: ``ball``, a unit quaternion about the body axes, centred at the joint ``pos`` (with
  ``quaternions=False``: ``spherical``, intrinsic x-y-z Euler angles);
- one ``free`` (top-level bodies only): ``free``, the world position of the body frame and a unit quaternion
  (``quaternions=False``: ``floating``, the position then intrinsic x-y-z Euler angles);
- two hinges about orthogonal axes at one ``pos``: ``ball2`` (about the first axis, then the second);
- three hinges about a right-handed orthonormal triad at one ``pos``: ``spherical`` about those axes;
- three slides then three hinges along one right-handed orthonormal triad (top-level bodies only):
  ``floating``.

Coordinates therefore equal MuJoCo's ``qpos`` / ``qvel`` for hinges and slides. A ``ball`` joint's equal
them up to the quaternion's order (MuJoCo ``(w, x, y, z)``, here ``(x, y, z, w)``, Pinocchio's); a ``free``
joint's linear velocity is in the body frame here (Pinocchio's convention) and in the world frame in
MuJoCo (``v_mj = R v``). With ``quaternions=False`` a ``ball`` or ``free`` joint uses Euler angles ``e``
and their rates instead, ``omega = E(e) de/dt`` (the linear parts then coincide with MuJoCo's). A
``free`` joint's body ``pos`` / ``quat`` are MuJoCo's initial ``qpos0``; here the neutral configuration
(``model.neutral()``) places that body at the world origin.
A composed joint is named after its body; its coordinates follow the MJCF joint order.

A link's frame is its joint frame: it is the MuJoCo body frame unless the joint has a ``pos`` (the link frame
then sits at that anchor, with the body's axes) or the body composes hinges about a rotated triad (the link
axes are then that triad); inertia and child bodies are re-expressed accordingly. Multi-joint
combinations not listed above (for example dm_control's planar ``rootx, rootz, rooty``) are an error.

Welded bodies that cannot stand alone as a :class:`~pbframework.model.Link` (no mass, a point mass, an
inertia ``Link`` rejects) are merged exactly as :mod:`pbframework.io.urdf` merges links. Top-level bodies
without any joint in their subtree are static scenery: they are dropped when the world also holds a moving
tree (they carry no dynamics). The model must contain a single articulated tree.

Names: links are named after the bodies (an unnamed body becomes ``body<N>``), joints after the MJCF joints
(an unnamed one becomes ``<body>_joint``; a weld is ``<body>_weld``).
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterator

import numpy as np

from ..model import WORLD, ArticulatedBody, JointType, ModelError, Shape
from .urdf import _assemble, _Body, _Edge, _floats, _homogeneous, _inverse, _number, _read_xml

__all__ = ["load_mjcf", "MJCF_JOINT_TYPES"]

MJCF_JOINT_TYPES = ("hinge", "slide", "ball", "free")
"""The MJCF joint types :func:`load_mjcf` reads."""

_IGNORED = {"geom", "site", "camera", "light", "plugin"}
_ORIENTATIONS = ("quat", "axisangle", "euler", "xyaxes", "zaxis")


class _Compiler:
    """The ``<compiler>`` settings the importer honours."""

    def __init__(self, root: ET.Element, src: str) -> None:
        attrs: dict[str, str] = {}
        for c in root.findall("compiler"):
            attrs.update(c.attrib)
        angle = attrs.get("angle", "degree")
        if angle not in ("degree", "radian"):
            raise ModelError(f"{src}: <compiler angle={angle!r}>: expected 'degree' or 'radian'")
        self.angle_scale = math.pi / 180.0 if angle == "degree" else 1.0
        self.eulerseq = attrs.get("eulerseq", "xyz")
        if len(self.eulerseq) != 3 or any(c not in "xyzXYZ" for c in self.eulerseq):
            raise ModelError(f"{src}: <compiler eulerseq={self.eulerseq!r}>: expected 3 letters from xyzXYZ")
        self.autolimits = attrs.get("autolimits", "true") == "true"
        self.inertiafromgeom = attrs.get("inertiafromgeom", "auto")
        if self.inertiafromgeom == "true":
            raise ModelError(f"{src}: <compiler inertiafromgeom=\"true\"> is not supported: load_mjcf reads body "
                             f"inertia from <inertial> elements only (inertia from geoms is not computed)")
        if attrs.get("coordinate", "local") != "local":
            raise ModelError(f"{src}: <compiler coordinate={attrs['coordinate']!r}> is not supported (use 'local')")
        balance = attrs.get("balanceinertia", "false")
        if balance not in ("true", "false"):
            raise ModelError(f"{src}: <compiler balanceinertia={balance!r}>: expected 'true' or 'false'")
        self.balanceinertia = balance == "true"
        for key, off in (("boundmass", "0"), ("boundinertia", "0")):
            if key in attrs and attrs[key] not in (off, "0.0"):
                raise ModelError(f"{src}: <compiler {key}={attrs[key]!r}> is not supported (it changes the "
                                 f"inertia MuJoCo uses; write the bounded values into <inertial>)")


def _expand_includes(elem: ET.Element, base: Path, src: str, stack: tuple[str, ...]) -> None:
    """Replace every ``<include file>`` below ``elem`` by the children of the included file's root."""
    k = 0
    while k < len(elem):
        child = elem[k]
        if child.tag != "include":
            _expand_includes(child, base, src, stack)
            k += 1
            continue
        fname = child.get("file")
        if not fname:
            raise ModelError(f"{src}: <include> has no 'file' attribute")
        path = (base / fname).resolve()
        if str(path) in stack:
            raise ModelError(f"{src}: <include file={fname!r}> includes itself")
        sub_root, sub_src = _read_xml(path, "MJCF include")
        if sub_root.tag != "mujoco":
            raise ModelError(f"{sub_src}: an included MJCF file must have a <mujoco> root, got <{sub_root.tag}>")
        _expand_includes(sub_root, path.parent, sub_src, stack + (str(path),))
        elem[k:k + 1] = list(sub_root)
        k += len(sub_root)


class _Defaults:
    """``<default>`` classes: class name -> element tag -> attributes (inheritance resolved)."""

    def __init__(self, root: ET.Element, src: str) -> None:
        self.src = src
        self.classes: dict[str, dict[str, dict[str, str]]] = {"main": {}}
        for d in root.findall("default"):
            cls = d.get("class", "main")
            self._visit(d, cls, self.classes.get("main", {}) if cls != "main" else {})

    def _visit(self, d: ET.Element, cls: str, inherited: dict[str, dict[str, str]]) -> None:
        own = {tag: dict(a) for tag, a in inherited.items()}
        for tag, a in self.classes.get(cls, {}).items():  # a repeated top-level <default> adds to "main"
            own.setdefault(tag, {}).update(a)
        for child in d:
            if child.tag != "default":
                own.setdefault(child.tag, {}).update(child.attrib)
        self.classes[cls] = own
        for child in d:
            if child.tag == "default":
                name = child.get("class")
                if not name:
                    raise ModelError(f"{self.src}: a nested <default> has no 'class' attribute")
                self._visit(child, name, own)

    def resolve(self, elem: ET.Element, childclass: str | None, where: str) -> dict[str, str]:
        cls = elem.get("class") or childclass or "main"
        if cls not in self.classes:
            raise ModelError(f"{where}: unknown default class {cls!r} (defined: {sorted(self.classes)})")
        return {**self.classes[cls].get(elem.tag, {}), **elem.attrib}


def _axis_rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K


def _orientation(attrs: dict[str, str], comp: _Compiler, what: str) -> np.ndarray:
    """Rotation matrix of an MJCF element from whichever orientation attribute it has."""
    given = [k for k in _ORIENTATIONS if k in attrs]
    if len(given) > 1:
        raise ModelError(f"{what}: conflicting orientation attributes {given} (give one)")
    if not given:
        return np.eye(3)
    key = given[0]
    label = f"{what}: attribute {key}"
    if key == "quat":
        w, x, y, z = _floats(attrs[key], 4, label)
        n = math.sqrt(w * w + x * x + y * y + z * z)
        if n < 1e-12:
            raise ModelError(f"{label}: zero quaternion {attrs[key]!r}")
        w, x, y, z = w / n, x / n, y / n, z / n
        return np.array([
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ])
    if key == "axisangle":
        v = _floats(attrs[key], 4, label)
        if np.linalg.norm(v[:3]) < 1e-12:
            raise ModelError(f"{label}: zero axis {attrs[key]!r}")
        return _axis_rotation(v[:3], v[3] * comp.angle_scale)
    if key == "euler":
        angles = _floats(attrs[key], 3, label) * comp.angle_scale
        R = np.eye(3)
        for c, a in zip(comp.eulerseq, angles):
            Ri = _axis_rotation(np.eye(3)["xyz".index(c.lower())], a)
            R = R @ Ri if c.islower() else Ri @ R  # lower case: axes move with the frame
        return R
    if key == "xyaxes":
        v = _floats(attrs[key], 6, label)
        x = v[:3]
        if np.linalg.norm(x) < 1e-12:
            raise ModelError(f"{label}: zero x axis")
        x = x / np.linalg.norm(x)
        y = v[3:] - (v[3:] @ x) * x
        if np.linalg.norm(y) < 1e-12:
            raise ModelError(f"{label}: y axis parallel to the x axis")
        y = y / np.linalg.norm(y)
        return np.column_stack([x, y, np.cross(x, y)])
    z = _floats(attrs[key], 3, label)
    if np.linalg.norm(z) < 1e-12:
        raise ModelError(f"{label}: zero axis")
    z = z / np.linalg.norm(z)
    c = np.cross([0.0, 0.0, 1.0], z)
    s, d = np.linalg.norm(c), z[2]
    if s < 1e-12:
        return np.eye(3) if d > 0 else np.diag([1.0, -1.0, -1.0])
    return _axis_rotation(c, math.atan2(s, d))


def _pose(attrs: dict[str, str], comp: _Compiler, what: str) -> np.ndarray:
    pos = _floats(attrs.get("pos", "0 0 0"), 3, f"{what}: attribute pos")
    return _homogeneous(_orientation(attrs, comp, what), pos)


class _Reader:
    """Walks the body tree and collects the intermediate bodies and joints."""

    def __init__(self, src: str, comp: _Compiler, defaults: _Defaults, quaternions: bool = True) -> None:
        self.src, self.comp, self.defaults = src, comp, defaults
        self.quaternions = quaternions
        self.bodies: dict[str, _Body] = {}
        self.edges: list[_Edge] = []
        self._unnamed = 0

    def contents(self, elem: ET.Element, T: np.ndarray, cc: str | None,
                 where: str) -> Iterator[tuple[ET.Element, np.ndarray, str | None]]:
        """Children of a body, descending through ``<frame>`` elements (with their composed pose)."""
        for child in elem:
            if child.tag == "frame":
                attrs = self.defaults.resolve(child, cc, where)
                Tf = T @ _pose(attrs, self.comp, f"{where} <frame>")
                for sub, Ts, ccs in self.contents(child, Tf, child.get("childclass", cc), where):
                    if sub.tag in ("joint", "freejoint", "inertial"):
                        raise ModelError(f"{where}: <{sub.tag}> inside a <frame> is not supported (put it in the "
                                         f"body)")
                    yield sub, Ts, ccs
            else:
                yield child, T, cc

    def body(self, el: ET.Element, parent: str, F_parent: np.ndarray, T_pre: np.ndarray, cc: str | None) -> None:
        name = el.get("name")
        if not name:
            self._unnamed += 1
            name = f"body{self._unnamed}"
        where = f"{self.src}: body {name!r}"
        if name in self.bodies:
            raise ModelError(f"{self.src}: duplicate body name {name!r}")
        if el.get("mocap") == "true":
            raise ModelError(f"{where}: mocap bodies are not supported (they are not part of the dynamics)")
        cc = el.get("childclass", cc)
        T_off = T_pre @ _pose(el.attrib, self.comp, where)
        items = list(self.contents(el, np.eye(4), cc, where))
        joints = []
        for sub, _, ccs in items:
            if sub.tag == "freejoint":
                joints.append(("free", sub, {**sub.attrib, "type": "free"}))
            elif sub.tag == "joint":
                attrs = self.defaults.resolve(sub, ccs, where)
                joints.append((attrs.get("type", "hinge"), sub, attrs))
        edge, F_body = self.joint(name, where, parent, F_parent, T_off, joints)
        inertials = [sub for sub, _, _ in items if sub.tag == "inertial"]
        if len(inertials) > 1:
            raise ModelError(f"{where}: more than one <inertial>")
        if inertials:
            b = self.inertial(name, inertials[0], F_body, where)
        else:
            if self.comp.inertiafromgeom == "auto":
                for sub, _, ccs in items:
                    if sub.tag == "geom" and self.geom_has_mass(sub, ccs, where):
                        raise ModelError(
                            f"{where}: has no <inertial> but has geoms: MuJoCo would compute its inertia from the "
                            f"geoms, which load_mjcf does not do; add an explicit <inertial> (or set <compiler "
                            f"inertiafromgeom=\"false\"/> if the geoms carry no mass)")
            b = _Body(name, 0.0, np.zeros(3), np.zeros((3, 3)))
        b.shapes = [sh for sub, Ts, ccs in items if sub.tag == "geom"
                    for sh in self.geom_shape(sub, F_body @ Ts, ccs, where)]
        self.bodies[name] = b
        self.edges.append(edge)
        for sub, Ts, ccs in items:
            if sub.tag == "body":
                self.body(sub, name, F_body, Ts, ccs)
            elif sub.tag not in _IGNORED and sub.tag not in ("joint", "freejoint", "inertial"):
                raise ModelError(f"{where}: unsupported element <{sub.tag}>")

    def geom_has_mass(self, geom: ET.Element, cc: str | None, where: str) -> bool:
        attrs = self.defaults.resolve(geom, cc, where)
        if attrs.get("type") in ("plane", "hfield"):  # MuJoCo gives these no inertia
            return False
        if "mass" in attrs:
            return _floats(attrs["mass"], 1, f"{where} <geom> attribute mass")[0] > 0.0
        return _floats(attrs.get("density", "1000"), 1, f"{where} <geom> attribute density")[0] > 0.0

    def geom_shape(self, geom: ET.Element, T: np.ndarray, cc: str | None, where: str) -> list[Shape]:
        """The geom as a collision :class:`Shape` in the link frame (``T``: the geom's parent frame there);
        empty for a visual-only geom or a type other than sphere, box, capsule."""
        attrs = self.defaults.resolve(geom, cc, where)
        kind = attrs.get("type", "sphere")
        if kind not in ("sphere", "box", "capsule") or (attrs.get("contype") == "0" and attrs.get("conaffinity") == "0"):
            return []
        what = f"{where} <geom{' ' + repr(geom.get('name')) if geom.get('name') else ''}>"
        need = {"sphere": 1, "box": 3, "capsule": 1 if "fromto" in attrs else 2}[kind]
        size = _floats(attrs.get("size", ""), None, f"{what}: attribute size")
        if size.size < need:
            raise ModelError(f"{what}: a {kind} needs {need} size numbers, got size={attrs.get('size')!r}")
        size = size[:need]
        if "fromto" in attrs:
            if kind != "capsule":
                raise ModelError(f"{what}: fromto is read for capsules only, not for a {kind}")
            a, b = np.split(_floats(attrs["fromto"], 6, f"{what}: attribute fromto"), 2)
            half = 0.5 * float(np.linalg.norm(b - a))
            zaxis = " ".join(repr(float(v)) for v in (b - a)) if half > 0 else "0 0 1"
            pose = _pose({"pos": " ".join(repr(float(v)) for v in (a + b) / 2), "zaxis": zaxis}, self.comp, what)
            size = np.array([size[0], half])
        else:
            pose = _pose(attrs, self.comp, what)
        try:
            return [Shape(kind, size, T @ pose, geom.get("name", ""))]
        except ModelError as exc:
            raise ModelError(f"{what}: {exc}") from None

    def inertial(self, name: str, el: ET.Element, F_body: np.ndarray, where: str) -> _Body:
        what = f"{where} <inertial>"
        T = F_body @ _pose(el.attrib, self.comp, what)
        mass = _number(el, "mass", where)
        if not np.isfinite(mass) or mass < 0.0:
            raise ModelError(f"{what}: mass must be finite and non-negative, got {el.get('mass')!r}")
        if "fullinertia" in el.attrib and "diaginertia" in el.attrib:
            raise ModelError(f"{what}: give diaginertia or fullinertia, not both")
        if "fullinertia" in el.attrib:
            ixx, iyy, izz, ixy, ixz, iyz = _floats(el.get("fullinertia"), 6, f"{what}: attribute fullinertia")
            I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        elif "diaginertia" in el.attrib:
            I = np.diag(_floats(el.get("diaginertia"), 3, f"{what}: attribute diaginertia"))
        else:
            raise ModelError(f"{what}: needs diaginertia or fullinertia")
        R = T[:3, :3]
        return _Body(name, mass, T[:3, 3].copy(), R @ I @ R.T)

    def joint(self, body: str, where: str, parent: str, F_parent: np.ndarray, T_off: np.ndarray,
              joints: list[tuple[str, ET.Element, dict[str, str]]]) -> tuple[_Edge, np.ndarray]:
        """The edge that moves ``body`` and the body frame's pose in the new link frame."""
        base = F_parent @ T_off
        if not joints:
            return _Edge(f"{body}_weld", JointType.FIXED, parent, body, base), np.eye(4)
        parsed = []
        for k, (jtype, el, attrs) in enumerate(joints):
            jname = attrs.get("name") or (f"{body}_joint" if len(joints) == 1 else f"{body}_joint{k}")
            jwhere = f"{self.src}: joint {jname!r} of body {body!r}"
            if jtype not in MJCF_JOINT_TYPES:
                raise ModelError(f"{jwhere}: unsupported type {jtype!r} (supported: {', '.join(MJCF_JOINT_TYPES)})")
            axis = _floats(attrs.get("axis", "0 0 1"), 3, f"{jwhere}: attribute axis")
            if jtype in ("hinge", "slide"):
                if np.linalg.norm(axis) < 1e-12:
                    raise ModelError(f"{jwhere}: attribute axis must be non-zero, got {attrs.get('axis')!r}")
                axis = axis / np.linalg.norm(axis)
            pos = _floats(attrs.get("pos", "0 0 0"), 3, f"{jwhere}: attribute pos")
            scale = self.comp.angle_scale if jtype == "hinge" else 1.0
            ref = _floats(attrs.get("ref", "0"), 1, f"{jwhere}: attribute ref")[0] * scale
            lower, upper = -np.inf, np.inf
            limited = attrs.get("limited", "auto")
            if limited == "true" or (limited == "auto" and self.comp.autolimits and "range" in attrs):
                if jtype in ("hinge", "slide") and "range" in attrs:
                    lo, hi = _floats(attrs["range"], 2, f"{jwhere}: attribute range") * scale
                    if lo > hi:
                        raise ModelError(f"{jwhere}: range lower {lo} exceeds upper {hi}")
                    if lo < hi:
                        lower, upper = lo, hi
            effort = np.inf
            if "actuatorfrcrange" in attrs:
                effort = float(np.abs(_floats(attrs["actuatorfrcrange"], 2,
                                              f"{jwhere}: attribute actuatorfrcrange")).max())
            armature = _floats(attrs.get("armature", "0"), 1, f"{jwhere}: attribute armature")[0]
            if not armature >= 0:
                raise ModelError(f"{jwhere}: attribute armature must be >= 0, got {attrs.get('armature')!r}")
            if armature > 0 and jtype in ("free", "ball"):
                raise ModelError(f"{jwhere}: armature on a {jtype} joint is not supported (hinges and slides only)")
            parsed.append(dict(name=jname, type=jtype, axis=axis, pos=pos, ref=ref, lower=lower, upper=upper,
                               effort=effort, armature=armature, where=jwhere))
        types = [p["type"] for p in parsed]
        if len(parsed) == 1:
            p = parsed[0]
            t = p["type"]
            if t == "free":
                if parent != WORLD:
                    raise ModelError(f"{p['where']}: a free joint must be on a top-level body (a child of "
                                     f"<worldbody>), but body {body!r} is inside {parent!r}")
                jt = JointType.FREE if self.quaternions else JointType.FLOATING
                return _Edge(p["name"], jt, WORLD, body, np.eye(4)), np.eye(4)
            P = _homogeneous(np.eye(3), p["pos"])
            origin = base @ P
            if t == "hinge":
                origin = origin @ _homogeneous(_axis_rotation(p["axis"], -p["ref"]), np.zeros(3))
                jt = JointType.REVOLUTE
            elif t == "slide":
                origin = origin @ _homogeneous(np.eye(3), -p["ref"] * p["axis"])
                jt = JointType.PRISMATIC
            else:
                jt = JointType.BALL if self.quaternions else JointType.SPHERICAL
            edge = _Edge(p["name"], jt, parent, body, origin, axis=p["axis"] if t in ("hinge", "slide")
                         else np.array([0.0, 0.0, 1.0]), lower=p["lower"], upper=p["upper"], effort=p["effort"],
                         armature=p["armature"])
            return edge, _inverse(P)
        # Several joints in one body: recognised compositions only.
        if any(p["ref"] != 0.0 for p in parsed):
            raise ModelError(f"{where}: a non-zero ref on a body with several joints is not supported")
        hinges = [p for p in parsed if p["type"] == "hinge"]
        axes = [p["axis"] for p in hinges]
        same_pos = all(np.allclose(p["pos"], hinges[0]["pos"], atol=1e-12) for p in hinges) if hinges else True
        Rj = None
        jt = None
        if types == ["hinge", "hinge"] and same_pos and abs(axes[0] @ axes[1]) < 1e-9:
            Rj, jt = np.column_stack([np.cross(axes[0], axes[1]), axes[0], axes[1]]), JointType.BALL2
        elif types == ["hinge"] * 3 and same_pos and _right_handed(axes):
            Rj, jt = np.column_stack(axes), JointType.SPHERICAL
        elif (types == ["slide"] * 3 + ["hinge"] * 3 and same_pos and _right_handed(axes)
              and all(np.allclose(parsed[i]["axis"], axes[i], atol=1e-9) for i in range(3))):
            if parent != WORLD:
                raise ModelError(f"{where}: three slides and three hinges compose a floating joint, which is "
                                 f"only supported on a top-level body")
            Rj, jt = np.column_stack(axes), JointType.FLOATING
        if Rj is None:
            desc = ", ".join(f"{p['name']} ({p['type']})" for p in parsed)
            raise ModelError(
                f"{where}: its joints [{desc}] cannot be represented; supported in one body: a single hinge, slide, "
                f"ball or free joint; two hinges about orthogonal axes at one point (ball2); three hinges about a "
                f"right-handed orthonormal triad at one point (spherical); three slides then three hinges along "
                f"one right-handed orthonormal triad (floating, top-level bodies). Split the joints over nested "
                f"bodies, each with an <inertial>")
        P = _homogeneous(Rj, hinges[0]["pos"])
        name = body if all(p["name"] != body for p in parsed) else f"{body}_joint"
        armatures = {p["armature"] for p in parsed}
        if len(armatures) > 1:
            raise ModelError(f"{where}: its joints have different armatures {sorted(armatures)}; a composed joint "
                             f"takes one armature for all its coordinates")
        return _Edge(name, jt, parent, body, base @ P, armature=armatures.pop()), _inverse(P)


def _right_handed(axes: list[np.ndarray]) -> bool:
    if len(axes) != 3:
        return False
    R = np.column_stack(axes)
    return bool(np.allclose(R.T @ R, np.eye(3), atol=1e-9) and np.linalg.det(R) > 0)


def _has_joint(el: ET.Element) -> bool:
    return any(x.tag in ("joint", "freejoint") for x in el.iter())


def load_mjcf(path: str | os.PathLike, *, limits: bool = True, balance_inertia: bool = False,
              quaternions: bool = True) -> ArticulatedBody:
    """Load the kinematic tree of an MJCF (MuJoCo XML) file as an :class:`~pbframework.model.ArticulatedBody`.

    Args:
        path: the ``.xml`` file.
        limits: where a hinge or slide is limited (``range``, with ``limited`` or ``autolimits``), give the
            model the ``joint_limits`` force in ``model.default_forces``; ``False`` keeps the limits as data only.
        balance_inertia: set the principal moments of a body that breaks the triangle inequality to their
            mean, as MuJoCo does; also on where the file says ``<compiler balanceinertia="true">``. The
            changed bodies are named in an :class:`~pbframework.io.urdf.InertiaBalanced` warning.
        quaternions: MJCF ``ball`` and ``free`` joints as pbframework's ``ball`` and ``free`` (unit quaternions,
            MuJoCo's own coordinates up to the quaternion order: MuJoCo stores ``(w, x, y, z)``, pbframework
            ``(x, y, z, w)``); ``False``: as the Euler-angle joints ``spherical`` and ``floating``.

    Returns:
        The model, named after ``<mujoco model>``, with gravity from ``<option gravity>``. Joint and
        coordinate conventions are in the module docstring (hinges and slides keep MuJoCo's coordinates).

    Raises:
        FileNotFoundError: ``path`` (or an included file) does not exist.
        ModelError: malformed XML, an unsupported element or joint combination, a moving body without
            mass, ... The message starts with the file name and names the body or joint.
    """
    root, src = _read_xml(path, "MJCF")
    if root.tag != "mujoco":
        raise ModelError(f"{src}: not an MJCF file: the root element is <{root.tag}>, expected <mujoco>")
    _expand_includes(root, Path(src).resolve().parent, src, (str(Path(src).resolve()),))
    comp = _Compiler(root, src)
    defaults = _Defaults(root, src)
    gravity = np.array([0.0, 0.0, -9.81])
    for opt in root.findall("option"):
        if "gravity" in opt.attrib:
            gravity = _floats(opt.get("gravity"), 3, f"{src}: <option> attribute gravity")
    reader = _Reader(src, comp, defaults, quaternions)
    tops: list[tuple[ET.Element, np.ndarray, str | None]] = []
    for wb in root.findall("worldbody"):
        for sub, T, cc in reader.contents(wb, np.eye(4), None, f"{src}: <worldbody>"):
            if sub.tag == "body":
                tops.append((sub, T, cc))
            elif sub.tag in ("joint", "freejoint", "inertial"):
                raise ModelError(f"{src}: <worldbody> cannot hold a <{sub.tag}> (the world does not move)")
            elif sub.tag not in _IGNORED:
                raise ModelError(f"{src}: <worldbody>: unsupported element <{sub.tag}>")
    if not tops:
        raise ModelError(f"{src}: <worldbody> holds no <body>")
    moving = [t for t in tops if _has_joint(t[0])]
    if len(moving) > 1:
        names = [t[0].get("name", "(unnamed)") for t in moving]
        raise ModelError(f"{src}: the world holds {len(moving)} moving trees ({', '.join(names)}); a model is one "
                         f"articulated tree")
    if moving:
        tops = moving
    elif len(tops) > 1:
        raise ModelError(f"{src}: the world holds {len(tops)} bodies and no joint; a model is one tree")
    el, T, cc = tops[0]
    reader.body(el, WORLD, np.eye(4), T, cc)
    name = root.get("model") or Path(src).stem
    return _assemble(reader.bodies, reader.edges, src, name, link_word="body", gravity=gravity, limits=limits,
                     balance=balance_inertia or comp.balanceinertia,
                     balance_flag='balance_inertia=True (pbf simulate --balance-inertia, or <compiler balanceinertia="true">)')

