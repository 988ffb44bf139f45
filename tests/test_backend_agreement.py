"""The CasADi-VM and generated-C backends give the same rollout (issue 15, item 4).

Both run the same solver loop with the same dense arithmetic (:mod:`pbframework.linalg` repeats the C
driver's sums in NumPy), so where the C library evaluates the VM's own derivative graphs (``derivatives
="full"``, the C default for small problems) the rollouts are identical bit for bit, unconverged steps
included. Where it uses directional derivative kernels (CHAIN-10 order 3) a few Jacobian entries round
differently (~1e-14 relative); on converged, non-chaotic horizons the trajectories then stay within
:data:`AGREE`. ``benchmarks/backend_agreement.py`` shows where a chaotic rollout parts.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pbframework as pbf
from pbframework.simulate import Simulator

AGREE = 1e-9
"""VM against C on converged steps: relative per state, ``max |a - b| / max(1, max |b|)`` (test_backend_c's
``rel``)."""


def rel_per_state(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.max(np.abs(a - b), axis=1) / np.maximum(1.0, np.max(np.abs(b), axis=1))))


def both(links: int, order: int, dt: float, duration: float, c_options=None, **kw):
    """Rollouts of CHAIN-``links`` from DESIGN.md's start on the VM and on C (``c_options``: its backend
    options)."""
    model = pbf.models.chain(links)
    q0 = pbf.models.chain_q0(model)
    out = []
    for backend in ("casadi", "c"):
        extra = {"backend_options": c_options} if backend == "c" and c_options else {}
        sim = Simulator(model, "pbad", order=order, dt=dt, forces=["gravity"], backend=backend, **kw, **extra)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out.append(sim.rollout(q0, duration=duration))
    return out


@pytest.mark.parametrize("order, dt, duration", [(3, 0.01, 2.0), (2, 0.05, 10.0)])
def test_chain10_agrees(order, dt, duration):
    """CHAIN-10 on both backends, every step converged, the same work per step, states within AGREE."""
    vm, c = both(10, order, dt, duration)
    assert len(vm.t) == len(c.t) == round(duration / dt) + 1
    assert vm.stats["converged"].all() and c.stats["converged"].all()
    for name in ("iterations", "halvings", "evaluations"):
        np.testing.assert_array_equal(vm.stats[name], c.stats[name], err_msg=name)
    assert rel_per_state(np.hstack([vm.q, vm.qd]), np.hstack([c.q, c.qd])) <= AGREE


def test_full_kernels_identical():
    """CHAIN-10 order 2 at dt = 0.05 s for 10 s: C on the VM's derivative graphs (its default at this
    size) gives the VM's bits, through all 200 steps."""
    vm, c = both(10, 2, 0.05, 10.0)
    np.testing.assert_array_equal(vm.q, c.q)
    np.testing.assert_array_equal(vm.qd, c.qd)
    np.testing.assert_array_equal(vm.stats["grad_norm"], c.stats["grad_norm"])


@pytest.mark.parametrize("solver, options", [("jtj_lm", {}), ("lm", {}), ("lbfgs", {}),
                                             ("lbfgs", {"metric": True})])
def test_identical_every_solver(solver, options):
    """Each C solver loop against its Python twin on full kernels (CHAIN-3, order 3 and 2, halvings on):
    identical states."""
    for order in (3, 2):
        full = {"derivatives": "full"}              # the hybrid lm's default plan at order 3 is directional
        vm, c = both(3, order, 0.05, 1.0, c_options=full, solver=solver, solver_options=options)
        np.testing.assert_array_equal(np.hstack([vm.q, vm.qd]), np.hstack([c.q, c.qd]),
                                      err_msg=f"{solver} {options} order {order}")
