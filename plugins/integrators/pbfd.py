r"""``pbfd``: position-based frictional dynamics, seed 002's gradient-level objective (Eq. 13).

The step is PBAD order 2's (:mod:`pbframework.plugins.integrators.pbad`): the energy ``E(q_{k+1})`` of
Eq. 5 with every potential-form force model (gravity, the normal contact potential ``C_perp P_perp`` of
``pbfd_contact``, ...). Friction is not conservative, so instead of minimising ``E`` the step minimises

    GE = 1/2 || dE/dq_{k+1} - dt^2 sum_f f_step(q_{k+1}, q_k) ||^2,

``f_step`` the :attr:`~pbframework.forces.ForceForm.STEP_FORCE` of each force model that has one
(``pbfd_contact``'s corrected tangential force, Eq. 12: ``C_par sum_p J_p^T f_par``). ``E`` is PBAD's
``dt^2``-scaled energy, so the step force enters times ``dt^2`` too. This is a least-squares problem with
residual ``r = dE/dq - dt^2 f_step``, solved by ``jtj_lm`` by default (Eq. 14's JTJ-LM; ``lm`` and
``lbfgs`` also take it, Table I); with ``precondition`` (default) the residual is weighted by the inverse
mass matrix at the step start like PBAD's residual objective, which leaves its zero unchanged. Without step
forces the residual's zero is PBAD order 2's minimiser (Lemma 4.2).

Everything else (start, restart for halving, velocity estimate, kinetic energy, adaptive error estimate,
the rotation group) is PBAD order 2's, and the problem runs on every backend.
"""

from __future__ import annotations

import dataclasses

import casadi as ca

from pbframework.forces import ForceForm
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.model import ArticulatedBody
from pbframework.step import (
    Objective, ProblemKind, StepConfig, StepError, StepProblem, force_forms, input_slices, split_params,
)


def build_pbfd(model: ArticulatedBody, config: StepConfig, forces) -> StepProblem:
    """The PBFD step problem (module docstring)."""
    from pbframework.plugins.integrators.pbad import build_pbad

    forces = tuple(forces)
    if int(config.order or 2) != 2:
        raise StepError(f"pbfd: order must be 2 (seed 002 builds on PBAD's order-2 energy), got {config.order}")
    if config.objective not in (Objective.AUTO, Objective.RESIDUAL):
        raise StepError(f"pbfd: the objective is Eq. 13's gradient-level one (objective='residual'), got "
                        f"{config.objective.value!r}")
    for f in forces:
        forms = force_forms(f)
        if ForceForm.POTENTIAL not in forms and ForceForm.STEP_FORCE not in forms:
            raise StepError(f"pbfd: force model {getattr(f, 'name', f)!r} has neither a potential nor a step "
                            f"force (its forms: {sorted(x.value for x in forms)})")
    potentials = tuple(f for f in forces if ForceForm.POTENTIAL in force_forms(f))
    energy_config = dataclasses.replace(config, order=2, objective=Objective.ENERGY)
    energy = build_pbad(model, energy_config, potentials)
    nq, nx = model.nq, energy.nx
    x, p = ca.SX.sym("x", nx), ca.SX.sym("p", energy.np)
    _, dt, t, u = split_params(p, energy.ns)
    r = ca.gradient(energy.objective_fn(x, p), x)
    steppers = [f for f in forces if ForceForm.STEP_FORCE in force_forms(f)]
    if steppers:
        q_next = energy.advance(x, p)[:nq]
        q_cur = p[:nq]
        slices = dict(zip(map(id, forces), input_slices(model, forces)))
        for f in steppers:
            a, b = slices[id(f)]
            kw = {"u": u[a:b]} if b > a else {}
            r = r - dt**2 * ca.reshape(f.step_force(model, q_next, q_cur, dt, t + dt, **kw), nx, 1)
    residual = ca.Function("pbfd_residual", [x, p], [r], ["x", "p"], ["r"])
    return dataclasses.replace(
        energy, integrator="pbfd", kind=ProblemKind.LEAST_SQUARES, objective_fn=None, residual=residual,
        objective=Objective.RESIDUAL, forces=tuple(energy.forces) + tuple(repr(f) for f in steppers
                                                                           if f not in potentials),
        metric=energy.metric if config.precondition else None, _derived={})


@hookimpl
def pbf_integrators():
    return [PluginInfo(
        "pbfd",
        "position-based frictional dynamics: PBAD order 2 with seed 002's gradient-level objective (Eq. 13) "
        "and non-integrable step forces (corrected friction, Eq. 12)",
        build_pbfd,
        meta={"forms": frozenset({ForceForm.POTENTIAL, ForceForm.STEP_FORCE}), "orders": (2,), "default_order": 2,
              "objectives": (Objective.RESIDUAL,), "implicit": True, "group": True,
              "energy": "dissipates", "armature": True},
    )]
