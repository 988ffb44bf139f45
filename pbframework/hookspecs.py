"""Hook specifications: the plug-in author's manual.

A pbframework plug-in is a Python module (or object) with one or more functions below, marked with
:data:`hookimpl` and named exactly as here. It is installed through the entry-point group ``pbframework``
of its package::

    # pyproject.toml of your package
    [project.entry-points.pbframework]
    my_forces = "my_package.forces"       # the module holding the @hookimpl functions

Built-in plug-ins (``pbframework.plugins.*``) register through the very same entry points.

Every hook takes no arguments and returns a list of :class:`PluginInfo` (one per thing the plug-in offers),
so one module may offer several. pbframework calls each hook once, when the registry is first used; all
results are collected (no first-result-wins), and a name offered twice within one family is an error that
names both plug-ins. A hook implementation with a misspelt name, unexpected arguments or a malformed
return value is reported with the plug-in's name.

The families and what ``PluginInfo.build`` must be, per family:

==============  ==============================  ===================================================
family          hook                            ``build``
==============  ==============================  ===================================================
force           :func:`pbf_force_models`        ``build(**params) -> ForceModel``
dynamics        :func:`pbf_dynamics`            ``build(model) -> casadi.Function``
fd              :func:`pbf_forward_dynamics`    ``build(model) -> casadi.Function (q, qd, tau) -> qdd``
integrator      :func:`pbf_integrators`         ``build(model, config, forces) -> StepProblem``
solver          :func:`pbf_solvers`             ``build(**options) -> Solver``
backend         :func:`pbf_backends`            ``build(problem, **options) -> compiled runner``
==============  ==============================  ===================================================

A worked example of a new force model is in ``docs/plugins.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import pluggy

PROJECT = "pbframework"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
"""Decorator marking a plug-in's hook implementation: ``@pbframework.hookimpl``."""


@dataclass(frozen=True)
class PluginInfo:
    """What a plug-in offers in one family.

    Attributes:
        name: the name users select it by (``Simulator(integrator="pbad")``); unique within its family.
        description: one line shown by ``pbf plugins``.
        build: the factory; its signature depends on the family (see the table in this module).
        meta: family-specific facts a caller may check before building (for example an integrator's
            accepted force forms and orders); documented by the family's hook.
    """

    name: str
    description: str
    build: Callable[..., Any]
    meta: Mapping[str, Any] = field(default_factory=dict)


# ======================================================================================================
# Force models
# ======================================================================================================

@hookspec
def pbf_force_models() -> list[PluginInfo]:
    """Offer force models.

    Returns:
        A list of :class:`PluginInfo` whose ``build(**params)`` returns a
        :class:`pbframework.forces.ForceModel` instance configured by ``params`` (for example
        ``build(stiffness=1e4)``). The force model declares in ``forms`` which forms it provides
        (:class:`pbframework.forces.ForceForm`: potential, generalised force, wrench polytope, step force,
        complementarity) and implements the matching methods with CasADi expressions. A wrench polytope
        (``wrench_polytope(model, q)``) returns one 3 x V matrix of vertices per contact point, in
        ``model.contact_points`` order; the NMDP integrators combine them with simplex weights. A model may
        read per-step numeric inputs (``n_inputs``, ``input_values``: a controller's torques, MuJoCo's
        ``ctrl``) and keep states of its own (``n_states``, ``initial_states``, ``next_states``: actuator
        activations, a PID's integral), which :mod:`pbframework.force_states` carries in the step state.

    Called once, when the registry is first used. All implementations are collected.
    """


# ======================================================================================================
# Dynamics functions and forward-dynamics algorithms
# ======================================================================================================

@hookspec
def pbf_dynamics() -> list[PluginInfo]:
    """Offer rigid-body dynamics functions other than forward dynamics.

    Returns:
        A list of :class:`PluginInfo` whose ``build(model)`` returns a ``casadi.Function`` for the given
        :class:`~pbframework.model.ArticulatedBody`. The built-ins are ``rnea`` ``(q, v, a) -> tau``,
        ``crba`` ``q -> M``, ``nle`` ``(q, v) -> h`` and ``gravity_torque`` ``q -> g``. The result is
        cached on the model by :mod:`pbframework.dynamics`.

    Called once, when the registry is first used. All implementations are collected.
    """


@hookspec
def pbf_forward_dynamics() -> list[PluginInfo]:
    """Offer forward-dynamics algorithms ``(q, qd, tau) -> qdd``.

    Returns:
        A list of :class:`PluginInfo` whose ``build(model)`` returns a ``casadi.Function`` with inputs
        ``(q, qd, tau)`` (each of length ``model.nq``) and output ``qdd``. Selected by
        ``pbframework.dynamics.forward_dynamics(model, algorithm=name)``. Optional ``meta`` keys:

        - ``"depth"``: a callable ``depth(n, schedule="parallel") -> int``, the number of sequential
          levels (data-parallel launches) on a chain of ``n`` coordinates; ``schedule`` is a
          :class:`pbframework.parallel.scan.Schedule` or its name (``"sequential"`` / ``"parallel"``).
        - ``"trees"``: ``True`` when branching models are supported (``False``: serial chains only; the
          build raises a ``ModelError`` naming the branching link).

    Called once, when the registry is first used. All implementations are collected.
    """


# ======================================================================================================
# Time stepping: integrators, solvers, backends
# ======================================================================================================

@hookspec
def pbf_integrators() -> list[PluginInfo]:
    """Offer time integrators.

    Returns:
        A list of :class:`PluginInfo` whose ``build(model, config, forces)`` assembles one timestep as a
        step problem (data: CasADi functions and sizes) for the given model, step configuration (dt,
        order, ...) and force models. ``meta`` states what the integrator accepts: ``"forms"`` (the set of
        force forms) and ``"orders"`` (the supported orders); optional ``"energy"``: what the method does
        to the energy of a conservative system, ``"conserves"`` (bounded error that shrinks with the step),
        ``"dissipates"`` or ``"drifts"`` (either way, growing with time), or a function of the order giving
        one of those (``Trajectory.summary`` states it beside the drift); optional ``"backends"``: the
        backends that can run its problems (default: all; the Simulator refuses others in one line).

    Called once, when the registry is first used. All implementations are collected.
    """


@hookspec
def pbf_solvers() -> list[PluginInfo]:
    """Offer numeric solvers for step problems.

    Returns:
        A list of :class:`PluginInfo` whose ``build(**options)`` returns a solver object that runs the
        numeric loop on a step problem of the kinds listed in ``meta["problems"]``
        (:class:`pbframework.step.ProblemKind` values: ``"minimize"``, ``"least_squares"``,
        ``"constrained"``); its ``solve(problem, x0, p)`` returns a :class:`pbframework.step.SolveResult`,
        and an unconverged result makes the Simulator retry the step as two halves. A constrained (NMDP)
        problem carries its functions in ``problem.constrained`` (:class:`pbframework.nmdp.ConstrainedParts`).

    Called once, when the registry is first used. All implementations are collected.
    """


@hookspec
def pbf_backends() -> list[PluginInfo]:
    """Offer execution backends (CasADi VM, generated C, CUDA, ...).

    Returns:
        A list of :class:`PluginInfo` whose ``build(problem, **options)`` returns an object that runs a
        step problem's solver loop on that backend.

        That object (a *runner*; built-ins: ``casadi``, ``c``) offers ``solve(x0, p) -> SolveResult``,
        ``init(q0, qd0, t0, dt, u=None) -> s0``, ``step(s, t, dt, u=None) -> (s_next, stats)``,
        ``rollout(q0, qd0, t0, dt, steps, u=None, state=None, first_step=0)`` (``state``: continue from
        row ``first_step`` of a rollout started at ``t0``, with its step times) and ``rollout_batch(Q0, QD0,
        t0, dt, steps, U=None, threads=None)`` (results: :class:`pbframework.codegen.step_runner.RolloutArrays` and
        ``BatchArrays``). :class:`~pbframework.simulate.Simulator` passes ``solver`` (positional),
        ``solver_options``, ``model``, ``on_failure``, ``max_halvings``, ``max_speed`` and the user's
        ``backend_options``.

    Called once, when the registry is first used. All implementations are collected.
    """
