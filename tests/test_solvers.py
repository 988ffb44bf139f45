"""Every registered solver on shared test problems (STYLE.md 8, cross-plug-in tier), statistics and
non-convergence reporting."""

from __future__ import annotations

import warnings

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework.step import ProblemKind, StepConfig, StepError, StepProblem, init_symbols, standard_params

SOLVE_TOL = 1e-6   # distance of the returned point to the known minimiser


def _toy_problem(kind: ProblemKind, n: int = 4) -> StepProblem:
    """Extended Rosenbrock: r = [10 (x_{2i+1} - x_{2i}^2), 1 - x_{2i}] (+ p-shift), minimiser x = 1 + shift."""
    x, p = ca.SX.sym("x", n), ca.SX.sym("p", 2 + 2)        # ns = 2: p = [s; dt; t]
    shift = p[0]
    y = x - shift
    res = []
    for i in range(0, n, 2):
        res += [10 * (y[i + 1] - y[i] ** 2), 1 - y[i]]
    r = ca.vertcat(*res)
    q0, qd0, t0, dt, u0, *runs = init_symbols(1, 0)
    common = dict(integrator="rosenbrock", kind=kind, config=StepConfig(dt=1.0), nq=1, nx=n, ns=2,
                  init=ca.Function("init", [q0, qd0, t0, dt, u0, *runs], [ca.vertcat(q0, qd0)]),
                  params=standard_params(2),
                  guess=ca.Function("guess", [p], [ca.repmat(ca.DM([-1.2, 1.0]), n // 2, 1) + shift]),
                  advance=ca.Function("advance", [x, p], [ca.vertcat(x[0], x[1])]))
    if kind is ProblemKind.LEAST_SQUARES:
        return StepProblem(residual=ca.Function("r", [x, p], [r]), **common)
    return StepProblem(objective_fn=ca.Function("f", [x, p], [0.5 * ca.dot(r, r)]), **common)


def _solvers():
    return pbf.available("solver")


def _solver_kinds():
    """Every (solver, problem kind) pair a registered solver declares in meta["problems"]."""
    return [(name, kind) for name in _solvers() for kind in (ProblemKind.MINIMIZE, ProblemKind.LEAST_SQUARES)
            if kind.value in {str(getattr(k, "value", k)) for k in pbf.get_plugin("solver", name).meta["problems"]}]


@pytest.mark.parametrize("name,kind", _solver_kinds())
def test_every_solver_solves_the_shared_problem(name, kind):
    info = pbf.get_plugin("solver", name)
    pb = _toy_problem(kind)
    p = np.array([0.3, 0.0, 1.0, 0.0])
    res = info.build().solve(pb, np.asarray(pb.guess(p)).ravel(), p)
    assert res.converged, res
    assert np.abs(res.x - 1.3).max() < SOLVE_TOL
    assert res.iterations > 0 and res.evaluations >= res.iterations
    assert res.grad_norm <= 1e-6 and np.isfinite(res.objective)


def _pbad_solvers():
    """The solvers that take PBAD's problems (minimize or least squares; pgm / zopgm solve NMDP's only)."""
    return [n for n in _solvers()
            if {str(k) for k in pbf.get_plugin("solver", n).meta["problems"]} & {"minimize", "least_squares"}]


@pytest.mark.parametrize("name", _pbad_solvers())
def test_every_solver_agrees_on_a_pbad_step(name):
    """One CHAIN-5 step at dt = 0.05 in the residual form (every solver takes it), and in the energy form for
    the solvers that minimise: all reach the same q_{k+1}."""
    m = pbf.models.chain(5)
    info = pbf.get_plugin("solver", name)
    kinds = {str(k) for k in info.meta["problems"]}
    sim_ref = pbf.Simulator(m, "pbad", solver="lm", dt=0.05)
    s = sim_ref.initial_state(pbf.models.chain_q0(m))
    s, _ = sim_ref.advance(s, 0.0)                 # one step in, so the chain moves
    ref, _ = sim_ref.advance(s, 0.05)
    for objective in ("energy", "residual"):
        if objective == "energy" and "minimize" not in kinds:
            continue
        sim = pbf.Simulator(m, "pbad", solver=name, dt=0.05, objective=objective)
        got, st = sim.advance(s, 0.05)
        assert st.converged
        assert np.abs(got[:m.nq] - ref[:m.nq]).max() < 1e-7, (name, objective)


def test_nonconvergence_is_reported_not_hidden():
    pb = _toy_problem(ProblemKind.MINIMIZE)
    p = np.array([0.0, 0.0, 1.0, 0.0])
    for name, opts in (("lm", {"max_iter": 2}), ("lbfgs", {"max_iter": 2})):
        res = pbf.get_plugin("solver", name).build(**opts).solve(pb, np.asarray(pb.guess(p)).ravel(), p)
        assert not res.converged and res.reason == "max_iter" and res.iterations == 2


def test_least_squares_local_minimum_is_not_a_solution():
    """r = [x^2 + 1]: stationary at x = 0 with residual 1 -- a local minimum of Eq. 7, not a step."""
    x, p = ca.SX.sym("x", 1), ca.SX.sym("p", 4)
    z = ca.Function("init", list(init_symbols(1, 0)), [ca.DM.zeros(2)])
    pb = StepProblem(integrator="toy", kind=ProblemKind.LEAST_SQUARES, config=StepConfig(dt=1.0), nq=1, nx=1,
                     ns=2, init=z, params=standard_params(2), guess=ca.Function("g", [p], [ca.DM(0.5)]),
                     advance=ca.Function("a", [x, p], [ca.vertcat(x, x)]),
                     residual=ca.Function("r", [x, p], [x**2 + 1]))
    for name in ("lm", "jtj_lm", "lbfgs"):
        res = pbf.get_plugin("solver", name).build().solve(pb, np.array([0.5]), np.zeros(4))
        # LM creeps towards x = 0 (a tenfold decrease of the gradient, never of f): the stall test stops it
        assert not res.converged and res.reason in ("residual", "stalled"), (name, res)
        assert res.iterations <= 300
    res = pbf.get_plugin("solver", "jtj_lm").build(stall=5).solve(pb, np.array([0.5]), np.zeros(4))
    assert not res.converged and res.reason == "stalled" and res.iterations == 5, res
    res = pbf.get_plugin("solver", "jtj_lm").build(stall=0, max_iter=1000).solve(pb, np.array([0.5]), np.zeros(4))
    assert not res.converged and res.reason == "residual" and res.iterations > 30, res


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_stall_option_is_validated(bad):
    with pytest.raises(StepError, match="stall must be a non-negative integer"):
        pbf.get_plugin("solver", "jtj_lm").build(stall=bad)


def test_simulator_failure_policies():
    m = pbf.models.chain(3)
    q0 = pbf.models.chain_q0(m)
    opts = {"max_iter": 1}
    with pytest.raises(pbf.StepFailure, match=r"did not converge after \d+ halvings"):
        pbf.Simulator(m, "pbad", solver="lm", dt=0.05, solver_options=opts, on_failure="raise").rollout(q0, steps=3)
    with pytest.warns(RuntimeWarning, match="steps did not converge"):
        tr = pbf.Simulator(m, "pbad", solver="lm", dt=0.05, solver_options=opts, on_failure="continue",
                           max_halvings=0).rollout(
            q0, steps=3)
    assert not tr.stats["converged"].all() and tr.info["unconverged_steps"] > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = pbf.Simulator(m, "pbad", solver="lm", dt=0.05, solver_options=opts,
                           on_failure="continue", max_halvings=2).rollout(q0, steps=2)
    assert (tr.stats["halvings"] >= 1).all()        # each step was retried as half steps, counted
    assert tr.stats["iterations"].min() >= 3         # the failed try plus both halves


def test_options_are_validated():
    with pytest.raises(StepError, match=r"unknown option\(s\) \['tolerance'\] \(allowed: .*gtol"):
        pbf.get_plugin("solver", "lm").build(tolerance=1e-3)
    with pytest.raises(StepError, match="max_iter must be a positive integer, got 0"):
        pbf.get_plugin("solver", "lbfgs").build(max_iter=0)
    with pytest.raises(StepError, match="gtol must be a non-negative finite number"):
        pbf.get_plugin("solver", "jtj_lm").build(gtol=float("nan"))


def test_solver_problem_kind_mismatch_is_explained():
    m = pbf.models.chain(2)
    with pytest.raises(StepError, match="solver 'jtj_lm' solves least_squares problems, but integrator 'pbad'"):
        pbf.Simulator(m, "pbad", solver="jtj_lm", objective="energy", dt=0.05)
    # "auto" objective picks the residual form for a least-squares solver
    assert pbf.Simulator(m, "pbad", solver="jtj_lm", dt=0.05).problem.kind is ProblemKind.LEAST_SQUARES
    with pytest.raises(pbf.UnknownPluginError, match="unknown solver 'newton' .*jtj_lm, lbfgs, lm"):
        pbf.Simulator(m, "pbad", solver="newton", dt=0.05)


def test_init_with_the_old_five_inputs_is_refused():
    """``init`` takes (q0, qd0, t0, dt, u0, q_start, q_check, q_reverse); a five-input one is a clear error,
    not a silently ignored start."""
    q0, qd0, t0, dt, u0, *_ = init_symbols(1, 0)
    x, p = ca.SX.sym("x", 1), ca.SX.sym("p", 4)
    with pytest.raises(StepError, match=r"init must take 8 inputs .*q_start, q_check, q_reverse.*got 5"):
        StepProblem(integrator="toy", kind=ProblemKind.LEAST_SQUARES, config=StepConfig(dt=1.0), nq=1, nx=1,
                    ns=2, init=ca.Function("init", [q0, qd0, t0, dt, u0], [ca.vertcat(q0, qd0)]),
                    params=standard_params(2), guess=ca.Function("g", [p], [ca.DM(0.5)]),
                    advance=ca.Function("a", [x, p], [ca.vertcat(x, x)]), residual=ca.Function("r", [x, p], [x]))


def test_lm_does_not_accept_a_trial_point_where_the_objective_blows_up():
    """A trial point with f = 1e20 makes ``10 eps (|f| + |f_trial|)`` large; LM must neither take that step
    (its gradient is smaller there) nor call the start a rounding-floor ("precision") stop."""
    x, p = ca.SX.sym("x", 1), ca.SX.sym("p", 4)
    f = 0.5 * (x - 1) ** 2 + 1e20 * ca.exp(-(((x - 1) / 0.05) ** 8))
    q0, qd0, t0, dt, u0, *runs = init_symbols(1, 0)
    pb = StepProblem(integrator="toy", kind=ProblemKind.MINIMIZE, config=StepConfig(dt=1.0), nq=1, nx=1, ns=2,
                     init=ca.Function("init", [q0, qd0, t0, dt, u0, *runs], [ca.vertcat(q0, qd0)]),
                     params=standard_params(2), guess=ca.Function("g", [p], [ca.DM(0.0)]),
                     advance=ca.Function("a", [x, p], [ca.vertcat(x, x)]), objective_fn=ca.Function("f", [x, p], [f]))
    res = pbf.get_plugin("solver", "lm").build(max_step=10.0).solve(pb, np.array([0.0]), np.zeros(4))
    assert res.objective < 1.0
    assert not (res.converged and res.reason == "precision" and abs(res.x[0]) < 1e-12)
