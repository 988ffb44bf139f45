"""``lbfgs``: limited-memory BFGS with a backtracking Armijo line search (own implementation).

Each iteration evaluates the objective's value and gradient only (:func:`pbframework.step.evaluator`;
reverse mode, also for a least-squares objective):
O(N) per evaluation for the PBAD energy (seed 000 Table 1), no Hessian, no linear solve. The search
direction comes from the two-loop recursion over the last ``memory`` curvature pairs, the initial
inverse Hessian ``gamma M^-1`` with ``M`` the problem's metric (block-diagonal mass matrix; identity
without one) and ``gamma = s^T y / y^T M^-1 y``; the very first trial step is ``-M^-1 g`` (or, without a
metric, ``-g`` scaled to an infinity-norm length of ``first_step``). A pair with ``s^T y <= 1e-12 ||s|| ||y||`` is skipped; a direction
that is not a descent direction resets the memory. The line search halves the step until
``f(x + a d) <= f(x) + 1e-4 a g^T d`` (Armijo), or Hager and Zhang's approximate Wolfe test
``f(x + a d) <= f(x) + 1e3 eps |f|`` and ``g(x + a d)^T d <= (2e-4 - 1) g^T d``, which uses the accurate
gradient where the decrease of ``f`` is lost to rounding (at most ``max_backtracks`` halvings).

Stopping tests (``LBFGSOptions``):

* ``gtol`` / ``residual_tol`` -- converged when ``||g||_inf <= gtol`` or, for least-squares problems,
  ``||W r||_2 <= residual_tol``
  (dt^2-scaled objectives: kg m^2, the same meaning as ``lm``'s ``gtol``).
* precision -- the line search fails and its last predicted decrease ``a |g^T d|`` is below the rounding
  error of ``f`` (``1e3 eps |f|``): converged, reason ``"precision"``.
* ``rtol`` -- for least-squares problems a stop above also needs ``||r||_2 <= rtol`` (else reason
  ``"residual"``, unconverged).
* ``max_iter`` -- otherwise unconverged, reason ``"max_iter"``; a failed line search above the rounding
  error stops unconverged with reason ``"line_search"``.

We keep our own implementation (rather than scipy's L-BFGS-B) so the per-step statistics, the stopping
tests and the evaluation count match ``lm`` exactly and the loop can later be emitted as C.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from pbframework import linalg
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.solving import SolveResult, evaluator
from pbframework.step import ProblemKind, StepError, StepProblem

from .lm import EPS, _options, check_options


@dataclass(frozen=True)
class LBFGSOptions:
    """Options of ``lbfgs``.

    Attributes:
        max_iter: iteration limit per step (line-search evaluations are counted in ``evaluations``).
        gtol: gradient (or residual-norm) tolerance, absolute, on the dt^2-scaled objective (kg m^2).
        memory: number of curvature pairs kept.
        first_step: infinity-norm length of the first trial step (radians / metres).
        max_backtracks: halvings allowed per line search.
        residual_tol: least-squares problems: converged when ``||W r||_2 <= residual_tol``.
        rtol: least-squares problems only: a stop counts as converged only if ``||r||_2 <= rtol``.
        max_step: the line search starts at a step no longer than this (infinity norm, rad / m).
        metric: use the problem's ``metric`` ``M`` (block-diagonal mass matrix) as the initial inverse
            Hessian ``gamma M^-1`` (preconditioned L-BFGS; the very first step is ``-M^-1 g``); without a
            metric, or with ``False``, the initial inverse Hessian is ``gamma I``.
    """

    max_iter: int = 2000
    gtol: float = 1e-8
    memory: int = 10
    first_step: float = 1e-2
    max_backtracks: int = 40
    metric: bool = True
    rtol: float = 1e-6
    residual_tol: float = 1e-9
    max_step: float = 0.5

    def __post_init__(self) -> None:
        check_options(self, integers=("max_iter", "memory", "max_backtracks"), flags=("metric",),
                      reals=("gtol", "first_step", "rtol", "max_step", "residual_tol"))


class LBFGS:
    """``lbfgs``: limited-memory BFGS on the step objective's value and gradient.

    Args:
        **options: fields of :class:`LBFGSOptions`.
    """

    name = "lbfgs"
    problems = frozenset({ProblemKind.MINIMIZE, ProblemKind.LEAST_SQUARES})

    def __init__(self, **options) -> None:
        self.options = _options(LBFGSOptions, self.name, options)

    def prepare(self, problem: StepProblem) -> None:
        """Build the derived functions this solver evaluates (so their build time is not step time)."""
        if problem.kind is ProblemKind.MINIMIZE:
            problem.gradient
        elif problem.kind is ProblemKind.LEAST_SQUARES:
            problem.residual_vjp

    def solve(self, problem: StepProblem, x0: np.ndarray, p: np.ndarray) -> SolveResult:
        if problem.kind not in self.problems:
            allowed = ", ".join(sorted(k.value for k in self.problems))
            raise StepError(f"solver {self.name!r} solves {allowed} problems, not {problem.kind.value}")
        lsq = problem.kind is ProblemKind.LEAST_SQUARES
        opt = self.options
        evaluate = evaluator(problem, p, "gradient")

        x = np.array(x0, dtype=float)
        f, g = evaluate(x)
        nev = 1
        if not (np.isfinite(f) and np.all(np.isfinite(g))):
            return SolveResult(x, 0, float("inf"), False, "non_finite", f, nev)
        self._M = None
        if opt.metric and not lsq and problem.metric is not None and problem.nx and problem.nx % problem.nq == 0:
            M = np.asarray(problem.metric(p))
            U = linalg.chol(M)             # as the C driver: no metric where M is not positive definite
            self._M = (U, problem.nx // problem.nq, problem.nq) if U is not None else None
        S: deque = deque(maxlen=opt.memory)
        Y: deque = deque(maxlen=opt.memory)
        reason, converged = "max_iter", False
        it = 0

        def done(f_, g_):
            return (float(np.max(np.abs(g_), initial=0.0)) <= opt.gtol
                    or (lsq and np.sqrt(max(2.0 * f_, 0.0)) <= opt.residual_tol))

        def verdict(reason_: str) -> tuple[str, bool]:
            if lsq and np.sqrt(max(2.0 * f, 0.0)) > opt.rtol:
                return "residual", False
            return reason_, True

        while True:
            if done(f, g):
                reason, converged = verdict("gradient")
                break
            if it >= opt.max_iter:
                break
            it += 1
            d = self._direction(g, S, Y)
            slope = linalg.dot(g, d)
            if not slope < 0:                     # not a descent direction: restart from -g
                S.clear()
                Y.clear()
                d = self._direction(g, S, Y)
                slope = linalg.dot(g, d)
            dmax = float(np.max(np.abs(d), initial=0.0))
            step, accepted = (min(1.0, opt.max_step / dmax) if dmax > 0 else 1.0), False
            for _ in range(opt.max_backtracks):
                xn = x + step * d
                fn, gn = evaluate(xn)
                nev += 1
                if np.isfinite(fn) and np.all(np.isfinite(gn)):
                    armijo = fn <= f + 1e-4 * step * slope
                    # Hager-Zhang approximate Wolfe: trusts the gradient where f's rounding hides the decrease
                    approx = fn <= f + 1e3 * EPS * abs(f) and linalg.dot(gn, d) <= (2e-4 - 1.0) * slope
                    if armijo or approx:
                        accepted = True
                        break
                step *= 0.5
            if not accepted:
                noise = 2.0 * step * abs(slope) <= 1e3 * EPS * abs(f)
                reason, converged = verdict("precision") if noise else ("line_search", False)
                break
            s_vec, y_vec = xn - x, gn - g
            if linalg.dot(s_vec, y_vec) > 1e-12 * linalg.norm2(s_vec) * linalg.norm2(y_vec):
                S.append(s_vec)
                Y.append(y_vec)
            x, f, g = xn, fn, gn
        return SolveResult(x, it, float(np.max(np.abs(g), initial=0.0)), converged, reason, f, nev)

    def _h0(self, v: np.ndarray) -> np.ndarray:
        """The initial inverse Hessian (without gamma) applied to ``v``: ``M^-1 v`` blockwise, or ``v``."""
        if self._M is None:
            return v
        U, k, nq = self._M
        return linalg.chol_solve(U, v.reshape(k, nq).T).T.ravel()

    def _direction(self, g: np.ndarray, S: deque, Y: deque) -> np.ndarray:
        """``-H g`` by the two-loop recursion; without pairs ``-M^-1 g`` (metric) or ``-g`` scaled to length
        ``first_step``."""
        if not S:
            if self._M is not None:
                return -self._h0(g)
            return -g * (self.options.first_step / max(float(np.max(np.abs(g))), 1e-300))
        q = g.copy()
        saved = []
        for s, y in zip(reversed(S), reversed(Y)):
            rho = 1.0 / linalg.dot(y, s)
            a = rho * linalg.dot(s, q)
            saved.append((a, rho, s, y))
            q -= a * y
        hy = self._h0(Y[-1])
        r = self._h0(q) * (linalg.dot(S[-1], Y[-1]) / linalg.dot(Y[-1], hy))
        for a, rho, s, y in reversed(saved):
            r += (a - rho * linalg.dot(y, r)) * s
        return -r

    def __repr__(self) -> str:
        return f"LBFGS({self.options})"


@hookimpl
def pbf_solvers():
    return [PluginInfo("lbfgs", "limited-memory BFGS with Armijo backtracking (value and gradient only)",
                       LBFGS, meta={"problems": frozenset({"minimize", "least_squares"}),
                                    "options": LBFGSOptions})]
