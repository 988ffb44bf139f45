"""Results: a batch of trajectories has the single trajectory's helpers (summary, save / load, energy plot)."""

from __future__ import annotations

import numpy as np
import pytest

import pbframework as pbf
from pbframework import result


@pytest.fixture(scope="module")
def batch() -> pbf.BatchTrajectory:
    """CHAIN-3 by forward Euler with a 1% energy limit, on the CasADi VM: the released chain diverges, the
    hanging one stays ok."""
    m = pbf.models.chain(3)
    hanging = np.zeros(m.nq)
    hanging[0] = np.pi / 2
    sim = pbf.Simulator(m, "forward_euler", dt=0.01, energy_limit=1.0)
    return sim.rollout_batch(np.stack([pbf.models.chain_q0(m), hanging]), duration=2.0)


def test_batch_summary_counts_quantiles_and_failures(batch):
    text = batch.summary()
    assert text.startswith("Status: 1 of 2 ok, 0 unconverged, 1 diverged.")
    assert "2 trajectories of 200 steps" in text and "wall time" in text
    assert "Energy drift max|E-E0| (% of the scale, before any failure): min " in text
    assert f"First failures from t={batch.failure_time[0]:.4g} s" in text


def test_batch_summary_of_an_implicit_integrator_counts_iterations_and_outcomes():
    m = pbf.models.chain(2)
    sim = pbf.Simulator(m, "pbad", order=2, dt=0.02)
    b = sim.rollout_batch(np.stack([pbf.models.chain_q0(m)] * 2), steps=5)
    assert "Solver iterations per step: mean " in b.summary()
    assert "steps converged 10, after halving 0 (0 halvings), unconverged 0." in b.summary()


def test_batch_save_and_load_round_trip(batch, tmp_path):
    path = batch.save(tmp_path / "batch")
    assert path.name == "batch.npz"
    back = pbf.BatchTrajectory.load(path)
    for name in ("t", "q", "qd", "kinetic", "potential", "energy", "steps_done", "diverged"):
        assert np.array_equal(getattr(back, name), getattr(batch, name)), name
    assert list(back.status) == list(batch.status)
    assert np.array_equal(back.failure_time, batch.failure_time, equal_nan=True)
    assert back.stats.keys() == batch.stats.keys() and back.info == batch.info
    assert back.summary() == batch.summary()
    assert back[0].status is pbf.Trajectory.load(back[0].save(tmp_path / "one.npz")).status
    with pytest.raises(ValueError, match=r"holds a batch; read it with BatchTrajectory.load"):
        pbf.Trajectory.load(path)
    with pytest.raises(ValueError, match=r"holds a single trajectory; read it with Trajectory.load"):
        pbf.BatchTrajectory.load(tmp_path / "one.npz")


def test_batch_plot_draws_every_trajectory_and_marks_the_failures(batch, tmp_path, monkeypatch):
    drawn = {}
    finish = result._finish

    def spy(plt, fig, ax, path):
        drawn["lines"] = [(line.get_xdata(), line.get_ydata(), line.get_marker()) for line in ax.lines]
        return finish(plt, fig, ax, path)

    monkeypatch.setattr(result, "_finish", spy)
    path = batch.plot_energy(tmp_path / "energy.svg")
    assert path.stat().st_size > 1000 and path.read_text().lstrip().startswith("<?xml")
    *curves, marks = drawn["lines"]
    assert len(curves) == len(batch)
    for m, (x, y, _) in enumerate(curves):
        k = int(batch.steps_done[m]) + 1
        assert np.array_equal(x, batch.t[:k]) and np.array_equal(y, batch.energy[m, :k])
    assert marks[2] == "x" and np.array_equal(marks[0], batch.failure_time[:1])


def test_plot_formats_are_matplotlibs():
    assert {".png", ".pdf", ".svg"} <= set(result.plot_formats())
