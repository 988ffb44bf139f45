"""The force specs of a compiled MuJoCo model, the second stage of :func:`pbframework.io.mjcf.load_mjcf`: passive
forces (damping, springs, gravity compensation, joint and tendon friction), tendons, actuators with their
transmissions, and equality constraints, each a plain-data ``(name, params)`` of a force-model plug-in. The
loader calls these after mapping bodies and joints; ``c`` is its compiled model (``c.m`` the ``MjModel``,
``c.mj`` the ``mujoco`` module, ``c.refuse`` the one-line refusal naming the element and the file).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .mjcf_frames import _pose, _translation

if TYPE_CHECKING:
    from .mjcf import _Compiled

_JOINT_NV = {0: 6, 1: 3, 2: 1, 3: 1}
"""Velocity coordinates of MuJoCo's joint types (free, ball, slide, hinge)."""


def _passive_forces(c: _Compiled, dof_coord: dict[int, str], gravcomp: dict[str, float], off,
                    quaternions: bool) -> list:
    """``joint_damping``, ``joint_stiffness``, ``gravity_compensation``, ``joint_friction`` specs. Gravity
    compensation on the joints that say ``actuatorgravcomp`` is ``mj_actuators``' (MuJoCo's
    ``qfrc_actuator``), not passive."""
    m, mj = c.m, c.mj
    out: list[tuple[str, dict[str, Any]]] = []
    if not off(mj.mjtDisableBit.mjDSBL_DAMPER):
        names, values = [], []
        for j in range(m.njnt):
            dofs = range(int(m.jnt_dofadr[j]), int(m.jnt_dofadr[j]) + _JOINT_NV[int(m.jnt_type[j])])
            d = [float(m.dof_damping[x]) for x in dofs]
            if not any(d):
                continue
            if int(m.jnt_type[j]) <= 1 and (len(set(d)) > 1 or not quaternions):
                # a free joint's linear velocity is in the world frame in MuJoCo, in the body frame here:
                # equal damping on the three is the same force in both frames; Euler rates are not velocities
                raise c.refuse(f"joint {c.joint_names[j]!r}: attribute damping on a "
                               f"{('free', 'ball')[int(m.jnt_type[j])]} joint "
                               f"{'with different values per dof' if quaternions else 'with quaternions=False'}")
            names.append(c.joint_names[j])
            values.extend(d)
        if names:
            out.append(("joint_damping", {"damping": values, "dofs": names}))
    if not off(mj.mjtDisableBit.mjDSBL_SPRING):
        sprung = [j for j in range(m.njnt) if m.jnt_stiffness[j] != 0]
        if sprung:
            out.append(("joint_stiffness", {
                "stiffness": [float(m.jnt_stiffness[j]) for j in sprung],
                "springref": [float(m.qpos_spring[int(m.jnt_qposadr[j])]) for j in sprung],
                "dofs": [c.joint_names[j] for j in sprung]}))
    passive_joints = [c.joint_names[j] for j in range(m.njnt) if not m.jnt_actgravcomp[j]]
    if gravcomp and passive_joints:
        out.append(("gravity_compensation", {"links": gravcomp} if len(passive_joints) == m.njnt else
                    {"links": gravcomp, "joints": passive_joints}))
    if not off(mj.mjtDisableBit.mjDSBL_FRICTIONLOSS) and not off(mj.mjtDisableBit.mjDSBL_CONSTRAINT):
        rubbed = [d for d in range(m.nv) if m.dof_frictionloss[d] != 0]
        if rubbed:
            out.append(("joint_friction", {"friction": [float(m.dof_frictionloss[d]) for d in rubbed],
                                           "dofs": [dof_coord[d] for d in rubbed]}))
    return out


def _tendon_passive(c: _Compiled, dof_coord: dict[int, str], X: dict[int, np.ndarray], link_of: dict[int, str],
                    off) -> list:
    """The ``tendon_passive`` spec: MuJoCo's tendon springs (``stiffness`` about ``springlength``, a deadband
    ``[low, high]``) and dampers (``damping``), as ``mj_passive`` applies them; ``tendon_friction`` from
    ``frictionloss`` (a smooth stand-in for MuJoCo's friction constraint, as ``joint_friction``)."""
    m, mj = c.m, c.mj
    k_on, d_on = not off(mj.mjtDisableBit.mjDSBL_SPRING), not off(mj.mjtDisableBit.mjDSBL_DAMPER)
    out = []
    for k in range(m.ntendon):
        stiffness = float(m.tendon_stiffness[k]) if k_on else 0.0
        damping = float(m.tendon_damping[k]) if d_on else 0.0
        if stiffness or damping:
            out.append({**_tendon_spec(c, k, dof_coord, X, link_of), "stiffness": stiffness, "damping": damping,
                        "springlength": [float(v) for v in m.tendon_lengthspring[k]]})
    rubbed = [] if off(mj.mjtDisableBit.mjDSBL_FRICTIONLOSS) or off(mj.mjtDisableBit.mjDSBL_CONSTRAINT) else \
        [{**_tendon_spec(c, k, dof_coord, X, link_of), "friction": float(m.tendon_frictionloss[k])}
         for k in range(m.ntendon) if m.tendon_frictionloss[k] != 0]
    return ([("tendon_passive", {"tendons": out})] if out else []) + \
        ([("tendon_friction", {"tendons": rubbed})] if rubbed else [])


def _actuator_params(c: _Compiled, dof_coord: dict[int, str], off, gravcomp: dict[str, float],
                     X: dict[int, np.ndarray], link_of: dict[int, str]) -> dict[str, Any]:
    """The ``mj_actuators`` parameters of the compiled model's actuators (and of the gravity compensation on
    joints that say ``actuatorgravcomp``, which MuJoCo adds to ``qfrc_actuator``)."""
    m, mj = c.m, c.mj
    acts = []
    clamp_ctrl = not off(mj.mjtDisableBit.mjDSBL_CLAMPCTRL)
    for a in range(m.nu):
        j = int(m.actuator_trnid[a, 0])
        trn = int(m.actuator_trntype[a])
        if trn == mj.mjtTrn.mjTRN_SITE:         # gear: a wrench
            ref, gear = int(m.actuator_trnid[a, 1]), np.array(m.actuator_gear[a], float)
            # MuJoCo 4 (measured): a position servo on a rotation relative to a reference site takes its error
            # c - L modulo 2 pi |gear[3:6]|
            servo = (int(m.actuator_gaintype[a]) == mj.mjtGain.mjGAIN_FIXED
                     and int(m.actuator_biastype[a]) == mj.mjtBias.mjBIAS_AFFINE
                     and m.actuator_biasprm[a, 1] == -m.actuator_gainprm[a, 0] != 0)
            wrap = 2 * math.pi * float(np.linalg.norm(gear[3:])) if (ref >= 0 and servo and not gear[:3].any()
                                                                     and gear[3:].any()) else None
            transmission = {"site": _site_frame(m, j, X, link_of),
                            "refsite": None if ref < 0 else _site_frame(m, ref, X, link_of),
                            "wrap": wrap, "gear": gear.tolist()}
        elif trn == mj.mjtTrn.mjTRN_JOINT:
            transmission = {"joints": {dof_coord[int(m.jnt_dofadr[j])]: 1.0}, "gear": float(m.actuator_gear[a, 0])}
        else:                                   # a tendon: fixed (sum coef q) or spatial (a path)
            spec = _tendon_spec(c, j, dof_coord, X, link_of)
            transmission = {k: v for k, v in spec.items() if k != "name"}
            transmission["gear"] = float(m.actuator_gear[a, 0])
        if m.actuator_plugin[a] >= 0:            # mujoco.pid (the loader refuses other plug-ins)
            drive: dict[str, Any] = {"pid": _pid_gains(c, a)}
        elif int(m.actuator_gaintype[a]) == mj.mjtGain.mjGAIN_MUSCLE:    # with the muscle bias (loader's check)
            prm = [float(x) for x in m.actuator_gainprm[a, :9]]
            force = prm[2] if prm[2] >= 0 else prm[3] / max(1e-15, float(m.actuator_acc0[a]))  # mju_muscleGain
            drive = {"muscle": {"range": prm[0:2], "force": force, "lmin": prm[4], "lmax": prm[5], "vmax": prm[6],
                                "fpmax": prm[7], "fvmax": prm[8],
                                "lengthrange": [float(x) for x in m.actuator_lengthrange[a]]}}
        else:
            gain = np.zeros(3)
            gain[0] = m.actuator_gainprm[a, 0]
            if int(m.actuator_gaintype[a]) == mj.mjtGain.mjGAIN_AFFINE:
                gain[1:] = m.actuator_gainprm[a, 1:3]
            bias = np.zeros(3) if int(m.actuator_biastype[a]) == mj.mjtBias.mjBIAS_NONE else \
                np.array(m.actuator_biasprm[a, :3], float)
            drive = {"gain": gain.tolist(), "bias": bias.tolist()}
        dyn = int(m.actuator_dyntype[a])
        if dyn != mj.mjtDyn.mjDYN_NONE:
            drive["dynamics"] = {
                "type": mj.mjtDyn(dyn).name.split("_", 1)[1].lower(),
                "tau": ([float(x) for x in m.actuator_dynprm[a, :3]] if dyn == mj.mjtDyn.mjDYN_MUSCLE
                        else float(m.actuator_dynprm[a, 0])),
                "actrange": [float(v) for v in m.actuator_actrange[a]] if m.actuator_actlimited[a] else None,
                "actearly": bool(m.actuator_actearly[a])}
        acts.append({
            "name": m.actuator(a).name or f"actuator{a}",
            **transmission,
            **drive,
            # the PID plug-in clamps its control to ctrlrange whatever clampctrl says (measured, MuJoCo 4.0.0)
            "ctrlrange": [float(v) for v in m.actuator_ctrlrange[a]]
            if m.actuator_ctrllimited[a] and (clamp_ctrl or m.actuator_plugin[a] >= 0) else None,
            "forcerange": [float(v) for v in m.actuator_forcerange[a]] if m.actuator_forcelimited[a] else None})
    joint_range = {c.joint_names[j]: [float(v) for v in m.jnt_actfrcrange[j]]
                   for j in range(m.njnt) if m.jnt_actfrclimited[j] and m.jnt_type[j] >= 2}
    own = [c.joint_names[j] for j in range(m.njnt) if m.jnt_actgravcomp[j]]
    return {"actuators": acts, "joint_force_range": joint_range,
            "gravcomp": {"links": gravcomp, "joints": own} if gravcomp and own else None}


def _pid_gains(c: _Compiled, a: int) -> dict[str, Any]:
    """The gains of ``mujoco.pid`` actuator ``a`` from its ``<config>``: ``kp``, ``ki``, ``kd`` (default 0),
    ``imax`` and ``slewmax`` (None where not given), as the plug-in reads them."""
    config = c.plugins[a][1]

    def value(key: str, default):
        text = config.get(key, "")
        if text == "":
            return default
        try:
            return float(text)
        except ValueError:
            raise c.refuse(f"{c.element('actuator', a)}: mujoco.pid config {key}={text!r} (not a number)") from None

    return {"kp": value("kp", 0.0), "ki": value("ki", 0.0), "kd": value("kd", 0.0), "imax": value("imax", None),
            "slewmax": value("slewmax", None)}


def _site_frame(m, k: int, X: dict[int, np.ndarray], link_of: dict[int, str]) -> dict[str, Any]:
    """Site ``k`` as ``{"link": the link that carries it, "frame": its 4 x 4 pose in that link's frame}``."""
    b = int(m.site_bodyid[k])
    return {"link": link_of[b], "frame": (X[b] @ _pose(m.site_pos[k], m.site_quat[k])).tolist()}


def _equality_params(c: _Compiled, X: dict[int, np.ndarray], link_of: dict[int, str],
                     dof_coord: dict[int, str]) -> list[dict[str, Any]]:
    """The ``soft_equality`` constraints of the compiled model's active equalities, in MuJoCo's terms
    (``mj_instantiateEquality``): anchors and orientations as frames in the links' (or the world's) frames."""
    m, mj = c.m, c.mj
    out = []
    for e in range(m.neq):
        if not m.eq_active0[e]:
            continue
        t, data = int(m.eq_type[e]), np.array(m.eq_data[e], float)
        common = {"name": m.equality(e).name or f"equality{e}", "timeconst": float(m.eq_solref[e][0]),
                  "dampratio": float(m.eq_solref[e][1]), "impedance": float(m.eq_solimp[e][0]),
                  "dmax": float(m.eq_solimp[e][1])}
        ids = (int(m.eq_obj1id[e]), int(m.eq_obj2id[e]))
        if t == mj.mjtEq.mjEQ_JOINT:
            coord = [dof_coord[int(m.jnt_dofadr[j])] if j >= 0 else None for j in ids]
            ref = [float(m.qpos0[int(m.jnt_qposadr[j])]) if j >= 0 else 0.0 for j in ids]
            out.append({**common, "kind": "joint", "joint1": coord[0], "joint2": coord[1], "ref1": ref[0],
                        "ref2": ref[1], "polycoef": data[:5].tolist()})
            continue
        frames = []
        for side, i in enumerate(ids):
            if int(m.eq_objtype[e]) == mj.mjtObj.mjOBJ_SITE:
                b, T = int(m.site_bodyid[i]), _pose(m.site_pos[i], m.site_quat[i])
                if t == mj.mjtEq.mjEQ_CONNECT:
                    T[:3, :3] = np.eye(3)
            elif t == mj.mjtEq.mjEQ_CONNECT:
                b, T = i, _translation(data[3 * side:3 * side + 3])
            else:       # weld, body semantic: body 1's anchor is data[3:6] with the relative pose data[6:10]
                b = i
                T = _pose(data[3:6], data[6:10]) if side == 0 else _translation(data[0:3])
            frames.append((link_of[b], (X[b] @ T).tolist()))
        entry = {**common, "kind": "connect" if t == mj.mjtEq.mjEQ_CONNECT else "weld", "link1": frames[0][0],
                 "frame1": frames[0][1], "link2": frames[1][0], "frame2": frames[1][1]}
        if t == mj.mjtEq.mjEQ_WELD:
            entry["torquescale"] = float(data[10])
        out.append(entry)
    return out


def _tendon_spec(c: _Compiled, k: int, dof_coord: dict[int, str], X: dict[int, np.ndarray],
                 link_of: dict[int, str]) -> dict[str, Any]:
    """Tendon ``k`` as a :mod:`pbframework.tendons` spec: a fixed tendon's ``{coordinate name: coefficient}``
    (``l = sum c_i q_i``), or a spatial tendon's path of sites, pulleys and wrapping geoms in their links'
    frames."""
    m, mj = c.m, c.mj
    name = m.tendon(k).name or f"tendon{k}"
    wraps = range(int(m.tendon_adr[k]), int(m.tendon_adr[k]) + int(m.tendon_num[k]))
    if int(m.wrap_type[wraps[0]]) == mj.mjtWrap.mjWRAP_JOINT:
        joints: dict[str, float] = {}
        for w in wraps:
            coord = dof_coord[int(m.jnt_dofadr[int(m.wrap_objid[w])])]
            joints[coord] = joints.get(coord, 0.0) + float(m.wrap_prm[w])
        return {"name": name, "joints": joints}

    def site(i: int) -> dict[str, Any]:
        b = int(m.site_bodyid[i])
        return {"link": link_of[b], "pos": (X[b] @ np.r_[m.site_pos[i], 1.0])[:3].tolist()}

    path = []
    for w in wraps:
        t, obj = int(m.wrap_type[w]), int(m.wrap_objid[w])
        if t == mj.mjtWrap.mjWRAP_SITE:
            path.append({"kind": "site", **site(obj)})
        elif t == mj.mjtWrap.mjWRAP_PULLEY:
            path.append({"kind": "pulley", "divisor": float(m.wrap_prm[w])})
        else:
            b, side = int(m.geom_bodyid[obj]), int(round(float(m.wrap_prm[w])))
            path.append({"kind": "geom", "link": link_of[b],
                         "shape": "sphere" if t == mj.mjtWrap.mjWRAP_SPHERE else "cylinder",
                         "radius": float(m.geom_size[obj][0]),
                         "frame": (X[b] @ _pose(m.geom_pos[obj], m.geom_quat[obj])).tolist(),
                         "sidesite": site(side) if side >= 0 else None})
    return {"name": name, "path": path}

