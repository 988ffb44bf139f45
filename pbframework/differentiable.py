"""The step as a differentiable ``casadi.Function``: ``(s, t, dt, u) -> s_next`` with exact derivatives.

:meth:`Simulator.step_function <pbframework.simulate.Simulator.step_function>` returns one step of the
Simulator's integrator as a CasADi function of the integrator's state ``s`` (``sim.initial_state(q0, qd0)``
builds it; ``s[:nq]`` is q, ``s[nq:nq + nv]`` the velocity estimate), the time ``t``, the step ``dt`` and the
per-step force inputs ``u`` (``sim.inputs``; empty for most force sets)::

    F = sim.step_function()
    s1 = F(s0, 0.0, 0.01, [])                                  # one step, numerically
    J = casadi.Function("J", [s], [casadi.jacobian(F(s, 0, 0.01, []), s)])   # d s_next / d s, exact
    roll = F.mapaccum(100)                                      # 100 steps: a whole-horizon gradient is one
                                                                # reverse sweep through it

Explicit integrators (the Newton-Euler baselines) are their ``advance`` graph. For implicit ones the step's
unknowns ``x`` solve the problem's first-order conditions ``g(x, p) = 0``: the objective's gradient for
energy (minimize) problems, the residual itself for square least-squares problems (the collocation equations
of PBAD order >= 3, PBFD's Eq. 13) and ``J^T r`` otherwise. They are found by ``casadi.rootfinder``
(Newton's method from the integrator's own initial guess, tolerance ``tol``), whose derivatives CasADi takes
by the implicit function theorem: ``dx/dp = -(dg/dx)^-1 dg/dp`` with the Jacobian ``dg/dx`` factorised once,
so a Jacobian column costs a back-substitution, not a re-solve; second derivatives likewise. The rootfinder is
plain Newton (no damping, no line search): where the Simulator's own solver needs its damping to converge (a
stiff joint-limit spring engaged, a very large step) it fails and CasADi raises ("rootfinder process failed").

Steps that are not smooth functions of their inputs have no such function and are refused in one line: the
NMDP integrators (a projected-gradient loop with active-set QPs) and the QP-based baselines
(``ne_dry_friction``, ``ne_mdp``).
"""

from __future__ import annotations

import casadi as ca

from .step import ProblemKind, StepError, StepProblem

__all__ = ["step_function", "NOT_SMOOTH"]

NOT_SMOOTH = ("ne_dry_friction", "ne_mdp", "ne_nmdp", "pbd_nmdp")
"""Integrators whose step is not a smooth function of its inputs (a QP's active set, a projected-gradient loop)."""


def _conditions(problem: StepProblem) -> ca.Function:
    """``(x, p) -> g``: the first-order conditions of the step problem (module docstring)."""
    x, p = ca.SX.sym("x", problem.nx), ca.SX.sym("p", problem.np)
    if problem.kind is ProblemKind.MINIMIZE:
        g = ca.gradient(problem.objective_fn(x, p), x)
    else:
        r = problem.residual(x, p)
        g = r if r.numel() == problem.nx else ca.mtimes(ca.jacobian(r, x).T, r)
    return ca.Function("step_conditions", [x, p], [g], ["x", "p"], ["g"])


def step_function(problem: StepProblem, *, tol: float = 1e-12, max_iter: int = 50) -> ca.Function:
    """The step of ``problem`` as ``casadi.Function`` ``step: (s, t, dt, u) -> s_next`` (module docstring).

    Args:
        problem: a step problem (``sim.problem``).
        tol: absolute tolerance of the rootfinder on the first-order conditions.
        max_iter: Newton iterations of the rootfinder.

    Raises:
        StepError: the integrator's step is not smooth (:data:`NOT_SMOOTH`, or a constrained problem).
    """
    if problem.integrator in NOT_SMOOTH or problem.kind is ProblemKind.CONSTRAINED:
        raise StepError(f"{problem.integrator}: its step is not a smooth function of the state (it solves a "
                        f"quadratic program with an active set or a projected-gradient loop), so it has no "
                        f"differentiable step function; use a smooth integrator (pbad, pbfd, the Newton-Euler "
                        f"baselines)")
    s, t, dt, u = ca.MX.sym("s", problem.ns), ca.MX.sym("t"), ca.MX.sym("dt"), ca.MX.sym("u", problem.nu)
    p = problem.params(s, t, dt, u)
    if problem.kind is ProblemKind.EXPLICIT:
        s_next = problem.advance(ca.MX(0, 1), p)
    else:
        g = _conditions(problem)
        solve = ca.rootfinder("step_solve", "newton", g,
                              {"abstol": float(tol), "max_iter": int(max_iter), "error_on_fail": True})
        x = solve(problem.guess(p), p)
        s_next = problem.advance(x, p)
    return ca.Function("step", [s, t, dt, u], [s_next], ["s", "t", "dt", "u"], ["s_next"])
