"""Conformance: every registered integrator (each supported order up to 4) on a pendulum whose small-angle
period is known analytically, plus the contract every integrator's step problem must meet."""

from __future__ import annotations

import numpy as np
import pytest

import pbframework as pbf

PERIOD_TOL = 0.01      # relative period error allowed at dt = 5 ms (0.3% of a period)
AMPLITUDE = 0.05       # rad, small enough for the linear period (correction ~ amplitude^2 / 16 = 2e-4)


def _cases():
    out = []
    for name in pbf.available("integrator"):
        orders = pbf.get_plugin("integrator", name).meta.get("orders", (None,))
        out += [(name, k) for k in orders if k is None or k <= 4]
    return out


def _pendulum():
    """A uniform rod (1 m, 1 kg, radius 5 cm) hinged at one end about y; hangs at q = pi/2."""
    return pbf.models.chain(1, joint="revolute", axis=(0.0, 1.0, 0.0))


def analytic_period(model) -> float:
    link = model.links[0]
    d = link.com[0]
    I_pivot = link.inertia[1, 1] + link.mass * d**2
    return 2 * np.pi * np.sqrt(I_pivot / (link.mass * 9.81 * d))


def measured_period(t: np.ndarray, x: np.ndarray) -> float:
    """Mean spacing of upward zero crossings (linear interpolation)."""
    idx = np.flatnonzero((x[:-1] < 0) & (x[1:] >= 0))
    tc = t[idx] - x[idx] * (t[idx + 1] - t[idx]) / (x[idx + 1] - x[idx])
    assert len(tc) >= 2, "fewer than two crossings"
    return float(np.mean(np.diff(tc)))


@pytest.mark.parametrize("name,order", _cases())
def test_pendulum_period(name, order):
    m = _pendulum()
    T0 = analytic_period(m)
    assert T0 == pytest.approx(1.6395, abs=1e-3)
    sim = pbf.Simulator(m, name, order=order, dt=0.005)
    tr = sim.rollout(np.array([np.pi / 2 + AMPLITUDE]), np.zeros(1), duration=2.2 * T0)
    assert not tr.diverged and tr.stats["converged"].all()
    T = measured_period(tr.t, tr.q[:, 0] - np.pi / 2)
    assert abs(T - T0) / T0 < PERIOD_TOL, (name, order, T, T0)
    # the swing stays a swing: amplitude within 20% of the initial one (forward Euler gains ~13%, PBAD
    # order 2 loses a few percent over two periods)
    amp = np.abs(tr.q[-int(T0 / 0.005):, 0] - np.pi / 2).max()
    assert 0.8 * AMPLITUDE < amp < 1.2 * AMPLITUDE


@pytest.mark.parametrize("name,order", _cases())
def test_step_problem_contract(name, order):
    """The functions a backend relies on: sizes, state layout (q, qd first), p = [s; dt; t; u]."""
    m = pbf.models.chain(2)
    sim = pbf.Simulator(m, name, order=order, dt=0.01)
    pb = sim.problem
    assert pb.ns >= 2 * m.nq and pb.np == pb.ns + 2 + pb.nu and pb.nq == m.nq
    q0, qd0 = pbf.models.chain_q0(m), np.linspace(-0.2, 0.2, m.nq)
    s0 = pbf.step.initial_state(pb, q0, qd0, 0.0, 0.01, np.zeros(pb.nu))
    assert s0.shape == (pb.ns,) and np.allclose(s0[:m.nq], q0) and np.allclose(s0[m.nq:2 * m.nq], qd0)
    p = np.asarray(pb.params(s0, 0.3, 0.01, np.zeros(pb.nu))).ravel()
    assert p.shape == (pb.np,) and p[pb.ns] == 0.01 and p[pb.ns + 1] == 0.3
    x0 = np.asarray(pb.guess(p)).ravel()
    assert x0.shape == (pb.nx,)
    s1, stats = sim.advance(s0, 0.3)
    assert s1.shape == (pb.ns,) and np.all(np.isfinite(s1)) and stats.converged
    # one small step moves q by about dt * qd
    assert np.allclose(s1[:m.nq], q0 + 0.01 * qd0, atol=5e-3)
    assert pb.velocity and pb.start


@pytest.mark.parametrize("order", [2, 3, 4])
def test_pbad_restart_reexpresses_the_history_exactly_on_its_own_curve(order):
    """A halving retry moves the history node along the curve the state implies: the chord for order 2, the
    quadratic through (q_k, v_k) and the history node for order >= 3 -- exact for such a motion, and
    restart(restart(s, 1/2, dt), 2, dt/2) = s."""
    from pbframework.plugins.integrators.pbad import collocation_nodes

    model = pbf.models.chain(2)
    pb = pbf.Simulator(model, "pbad", order=order, dt=0.05, forces=["gravity"]).problem
    rng = np.random.default_rng(7)
    a, b, c = rng.normal(size=(3, model.nq))
    dt, tau0 = 0.05, collocation_nodes(order)[0]
    q = (lambda t: a + b * t + c * t**2) if order > 2 else (lambda t: a + b * t)
    s = np.concatenate([q(0.0), b, q(tau0 * dt)])
    for ratio in (0.5, 0.25, 2.0):
        got = np.asarray(pb.restart(s, ratio, dt)).ravel()
        np.testing.assert_allclose(got[2 * model.nq:], q(tau0 * dt * ratio), rtol=0, atol=1e-13)
        np.testing.assert_array_equal(got[:2 * model.nq], s[:2 * model.nq])
    back = np.asarray(pb.restart(np.asarray(pb.restart(s, 0.5, dt)).ravel(), 2.0, dt / 2)).ravel()
    np.testing.assert_allclose(back, s, rtol=0, atol=1e-13)
