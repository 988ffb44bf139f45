"""Shared fixtures: one seeded random generator (STYLE.md 9) and the gpu marker's skip rule."""

from __future__ import annotations

import numpy as np
import pytest

SEED = 20261122


@pytest.fixture
def rng() -> np.random.Generator:
    """The seeded generator every randomised test draws its states from."""
    return np.random.default_rng(SEED)


def _gpu_available() -> bool:
    try:
        import pycuda.driver as drv  # noqa: F401

        drv.init()
        return drv.Device.count() > 0
    except Exception:  # noqa: BLE001 - any failure means no usable GPU
        return False


def pytest_collection_modifyitems(config, items):
    if any("gpu" in item.keywords for item in items) and not _gpu_available():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU with pycuda (pip install -e '.[gpu]')")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


# ---- example-robot-data: the robots directory (tests/test_io.py, tests/test_reference_pinocchio.py) ----------
# Owned by the io work. example-robot-data installs its URDFs under <prefix>/share/example-robot-data/robots
# (pip / cmeel: site-packages/cmeel.prefix, conda: $CONDA_PREFIX, robotpkg: /opt/openrobots).

import importlib.util  # noqa: E402
import os  # noqa: E402
import site  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROBOTS_DIR_ENV = "EXAMPLE_ROBOT_DATA_DIR"


def find_example_robot_data() -> Path | None:
    """The ``robots`` directory of example-robot-data, or None when it is not installed.

    ``$EXAMPLE_ROBOT_DATA_DIR`` (the robots directory or its parent) wins; then the prefixes of the
    ``example_robot_data``, ``cmeel`` and ``pinocchio`` packages, the site-packages directories, the Python
    prefix, ``$CONDA_PREFIX`` and ``/opt/openrobots``.
    """
    rel = Path("share", "example-robot-data", "robots")
    candidates: list[Path] = []
    env = os.environ.get(ROBOTS_DIR_ENV)
    if env:
        candidates += [Path(env), Path(env) / "robots"]
    for module in ("example_robot_data", "cmeel", "pinocchio"):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            for parent in Path(spec.origin).resolve().parents:
                candidates += [parent / rel, parent / "cmeel.prefix" / rel]
    sites = list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()] + sys.path
    candidates += [Path(p) / "cmeel.prefix" / rel for p in sites if p]
    candidates += [Path(sys.prefix) / rel, Path(os.environ.get("CONDA_PREFIX", sys.prefix)) / rel,
                   Path("/opt/openrobots") / rel]
    for c in candidates:
        if (c / "panda_description").is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def robots_dir() -> Path:
    """example-robot-data's robots directory; skips the test when the package is not installed."""
    found = find_example_robot_data()
    if found is None:
        pytest.skip(f"example-robot-data not found (pip install example-robot-data, or set {ROBOTS_DIR_ENV})")
    return found
