"""The step stage: one timestep as a problem (data), and the contract solvers fulfil on it.

An integrator plug-in (hook ``pbf_integrators``) has one signature,
``build_step(model, config, forces) -> StepProblem``. A :class:`StepProblem` is *data*: self-contained
``casadi.Function`` objects plus sizes, so the same object can feed the Python solvers here, a generated-C
solver driver and a CUDA kernel. Nothing in it calls back into Python.

State, parameters, unknowns
---------------------------
Every integrator carries a flat **state** ``s`` (length ``ns``) from step to step whose first ``nq``
entries are the configuration ``q`` and next ``nq`` the velocity estimate ``qd`` at the state's time; an
integrator may append history after them (PBAD keeps one earlier collocation configuration). Each step
has a flat **parameter** vector ``p = [s; dt; t; u]`` (``t`` = time at the start of the step, ``u`` the
per-step numeric inputs of force models that declare ``n_inputs(model) > 0``, e.g. a Python controller's
torques, length ``nu``), and, for implicit integrators, **unknowns** ``x`` (length ``nx``). One step is::

    p  = problem.params(s, t, dt, u)
    x  = solver.solve(problem, problem.guess(p), p).x        # implicit kinds only (nx > 0)
    s' = problem.advance(x, p)                               # state at t + dt

Functions (all ``casadi.Function``; ``x`` is empty, 0x1, for explicit problems):

=======================  =====================================================================
``init``                 ``(q0, qd0, t0, dt, u0, q_start, q_check, q_reverse) -> s0``: the state a
                         rollout starts from; the last three are RK4 runs of the exact motion from
                         ``(q0, qd0)`` to ``t0 + start_offset dt`` (:func:`start_configurations`; ``q0``
                         for problems without a start)
``start_acceleration``   ``(q, v, t, u, sign) -> qdd`` (optional): forward dynamics with the forces at
                         velocity ``sign v``, which :func:`start_configurations` integrates
``params``               ``(s, t, dt, u) -> p``
``guess``                ``p -> x0``: initial guess of the unknowns
``advance``              ``(x, p) -> s_next``
``objective_fn``         ``(x, p) -> f``   (minimize)
``gradient``             ``(x, p) -> (f, g)`` (minimize; derived on first use)
``hessian``              ``(x, p) -> (f, g, H)``, exact (minimize; derived on first use)
``residual``             ``(x, p) -> r``   (least_squares; objective ``f = 0.5 ||W r||^2``, ``W`` below)
``residual_jacobian``    ``(x, p) -> (r, J)`` (derived)
``residual_vjp``         ``(x, p, w) -> J^T w`` (derived, reverse mode)
``residual_hessian``     ``(x, p, c) -> sum_j c_j d^2 r_j/dx^2`` (derived; third derivatives of the
                         kinematics, costly)
``restart``              ``(s, ratio, dt) -> s'`` (optional): the state of a step of length ``dt``
                         re-expressed for a step ``ratio`` times as long, without dynamics (used to retry
                         a step as two half steps, :func:`restart_state`; identity when absent)
``kinetic``              ``(s, dt) -> T`` (optional): the kinetic energy of the integrator's velocity
                         estimate when it is not ``qd^T M(q) qd / 2`` (PBAD order 2: the workspace
                         chord velocity of every body point)
``error_estimate``       ``(x, p) -> e`` (optional, length ``nq``): a local error estimate of the step's end
                         configuration, ``O(dt^error_order)``; adaptive step-size control
                         (:mod:`pbframework.adaptive`) needs it
``dense``                ``(x, p, theta) -> [q; qd]`` (optional): configuration and velocity at
                         ``t + theta dt``, ``0 <= theta <= 1``, from the step's polynomial (dense output);
                         at ``theta = 1`` exactly the next state's ``q`` and ``qd``
``metric``               ``p -> M_k`` (optional): an SPD ``nq x nq`` matrix (PBAD: the mass matrix at
                         the step start). Minimize problems: its block-diagonal repetition over the
                         ``nx / nq`` configurations in ``x`` approximates the Hessian; solvers may use it
                         for damping (LM) or as the initial inverse Hessian (L-BFGS). Least-squares
                         problems: it *defines* the objective, ``W = blockdiag(M_k)^-1`` weights the
                         residual blocks (without a metric ``W = I``); :func:`evaluator` applies it
=======================  =====================================================================

Problem kinds (:class:`ProblemKind`): ``minimize`` (an energy, seed 000 Eq. 5), ``least_squares``
(residuals, seed 000 Eq. 7), ``explicit`` (Newton-Euler: ``s_next = advance(x_empty, p)``) and
``constrained`` (NMDP, seed 001: :mod:`pbframework.nmdp`).

Solvers
-------
A solver plug-in (hook ``pbf_solvers``) builds an object with ``solve(problem, x0, p) -> SolveResult``
for the problem kinds listed in its ``meta["problems"]``. Non-convergence is reported in the result
(``converged=False`` and a ``reason``), never hidden. The contract (``SolveResult``, ``Solver``) and the
pieces solvers share (``evaluator``, ``residual_weight``, ``restart_state``, ``solve_step``) are in
:mod:`pbframework.solving`, importable from here too.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import casadi as ca
import numpy as np

from .errors import StepError
from .forces import ForceForm, ForceModel
from .model import ArticulatedBody


class ProblemKind(str, enum.Enum):
    """What a :class:`StepProblem` asks of a solver.

    Attributes:
        MINIMIZE: minimise an objective ``f(x; p)`` (gradient and exact Hessian available).
        LEAST_SQUARES: minimise ``0.5 ||r(x; p)||^2``; the residual and its Jacobian are available, so a
            Gauss-Newton (``J^T J``) solver applies.
        EXPLICIT: no unknowns; ``advance`` computes the next state directly.
        CONSTRAINED: minimise a function ``K`` subject to equations ``G = 0`` and simplex constraints on part
            of the unknowns (the NMDP step of seed 001 Eq. 6 and 12); the functions are in the problem's
            ``constrained`` (:class:`pbframework.nmdp.ConstrainedParts`), solved by projected gradient.
    """

    MINIMIZE = "minimize"
    LEAST_SQUARES = "least_squares"
    EXPLICIT = "explicit"
    CONSTRAINED = "constrained"


class Objective(str, enum.Enum):
    """Which objective a position-based integrator assembles.

    Attributes:
        AUTO: ``energy`` where the order is 2, every force model has the potential form and the solver
            minimises; ``residual`` otherwise.
        ENERGY: the PBAD energy (seed 000 Eq. 5), order 2 only, potential forms only.
        RESIDUAL: the sum of squared collocation residuals (seed 000 Eq. 6-7), any order; accepts
            generalised (non-conservative) forces.
    """

    AUTO = "auto"
    ENERGY = "energy"
    RESIDUAL = "residual"


def _parse_enum(cls, value, what: str):
    if isinstance(value, cls):
        return value
    try:
        return cls(str(value).lower())
    except ValueError:
        allowed = ", ".join(repr(v.value) for v in cls)
        raise StepError(f"{what}: unknown value {value!r} (allowed: {allowed})") from None


@dataclass(frozen=True)
class StepConfig:
    """How to assemble one timestep.

    Attributes:
        dt: the timestep in seconds (positive, finite).
        order: the integrator's order; ``None`` selects its default (``meta["default_order"]``).
        objective: for position-based integrators, see :class:`Objective`.
        fd: the forward-dynamics plug-in used by Newton-Euler integrators and by the PBAD start-up
            (``"aba"`` by default; any registered ``fd`` plug-in).
        precondition: residual objectives weight the residual by the inverse mass matrix at the step
            start (``0.5 r^T M_k^-1 r``); same zero-residual solution, far better conditioned. ``False``
            gives the literal unweighted sum of squares of seed 000 Eq. 7.
    """

    dt: float
    order: int | None = None
    objective: Objective = Objective.AUTO
    fd: str = "aba"
    precondition: bool = True

    def __post_init__(self) -> None:
        try:
            dt = float(self.dt)
        except (TypeError, ValueError):
            raise StepError(f"dt must be a positive number of seconds, got {self.dt!r}") from None
        if not math.isfinite(dt) or dt <= 0.0:
            raise StepError(f"dt must be a positive finite number of seconds, got {self.dt!r}")
        object.__setattr__(self, "dt", dt)
        if self.order is not None:
            if isinstance(self.order, bool) or not isinstance(self.order, (int, np.integer)):
                raise StepError(f"order must be an integer, got {self.order!r}")
            object.__setattr__(self, "order", int(self.order))
        object.__setattr__(self, "objective", _parse_enum(Objective, self.objective, "objective"))
        if not isinstance(self.fd, str) or not self.fd:
            raise StepError(f"fd must be the name of a forward-dynamics plug-in, got {self.fd!r}")
        if not isinstance(self.precondition, (bool, np.bool_)):
            raise StepError(f"precondition must be True or False, got {self.precondition!r}")

    def key(self) -> tuple:
        """Hashable identity of the *structure* (dt is a parameter of the problem, not part of it)."""
        return (self.order, self.objective.value, self.fd, bool(self.precondition))


@dataclass(eq=False)
class StepProblem:
    """One timestep as data. See the module docstring for the functions' signatures.

    Attributes:
        integrator: name of the integrator plug-in that built it.
        kind: a :class:`ProblemKind`.
        config: the :class:`StepConfig` it was built with (its ``dt`` is the default; ``dt`` is also an
            entry of ``p``, so the same problem steps with any dt).
        nq: configuration size of the model.
        nx: number of unknowns (0 for explicit problems).
        ns: state size (``>= nq + nv``; ``s[:nq]`` is q, ``s[nq:nq + nv]`` the velocity estimate).
        nu: number of per-step force inputs (``u``; 0 for most force sets).
        np: parameter size, ``ns + 2 + nu`` (``p = [s; dt; t; u]``).
        order: the order actually built.
        objective: the objective actually built (``None`` for explicit problems).
        forces: ``repr`` of each force model, for messages and saved results.
        velocity: one line saying how ``qd`` in the state is estimated.
        start: one line saying how ``init`` builds the first state.
        start_acceleration: forward dynamics ``(q, v, t, u, sign) -> qdd`` (the forces at velocity
            ``sign v``; ``sign = 1``: the exact motion), for integrators
            whose first state needs a configuration of it away from ``t0`` (PBAD's history node); ``None``
            where ``init`` needs ``(q0, qd0)`` only.
        start_offset: where that configuration lies, in steps from ``t0`` (PBAD order 2: -1).
        start_substeps: RK4 steps of ``q_check`` over ``start_offset * dt`` (``q_start`` and
            ``q_reverse`` take twice as many; :func:`start_configurations`).
        error_order: the power of ``dt`` that ``error_estimate`` scales with (0 without one).
        meta: integrator-specific facts (collocation nodes, ...).
        nv: velocity size of the model (``None``: ``nq``; smaller with ``ball`` / ``free`` joints, whose
            residual blocks, metric and velocities have ``nv`` entries).
        constrained: the functions of a :attr:`ProblemKind.CONSTRAINED` problem
            (:class:`pbframework.nmdp.ConstrainedParts`); ``None`` for the other kinds.
    """

    integrator: str
    kind: ProblemKind
    config: StepConfig
    nq: int
    nx: int
    ns: int
    init: ca.Function
    params: ca.Function
    guess: ca.Function
    advance: ca.Function
    objective_fn: ca.Function | None = None
    residual: ca.Function | None = None
    metric: ca.Function | None = None
    restart: ca.Function | None = None
    kinetic: ca.Function | None = None
    error_estimate: ca.Function | None = None
    dense: ca.Function | None = None
    error_order: int = 0
    nu: int = 0
    order: int = 1
    objective: Objective | None = None
    forces: tuple[str, ...] = ()
    velocity: str = ""
    start: str = ""
    start_acceleration: ca.Function | None = None
    start_offset: float = 0.0
    start_substeps: int = 8
    meta: Mapping[str, Any] = field(default_factory=dict)
    nv: int | None = None
    constrained: Any = None
    _derived: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.nv is None:
            self.nv = self.nq
        n_in = self.init.n_in()
        if n_in != len(INIT_NAMES):
            raise StepError(f"{self.integrator}: init must take {len(INIT_NAMES)} inputs "
                            f"({', '.join(INIT_NAMES)}; pbframework.step.init_symbols), got {n_in}")
        if self.start_acceleration is not None and int(self.start_substeps) < 1:
            raise StepError(f"{self.integrator}: start_substeps must be >= 1, got {self.start_substeps!r}")

    @property
    def has_start(self) -> bool:
        """Whether ``init`` needs the RK4 runs of :func:`start_configurations` (else they are ``q0``)."""
        return self.start_acceleration is not None and self.start_offset != 0.0 and self.nq > 0

    @property
    def np(self) -> int:
        return self.ns + 2 + self.nu

    # -- derived functions, built once on first use ---------------------------------------------------
    def _symbols(self):
        return ca.SX.sym("x", self.nx), ca.SX.sym("p", self.np)

    def _require(self, kind: ProblemKind, what: str) -> None:
        if self.kind is not kind:
            raise StepError(f"{self.integrator}: a {self.kind.value} step problem has no {what} (it belongs to "
                            f"{kind.value} problems; solvers use pbframework.step.evaluator)")

    @property
    def objective_function(self) -> ca.Function:
        """``(x, p) -> f`` (minimize problems)."""
        self._require(ProblemKind.MINIMIZE, "objective function")
        return self.objective_fn

    @property
    def gradient(self) -> ca.Function:
        """``(x, p) -> (f, g)`` (minimize problems; reverse mode, O(cost of f))."""
        self._require(ProblemKind.MINIMIZE, "objective gradient")
        if "fg" not in self._derived:
            x, p = self._symbols()
            f = self.objective_fn(x, p)
            self._derived["fg"] = ca.Function("gradient", [x, p], [f, ca.gradient(f, x)], ["x", "p"], ["f", "g"])
        return self._derived["fg"]

    @property
    def hessian(self) -> ca.Function:
        """``(x, p) -> (f, g, H)`` with the exact Hessian (minimize problems)."""
        self._require(ProblemKind.MINIMIZE, "objective Hessian")
        if "fgH" not in self._derived:
            x, p = self._symbols()
            f = self.objective_fn(x, p)
            H, g = ca.hessian(f, x)
            self._derived["fgH"] = ca.Function("hessian", [x, p], [f, g, H], ["x", "p"], ["f", "g", "H"])
        return self._derived["fgH"]

    @property
    def residual_jacobian(self) -> ca.Function:
        """``(x, p) -> (r, J)`` (least-squares problems)."""
        self._require(ProblemKind.LEAST_SQUARES, "residual")
        if "rJ" not in self._derived:
            x, p = self._symbols()
            r = self.residual(x, p)
            self._derived["rJ"] = ca.Function("residual_jacobian", [x, p], [r, ca.jacobian(r, x)],
                                              ["x", "p"], ["r", "J"])
        return self._derived["rJ"]

    @property
    def residual_vjp(self) -> ca.Function:
        """``(x, p, w) -> J^T w`` by reverse mode, O(cost of r) (least-squares problems)."""
        self._require(ProblemKind.LEAST_SQUARES, "residual")
        if "vjp" not in self._derived:
            x, p = self._symbols()
            w = ca.SX.sym("w", self.residual.size1_out(0))
            r = self.residual(x, p)
            self._derived["vjp"] = ca.Function("residual_vjp", [x, p, w], [ca.gradient(ca.dot(w, r), x)],
                                               ["x", "p", "w"], ["JTw"])
        return self._derived["vjp"]

    @property
    def residual_hessian(self) -> ca.Function:
        """``(x, p, c) -> sum_j c_j d^2 r_j / dx^2`` (least-squares problems; third derivatives of the
        kinematics, costly)."""
        self._require(ProblemKind.LEAST_SQUARES, "residual")
        if "rH" not in self._derived:
            x, p = self._symbols()
            c = ca.SX.sym("c", self.residual.size1_out(0))
            H, _ = ca.hessian(ca.dot(c, self.residual(x, p)), x)
            self._derived["rH"] = ca.Function("residual_hessian", [x, p, c], [H], ["x", "p", "c"], ["S"])
        return self._derived["rH"]

    def describe(self) -> str:
        obj = f", objective {self.objective.value}" if self.objective else ""
        return (f"{self.integrator} order {self.order} ({self.kind.value}{obj}), nq={self.nq}, "
                f"nx={self.nx}, forces [{', '.join(self.forces)}]")


# ======================================================================================================
# Shared helpers for integrator plug-ins
# ======================================================================================================

def resolve_forces(forces: Iterable[Any] | None, model: ArticulatedBody | None = None) -> tuple[ForceModel, ...]:
    """Turn ``forces`` entries into force-model instances.

    Each entry is a registered name (``"gravity"``), a ``(name, params_dict)`` pair or a
    :class:`~pbframework.forces.ForceModel` (or any object with ``forms`` and the matching methods). With a
    ``model``, its ``default_forces`` follow, each unless a force of that name is given (for example the
    ``joint_limits`` that :func:`~pbframework.io.load_urdf` adds to a model with limited joints).
    """
    given = _resolve_entries(forces)
    if model is None:
        return given
    names = {getattr(f, "name", None) for f in given}
    return given + _resolve_entries([spec for spec in model.default_forces if spec[0] not in names])


def _resolve_entries(forces: Iterable[Any] | None) -> tuple[ForceModel, ...]:
    from .forces import force_model

    if forces is None:
        return ()
    if isinstance(forces, (str, ForceModel)) or (isinstance(forces, tuple) and len(forces) == 2
                                                  and isinstance(forces[0], str)
                                                  and isinstance(forces[1], Mapping)):
        forces = [forces]
    out = []
    for entry in forces:
        if isinstance(entry, str):
            out.append(force_model(entry))
        elif isinstance(entry, (tuple, list)) and len(entry) == 2 and isinstance(entry[0], str):
            params = entry[1]
            if not isinstance(params, Mapping):
                raise StepError(f"force {entry[0]!r}: parameters must be a dict, got {type(params).__name__}")
            out.append(force_model(entry[0], **params))
        elif hasattr(entry, "forms"):
            out.append(entry)
        else:
            raise StepError(f"forces: cannot use {entry!r} (give a force-model name, a (name, params) pair "
                            f"or a ForceModel instance)")
    return tuple(out)


def force_forms(force: Any) -> frozenset[ForceForm]:
    return frozenset(ForceForm(f) for f in getattr(force, "forms", ()))


def force_label(force: Any) -> str:
    return repr(force) if isinstance(force, ForceModel) else str(getattr(force, "name", force))


def force_key(force: Any) -> tuple:
    """Cache key of a force model: its type and parameters (instances without params(): identity)."""
    try:
        params = force.params()
        return (type(force).__module__, type(force).__qualname__, repr(sorted(params.items())))
    except Exception:  # noqa: BLE001 - no usable params(): fall back to identity
        return ("id", id(force))


def require_forms(forces: Sequence[Any], needed: ForceForm, integrator: str, why: str,
                  alternative: ForceForm | None = None) -> None:
    """Raise :class:`StepError` naming the first force model that lacks the ``needed`` form (or
    ``alternative``)."""
    for f in forces:
        forms = force_forms(f)
        if needed in forms or (alternative is not None and alternative in forms):
            continue
        want = needed.value + (f" or {alternative.value}" if alternative else "")
        have = ", ".join(sorted(x.value for x in forms)) or "none"
        raise StepError(f"force model {getattr(f, 'name', f)!r} offers the form(s) [{have}], which {integrator} "
                        f"cannot accept: {why} needs {want}")


def zero_gravity_model(model: ArticulatedBody) -> ArticulatedBody:
    """A copy of ``model`` with gravity switched off (cached on ``model.cache``).

    The built-in dynamics algorithms include ``model.gravity``; integrators apply gravity only through the
    ``gravity`` force model, so every integrator sees exactly the forces it was given.
    """
    key = "_zero_gravity_model"
    if key not in model.cache:
        model.cache[key] = model if not np.any(model.gravity) else ArticulatedBody(
            model.links, model.joints, gravity=(0.0, 0.0, 0.0), name=model.name)
    return model.cache[key]


def force_sizes(model: ArticulatedBody, force: Any) -> tuple[int, int]:
    """``(n_inputs, n_states)`` of a force model (0 for either it does not declare), checked."""
    sizes = []
    for what in ("n_inputs", "n_states"):
        fn = getattr(force, what, None)
        n = fn(model) if fn is not None else 0
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise StepError(f"force model {getattr(force, 'name', force)!r}: {what} must be an integer >= 0, "
                            f"got {n!r}")
        sizes.append(int(n))
    return sizes[0], sizes[1]


def input_slices(model: ArticulatedBody, forces: Sequence[Any]) -> list[tuple[int, int]]:
    """``(start, stop)`` of each force model's ``u`` within the integrator's ``u`` (empty when it reads none):
    its per-step inputs, then for a model with states (``n_states > 0``) the states at the step's start and
    after it (:mod:`pbframework.force_states`), ``n_inputs + 2 n_states`` entries."""
    out, k = [], 0
    for f in forces:
        n_in, n_st = force_sizes(model, f)
        n = n_in + 2 * n_st
        out.append((k, k + n))
        k += n
    return out


def _u_kw(u, sl) -> dict:
    return {} if u is None or sl[1] == sl[0] else {"u": u[sl[0]:sl[1]]}


def potential_expr(model: ArticulatedBody, forces: Sequence[Any], q_next, q_cur, q_prev, dt, t, u=None):
    """Sum of the potential terms of ``forces`` (each must have that form); ``u`` the step inputs."""
    total = 0
    for f, sl in zip(forces, input_slices(model, forces)):
        total = total + f.potential(model, q_next, q_cur, q_prev, dt, t, **_u_kw(u, sl))
    return total


def generalized_force_expr(model: ArticulatedBody, forces: Sequence[Any], q, qd, t, u=None):
    """Sum of the generalised forces (``nv`` entries) of those ``forces`` that have that form, at (q, qd, t; u)."""
    total = ca.SX.zeros(model.nv)
    for f, sl in zip(forces, input_slices(model, forces)):
        if ForceForm.GENERALIZED_FORCE in force_forms(f):
            total = total + ca.reshape(f.generalized_force(model, q, qd, t, **_u_kw(u, sl)), model.nv, 1)
    return total


def acceleration_expr(model: ArticulatedBody, forces: Sequence[Any], q, qd, t, fd: str = "aba", u=None):
    """``qdd`` from the forward-dynamics plug-in ``fd`` with the generalised forces of ``forces``."""
    from .dynamics import forward_dynamics

    fdf = forward_dynamics(zero_gravity_model(model), fd)
    return fdf(q, qd, generalized_force_expr(model, forces, q, qd, t, u))


def _rk4_configuration(f, q, v, t: float, h: float, n: int, u: np.ndarray, sign: float) -> np.ndarray:
    """``n`` classical RK4 steps of size ``h`` of ``qdd = f(q, v, t, u, sign)``; the configuration at the end."""
    def acc(qq, vv, tt):
        return np.asarray(f(qq, vv, tt, u, sign)).ravel()

    with np.errstate(all="ignore"):
        for i in range(n):
            ti = t + i * h
            a1 = acc(q, v, ti)
            q2, v2 = q + h / 2 * v, v + h / 2 * a1
            a2 = acc(q2, v2, ti + h / 2)
            q3, v3 = q + h / 2 * v2, v + h / 2 * a2
            a3 = acc(q3, v3, ti + h / 2)
            q4, v4 = q + h * v3, v + h * a3
            a4 = acc(q4, v4, ti + h)
            q = q + h / 6 * (v + 2 * v2 + 2 * v3 + v4)
            v = v + h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
    return q


def start_configurations(problem: "StepProblem", q0, qd0, t0: float, dt: float, u=None):
    """``(q_start, q_check, q_reverse)``: RK4 runs of the exact motion from ``(q0, qd0)`` at ``t0`` to
    ``t0 + problem.start_offset * dt`` (backwards in time for a negative offset), the inputs ``u`` held.

    ``problem.start_acceleration(q, v, t, u, sign)`` is forward dynamics with the forces evaluated at the
    velocity ``sign * v``. ``q_start``: ``2 problem.start_substeps`` steps with ``sign = 1``, the exact
    motion. ``q_check``: half as many steps (where both are resolved, ``|q_start - q_check| / 15``
    estimates the error of ``q_start``). ``q_reverse``: as ``q_start`` with ``sign = -1``, the motion in
    which velocity-dependent forces act reversed; for time-reversible dynamics (gravity, springs, the
    Coriolis terms) it equals ``q_start``, and it departs from it as far as friction, damping or drag shape
    the backward motion. ``init`` chooses with the three (:func:`start_node`). All are ``q0`` when the
    problem has no start. The generated-C driver does the same arithmetic (``pbf_init_state``).
    Non-finite results are returned as they are.
    """
    q = np.asarray(q0, float).ravel()
    if not problem.has_start:
        return q.copy(), q.copy(), q.copy()
    f, n = problem.start_acceleration, int(problem.start_substeps)
    v = np.asarray(qd0, float).ravel()
    uu = np.zeros(0) if u is None else np.asarray(u, float).ravel()
    span = problem.start_offset * float(dt)
    return (_rk4_configuration(f, q, v, float(t0), span / (2 * n), 2 * n, uu, 1.0),
            _rk4_configuration(f, q, v, float(t0), span / n, n, uu, 1.0),
            _rk4_configuration(f, q, v, float(t0), span / (2 * n), 2 * n, uu, -1.0))


def initial_state(problem: "StepProblem", q0, qd0, t0: float, dt: float, u=None) -> np.ndarray:
    """``problem.init`` at ``(q0, qd0, t0, dt, u)`` with the RK4 runs of :func:`start_configurations`."""
    uu = np.zeros(problem.nu) if u is None else np.asarray(u, float).ravel()
    runs = start_configurations(problem, q0, qd0, t0, dt, uu)
    return np.asarray(problem.init(q0, qd0, t0, dt, uu, *runs)).ravel()


def start_node(q_start, q_check, q_reverse, q_taylor):
    """The start configuration ``init`` uses (symbolic): the RK4 one, ``q_start``, where both its half-step
    run ``q_check`` and its reversed-dissipation run ``q_reverse`` agree with it to a tenth of its distance
    from the local Taylor configuration ``q_taylor`` (infinity norms), else ``q_taylor``.

    Where the motion is resolved and time-reversible up to small dissipation, RK4 over a long step is far
    more accurate than a Taylor polynomial (CHAIN-100 at rest, dt = 0.1 s: 1.3e-5 rad against 0.113).
    Backwards in time, damping, friction and drag are exponential growth: the exact backward motion then
    carries a past velocity far above ``qd0`` into the scheme's first step (CHAIN-1 revolute, joint
    damping 15 N m s, about 45 1/s, dt = 0.1 s, qd0 = 1: first-step velocity 1.74 from the RK4 node,
    against 1.07 from the Taylor node and 0.32 exact), or RK4 cannot resolve it at all (runs that
    disagree, overflow); there the local Taylor configuration is the consistent choice. NaN fails every
    comparison, so a non-finite run selects ``q_taylor``.
    """
    gap = ca.fmax(ca.mmax(ca.fabs(q_start - q_check)), ca.mmax(ca.fabs(q_start - q_reverse)))
    distance = ca.mmax(ca.fabs(q_start - q_taylor))
    finite = ca.fabs(ca.sum1(q_start) + ca.sum1(q_check) + ca.sum1(q_reverse)) < 1e300   # false for nan, inf
    return ca.if_else(ca.logic_and(finite, gap <= 0.1 * distance), q_start, q_taylor)


def taylor_start(model: ArticulatedBody, forces: Sequence[Any], q0, qd0, t0, h, fd: str = "aba", u=None):
    """Configuration at ``t0 + h`` (``h`` may be negative) by a third-order Taylor expansion.

    ``q(t0 + h) ~ q0 + h qd0 + h^2/2 qdd0 + h^3/6 qddd0`` with ``qdd0`` from forward dynamics and
    ``qddd0`` its exact time derivative (forward-mode directional derivative along ``(qd0, qdd0)`` plus
    the explicit time dependence; the inputs ``u`` are held constant). Only force models with the
    generalised-force form enter; the error is O(h^4) when all forces have that form, O(h^2) otherwise.
    """
    nu = 0 if u is None else u.shape[0]
    q, v, tt, uu = ca.SX.sym("q", model.nq), ca.SX.sym("v", model.nq), ca.SX.sym("t"), ca.SX.sym("u", nu)
    a = acceleration_expr(model, forces, q, v, tt, fd, uu if nu else None)
    jerk = ca.jtimes(a, ca.vertcat(q, v, tt), ca.vertcat(v, a, 1))
    terms = ca.Function("taylor_terms", [q, v, tt, uu], [a, jerk])
    a0, j0 = terms(q0, qd0, t0, u if nu else ca.SX(0, 1))
    return q0 + h * qd0 + h**2 / 2 * a0 + h**3 / 6 * j0


def standard_params(ns: int, nu: int = 0) -> ca.Function:
    """``(s, t, dt, u) -> p = [s; dt; t; u]``."""
    s, t, dt, u = ca.SX.sym("s", ns), ca.SX.sym("t"), ca.SX.sym("dt"), ca.SX.sym("u", nu)
    return ca.Function("params", [s, t, dt, u], [ca.vertcat(s, dt, t, u)], ["s", "t", "dt", "u"], ["p"])


def split_params(p, ns: int):
    """``(s, dt, t, u)`` views of a symbolic parameter vector ``[s; dt; t; u]``."""
    return p[:ns], p[ns], p[ns + 1], p[ns + 2:]


def init_symbols(nq: int, nu: int, nv: int | None = None):
    """Symbols ``(q0, qd0, t0, dt, u0, q_start, q_check, q_reverse)`` of an ``init`` function (``qd0`` of
    ``nv`` entries, default ``nq``)."""
    return (ca.SX.sym("q0", nq), ca.SX.sym("qd0", nq if nv is None else nv), ca.SX.sym("t0"), ca.SX.sym("dt"), ca.SX.sym("u0", nu),
            ca.SX.sym("q_start", nq), ca.SX.sym("q_check", nq), ca.SX.sym("q_reverse", nq))


INIT_NAMES = ["q0", "qd0", "t0", "dt", "u0", "q_start", "q_check", "q_reverse"]


def velocity_level_terms(model: ArticulatedBody, forces: Sequence[Any], nu: int):
    """The pieces of a velocity-level Newton-Euler step (``ne_dry_friction``, ``ne_mdp``) on fresh SX symbols:
    ``((q, v, t, dt, u), M(q), h(q, v), tau(q, v, t, u))`` -- the mass matrix, the Coriolis and centrifugal
    forces without gravity, and the generalised forces of ``forces`` (gravity among them)."""
    nq, nv = model.nq, model.nv
    syms = (ca.SX.sym("q", nq), ca.SX.sym("v", nv), ca.SX.sym("t"), ca.SX.sym("dt"), ca.SX.sym("u", nu))
    q, v, t, _, u = syms
    from .dynamics import crba, nonlinear_effects

    tau = generalized_force_expr(model, forces, q, v, t, u if nu else None) if forces else ca.SX.zeros(nv)
    return syms, crba(model)(q), nonlinear_effects(zero_gravity_model(model))(q, v), tau


def state_init(nq: int, nu: int, nv: int | None = None) -> ca.Function:
    """The ``init`` of an integrator whose state is ``[q; qd]`` (``s0 = [q0; qd0]``; the start runs unused)."""
    q0, qd0, t0, dt0, u0, *runs = init_symbols(nq, nu, nv)
    return ca.Function("init", [q0, qd0, t0, dt0, u0, *runs], [ca.vertcat(q0, qd0)], INIT_NAMES, ["s0"])


# ======================================================================================================
# Building (with a cache on the model)
# ======================================================================================================

def integrator_info(name: str):
    from .registry import get_plugin

    return get_plugin("integrator", name)


def resolve_config(integrator: str, config: StepConfig, forces: Sequence[Any]) -> StepConfig:
    """``config`` with the integrator's default order filled in, after checking the order against the
    plug-in's ``meta["orders"]`` and every force's forms against ``meta["forms"]``. Needs no model, so a
    front end (``pbf simulate``) checks these before building one.

    Raises:
        UnknownPluginError: no integrator of that name (lists the available ones).
        StepError: unsupported order, or a force model in a form the integrator cannot accept.
    """
    info = integrator_info(integrator)
    orders = tuple(info.meta.get("orders", ()))
    order = config.order if config.order is not None else info.meta.get("default_order",
                                                                       orders[0] if orders else None)
    if orders and order not in orders:
        raise StepError(f"integrator {integrator!r} does not support order={config.order!r} (supported "
                        f"orders: {', '.join(str(o) for o in orders)})")
    if order != config.order:
        config = dataclasses.replace(config, order=order)
    accepted = frozenset(ForceForm(f) for f in info.meta.get("forms", ()))
    for f in forces:
        if not (force_forms(f) & accepted):
            have = ", ".join(sorted(x.value for x in force_forms(f))) or "none"
            allowed = ", ".join(sorted(x.value for x in accepted)) or "none"
            raise StepError(f"force model {getattr(f, 'name', f)!r} offers the form(s) [{have}]; integrator "
                            f"{integrator!r} accepts [{allowed}]")
    return config


def build_step(model: ArticulatedBody, integrator: str, config: StepConfig,
               forces: Sequence[Any], *, fresh: bool = False) -> StepProblem:
    """Build (or fetch from ``model.cache``) the step problem of ``integrator``; ``fresh``: build it anew and
    replace the cached one (a step whose graph holds a QP keeps qpOASES's memory in its Functions; after some
    failed QPs every later hot start fails, and a new build starts cold).

    Validates ``config.order`` against the plug-in's ``meta["orders"]`` and every force's forms against
    ``meta["forms"]`` before calling the plug-in's ``build(model, config, forces)``.

    Raises:
        UnknownPluginError: no integrator of that name (lists the available ones).
        StepError: unsupported order, a force model in a form the integrator cannot accept, or a model
            with ``ball`` / ``free`` joints (quaternions) for an integrator that does not say
            ``meta["group"]`` (it would treat a quaternion as four independent coordinates).
    """
    info = integrator_info(integrator)
    config = resolve_config(integrator, config, forces)
    if getattr(model, "on_group", False):
        joints = [j.name for j in model.joints if j.type.value in ("ball", "free")]
        if not info.meta.get("group", False):
            raise StepError(f"integrator {integrator!r} does not step on the rotation group yet: model "
                            f"{model.name!r} has ball / free joints ({', '.join(joints)}; nq={model.nq}, "
                            f"nv={model.nv}); pbad and the Newton-Euler baselines do (or use Euler-angle joints: "
                            f"'spherical', 'floating', load_urdf(..., floating_base='floating'))")
        flat = [getattr(f, "name", str(f)) for f in forces if not getattr(f, "group", False)]
        if flat:
            raise StepError(f"force model(s) {', '.join(flat)} do not take ball / free joints yet (model "
                            f"{model.name!r}: {', '.join(joints)}): their forces are per configuration "
                            f"coordinate; gravity does")
    armed = [j.name for j in getattr(model, "joints", ()) if getattr(j, "armature", 0.0) > 0]
    if armed:
        from .registry import get_plugin

        if info.meta.get("armature", True) is False:
            raise StepError(f"integrator {integrator!r} does not include joint armature yet (its inertia comes from "
                            f"the links' inertia integral), and model {model.name!r} has armature on "
                            f"{', '.join(armed)}; use a Newton-Euler integrator or ne_nmdp, or drop the armature")
        if info.meta.get("fd_dynamics", True) and get_plugin("fd", config.fd).meta.get("armature", True) is False:
            raise StepError(f"forward-dynamics plug-in {config.fd!r} does not include joint armature yet, and model "
                            f"{model.name!r} has armature on {', '.join(armed)}; use fd='aba'")
    from .force_states import initial_force_states

    sizes = tuple(force_sizes(model, f) for f in forces)         # the states' sizes and start shape the problem
    key = ("step_problem", integrator, config.key(), tuple(force_key(f) for f in forces), sizes,
           tuple(initial_force_states(model, forces)) if any(n for _, n in sizes) else ())
    cached = None if fresh else model.cache.get(key)
    if cached is not None:
        return cached
    problem = info.build(model, config, tuple(forces))
    if not isinstance(problem, StepProblem):
        raise StepError(f"integrator {integrator!r}: build() returned {type(problem).__name__}, expected "
                        f"a StepProblem")
    from .force_states import with_force_states

    problem = with_force_states(problem, model, tuple(forces))
    model.cache[key] = problem
    return problem


_SOLVING = ("SolveResult", "Solver", "solve_step", "residual_weight", "restart_state", "evaluator", "_BlockWeight")


def __getattr__(name: str):
    """The solver contract lives in :mod:`pbframework.solving`; its names stay importable from here."""
    if name in _SOLVING:
        from . import solving

        return getattr(solving, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
