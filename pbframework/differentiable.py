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

Two options serve users who need the Jacobian fast or as C:

* ``rootfinder=Rootfinder.FAST_NEWTON`` solves the step with CasADi's ``fast_newton`` plug-in (the same
  undamped Newton iterations), which ``casadi.CodeGenerator`` emits as C; CasADi cannot code-generate the
  default ``newton`` plug-in (it warns, and the emitted file does not compile). In generated C,
  ``fast_newton`` returns its last iterate without an error when ``max_iter`` runs out.
* ``jacobian=True`` adds the outputs ``jac_s = d s_next / d s`` and ``jac_u = d s_next / d u``, assembled
  explicitly by the implicit function theorem at the converged step: ``dg/dx`` and ``dg/d(s, u)`` from one
  SX function, one factorisation of ``dg/dx`` (LDL^T for an energy's symmetric Hessian, QR otherwise) solved
  for the structurally non-zero columns only, then the ``advance`` map's Jacobians. ``casadi.jacobian`` of
  the plain function gives the same matrices through forward sweeps of every SX function in the graph, the
  initial guess's included: on CHAIN-10 (PBAD order 2) about 7x the time on the VM
  (benchmarks/derivatives.py) and 11x the C source (31 MB). The Jacobian is exact at the iterate the
  rootfinder stops at, so ``tol`` bounds its accuracy (an error in ``x`` of about
  ``tol / lambda_min(dg/dx)``).
"""

from __future__ import annotations

import enum

import casadi as ca

from .step import ProblemKind, StepError, StepProblem

__all__ = ["step_function", "NOT_SMOOTH", "Rootfinder"]

NOT_SMOOTH = ("ne_dry_friction", "ne_mdp", "ne_nmdp", "pbd_nmdp")
"""Integrators whose step is not a smooth function of its inputs (a QP's active set, a projected-gradient loop)."""


class Rootfinder(str, enum.Enum):
    """The CasADi rootfinder plug-in that solves an implicit step (``step_function(rootfinder=...)``).

    Attributes:
        NEWTON: ``"newton"``: Newton's method; raises "rootfinder process failed" when it does not converge.
            Runs on the CasADi VM only: CasADi cannot code-generate it.
        FAST_NEWTON: ``"fast_newton"``: the same Newton iterations, code-generatable
            (``casadi.CodeGenerator``, :func:`pbframework.codegen.emit.emit_c`). On the VM it raises on
            failure like ``NEWTON``; in generated C it returns its last iterate silently.
    """

    NEWTON = "newton"
    FAST_NEWTON = "fast_newton"


def _rootfinder(value) -> Rootfinder:
    try:
        return Rootfinder(value)
    except ValueError:
        raise StepError(f"step_function: unknown rootfinder {value!r} (available: "
                        f"{', '.join(r.value for r in Rootfinder)})") from None


def _conditions(problem: StepProblem) -> ca.Function:
    """``(x, p) -> g``: the first-order conditions of the step problem (module docstring)."""
    x, p = ca.SX.sym("x", problem.nx), ca.SX.sym("p", problem.np)
    if problem.kind is ProblemKind.MINIMIZE:
        g = ca.gradient(problem.objective_fn(x, p), x)
    else:
        r = problem.residual(x, p)
        g = r if r.numel() == problem.nx else ca.mtimes(ca.jacobian(r, x).T, r)
    return ca.Function("step_conditions", [x, p], [g], ["x", "p"], ["g"])


def step_function(problem: StepProblem, *, tol: float = 1e-12, max_iter: int = 50,
                  rootfinder: Rootfinder | str = Rootfinder.NEWTON, jacobian: bool = False) -> ca.Function:
    """The step of ``problem`` as ``casadi.Function`` ``step: (s, t, dt, u) -> s_next`` (module docstring).

    Args:
        problem: a step problem (``sim.problem``).
        tol: absolute tolerance of the rootfinder on the first-order conditions.
        max_iter: Newton iterations of the rootfinder.
        rootfinder: the CasADi plug-in (:class:`Rootfinder`); ``FAST_NEWTON`` to code-generate the function.
        jacobian: also return ``jac_s = d s_next / d s`` and ``jac_u = d s_next / d u`` (outputs 2 and 3),
            assembled by the implicit function theorem with one factorisation (module docstring).

    Raises:
        StepError: the integrator's step is not smooth (:data:`NOT_SMOOTH`, or a constrained problem), or an
            unknown ``rootfinder``.
    """
    if problem.integrator in NOT_SMOOTH or problem.kind is ProblemKind.CONSTRAINED:
        raise StepError(f"{problem.integrator}: its step is not a smooth function of the state (it solves a "
                        f"quadratic program with an active set or a projected-gradient loop), so it has no "
                        f"differentiable step function; use a smooth integrator (pbad, pbfd, the Newton-Euler "
                        f"baselines)")
    plugin = _rootfinder(rootfinder)
    s, t, dt, u = ca.MX.sym("s", problem.ns), ca.MX.sym("t"), ca.MX.sym("dt"), ca.MX.sym("u", problem.nu)
    names_in = ["s", "t", "dt", "u"]
    if jacobian:
        return ca.Function("step", [s, t, dt, u], list(_with_jacobian(problem, plugin, tol, max_iter, s, t, dt, u)),
                           names_in, ["s_next", "jac_s", "jac_u"])
    p = problem.params(s, t, dt, u)
    if problem.kind is ProblemKind.EXPLICIT:
        s_next = problem.advance(ca.MX(0, 1), p)
    else:
        x = _solver(problem, plugin, tol, max_iter)(problem.guess(p), p)
        s_next = problem.advance(x, p)
    return ca.Function("step", [s, t, dt, u], [s_next], names_in, ["s_next"])


def _solver(problem: StepProblem, plugin: Rootfinder, tol: float, max_iter: int) -> ca.Function:
    return ca.rootfinder("step_solve", plugin.value, _conditions(problem),
                         {"abstol": float(tol), "max_iter": int(max_iter), "error_on_fail": True})


def _with_jacobian(problem: StepProblem, plugin: Rootfinder, tol: float, max_iter: int, s, t, dt, u):
    """``(s_next, jac_s, jac_u)`` as MX expressions of the step's inputs (``jacobian=True``)."""
    ns = problem.ns
    ss, ts, dts, us = ca.SX.sym("s", ns), ca.SX.sym("t"), ca.SX.sym("dt"), ca.SX.sym("u", problem.nu)
    z = ca.vertcat(ss, us)
    ps = problem.params(ss, ts, dts, us)
    if problem.kind is ProblemKind.EXPLICIT:
        out = problem.advance(ca.SX(0, 1), ps)
        J = ca.jacobian(out, z)
        f = ca.Function("step_jacobian", [ss, ts, dts, us], [out, J[:, :ns], J[:, ns:]])
        return f(s, t, dt, u)
    xs = ca.SX.sym("x", problem.nx)
    g = _conditions(problem)(xs, ps)
    Gz = ca.jacobian(g, z)
    cols = sorted(set(Gz.sparsity().get_col()))        # the inputs the conditions depend on
    out = problem.advance(xs, ps)
    parts = ca.Function("step_sensitivities", [xs, ss, ts, dts, us],
                        [out, ca.jacobian(g, xs), ca.densify(Gz[:, cols]), ca.jacobian(out, xs),
                         ca.jacobian(out, z)])
    p = problem.params(s, t, dt, u)
    x = _solver(problem, plugin, tol, max_iter)(problem.guess(p), p)
    s_next, Gx, Gsel, Ax, Az = parts(x, s, t, dt, u)
    # dx/dz = -(dg/dx)^-1 dg/dz on the non-zero columns, scattered back by a constant selection matrix
    E = ca.DM(ca.Sparsity.triplet(len(cols), z.numel(), list(range(len(cols))), cols), 1.0)
    linsol = "ldl" if problem.kind is ProblemKind.MINIMIZE else "qr"     # a Hessian is symmetric
    dx = ca.mtimes(-ca.solve(Gx, Gsel, linsol), E) if cols else ca.MX(problem.nx, z.numel())
    J = Az + ca.mtimes(Ax, dx)
    return s_next, J[:, :ns], J[:, ns:]
