"""Verdicts: step outcomes, run status, the failure policy and the divergence test, on both backends."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import pbframework as pbf
from pbframework.cli import main
from pbframework.step import StepError
from pbframework.verdict import DivergenceTest, FailurePolicy, Outcome, Status

DATA = Path(__file__).parent / "data"

FAILING = {"max_iter": 1}
"""One iteration per solve: every PBAD step of CHAIN-3 at dt = 0.05 s fails to converge."""


@pytest.fixture(scope="module")
def chain3():
    m = pbf.models.chain(3)
    return m, pbf.models.chain_q0(m)


def _quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*a, **kw)


@pytest.mark.parametrize("backend", ["casadi", "c"])
def test_stop_policy_ends_the_run_at_the_first_unconverged_step(chain3, backend):
    m, q0 = chain3
    sim = pbf.Simulator(m, "pbad", dt=0.05, solver_options=FAILING, max_halvings=1, backend=backend)
    with pytest.warns(RuntimeWarning, match="did not converge after 1 halvings; the run stopped there"):
        tr = sim.rollout(q0, steps=10)
    assert tr.status is Status.UNCONVERGED and not tr.ok
    assert tr.steps == 0 and tr.failure_time == 0.0          # the first step failed: only the start is kept
    fail = tr.info["failure"]
    assert fail["t"] == 0.0 and fail["halvings"] == 1 and fail["depth"] == 1 and not fail["converged"]
    assert fail["residual"] > 0 and fail["iterations"] >= 3
    assert tr.summary().startswith("Status: UNCONVERGED at t=0 s")


@pytest.mark.parametrize("backend", ["casadi", "c"])
def test_continue_policy_keeps_going_and_says_so(chain3, backend):
    m, q0 = chain3
    sim = pbf.Simulator(m, "pbad", dt=0.05, solver_options=FAILING, max_halvings=0, on_failure="continue",
                        backend=backend, energy_limit=None)
    tr = _quiet(sim.rollout, q0, steps=4)
    assert tr.steps == 4 and tr.status is Status.UNCONVERGED and tr.failure_time == 0.0
    assert (tr.stats["outcome"] == Outcome.UNCONVERGED).all() and (tr.stats["residual"] > 0).all()
    assert "kept: on_failure='continue'" in tr.summary()


def test_outcomes_record_halving_depth(chain3):
    """max_iter=3: a full step fails, halves converge: every step is HALVED with its depth recorded."""
    m, q0 = chain3
    fine = pbf.Simulator(m, "pbad", dt=0.05).rollout(q0, steps=4)
    assert fine.ok and (fine.stats["outcome"] == Outcome.CONVERGED).all() and (fine.stats["depth"] == 0).all()
    sim = pbf.Simulator(m, "pbad", dt=0.2, solver_options={"max_iter": 4}, max_halvings=4)
    tr = _quiet(sim.rollout, q0, steps=3)
    halved = tr.stats["outcome"] == Outcome.HALVED
    assert halved.any() and (tr.stats["depth"][halved] >= 1).all()
    assert (tr.stats["halvings"][halved] >= tr.stats["depth"][halved]).all()


def test_raise_policy_raises_after_the_halvings(chain3):
    m, q0 = chain3
    sim = pbf.Simulator(m, "pbad", dt=0.05, solver_options=FAILING, max_halvings=2, on_failure="raise")
    with pytest.raises(pbf.StepFailure, match=r"step at t=0 s \(dt=0.05\) did not converge after 3 halvings"):
        sim.rollout(q0, steps=3)


def test_policies_are_validated(chain3):
    m, _ = chain3
    with pytest.raises(StepError, match="on_failure='halve' is no longer a policy: halving is max_halvings"):
        pbf.Simulator(m, "pbad", dt=0.05, on_failure="halve")
    with pytest.raises(StepError, match="energy_limit must be a positive number"):
        pbf.Simulator(m, "pbad", dt=0.05, energy_limit=-1)
    assert FailurePolicy.parse("continue") is FailurePolicy.CONTINUE


@pytest.mark.parametrize("backend", ["casadi", "c"])
def test_energy_rise_is_divergence_for_a_model_without_energy_input(chain3, backend):
    """Forward Euler gains energy on a swinging chain: with a 1% limit the run ends diverged by energy,
    before the first state above the limit; the same run without the test continues."""
    m, q0 = chain3
    sim = pbf.Simulator(m, "forward_euler", dt=0.01, energy_limit=1.0, backend=backend)
    tr = sim.rollout(q0, duration=2.0)
    assert tr.status is Status.DIVERGED and tr.info["divergence"] == "energy"
    scale = sim.divergence_scale(q0)
    assert np.max(tr.energy - tr.energy[0]) <= 0.01 * scale
    assert tr.failure_time == pytest.approx(tr.t[-1] + 0.01)
    free = pbf.Simulator(m, "forward_euler", dt=0.01, energy_limit=None, backend=backend).rollout(q0, duration=2.0)
    assert free.ok and free.steps == 200
    assert np.max(free.energy[:tr.steps + 2] - free.energy[0]) > 0.01 * scale    # the next state was above it
    assert np.array_equal(free.q[:tr.steps + 1], tr.q)


def test_energy_test_is_off_where_a_force_adds_energy(chain3):
    m, q0 = chain3
    torque = ("joint_torque", {"torque": np.full(m.nq, 0.5)})
    sim = pbf.Simulator(m, "rk4", dt=0.01, forces=["gravity", torque], energy_limit=1.0)
    assert not sim.energy_checked
    assert sim.rollout(q0, duration=0.5).ok


def test_divergence_test_rows():
    test = DivergenceTest(nq=1, max_speed=10.0, energy_limit=1.0, energy0=0.0)
    states = np.array([[0.0, 1.0], [0.0, 2.0], [0.0, 20.0], [np.nan, 0.0]])
    assert test.first_bad(states, np.zeros(4)) == (2, "speed")
    assert test.first_bad(states[[0, 3]], np.zeros(2)) == (1, "non_finite")
    assert test.first_bad(states[:2], np.array([0.5, 1.5])) == (1, "energy")
    assert test.first_bad(states[:2], np.array([0.5, np.nan])) == (1, "energy")
    assert test.first_bad(states[:2], np.array([0.5, 0.9])) == (None, None)


def test_batch_trajectories_carry_their_own_status(chain3):
    m, q0 = chain3
    sim = pbf.Simulator(m, "forward_euler", dt=0.01, energy_limit=1.0, backend="c")
    hanging = np.zeros(m.nq)
    hanging[0] = np.pi / 2                              # the second hangs at rest: nothing happens
    Q0 = np.stack([q0, hanging])
    batch = sim.rollout_batch(Q0, duration=2.0)
    assert list(batch.status) == ["diverged", "ok"]
    single = sim.rollout(q0, duration=2.0)
    assert batch.steps_done[0] == single.steps and batch[0].status is Status.DIVERGED
    assert batch.failure_time[0] == pytest.approx(single.failure_time) and np.isnan(batch.failure_time[1])
    assert batch.summary().startswith("Status: 1 of 2 ok, 0 unconverged, 1 diverged.")


def test_cli_exit_status_and_saved_verdict(tmp_path, capsys):
    out, plot = tmp_path / "run.npz", tmp_path / "energy.png"
    code = main(["simulate", "chain", "--links", "3", "--dt", "0.05", "--duration", "0.5", "--max-iter", "1",
                 "--max-halvings", "0", "--no-progress", "--out", str(out), "--plot", str(plot)])
    captured = capsys.readouterr()
    assert code == 3
    assert captured.out.startswith("Status: UNCONVERGED at t=0 s")
    lines = [ln for ln in captured.err.splitlines() if ln.startswith("pbf: run ended")]
    assert lines == ["pbf: run ended unconverged at t=0 s (first failure; exit status 3)"]
    with np.load(out) as z:
        info = json.loads(str(z["info"]))
    assert info["status"] == "unconverged" and info["failure_time"] == 0.0 and plot.stat().st_size > 0
    assert pbf.Trajectory.load(out).status is Status.UNCONVERGED
    assert main(["simulate", "chain", "--links", "3", "--dt", "0.05", "--duration", "0.2", "--no-progress"]) == 0
    assert main(["simulate", "chain", "--links", "3", "--integrator", "forward_euler", "--dt", "0.01",
                 "--duration", "2", "--energy-limit", "1", "--no-progress"]) == 1
    assert "pbf: run ended diverged at t=" in capsys.readouterr().err


def test_expected_energy_from_the_integrator_and_the_forces():
    from pbframework.verdict import expected_energy

    m = pbf.models.chain(2)
    q0 = pbf.models.chain_q0(m)
    cases = {("pbad", 2, ("gravity",)): "the integrator dissipates energy",
             ("pbad", 3, ("gravity",)): "the integrator conserves energy",
             ("semi_implicit_euler", None, ("gravity",)): "the integrator conserves energy",
             ("rk4", None, ("gravity",)): "the integrator lets energy drift",
             ("pbad", 3, ("gravity", "joint_damping")): "falls (joint_damping dissipates)",
             ("rk4", None, ("gravity", "joint_damping")): "lets energy drift (either way, growing with time), and "
                                                          "joint_damping dissipates"}
    for (integ, order, forces), words in cases.items():
        sim = pbf.Simulator(m, integ, order=order, dt=0.01, forces=list(forces))
        assert words in sim.expected_energy, (integ, forces, sim.expected_energy)
    tr = pbf.Simulator(m, "pbad", order=3, dt=0.01).rollout(q0, steps=2)
    assert "expected: the integrator conserves energy" in tr.summary()
    assert expected_energy(None, 2, []) == "not stated by the integrator"
    motor = type("Motor", (), {"name": "motor", "energy_input": True})()
    assert expected_energy("conserves", 3, [motor]) == "none: motor can add energy"


def test_energy_scale_of_a_model_that_is_not_a_chain_and_its_floor(tmp_path):
    """Off the chains: the larger of the initial kinetic energy and the potential's range over the run;
    without forces at rest there is no scale, and the drift is reported in joules."""
    from pbframework.result import ENERGY_SCALE_FLOOR

    m = pbf.load_urdf(DATA / "arm.urdf", limits=False)
    still = pbf.Simulator(m, "pbad", dt=0.01, forces=[]).rollout(np.zeros(m.nq), steps=3)
    assert not still.energy_scale_known and still.energy_scale == ENERGY_SCALE_FLOOR
    assert "J (no energy scale" in still.summary() and "% of the energy scale" not in still.summary()
    falling = pbf.Simulator(m, "pbad", order=3, dt=0.01).rollout(np.zeros(m.nq), steps=20)
    V = falling.potential
    assert falling.energy_scale_known
    assert falling.energy_scale == pytest.approx(max(falling.kinetic[0], V.max() - V.min()))
    assert "(initial kinetic energy or potential range;" in falling.summary()
    spinning = pbf.Simulator(m, "pbad", order=3, dt=0.01, forces=[]).rollout(np.zeros(m.nq), np.full(m.nq, 2.0),
                                                                             steps=5)
    assert spinning.energy_scale == pytest.approx(spinning.kinetic[0])


def test_no_energy_test_without_an_energy_scale():
    """No gravity, at rest: no scale for the energy limit, so no energy test (a joint-limit spring that
    starts compressed must not count as divergence)."""
    m = pbf.load_urdf(DATA / "arm.urdf")
    q0 = np.array([0.0, 0.0, -1e-3])                       # the slide 1 mm below its lower limit
    tr = pbf.Simulator(m, "pbad", dt=0.01, forces=[]).rollout(q0, steps=5)
    assert tr.ok, tr.status_line()
