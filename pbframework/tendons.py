"""Tendon lengths and moments: fixed tendons (a linear combination of coordinates) and spatial tendons (a
path through sites, pulleys and wrapping geoms), computed as MuJoCo computes them (``mj_tendon``,
``mju_wrap``), as CasADi expressions of the configuration.

A tendon is plain data (force specs keep it as given, trajectories save it):

- fixed: ``{"name": ..., "joints": {coordinate name: coefficient}}``, length ``sum c_i q_i``;
- spatial: ``{"name": ..., "path": [element, ...]}``, each element one of

  - ``{"kind": "site", "link": link name, "pos": [x, y, z]}`` (a point in the link's frame; the world's
    link name :data:`~pbframework.model.WORLD` for scenery),
  - ``{"kind": "geom", "link": ..., "shape": "sphere" | "cylinder", "radius": r, "frame": 4 x 4 pose of the
    geom in the link's frame, "sidesite": None | {"link": ..., "pos": [x, y, z]}}`` (always between two
    sites),
  - ``{"kind": "pulley", "divisor": d}`` (the following branch's length and moment count ``1/d``).

The length of a spatial tendon is MuJoCo's: between consecutive sites a straight segment; a geom between two
sites wraps the segment around it (a great circle of a sphere in the plane of the two points and its
centre, a helix on a cylinder about its z axis) when the straight segment would cross it -- or, with a
``sidesite``, also when the segment passes on the side opposite the side site and its two end points lie on
opposite sides of the line through the geom's centre and the side site --, MuJoCo's choice of the two
tangent solutions included. That last condition is MuJoCo 4.0.0's as measured (its ``ten_length`` at random
states); the 3.12 source of ``wrap_circle`` does not have it. Wrap and no-wrap are CasADi ``if_else`` branches. The moment is the length's
gradient (in the tangent displacement, so free and ball joints work), equal to MuJoCo's ``ten_J``: the wrap
path is a geodesic, so the tangent points' own motion adds nothing to first order. A wrap whose two sites, geom
and side site are all on one link is a constant (computed in that link's frame): MuJoCo's moment skips it too,
and the wrap's own gradient is singular where a site lies on the geom's surface (Menagerie's aero hand).

Not supported (refused by :func:`pbframework.io.load_mjcf`): ellipsoid and other wrap geoms, and a side site
inside its geom (MuJoCo's ``wrap_inside``, an iterative solve) or on another body than its geom.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import casadi as ca
import numpy as np

from .model import WORLD, ArticulatedBody

__all__ = ["check_tendon", "tendon_length", "tendon_moment", "is_spatial"]

MINVAL = 1e-15
"""MuJoCo's ``mjMINVAL``."""

SHAPES = ("sphere", "cylinder")


def is_spatial(tendon: Mapping[str, Any]) -> bool:
    return "path" in tendon


def check_tendon(who: str, tendon: Any) -> dict[str, Any]:
    """A tendon spec, checked and copied into plain lists and floats (module docstring)."""
    if not isinstance(tendon, Mapping) or "name" not in tendon or ("joints" in tendon) == ("path" in tendon):
        raise ValueError(f"{who}: a tendon must be {{'name', 'joints': {{coordinate: coefficient}}}} or "
                         f"{{'name', 'path': [site / geom / pulley elements]}}, got {tendon!r}")
    name = str(tendon["name"])
    if "joints" in tendon:
        joints = tendon["joints"]
        if (not isinstance(joints, Mapping) or not joints or not all(isinstance(k, str) for k in joints)
                or not all(np.isfinite(float(v)) for v in joints.values())):
            raise ValueError(f"{who}: tendon {name!r}: joints must be a non-empty mapping {{coordinate name: finite "
                             f"coefficient}}, got {joints!r}")
        return {"name": name, "joints": {str(k): float(v) for k, v in joints.items()}}
    path = []
    for k, e in enumerate(tendon["path"]):
        kind = e.get("kind") if isinstance(e, Mapping) else None
        if kind == "site":
            path.append({"kind": "site", "link": str(e["link"]), "pos": _vec(who, name, e["pos"], 3)})
        elif kind == "pulley":
            d = float(e["divisor"])
            if not np.isfinite(d) or d <= 0:
                raise ValueError(f"{who}: tendon {name!r}: a pulley's divisor must be positive, got {d!r}")
            path.append({"kind": "pulley", "divisor": d})
        elif kind == "geom" and e.get("shape") in SHAPES:
            side = e.get("sidesite")
            frame = np.asarray(e["frame"], float)
            if frame.shape != (4, 4) or not np.all(np.isfinite(frame)) or not float(e["radius"]) > 0:
                raise ValueError(f"{who}: tendon {name!r}: element {k}: a geom needs a 4 x 4 frame and a positive "
                                 f"radius, got {e!r}")
            path.append({"kind": "geom", "link": str(e["link"]), "shape": e["shape"], "radius": float(e["radius"]),
                         "frame": frame.tolist(),
                         "sidesite": None if side is None else {"link": str(side["link"]),
                                                                "pos": _vec(who, name, side["pos"], 3)}})
        else:
            raise ValueError(f"{who}: tendon {name!r}: element {k} must be a site, a pulley or a geom of shape "
                             f"{' / '.join(SHAPES)}, got {e!r}")
    kinds = [e["kind"] for e in path]
    ok = len(path) >= 2 and kinds[0] == "site" and kinds[-1] == "site" and all(
        (a != "geom" or (kinds[i - 1] == "site" and kinds[i + 1] == "site")) and
        (a != "pulley" or (kinds[i - 1] == "site" and kinds[i + 1] == "site")) for i, a in enumerate(kinds)
        if 0 < i < len(kinds) - 1)
    if not ok:
        raise ValueError(f"{who}: tendon {name!r}: a path starts and ends with a site, and each geom or pulley sits "
                         f"between two sites, got {kinds}")
    return {"name": name, "path": path}


def _vec(who: str, name: str, x: Any, n: int) -> list[float]:
    v = np.asarray(x, float).reshape(-1)
    if v.shape != (n,) or not np.all(np.isfinite(v)):
        raise ValueError(f"{who}: tendon {name!r}: expected {n} finite numbers, got {x!r}")
    return v.tolist()


def tendon_length(model: ArticulatedBody, tendon: Mapping[str, Any], q):
    """The tendon's length at the configuration ``q`` (a CasADi expression, or a number for a numeric ``q``)."""
    if "joints" in tendon:
        return sum(c * q[model.joint_q_index[k].start] for k, c in tendon["joints"].items())
    return _spatial_length(tendon["path"], _poser(model, q))


def tendon_moment(model: ArticulatedBody, tendon: Mapping[str, Any], q):
    """``(length, moment)``: the length at ``q`` and its gradient in the velocity coordinates (``nv`` entries:
    ``ldot = moment . v``, and a tension ``F`` along the tendon is the generalised force ``moment F``)."""
    if "joints" in tendon:
        moment = ca.SX.zeros(model.nv) if isinstance(q, ca.SX) else ca.DM.zeros(model.nv)
        for k, c in tendon["joints"].items():
            i = model.joint_v_index[k].start
            moment[i] = moment[i] + c
        return tendon_length(model, tendon, q), moment
    from .lie import q_integrate

    e = ca.SX.sym("e", model.nv)
    qe = q_integrate(model)(q, e) if model.on_group else q + e
    length = _spatial_length(tendon["path"], _poser(model, qe))
    zero = ca.DM.zeros(model.nv)
    return ca.substitute(length, e, zero), ca.substitute(ca.gradient(length, e), e, zero)


def _poser(model: ArticulatedBody, q):
    from .kinematics import link_poses

    names = [x.name for x in model.links]
    poses = link_poses(model, q)

    def pose(link: str):
        if link == WORLD:
            return ca.DM.eye(3), ca.DM.zeros(3)
        if link not in names:
            raise ValueError(f"tendon: model {model.name!r} has no link {link!r}")
        return poses[names.index(link)]

    return pose


def _spatial_length(path: Sequence[Mapping[str, Any]], pose):
    def point(e):
        R, p = pose(e["link"])
        return p + ca.mtimes(R, ca.DM(e["pos"]))

    length, divisor, j = 0, 1.0, 0
    while j < len(path) - 1:
        a, b = path[j], path[j + 1]
        if a["kind"] == "pulley" or b["kind"] == "pulley":
            if a["kind"] == "pulley":
                divisor = a["divisor"]
            j += 1
            continue
        if b["kind"] == "geom":
            c = path[j + 2]
            links = {a["link"], b["link"], c["link"]} | ({b["sidesite"]["link"]} if b["sidesite"] else set())
            # all on one link: a constant, computed in that link's frame (no gradient through the wrap, which is
            # singular where a site lies on the geom's surface: MuJoCo skips such pairs too)
            here = pose if len(links) > 1 else (lambda link: (ca.DM.eye(3), ca.DM.zeros(3)))
            ends = [p + ca.mtimes(R, ca.DM(e["pos"])) for e in (a, c) for R, p in [here(e["link"])]]
            R, p = here(b["link"])
            F = ca.DM(b["frame"])
            side = None
            if b["sidesite"] is not None:
                Rs, ps = here(b["sidesite"]["link"])
                side = ps + ca.mtimes(Rs, ca.DM(b["sidesite"]["pos"]))
            length = length + _wrapped(ends[0], ends[1], p + ca.mtimes(R, F[:3, 3]), ca.mtimes(R, F[:3, :3]),
                                       b["radius"], b["shape"], side) / divisor
            j += 2
        else:
            length = length + _norm(point(b) - point(a)) / divisor
            j += 1
    return length


# -- MuJoCo's mju_wrap, wrap_circle, length_circle, is_intersect (engine_util_misc.c) ---------------------------

def _norm(x):
    """``|x|``, with a zero (not NaN) gradient at ``x = 0`` (a tendon through one site twice: MuJoCo's moment is
    zero there too)."""
    return ca.sqrt(ca.fmax(ca.dot(x, x), 1e-300))


def _normalize(x):
    n = _norm(x)
    return x / ca.if_else(n < MINVAL, 1.0, n)


def _wrapped(x0, x1, xpos, xmat, radius: float, shape: str, side):
    """The segment x0 -> x1 wrapped around the geom: ``|x0 - w0| + wlen + |w1 - x1|``, or ``|x0 - x1|`` where
    MuJoCo's ``mju_wrap`` returns -1."""
    p0, p1 = ca.mtimes(xmat.T, x0 - xpos), ca.mtimes(xmat.T, x1 - xpos)
    if shape == "sphere":
        ax0 = _normalize(p0)
        cr = ca.cross(p0, p1)
        nrm = _norm(cr)
        # (p0, p1) parallel: MuJoCo's other normal from the largest component of axis 0
        a = ca.fabs(ax0)
        i1 = ca.logic_and(a[1] > a[0], a[1] > a[2])
        i2 = ca.logic_and(a[2] > a[0], a[2] > a[1])
        alt = ca.vertcat(ca.if_else(ca.logic_or(i1, i2), 1, 0), ca.if_else(i1, 0, 1), ca.if_else(i2, 0, 1))
        alt = ca.if_else(ca.logic_or(i1, i2), alt, ca.vertcat(0, 1, 1))
        normal = ca.if_else(nrm < MINVAL, _normalize(ca.cross(ax0, alt)), cr / ca.if_else(nrm < MINVAL, 1.0, nrm))
        ax1 = _normalize(ca.cross(normal, ax0))
    else:
        ax0, ax1 = ca.DM([1, 0, 0]), ca.DM([0, 1, 0])
    d = [ca.dot(p0, ax0), ca.dot(p0, ax1), ca.dot(p1, ax0), ca.dot(p1, ax1)]
    sd = None
    if side is not None:
        s = ca.mtimes(xmat.T, side - xpos)
        sd = _normalize(ca.vertcat(ca.dot(s, ax0), ca.dot(s, ax1))) * radius
    ok, pnt, wlen = _wrap_circle(d, sd, radius)
    ok = ca.logic_and(ok, ca.logic_and(_norm(p0) >= MINVAL, _norm(p1) >= MINVAL))
    res0 = ax0 * pnt[0] + ax1 * pnt[1]
    res1 = ax0 * pnt[2] + ax1 * pnt[3]
    if shape == "cylinder":
        L0 = ca.sqrt((p0[0] - res0[0]) ** 2 + (p0[1] - res0[1]) ** 2)
        L1 = ca.sqrt((p1[0] - res1[0]) ** 2 + (p1[1] - res1[1]) ** 2)
        total = L0 + wlen + L1
        total = ca.if_else(total > 0, total, 1.0)
        z0 = p0[2] + (p1[2] - p0[2]) * L0 / total
        z1 = p0[2] + (p1[2] - p0[2]) * (L0 + wlen) / total
        res0 = ca.vertcat(res0[0], res0[1], z0)
        res1 = ca.vertcat(res1[0], res1[1], z1)
        wlen = ca.sqrt(wlen ** 2 + (z1 - z0) ** 2)
    w0, w1 = ca.mtimes(xmat, res0) + xpos, ca.mtimes(xmat, res1) + xpos
    return ca.if_else(ok, _norm(x0 - w0) + wlen + _norm(w1 - x1), _norm(x1 - x0))


def _intersect(p1, p2, p3, p4):
    """MuJoCo's ``is_intersect``: do the 2D segments p1-p2 and p3-p4 cross (a symbolic boolean)."""
    det = (p4[1] - p3[1]) * (p2[0] - p1[0]) - (p4[0] - p3[0]) * (p2[1] - p1[1])
    safe = ca.if_else(ca.fabs(det) < MINVAL, 1.0, det)
    a = ((p4[0] - p3[0]) * (p1[1] - p3[1]) - (p4[1] - p3[1]) * (p1[0] - p3[0])) / safe
    b = ((p2[0] - p1[0]) * (p1[1] - p3[1]) - (p2[1] - p1[1]) * (p1[0] - p3[0])) / safe
    inside = ca.logic_and(ca.logic_and(a >= 0, a <= 1), ca.logic_and(b >= 0, b <= 1))
    return ca.logic_and(ca.fabs(det) >= MINVAL, inside)


def _length_circle(p0, p1, ind: int, radius: float):
    n0, n1 = _normalize(p0), _normalize(p1)
    # MuJoCo's acos(n0 . n1), as atan2: the same angle in [0, pi], with a well-conditioned gradient at small arcs
    angle = ca.atan2(ca.fabs(n0[0] * n1[1] - n0[1] * n1[0]), ca.dot(n0, n1))
    cross = p0[1] * p1[0] - p0[0] * p1[1]
    flip = (cross > 0) if ind else (cross < 0)
    return radius * ca.if_else(flip, 2 * math.pi - angle, angle)


def _wrap_circle(end, side, radius: float):
    """MuJoCo's ``wrap_circle``: ``(wraps, [4 numbers: the two tangent points], arc length)``."""
    e0, e1 = ca.vertcat(end[0], end[1]), ca.vertcat(end[2], end[3])
    sqlen0, sqlen1, sqrad = ca.dot(e0, e0), ca.dot(e1, e1), radius * radius
    ok = ca.logic_and(sqlen0 >= sqrad, sqlen1 >= sqrad)
    dif = e1 - e0
    dd = ca.dot(dif, dif)
    ok = ca.logic_and(ok, dd >= MINVAL)
    a = ca.fmin(ca.fmax(-ca.dot(dif, e0) / ca.if_else(dd < MINVAL, 1.0, dd), 0.0), 1.0)
    tmp = a * dif + e0
    clear = ca.dot(tmp, tmp) > sqrad
    if side is not None:
        same = (side[0] * e0[1] - side[1] * e0[0]) * (side[0] * e1[1] - side[1] * e1[0]) > 0
        clear = ca.logic_and(clear, ca.logic_or(ca.dot(side, tmp) >= 0, same))
    ok = ca.logic_and(ok, ca.logic_not(clear))
    sqrt0, sqrt1 = ca.sqrt(ca.fmax(sqlen0 - sqrad, 0.0)), ca.sqrt(ca.fmax(sqlen1 - sqrad, 0.0))
    l0, l1 = ca.if_else(sqlen0 > 0, sqlen0, 1.0), ca.if_else(sqlen1 > 0, sqlen1, 1.0)
    sols, good = [], []
    for sgn in (1, -1):
        s0 = ca.vertcat(end[0] * sqrad + sgn * radius * end[1] * sqrt0,
                        end[1] * sqrad - sgn * radius * end[0] * sqrt0) / l0
        s1 = ca.vertcat(end[2] * sqrad - sgn * radius * end[3] * sqrt1,
                        end[3] * sqrad + sgn * radius * end[2] * sqrt1) / l1
        if side is not None:
            g = ca.dot(_normalize(s0 + s1), side)
        else:
            g = -ca.dot(s0 - s1, s0 - s1)
        good.append(ca.if_else(_intersect(e0, s0, e1, s1), -10000.0, g))
        sols.append((s0, s1))
    first = good[0] > good[1]
    p0 = ca.if_else(first, sols[0][0], sols[1][0])
    p1 = ca.if_else(first, sols[0][1], sols[1][1])
    ok = ca.logic_and(ok, ca.logic_not(_intersect(e0, p0, e1, p1)))
    arc = ca.if_else(first, _length_circle(sols[0][0], sols[0][1], 0, radius),
                     _length_circle(sols[1][0], sols[1][1], 1, radius))
    return ok, ca.vertcat(p0, p1), arc
