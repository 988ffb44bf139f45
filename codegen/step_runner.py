"""Run a step problem's generated C solver loop from Python: one step, one rollout, or a batch on threads.

:class:`CRunner` emits the step library (:mod:`pbframework.codegen.step_library`), builds it through the cache of
:mod:`pbframework.codegen.build` and calls it with ctypes on NumPy arrays. Work arrays are allocated here,
once, and handed to C (the C side never allocates). ::

    runner = CRunner(problem, "lm", model=model)                  # emit + compile (or cache hit)
    out = runner.rollout(q0, qd0, t0=0.0, dt=0.05, steps=200)     # one native call for the whole rollout
    batch = runner.rollout_batch(Q0, QD0, 0.0, 0.05, 20, threads=2)

Results follow the CasADi-VM path of :class:`pbframework.simulate.Simulator`: same solver tests, same
statistics, same failure policy, and the same dense arithmetic (the Python solvers sum as the C driver does,
:mod:`pbframework.linalg`), so with the same derivative kernels the two give the same bits. They differ in
rounding only where the plan evaluates derivatives by directional sweeps (``derivatives="directional"``, the
default above ``full_max_instructions``), which round differently from the VM's flattened Jacobian or Hessian
in a few entries (CHAIN-10, PBAD order 3: 20 of 1600 Jacobian entries, by at most 1.6e-14 relative).
"""

from __future__ import annotations

import ctypes
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .build import (
    DEFAULT_OPT, Library, PackedLibrary, build_shared, install_library, pack_library, rebuild_library,
)
from .emit import CSource
from .step_library import SOLVERS, DriverError, KernelPlan, emit_step_library

__all__ = ["CRunner", "NativeBatch", "RolloutArrays", "BatchArrays", "AdaptiveArrays", "REASONS",
           "FLOAT_TOLERANCE_FLOORS",
           "solver_option_vector"]

REASONS = ("gradient", "step", "precision", "max_iter", "non_finite", "line_search", "explicit", "residual", "stalled")
"""``SolveResult.reason`` for the C driver's reason codes."""

_POLICY = {"stop": 0, "continue": 1, "raise": 2}
"""``FailurePolicy`` values -> the C driver's ``PBF_FAIL_*`` codes (pbf_workspace.c)."""
FLOAT_TOLERANCE_FLOORS = {1: 1e-6, 2: 1e-6, 12: 1e-4, 14: 1e-6}
"""Float builds: lower bounds of gtol (index 1), xtol (2), rtol (12) and residual_tol (14) of the option
vector. Single precision resolves the dt^2-scaled objectives of the integrators to about 1e-7 (kg m^2) and
residuals to about 1e-5, so the double-precision defaults (1e-10, 1e-9, 1e-6) would never be met."""
_NOPT = 16
_NST = 6
_NSR = 2
_NAOPT = 9
_NAC = 12
"""Sizes of ``pbf_adaptive.c``'s option vector (``PBF_NAOPT``) and carried values before the state (``PBF_NAC``)."""
_INT = ctypes.c_longlong
_INT_P = ctypes.POINTER(_INT)


class _StateViews:
    """``q`` and ``qd``: views into the last axis of ``states`` (``[q; qd; history]``)."""

    states: np.ndarray
    nq: int
    nv: int | None = None      # None: nq

    @property
    def q(self) -> np.ndarray:
        return self.states[..., :self.nq]

    @property
    def qd(self) -> np.ndarray:
        return self.states[..., self.nq:self.nq + (self.nq if self.nv is None else self.nv)]


@dataclass
class RolloutArrays(_StateViews):
    """One native rollout.

    Attributes:
        states: the integrator's states ``(steps_done + 1, ns)`` (row 0: the initial state).
        q, qd: configurations ``(steps_done + 1, nq)`` and velocity estimates ``(steps_done + 1, nv)`` (views
            into ``states``).
        iterations, converged, halvings, evaluations, reason, depth: per-step statistics, length
            ``steps_done`` (``depth``: the deepest halving level a step reached).
        grad_norm: per-step final gradient infinity norm.
        residual: per-step final residual (least squares: ``||W r||_2``; minimize: the gradient norm).
        steps_done: steps taken.
        status: ``"done"``, ``"diverged"`` (a non-finite state or a speed above ``max_speed``: the rollout
            ended before that step) or ``"failed"`` (a step still unconverged after its halvings under the
            ``stop`` or ``raise`` policy: the rollout ended before it).
        wall_time: seconds spent in the native call.
        failure: the statistics of the failed step (``status == "failed"``), else None.
    """

    states: np.ndarray
    nq: int
    iterations: np.ndarray
    converged: np.ndarray
    halvings: np.ndarray
    evaluations: np.ndarray
    reason: np.ndarray
    grad_norm: np.ndarray
    steps_done: int
    status: str
    wall_time: float
    depth: np.ndarray | None = None
    residual: np.ndarray | None = None
    failure: dict | None = None
    nv: int | None = None

    def __post_init__(self) -> None:
        n = len(self.iterations)
        if self.depth is None:
            self.depth = np.zeros(n, np.int64)
        if self.residual is None:
            self.residual = np.asarray(self.grad_norm, float).copy()



@dataclass
class BatchArrays(_StateViews):
    """M native rollouts of the same number of steps.

    Attributes:
        states: ``(M, steps + 1, ns)``; rows past a trajectory's ``steps_done[m]`` hold its last valid state
            repeated (so arrays stay rectangular).
        q, qd: ``(M, steps + 1, nq)`` and ``(M, steps + 1, nv)`` views into ``states``.
        iterations, converged, halvings, evaluations, grad_norm, depth, residual: ``(M, steps)``; entries
            past ``steps_done[m]`` are zero / False, except for a trajectory that failed (``status[m] ==
            "failed"``): its entry ``steps_done[m]`` holds the failed step's statistics.
        steps_done: ``(M,)``.
        status: ``(M,)`` strings as in :class:`RolloutArrays`.
        wall_time: seconds of the whole native batch call.
        threads: threads used.
    """

    states: np.ndarray
    nq: int
    iterations: np.ndarray
    converged: np.ndarray
    halvings: np.ndarray
    evaluations: np.ndarray
    grad_norm: np.ndarray
    steps_done: np.ndarray
    status: np.ndarray
    wall_time: float
    threads: int
    depth: np.ndarray | None = None
    residual: np.ndarray | None = None
    nv: int | None = None

    def __post_init__(self) -> None:
        if self.depth is None:
            self.depth = np.zeros(np.shape(self.iterations), np.int64)
        if self.residual is None:
            self.residual = np.asarray(self.grad_norm, float).copy()

    @classmethod
    def concatenate(cls, parts: Sequence["BatchArrays"], wall_time: float) -> "BatchArrays":
        """Batches of the same steps run apart (chunks of one batch), as one batch in their order: every
        trajectory's arrays as its chunk returned them. ``threads``: the most any chunk used."""
        cat = lambda name: np.concatenate([getattr(b, name) for b in parts])      # noqa: E731
        names = ("states", "iterations", "converged", "halvings", "evaluations", "grad_norm", "steps_done",
                 "status", "depth", "residual")
        return cls(nq=parts[0].nq, nv=parts[0].nv, wall_time=wall_time, threads=max(b.threads for b in parts),
                   **{name: cat(name) for name in names})



@dataclass
class AdaptiveArrays:
    """A piece of a native adaptive rollout (``pbf_rollout_adaptive``): output rows ``first_row ..
    first_row + rows - 1``.

    Attributes:
        states: ``(rows, nq + nv)`` dense output ``[q; qd]`` at ``t0 + (j + 1) dt``.
        iterations, converged, halvings, evaluations, grad_norm, residual: per output interval (``halvings``:
            the rejected attempts in it), length ``rows``.
        history: ``(accepted, 2)``: start time and size of every step accepted in this piece.
        carry: what the loop carries into the next piece (pass it back to continue).
        status: ``"done"`` (the rows asked for, or a pause), ``"diverged"`` or ``"failed"``.
        end_time, end_step: where a diverged or failed run ended (the failed step's start and size, the
            diverged step's end and size).
        failure: the failed step's statistics (``status == "failed"``), else None.
        wall_time: seconds in the native call.
    """

    states: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    halvings: np.ndarray
    evaluations: np.ndarray
    grad_norm: np.ndarray
    residual: np.ndarray
    history: np.ndarray
    carry: np.ndarray
    status: str
    end_time: float | None
    end_step: float | None
    failure: dict | None
    wall_time: float

    @property
    def rows(self) -> int:
        return len(self.states)


def adaptive_option_vector(options, dt: float, order: int) -> np.ndarray:
    """``pbf_adaptive.c``'s option vector from an :class:`~pbframework.adaptive.AdaptiveOptions`, the output
    interval ``dt`` (the default first step and ``h_max / 10``) and the error estimate's order."""
    v = np.zeros(_NAOPT)
    v[0] = options.rtol
    v[1] = options.rtol if options.atol is None else options.atol
    v[2] = options.h_min
    v[3] = 10.0 * dt if options.h_max is None else options.h_max
    v[4] = options.safety
    v[5] = options.min_factor
    v[6] = options.max_factor
    v[7] = max(int(order), 1)
    v[8] = options.first_step or 0.0
    return v


def solver_option_vector(solver: str, options: Mapping[str, Any] | None, *, on_failure: str = "stop",
                         max_halvings: int = 4, max_speed: float = 1e4) -> tuple[np.ndarray, Any]:
    """The C driver's option vector for ``solver`` with ``options`` (validated by the solver plug-in).

    Returns:
        ``(vector, options_object)``; the options object is the plug-in's dataclass (``LMOptions``, ...), or
        None for explicit problems (``solver == ""``).
    """
    from pbframework.registry import get_plugin
    from pbframework.step import StepError

    opts = None
    if solver:
        try:
            opts = get_plugin("solver", solver).build(**dict(options or {})).options
        except TypeError as exc:
            raise StepError(f"solver {solver!r}: bad options {dict(options or {})}: {exc}") from None
    if on_failure not in _POLICY:
        raise StepError(f"on_failure must be one of {', '.join(_POLICY)}, got {on_failure!r}")
    if isinstance(max_halvings, bool) or not isinstance(max_halvings, (int, np.integer)) or max_halvings < 0:
        raise StepError(f"max_halvings must be a non-negative integer, got {max_halvings!r}")
    v = np.zeros(_NOPT)
    g = (lambda k, d: float(getattr(opts, k, d))) if opts is not None else (lambda k, d: float(d))
    v[0] = g("max_iter", 100)
    v[1] = g("gtol", 1e-10)
    v[2] = g("xtol", 1e-10)
    v[3] = g("lambda0", 1e-6)
    v[4] = 1.0 if getattr(opts, "metric", False) else 0.0
    v[5] = g("memory", 10)
    v[6] = g("first_step", 1e-2)
    v[7] = g("max_backtracks", 40)
    v[8] = _POLICY[on_failure]
    v[9] = int(max_halvings)
    v[10] = float(max_speed)
    v[11] = g("shrink", 0.01)
    v[12] = g("rtol", np.inf)
    v[13] = g("max_step", np.inf)
    v[14] = g("residual_tol", v[1])
    v[15] = g("stall", 0)
    return v, opts


def _status(code: int) -> str:
    return ("done", "diverged", "failed")[int(code)]


def _step_stats(st: np.ndarray, gn: np.ndarray) -> dict:
    """One step's statistics from the driver's integer (``_NST``) and real (``_NSR``) records."""
    return {"iterations": int(st[0]), "converged": bool(st[1]), "reason": REASONS[int(st[2])],
            "evaluations": int(st[3]), "halvings": int(st[4]), "depth": int(st[5]),
            "grad_norm": float(gn[0]), "residual": float(gn[1])}


class CRunner:
    """A step problem's solver loop as a native library.

    Args:
        problem: the :class:`~pbframework.step.StepProblem`.
        solver: ``"lm"``, ``"jtj_lm"`` or ``"lbfgs"`` (ignored for explicit problems).
        solver_options: the solver's options (same names and meaning as the Python solver plug-in).
        model: the problem's model; optional, lets the emitter build the metric from inverse dynamics.
        on_failure, max_halvings, max_speed: the Simulator's failure policy and divergence test.
        real: ``"double"`` or ``"float"`` (``casadi_real`` of the build; float raises ``gtol`` / ``xtol`` to
            at least 1e-6 and ``rtol`` to 1e-4, see :data:`FLOAT_TOLERANCE_FLOORS`).
        opt: optimisation flag (``-O1`` default).
        flags: extra compiler flags.
        threads: default thread count of :meth:`rollout_batch` (default: all cores).
        cache: cache root (default: :func:`pbframework.codegen.build.cache_dir`).
        **emit_options: :func:`~pbframework.codegen.step_library.emit_step_library` / ``plan_kernels`` options
            (``derivatives``, ``directions``, ``metric``, ``emitter``, ``chunk``).

    Attributes:
        plan: the :class:`~pbframework.codegen.step_library.KernelPlan`.
        library: the built :class:`~pbframework.codegen.build.Library`.
        timings: seconds of ``plan`` (symbolic), ``emit`` (C text) and ``compile`` (0 on a cache hit).
        source_bytes: size of the generated source.
    """

    def __init__(self, problem, solver: str = "lm", solver_options: Mapping[str, Any] | None = None, *,
                 model=None, on_failure: str = "stop", max_halvings: int = 4, max_speed: float = 1e4,
                 real: str = "double", opt: str = DEFAULT_OPT, flags: Sequence[str] = (),
                 threads: int | None = None, cache=None, **emit_options: Any) -> None:
        from pbframework.step import ProblemKind, StepError

        if real not in ("double", "float"):
            raise StepError(f"real must be 'double' or 'float', got {real!r}")
        self.problem = problem
        self.solver = "" if (problem.kind is ProblemKind.EXPLICIT or problem.nx == 0) else solver
        if self.solver and self.solver not in SOLVERS:
            raise StepError(f"the C backend implements the solvers {', '.join(SOLVERS)}; got {solver!r} (use "
                            f"backend='casadi' for other solvers)")
        self.opt_vector, self.solver_options = solver_option_vector(
            self.solver, solver_options, on_failure=on_failure, max_halvings=max_halvings, max_speed=max_speed)
        if real == "float":       # tolerances below single precision's resolution cannot be met: raise them
            for k, floor in FLOAT_TOLERANCE_FLOORS.items():
                self.opt_vector[k] = max(self.opt_vector[k], floor)
        self.on_failure = on_failure
        self.real = real
        self.dtype = np.float64 if real == "double" else np.float32
        self._ctreal = ctypes.c_double if real == "double" else ctypes.c_float
        self._real_p = ctypes.POINTER(self._ctreal)
        self.threads = int(threads) if threads else (os.cpu_count() or 1)
        from .step_library import plan_kernels

        plan_keys = {"derivatives", "directions", "metric", "full_max_instructions", "full_max_nx", "hoist",
                     "adaptive"}
        plan_opts = {k: v for k, v in emit_options.items() if k in plan_keys}
        src_opts = {k: v for k, v in emit_options.items() if k not in plan_keys}
        unknown = set(src_opts) - {"emitter", "chunk", "name", "cold_above"}
        if unknown:
            raise StepError(f"C backend: unknown option(s) {sorted(unknown)} (allowed: "
                            f"{', '.join(sorted(plan_keys | {'emitter', 'chunk', 'name', 'cold_above'}))})")
        t0 = time.perf_counter()
        try:
            self.plan: KernelPlan = plan_kernels(problem, self.solver or "lm", model=model, **plan_opts)
        except DriverError as exc:
            raise StepError(str(exc)) from None
        t1 = time.perf_counter()
        self.source, _ = emit_step_library(problem, self.solver, plan=self.plan, **src_opts)
        t2 = time.perf_counter()
        # no fused multiply-add (gcc contracts a * b + c by default where the target has one, -march=native):
        # products then round as in the CasADi VM and NumPy, so both backends give the same bits
        all_flags = tuple(flags) + (("-DPBF_FLOAT",) if real == "float" else ()) + ("-pthread", "-ffp-contract=off")
        self.library: Library = build_shared(self.source, opt=opt, flags=all_flags, cache=cache)
        try:
            self._lib = ctypes.CDLL(str(self.library.path))
        except OSError:          # a valid-looking entry that does not load: rebuild it once
            self.library = build_shared(self.source, opt=opt, flags=all_flags, cache=cache, force=True)
            self._lib = ctypes.CDLL(str(self.library.path))
        t3 = time.perf_counter()
        self.timings = {"plan": t1 - t0, "emit": t2 - t1, "compile": self.library.compile_seconds,
                        "build_total": t3 - t0}
        self.source_bytes = self.source.size
        self._load()
        self.native = NativeBatch(self.library, self._opt, real, threads, lib=self._lib, source=self.source)
        """The batch part of this runner (:class:`NativeBatch`): picklable, it carries the library to another
        process (a worker that needs no compiler)."""

    # -- loading ------------------------------------------------------------------------------------------
    def _load(self) -> None:
        lib = self._lib
        R, RP = self._ctreal, self._real_p
        lib.pbf_work_size.argtypes = [RP, _INT_P, _INT_P]
        lib.pbf_work_size.restype = None
        lib.pbf_sizes.argtypes = [_INT_P]
        lib.pbf_sizes.restype = None
        lib.pbf_solve.argtypes = [RP, RP, RP, _INT_P, RP, RP, _INT_P]
        lib.pbf_solve.restype = ctypes.c_int
        lib.pbf_step.argtypes = [RP, RP, R, R, RP, RP, _INT_P, RP, RP, _INT_P]
        lib.pbf_step.restype = ctypes.c_int
        lib.pbf_init.argtypes = [RP, RP, RP, R, R, RP, RP, RP, _INT_P]
        lib.pbf_init.restype = ctypes.c_int
        lib.pbf_rollout.argtypes = [RP, RP, RP, R, R, _INT, RP, RP, _INT_P, RP, _INT_P, RP, _INT_P]
        lib.pbf_rollout.restype = _INT
        lib.pbf_rollout_from.argtypes = [RP, RP, R, _INT, R, _INT, RP, RP, _INT_P, RP, _INT_P, RP, _INT_P]
        lib.pbf_rollout_from.restype = _INT
        lib.pbf_rollout_batch.argtypes = [_INT, _INT, RP, RP, RP, R, R, _INT, RP, RP, _INT_P, RP, _INT_P,
                                          _INT_P, RP, _INT_P]
        lib.pbf_rollout_batch.restype = ctypes.c_int
        lib.pbf_bench.argtypes = [RP, RP, RP, _INT, _INT, RP, RP, _INT_P]
        lib.pbf_bench.restype = ctypes.c_int
        if "pbfk_dense" in self.plan.instructions:
            lib.pbf_adaptive_begin.argtypes = [RP, R, R, RP]
            lib.pbf_adaptive_begin.restype = None
            lib.pbf_rollout_adaptive.argtypes = [RP, RP, RP, RP, R, R, _INT, _INT, _INT, RP, RP, RP, _INT_P, RP, RP,
                                                 _INT, _INT_P, _INT_P, RP, _INT_P]
            lib.pbf_rollout_adaptive.restype = _INT
        self._lib = lib
        sizes = (_INT * 13)()
        lib.pbf_sizes(sizes)
        self.nq, self.nx, self.ns, self.np, self.nu = (int(sizes[k]) for k in range(5))
        self.nv = int(sizes[12])
        if int(sizes[11]) != np.dtype(self.dtype).itemsize:
            raise RuntimeError(f"library {self.library.path} was built with a {int(sizes[11])}-byte casadi_real, "
                               f"expected {np.dtype(self.dtype).itemsize}")
        self._opt = np.ascontiguousarray(self.opt_vector, dtype=self.dtype)
        nw, niw = _INT(), _INT()
        lib.pbf_work_size(self._p(self._opt), ctypes.byref(nw), ctypes.byref(niw))
        self.work_size = (int(nw.value), int(niw.value))
        self._w = np.zeros(self.work_size[0], dtype=self.dtype)
        self._iw = np.zeros(self.work_size[1], dtype=np.int64)

    def _p(self, a: np.ndarray):
        return a.ctypes.data_as(self._real_p)

    @staticmethod
    def _ip(a: np.ndarray):
        return a.ctypes.data_as(_INT_P)

    def _vec(self, v, n: int, what: str) -> np.ndarray:
        a = np.ascontiguousarray(np.asarray(v, dtype=self.dtype).ravel())
        if a.size != n:
            raise ValueError(f"{what} must have {n} entries, got {a.size}")
        return a

    def _u(self, u) -> np.ndarray:
        if self.nu == 0:
            return np.zeros(1, dtype=self.dtype)
        if u is None:
            raise ValueError(f"this problem reads {self.nu} force inputs per step: pass u")
        return self._vec(u, self.nu, "u")

    # -- timing ------------------------------------------------------------------------------------------
    def time_kernel(self, p, x, what: str = "gradient", reps: int = 100) -> float:
        """Seconds per native evaluation at ``(x, p)``, the loop running in C: ``what`` = ``"gradient"``
        (objective and gradient), ``"hessian"`` (the solver's f, g, H: one LM iteration's derivatives) or
        ``"solve"`` (one damped Cholesky factorisation and solve).

        Raises:
            ValueError: an unknown ``what``, or an objective that is not finite at ``(x, p)`` (the timing
                would be of an early exit).
        """
        codes = {"gradient": 0, "hessian": 1, "solve": 2}
        if what not in codes:
            raise ValueError(f"what must be one of {', '.join(map(repr, codes))}, got {what!r}")
        pp, xx = self._vec(p, self.np, "p"), self._vec(x, self.nx, "x") if self.nx else np.zeros(1, self.dtype)
        out = np.zeros(2, dtype=self.dtype)
        if self.plan.weight:
            # pbf_bench evaluates with the residual weight's Cholesky factor found in the work arrays; a
            # solve limited to zero iterations factors M(p) there first (else the factor of whatever ran
            # before, or none, would be used)
            opt0 = self._opt.copy()
            opt0[0] = 0                                        # PBF_OPT_MAX_ITER
            x0, st = xx.copy(), np.zeros(_NST, dtype=np.int64)
            self._lib.pbf_solve(self._p(opt0), self._p(pp), self._p(x0), self._ip(st), self._p(out),
                                self._p(self._w), self._ip(self._iw))
        t0 = time.perf_counter()
        self._lib.pbf_bench(self._p(self._opt), self._p(pp), self._p(xx), codes[what], int(reps), self._p(out),
                            self._p(self._w), self._ip(self._iw))
        seconds = (time.perf_counter() - t0) / max(int(reps), 1)
        if self.nx and not np.isfinite(out[0]):
            raise ValueError(f"time_kernel: the objective is not finite at (x, p) ({out[0]}); choose a point where "
                             f"the step problem is defined")
        return seconds

    # -- single calls ------------------------------------------------------------------------------------
    def solve(self, x0: np.ndarray, p: np.ndarray):
        """Solve one step problem: unknowns from the guess ``x0`` at parameters ``p``.

        Returns:
            a :class:`~pbframework.step.SolveResult` (``x`` in the library's precision, as float64).
        """
        from pbframework.solving import SolveResult

        x = self._vec(x0, self.nx, "x0").copy() if self.nx else np.zeros(1, dtype=self.dtype)
        pp = self._vec(p, self.np, "p")
        st = np.zeros(_NST, dtype=np.int64)
        out = np.zeros(2, dtype=self.dtype)
        self._lib.pbf_solve(self._p(self._opt), self._p(pp), self._p(x), self._ip(st), self._p(out),
                            self._p(self._w), self._ip(self._iw))
        return SolveResult(x[:self.nx].astype(float), int(st[0]), float(out[0]), bool(st[1]), REASONS[int(st[2])],
                           float(out[1]), int(st[3]))

    def init(self, q0, qd0, t0: float, dt: float, u=None) -> np.ndarray:
        """The integrator's first state (``problem.init``) computed natively."""
        s = np.zeros(self.ns, dtype=self.dtype)
        self._lib.pbf_init(self._p(self._opt), self._p(self._vec(q0, self.nq, "q0")),
                           self._p(self._vec(qd0, self.nv, "qd0")), float(t0), float(dt), self._p(self._u(u)),
                           self._p(s), self._p(self._w), self._ip(self._iw))
        return s.astype(float)

    def step(self, s, t: float, dt: float, u=None) -> tuple[np.ndarray, dict]:
        """One Simulator step from state ``s`` at time ``t`` (failure policy included).

        Returns:
            ``(s_next, stats)`` with ``stats`` keys ``iterations, grad_norm, converged, halvings,
            evaluations, reason, depth, residual, failed`` (``failed``: the step did not converge after its
            halvings and the failure policy is ``stop`` or ``raise``).
        """
        sn = np.zeros(self.ns, dtype=self.dtype)
        st = np.zeros(_NST, dtype=np.int64)
        gn = np.zeros(_NSR, dtype=self.dtype)
        rc = self._lib.pbf_step(self._p(self._opt), self._p(self._vec(s, self.ns, "s")), float(t), float(dt),
                                self._p(self._u(u)), self._p(sn), self._ip(st), self._p(gn), self._p(self._w),
                                self._ip(self._iw))
        stats = {"iterations": int(st[0]), "grad_norm": float(gn[0]), "converged": bool(st[1]),
                 "halvings": int(st[4]), "evaluations": int(st[3]), "reason": REASONS[int(st[2])],
                 "depth": int(st[5]), "residual": float(gn[1]), "failed": bool(rc)}
        return sn.astype(float), stats

    # -- rollouts -------------------------------------------------------------------------------------------
    def rollout(self, q0, qd0, t0: float, dt: float, steps: int, u=None, *, state=None,
                first_step: int = 0) -> RolloutArrays:
        """``steps`` steps of ``dt`` from ``(q0, qd0)`` at ``t0`` in one native call (constant inputs ``u``).

        With ``state`` the rollout continues from that integrator state, row ``first_step`` of the
        ``states`` of a rollout started at ``t0`` (``q0``, ``qd0`` are ignored): its step ``j`` starts at
        ``t0 + (first_step + j) dt``, rounded as in the uninterrupted rollout, so a long rollout run in
        pieces gives identical results, time-dependent forces included.
        """
        steps = int(steps)
        nq = self.nq
        S = np.zeros((steps + 1, self.ns), dtype=self.dtype)
        st = np.zeros((max(steps, 1), _NST), dtype=np.int64)
        gn = np.zeros((max(steps, 1), _NSR), dtype=self.dtype)
        status = np.zeros(1, dtype=np.int64)
        ua = self._u(u)
        t_start = time.perf_counter()
        if state is None:
            q0a, qd0a = self._vec(q0, nq, "q0"), self._vec(qd0, self.nv, "qd0")
            k = int(self._lib.pbf_rollout(self._p(self._opt), self._p(q0a), self._p(qd0a), float(t0), float(dt),
                                          steps, self._p(ua), self._p(S), self._ip(st), self._p(gn),
                                          self._ip(status), self._p(self._w), self._ip(self._iw)))
        else:
            s0 = self._vec(state, self.ns, "state")
            k = int(self._lib.pbf_rollout_from(self._p(self._opt), self._p(s0), float(t0), int(first_step),
                                               float(dt), steps, self._p(ua), self._p(S), self._ip(st),
                                               self._p(gn), self._ip(status), self._p(self._w), self._ip(self._iw)))
        wall = time.perf_counter() - t_start
        failure = None
        if _status(status[0]) == "failed":
            failure = _step_stats(st[k], gn[k])
        st = st[:k]
        return RolloutArrays(states=S[:k + 1].astype(float), nq=nq, nv=self.nv, iterations=st[:, 0].copy(),
                             converged=st[:, 1].astype(bool), halvings=st[:, 4].copy(), evaluations=st[:, 3].copy(),
                             reason=st[:, 2].copy(), grad_norm=gn[:k, 0].astype(float), steps_done=k,
                             status=_status(status[0]), wall_time=wall, depth=st[:, 5].copy(),
                             residual=gn[:k, 1].astype(float), failure=failure)

    def rollout_adaptive(self, q0, qd0, t0: float, dt: float, steps: int, options, u=None, *, carry=None,
                         first_row: int = 0, rows: int | None = None,
                         history_capacity: int | None = None) -> AdaptiveArrays:
        """Adaptive steps (:mod:`pbframework.adaptive`, decision for decision) from ``(q0, qd0)`` at ``t0``,
        output every ``dt`` for ``steps`` rows, in one native call: rows ``first_row`` to at least
        ``first_row + rows - 1`` (default: all), continuing from ``carry`` (None: the start). The call also
        pauses early when ``history_capacity`` accepted steps are recorded; continue with the returned
        ``carry`` and the next ``first_row``.

        Args:
            options: an :class:`~pbframework.adaptive.AdaptiveOptions`.

        Raises:
            StepError: the library was built without the adaptive loop (``adaptive=True`` build option).
        """
        from pbframework.step import StepError

        if "pbfk_dense" not in self.plan.instructions:
            raise StepError("this C library has no adaptive loop: build the runner with adaptive=True")
        steps, first_row = int(steps), int(first_row)
        rows = steps - first_row if rows is None else min(int(rows), steps - first_row)
        nq = self.nq
        aopt = np.ascontiguousarray(adaptive_option_vector(options, dt, self.problem.error_order), dtype=self.dtype)
        if carry is None:
            carry = np.zeros(_NAC + self.ns, dtype=self.dtype)
            self._lib.pbf_adaptive_begin(self._p(aopt), float(t0), float(dt), self._p(carry))
        else:
            carry = np.ascontiguousarray(np.asarray(carry, dtype=self.dtype)).copy()
        per_step = int(math.ceil(aopt[3] / dt)) + 2            # rows one step may write past the request
        cap = min(rows + per_step, steps - first_row) + 1      # + 1: the failed step's statistics
        hcap = int(history_capacity) if history_capacity else max(1024, 4 * rows)
        Y = np.zeros((cap, nq + self.nv), dtype=self.dtype)
        st = np.zeros((cap, _NST), dtype=np.int64)
        gn = np.zeros((cap, _NSR), dtype=self.dtype)
        hist = np.zeros((hcap, 2), dtype=self.dtype)
        nhist = np.zeros(1, dtype=np.int64)
        status = np.zeros(1, dtype=np.int64)
        t_start = time.perf_counter()
        j = int(self._lib.pbf_rollout_adaptive(
            self._p(self._opt), self._p(aopt), self._p(self._vec(q0, nq, "q0")), self._p(self._vec(qd0, self.nv, "qd0")),
            float(t0), float(dt), steps, first_row, first_row + rows, self._p(self._u(u)), self._p(carry),
            self._p(Y), self._ip(st), self._p(gn), self._p(hist), hcap, self._ip(nhist), self._ip(status),
            self._p(self._w), self._ip(self._iw)))
        wall = time.perf_counter() - t_start
        n = j - first_row
        code = _status(status[0])
        failure = _step_stats(st[n], gn[n]) if code == "failed" else None
        ended = code != "done"
        return AdaptiveArrays(states=Y[:n].astype(float), iterations=st[:n, 0].copy(),
                              converged=st[:n, 1].astype(bool), halvings=st[:n, 4].copy(),
                              evaluations=st[:n, 3].copy(), grad_norm=gn[:n, 0].astype(float),
                              residual=gn[:n, 1].astype(float), history=hist[:int(nhist[0])].astype(float),
                              carry=carry, status=code, end_time=float(carry[10]) if ended else None,
                              end_step=float(carry[11]) if ended else None, failure=failure, wall_time=wall)

    def rollout_batch(self, Q0, QD0, t0: float, dt: float, steps: int, U=None,
                      threads: int | None = None) -> BatchArrays:
        """M rollouts at once, spread over ``threads`` native threads (default: the runner's).

        Args:
            Q0, QD0: ``(M, nq)`` initial configurations and ``(M, nv)`` velocities.
            t0, dt, steps: as :meth:`rollout`.
            U: ``(M, nu)`` constant inputs per trajectory (problems with force inputs only).
            threads: thread count (capped at M).
        """
        return self.native.rollout_batch(Q0, QD0, t0, dt, steps, U, threads=threads or self.threads)

    def __repr__(self) -> str:
        return (f"CRunner({self.problem.describe()}, {self.plan.describe()}, {self.real}, "
                f"{self.library.path.name}{' cached' if self.library.cached else ''})")


_NATIVE: dict[tuple, "NativeBatch"] = {}
"""Batches already unpickled in this process, by (cache key, option vector, precision): a worker installs and
loads a library once, however many chunks it runs."""


def _unpickle_native(packed: PackedLibrary, opt: bytes, real: str, threads: int) -> "NativeBatch":
    memo = (packed.key, opt, real)                  # = NativeBatch.memo_key
    if memo not in _NATIVE:
        library = install_library(packed)
        opt_vector = np.frombuffer(opt, dtype=np.float64 if real == "double" else np.float32).copy()
        try:
            native = NativeBatch(library, opt_vector, real, threads)
        except OSError as exc:               # same platform tag, another ABI (an older C library, ...)
            library = rebuild_library(packed, f"library {library.path} does not load here ({exc})")
            native = NativeBatch(library, opt_vector, real, threads)
        _NATIVE[memo] = native
    return _NATIVE[memo]


class NativeBatch:
    """The batch part of a :class:`CRunner`: its library, solver option vector and precision, calling
    ``pbf_rollout_batch`` (``runner.native``).

    Picklable: the pickle carries the compiled library's bytes (:class:`~pbframework.codegen.build.PackedLibrary`),
    and unpickling writes them into the receiving process's cache under the library's own key (once; the
    cache is ``$PBF_CACHE_DIR`` there) and loads them, so a worker process or machine of the same platform needs
    no compiler and never builds the library; one of another platform (or one that cannot load it) rebuilds
    it from the source that travels with it, or raises :class:`~pbframework.codegen.build.BuildError` saying
    why it cannot.

    Args:
        library: the built library.
        opt_vector: the C driver's option vector (:func:`solver_option_vector`).
        real: ``"double"`` or ``"float"`` (the library's ``casadi_real``).
        threads: default thread count (default: all cores of the machine it runs on).
        lib: the library already loaded (``ctypes.CDLL``), to share a runner's handle.
        source: the C source the library was built from: it travels with the library (compressed), so a
            machine of another platform or ABI rebuilds it (that one needs a compiler).
    """

    def __init__(self, library: Library, opt_vector: np.ndarray, real: str = "double", threads: int | None = None,
                 *, lib: ctypes.CDLL | None = None, source: CSource | None = None) -> None:
        self.library = library
        self.source = source
        self.real = real
        self.dtype = np.float64 if real == "double" else np.float32
        self._ctreal = ctypes.c_double if real == "double" else ctypes.c_float
        self._real_p = ctypes.POINTER(self._ctreal)
        self._threads = int(threads) if threads else None
        self._lib = lib if lib is not None else ctypes.CDLL(str(library.path))
        RP = self._real_p
        self._lib.pbf_sizes.argtypes = [_INT_P]
        self._lib.pbf_sizes.restype = None
        self._lib.pbf_work_size.argtypes = [RP, _INT_P, _INT_P]
        self._lib.pbf_work_size.restype = None
        self._lib.pbf_rollout_batch.argtypes = [_INT, _INT, RP, RP, RP, self._ctreal, self._ctreal, _INT, RP, RP,
                                                _INT_P, RP, _INT_P, _INT_P, RP, _INT_P]
        self._lib.pbf_rollout_batch.restype = ctypes.c_int
        sizes = (_INT * 13)()
        self._lib.pbf_sizes(sizes)
        self.nq, self.nx, self.ns, self.np, self.nu = (int(sizes[k]) for k in range(5))
        self.nv = int(sizes[12])
        self._opt = np.ascontiguousarray(opt_vector, dtype=self.dtype)
        nw, niw = _INT(), _INT()
        self._lib.pbf_work_size(self._p(self._opt), ctypes.byref(nw), ctypes.byref(niw))
        self.work_size = (int(nw.value), int(niw.value))

    @property
    def threads(self) -> int:
        """The default thread count: the one given, else the cores of the machine this object is on."""
        return self._threads or (os.cpu_count() or 1)

    @property
    def memo_key(self) -> tuple:
        """What identifies this batch's library and settings: (cache key, option vector bytes, precision)."""
        return (self.library.key, self._opt.tobytes(), self.real)

    def __reduce__(self):
        return (_unpickle_native, (pack_library(self.library, self.source), self._opt.tobytes(), self.real,
                                   self._threads))

    def _p(self, a: np.ndarray):
        return a.ctypes.data_as(self._real_p)

    @staticmethod
    def _ip(a: np.ndarray):
        return a.ctypes.data_as(_INT_P)

    def rollout_batch(self, Q0, QD0, t0: float, dt: float, steps: int, U=None,
                      threads: int | None = None) -> BatchArrays:
        """M rollouts at once, spread over ``threads`` native threads (default: :attr:`threads`).

        Args:
            Q0, QD0: ``(M, nq)`` initial configurations and ``(M, nv)`` velocities.
            t0, dt, steps: as :meth:`CRunner.rollout`.
            U: ``(M, nu)`` constant inputs per trajectory (problems with force inputs only).
            threads: thread count (capped at M and 256).
        """
        steps = int(steps)
        nq = self.nq
        Q0 = np.ascontiguousarray(np.atleast_2d(np.asarray(Q0, dtype=self.dtype)))
        QD0 = np.ascontiguousarray(np.atleast_2d(np.asarray(QD0, dtype=self.dtype)))
        if Q0.ndim != 2 or Q0.shape[1] != nq:
            raise ValueError(f"Q0 must be an (M, {nq}) array, got shape {Q0.shape}")
        if QD0.shape != (Q0.shape[0], self.nv):
            raise ValueError(f"QD0 must be an ({Q0.shape[0]}, {self.nv}) array, got shape {QD0.shape}")
        M = Q0.shape[0]
        if self.nu:
            if U is None:
                raise ValueError(f"this problem reads {self.nu} force inputs per step: pass U (M x {self.nu})")
            Ua = np.ascontiguousarray(np.asarray(U, dtype=self.dtype).reshape(M, self.nu))
        else:
            Ua = np.zeros(1, dtype=self.dtype)
        nth = max(1, min(int(threads or self.threads), max(M, 1), 256))
        S = np.zeros((M, steps + 1, self.ns), dtype=self.dtype)
        st = np.zeros((M, max(steps, 1), _NST), dtype=np.int64)
        gn = np.zeros((M, max(steps, 1), _NSR), dtype=self.dtype)
        nsteps = np.zeros(M, dtype=np.int64)
        status = np.zeros(M, dtype=np.int64)
        w = np.zeros(nth * self.work_size[0], dtype=self.dtype)
        iw = np.zeros(nth * self.work_size[1], dtype=np.int64)
        t_start = time.perf_counter()
        self._lib.pbf_rollout_batch(M, nth, self._p(self._opt), self._p(Q0), self._p(QD0), float(t0), float(dt),
                                    steps, self._p(Ua) if self.nu else None, self._p(S), self._ip(st),
                                    self._p(gn), self._ip(nsteps), self._ip(status), self._p(w), self._ip(iw))
        wall = time.perf_counter() - t_start
        for m in np.nonzero(nsteps < steps)[0]:          # keep arrays rectangular past an early end
            k = int(nsteps[m])
            S[m, k + 1:] = S[m, k]
        st = st[:, :steps]
        return BatchArrays(states=S.astype(float), nq=nq, nv=self.nv, iterations=st[:, :, 0].copy(),
                           converged=st[:, :, 1].astype(bool) & (np.arange(steps)[None, :] < nsteps[:, None]),
                           halvings=st[:, :, 4].copy(), evaluations=st[:, :, 3].copy(),
                           grad_norm=gn[:, :steps, 0].astype(float), steps_done=nsteps,
                           status=np.array([_status(s) for s in status]), wall_time=wall, threads=nth,
                           depth=st[:, :, 5].copy(), residual=gn[:, :steps, 1].astype(float))
