"""CUDA source of the step library (pbframework.codegen.cuda, issue 22 part 1): compiled by nvcc for the CI
architectures, and its host build equal to the C backend's batch, trajectory by trajectory."""

from __future__ import annotations

import ctypes
import re
import subprocess

import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.codegen.build import build_shared
from pbframework.codegen.cuda import NVCC_ARCHS, emit_cuda
from pbframework.codegen.step_runner import CRunner

from _nvcc import needs_full, needs_nvcc, nvcc  # noqa: E402



def _chain_batch(order: int, max_iter: int):
    m = models.chain(3)
    sim = pbf.Simulator(m, "pbad", order=order, dt=0.05, solver_options={"max_iter": max_iter}, max_halvings=2)
    rng = np.random.default_rng(7)
    Q0 = models.chain_q0(m) + rng.normal(scale=0.3, size=(6, m.nq))
    QD0 = rng.normal(scale=2.0, size=(6, m.nv))
    return m, sim, Q0, QD0


@pytest.mark.parametrize("order,max_iter", [(2, 100), (3, 100), (3, 3)])
def test_host_build_equals_the_c_backend_trajectory_by_trajectory(order, max_iter):
    """``max_iter = 3`` makes steps halve and trajectories stop unconverged: those must agree too."""
    m, sim, Q0, QD0 = _chain_batch(order, max_iter)
    runner = CRunner(sim.problem, sim.solver_name, {"max_iter": max_iter}, model=m, max_halvings=2)
    ref = runner.rollout_batch(Q0, QD0, 0.0, 0.05, 40, threads=1)
    src = emit_cuda(sim.problem, sim.solver_name, plan=runner.plan)
    lib = ctypes.CDLL(str(build_shared(src, flags=("-ffp-contract=off",)).path))
    M, steps, (nw, niw) = len(Q0), 40, runner.work_size
    S = np.zeros((M, steps + 1, sim.problem.ns))
    ST = np.zeros((M, steps, 6), np.int64)
    GN = np.zeros((M, steps, 2))
    status, taken = np.zeros(M, np.int64), np.zeros(M, np.int64)
    W, IW = np.zeros(M * nw), np.zeros(M * niw, np.int64)
    P = ctypes.c_void_p
    lib.pbf_rollout_all.restype = None
    lib.pbf_rollout_all(ctypes.c_longlong(M), P(runner._opt.ctypes.data), P(np.ascontiguousarray(Q0).ctypes.data),
                        P(np.ascontiguousarray(QD0).ctypes.data), ctypes.c_double(0.0), ctypes.c_double(0.05),
                        ctypes.c_longlong(steps), None, P(S.ctypes.data), P(ST.ctypes.data), P(GN.ctypes.data),
                        P(status.ctypes.data), P(taken.ctypes.data), P(W.ctypes.data), P(IW.ctypes.data),
                        ctypes.c_longlong(nw), ctypes.c_longlong(niw))
    assert np.array_equal(taken, ref.steps_done)
    for i in range(M):
        k = int(taken[i])
        assert np.array_equal(S[i, :k + 1], ref.states[i, :k + 1]), i
        assert np.array_equal(ST[i, :k, 0], ref.iterations[i, :k]) and np.array_equal(ST[i, :k, 4], ref.halvings[i, :k])
    if max_iter == 3:
        assert (ref.halvings > 0).any() and (np.asarray(ref.status) == "failed").any()


@needs_nvcc
@pytest.mark.parametrize("arch", NVCC_ARCHS)
def test_order_3_kernels_pass_nvccs_front_end_without_warnings(tmp_path, arch):
    sim = pbf.Simulator(models.chain(3), "pbad", order=3, dt=0.05)
    cu = tmp_path / "step.cu"
    cu.write_text(emit_cuda(sim.problem, sim.solver_name).text)
    assert ".entry pbf_iter_kernel" in nvcc(cu, arch, ptx=True).read_text()


@needs_nvcc
@pytest.mark.parametrize("arch", NVCC_ARCHS)
@pytest.mark.parametrize("order", [2, pytest.param(3, marks=[pytest.mark.slow, needs_full])])  # order 3: ~2 min
def test_every_generated_kernel_compiles_with_nvcc_without_warnings(tmp_path, arch, order):
    m = models.chain(3)
    sim = pbf.Simulator(m, "pbad", order=order, dt=0.05)
    cu = tmp_path / "step.cu"
    cu.write_text(emit_cuda(sim.problem, sim.solver_name).text)
    obj = nvcc(cu, arch, ptx=False, timeout=600)
    syms = subprocess.run(["nm", str(obj)], capture_output=True, text=True).stdout
    for kernel in ("pbf_rollout_kernel", "pbf_iter_kernel"):          # extern "C" __global__
        assert re.search(rf"\b{kernel}$", syms, re.M), kernel
    for entry in ("pbf_rollout_all", "pbf_iter_launch", "pbf_iter_sizes", "pbf_work_size"):   # C names on the host
        assert re.search(rf" T {entry}$", syms, re.M), entry
