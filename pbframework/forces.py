"""Force models: the three forms of DESIGN.md, as CasADi expressions.

A force model is an object (usually a :class:`ForceModel` subclass, offered by a plug-in through
``pbf_force_models``) that declares which forms it provides and implements the matching methods:

1. ``ForceForm.POTENTIAL`` -- :meth:`ForceModel.potential`: an integrable term
   ``Q(q_next, q_cur, q_prev; dt, t)`` added to the PBAD energy (seed 000 Eq. 5, seed 002 Eq. 9).
2. ``ForceForm.GENERALIZED_FORCE`` -- :meth:`ForceModel.generalized_force`: a generalised force
   ``f(q, qd, t)`` (length ``nq``) entering residual objectives (seed 000 Eq. 7) and Newton-Euler
   integrators; non-conservative forces live here.
3. ``ForceForm.WRENCH_POLYTOPE`` -- :meth:`ForceModel.wrench_polytope`: the vertices of the feasible contact
   force set at each contact point (seed 001 Eq. 5).

Conservative models also implement :meth:`ForceModel.energy` so total energy can be reported exactly.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

import casadi as ca

from .model import ArticulatedBody


class ForceForm(str, enum.Enum):
    """The forms in which a force model can enter a step problem.

    Attributes:
        POTENTIAL: integrable potential ``Q(q_next, q_cur, q_prev; dt, t)``.
        GENERALIZED_FORCE: generalised force ``f(q, qd, t)`` in the model's coordinates.
        WRENCH_POLYTOPE: vertices of the contact force set per contact point.
        STEP_FORCE: a non-integrable generalised force of a whole step, ``f(q_next, q_cur; dt, t)`` at the
            step's end configuration, which may depend on the step's displacement (seed 002's corrected
            tangential friction, Eq. 12); integrators that minimise the gradient-level objective (``pbfd``,
            Eq. 13) take it.
        COMPLEMENTARITY: a unilateral contact with Coulomb friction for velocity-level time stepping
            (``contact_constraints``: per contact point its gap, normal and the directions of a linearised
            friction cone), which integrators that solve a complementarity / QP step take
            (``ne_dry_friction``).
    """

    POTENTIAL = "potential"
    GENERALIZED_FORCE = "generalized_force"
    WRENCH_POLYTOPE = "wrench_polytope"
    STEP_FORCE = "step_force"
    COMPLEMENTARITY = "complementarity"


class ForceModel:
    """Base class for force models. Subclasses set ``name``, ``forms`` and implement their forms.

    All methods receive and return CasADi expressions (SX or MX) and must not evaluate them numerically,
    so the result can be differentiated, compiled to C and run on a GPU.
    """

    name: ClassVar[str] = "force"
    forms: ClassVar[frozenset[ForceForm]] = frozenset()
    energy_input: ClassVar[bool] = True
    """Whether this force can add energy to the bodies (actuation, a controller, a moving environment).
    ``False`` for models that only store energy (gravity, springs) or dissipate it (damping, drag in a
    still fluid, friction): a :class:`~pbframework.simulate.Simulator` whose force models all say ``False``
    marks a rollout ``diverged`` where its energy rises above its start by more than ``energy_limit``.
    The default ``True`` is the safe one for a new model: no energy test."""
    group: ClassVar[bool] = False
    """Whether the model's forms take models with ``ball`` / ``free`` joints (configurations of ``nq``
    entries, generalised forces of ``nv``: the gradient along the tangent, see
    :func:`tangent_gradient`). Integrators refuse other force models on such models."""
    dissipative: ClassVar[bool] = False
    """Whether this force removes energy (damping, drag, friction, a contact's damping): the summary then
    expects a conservative integrator's energy to fall."""

    def params(self) -> dict[str, Any]:
        """The parameters this instance was built with (for messages and saved results)."""
        return {}

    def potential(self, model: ArticulatedBody, q_next, q_cur, q_prev, dt, t):
        """Potential term of the PBAD energy for the step ending at ``q_next`` at time ``t``."""
        raise TypeError(f"force model {self.name!r} has no potential form (its forms: "
                        f"{sorted(f.value for f in self.forms)})")

    def generalized_force(self, model: ArticulatedBody, q, qd, t):
        """Generalised force (length nq) at configuration ``q``, velocity ``qd``, time ``t``."""
        raise TypeError(f"force model {self.name!r} has no generalized_force form (its forms: "
                        f"{sorted(f.value for f in self.forms)})")

    def wrench_polytope(self, model: ArticulatedBody, q):
        """Vertices of the feasible contact wrench set per contact point."""
        raise TypeError(f"force model {self.name!r} has no wrench_polytope form (its forms: "
                        f"{sorted(f.value for f in self.forms)})")

    def step_force(self, model: ArticulatedBody, q_next, q_cur, dt, t):
        """Generalised force (``nv`` entries) acting over the step from ``q_cur`` to ``q_next``, evaluated at
        ``q_next`` (``ForceForm.STEP_FORCE``)."""
        raise TypeError(f"force model {self.name!r} has no step_force form (its forms: "
                        f"{sorted(f.value for f in self.forms)})")

    def energy(self, model: ArticulatedBody, q):
        """Potential energy at ``q`` for conservative models, else ``None``."""
        return None

    def contact_forces(self, model: ArticulatedBody, q, qd, t):
        """For contact models: the world force (3 x ``n_contacts``, one column per contact point of the model,
        ``model.contact_points``) the model applies at ``(q, qd)`` -- what the viewer draws; ``None`` for
        other models and for contact forces that are not a function of the state (a step's QP solution)."""
        return None

    # -- per-step numeric inputs (for forces computed by arbitrary Python code, e.g. a controller) ----------
    def n_inputs(self, model: ArticulatedBody) -> int:
        """Length of the numeric input vector ``u`` this model reads every step (default 0: none).

        A Python callback cannot live inside a CasADi graph, so a model whose force comes from one (a
        controller) declares ``n_inputs(model) = m > 0``. An integrator then creates a symbol ``u``
        (m x 1, of the same symbolic type as ``q``), adds it to the step problem's parameters, and calls
        ``potential(..., t, u=u)`` and ``generalized_force(..., t, u=u)`` (the keyword is passed only to
        models with ``m > 0``). Before each step the simulator evaluates :meth:`input_values` at the state
        the step starts from and sets ``u`` to the result.
        """
        return 0

    def input_values(self, model: ArticulatedBody, t: float, q, qd):
        """Numeric inputs (length :meth:`n_inputs`) for the step starting at time ``t`` in state ``(q, qd)``.

        ``q`` and ``qd`` are NumPy arrays of length ``nq``. Called by the simulator once per step, outside
        the CasADi graph, so arbitrary Python code may run here.
        """
        raise TypeError(f"force model {self.name!r} reads no inputs (n_inputs is 0)")

    # -- states of the force model itself (actuator activations, a controller's integral) ---------------------
    def n_states(self, model: ArticulatedBody) -> int:
        """Length of the model's own state ``a`` (default 0: none), carried from step to step in the step state.

        A force model with states (MuJoCo's actuator activations, a PID controller's integral and its
        slew-limited set-point) declares ``n_states(model) = k > 0`` and implements :meth:`next_states`. The
        step state then ends with ``a`` (``s = [s_integrator; a]``, :mod:`pbframework.force_states`), and the
        model's forms receive ``u = [inputs; a; a_next]`` (``n_inputs + 2 k`` entries): the states at the step's
        start and after it, both constants of the step. ``a`` advances once per step, explicitly from the
        state the step starts from -- a discrete update, as MuJoCo's Euler and implicit integrators advance
        ``act`` -- except under the Runge-Kutta integrators, which integrate it in their stages from
        :meth:`state_rates` (the forms then see each stage's ``a``) and end the step with
        :meth:`advance_states`, as MuJoCo's RK4 does.
        """
        return 0

    def initial_states(self, model: ArticulatedBody) -> Any:
        """The states ``a`` a rollout starts from (:meth:`n_states` numbers; default zeros, MuJoCo's reset)."""
        return [0.0] * int(self.n_states(model))

    def next_states(self, model: ArticulatedBody, q, qd, t, dt, u, a):
        """The states after a step of length ``dt`` from ``(q, qd)`` at time ``t`` with the inputs ``u``
        (:meth:`n_inputs` entries, possibly none) and the states ``a`` (symbolic; :meth:`n_states` entries)."""
        n = self.n_states(model)
        raise TypeError(f"force model {self.name!r} declares n_states = {n} but does not implement next_states"
                        if n else f"force model {self.name!r} has no states (n_states is 0)")

    def state_rates(self, model: ArticulatedBody, q, qd, t, dt, u, a):
        """The states' rate of change at ``(q, qd, t, a)`` (MuJoCo's ``act_dot``), which the explicit
        Runge-Kutta integrators (``rk2``, ``rk3``, ``rk4``) integrate with their stages, as MuJoCo's RK4 does;
        default ``(next_states(...) - a) / dt``, the rate of the discrete update."""
        nxt = self.next_states(model, q, qd, t, dt, u, a)
        return ((ca.vertcat(*nxt) if isinstance(nxt, (list, tuple)) else nxt) - a) / dt

    def advance_states(self, model: ArticulatedBody, q, qd, t, dt, u, a, rate):
        """The states after a step of ``dt`` from ``a`` at the (Runge-Kutta weighted) ``rate``, with ``(q, qd)``
        the step's start: default ``a + dt rate``. ``next_states`` is ``advance_states`` at ``state_rates``
        for a model that defines these two."""
        return a + dt * rate

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


def force_model(name: str, **params: Any) -> ForceModel:
    """Build the registered force model ``name`` with ``params``.

    Raises:
        UnknownPluginError: no force model ``name`` (the message lists the available ones).
        PluginParameterError: a parameter the model does not take, or a required one missing (the message
            lists its parameters with their defaults).
    """
    from .registry import build_plugin

    return build_plugin("force", name, **params)


def potential_energy_function(model: ArticulatedBody, forces) -> ca.Function:
    """``V: q -> potential energy`` summed over the conservative models in ``forces``."""
    q = ca.SX.sym("q", model.nq)
    total = ca.SX(0)
    for f in forces:
        e = f.energy(model, q)
        if e is not None:
            total = total + e
    return ca.Function("potential_energy", [q], [total], ["q"], ["V"])


def tangent_gradient(model: ArticulatedBody, energy, name: str) -> ca.Function:
    """``q -> dV/dq`` (``nq`` entries) for a model without ``ball`` / ``free`` joints, else ``q -> d/de
    V(q_integrate(q, e))`` at ``e = 0`` (``nv`` entries: the gradient along the configuration's tangent, the
    generalised force's dual of Pinocchio's velocities). ``energy(model, q)`` is the symbolic energy."""
    q = ca.SX.sym("q", model.nq)
    if not model.on_group:
        return ca.Function(name, [q], [ca.gradient(energy(model, q), q)])
    from .lie import q_integrate

    e = ca.SX.sym("e", model.nv)
    g = ca.gradient(energy(model, q_integrate(model)(q, e)), e)
    return ca.Function(name, [q], [ca.substitute(g, e, ca.DM.zeros(model.nv))])
