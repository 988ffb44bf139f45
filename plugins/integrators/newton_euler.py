"""Newton-Euler baselines: explicit integrators of ``M(q) qdd + C(q, qd) qd = sum of generalised forces``.

The acceleration comes from a forward-dynamics plug-in (``StepConfig.fd``, default ``"aba"``, so
``--fd cfa`` selects another registered algorithm) applied to the model with gravity switched off; gravity
and every other force enter through the force models' generalised-force form. The state is
``s = [q; qd]``, ``f(s, t) = [qd; qdd(q, qd, t)]``:

=====================  =====  ==========================================================================
name                   order  update
=====================  =====  ==========================================================================
forward_euler          1      ``s' = s + dt f(s, t)``
semi_implicit_euler    1      ``qd' = qd + dt qdd(q, qd, t)``, ``q' = q + dt qd'`` (seed 000 Eq. 3)
rk2                    2      explicit midpoint: ``k2 = f(s + dt/2 k1, t + dt/2)``, ``s' = s + dt k2``
rk3                    3      Kutta's third order: ``k3 = f(s - dt k1 + 2 dt k2, t + dt)``,
                              ``s' = s + dt/6 (k1 + 4 k2 + k3)``
rk4                    4      the classic fourth-order Runge-Kutta method
=====================  =====  ==========================================================================

On models with ``ball`` / ``free`` joints the state is ``[q (nq); v (nv)]`` and the configuration moves on
the group (:func:`pbframework.lie.q_integrate`), so quaternions stay unit: the Euler updates take
``q' = q (+) dt v``; the Runge-Kutta methods are Munthe-Kaas's (RKMK): the same tableau in the chart
``q(t) = q_n (+) c(t)`` at the step's start, where ``c' = dexp^-1_{-c}(v) = v + [c, v] / 2 + [c, [c, v]] / 12``
(the series truncated past the third order, which is exact to O(c^4) since the next Bernoulli term
vanishes; enough for order 4), ``[a, b]`` the Lie bracket of each joint's algebra (``a x b`` for a rotation
vector, the se(3) bracket for a free joint's twist, zero for hinges and slides).

Per-step force inputs ``u`` (``ForceModel.n_inputs``) are held constant over the step (zero-order hold). The
states of force models (``ForceModel.n_states``: actuator activations) advance once per step from the step's
start with the Euler methods (:mod:`pbframework.force_states`, as MuJoCo's Euler); the Runge-Kutta methods
integrate them in their stages from ``ForceModel.state_rates``, as MuJoCo's RK4 integrates ``act``.
The problems are :attr:`~pbframework.step.ProblemKind.EXPLICIT`: ``advance(x_empty, p)`` is the next
state, no solver runs. The velocity reported is the state's ``qd``.
"""

from __future__ import annotations

import casadi as ca

from pbframework.forces import ForceForm
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.lie import bracket_series, q_integrate
from pbframework.model import ArticulatedBody
from pbframework.step import (
    ProblemKind, StepConfig, StepProblem, acceleration_expr, force_label, force_sizes, input_slices,
    require_forms, split_params, standard_params, state_init,
)

METHODS: dict[str, tuple[int, str]] = {
    "forward_euler": (1, "Newton-Euler forward (explicit) Euler on forward dynamics"),
    "semi_implicit_euler": (1, "Newton-Euler semi-implicit (symplectic) Euler, seed 000 Eq. 3"),
    "rk2": (2, "Newton-Euler explicit midpoint Runge-Kutta, order 2"),
    "rk3": (3, "Newton-Euler Kutta's Runge-Kutta, order 3"),
    "rk4": (4, "Newton-Euler classic Runge-Kutta, order 4"),
}


TABLEAUS = {
    "rk2": ([[], [0.5]], [0.0, 1.0], [0.0, 0.5]),
    "rk3": ([[], [0.5], [-1.0, 2.0]], [1 / 6, 4 / 6, 1 / 6], [0.0, 0.5, 1.0]),
    "rk4": ([[], [0.5], [0.0, 0.5], [0.0, 0.0, 1.0]], [1 / 6, 2 / 6, 2 / 6, 1 / 6], [0.0, 0.5, 0.5, 1.0]),
}
"""Butcher tableaus ``(a, b, c)`` of the Runge-Kutta baselines (explicit midpoint, Kutta, classic)."""


def _rkmk(model: ArticulatedBody, tableau, integ, acc, q, v, t, dt, u):
    """One Runge-Kutta-Munthe-Kaas step of the tableau from ``(q, v)`` at ``t``: the next state."""
    A, B, C = tableau
    K, L = [], []                          # chart rates and accelerations of the stages
    for i in range(len(B)):
        ci = sum((A[i][j] * K[j] for j in range(i) if A[i][j] != 0.0), ca.SX.zeros(model.nv)) * dt
        vi = v + sum((A[i][j] * L[j] for j in range(i) if A[i][j] != 0.0), ca.SX.zeros(model.nv)) * dt
        qi = integ(q, ci) if i else q
        L.append(acc(qi, vi, t + C[i] * dt, u))
        K.append(bracket_series(model, ci, vi, 0.5, 1 / 12) if i else vi)   # dexp^-1_{-c}(v)
    c_end = dt * sum((b * k for b, k in zip(B, K) if b != 0.0), ca.SX.zeros(model.nv))
    v_end = v + dt * sum((b * l for b, l in zip(B, L) if b != 0.0), ca.SX.zeros(model.nv))
    return ca.vertcat(integ(q, c_end), v_end)


def _rk_with_states(model: ArticulatedBody, method: str, config: StepConfig, forces, acc) -> StepProblem:
    """The Runge-Kutta step with the force models' states (``pbframework.force_states``) integrated in its
    stages, as MuJoCo's RK4 integrates ``act``: stage ``i`` has the states ``a_i = a + dt sum_j A_ij r_j`` and the
    rates ``r_i = state_rates(q_i, v_i, t_i, a_i)``, its forces see ``a_i`` (and ``advance_states`` of it over
    ``dt``), and the step ends at ``advance_states(a, sum_j B_j r_j)``. State ``[q; v; a]``."""
    from pbframework.force_states import advance_all, initial_force_states, stage_inputs
    from pbframework.step import INIT_NAMES, force_sizes, init_symbols

    nq, nv = model.nq, model.nv
    sizes = [force_sizes(model, f) for f in forces]
    nu, na = sum(n for n, _ in sizes), sum(n for _, n in sizes)
    ns = nq + nv + na
    x, p = ca.SX.sym("x", 0), ca.SX.sym("p", ns + 2 + nu)
    s, dt, t, u = split_params(p, ns)
    q, v, a = s[:nq], s[nq:nq + nv], s[nq + nv:]
    integ = q_integrate(model) if model.on_group else (lambda qq, c: qq + c)
    A, B, C = TABLEAUS[method]
    K, L, R = [], [], []                    # chart rates, accelerations and state rates of the stages

    def combined(row, terms, start):
        return start + dt * sum((w * z for w, z in zip(row, terms) if w != 0.0), ca.SX.zeros(start.shape[0]))

    for i in range(len(B)):
        ci = combined(A[i], K, ca.SX.zeros(nv))
        vi, ai = combined(A[i], L, v), combined(A[i], R, a)
        qi = integ(q, ci) if i else q
        ti = t + C[i] * dt
        Ui, Ri = stage_inputs(model, forces, qi, vi, ti, dt, u, ai)
        L.append(acc(qi, vi, ti, Ui))
        R.append(Ri)
        K.append(bracket_series(model, ci, vi, 0.5, 1 / 12) if i and model.on_group else vi)
    c_end, v_end = combined(B, K, ca.SX.zeros(nv)), combined(B, L, v)
    a_end = advance_all(model, forces, q, v, t, dt, u, a, sum((b * r for b, r in zip(B, R) if b != 0.0),
                                                                 ca.SX.zeros(na)))
    q0, qd0, t0, dt0, u0, *runs = init_symbols(nq, nu, nv)
    init = ca.Function("init", [q0, qd0, t0, dt0, u0, *runs],
                       [ca.vertcat(q0, qd0, ca.DM(initial_force_states(model, forces)))], INIT_NAMES, ["s0"])
    return StepProblem(
        integrator=method, kind=ProblemKind.EXPLICIT, config=config, nq=nq, nv=nv, nx=0, ns=ns, nu=nu,
        init=init, params=standard_params(ns, nu),
        guess=ca.Function("guess", [p], [ca.SX(0, 1)], ["p"], ["x0"]),
        advance=ca.Function("advance", [x, p], [ca.vertcat(integ(q, c_end), v_end, a_end)], ["x", "p"],
                            ["s_next"]),
        order=METHODS[method][0], objective=None, forces=tuple(force_label(fm) for fm in forces),
        velocity="the state's generalised velocity qd", start="s0 = [q0; qd0; the force models' initial states]",
        meta={"fd": config.fd, "force_states": (nq + nv, ns)},
    )


def _builder(method: str):
    def build(model: ArticulatedBody, config: StepConfig, forces) -> StepProblem:
        forces = tuple(forces)
        require_forms(forces, ForceForm.GENERALIZED_FORCE, method, "a Newton-Euler integrator")
        nq, nv = model.nq, model.nv
        ns = nq + nv
        nu = input_slices(model, forces)[-1][1] if forces else 0
        qs, vs, ts, us = ca.SX.sym("q", nq), ca.SX.sym("v", nv), ca.SX.sym("t"), ca.SX.sym("u", nu)
        acc = ca.Function("acc", [qs, vs, ts, us],
                          [acceleration_expr(model, forces, qs, vs, ts, config.fd, us if nu else None)])
        if method in TABLEAUS and any(force_sizes(model, f)[1] for f in forces):
            return _rk_with_states(model, method, config, forces, acc)
        x, p = ca.SX.sym("x", 0), ca.SX.sym("p", ns + 2 + nu)
        s, dt, t, u = split_params(p, ns)

        def f(state, time):
            return ca.vertcat(state[nq:], acc(state[:nq], state[nq:], time, u))

        if model.on_group:        # on the group: Euler by the exponential map, Runge-Kutta by RKMK
            integ = q_integrate(model)
            q, v = s[:nq], s[nq:]
            if method in TABLEAUS:
                s_next = _rkmk(model, TABLEAUS[method], integ, acc, q, v, t, dt, u)
            else:
                a = acc(q, v, t, u)
                if method == "forward_euler":
                    s_next = ca.vertcat(integ(q, dt * v), v + dt * a)
                else:
                    s_next = ca.vertcat(integ(q, dt * (v + dt * a)), v + dt * a)
        elif method == "forward_euler":
            s_next = s + dt * f(s, t)
        elif method == "semi_implicit_euler":
            v_next = s[nq:] + dt * acc(s[:nq], s[nq:], t, u)
            s_next = ca.vertcat(s[:nq] + dt * v_next, v_next)
        elif method == "rk2":
            k1 = f(s, t)
            s_next = s + dt * f(s + dt / 2 * k1, t + dt / 2)
        elif method == "rk3":
            k1 = f(s, t)
            k2 = f(s + dt / 2 * k1, t + dt / 2)
            k3 = f(s - dt * k1 + 2 * dt * k2, t + dt)
            s_next = s + dt / 6 * (k1 + 4 * k2 + k3)
        else:  # rk4
            k1 = f(s, t)
            k2 = f(s + dt / 2 * k1, t + dt / 2)
            k3 = f(s + dt / 2 * k2, t + dt / 2)
            k4 = f(s + dt * k3, t + dt)
            s_next = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return StepProblem(
            integrator=method, kind=ProblemKind.EXPLICIT, config=config, nq=nq, nv=nv, nx=0, ns=ns, nu=nu,
            init=state_init(nq, nu, nv),
            params=standard_params(ns, nu),
            guess=ca.Function("guess", [p], [ca.SX(0, 1)], ["p"], ["x0"]),
            advance=ca.Function("advance", [x, p], [s_next], ["x", "p"], ["s_next"]),
            order=METHODS[method][0], objective=None, forces=tuple(force_label(fm) for fm in forces),
            velocity="the state's generalised velocity qd", start="s0 = [q0; qd0]",
            meta={"fd": config.fd},
        )

    build.__name__ = f"build_{method}"
    build.__doc__ = f"Build the {method} step problem (see module docstring)."
    return build


@hookimpl
def pbf_integrators():
    return [PluginInfo(name, desc, _builder(name),
                       meta={"forms": frozenset({ForceForm.GENERALIZED_FORCE}), "orders": (order,),
                             "default_order": order, "implicit": False,
                             "energy": "conserves" if name == "semi_implicit_euler" else "drifts",
                             "group": True})
            for name, (order, desc) in METHODS.items()]
