"""Embedded export: a Simulator's step as a standalone C99 library (header, source, CMake, example, README).

::

    sim = pbf.Simulator(pbf.models.chain(10), "pbad", order=2, dt=0.01)
    report = pbf.export(sim, "build/chain10", precision="float")
    print(report)                 # files, workspace bytes, code and source sizes

or ``pbf export chain --links 10 --integrator pbad --order 2 --dt 0.01 --precision float --out build/chain10``.

The directory holds

* ``<name>.h`` -- the API, documented in the header: a caller-owned workspace struct whose size is a compile-time
  constant (``<NAME>_WORK_REALS`` reals, ``<NAME>_WORK_INTS`` integers, the option vector), ``<name>_defaults``
  (the options the Python side uses), ``<name>_init`` (the integrator's first state from ``q0, qd0``) and
  ``<name>_step`` (one step: state, time, dt, inputs -> next state, returning a status code and the
  iteration count). The solver's iteration cap and the depth of halving retries bound the worst-case time.
* ``<name>.c`` -- the generated kernels and the solver loop of :mod:`pbframework.codegen.step_library`
  (``host=False``: no threads), every internal symbol prefixed with ``<name>_``, so two exported libraries
  link into one program. No malloc, no VLA or alloca, no printf, no mutable global state: two workspaces run
  side by side.
* ``CMakeLists.txt`` (a static library and the example), ``example_main.c`` (a rollout printing ``t``, ``q`` and
  the velocity estimate per step as CSV, run twice on two workspaces that must agree bit for bit) and
  ``README.md``.

``precision="float"`` gives true single precision: ``casadi_real`` is ``float``, every floating literal
carries the ``f`` suffix, ``sin``/``cos``/``sqrt``/... become ``sinf``/``cosf``/``sqrtf``/..., integer indices
are 32-bit ``int``, and the source compiles clean under ``-Wdouble-promotion``. The solver tolerances are raised
to what single precision can meet (:data:`pbframework.codegen.step_runner.FLOAT_TOLERANCE_FLOORS`).

Integrators whose step is not a pure C loop cannot be exported (the NMDP integrators' PGM with qpOASES, the QP
baselines): refused in one line, as is an output directory that exists and is not empty (unless
``force=True``). A model name that is not a C identifier is sanitised; the report says to what.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import numpy as np

from .step import StepError

__all__ = ["export", "ExportReport", "c_identifier"]

_MATH = ("sqrt", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "exp", "log",
         "log10", "log1p", "expm1", "pow", "fabs", "floor", "ceil", "fmod", "fmin", "fmax", "copysign", "erf",
         "round", "trunc", "hypot", "cbrt", "asinh", "acosh", "atanh")
_FLOAT_LITERAL = re.compile(r"(?<![\w.])((?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)(?![\w.])")
_OPTION_NAMES = ("MAX_ITER", "GTOL", "XTOL", "LAMBDA0", "METRIC", "MEMORY", "FIRST_STEP", "MAX_BACKTRACKS",
                 "ON_FAILURE", "MAX_HALVINGS", "MAX_SPEED", "SHRINK", "RTOL", "MAX_STEP", "RESIDUAL_TOL", "STALL")
_OPTION_DOCS = {
    "MAX_ITER": "solver iterations per step (the worst-case time bound)",
    "GTOL": "converged when the gradient infinity norm is below this",
    "XTOL": "converged when a step's relative change is below this",
    "LAMBDA0": "initial Levenberg-Marquardt damping",
    "METRIC": "1: damp with the problem's metric (mass matrix)",
    "MEMORY": "L-BFGS pairs (must not exceed the exported value: the workspace is sized for it)",
    "FIRST_STEP": "L-BFGS first trial step length",
    "MAX_BACKTRACKS": "line-search halvings",
    "ON_FAILURE": "0 stop, 1 continue: what step() reports for a step unconverged after its halvings",
    "MAX_HALVINGS": "retries of an unconverged step as two halves (must not exceed the exported value)",
    "MAX_SPEED": "a state with a speed above this counts as diverged (rollouts)",
    "SHRINK": "damping increase factor of a rejected trial",
    "RTOL": "least squares: a stop counts as converged only with the residual below this",
    "MAX_STEP": "largest step of one iteration (infinity norm)",
    "RESIDUAL_TOL": "least squares: converged when the weighted residual is below this",
    "STALL": "stop after this many iterations without progress (0: off)",
}


def c_identifier(name: str) -> str:
    """``name`` as a C identifier: characters outside ``[A-Za-z0-9_]`` become ``_``, a leading digit gets ``m_``,
    lower case."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", str(name)).lower()
    if not s or s[0].isdigit():
        s = "m_" + s
    return s


@dataclasses.dataclass
class ExportReport:
    """What :func:`export` wrote.

    Attributes:
        directory: the output directory.
        name: the library's C name (sanitised); ``requested`` the name asked for.
        precision: ``"double"`` or ``"float"``.
        files: the files written.
        workspace_bytes: ``sizeof`` the workspace struct on a target with 4-byte ``int`` (float) or 8-byte
            indices (double).
        source_bytes: size of ``<name>.c``.
        sizes: ``nq``, ``nv``, ``ns``, ``nu``, ``nx`` and the work array lengths.
        instructions: CasADi instruction counts of the exported kernels.
    """

    directory: Path
    name: str
    requested: str
    precision: str
    files: list[Path]
    workspace_bytes: int
    source_bytes: int
    sizes: dict
    instructions: dict

    def __str__(self) -> str:
        renamed = f" (the requested name {self.requested!r} sanitised to {self.name!r})" \
            if self.name != self.requested else ""
        return (f"exported {self.name}{renamed} ({self.precision}) to {self.directory}: "
                f"{', '.join(p.name for p in self.files)}; workspace {self.workspace_bytes} bytes, source "
                f"{self.source_bytes / 1024:.0f} KiB, {sum(self.instructions.values())} kernel instructions")


def _float_literal(m: re.Match) -> str:
    """A floating literal as a float one; magnitudes outside float's range (the generated code's 1e300 and
    1e-300 sentinels) clamped to the largest finite / smallest normal float."""
    v = float(m.group(1))
    if v > 3.4028234e38:
        return "3.40282347e+38f"
    if 0.0 < v < 1.1754944e-38:
        return "1.17549435e-38f"
    return m.group(1) + "f"


def _single_precision(text: str) -> str:
    """Every floating literal with an ``f`` suffix, the math functions in their float versions."""
    text = _FLOAT_LITERAL.sub(_float_literal, text)
    text = re.sub(r"(?<![\w.])(" + "|".join(_MATH) + r")\s*\(", lambda m: m.group(1) + "f(", text)
    return text.replace("INFINITY", "HUGE_VALF")


def _prefixed(text: str, name: str) -> str:
    """The driver's and kernels' ``pbf_`` / ``pbfk_`` symbols prefixed with ``<name>_``."""
    return re.sub(r"\b(pbfk?_)", name + r"_\1", text)


def export(sim, out_dir, *, precision: str = "double", name: str | None = None, force: bool = False,
           q0=None, qd0=None, steps: int = 100) -> ExportReport:
    """Write ``sim``'s step as a standalone C99 library into ``out_dir`` (module docstring).

    Args:
        sim: a :class:`~pbframework.simulate.Simulator` (its integrator, forces, solver and options, dt).
        out_dir: the directory to write (created; refused if it exists and is not empty, unless ``force``).
        precision: ``"double"`` or ``"float"``.
        name: the C name (default: the model's name), sanitised to a C identifier.
        force: overwrite a non-empty ``out_dir``.
        q0, qd0: the example's initial state (default: the model's zeros; ``nq`` / ``nv`` values).
        steps: the example's number of steps.

    Raises:
        StepError: an integrator that cannot be exported, a bad precision, a non-empty directory.
    """
    from .codegen.step_library import emit_step_library
    from .codegen.step_runner import CRunner

    if precision not in ("double", "float"):
        raise StepError(f"export: precision must be 'double' or 'float', got {precision!r}")
    from .registry import get_plugin

    allowed = get_plugin("integrator", sim.integrator).meta.get("backends")
    if allowed is not None and "c" not in allowed:
        raise StepError(f"export: integrator {sim.integrator!r} cannot be exported to C (its step is "
                        f"{'a projected-gradient loop over qpOASES QPs' if 'nmdp' in sim.integrator else 'a qpOASES QP'}, "
                        f"which CasADi does not code-generate); export pbad, pbfd or a Newton-Euler integrator")
    requested = str(name if name is not None else sim.model.name)
    cname = c_identifier(requested)
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force:
            raise StepError(f"export: {out} exists and is not empty; choose a new directory or pass force=True "
                            f"(pbf export --overwrite)")
        if out.is_dir():
            shutil.rmtree(out)
        else:
            out.unlink()
    pb = sim.problem
    q0 = np.zeros(sim.model.nq) if q0 is None else sim.model.check_state(q0, "q0")
    qd0 = np.zeros(sim.model.nv) if qd0 is None else sim.model.check_velocity(qd0, "qd0")
    options = dataclasses.asdict(sim.solver.options) if sim.solver is not None else {}
    runner = CRunner(pb, sim.solver_name or "lm", options,
                     model=sim.model, on_failure="continue" if sim.on_failure.value == "continue" else "stop",
                     max_halvings=sim.max_halvings, max_speed=sim.max_speed, real=precision)
    source, plan = emit_step_library(pb, runner.solver, plan=runner.plan, host=False, name=cname)
    body = _prefixed(source.text, cname)
    if precision == "float":
        body = "#define PBF_FLOAT 1\n#define casadi_int int\n" + _single_precision(body)
    n_real, n_int = runner.work_size
    NAME = cname.upper()
    real = "float" if precision == "float" else "double"
    integer = "int" if precision == "float" else "long long int"
    opt = [float(v) for v in runner.opt_vector]
    lit = (lambda v: (repr(v) if np.isfinite(v) else ("HUGE_VALF" if real == "float" else "HUGE_VAL"))
           + ("f" if real == "float" and np.isfinite(v) else ""))
    header = _header(cname, NAME, real, integer, sim, pb, n_real, n_int)
    body += _wrapper(cname, NAME, real, integer, opt, lit)
    out.mkdir(parents=True, exist_ok=True)
    files = {f"{cname}.h": header, f"{cname}.c": f'#include "{cname}.h"\n' + body,
             "CMakeLists.txt": _cmake(cname), "example_main.c": _example(cname, NAME, real, q0, qd0, steps, sim),
             "README.md": _readme(cname, NAME, real, sim, pb)}
    written = []
    for fname, text in files.items():
        p = out / fname
        p.write_text(text)
        written.append(p)
    isz = 4 if precision == "float" else 8
    rsz = 4 if precision == "float" else 8
    return ExportReport(out, cname, requested, precision, written,
                        rsz * (n_real + len(opt)) + isz * n_int, len(files[f"{cname}.c"]),
                        {"nq": pb.nq, "nv": pb.nv, "ns": pb.ns, "nu": pb.nu, "nx": pb.nx, "work_reals": n_real,
                         "work_ints": n_int}, dict(plan.instructions))


def _header(c: str, N: str, real: str, integer: str, sim, pb, n_real: int, n_int: int) -> str:
    opts = "\n".join(f"  {N}_OPT_{k} = {i},{' ' * max(1, 16 - len(k))}/* {_OPTION_DOCS[k]} */"
                     for i, k in enumerate(_OPTION_NAMES))
    return f"""/* {c}: one step of {pb.describe()} on model {sim.model.name!r}, dt = {sim.config.dt!r} s by default.
 * Generated by pbframework.export; standalone C99, no heap, no mutable globals, no I/O.
 *
 * Usage:
 *   {c}_workspace ws;                      (caller-owned: static, stack or inside your own struct)
 *   {c}_defaults(&ws);                     the options the Python side uses (edit ws.opt[...] after)
 *   {c}_init(&ws, q0, qd0, t0, dt, u, s);  the integrator's first state s ({N}_NS values)
 *   for (;;) {{ status = {c}_step(&ws, s, t, dt, u, s_next, &iterations); ... }}
 *
 * The state s holds q (the first {N}_NQ values), the velocity estimate (the next {N}_NV) and the integrator's
 * history; u holds {N}_NU per-step inputs (NULL when {N}_NU is 0). Worst-case time per step: at most
 * opt[{N}_OPT_MAX_ITER] solver iterations per solve, and an unconverged step is retried as two halves up to
 * opt[{N}_OPT_MAX_HALVINGS] levels deep.
 */
#ifndef {N}_H
#define {N}_H

#ifdef __cplusplus
extern "C" {{
#endif

typedef {real} {c}_real;
typedef {integer} {c}_int;

#define {N}_NQ {pb.nq}
#define {N}_NV {pb.nv}
#define {N}_NS {pb.ns}
#define {N}_NU {pb.nu}
#define {N}_NOPT {len(_OPTION_NAMES)}
#define {N}_WORK_REALS {n_real}
#define {N}_WORK_INTS {n_int}

/* option indices into ws.opt */
enum {{
{opts}
}};

/* status codes of {c}_step */
enum {{ {N}_OK = 0, {N}_UNCONVERGED = 1, {N}_BAD_OPTIONS = 2 }};

typedef struct {{
  {c}_real opt[{N}_NOPT];
  {c}_real w[{N}_WORK_REALS];
  {c}_int iw[{N}_WORK_INTS];
}} {c}_workspace;

/* The options the Python side uses (the Simulator this was exported from). */
void {c}_defaults({c}_workspace* ws);

/* The integrator's first state s0 ({N}_NS values) from configuration q0 ({N}_NQ) and velocity qd0 ({N}_NV)
   at time t0 for steps of dt. Returns 0, or {N}_BAD_OPTIONS. */
int {c}_init({c}_workspace* ws, const {c}_real* q0, const {c}_real* qd0, {c}_real t0, {c}_real dt,
             const {c}_real* u, {c}_real* s0);

/* One step from state s at time t: s_next ({N}_NS values). *iterations (may be NULL) receives the solver
   iterations summed over retries. Returns {N}_OK, {N}_UNCONVERGED (still unconverged after its halvings;
   s_next is the last attempt) or {N}_BAD_OPTIONS (MEMORY or MAX_HALVINGS above the exported sizes). */
int {c}_step({c}_workspace* ws, const {c}_real* s, {c}_real t, {c}_real dt, const {c}_real* u, {c}_real* s_next,
             {c}_int* iterations);

#ifdef __cplusplus
}}
#endif
#endif
"""


def _wrapper(c: str, N: str, real: str, integer: str, opt: list[float], lit) -> str:
    values = ", ".join(lit(v) for v in opt)
    return f"""

/* ---- the exported API ({c}.h) ---- */
static const {c}_real {c}_default_opt[{N}_NOPT] = {{{values}}};

void {c}_defaults({c}_workspace* ws) {{
  int k;
  for (k = 0; k < {N}_NOPT; ++k) ws->opt[k] = {c}_default_opt[k];
}}

static int {c}_options_fit(const {c}_workspace* ws) {{
  return ws->opt[{N}_OPT_MEMORY] <= {c}_default_opt[{N}_OPT_MEMORY]
      && ws->opt[{N}_OPT_MAX_HALVINGS] <= {c}_default_opt[{N}_OPT_MAX_HALVINGS];
}}

int {c}_init({c}_workspace* ws, const {c}_real* q0, const {c}_real* qd0, {c}_real t0, {c}_real dt,
             const {c}_real* u, {c}_real* s0) {{
  if (!{c}_options_fit(ws)) return {N}_BAD_OPTIONS;
  return {c}_pbf_init(ws->opt, q0, qd0, t0, dt, u, s0, ws->w, ws->iw);
}}

int {c}_step({c}_workspace* ws, const {c}_real* s, {c}_real t, {c}_real dt, const {c}_real* u, {c}_real* s_next,
             {c}_int* iterations) {{
  {c}_int st[PBF_NST];
  {c}_real gn[PBF_NSR];
  int stop;
  if (!{c}_options_fit(ws)) return {N}_BAD_OPTIONS;
  stop = {c}_pbf_step(ws->opt, s, t, dt, u, s_next, st, gn, ws->w, ws->iw);
  if (iterations) *iterations = st[PBF_ST_ITER];
  return (stop || !st[PBF_ST_CONV]) ? {N}_UNCONVERGED : {N}_OK;
}}
"""


def _cmake(c: str) -> str:
    return f"""cmake_minimum_required(VERSION 3.10)
project({c} C)
set(CMAKE_C_STANDARD 99)
set(CMAKE_C_STANDARD_REQUIRED ON)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()
add_library({c} STATIC {c}.c)
target_include_directories({c} PUBLIC ${{CMAKE_CURRENT_SOURCE_DIR}})
find_library(MATH_LIBRARY m)
if(MATH_LIBRARY)
  target_link_libraries({c} PUBLIC ${{MATH_LIBRARY}})
endif()
add_executable(example example_main.c)
target_link_libraries(example PRIVATE {c})
"""


def _example(c: str, N: str, real: str, q0, qd0, steps: int, sim) -> str:
    fmt = "%.9g" if real == "float" else "%.17g"
    suffix = "f" if real == "float" else ""
    arr = (lambda a: ", ".join(repr(float(v)) + suffix for v in a) or "0")
    dt = repr(float(sim.config.dt)) + suffix
    return f"""/* A rollout of {steps} steps from the exported start, printing t, q and the velocity estimate per step; the same rollout on a
   second workspace, interleaved, must agree bit for bit. Build: cmake -S . -B build && cmake --build build */
#include <stdio.h>
#include <string.h>
#include "{c}.h"

static {c}_workspace ws_a, ws_b;   /* static: workspaces can be large for a small stack */

int main(void) {{
  const {c}_real q0[{N}_NQ] = {{{arr(q0)}}};
  const {c}_real qd0[{N}_NV > 0 ? {N}_NV : 1] = {{{arr(qd0)}}};
  const {c}_real* u = 0;              /* {N}_NU = {sim.problem.nu} per-step inputs: NULL means zeros */
  {c}_real s[{N}_NS], sn[{N}_NS], s2[{N}_NS], sn2[{N}_NS], dt = {dt};
  {c}_int it = 0, it2 = 0;
  int k, j, same = 1, status = 0;
  {c}_defaults(&ws_a);
  {c}_defaults(&ws_b);
  if ({c}_init(&ws_a, q0, qd0, 0, dt, u, s) || {c}_init(&ws_b, q0, qd0, 0, dt, u, s2)) return 2;
  printf("t");
  for (j = 0; j < {N}_NQ; ++j) printf(",q%d", j);
  for (j = 0; j < {N}_NV; ++j) printf(",v%d", j);
  printf("\\n");
  for (k = 0; k <= {steps}; ++k) {{
    printf("{fmt}", (double)(k * dt));
    for (j = 0; j < {N}_NQ + {N}_NV; ++j) printf(",{fmt}", (double)s[j]);
    printf("\\n");
    if (k == {steps}) break;
    status |= {c}_step(&ws_a, s, k * dt, dt, u, sn, &it);
    status |= {c}_step(&ws_b, s2, k * dt, dt, u, sn2, &it2);
    if (memcmp(sn, sn2, sizeof sn) != 0 || it != it2) same = 0;
    memcpy(s, sn, sizeof s);
    memcpy(s2, sn2, sizeof s2);
  }}
  fprintf(stderr, "workspaces agree: %s; status %d\\n", same ? "yes" : "NO", status);
  return same ? 0 : 1;
}}
"""


def _readme(c: str, N: str, real: str, sim, pb) -> str:
    return f"""# {c}

One step of `{pb.describe()}` for the model `{sim.model.name}` ({real} precision), exported by pbframework.

    cmake -S . -B build && cmake --build build && ./build/example

API (`{c}.h`): `{c}_workspace` (caller-owned, fixed size: `{N}_WORK_REALS` reals and `{N}_WORK_INTS` integers plus
the options), `{c}_defaults`, `{c}_init` (the integrator's first state from `q0`, `qd0`), `{c}_step` (one step;
returns `{N}_OK`, `{N}_UNCONVERGED` or `{N}_BAD_OPTIONS`). The options are named in the header (`{N}_OPT_*`)
with the values the Python Simulator uses. The library allocates nothing, keeps no global state and does no
I/O; each workspace is independent. Cross-compile `{c}.c` alone for a microcontroller, e.g. Cortex-M4F:
`arm-none-eabi-gcc -std=c99 -mcpu=cortex-m4 -mfpu=fpv4-sp-d16 -mfloat-abi=hard -Os -c {c}.c`.
"""
