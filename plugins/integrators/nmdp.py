r"""The NMDP integrators of seed 001: ``ne_nmdp`` (Eq. 6), ``pbd_nmdp`` (Eq. 12) and the NE-MDP baseline
``ne_mdp`` (Eq. 3 with the MDP QP).

State ``[q; v]`` (``v`` the velocity over the last step). With ``h`` the step, ``theta = q (+) delta`` the
next configuration, ``thetadot = delta / h`` and the contact force ``sum_x J_x(theta)^T v_x(theta) w_x`` of
the ``wrench_polytope`` force models (:mod:`pbframework.plugins.forces.wrench_polytope`):

``ne_nmdp`` (backward Euler on the Newton-Euler equation, Eq. 1-2 and 6)::

    G = M(theta) (thetadot - v) / h + C(theta, thetadot) - tau(theta, thetadot, t + h) - sum_x J_x^T v_x w_x
    K = 1/2 thetadot^T M(theta) thetadot

``pbd_nmdp`` (position-based dynamics, Eq. 4 and 12), with the previous configuration
``q_prev = q (+) (-h v)`` and the inertia integral ``I`` of seed 000 Eq. 8::

    G = d/dtheta int rho |X(theta) - 2 X(q) + X(q_prev)|^2 / (2 h^2) - tau - sum_x J_x^T v_x w_x
    K = int rho |X(theta) - X(q)|^2 / (2 h^2)

Both minimise ``K`` subject to ``G = 0`` and the simplex constraints on ``w``: a
:attr:`~pbframework.step.ProblemKind.CONSTRAINED` problem for the ``pgm`` / ``zopgm`` solvers
(Alg. 1; :mod:`pbframework.nmdp`). ``tau`` are the generalised forces of the other force models at the
*next* state, so ``pd`` there is Tan et al.'s stable PD consistent with backward Euler (seed 001 §VI:
"uses theta, thetadot instead of theta_-, thetadot_-"); ``stable_pd`` is accepted and means the same (its
own look-ahead is not applied again). Alg. 2's subdivision is the Simulator's halving of an unconverged step
(``max_halvings``): the state ``[q; v]`` needs no re-expression for a step of half the size, and the
previous configuration of ``pbd_nmdp`` is taken back by ``h v`` with the new ``h``, where Alg. 2 keeps
``theta_--`` and scales by ``alpha`` -- the two agree to first order in ``h``.

``ne_mdp`` (the baseline): forward, linearised Newton-Euler (Eq. 3) at the current state with the contact
weights from one MDP QP per step (minimise the next kinetic energy ``1/2 v+^T M(q) v+`` over the simplex),
solved by qpOASES inside the step's CasADi graph; ``stable_pd`` there is Tan et al.'s semi-implicit form
``tau = -kp (q + h v+ - qbar) - kd (v+ - vbar)``, which is linear in ``v+``.
"""

from __future__ import annotations

import casadi as ca

from pbframework.dynamics import crba, nonlinear_effects
from pbframework.forces import ForceForm
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.inertia import inertia_integral
from pbframework.lie import q_integrate
from pbframework.model import ArticulatedBody
from pbframework.nmdp import ConstrainedParts, is_polytope, polytope_terms, qpoases_conic, simplex_rows
from pbframework.plugins.forces.pd import PD, StablePD
from pbframework.step import (
    ProblemKind, StepConfig, StepError, StepProblem, force_forms, force_label,
    generalized_force_expr, input_slices, split_params, standard_params, state_init, velocity_level_terms,
    zero_gravity_model,
)


def _as_next_state_pd(f):
    """``stable_pd`` evaluated at the next state is plain PD there (see the module docstring)."""
    if isinstance(f, StablePD):
        return PD(f.kp, f.kd, f.target, dofs=f.dofs, track_velocity=f.track_velocity)
    return f


def _split_forces(name: str, forces):
    forces = tuple(forces)
    polytopes = tuple(f for f in forces if is_polytope(f))
    pushing = []
    for f in forces:
        if is_polytope(f):
            continue
        g = _as_next_state_pd(f) if name != "ne_mdp" else f
        if ForceForm.GENERALIZED_FORCE not in force_forms(g) and not isinstance(f, StablePD):
            raise StepError(f"{name}: force model {getattr(f, 'name', f)!r} has neither a generalised force nor a "
                            f"wrench-polytope form (its forms: {sorted(x.value for x in force_forms(f))})")
        pushing.append(g)
    return forces, polytopes, tuple(pushing)


def build_nmdp(model: ArticulatedBody, config: StepConfig, forces, scheme: str = "ne") -> StepProblem:
    """The NMDP step problem, ``scheme`` ``"ne"`` (Eq. 6) or ``"pbd"`` (Eq. 12); module docstring."""
    name = f"{scheme}_nmdp"
    forces, polytopes, pushing = _split_forces(name, forces)
    nq, nv = model.nq, model.nv
    ns = nq + nv
    nu = input_slices(model, forces)[-1][1] if forces else 0
    integ = q_integrate(model)
    d = ca.SX.sym("delta", nv)
    p = ca.SX.sym("p", ns + 2 + nu)
    s, h, t, u = split_params(p, ns)
    q, v = s[:nq], s[nq:]
    theta = integ(q, d) if model.on_group else q + d
    thetadot = d / h
    # the generalised forces at theta, taken along the tangent e at theta (e = 0 afterwards)
    e = ca.SX.sym("e", nv)
    theta_e = integ(theta, e) if model.on_group else theta + e

    def at0(x):
        return ca.substitute(x, e, ca.DM.zeros(nv))

    tau = generalized_force_expr(model, pushing, theta, thetadot, t + h, u if nu else None) if pushing \
        else ca.SX.zeros(nv)
    if model.n_contacts and polytopes:
        w_n = sum(sum(f.vertex_counts(model)) for f in polytopes)
    else:
        w_n = 0
    w = ca.SX.sym("w", w_n)
    if polytopes:
        if model.n_contacts == 0:
            raise StepError(f"{name}: model {model.name!r} has no contact points for the wrench_polytope force; "
                            f"give its links contact_points (or pbframework.geometry.sample_contact_points)")
        gen, gen_frozen, V_all, V_sym, F, groups = polytope_terms(model, polytopes, theta, e, w, tangent=theta_e)
        gen, gen_frozen, F = at0(gen), at0(gen_frozen), at0(F)
    else:
        gen = gen_frozen = ca.SX.zeros(nv)
        V_all, V_sym, F, groups = ca.SX(3, 0), ca.SX.sym("V", 3, 0), ca.SX(3, max(model.n_contacts, 0)), ()
    if scheme == "ne":
        M = crba(model)(theta)
        bias = nonlinear_effects(zero_gravity_model(model))(theta, thetadot)
        inertial = ca.mtimes(M, thetadot - v) / h + bias
        K = 0.5 * ca.dot(thetadot, ca.mtimes(M, thetadot))
    elif scheme == "pbd":
        I = inertia_integral(model)
        q_prev = integ(q, -h * v) if model.on_group else q - h * v
        I_alpha = (I(theta_e, theta_e) - 4 * I(theta_e, q) + 2 * I(theta_e, q_prev)) / (2 * h**2)
        inertial = at0(ca.gradient(I_alpha, e))
        K = (I(theta, theta) - 2 * I(theta, q) + I(q, q)) / (2 * h**2)
    else:
        raise StepError(f"nmdp: unknown scheme {scheme!r} (allowed: 'ne', 'pbd')")
    G = inertial - tau - gen
    G_frozen = inertial - tau - gen_frozen
    G_d = ca.jacobian(G, d)
    G0_d = ca.substitute(ca.jacobian(G_frozen, d), ca.vec(V_sym), ca.vec(V_all)) if w_n else G_d
    G_w = ca.jacobian(G, w)
    HK, gK = ca.hessian(K, d)
    parts = ConstrainedParts(
        nv=nv, nw=w_n, groups=tuple(groups), scheme=scheme,
        K=ca.Function("nmdp_K", [d, p], [K], ["delta", "p"], ["K"]),
        K_derivs=ca.Function("nmdp_K_derivs", [d, p], [K, gK, HK], ["delta", "p"], ["K", "dK", "d2K"]),
        G=ca.Function("nmdp_G", [d, w, p], [G], ["delta", "w", "p"], ["G"]),
        G_derivs=ca.Function("nmdp_G_derivs", [d, w, p], [G, G_d, G0_d, G_w], ["delta", "w", "p"],
                             ["G", "G_delta", "G0_delta", "G_w"]),
        forces=ca.Function("nmdp_forces", [d, w, p], [F], ["delta", "w", "p"], ["f"]),
        G_jacobian=(ca.Function("nmdp_G_jac0", [d, w, p], [G, G0_d], ["delta", "w", "p"], ["G", "G0_delta"]),
                    ca.Function("nmdp_G_jac1", [d, w, p], [G, G_d], ["delta", "w", "p"], ["G", "G_delta"])),
        G_weights=ca.Function("nmdp_G_w", [d, p], [G_w], ["delta", "p"], ["G_w"]),
    )
    x = ca.SX.sym("x", nv + w_n)
    xp = ca.Function("advance_inner", [d, p], [ca.vertcat(theta, thetadot)])
    return StepProblem(
        integrator=name, kind=ProblemKind.CONSTRAINED, config=config, nq=nq, nv=nv, nx=nv + w_n, ns=ns, nu=nu,
        init=state_init(nq, nu, nv),
        params=standard_params(ns, nu),
        guess=ca.Function("guess", [p], [ca.SX.zeros(nv + w_n)], ["p"], ["x0"]),
        advance=ca.Function("advance", [x, p], [xp(x[:nv], p)], ["x", "p"], ["s_next"]),
        order=1, objective=None, forces=tuple(force_label(f) for f in forces),
        velocity="thetadot = (q_k (-) q_{k+1}) / dt (backward difference)", start="s0 = [q0; qd0]",
        meta={"scheme": scheme, "contact_weights": w_n}, constrained=parts,
    )


def build_ne_mdp(model: ArticulatedBody, config: StepConfig, forces) -> StepProblem:
    """The NE-MDP baseline step (module docstring): one qpOASES QP per step inside the CasADi graph."""
    forces, polytopes, pushing = _split_forces("ne_mdp", forces)
    stable = [f for f in pushing if isinstance(f, StablePD)]
    explicit = tuple(f for f in pushing if not isinstance(f, StablePD))
    nq, nv = model.nq, model.nv
    ns = nq + nv
    nu = input_slices(model, forces)[-1][1] if forces else 0
    (qs, vs, ts, hs, us), M, bias, tau = velocity_level_terms(model, explicit, nu)
    A = M
    for f in stable:               # Tan et al.: tau = -kp (q + h v+ - qbar) - kd (v+ - vbar), linear in v+
        from pbframework.plugins.forces._common import gather, scatter, velocity_indices

        idx, kp, kd = f._gains(model)
        vidx = velocity_indices(f.name, model, idx)
        qbar, vbar = f._target(ts + hs, len(idx))
        tau = tau + scatter(model, vidx, -kp * (gather(idx, qs) - qbar) + kd * vbar, nv)
        A = A + ca.diag(scatter(model, vidx, hs**2 * kp + hs * kd, nv))
    b = ca.mtimes(M, vs) + hs * (tau - bias)
    e = ca.SX.sym("e", nv)
    integ = q_integrate(model)
    if polytopes and model.n_contacts == 0:
        raise StepError(f"ne_mdp: model {model.name!r} has no contact points for the wrench_polytope force")
    w_n = sum(sum(f.vertex_counts(model)) for f in polytopes) if polytopes else 0
    w = ca.SX.sym("w", w_n)
    if w_n:
        gen, *_, groups = polytope_terms(model, polytopes, qs, e, w,
                                         tangent=integ(qs, e) if model.on_group else qs + e)
        Bm = ca.substitute(ca.jacobian(gen, w), e, ca.DM.zeros(nv)) * hs   # nv x nw: h J^T V
    else:
        Bm, groups = ca.SX(nv, 0), ()
    pre = ca.Function("ne_mdp_terms", [qs, vs, ts, hs, us], [M, A, b, Bm])
    x, p = ca.MX.sym("x", 0), ca.MX.sym("p", ns + 2 + nu)
    s, dt, t, u = split_params(p, ns)
    q, v = s[:nq], s[nq:]
    Mm, Am, bm, Bmm = pre(q, v, t, dt, u)
    a = ca.solve(Am, bm)
    if w_n:
        Binv = ca.solve(Am, Bmm)                       # v+ = a + Binv w
        H = ca.mtimes([Binv.T, Mm, Binv])
        g = ca.mtimes([Binv.T, Mm, a])
        Arow = simplex_rows(groups)
        qp = qpoases_conic("ne_mdp_qp", ca.Sparsity.dense(w_n, w_n), Arow.sparsity(), hessian_type="semidef")
        wv = qp(h=H, g=g, a=Arow, lba=-ca.DM.inf(len(groups)), uba=ca.DM.ones(len(groups)),
                lbx=ca.DM.zeros(w_n), ubx=ca.DM.ones(w_n))["x"]
        v_next = a + ca.mtimes(Binv, wv)
    else:
        v_next = a
    s_next = ca.vertcat(integ(q, dt * v_next), v_next)
    return StepProblem(
        integrator="ne_mdp", kind=ProblemKind.EXPLICIT, config=config, nq=nq, nv=nv, nx=0, ns=ns, nu=nu,
        init=state_init(nq, nu, nv),
        params=standard_params(ns, nu),
        guess=ca.Function("guess", [p], [ca.MX(0, 1)], ["p"], ["x0"]),
        advance=ca.Function("advance", [x, p], [s_next], ["x", "p"], ["s_next"]),
        order=1, objective=None, forces=tuple(force_label(f) for f in forces),
        velocity="the state's velocity v+ (linearised Newton-Euler with the MDP contact weights)",
        start="s0 = [q0; qd0]", meta={"contact_weights": w_n, "solver": "qpoases (casadi.conic)"},
    )


_FORMS = frozenset({ForceForm.GENERALIZED_FORCE, ForceForm.WRENCH_POLYTOPE, ForceForm.POTENTIAL})


def _ne_nmdp(model, config, forces):
    return build_nmdp(model, config, forces, "ne")


def _pbd_nmdp(model, config, forces):
    return build_nmdp(model, config, forces, "pbd")


@hookimpl
def pbf_integrators():
    common = {"forms": _FORMS, "orders": (1,), "default_order": 1, "group": True, "energy": "dissipates"}
    return [
        PluginInfo("ne_nmdp", "NMDP with backward-Euler Newton-Euler dynamics (seed 001 Eq. 6): min kinetic "
                              "energy s.t. dynamics and wrench-polytope contact; solvers pgm / zopgm",
                   _ne_nmdp, meta={**common, "implicit": True, "backends": ("casadi",)}),
        PluginInfo("pbd_nmdp", "NMDP with position-based dynamics (seed 001 Eq. 12); solvers pgm / zopgm",
                   _pbd_nmdp, meta={**common, "implicit": True, "backends": ("casadi",), "armature": False}),
        PluginInfo("ne_mdp", "NE-MDP baseline: forward linearised Newton-Euler with MDP contact weights from one "
                             "qpOASES QP per step (seed 001 Eq. 3)",
                   build_ne_mdp, meta={**common, "implicit": False, "backends": ("casadi",)}),
    ]


__all__ = ["build_nmdp", "build_ne_mdp"]
