"""``cuda``: the per-iteration batch on an NVIDIA GPU through pycuda (issue 22; never yet run on a device).

``build(problem, **options)`` returns a :class:`pbframework.codegen.cuda_device.CudaRunner`: the ``c`` backend's
runner for single steps and rollouts (host), whose ``rollout_batch`` runs on the device, one Levenberg-Marquardt
iteration per launch for every trajectory (:mod:`pbframework.codegen.cuda_launch`). The kernels are the
emitted CUDA source (:mod:`pbframework.codegen.cuda`), compiled by nvcc to a cached cubin for the device's
architecture. Options: the ``c`` backend's plus ``block`` (threads per block, default 128). Solvers ``lm`` and
``jtj_lm``. Without pycuda or a device, building it raises a :class:`~pbframework.step.StepError` that says
why; install with ``CUDA_ROOT=/usr/local/cuda pip install -e '.[gpu]'`` (pycuda builds from source).
"""

from __future__ import annotations

from typing import Any

from pbframework.hookspecs import PluginInfo, hookimpl


def build_cuda_backend(problem, solver: str = "lm", **options: Any):
    """A :class:`~pbframework.codegen.cuda_device.CudaRunner` for ``problem`` (see the module docstring)."""
    from pbframework.codegen.cuda_device import CudaRunner

    return CudaRunner(problem, solver, **options)


@hookimpl
def pbf_backends():
    return [PluginInfo("cuda", "NVIDIA GPU through pycuda: batches of rollouts, one LM iteration per launch "
                               "(nvcc, cached cubin; single steps on the host's C)", build_cuda_backend,
                       meta={"batch_threads": False, "solvers": ("lm", "jtj_lm"), "reals": ("double", "float"),
                             "needs": "pycuda and a CUDA device"})]
