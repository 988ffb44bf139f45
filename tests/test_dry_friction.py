"""The Newton-Euler dry-friction baseline (issue 18 item 4): velocity-level time stepping with a linearised
Coulomb cone, one qpOASES QP per step (``ne_dry_friction`` with ``dry_friction``)."""

from __future__ import annotations

import numpy as np
import pytest

import pbframework as pbf
from pbframework.model import ArticulatedBody, Joint, Link

CORNERS = [(sx * 0.1, sy * 0.1, -0.05) for sx in (-1, 1) for sy in (-1, 1)]


def box() -> ArticulatedBody:
    return ArticulatedBody([Link("box", mass=1.0, inertia=np.diag([0.0042, 0.0042, 0.0067]), contact_points=CORNERS)],
                           [Joint("base", "free", "world", "box")], name="box")


def run(mu: float, dt: float, v0: float = 2.0, duration: float = 3.0):
    m = box()
    q0 = m.neutral()
    q0[2] = 0.05
    sim = pbf.Simulator(m, "ne_dry_friction", dt=dt, forces=["gravity", ("dry_friction", {"mu": mu})])
    return sim.rollout(q0, np.r_[v0, 0, 0, 0, 0, 0], duration=duration)


@pytest.mark.parametrize("mu", [0.1, 0.4])
def test_a_sliding_box_stops_where_coulomb_says(mu):
    """Distance v0^2 / (2 mu g) at 1 ms (measured 2.0377 against 2.0387 m at mu 0.1), first order in dt,
    no penetration; while it slides the box rides up a little, Anitescu's relaxation (a sliding point
    separates by dt mu |v_t| per step, so by at most mu times the distance slid: measured 2.1 mm at mu 0.1,
    24 mm at mu 0.4), and it is back on the plane and at rest once stopped."""
    exact = 2.0 ** 2 / (2 * mu * 9.81)
    fine, coarse = run(mu, 0.001), run(mu, 0.01)
    assert fine.ok and coarse.ok
    assert fine.q[-1, 0] == pytest.approx(exact, rel=2e-3)
    assert abs(coarse.q[-1, 0] - exact) < 10 * abs(fine.q[-1, 0] - exact) + 1e-3
    assert fine.q[:, 2].min() > 0.05 - 1e-6 and fine.q[:, 2].max() < 0.05 + mu * exact
    assert abs(fine.q[-1, 2] - 0.05) < 1e-6 and np.abs(fine.qd[-1]).max() < 1e-6


def test_large_steps_stay_finite():
    tr = run(0.2, 0.1)
    assert tr.ok and np.all(np.isfinite(tr.q)) and 0.8 < tr.q[-1, 0] < 1.1


def test_bad_input_is_one_line():
    for kw, words in (({"mu": -0.1}, "mu"), ({"directions": 2}, "directions must be an integer >= 3"),
                      ({"normal": (0, 0, 0)}, "normal must be 3 finite")):
        with pytest.raises(ValueError, match=words):
            pbf.force_model("dry_friction", **kw)
    with pytest.raises(pbf.step.StepError, match="runs on the backend\\(s\\) casadi only, not 'c'"):
        pbf.Simulator(box(), "ne_dry_friction", dt=0.01, forces=["gravity", "dry_friction"], backend="c")
    with pytest.raises(ValueError, match="has no contact points"):
        pbf.Simulator(pbf.models.chain(2), "ne_dry_friction", dt=0.01, forces=["gravity", "dry_friction"])
