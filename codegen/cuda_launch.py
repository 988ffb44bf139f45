"""The host side of the per-iteration CUDA batch (issue 22 item 2): buffers and the launch loop.

The emitted source (:func:`pbframework.codegen.cuda.emit_cuda`, ``c_src/pbf_iterate.c``) holds one launch:
``pbf_iter_kernel`` on the device (one thread per trajectory) and ``pbf_iter_launch``, the same per-trajectory
code looped on the host. Each launch performs one Levenberg-Marquardt iteration for every trajectory that is
not done, on whatever step and halving level it is, and counts the trajectories still running. The host
repeats launches until that count is zero: :func:`launch_loop`, written against a ``launch()`` callable so
that the same loop drives the host build (:class:`HostIterBatch`, here, tested on every machine) and a
device (:mod:`pbframework.codegen.cuda_device`, pycuda).

Buffers (all zeroed before the first launch; sizes from ``pbf_work_size`` and ``pbf_iter_sizes``):

* outputs as :meth:`pbframework.codegen.step_runner.NativeBatch.rollout_batch`: states ``S`` (M x (steps+1)
  x ns), statistics ``ST`` (M x steps x 6) and ``GN`` (M x steps x 2), ``status``, ``taken``;
* the controller in structure-of-arrays layout: integers ``I`` (n_int x M) and reals ``R`` (n_real x M),
  field ``f`` of trajectory ``i`` at ``[f, i]``;
* the dense solver memory per trajectory: ``W`` (M x nw) and ``IW`` (M x niw);
* ``active``: one integer, reset to 0 before each launch.
"""

from __future__ import annotations

import ctypes
import time
from typing import Callable

import numpy as np

from .build import build_shared
from .cuda import ITERATION_SOLVERS, emit_cuda
from .step_library import DriverError, plan_kernels
from .step_runner import FLOAT_TOLERANCE_FLOORS, BatchArrays, solver_option_vector

__all__ = ["launch_loop", "launch_bound", "IterBuffers", "HostIterBatch", "batch_arrays"]

_NST, _NSR = 6, 2
_STATUS = ("done", "diverged", "failed")


def launch_bound(steps: int, max_iter: int, max_halvings: int) -> int:
    """The most launches a batch can need: every solve of every (sub)step takes ``max_iter`` launches, a
    step halved to depth ``max_halvings`` has ``2^(h+1) - 1`` solves."""
    return max(1, int(steps)) * (int(max_iter) + 1) * (2 ** (int(max_halvings) + 1) - 1) + 2


def launch_loop(launch: Callable[[], int], max_launches: int) -> int:
    """Call ``launch()`` (one launch over the batch; it returns how many trajectories are still running)
    until none is. Returns the number of launches.

    Raises:
        RuntimeError: still running after ``max_launches`` launches (a driver defect: see
            :func:`launch_bound`).
    """
    n = 0
    while True:
        active = int(launch())
        n += 1
        if active == 0:
            return n
        if n >= max_launches:
            raise RuntimeError(f"per-iteration batch: {active} trajectories still running after {n} launches "
                               f"(bound {max_launches})")


class IterBuffers:
    """The host arrays of one per-iteration batch (module docstring); ``dtype`` is the library's real."""

    def __init__(self, M: int, steps: int, ns: int, work: tuple[int, int], fields: tuple[int, int], dtype) -> None:
        self.M, self.steps = int(M), int(steps)
        self.S = np.zeros((M, steps + 1, ns), dtype)
        self.ST = np.zeros((M, max(steps, 1), _NST), np.int64)
        self.GN = np.zeros((M, max(steps, 1), _NSR), dtype)
        self.status = np.zeros(M, np.int64)
        self.taken = np.zeros(M, np.int64)
        self.W = np.zeros((M, work[0]), dtype)
        self.IW = np.zeros((M, work[1]), np.int64)
        self.I = np.zeros((fields[0], M), np.int64)
        self.R = np.zeros((fields[1], M), dtype)
        self.active = np.zeros(1, np.int64)


def batch_arrays(buf: IterBuffers, nq: int, nv: int, wall: float, threads: int = 1) -> BatchArrays:
    """The :class:`~pbframework.codegen.step_runner.BatchArrays` of a finished batch (rows past a trajectory's
    end hold its last state, as the C backend's)."""
    S, st, gn, nsteps, steps = buf.S, buf.ST[:, :buf.steps], buf.GN, buf.taken, buf.steps
    for m in np.nonzero(nsteps < steps)[0]:
        S[m, int(nsteps[m]) + 1:] = S[m, int(nsteps[m])]
    return BatchArrays(states=S.astype(float), nq=nq, nv=nv, iterations=st[:, :, 0].copy(),
                       converged=st[:, :, 1].astype(bool) & (np.arange(steps)[None, :] < nsteps[:, None]),
                       halvings=st[:, :, 4].copy(), evaluations=st[:, :, 3].copy(),
                       grad_norm=gn[:, :steps, 0].astype(float), steps_done=nsteps.copy(),
                       status=np.array([_STATUS[int(s)] for s in buf.status]), wall_time=wall, threads=threads,
                       depth=st[:, :, 5].copy(), residual=gn[:, :steps, 1].astype(float))


class HostIterBatch:
    """The emitted CUDA source compiled as host C, run launch by launch (what the tests check against the C
    backend, trajectory by trajectory).

    Args:
        problem: the :class:`~pbframework.step.StepProblem`.
        solver: ``"lm"`` or ``"jtj_lm"``.
        solver_options, on_failure, max_halvings, max_speed: as :class:`~pbframework.codegen.step_runner.CRunner`.
        real: ``"double"`` or ``"float"``.
        plan: a :class:`~pbframework.codegen.step_library.KernelPlan` (for instance a ``CRunner``'s, so both
            run the same kernels); built from ``model`` and ``plan_options`` when omitted.

    Attributes:
        launches: launches of the last :meth:`rollout_batch`.
    """

    def __init__(self, problem, solver: str = "lm", solver_options=None, *, on_failure: str = "stop",
                 max_halvings: int = 4, max_speed: float = 1e4, real: str = "double", plan=None, model=None,
                 cache=None, **plan_options) -> None:
        if solver not in ITERATION_SOLVERS:
            raise DriverError(f"the per-iteration CUDA batch runs the solvers {', '.join(ITERATION_SOLVERS)}; got "
                              f"{solver!r}")
        if real not in ("double", "float"):
            raise DriverError(f"real must be 'double' or 'float', got {real!r}")
        self.problem, self.solver, self.real = problem, solver, real
        self.dtype = np.float64 if real == "double" else np.float32
        opt, _ = solver_option_vector(solver, solver_options, on_failure=on_failure, max_halvings=max_halvings,
                                      max_speed=max_speed)
        if real == "float":
            for k, floor in FLOAT_TOLERANCE_FLOORS.items():
                opt[k] = max(opt[k], floor)
        self.opt = np.ascontiguousarray(opt, dtype=self.dtype)
        self.max_iter, self.max_halvings = int(opt[0]), int(max_halvings)
        self.plan = plan if plan is not None else plan_kernels(problem, solver, model=model, **plan_options)
        self.source = emit_cuda(problem, solver, plan=self.plan)
        flags = ("-ffp-contract=off",) + (("-DPBF_FLOAT",) if real == "float" else ())
        self.library = build_shared(self.source, flags=flags, cache=cache)
        self._lib = ctypes.CDLL(str(self.library.path))
        self._lib.pbf_iter_launch.restype = None
        nw, niw, ni, nr = (ctypes.c_longlong() for _ in range(4))
        P = ctypes.c_void_p
        self._lib.pbf_work_size(P(self.opt.ctypes.data), ctypes.byref(nw), ctypes.byref(niw))
        self._lib.pbf_iter_sizes(P(self.opt.ctypes.data), ctypes.byref(ni), ctypes.byref(nr))
        self.work_size = (nw.value, niw.value)
        self.fields = (ni.value, nr.value)
        self.launches = 0

    def rollout_batch(self, Q0, QD0, t0: float, dt: float, steps: int, U=None) -> BatchArrays:
        """M rollouts of ``steps`` steps, one LM iteration per launch (arguments as ``NativeBatch.rollout_batch``)."""
        sz = self.plan.sizes
        Q0 = np.ascontiguousarray(np.atleast_2d(np.asarray(Q0, self.dtype)))
        QD0 = np.ascontiguousarray(np.atleast_2d(np.asarray(QD0, self.dtype)))
        M = Q0.shape[0]
        if Q0.shape != (M, sz["nq"]) or QD0.shape != (M, sz["nv"]):
            raise ValueError(f"Q0 / QD0 must be (M, {sz['nq']}) / (M, {sz['nv']}) arrays, got {Q0.shape} / "
                             f"{QD0.shape}")
        Ua = None
        if sz["nu"]:
            if U is None:
                raise ValueError(f"this problem reads {sz['nu']} force inputs per step: pass U (M x {sz['nu']})")
            Ua = np.ascontiguousarray(np.asarray(U, self.dtype).reshape(M, sz["nu"]))
        buf = IterBuffers(M, int(steps), sz["ns"], self.work_size, self.fields, self.dtype)
        P, L = ctypes.c_void_p, ctypes.c_longlong
        R = ctypes.c_double if self.real == "double" else ctypes.c_float
        args = (L(M), P(self.opt.ctypes.data), P(Q0.ctypes.data), P(QD0.ctypes.data), R(t0), R(dt), L(int(steps)),
                P(Ua.ctypes.data) if Ua is not None else None, P(buf.S.ctypes.data), P(buf.ST.ctypes.data),
                P(buf.GN.ctypes.data), P(buf.status.ctypes.data), P(buf.taken.ctypes.data), P(buf.W.ctypes.data),
                P(buf.IW.ctypes.data), L(self.work_size[0]), L(self.work_size[1]), P(buf.I.ctypes.data),
                P(buf.R.ctypes.data), P(buf.active.ctypes.data))

        def launch() -> int:
            buf.active[0] = 0
            self._lib.pbf_iter_launch(*args)
            return int(buf.active[0])

        start = time.perf_counter()
        self.launches = launch_loop(launch, launch_bound(steps, self.max_iter, self.max_halvings))
        return batch_arrays(buf, sz["nq"], sz["nv"], time.perf_counter() - start)
