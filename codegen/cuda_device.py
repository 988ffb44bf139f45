"""Build and load the CUDA source on a device (issue 22 item 3): nvcc to a cached cubin, pycuda as the loader.

* :func:`build_cubin`: ``nvcc -cubin`` of an emitted :class:`~pbframework.codegen.emit.CSource` for one
  architecture, cached like the C libraries (``$PBF_CACHE_DIR``, one entry per source, nvcc version, arch
  and flags, published atomically). Runs wherever nvcc is installed, GPU or not (tested here).
* :func:`device_status`: whether pycuda imports and sees a device, and if not, why.
* :class:`DeviceIterBatch`: the per-iteration batch (:mod:`pbframework.codegen.cuda_launch`) on the device:
  buffers as device arrays, :func:`~pbframework.codegen.cuda_launch.launch_loop` driving ``pbf_iter_kernel``.
* :class:`CudaRunner`: the ``cuda`` backend's runner: the ``c`` backend's runner (single steps and rollouts on
  the host) whose ``rollout_batch`` runs on the device.

Kernels are compiled with ``-fmad=false`` (no fused multiply-add, as the host build's ``-ffp-contract=off``), so
the device should reproduce the host build's bits. **Never run on a GPU**: no device was available when this
was written; :class:`DeviceIterBatch` and :class:`CudaRunner` are exercised by the ``gpu``-marked tests only,
which skip without pycuda and a device.

pycuda ships no binary wheel: ``pip install -e '.[gpu]'`` compiles it against the CUDA toolkit found through
``CUDA_ROOT`` (for example ``CUDA_ROOT=/usr/local/cuda``, with ``nvcc`` on ``PATH``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .build import BuildError, cache_dir
from .cuda_launch import IterBuffers, batch_arrays, launch_bound, launch_loop
from .emit import CSource
from .step_runner import BatchArrays, CRunner

__all__ = ["Cubin", "nvcc_path", "build_cubin", "device_status", "DeviceIterBatch", "CudaRunner"]

NVCC_FLAGS = ("-fmad=false", "-Werror", "all-warnings")
"""Flags of every device build (no FMA contraction: the host build's rounding)."""


def nvcc_path() -> str | None:
    """``nvcc`` on ``PATH``, else under ``$CUDA_ROOT`` / ``$CUDA_HOME`` / ``/usr/local/cuda``; None if none."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_ROOT"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "nvcc").exists():
            return str(Path(root) / "bin" / "nvcc")
    return None


@dataclass(frozen=True)
class Cubin:
    """A built cubin. Attributes: ``path``, ``key`` (sha256 of source, nvcc version, arch, flags), ``arch``,
    ``compile_seconds`` (0 from the cache), ``cached``."""

    path: Path
    key: str
    arch: str
    compile_seconds: float
    cached: bool


def build_cubin(source: CSource, arch: str, *, real: str = "double", flags: tuple[str, ...] = (),
                cache: Path | str | None = None) -> Cubin:
    """``source`` compiled by nvcc to a cubin for ``arch`` (``"sm_80"``, ...), or the cached one.

    Raises:
        BuildError: no nvcc (the message says where it looked), or nvcc failed (its output is in the message).
    """
    nvcc = nvcc_path()
    if nvcc is None:
        raise BuildError("nvcc not found on PATH, under $CUDA_ROOT, $CUDA_HOME or /usr/local/cuda: install the CUDA "
                         "toolkit or set CUDA_ROOT")
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    all_flags = (f"-arch={arch}", *NVCC_FLAGS, *(("-DPBF_FLOAT",) if real == "float" else ()), *flags)
    key = hashlib.sha256("\0".join([source.sha256, nvcc, *version, *all_flags]).encode()).hexdigest()[:32]
    root = Path(cache) if cache is not None else cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    entry = root / f"{source.name}-cu-{key}"
    name = f"{source.name}.cubin"
    if (entry / name).exists() and (entry / "meta.json").exists():
        return Cubin(entry / name, key, arch, 0.0, True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{source.name}-cu-", dir=root))
    try:
        cu = tmp / f"{source.name}.cu"
        cu.write_text(source.text)
        cmd = [nvcc, "-cubin", *all_flags, str(cu), "-o", str(tmp / name)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise BuildError(f"nvcc failed on {source.name}: {' '.join(cmd)}\n{proc.stderr[-4000:]}")
        cu.unlink()
        (tmp / "meta.json").write_text(json.dumps({"arch": arch, "flags": list(all_flags), "nvcc": version,
                                                   "compile_seconds": seconds, "source_sha256": source.sha256}))
        try:
            os.rename(tmp, entry)
        except OSError:                    # another process published first
            shutil.rmtree(tmp, ignore_errors=True)
            return Cubin(entry / name, key, arch, seconds, True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Cubin(entry / name, key, arch, seconds, False)


def device_status() -> tuple[bool, str]:
    """``(True, "<device name>, sm_XY")`` where pycuda imports and sees a device, else ``(False, why)``."""
    try:
        import pycuda.driver as drv
    except ImportError as exc:
        return False, (f"pycuda is not installed ({exc}); pip install -e '.[gpu]' with CUDA_ROOT pointing at the "
                       f"CUDA toolkit (pycuda builds from source)")
    try:
        drv.init()
        if drv.Device.count() == 0:
            return False, "pycuda sees no CUDA device"
        dev = drv.Device(0)
        major, minor = dev.compute_capability()
        return True, f"{dev.name()}, sm_{major}{minor}"
    except Exception as exc:  # noqa: BLE001 - any driver failure means: no usable device
        return False, f"the CUDA driver failed: {exc}"


class DeviceIterBatch:
    """The per-iteration batch of ``host`` (a :class:`~pbframework.codegen.cuda_launch.HostIterBatch`: the same
    source, options and plan) on the first CUDA device, ``block`` threads per block (one per trajectory).
    Not yet run on a device (module docstring)."""

    def __init__(self, host, *, block: int = 128, cache=None) -> None:
        ok, why = device_status()
        if not ok:
            raise BuildError(f"the cuda backend needs a CUDA device: {why}")
        import pycuda.autoprimaryctx  # noqa: F401 - the device's primary context
        import pycuda.driver as drv

        major, minor = drv.Device(0).compute_capability()
        self.host, self.block = host, int(block)
        self.cubin = build_cubin(host.source, f"sm_{major}{minor}", real=host.real, cache=cache)
        self._module = drv.module_from_file(str(self.cubin.path))
        self._kernel = self._module.get_function("pbf_iter_kernel")
        self.launches = 0

    def rollout_batch(self, Q0, QD0, t0: float, dt: float, steps: int, U=None, threads=None) -> BatchArrays:
        import pycuda.gpuarray as ga

        h, sz = self.host, self.host.plan.sizes
        Q0 = np.ascontiguousarray(np.atleast_2d(np.asarray(Q0, h.dtype)))
        QD0 = np.ascontiguousarray(np.atleast_2d(np.asarray(QD0, h.dtype)))
        M = Q0.shape[0]
        buf = IterBuffers(M, int(steps), sz["ns"], h.work_size, h.fields, h.dtype)
        Ua = (np.ascontiguousarray(np.asarray(U, h.dtype).reshape(M, sz["nu"])) if sz["nu"] else None)
        dev = {k: ga.to_gpu(getattr(buf, k)) for k in ("S", "ST", "GN", "status", "taken", "W", "IW", "I", "R", "active")}
        opt, q0, qd0 = ga.to_gpu(h.opt), ga.to_gpu(Q0), ga.to_gpu(QD0)
        u = ga.to_gpu(Ua) if Ua is not None else None
        real = np.float64 if h.real == "double" else np.float32
        args = (np.int64(M), opt.gpudata, q0.gpudata, qd0.gpudata, real(t0), real(dt), np.int64(steps),
                u.gpudata if u is not None else np.intp(0), dev["S"].gpudata, dev["ST"].gpudata, dev["GN"].gpudata,
                dev["status"].gpudata, dev["taken"].gpudata, dev["W"].gpudata, dev["IW"].gpudata,
                np.int64(h.work_size[0]), np.int64(h.work_size[1]), dev["I"].gpudata, dev["R"].gpudata,
                dev["active"].gpudata)
        grid = ((M + self.block - 1) // self.block, 1)
        zero = np.zeros(1, np.int64)

        def launch() -> int:
            dev["active"].set(zero)
            self._kernel(*args, block=(self.block, 1, 1), grid=grid)
            return int(dev["active"].get()[0])

        start = time.perf_counter()
        self.launches = launch_loop(launch, launch_bound(steps, h.max_iter, h.max_halvings))
        for k in ("S", "ST", "GN", "status", "taken"):
            setattr(buf, k, dev[k].get())
        return batch_arrays(buf, sz["nq"], sz["nv"], time.perf_counter() - start)


class CudaRunner(CRunner):
    """The ``cuda`` backend: a :class:`~pbframework.codegen.step_runner.CRunner` (the host's C library for
    ``solve``, ``init``, ``step``, ``rollout``) whose ``rollout_batch`` is the per-iteration batch on the device
    (:class:`DeviceIterBatch`). Options: the ``c`` backend's plus ``block`` (threads per block). Solvers ``lm``
    and ``jtj_lm``. Not yet run on a device (module docstring)."""

    def __init__(self, problem, solver: str = "lm", solver_options=None, *, block: int = 128, **options) -> None:
        from pbframework.step import StepError

        from .cuda import ITERATION_SOLVERS
        from .cuda_launch import HostIterBatch

        ok, why = device_status()
        if not ok:
            raise StepError(f"backend 'cuda' needs pycuda and a CUDA device: {why}; use backend='c'")
        if solver not in ITERATION_SOLVERS:
            raise StepError(f"backend 'cuda' runs the solvers {', '.join(ITERATION_SOLVERS)}; got {solver!r}")
        super().__init__(problem, solver, solver_options, **options)
        keep = {k: options[k] for k in ("on_failure", "max_halvings", "max_speed", "real", "cache") if k in options}
        host = HostIterBatch(problem, solver, solver_options, plan=self.plan, **keep)
        self.device = DeviceIterBatch(host, block=block, cache=options.get("cache"))
        self.native = None          # executor= chunks the C backend's native batch only

    def rollout_batch(self, Q0, QD0, t0: float, dt: float, steps: int, U=None, threads=None) -> BatchArrays:
        return self.device.rollout_batch(Q0, QD0, t0, dt, steps, U)
