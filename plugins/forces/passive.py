"""Passive joint forces of MuJoCo models (issue 25): joint springs, gravity compensation, dry joint friction.

:func:`~pbframework.io.load_mjcf` adds them to ``model.default_forces`` from MJCF's ``stiffness`` /
``springref``, ``gravcomp`` and ``frictionloss`` (viscous ``damping`` is :mod:`.damping`'s
``joint_damping``). Each is a plug-in like any other force model and may be used on its own.

- ``joint_stiffness``: ``tau = -k (q - q_ref)`` on hinge and slide coordinates (MuJoCo's ``stiffness`` about
  ``springref``). Conservative: potential ``V = 1/2 k (q - q_ref)^2`` (stored energy, in :meth:`energy`).
- ``gravity_compensation``: MuJoCo's ``gravcomp``: on each listed link the force ``-c m g`` at its centre of
  mass (``c = 1`` cancels gravity on that link). Conservative: ``V = sum c m g . x_com(q)``. With ``joints``
  it acts on those joints' coordinates only (MuJoCo's passive share where other joints say
  ``actuatorgravcomp``: their share is ``mj_actuators``'): no longer a gradient, it then offers the
  generalised-force form only.
- ``joint_friction``: dry friction of magnitude ``f`` on hinge and slide coordinates, regularised as
  ``tau = -f tanh(qd / v_s)`` with the smoothing velocity ``v_s`` (``smoothing``, default 1e-3 rad/s or m/s):
  below ``v_s`` the joint creeps instead of sticking exactly. MuJoCo's ``frictionloss`` is a constraint
  (exact sticking, solved with its contacts); this is its smooth stand-in and matches it only where
  ``|qd| >> v_s``. Its potential form is ``Q = f v_s dt log cosh((q_{k+1} - q_k) / (v_s dt))``, whose
  gradient is the friction at the backward-Euler velocity: implicit and dissipative, like ``joint_damping``.
- ``tendon_passive``: MuJoCo's tendon springs and dampers (MJCF tendon ``stiffness``, ``springlength``,
  ``damping``) on fixed and spatial tendons (:mod:`pbframework.tendons`): with the length ``L(q)``, the
  moment ``J = dL/dq`` and ``V = J v``, the tension ``F = -k x - b V`` where ``x`` is ``L``'s distance outside
  the deadband ``springlength = [low, high]`` (``L - high`` above, ``L - low`` below, 0 within), and
  ``tau = J F`` (MuJoCo's ``mj_passive``).
- ``tendon_friction``: MJCF tendon ``frictionloss`` as ``joint_friction`` treats a joint's: the tension
  ``F = -f tanh(V / v_s)`` along the moment, ``tau = J F`` (MuJoCo's is a constraint; the same smooth stand-in).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import casadi as ca
import numpy as np

from pbframework.forces import ForceForm, ForceModel, tangent_gradient
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.kinematics import link_poses
from pbframework.model import ArticulatedBody

from ._common import (DofSpec, cached_function, check_dof_spec, finite_number, fit_length, gain_vector, gather,
                      resolve_dofs, scatter, velocity_indices)


def _values(who: str, name: str, value: Any) -> np.ndarray:
    """A scalar or a list of finite numbers (any sign) as a 1-D array."""
    try:
        a = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: {name} must be a number or a list of numbers, got {value!r}") from None
    if a.size == 0 or not np.all(np.isfinite(a)):
        raise ValueError(f"{who}: {name} must be finite and non-empty, got {value!r}")
    return a


class _JointSpace(ForceModel):
    """Shared coordinate selection of the hinge / slide forces here."""

    group = True

    def _select(self, model: ArticulatedBody) -> tuple[list[int], list[int]]:
        """(indices into q, indices into v) of the selected hinge / slide coordinates."""
        idx = resolve_dofs(self.name, model, self.dofs)
        return idx, velocity_indices(self.name, model, idx)

    def _fit(self, model: ArticulatedBody, name: str, a: np.ndarray) -> ca.DM:
        idx = resolve_dofs(self.name, model, self.dofs)
        return ca.DM(fit_length(self.name, name, a, len(idx), [model.dof_names[i] for i in idx]))


class JointStiffness(_JointSpace):
    """Joint springs ``tau = -k (q - springref)`` on hinge and slide coordinates.

    Args:
        stiffness: ``k`` >= 0 (N m / rad, N / m): a scalar or one value per selected coordinate.
        springref: the spring's rest position(s): a scalar or one per coordinate (default 0).
        dofs: coordinate names, joint names or indices (default: every hinge and slide).
    """

    name = "joint_stiffness"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})
    energy_input = False

    def __init__(self, stiffness: Any = 1.0, *, springref: Any = 0.0, dofs: DofSpec = None) -> None:
        self.stiffness = gain_vector(self.name, "stiffness", stiffness)
        self.springref = _values(self.name, "springref", springref)
        self.dofs = check_dof_spec(self.name, dofs)

    def params(self) -> dict[str, Any]:
        return {"stiffness": self.stiffness.tolist(), "springref": self.springref.tolist(),
                "dofs": None if self.dofs is None else list(self.dofs)}

    def energy(self, model, q):
        def build() -> ca.Function:
            qs = ca.SX.sym("q", model.nq)
            idx, _ = self._select(model)
            k, r = self._fit(model, "stiffness", self.stiffness), self._fit(model, "springref", self.springref)
            d = gather(idx, qs) - r
            return ca.Function("joint_stiffness_V", [qs], [0.5 * ca.dot(k * d, d)], ["q"], ["V"])

        return cached_function(model, self, "V", build)(q)

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        return self.energy(model, q_next)

    def generalized_force(self, model, q, qd, t):
        def build() -> ca.Function:
            qs = ca.SX.sym("q", model.nq)
            idx, vidx = self._select(model)
            k, r = self._fit(model, "stiffness", self.stiffness), self._fit(model, "springref", self.springref)
            return ca.Function("joint_stiffness_f", [qs], [scatter(model, vidx, -k * (gather(idx, qs) - r),
                                                                   model.nv)], ["q"], ["f"])

        return cached_function(model, self, "f", build)(q)


class JointFriction(_JointSpace):
    """Dry joint friction ``tau = -f tanh(qd / v_s)`` on hinge and slide coordinates (module docstring).

    Args:
        friction: ``f`` >= 0 (N m, N): a scalar or one value per selected coordinate (MJCF ``frictionloss``).
        smoothing: ``v_s`` > 0, the velocity (rad/s, m/s) below which the friction fades linearly to zero.
        dofs: coordinate names, joint names or indices (default: every hinge and slide).
    """

    name = "joint_friction"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})
    energy_input = False
    dissipative = True

    def __init__(self, friction: Any = 0.1, *, smoothing: float = 1e-3, dofs: DofSpec = None) -> None:
        self.friction = gain_vector(self.name, "friction", friction)
        self.smoothing = finite_number(self.name, "smoothing", smoothing, minimum=0.0, strict=True)
        self.dofs = check_dof_spec(self.name, dofs)

    def params(self) -> dict[str, Any]:
        return {"friction": self.friction.tolist(), "smoothing": self.smoothing,
                "dofs": None if self.dofs is None else list(self.dofs)}

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        def build() -> ca.Function:
            qn, qc, h = ca.SX.sym("q_next", model.nq), ca.SX.sym("q_cur", model.nq), ca.SX.sym("dt")
            idx, _ = self._select(model)
            f, vs = self._fit(model, "friction", self.friction), self.smoothing
            x = (gather(idx, qn) - gather(idx, qc)) / (vs * h)
            ax = ca.fabs(x)
            logcosh = ax + ca.log1p(ca.exp(-2 * ax)) - math.log(2.0)
            return ca.Function("joint_friction_Q", [qn, qc, h], [vs * h * ca.dot(f, logcosh)],
                               ["q_next", "q_cur", "dt"], ["Q"])

        return cached_function(model, self, "Q", build)(q_next, q_cur, dt)

    def generalized_force(self, model, q, qd, t):
        def build() -> ca.Function:
            qds = ca.SX.sym("qd", model.nv)
            _, vidx = self._select(model)
            f = self._fit(model, "friction", self.friction)
            tau = -f * ca.tanh(gather(vidx, qds) / self.smoothing)
            return ca.Function("joint_friction_f", [qds], [scatter(model, vidx, tau, model.nv)], ["qd"], ["f"])

        return cached_function(model, self, "f", build)(qd)


class GravityCompensation(ForceModel):
    """MuJoCo's ``gravcomp``: on each listed link the force ``-c m g`` at its centre of mass.

    Args:
        links: ``{link name: c}`` (``c = 1`` cancels the weight of that link, ``c = 0.5`` half of it; any
            finite number).
        joints: the joints whose coordinates receive the force (default ``None``: all). A subset makes the
            force the generalised force restricted to those coordinates, which has no potential: the model
            then offers the generalised-force form only, stores no energy and may add some.
    """

    name = "gravity_compensation"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})
    energy_input = False
    group = True

    def __init__(self, links: Mapping[str, float] | None = None, *, joints: Sequence[str] | None = None) -> None:
        if not isinstance(links, Mapping) or not links:
            raise ValueError(f"{self.name}: links must be a non-empty mapping {{link name: factor}}, got {links!r}")
        self.links = {str(k): finite_number(self.name, f"links[{k!r}]", v) for k, v in links.items()}
        if joints is not None and (isinstance(joints, (str, bytes)) or not isinstance(joints, Sequence)
                                   or not all(isinstance(j, str) for j in joints)):
            raise ValueError(f"{self.name}: joints must be None or a list of joint names, got {joints!r}")
        self.joints = None if joints is None else [str(j) for j in joints]
        if self.joints is not None:
            self.forms = frozenset({ForceForm.GENERALIZED_FORCE})
            self.energy_input = True

    def params(self) -> dict[str, Any]:
        return {"links": dict(self.links), "joints": None if self.joints is None else list(self.joints)}

    def energy(self, model: ArticulatedBody, q):
        return None if self.joints is not None else self._energy(model, q)

    def _energy(self, model: ArticulatedBody, q):
        for name in self.links:
            if name not in {x.name for x in model.links}:
                raise ValueError(f"{self.name}: model {model.name!r} has no link {name!r}")
        g = ca.DM(model.gravity)
        V = 0
        for (R, p), link in zip(link_poses(model, q), model.links):
            c = self.links.get(link.name, 0.0)
            if c and link.mass > 0:
                V = V + c * link.mass * ca.dot(g, p + ca.mtimes(R, ca.DM(link.com)))
        return V

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        if self.joints is not None:
            return super().potential(model, q_next, q_cur, q_prev, dt, t)
        return self._energy(model, q_next)

    def generalized_force(self, model, q, qd, t):
        def build() -> ca.Function:
            qs = ca.SX.sym("q", model.nq)
            grad = tangent_gradient(model, self._energy, "gravity_compensation_gradient")
            f = -grad(qs)
            if self.joints is not None:
                f = f * ca.DM(joint_mask(self.name, model, self.joints))
            return ca.Function("gravity_compensation_f", [qs], [f], ["q"], ["f"])

        return cached_function(model, self, "f", build)(q)


def joint_mask(who: str, model: ArticulatedBody, joints) -> np.ndarray:
    """``nv`` numbers: 1 on the velocity coordinates of ``joints`` (names), 0 elsewhere."""
    mask = np.zeros(model.nv)
    for j in joints:
        if j not in model.joint_v_index:
            raise ValueError(f"{who}: model {model.name!r} has no joint {j!r}")
        mask[model.joint_v_index[j]] = 1.0
    return mask


class TendonPassive(ForceModel):
    """MuJoCo's tendon springs and dampers (module docstring).

    Args:
        tendons: one mapping per tendon: a :mod:`pbframework.tendons` spec (``name`` and ``joints`` or
            ``path``) with ``stiffness``, ``damping`` and ``springlength`` (``[low, high]``; ``low = high`` for
            a spring without deadband).
    """

    name = "tendon_passive"
    forms = frozenset({ForceForm.GENERALIZED_FORCE})
    group = True

    def __init__(self, tendons: Sequence[Mapping[str, Any]] = ()) -> None:
        from pbframework.tendons import check_tendon

        if isinstance(tendons, (str, Mapping)) or not tendons:
            raise ValueError(f"{self.name}: tendons must be a non-empty list of mappings, got {tendons!r}")
        self.tendons = []
        for t in tendons:
            extra = {k: t[k] for k in ("stiffness", "damping", "springlength")} if isinstance(t, Mapping) and \
                {"stiffness", "damping", "springlength"} <= set(t) else None
            if extra is None:
                raise ValueError(f"{self.name}: each tendon needs stiffness, damping and springlength, got {t!r}")
            spec = check_tendon(self.name, {k: v for k, v in t.items() if k not in extra})
            lo, hi = (float(v) for v in extra["springlength"])
            k = finite_number(self.name, "stiffness", extra["stiffness"])
            b = finite_number(self.name, "damping", extra["damping"])
            if not lo <= hi:
                raise ValueError(f"{self.name}: tendon {spec['name']!r}: springlength must be [low, high] with low "
                                 f"<= high, got {extra['springlength']!r}")
            self.tendons.append({**spec, "stiffness": k, "damping": b, "springlength": [lo, hi]})

    def params(self) -> dict[str, Any]:
        return {"tendons": [dict(t) for t in self.tendons]}

    def generalized_force(self, model, q, qd, t):
        def tension(tn, length, speed):
            lo, hi = tn["springlength"]
            x = ca.if_else(length > hi, length - hi, ca.if_else(length < lo, length - lo, 0.0))
            return -tn["stiffness"] * x - tn["damping"] * speed

        return cached_function(model, self, "f", _along_tendons(model, self.tendons, self.name, tension))(q, qd)


def _along_tendons(model, tendons, name: str, tension):
    """The builder of ``tau = sum_k J_k(q) tension(tendon_k, L_k(q), J_k(q) . qd)`` as a ``(q, qd) -> f``
    Function: a tendon force model's generalised force (``tension`` in N along each tendon)."""
    def build() -> ca.Function:
        from pbframework.tendons import tendon_moment

        qs, qds = ca.SX.sym("q", model.nq), ca.SX.sym("qd", model.nv)
        f = ca.SX.zeros(model.nv)
        for tn in tendons:
            length, J = tendon_moment(model, tn, qs)
            f = f + J * tension(tn, length, ca.dot(J, qds))
        return ca.Function(f"{name}_f", [qs, qds], [f], ["q", "qd"], ["f"])

    return build


class TendonFriction(ForceModel):
    """Dry friction on tendons, ``tau = -f tanh(V / v_s) J`` (module docstring): MJCF tendon ``frictionloss``.

    Args:
        tendons: one mapping per tendon: a :mod:`pbframework.tendons` spec with ``friction`` (``f``, N).
        smoothing: ``v_s`` (m/s), as :class:`JointFriction`'s.
    """

    name = "tendon_friction"
    forms = frozenset({ForceForm.GENERALIZED_FORCE})
    group = True

    def __init__(self, tendons: Sequence[Mapping[str, Any]] = (), *, smoothing: float = 1e-3) -> None:
        from pbframework.tendons import check_tendon

        if isinstance(tendons, (str, Mapping)) or not tendons:
            raise ValueError(f"{self.name}: tendons must be a non-empty list of mappings, got {tendons!r}")
        self.tendons = []
        for t in tendons:
            if not isinstance(t, Mapping) or "friction" not in t:
                raise ValueError(f"{self.name}: each tendon needs friction, got {t!r}")
            spec = check_tendon(self.name, {k: v for k, v in t.items() if k != "friction"})
            self.tendons.append({**spec, "friction": finite_number(self.name, "friction", t["friction"], minimum=0.0)})
        self.smoothing = finite_number(self.name, "smoothing", smoothing, minimum=0.0, strict=True)

    def params(self) -> dict[str, Any]:
        return {"tendons": [dict(t) for t in self.tendons], "smoothing": self.smoothing}

    def generalized_force(self, model, q, qd, t):
        def tension(tn, length, speed):
            return -tn["friction"] * ca.tanh(speed / self.smoothing)

        return cached_function(model, self, "f", _along_tendons(model, self.tendons, self.name, tension))(q, qd)


@hookimpl
def pbf_force_models():
    return [
        PluginInfo("joint_stiffness", "joint springs -k (q - springref) on hinges and slides (MJCF stiffness)",
                   JointStiffness),
        PluginInfo("joint_friction", "dry joint friction -f tanh(qd / v_s), a smooth stand-in for MJCF frictionloss",
                   JointFriction),
        PluginInfo("gravity_compensation", "MJCF gravcomp: -c m g at the centre of mass of listed links",
                   GravityCompensation),
        PluginInfo("tendon_passive", "MJCF tendon springs (stiffness about springlength) and dampers on fixed "
                   "and spatial tendons", TendonPassive),
        PluginInfo("tendon_friction", "dry tendon friction -f tanh(V / v_s) along the moment, a smooth stand-in "
                   "for MJCF tendon frictionloss", TendonFriction),
    ]
