"""The emitted CUDA source's host build against the CasADi VM on CHAIN-10 and the Franka panda (issue 22, must
show): states within :data:`DOUBLE_TOL` in double, energies within :data:`FLOAT_TOL` of the energy scale in
float (one step from each start: single precision's solver tolerances let trajectories part by about 1e-5
of the scale a step); run through the per-iteration launch loop (:class:`~pbframework.codegen.cuda_launch.HostIterBatch`)."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.codegen.cuda import NVCC_ARCHS, emit_cuda
from pbframework.codegen.cuda_launch import HostIterBatch
from pbframework.codegen.step_library import plan_kernels

from _nvcc import needs_full, needs_nvcc, nvcc  # noqa: E402

DOUBLE_TOL = 1e-10
"""double: ``max |host - VM| / max(1, max |VM|)`` per state (the C backend's agreement, directional kernels
rounding ~1e-14 apart)."""
FLOAT_TOL = 1e-4
"""float: ``max |E_host - E_VM|`` after one step, as a fraction of the energy scale (the chain's, or the
larger of the initial kinetic energy and the potential's range over a 0.5 s VM rollout)."""



def _chain10():
    m = models.chain(10)
    return m, models.chain_q0(m), 0.01


def _panda(robots_dir):
    from pbframework.io import load_urdf

    m = load_urdf(robots_dir / "panda_description" / "urdf" / "panda.urdf", limits=False)
    return m, np.full(m.nq, 0.3), 0.01


def _case(name, robots_dir):
    return _chain10() if name == "chain10" else _panda(robots_dir)


@pytest.fixture
def model_case(request):
    name = request.param
    robots = request.getfixturevalue("robots_dir") if name == "panda" else None
    return _case(name, robots)


def _starts(m, q0, rng, M=4):
    return q0 + rng.normal(scale=0.1, size=(M, m.nq)), rng.normal(scale=0.5, size=(M, m.nv))


@pytest.mark.parametrize("model_case", ["chain10", "panda"], indirect=True)
@pytest.mark.parametrize("order", [2, pytest.param(3, marks=pytest.mark.slow)])     # order 3: 20-40 s each
@pytest.mark.parametrize("real", ["double", "float"])
def test_host_build_equals_the_vm(model_case, order, real, rng):
    m, q0, dt = model_case
    steps = 10 if real == "double" else 1
    sim = pbf.Simulator(m, "pbad", order=order, dt=dt, forces=["gravity"])
    Q0, QD0 = _starts(m, q0, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        vm = sim.rollout_batch(Q0, QD0, steps=steps)
    host = HostIterBatch(sim.problem, sim.solver_name, real=real, model=m)
    got = host.rollout_batch(Q0, QD0, 0.0, dt, steps)
    assert (got.steps_done == steps).all() and got.converged.all() and vm.stats["converged"].all()
    if real == "double":
        for i in range(len(Q0)):
            a, b = np.hstack([got.q[i], got.qd[i]]), np.hstack([vm.q[i], vm.qd[i]])
            err = np.max(np.max(np.abs(a - b), axis=1) / np.maximum(1.0, np.max(np.abs(b), axis=1)))
            assert err <= DOUBLE_TOL, (i, err)
    else:
        T, V = sim.rollout_energy(got.states)
        scale = vm.info.get("energy_scale")
        if not scale:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                long = sim.rollout_batch(Q0, QD0, steps=50)
            scale = max(float(np.max(long.kinetic[:, 0])), float(np.max(np.ptp(long.potential, axis=1))))
        err = float(np.max(np.abs((T + V) - vm.energy))) / scale
        assert err <= FLOAT_TOL, err


@needs_nvcc
@pytest.mark.parametrize("model_case", ["chain10", "panda"], indirect=True)
@pytest.mark.parametrize("arch", NVCC_ARCHS)
def test_large_kernels_pass_nvccs_front_end_without_warnings(tmp_path, model_case, arch):
    """nvcc to PTX (its front end and code generation: every diagnostic of the source): CHAIN-10 in about 18 s."""
    m, _, dt = model_case
    sim = pbf.Simulator(m, "pbad", order=2, dt=dt, forces=["gravity"])
    cu = tmp_path / "step.cu"
    cu.write_text(emit_cuda(sim.problem, sim.solver_name, plan=plan_kernels(sim.problem, sim.solver_name, model=m)).text)
    ptx = nvcc(cu, arch, ptx=True).read_text()
    assert ".entry pbf_iter_kernel" in ptx and ".entry pbf_rollout_kernel" in ptx


@needs_nvcc
@needs_full     # measured on 2 shared cores: the panda 2-7 min, CHAIN-10 8-22 min (ptxas)
@pytest.mark.slow
@pytest.mark.parametrize("model_case", ["chain10", "panda"], indirect=True)
@pytest.mark.parametrize("arch", NVCC_ARCHS)
def test_large_kernels_compile_with_nvcc_without_warnings(tmp_path, model_case, arch):
    m, _, dt = model_case
    sim = pbf.Simulator(m, "pbad", order=2, dt=dt, forces=["gravity"])
    plan = plan_kernels(sim.problem, sim.solver_name, model=m)
    cu = tmp_path / "step.cu"
    cu.write_text(emit_cuda(sim.problem, sim.solver_name, plan=plan).text)
    start = time.perf_counter()
    nvcc(cu, arch, ptx=False)
    print(f"nvcc {arch} {m.name}: {time.perf_counter() - start:.1f} s")
