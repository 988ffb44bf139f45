r"""``pgm`` and ``zopgm``: the first- and zeroth-order projected gradient methods of seed 001 (Alg. 1, Eq. 8-11)
for :attr:`~pbframework.step.ProblemKind.CONSTRAINED` steps (the NMDP integrators ``ne_nmdp`` and
``pbd_nmdp``; the functions are described in :mod:`pbframework.nmdp`).

One solve::

    w = 0, delta = 0 (theta = q_k), gamma = gamma0
    project delta onto G(delta, w) = 0                                      (Eq. 9 / 11)
    repeat (at most max_iter outer iterations):
        S = A^-1 G_w with A = G_delta (pgm, Eq. 8) or G0_delta (zopgm, Eq. 10: the polytope's derivatives dropped)
        dw = argmin  -(S^T dK)^T dw + 1/2 dw^T (S^T d2K S) dw + |dw|^2 / gamma
             s.t.    w + dw >= 0,  1^T (w_x + dw_x) <= 1 at every contact point x     (qpOASES)
        delta' = delta projected onto G(., w + dw) = 0
        if K(delta') <= K(delta): accept; gamma <- eta gamma; converged when |delta' - delta|_inf < epsilon
        else:                     reject; gamma <- gamma / eta; fail when gamma < gamma_min
    converged also when the QP returns dw = 0 (a stationary point of K on the constraint manifold)

The projection is Newton's method on ``G(., w)`` with the Jacobian ``A`` (exact or zeroth-order) and a full
step only: it fails when ``A`` is near singular (its smallest singular value below ``singular_tol`` times its
largest: seed 001's rank-revealing factorisation) or when ``|G|`` does not decrease (§VI); it has converged at
``|G|_2 <= gtol``. A failed projection or QP makes the solve unconverged, and the Simulator then retries the
step as two halves (``max_halvings``): that is Alg. 2.

The printed Alg. 1 multiplies ``gamma`` by ``eta`` after a *rejected* trial; with ``gamma`` weighting
``|dw|^2 / gamma`` that enlarges the next trial step. We follow the authors' released C++
(``Articulated/PBDSimulator.cpp``, which stores ``beta = 1 / gamma``): shrink the step (``gamma / eta``) after a
rejection, grow it (``gamma eta``) after an acceptance, both by 1.5, and give up at ``gamma < 1e-20`` (their
``tolAlpha``).

Every QP is solved by qpOASES through ``casadi.conic(..., "qpoases")`` (``printLevel "none"``,
``error_on_fail`` off: a failed QP is reported as the reason ``"qp: <qpOASES status>"``, not raised). One
conic Function is kept per problem, so consecutive QPs warm-start from qpOASES's memory; its copyright banner,
printed when the instance is created, is kept off standard output. After a failed QP the conic is made anew:
qpOASES hot-starts from its last solution, and after some failures (a non-finite Hessian, say) every later hot
start fails with "Unable to perform homotopy as previous QP is not solved".
"""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.nmdp import qpoases_conic, simplex_rows
from pbframework.solving import SolveResult
from pbframework.step import ProblemKind, StepError, StepProblem

from .lm import _options, check_options


@dataclass(frozen=True)
class PGMOptions:
    """Options of ``pgm`` / ``zopgm`` (seed 001 §VI's values by default).

    Attributes:
        max_iter: outer iterations (QP solves) per step.
        epsilon: converged when an accepted iterate moves ``delta`` by less than this (inf-norm, rad / m).
        eta: the factor ``gamma`` grows by after an accepted trial and shrinks by after a rejected one (> 1).
        gamma0: the first ``gamma`` of every step.
        gamma_min: the line search fails below this ``gamma``: 1e-20, the authors' ``tolAlpha`` (their C++
            gives up when ``beta = 1 / gamma`` exceeds 1e20). At 1e-6, 7 of 200 steps of solo12's walk at 5 ms
            failed on the line search and were halved; at 1e-20 none were, and the run took 11% less wall time
            with the same distance to 0.3 mm (measured).
        gtol: the projection has converged at ``|G|_2 <= gtol`` (N m).
        max_projection: Newton iterations per projection.
        singular_tol: the projection fails where ``sigma_min(A) <= singular_tol sigma_max(A)``.
        record: keep the accepted ``K`` values of the last solve in ``solver.history`` (Theorem 5.5's sequence).
        native: evaluate the step's functions (``G`` with its Jacobian, ``G_w``, ``K`` and its derivatives) as
            generated C, compiled once per problem and cached (:mod:`pbframework.codegen`); the PGM loop and
            the qpOASES QPs stay in Python. ``False``: the CasADi virtual machine.
        opt: the C compiler's optimisation flag with ``native``.
    """

    max_iter: int = 200
    epsilon: float = 1e-6
    eta: float = 1.5
    gamma0: float = 1.0
    gamma_min: float = 1e-20
    gtol: float = 1e-8
    max_projection: int = 50
    singular_tol: float = 1e-12
    record: bool = False
    native: bool = False
    opt: str = "-O1"

    def __post_init__(self) -> None:
        if self.opt not in ("-O0", "-O1", "-O2", "-O3"):
            raise StepError(f"opt must be one of -O0, -O1, -O2, -O3, got {self.opt!r}")
        check_options(self, integers=("max_iter", "max_projection"), flags=("record", "native"),
                      reals=("epsilon", "gamma0", "gamma_min", "gtol", "singular_tol"))
        if not (isinstance(self.eta, (int, float)) and np.isfinite(self.eta) and self.eta > 1):
            raise StepError(f"eta must be a finite number > 1, got {self.eta!r}")
        if not self.gamma0 > 0:
            raise StepError(f"gamma0 must be > 0, got {self.gamma0!r}")


class _Failure(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProjectedGradient:
    """``pgm``: first-order projected gradient (seed 001 Eq. 8-9, Alg. 1); ``zopgm`` sets ``order = 0``
    (Eq. 10-11).

    Args:
        **options: fields of :class:`PGMOptions`.
    """

    name = "pgm"
    order = 1
    problems = frozenset({ProblemKind.CONSTRAINED})

    def __init__(self, **options) -> None:
        self.options = _options(PGMOptions, self.name, options)
        self.history: list[float] = []
        self.qp_solves = 0
        self._qp: dict[int, tuple] = {}

    def prepare(self, problem: StepProblem) -> None:
        self._conic(problem)
        self._functions(problem)

    def _functions(self, problem: StepProblem) -> dict:
        """The functions the loop evaluates: CasADi's (VM) or, with ``native``, the same compiled to C."""
        c = problem.constrained
        fns = {"jac": c.G_jacobian[self.order], "Gw": c.G_weights, "K": c.K, "Kd": c.K_derivs}
        if not self.options.native:
            return fns
        key = ("pbf.pgm.native", self.order, self.options.opt)
        cached = problem._derived.get(key)
        if cached is None:
            from pbframework.codegen.build import build_shared, load_function
            from pbframework.codegen.emit import emit_c

            named = {k: ca.Function(f"pbf_pgm_{k}", f.sx_in(), f.call(f.sx_in()), f.name_in(), f.name_out())
                     for k, f in fns.items()}
            lib = build_shared(emit_c(list(named.values()), f"pbf_{problem.integrator}_pgm{self.order}", batch=False),
                               opt=self.options.opt)
            cached = {k: load_function(lib, f.name()) for k, f in named.items()}
            problem._derived[key] = cached
        return cached

    def _conic(self, problem: StepProblem):
        key = id(problem)
        if key not in self._qp:
            c = problem.constrained
            A = simplex_rows(c.groups)
            qp = qpoases_conic(f"{self.name}_qp", ca.Sparsity.dense(c.nw, c.nw), A.sparsity())
            self._qp = {key: (problem, qp, A)}      # one problem at a time; holds it so the id stays valid
        return self._qp[key][1:]

    @staticmethod
    def _bounds(w: np.ndarray, groups: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """The QP's row bounds on ``dw``: ``1^T (w_x + dw_x) <= 1`` at every contact point."""
        sums = np.add.reduceat(w, np.cumsum((0,) + groups[:-1]))
        return np.full(len(groups), -np.inf), 1.0 - sums

    # -- Alg. 1 ----------------------------------------------------------------------------------------------
    def solve(self, problem: StepProblem, x0: np.ndarray, p: np.ndarray) -> SolveResult:
        if problem.kind is not ProblemKind.CONSTRAINED or problem.constrained is None:
            raise StepError(f"solver {self.name!r} solves constrained (NMDP) problems, not {problem.kind.value}")
        o, c = self.options, problem.constrained
        nv, nw = c.nv, c.nw
        x0 = np.asarray(x0, float)
        delta, w = x0[:nv].copy(), x0[nv:].copy()
        self.history = []
        counts = {"evaluations": 0}

        fns = self._functions(problem)
        jac = fns["jac"]

        def derivs(dl, ww):
            counts["evaluations"] += 1
            G, A = jac(dl, ww, p)
            return np.asarray(G).ravel(), np.asarray(A)

        def project(dl, ww):
            """Newton on G(., ww) = 0 from dl; returns (delta, |G|, A at delta)."""
            G, A = derivs(dl, ww)
            for _ in range(o.max_projection):
                g = float(np.linalg.norm(G))
                if not np.isfinite(g):
                    raise _Failure("non_finite")
                if g <= o.gtol:
                    return dl, g, A
                sv = np.linalg.svd(A, compute_uv=False)
                if not np.all(np.isfinite(sv)) or sv[-1] <= o.singular_tol * sv[0]:
                    raise _Failure("singular_projection")
                trial = dl - np.linalg.solve(A, G)
                G2, A2 = derivs(trial, ww)
                if not float(np.linalg.norm(G2)) < g:
                    raise _Failure("projection_diverged")
                dl, G, A = trial, G2, A2
            raise _Failure("projection_max_iter")

        def result(dl, ww, it, ok, reason, K=float("nan"), gnorm=float("inf")):
            return SolveResult(np.concatenate([dl, ww]), it, gnorm, ok, reason, K, counts["evaluations"])

        it = 0
        try:
            delta, gnorm, A = project(delta, w)
        except _Failure as f:
            return result(delta, w, 0, False, f.reason)
        K = float(fns["K"](delta, p))
        counts["evaluations"] += 1
        if o.record:
            self.history.append(K)
        if nw == 0:
            return result(delta, w, 0, True, "no_contact_weights", K, gnorm)
        qp, Arow = self._conic(problem)
        gamma, update = o.gamma0, True
        Hq = gq = None
        while it < o.max_iter:
            it += 1
            if update:
                _, dK, d2K = fns["Kd"](delta, p)
                Gw = np.asarray(fns["Gw"](delta, p))
                counts["evaluations"] += 2
                try:
                    S = np.linalg.solve(A, Gw)
                except np.linalg.LinAlgError:
                    return result(delta, w, it, False, "singular_projection", K, gnorm)
                Hq = S.T @ np.asarray(d2K) @ S
                Hq = 0.5 * (Hq + Hq.T)
                gq = -S.T @ np.asarray(dK).ravel()
            lba, uba = self._bounds(w, c.groups)
            args = dict(h=Hq + (2.0 / gamma) * np.eye(nw), g=gq, a=Arow, lba=lba, uba=uba, lbx=-w, ubx=1.0 - w)
            sol = qp(**args)
            self.qp_solves += 1
            st = qp.stats()
            if not st.get("success", False):
                self._qp.pop(id(problem), None)   # after some failures every hot start fails: start cold next
                return result(delta, w, it, False, f"qp: {st.get('return_status', 'failed')}", K, gnorm)
            dw = np.asarray(sol["x"]).ravel()
            if float(np.max(np.abs(dw))) <= 1e-14:
                return result(delta, w, it, True, "stationary", K, gnorm)
            w_trial = np.clip(w + dw, 0.0, None)
            try:
                d_trial, g_trial, A_trial = project(delta, w_trial)
            except _Failure as f:
                return result(delta, w, it, False, f.reason, K, gnorm)
            K_trial = float(fns["K"](d_trial, p))
            counts["evaluations"] += 1
            if K_trial <= K:
                moved = float(np.max(np.abs(d_trial - delta)))
                delta, w, K, gnorm, A = d_trial, w_trial, K_trial, g_trial, A_trial
                if o.record:
                    self.history.append(K)
                gamma *= o.eta
                update = True
                if moved < o.epsilon:
                    return result(delta, w, it, True, "step", K, gnorm)
            else:
                gamma /= o.eta
                update = False
                if gamma < o.gamma_min:
                    return result(delta, w, it, False, "line_search", K, gnorm)
        return result(delta, w, it, False, "max_iter", K, gnorm)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(order={self.order}, {self.options})"


class ZerothOrderProjectedGradient(ProjectedGradient):
    """``zopgm``: the zeroth-order PGM (seed 001 Eq. 10-11): the polytope's derivatives are never used."""

    name = "zopgm"
    order = 0


@hookimpl
def pbf_solvers():
    meta = {"problems": frozenset({"constrained"}), "options": PGMOptions}
    return [
        PluginInfo("pgm", "first-order projected gradient for NMDP steps (seed 001 Alg. 1, Eq. 8-9), QPs by qpOASES",
                   ProjectedGradient, meta=meta),
        PluginInfo("zopgm", "zeroth-order projected gradient for NMDP steps (seed 001 Eq. 10-11), QPs by qpOASES",
                   ZerothOrderProjectedGradient, meta=meta),
    ]


__all__ = ["PGMOptions", "ProjectedGradient", "ZerothOrderProjectedGradient"]
