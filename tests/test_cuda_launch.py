"""The per-iteration CUDA batch (issue 22 item 2) run on its host build: one LM iteration per launch for every
trajectory, the controller in structure-of-arrays layout, the host looping launches until every trajectory
is done. Its batch equals the C backend's bit for bit, trajectory by trajectory, halved and failed ones
included (the arithmetic is pbf_lm's, operation for operation)."""

from __future__ import annotations

import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.codegen.cuda_launch import HostIterBatch, launch_bound, launch_loop
from pbframework.codegen.step_library import DriverError
from pbframework.codegen.step_runner import CRunner

FIELDS = ("states", "iterations", "converged", "halvings", "evaluations", "grad_norm", "depth", "residual")


def _both(order, solver, max_iter, real="double", on_failure="stop", steps=40):
    m = models.chain(3)
    sim = pbf.Simulator(m, "pbad", order=order, dt=0.05, solver=solver, solver_options={"max_iter": max_iter},
                        max_halvings=2)
    rng = np.random.default_rng(7)
    Q0 = models.chain_q0(m) + rng.normal(scale=0.3, size=(6, m.nq))
    QD0 = rng.normal(scale=2.0, size=(6, m.nv))
    opts = dict(model=m, max_halvings=2, real=real, on_failure=on_failure)
    runner = CRunner(sim.problem, sim.solver_name, {"max_iter": max_iter}, **opts)
    ref = runner.rollout_batch(Q0, QD0, 0.0, 0.05, steps, threads=1)
    host = HostIterBatch(sim.problem, sim.solver_name, {"max_iter": max_iter}, max_halvings=2, real=real,
                         on_failure=on_failure, plan=runner.plan)
    return host, host.rollout_batch(Q0, QD0, 0.0, 0.05, steps), ref


@pytest.mark.parametrize("order,solver,max_iter,real,on_failure", [
    (2, "lm", 100, "double", "stop"),            # minimize, Marquardt-scaled / metric-damped lm
    (3, "jtj_lm", 100, "double", "stop"),        # least squares, Gauss-Newton; one trajectory fails
    (3, "jtj_lm", 3, "double", "stop"),          # steps halve, trajectories stop unconverged
    (3, "lm", 3, "double", "stop"),              # hybrid lm (exact / Gauss-Newton switch), halving
    (3, "jtj_lm", 3, "double", "continue"),      # unconverged steps recorded and passed
    (2, "lm", 100, "float", "stop"),             # single precision
])
def test_launch_loop_equals_the_c_backend_trajectory_by_trajectory(order, solver, max_iter, real, on_failure):
    host, got, ref = _both(order, solver, max_iter, real, on_failure)
    np.testing.assert_array_equal(got.steps_done, ref.steps_done)
    np.testing.assert_array_equal(got.status, ref.status)
    for i in range(len(ref.steps_done)):
        for name in FIELDS:
            np.testing.assert_array_equal(getattr(got, name)[i], getattr(ref, name)[i], err_msg=f"{name}, trajectory {i}")
    # one iteration per launch: the batch takes as many launches as its busiest trajectory iterates
    assert host.launches == max(1, int(ref.iterations.sum(axis=1).max()))
    if max_iter == 3:
        assert (ref.halvings > 0).any()
        if on_failure == "stop":
            assert (np.asarray(ref.status) == "failed").any()
        else:
            assert (~ref.converged).any() and (np.asarray(ref.status) == "done").all()


def test_launch_loop_stops_at_its_bound():
    calls = []

    def never_done():
        calls.append(1)
        return 3

    with pytest.raises(RuntimeError, match="3 trajectories still running after 5 launches"):
        launch_loop(never_done, 5)
    assert len(calls) == 5
    assert launch_loop(lambda: 0, 5) == 1
    assert launch_bound(10, 100, 2) >= 10 * 100 * 7


def test_lbfgs_is_refused_with_the_solvers_it_runs():
    m = models.chain(3)
    sim = pbf.Simulator(m, "pbad", order=2, dt=0.05, solver="lbfgs")
    with pytest.raises(DriverError, match="lm, jtj_lm; got 'lbfgs'"):
        HostIterBatch(sim.problem, "lbfgs")
