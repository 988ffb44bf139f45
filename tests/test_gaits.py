"""Periodic targets (pbframework.gaits) and the QUADRUPED-TRACK robots."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.gaits import PeriodicTarget, quadruped_targets


def _eval(target, t):
    ts = ca.SX.sym("t")
    return np.asarray(ca.Function("f", [ts], [target(ts)])(t)).ravel()


@pytest.mark.parametrize("K", [2, 5, 8])
def test_periodic_target_passes_through_its_poses_and_repeats(K):
    rng = np.random.default_rng(K)
    poses = rng.normal(size=(K, 3))
    target = PeriodicTarget(poses, period=0.8)
    for k in range(K):
        assert np.allclose(_eval(target, k * 0.8 / K), poses[k], atol=1e-12)
        assert np.allclose(_eval(target, k * 0.8 / K + 3 * 0.8), poses[k], atol=1e-10)
    ts = ca.SX.sym("t")
    dv = ca.Function("d", [ts], [ca.jacobian(target(ts), ts)])
    assert np.allclose(np.asarray(dv(0.31)).ravel(), _eval_velocity(target, 0.31), atol=1e-10)


def _eval_velocity(target, t):
    ts = ca.SX.sym("t")
    return np.asarray(ca.Function("v", [ts], [target.velocity(ts)])(t)).ravel()


def test_bad_targets_are_one_clear_line():
    with pytest.raises(ValueError, match="K >= 2"):
        PeriodicTarget([[0.0, 1.0]], period=1.0)
    with pytest.raises(ValueError, match="rows of equal length"):
        PeriodicTarget([[0.0, 1.0], [0.0]], period=1.0)
    for bad in (0.0, -1.0, float("nan"), "1"):
        with pytest.raises(ValueError, match="period must be"):
            PeriodicTarget([[0.0], [1.0]], period=bad)
    with pytest.raises(ValueError, match="target is for 12 coordinates"):
        PeriodicTarget(np.zeros((4, 11)), period=1.0, n=12)
    m = models.spider()
    with pytest.raises(ValueError, match="has 3 entries but the force acts on 12 coordinates"):
        dofs, _ = quadruped_targets(m, "walk")
        pbf.Simulator(m, "ne_nmdp", dt=0.02, forces=[
            ("stable_pd", {"kp": 1.0, "target": PeriodicTarget(np.zeros((4, 3)), 1.0), "dofs": dofs})])
    with pytest.raises(ValueError, match="task must be"):
        quadruped_targets(m, "run")
    with pytest.raises(ValueError, match="neither the spider"):
        quadruped_targets(models.chain(3), "walk")


@pytest.mark.parametrize("task", ["walk", "jump"])
def test_spider_targets_start_near_its_standing_pose(task):
    m = models.spider()
    dofs, target = quadruped_targets(m, task)
    assert len(dofs) == 12 and target.size == 12
    q0 = models.spider_q0(m)
    stand = np.array([q0[m.dof_index(d)] for d in dofs])
    assert np.max(np.abs(_eval(target, 0.0) - stand)) < 0.6


def test_solo12_stands_on_its_feet(robots_dir):
    m = models.solo12()
    assert m.nq == 19 and m.nv == 18 and m.n_contacts == 4
    q0 = models.solo12_q0(m)
    P = np.asarray(pbf.kinematics.contact_positions(m)(q0))
    assert np.allclose(P[2], models.SOLO12_FOOT_RADIUS)
    dofs, target = quadruped_targets(m, "walk")
    assert np.allclose(_eval(target, 0.0)[[dofs.index("FL_HFE"), dofs.index("FL_KFE")]], [0.8 + 0.35, -1.6],
                       atol=0.5)
