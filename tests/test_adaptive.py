"""Adaptive step-size control (pbframework.adaptive): error against tolerance, dense output, verdicts."""

from __future__ import annotations

import numpy as np
import pytest

import pbframework as pbf
from pbframework.adaptive import AdaptiveOptions
from pbframework.cli import main
from pbframework.step import StepError
from pbframework.verdict import Status


@pytest.fixture(scope="module")
def chain3():
    m = pbf.models.chain(3)
    return m, pbf.models.chain_q0(m)


@pytest.fixture(scope="module")
def reference(chain3):
    """CHAIN-3 for 1 s by RK4 at 0.1 ms, sampled every 10 ms."""
    m, q0 = chain3
    return pbf.Simulator(m, "rk4", dt=1e-4).rollout(q0, duration=1.0).q[::100]


@pytest.mark.parametrize("order", [2, 3, 4])
def test_error_shrinks_with_the_tolerance(chain3, reference, order):
    """Each decade of rtol at least halves the error against the exact motion (RK4 at 0.1 ms)."""
    m, q0 = chain3
    errors, accepted = [], []
    for rtol in (1e-3, 1e-4, 1e-5):
        tr = pbf.Simulator(m, "pbad", order=order, dt=0.01, adaptive={"rtol": rtol}).rollout(q0, duration=1.0)
        assert tr.ok and tr.t.shape == (101,) and tr.info["adaptive"]["accepted"] > 0
        errors.append(float(np.max(np.abs(tr.q - reference))))
        accepted.append(tr.info["adaptive"]["accepted"])
    assert errors[1] <= errors[0] / 2 and errors[2] <= errors[1] / 2, errors
    assert accepted[0] < accepted[1] < accepted[2]


def test_dense_output_at_grid_points_equals_the_fixed_step_run(chain3):
    """Steps pinned to dt (h_max = dt, a tolerance every step meets): every step lands on a grid point,
    and the dense output there is the fixed-step run's state to the solver tolerance."""
    m, q0 = chain3
    fixed = pbf.Simulator(m, "pbad", order=3, dt=0.01).rollout(q0, steps=50)
    pinned = pbf.Simulator(m, "pbad", order=3, dt=0.01,
                           adaptive={"rtol": 1e3, "h_max": 0.01}).rollout(q0, steps=50)
    assert pinned.info["adaptive"]["accepted"] == 50 and pinned.info["adaptive"]["rejected"] == 0
    np.testing.assert_allclose(pinned.q, fixed.q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(pinned.qd, fixed.qd, rtol=0, atol=1e-8)


def test_dense_output_between_steps_is_the_polynomial(chain3, reference):
    """Large steps (median several output intervals): the interpolated grid states stay within the
    run's own error of the exact motion."""
    m, q0 = chain3
    tr = pbf.Simulator(m, "pbad", order=4, dt=0.01, adaptive={"rtol": 1e-5}).rollout(q0, duration=1.0)
    assert tr.info["adaptive"]["h_median"] > 0.015
    assert np.max(np.abs(tr.q - reference)) < 1e-3


def test_a_step_that_cannot_be_taken_stops_the_run(chain3):
    m, q0 = chain3
    never = {"max_iter": 2, "rtol": 0.0}                # no solve can meet ||r|| <= 0
    sim = pbf.Simulator(m, "pbad", order=3, dt=0.01, solver_options=never, adaptive={"h_min": 1e-4})
    with pytest.warns(RuntimeWarning, match="the run stopped there"):
        tr = sim.rollout(q0, duration=0.1)
    assert tr.status is Status.UNCONVERGED and tr.failure_time == 0.0 and tr.steps == 0
    assert tr.info["failure"]["halvings"] >= 4          # the rejected attempts down to h_min


def test_adaptive_options_are_validated(chain3):
    m, _ = chain3
    with pytest.raises(StepError, match="rtol must be a positive finite number"):
        pbf.Simulator(m, "pbad", dt=0.01, adaptive={"rtol": 0})
    with pytest.raises(StepError, match=r"unknown option\(s\) \['tol'\]"):
        pbf.Simulator(m, "pbad", dt=0.01, adaptive={"tol": 1e-3})
    with pytest.raises(StepError, match="has no local error estimate"):
        pbf.Simulator(m, "rk4", dt=0.01, adaptive=True)
    assert AdaptiveOptions.parse(False) is None and AdaptiveOptions.parse(True) == AdaptiveOptions()


def test_cli_adaptive(capsys):
    code = main(["simulate", "chain", "--links", "3", "--order", "3", "--dt", "0.05", "--duration", "1",
                 "--adaptive", "--rtol", "1e-5", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("Status: ok.") and "accepted" in out and "rejected" in out
    assert main(["simulate", "chain", "--links", "3", "--rtol", "1e-5"]) == 2
    assert "--rtol and --atol apply to --adaptive runs only" in capsys.readouterr().err


def _same_run(a, b, atol=0.0):
    """Two adaptive trajectories took the same steps and wrote the same rows (to ``atol``)."""
    assert a.status is b.status and a.failure_time == b.failure_time
    assert a.info["adaptive"]["h"] == pytest.approx(b.info["adaptive"]["h"], rel=1e-12, abs=0)
    assert a.info["adaptive"]["rejected"] == b.info["adaptive"]["rejected"]
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=atol)
    np.testing.assert_allclose(a.qd, b.qd, rtol=0, atol=atol)
    for name in ("iterations", "halvings", "evaluations", "converged"):
        np.testing.assert_array_equal(a.stats[name], b.stats[name])


@pytest.mark.parametrize("order", [2, 3])
def test_the_c_driver_runs_the_same_adaptive_loop(chain3, order):
    """pbf_adaptive.c takes the Python loop's decisions: the same accepted steps, rejections and rows (full
    derivatives: the kernels of the VM path, so the same bits)."""
    m, q0 = chain3
    kw = dict(order=order, dt=0.05, adaptive={"rtol": 1e-5})
    vm = pbf.Simulator(m, "pbad", **kw).rollout(q0, duration=1.0)
    c = pbf.Simulator(m, "pbad", backend="c", backend_options={"derivatives": "full"}, **kw).rollout(q0, duration=1.0)
    assert vm.ok and vm.info["adaptive"]["accepted"] > 20
    _same_run(vm, c)
    assert c.info["backend"] == "c"


def test_c_adaptive_in_pieces_equals_one_call(chain3):
    """The progress bar and the energy test run the native loop in pieces (the carried state, a small record
    of accepted steps): the same run as one call."""
    from pbframework.adaptive import AdaptiveOptions

    m, q0 = chain3
    sim = pbf.Simulator(m, "pbad", order=3, dt=0.05, backend="c", adaptive={"rtol": 1e-5})
    opts, runner = sim.adaptive, sim.runner
    whole = runner.rollout_adaptive(q0, np.zeros(m.nq), 0.0, 0.05, 20, opts)
    carry, j, rows, hist = None, 0, [], []
    while j < 20:
        out = runner.rollout_adaptive(q0, np.zeros(m.nq), 0.0, 0.05, 20, opts, carry=carry, first_row=j, rows=3,
                                      history_capacity=7)
        carry, j = out.carry, j + out.rows
        rows.append(out.states)
        hist.append(out.history)
        assert out.status == "done" and len(out.history) <= 7
    np.testing.assert_array_equal(np.concatenate(rows), whole.states)
    np.testing.assert_array_equal(np.concatenate(hist), whole.history)
    assert isinstance(opts, AdaptiveOptions)


def test_c_adaptive_failure_and_policy(chain3):
    """A step the solver cannot take even at h_min stops the C run as it stops the Python one."""
    m, q0 = chain3
    never = {"max_iter": 2, "rtol": 0.0}
    kw = dict(order=3, dt=0.01, solver_options=never, adaptive={"h_min": 1e-4})
    with pytest.warns(RuntimeWarning, match="the run stopped there"):
        vm = pbf.Simulator(m, "pbad", **kw).rollout(q0, duration=0.1)
    with pytest.warns(RuntimeWarning, match="the run stopped there"):
        c = pbf.Simulator(m, "pbad", backend="c", **kw).rollout(q0, duration=0.1)
    assert c.status is Status.UNCONVERGED and c.steps == 0
    assert c.info["failure"]["halvings"] == vm.info["failure"]["halvings"]
    assert c.info["failure"]["t"] == vm.info["failure"]["t"] and c.info["failure"]["dt"] == vm.info["failure"]["dt"]
    with pytest.raises(pbf.StepFailure):
        pbf.Simulator(m, "pbad", backend="c", on_failure="raise", **kw).rollout(q0, duration=0.1)


def test_cli_adaptive_c_backend(capsys):
    code = main(["simulate", "chain", "--links", "3", "--order", "3", "--dt", "0.05", "--duration", "1",
                 "--adaptive", "--rtol", "1e-5", "--backend", "c", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("Status: ok.") and "accepted" in out
