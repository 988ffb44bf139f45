"""A model from :func:`pbframework.load_mjcf` against MuJoCo's own ``MjModel`` of the same file, at random
states: the mass matrix (armature included), the bias forces, the passive forces (damping, springs,
gravity compensation) and the actuator forces (random ``ctrl``). Shared by ``benchmarks/menagerie.py`` and
``tests/test_mjcf_mujoco.py``.

Errors are norm-wise relative, ``||ours - mj|| / max(||mj||, 1)``, with MuJoCo's quantities mapped into
pbframework's coordinates (equality violations: MuJoCo's ``efc_pos``; ``M = T^T M_mj T``, ``f = T^T f_mj``, ``T`` from
:func:`pbframework.io.mjcf.mujoco_velocity_map`; a free joint's ``T`` turns with the body, so its bias gains
``T^T M_mj Tdot v``).
"""

from __future__ import annotations

import math
from pathlib import Path

import casadi as ca
import numpy as np

import pbframework as pbf
from pbframework import dynamics
from pbframework.forces import force_model
from pbframework.io.mjcf import from_mujoco, mujoco_velocity_map, to_mujoco

PASSIVE = ("joint_damping", "joint_stiffness", "gravity_compensation", "fluid_drag", "tendon_passive")
"""The force models that are MuJoCo's ``qfrc_passive`` (frictionloss is a constraint force there)."""


def rel_err(ours, ref) -> float:
    ref = np.asarray(ref, float).ravel()
    err = float(np.linalg.norm(np.asarray(ours, float).ravel() - ref) / max(np.linalg.norm(ref), 1.0))
    return err if math.isfinite(err) else math.inf      # a NaN must not vanish in max()


def random_state(model: pbf.ArticulatedBody, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A configuration within the joint ranges (unlimited hinges in [-pi, pi], unlimited slides in
    [-0.5, 0.5] m, random unit quaternions: free bases at any orientation) and a velocity in [-2, 2]."""
    q = np.zeros(model.nq)
    for j in model.joints:
        s = model.joint_q_index[j.name]
        kind = j.type.value
        if kind in ("revolute", "prismatic"):
            half = math.pi if kind == "revolute" else 0.5
            lo, hi = (j.lower, j.upper) if math.isfinite(j.lower) and math.isfinite(j.upper) else (-half, half)
            q[s] = rng.uniform(lo, hi)
        elif kind == "ball":
            x = rng.normal(size=4)
            q[s] = x / np.linalg.norm(x)
        elif kind == "free":
            x = rng.normal(size=4)
            q[s] = np.r_[rng.uniform(-1, 1, 3), x / np.linalg.norm(x)]
    return q, rng.uniform(-2, 2, model.nv)


def compare(path: Path, rng: np.random.Generator, states: int = 5, model: pbf.ArticulatedBody | None = None
            ) -> dict[str, float]:
    """Worst relative errors over ``states`` random states: ``M``, ``bias``, ``passive``, ``actuator`` (at random
    activations ``act``), and for models with actuator states ``states``: the states after one step against
    MuJoCo's ``act`` after one Euler ``mj_step``."""
    import mujoco

    ours = pbf.load_mjcf(path) if model is None else model
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    passive = [force_model(n, **p) for n, p in ours.default_forces if n in PASSIVE]
    acts = [force_model(n, **p) for n, p in ours.default_forces if n == "mj_actuators"]
    eqs = [force_model(n, **p) for n, p in ours.default_forces if n == "soft_equality"]
    residual = None
    if eqs:
        qs = ca.SX.sym("q", ours.nq)
        residual = ca.Function("r", [qs], [eqs[0].residual(ours, qs)])
        weld_rot = np.concatenate([np.arange(3, 6) + sum(1 if c["kind"] == "joint" else 3 if c["kind"] == "connect"
                                                          else 6 for c in eqs[0].constraints[:k])
                                   for k, c in enumerate(eqs[0].constraints) if c["kind"] == "weld"] or [[]]).astype(int)
    crba, nle = dynamics.crba(ours), dynamics.nonlinear_effects(ours)
    worst = dict(M=0.0, bias=0.0, passive=0.0, actuator=0.0, equality=0.0)
    for _ in range(states):
        q, v = random_state(ours, rng)
        qpos, qvel = to_mujoco(ours, q, v)
        back = np.concatenate(from_mujoco(ours, qpos, qvel))
        if np.abs(back - np.r_[q, v]).max() > 1e-12:
            raise AssertionError(f"{path}: to_mujoco / from_mujoco do not invert each other")
        d.qpos[:], d.qvel[:] = qpos, qvel
        d.ctrl[:] = rng.uniform(-3, 3, m.nu)
        if m.na:                                     # activations, a PID's integral and set-point; a PID
            d.act[:] = rng.uniform(-1, 1, m.na)      # limits its set-point's slew after t = 0 only
            d.time = float(rng.choice([0.0, 1.0]))
        mujoco.mj_forward(m, d)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M)
        T = mujoco_velocity_map(ours, q)
        Tdot_v = np.zeros(m.nv)                      # free joints: d/dt (R v_lin) = R (omega x v_lin)
        for name, t, _, da in ours.mujoco_joints:
            if t == 0:
                vs = ours.joint_v_index[name]
                vj = v[vs]
                Tdot_v[da:da + 3] = T[da:da + 3, vs.start:vs.start + 3] @ np.cross(vj[3:], vj[:3])
        worst["M"] = max(worst["M"], rel_err(crba(q), T.T @ M @ T))
        worst["bias"] = max(worst["bias"], rel_err(nle(q, v), T.T @ (M @ Tdot_v + d.qfrc_bias)))
        f = sum((np.asarray(x.generalized_force(ours, q, v, 0.0)).ravel() for x in passive), np.zeros(ours.nv))
        worst["passive"] = max(worst["passive"], rel_err(f, T.T @ d.qfrc_passive))
        if acts:
            u = d.ctrl.copy()
            if m.na:                                 # the states after one step: MuJoCo's Euler act update
                a_next = acts[0].next_states(ours, q, v, d.time, m.opt.timestep, u, d.act.copy())
                a_next = np.asarray(ca.evalf(a_next) if isinstance(a_next, ca.SX) else a_next).ravel()
                stepped = mujoco.MjData(m)
                stepped.qpos[:], stepped.qvel[:], stepped.ctrl[:], stepped.act[:] = d.qpos, d.qvel, d.ctrl, d.act
                stepped.time = d.time
                euler = mujoco.MjModel.from_xml_path(str(path))
                euler.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
                # act's update needs no constraint force; without them a random state cannot make MuJoCo's
                # qacc blow up, after which mj_step resets the data (act to zero)
                euler.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
                mujoco.mj_step(euler, stepped)
                if stepped.warning[mujoco.mjtWarning.mjWARN_BADQACC].number:
                    raise AssertionError(f"{path}: MuJoCo's Euler step was unstable at a random state (its act reset)")
                worst["states"] = max(worst.get("states", 0.0), rel_err(a_next, stepped.act))
                u = np.r_[u, d.act, a_next]
            fa = np.asarray(acts[0].generalized_force(ours, q, v, d.time, u=u)).ravel()
            worst["actuator"] = max(worst["actuator"], rel_err(fa, T.T @ d.qfrc_actuator))
        if residual is not None:      # MuJoCo's efc_pos rows of the equalities (active ones, in order)
            ref = d.efc_pos[d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY]
            r = np.asarray(residual(q)).ravel()
            flipped = r.copy()        # a weld's quaternion: MuJoCo's product may carry w < 0, ours w >= 0
            flipped[weld_rot] *= -1
            err = np.minimum(np.abs(r - ref), np.abs(flipped - ref))
            worst["equality"] = max(worst["equality"], float(np.linalg.norm(err) / max(np.linalg.norm(ref), 1.0)))
    return worst
