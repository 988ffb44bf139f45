"""Verdicts: what a step and a rollout report about themselves, and the tests that decide them.

A run that fails says so. Every step ends with an :class:`Outcome` (converged, converged after halving,
unconverged) and the residual it ended at; every rollout ends with a :class:`Status`:

* ``ok`` -- every step converged and no divergence test fired;
* ``unconverged`` -- a step did not converge even after its halvings. Under the default failure policy
  (:class:`FailurePolicy` ``stop``) the run ends there and keeps everything before that step; under
  ``continue`` it keeps the unconverged result and goes on, and the status says so at the end;
* ``diverged`` -- the :class:`DivergenceTest` fired: a state that is not finite, a speed above
  ``max_speed``, or, for a model with no energy input, a total energy above its start by more than
  ``energy_limit`` percent of the energy scale. The run ends before that state.

The energy test applies when every force model declares ``energy_input = False`` (gravity, springs,
damping, drag, penalty contact): such a system can only keep or lose energy, so energy gained beyond the
limit is the integrator's, not the physics'. The default limit, :data:`DEFAULT_ENERGY_LIMIT`, is the whole
energy scale (for CHAIN-N the potential drop from horizontal to hanging): a chain that gains that much has
left every meaningful answer behind (``benchmarks/energy.py`` applies the same rule to every method).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

DEFAULT_ENERGY_LIMIT = 100.0
"""Default ``energy_limit`` of a :class:`~pbframework.simulate.Simulator`, in percent of the energy scale."""


class Status(str, enum.Enum):
    """How a rollout ended (:attr:`pbframework.result.Trajectory.status`).

    Attributes:
        OK: every step converged, no divergence test fired.
        UNCONVERGED: a step did not converge after its halvings (the run stopped there under the ``stop``
            policy, or went on under ``continue``).
        DIVERGED: a state was not finite, a speed exceeded ``max_speed``, or (no energy input) the energy
            rose above its start by more than ``energy_limit``; the run ended before that state.
    """

    OK = "ok"
    UNCONVERGED = "unconverged"
    DIVERGED = "diverged"


class Outcome(enum.IntEnum):
    """One step's verdict (``stats["outcome"]`` of a trajectory).

    Attributes:
        CONVERGED: the step's solve converged at the full step.
        HALVED: it converged after being retried as two half steps (``stats["depth"]`` levels deep).
        UNCONVERGED: some solve of it did not converge at the deepest halving level allowed.
    """

    CONVERGED = 0
    HALVED = 1
    UNCONVERGED = 2


class FailurePolicy(str, enum.Enum):
    """What a rollout does with a step that is still unconverged after its halvings.

    Halving comes first and is set by ``max_halvings`` (default 4; 0 disables it): an unconverged step
    is retried as two half steps, recursively (seed 001 Alg. 2's subdivision idea), the state re-expressed
    for the shorter step without dynamics and without gaining kinetic energy.

    Attributes:
        STOP: end the rollout before that step, status ``unconverged``; everything up to it is kept and
            the failed step's statistics are in ``info["failure"]`` (the default).
        CONTINUE: keep the unconverged result, record it (``stats["outcome"]``) and go on; the status
            is ``unconverged`` at the end.
        RAISE: raise :class:`pbframework.simulate.StepFailure`.
    """

    STOP = "stop"
    CONTINUE = "continue"
    RAISE = "raise"

    @classmethod
    def parse(cls, value: Any) -> "FailurePolicy":
        """``value`` as a policy; the names of earlier versions and unknown names raise ``ValueError``."""
        if isinstance(value, cls):
            return value
        allowed = ", ".join(repr(p.value) for p in cls)
        if value in ("halve", "record"):
            raise ValueError(f"on_failure={value!r} is no longer a policy: halving is max_halvings (default 4; 0 "
                             f"= never halve), and on_failure says what happens after it ({allowed})")
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"on_failure: {value!r} is not a valid FailurePolicy (allowed: {allowed})") from None


def outcomes(converged: np.ndarray, halvings: np.ndarray) -> np.ndarray:
    """Per-step :class:`Outcome` codes (int8) from the ``converged`` and ``halvings`` statistics."""
    conv = np.asarray(converged, bool)
    out = np.where(np.asarray(halvings) > 0, Outcome.HALVED, Outcome.CONVERGED).astype(np.int8)
    out[~conv] = Outcome.UNCONVERGED
    return out


def energy_conserving(forces: Iterable[Any]) -> bool:
    """Whether no force model in ``forces`` can add energy (every one declares ``energy_input = False``)."""
    return all(getattr(f, "energy_input", True) is False for f in forces)


@dataclass(frozen=True)
class DivergenceTest:
    """The divergence test of a rollout.

    Attributes:
        nq: configuration size (states are ``[q; qd; ...]``).
        max_speed: largest allowed ``|qd|`` (rad/s or m/s).
        energy_limit: largest allowed energy above ``energy0`` in joules, or None (no energy test).
        energy0: the start's exact energy in joules.
        nv: velocity size (default ``nq``; smaller for models with ``ball`` / ``free`` joints).
    """

    nq: int
    max_speed: float
    energy_limit: float | None = None
    energy0: float = 0.0
    nv: int | None = None

    def first_bad(self, states: np.ndarray, energy: np.ndarray | None = None) -> tuple[int | None, str | None]:
        """The index of the first row of ``states`` (rows ``[q; qd; ...]``) that fails the test and why
        (``"non_finite"``, ``"speed"``, ``"energy"``), or ``(None, None)``. ``energy`` (the rows' total
        energies) is needed where the energy test applies."""
        states = np.atleast_2d(states)
        nq = self.nq
        nv = nq if self.nv is None else self.nv
        qq = states[:, :nq + nv]
        with np.errstate(invalid="ignore"):
            finite = np.all(np.isfinite(qq), axis=1)
            speed = np.max(np.abs(np.nan_to_num(states[:, nq:nq + nv], nan=np.inf)), axis=1,
                           initial=0.0) > self.max_speed
            energy_bad = np.zeros(len(states), bool)
            if self.energy_limit is not None and energy is not None:
                e = np.asarray(energy, float)
                energy_bad = ~(e - self.energy0 <= self.energy_limit)     # nan counts as bad
        bad = ~finite | speed | energy_bad
        if not bad.any():
            return None, None
        i = int(np.argmax(bad))
        return i, ("non_finite" if not finite[i] else "speed" if speed[i] else "energy")


REASON_TEXT = {"non_finite": "a state that is not finite", "speed": "a speed above max_speed",
               "energy": "energy above its start by more than the energy limit"}


ENERGY_BEHAVIOURS = {"conserves": "conserves energy (to an error that shrinks with the step)",
                     "dissipates": "dissipates energy", "drifts": "lets energy drift (either way, growing with time)"}


def expected_energy(behaviour: Any, order: int | None, forces: Iterable[Any]) -> str:
    """What the energy of a run is expected to do, in words: from the integrator's ``meta["energy"]``
    (a word of :data:`ENERGY_BEHAVIOURS` or a function of the order) and the force models (one with an
    energy input: no expectation; a dissipative one turns "conserves" into "dissipates")."""
    forces = list(forces)
    if any(getattr(f, "energy_input", True) for f in forces):
        names = [getattr(f, "name", str(f)) for f in forces if getattr(f, "energy_input", True)]
        return f"none: {', '.join(names)} can add energy"
    b = behaviour(order) if callable(behaviour) else behaviour
    if b not in ENERGY_BEHAVIOURS:
        return "not stated by the integrator"
    dissipative = [getattr(f, "name", str(f)) for f in forces if getattr(f, "dissipative", False)]
    verb = f"{', '.join(dissipative)} dissipate{'s' if len(dissipative) == 1 else ''}"
    if b == "conserves" and dissipative:
        return f"falls ({verb})"
    return "the integrator " + ENERGY_BEHAVIOURS[b] + (f", and {verb}" if dissipative else "")
