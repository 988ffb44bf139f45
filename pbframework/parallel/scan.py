"""Block bi-diagonal systems solved as scans (seed 003 §II-B, Eq. 3-5), numeric and symbolic.

The propagations of the global matrix form (:mod:`pbframework.parallel.globalform`, Eq. 2) are block bi-diagonal
solves. On a tree whose elements are numbered parents first (``parent[i] < i``) they read

* forward  (``(I - Gamma) x = c``):    ``x_i = b_i x_{parent(i)} + c_i``, with ``x_{-1} = x0``;
* backward (``(I - Gamma)^T x = c``):  ``x_i = c_i + sum over children k of b_k^T x_k``.

For a serial chain the forward recursion is Eq. 3 with the paper's ``b_{i-1}`` being our ``b_i`` (the
coefficient on the edge into element ``i``). Each element's affine map is the homogeneous block matrix of
Eq. 5, ``a_i = [[b_i, c_i], [0, 1]]``, and ``x`` is the all-prefix-"sum" of the ``a_i`` under
``a_{i-1} (+) a_i = a_i a_{i-1}``.

Two schedules (:class:`Schedule`) evaluate a recursion:

* ``SEQUENTIAL``: element by element (one level per tree depth): ``h`` levels for a tree of height ``h``
  (``n`` for a chain), ``O(n)`` work. The right choice on one CPU core.
* ``PARALLEL``: pointer jumping (Hillis-Steele / Wyllie) on the homogeneous matrices: every level composes,
  for all elements at once, ``a_i <- a_i a_{anc(i)}`` and doubles the reach ``anc(i) <- anc(anc(i))``, so
  ``ceil(log2 h)`` levels of ONE batched matrix product each, ``O(n log n)`` work. This is the GPU
  formulation. Backward recursions on a chain run the same scan on the reversed chain; on a branching tree
  the backward accumulation (a sum over children) runs level by level over the tree height.

Numeric variants work on numpy arrays (every level is one batched ``np.matmul``); symbolic variants build
CasADi MX graphs in which every level is one call of a small SX *kernel* mapped over the elements of the
level (``kernel.map(width)``), so generated C is a short sequence of loops whose size does not grow with
the work, and a later CUDA backend can launch one kernel per level. :class:`Levels` records those levels;
their count is the *depth* of an algorithm (sequential steps with unbounded processors), the quantity that
decides GPU speed.
"""

from __future__ import annotations

import contextlib
import enum
from dataclasses import dataclass, field
from typing import Callable, Sequence

import casadi as ca
import numpy as np

__all__ = [
    "Schedule", "Levels", "AffineStep",
    "depth_levels", "jump_plan", "height",
    "homogeneous", "prefix_scan", "solve_bidiagonal", "solve_bidiagonal_transpose",
    "forward_scan", "backward_scan", "backward_recursion", "chain_recurrence", "tree_forward",
    "tree_backward", "take", "column_kernel",
]


class Schedule(str, enum.Enum):
    """How a block bi-diagonal solve (a linear recursion over the elements) is evaluated.

    Attributes:
        SEQUENTIAL: the recursion element by element, one level per tree depth; ``O(n)`` work, ``n``
            levels on a chain. Fastest on a CPU.
        PARALLEL: pointer-jumping scan of the homogeneous block matrices (Eq. 5); ``ceil(log2 n)``
            levels of one batched matrix product each on a chain, ``O(n log n)`` work. The GPU form.
    """

    SEQUENTIAL = "sequential"
    PARALLEL = "parallel"

    @classmethod
    def parse(cls, value: "Schedule | str") -> "Schedule":
        if isinstance(value, Schedule):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ValueError(f"unknown schedule {value!r} (supported: "
                             f"{', '.join(s.value for s in cls)})") from None


# ======================================================================================================
# Level plans (pure index bookkeeping, shared by the numeric and the symbolic variants)
# ======================================================================================================

def _check_parent(parent: Sequence[int] | None, n: int) -> np.ndarray:
    if parent is None:
        return np.arange(n) - 1
    p = np.asarray(parent, dtype=int)
    if p.shape != (n,):
        raise ValueError(f"parent: expected {n} entries, got shape {p.shape}")
    if np.any(p >= np.arange(n)) or np.any(p < -1):
        raise ValueError("parent: elements must be numbered parents first (-1 <= parent[i] < i)")
    return p


def depth_levels(parent: Sequence[int]) -> list[list[int]]:
    """Elements grouped by depth (roots, whose parent is -1, at depth 0), parents first."""
    p = _check_parent(parent, len(parent))
    depth = np.zeros(len(p), dtype=int)
    for i, pi in enumerate(p):
        depth[i] = 0 if pi < 0 else depth[pi] + 1
    return [list(np.flatnonzero(depth == d)) for d in range(int(depth.max()) + 1)] if len(p) else []


def height(parent: Sequence[int]) -> int:
    """Number of elements on the longest root-to-leaf path (``n`` for a chain)."""
    return len(depth_levels(parent))


def jump_plan(parent: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Pointer-jumping levels for a forward scan: per level ``(idx, src)`` meaning
    ``a[idx] <- a[idx] a[src]`` (all pairs at once, reading the previous level's values).

    ``len(jump_plan(parent)) == ceil(log2(height(parent)))``.
    """
    anc = _check_parent(parent, len(parent)).copy()
    plan = []
    while np.any(anc >= 0):
        idx = np.flatnonzero(anc >= 0)
        src = anc[idx]
        plan.append((idx, src))
        new = anc.copy()
        new[idx] = anc[src]
        anc = new
    return plan


def _children(parent: np.ndarray) -> list[list[int]]:
    ch: list[list[int]] = [[] for _ in parent]
    for i, p in enumerate(parent):
        if p >= 0:
            ch[p].append(i)
    return ch


def _is_chain(parent: np.ndarray) -> bool:
    return bool(np.array_equal(parent, np.arange(len(parent)) - 1))


# ======================================================================================================
# Numeric (numpy) scans: each level is one batched matrix product
# ======================================================================================================

def homogeneous(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The homogeneous block matrices of Eq. 5 for a chain: ``a_i = [[b_i, c_i], [0, I]]``.

    Args:
        b: ``(n, m, m)``; ``b[0]`` multiplies ``x_{-1}`` (use zeros when the chain starts from ``x_0 = c_0``).
        c: ``(n, m)`` or ``(n, m, k)``.
    Returns:
        ``(n, m + k, m + k)``.
    """
    b = np.asarray(b, float)
    c = np.asarray(c, float)
    if c.ndim == 2:
        c = c[:, :, None]
    n, m, k = c.shape
    a = np.zeros((n, m + k, m + k))
    a[:, :m, :m] = b
    a[:, :m, m:] = c
    a[:, m:, m:] = np.eye(k)
    return a


def prefix_scan(a: np.ndarray) -> np.ndarray:
    """Inclusive all-prefix-sum ``[a_0, a_0 (+) a_1, ...]`` with ``a_{i-1} (+) a_i = a_i a_{i-1}`` (Eq. 5).

    Hillis-Steele: ``ceil(log2 n)`` levels, each one batched ``np.matmul`` over all elements.
    """
    p = np.array(a, dtype=float, copy=True)
    s = 1
    while s < len(p):
        p[s:] = p[s:] @ p[:-s]
        s *= 2
    return p


def _compose_levels(b: np.ndarray, c: np.ndarray, plan) -> tuple[np.ndarray, np.ndarray]:
    b, c = b.copy(), c.copy()
    for idx, src in plan:
        b_new = b[idx] @ b[src]
        c_new = b[idx] @ c[src] + c[idx]
        b[idx], c[idx] = b_new, c_new
    return b, c


def _bidiagonal_args(b, c, parent, schedule):
    """The arguments of the bidiagonal solvers as arrays: ``(b, C, vec, parent, schedule)`` with ``C`` the
    right-hand sides as ``(n, m, k)`` and ``vec`` whether ``c`` was ``(n, m)``."""
    b = np.asarray(b, float)
    c = np.asarray(c, float)
    vec = c.ndim == 2
    C = c[:, :, None] if vec else c
    return b, C, vec, _check_parent(parent, len(C)), Schedule.parse(schedule)


def solve_bidiagonal(b: np.ndarray, c: np.ndarray, parent: Sequence[int] | None = None,
                     x0: np.ndarray | None = None,
                     schedule: Schedule | str = Schedule.PARALLEL) -> np.ndarray:
    """Solve ``(I - Gamma) x = c``: ``x_i = b_i x_{parent(i)} + c_i`` with ``x_{-1} = x0`` (default 0).

    Args:
        b: ``(n, m, m)`` coefficient blocks; ``b_i`` sits at block ``(i, parent(i))`` of ``Gamma``.
        c: ``(n, m)`` or ``(n, m, k)`` right-hand sides.
        parent: parent index per element (parents first); ``None`` for a chain.
        x0: value of the virtual parent of the roots, ``(m,)`` or ``(m, k)``.
        schedule: ``"parallel"`` (pointer jumping, ``ceil(log2 h)`` batched levels) or ``"sequential"``.
    Returns:
        ``x`` with the shape of ``c``.
    """
    b, C, vec, par, schedule = _bidiagonal_args(b, c, parent, schedule)
    X0 = np.zeros(C.shape[1:]) if x0 is None else np.asarray(x0, float).reshape(C.shape[1:])
    if schedule is Schedule.SEQUENTIAL:
        x = np.empty_like(C)
        for level in depth_levels(par):
            lv = np.asarray(level)
            xp = np.stack([X0 if par[i] < 0 else x[par[i]] for i in lv])
            x[lv] = b[lv] @ xp + C[lv]
    else:
        B, x = _compose_levels(b, C, jump_plan(par))
        x = B @ X0 + x
    return x[:, :, 0] if vec else x


def solve_bidiagonal_transpose(b: np.ndarray, c: np.ndarray, parent: Sequence[int] | None = None,
                               schedule: Schedule | str = Schedule.PARALLEL) -> np.ndarray:
    """Solve ``(I - Gamma)^T x = c``: ``x_i = c_i + sum over children k of b_k^T x_k`` (backward).

    Same arguments as :func:`solve_bidiagonal`. On a chain the parallel schedule is a pointer-jumping
    scan of the reversed chain (``ceil(log2 n)`` levels); on a branching tree both schedules accumulate
    level by level over the tree height.
    """
    b, C, vec, par, schedule = _bidiagonal_args(b, c, parent, schedule)
    n = len(C)
    bt = np.swapaxes(b, 1, 2)
    if schedule is Schedule.PARALLEL and _is_chain(par) and n > 1:
        # reversed chain: x_i = bt_{i+1} x_{i+1} + c_i; element n-1 is the root of the reversed chain.
        B = np.zeros_like(b)
        B[:-1] = bt[1:]
        rpar = np.arange(n) - 1                             # reversed numbering r = n-1-i: a chain
        Br, xr = _compose_levels(B[::-1], C[::-1].copy(), jump_plan(rpar))
        x = xr[::-1]
    else:
        x = C.copy()
        for level in reversed(depth_levels(par)[1:]):
            lv = np.asarray(level)
            np.add.at(x, par[lv], bt[lv] @ x[lv])            # one batched product + scatter-add per level
    return x[:, :, 0] if vec else x


# ======================================================================================================
# Symbolic (CasADi) scans: every level is one mapped SX kernel
# ======================================================================================================
#
# Per-element quantities are *wide* arrays (struct of arrays): an ``(m, k * n)`` MX/DM whose columns
# ``i*k .. (i+1)*k`` hold element ``i``'s ``m x k`` block. A level maps a kernel over many elements at once.

Wide = ca.MX | ca.DM

CHUNK = 16
"""Elements per unrolled chunk of a sequential chain recursion (code size is O(CHUNK + n / CHUNK))."""


@dataclass
class Levels:
    """Records the data-parallel levels of a symbolic build; ``depth`` is the algorithm's depth.

    :meth:`apply` is the primitive: one SX kernel applied to ``width`` elements at once, as a direct call
    (width 1) or ``kernel.map(width, "serial")`` (a C loop).

    Attributes:
        trace: ``(label, width)`` per level, in program order.
    """

    trace: list[tuple[str, int]] = field(default_factory=list)

    @property
    def depth(self) -> int:
        return len(self.trace)

    def record(self, label: str, width: int) -> None:
        self.trace.append((label, width))

    @contextlib.contextmanager
    def group(self, label: str):
        """Count everything applied inside as ONE level (concurrent kernels of the same step)."""
        start = len(self.trace)
        yield self
        width = sum(w for _, w in self.trace[start:])
        del self.trace[start:]
        self.record(label, width)

    def apply(self, kernel: ca.Function, args: Sequence[Wide], width: int, label: str) -> list[Wide]:
        """One level: ``kernel`` on ``width`` elements. Each argument is wide (``width`` blocks) or a single
        block shared by all elements. Returns the outputs, wide."""
        if width <= 0:
            return [ca.DM(kernel.size1_out(j), 0) for j in range(kernel.n_out())]
        self.record(label, width)
        if width == 1:
            return list(kernel.call(list(args)))
        return list(_mapped(kernel, width).call(list(args)))

    def summary(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for label, _ in self.trace:
            key = label.split("[")[0]
            out[key] = out.get(key, 0) + 1
        return out


_MAP_CACHE: dict[tuple[int, int], tuple[ca.Function, ca.Function]] = {}


def _mapped(kernel: ca.Function, width: int) -> ca.Function:
    key = (id(kernel), width)
    hit = _MAP_CACHE.get(key)
    if hit is None or hit[0] is not kernel:
        hit = (kernel, kernel.map(width, "serial"))
        _MAP_CACHE[key] = hit
    return hit[1]


def take(A: Wide, idx: Sequence[int], k: int) -> Wide:
    """The blocks ``idx`` of a wide array (a slice when ``idx`` is a contiguous ascending range)."""
    idx = [int(i) for i in idx]
    if not idx:
        return A[:, 0:0]
    if idx == list(range(idx[0], idx[0] + len(idx))):
        return A[:, idx[0] * k:(idx[-1] + 1) * k]
    return A[:, [c for i in idx for c in range(i * k, (i + 1) * k)]]


def _replace(A: Wide, idx: Sequence[int], new: Wide, k: int, n: int) -> Wide:
    """``A`` with blocks ``idx`` replaced by the blocks of ``new`` (in order); slices when ``idx`` is a
    contiguous range (always on a chain), one gather otherwise."""
    idx = [int(i) for i in idx]
    if not idx:
        return A
    a, b = idx[0], idx[-1] + 1
    if idx == list(range(a, b)):
        parts = ([A[:, :a * k]] if a > 0 else []) + [new] + ([A[:, b * k:]] if b < n else [])
        return ca.horzcat(*parts)
    pos = {e: j for j, e in enumerate(idx)}
    both = ca.horzcat(A, new)
    cols = [c for e in range(n) for c in (range((n + pos[e]) * k, (n + pos[e] + 1) * k) if e in pos
                                         else range(e * k, (e + 1) * k))]
    return both[:, cols]


def _sum_into(C: Wide, dst: Sequence[int], n_dst: int, k: int) -> Wide:
    """``(m, k * n_dst)``: block ``j`` is the sum of the blocks ``r`` of ``C`` with ``dst[r] == j``."""
    w = len(dst)
    P = np.zeros((w, n_dst))
    P[np.arange(w), np.asarray(dst, int)] = 1.0
    if np.all(P.sum(axis=0) == 1) and w == n_dst:                 # a permutation: gather instead
        return take(C, list(np.argmax(P, axis=0)), k)
    return ca.mtimes(C, ca.sparsify(ca.DM(np.kron(P, np.eye(k)))))


# -- recurrences: chains in unrolled chunks, trees level by level -----------------------------------------

_CHUNKS: dict[tuple[int, int, bool], tuple[ca.Function, ca.Function]] = {}


def _chunk(kernel: ca.Function, B: int, reverse: bool) -> ca.Function:
    """An MX function running ``kernel`` over ``B`` consecutive elements of a chain (state = input 0 /
    output 0), reused for every chunk so the generated C holds the B calls once."""
    key = (id(kernel), B, reverse)
    hit = _CHUNKS.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    U = [ca.MX.sym(f"u{j}", kernel.size1_in(j), kernel.size2_in(j) * B) for j in range(1, kernel.n_in())]
    order = range(B - 1, -1, -1) if reverse else range(B)
    s_in = ca.MX.sym("s_in", kernel.sparsity_in(0))
    s = s_in
    outs = [[None] * B for _ in range(kernel.n_out())]
    for e in order:
        args = [s] + [u[:, e * kernel.size2_in(j + 1):(e + 1) * kernel.size2_in(j + 1)] for j, u in enumerate(U)]
        res = kernel.call(args)
        s = res[0]
        for o, r in enumerate(res):
            outs[o][e] = r
    f = ca.Function(f"{kernel.name()}_{'r' if reverse else 'f'}chunk{B}", [s_in, *U],
                    [ca.horzcat(*o) for o in outs])
    _CHUNKS[key] = (kernel, f)
    return f


def chain_recurrence(kernel: ca.Function, s0: Wide, U: Sequence[Wide], n: int, reverse: bool,
                     levels: Levels, label: str) -> list[Wide]:
    """Run ``kernel(s, *u_i) -> (s', *y_i)`` along a chain (``reverse``: from element ``n-1`` down to 0),
    carrying ``s``. Returns every output, wide in element order. ``n`` levels of width 1."""
    bounds = [(a, min(a + CHUNK, n)) for a in range(0, n, CHUNK)]
    if reverse:
        bounds = bounds[::-1]
    pieces: list[list[Wide]] = [[None] * len(bounds) for _ in range(kernel.n_out())]  # type: ignore[list-item]
    s = s0
    ks = kernel.size2_out(0)
    for c, (a, b) in enumerate(bounds):
        f = _chunk(kernel, b - a, reverse)
        args = [s] + [take(u, range(a, b), kernel.size2_in(j + 1)) for j, u in enumerate(U)]
        res = f.call(args)
        for o, r in enumerate(res):
            pieces[o][c] = r
        s = res[0][:, :ks] if reverse else res[0][:, (b - a - 1) * ks:]
    for i in range(n):
        levels.record(f"{label}[{i}]", 1)
    if reverse:
        pieces = [p[::-1] for p in pieces]
    return [ca.horzcat(*p) for p in pieces]


def _level_positions(parent: np.ndarray):
    dl = depth_levels(parent)
    pos = np.zeros(len(parent), dtype=int)
    for level in dl:
        for j, e in enumerate(level):
            pos[e] = j
    perm_cols = np.argsort(np.concatenate(dl)) if dl else np.zeros(0, int)
    return dl, pos, perm_cols


def _assemble(level_pieces: list[Wide], perm: np.ndarray, k: int) -> Wide:
    allw = ca.horzcat(*level_pieces)
    return take(allw, list(perm), k)


def tree_forward(kernel: ca.Function, s0: Wide, U: Sequence[Wide], parent: Sequence[int],
                 levels: Levels, label: str) -> list[Wide]:
    """``kernel(s_parent, *u_i) -> (s_i, *y_i)`` over a tree, one level per depth (roots get ``s0``)."""
    par = _check_parent(parent, len(parent))
    dl, pos, perm = _level_positions(par)
    ks = kernel.size2_out(0)
    pieces: list[list[Wide]] = [[] for _ in range(kernel.n_out())]
    prev = None
    for d, nodes in enumerate(dl):
        s = s0 if d == 0 else take(prev, [pos[par[i]] for i in nodes], ks)
        args = [s] + [take(u, nodes, kernel.size2_in(j + 1)) for j, u in enumerate(U)]
        res = levels.apply(kernel, args, len(nodes), f"{label}[d{d}]")
        for o, r in enumerate(res):
            pieces[o].append(r)
        prev = res[0]
    return [_assemble(p, perm, kernel.size2_out(o)) for o, p in enumerate(pieces)]


def tree_backward(kernel: ca.Function, U: Sequence[Wide], parent: Sequence[int], levels: Levels,
                  label: str) -> list[Wide]:
    """``kernel(acc_i, *u_i) -> (contribution_i, *y_i)`` over a tree, deepest level first; ``acc_i`` is the
    sum of the children's contributions (zero for a leaf)."""
    par = _check_parent(parent, len(parent))
    dl, pos, perm = _level_positions(par)
    m, ks = kernel.size1_in(0), kernel.size2_in(0)
    pieces: list[list[Wide]] = [[None] * len(dl) for _ in range(kernel.n_out())]  # type: ignore[list-item]
    below = None
    for d in range(len(dl) - 1, -1, -1):
        nodes = dl[d]
        if below is None:
            acc = ca.DM.zeros(m, ks)                                  # shared by all leaves of the level
        else:
            acc = _sum_into(below, [pos[par[i]] for i in dl[d + 1]], len(nodes), ks)
        args = [acc] + [take(u, nodes, kernel.size2_in(j + 1)) for j, u in enumerate(U)]
        res = levels.apply(kernel, args, len(nodes), f"{label}[d{d}]")
        for o, r in enumerate(res):
            pieces[o][d] = r
        below = res[0]
    return [_assemble(p, perm, kernel.size2_out(o)) for o, p in enumerate(pieces)]


# -- affine steps and the scans ----------------------------------------------------------------------------

COLUMN_BLOCK = 8
"""Kernels on blocks wider than this many columns loop over column blocks instead of unrolling them."""


def column_kernel(name: str, k: int, make: Callable[[int], tuple[list, list, ca.SX | None]],
                  col_in: Sequence[bool], col_out: Sequence[bool]) -> ca.Function:
    """A kernel acting column by column on ``k`` columns, with code size independent of ``k``.

    Args:
        name: function name.
        k: number of columns.
        make: ``make(kk) -> (inputs, outputs, cols)``: SX inputs and outputs for ``kk`` columns, and the
            ``1 x kk`` SX row of global column indices the outputs may use (or None).
        col_in: per input, whether it has ``kk`` columns (else it is shared by all columns).
        col_out: per output, whether it has ``kk`` columns (else it may depend on shared inputs only).

    For ``k <= COLUMN_BLOCK`` this is one SX function; otherwise an MX function that maps a
    ``COLUMN_BLOCK``-column SX kernel over the column blocks (a C loop), handles the remainder with a
    second SX kernel, and evaluates the column-independent outputs once.
    """
    def sx(kk: int, start: int, fname: str, only_cols: bool):
        ins, outs, cols = make(kk)
        if cols is not None:
            outs = ca.substitute(list(outs), [cols], [ca.SX(ca.DM(np.arange(start, start + kk, dtype=float)).T)])
        if only_cols:
            outs = [o for o, c in zip(outs, col_out) if c]
        return ca.Function(fname, list(ins), list(outs))

    if k <= COLUMN_BLOCK:
        return sx(k, 0, name, False)
    KB = COLUMN_BLOCK
    q, r = divmod(k, KB)
    ins_b, outs_b, cols_b = make(KB)
    blk = ca.Function(f"{name}_blk{KB}", list(ins_b) + ([cols_b] if cols_b is not None else []),
                      [o for o, c in zip(outs_b, col_out) if c])
    X = [ca.MX.sym(f"i{j}", s.size1(), k if c else s.size2()) for j, (s, c) in enumerate(zip(ins_b, col_in))]
    args = [x[:, :q * KB] if c else x for x, c in zip(X, col_in)]
    if cols_b is not None:
        args.append(ca.DM(np.arange(q * KB, dtype=float)).T)
    main = _mapped(blk, q).call(args) if q > 1 else blk.call(args)
    parts = [[m_] for m_ in main]
    if r:
        rem = sx(r, q * KB, f"{name}_rem{r}", True)
        for o, y in enumerate(rem.call([x[:, q * KB:] if c else x for x, c in zip(X, col_in)])):
            parts[o].append(y)
    col_vals = [ca.horzcat(*p) for p in parts]
    if not all(col_out):
        sh_in = [i for i, c in zip(ins_b, col_in) if not c]
        shared = ca.Function(f"{name}_shared", sh_in, [o for o, c in zip(outs_b, col_out) if not c])
        sh_vals = shared.call([x for x, c in zip(X, col_in) if not c])
    outs, ic, ish = [], 0, 0
    for c in col_out:
        if c:
            outs.append(col_vals[ic])
            ic += 1
        else:
            outs.append(sh_vals[ish])
            ish += 1
    return ca.Function(name, X, outs)


class AffineStep:
    """One element's affine map ``x -> b(u) x + c(u)``, from which the scan kernels are derived.

    Args:
        name: unique kernel name stem (used in generated C).
        fn: ``fn(x, *u) -> SX`` (or ``fn(x, *u, cols)`` with ``columns=True``), affine in ``x``; ``x`` is
            ``(m, kk)``, ``fn`` acts column by column, and ``cols`` is the ``1 x kk`` row of the columns'
            global indices (for right-hand sides that differ per column).
        m: rows of ``x``.
        u_shapes: shapes of the per-element inputs ``u``; ``(rows, None)`` marks an input with one column
            per column of ``x`` (otherwise an input is shared by all columns).
        columns: whether ``fn`` takes ``cols``.

    Derived kernels (built once per ``k``, the columns of ``x``; see :func:`column_kernel`):

    * ``apply(x, *u)`` the map itself (sequential schedule, forward);
    * ``accumulate(acc, c, *u) -> (fn(c + acc, *u), c + acc)`` (sequential schedule, backward);
    * ``coeffs(*u) -> (b, c)`` with ``b = d fn / d x`` (``m x m``) and ``c = fn(0, *u)``;
    * ``compose(b1, c1, b2, c2) -> (b1 b2, b1 c2 + c1)``: the homogeneous product ``a1 a2`` of Eq. 5;
    * ``finish(b, c, x0) -> b x0 + c``.
    """

    def __init__(self, name: str, fn: Callable[..., ca.SX], m: int, u_shapes: Sequence[tuple[int, int]],
                 columns: bool = False):
        self.name, self.fn, self.m, self.u_shapes = name, fn, m, [tuple(s) for s in u_shapes]
        self.columns = columns
        self._k: dict[tuple[str, int], ca.Function] = {}

    def _u(self, kk: int = 1) -> list[ca.SX]:
        return [ca.SX.sym(f"u{j}", r, kk if c is None else c) for j, (r, c) in enumerate(self.u_shapes)]

    def _u_cols(self) -> list[bool]:
        return [c is None for _, c in self.u_shapes]

    def _call(self, x, u, cols):
        return self.fn(x, *u, cols) if self.columns else self.fn(x, *u)

    def _cols(self, kk: int):
        return ca.SX.sym("cols", 1, kk) if self.columns else None

    def apply(self, k: int) -> ca.Function:
        key = ("apply", k)
        if key not in self._k:
            def make(kk):
                x, u, cols = ca.SX.sym("x", self.m, kk), self._u(kk), self._cols(kk)
                return [x, *u], [self._call(x, u, cols)], cols
            self._k[key] = column_kernel(f"{self.name}_apply{k}", k, make, [True] + self._u_cols(), [True])
        return self._k[key]

    def accumulate(self, k: int) -> ca.Function:
        key = ("accumulate", k)
        if key not in self._k:
            def make(kk):
                acc, c, u, cols = ca.SX.sym("acc", self.m, kk), ca.SX.sym("c", self.m, kk), self._u(kk), self._cols(kk)
                x = c + acc
                return [acc, c, *u], [self._call(x, u, cols), x], cols
            self._k[key] = column_kernel(f"{self.name}_acc{k}", k, make, [True, True] + self._u_cols(),
                                         [True, True])
        return self._k[key]

    def coeffs(self, k: int) -> ca.Function:
        key = ("coeffs", k)
        if key not in self._k:
            def make(kk):
                x1, u, cols = ca.SX.sym("x", self.m, 1), self._u(kk), self._cols(kk)
                u1 = [ui[:, 0] if c else ui for ui, c in zip(u, self._u_cols())]
                b = ca.jacobian(self._call(x1, u1, None if cols is None else cols[:, 0])[:, 0], x1)
                if ca.depends_on(b, x1) or (cols is not None and ca.depends_on(b, cols)) or any(
                        ca.depends_on(b, ui) for ui, c in zip(u, self._u_cols()) if c):
                    raise ValueError(f"scan step {self.name!r} is not affine in x with a column-independent b")
                return u, [b, self._call(ca.SX.zeros(self.m, kk), u, cols)], cols
            self._k[key] = column_kernel(f"{self.name}_coeffs{k}", k, make, self._u_cols(), [False, True])
        return self._k[key]

    def compose(self, k: int) -> ca.Function:
        return _compose_kernel(self.m, k)

    def finish(self, k: int) -> ca.Function:
        return _finish_kernel(self.m, k)


_COMPOSE: dict[tuple[str, int, int], ca.Function] = {}


def _compose_kernel(m: int, k: int) -> ca.Function:
    key = ("compose", m, k)
    if key not in _COMPOSE:
        def make(kk):
            b1, c1 = ca.SX.sym("b1", m, m), ca.SX.sym("c1", m, kk)
            b2, c2 = ca.SX.sym("b2", m, m), ca.SX.sym("c2", m, kk)
            return [b1, c1, b2, c2], [ca.mtimes(b1, b2), ca.mtimes(b1, c2) + c1], None
        _COMPOSE[key] = column_kernel(f"pbf_scan_compose{m}x{k}", k, make, [False, True, False, True], [False, True])
    return _COMPOSE[key]


def _finish_kernel(m: int, k: int) -> ca.Function:
    key = ("finish", m, k)
    if key not in _COMPOSE:
        def make(kk):
            b, c, x0 = ca.SX.sym("b", m, m), ca.SX.sym("c", m, kk), ca.SX.sym("x0", m, kk)
            return [b, c, x0], [ca.mtimes(b, x0) + c], None
        _COMPOSE[key] = column_kernel(f"pbf_scan_finish{m}x{k}", k, make, [False, True, True], [True])
    return _COMPOSE[key]


def _is_zero(x: Wide) -> bool:
    return isinstance(x, ca.DM) and (x.nnz() == 0 or float(ca.norm_inf(x)) == 0.0)


def _pointer_jump(step: AffineStep, Bw: Wide, Cw: Wide, plan, k: int, n: int, levels: Levels,
                  label: str) -> tuple[Wide, Wide]:
    m = step.m
    comp = step.compose(k)
    for j, (idx, src) in enumerate(plan):
        nb, nc = levels.apply(comp, [take(Bw, idx, m), take(Cw, idx, k), take(Bw, src, m), take(Cw, src, k)],
                              len(idx), f"{label}[jump{j}]")
        Bw, Cw = _replace(Bw, idx, nb, m, n), _replace(Cw, idx, nc, k, n)
    return Bw, Cw


def forward_scan(step: AffineStep, U: Sequence[Wide], parent: Sequence[int], x0: Wide, k: int,
                 schedule: Schedule | str, levels: Levels, label: str) -> Wide:
    """Symbolic forward scan ``x_i = b(u_i) x_{parent(i)} + c(u_i)``, ``x_{-1} = x0`` (one ``m x k`` block).

    ``U`` holds the per-element inputs as wide arrays. Sequential: ``n`` levels on a chain (unrolled in
    chunks), one per depth on a tree. Parallel: a ``coeffs`` level, ``ceil(log2 h)`` pointer-jumping
    ``compose`` levels, and a ``finish`` level unless ``x0`` is zero.

    Returns:
        ``x``, wide ``(m, k * n)``.
    """
    par = _check_parent(parent, len(parent))
    schedule = Schedule.parse(schedule)
    n = len(par)
    if schedule is Schedule.SEQUENTIAL:
        if _is_chain(par):
            return chain_recurrence(step.apply(k), x0, U, n, False, levels, label)[0]
        return tree_forward(step.apply(k), x0, U, par, levels, label)[0]
    Bw, Cw = levels.apply(step.coeffs(k), U, n, f"{label}[coeffs]")
    Bw, Cw = _pointer_jump(step, Bw, Cw, jump_plan(par), k, n, levels, label)
    if _is_zero(x0):
        return Cw
    return levels.apply(step.finish(k), [Bw, Cw, x0], n, f"{label}[finish]")[0]


def backward_scan(step: AffineStep, U: Sequence[Wide], C: Wide, parent: Sequence[int], k: int,
                  schedule: Schedule | str, levels: Levels, label: str) -> Wide:
    """Symbolic backward scan ``x_i = C_i + sum over children j of step(x_j, *u_j)``.

    ``step`` maps a child's value to its contribution to the parent. Parallel on a chain: pointer jumping
    on the reversed chain; on a branching tree (either schedule) one level per depth.
    """
    par = _check_parent(parent, len(parent))
    schedule = Schedule.parse(schedule)
    n = len(par)
    m = step.m
    chain = _is_chain(par)
    if schedule is Schedule.PARALLEL and chain and n > 1:
        Bc, Dc = levels.apply(step.coeffs(k), [take(u, range(1, n), step.u_shapes[j][1]) for j, u in enumerate(U)],
                              n - 1, f"{label}[coeffs]")
        # x_i = b_{i+1} x_{i+1} + (C_i + d_{i+1}) for i < n-1; x_{n-1} = C_{n-1}
        Bw = ca.horzcat(Bc, ca.DM.zeros(m, m))
        Cw = C + ca.horzcat(Dc, ca.DM.zeros(m, k))
        plan = [(np.arange(0, n - s), np.arange(s, n)) for s in _strides(n)]
        Bw, Cw = _pointer_jump(step, Bw, Cw, plan, k, n, levels, label)
        return Cw
    kern = step.accumulate(k)
    if chain:
        return chain_recurrence(kern, ca.DM.zeros(m, k), [C, *U], n, True, levels, label)[1]
    return tree_backward(kern, [C, *U], par, levels, label)[1]


def _strides(n: int) -> list[int]:
    out, s = [], 1
    while s < n:
        out.append(s)
        s *= 2
    return out


def backward_recursion(kernel: ca.Function, U: Sequence[Wide], parent: Sequence[int], levels: Levels,
                       label: str) -> list[Wide]:
    """A nonlinear backward recursion ``kernel(acc_i, *u_i) -> (contribution_i, *outputs_i)``, ``acc_i`` the
    sum of the children's contributions (zero for leaves); one level per tree depth (``n`` on a chain).

    Used for the articulated-body inertias, which no scan parallelises beyond a constant factor
    (seed 003 §III). Returns every output, wide in element order.
    """
    par = _check_parent(parent, len(parent))
    if _is_chain(par):
        return chain_recurrence(kernel, ca.DM.zeros(kernel.sparsity_in(0).shape), U, len(par), True, levels, label)
    return tree_backward(kernel, U, par, levels, label)
