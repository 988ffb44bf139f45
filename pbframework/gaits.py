"""Periodic joint targets for tracking controllers (seed 001 §VI: quadrupeds tracking walk and jump targets with
stable PD), and the walk / jump targets of the QUADRUPED-TRACK benchmark for the spider and solo12.

:class:`PeriodicTarget` turns ``K`` poses, equally spaced over one period, into a smooth periodic signal: the
trigonometric interpolant through them (the unique sum of the first ``K // 2`` harmonics that passes through
every pose), written in CasADi, so it is a ``target`` for ``pd`` / ``stable_pd`` and differentiable in time::

    walk = PeriodicTarget(poses, period=0.6)             # poses: K x n, n = the controlled coordinates
    forces = [..., ("stable_pd", {"kp": 5.0, "kd": 0.2, "target": walk, "dofs": dofs, "track_velocity": True})]

:func:`quadruped_targets` gives the benchmark's targets: ``walk`` (a trot: diagonal legs swing together, the
swing leg's knee folds to lift the foot while its hip swings forward, the stance leg's hip sweeps back) and
``jump`` (all legs crouch slowly, hold, then extend fast past the standing pose and return, once per period: 5
jumps in 10 s at the default period of 2 s).
"""

from __future__ import annotations

import math
from typing import Sequence

import casadi as ca
import numpy as np

from .model import ArticulatedBody

__all__ = ["PeriodicTarget", "quadruped_targets", "LEG_JOINTS"]


class PeriodicTarget:
    """A smooth periodic target through ``poses`` (K x n) at times ``k period / K``, ``k = 0 .. K-1``.

    Calling it with a time (a number or a CasADi symbol) returns the n-vector target; :meth:`velocity` its time
    derivative. ``K >= 2``; with even ``K`` the highest harmonic is the cosine one (the standard real
    trigonometric interpolant).

    Raises:
        ValueError: poses not a non-empty K x n array of finite numbers with K >= 2, a period that is not a
            positive finite number, or ``n`` given and different from the poses' width.
    """

    def __init__(self, poses: Sequence[Sequence[float]], period: float, *, n: int | None = None) -> None:
        try:
            P = np.asarray(poses, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"PeriodicTarget: poses must be a K x n array of numbers (one row per keyframe, "
                             f"rows of equal length), got {poses!r}") from None
        if P.ndim == 1:
            P = P[:, None]
        if P.ndim != 2 or P.shape[0] < 2 or P.shape[1] < 1 or not np.all(np.isfinite(P)):
            raise ValueError(f"PeriodicTarget: poses must be a K x n array of finite numbers with K >= 2 keyframes, "
                             f"got shape {P.shape}")
        if n is not None and P.shape[1] != n:
            raise ValueError(f"PeriodicTarget: each pose has {P.shape[1]} entries but the target is for {n} "
                             f"coordinates")
        if isinstance(period, bool) or not isinstance(period, (int, float, np.floating)) or \
                not math.isfinite(period) or period <= 0:
            raise ValueError(f"PeriodicTarget: period must be a positive finite number of seconds, got {period!r}")
        self.poses, self.period = P, float(period)
        K = P.shape[0]
        F = np.fft.rfft(P, axis=0) / K                     # (K//2 + 1) x n
        self._c0 = F[0].real
        self._a, self._b = [], []
        for k in range(1, K // 2 + 1):
            scale = 1.0 if (K % 2 == 0 and k == K // 2) else 2.0
            self._a.append(scale * F[k].real)
            self._b.append(-scale * F[k].imag)
        self.size = P.shape[1]

    def __call__(self, t):
        w = 2 * math.pi / self.period
        out = ca.DM(self._c0)
        for k, (a, b) in enumerate(zip(self._a, self._b), start=1):
            out = out + ca.DM(a) * ca.cos(k * w * t) + ca.DM(b) * ca.sin(k * w * t)
        return out

    def velocity(self, t):
        """The target's time derivative at ``t``."""
        w = 2 * math.pi / self.period
        out = ca.DM.zeros(self.size)
        for k, (a, b) in enumerate(zip(self._a, self._b), start=1):
            out = out + k * w * (-ca.DM(a) * ca.sin(k * w * t) + ca.DM(b) * ca.cos(k * w * t))
        return out

    def __repr__(self) -> str:
        return f"PeriodicTarget({self.poses.shape[0]} poses of {self.size}, period={self.period})"


# -- the QUADRUPED-TRACK targets ---------------------------------------------------------------------------------

LEG_JOINTS = {
    "spider": [(f"hip{k}:ry", f"hip{k}:rz", f"knee{k}") for k in range(4)],
    "solo12": [(f"{leg}_HFE", f"{leg}_HAA", f"{leg}_KFE") for leg in ("FL", "FR", "HL", "HR")],
}
"""Per leg (lift / swing / knee) coordinates; legs in the order front-left, front-right, hind-left, hind-right
for solo12 and the spider's corners 0..3 (+x+y, -x+y, -x-y, +x-y)."""


def _robot(model: ArticulatedBody) -> str:
    names = set(model.dof_names)
    for robot, legs in LEG_JOINTS.items():
        if all(c in names for leg in legs for c in leg):
            return robot
    raise ValueError(f"quadruped_targets: model {model.name!r} is neither the spider (pbframework.models.spider) "
                     f"nor solo12 (pbframework.models.solo12): it lacks their leg coordinates")


def quadruped_targets(model: ArticulatedBody, task: str, *, period: float | None = None,
                      amplitude: float = 1.0, keyframes: int | None = None) -> tuple[list[str], PeriodicTarget]:
    """The ``walk`` or ``jump`` target of QUADRUPED-TRACK for the spider or solo12.

    Returns:
        ``(dofs, target)``: the controlled coordinate names and the :class:`PeriodicTarget` (default period:
        walk 0.6 s, jump 2 s).
    """
    if task not in ("walk", "jump"):
        raise ValueError(f"quadruped_targets: task must be 'walk' or 'jump', got {task!r}")
    robot = _robot(model)
    legs = LEG_JOINTS[robot]
    period = (0.6 if task == "walk" else 2.0) if period is None else period
    keyframes = (16 if task == "walk" else 50) if keyframes is None else keyframes
    phase = 2 * np.pi * np.arange(keyframes) / keyframes
    if robot == "spider":
        # hip:ry < 0 raises the thigh; hip:rz swings the leg about the vertical; knee > 0 folds the shin down
        stand = np.array([-0.5, 0.0, 1.4])
        forward = [-1, -1, 1, 1]     # sign of hip:rz that moves each corner's foot toward +x
        first = (0, 2)               # diagonal pairs: corners 0 and 2, 1 and 3
    else:
        first = (0, 3)               # diagonal pairs: FL and HR, FR and HL
    rows = []
    for ph in phase:
        pose = []
        for k, leg in enumerate(legs):
            front = k < 2
            if robot == "spider":
                base = stand
            else:   # solo12: HFE / KFE 0.8 / -1.6 on the front legs, -0.8 / 1.6 on the hind ones; HAA 0
                base = np.array([0.8, 0.0, -1.6]) if front else np.array([-0.8, 0.0, 1.6])
            if task == "walk":
                diag = 0.0 if k in first else np.pi               # trot: diagonal legs together
                a = ph + diag
                up = max(0.0, math.sin(a)) ** 2                  # lift during the first half of the leg's cycle
                if robot == "spider":
                    d = amplitude * np.array([-0.35 * up, -0.3 * forward[k] * math.cos(a), -0.4 * up])
                else:
                    sign = 1.0 if front else -1.0
                    # HFE swings the foot forward (solo12's +x) while the knee folds (lift)
                    d = amplitude * np.array([0.35 * math.cos(a) + 0.3 * up * sign, 0.0, -0.6 * up * sign])
            else:
                u = ph / (2 * np.pi)                               # fraction of the period
                if u < 0.6:                                        # crouch slowly
                    crouch = 0.5 * (1 - math.cos(np.pi * u / 0.6))
                elif u < 0.7:                                      # hold
                    crouch = 1.0
                elif u < 0.78:                                     # extend fast, past the standing pose
                    crouch = 1.0 - 1.6 * 0.5 * (1 - math.cos(np.pi * (u - 0.7) / 0.08))
                else:                                              # back to standing
                    crouch = -0.6 * 0.5 * (1 + math.cos(np.pi * (u - 0.78) / 0.22))
                if robot == "spider":
                    d = amplitude * crouch * np.array([0.3, 0.0, 0.5])
                else:
                    sign = 1.0 if front else -1.0
                    d = amplitude * crouch * sign * np.array([0.4, 0.0, -0.8])
            pose.extend((base + d).tolist())
        rows.append(pose)
    dofs = [c for leg in legs for c in leg]
    return dofs, PeriodicTarget(rows, period, n=len(dofs))
