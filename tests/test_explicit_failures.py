"""An explicit step whose evaluation raises (a QP in its graph that qpOASES cannot solve: ``ne_mdp``,
``ne_dry_friction``) is a failed step under ``on_failure``, never an exception that loses the trajectory, and
the step is built anew afterwards so that qpOASES's failed memory does not fail every later step."""

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework.registry import unregister
from pbframework import models
from pbframework.errors import StepFailure
from pbframework.forces import ForceForm
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.nmdp import qpoases_conic
from pbframework.step import ProblemKind, StepProblem, split_params, standard_params, state_init
from pbframework.verdict import Status

BAD = (0.05, 0.06)
"""The QP's Hessian is NaN for steps starting in this window: qpOASES reports success there, and its next
hot start fails ("Failed to setup auxiliary QP"), as does every one after it while the memory is kept."""


def _build_probe(model, config, forces):
    """A free fall whose step solves a one-variable QP (its answer unused) inside the MX graph."""
    nq, nv = model.nq, model.nv
    ns = nq + nv
    x, p = ca.MX.sym("x", 0), ca.MX.sym("p", ns + 2)
    s, dt, t, _ = split_params(p, ns)
    q, v = s[:nq], s[nq:]
    bad = ca.logic_and(t >= BAD[0] - 1e-9, t < BAD[1] - 1e-9)
    qp = qpoases_conic("probe_qp", ca.Sparsity.dense(1, 1), ca.Sparsity.dense(1, 1), hessian_type="semidef")
    H = ca.if_else(bad, ca.DM.nan(1, 1), ca.DM.ones(1, 1))
    xq = qp(h=H, g=1.0, a=1.0, lba=-ca.inf, uba=1.0, lbx=0.0, ubx=1.0)["x"]
    v_next = v - dt * 9.81 + ca.if_else(bad, 0.0, xq)      # xq = 0 where the QP is solved
    s_next = ca.vertcat(q + dt * v_next, v_next)
    return StepProblem(
        integrator="qp_probe", kind=ProblemKind.EXPLICIT, config=config, nq=nq, nv=nv, nx=0, ns=ns, nu=0,
        init=state_init(nq, 0, nv), params=standard_params(ns, 0),
        guess=ca.Function("guess", [p], [ca.MX(0, 1)], ["p"], ["x0"]),
        advance=ca.Function("advance", [x, p], [s_next], ["x", "p"], ["s_next"]),
        order=1, objective=None, forces=(), velocity="v", start="s0 = [q0; qd0]", meta={})


class _Probe:
    @hookimpl
    def pbf_integrators(self):
        return [PluginInfo("qp_probe", "test: a QP in an explicit step's graph", _build_probe,
                           meta={"forms": frozenset({ForceForm.GENERALIZED_FORCE}), "orders": (1,),
                                 "default_order": 1, "implicit": False, "backends": ("casadi",)})]


@pytest.fixture
def probe():
    name = pbf.register(_Probe(), name="test_qp_probe")
    yield
    unregister(name)


def _sim(on_failure):
    return pbf.Simulator(models.chain(1, "revolute"), "qp_probe", dt=0.01, forces=[], on_failure=on_failure)


def test_a_qp_failure_in_an_explicit_step_stops_the_run_and_keeps_its_trajectory(probe):
    sim = _sim("stop")
    q0, v0 = np.zeros(sim.model.nq), np.zeros(sim.model.nv)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        tr = sim.rollout(q0, v0, duration=0.2)
    assert tr.status is Status.UNCONVERGED
    assert tr.t[-1] == pytest.approx(BAD[1]) and np.isclose(tr.info["failure"]["t"], BAD[1])
    assert tr.info["failure"]["reason"].startswith("evaluation failed: ")
    assert np.allclose(tr.qd[:, 0], -9.81 * tr.t)          # the steps before the failure, all kept
    # the step was built anew: a run after the bad window no longer fails on qpOASES's old memory
    after = sim.rollout(q0, v0, duration=0.1, t0=0.1)
    assert after.status is Status.OK and len(after.t) == 11


def test_a_qp_failure_in_an_explicit_step_raises_under_the_raise_policy(probe):
    sim = _sim("raise")
    with pytest.raises(StepFailure, match="t=0.06"):
        sim.rollout(np.zeros(sim.model.nq), np.zeros(sim.model.nv), duration=0.2)


def test_one_step_at_a_time_fails_the_same_way(probe):
    sim = _sim("stop")
    s = sim.initial_state(np.zeros(sim.model.nq), np.zeros(sim.model.nv), 0.0)
    reasons = []
    for k in range(10):
        s_new, st = sim._solve(s, 0.01 * k, 0.01)
        if not st.converged:
            reasons.append((k, st.reason))
            break
        s = s_new
    assert reasons and reasons[0][0] == 6 and reasons[0][1].startswith("evaluation failed: ")
