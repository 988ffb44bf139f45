"""Shared helpers of the built-in force models: parameter validation, coordinate selection, time signals.

Not a plug-in (it offers no hook). Every helper raises ``ValueError`` in the user's words: which force
model, which parameter, what was received and what is allowed.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence, Union

import casadi as ca
import numpy as np

from pbframework.model import ArticulatedBody, JointType

DofSpec = Union[None, str, int, Sequence[Union[str, int]]]
"""Coordinates a joint-space force acts on: ``None`` (every coordinate not belonging to a floating joint),
or coordinate names (``"knee0"``, ``"hip0:ry"``), joint names (all coordinates of that joint) and integer
indices into ``q``, alone or in a list."""

TimeSignal = Union[float, Sequence[float], Callable[[Any], Any]]
"""A constant (scalar or vector) or a callable ``f(t)`` building a CasADi expression from the symbol ``t``."""


def finite_number(who: str, name: str, value: Any, *, minimum: float | None = None,
                  strict: bool = False) -> float:
    """``value`` as a finite float, optionally ``>= minimum`` (``> minimum`` if ``strict``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{who}: {name} must be a number, got {value!r}")
    v = float(value)
    if not np.isfinite(v):
        raise ValueError(f"{who}: {name} must be finite, got {value!r}")
    if minimum is not None and (v <= minimum if strict else v < minimum):
        rel = ">" if strict else ">="
        raise ValueError(f"{who}: {name} must be {rel} {minimum:g}, got {value!r}")
    return v


def unit_vector(who: str, name: str, value: Any) -> np.ndarray:
    """``value`` as a unit 3-vector; ValueError (one line) unless it is 3 finite numbers, not all zero."""
    try:
        n = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        n = np.zeros(0)
    if n.shape != (3,) or not np.all(np.isfinite(n)) or np.linalg.norm(n) < 1e-12:
        raise ValueError(f"{who}: {name} must be 3 finite numbers, not all zero, got {value!r}")
    return n / np.linalg.norm(n)


def gain_vector(who: str, name: str, value: Any) -> np.ndarray:
    """A non-negative gain: a scalar (same for every selected coordinate) or one value per coordinate.

    Returns a 1-D array (length 1 for a scalar); its length is checked against the coordinates later by
    :func:`fit_length`, once the model is known.
    """
    try:
        a = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: {name} must be a number or a list of numbers (one per coordinate), got "
                         f"{value!r}") from None
    if a.size == 0 or not np.all(np.isfinite(a)):
        raise ValueError(f"{who}: {name} must be finite and non-empty, got {value!r}")
    if np.any(a < 0):
        raise ValueError(f"{who}: {name} must be >= 0 (a negative gain injects energy), got {value!r}")
    return a


def fit_length(who: str, name: str, a: np.ndarray, n: int, dof_names: Sequence[str]) -> np.ndarray:
    """Broadcast a length-1 array to ``n``; a longer one must have exactly ``n`` entries."""
    if a.size == 1:
        return np.full(n, float(a[0]))
    if a.size != n:
        raise ValueError(f"{who}: {name} has {a.size} entries but the force acts on {n} coordinates "
                         f"({', '.join(dof_names)}); give one value or {n}")
    return a


def check_dof_spec(who: str, dofs: DofSpec) -> tuple[str | int, ...] | None:
    """Normalise a :data:`DofSpec` to a tuple (or ``None``), checking element types only."""
    if dofs is None:
        return None
    items = [dofs] if isinstance(dofs, (str, numbers.Integral)) else list(dofs)
    if not items:
        raise ValueError(f"{who}: dofs is empty (give coordinate names, joint names or indices, or None "
                         f"for every actuated coordinate)")
    out: list[str | int] = []
    for d in items:
        if isinstance(d, bool) or not isinstance(d, (str, numbers.Integral)):
            raise ValueError(f"{who}: dofs entries must be coordinate names, joint names or integer "
                             f"indices, got {d!r}")
        out.append(d if isinstance(d, str) else int(d))
    return tuple(out)


def resolve_dofs(who: str, model: ArticulatedBody, dofs: tuple[str | int, ...] | None) -> list[int]:
    """Indices into ``q`` of the selected coordinates, in the order given (no duplicates)."""
    return _resolve(who, model, dofs, model.dof_names, model.joint_q_index, "coordinate",
                    (JointType.FLOATING, JointType.FREE, JointType.BALL))


def check_time_signal(who: str, name: str, value: TimeSignal) -> np.ndarray | Callable[[Any], Any]:
    """Validate a constant or a CasADi-expressible ``f(t)``; return the constant array or the callable.

    A callable is tried once on an ``SX`` symbol so a function written with NumPy or ``math`` (which cannot
    build a symbolic expression) is rejected here, not in the middle of a simulation.
    """
    if callable(value):
        t = ca.SX.sym("t")
        try:
            out = value(t)
            ex = ca.SX(out) if not isinstance(out, ca.SX) else out
        except Exception as exc:  # noqa: BLE001 - re-raised in the user's words
            raise ValueError(
                f"{who}: {name} is a callable, so it must build a CasADi expression from the time symbol t "
                f"(use casadi.sin, casadi.cos, ... instead of numpy or math); calling it with an SX symbol "
                f"raised {type(exc).__name__}: {exc}") from None
        if ex.size2() != 1 and ex.size1() != 1:
            raise ValueError(f"{who}: {name}(t) must return a scalar or a vector, got a "
                             f"{ex.size1()}x{ex.size2()} matrix")
        try:
            f = ca.Function("signal", [t], [ex])
        except RuntimeError:
            raise ValueError(f"{who}: {name}(t) must depend on the time symbol t only; its expression has "
                             f"other free symbols: {ex}") from None
        samples = np.concatenate([np.asarray(f(s)).ravel() for s in (0.0, 0.37, 1.3)])
        if not np.all(np.isfinite(samples)):
            raise ValueError(f"{who}: {name}(t) returned a non-finite value (at t = 0, 0.37 or 1.3 s): "
                             f"{ex}; note that math.sin and friends turn a CasADi symbol into nan -- use "
                             f"casadi.sin, casadi.cos, ...")
        return value
    try:
        a = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: {name} must be a number, a list of numbers or a callable f(t) returning a "
                         f"CasADi expression, got {value!r}") from None
    if a.size == 0 or not np.all(np.isfinite(a)):
        raise ValueError(f"{who}: {name} must be finite and non-empty, got {value!r}")
    return a


def signal_size(signal: np.ndarray | Callable[[Any], Any]) -> int:
    """Length of a validated signal (1 means "broadcast to every coordinate")."""
    if callable(signal):
        return ca.SX(signal(ca.SX.sym("t"))).numel()
    return signal.size


def evaluate_signal(signal: np.ndarray | Callable[[Any], Any], t, n: int):
    """The signal at (symbolic) time ``t`` as an ``n``-vector expression (a length-1 signal broadcasts)."""
    value = signal(t) if callable(signal) else ca.DM(signal)
    value = ca.vec(value)
    if value.numel() == 1 and n != 1:
        value = ca.repmat(value, n, 1)
    return value


def check_signal_length(who: str, name: str, signal, n: int, dof_names: Sequence[str]) -> None:
    """A signal must be a scalar (broadcast) or have one entry per selected coordinate."""
    size = signal_size(signal)
    if size not in (1, n):
        raise ValueError(f"{who}: {name} has {size} entries but the force acts on {n} coordinates "
                         f"({', '.join(dof_names)}); give one value or {n}")


def resolve_velocity_dofs(who: str, model: ArticulatedBody, dofs: tuple[str | int, ...] | None) -> list[int]:
    """Indices into the velocity ``v`` (``nv``) of the selected coordinates, for models with ``ball`` /
    ``free`` joints: velocity names (``model.velocity_names``), joint names or indices; ``None`` = every
    velocity not of a floating or free base."""
    return _resolve(who, model, dofs, model.velocity_names, model.joint_v_index, "velocity",
                    (JointType.FLOATING, JointType.FREE))


def _resolve(who: str, model: ArticulatedBody, dofs, names: Sequence[str], joint_index: dict, what: str,
             base: tuple) -> list[int]:
    """The selection of :func:`resolve_dofs` over ``names`` (coordinates or velocities)."""
    n = len(names)
    if dofs is None:
        idx = [i for j in model.joints if j.type not in base
               for i in range(joint_index[j.name].start, joint_index[j.name].stop)]
        if not idx:
            raise ValueError(f"{who}: model {model.name!r} has no actuated coordinates (only a floating base); "
                             f"select coordinates with dofs=[...] ({what}s: {', '.join(names)})")
        return idx
    idx = []
    for d in dofs:
        if isinstance(d, int):
            if not -n <= d < n:
                raise ValueError(f"{who}: {what} index {d} is out of range for model {model.name!r} "
                                 f"with {n} {what}s")
            new = [d % n]
        elif d in names:
            new = [list(names).index(d)]
        elif d in joint_index and joint_index[d].stop > joint_index[d].start:
            new = list(range(joint_index[d].start, joint_index[d].stop))
        else:
            raise ValueError(f"{who}: model {model.name!r} has no {what} or joint {d!r} ({what}s: "
                             f"{', '.join(names)})")
        for i in new:
            if i in idx:
                raise ValueError(f"{who}: {what} {names[i]!r} is selected twice in dofs")
            idx.append(i)
    return idx


def velocity_indices(who: str, model: ArticulatedBody, idx: Sequence[int]) -> list[int]:
    """The velocity indices of the configuration coordinates ``idx`` (the same indices where ``nq == nv``);
    a coordinate of a ``ball`` / ``free`` joint (a quaternion entry) has none: ValueError."""
    if not model.on_group:
        return list(idx)
    out = []
    for i in idx:
        j = next(j for j in model.joints if model.joint_q_index[j.name].start <= i < model.joint_q_index[j.name].stop)
        if j.type in (JointType.BALL, JointType.FREE):
            raise ValueError(f"{who}: coordinate {model.dof_names[i]!r} belongs to {j.type.value} joint {j.name!r}, "
                             f"a quaternion: joint-space forces act on hinge and slide coordinates here (damp a "
                             f"ball joint with joint_damping)")
        out.append(model.joint_v_index[j.name].start + i - model.joint_q_index[j.name].start)
    return out


class TangentSymbols:
    """Symbols for a generalised force built by differentiation: ``q`` (nq), ``qd`` (nv), the configuration
    ``qe`` to evaluate the kinematics at and the variable ``var`` to differentiate by. Without ``ball`` /
    ``free`` joints ``qe = var = q`` (the plain gradient, the original graphs); with them ``qe = q (+) e`` and
    ``var = e``, the gradient along the tangent, taken at ``e = 0`` by :meth:`at_zero`."""

    def __init__(self, model: ArticulatedBody) -> None:
        self.q, self.qd = ca.SX.sym("q", model.nq), ca.SX.sym("qd", model.nv)
        self.group = model.on_group
        if self.group:
            from pbframework.lie import q_integrate

            self.e = ca.SX.sym("e", model.nv)
            self.qe, self.var = q_integrate(model)(self.q, self.e), self.e
        else:
            self.qe = self.var = self.q

    def at_zero(self, expr):
        return ca.substitute(expr, self.e, ca.DM.zeros(self.e.numel())) if self.group else expr


def scatter(model: ArticulatedBody, idx: Sequence[int], values, n: int | None = None):
    """A column of ``n`` entries (default ``nq``) with ``values`` at the indices ``idx``, zeros elsewhere."""
    S = np.zeros((model.nq if n is None else n, len(idx)))
    for k, i in enumerate(idx):
        S[i, k] = 1.0
    return ca.mtimes(ca.DM(S), values)


def gather(idx: Sequence[int], q):
    """The entries ``idx`` of the column ``q`` (works for SX, MX and DM)."""
    return ca.vertcat(*[q[i] for i in idx])


def cached_function(model: ArticulatedBody, owner: object, key: str,
                    build: Callable[[], ca.Function]) -> ca.Function:
    """The ``casadi.Function`` ``key`` of force model ``owner`` for ``model``, built once by ``build()``.

    Force methods receive expressions of any type (SX, MX, numbers); building each form once on fresh SX
    symbols and calling it keeps the caller's graph small and type-agnostic. The entry lives in
    ``model.cache`` (so it dies with the model) and holds ``owner`` (so its ``id`` cannot be reused while
    cached).
    """
    k = ("pbf.force", id(owner), key)
    if k not in model.cache:
        model.cache[k] = (owner, build())
    return model.cache[k][1]
