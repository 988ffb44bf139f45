"""MuJoCo actuators on joints and sites (issue 25): the control vector ``ctrl`` is the step's input ``u``.

One force model holds all of a model's actuators, in MuJoCo's order. Actuator ``a`` acts through its
``gear`` on a length ``l = sum_i c_i q_i`` of hinge and slide coordinates (``joints = {q_i: c_i}``: one
coordinate with ``c = 1`` for MuJoCo's joint transmission, the coefficients of a fixed tendon for a tendon
transmission): with the actuator's length ``L = gear l`` and velocity ``V = gear ldot``, and ``c`` its
control clamped to ``ctrlrange``::

    F = (g0 + g1 L + g2 V) c + b0 + b1 L + b2 V          (MuJoCo's affine gain and bias)
    F = clamp(F, forcerange),  tau_{q_i} += gear c_i F

A spatial tendon transmission (``path``: a :mod:`pbframework.tendons` path) acts on the tendon's length
``l(q)``: ``L = gear l``, ``V = gear J v`` with the moment ``J = dl/dq``, ``tau += gear J F``.

A site transmission (``site = {link, frame}``, ``gear`` six numbers) applies the wrench ``gear[0:3] F``
(force) and ``gear[3:6] F`` (torque), in the site's frame, at the site: ``tau += J^T gear F`` with ``J`` the
site's Jacobian in its own frame (``6 x nv``); MuJoCo's length of such an actuator is ``L = 0`` and its
velocity ``V = gear . J v``. With a reference site (``refsite``) the length is the site's position and
rotation vector relative to the reference, in the reference's frame, dotted with ``gear``, and the moment
MuJoCo's (:func:`site_transmission`). ``wrap`` (a period, or ``None``) takes a servo's error ``c - L`` modulo
the period into ``[-wrap/2, wrap/2)``: MuJoCo 4 does so for a position servo (``b1 = -g0``, no length or
velocity gain) on a purely rotational ``gear`` with a reference site, with the period ``2 pi |gear[3:6]|``.

``gravcomp = {links, joints}`` adds MuJoCo's ``actuatorgravcomp`` share: the ``gravity_compensation`` force
of ``links`` on the coordinates of ``joints``. Then the total on each coordinate is clamped to its joint's
``actuatorfrcrange``. MJCF's ``motor``
(``g = (1, 0, 0)``, ``b = 0``), ``position`` (``g0 = kp``, ``b = (0, -kp, -kv)``), ``velocity``
(``g0 = kv``, ``b = (0, 0, -kv)``) and ``general`` actuators with ``gaintype`` / ``biastype`` ``fixed`` or
``affine`` are all of this form; :func:`~pbframework.io.load_mjcf` fills the parameters from the compiled
model.

States (:mod:`pbframework.force_states`): an actuator with ``dynamics`` (MuJoCo's ``dyntype`` integrator,
filter, filterexact or muscle) keeps its activation and drives its gain with it in place of ``c``; a ``pid``
actuator (MuJoCo's ``mujoco.pid`` plug-in) keeps its error integral and slew-limited set-point; ``muscle``
replaces the affine gain and bias by MuJoCo's muscle curves. :meth:`MjActuators.next_states` advances them as
MuJoCo's Euler step does.

The controls are the step's per-step input (``n_inputs = nu``, named like MuJoCo's ``ctrl``): held over a
step (zero-order hold, as ``mj_step`` holds ``data.ctrl``), given to :meth:`~pbframework.simulate.Simulator`
through ``ctrl`` -- a constant vector or a Python callable ``ctrl(t, q, qd)`` evaluated at the state each step
starts from -- and an argument of ``sim.step_function()`` and of the exported C step.

Potential form (for ``pbad``): with the backward-Euler velocity ``V = gear (l_{k+1} - l_k) / dt`` the force
``F`` is affine in ``l_{k+1}``, ``F = s(l_{k+1})``, and ``Q = -gear (l_{k+1} - l_k) mean(clamp(s))`` over
``[s(l_k), s(l_{k+1})]`` is its exact integral (its gradient in ``q_{k+1}`` is ``-tau``): the actuator is implicit in the step, so a stiff position
servo stays stable at large steps. A clamp on a joint's total (``joint_force_range``), the gravity
compensation share and a site's wrench (a follower load, not a gradient) have no such integral; the model
then offers the generalised-force form only, and implicit integrators take it as any generalised force.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import casadi as ca
import numpy as np

from pbframework.forces import ForceForm, ForceModel
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.kinematics import link_poses
from pbframework.lie import q_integrate
from pbframework.model import WORLD, ArticulatedBody
from pbframework.tendons import tendon_length, tendon_moment

from ._common import cached_function, resolve_dofs, velocity_indices
from .passive import GravityCompensation

_KEYS = ("name", "joints", "gear", "gain", "bias", "ctrlrange", "forcerange")
_SITE_KEYS = ("name", "site", "refsite", "wrap", "gear", "gain", "bias", "ctrlrange", "forcerange")
_PATH_KEYS = ("name", "path", "gear", "gain", "bias", "ctrlrange", "forcerange")
_DYN_TYPES = ("integrator", "filter", "filterexact", "muscle")
_MUSCLE_KEYS = ("range", "force", "lmin", "lmax", "vmax", "fpmax", "fvmax", "lengthrange")
_MINVAL = 1e-15          # MuJoCo's mjMINVAL: the smallest filter time constant


def _key_sets() -> list[set[str]]:
    """The key sets an actuator mapping may have: a transmission's keys; with ``dynamics`` added (activation
    dynamics); or a joint or tendon transmission's with ``pid`` in place of ``gain`` and ``bias``."""
    base = [set(_KEYS), set(_SITE_KEYS), set(_PATH_KEYS)]
    muscles = [(k - {"gain", "bias"}) | {"muscle"} for k in (set(_KEYS), set(_PATH_KEYS))]
    return (base + [k | {"dynamics"} for k in base]
            + [(k - {"gain", "bias"}) | {"pid"} for k in (set(_KEYS), set(_PATH_KEYS))]
            + muscles + [k | {"dynamics"} for k in muscles])


def _number(where: str, what: str, x: Any, *, positive: bool = False, optional: bool = False) -> float | None:
    if x is None and optional:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating, np.integer)) or not np.isfinite(x) \
            or (positive and x < 0):
        raise ValueError(f"{where}: {what} must be a finite{' non-negative' if positive else ''} number"
                         f"{' or None' if optional else ''}, got {x!r}")
    return float(x)


def _dynamics(where: str, d: Any) -> dict[str, Any]:
    """An actuator's activation dynamics ``{type, tau, actrange, actearly}``, checked (a muscle's ``tau``: its
    activation and deactivation time constants and the smoothing width, MuJoCo's ``dynprm[0:3]``)."""
    if not isinstance(d, Mapping) or set(d) != {"type", "tau", "actrange", "actearly"} or d["type"] not in _DYN_TYPES \
            or not isinstance(d["actearly"], bool):
        raise ValueError(f"{where}: dynamics must be {{'type': one of {list(_DYN_TYPES)}, 'tau': the filter's time "
                         f"constant (a muscle's three: tau_act, tau_deact, smoothing width), 'actrange': (low, high) "
                         f"or None, 'actearly': bool}}, got {d!r}")
    if d["type"] == "muscle":
        tau = d["tau"]
        if isinstance(tau, (str, bytes, Mapping)) or not isinstance(tau, Sequence) or len(tau) != 3:
            raise ValueError(f"{where}: a muscle's dynamics tau must be three numbers (tau_act, tau_deact, smoothing "
                             f"width), got {tau!r}")
        tau = [_number(where, "dynamics tau", x, positive=True) for x in tau]
    else:
        tau = _number(where, "dynamics tau", d["tau"], positive=True)
    return {"type": d["type"], "tau": tau, "actrange": _range(where, "actrange", d["actrange"]),
            "actearly": d["actearly"]}


def _muscle(where: str, d: Any) -> dict[str, Any]:
    """A muscle's force parameters (MuJoCo's ``gainprm`` / ``biasprm`` with the force resolved, and the
    actuator's ``lengthrange``), checked."""
    if not isinstance(d, Mapping) or set(d) != set(_MUSCLE_KEYS):
        raise ValueError(f"{where}: muscle must be a mapping with the keys {list(_MUSCLE_KEYS)}, got {d!r}")
    out = {k: _number(where, f"muscle {k}", d[k], positive=True) for k in _MUSCLE_KEYS[1:7]}
    for k in ("range", "lengthrange"):
        r = _range(where, f"muscle {k}", d[k])
        if r is None:
            raise ValueError(f"{where}: muscle {k} must be (low, high), got None")
        out[k] = r
    return {k: out[k] for k in _MUSCLE_KEYS}


def _pid(where: str, d: Any) -> dict[str, Any]:
    """A PID actuator's gains ``{kp, ki, kd, imax, slewmax}`` (``imax``, ``slewmax``: None for none), checked."""
    if not isinstance(d, Mapping) or set(d) != {"kp", "ki", "kd", "imax", "slewmax"}:
        raise ValueError(f"{where}: pid must be {{'kp', 'ki', 'kd', 'imax', 'slewmax'}} (the last two None for "
                         f"none), got {d!r}")
    return {"kp": _number(where, "kp", d["kp"]), "ki": _number(where, "ki", d["ki"]),
            "kd": _number(where, "kd", d["kd"]),
            "imax": _number(where, "imax", d["imax"], positive=True, optional=True),
            "slewmax": _number(where, "slewmax", d["slewmax"], positive=True, optional=True)}


def _range(who: str, what: str, r: Any) -> tuple[float, float] | None:
    if r is None:
        return None
    try:
        lo, hi = (float(v) for v in r)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: {what} must be None or (low, high), got {r!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
        raise ValueError(f"{who}: {what} must be finite with low <= high, got {r!r}")
    return lo, hi


def _clamp(x, r):
    return x if r is None else ca.fmin(ca.fmax(x, r[0]), r[1])


class MjActuators(ForceModel):
    """MuJoCo's joint, tendon and site actuators (module docstring).

    Args:
        actuators: one mapping per actuator with ``name``, its transmission -- ``joints`` (``{hinge or slide
            coordinate name: coefficient}``) or a spatial tendon's ``path`` with ``gear`` a number, or ``site`` and ``refsite`` (``{"link":
            name, "frame": 4 x 4 pose of the site in the link's frame}``; ``refsite`` may be ``None``) with
            ``gear`` six numbers and ``wrap`` (``None`` or the period of the servo error) --, ``gain`` and
            ``bias``
            (three numbers each: ``g0 g1 g2``, ``b0 b1 b2``), ``ctrlrange`` and ``forcerange`` (``(low, high)``
            or ``None``: unclamped).
        joint_force_range: ``{coordinate name: (low, high)}``: clamps on the total actuator force per joint
            (MJCF ``actuatorfrcrange``).
        gravcomp: ``{"links": {link name: c}, "joints": [joint names]}``: the gravity compensation of those
            links (as ``gravity_compensation``) on those joints' coordinates, added before the clamps (MJCF
            ``actuatorgravcomp``); ``None``: none.
        ctrl: the controls: ``None`` (zeros), a constant vector of ``nu`` numbers, or a Python callable
            ``ctrl(t, q, qd) -> nu numbers`` called once per step on the state the step starts from.
    """

    name = "mj_actuators"
    group = True

    def __init__(self, actuators: Sequence[Mapping[str, Any]] = (), *,
                 joint_force_range: Mapping[str, Sequence[float]] | None = None,
                 gravcomp: Mapping[str, Any] | None = None,
                 ctrl: Sequence[float] | Callable[[float, np.ndarray, np.ndarray], Sequence[float]] | None = None
                 ) -> None:
        who = self.name
        if isinstance(actuators, (str, bytes, Mapping)) or not isinstance(actuators, Sequence) or not actuators:
            raise ValueError(f"{who}: actuators must be a non-empty list of mappings, got {actuators!r}")
        self.actuators: list[dict[str, Any]] = []
        for k, a in enumerate(actuators):
            if isinstance(a, Mapping) and "pid" in a and ("dynamics" in a or "muscle" in a or "site" in a):
                raise ValueError(f"{who}: actuator {k}: a 'pid' actuator takes no 'dynamics', 'muscle' or site "
                                 f"transmission (MuJoCo's mujoco.pid on a joint or tendon), got keys {sorted(a)}")
            if not isinstance(a, Mapping) or set(a) not in _key_sets():
                raise ValueError(f"{who}: actuator {k} must be a mapping with exactly the keys {list(_KEYS)} (or "
                                 f"'site', 'refsite' and 'wrap' for 'joints', or a spatial tendon's 'path'; "
                                 f"'dynamics' added for activation dynamics; 'pid' or 'muscle' in place of 'gain' "
                                 f"and 'bias' for a PID actuator or a muscle, joint or tendon transmissions only), got "
                                 f"{a!r}")
            where = f"{who}: actuator {a['name']!r}"
            pid = _pid(where, a["pid"]) if "pid" in a else None
            muscle = _muscle(where, a["muscle"]) if "muscle" in a else None
            if pid is not None:                 # F = kp (P - L) - kd V + ki I: the affine form with c = kp P + ki I
                a = {**a, "gain": (1.0, 0.0, 0.0), "bias": (0.0, -pid["kp"], -pid["kd"])}
            elif muscle is not None:            # not affine: _force evaluates the muscle's curves
                a = {**a, "gain": (0.0, 0.0, 0.0), "bias": (0.0, 0.0, 0.0)}
            gain, bias = np.asarray(a["gain"], float).reshape(-1), np.asarray(a["bias"], float).reshape(-1)
            gear = np.asarray(a["gear"], float).reshape(-1)
            if gain.shape != (3,) or bias.shape != (3,) or gear.shape != ((6,) if "site" in a else (1,)) \
                    or not np.all(np.isfinite(np.r_[gain, bias, gear])):
                raise ValueError(f"{where}: gear must be {'six finite numbers' if 'site' in a else 'a finite number'}"
                                 f", gain and bias three finite numbers each")
            entry = {"name": str(a["name"]), "gain": gain.tolist(), "bias": bias.tolist(),
                     "ctrlrange": _range(where, "ctrlrange", a["ctrlrange"]),
                     "forcerange": _range(where, "forcerange", a["forcerange"])}
            if "site" in a:
                wrap = a["wrap"]
                if wrap is not None and (isinstance(wrap, bool) or not isinstance(wrap, (int, float))
                                         or not np.isfinite(wrap) or wrap <= 0):
                    raise ValueError(f"{where}: wrap must be None or a positive number (the period of the servo "
                                     f"error), got {wrap!r}")
                entry.update(site=_site(where, "site", a["site"]), gear=gear.tolist(),
                             refsite=None if a["refsite"] is None else _site(where, "refsite", a["refsite"]),
                             wrap=None if wrap is None else float(wrap))
            elif "path" in a:
                from pbframework.tendons import check_tendon

                entry.update(path=check_tendon(where, {"name": a["name"], "path": a["path"]})["path"],
                             gear=float(gear[0]))
            else:
                joints = a["joints"]
                if (not isinstance(joints, Mapping) or not joints or not all(isinstance(k, str) for k in joints)
                        or not all(np.isfinite(float(v)) for v in joints.values())):
                    raise ValueError(f"{where}: joints must be a non-empty mapping {{coordinate name: finite "
                                     f"coefficient}}, got {joints!r}")
                entry.update(joints={str(k): float(v) for k, v in joints.items()}, gear=float(gear[0]))
            if "dynamics" in a:
                entry["dynamics"] = _dynamics(where, a["dynamics"])
            if pid is not None or muscle is not None:
                entry["pid" if pid is not None else "muscle"] = pid if pid is not None else muscle
                del entry["gain"], entry["bias"]
            self.actuators.append(entry)
        self._affine = [((1.0, 0.0, 0.0), (0.0, -a["pid"]["kp"], -a["pid"]["kd"])) if "pid" in a
                        else ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)) if "muscle" in a
                        else (tuple(a["gain"]), tuple(a["bias"])) for a in self.actuators]
        self._slots, k = [], 0          # per actuator: the index of its first state in a, and its state count
        for a in self.actuators:
            n = 1 if "dynamics" in a else (int(a["pid"]["ki"] != 0) + int(a["pid"]["slewmax"] is not None)
                                           if "pid" in a else 0)
            self._slots.append((k, n))
            k += n
        self._na = k
        self.joint_force_range = {str(k): _range(f"{who}: joint_force_range[{k!r}]", "the range", v)
                                  for k, v in dict(joint_force_range or {}).items()}
        if gravcomp is not None and (not isinstance(gravcomp, Mapping) or set(gravcomp) != {"links", "joints"}
                                     or not gravcomp["joints"]):
            raise ValueError(f"{who}: gravcomp must be None or {{'links': {{link name: factor}}, 'joints': [joint "
                             f"names]}}, got {gravcomp!r}")
        self._gravcomp = None if gravcomp is None else GravityCompensation(gravcomp["links"],
                                                                           joints=gravcomp["joints"])
        nu = len(self.actuators)
        if ctrl is None:
            self.ctrl: Any = np.zeros(nu)
        elif callable(ctrl):
            self.ctrl = ctrl
        else:
            c = np.asarray(ctrl, dtype=float).reshape(-1)
            if c.size != nu or not np.all(np.isfinite(c)):
                raise ValueError(f"{who}: ctrl must be {nu} finite numbers (one per actuator) or a callable "
                                 f"(t, q, qd) -> ctrl, got {ctrl!r}")
            self.ctrl = c
        integrable = not (self.joint_force_range or self._gravcomp
                          or any("site" in a or "muscle" in a for a in self.actuators))
        self.forms = frozenset({ForceForm.GENERALIZED_FORCE, ForceForm.POTENTIAL} if integrable else
                               {ForceForm.GENERALIZED_FORCE})

    def params(self) -> dict[str, Any]:
        g = self._gravcomp
        return {"actuators": [dict(a) for a in self.actuators], "joint_force_range": dict(self.joint_force_range),
                "gravcomp": None if g is None else {"links": dict(g.links), "joints": list(g.joints)},
                "ctrl": self.ctrl if callable(self.ctrl) else self.ctrl.tolist()}

    @property
    def names(self) -> list[str]:
        """The actuators' names, in ``ctrl`` order."""
        return [a["name"] for a in self.actuators]

    # -- inputs ----------------------------------------------------------------------------------------------
    def n_inputs(self, model: ArticulatedBody) -> int:
        return len(self.actuators)

    # -- states: activations (one per actuator with dynamics), a PID's integral and previous set-point -------
    def n_states(self, model: ArticulatedBody) -> int:
        """MuJoCo's ``na``: one activation per actuator with ``dynamics``; per PID actuator its error integral
        (when ``ki != 0``) and its slew-limited set-point (when ``slewmax`` is given), in MuJoCo's ``act``
        order."""
        return self._na

    def next_states(self, model, q, qd, t, dt, u, a):
        """MuJoCo's ``act`` after a step of Euler / implicit: :meth:`advance_states` with the rates at the step's
        start."""
        return self.advance_states(model, q, qd, t, dt, u, a, self.state_rates(model, q, qd, t, dt, u, a))

    def state_rates(self, model, q, qd, t, dt, u, a):
        """MuJoCo's ``act_dot``: ``ctrl`` (integrator), ``(ctrl - act) / tau`` (filter, filterexact),
        ``mju_muscleDynamics`` (muscle); for a PID actuator ``(I_next - I) / dt`` and ``(P - P_prev) / dt``, its
        set-point ``P`` (the control, slew-limited to ``P_prev +- slewmax dt`` when ``t > 0``) and integral
        ``I_next = clamp(I + (P - L) dt, +-imax / ki)`` with the actuator length ``L`` at ``q`` (the plug-in's
        ``ActDot``). For a servo whose error wraps (``wrap``) MuJoCo 4.0.0 (measured at 2000 states per
        dynamics type) takes a filter's control to its representative nearest ``act``
        (``c - wrap round((c - act) / wrap)``)."""
        out, moments = [], self._moments(model)
        for k, (act, (i, n)) in enumerate(zip(self.actuators, self._slots)):
            if not n:
                continue
            c = _clamp(u[k], act["ctrlrange"])
            if "dynamics" in act:
                d, x = act["dynamics"], a[i]
                period = act.get("wrap")
                if period is not None and d["type"] != "integrator":     # the set-point nearest the activation
                    c = c - period * ca.floor((c - x) / period + 0.5)
                out.append(c if d["type"] == "integrator" else _muscle_rate(c, x, d["tau"])
                           if d["type"] == "muscle" else (c - x) / max(_MINVAL, d["tau"]))
                continue
            pid = act["pid"]
            setpoint = c
            if pid["slewmax"] is not None:
                prev = a[i + int(pid["ki"] != 0)]
                setpoint = ca.if_else(t > 0, ca.fmin(ca.fmax(c, prev - pid["slewmax"] * dt),
                                                     prev + pid["slewmax"] * dt), c)
            if pid["ki"] != 0:
                length = (tendon_length(model, act, q) if "path" in act else self._length(moments[k], q))
                integral = a[i] + (setpoint - act["gear"] * length) * dt
                if pid["imax"] is not None:
                    bound = abs(pid["imax"] / pid["ki"])
                    integral = ca.fmin(ca.fmax(integral, -bound), bound)
                out.append((integral - a[i]) / dt)
            if pid["slewmax"] is not None:
                out.append((setpoint - prev) / dt)
        return ca.vertcat(*out)

    def advance_states(self, model, q, qd, t, dt, u, a, rate):
        """``act`` after a step of ``dt`` at the rate ``rate`` (MuJoCo's ``mj_nextActivation``): the exact
        filter ``act + rate tau (1 - exp(-dt / tau))`` for filterexact, ``act + dt rate`` otherwise, clamped to
        ``actrange``; the activation of a servo whose error wraps taken to its representative nearest the
        actuator length at ``q`` (MuJoCo 4.0.0, measured)."""
        out = []
        for k, (act, (i, n)) in enumerate(zip(self.actuators, self._slots)):
            for j in range(i, i + n):
                d = act.get("dynamics")
                if d is not None and d["type"] == "filterexact":
                    tau = max(_MINVAL, d["tau"])
                    nxt = a[j] + rate[j] * tau * (1 - ca.exp(-dt / tau))
                else:
                    nxt = a[j] + dt * rate[j]
                if d is not None:
                    nxt = _clamp(nxt, d["actrange"])
                    if act.get("wrap") is not None:          # the activation nearest the length
                        period = act["wrap"]
                        length = site_transmission(model, act["site"], act["refsite"], act["gear"], q)[0]
                        nxt = nxt - period * ca.floor((nxt - length) / period + 0.5)
                out.append(nxt)
        return ca.vertcat(*out)

    def _control(self, k: int, us):
        """The number actuator ``k``'s gain multiplies, from the force's ``u = [ctrl; a; a_next]``: the clamped
        control; with activation dynamics the activation (``a``, or ``a_next`` with ``actearly``); for a PID
        actuator ``kp P + ki I`` with its set-point and integral after the step (as MuJoCo's plug-in computes
        its force)."""
        act, (i, n) = self.actuators[k], self._slots[k]
        nu, na = len(self.actuators), self._na
        if not n and "pid" not in act:
            return _clamp(us[k], act["ctrlrange"])
        if "dynamics" in act:
            return us[nu + na + i] if act["dynamics"]["actearly"] else us[nu + i]
        pid = act["pid"]
        after = us[nu + na + i:nu + na + i + n]
        setpoint = after[n - 1] if pid["slewmax"] is not None else _clamp(us[k], act["ctrlrange"])
        return pid["kp"] * setpoint + (pid["ki"] * after[0] if pid["ki"] != 0 else 0)

    def input_values(self, model: ArticulatedBody, t: float, q, qd) -> np.ndarray:
        if not callable(self.ctrl):
            return self.ctrl
        try:
            c = np.asarray(self.ctrl(float(t), np.asarray(q, float), np.asarray(qd, float)), float).reshape(-1)
        except Exception as exc:  # noqa: BLE001 - re-raised with the force's name and time
            raise RuntimeError(f"{self.name}: ctrl raised {type(exc).__name__} at t = {t:g}: {exc}") from exc
        if c.size != len(self.actuators) or not np.all(np.isfinite(c)):
            raise ValueError(f"{self.name}: ctrl must return {len(self.actuators)} finite numbers (actuators "
                             f"{', '.join(self.names)}) at t = {t:g}, got {c.tolist()}")
        return c

    # -- set-up ----------------------------------------------------------------------------------------------
    def _moments(self, model: ArticulatedBody) -> list[list[tuple[int, int, float]]]:
        """Per joint or tendon actuator: ``(index into q, index into v, coefficient)`` of each coordinate of its
        length (an empty list for a site actuator)."""
        out = []
        for a in self.actuators:
            if "site" in a or "path" in a:
                out.append([])
                continue
            idx = resolve_dofs(self.name, model, tuple(a["joints"]))
            vidx = velocity_indices(self.name, model, idx)
            out.append([(i, vi, c) for i, vi, c in zip(idx, vidx, a["joints"].values())])
        for k in self.joint_force_range:
            resolve_dofs(self.name, model, (k,))
        return out

    @staticmethod
    def _length(moment, x, velocity: bool = False):
        """``sum c x_i`` over the actuator's coordinates (``x`` a configuration, or a velocity)."""
        return sum(c * x[vi if velocity else i] for i, vi, c in moment)

    def _force(self, k: int, a: dict, length, velocity, c):
        if "muscle" in a:
            return _clamp(_muscle_gain(a["muscle"], length, velocity) * c + _muscle_bias(a["muscle"], length),
                          a["forcerange"])
        g, b = self._affine[k]
        return _clamp((g[0] + g[1] * length + g[2] * velocity) * c + b[0] + b[1] * length + b[2] * velocity,
                      a["forcerange"])

    # -- forms -----------------------------------------------------------------------------------------------
    def generalized_force(self, model, q, qd, t, u=None):
        def build() -> ca.Function:
            qs, qds, us = ca.SX.sym("q", model.nq), ca.SX.sym("qd", model.nv), ca.SX.sym("u", self._nu_all())
            tau = [ca.SX(0)] * model.nv
            for k, (a, mom) in enumerate(zip(self.actuators, self._moments(model))):
                c, gear = self._control(k, us), a["gear"]
                if "site" in a:          # velocity moment . v, force moment F
                    length, moment = site_transmission(model, a["site"], a["refsite"], a["gear"], qs)
                    if a["wrap"] is not None:        # the servo error c - L taken in [-wrap/2, wrap/2)
                        err = c - length
                        length = c - (err - a["wrap"] * ca.floor(err / a["wrap"] + 0.5))
                    F = self._force(k, a, length, ca.dot(moment, qds), c)
                    tau = [x + moment[i] * F for i, x in enumerate(tau)]
                    continue
                if "path" in a:          # a spatial tendon: L = gear l(q), V = gear J v, tau += gear J F
                    length, J = tendon_moment(model, a, qs)
                    F = self._force(k, a, gear * length, gear * ca.dot(J, qds), c)
                    tau = [x + gear * J[i] * F for i, x in enumerate(tau)]
                    continue
                F = self._force(k, a, gear * self._length(mom, qs), gear * self._length(mom, qds, True), c)
                for _, vi, coef in mom:
                    tau[vi] = tau[vi] + gear * coef * F
            if self._gravcomp is not None:
                g = self._gravcomp.generalized_force(model, qs, qds, 0.0)
                tau = [x + g[i] for i, x in enumerate(tau)]
            for dof, r in self.joint_force_range.items():
                i = resolve_dofs(self.name, model, (dof,))[0]
                vi = velocity_indices(self.name, model, [i])[0]
                tau[vi] = _clamp(tau[vi], r)
            return ca.Function("mj_actuators_f", [qs, qds, us], [ca.vertcat(*tau)], ["q", "qd", "u"], ["f"])

        return cached_function(model, self, "f", build)(q, qd, self._u(u))

    def potential(self, model, q_next, q_cur, q_prev, dt, t, u=None):
        if ForceForm.POTENTIAL not in self.forms:
            return super().potential(model, q_next, q_cur, q_prev, dt, t)

        def build() -> ca.Function:
            qn, qc = ca.SX.sym("q_next", model.nq), ca.SX.sym("q_cur", model.nq)
            h, us = ca.SX.sym("dt"), ca.SX.sym("u", self._nu_all())
            Q = ca.SX(0)
            for k, (a, mom) in enumerate(zip(self.actuators, self._moments(model))):
                c, gear = self._control(k, us), a["gear"]
                if "path" in a:
                    ln, lc = tendon_length(model, a, qn), tendon_length(model, a, qc)
                else:
                    ln, lc = self._length(mom, qn), self._length(mom, qc)
                s1 = self._unclamped(k, a, gear * ln, gear * (ln - lc) / h, c)
                s0 = self._unclamped(k, a, gear * lc, 0.0, c)   # the same affine s(l) at l = l_k
                Q = Q - gear * (ln - lc) * _mean_clamp(s0, s1, a["forcerange"])
            return ca.Function("mj_actuators_Q", [qn, qc, h, us], [Q], ["q_next", "q_cur", "dt", "u"], ["Q"])

        return cached_function(model, self, "Q", build)(q_next, q_cur, dt, self._u(u))

    def _unclamped(self, k: int, a: dict, length, velocity, c):
        g, b = self._affine[k]
        return (g[0] + g[1] * length + g[2] * velocity) * c + b[0] + b[1] * length + b[2] * velocity

    def _nu_all(self) -> int:
        """Length of the ``u`` the forms receive: the controls, the states before and after the step."""
        return len(self.actuators) + 2 * self._na

    def _u(self, u):
        if u is None:
            raise TypeError(f"{self.name}: the controls are a per-step input; the integrator must pass u (length "
                            f"{self._nu_all()}: the controls, and the states before and after the step) as declared "
                            f"by n_inputs() and n_states()")
        return u


# -- MuJoCo's muscle model (mju_muscleGain / mju_muscleBias / mju_muscleDynamics) ---------------------------------
def _normalized_length(m: Mapping[str, Any], length):
    """The muscle's normalised length and its optimum length ``L0`` (from the length range and ``range``)."""
    (r0, r1), (l0, l1) = m["range"], m["lengthrange"]
    L0 = (l1 - l0) / max(_MINVAL, r1 - r0)
    return r0 + (length - l0) / max(_MINVAL, L0), L0


def _muscle_gain(m: Mapping[str, Any], length, velocity):
    """MuJoCo's active muscle force per unit activation, ``-F FL(L) FV(V)`` (negative: muscles pull)."""
    L, L0 = _normalized_length(m, length)
    V = velocity / max(_MINVAL, L0 * m["vmax"])
    lmin, lmax = m["lmin"], m["lmax"]
    a, b = 0.5 * (lmin + 1), 0.5 * (1 + lmax)
    FL = ca.if_else(ca.logic_or(L < lmin, L > lmax), 0.0,
                    ca.if_else(L <= a, 0.5 * ((L - lmin) / max(_MINVAL, a - lmin)) ** 2,
                               ca.if_else(L <= 1, 1 - 0.5 * ((1 - L) / max(_MINVAL, 1 - a)) ** 2,
                                          ca.if_else(L <= b, 1 - 0.5 * ((L - 1) / max(_MINVAL, b - 1)) ** 2,
                                                     0.5 * ((lmax - L) / max(_MINVAL, lmax - b)) ** 2))))
    y = m["fvmax"] - 1
    FV = ca.if_else(V <= -1, 0.0, ca.if_else(V <= 0, (V + 1) ** 2,
                                              ca.if_else(V <= y, m["fvmax"] - (y - V) ** 2 / max(_MINVAL, y),
                                                         m["fvmax"])))
    return -m["force"] * FL * FV


def _muscle_bias(m: Mapping[str, Any], length):
    """MuJoCo's passive muscle force: half-quadratic beyond the optimum length to ``(1 + lmax) / 2``, linear
    after."""
    L, _ = _normalized_length(m, length)
    b = 0.5 * (1 + m["lmax"])
    x1, x2 = (L - 1) / max(_MINVAL, b - 1), (L - b) / max(_MINVAL, b - 1)
    return ca.if_else(L <= 1, 0.0, ca.if_else(L <= b, -m["force"] * m["fpmax"] * 0.5 * x1 ** 2,
                                              -m["force"] * m["fpmax"] * (0.5 + x2)))


def _muscle_rate(c, act, prm):
    """MuJoCo's muscle activation rate (Millard et al. 2013): ``(clamp(c, 0, 1) - act) / tau`` with the
    activation or deactivation time constant scaled by the clamped activation, switched hard or by a quintic
    sigmoid of width ``prm[2]``."""
    cc, ac = ca.fmin(ca.fmax(c, 0.0), 1.0), ca.fmin(ca.fmax(act, 0.0), 1.0)
    tau_act, tau_deact = prm[0] * (0.5 + 1.5 * ac), prm[1] / (0.5 + 1.5 * ac)
    dctrl = cc - act
    if prm[2] < _MINVAL:
        tau = ca.if_else(dctrl > 0, tau_act, tau_deact)
    else:
        x = ca.fmin(ca.fmax(dctrl / prm[2] + 0.5, 0.0), 1.0)
        tau = tau_deact + (tau_act - tau_deact) * x ** 3 * (3 * x * (2 * x - 5) + 10)
    return dctrl / ca.fmax(_MINVAL, tau)


def _site(where: str, what: str, site: Any) -> dict[str, Any]:
    """A site transmission's ``{"link": name, "frame": 4 x 4}`` (its site or its reference site), checked."""
    try:
        frame = np.asarray(site["frame"], float)
        link = site["link"]
    except (TypeError, KeyError, ValueError):
        frame, link = None, None
    if (not isinstance(site, Mapping) or set(site) != {"link", "frame"} or not isinstance(link, str)
            or frame is None or frame.shape != (4, 4) or not np.all(np.isfinite(frame))):
        raise ValueError(f"{where}: {what} must be {{'link': link name, 'frame': the site's 4 x 4 pose in the "
                         f"link's frame}}, got {site!r}")
    return {"link": link, "frame": frame.tolist()}


def site_transmission(model: ArticulatedBody, site: Mapping[str, Any], refsite: Mapping[str, Any] | None,
                      gear: Sequence[float], q):
    """MuJoCo's ``(actuator_length, actuator_moment)`` of a site transmission at ``q`` (the moment: ``nv``
    entries, the generalised force of a unit actuator force).

    Without ``refsite``: length 0, moment ``J^T gear`` with ``J`` the site's twist in its own frame -- the
    wrench ``gear`` in the site's frame, applied at the site. With ``refsite`` (frame ``(R_r, p_r)``): length
    ``gear[0:3] . R_r^T (p_s - p_r) + gear[3:6] . log(R_r^T R_s)`` (the rotation vector of the site relative to
    the reference), moment ``(J_s - J_r)^T blockdiag(R_r, R_r) gear`` with the world Jacobians ``J`` (linear,
    angular) of the two sites, zero on the joints that move both (MuJoCo's, not the length's exact gradient:
    the reference frame's own turning is left out). Each moment is the gradient in the tangent displacement
    ``e`` at ``e = 0`` of a rate whose frames are held at ``q``."""
    names = [x.name for x in model.links]
    e = ca.SX.sym("e", model.nv)
    zero = ca.DM.zeros(model.nv)
    qe = q_integrate(model)(q, e) if model.on_group else q + e
    poses = link_poses(model, qe)

    def pose(s):
        if s["link"] == WORLD:
            R, p = ca.DM.eye(3), ca.DM.zeros(3)
        elif s["link"] in names:
            R, p = poses[names.index(s["link"])]
        else:
            raise ValueError(f"mj_actuators: model {model.name!r} has no link {s['link']!r} (a site's link)")
        F = ca.DM(s["frame"])
        return ca.mtimes(R, F[:3, :3]), p + ca.mtimes(R, F[:3, 3])

    def at0(x):
        return ca.substitute(x, e, zero)

    g = ca.DM(list(gear))
    Rs, ps = pose(site)
    Rs0 = at0(Rs)
    if refsite is None:
        rate = ca.dot(ca.mtimes(Rs0, g[:3]), ps) + ca.dot(ca.mtimes(Rs0, g[3:]), _vee(ca.mtimes(Rs, Rs0.T)))
        return ca.SX(0), at0(ca.gradient(rate, e))
    Rr, pr = pose(refsite)
    Rr0 = at0(Rr)
    rate = (ca.dot(ca.mtimes(Rr0, g[:3]), ps - pr)
            + ca.dot(ca.mtimes(Rr0, g[3:]), _vee(ca.mtimes(Rs, Rs0.T)) - _vee(ca.mtimes(Rr, Rr0.T))))
    moment = at0(ca.gradient(rate, e)) * ca.DM(1.0 - _common_joints(model, site["link"], refsite["link"]))
    length = ca.dot(g[:3], ca.mtimes(Rr0.T, at0(ps - pr))) + ca.dot(g[3:], _rotation_vector(ca.mtimes(Rr0.T, Rs0)))
    return length, moment


def _vee(A):
    """The axis vector of the skew-symmetric part of ``A`` (``w`` for ``A = I + [w]x + ...``)."""
    return 0.5 * ca.vertcat(A[2, 1] - A[1, 2], A[0, 2] - A[2, 0], A[1, 0] - A[0, 1])


def _rotation_vector(A):
    """``log(A)``: the rotation vector (angle in ``[0, pi]`` times the axis) of the rotation matrix ``A``, as
    MuJoCo's ``mju_quat2Vel`` of the same rotation (ill-conditioned within ~1e-8 of a half turn)."""
    w = _vee(A)                                     # sin(angle) axis
    s = ca.sqrt(ca.fmax(ca.dot(w, w), 1e-24))
    return w * ca.atan2(s, 0.5 * (A[0, 0] + A[1, 1] + A[2, 2] - 1)) / s


def _common_joints(model: ArticulatedBody, link1: str, link2: str) -> np.ndarray:
    """``nv`` numbers: 1 on the velocity coordinates of the joints that move both links, 0 elsewhere."""
    parent = {j.child: j for j in model.joints}

    def chain(link):
        out = set()
        while link in parent:
            out.add(parent[link].name)
            link = parent[link].parent
        return out

    mask = np.zeros(model.nv)
    for name in chain(link1) & chain(link2):
        mask[model.joint_v_index[name]] = 1.0
    return mask


def _mean_clamp(s0, s1, r):
    """The mean of ``clamp(s, r)`` over ``s`` between ``s0`` and ``s1`` (``clamp(s1)`` where they coincide)."""
    if r is None:
        return 0.5 * (s0 + s1)
    lo, hi = r

    def antiderivative(s):
        return ca.if_else(s < lo, lo * s - 0.5 * lo * lo, ca.if_else(s > hi, hi * s - 0.5 * hi * hi, 0.5 * s * s))

    d = s1 - s0
    return ca.if_else(ca.fabs(d) > 1e-12 * (1 + ca.fabs(s1)),
                      (antiderivative(s1) - antiderivative(s0)) / d, _clamp(s1, r))


@hookimpl
def pbf_force_models():
    return [PluginInfo("mj_actuators", "MuJoCo actuators (motor, position, velocity, general affine; joint, "
                       "tendon and site transmissions) driven by ctrl, the step's input u", MjActuators)]
