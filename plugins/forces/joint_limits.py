"""Joint limits: a smooth one-sided spring and damper holding revolute and prismatic joints inside their
declared position limits (``Joint.lower`` / ``Joint.upper``, from URDF ``<limit>`` or MJCF ``range``).

For a coordinate ``q`` with limits ``[lo, hi]`` the penetrations ``d = q - hi`` and ``d = lo - q`` enter
through the smooth positive part and its derivative, the smooth step,

    p(d) = (d + sqrt(d^2 + w^2)) / 2,        s(d) = p'(d) = (1 + d / sqrt(d^2 + w^2)) / 2,

``p`` being ``d`` beyond the limit, ``w/2`` on it and ``w^2 / (4 |d|)`` inside (the spring's pull a distance
``|d|`` inside is ``k w^4 / (16 |d|^3)``: 6e-12 k at 0.01 rad with the default width), and infinitely differentiable,
so Newton-type solvers, exact derivatives and generated code see a smooth problem. Over a side with an
infinite limit nothing acts. The forms, with stiffness ``k`` and damping ``b`` per coordinate:

* ``energy``, a spring (conservative): ``V(q) = k/2 sum_sides p(d)^2``;
* potential (PBAD, seed 000 Eq. 5): ``Q = V(q_{k+1}) + b / (2 dt) sum_sides s(d(q_k)) (q_{k+1} - q_k)^2``,
  whose gradient in ``q_{k+1}`` is the spring at the end of the step plus the damper at the backward-Euler
  velocity (implicit, as ``joint_damping``), switched on by where the step starts;
* generalised force: ``-dV/dq - b sum_sides s(d(q)) qd``.

The damper only takes energy out and the spring only stores it, so ``energy_input`` is ``False``.

By default ``k`` and ``b`` scale with each joint's effective inertia (see :class:`JointLimits`). The
defaults (:data:`FREQUENCY`, :data:`DAMPING_RATIO`, :data:`WIDTH`) were chosen on the panda of
example-robot-data under gravity, from its zero configuration clipped into the limits, for 2 s
(``pbf simulate --model panda.urdf --integrator pbad --order 2 --dt 0.01 --duration 2``). Worst excess
measured at PBAD order 2, dt = 0.01 s: 0.0048 rad / 0.70 mm at omega = 400 rad/s, 0.0031 rad / 0.33 mm at
600 (the default), 0.0018 rad / 0.19 mm at 800, with 3 to 4 solver iterations per step on average; RK4 at
1 ms stays stable at 600 and 800, at 4 ms only at 400. Finer steps let the arm move faster into its
limits: at dt = 0.002 s (PBAD) or 1 ms (RK4) the default lets a joint pass by up to 0.03 rad.
"""

from __future__ import annotations

from typing import Any

import casadi as ca
import numpy as np

from pbframework.dynamics import crba
from pbframework.forces import ForceForm, ForceModel
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.limits import LimitedCoordinate, clip_to_limits, limited_coordinates
from pbframework.model import ArticulatedBody

from ._common import DofSpec, cached_function, check_dof_spec, finite_number, fit_length, gain_vector, resolve_dofs


def effective_inertia(model: ArticulatedBody) -> np.ndarray:
    """Per coordinate, ``1 / (M^-1)_jj`` of the mass matrix at the zero configuration clipped into the
    limits: the inertia coordinate ``j`` meets with every other joint free (kg m^2 or kg)."""
    M = np.array(crba(model)(clip_to_limits(model, model.neutral())))
    return 1.0 / np.diag(np.linalg.inv(M))

FREQUENCY = 600.0
"""Default natural frequency ``omega`` (rad/s) of a joint against its limit spring."""

DAMPING_RATIO = 1.0
"""Default damping ratio ``zeta`` of the damper past a limit (1: critical)."""

WIDTH = 1e-4
"""Default width ``w`` of the smooth onset (rad or m)."""


def _plus(d, w):
    """The smooth positive part ``p(d)``."""
    return 0.5 * (d + ca.sqrt(d * d + w * w))


def _step(d, w):
    """The smooth step ``s(d) = p'(d)``."""
    return 0.5 * (1.0 + d / ca.sqrt(d * d + w * w))


class JointLimits(ForceModel):
    """A smooth one-sided spring and damper at the position limits of revolute and prismatic joints.

    By default each joint's spring and damper are scaled by its effective inertia ``m`` (``1 / (M^-1)_jj``
    of the mass matrix at the zero configuration clipped into the limits: the inertia the joint meets
    with every other joint free), so every joint meets its limit with the same natural frequency
    ``omega`` and damping ratio ``zeta`` -- as MuJoCo's ``solref`` (time constant, damping ratio) makes
    its limits. A light wrist gets a soft spring and a heavy shoulder a stiff one, and an explicit
    integrator stays stable against the limits up to about ``dt = 2 / omega`` (3 ms at the default).

    Args:
        stiffness: spring constant ``k`` >= 0 past a limit (N m / rad, or N / m on prismatic joints); a scalar
            or one value per limited coordinate. Default ``None``: ``k = omega^2 m`` per joint.
        damping: damping ``b`` >= 0 past a limit (N m s / rad, or N s / m); a scalar or one per coordinate.
            Default ``None``: ``b = 2 zeta omega m`` per joint.
        frequency: ``omega`` (rad/s, > 0) of the default stiffness and damping.
        damping_ratio: ``zeta`` (>= 0) of the default damping.
        width: width ``w`` > 0 of the smooth onset (rad or m; see the module docstring).
        dofs: the limited coordinates to act on (coordinate names, joint names or indices); ``None`` = every
            revolute or prismatic coordinate with a finite limit.
    """

    name = "joint_limits"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})
    energy_input = False
    group = True

    def __init__(self, stiffness: Any = None, damping: Any = None, frequency: float = FREQUENCY,
                 damping_ratio: float = DAMPING_RATIO, width: float = WIDTH, *, dofs: DofSpec = None) -> None:
        self.stiffness = None if stiffness is None else gain_vector(self.name, "stiffness", stiffness)
        self.damping = None if damping is None else gain_vector(self.name, "damping", damping)
        self.frequency = finite_number(self.name, "frequency", frequency, minimum=0.0, strict=True)
        self.damping_ratio = finite_number(self.name, "damping_ratio", damping_ratio, minimum=0.0)
        self.width = finite_number(self.name, "width", width, minimum=0.0, strict=True)
        self.dofs = check_dof_spec(self.name, dofs)

    def params(self) -> dict[str, Any]:
        return {"stiffness": None if self.stiffness is None else self.stiffness.tolist(),
                "damping": None if self.damping is None else self.damping.tolist(), "frequency": self.frequency,
                "damping_ratio": self.damping_ratio, "width": self.width,
                "dofs": None if self.dofs is None else list(self.dofs)}

    # -- model-dependent set-up -------------------------------------------------------------------------
    def coordinates(self, model: ArticulatedBody) -> list[LimitedCoordinate]:
        """The limited coordinates this force acts on (validated against ``model``)."""
        limited = {c.index: c for c in limited_coordinates(model)}
        if not limited:
            raise ValueError(f"{self.name}: model {model.name!r} has no joint with position limits (joint_limits "
                             f"acts on revolute and prismatic joints with a URDF <limit> or an MJCF range)")
        if self.dofs is None:
            coords = list(limited.values())
        else:
            idx = resolve_dofs(self.name, model, self.dofs)
            free = [model.dof_names[i] for i in idx if i not in limited]
            if free:
                raise ValueError(f"{self.name}: coordinates {', '.join(free)} of model {model.name!r} have no "
                                 f"position limits (limited: {', '.join(c.name for c in limited.values())})")
            coords = [limited[i] for i in idx]
        names = [c.name for c in coords]
        for label, given in (("stiffness", self.stiffness), ("damping", self.damping)):
            if given is not None:
                fit_length(self.name, label, given, len(coords), names)
        return coords

    def gains(self, model: ArticulatedBody) -> tuple[list[LimitedCoordinate], np.ndarray, np.ndarray]:
        """The coordinates with their stiffness and damping (the defaults computed from ``model``)."""
        def build():
            coords = self.coordinates(model)
            names = [c.name for c in coords]
            m = effective_inertia(model)[[c.velocity for c in coords]]
            k = (self.frequency ** 2 * m if self.stiffness is None
                 else fit_length(self.name, "stiffness", self.stiffness, len(coords), names))
            b = (2.0 * self.damping_ratio * self.frequency * m if self.damping is None
                 else fit_length(self.name, "damping", self.damping, len(coords), names))
            return coords, k, b

        return cached_function(model, self, "gains", build)

    def _sides(self, model: ArticulatedBody, q) -> list[tuple[int, Any, float, float]]:
        """``(index, penetration d(q), k, b)`` for every finite limit this force holds."""
        return [(c.index, d, k, b) for c, d, k, b in self._limits(model, q)]

    def _limits(self, model: ArticulatedBody, q) -> list[tuple[Any, Any, float, float]]:
        """``(coordinate, penetration d(q), k, b)`` for every finite limit this force holds."""
        coords, k, b = self.gains(model)
        out = []
        for c, kc, bc in zip(coords, k, b):
            if c.upper < float("inf"):
                out.append((c, q[c.index] - c.upper, float(kc), float(bc)))
            if c.lower > float("-inf"):
                out.append((c, c.lower - q[c.index], float(kc), float(bc)))
        return out

    def _spring(self, model: ArticulatedBody, q):
        return sum((0.5 * k * _plus(d, self.width) ** 2 for _, d, k, _ in self._sides(model, q)), ca.SX(0))

    # -- forms --------------------------------------------------------------------------------------------
    def energy(self, model, q):
        def build() -> ca.Function:
            qs = ca.SX.sym("q", model.nq)
            return ca.Function("joint_limits_V", [qs], [self._spring(model, qs)], ["q"], ["V"])

        return cached_function(model, self, "V", build)(q)

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        def build() -> ca.Function:
            qn, qc, h = ca.SX.sym("q_next", model.nq), ca.SX.sym("q_cur", model.nq), ca.SX.sym("dt")
            Q = self._spring(model, qn)
            for i, d, _, b in self._sides(model, qc):
                Q = Q + b * _step(d, self.width) * (qn[i] - qc[i]) ** 2 / (2 * h)
            return ca.Function("joint_limits_Q", [qn, qc, h], [Q], ["q_next", "q_cur", "dt"], ["Q"])

        return cached_function(model, self, "Q", build)(q_next, q_cur, dt)

    def generalized_force(self, model, q, qd, t):
        def build() -> ca.Function:
            qs, qds = ca.SX.sym("q", model.nq), ca.SX.sym("qd", model.nv)
            g = -ca.gradient(self._spring(model, qs), qs)
            if model.on_group:        # hinge / slide coordinates only: their q and v entries coincide
                f = ca.SX.zeros(model.nv)
                for c in self.coordinates(model):
                    f[c.velocity] = g[c.index]
            else:
                f = g
            for c, d, _, b in self._limits(model, qs):
                f[c.velocity] = f[c.velocity] - b * _step(d, self.width) * qds[c.velocity]
            return ca.Function("joint_limits_f", [qs, qds], [f], ["q", "qd"], ["f"])

        return cached_function(model, self, "f", build)(q, qd)


class TendonLimits(ForceModel):
    """The same smooth one-sided spring and damper on the lengths of tendons (MJCF tendon ``range``): fixed
    tendons (``l = sum_i c_i q_i`` over hinge and slide coordinates) and spatial ones (sites, pulleys, wrapping
    geoms: :mod:`pbframework.tendons`). A limit acts along the tendon's moment ``J = dl/dq`` with the tendon's
    effective inertia ``1 / (J M^-1 J^T)`` at the neutral configuration.

    Args:
        tendons: one mapping per tendon: a :mod:`pbframework.tendons` spec (``name`` and ``joints``
            ``{coordinate name: coefficient}`` or ``path``), ``lower`` and ``upper`` (either may be infinite).
        frequency, damping_ratio, width: as :class:`JointLimits`.
    """

    name = "tendon_limits"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})
    energy_input = False
    group = True

    def __init__(self, tendons=(), frequency: float = FREQUENCY, damping_ratio: float = DAMPING_RATIO,
                 width: float = WIDTH) -> None:
        from pbframework.tendons import check_tendon

        if isinstance(tendons, (str, dict)) or not tendons:
            raise ValueError(f"{self.name}: tendons must be a non-empty list of mappings, got {tendons!r}")
        self.tendons = []
        for t in tendons:
            if not isinstance(t, dict) or "lower" not in t or "upper" not in t:
                raise ValueError(f"{self.name}: each tendon needs lower and upper, got {t!r}")
            lo, hi = float(t["lower"]), float(t["upper"])
            if not lo <= hi:
                raise ValueError(f"{self.name}: tendon {t.get('name')!r} needs lower <= upper, got {t!r}")
            spec = check_tendon(self.name, {k: v for k, v in t.items() if k not in ("lower", "upper")})
            self.tendons.append({**spec, "lower": lo, "upper": hi})
        self.frequency = finite_number(self.name, "frequency", frequency, minimum=0.0, strict=True)
        self.damping_ratio = finite_number(self.name, "damping_ratio", damping_ratio, minimum=0.0)
        self.width = finite_number(self.name, "width", width, minimum=0.0, strict=True)

    def params(self) -> dict[str, Any]:
        return {"tendons": [dict(t) for t in self.tendons], "frequency": self.frequency,
                "damping_ratio": self.damping_ratio, "width": self.width}

    def _setup(self, model: ArticulatedBody) -> list[tuple[dict, float, float, float, float]]:
        """Per tendon: (spec, lower, upper, k, b)."""
        def build():
            from pbframework.tendons import tendon_moment

            q0 = clip_to_limits(model, model.neutral())
            M = np.array(crba(model)(q0))
            qs = ca.SX.sym("q", model.nq)
            out = []
            for t in self.tendons:
                if "joints" in t:
                    resolve_dofs(self.name, model, tuple(t["joints"]))
                J = np.array(ca.Function("J", [qs], [tendon_moment(model, t, qs)[1]])(q0)).reshape(-1)
                m = 1.0 / float(J @ np.linalg.solve(M, J))
                out.append((t, t["lower"], t["upper"], self.frequency ** 2 * m,
                            2.0 * self.damping_ratio * self.frequency * m))
            return out

        return cached_function(model, self, "setup", build)

    def _sides(self, model: ArticulatedBody, q, moment: bool = False):
        """``(tendon, length, moment or None, penetration d(q), k, b, sign)`` for every finite tendon limit."""
        from pbframework.tendons import tendon_length, tendon_moment

        out = []
        for t, lo, hi, k, b in self._setup(model):
            length, J = tendon_moment(model, t, q) if moment else (tendon_length(model, t, q), None)
            if hi < float("inf"):
                out.append((t, length, J, length - hi, k, b, 1.0))
            if lo > float("-inf"):
                out.append((t, length, J, lo - length, k, b, -1.0))
        return out

    def energy(self, model, q):
        def build() -> ca.Function:
            qs = ca.SX.sym("q", model.nq)
            V = sum((0.5 * k * _plus(d, self.width) ** 2 for *_, d, k, _b, _s in self._sides(model, qs)), ca.SX(0))
            return ca.Function("tendon_limits_V", [qs], [V], ["q"], ["V"])

        return cached_function(model, self, "V", build)(q)

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        def build() -> ca.Function:
            from pbframework.tendons import tendon_length

            qn, qc, h = ca.SX.sym("q_next", model.nq), ca.SX.sym("q_cur", model.nq), ca.SX.sym("dt")
            Q = self.energy(model, qn)
            for tn, lc, _, d, _k, b, _s in self._sides(model, qc):     # the damper switched on where the step starts
                dl = tendon_length(model, tn, qn) - lc
                Q = Q + b * _step(d, self.width) * dl ** 2 / (2 * h)
            return ca.Function("tendon_limits_Q", [qn, qc, h], [Q], ["q_next", "q_cur", "dt"], ["Q"])

        return cached_function(model, self, "Q", build)(q_next, q_cur, dt)

    def generalized_force(self, model, q, qd, t):
        def build() -> ca.Function:
            qs, qds = ca.SX.sym("q", model.nq), ca.SX.sym("qd", model.nv)
            f = ca.SX.zeros(model.nv)
            for _, _, J, d, k, b, sign in self._sides(model, qs, moment=True):
                push = -sign * k * _plus(d, self.width) * _step(d, self.width) - b * _step(d, self.width) * ca.dot(J, qds)
                f = f + J * push
            return ca.Function("tendon_limits_f", [qs, qds], [f], ["q", "qd"], ["f"])

        return cached_function(model, self, "f", build)(q, qd)


@hookimpl
def pbf_force_models():
    return [PluginInfo("joint_limits", "smooth one-sided spring and damper at revolute / prismatic joint limits",
                       JointLimits),
            PluginInfo("tendon_limits", "the same one-sided spring and damper on the lengths of fixed and spatial tendons "
                       "(MJCF tendon range)", TendonLimits)]
