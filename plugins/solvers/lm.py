"""Levenberg-Marquardt solvers: ``lm`` (exact Hessian) and ``jtj_lm`` (Gauss-Newton ``J^T J``).

Both run the same damped-Newton loop (seed 000 §5: ``x <- x - [H + mu D]^-1 g`` with ``mu`` tuned so the
objective decreases): a trial step is accepted when the actual decrease is at least ``1e-4`` of the
decrease the quadratic model predicts, or, where both are below the objective's rounding error, when it
lowers ``||g||_inf`` ("precision" below); ``mu`` then shrinks (by ``shrink`` for a good step, by Nielsen's
rule for a poor one), otherwise it grows by a doubling factor. ``D`` is Marquardt's diagonal scaling
(the running maximum of ``|diag H|``) or, with ``metric=True``, the problem's mass-matrix metric. Indefinite ``H + mu I`` (possible with the exact Hessian) raises ``mu`` until the Cholesky
factorisation succeeds and the step is at most ``max_step`` long (a trust region). One iteration costs one evaluation of the problem's value-gradient-Hessian
function plus one dense Cholesky solve.

* ``lm`` uses the exact Hessian. On a minimize problem (the PBAD energy, Eq. 5) that is the Hessian of
  the objective. On a least-squares problem the exact Hessian ``J^T J + sum_j r_j d^2 r_j`` (third
  derivatives of the kinematics) is a poor, indefinite model far from the solution (measured: ~700
  iterations per CHAIN-10 collocation step at dt = 0.05), so ``lm`` runs Fletcher and Xu's hybrid
  (1987): Gauss-Newton while an accepted step removes at least 20% of the objective, the exact Hessian
  when Gauss-Newton stalls (a non-zero-residual valley), and Gauss-Newton for any iteration where the exact
  matrix plus damping is indefinite. On our zero-residual step problems it therefore behaves like
  ``jtj_lm`` plus the cost of the exact second-order term per evaluation.
* ``jtj_lm`` uses ``H = J^T J``, ``g = J^T r`` of the (weighted) residual (seed 002 Eq. 14, the
  ``J^T J``-approximate Hessian of seed 000 §5); least-squares problems only.

Stopping tests (``LMOptions``), in the order checked:

* ``gtol`` / ``residual_tol`` -- converged when ``||g||_inf <= gtol`` or, for least-squares problems, when
  the residual norm ``||W r||_2 <= residual_tol``. Integrators scale their objectives by ``dt^2`` so these are mass-weighted
  displacements (kg m^2): ``1e-10`` means the same at every dt.
* ``xtol`` -- converged after an accepted step with ``||dx||_inf <= xtol (1 + ||x||_inf)``.
* precision -- a step whose predicted and actual changes of the objective are both below its rounding
  error (``<= 10 eps (|f| + |f_trial|)``) is taken where it lowers ``||g||_inf`` (the objective cannot tell
  there, the gradient can: the energy objective resolves ``x`` only to about ``sqrt(eps)`` by its values)
  and otherwise ends the loop: no further decrease is representable; reported as converged with reason
  ``"precision"``.
* ``rtol`` -- for least-squares problems every stop above also needs ``||r||_2 <= rtol``; a stationary
  point with residual left is unconverged, reason ``"residual"`` (a local minimum of Eq. 7, not a step).
* ``stall`` -- least-squares problems: after ``stall`` iterations in a row without a tenfold decrease of
  the objective the loop stops with reason ``"stalled"`` (unconverged unless ``||r||_2 <= rtol``; once
  ``||r||_2 <= rtol`` the window is :data:`STALL_AT_FLOOR` iterations: the rounding floor). A step
  problem's square system converges quadratically from a good start; creeping through a valley of Eq. 7
  is better handed to the integrator's halving retry than run to ``max_iter``. Measured on CHAIN-10,
  order-3 collocation, 10 s, backend ``c``, together with pbad's second-order history restart: at dt =
  2.5 ms 33.7 -> 5.0 iterations per step, 353 -> 112 halvings, wall 34.2 -> 7.5 s; at dt = 0.01 s 78 ->
  19.7 iterations per step, wall 10.4 -> 5.6 s. (Some solves do converge after a long crawl: in a
  CasADi-VM run at dt = 0.01 s, 84 of the 2593 converged solves needed more than 30 iterations past their
  last tenfold decrease.)
* ``max_iter`` -- otherwise stops unconverged with reason ``"max_iter"``; a non-finite objective at the
  initial point stops with reason ``"non_finite"``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable

import numpy as np

from pbframework import linalg
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.solving import SolveResult, evaluator
from pbframework.step import ProblemKind, StepError, StepProblem

EPS = np.finfo(float).eps
STALL_AT_FLOOR = 3
"""The stall window once the residual is within ``rtol`` (an acceptable solution): Gauss-Newton then
removes orders of magnitude per iteration until rounding stops it, so three iterations without a tenfold
decrease mean the rounding floor (measured on CHAIN-100, order 3: ``||r||`` settles at ~1.5e-9, just above
``residual_tol``, where the default window spent ~35 iterations per step)."""


def _options(cls, solver: str, options: dict):
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(options) - names)
    if unknown:
        raise StepError(f"solver {solver!r}: unknown option(s) {unknown} (allowed: {', '.join(sorted(names))})")
    return cls(**options)


def check_options(opts, integers=(), counts=(), flags=(), reals=()) -> None:
    """The shared validation of the solvers' option dataclasses: ``integers`` must be >= 1, ``counts``
    (a limit where 0 means off) >= 0, ``flags`` booleans, ``reals`` non-negative finite numbers."""
    for names, low, kind in ((integers, 1, "a positive integer"), (counts, 0, "a non-negative integer (0 = off)")):
        for name in names:
            v = getattr(opts, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise StepError(f"{name} must be {kind}, got {v!r}")
    for name in flags:
        if not isinstance(getattr(opts, name), (bool, np.bool_)):
            raise StepError(f"{name} must be True or False, got {getattr(opts, name)!r}")
    for name in reals:
        v = getattr(opts, name)
        if not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
            raise StepError(f"{name} must be a non-negative finite number, got {v!r}")


@dataclass(frozen=True)
class LMOptions:
    """Options of ``lm`` and ``jtj_lm``.

    Attributes:
        max_iter: iteration limit per step (each iteration evaluates one trial point).
        gtol: gradient (or residual-norm, for least squares) tolerance, absolute, on the dt^2-scaled
            objective of the integrators (kg m^2).
        xtol: relative step tolerance: converged after an accepted step ``||dx||_inf <= xtol (1 +
            ||x||_inf)``.
        lambda0: initial damping: the step solves ``(H + mu D) dx = -g`` with ``mu = lambda0`` at the
            start and ``D`` the problem's metric (below) or else the running maximum of ``|diag H|``
            (Marquardt's scaling).
        residual_tol: least-squares problems: converged when the (weighted) residual ``||W r||_2 <=
            residual_tol`` (radians times dt^2 with the default mass-matrix weight; the floor set by
            rounding near a joint singularity is ~1e-10, so a tighter value makes LM crawl at the floor).
        rtol: least-squares problems only: a gradient, step or precision stop counts as converged only
            if ``||r||_2 <= rtol`` (the step's equations are square, so a solution has zero residual; a
            stationary point with residual left is reported unconverged with reason ``"residual"``).
        shrink: factor applied to ``mu`` after a step whose actual decrease is at least a quarter of the
            predicted one (Nielsen's smooth rule below that), so ``mu`` drops fast and the iteration
            becomes Newton's method (quadratic convergence) once the model is trusted.
        max_step: trust region: ``mu`` is raised until ``||dx||_inf <= max_step`` (radians / metres), so
            an indefinite exact Hessian cannot throw the iterate into a distant basin of the objective.
        stall: least-squares problems: stop (reason ``"stalled"``) after this many iterations in a row
            without a tenfold decrease of the objective; ``0`` disables the test.
        metric: damp with the problem's ``metric`` (block-diagonal mass matrix at the step start: a trust
            region in the kinetic-energy norm) when the problem provides one.
    """

    max_iter: int = 300
    gtol: float = 1e-10
    xtol: float = 1e-10
    lambda0: float = 1e-9
    shrink: float = 0.01
    metric: bool = False
    rtol: float = 1e-6
    residual_tol: float = 1e-9
    max_step: float = 0.5
    stall: int = 30

    def __post_init__(self) -> None:
        check_options(self, integers=("max_iter",), counts=("stall",), flags=("metric",))
        if not (isinstance(self.shrink, (int, float)) and 0.0 < self.shrink < 1.0):
            raise StepError(f"shrink must be a number in (0, 1), got {self.shrink!r}")
        if not (isinstance(self.max_step, (int, float)) and self.max_step > 0):
            raise StepError(f"max_step must be a positive number, got {self.max_step!r}")
        check_options(self, reals=("gtol", "xtol", "lambda0", "rtol", "residual_tol"))


Evaluate = Callable[[np.ndarray], tuple[float, np.ndarray, np.ndarray]]


def levenberg_marquardt(evaluate: Evaluate, x0: np.ndarray, opt: LMOptions, least_squares: bool = False,
                        damping: np.ndarray | None = None) -> SolveResult:
    """The damped-Newton loop shared by ``lm`` and ``jtj_lm`` (see the module docstring).

    Args:
        evaluate: ``x -> (f, g, H)``.
        x0: initial guess.
        opt: options.
        least_squares: ``f = 0.5 ||r||^2`` (enables the residual-norm test).
        damping: SPD damping matrix ``D`` (``(H + mu D) dx = -g``); ``None`` = Marquardt's diagonal scaling.
    """
    x = np.array(x0, dtype=float)
    f, g, *Hs = evaluate(x)
    nev = 1
    hybrid = len(Hs) == 2            # (exact, Gauss-Newton): Fletcher and Xu's switch, GN first
    use_gn = hybrid
    H = Hs[1] if use_gn else Hs[0]

    def small_grad(f_, g_) -> bool:
        gn_ = float(np.max(np.abs(g_))) if g_.size else 0.0
        return gn_ <= opt.gtol or (least_squares and np.sqrt(max(2.0 * f_, 0.0)) <= opt.residual_tol)

    def verdict(reason_: str, f_: float) -> tuple[str, bool]:
        # a least-squares step problem is a square system: a stationary point with a residual left is a
        # local minimum of ||r||, not a solution
        if least_squares and np.sqrt(max(2.0 * f_, 0.0)) > opt.rtol:
            return "residual", False
        return reason_, True

    if not (np.isfinite(f) and np.all(np.isfinite(g))):
        return SolveResult(x, 0, float("inf"), False, "non_finite", float(f), nev)
    if small_grad(f, g):
        reason, converged = verdict("gradient", f)
        return SolveResult(x, 0, float(np.max(np.abs(g), initial=0.0)), converged, reason, float(f), nev)
    n = x.size
    # Marquardt's scaling: damp each coordinate relative to its own curvature (MINPACK keeps the running
    # maximum of |diag H|), so a chain's heavy base and light tip are damped alike.
    marquardt = damping is None
    if marquardt:
        diag = np.abs(np.diag(Hs[-1])) if n else np.ones(0)
        dmax = float(diag.max()) if n else 1.0
        D = np.diag(np.maximum(diag, 1e-12 * max(dmax, 1e-300)))
    else:
        D = np.asarray(damping, float)
    mu = opt.lambda0
    nu = 2.0
    reason, converged = "max_iter", False
    it = 0
    f_ref, it_ref = f, 0               # stall test: the last tenfold decrease of f, and when
    while it < opt.max_iter:
        it += 1
        H = Hs[1] if use_gn else Hs[0]
        for _ in range(200):
            U = linalg.chol(H + mu * D)
            if U is not None:
                delta = -linalg.chol_solve(U, g)
                if np.all(np.isfinite(delta)) and float(np.max(np.abs(delta), initial=0.0)) <= opt.max_step:
                    break
            elif hybrid and not use_gn:          # exact Hessian indefinite here: Gauss-Newton this time
                use_gn, H = True, Hs[1]
                continue
            mu = max(mu * 4.0, 1e-12)
        pred = -(linalg.dot(g, delta) + 0.5 * linalg.dot(delta, linalg.gemv(H, delta)))
        xn = x + delta
        fn, gn, *Hns = evaluate(xn)
        nev += 1
        small_step = float(np.max(np.abs(delta))) <= opt.xtol * (1.0 + float(np.max(np.abs(x))))
        ok = np.isfinite(fn) and np.all(np.isfinite(gn)) and all(np.all(np.isfinite(h)) for h in Hns)
        rho = (f - fn) / pred if (ok and pred > 0) else -1.0
        noise = 10.0 * EPS * (abs(f) + abs(fn))      # rounding error of f - fn
        floor = ok and pred <= noise and abs(f - fn) <= noise
        if (floor and not rho > 1e-4
                and float(np.max(np.abs(gn), initial=0.0)) < float(np.max(np.abs(g), initial=0.0))):
            rho = 1.0        # at the objective's rounding floor f cannot tell; the smaller gradient can
        if rho > 1e-4:
            if hybrid:       # Fletcher-Xu: keep Gauss-Newton while it removes >= 20% of f per step
                use_gn = (f - fn) >= 0.2 * f
            x, f, g, Hs = xn, fn, gn, Hns
            H = Hs[1] if use_gn else Hs[0]
            if marquardt:
                D = np.diag(np.maximum(np.diag(D), np.abs(np.diag(Hs[-1]))))
            mu *= opt.shrink if rho > 0.25 else max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
            mu = max(mu, 1e-15)
            nu = 2.0
            if small_grad(f, g):
                reason, converged = verdict("gradient", f)
                break
            if small_step:
                reason, converged = verdict("step", f)
                break
        else:
            if floor:
                reason, converged = verdict("precision", f)
                break
            mu *= nu
            nu *= 2.0
        if f <= 0.1 * f_ref:
            f_ref, it_ref = f, it
        elif least_squares and opt.stall and it - it_ref >= (
                min(opt.stall, STALL_AT_FLOOR) if 2.0 * f <= opt.rtol * opt.rtol else opt.stall):
            reason, converged = "stalled", verdict("stalled", f)[1]
            break
    return SolveResult(x, it, float(np.max(np.abs(g), initial=0.0)), converged, reason, float(f), nev)


def metric_matrix(problem: StepProblem, p: np.ndarray) -> np.ndarray | None:
    """``blockdiag(M_k, ..., M_k)`` over the ``nx / nq`` configurations of ``x``, or None without a metric."""
    if problem.metric is None or problem.nx == 0 or problem.nx % problem.nq:
        return None
    M = np.asarray(problem.metric(p))
    return np.kron(np.eye(problem.nx // problem.nq), M)


class LevenbergMarquardt:
    """``lm``: Levenberg-Marquardt with the exact Hessian of the step objective (minimize problems), or
    Fletcher and Xu's hybrid for least-squares problems (module docstring).

    Args:
        **options: fields of :class:`LMOptions`.
    """

    name = "lm"
    problems = frozenset({ProblemKind.MINIMIZE, ProblemKind.LEAST_SQUARES})

    def __init__(self, **options) -> None:
        self.options = _options(LMOptions, self.name, options)

    mode = "hybrid"

    def prepare(self, problem: StepProblem) -> None:
        """Build the derived functions this solver evaluates (so their build time is not step time)."""
        if problem.kind is ProblemKind.MINIMIZE:
            problem.hessian
        elif problem.kind is ProblemKind.LEAST_SQUARES:
            problem.residual_jacobian
            if self.mode == "hybrid":
                problem.residual_hessian

    def solve(self, problem: StepProblem, x0: np.ndarray, p: np.ndarray) -> SolveResult:
        if problem.kind not in self.problems:
            allowed = ", ".join(sorted(k.value for k in self.problems))
            raise StepError(f"solver {self.name!r} solves {allowed} problems, not {problem.kind.value}")
        damping = metric_matrix(problem, p) if (self.options.metric and problem.kind is ProblemKind.MINIMIZE) \
            else None
        return levenberg_marquardt(evaluator(problem, p, self.mode), x0, self.options,
                                   least_squares=problem.kind is ProblemKind.LEAST_SQUARES, damping=damping)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options})"


class JtJLevenbergMarquardt(LevenbergMarquardt):
    """``jtj_lm``: Levenberg-Marquardt with the Gauss-Newton Hessian ``J^T J`` of a residual.

    Args:
        **options: fields of :class:`LMOptions`.
    """

    name = "jtj_lm"
    problems = frozenset({ProblemKind.LEAST_SQUARES})

    mode = "gauss_newton"


@hookimpl
def pbf_solvers():
    return [
        PluginInfo("lm", "Levenberg-Marquardt with the exact Hessian (minimize and least-squares problems)",
                   LevenbergMarquardt, meta={"problems": frozenset({"minimize", "least_squares"}),
                                             "options": LMOptions}),
        PluginInfo("jtj_lm", "Levenberg-Marquardt with the Gauss-Newton J^T J Hessian (least-squares problems)",
                   JtJLevenbergMarquardt, meta={"problems": frozenset({"least_squares"}),
                                                "options": LMOptions}),
    ]
