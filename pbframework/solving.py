"""The solver contract: what a solver plug-in returns (:class:`SolveResult`) and is (:class:`Solver`), and the
numeric pieces the Python solvers and the step loop share -- evaluators of a step problem's functions, the
residual weight, and the re-expression of a state for another step size (:func:`restart_state`).

Split from :mod:`pbframework.step` (the step problem as data); the names are importable from either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from . import linalg
from .step import ProblemKind, StepError, StepProblem

__all__ = ["SolveResult", "Solver", "solve_step", "residual_weight", "restart_state", "evaluator"]


@dataclass
class SolveResult:
    """What a solver returns for one step problem.

    Attributes:
        x: the unknowns found (numpy vector).
        iterations: iterations taken (one iteration = one accepted or rejected trial point).
        grad_norm: infinity norm of the objective's gradient at ``x``.
        converged: whether a stopping test of the solver was met (see its options).
        reason: which test stopped it: ``"gradient"``, ``"step"``, ``"max_iter"``, ``"non_finite"``, ...
        objective: the objective value at ``x``.
        evaluations: number of calls to the problem's functions.
    """

    x: np.ndarray
    iterations: int
    grad_norm: float
    converged: bool
    reason: str
    objective: float = float("nan")
    evaluations: int = 0

    def residual(self, kind: "ProblemKind") -> float:
        """The residual the solve ended at, as steps record it: ``||W r||_2 = sqrt(2 f)`` for a
        least-squares problem (the gradient norm where ``f`` is not finite), the gradient norm otherwise."""
        f = float(self.objective)
        if kind is ProblemKind.LEAST_SQUARES and math.isfinite(f):
            return math.sqrt(max(2.0 * f, 0.0))
        return float(self.grad_norm)


def solve_step(solver, problem: "StepProblem", x0: np.ndarray, p: np.ndarray) -> SolveResult:
    """``solver.solve(problem, x0, p)``, with a step whose metric is not positive definite (a mass matrix
    singular in its chart: an Euler-angle joint in gimbal lock) an unconverged result with reason
    ``"singular_metric"`` instead of an exception, so the failure policy (halving, stop) handles it."""
    try:
        return solver.solve(problem, x0, p)
    except np.linalg.LinAlgError:
        return SolveResult(np.asarray(x0, float), 0, float("inf"), False, "singular_metric")


@runtime_checkable
class Solver(Protocol):
    """The object a solver plug-in's ``build(**options)`` returns."""

    name: str
    problems: frozenset

    def solve(self, problem: StepProblem, x0: np.ndarray, p: np.ndarray) -> SolveResult: ...

    # optional: ``prepare(problem)`` builds the derived functions the solver will evaluate; the Simulator
    # calls it once, so building is not counted as stepping time.


class _BlockWeight:
    """``W = blockdiag(M, ..., M)^-1`` applied numerically (one Cholesky factorisation per step), with the C
    driver's arithmetic (:mod:`pbframework.linalg`)."""

    def __init__(self, M: np.ndarray, blocks: int) -> None:
        U = linalg.chol(M)
        if U is None:
            raise np.linalg.LinAlgError("the residual weight's metric is not positive definite")
        self.U = U
        self.k, self.n = blocks, M.shape[0]

    def __call__(self, a: np.ndarray) -> np.ndarray:
        """``W a`` for a vector (k n,) or a matrix (k n, m)."""
        if a.ndim == 1:
            return linalg.chol_solve(self.U, a.reshape(self.k, self.n).T).T.ravel()
        m = a.shape[1]
        b = a.reshape(self.k, self.n, m).transpose(1, 0, 2).reshape(self.n, self.k * m)
        return linalg.chol_solve(self.U, b).reshape(self.n, self.k, m).transpose(1, 0, 2).reshape(
            self.k * self.n, m)


def residual_weight(problem: StepProblem, p: np.ndarray) -> _BlockWeight | None:
    """The numeric residual weight ``blockdiag(M_k)^-1`` of a least-squares problem with a metric."""
    if problem.kind is not ProblemKind.LEAST_SQUARES or problem.metric is None:
        return None
    n_r = problem.residual.size1_out(0)
    if n_r % problem.nv:
        raise StepError(f"{problem.integrator}: residual length {n_r} is not a multiple of nv={problem.nv}")
    return _BlockWeight(np.asarray(problem.metric(p)), n_r // problem.nv)


def restart_state(problem: StepProblem, s: np.ndarray, dt: float, ratio: float) -> np.ndarray:
    """The state ``s`` of a step of length ``dt`` re-expressed for a step ``ratio * dt`` (``problem.restart``;
    ``s`` itself without one), energy-safe: where the problem reports its own kinetic energy, the history
    offset is shrunk (bisection on the ratio) until the re-expressed state has no more kinetic energy than
    ``s`` -- a retry may lose energy, never gain it. The C driver's ``pbf_restart`` is the same rule."""
    restart = getattr(problem, "restart", None)
    if restart is None:
        return s
    out = np.asarray(restart(s, ratio, dt)).ravel()
    kinetic = getattr(problem, "kinetic", None)
    if kinetic is None:
        return out
    T0 = float(kinetic(s, dt))
    if float(kinetic(out, dt * ratio)) <= T0 * (1 + 1e-12):
        return out
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        trial = np.asarray(restart(s, ratio * mid, dt)).ravel()
        if float(kinetic(trial, dt * ratio)) <= T0:
            lo, out = mid, trial
        else:
            hi = mid
    return out if lo > 0 else np.asarray(restart(s, 0.0, dt)).ravel()


def evaluator(problem: StepProblem, p: np.ndarray, mode: str):
    """``x -> (f, g)`` (``mode="gradient"``) or ``x -> (f, g, H)`` (``"hessian"``: exact; ``"gauss_newton"``:
    ``J^T J``, least-squares problems only) for one step's parameters ``p``. ``"hybrid"`` (least squares):
    ``x -> (f, g, H_exact, J^T J)``; for a minimize problem it is ``"hessian"``.

    For a least-squares problem ``f = 0.5 ||W r||^2`` with ``W = blockdiag(M_k)^-1`` when the problem has a
    metric (the weighted residual of seed 000 Eq. 7, see the pbad plug-in), else ``W = I``; ``W`` is applied
    numerically, so the CasADi graphs stay those of the raw residual.
    """
    if problem.kind is ProblemKind.MINIMIZE:
        if mode == "gauss_newton":
            raise StepError(f"{problem.integrator}: a minimize problem has no residual for a Gauss-Newton "
                            f"Hessian (build it with objective='residual')")
        mode = "hessian" if mode == "hybrid" else mode
        fn = problem.gradient if mode == "gradient" else problem.hessian
        if mode == "gradient":
            def ev(x):
                f, g = fn(x, p)
                return float(f), np.asarray(g).ravel()
        else:
            def ev(x):
                f, g, H = fn(x, p)
                return float(f), np.asarray(g).ravel(), np.asarray(H)
        return ev
    if problem.kind is not ProblemKind.LEAST_SQUARES:
        raise StepError(f"{problem.integrator}: an explicit step problem needs no solver")
    W = residual_weight(problem, p)
    if mode == "gradient":
        rf, vjp = problem.residual, problem.residual_vjp

        def ev(x):
            r = np.asarray(rf(x, p)).ravel()
            rw = W(r) if W is not None else r
            c = W(rw) if W is not None else rw            # W symmetric: grad = J^T W^T W r
            return 0.5 * float(linalg.dot(rw, rw)), np.asarray(vjp(x, p, c)).ravel()
        return ev
    rJ = problem.residual_jacobian
    exact = mode in ("hessian", "hybrid")
    rH = problem.residual_hessian if exact else None

    def ev(x):
        r, J = rJ(x, p)
        r, J = np.asarray(r).ravel(), np.asarray(J)
        if W is not None:                              # one solve for both: W [r J]
            rJw = W(np.concatenate([r[:, None], J], axis=1))
            r, J = rJw[:, 0], rJw[:, 1:]
        # J^T J, J^T r and |r|^2 summed as the C driver sums them (pbframework.linalg)
        f, g = 0.5 * float(linalg.dot(r, r)), linalg.dot(J, r[:, None])
        H = linalg.dot(J[:, :, None], J[:, None, :])
        if not exact:
            return f, g, H
        Hx = H + np.asarray(rH(x, p, W(r) if W is not None else r))
        if mode == "hybrid":
            return f, g, Hx, H
        return f, g, Hx
    return ev
