"""Emit C source for CasADi functions (pure: no compiler, no files).

:func:`emit_c` returns the text of one C translation unit holding the functions produced by
``casadi.CodeGenerator`` plus, per function ``f``, a batch entry point written here::

    int f_batch(casadi_int N, const casadi_real** arg, casadi_real** res,
                casadi_int* iw, casadi_real* w);

which evaluates ``f`` on ``N`` independent instances laid out contiguously: input ``j`` of instance ``k``
starts at ``arg[j] + k * nnz_in(j)`` (a C-contiguous ``(N, nnz_in(j))`` array), outputs likewise. A null
``arg[j]`` means zeros, a null ``res[j]`` skips that output. ``iw`` and ``w`` are caller-owned work arrays
of ``f_work``'s sizes, reused across instances: no malloc anywhere, so the same source serves a shared
library, an embedded target, or a GPU port. ``f_repeat(reps, N, ...)`` calls ``f_batch`` ``reps`` times,
so a timing loop runs in C.

``casadi_real`` defaults to ``double``; compile with ``-Dcasadi_real=float`` for single precision.
Building, caching and loading live in :mod:`pbframework.codegen.build`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Sequence

import casadi as ca

__all__ = ["CSource", "emit_c"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class CSource:
    """One emitted translation unit.

    Attributes:
        name: unit name (prefix of CasADi's internal symbols).
        text: the C source.
        functions: names of the exported functions, each with ``<name>_batch`` and ``<name>_repeat``.
        sha256: hash of ``text``.
    """

    name: str
    text: str
    functions: tuple[str, ...]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def size(self) -> int:
        return len(self.text.encode())

    @property
    def lines(self) -> int:
        return self.text.count("\n")


def _batch_driver(f: ca.Function) -> str:
    name = f.name()
    n_in, n_out = f.n_in(), f.n_out()
    nnz_in = ", ".join(str(f.nnz_in(j)) for j in range(n_in)) or "0"
    nnz_out = ", ".join(str(f.nnz_out(j)) for j in range(n_out)) or "0"
    return f"""
/* Batch entry for {name}: N instances, contiguous inputs/outputs, caller-owned iw/w (sizes of {name}_work). */
CASADI_SYMBOL_EXPORT int {name}_batch(casadi_int N, const casadi_real** arg, casadi_real** res,
                                      casadi_int* iw, casadi_real* w) {{
  static const casadi_int nnz_in[] = {{{nnz_in}}};
  static const casadi_int nnz_out[] = {{{nnz_out}}};
  const casadi_real* a[{max(f.sz_arg(), 1)}];
  casadi_real* r[{max(f.sz_res(), 1)}];
  casadi_int k, j;
  for (k = 0; k < N; ++k) {{
    for (j = 0; j < {n_in}; ++j) a[j] = arg[j] ? arg[j] + k * nnz_in[j] : 0;
    for (j = 0; j < {n_out}; ++j) r[j] = res[j] ? res[j] + k * nnz_out[j] : 0;
    if ({name}(a, r, iw, w, 0)) return 1;
  }}
  (void)nnz_in; (void)nnz_out;
  return 0;
}}

/* Timing helper: {name}_batch called reps times (the loop runs in C). */
CASADI_SYMBOL_EXPORT int {name}_repeat(casadi_int reps, casadi_int N, const casadi_real** arg,
                                       casadi_real** res, casadi_int* iw, casadi_real* w) {{
  casadi_int i;
  for (i = 0; i < reps; ++i) if ({name}_batch(N, arg, res, iw, w)) return 1;
  return 0;
}}
"""


def emit_c(functions: ca.Function | Sequence[ca.Function], name: str | None = None, *,
           batch: bool = True, verbose: bool = False) -> CSource:
    """C source for ``functions`` (a ``casadi.Function`` or several), with batch entry points.

    Args:
        functions: the functions to export (their names become the C symbols; they must be distinct
            C identifiers).
        name: unit name; default ``"pbf_" + first function name``.
        batch: also emit ``<f>_batch`` and ``<f>_repeat`` (see the module docstring).
        verbose: keep CasADi's per-instruction comments (larger source, slower compile).

    Returns:
        a :class:`CSource`; nothing is written to disk.

    Raises:
        ValueError: a function name that is not a C identifier, or two functions with the same name.
    """
    fs = [functions] if isinstance(functions, ca.Function) else list(functions)
    if not fs:
        raise ValueError("emit_c: no functions given")
    names = [f.name() for f in fs]
    for nm in names:
        if not _IDENT.match(nm):
            raise ValueError(f"emit_c: function name {nm!r} is not a C identifier (rename the casadi.Function)")
    if len(set(names)) != len(names):
        raise ValueError(f"emit_c: duplicate function names {names}")
    unit = name or f"pbf_{names[0]}"
    if not _IDENT.match(unit):
        raise ValueError(f"emit_c: unit name {unit!r} is not a C identifier")
    cg = ca.CodeGenerator(unit, {"with_header": False, "verbose": verbose, "casadi_real": "double"})
    for f in fs:
        cg.add(f)
    text = cg.dump()
    if batch:
        text += "\n/* ---- pbframework batch entry points ---- */\n" + "".join(_batch_driver(f) for f in fs)
    return CSource(unit, text, tuple(names))
