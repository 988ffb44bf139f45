"""CUDA source of a step problem's rollout (issue 22, first part): the C step library as device code.

The portable driver and the straight-line kernels of :mod:`pbframework.codegen.step_library` (``host=False``)
are valid CUDA once every function carries ``__host__ __device__``; :func:`emit_cuda` adds that through a macro
layer (``PBF_HD``), so the **same text compiles as host C** (the macro is empty there) and its numerics are
tested on every machine against the VM and the C backend. It appends

* under ``__CUDACC__``: ``pbf_rollout_kernel``, one thread per trajectory, each running the whole rollout of
  its initial state with its own slice of the work arrays (array-of-structures per thread);
* everywhere: ``pbf_rollout_all``, the same loop over trajectories on the host;
* for ``lm`` / ``jtj_lm`` (:data:`ITERATION_SOLVERS`), the per-iteration batch ``c_src/pbf_iterate.c``:
  ``pbf_iter_kernel`` (device) / ``pbf_iter_launch`` (host), one LM iteration per launch for every trajectory,
  the controller in structure-of-arrays buffers; the host loop that repeats launches is
  :mod:`pbframework.codegen.cuda_launch`.

Constants are the emitter's exact decimal literals (``repr`` of the double, 17 significant digits), calls to
kernel chunks stay device functions, and ``float`` works as for the C backend (``-DPBF_FLOAT``). Building and
loading on a device: :mod:`pbframework.codegen.cuda_device`; forward dynamics: :mod:`pbframework.codegen.cuda_fd`.

Not built (issue 22): a group of threads per trajectory (and the choice between the two by size), an
interleaved layout of the dense solver memory. No GPU was available to run any of it; ``nvcc`` compiles it
(``tests/test_cuda_emit.py``, ``tests/test_cuda_models.py``) and its host build is tested against the C backend
and the VM (``tests/test_cuda_launch.py``, ``tests/test_cuda_models.py``).
"""

from __future__ import annotations

import re

from .emit import CSource
from .step_library import C_SRC, emit_step_library

__all__ = ["emit_cuda", "NVCC_ARCHS", "ITERATION_SOLVERS"]

ITERATION_SOLVERS = ("lm", "jtj_lm")
"""Solvers of the per-iteration batch (``c_src/pbf_iterate.c``: ``pbf_iter_kernel`` / ``pbf_iter_launch``)."""

NVCC_ARCHS = ("sm_80", "sm_90")
"""The architectures CI compiles every generated kernel for."""

_PRELUDE = """/* CUDA source of a pbframework step library (pbframework.codegen.cuda); compiles as host C too. */
#ifdef __CUDACC__
#define PBF_HD __host__ __device__
#define PBF_NO_COLD 1
#define PBF_EXPORT extern "C" __attribute__((visibility("default")))   /* host entry points keep C names */
#else
#define PBF_HD
#endif
"""

_LAUNCH = """
/* ---- batched rollouts: one trajectory per thread (device) or per loop iteration (host) ---- */
#define PBF_ROLLOUT_ONE(i) \\
  taken[i] = pbf_rollout(opt, Q0 + (i) * PBF_NQ, QD0 + (i) * PBF_NVEL, t0, dt, steps, \\
                         U ? U + (i) * PBF_NU : 0, S + (i) * (steps + 1) * PBF_NS, ST + (i) * steps * PBF_NST, \\
                         GN + (i) * steps * PBF_NSR, status + (i), W + (i) * nw, IW + (i) * niw)

#ifdef __CUDACC__
extern "C" __global__ void pbf_rollout_kernel(casadi_int M, const casadi_real* opt, const casadi_real* Q0,
                                              const casadi_real* QD0, casadi_real t0, casadi_real dt,
                                              casadi_int steps, const casadi_real* U, casadi_real* S,
                                              casadi_int* ST, casadi_real* GN, casadi_int* status,
                                              casadi_int* taken, casadi_real* W, casadi_int* IW, casadi_int nw,
                                              casadi_int niw) {
  casadi_int i = (casadi_int)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < M) PBF_ROLLOUT_ONE(i);
}
#endif

/* M rollouts of steps steps from the rows of Q0 / QD0 (inputs U: M x NU rows, or null); S: M x (steps + 1) x
   NS, ST: M x steps x NST, GN: M x steps x NSR, status / taken: M; W / IW: M slices of nw / niw (pbf_work_size). */
PBF_EXPORT void pbf_rollout_all(casadi_int M, const casadi_real* opt, const casadi_real* Q0, const casadi_real* QD0,
                                casadi_real t0, casadi_real dt, casadi_int steps, const casadi_real* U,
                                casadi_real* S, casadi_int* ST, casadi_real* GN, casadi_int* status,
                                casadi_int* taken, casadi_real* W, casadi_int* IW, casadi_int nw, casadi_int niw) {
  casadi_int i;
  for (i = 0; i < M; ++i) PBF_ROLLOUT_ONE(i);
}
"""


def emit_cuda(problem, solver: str = "lm", *, name: str | None = None, **options) -> CSource:
    """The CUDA source (module docstring) of ``problem`` solved by ``solver``; ``options`` go to
    :func:`~pbframework.codegen.step_library.emit_step_library` (``plan``, ``derivatives``, ...)."""
    src, plan = emit_step_library(problem, solver, host=False, name=name, **options)
    text = src.text
    functions = ("pbf_rollout_all", "pbf_work_size")
    if plan.solver in ITERATION_SOLVERS:
        text += "\n/* ---- one LM iteration per launch ---- */\n" + (C_SRC / "pbf_iterate.c").read_text()
        functions += ("pbf_iter_launch", "pbf_iter_sizes")
    text = re.sub(r"(?m)^static ", "static PBF_HD ", text)
    text = re.sub(r"(?m)^PBF_EXPORT ", "PBF_EXPORT PBF_HD ", text)
    return CSource(src.name + "_cuda", _PRELUDE + text + _LAUNCH, functions)
