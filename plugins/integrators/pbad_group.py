r"""PBAD and its collocation on the rotation group: models with ``ball`` / ``free`` joints (quaternions).

The scheme is :mod:`pbframework.plugins.integrators.pbad`'s, node for node; only the coordinates change.
A configuration of such a model has ``nq`` entries (unit quaternions among them) and its velocity ``nv``,
so each step is solved in a chart centred on the step's start ``q_k``:

* the unknowns are tangent increments ``xi_j`` (``nv`` each) and the node configurations are rebuilt by
  the exponential map, ``Q_j = q_k (+) xi_j`` (:func:`pbframework.lie.q_integrate`), so a quaternion stays
  unit to round-off and no step meets a chart singularity (the chart is centred where the step starts and
  a step turns far less than pi);
* the inertial term is chart-free: the workspace polynomial through the nodes' link transforms and the
  inertia integral need only the transforms; its gradient is taken along the tangent at ``Q_i``
  (``d/de I(Q_i (+) e, .)`` at ``e = 0``), and the generalised forces are the force models' ``nv``-entry
  forms (:func:`pbframework.forces.tangent_gradient` for potentials);
* velocities are derivatives of the collocation polynomial of the nodes' coordinates in a chart centred
  where the velocity is wanted: ``v_i = sum_m l_m'(tau_i) (Q_i (-) Q_m) / dt`` (``(-)`` the logarithm,
  :func:`pbframework.lie.q_difference`), whose derivative at the chart's centre is the body velocity
  itself (the exponential map's differential is the identity there); order 2's velocity is the chord
  ``(q_k (-) q_{k+1}) / dt`` (its rotation vector is the same in both end frames);
* the state is ``[q_k (nq); v_k (nv); q_h (nq)]``; the history node ``q_h`` is re-expressed for a new step
  size along the chart's quadratic (order >= 3) or chord (order 2), and the first one is the second-order
  Taylor configuration ``q0 (+) (h qd0 + h^2/2 qdd0)`` (no RK4 start on the group yet: its local error is
  O(h^3), the local error of order 3).

The generated-C backend runs these problems as it runs the others (its metric, residual weight and velocity
blocks have ``nv`` entries: ``PBF_NVEL``). Adaptive steps get the error estimate and dense output of the flat scheme in the chart at ``q_k``
(:func:`_group_error_and_dense`).
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from pbframework.dynamics import crba
from pbframework.forces import ForceForm
from pbframework.kinematics import element_poses
from pbframework.lie import bracket_series, q_difference, q_integrate
from pbframework.model import ArticulatedBody
from pbframework.step import (
    INIT_NAMES, Objective, ProblemKind, StepConfig, StepProblem, acceleration_expr, force_forms, force_label,
    generalized_force_expr, init_symbols, input_slices, split_params, standard_params,
)

GUESS_STEP = 0.25


def tangent_inertia_force(model: ArticulatedBody) -> ca.Function:
    """``G: (qa, D) -> d/de sum_e (T_e(qa (+) e)^T D_e) : M~_e`` at ``e = 0`` (``nv`` entries): the inertial
    term of :func:`pbframework.plugins.integrators.pbad.inertia_force_function` along the tangent."""
    from pbframework.plugins.integrators.pbad import _massive, inertia_pairing

    key = "_pbad_group_inertia_force"
    if key not in model.cache:
        qa, e = ca.SX.sym("qa", model.nq), ca.SX.sym("e", model.nv)
        D = ca.SX.sym("D", 12 * len(_massive(model)))
        w = inertia_pairing(model, element_poses(model, q_integrate(model)(qa, e)), D)
        G = ca.substitute(ca.gradient(w, e), e, ca.DM.zeros(model.nv))
        model.cache[key] = ca.Function("pbad_group_inertia_force", [qa, D], [G], ["qa", "D"], ["G"])
    return model.cache[key]


def _group_error_and_dense(model: ArticulatedBody, tau, Q: list, x, p, dt, v_k, v_next):
    """The error estimate and dense output of :mod:`pbad`'s "Adaptive steps" in the chart at ``q_k``: the
    end configuration against the degree-(K-1) prediction, compared as configurations (``nq`` entries, so
    the adaptive loop scales them as any configuration); the collocation polynomial of the chart
    coordinates, mapped back by the exponential map, and its derivative as a body velocity."""
    from pbframework.plugins.integrators.pbad import lagrange_derivative_weights

    integ, diff = q_integrate(model), q_difference(model)
    K = len(tau) - 1
    q_k = Q[1]
    c = [diff(q_k, Qm) for Qm in Q]
    w = lagrange_derivative_weights(tau[:K], np.array([tau[K]]), 0)[0]
    predicted = integ(q_k, sum(float(w[m]) * c[m] for m in range(K)))
    error_estimate = ca.Function("error_estimate", [x, p], [Q[K] - predicted], ["x", "p"], ["e"])
    theta = ca.SX.sym("theta")
    C = np.linalg.inv(np.vander(tau, K + 1, increasing=True))
    lag = [sum(float(C[j, m]) * theta**j for j in range(K + 1)) for m in range(K + 1)]
    dlag = [sum(float(C[j, m]) * j * theta**(j - 1) for j in range(1, K + 1)) for m in range(K + 1)]
    c_theta = sum(lag[m] * c[m] for m in range(K + 1))
    if K == 2:      # order 2's velocities are chords: interpolate them, exact at both ends
        v = (1 - theta) * v_k + theta * v_next
    else:
        v = bracket_series(model, c_theta, sum(dlag[m] * c[m] for m in range(K + 1)) / dt, -0.5, 1 / 6)
    dense = ca.Function("dense", [x, p, theta], [ca.vertcat(integ(q_k, c_theta), v)], ["x", "p", "theta"], ["qv"])
    return error_estimate, dense


def build_pbad_group(model: ArticulatedBody, config: StepConfig, forces, objective: Objective) -> StepProblem:
    """One PBAD step of order ``config.order`` for a model with ``ball`` / ``free`` joints (module docstring);
    ``objective`` already resolved and checked by :func:`~pbframework.plugins.integrators.pbad.build_pbad`."""
    from pbframework.plugins.integrators.pbad import (_massive, armature_velocity_map, chord_kinetic,
                                                      collocation_nodes, lagrange_derivative_weights,
                                                      node_differences, node_weighted_poses, order2_energy)

    K = int(config.order or 2)
    nq, nv = model.nq, model.nv
    integ, diff = q_integrate(model), q_difference(model)
    tau = collocation_nodes(K)
    W2 = lagrange_derivative_weights(tau, tau, 2)
    W1 = lagrange_derivative_weights(tau, tau, 1)
    ns, nx = 2 * nq + nv, (K - 1) * nv
    nu = input_slices(model, forces)[-1][1] if forces else 0
    x, p = ca.SX.sym("x", nx), ca.SX.sym("p", ns + 2 + nu)
    s, dt, t, u = split_params(p, ns)
    q_k, v_k, q_h = s[:nq], s[nq:nq + nv], s[nq + nv:]
    xi = [x[j * nv:(j + 1) * nv] for j in range(K - 1)]
    Q = [q_h, q_k] + [integ(q_k, d) for d in xi]

    # -- init (Taylor history node), guess, restart, advance -------------------------------------------
    q0, qd0, t0, dt0, u0, qs0, qc0, qr0 = init_symbols(nq, nu, nv)
    a0 = acceleration_expr(model, forces, q0, qd0, t0, config.fd, u0 if nu else None)
    h0 = float(tau[0]) * dt0
    init = ca.Function("init", [q0, qd0, t0, dt0, u0, qs0, qc0, qr0],
                       [ca.vertcat(q0, qd0, integ(q0, h0 * qd0 + h0**2 / 2 * a0))], INIT_NAMES, ["s0"])
    a_k = acceleration_expr(model, forces, q_k, v_k, t, config.fd, u if nu else None)
    moves = [a * dt * v_k + (a * dt) ** 2 / 2 * a_k for a in tau[2:]]
    cap = ca.fmin(1.0, GUESS_STEP / ca.fmax(ca.norm_inf(moves[-1]), 1e-300))
    guess = ca.Function("guess", [p], [ca.vertcat(*[cap * d for d in moves])], ["p"], ["x0"])
    s_sym, ratio, dts = ca.SX.sym("s", ns), ca.SX.sym("ratio"), ca.SX.sym("dt")
    qs, vs, hs = s_sym[:nq], s_sym[nq:nq + nv], s_sym[nq + nv:]
    c_h = diff(qs, hs)
    if K == 2:
        c_new = ratio * c_h
    else:
        lin = float(tau[0]) * dts * vs
        c_new = ratio * lin + ratio**2 * (c_h - lin)
    restart = ca.Function("restart", [s_sym, ratio, dts], [ca.vertcat(qs, vs, integ(qs, c_new))],
                          ["s", "ratio", "dt"], ["s_restart"])

    def velocity(i):
        """The body velocity at node ``i``: the chart polynomial's derivative in the chart at ``Q_i``."""
        return sum(float(W1[i, m]) * diff(Q[i], Q[m]) for m in range(K + 1) if m != i and W1[i, m] != 0.0) / dt

    v_next = diff(Q[1], Q[2]) / dt if K == 2 else velocity(K)
    advance = ca.Function("advance", [x, p], [ca.vertcat(Q[K], v_next, Q[K - 1])], ["x", "p"], ["s_next"])

    massive = _massive(model)
    kinetic = chord_kinetic(model, s_sym, qs, hs, dts) if K == 2 else None
    difference = node_differences(model, Q)

    error_estimate, dense = _group_error_and_dense(model, tau, Q, x, p, dt, v_k, v_next)
    metric = ca.Function("metric", [p], [crba(model)(q_k)], ["p"], ["M"])
    common = dict(integrator="pbad", config=config, nq=nq, nv=nv, nx=nx, ns=ns, nu=nu, init=init,
                  params=standard_params(ns, nu), guess=guess, advance=advance, order=K, objective=objective,
                  forces=tuple(force_label(f) for f in forces), metric=metric, restart=restart, kinetic=kinetic,
                  velocity=("chord (q_k (-) q_{k+1}) / dt on the group" if K == 2 else
                            "derivative at t_{k+1} of the collocation polynomial in the chart at q_{k+1}"),
                  start=f"history node q0 (+) (h qd0 + h^2/2 qdd0), h = {tau[0]:+.4f} dt (second-order Taylor)",
                  error_estimate=error_estimate, dense=dense, error_order=K,
                  meta={"nodes": tau.tolist(), "chart": "centred on q_k, exponential coordinates"})
    if objective is Objective.ENERGY:
        E = order2_energy(model, forces, difference, Q, dt, t, u)
        return StepProblem(kind=ProblemKind.MINIMIZE, objective_fn=ca.Function("pbad_energy", [x, p], [E],
                                                                                ["x", "p"], ["f"]), **common)
    G = tangent_inertia_force(model)
    A = armature_velocity_map(model)
    blocks = []
    for i in range(2, K + 1):
        D = node_weighted_poses(massive, difference, W2[i])
        inertial = G(Q[i], D) if massive else ca.SX.zeros(nv)
        if A.any():   # hinge / slide coordinates are additive in the chart: the flat scheme's term
            inertial = inertial + ca.mtimes(ca.DM(A), sum(float(W2[i, m]) * Q[m] for m in range(K + 1)))
        F = generalized_force_expr(model, forces, Q[i], velocity(i), t + tau[i] * dt, u)
        blocks.append(inertial - dt**2 * F)
    if not config.precondition:
        common["metric"] = None
    r = ca.vertcat(*blocks)
    return StepProblem(kind=ProblemKind.LEAST_SQUARES, residual=ca.Function("pbad_residual", [x, p], [r],
                                                                            ["x", "p"], ["r"]), **common)


def check_forces(forces) -> None:
    """Order 2's residual objective with potential-only forces is not built on the group."""
    from pbframework.step import StepError

    only = [force_label(f) for f in forces if ForceForm.GENERALIZED_FORCE not in force_forms(f)]
    if only:
        raise StepError(f"pbad on the rotation group: force model(s) {', '.join(only)} have no generalised-force "
                        f"form, which the residual objective needs (use objective='energy' at order 2)")


__all__ = ["build_pbad_group", "tangent_inertia_force", "check_forces"]
