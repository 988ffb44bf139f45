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

``backend=Backend.C`` returns the same function compiled: :func:`compile_step` emits one C unit
(:func:`pbframework.codegen.emit.emit_c`) holding ``step`` (the step, ``fast_newton``), ``step_jacobian``
(``s_next`` and its Jacobians with respect to ``s``, ``u``, ``t`` and ``dt``, assembled as above) and
``jac_step``, the same Jacobian blocks under the name and layout CasADi looks up for an external function's
derivatives; it is built and cached by :func:`pbframework.codegen.build.build_shared` (keyed by the source's
hash, so a second Simulator of the same model and forces reuses the library) and loaded with
``casadi.external``. The returned function is called, mapped (``mapaccum``) and differentiated once
(``casadi.jacobian``, forward and reverse sweeps: CasADi builds them from ``jac_step``) like the VM one;
second derivatives are not compiled (differentiating ``jac_step`` raises). With ``jacobian=True`` the
compiled ``step_jacobian`` gives the three outputs. Because generated ``fast_newton`` stops silently at
``max_iter``, the compiled function is only as good as the Newton iterations from the integrator's guess: it
matches the VM function where that one succeeds (tests: to 1e-10, Jacobians included).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

import casadi as ca

from .step import ProblemKind, StepError, StepProblem

__all__ = ["step_function", "compile_step", "step_source", "CompiledStep", "NOT_SMOOTH", "Rootfinder", "Backend"]

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


class Backend(str, enum.Enum):
    """Where the step function runs (``step_function(backend=...)``).

    Attributes:
        CASADI: ``"casadi"``: the CasADi virtual machine (default); any rootfinder, derivatives of every order.
        C: ``"c"``: generated C compiled into a cached shared library and loaded with ``casadi.external``
            (:func:`compile_step`); the rootfinder is ``fast_newton``; first derivatives compiled.
    """

    CASADI = "casadi"
    C = "c"


def _rootfinder(value) -> Rootfinder:
    try:
        return Rootfinder(value)
    except ValueError:
        raise StepError(f"step_function: unknown rootfinder {value!r} (available: "
                        f"{', '.join(r.value for r in Rootfinder)})") from None


def _backend(value) -> Backend:
    try:
        return Backend(value)
    except ValueError:
        raise StepError(f"step_function: unknown backend {value!r} (available: "
                        f"{', '.join(b.value for b in Backend)})") from None


def _conditions(problem: StepProblem) -> ca.Function:
    """``(x, p) -> g``: the first-order conditions of the step problem (module docstring)."""
    x, p = ca.SX.sym("x", problem.nx), ca.SX.sym("p", problem.np)
    if problem.kind is ProblemKind.MINIMIZE:
        g = ca.gradient(problem.objective_fn(x, p), x)
    else:
        r = problem.residual(x, p)
        g = r if r.numel() == problem.nx else ca.mtimes(ca.jacobian(r, x).T, r)
    return ca.Function("step_conditions", [x, p], [g], ["x", "p"], ["g"])


def _check_smooth(problem: StepProblem) -> None:
    if problem.integrator in NOT_SMOOTH or problem.kind is ProblemKind.CONSTRAINED:
        raise StepError(f"{problem.integrator}: its step is not a smooth function of the state (it solves a "
                        f"quadratic program with an active set or a projected-gradient loop), so it has no "
                        f"differentiable step function; use a smooth integrator (pbad, pbfd, the Newton-Euler "
                        f"baselines)")


def step_function(problem: StepProblem, *, tol: float = 1e-12, max_iter: int = 50,
                  rootfinder: Rootfinder | str | None = None, jacobian: bool = False,
                  backend: Backend | str = Backend.CASADI, opt: str = "-O1",
                  cache: Path | str | None = None) -> ca.Function:
    """The step of ``problem`` as ``casadi.Function`` ``step: (s, t, dt, u) -> s_next`` (module docstring).

    Args:
        problem: a step problem (``sim.problem``).
        tol: absolute tolerance of the rootfinder on the first-order conditions.
        max_iter: Newton iterations of the rootfinder.
        rootfinder: the CasADi plug-in (:class:`Rootfinder`); default ``NEWTON`` on the VM, ``FAST_NEWTON``
            (the only one CasADi code-generates) with ``backend="c"``.
        jacobian: also return ``jac_s = d s_next / d s`` and ``jac_u = d s_next / d u`` (outputs 2 and 3),
            assembled by the implicit function theorem with one factorisation (module docstring).
        backend: :class:`Backend`: ``"casadi"`` (the VM) or ``"c"`` (compiled, :func:`compile_step`).
        opt, cache: the C compiler's optimisation flag and the library cache folder (``backend="c"`` only;
            default cache ``$PBF_CACHE_DIR``, else the user cache folder).

    Raises:
        StepError: the integrator's step is not smooth (:data:`NOT_SMOOTH`, or a constrained problem), an
            unknown ``rootfinder`` or ``backend``, or ``rootfinder="newton"`` with ``backend="c"``.
        pbframework.codegen.build.BuildError: ``backend="c"`` and the C compiler is missing or failed.
    """
    if _backend(backend) is Backend.C:
        compiled = compile_step(problem, tol=tol, max_iter=max_iter, rootfinder=rootfinder, opt=opt, cache=cache)
        return compiled.with_jacobian if jacobian else compiled.step
    _check_smooth(problem)
    plugin = _rootfinder(Rootfinder.NEWTON if rootfinder is None else rootfinder)
    s, t, dt, u = ca.MX.sym("s", problem.ns), ca.MX.sym("t"), ca.MX.sym("dt"), ca.MX.sym("u", problem.nu)
    names_in = ["s", "t", "dt", "u"]
    if jacobian:
        solver = None if problem.kind is ProblemKind.EXPLICIT else _solver(problem, plugin, tol, max_iter)
        out = _with_jacobian(problem, solver, s, t, dt, u)
        return ca.Function("step", [s, t, dt, u], list(out[:3]), names_in, ["s_next", "jac_s", "jac_u"])
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


def _with_jacobian(problem: StepProblem, solver: ca.Function | None, s, t, dt, u):
    """``(s_next, jac_s, jac_u, jac_t, jac_dt)`` as MX expressions of the step's inputs (``jacobian=True``;
    ``solver``: the rootfinder, None for an explicit step)."""
    ns, nu = problem.ns, problem.nu
    ss, ts, dts, us = ca.SX.sym("s", ns), ca.SX.sym("t"), ca.SX.sym("dt"), ca.SX.sym("u", nu)
    z = ca.vertcat(ss, us, ts, dts)
    ps = problem.params(ss, ts, dts, us)

    def split(J):
        return J[:, :ns], J[:, ns:ns + nu], J[:, ns + nu], J[:, ns + nu + 1]

    if problem.kind is ProblemKind.EXPLICIT:
        out = problem.advance(ca.SX(0, 1), ps)
        f = ca.Function("step_jacobian_explicit", [ss, ts, dts, us], [out, *split(ca.jacobian(out, z))])
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
    x = solver(problem.guess(p), p)
    s_next, Gx, Gsel, Ax, Az = parts(x, s, t, dt, u)
    # dx/dz = -(dg/dx)^-1 dg/dz on the non-zero columns, scattered back by a constant selection matrix
    E = ca.DM(ca.Sparsity.triplet(len(cols), z.numel(), list(range(len(cols))), cols), 1.0)
    linsol = "ldl" if problem.kind is ProblemKind.MINIMIZE else "qr"     # a Hessian is symmetric
    dx = ca.mtimes(-ca.solve(Gx, Gsel, linsol), E) if cols else ca.MX(problem.nx, z.numel())
    return (s_next, *split(Az + ca.mtimes(Ax, dx)))


# -- the compiled step (backend="c") ---------------------------------------------------------------------

@dataclass(frozen=True)
class CompiledStep:
    """The step of a problem as generated C, built and loaded (:func:`compile_step`).

    Attributes:
        step: ``(s, t, dt, u) -> s_next`` (``casadi.external``); ``casadi.jacobian`` and forward / reverse
            sweeps through it use the compiled ``jac_step``.
        with_jacobian: ``(s, t, dt, u) -> (s_next, jac_s, jac_u)``: the compiled ``step_jacobian`` (the
            ``jacobian=True`` function).
        step_jacobian: the compiled ``step_jacobian`` itself, ``(s, t, dt, u) -> (s_next, jac_s, jac_u,
            jac_t, jac_dt)``, e.g. for :class:`pbframework.codegen.build.BatchRunner`.
        library: the built :class:`~pbframework.codegen.build.Library` (path, compile time, cached or not).
        source_bytes: the size of the emitted C.
    """

    step: ca.Function
    with_jacobian: ca.Function
    step_jacobian: ca.Function
    library: object
    source_bytes: int


def step_source(problem: StepProblem, *, tol: float = 1e-12, max_iter: int = 50,
                rootfinder: Rootfinder | str | None = None):
    """The C unit of :func:`compile_step` (pure: nothing is compiled or written): a
    :class:`~pbframework.codegen.emit.CSource` with ``step``, ``step_jacobian`` and ``jac_step``."""
    from .codegen.emit import emit_c

    _check_smooth(problem)
    plugin = _rootfinder(Rootfinder.FAST_NEWTON if rootfinder is None else rootfinder)
    if plugin is Rootfinder.NEWTON:
        raise StepError("step_function: CasADi cannot code-generate the 'newton' rootfinder; use "
                        "rootfinder='fast_newton' (the default with backend='c') or backend='casadi'")
    s, t, dt, u = ca.MX.sym("s", problem.ns), ca.MX.sym("t"), ca.MX.sym("dt"), ca.MX.sym("u", problem.nu)
    names_in = ["s", "t", "dt", "u"]
    explicit = problem.kind is ProblemKind.EXPLICIT
    solver = None if explicit else _solver(problem, plugin, tol, max_iter)
    p = problem.params(s, t, dt, u)
    s_next = problem.advance(ca.MX(0, 1), p) if explicit else problem.advance(solver(problem.guess(p), p), p)
    step = ca.Function("step", [s, t, dt, u], [s_next], names_in, ["s_next"])
    outs = _with_jacobian(problem, solver, s, t, dt, u)
    sj = ca.Function("step_jacobian", [s, t, dt, u], list(outs), names_in,
                     ["s_next", "jac_s", "jac_u", "jac_t", "jac_dt"])
    # CasADi's convention for an external function's Jacobian (Function.jacobian()): inputs the function's
    # inputs then its nominal outputs, outputs d out / d in for every (out, in) pair, in input order
    nominal = ca.MX.sym("out_s_next", problem.ns)
    _, js, ju, jt, jdt = sj(s, t, dt, u)
    jac = ca.Function("jac_step", [s, t, dt, u, nominal], [js, jt, jdt, ju], [*names_in, "out_s_next"],
                      ["jac_s_next_s", "jac_s_next_t", "jac_s_next_dt", "jac_s_next_u"])
    return emit_c([step, sj, jac], "pbf_step_function")


def compile_step(problem: StepProblem, *, tol: float = 1e-12, max_iter: int = 50,
                 rootfinder: Rootfinder | str | None = None, opt: str = "-O1",
                 cache: Path | str | None = None, source=None) -> CompiledStep:
    """The step of ``problem`` as generated C (:func:`step_source`), compiled by
    :func:`pbframework.codegen.build.build_shared` (cached under the source's hash) and loaded with
    ``casadi.external`` (module docstring). ``source``: the unit :func:`step_source` already emitted for
    this problem (to look at its size before compiling); ``tol``, ``max_iter`` and ``rootfinder`` are then
    those it was emitted with.

    Raises:
        StepError: as :func:`step_function`.
        pbframework.codegen.build.BuildError: the compiler is missing or failed.
    """
    from .codegen.build import build_shared, load_function

    src = source if source is not None else step_source(problem, tol=tol, max_iter=max_iter, rootfinder=rootfinder)
    lib = build_shared(src, opt=opt, cache=cache)
    step, sj = load_function(lib, "step"), load_function(lib, "step_jacobian")
    s, t, dt, u = sj.mx_in()
    three = ca.Function("step", [s, t, dt, u], sj(s, t, dt, u)[:3], ["s", "t", "dt", "u"],
                        ["s_next", "jac_s", "jac_u"])
    return CompiledStep(step, three, sj, lib, src.size)
