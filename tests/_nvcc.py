"""nvcc for the CUDA tests: the front end to PTX (every kernel, in CI) or the whole build to an object
(``ptxas`` included: minutes to tens of minutes for the CHAIN-10 and panda kernels on 2 cores, so only with
``PBF_NVCC_FULL=1``, and for the small kernels)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
FULL = os.environ.get("PBF_NVCC_FULL") == "1"

needs_nvcc = pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit; /usr/local/cuda/bin)")
needs_full = pytest.mark.skipif(not FULL, reason="the whole nvcc build (ptxas) of this kernel takes minutes to tens of "
                                                 "minutes on 2 cores; set PBF_NVCC_FULL=1 (its front end is checked "
                                                 "to PTX by the test beside it)")


def nvcc(cu: Path, arch: str, *, ptx: bool, timeout: float = 3000) -> Path:
    """Compile ``cu`` for ``arch`` (to PTX, or to an object with ptxas); assert no error and no warning."""
    out = cu.with_suffix(".ptx" if ptx else ".o")
    proc = subprocess.run([NVCC, f"-arch={arch}", "-Werror", "all-warnings", "-ptx" if ptx else "-c", str(cu), "-o",
                           str(out)], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "warning" not in (proc.stdout + proc.stderr).lower()
    return out
