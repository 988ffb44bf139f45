r"""``ne_dry_friction``: the Newton-Euler dry-friction baseline of seed 002 (Eq. 1 and 7) as velocity-level
time stepping (Stewart and Trinkle) with Anitescu's convex relaxation, one quadratic program per step.

State ``[q; v]``. Each step finds the next velocity ``v+`` from

    min_v+  1/2 v+^T M v+ - v+^T (M v + dt (tau - h))
    s.t.    phi_i + dt (n + mu d_ij)^T J_i v+ >= 0     (every contact i, every facet j of the friction pyramid),

``M = M(q)``, ``h`` the Coriolis and centrifugal forces, ``tau`` the generalised forces of the force models
(gravity among them), and the rows from each ``dry_friction`` force model
(:meth:`~pbframework.plugins.forces.dry_friction.DryFriction.contact_constraints`). Its optimality
conditions are the complementarity conditions of Eq. 7 with the cone linearised, and the relaxed normal
condition of Anitescu's scheme (a sliding point separates by ``dt mu |v_t|`` per step, a known artefact of
the convex form). Then ``q+ = q (+) dt v+`` (semi-implicit; on the group by the exponential map).

The QP is solved by qpOASES through ``casadi.conic`` inside the step's CasADi graph, so this integrator runs
on the ``casadi`` backend only (the generated-C driver cannot emit a qpOASES call; ``backend="c"`` is
refused in one line). qpOASES prints its copyright notice when a solver instance is created; it is kept off
standard output.
"""

from __future__ import annotations

import casadi as ca

from pbframework.forces import ForceForm
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.lie import q_integrate
from pbframework.model import ArticulatedBody
from pbframework.nmdp import qpoases_conic
from pbframework.step import (
    ProblemKind, StepConfig, StepError, StepProblem, force_forms, force_label, input_slices, split_params,
    standard_params, state_init, velocity_level_terms,
)


def build_ne_dry_friction(model: ArticulatedBody, config: StepConfig, forces) -> StepProblem:
    """The time-stepping problem (module docstring)."""
    forces = tuple(forces)
    for f in forces:
        forms = force_forms(f)
        if ForceForm.GENERALIZED_FORCE not in forms and ForceForm.COMPLEMENTARITY not in forms:
            raise StepError(f"ne_dry_friction: force model {getattr(f, 'name', f)!r} has neither a generalised "
                            f"force nor a complementarity form (its forms: {sorted(x.value for x in forms)})")
    contacts = [f for f in forces if ForceForm.COMPLEMENTARITY in force_forms(f)]
    pushing = tuple(f for f in forces if ForceForm.GENERALIZED_FORCE in force_forms(f))
    nq, nv = model.nq, model.nv
    ns = nq + nv
    nu = input_slices(model, forces)[-1][1] if forces else 0
    # the step's numbers as an SX function; the QP between them in MX
    (qs, vs, ts, hs, us), M, bias, tau = velocity_level_terms(model, pushing, nu)
    g = -(ca.mtimes(M, vs) + hs * (tau - bias))
    phi, G = [], []
    for f in contacts:
        ph, gg = f.contact_constraints(model, qs)
        phi.append(ph)
        G.append(gg)
    m = sum(int(x.numel()) for x in phi)
    pre = ca.Function("ne_dry_friction_terms", [qs, vs, ts, hs, us],
                      [M, g, ca.vertcat(*phi) if phi else ca.SX(0, 1), hs * ca.vertcat(*G) if G else ca.SX(0, nv)])
    x, p = ca.MX.sym("x", 0), ca.MX.sym("p", ns + 2 + nu)
    s, dt, t, u = split_params(p, ns)
    q, v = s[:nq], s[nq:]
    Mm, gm, phim, Am = pre(q, v, t, dt, u)
    if m:
        qp = qpoases_conic("ne_dry_friction_qp", ca.Sparsity.dense(nv, nv), ca.Sparsity.dense(m, nv))
        v_next = qp(h=Mm, g=gm, a=Am, lba=-phim, uba=ca.MX(ca.DM.inf(m)))["x"]
    else:
        v_next = ca.solve(Mm, -gm)
    s_next = ca.vertcat(q_integrate(model)(q, dt * v_next), v_next)
    return StepProblem(
        integrator="ne_dry_friction", kind=ProblemKind.EXPLICIT, config=config, nq=nq, nv=nv, nx=0, ns=ns, nu=nu,
        init=state_init(nq, nu, nv),
        params=standard_params(ns, nu),
        guess=ca.Function("guess", [p], [ca.MX(0, 1)], ["p"], ["x0"]),
        advance=ca.Function("advance", [x, p], [s_next], ["x", "p"], ["s_next"]),
        order=1, objective=None, forces=tuple(force_label(f) for f in forces),
        velocity="the state's velocity v+ (the QP's solution)", start="s0 = [q0; qd0]",
        meta={"contact_rows": m, "solver": "qpoases (casadi.conic)"},
    )


@hookimpl
def pbf_integrators():
    return [PluginInfo(
        "ne_dry_friction",
        "Newton-Euler with Coulomb dry friction: velocity-level time stepping, linearised cone, one qpOASES QP "
        "per step (seed 002 Eq. 1 and 7 baseline; casadi backend)",
        build_ne_dry_friction,
        meta={"forms": frozenset({ForceForm.GENERALIZED_FORCE, ForceForm.COMPLEMENTARITY}), "orders": (1,),
              "default_order": 1, "implicit": False, "group": True, "energy": "dissipates",
              "backends": ("casadi",)},
    )]


__all__ = ["build_ne_dry_friction"]
