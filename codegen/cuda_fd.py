"""CUDA source of batched forward dynamics (issue 22 item 4): the seed-003 algorithms ABIA, JSIIA and CFA.

:func:`emit_fd_cuda` turns the forward-dynamics plug-ins' CasADi functions ``(q, qd, tau) -> qdd``
(:func:`pbframework.dynamics.forward_dynamics`: ABIA's and JSIIA's scans, CFA's scans and odd-even
elimination) into one translation unit through the step library's emitter
(:func:`~pbframework.codegen.step_library.emit_sx_kernel`: the algorithm's SX graph, operation for operation, as
chunked straight-line code with exact decimal constants). Per algorithm ``<a>`` it holds

* ``pbfd_<a>``: the kernel (CasADi calling convention), every chunk a ``__host__ __device__`` function;
* under ``__CUDACC__``: ``pbfd_<a>_kernel(M, Q, QD, TAU, QDD, W)``, one thread per instance;
* everywhere: ``pbfd_<a>_batch`` with the same arguments, the same per-instance code looped on the host (what
  the tests compare with the CasADi VM on every machine).

Layout: instance ``i`` reads row ``i`` of ``Q``, ``QD``, ``TAU`` (``M x nq``, ``M x nv``, ``M x nv``,
row-major), writes row ``i`` of ``QDD`` and uses ``W + i * pbfd_<a>_work()`` as scratch. ``float`` with
``-DPBF_FLOAT``. Each instance runs the whole algorithm in one thread: the scans' and the odd-even
elimination's levels are evaluated in their parallel order but by one thread; spreading the levels of one
instance over a group of threads is not built, and no GPU was available to run either.
"""

from __future__ import annotations

import re
from typing import Sequence

from .cuda import _PRELUDE as _CUDA_PRELUDE
from .emit import CSource
from .step_library import _PRELUDE as _C_PRELUDE
from .step_library import emit_sx_kernel

__all__ = ["FD_ALGORITHMS", "emit_fd_cuda"]

FD_ALGORITHMS = ("abia", "jsiia", "cfa")
"""The seed-003 forward-dynamics plug-ins (``aba`` emits the same way)."""

_BATCH = """
/* ---- {a}: batched forward dynamics ---- */
PBF_EXPORT PBF_HD casadi_int pbfd_{a}_work(void) {{ return {szw}; }}

static PBF_HD void pbfd_{a}_one(casadi_int i, const casadi_real* Q, const casadi_real* QD, const casadi_real* TAU,
                                casadi_real* QDD, casadi_real* W) {{
  const casadi_real* arg[3];
  casadi_real* res[1];
  arg[0] = Q + i * {nq}; arg[1] = QD + i * {nv}; arg[2] = TAU + i * {nv}; res[0] = QDD + i * {nv};
  (void)pbfd_{a}(arg, res, 0, W + i * {szw}, 0);
}}

#ifdef __CUDACC__
extern "C" __global__ void pbfd_{a}_kernel(casadi_int M, const casadi_real* Q, const casadi_real* QD,
                                           const casadi_real* TAU, casadi_real* QDD, casadi_real* W) {{
  casadi_int i = (casadi_int)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < M) pbfd_{a}_one(i, Q, QD, TAU, QDD, W);
}}
#endif

/* M instances on the host: qdd = fd(q, qd, tau) row by row */
PBF_EXPORT void pbfd_{a}_batch(casadi_int M, const casadi_real* Q, const casadi_real* QD, const casadi_real* TAU,
                               casadi_real* QDD, casadi_real* W) {{
  casadi_int i;
  for (i = 0; i < M; ++i) pbfd_{a}_one(i, Q, QD, TAU, QDD, W);
}}
"""


def emit_fd_cuda(model, algorithms: Sequence[str] = FD_ALGORITHMS, *, name: str | None = None,
                 chunk: int = 250) -> CSource:
    """CUDA source (module docstring) of ``model``'s forward dynamics by each of ``algorithms``.

    Raises:
        ModelError: an algorithm that does not support ``model`` (CFA: serial chains of 1-DOF joints), in the
            plug-in's words.
    """
    from pbframework.dynamics import forward_dynamics

    parts = []
    for a in algorithms:
        f = forward_dynamics(model, algorithm=a)
        text, szw = emit_sx_kernel(f, f"pbfd_{a}", chunk)
        parts.append(text + _BATCH.format(a=a, szw=szw, nq=model.nq, nv=model.nv))
    body = re.sub(r"(?m)^static (?!PBF_HD)", "static PBF_HD ", "".join(parts))
    head = _C_PRELUDE.format(describe=f"forward dynamics of {model.name} by {', '.join(algorithms)}")
    unit = name or re.sub(r"[^A-Za-z0-9_]", "_", f"pbfd_{model.name}")
    return CSource(unit, _CUDA_PRELUDE + head + body, tuple(f"pbfd_{a}_batch" for a in algorithms))
