"""Emit the C source of a step problem's whole solver loop (pure: no compiler, no files written).

:func:`emit_step_library` turns a :class:`~pbframework.step.StepProblem` and a solver choice into one C99
translation unit (a :class:`~pbframework.codegen.emit.CSource`):

* **kernels** ``pbfk_*``: the problem's CasADi functions (``init``, ``params``, ``guess``, ``advance``), the
  solver's derivative functions and the problem's metric, each with CasADi's calling convention
  ``int f(const casadi_real** arg, casadi_real** res, casadi_int* iw, casadi_real* w, int mem)``;
* **the driver** (``c_src/``: :data:`DRIVER_PARTS`, in that order): Levenberg-Marquardt (``lm``, ``jtj_lm``) with a dense
  Cholesky, or ``lbfgs``, mirroring ``pbframework.plugins.solvers`` test for test, the Simulator's failure
  policy (halving retries, then stop / continue) and a whole rollout in one call (``pbf_rollout``); no malloc, caller-owned
  work arrays (``pbf_work_size``), ``casadi_real`` double or, with ``-DPBF_FLOAT``, float;
* with ``adaptive=True`` (plan option), ``c_src/pbf_adaptive.c``: adaptive step-size control
  (``pbf_rollout_adaptive``, :mod:`pbframework.adaptive` decision for decision);
* with ``host=True`` only, ``c_src/pbf_host.c``: ``pbf_rollout_batch`` on POSIX threads.

Keeping compile time gentle
---------------------------
The kernels are emitted from CasADi's SX instruction list by :func:`emit_sx_kernel`: straight-line code
split into functions of ``chunk`` instructions that keep their values in local variables and exchange
only the live ones through the work array, so gcc's cost grows linearly with the instruction count
(one huge function with thousands of locals is superlinear at ``-O1``). Two more measures keep the
instruction count itself down:

* *hoisting*: every sub-expression of the per-iteration kernels that depends on the step's parameters
  only (the poses of the known configurations, their velocity terms, ...)
  is computed once per step by ``pbfk_pre`` (``casadi.extract_parametric``), not once per iteration;
* *directional derivatives* (``derivatives="directional"``): instead of a flattened Jacobian or Hessian
  (O(N^2) instructions for an N-link chain), the kernel is one forward-mode sweep for ``directions``
  seed columns (O(N) instructions) which the driver calls in a loop to assemble the dense matrix: the same
  O(N^2) arithmetic, but code that grows linearly. ``"full"`` emits the problem's own
  ``hessian`` / ``residual_jacobian`` (identical graphs to the CasADi-VM path); ``"auto"`` picks ``full``
  for small problems.

The problem's metric (PBAD: the mass matrix at the step start; the weight ``W = blockdiag(M)^-1`` of a
least-squares residual, or LM damping) is factorised once per step in C. Given as a flattened matrix
function it is O(N^2) instructions (CRBA); when the caller passes the ``model`` it is replaced by ``M(q) V``
from inverse dynamics (O(N) instructions, called for one column block at a time), after a numeric check
that the problem's metric is the mass matrix at the step's start configuration.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import casadi as ca
import numpy as np

from .emit import CSource, emit_c

__all__ = ["DriverError", "KernelPlan", "emit_sx_kernel", "plan_kernels", "emit_step_library", "SOLVERS",
           "C_SRC"]

C_SRC = Path(__file__).resolve().parent / "c_src"
"""Folder of the hand-written C parts (driver and host threads)."""
DRIVER_PARTS = ("pbf_workspace.c", "pbf_linalg.c", "pbf_solvers.c", "pbf_rollout.c")
"""The driver's files, by job: options and the caller-owned workspace; dense linear algebra; the solvers;
steps, rollouts and the exported entry points (``pbf_adaptive.c`` and ``pbf_host.c`` follow when used)."""

SOLVERS = ("lm", "jtj_lm", "lbfgs")
"""Solvers the C driver implements (plus explicit problems, which need none)."""

_SOLVER_ID = {"": 0, "lm": 1, "jtj_lm": 2, "lbfgs": 3}
_KIND_ID = {"explicit": 0, "minimize": 1, "least_squares": 2}


class DriverError(ValueError):
    """A step problem or option the C driver cannot handle; the message says what and what to do."""


# ======================================================================================================
# SX instruction list -> chunked C
# ======================================================================================================

_UNARY = {
    ca.OP_ASSIGN: "{0}", ca.OP_NEG: "-{0}", ca.OP_EXP: "exp({0})", ca.OP_LOG: "log({0})",
    ca.OP_SQRT: "sqrt({0})", ca.OP_SQ: "{0}*{0}", ca.OP_TWICE: "2.*{0}", ca.OP_SIN: "sin({0})",
    ca.OP_COS: "cos({0})", ca.OP_TAN: "tan({0})", ca.OP_ASIN: "asin({0})", ca.OP_ACOS: "acos({0})",
    ca.OP_ATAN: "atan({0})", ca.OP_NOT: "!{0}", ca.OP_FLOOR: "floor({0})", ca.OP_CEIL: "ceil({0})",
    ca.OP_FABS: "fabs({0})", ca.OP_SIGN: "({0}<0?-1.:({0}>0?1.:{0}))", ca.OP_ERF: "erf({0})",
    ca.OP_INV: "1./{0}", ca.OP_SINH: "sinh({0})", ca.OP_COSH: "cosh({0})", ca.OP_TANH: "tanh({0})",
    ca.OP_ASINH: "asinh({0})", ca.OP_ACOSH: "acosh({0})", ca.OP_ATANH: "atanh({0})",
    ca.OP_LOG1P: "log1p({0})", ca.OP_EXPM1: "expm1({0})",
}
_BINARY = {
    ca.OP_ADD: "{0}+{1}", ca.OP_SUB: "{0}-{1}", ca.OP_MUL: "{0}*{1}", ca.OP_DIV: "{0}/{1}",
    ca.OP_POW: "pow({0},{1})", ca.OP_CONSTPOW: "pow({0},{1})", ca.OP_LT: "{0}<{1}", ca.OP_LE: "{0}<={1}",
    ca.OP_EQ: "{0}=={1}", ca.OP_NE: "{0}!={1}", ca.OP_AND: "{0}&&{1}", ca.OP_OR: "{0}||{1}",
    ca.OP_FMOD: "fmod({0},{1})", ca.OP_COPYSIGN: "copysign({0},{1})", ca.OP_IF_ELSE_ZERO: "({0}?{1}:0)",
    ca.OP_FMIN: "fmin({0},{1})", ca.OP_FMAX: "fmax({0},{1})", ca.OP_ATAN2: "atan2({0},{1})",
    ca.OP_HYPOT: "hypot({0},{1})", ca.OP_REMAINDER: "remainder({0},{1})",
}
_OP_NAMES = {getattr(ca, k): k[3:].lower() for k in dir(ca) if k.startswith("OP_")}


def _literal(v: float) -> str:
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    s = repr(float(v))
    return s if ("." in s or "e" in s or "n" in s) else s + "."


def _as_sx(f: ca.Function) -> ca.Function:
    if f.is_a("SXFunction"):
        return f
    try:
        return f.expand()
    except RuntimeError as exc:
        raise DriverError(f"function {f.name()!r} cannot be expanded to SX for C emission ({exc}); write it "
                          f"with SX symbols or without calls to non-SX functions") from None


def emit_sx_kernel(f: ca.Function, name: str, chunk: int = 250, cold: bool = False) -> tuple[str, int]:
    """C text of the SX function ``f`` as a kernel ``name`` (CasADi calling convention).

    The instruction list is split into ``static`` functions of ``chunk`` instructions each; values live in
    local variables inside a chunk and only those used by a later chunk go through the work array ``w``.
    Inputs and outputs are read and written by nonzero index (``arg[i][k]``, ``res[i][k]``; all must be
    non-null, outputs dense in the order of their nonzeros).

    ``cold=True`` marks a kernel called rarely (once per rollout or per step): gcc compiles it without
    optimisation (``#pragma GCC optimize("O0")``, about half the compile time of ``-O1``).

    Returns:
        ``(text, sz_w)``: the C text and the number of ``casadi_real`` the kernel needs in ``w``.

    Raises:
        DriverError: an SX operation without a C equivalent here (the message names it).
    """
    f = _as_sx(f)
    n = f.n_instructions()
    ids = [f.instruction_id(k) for k in range(n)]
    ins = [f.instruction_input(k) for k in range(n)]
    outs = [f.instruction_output(k) for k in range(n)]
    lines: list[str] = []
    reads: list[tuple[int, ...]] = []
    writes: list[int] = []
    for k in range(n):
        op, i, o = ids[k], ins[k], outs[k]
        if op == ca.OP_INPUT:
            lines.append(f"a{o[0]}=arg[{i[0]}][{i[1]}];")
            reads.append(())
            writes.append(o[0])
        elif op == ca.OP_OUTPUT:
            lines.append(f"res[{o[0]}][{o[1]}]=a{i[0]};")
            reads.append((i[0],))
            writes.append(-1)
        elif op == ca.OP_CONST:
            lines.append(f"a{o[0]}={_literal(f.instruction_constant(k))};")
            reads.append(())
            writes.append(o[0])
        elif op in _UNARY:
            lines.append(f"a{o[0]}=" + _UNARY[op].format(f"a{i[0]}") + ";")
            reads.append((i[0],))
            writes.append(o[0])
        elif op in _BINARY:
            lines.append(f"a{o[0]}=" + _BINARY[op].format(f"a{i[0]}", f"a{i[1]}") + ";")
            reads.append((i[0], i[1]))
            writes.append(o[0])
        else:
            raise DriverError(f"function {f.name()!r}: SX operation {_OP_NAMES.get(op, op)!r} has no C "
                              f"translation in pbframework.codegen.step_library (use emitter='casadi')")
    chunk = max(int(chunk), 16)
    bounds = [(c, min(c + chunk, n)) for c in range(0, n, chunk)]
    # liveness across chunks: a slot read in chunk c before being written there is live into c
    live_in, written = [], []
    for a, b in bounds:
        wr, li = set(), set()
        for k in range(a, b):
            for s in reads[k]:
                if s not in wr:
                    li.add(s)
            if writes[k] >= 0:
                wr.add(writes[k])
        live_in.append(li)
        written.append(wr)
    live_out: list[set] = [set() for _ in bounds]
    needed = set()
    for c in range(len(bounds) - 1, -1, -1):
        live_out[c] = written[c] & needed
        needed = (needed - written[c]) | live_in[c]
    parts = []
    for c, (a, b) in enumerate(bounds):
        used = sorted(live_in[c] | written[c])
        body = []
        for j in range(0, len(used), 16):
            body.append("casadi_real " + ", ".join(f"a{s}" for s in used[j:j + 16]) + ";")
        body += [f"a{s}=w[{s}];" for s in sorted(live_in[c])]
        body += lines[a:b]
        body += [f"w[{s}]=a{s};" for s in sorted(live_out[c])]
        parts.append(f"static PBF_NOINLINE void {name}_c{c}(const casadi_real** arg, casadi_real** res, "
                     f"casadi_real* w) {{\n  " + "\n  ".join(body) + "\n  (void)arg; (void)res; (void)w;\n}\n")
    calls = "".join(f"  {name}_c{c}(arg, res, w);\n" for c in range(len(bounds)))
    parts.append(f"static int {name}(const casadi_real** arg, casadi_real** res, casadi_int* iw, casadi_real* w, "
                 f"int mem) {{\n{calls}  (void)arg; (void)res; (void)iw; (void)w; (void)mem;\n  return 0;\n}}\n")
    text = "".join(parts)
    if cold:
        text = f"#ifdef PBF_COLD_BEGIN\nPBF_COLD_BEGIN\n#endif\n{text}#ifdef PBF_COLD_END\nPBF_COLD_END\n#endif\n"
    return f"/* {name}: {n} instructions in {len(bounds)} chunks{' (cold)' if cold else ''} */\n" + text, max(f.sz_w(), 1)


# ======================================================================================================
# Which kernels a solver needs
# ======================================================================================================

@dataclass
class KernelPlan:
    """The kernels of one step library and the driver's configuration.

    Attributes:
        solver: ``"lm"``, ``"jtj_lm"``, ``"lbfgs"`` or ``""`` (explicit problem).
        derivatives: ``"full"`` or ``"directional"`` (``""`` for lbfgs and explicit problems).
        directions: seed columns per directional kernel call.
        metric: ``"none"``, ``"full"`` (the problem's metric function) or ``"directional"`` (``M V`` from
            inverse dynamics).
        metric_directions: seed columns per ``pbfk_mv`` call.
        kernels: the ``casadi.Function`` objects, named ``pbfk_*``.
        sizes: ``nq, nx, ns, np, nu, nr, nz``.
        kind: the problem kind's value.
        damp: the metric damps ``lm`` / starts ``lbfgs`` (the solver's ``metric`` option decides at run time).
        weight: least squares with a metric: the driver weights the residual and its Jacobian by
            ``W = blockdiag(M)^-1`` (one Cholesky factorisation per step).
        instructions: SX instruction count per kernel.
    """

    solver: str
    derivatives: str
    directions: int
    metric: str
    metric_directions: int
    kernels: list
    sizes: dict
    kind: str
    damp: bool = False
    weight: bool = False
    instructions: dict = field(default_factory=dict)

    def describe(self) -> str:
        tot = sum(self.instructions.values())
        return (f"solver {self.solver or 'none'}, derivatives {self.derivatives or '-'}"
                + (f" ({self.directions} per call)" if self.derivatives == "directional" else "")
                + f", metric {self.metric}" + (" (residual weight)" if self.weight else "")
                + f", {tot} instructions in {len(self.kernels)} kernels")


def _rename(f: ca.Function, name: str) -> ca.Function:
    f = _as_sx(f)
    ins = f.sx_in()
    outs = f.call(ins)
    return ca.Function(name, ins, [ca.densify(o) for o in outs], f.name_in(), f.name_out())


def _mass_matrix_times(model, nq: int, B: int):
    """``(q, V) -> M(q) V`` from inverse dynamics without gravity (O(N) instructions per column)."""
    from pbframework.dynamics import rnea
    from pbframework.step import zero_gravity_model

    f = rnea(zero_gravity_model(model))
    q, V = ca.SX.sym("q", nq), ca.SX.sym("V", model.nv, B)
    zero = ca.SX.zeros(model.nv)
    cols = [f(q, zero, V[:, j]) for j in range(B)]
    return q, V, ca.horzcat(*cols)


def _metric_is_mass_matrix(problem, model) -> bool:
    from pbframework.dynamics import crba

    try:
        rng = np.random.default_rng(7)
        p = rng.uniform(-1.0, 1.0, problem.np)
        p[problem.ns] = 0.01                               # dt
        M1 = np.asarray(problem.metric(p))
        M2 = np.asarray(crba(model)(p[:problem.nq]))
        return M1.shape == M2.shape and np.allclose(M1, M2, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(M2).max()))
    except Exception:  # noqa: BLE001 - any mismatch means: emit the metric as given
        return False


def _kernel(name: str, outs: list, ins: list) -> ca.Function:
    return ca.Function(name, ins, [ca.densify(o) for o in outs])


def plan_kernels(problem, solver: str, *, derivatives: str = "auto", directions: int | None = None,
                 metric: str = "auto", model=None, full_max_instructions: int = 40000,
                 full_max_nx: int = 64, hoist: bool = True, adaptive: bool = False) -> KernelPlan:
    """Build the ``pbfk_*`` kernels (symbolic work only) for ``problem`` solved by ``solver``.

    What each solver evaluates (the same as :func:`pbframework.step.evaluator` in Python):

    ============  =====================================  ===============================================
    solver        minimize problem                       least-squares problem (``W`` from the metric)
    ============  =====================================  ===============================================
    ``lm``        f, g, exact H                          ``Wr``, ``WJ``; H = (WJ)^T WJ + sum_k (W Wr)_k H_k
    ``jtj_lm``    --                                     ``Wr``, ``WJ``; H = (WJ)^T WJ
    ``lbfgs``     f, g                                   f = |Wr|^2 / 2, g = J^T W Wr
    ============  =====================================  ===============================================

    ``W = blockdiag(M_k)^-1`` when the problem has a metric (its Cholesky factor is computed once per step
    and applied in C), the identity otherwise. Minimize problems use the metric, when the solver's
    ``metric`` option asks for it, as LM damping / the L-BFGS initial inverse Hessian.

    Args:
        problem: the :class:`~pbframework.step.StepProblem`.
        solver: ``"lm"``, ``"jtj_lm"`` or ``"lbfgs"`` (ignored for explicit problems).
        derivatives: ``"full"`` (the problem's own flattened ``hessian`` / ``residual_jacobian`` /
            ``residual_hessian``, the graphs of the CasADi-VM path), ``"directional"`` (forward-mode kernels
            for ``directions`` seed columns, called in a loop: O(N) code for an N-link chain instead of
            O(N^2)) or ``"auto"`` (full when ``nx <= full_max_nx`` and the full kernels have at most
            ``full_max_instructions`` instructions).
        directions: seed columns per directional call (default: 4 up to nx = 64, else 2).
        metric: ``"auto"``, ``"full"``, ``"directional"`` (``M V`` from inverse dynamics; needs ``model``)
            or ``"none"`` (no damping metric; a least-squares weight is always kept).
        model: the problem's :class:`~pbframework.model.ArticulatedBody` (optional; enables the
            directional metric when the problem's metric is large and is the mass matrix).
        hoist: compute parameter-only sub-expressions once per step (``pbfk_pre``).
        adaptive: also emit the problem's local error estimate (``pbfk_err``) and dense output
            (``pbfk_dense``) for the adaptive loop ``pbf_rollout_adaptive`` (``c_src/pbf_adaptive.c``).

    Raises:
        DriverError: a solver the driver does not implement, or one that cannot solve this problem kind.
    """
    from pbframework.step import ProblemKind

    kind = problem.kind
    nq, nx, ns, np_, nu = problem.nq, problem.nx, problem.ns, problem.np, problem.nu
    nv = problem.nv
    if kind is ProblemKind.EXPLICIT or nx == 0:
        solver = ""
    elif solver not in SOLVERS:
        raise DriverError(f"the C backend implements the solvers {', '.join(SOLVERS)}; got {solver!r} "
                          f"(use backend='casadi' for other solvers)")
    if solver == "jtj_lm" and kind is not ProblemKind.LEAST_SQUARES:
        raise DriverError(f"solver 'jtj_lm' needs a least-squares problem; {problem.integrator} built a "
                          f"{kind.value} problem (use objective='residual' or solver='lm')")
    if derivatives not in ("auto", "full", "directional"):
        raise DriverError(f"derivatives must be 'auto', 'full' or 'directional', got {derivatives!r}")
    if metric not in ("auto", "full", "directional", "none"):
        raise DriverError(f"metric must be 'auto', 'full', 'directional' or 'none', got {metric!r}")
    kernels = [_rename(problem.init, "pbfk_init"), _rename(problem.params, "pbfk_params"),
               _rename(problem.advance, "pbfk_advance")]
    if problem.has_start:
        kernels.append(_rename(problem.start_acceleration, "pbfk_start"))
    if nx:
        kernels.append(_rename(problem.guess, "pbfk_guess"))
    restart = getattr(problem, "restart", None)
    if restart is not None:
        kernels.append(_rename(restart, "pbfk_restart"))
        if getattr(problem, "kinetic", None) is not None:
            kernels.append(_rename(problem.kinetic, "pbfk_kinetic"))
    if adaptive:
        if problem.error_estimate is None or problem.dense is None:
            raise DriverError(f"{problem.integrator}: adaptive steps need the problem's error_estimate and dense "
                              f"functions (pbad has them at every order)")
        kernels += [_rename(problem.error_estimate, "pbfk_err"), _rename(problem.dense, "pbfk_dense")]
    lsq = kind is ProblemKind.LEAST_SQUARES
    has_metric = problem.metric is not None and nv > 0 and nx % nv == 0
    weight = bool(solver) and lsq and problem.metric is not None
    damp = bool(solver) and not lsq and solver in ("lm", "lbfgs") and has_metric and metric != "none"
    x, p = ca.SX.sym("x", nx), ca.SX.sym("p", np_)
    B = int(directions) if directions else (4 if nx <= 64 else 2)
    B = max(1, min(B, max(nx, 1)))
    nr = 0
    mode = ""
    specs: list[tuple[str, list, list]] = []          # (name, outputs, extra inputs after (x, z))
    if solver:
        if lsq:
            nr = int(problem.residual.size1_out(0))
            if weight and nr % nv:
                raise DriverError(f"{problem.integrator}: residual length {nr} is not a multiple of nv={nv}")
        V = ca.SX.sym("V", nx, B)
        c = ca.SX.sym("c", nr)
        full: list[tuple[str, ca.Function, list]] = []
        if solver in ("lm", "jtj_lm"):
            if not lsq:
                full = [("pbfk_fgh", problem.hessian, [])]
            else:
                full = [("pbfk_rj", problem.residual_jacobian, [])]
                if solver == "lm":
                    full.append(("pbfk_rh", problem.residual_hessian, [c]))
        use_full = bool(full) and derivatives != "directional"
        if use_full and derivatives == "auto":
            use_full = nx <= full_max_nx and sum(f.n_instructions() for _, f, _ in full) <= full_max_instructions
        if solver == "lbfgs":
            if not lsq:
                f, g = problem.gradient.call([x, p])
                specs = [("pbfk_fg", [f, g], [])]
            else:
                r = problem.residual(x, p)
                specs = [("pbfk_r", [r], []), ("pbfk_vjp", [ca.jtimes(r, x, c, True)], [c])]
        elif use_full:
            mode = "full"
            specs = [(name, fn.call([x, p] + extra), extra) for name, fn, extra in full]
        else:
            mode = "directional"
            if not lsq:
                f, g = problem.gradient.call([x, p])
                specs = [("pbfk_fg", [f, g], []), ("pbfk_hv", [ca.jtimes(g, x, V)], [V])]
            else:
                r = problem.residual(x, p)
                specs = [("pbfk_r", [r], []), ("pbfk_jv", [ca.jtimes(r, x, V)], [V])]
                if solver == "lm":
                    specs.append(("pbfk_rhv", [ca.jtimes(ca.jtimes(r, x, c, True), x, V)], [c, V]))
        # hoist the parameter-only parts of every per-iteration kernel into pbfk_pre(p) -> z
        flat = [e for _, outs, _ in specs for e in outs]
        if hoist:
            ret, syms, par = ca.extract_parametric(flat, p, {"extract_trivial": True})
            z = ca.veccat(*syms) if syms else ca.SX(0, 1)
            zexpr = ca.veccat(*par) if par else ca.SX(0, 1)
        else:
            ret, z, zexpr = flat, ca.SX.sym("z", np_), p
        k = 0
        for name, outs, extra in specs:
            kernels.append(_kernel(name, ret[k:k + len(outs)], [x, z] + extra))
            k += len(outs)
        kernels.append(_kernel("pbfk_pre", [zexpr], [p]))
        nz = int(z.numel())
    else:
        nz = 0
        kernels.append(_kernel("pbfk_pre", [ca.SX(0, 1)], [p]))
    # the metric: residual weight (least squares) or damping / initial inverse Hessian (minimize)
    mkind, BM = "none", 1
    if weight or damp:
        mkind = "full"
        big = problem.metric.n_instructions() > 20000
        if metric == "directional" or (metric == "auto" and big and model is not None):
            if model is None:
                raise DriverError("metric='directional' needs model= (the ArticulatedBody) to build M(q) V "
                                  "from inverse dynamics")
            if _metric_is_mass_matrix(problem, model):
                mkind = "directional"
            elif metric == "directional":
                raise DriverError("metric='directional': the problem's metric is not the mass matrix at the "
                                  "step start, so it cannot be rebuilt from inverse dynamics (use metric='full')")
        if mkind == "full":
            kernels.append(_rename(problem.metric, "pbfk_metric"))
        else:
            BM = 4 if nv >= 4 else max(nv, 1)
            q, VM, MV = _mass_matrix_times(model, nq, BM)
            pm = ca.SX.sym("p", np_)
            kernels.append(_kernel("pbfk_mv", [ca.substitute(MV, q, pm[:nq])], [pm, VM]))
    sizes = dict(nq=nq, nv=nv, nx=nx, ns=ns, np=np_, nu=nu, nr=nr, nz=nz)
    plan = KernelPlan(solver=solver, derivatives=mode, directions=B, metric=mkind, metric_directions=BM,
                      kernels=kernels, sizes=sizes, kind=kind.value, damp=damp, weight=weight)
    plan.instructions = {f.name(): f.n_instructions() for f in kernels}
    return plan


# ======================================================================================================
# The translation unit
# ======================================================================================================

_PRELUDE = """/* pbframework step library: {describe}
   generated by pbframework.codegen.step_library; compile with -DPBF_FLOAT for single precision. */
#include <math.h>
#ifdef PBF_FLOAT
#ifndef casadi_real
#define casadi_real float
#endif
#endif
#ifndef casadi_real
#define casadi_real double
#endif
#ifndef casadi_int
#define casadi_int long long int
#endif
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(PBF_NO_COLD)
/* kernels called once per rollout or per step: compiled without optimisation (compile time) */
#define PBF_COLD_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\\"O0\\")")
#define PBF_COLD_END _Pragma("GCC pop_options")
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"
#define PBF_NOINLINE __attribute__((noinline))
#ifndef PBF_EXPORT
#define PBF_EXPORT __attribute__((visibility("default")))
#endif
#else
#define PBF_NOINLINE
#ifndef PBF_EXPORT
#define PBF_EXPORT
#endif
#endif
"""


def _read_c(name: str) -> str:
    return (C_SRC / name).read_text()


_COLD = ("pbfk_init", "pbfk_start")
_COLD_IF_LARGE = ("pbfk_guess", "pbfk_pre", "pbfk_params", "pbfk_advance", "pbfk_metric", "pbfk_mv",
                  "pbfk_restart", "pbfk_kinetic", "pbfk_err", "pbfk_dense")


def emit_step_library(problem, solver: str = "lm", *, name: str | None = None, host: bool = True,
                      emitter: str = "chunked", chunk: int = 250, cold_above: int = 20000,
                      plan: KernelPlan | None = None, **plan_options: Any) -> tuple[CSource, KernelPlan]:
    """The C source of ``problem``'s step / rollout library solved by ``solver``.

    Args:
        problem: a :class:`~pbframework.step.StepProblem`.
        solver: ``"lm"``, ``"jtj_lm"`` or ``"lbfgs"`` (any value for explicit problems).
        name: unit name (default ``pbfstep_<integrator>_<hash>``).
        host: append the POSIX-threads batch entry point (``pbf_rollout_batch``); ``False`` gives the
            portable part only (embedded / CUDA export).
        emitter: ``"chunked"`` (:func:`emit_sx_kernel`) or ``"casadi"`` (``casadi.CodeGenerator`` through
            :func:`pbframework.codegen.emit.emit_c`).
        chunk: instructions per chunk of the chunked emitter.
        cold_above: kernels run once per step (guess, pre, metric, ...) with more instructions than this,
            and ``init`` and ``start`` (run once per rollout) always, are compiled without optimisation
            (see :func:`emit_sx_kernel`).
        plan: kernels from :func:`plan_kernels` (built from ``plan_options`` when omitted).
        **plan_options: passed to :func:`plan_kernels` (``derivatives``, ``directions``, ``metric``, ``model``).

    Returns:
        ``(source, plan)``; nothing is written or compiled.
    """
    if emitter not in ("chunked", "casadi"):
        raise DriverError(f"emitter must be 'chunked' or 'casadi', got {emitter!r}")
    if plan is None:
        plan = plan_kernels(problem, solver, **plan_options)
    sz = plan.sizes
    if emitter == "chunked":
        texts, szw = [], 1
        for f in plan.kernels:
            cold = f.name() in _COLD or (f.name() in _COLD_IF_LARGE and f.n_instructions() > cold_above)
            t, w = emit_sx_kernel(f, f.name(), chunk, cold=cold)
            texts.append(t)
            szw = max(szw, w)
        kernel_text = "".join(texts)
        sz_iw, sz_arg, sz_res = 1, 8, 3
    else:
        src = emit_c(plan.kernels, name="pbfk_unit", batch=False)
        kernel_text = src.text
        szw = max(max(f.sz_w() for f in plan.kernels), 1)
        sz_iw = max(max(f.sz_iw() for f in plan.kernels), 1)
        sz_arg = max(8, max(f.sz_arg() for f in plan.kernels))
        sz_res = max(3, max(f.sz_res() for f in plan.kernels))
    macros = {
        "PBF_NQ": sz["nq"], "PBF_NVEL": sz["nv"], "PBF_NX": sz["nx"], "PBF_NS": sz["ns"], "PBF_NP": sz["np"], "PBF_NU": sz["nu"],
        "PBF_NR": sz["nr"], "PBF_NZ": sz["nz"], "PBF_BD": plan.directions, "PBF_BM": plan.metric_directions,
        "PBF_SZ_W": szw, "PBF_SZ_IW": sz_iw, "PBF_SZ_ARG": sz_arg, "PBF_SZ_RES": sz_res,
        "PBF_KIND": _KIND_ID[plan.kind], "PBF_SOLVER": _SOLVER_ID[plan.solver],
        "PBF_HESS": {"": 0, "full": 1, "directional": 2}[plan.derivatives],
        "PBF_METRIC": {"none": 0, "full": 1, "directional": 2}[plan.metric],
        "PBF_DAMP": int(plan.damp), "PBF_WEIGHT": int(plan.weight),
        "PBF_HAVE_RESTART": int("pbfk_restart" in plan.instructions),
        "PBF_HAVE_KINETIC": int("pbfk_kinetic" in plan.instructions),
        "PBF_HAVE_START": int("pbfk_start" in plan.instructions),
        "PBF_HAVE_ADAPTIVE": int("pbfk_dense" in plan.instructions),
        "PBF_START_SUBSTEPS": int(problem.start_substeps),
        "PBF_START_OFFSET": repr(float(problem.start_offset)),
    }
    header = _PRELUDE.format(describe=f"{problem.describe()}; {plan.describe()}")
    defs = "".join(f"#define {k} {v}\n" for k, v in macros.items())
    text = header + defs + "\n/* ---- kernels ---- */\n" + kernel_text + "\n/* ---- driver ---- */\n" + "\n".join(_read_c(part) for part in DRIVER_PARTS)
    if "pbfk_dense" in plan.instructions:
        text += "\n/* ---- adaptive step-size control ---- */\n" + _read_c("pbf_adaptive.c")
    if host:
        text += "\n/* ---- host: batched rollouts on threads ---- */\n" + _read_c("pbf_host.c")
    if name is None:
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        tag = re.sub(r"[^A-Za-z0-9_]", "_", str(problem.integrator))
        name = f"pbfstep_{tag}_{digest}"
    return CSource(name, text, ("pbf_rollout", "pbf_step", "pbf_solve", "pbf_init")), plan
