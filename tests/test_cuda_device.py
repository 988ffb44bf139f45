"""The cuda backend's build and loader (issue 22 item 3; pbframework.codegen.cuda_device, plugins/backends/cuda.py).

Without a GPU: nvcc builds cached cubins, and backend='cuda' refuses in one line saying why. The ``gpu`` tests
(the device batch equal to the C backend's, trajectory by trajectory) skip without pycuda and a device; they
have never run (no GPU was available where they were written)."""

from __future__ import annotations

import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.codegen.cuda_device import build_cubin, device_status, nvcc_path
from pbframework.codegen.cuda_fd import emit_fd_cuda
from pbframework.parallel import globalform as G
from pbframework.step import StepError

FIELDS = ("states", "iterations", "converged", "halvings", "evaluations", "grad_norm", "depth", "residual")


@pytest.mark.skipif(nvcc_path() is None, reason="needs nvcc (the CUDA toolkit)")
def test_cubins_are_built_once_and_cached(tmp_path):
    src = emit_fd_cuda(G.random_chain(2, seed=1))
    first = build_cubin(src, "sm_80", cache=tmp_path)
    again = build_cubin(src, "sm_80", cache=tmp_path)
    assert not first.cached and again.cached and again.path == first.path and again.compile_seconds == 0.0
    data = first.path.read_bytes()
    assert data[:4] == b"\x7fELF" and all(f"pbfd_{a}_kernel".encode() in data for a in ("abia", "jsiia", "cfa"))
    other = build_cubin(src, "sm_90", cache=tmp_path)
    assert other.key != first.key and not other.cached


@pytest.mark.skipif(device_status()[0], reason="a CUDA device is present: the backend builds")
def test_cuda_backend_without_a_device_says_why():
    m = models.chain(3)
    with pytest.raises(StepError, match=r"backend 'cuda' needs pycuda and a CUDA device: .*; use backend='c'"):
        pbf.Simulator(m, "pbad", order=2, dt=0.05, backend="cuda")


def _starts(m):
    rng = np.random.default_rng(7)
    return models.chain_q0(m) + rng.normal(scale=0.3, size=(6, m.nq)), rng.normal(scale=2.0, size=(6, m.nv))


@pytest.mark.gpu
@pytest.mark.parametrize("order,max_iter", [(2, 100), (3, 3)])
def test_device_batch_equals_the_c_backend_trajectory_by_trajectory(order, max_iter):
    m = models.chain(3)
    Q0, QD0 = _starts(m)
    out = {}
    for backend in ("c", "cuda"):
        sim = pbf.Simulator(m, "pbad", order=order, dt=0.05, solver_options={"max_iter": max_iter}, max_halvings=2,
                            backend=backend)
        out[backend] = sim.runner.rollout_batch(Q0, QD0, 0.0, 0.05, 40)
    ref, got = out["c"], out["cuda"]
    np.testing.assert_array_equal(got.steps_done, ref.steps_done)
    np.testing.assert_array_equal(got.status, ref.status)
    for i in range(len(Q0)):
        for name in FIELDS:
            np.testing.assert_array_equal(getattr(got, name)[i], getattr(ref, name)[i], err_msg=f"{name} {i}")


@pytest.mark.gpu
def test_simulator_rollout_batch_on_cuda_equals_c():
    m = models.chain(3)
    Q0, QD0 = _starts(m)
    c = pbf.Simulator(m, "pbad", order=2, dt=0.05, backend="c").rollout_batch(Q0, QD0, steps=20)
    g = pbf.Simulator(m, "pbad", order=2, dt=0.05, backend="cuda").rollout_batch(Q0, QD0, steps=20)
    np.testing.assert_array_equal(g.q, c.q)
    np.testing.assert_array_equal(g.steps_done, c.steps_done)


@pytest.mark.skipif(device_status()[0], reason="a CUDA device is present: the benchmark measures")
def test_gpu_benchmark_refuses_cleanly_without_a_device(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PBF_BENCH_OUT": str(tmp_path / "out")}
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / "gpu_batch.py"), "--sizes", "4"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "gpu_batch: no GPU to measure on:" in proc.stderr
    assert not (tmp_path / "out").exists()
