"""The ``c`` backend (generated C solver driver) against the CasADi-VM reference path.

Every comparison runs the same step problem through :class:`pbframework.simulate.Simulator` (CasADi VM,
Python solver) and through the C backend's runner. Tolerance: 1e-10 relative per state (``REL``), the
issue's criterion. The Python solvers use the C driver's dense arithmetic (pbframework.linalg), so the paths
differ only where C evaluates directional instead of flattened derivatives (large problems; ~1e-13), and are
otherwise identical (tests/test_backend_agreement.py).
Rollout comparisons use well-conditioned steps: where an LM step ends with its gradient just above
``gtol``, whether the last trial point is accepted depends on rounding of the objective, and the two paths
may then legitimately differ by one Newton step (~``gtol`` / curvature).

Compile time is budgeted: small models, one library per configuration, reused through the build cache.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
import warnings

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework.codegen.build import build_shared
from pbframework.codegen.step_library import emit_step_library, emit_sx_kernel, plan_kernels
from pbframework.codegen.emit import CSource
from pbframework.registry import get_plugin
from pbframework.simulate import Simulator
from pbframework.step import StepError

REL = 1e-10
"""Agreement of the C backend with the CasADi VM: relative, per state."""


def rel(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def _chain(n):
    m = pbf.models.chain(n)
    return m, pbf.models.chain_q0(m), ["gravity"]


def _swimmer():
    m = pbf.models.swimmer(4)
    q0 = np.zeros(m.nq)
    q0[6:] = [0.3, -0.2, 0.1]
    forces = [("drag", {"coefficient": 0.5, "normal_coefficient": 2.0}),
              ("joint_torque", {"torque": lambda t: 0.5 * ca.sin(3 * t)})]
    return m, q0, forces


def _spider():
    m = pbf.models.spider()
    return m, pbf.models.spider_q0(m, clearance=0.02), ["gravity", "penalty_contact"]


CASES = {
    # name: (model factory, integrator, order, solver, dt)
    "chain5-pbad2-lm": (lambda: _chain(5), "pbad", 2, "lm", 0.02),
    "swimmer-pbad3-jtj_lm": (_swimmer, "pbad", 3, "jtj_lm", 0.02),
    "spider-pbad2-lm": (_spider, "pbad", 2, "lm", 0.01),
}

_SETUPS: dict = {}


def setup(case: str):
    """(model, q0, simulator, C runner) for a case, built once per session (the library via the cache)."""
    if case not in _SETUPS:
        factory, integrator, order, solver, dt = CASES[case]
        model, q0, forces = factory()
        sim = Simulator(model, integrator, order=order, solver=solver, dt=dt, forces=forces)
        runner = get_plugin("backend", "c").build(sim.problem, solver, model=model)
        _SETUPS[case] = (model, q0, sim, runner)
    return _SETUPS[case]


@pytest.mark.parametrize("case", list(CASES))
def test_vm_and_c_agree_on_the_start_from_a_moving_state(case):
    """``init`` with PBAD's history node from RK4 steps of the exact motion: the C loop and the Python one
    (``pbframework.step.start_configurations``) agree, with a velocity and at t0 != 0 (time-dependent forces)."""
    model, q0, sim, runner = setup(case)
    dt = sim.config.dt
    qd0 = np.linspace(-0.3, 0.3, model.nq)
    s_vm = sim.initial_state(q0, qd0, t0=0.3)
    assert rel(runner.init(q0, qd0, 0.3, dt, sim.inputs(0.3, q0, qd0)), s_vm) <= REL
    nq = model.nq
    assert np.abs(s_vm[2 * nq:] - (q0 + sim.problem.start_offset * dt * qd0)).max() > 1e-9, \
        "the history node is the exact motion's, not the chord"


@pytest.mark.parametrize("backend", ["casadi", "c"])
def test_start_keeps_the_taylor_node_where_the_backward_motion_blows_up(backend):
    """Damping of 1e30 integrated backwards overflows the RK4 start steps: both backends keep the local
    third-order Taylor node as the history node, and the rollout goes on."""
    m = pbf.models.chain(2)
    forces = ["gravity", ("joint_damping", {"damping": 1e30})]
    sim = Simulator(m, "pbad", order=2, dt=0.1, forces=forces, backend=backend)
    q0, qd0 = pbf.models.chain_q0(m), np.linspace(-0.5, 0.5, m.nq)
    qs, _, _ = pbf.step.start_configurations(sim.problem, q0, qd0, 0.0, 0.1)
    assert not np.all(np.isfinite(qs))
    q, v = ca.SX.sym("q", m.nq), ca.SX.sym("v", m.nq)
    taylor = ca.Function("t", [q, v], [pbf.step.taylor_start(m, sim.forces, q, v, 0.0, -0.1)])
    s0 = sim.initial_state(q0, qd0) if backend == "casadi" else sim.runner.init(q0, qd0, 0.0, 0.1)
    assert np.all(np.isfinite(s0))
    assert rel(s0[2 * m.nq:], np.asarray(taylor(q0, qd0)).ravel()) <= REL
    tr = sim.rollout(q0, qd0, steps=3)
    assert not tr.diverged and np.all(np.isfinite(tr.q))


@pytest.mark.parametrize("case", list(CASES))
def test_vm_and_c_agree_per_step(case):
    model, q0, sim, runner = setup(case)
    dt = sim.config.dt
    s = sim.initial_state(q0)
    assert rel(runner.init(q0, np.zeros(model.nq), 0.0, dt), s) <= REL
    for k in range(5):
        s_vm, st_vm = sim.advance(s, k * dt)
        s_c, st_c = runner.step(s, k * dt, dt)
        assert rel(s_c, s_vm) <= REL, f"step {k}"
        assert st_c["iterations"] == st_vm.iterations and st_c["converged"] == st_vm.converged
        assert st_c["evaluations"] == st_vm.evaluations and st_c["halvings"] == st_vm.halvings
        s = s_vm


@pytest.mark.parametrize("case", list(CASES))
def test_vm_and_c_agree_per_rollout(case):
    model, q0, sim, runner = setup(case)
    steps = 8
    traj = sim.rollout(q0, steps=steps)
    out = runner.rollout(q0, np.zeros(model.nq), 0.0, sim.config.dt, steps)
    assert out.status == "done" and out.steps_done == steps
    for k in range(steps + 1):
        assert rel(out.q[k], traj.q[k]) <= REL and rel(out.qd[k], traj.qd[k]) <= REL, f"state {k}"
    np.testing.assert_array_equal(out.iterations, traj.stats["iterations"])
    np.testing.assert_array_equal(out.converged, traj.stats["converged"])


@pytest.mark.parametrize("order,solver", [(3, "lm"), (3, "jtj_lm"), (2, "lbfgs")])
def test_solvers_agree_on_one_solve(order, solver):
    model, q0, _ = _chain(3)
    sim = Simulator(model, "pbad", order=order, solver=solver, dt=0.02)
    runner = get_plugin("backend", "c").build(sim.problem, solver, model=model)
    pb = sim.problem
    s = sim.initial_state(q0)
    p = np.asarray(pb.params(s, 0.0, 0.02, np.zeros(0))).ravel()
    x0 = np.asarray(pb.guess(p)).ravel()
    r_vm = sim.solver.solve(pb, x0, p)
    r_c = runner.solve(x0, p)
    assert rel(r_c.x, r_vm.x) <= REL
    assert (r_c.iterations, r_c.converged, r_c.reason, r_c.evaluations) == \
        (r_vm.iterations, r_vm.converged, r_vm.reason, r_vm.evaluations)


@pytest.mark.parametrize("solver, order", [("jtj_lm", 3), ("lm", 3), ("lm", 2)])
def test_directional_and_full_derivatives_agree(solver, order):
    """Both derivative modes, on least-squares problems (order 3; ``lm``: the hybrid with the second-order
    term) and on the order-2 energy (``lm``: gradient and Hessian-vector kernels), against each other and
    the VM. Building is itself a check: the timing helper once referenced a gradient kernel that
    least-squares libraries do not have, and the library failed to load (undefined symbol)."""
    model, q0, forces = _chain(3)
    sim = Simulator(model, "pbad", order=order, solver=solver, dt=0.02, forces=forces)
    build = get_plugin("backend", "c").build
    full = build(sim.problem, solver, model=model, derivatives="full")
    directional = build(sim.problem, solver, model=model, derivatives="directional",
                        directions=3)
    assert full.plan.derivatives == "full" and directional.plan.derivatives == "directional"
    a = full.rollout(q0, np.zeros(model.nq), 0.0, 0.02, 6)
    b = directional.rollout(q0, np.zeros(model.nq), 0.0, 0.02, 6)
    traj = sim.rollout(q0, steps=6)
    assert rel(a.q, b.q) <= REL and rel(a.qd, b.qd) <= REL
    assert rel(b.q, traj.q) <= REL and rel(b.qd, traj.qd) <= REL
    np.testing.assert_array_equal(b.iterations, traj.stats["iterations"])


@pytest.mark.parametrize("solver, objective", [("lbfgs", "energy"), ("jtj_lm", "residual")])
def test_directional_metric_matches_the_vm(solver, objective):
    """The metric from inverse dynamics (``M V``, 4 seed columns) with a single derivative seed column: the
    seed and output buffers must hold the wider of the two (they once held only the derivatives', and the
    metric's seeds overlapped its outputs: a wrong mass matrix, 36000 L-BFGS iterations per CHAIN-40 step)."""
    model, q0, forces = _chain(3)
    sim = Simulator(model, "pbad", order=2, solver=solver, objective=objective, dt=0.05, forces=forces)
    runner = get_plugin("backend", "c").build(sim.problem, solver, model=model, metric="directional",
                                              derivatives="directional", directions=1)
    assert runner.plan.metric == "directional" and runner.plan.metric_directions > runner.plan.directions
    traj = sim.rollout(q0, steps=6)
    out = runner.rollout(q0, np.zeros(model.nq), 0.0, 0.05, 6)
    assert rel(out.q, traj.q) <= REL and rel(out.qd, traj.qd) <= REL
    np.testing.assert_array_equal(out.iterations, traj.stats["iterations"])


def test_explicit_integrator_runs_natively():
    model, q0, forces = _chain(3)
    sim = Simulator(model, "rk4", dt=0.005, forces=forces)
    runner = get_plugin("backend", "c").build(sim.problem)
    assert runner.plan.solver == ""
    traj = sim.rollout(q0, steps=20)
    out = runner.rollout(q0, np.zeros(model.nq), 0.0, 0.005, 20)
    assert rel(out.q, traj.q) <= 1e-13 and rel(out.qd, traj.qd) <= 1e-13


def test_failure_policies_match_the_simulator():
    """max_iter=1 forces failures: halving's recursion and the continue / raise policies behave as in Python."""
    model, q0, forces = _chain(3)
    opts = {"max_iter": 1}
    build = get_plugin("backend", "c").build
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sim = Simulator(model, "pbad", order=2, solver="lm", dt=0.05, forces=forces, solver_options=opts,
                        on_failure="continue", max_halvings=2)
        traj = sim.rollout(q0, steps=4)
    runner = build(sim.problem, "lm", solver_options=opts, on_failure="continue", max_halvings=2)
    out = runner.rollout(q0, np.zeros(model.nq), 0.0, 0.05, 4)
    assert traj.stats["halvings"].sum() > 0
    vm = get_plugin("backend", "casadi").build(sim.problem, "lm", solver_options=opts, on_failure="continue",
                                                max_halvings=2)
    ref = vm.rollout(q0, np.zeros(model.nq), 0.0, 0.05, 4)     # the VM backend runner is the Simulator's loop
    np.testing.assert_array_equal(ref.q, traj.q)
    np.testing.assert_array_equal(ref.halvings, traj.stats["halvings"])
    np.testing.assert_array_equal(out.halvings, traj.stats["halvings"])
    np.testing.assert_array_equal(out.iterations, traj.stats["iterations"])
    assert rel(out.q, traj.q) <= REL
    record = build(sim.problem, "lm", solver_options=opts, on_failure="continue", max_halvings=0)
    out_r = record.rollout(q0, np.zeros(model.nq), 0.0, 0.05, 4)
    assert out_r.steps_done == 4 and not out_r.converged.all() and out_r.halvings.sum() == 0
    strict = build(sim.problem, "lm", solver_options=opts, on_failure="raise")
    out_s = strict.rollout(q0, np.zeros(model.nq), 0.0, 0.05, 4)
    assert out_s.status == "failed" and out_s.steps_done == 0


def test_order3_retries_and_stall_stops_match_the_simulator():
    """Order 3 under forced failures (the second-order history restart, restart(s, ratio, dt)) and a solve
    run to its rounding floor (the stall stop) give the same numbers and reasons in C as in Python."""
    model, q0, forces = _chain(3)
    opts = {"max_iter": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sim = Simulator(model, "pbad", order=3, solver="jtj_lm", dt=0.05, forces=forces, solver_options=opts,
                        on_failure="continue", max_halvings=2)
        traj = sim.rollout(q0, steps=4)
    runner = get_plugin("backend", "c").build(sim.problem, "jtj_lm", solver_options=opts, on_failure="continue",
                                              max_halvings=2)
    out = runner.rollout(q0, np.zeros(model.nq), 0.0, 0.05, 4)
    assert traj.stats["halvings"].sum() > 0
    np.testing.assert_array_equal(out.halvings, traj.stats["halvings"])
    np.testing.assert_array_equal(out.iterations, traj.stats["iterations"])
    assert rel(out.q, traj.q) <= REL and rel(out.qd, traj.qd) <= REL

    floor = {"gtol": 0.0, "xtol": 0.0, "residual_tol": 0.0, "stall": 2}
    sim = Simulator(model, "pbad", order=3, solver="jtj_lm", dt=0.02, forces=forces, solver_options=floor)
    runner = get_plugin("backend", "c").build(sim.problem, "jtj_lm", solver_options=floor, model=model)
    pb = sim.problem
    p = np.asarray(pb.params(sim.initial_state(q0), 0.0, 0.02, np.zeros(0))).ravel()
    x0 = np.asarray(pb.guess(p)).ravel()
    r_vm, r_c = sim.solver.solve(pb, x0, p), runner.solve(x0, p)
    assert r_vm.converged and r_vm.reason in ("stalled", "precision"), r_vm
    assert (r_c.iterations, r_c.converged, r_c.reason) == (r_vm.iterations, r_vm.converged, r_vm.reason)
    assert rel(r_c.x, r_vm.x) <= REL


def test_batch_rollouts_equal_single_rollouts(rng):
    model, q0, forces = _chain(3)
    sim = Simulator(model, "pbad", order=2, solver="lm", dt=0.02, forces=forces)
    runner = get_plugin("backend", "c").build(sim.problem, "lm", model=model)
    M = 6
    Q0 = q0 + 0.2 * rng.standard_normal((M, model.nq))
    QD0 = 0.1 * rng.standard_normal((M, model.nq))
    batch = runner.rollout_batch(Q0, QD0, 0.0, 0.02, 10, threads=2)
    assert batch.threads == 2 and batch.q.shape == (M, 11, model.nq)
    for m in range(M):
        one = runner.rollout(Q0[m], QD0[m], 0.0, 0.02, 10)
        assert np.array_equal(batch.q[m], one.q) and np.array_equal(batch.qd[m], one.qd)
        assert np.array_equal(batch.iterations[m], one.iterations)


@pytest.mark.parametrize("order,solver", [(2, "lm"), (3, "jtj_lm")])
def test_float_build_agrees_with_double(order, solver):
    """Single precision (tolerances raised to its resolution) stays within 1e-4 of double, per step and
    over a short rollout, at the large steps position-based integrators are built for."""
    model, q0, forces = _chain(3)
    dt = 0.05
    sim = Simulator(model, "pbad", order=order, solver=solver, dt=dt, forces=forces)
    build = get_plugin("backend", "c").build
    f32 = build(sim.problem, solver, real="float", model=model)
    f64 = build(sim.problem, solver, model=model)
    assert f32.dtype == np.float32 and f32.source.sha256 == f64.source.sha256   # same source, other flags
    s = sim.initial_state(q0)
    for k in range(5):
        a, st = f32.step(s, k * dt, dt)
        b, _ = f64.step(s, k * dt, dt)
        assert st["converged"] and rel(a, b) <= 1e-4
        s = b
    a = f32.rollout(q0, np.zeros(model.nq), 0.0, dt, 10)
    b = f64.rollout(q0, np.zeros(model.nq), 0.0, dt, 10)
    assert a.status == "done" and a.converged.all()
    assert rel(a.q, b.q) <= 1e-4 and rel(a.qd, b.qd) <= 1e-4


def test_emitting_is_pure_deterministic_and_portable():
    model, _, forces = _chain(2)
    sim = Simulator(model, "pbad", order=2, solver="lm", dt=0.02, forces=forces)
    src, plan = emit_step_library(sim.problem, "lm", host=False)
    again, _ = emit_step_library(sim.problem, "lm", host=False)
    assert isinstance(src, CSource) and src.sha256 == again.sha256
    for host_only in ("malloc", "pthread", "printf", "fopen"):
        assert host_only not in src.text
    hosted, _ = emit_step_library(sim.problem, "lm", host=True)
    assert "pthread_create" in hosted.text
    assert plan.sizes["nx"] == model.nq and "pbfk_pre" in plan.instructions


def test_casadi_emitter_gives_the_same_results():
    model, q0, forces = _chain(2)
    sim = Simulator(model, "pbad", order=2, solver="lm", dt=0.02, forces=forces)
    build = get_plugin("backend", "c").build
    a = build(sim.problem, "lm", emitter="casadi").rollout(q0, np.zeros(model.nq), 0.0, 0.02, 5)
    b = build(sim.problem, "lm").rollout(q0, np.zeros(model.nq), 0.0, 0.02, 5)
    assert rel(a.q, b.q) <= 1e-14


def test_chunked_kernel_matches_the_vm_on_every_operation(tmp_path):
    x = ca.SX.sym("x", 3)
    outs = [ca.sin(x[0]) * ca.cos(x[1]) + ca.tan(x[2] / 4), x[0] ** 2.5 + ca.power(x[1], x[2]),
            ca.fmin(x[0], x[1]) - ca.fmax(x[1], x[2]), ca.if_else(x[0] > x[1], x[2], 0.0),
            ca.atan2(x[0], x[2]) + ca.sqrt(ca.fabs(x[1])) + ca.exp(-x[0]) + ca.log(1 + x[2] ** 2),
            ca.tanh(x[0]) + ca.sign(x[1]) + ca.floor(x[2]) + 1 / x[0] + ca.fmod(x[2], 0.7)]
    f = ca.Function("ops", [x], [ca.vertcat(*outs)])
    text, szw = emit_sx_kernel(f, "k_ops", chunk=16)
    wrapper = (f"#include <math.h>\n#define casadi_real double\n#define casadi_int long long int\n"
               f"#define PBF_NOINLINE __attribute__((noinline))\n{text}\n"
               f"int run(const double* x, double* y) {{ double w[{szw}]; const double* a[1] = {{x}}; "
               f"double* r[1] = {{y}}; return k_ops(a, r, 0, w, 0); }}\n")
    lib = build_shared(CSource("pbf_test_ops", wrapper, ("run",)), cache=tmp_path)
    run = ctypes.CDLL(str(lib.path)).run
    P = ctypes.POINTER(ctypes.c_double)
    for xv in ([0.7, -1.3, 2.1], [-0.4, 0.9, -3.3]):
        xa, ya = np.array(xv), np.zeros(6)
        run(xa.ctypes.data_as(P), ya.ctypes.data_as(P))
        np.testing.assert_array_equal(ya, np.asarray(f(xa)).ravel())


def test_unknown_solver_is_an_error_in_the_users_words():
    model, _, forces = _chain(2)
    sim = Simulator(model, "pbad", order=2, solver="lm", dt=0.02, forces=forces)
    with pytest.raises(StepError, match="implements the solvers lm, jtj_lm, lbfgs"):
        get_plugin("backend", "c").build(sim.problem, "newton")
    with pytest.raises(StepError, match="real must be 'double' or 'float'"):
        get_plugin("backend", "c").build(sim.problem, "lm", real="half")


def test_simulator_backend_c_rollout_and_batch(rng):
    model, q0, forces = _chain(3)
    vm = pbf.Simulator(model, "pbad", order=2, dt=0.02, forces=forces)
    c = pbf.Simulator(model, "pbad", order=2, dt=0.02, forces=forces, backend="c")
    a, b = vm.rollout(q0, steps=10), c.rollout(q0, steps=10)
    assert b.info["backend"] == "c" and b.steps == 10
    assert rel(b.q, a.q) <= REL and rel(b.qd, a.qd) <= REL and rel(b.energy, a.energy) <= REL
    Q0 = q0 + 0.1 * rng.standard_normal((4, model.nq))
    batch = c.rollout_batch(Q0, steps=10, threads=2)
    assert isinstance(batch, pbf.BatchTrajectory) and len(batch) == 4 and batch.info["threads"] == 2
    assert batch.energy.shape == (4, 11) and not batch.diverged.any()
    for m in range(4):
        one = c.rollout(Q0[m], steps=10)
        assert np.array_equal(batch.q[m], one.q) and np.array_equal(batch.energy[m], one.energy)
        assert np.array_equal(batch[m].stats["iterations"], one.stats["iterations"])
    serial = vm.rollout_batch(Q0[:2], steps=10)
    assert rel(serial.q, batch.q[:2]) <= REL


def test_native_rollout_with_progress_bar_is_identical(capsys, monkeypatch):
    """``progress=True`` runs the native rollout in pieces (to update the bar); the pieces continue exactly,
    with the step times of one uninterrupted rollout (a time-dependent torque sees the same t to the bit;
    a piece restarted at its own rounded start time did not)."""
    model, q0, forces = _chain(3)
    forces = forces + [("joint_torque", {"torque": lambda t: 5.0 * ca.sin(7.0 * t)})]
    c = pbf.Simulator(model, "pbad", order=2, dt=0.01, forces=forces, backend="c")
    one = c.rollout(q0, steps=250)
    calls = []
    native = c.runner.rollout
    monkeypatch.setattr(c.runner, "rollout", lambda *a, **kw: calls.append(a[4]) or native(*a, **kw))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)    # the bar draws on a terminal only
    bar = c.rollout(q0, steps=250, progress=True)
    assert "0/250" in capsys.readouterr().err
    assert len(calls) == 125 and sum(calls) == 250
    assert np.array_equal(bar.q, one.q) and np.array_equal(bar.qd, one.qd) and np.array_equal(bar.t, one.t)
    for name in ("iterations", "converged", "halvings", "evaluations", "grad_norm"):
        assert np.array_equal(bar.stats[name], one.stats[name]), name
    assert bar.stats["step_time"].shape == (250,) and bar.wall_time > 0


def test_simulator_backend_c_with_a_python_controller():
    """Force inputs computed by Python each step: the Simulator steps in Python, solves natively."""
    model, q0, _ = _chain(3)

    def controller(t, q, qd):
        return -2.0 * q[:2] - 0.5 * qd[:2]

    forces = ["gravity", ("joint_torque", {"controller": controller, "dofs": [0, 1]})]
    vm = pbf.Simulator(model, "pbad", order=2, dt=0.02, forces=forces)
    c = pbf.Simulator(model, "pbad", order=2, dt=0.02, forces=forces, backend="c")
    assert c.problem.nu == 2
    a, b = vm.rollout(q0, steps=8), c.rollout(q0, steps=8)
    assert rel(b.q, a.q) <= REL and rel(b.qd, a.qd) <= REL
    np.testing.assert_array_equal(b.stats["iterations"], a.stats["iterations"])


@pytest.mark.parametrize("order, solver, objective, derivatives", [
    (2, "lm", "energy", "full"), (2, "lm", "energy", "directional"), (3, "lm", "residual", "full"),
    (3, "lm", "residual", "directional"), (3, "jtj_lm", "residual", "full"),
    (3, "jtj_lm", "residual", "directional"), (2, "lbfgs", "energy", None), (2, "lbfgs", "residual", None)])
def test_step_library_source_is_warning_free(tmp_path, order, solver, objective, derivatives):
    """Every solver/derivative combination of the driver compiles with -Wall -Wextra -Werror: no call to a
    kernel the plan did not emit (an implicit declaration, an error from GCC 14 on), no unused variable."""
    model, _, forces = _chain(3)
    sim = Simulator(model, "pbad", order=order, solver=solver, objective=objective, dt=0.02, forces=forces)
    kw = {"derivatives": derivatives} if derivatives else {}
    plan = plan_kernels(sim.problem, solver, model=model, metric="directional", **kw)
    src, _ = emit_step_library(sim.problem, solver, plan=plan)
    path = tmp_path / "step.c"
    path.write_text(src.text)
    res = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror",
                          str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]


def test_time_kernel_factors_the_residual_weight_itself():
    """``CRunner.time_kernel`` on a weighted least-squares problem (order-3 collocation, W = M_k^-1) times a
    finite evaluation on a fresh runner (the weight's factor is computed for the given p, not inherited from an
    earlier call), and refuses an unknown kernel or a point where the objective is not finite."""
    model, q0, forces = _chain(3)
    sim = Simulator(model, "pbad", order=3, solver="jtj_lm", dt=0.01, forces=forces, backend="c")
    runner, pb, nq = sim.runner, sim.problem, model.nq
    assert runner.plan.weight
    s = runner.init(q0, np.zeros(nq), 0.0, 0.01)
    p = np.asarray(pb.params(s, 0.0, 0.01, sim.inputs(0.0, s[:nq], s[nq:2 * nq]))).ravel()
    x = np.asarray(pb.guess(p)).ravel()
    for what in ("gradient", "hessian", "solve"):
        assert runner.time_kernel(p, x, what, reps=3) > 0.0
    with pytest.raises(ValueError, match="what must be one of"):
        runner.time_kernel(p, x, "jacobian")
    with pytest.raises(ValueError, match="not finite"):
        runner.time_kernel(p, np.full_like(x, np.nan), "hessian", reps=1)
