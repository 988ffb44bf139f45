"""The Simulator and Trajectory: API, exact energies, persistence, bad input, stability at large dt."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework.forces import ForceForm, ForceModel
from pbframework.step import StepError

STABILITY_RISE = 1.0    # percent of DESIGN.md's CHAIN-N energy scale


@pytest.fixture(scope="module")
def chain3():
    return pbf.models.chain(3)


def test_rollout_api_and_fields(chain3):
    m = chain3
    sim = pbf.Simulator(m, integrator="pbad", order=3, solver="lm", dt=0.05, forces=["gravity"])
    tr = sim.rollout(pbf.models.chain_q0(m), np.zeros(m.nq), duration=0.5)
    n = 10
    assert tr.steps == n and tr.t.shape == (n + 1,) and np.allclose(tr.t, np.arange(n + 1) * 0.05)
    assert tr.q.shape == tr.qd.shape == (n + 1, m.nq)
    for k in ("energy", "kinetic", "potential"):
        assert getattr(tr, k).shape == (n + 1,)
    assert set(tr.stats) >= {"iterations", "grad_norm", "converged", "halvings", "evaluations", "step_time"}
    assert all(len(v) == n for v in tr.stats.values())
    assert tr.wall_time > 0 and tr.info["integrator"] == "pbad" and tr.info["order"] == 3
    assert tr.info["solver"] == "lm" and tr.info["energy_scale"] == pytest.approx(
        pbf.models.chain_energy_scale(m))
    assert "steps" in tr.summary() and "Energy drift" in tr.summary()


def test_energy_is_exact_for_the_reported_states(chain3, rng):
    m = chain3
    sim = pbf.Simulator(m, "rk4", dt=0.01)
    tr = sim.rollout(pbf.models.chain_q0(m), rng.normal(0, 0.5, m.nq), duration=0.2)
    M = pbf.dynamics.crba(m)
    V = pbf.forces.potential_energy_function(m, pbf.step.resolve_forces(["gravity"]))
    for k in (0, 7, 20):
        q, v = tr.q[k], tr.qd[k]
        assert tr.kinetic[k] == pytest.approx(0.5 * v @ np.asarray(M(q)) @ v, rel=1e-12)
        assert tr.potential[k] == pytest.approx(float(V(q)), rel=1e-12, abs=1e-12)
    assert np.allclose(tr.energy, tr.kinetic + tr.potential)
    # a conservative system with RK4 at a small step keeps its energy
    assert tr.energy_error() < 1e-3


def test_explicit_fast_path_matches_single_steps(chain3):
    m = chain3
    sim = pbf.Simulator(m, "rk3", dt=0.01)
    q0 = pbf.models.chain_q0(m)
    tr = sim.rollout(q0, None, steps=25)
    s, t = sim.initial_state(q0), 0.0
    for k in range(25):
        s, _ = sim.advance(s, t)
        t += 0.01
    assert np.allclose(tr.q[-1], s[:m.nq], atol=1e-13) and np.allclose(tr.qd[-1], s[m.nq:], atol=1e-12)


def test_save_load_roundtrip(chain3, tmp_path):
    m = chain3
    tr = pbf.Simulator(m, "pbad", dt=0.05).rollout(pbf.models.chain_q0(m), None, duration=0.3)
    path = tr.save(tmp_path / "x.npz")
    back = pbf.Trajectory.load(path)
    for k in ("t", "q", "qd", "energy", "kinetic", "potential"):
        assert np.array_equal(getattr(back, k), getattr(tr, k))
    for k, v in tr.stats.items():
        assert np.array_equal(back.stats[k], v)
    assert back.info == tr.info and back.wall_time == tr.wall_time
    z = np.load(path)
    assert {"t", "q", "energy"} <= set(z.files)


def test_divergence_is_detected_and_reported(chain3):
    m = pbf.models.chain(10)
    tr = pbf.Simulator(m, "forward_euler", dt=0.02).rollout(pbf.models.chain_q0(m), None, duration=10.0)
    assert tr.diverged and tr.info["diverged_at"] < 10.0 and tr.energy_error() == float("inf")
    assert np.all(np.isfinite(tr.q)) and tr.steps < 500
    assert "DIVERGED" in tr.summary()


# -- bad input ------------------------------------------------------------------------------------------

def test_bad_states_are_named(chain3):
    m = chain3
    sim = pbf.Simulator(m, "rk4", dt=0.01)
    q0 = pbf.models.chain_q0(m)
    with pytest.raises(ValueError, match=r"q0: expected a vector of length nq=6 .* got shape \(5,\)"):
        sim.rollout(q0[:5], None, duration=0.1)
    bad = q0.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match=r"q0: non-finite value nan at coordinate 'joint1:rz'"):
        sim.rollout(bad, None, duration=0.1)
    with pytest.raises(ValueError, match=r"qd0: non-finite value inf"):
        sim.rollout(q0, np.full(6, np.inf), duration=0.1)
    with pytest.raises(StepError, match="duration must be a positive finite number of seconds, got -1"):
        sim.rollout(q0, None, duration=-1)
    with pytest.raises(StepError, match="steps must be a positive integer, got 0"):
        sim.rollout(q0, None, steps=0)


@pytest.mark.parametrize("dt", [0.0, -0.05, float("nan")])
def test_bad_dt(chain3, dt):
    with pytest.raises(StepError, match=f"dt must be a positive finite number of seconds, got {dt!r}"):
        pbf.Simulator(chain3, "pbad", dt=dt)


def test_bad_order_force_and_options(chain3):
    with pytest.raises(StepError, match=r"'pbad' does not support order=9 \(supported orders: 2, 3, 4, 5, 6, 7, 8\)"):
        pbf.Simulator(chain3, "pbad", order=9, dt=0.05)
    with pytest.raises(pbf.UnknownPluginError, match="unknown force model 'wind' \\(available: .*gravity"):
        pbf.Simulator(chain3, "pbad", dt=0.05, forces=["wind"])
    with pytest.raises(StepError, match="explicit and uses no solver"):
        pbf.Simulator(chain3, "rk4", dt=0.05, solver_options={"max_iter": 3})
    with pytest.raises(ValueError, match="'sometimes' is not a valid FailurePolicy"):
        pbf.Simulator(chain3, "pbad", dt=0.05, on_failure="sometimes")


# -- forces: forms, instances, per-step inputs ----------------------------------------------------------

class _Push(ForceModel):
    """A per-step input torque on coordinate 0 (like a controller): forms potential and generalised force."""

    name = "push"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})

    def __init__(self, gain: float) -> None:
        self.gain = gain
        self.calls = 0

    def params(self):
        return {"gain": self.gain}

    def n_inputs(self, model):
        return 1

    def input_values(self, model, t, q, qd):
        self.calls += 1
        return np.array([-self.gain * qd[0]])

    def potential(self, model, q_next, q_cur, q_prev, dt, t, u=None):
        return -u[0] * q_next[0]

    def generalized_force(self, model, q, qd, t, u=None):
        return ca.vertcat(u[0], ca.SX.zeros(model.nq - 1))


@pytest.mark.parametrize("integrator,order", [("pbad", 2), ("pbad", 3), ("rk4", None)])
def test_per_step_inputs_reach_the_step(integrator, order):
    """A damping controller fed through ForceModel.input_values removes energy from a pendulum."""
    m = pbf.models.chain(1, joint="revolute")
    push = _Push(gain=2.0)
    q0 = np.array([np.pi / 2 + 0.5])
    free = pbf.Simulator(m, integrator, order=order, dt=0.01).rollout(q0, None, duration=1.0)
    ctrl = pbf.Simulator(m, integrator, order=order, dt=0.01, forces=["gravity", push]).rollout(q0, None,
                                                                                              duration=1.0)
    assert push.calls >= 100
    assert ctrl.energy[-1] < free.energy[-1] - 0.1


# -- stability at large dt (DESIGN.md CHAIN-N; the full 10 s runs are in benchmarks/energy.py) ----------

@pytest.mark.parametrize("n,duration,dt", [
    (10, 10.0, 0.05), (10, 10.0, 0.1), (40, 2.0, 0.05), (40, 2.0, 0.1),
    pytest.param(100, 0.5, 0.05, marks=pytest.mark.slow),
    pytest.param(100, 0.5, 0.1, marks=pytest.mark.slow),
])
def test_pbad_stable_at_large_dt(n, duration, dt):
    """No divergence, every step converged, and the total energy never above E(0) + 1% of the scale, E(0)
    the exact initial energy. CHAIN-10 runs the full 10 s; CHAIN-40 2 s; CHAIN-100 0.5 s (its first steps
    cost ~100 LM iterations on a 200 x 200 Hessian; the full 10 s runs are in benchmarks/energy.py)."""
    m = pbf.models.chain(n)
    tr = pbf.Simulator(m, "pbad", dt=dt).rollout(pbf.models.chain_q0(m), None, duration=duration)
    assert not tr.diverged and tr.t[-1] == pytest.approx(duration)
    assert tr.stats["converged"].all()
    assert tr.energy_rise() <= STABILITY_RISE, tr.summary()


@pytest.mark.parametrize("backend", ["casadi", "c"])
def test_reported_energy_starts_at_the_exact_initial_energy(backend):
    """Row 0 of a trajectory is the start's exact energy, also for PBAD order 2, whose later rows use the
    chord kinetic energy (at the start the chord runs to the history node, the mean velocity over the step
    before t0)."""
    m = pbf.models.chain(5)
    q0 = pbf.models.chain_q0(m)
    qd0 = np.linspace(-0.5, 0.5, m.nq)
    sim = pbf.Simulator(m, "pbad", order=2, dt=0.1, backend=backend)
    assert sim.problem.kinetic is not None
    T_exact, V_exact = sim.energy(np.array([q0, q0]), np.array([np.zeros(m.nq), qd0]))
    rest = sim.rollout(q0, None, steps=2)
    moving = sim.rollout(q0, qd0, steps=2)
    assert rest.kinetic[0] == 0.0 and rest.energy[0] == pytest.approx(V_exact[0], rel=1e-12)
    assert moving.kinetic[0] == pytest.approx(T_exact[1], rel=1e-12)
    assert rest.kinetic[1] > 0.0, "after the first step: the chord kinetic energy of the motion"
    batch = sim.rollout_batch(np.array([q0, q0]), np.array([np.zeros(m.nq), qd0]), steps=2)
    np.testing.assert_allclose(batch.kinetic[:, 0], [0.0, T_exact[1]], rtol=1e-12, atol=0.0)
    np.testing.assert_allclose(batch.energy[1], moving.energy, rtol=1e-12)
