"""Scans for block bi-diagonal systems (seed 003 Eq. 3-5) and the global matrix form (Eq. 2).

Unit tests of the level plans; reference tests of the numeric and symbolic scans against dense solves of
Eq. 4; reference tests of Eq. 2 (velocities, mass matrix, inverse dynamics) against Pinocchio.
"""

from __future__ import annotations

import math

import casadi as ca
import numpy as np
import pytest

from pbframework.parallel import globalform as G
from pbframework import models
from pbframework.parallel.scan import (CHUNK, AffineStep, Levels, Schedule, backward_scan, depth_levels, forward_scan,
                              height, homogeneous, jump_plan, prefix_scan, solve_bidiagonal,
                              solve_bidiagonal_transpose)

TOL_SCAN = 1e-11          # relative, well-conditioned random systems (|b| ~ 0.5)
TOL_PIN = 1e-12           # relative, our Eq. 2 vs Pinocchio on small models

SCHEDULES = [Schedule.SEQUENTIAL, Schedule.PARALLEL]


@pytest.fixture
def rng():
    return np.random.default_rng(20240603)


def random_tree(n: int, rng, branching: float = 0.5) -> list[int]:
    """Parents-first random tree: each element hangs off the previous one or (w.p. ``branching``) a random
    earlier one."""
    parent = [-1]
    for i in range(1, n):
        parent.append(int(rng.integers(0, i)) if rng.random() < branching else i - 1)
    return parent


def dense_gamma(b: np.ndarray, parent) -> np.ndarray:
    n, m = b.shape[0], b.shape[1]
    G_ = np.zeros((n * m, n * m))
    for i, p in enumerate(parent):
        if p >= 0:
            G_[i * m:(i + 1) * m, p * m:(p + 1) * m] = b[i]
    return G_


def rel(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(b), 1e-300))


# -- level plans -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 63, 64, 65, 200])
def test_jump_plan_on_a_chain_has_ceil_log2_levels(n):
    plan = jump_plan(np.arange(n) - 1)
    assert len(plan) == (math.ceil(math.log2(n)) if n > 1 else 0)
    # every level is one batched op over a contiguous range, reading the previous level only
    for j, (idx, src) in enumerate(plan):
        assert np.array_equal(idx, np.arange(2 ** j, n))
        assert np.array_equal(src, idx - 2 ** j)


def test_jump_plan_on_trees_has_ceil_log2_height_levels(rng):
    for _ in range(20):
        parent = random_tree(int(rng.integers(1, 60)), rng)
        h = height(parent)
        assert len(jump_plan(parent)) == (math.ceil(math.log2(h)) if h > 1 else 0)
        assert sum(len(lv) for lv in depth_levels(parent)) == len(parent)


def test_parent_must_be_numbered_parents_first():
    with pytest.raises(ValueError, match="parents first"):
        solve_bidiagonal(np.zeros((2, 1, 1)), np.zeros((2, 1)), parent=[1, -1])


def test_schedule_parse_names_the_choices():
    assert Schedule.parse("parallel") is Schedule.PARALLEL
    with pytest.raises(ValueError, match="sequential, parallel"):
        Schedule.parse("gpu")


# -- numeric scans -----------------------------------------------------------------------------------------

def test_prefix_scan_of_homogeneous_matrices_solves_eq4(rng):
    """Eq. 3-5: the top-right block of a_i ... a_0 is x_i."""
    n, m = 37, 4
    b = rng.normal(size=(n, m, m)) * 0.5
    c = rng.normal(size=(n, m))
    b[0] = 0.0                                           # x_0 = c_0
    P = prefix_scan(homogeneous(b, c))
    x = P[:, :m, m]
    A = np.eye(n * m) - dense_gamma(b, np.arange(n) - 1)  # Eq. 4
    assert rel(x.ravel(), np.linalg.solve(A, c.ravel())) < TOL_SCAN
    seq = np.zeros_like(c)
    for i in range(n):
        seq[i] = (b[i] @ seq[i - 1] if i else 0) + c[i]
    assert rel(x, seq) < TOL_SCAN


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("tree", [False, True])
@pytest.mark.parametrize("k", [None, 3])
def test_solve_bidiagonal_matches_dense(rng, schedule, tree, k):
    n, m = 41, 6
    parent = random_tree(n, rng) if tree else list(np.arange(n) - 1)
    b = rng.normal(size=(n, m, m)) * 0.4
    c = rng.normal(size=(n, m) if k is None else (n, m, k))
    x0 = rng.normal(size=(m,) if k is None else (m, k))
    x = solve_bidiagonal(b, c, parent=parent, x0=x0, schedule=schedule)
    A = np.eye(n * m) - dense_gamma(b, parent)
    rhs = c.reshape(n * m, -1).copy()
    for i, p in enumerate(parent):
        if p < 0:
            rhs[i * m:(i + 1) * m] += (b[i] @ x0).reshape(m, -1)
    assert rel(x.reshape(n * m, -1), np.linalg.solve(A, rhs)) < TOL_SCAN
    xt = solve_bidiagonal_transpose(b, c, parent=parent, schedule=schedule)
    assert rel(xt.reshape(n * m, -1), np.linalg.solve(A.T, c.reshape(n * m, -1))) < TOL_SCAN


# -- symbolic scans ----------------------------------------------------------------------------------------

def _generic_step(m: int, k: int) -> AffineStep:
    return AffineStep(f"test_generic{m}x{k}", lambda x, b, c: ca.mtimes(b, x) + c, m, [(m, m), (m, None)])


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("n,tree", [(1, False), (2, False), (CHUNK - 1, False), (CHUNK, False), (CHUNK + 1, False),
                                    (2 * CHUNK + 3, False), (23, True)])
@pytest.mark.parametrize("k", [1, 3])
def test_symbolic_scans_match_numpy(rng, schedule, n, tree, k):
    m = 3
    parent = random_tree(n, rng) if tree else list(np.arange(n) - 1)
    b = rng.normal(size=(n, m, m)) * 0.5
    c = rng.normal(size=(n, m, k))
    x0 = rng.normal(size=(m, k))
    bw = ca.MX.sym("b", m, m * n)
    cw = ca.MX.sym("c", m, k * n)
    step = _generic_step(m, k)
    lv = Levels()
    xf = forward_scan(step, [bw, cw], parent, ca.DM(x0), k, schedule, lv, "fwd")
    # backward: the contribution of a child is b_child^T x_child
    stepT = AffineStep(f"test_generic_T{m}x{k}", lambda x, bb: ca.mtimes(bb.T, x), m, [(m, m)])
    xb = backward_scan(stepT, [bw], cw, parent, k, schedule, lv, "bwd")
    f = ca.Function("f", [bw, cw], [xf, xb])
    bn, cn = np.hstack(list(b)), np.hstack(list(c))
    Xf, Xb = (np.asarray(v) for v in f(bn, cn))
    ref_f = solve_bidiagonal(b, c, parent=parent, x0=x0, schedule="sequential")
    ref_b = solve_bidiagonal_transpose(b, c, parent=parent, schedule="sequential")
    assert rel(Xf, np.hstack(list(ref_f))) < TOL_SCAN
    assert rel(Xb, np.hstack(list(ref_b))) < TOL_SCAN
    if schedule is Schedule.PARALLEL and not tree and n > 1:
        L = math.ceil(math.log2(n))
        # forward: coeffs + L jumps + finish; backward: coeffs + L jumps
        assert lv.depth == (L + 2) + (L + 1)
    if schedule is Schedule.SEQUENTIAL:
        assert lv.depth == 2 * height(parent)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("k", [11, 16])
def test_wide_blocks_use_column_blocked_kernels(rng, schedule, k):
    """More than COLUMN_BLOCK columns: kernels loop over column blocks (+ remainder) and still agree."""
    m, n = 3, 19
    b = rng.normal(size=(n, m, m)) * 0.5
    c = rng.normal(size=(n, m, k))
    bw, cw = ca.MX.sym("b", m, m * n), ca.MX.sym("c", m, k * n)
    lv = Levels()
    xf = forward_scan(_generic_step(m, k), [bw, cw], list(np.arange(n) - 1), ca.DM.zeros(m, k), k, schedule,
                      lv, "fwd")
    f = ca.Function("f", [bw, cw], [xf])
    ref = solve_bidiagonal(b, c, schedule="sequential")
    assert rel(np.asarray(f(np.hstack(list(b)), np.hstack(list(c)))), np.hstack(list(ref))) < TOL_SCAN
    kern = _generic_step(m, k).apply(k)
    assert kern.is_a("MXFunction") and kern.n_instructions() < 20          # a loop, not k unrolled columns


def test_affine_step_rejects_a_nonlinear_map():
    step = AffineStep("test_nonlinear", lambda x, u: x * x + u, 2, [(2, 1)])
    with pytest.raises(ValueError, match="not affine"):
        step.coeffs(1)


# -- the global matrix form (Eq. 2) --------------------------------------------------------------------------

@pytest.mark.parametrize("model", [G.random_chain(7, seed=3), models.spider()], ids=["chain7", "spider"])
def test_eq2_operators_reproduce_pinocchio(model, rng):
    pin = pytest.importorskip("pinocchio")
    gf = G.global_form(model)
    pm, order = G.to_pinocchio(model)
    pd = pm.createData()
    q, qd, qdd = rng.normal(size=(3, gf.n))
    op = G.operators(gf, q)
    # (2a): (I - Gamma) V = S qd gives the body twists
    V = np.linalg.solve(op["I_minus_Gamma"], op["S"] @ qd).reshape(gf.n, 6)
    pin.forwardKinematics(pm, pd, q[order], qd[order])
    Vpin = np.array([np.concatenate([pd.v[k + 1].angular, pd.v[k + 1].linear]) for k in range(gf.n)])
    assert rel(V[order], Vpin) < TOL_PIN
    # M = S^T (I-Gamma)^{-T} J (I-Gamma)^{-1} S
    Mp = pin.crba(pm, pd, q[order])
    Mp = np.triu(Mp) + np.triu(Mp, 1).T
    assert rel(G.mass_matrix(gf, q)[np.ix_(order, order)], Mp) < TOL_PIN
    # (2a)-(2d) as scans, both schedules
    for schedule in SCHEDULES:
        lv = Levels()
        Q, QD, QDD = ca.MX.sym("q", gf.n), ca.MX.sym("qd", gf.n), ca.MX.sym("qdd", gf.n)
        tau = G.inverse_dynamics(gf, G.adjoints(gf, Q, lv), QD, QDD, True, schedule, lv)
        f = ca.Function("id", [Q, QD, QDD], [tau.T])
        tau_pin = pin.rnea(pm, pd, q[order], qd[order], qdd[order])
        assert rel(np.asarray(f(q, qd, qdd)).ravel()[order], tau_pin) < TOL_PIN


def test_reference_forward_dynamics_in_long_double(rng):
    pin = pytest.importorskip("pinocchio")
    model = G.random_chain(12, seed=5)
    gf = G.global_form(model)
    pm, _ = G.to_pinocchio(model)
    q, qd, tau = rng.normal(size=(3, gf.n))
    ref = G.reference_forward_dynamics(gf, q, qd, tau)
    assert ref.dtype == np.longdouble
    assert rel(np.asarray(ref, float), pin.aba(pm, pm.createData(), q, qd, tau)) < 1e-12


def test_random_chain_is_a_valid_revolute_chain():
    m = G.random_chain(5, seed=1)
    gf = G.global_form(m)
    assert gf.is_chain and gf.n == 5 and m.nq == 5
    assert np.allclose(np.linalg.norm(gf.S, axis=1), 1.0)
    W = gf.complement()
    assert np.allclose(np.einsum("nij,nj->ni", np.swapaxes(W, 1, 2), gf.S), 0.0)
    assert np.allclose(np.swapaxes(W, 1, 2) @ W, np.eye(5))
    with pytest.raises(ValueError, match="n must be >= 1"):
        G.random_chain(0)
