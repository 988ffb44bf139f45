"""MJCF importer: MuJoCo's own compiler reads the file; the compiled model becomes an
:class:`~pbframework.model.ArticulatedBody` with its passive forces and actuators.

MJCF's meaning is defined by MuJoCo's compiler (default classes, includes, frames, inertia from geoms and
meshes, ``autolimits``, ``replicate``, ...), so :func:`load_mjcf` does not parse MJCF itself: it compiles the
file with the ``mujoco`` package (``MjSpec``) and maps the compiled ``MjModel`` -- body frames, inertias,
joints, ranges, armature, passive parameters, actuators, geoms -- onto pbframework's model.

Bodies and joints
-----------------
- A body welded to the world (no joint between it and the world: MuJoCo's ``body_weldid == 0``) is static
  scenery: it carries no dynamics and is never checked for its inertia. The joints of its children attach to
  the world. A ``mocap`` body (posed by the user at run time in MuJoCo) carries no dynamics either; its geoms
  are not obstacles here (named in the :class:`UnsupportedGeoms` warning).
- A moving body with joints ``j1 .. jn`` (MuJoCo composes them in that order, each hinge about its anchor
  ``pos`` in the frame the previous joints have moved) becomes a chain of links: one massless frame per joint
  but the last (named ``<body>/<joint>``) and the body's own link, which carries its mass and is named after
  the body. Coordinates equal MuJoCo's ``qpos`` for hinges and slides (``ref`` is honoured).
- A body without joints inside a moving body is a link welded to its parent (joint type ``fixed``).
- Several trees in one world (two arms, a robot and a free object) are several trees of the model
  (``model.bases``).
- A ``ball`` joint is pbframework's ``ball`` (a unit quaternion in the order ``(x, y, z, w)``; MuJoCo stores
  ``(w, x, y, z)``), or with ``quaternions=False`` the Euler-angle ``spherical``; a ``free`` joint is ``free``
  (world position of the body frame, then the quaternion) or ``floating``. Velocity conventions: a ball
  joint's angular velocity is in the child frame in both; a free joint's linear velocity is in the body frame
  here (Pinocchio's convention) and in the world frame in MuJoCo (``v_mj = R v``), its angular velocity in the
  body frame in both.

Forces (``model.default_forces``; a :class:`~pbframework.simulate.Simulator` adds them to its forces)
----------------------------------------------------------------------------------------------------------
- ``joint_damping`` from ``damping``; ``joint_stiffness`` from ``stiffness`` about ``springref``;
  ``gravity_compensation`` from ``gravcomp`` (its share on joints that say ``actuatorgravcomp`` is
  ``mj_actuators``', clamped with the actuators by ``actuatorfrcrange``, as MuJoCo adds it to ``qfrc_actuator``);
  ``fluid_drag`` from ``<option density / viscosity / wind>`` (MuJoCo's fluid forces: its inertia-box model, and
  its ellipsoid model on bodies with ``fluidshape="ellipsoid"`` geoms, :mod:`pbframework.plugins.forces.fluid`);
  ``joint_friction`` from ``frictionloss`` (MuJoCo's dry friction
  is a constraint; here a smooth ``tanh`` regularisation, see :mod:`pbframework.plugins.forces.passive`);
  ``joint_limits`` where a joint is limited and ``tendon_limits`` where a tendon is (``limits=True``;
  MuJoCo's limits are constraints, here a stiff one-sided spring); ``tendon_passive`` from tendon ``stiffness``
  / ``springlength`` / ``damping``; ``mj_actuators`` from ``<actuator>`` (the control vector, MuJoCo's ``ctrl``, is the
  step's input ``u``; activations, muscles and ``mujoco.pid`` plug-in actuators keep MuJoCo's ``act`` as states). MuJoCo's ``<option><flag gravity / spring / damper / actuation="disable">`` are
  honoured.
- Geoms: spheres, boxes and capsules that collide (``contype`` or ``conaffinity`` non-zero) on moving bodies
  are ``Link.shapes`` (geometry for :func:`pbframework.geometry.sample_contact_points`); planes and boxes
  welded to the world are ``model.obstacles`` (a Menagerie ``scene.xml`` gives its floor). Colliding geoms of
  other types (mesh, cylinder, ellipsoid, height field) are not contact shapes here: one
  :class:`UnsupportedGeoms` warning names them.

``<equality>`` constraints are refused unless ``equality="disable"`` (module function) leaves them out as
MuJoCo's ``<flag equality="disable"/>`` does. Tendons, fixed and spatial (sites, pulleys, sphere and cylinder
wraps), are :mod:`pbframework.tendons` specs inside the force specs. Whatever else the mapping cannot represent
(actuators with user dynamics or gains, body and slider-crank transmissions,
springs on ball / free joints, mocap bodies, ...) is a :class:`~pbframework.model.ModelError` at
load naming the element, the attribute and the file.
"""

from __future__ import annotations

import errno
import os
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..limits import default_forces as limit_forces
from ..model import WORLD, ArticulatedBody, Joint, JointType, Link, ModelError, Shape
from .mjcf_forces import (
    _JOINT_NV, _actuator_params, _equality_params, _passive_forces, _tendon_passive, _tendon_spec,
)
from .mjcf_frames import _axis_rotation, _pose, _quat_matrix, _translation

__all__ = ["load_mjcf", "actuator_force", "to_mujoco", "from_mujoco", "mujoco_velocity_map", "UnsupportedGeoms", "EqualityDisabled", "MJCF_JOINT_TYPES", "mujoco_module"]

MJCF_JOINT_TYPES = ("hinge", "slide", "ball", "free")
"""The MJCF joint types :func:`load_mjcf` reads (all of MuJoCo's)."""

INSTALL_LINE = 'pip install "mujoco>=3.1,<5"'


class EqualityDisabled(UserWarning):
    """``load_mjcf(..., equality="disable")`` left a model's ``<equality>`` constraints out (named)."""


class UnsupportedGeoms(UserWarning):
    """Colliding geoms :func:`load_mjcf` keeps no contact geometry for (types other than sphere, box, capsule
    on moving bodies, plane and box on the world)."""


def mujoco_module():
    """The ``mujoco`` package (MJCF's compiler), or one clear error naming the install command."""
    try:
        import mujoco
    except ImportError as exc:  # pragma: no cover - mujoco is a dependency
        raise ModelError(f"loading MJCF needs MuJoCo's compiler, the mujoco package: {INSTALL_LINE} ({exc})") \
            from None
    return mujoco


class _Compiled:
    """The compiled MjModel and the names MuJoCo gives (or the loader gives unnamed) bodies and joints."""

    def __init__(self, mj, m, src: str, plugins: dict[int, tuple[str, dict[str, str]]] | None = None) -> None:
        self.mj, self.m, self.src = mj, m, src
        self.plugins = dict(plugins or {})
        """Per plug-in actuator (its index): the plug-in's name and its configuration (``<config>`` pairs)."""
        self.body_names = [m.body(b).name or f"body{b}" for b in range(m.nbody)]
        self.joint_names = []
        for j in range(m.njnt):
            b = int(m.jnt_bodyid[j])
            k = j - int(m.body_jntadr[b])
            own = m.joint(j).name
            self.joint_names.append(own or (f"{self.body_names[b]}_joint" if m.body_jntnum[b] == 1
                                            else f"{self.body_names[b]}_joint{k}"))

    def element(self, kind: str, i: int) -> str:
        """``<kind name='...'>`` (or ``<kind> number i``) for messages."""
        name = getattr(self.m, kind)(i).name
        return f"<{kind} name={name!r}>" if name else f"<{kind}> number {i}"

    def refuse(self, what: str) -> ModelError:
        return ModelError(f"{self.src}: {what} is not supported by load_mjcf")


def _check_supported(c: _Compiled, equality: str) -> None:
    """One ModelError for the first element the mapping cannot represent."""
    m, mj = c.m, c.mj
    inert = int(m.opt.disableflags) & (int(mj.mjtDisableBit.mjDSBL_EQUALITY) | int(mj.mjtDisableBit.mjDSBL_CONSTRAINT))
    if m.neq and not inert:
        if equality == "error":
            raise ModelError(f"{c.src}: <equality> ({m.neq} in the model: joint couplings and loop closures are "
                             f"constraints) refused (equality=\"error\"); equality=\"soft\" (the default) makes them "
                             f"soft constraints, equality=\"disable\" leaves them out as MuJoCo's <flag "
                             f"equality=\"disable\"/> does")
        if equality == "disable":
            names = [c.element("equality", e) for e in range(m.neq)]
            warnings.warn(f"{c.src}: {m.neq} <equality> constraint(s) disabled (equality=\"disable\"), as MuJoCo's "
                          f"<flag equality=\"disable\"/> runs the model: {', '.join(names[:6])}"
                          f"{' ...' if m.neq > 6 else ''}", EqualityDisabled, stacklevel=3)
        else:
            for e in range(m.neq):
                t = int(m.eq_type[e])
                if t not in (mj.mjtEq.mjEQ_CONNECT, mj.mjtEq.mjEQ_WELD, mj.mjtEq.mjEQ_JOINT):
                    raise c.refuse(f"{c.element('equality', e)}: a {mj.mjtEq(t).name.split('_', 1)[1].lower()} "
                                   f"equality (joint, connect and weld only)")
                if m.eq_solref[e][0] <= 0:
                    raise c.refuse(f"{c.element('equality', e)}: attribute solref with a negative (direct stiffness) "
                                   f"first value")
    for kind, count in (("flex", m.nflex), ("skin", m.nskin)):
        if count:
            raise c.refuse(f"<{kind}> ({count} in the model)")
    for k in range(m.ntendon):
        where = c.element("tendon", k)
        wraps = range(int(m.tendon_adr[k]), int(m.tendon_adr[k]) + int(m.tendon_num[k]))
        for w in wraps:
            t, obj = int(m.wrap_type[w]), int(m.wrap_objid[w])
            if t == mj.mjtWrap.mjWRAP_JOINT and int(m.jnt_type[obj]) not in (mj.mjtJoint.mjJNT_HINGE,
                                                                              mj.mjtJoint.mjJNT_SLIDE):
                raise c.refuse(f"{where}: a fixed tendon through the ball / free joint {c.joint_names[obj]!r}")
            if t not in (mj.mjtWrap.mjWRAP_JOINT, mj.mjtWrap.mjWRAP_SITE, mj.mjtWrap.mjWRAP_PULLEY,
                         mj.mjtWrap.mjWRAP_SPHERE, mj.mjtWrap.mjWRAP_CYLINDER):
                raise c.refuse(f"{where}: wrap type {mj.mjtWrap(t).name.split('_', 1)[1].lower()!r} (sites, "
                               f"pulleys, spheres and cylinders only)")
            side = int(round(float(m.wrap_prm[w]))) if t in (mj.mjtWrap.mjWRAP_SPHERE, mj.mjtWrap.mjWRAP_CYLINDER) else -1
            if side >= 0:
                geom = c.element("geom", obj)
                if int(m.site_bodyid[side]) != int(m.geom_bodyid[obj]):
                    raise c.refuse(f"{where}: the sidesite of {geom} is on another body than the geom (a side "
                                   f"site on the geom's body only)")
                s_geom = _pose(m.geom_pos[obj], m.geom_quat[obj]).T[:3, :3] @ (m.site_pos[side] - m.geom_pos[obj])
                if np.linalg.norm(s_geom) < m.geom_size[obj][0]:
                    raise c.refuse(f"{where}: the sidesite of {geom} is inside the geom (MuJoCo's inside wrap "
                                   f"is not supported)")
        for attr in ("armature", "stiffnesspoly", "dampingpoly", "springyield"):
            if hasattr(m, f"tendon_{attr}") and np.any(np.asarray(getattr(m, f"tendon_{attr}")[k]) != 0):
                raise c.refuse(f"{where}: attribute {attr}")
        if hasattr(m, "tendon_actfrclimited") and m.tendon_actfrclimited[k]:
            raise c.refuse(f"{where}: attribute actuatorfrcrange")
    if m.opt.density != 0 or m.opt.viscosity != 0:      # MuJoCo's fluid forces
        for attr, value in (("density", m.opt.density), ("viscosity", m.opt.viscosity), ("wind", m.opt.wind)):
            if not np.all(np.isfinite(value)):
                raise c.refuse(f"<option {attr}=\"{' '.join(str(float(x)) for x in np.ravel(value))}\"> (fluid "
                               f"forces need finite numbers)")
    plugged = np.flatnonzero(np.asarray(m.body_plugin) >= 0)
    if plugged.size:
        raise c.refuse(f"<plugin> on body {c.body_names[int(plugged[0])]!r}")
    rubbing = not int(m.opt.disableflags) & (int(mj.mjtDisableBit.mjDSBL_FRICTIONLOSS)
                                             | int(mj.mjtDisableBit.mjDSBL_CONSTRAINT))
    for j in range(m.njnt):
        t = int(m.jnt_type[j])
        where = f"joint {c.joint_names[j]!r}"
        if t in (mj.mjtJoint.mjJNT_BALL, mj.mjtJoint.mjJNT_FREE) and m.jnt_stiffness[j] != 0:
            raise c.refuse(f"{where}: attribute stiffness on a {('ball', 'free')[t == mj.mjtJoint.mjJNT_FREE]} joint")
        for attr in ("jnt_stiffnesspoly", "jnt_springyield"):
            if hasattr(m, attr) and np.any(np.asarray(getattr(m, attr))[j] != 0):
                raise c.refuse(f"{where}: attribute {attr[4:]}")
        dofs = range(int(m.jnt_dofadr[j]), int(m.jnt_dofadr[j]) + _JOINT_NV[t])
        if t in (mj.mjtJoint.mjJNT_BALL, mj.mjtJoint.mjJNT_FREE):
            if any(m.dof_armature[d] != 0 for d in dofs):
                raise c.refuse(f"{where}: attribute armature on a ball / free joint")
            if rubbing and any(m.dof_frictionloss[d] != 0 for d in dofs):
                raise c.refuse(f"{where}: attribute frictionloss on a ball / free joint")
        if hasattr(m, "dof_dampingpoly") and any(np.any(np.asarray(m.dof_dampingpoly)[d] != 0) for d in dofs):
            raise c.refuse(f"{where}: attribute dampingpoly")
    for a in range(m.nu):
        where = c.element("actuator", a)
        trn = int(m.actuator_trntype[a])
        if trn not in (mj.mjtTrn.mjTRN_JOINT, mj.mjtTrn.mjTRN_TENDON, mj.mjtTrn.mjTRN_SITE):
            raise c.refuse(f"{where}: a {mj.mjtTrn(trn).name.split('_', 1)[1].lower()} transmission (joint, "
                           f"tendon and site transmissions only)")
        j = int(m.actuator_trnid[a, 0])
        if trn == mj.mjtTrn.mjTRN_JOINT and int(m.jnt_type[j]) not in (mj.mjtJoint.mjJNT_HINGE,
                                                                        mj.mjtJoint.mjJNT_SLIDE):
            raise c.refuse(f"{where}: a transmission to the ball / free joint {c.joint_names[j]!r}")
        dyn = int(m.actuator_dyntype[a])
        if dyn not in (mj.mjtDyn.mjDYN_NONE, mj.mjtDyn.mjDYN_INTEGRATOR, mj.mjtDyn.mjDYN_FILTER,
                       mj.mjtDyn.mjDYN_FILTEREXACT, mj.mjtDyn.mjDYN_MUSCLE):
            raise c.refuse(f"{where}: attribute dyntype={mj.mjtDyn(dyn).name.split('_', 1)[1].lower()!r} "
                           f"(activation dynamics none, integrator, filter, filterexact and muscle only)")
        if dyn != mj.mjtDyn.mjDYN_NONE and int(m.actuator_actnum[a]) != 1:
            raise c.refuse(f"{where}: attribute actdim={int(m.actuator_actnum[a])} (one activation per actuator)")
        gaintype, biastype = int(m.actuator_gaintype[a]), int(m.actuator_biastype[a])
        muscle_gain, muscle_bias = gaintype == mj.mjtGain.mjGAIN_MUSCLE, biastype == mj.mjtBias.mjBIAS_MUSCLE
        if gaintype not in (mj.mjtGain.mjGAIN_FIXED, mj.mjtGain.mjGAIN_AFFINE) and not muscle_gain:
            raise c.refuse(f"{where}: attribute gaintype={mj.mjtGain(gaintype).name.split('_', 1)[1].lower()!r}")
        if biastype not in (mj.mjtBias.mjBIAS_NONE, mj.mjtBias.mjBIAS_AFFINE) and not muscle_bias:
            raise c.refuse(f"{where}: attribute biastype={mj.mjtBias(biastype).name.split('_', 1)[1].lower()!r}")
        if muscle_gain != muscle_bias or (muscle_gain
                                          and np.any(m.actuator_gainprm[a, :9] != m.actuator_biasprm[a, :9])):
            raise c.refuse(f"{where}: a muscle gain without the muscle bias of the same parameters (or the bias "
                           f"without the gain)")
        if muscle_gain and trn == mj.mjtTrn.mjTRN_SITE:
            raise c.refuse(f"{where}: a muscle on a site transmission")
        for attr in ("actuator_damping", "actuator_armature", "actuator_delay"):
            if hasattr(m, attr) and np.any(np.asarray(getattr(m, attr))[a] != 0):
                raise c.refuse(f"{where}: attribute {attr[9:]}")
        if m.actuator_plugin[a] >= 0:
            name, config = c.plugins.get(a, ("", {}))
            if name != "mujoco.pid":
                raise c.refuse(f"{where}: the plug-in actuator {name or '(unnamed)'!r} (mujoco.pid only)")
            if dyn != mj.mjtDyn.mjDYN_NONE or m.actuator_actlimited[a] or m.actuator_actearly[a]:
                raise c.refuse(f"{where}: a mujoco.pid actuator with activation dynamics, actrange or actearly")
            if trn not in (mj.mjtTrn.mjTRN_JOINT, mj.mjtTrn.mjTRN_TENDON):
                raise c.refuse(f"{where}: a mujoco.pid actuator on a site transmission")


DISABLE_FLAGS = ("constraint", "equality", "frictionloss", "limit", "contact", "spring", "damper", "gravity",
                 "clampctrl", "actuation")
"""The names :func:`load_mjcf`'s ``disable`` takes: MuJoCo's ``<option><flag NAME="disable"/>``."""


def _compile(path: str | os.PathLike, balance_inertia: bool, disable: tuple[str, ...] = ()):
    mj = mujoco_module()
    src = os.fspath(path)
    p = Path(src)
    if not p.exists():
        raise FileNotFoundError(errno.ENOENT, "MJCF file not found", src)
    try:
        root = next(ET.iterparse(p, events=("start",)))[1].tag
    except (ET.ParseError, StopIteration):
        root = "mujoco"     # MuJoCo's compiler reports the XML error with its line
    except LookupError as exc:
        raise ModelError(f"{src}: unknown XML encoding ({exc})") from None
    except (UnicodeError, ValueError) as exc:
        raise ModelError(f"{src}: cannot decode the MJCF file ({exc})") from None
    except OSError as exc:
        raise ModelError(f"{src}: cannot read the MJCF file: {exc.strerror or exc}") from None
    if root != "mujoco":
        raise ModelError(f"{src}: not an MJCF file: the root element is <{root}>, expected <mujoco>")
    try:
        spec = mj.MjSpec.from_file(str(p))
        if balance_inertia:
            spec.compiler.balanceinertia = True
        for name in disable:
            spec.option.disableflags |= int(getattr(mj.mjtDisableBit, f"mjDSBL_{name.upper()}"))
        m = spec.compile()
        instances = {p.name: p.plugin_name for p in spec.plugins if p.name}
        plugins = {a: _plugin_config(m, a, act.plugin.plugin_name or instances.get(act.plugin.name, ""))
                   for a, act in enumerate(spec.actuators) if m.actuator_plugin[a] >= 0}
    except (ValueError, RuntimeError) as exc:
        text = " ".join(str(exc).split())
        if "Error opening file" in text:
            missing = text.split("Error opening file", 1)[1].split("'")[1] if "'" in text else text
            raise FileNotFoundError(errno.ENOENT, f"{src}: MuJoCo's compiler: {text}", missing) from None
        hint = ("; load with balance_inertia=True (pbf simulate --balance-inertia, or <compiler "
                "balanceinertia=\"true\">) to set its principal moments to their mean") if "A + B >= C" in text else ""
        raise ModelError(f"{src}: MuJoCo's compiler: {text}{hint}") from None
    try:
        bytes(m.names).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelError(f"{src}: a name in the file is not UTF-8 text ({exc.reason} at byte {exc.start} of the "
                         f"model's names)") from None
    return mj, m, src, plugins


_PLUGIN_ATTRIBUTES = {"mujoco.pid": ("kp", "ki", "kd", "imax", "slewmax")}
"""The attributes of the plug-ins the loader reads, in the order the plug-in registers them (the order of
their values in the compiled model's ``plugin_attr``)."""


def _plugin_config(m, a: int, name: str) -> tuple[str, dict[str, str]]:
    """``(plug-in name, {attribute: value text})`` of plug-in actuator ``a``, from the compiled model's packed
    ``plugin_attr`` of its instance (empty text: not given)."""
    i = int(m.actuator_plugin[a])
    start = int(m.plugin_attradr[i])
    stop = int(m.plugin_attradr[i + 1]) if i + 1 < m.nplugin else len(m.plugin_attr)
    values = bytes(np.asarray(m.plugin_attr[start:stop], np.uint8)).decode("utf-8", "replace").split("\0")
    return name, dict(zip(_PLUGIN_ATTRIBUTES.get(name, ()), values))


def load_mjcf(path: str | os.PathLike, *, limits: bool = True, balance_inertia: bool = False,
              quaternions: bool = True, equality: str = "soft", disable: Iterable[str] = ()) -> ArticulatedBody:
    """Load an MJCF (MuJoCo XML) file, compiled by MuJoCo, as an :class:`~pbframework.model.ArticulatedBody`.

    Args:
        path: the ``.xml`` file (includes, meshes and assets resolve as MuJoCo resolves them).
        limits: where a hinge or slide is limited, give the model the ``joint_limits`` force in
            ``model.default_forces``; ``False`` keeps the limits as data only.
        balance_inertia: compile with MuJoCo's ``balanceinertia`` (principal moments that break the triangle
            inequality set to their mean), as ``<compiler balanceinertia="true">`` does.
        quaternions: MJCF ``ball`` and ``free`` joints as pbframework's ``ball`` and ``free`` (unit quaternions);
            ``False``: as the Euler-angle joints ``spherical`` and ``floating``.
        equality: what to do with ``<equality>`` constraints (joint couplings, ``connect`` loop closures,
            ``weld``): ``"soft"`` (default) adds them as the ``soft_equality`` force -- a damped spring on each
            violation with MuJoCo's static sag from its ``solref`` / ``solimp``, as MuJoCo solves them softly,
            though not to the digit (:mod:`pbframework.plugins.forces.equality`); ``"disable"`` loads the model without them --
            MuJoCo's own ``<flag equality="disable"/>`` -- and names them in an :class:`EqualityDisabled`
            warning; ``"error"`` refuses the file. Equalities inactive at the start (``active="false"``) and a
            file whose flags disable them are left out either way.
        disable: MuJoCo flags to disable as if the file said ``<option><flag NAME="disable"/></option>``
            (:data:`DISABLE_FLAGS`), e.g. ``("constraint",)`` to load a model the way MuJoCo runs it without
            constraints: no ``joint_limits``, no ``joint_friction`` (frictionloss), equality constraints inert.

    Returns:
        The model, named after ``<mujoco model>``, with MuJoCo's gravity, its passive forces and actuators in
        ``model.default_forces`` and its static planes and boxes in ``model.obstacles`` (module docstring).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ModelError: MuJoCo's compiler rejects the file (its message, after the file name), or the file uses an
            element the mapping does not support (named, with the attribute).
    """
    if isinstance(disable, str) or not all(isinstance(x, str) and x in DISABLE_FLAGS for x in disable):
        raise ModelError(f"load_mjcf: disable must be a list of MuJoCo flag names ({', '.join(DISABLE_FLAGS)}), "
                         f"got {disable!r}")
    mj, m, src, plugins = _compile(path, balance_inertia, tuple(disable))
    if equality not in ("soft", "disable", "error"):
        raise ModelError(f"load_mjcf: equality must be 'soft', 'disable' or 'error', got {equality!r}")
    c = _Compiled(mj, m, src, plugins)
    _check_supported(c, equality)
    disabled = int(m.opt.disableflags)
    off = lambda flag: bool(disabled & int(flag))  # noqa: E731
    links: list[Link] = []
    joints: list[Joint] = []
    # X[b]: the MuJoCo body frame of body b in the frame of the pbframework link that carries it; link_of[b]
    # that link's name (WORLD for static bodies, with X the body's world pose).
    X: dict[int, np.ndarray] = {0: np.eye(4)}
    link_of: dict[int, str] = {0: WORLD}
    geoms_unsupported: list[str] = []
    obstacles = []
    gravcomp: dict[str, float] = {}
    fluid_axes: dict[str, np.ndarray] = {}   # moving link -> its principal axes of inertia (MuJoCo's iquat)
    fluid_ellipsoids: dict[str, list] = {}   # moving link -> its geoms' ellipsoids (fluidshape="ellipsoid")
    dof_coord: dict[int, str] = {}    # MuJoCo dof (hinge / slide) -> pbframework coordinate name
    _static_geoms(c, 0, np.eye(4), obstacles, geoms_unsupported)
    for b in range(1, m.nbody):
        parent = int(m.body_parentid[b])
        name = c.body_names[b]
        T_off = X[parent] @ _pose(m.body_pos[b], m.body_quat[b])   # body frame before its joints
        if m.body_weldid[b] == 0:                                   # static: welded to the world
            X[b], link_of[b] = T_off, WORLD
            if m.body_mocapid[b] >= 0:     # moved by the user in MuJoCo: not a fixed obstacle here
                geoms_unsupported += [f"{_geom_label(c, g)} (a mocap body)" for g in _geoms(m, b) if _colliding(m, g)]
            else:
                _static_geoms(c, b, T_off, obstacles, geoms_unsupported)
            continue
        parent_link = link_of[parent]
        jadr, jnum = int(m.body_jntadr[b]), int(m.body_jntnum[b])
        if jnum == 0:
            joints.append(Joint(f"{name}_weld", JointType.FIXED, parent_link, name, origin=T_off))
            T_off = np.eye(4)
        for k in range(jnum):
            j = jadr + k
            t = int(m.jnt_type[j])
            jname = c.joint_names[j]
            child = name if k == jnum - 1 else f"{name}/{jname}"
            axis, pos = np.array(m.jnt_axis[j], float), np.array(m.jnt_pos[j], float)
            qadr = int(m.jnt_qposadr[j])
            ref = float(m.qpos0[qadr]) if t in (mj.mjtJoint.mjJNT_HINGE, mj.mjtJoint.mjJNT_SLIDE) else 0.0
            lower, upper = -np.inf, np.inf
            if m.jnt_limited[j] and t in (mj.mjtJoint.mjJNT_HINGE, mj.mjtJoint.mjJNT_SLIDE):
                lo, hi = (float(v) for v in m.jnt_range[j])
                if lo < hi:
                    lower, upper = lo, hi
            effort = float(np.abs(m.jnt_actfrcrange[j]).max()) if m.jnt_actfrclimited[j] else np.inf
            dof = int(m.jnt_dofadr[j])
            if t == mj.mjtJoint.mjJNT_FREE:
                if parent_link != WORLD or k != 0:
                    raise ModelError(f"{src}: joint {jname!r} of body {name!r}: a free joint must be the only joint "
                                     f"of a body welded to the world")
                jt, origin, Xb = (JointType.FREE if quaternions else JointType.FLOATING), np.eye(4), np.eye(4)
            elif t == mj.mjtJoint.mjJNT_BALL:
                jt, origin, Xb = (JointType.BALL if quaternions else JointType.SPHERICAL), \
                    T_off @ _translation(pos), _translation(-pos)
            elif t == mj.mjtJoint.mjJNT_HINGE:
                jt, origin, Xb = JointType.REVOLUTE, T_off @ _translation(pos) @ _axis_rotation(axis, -ref), \
                    _translation(-pos)
            else:
                jt, origin, Xb = JointType.PRISMATIC, T_off @ _translation(-ref * axis / np.linalg.norm(axis)), \
                    np.eye(4)
            if k < jnum - 1:
                links.append(Link(child, 0.0, inertia=np.zeros(3)))
            try:
                joints.append(Joint(jname, jt, parent_link, child, origin=origin,
                                    axis=axis if jt in (JointType.REVOLUTE, JointType.PRISMATIC) else (0, 0, 1),
                                    lower=lower, upper=upper, effort=effort,
                                    armature=float(m.dof_armature[dof]) if t >= 2 else 0.0))
            except ModelError as exc:
                raise ModelError(f"{src}: {exc}") from None
            if t >= 2:
                dof_coord[dof] = jname
            parent_link, T_off = child, Xb
        X[b] = T_off
        link_of[b] = name
        ipose = X[b] @ _pose(m.body_ipos[b], m.body_iquat[b])
        R = ipose[:3, :3]
        try:
            links.append(Link(name, float(m.body_mass[b]), com=ipose[:3, 3],
                              inertia=R @ np.diag(m.body_inertia[b]) @ R.T,
                              shapes=tuple(_body_shapes(c, b, X[b], geoms_unsupported))))
        except ModelError as exc:
            raise ModelError(f"{src}: body {name!r}: {exc}") from None
        if m.body_gravcomp[b] != 0 and not off(mj.mjtDisableBit.mjDSBL_GRAVITY):
            gravcomp[name] = float(m.body_gravcomp[b])
        if m.body_mass[b] >= 1e-15:      # MuJoCo's fluid forces skip lighter bodies
            fluid_axes[name] = R
            if any(m.geom_fluid[g, 0] > 0 for g in _geoms(m, b)):      # the ellipsoid model, geom by geom
                fluid_ellipsoids[name] = [{"frame": (X[b] @ _pose(m.geom_pos[g], m.geom_quat[g])).tolist(),
                                           "semiaxes": _semiaxes(mj, int(m.geom_type[g]), m.geom_size[g]),
                                           "coefficients": [float(x) for x in m.geom_fluid[g]]}
                                          for g in _geoms(m, b) if m.geom_fluid[g, 0] != 0]
    if not links:
        raise ModelError(f"{src}: no moving body (every body is welded to the world)")
    if geoms_unsupported:
        warnings.warn(f"{src}: {len(geoms_unsupported)} colliding geom(s) are not contact shapes here (load_mjcf "
                      f"keeps spheres, boxes and capsules on moving bodies, planes and boxes on the world): "
                      f"{', '.join(geoms_unsupported[:8])}{' ...' if len(geoms_unsupported) > 8 else ''}",
                      UnsupportedGeoms, stacklevel=2)
    gravity = np.zeros(3) if off(mj.mjtDisableBit.mjDSBL_GRAVITY) else np.array(m.opt.gravity, float)
    limits = limits and not off(mj.mjtDisableBit.mjDSBL_LIMIT) and not off(mj.mjtDisableBit.mjDSBL_CONSTRAINT)
    forces: list[tuple[str, dict[str, Any]]] = list(limit_forces(joints, limits))
    forces += _passive_forces(c, dof_coord, gravcomp, off, quaternions)
    if (m.opt.density != 0 or m.opt.viscosity != 0) and fluid_axes and not (
            off(mj.mjtDisableBit.mjDSBL_SPRING) and off(mj.mjtDisableBit.mjDSBL_DAMPER)):
        # MuJoCo's terms act where density / viscosity > 0; it skips all passive forces when springs and
        # dampers are both disabled
        forces.append(("fluid_drag", {"density": max(float(m.opt.density), 0.0),
                                      "viscosity": max(float(m.opt.viscosity), 0.0),
                                      "wind": [float(x) for x in m.opt.wind], "links": list(fluid_axes),
                                      "axes": {k: A.tolist() for k, A in fluid_axes.items()},
                                      "ellipsoids": fluid_ellipsoids}))
    forces += _tendon_passive(c, dof_coord, X, link_of, off)
    limited = [k for k in range(m.ntendon) if m.tendon_limited[k]]
    if limited and limits:
        forces.append(("tendon_limits", {"tendons": [
            {**_tendon_spec(c, k, dof_coord, X, link_of), "lower": float(m.tendon_range[k][0]),
             "upper": float(m.tendon_range[k][1])} for k in limited]}))
    if m.nu and not off(mj.mjtDisableBit.mjDSBL_ACTUATION):
        forces.append(("mj_actuators", _actuator_params(c, dof_coord, off, gravcomp, X, link_of)))
    if equality == "soft" and not off(mj.mjtDisableBit.mjDSBL_EQUALITY) and not off(mj.mjtDisableBit.mjDSBL_CONSTRAINT):
        eqs = _equality_params(c, X, link_of, dof_coord)
        if eqs:
            forces.append(("soft_equality", {"constraints": eqs}))
    name = m.names[:m.names.index(b"\0")].decode() if m.names else ""
    name = "" if name == "MuJoCo Model" else name       # MuJoCo's default when <mujoco> has no model
    try:
        model = ArticulatedBody(links, joints, gravity=gravity, name=name or Path(src).stem,
                                default_forces=forces)
    except ModelError as exc:
        raise ModelError(f"{src}: {exc}") from None
    from ..checks import check_mass_matrix

    check_mass_matrix(model, src)
    model.display = _display(c, X, link_of, model)
    model.obstacles = tuple(obstacles)
    model.mujoco_joints = tuple((c.joint_names[j], int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j]))
                                for j in range(m.njnt))
    model.mujoco_sizes = (int(m.nq), int(m.nv))
    model.mujoco_quaternions = bool(quaternions)
    return model


def _mujoco_map(model: ArticulatedBody) -> tuple:
    if not hasattr(model, "mujoco_joints"):
        raise ModelError(f"model {model.name!r} was not loaded by load_mjcf: no MuJoCo coordinates to convert to")
    if not model.mujoco_quaternions:
        raise ModelError(f"model {model.name!r}: loaded with quaternions=False (Euler angles); the MuJoCo "
                         f"conversions take the quaternion joints of the default load")
    return model.mujoco_joints


def _rotation_xyzw(quat) -> np.ndarray:
    x, y, z, w = quat
    return _quat_matrix(np.array([w, x, y, z]))


def to_mujoco(model: ArticulatedBody, q, v=None) -> tuple[np.ndarray, np.ndarray | None]:
    """MuJoCo's ``(qpos, qvel)`` of the state ``(q, v)`` of a model from :func:`load_mjcf`.

    Coordinates are matched by joint name (pbframework orders joints breadth-first, MuJoCo depth-first);
    quaternions go from ``(x, y, z, w)`` to ``(w, x, y, z)``; a free joint's linear velocity from the body
    frame to the world frame (``v_mj = R v``)."""
    joints = _mujoco_map(model)
    q = model.check_state(q)
    v = None if v is None else model.check_velocity(v)
    nq, nv = model.mujoco_sizes
    qpos, qvel = np.zeros(nq), np.zeros(nv)
    for name, t, qa, da in joints:
        qs, vs = model.joint_q_index[name], model.joint_v_index[name]
        qj = q[qs]
        if t == 0:
            qpos[qa:qa + 7] = np.r_[qj[:3], qj[6], qj[3:6]]
        elif t == 1:
            qpos[qa:qa + 4] = np.r_[qj[3], qj[:3]]
        else:
            qpos[qa] = qj[0]
        if v is not None:
            vj = v[vs]
            qvel[da:da + len(vj)] = np.r_[_rotation_xyzw(qj[3:7]) @ vj[:3], vj[3:]] if t == 0 else vj
    return qpos, (None if v is None else qvel)


def from_mujoco(model: ArticulatedBody, qpos, qvel=None) -> tuple[np.ndarray, np.ndarray | None]:
    """The state ``(q, v)`` of a model from :func:`load_mjcf` given MuJoCo's ``(qpos, qvel)`` (the inverse of
    :func:`to_mujoco`)."""
    nq, nv = model.mujoco_sizes
    qpos = np.asarray(qpos, float).reshape(-1)
    if qpos.size != nq or (qvel is not None and np.asarray(qvel).size != nv):
        raise ModelError(f"model {model.name!r}: MuJoCo's qpos has {nq} entries and qvel {nv}")
    q, v = np.zeros(model.nq), np.zeros(model.nv)
    for name, t, qa, da in _mujoco_map(model):
        qs, vs = model.joint_q_index[name], model.joint_v_index[name]
        if t == 0:
            q[qs] = np.r_[qpos[qa:qa + 3], qpos[qa + 4:qa + 7], qpos[qa + 3]]
        elif t == 1:
            q[qs] = np.r_[qpos[qa + 1:qa + 4], qpos[qa]]
        else:
            q[qs] = qpos[qa]
        if qvel is not None:
            n = vs.stop - vs.start
            vj = np.asarray(qvel, float).reshape(-1)[da:da + n]
            v[vs] = np.r_[_rotation_xyzw(q[qs][3:7]).T @ vj[:3], vj[3:]] if t == 0 else vj
    return q, (None if qvel is None else v)


def _geom_label(c: _Compiled, g: int) -> str:
    name = c.m.geom(g).name
    kind = c.mj.mjtGeom(int(c.m.geom_type[g])).name.split('_', 1)[1].lower()
    return f"{kind} {name!r} of body {c.body_names[int(c.m.geom_bodyid[g])]!r}" if name else \
        f"{kind} number {g} of body {c.body_names[int(c.m.geom_bodyid[g])]!r}"


def _semiaxes(mj, kind: int, size) -> list[float]:
    """MuJoCo's ``mju_geomSemiAxes``: the semi-axes of a geom's equivalent ellipsoid for the fluid model."""
    s = [float(x) for x in size]
    if kind == mj.mjtGeom.mjGEOM_SPHERE:
        return [s[0]] * 3
    if kind == mj.mjtGeom.mjGEOM_CAPSULE:
        return [s[0], s[0], s[1] + s[0]]
    if kind == mj.mjtGeom.mjGEOM_CYLINDER:
        return [s[0], s[0], s[1]]
    return s


def _geoms(m, b: int) -> range:
    return range(int(m.body_geomadr[b]), int(m.body_geomadr[b]) + int(m.body_geomnum[b]))


def _colliding(m, g: int) -> bool:
    return bool(m.geom_contype[g] or m.geom_conaffinity[g])


def _body_shapes(c: _Compiled, b: int, Xb: np.ndarray, unsupported: list[str]) -> list[Shape]:
    m, mj = c.m, c.mj
    out = []
    for g in range(int(m.body_geomadr[b]), int(m.body_geomadr[b]) + int(m.body_geomnum[b])):
        if not _colliding(m, g):
            continue
        t = int(m.geom_type[g])
        size = np.array(m.geom_size[g], float)
        kind = {int(mj.mjtGeom.mjGEOM_SPHERE): ("sphere", size[:1]), int(mj.mjtGeom.mjGEOM_BOX): ("box", size[:3]),
                int(mj.mjtGeom.mjGEOM_CAPSULE): ("capsule", size[:2])}.get(t)
        if kind is None:
            unsupported.append(_geom_label(c, g))
            continue
        out.append(Shape(kind[0], kind[1], Xb @ _pose(m.geom_pos[g], m.geom_quat[g]), m.geom(g).name))
    return out


def _static_geoms(c: _Compiled, b: int, Tb: np.ndarray, obstacles: list, unsupported: list[str]) -> None:
    from ..geometry import Box, Plane

    m, mj = c.m, c.mj
    for g in range(int(m.body_geomadr[b]), int(m.body_geomadr[b]) + int(m.body_geomnum[b])):
        if not _colliding(m, g):
            continue
        T = Tb @ _pose(m.geom_pos[g], m.geom_quat[g])
        t = int(m.geom_type[g])
        if t == mj.mjtGeom.mjGEOM_PLANE:
            n = T[:3, 2]
            obstacles.append(Plane(n, float(n @ T[:3, 3])))
        elif t == mj.mjtGeom.mjGEOM_BOX:
            obstacles.append(Box(T[:3, 3], m.geom_size[g][:3], T[:3, :3]))
        else:
            unsupported.append(_geom_label(c, g))


def mujoco_velocity_map(model: ArticulatedBody, q) -> np.ndarray:
    """``T`` (``nv x nv``) with MuJoCo's ``qvel = T v`` at configuration ``q`` (a model from :func:`load_mjcf`):
    a permutation, with ``R`` on a free joint's linear block. Generalised forces map by its transpose
    (``tau = T^T qfrc``) and the mass matrix as ``M = T^T M_mj T``."""
    q = model.check_state(q)
    T = np.zeros((model.nv, model.nv))
    for name, t, qa, da in _mujoco_map(model):
        vs = model.joint_v_index[name]
        n = vs.stop - vs.start
        block = np.eye(n)
        if t == 0:
            block[:3, :3] = _rotation_xyzw(q[model.joint_q_index[name]][3:7])
        T[da:da + n, vs] = block
    return T


def actuator_force(model: ArticulatedBody, ctrl=None):
    """The ``mj_actuators`` force of a model from :func:`load_mjcf` driven by ``ctrl`` (MuJoCo's ``data.ctrl``):
    ``None`` (zeros), ``nu`` numbers, or a Python callable ``ctrl(t, q, qd) -> nu numbers`` evaluated at the
    start of every step (held over the step, as ``mj_step`` holds ``data.ctrl``). Pass it among a Simulator's
    ``forces``; it replaces the model's default (zero-control) actuators::

        sim = pbf.Simulator(model, "rk4", dt=5e-4, forces=["gravity", actuator_force(model, policy)])
    """
    from ..forces import force_model

    params = dict(model.default_forces).get("mj_actuators")
    if params is None:
        raise ModelError(f"model {model.name!r} has no MuJoCo actuators (no mj_actuators in its default forces)")
    return force_model("mj_actuators", **{**params, "ctrl": ctrl})


def _display(c: _Compiled, X: dict[int, np.ndarray], link_of: dict[int, str], model: ArticulatedBody):
    """The geoms MuJoCo shows by default (groups 0-2) as :class:`~pbframework.display.Display` visuals in their
    links' frames (static bodies' in the world's): primitives, ellipsoids and meshes as MuJoCo compiled them,
    with MuJoCo's colours. Planes are drawn by the viewer's ground, not here."""
    from ..display import Display, Visual, VisualType

    m, mj = c.m, c.mj
    links: dict[str, list] = {}
    world: list = []
    sphere = None
    for g in range(m.ngeom):
        if int(m.geom_group[g]) > 2:
            continue
        b = int(m.geom_bodyid[g])
        t = int(m.geom_type[g])
        pose = X[b] @ _pose(m.geom_pos[g], m.geom_quat[g])
        size = np.array(m.geom_size[g], float)
        mat = int(m.geom_matid[g])
        rgba = tuple(float(x) for x in (m.mat_rgba[mat] if mat >= 0 else m.geom_rgba[g]))
        if rgba[3] == 0:
            continue
        name = m.geom(g).name
        kind = {int(mj.mjtGeom.mjGEOM_SPHERE): (VisualType.SPHERE, size[:1]),
                int(mj.mjtGeom.mjGEOM_CAPSULE): (VisualType.CAPSULE, size[:2]),
                int(mj.mjtGeom.mjGEOM_CYLINDER): (VisualType.CYLINDER, size[:2]),
                int(mj.mjtGeom.mjGEOM_BOX): (VisualType.BOX, size[:3])}.get(t)
        if kind is not None:
            v = Visual(kind[0], pose, tuple(kind[1]), color=rgba, name=name)
        elif t == mj.mjtGeom.mjGEOM_ELLIPSOID:
            if sphere is None:
                from ..display import visual_mesh
                sphere = visual_mesh(Visual(VisualType.SPHERE, np.eye(4), (1.0,)))
            v = Visual(VisualType.MESH, pose, scale=tuple(size[:3]), color=rgba, name=name, triangles=sphere)
        elif t == mj.mjtGeom.mjGEOM_MESH:
            k = int(m.geom_dataid[g])
            va, vn = int(m.mesh_vertadr[k]), int(m.mesh_vertnum[k])
            fa, fn = int(m.mesh_faceadr[k]), int(m.mesh_facenum[k])
            tri = (np.array(m.mesh_vert[va:va + vn], float), np.array(m.mesh_face[fa:fa + fn], np.int64))
            v = Visual(VisualType.MESH, pose, color=rgba, name=name, triangles=tri)
        else:
            continue
        (world if link_of[b] == WORLD else links.setdefault(link_of[b], [])).append(v)
    return Display({x.name: tuple(links.get(x.name, ())) for x in model.links}, world=tuple(world), source="mjcf")


