"""NMDP (seed 001): the wrench-polytope force, ne_nmdp / pbd_nmdp with the pgm / zopgm solvers, Alg. 2's
subdivision and the NE-MDP baseline."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.model import ArticulatedBody
from pbframework.plugins.forces.wrench_polytope import WrenchPolytope
from pbframework.plugins.solvers.pgm import ProjectedGradient
from pbframework.result import Status
from pbframework.step import StepError

MU = 0.5                      # atan(0.5) = 26.57 degrees


def _incline(deg: float) -> ArticulatedBody:
    """BOX on an incline of ``deg`` degrees: the ground stays z = 0 and gravity is tilted along +x."""
    b = models.box()
    a = np.radians(deg)
    return ArticulatedBody(list(b.links), list(b.joints), gravity=(9.81 * np.sin(a), 0.0, -9.81 * np.cos(a)),
                           name=f"box_incline{deg}")


FORCES = ["gravity", ("wrench_polytope", {"mu": MU, "force_scale": 50.0, "depth_scale": 0.01})]


def _slide(deg: float, integrator: str, solver: str | None = "pgm", duration: float = 0.5, dt: float = 0.01):
    m = _incline(deg)
    kw = {} if solver is None else {"solver": solver}
    sim = pbf.Simulator(m, integrator, dt=dt, forces=FORCES, **kw)
    q0 = np.zeros(m.nq)
    q0[2] = 0.096                            # resting 4 mm deep, where the corners carry the weight
    return sim.rollout(q0, np.zeros(m.nv), duration=duration)


@pytest.mark.parametrize("integrator,solver", [("ne_nmdp", "pgm"), ("pbd_nmdp", "pgm"), ("ne_nmdp", "zopgm"),
                                               ("ne_mdp", None)])
def test_block_on_incline_sticks_below_atan_mu_and_slides_above(integrator, solver):
    stick = _slide(20.0, integrator, solver)
    slide = _slide(30.0, integrator, solver)
    assert stick.status is Status.OK and slide.status is Status.OK
    # 20 deg < 26.57 deg: sticks (pgm: 4e-6 m in 0.5 s; zopgm, whose inexact gradient stops short of the
    # optimum, creeps 2e-4 m) against 0.082 m of sliding at 30 deg
    assert abs(stick.q[-1, 0]) < 1e-3
    a = 9.81 * (np.sin(np.radians(30)) - MU * np.cos(np.radians(30)))
    expected = 0.5 * a * 0.5**2                                # Coulomb sliding from rest for 0.5 s
    assert slide.q[-1, 0] == pytest.approx(expected, rel=0.15)


def test_every_qp_is_solved_by_qpoases(monkeypatch):
    made = []
    real = ca.conic

    def spy(name, plugin, *args, **kw):
        made.append(plugin)
        return real(name, plugin, *args, **kw)

    monkeypatch.setattr(ca, "conic", spy)
    for integrator in ("ne_nmdp", "ne_mdp"):
        tr = _slide(30.0, integrator, "pgm" if integrator != "ne_mdp" else None, duration=0.05)
        assert tr.status is Status.OK
    assert made and set(made) == {"qpoases"}


def test_pgm_kinetic_energy_decreases_monotonically_theorem_5_5():
    m = models.box()
    sim = pbf.Simulator(m, "ne_nmdp", dt=0.02, forces=FORCES, solver_options={"record": True})
    q0 = np.zeros(m.nq)
    q0[2], q0[3] = 0.098, 0.1
    qd0 = np.zeros(m.nv)
    qd0[0], qd0[2] = 1.0, -0.5
    s = sim.initial_state(q0, qd0)
    seen = 0
    for k in range(5):
        s, st = sim.advance(s, 0.02 * k)
        K = np.asarray(sim.solver.history)
        assert st.converged
        if K.size > 2:
            seen += 1
            assert np.all(np.diff(K) <= 0.0), K
    assert seen >= 3


def test_algorithm_2_returns_exactly_the_requested_time():
    m = models.box()
    sim = pbf.Simulator(m, "ne_nmdp", dt=0.1, forces=FORCES, max_halvings=6)
    q0 = np.zeros(m.nq)
    q0[2], q0[3], q0[4] = 0.5, 0.3, 0.2
    qd0 = np.zeros(m.nv)
    qd0[0] = 1.0
    tr = sim.rollout(q0, qd0, duration=1.0)
    assert tr.status is Status.OK
    assert tr.stats["halvings"].sum() > 0 and tr.stats["depth"].max() >= 1     # Alg. 2 subdivided
    assert tr.t[-1] == 1.0 and len(tr.t) == 11
    subs = np.asarray(tr.info["substeps"])                   # [k, t, dt] of every substep Alg. 2 took
    for k in np.flatnonzero(tr.stats["halvings"]):
        mine = subs[subs[:, 0] == k]
        assert mine[0, 1] == tr.t[k] and np.sum(mine[:, 2]) == 0.1         # they tile the step exactly
        assert np.allclose(np.diff(mine[:, 1]), mine[:-1, 2], rtol=0, atol=1e-15)
        assert mine[:, 2].min() == 0.1 / 2 ** tr.stats["depth"][k]


def _parts(integrator="ne_nmdp"):
    m = models.box()
    sim = pbf.Simulator(m, integrator, dt=0.02, forces=FORCES)
    q0 = np.zeros(m.nq)
    q0[2], q0[3], q0[4] = 0.095, 0.05, -0.04
    qd0 = np.array([0.3, -0.2, -0.4, 0.5, 0.2, -0.1])
    p = np.asarray(sim.problem.params(sim.initial_state(q0, qd0), 0.0, 0.02, np.zeros(0))).ravel()
    return sim.problem.constrained, p


@pytest.mark.parametrize("integrator", ["ne_nmdp", "pbd_nmdp"])
def test_derivatives_match_finite_differences(integrator):
    c, p = _parts(integrator)
    rng = np.random.default_rng(3)
    d = rng.normal(scale=1e-3, size=c.nv)
    w = rng.uniform(0, 1.0 / 4, size=c.nw)
    G, Gd, G0d, Gw = (np.asarray(a) for a in c.G_derivs(d, w, p))
    K, dK, d2K = (np.asarray(a) for a in c.K_derivs(d, p))
    h = 1e-6
    fd_G = np.column_stack([(np.asarray(c.G(d + h * e, w, p)) - np.asarray(c.G(d - h * e, w, p))).ravel() / (2 * h)
                            for e in np.eye(c.nv)])
    assert np.allclose(Gd, fd_G, rtol=1e-5, atol=1e-5 * np.abs(Gd).max())
    fd_w = np.column_stack([(np.asarray(c.G(d, w + e, p)) - np.asarray(c.G(d, w, p))).ravel() for e in np.eye(c.nw)])
    assert np.allclose(Gw, fd_w, atol=1e-9 * max(1.0, np.abs(Gw).max()))          # G is linear in w
    fd_K = np.array([(float(c.K(d + h * e, p)) - float(c.K(d - h * e, p))) / (2 * h) for e in np.eye(c.nv)])
    assert np.allclose(dK.ravel(), fd_K, rtol=1e-5, atol=1e-7)
    fd_H = np.column_stack([(np.asarray(c.K_derivs(d + h * e, p)[1]) - np.asarray(c.K_derivs(d - h * e, p)[1])).ravel()
                            / (2 * h) for e in np.eye(c.nv)])
    assert np.allclose(d2K, fd_H, rtol=1e-5, atol=1e-5 * np.abs(d2K).max())
    # zeroth order (Eq. 10-11): the same Jacobian without the polytope's derivative, which is nonzero in contact
    assert not np.allclose(G0d, Gd)
    assert np.allclose(np.asarray(c.G_derivs(d, np.zeros(c.nw), p)[2]), np.asarray(c.G_derivs(d, np.zeros(c.nw), p)[1]))


def test_contact_forces_lie_in_the_polytope():
    c, p = _parts()
    w = np.full(c.nw, 0.25)
    F = np.asarray(c.forces(np.zeros(c.nv), w, p))
    n = np.array([0.0, 0.0, 1.0])
    normal = F.T @ n
    tangential = np.linalg.norm(F.T - np.outer(normal, n), axis=1)
    assert np.all(normal > 0) and np.all(tangential <= MU * normal + 1e-12)


def test_custom_polytope_vertices():
    """A plug-in supplies its own vertices: here a pure normal force of 20 N per metre of depth squared."""
    def vertices(P, d, n):
        return 2e5 * d**2 * n

    m = models.box()
    sim = pbf.Simulator(m, "ne_nmdp", dt=0.02,
                        forces=["gravity", WrenchPolytope(vertices=vertices)])
    assert sim.problem.constrained.nw == m.n_contacts
    q0 = np.zeros(m.nq)
    q0[2] = 0.097
    tr = sim.rollout(q0, np.zeros(m.nv), duration=0.2)
    assert tr.status is Status.OK and 0.08 < tr.q[-1, 2] < 0.1


def test_bad_input_is_one_clear_line():
    with pytest.raises(ValueError, match="mu must be"):
        WrenchPolytope(mu=-0.1)
    with pytest.raises(ValueError, match="at least one vertex"):
        pbf.Simulator(models.box(), "ne_nmdp", dt=0.02,
                      forces=["gravity", WrenchPolytope(vertices=lambda P, d, n: ca.SX(3, 0))])
    with pytest.raises(ValueError, match="no contact points"):
        pbf.Simulator(models.chain(2), "ne_nmdp", dt=0.02, forces=["gravity", "wrench_polytope"])
    with pytest.raises(StepError, match="eta must be"):
        pbf.Simulator(models.box(), "ne_nmdp", dt=0.02, forces=FORCES, solver_options={"eta": 1.0})
    with pytest.raises(StepError, match="builds a constrained problem"):
        pbf.Simulator(models.box(), "ne_nmdp", dt=0.02, forces=FORCES, solver="lm")


class _InfeasibleQP(ProjectedGradient):
    """From its 40th QP on, asks qpOASES a QP with no feasible point (weights summing to at most -1)."""

    def _bounds(self, w, groups):
        lba, uba = super()._bounds(w, groups)
        return lba, (uba - 2.0 if self.qp_solves >= 40 else uba)


def test_a_qp_qpoases_reports_infeasible_stops_the_run_keeping_its_trajectory():
    m = models.box()
    sim = pbf.Simulator(m, "ne_nmdp", dt=0.02, forces=FORCES, max_halvings=1)
    sim.solver = _InfeasibleQP()
    q0 = np.zeros(m.nq)
    q0[2] = 0.3                                   # falls freely first: no contact weights are needed yet
    with pytest.warns(RuntimeWarning):
        tr = sim.rollout(q0, np.zeros(m.nv), duration=0.5)
    assert tr.status is Status.UNCONVERGED
    assert "reason: qp: " in tr.status_line() and "infeasib" in tr.status_line()
    assert len(tr.t) > 1 and np.all(np.isfinite(tr.q))


def test_native_functions_take_the_same_steps_as_the_vm(tmp_path, monkeypatch):
    """``native=True`` evaluates K, G and their derivatives as generated C; the PGM loop is the same."""
    monkeypatch.setenv("PBF_CACHE_DIR", str(tmp_path))
    runs = []
    for native in (False, True):
        m = _incline(30.0)
        sim = pbf.Simulator(m, "pbd_nmdp", dt=0.01, forces=FORCES, solver_options={"native": native})
        q0 = np.zeros(m.nq)
        q0[2] = 0.096
        runs.append(sim.rollout(q0, np.zeros(m.nv), duration=0.1))
    assert runs[0].status is Status.OK and runs[1].status is Status.OK
    assert np.array_equal(runs[0].stats["iterations"], runs[1].stats["iterations"])
    assert np.allclose(runs[0].q, runs[1].q, rtol=0, atol=1e-12)
