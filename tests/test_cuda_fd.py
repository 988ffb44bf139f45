"""Seed-003 forward dynamics as batched CUDA kernels (issue 22 item 4; pbframework.codegen.cuda_fd): the host
build of the emitted source against the CasADi VM, and nvcc compiles."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from pbframework import models
from pbframework.codegen.build import build_shared
from pbframework.codegen.cuda import NVCC_ARCHS
from pbframework.codegen.cuda_fd import FD_ALGORITHMS, emit_fd_cuda
from pbframework.dynamics import forward_dynamics
from pbframework.model import ModelError
from pbframework.parallel import globalform as G

from _nvcc import needs_full, needs_nvcc, nvcc  # noqa: E402

DOUBLE_TOL = 1e-13
"""double: ``max |host - VM| / max |VM|`` (the same graph; the VM evaluates it through its sub-function calls)."""
FLOAT_TOL = 1e-4
"""float: the same measure in single precision (random 6-link chains, cond(M) below 1e3)."""



def _run(lib, a, Q, QD, T, dtype):
    fn = getattr(lib, f"pbfd_{a}_batch")
    work = getattr(lib, f"pbfd_{a}_work")
    work.restype = ctypes.c_longlong
    M, nv = QD.shape
    Q, QD, T = (np.ascontiguousarray(x, dtype) for x in (Q, QD, T))
    out, W = np.zeros((M, nv), dtype), np.zeros(M * work(), dtype)
    P = ctypes.c_void_p
    fn(ctypes.c_longlong(M), P(Q.ctypes.data), P(QD.ctypes.data), P(T.ctypes.data), P(out.ctypes.data),
       P(W.ctypes.data))
    return out


@pytest.fixture(scope="module")
def chain6():
    m = G.random_chain(6, seed=4)
    return m, emit_fd_cuda(m)


@pytest.mark.parametrize("real", ["double", "float"])
def test_host_build_equals_the_vm(chain6, real, rng):
    m, src = chain6
    flags = ("-ffp-contract=off",) + (("-DPBF_FLOAT",) if real == "float" else ())
    lib = ctypes.CDLL(str(build_shared(src, flags=flags).path))
    Q, QD, T = rng.normal(size=(3, 8, m.nq))
    for a in FD_ALGORITHMS:
        f = forward_dynamics(m, algorithm=a)
        ref = np.array([np.asarray(f(Q[k], QD[k], T[k])).ravel() for k in range(len(Q))])
        got = _run(lib, a, Q, QD, T, np.float64 if real == "double" else np.float32)
        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        assert err <= (DOUBLE_TOL if real == "double" else FLOAT_TOL), (a, err)


def test_panda_abia_jsiia_host_build_equals_the_vm(robots_dir, rng):
    from pbframework.io import load_urdf

    m = load_urdf(robots_dir / "panda_description" / "urdf" / "panda.urdf", limits=False)
    lib = ctypes.CDLL(str(build_shared(emit_fd_cuda(m, ("abia", "jsiia")), flags=("-ffp-contract=off",)).path))
    Q, QD, T = rng.normal(size=(3, 4, m.nq))
    for a in ("abia", "jsiia"):
        f = forward_dynamics(m, algorithm=a)
        ref = np.array([np.asarray(f(Q[k], QD[k], T[k])).ravel() for k in range(len(Q))])
        assert np.max(np.abs(_run(lib, a, Q, QD, T, np.float64) - ref)) <= DOUBLE_TOL * np.max(np.abs(ref)), a


def test_cfa_on_a_branching_model_is_refused_in_the_plug_ins_words():
    with pytest.raises(ModelError, match="cfa supports serial chains of 1-DOF joints"):
        emit_fd_cuda(models.spider(), ("cfa",))


@needs_nvcc
@pytest.mark.parametrize("arch", NVCC_ARCHS)
def test_fd_kernels_pass_nvccs_front_end_without_warnings(chain6, tmp_path, arch):
    _, src = chain6
    cu = tmp_path / "fd.cu"
    cu.write_text(src.text)
    ptx = nvcc(cu, arch, ptx=True).read_text()
    assert all(f"pbfd_{a}_kernel" in ptx for a in FD_ALGORITHMS)


@needs_nvcc
@pytest.mark.parametrize("arch", [NVCC_ARCHS[0]] + [pytest.param(a, marks=[pytest.mark.slow, needs_full])
                                                    for a in NVCC_ARCHS[1:]])
def test_fd_kernels_compile_with_nvcc_without_warnings(chain6, tmp_path, arch):
    _, src = chain6
    cu = tmp_path / "fd.cu"
    cu.write_text(src.text)
    obj = nvcc(cu, arch, ptx=False, timeout=1800)
    syms = subprocess.run(["nm", str(obj)], capture_output=True, text=True).stdout
    for a in FD_ALGORITHMS:
        assert f"pbfd_{a}_kernel" in syms
