"""Joint position limits: which coordinates a model limits, a start inside them, how a run kept them.

The limits are data of the model: ``Joint.lower`` / ``Joint.upper`` of revolute and prismatic joints,
read from URDF ``<limit lower upper>`` and MJCF ``range``. The ``joint_limits`` force plug-in
(:mod:`pbframework.plugins.forces.joint_limits`) holds a simulation to them, and the importers put it in
the model's ``default_forces`` so every :class:`~pbframework.simulate.Simulator` of the model uses it.
This module is what the importers, the plug-in and the report share.

::

    report = limit_report(model, traj.q, traj.t)
    print(report)      # Joint limits: all 9 limited joints within limits + 0.01 rad / 1 mm (worst ...)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from .model import ArticulatedBody, Joint, JointType

LIMIT_FORCE = "joint_limits"
"""The force model the importers add to ``default_forces`` of a model with limited joints."""

REVOLUTE_TOLERANCE = 0.01
"""How far (rad) a revolute joint may pass a limit before :class:`LimitReport` counts it as outside."""

PRISMATIC_TOLERANCE = 1e-3
"""How far (m) a prismatic joint may pass a limit before :class:`LimitReport` counts it as outside."""

_LIMITABLE = (JointType.REVOLUTE, JointType.PRISMATIC)


@dataclass(frozen=True)
class LimitedCoordinate:
    """A coordinate with a finite lower or upper limit (one side may be infinite).

    Attributes:
        index: its index in ``q``.
        name: the coordinate's (= the joint's) name.
        lower, upper: the limits (rad for revolute joints, m for prismatic ones).
        prismatic: whether the joint slides (units m) rather than turns (rad).
        velocity: its index in the velocity ``v`` (``index`` unless the model has ``ball`` / ``free`` joints).
    """

    index: int
    name: str
    lower: float
    upper: float
    prismatic: bool
    velocity: int = -1

    def __post_init__(self) -> None:
        if self.velocity < 0:
            object.__setattr__(self, "velocity", self.index)


def is_limited(joint: Joint) -> bool:
    """Whether ``joint`` is revolute or prismatic with a finite lower or upper limit."""
    return joint.type in _LIMITABLE and bool(np.isfinite(joint.lower) or np.isfinite(joint.upper))


def default_forces(joints: Iterable[Joint], limits: bool = True) -> tuple[tuple[str, dict], ...]:
    """The ``default_forces`` an importer gives a model with these joints: ``joint_limits`` (default
    parameters) where ``limits`` and some joint is limited, else nothing."""
    return ((LIMIT_FORCE, {}),) if limits and any(is_limited(j) for j in joints) else ()


def limited_coordinates(model: ArticulatedBody) -> tuple[LimitedCoordinate, ...]:
    """The model's limited coordinates, in ``q`` order."""
    return tuple(LimitedCoordinate(model.joint_q_index[j.name].start, j.name, float(j.lower), float(j.upper),
                                   j.type is JointType.PRISMATIC, model.joint_v_index[j.name].start)
                 for j in model.joints if is_limited(j))


def clip_to_limits(model: ArticulatedBody, q: Sequence[float]) -> np.ndarray:
    """``q`` with every limited coordinate moved to its nearest limit where it lies outside (a copy).

    A start outside the limits meets the limit force at full strength in the first step; the command
    line starts file models at ``clip_to_limits(model, zeros)`` for that reason (the panda's joint 4 has
    limits [-3.07, -0.07] rad, so its zero configuration lies outside).
    """
    out = model.check_state(q, "q").copy()
    for c in limited_coordinates(model):
        out[c.index] = min(max(out[c.index], c.lower), c.upper)
    return out


@dataclass(frozen=True)
class LimitReport:
    """How far a trajectory went past its model's joint limits.

    Attributes:
        coordinates: the limited coordinates.
        excess: per coordinate, the largest distance beyond either limit over the trajectory (0 inside).
        when: per coordinate, the time of that largest excess (the first, where it is 0).
    """

    coordinates: tuple[LimitedCoordinate, ...]
    excess: np.ndarray
    when: np.ndarray

    @property
    def tolerance(self) -> np.ndarray:
        """Per coordinate: :data:`PRISMATIC_TOLERANCE` or :data:`REVOLUTE_TOLERANCE`."""
        return np.array([PRISMATIC_TOLERANCE if c.prismatic else REVOLUTE_TOLERANCE for c in self.coordinates])

    @property
    def outside(self) -> list[LimitedCoordinate]:
        """The coordinates that went beyond a limit by more than their tolerance."""
        return [c for c, e, tol in zip(self.coordinates, self.excess, self.tolerance) if e > tol]

    @property
    def ok(self) -> bool:
        """Every limited coordinate stayed within its limits plus its tolerance."""
        return not self.outside

    def worst(self, prismatic: bool) -> tuple[LimitedCoordinate, float, float] | None:
        """``(coordinate, excess, when)`` of the largest excess among prismatic or revolute coordinates."""
        rows = [(c, float(e), float(w)) for c, e, w in zip(self.coordinates, self.excess, self.when)
                if c.prismatic == prismatic]
        return max(rows, key=lambda r: r[1]) if rows else None

    def __str__(self) -> str:
        n = len(self.coordinates)
        kinds = [k for k in (False, True) if self.worst(k) is not None]
        tol = " / ".join("1 mm" if k else "0.01 rad" for k in kinds)
        worst = "; ".join(_excess_text(*self.worst(k)) for k in kinds)
        if self.ok:
            return f"Joint limits: all {n} limited joints within limits + {tol} (worst excess {worst})."
        bad = ", ".join(_excess_text(c, float(self.excess[i]), float(self.when[i]))
                        for i, c in enumerate(self.coordinates) if c in self.outside)
        return f"Joint limits: {len(self.outside)} of {n} limited joints beyond limits + {tol}: {bad}."


def _excess_text(c: LimitedCoordinate, excess: float, when: float) -> str:
    amount = f"{excess * 1e3:.3g} mm" if c.prismatic else f"{excess:.3g} rad"
    return f"{amount} at {c.name}, t={when:.3g} s"


def limit_report(model: ArticulatedBody, q: np.ndarray, t: np.ndarray) -> LimitReport | None:
    """How far the configurations ``q`` (shape (n, nq), e.g. ``traj.q``) went past ``model``'s joint limits.

    Args:
        model: the model the configurations belong to.
        q: configurations, one per row.
        t: their times, shape (n,).

    Returns:
        A :class:`LimitReport` (its ``str`` is one line for a summary), or None when no joint is limited.
    """
    coords = limited_coordinates(model)
    if not coords:
        return None
    q, t = np.atleast_2d(np.asarray(q, dtype=float)), np.asarray(t, dtype=float).reshape(-1)
    if q.shape[1] != model.nq or len(t) != len(q):
        raise ValueError(f"limit_report: q must have shape (n, {model.nq}) and t shape (n,) for model "
                         f"{model.name!r}, got {q.shape} and {t.shape}")
    idx = [c.index for c in coords]
    lower = np.array([c.lower for c in coords])
    upper = np.array([c.upper for c in coords])
    beyond = np.maximum(np.maximum(q[:, idx] - upper, lower - q[:, idx]), 0.0)
    at = np.argmax(beyond, axis=0)
    return LimitReport(coords, beyond[at, np.arange(len(coords))], t[at])
