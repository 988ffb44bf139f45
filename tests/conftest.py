"""Shared fixtures: one seeded random generator (STYLE.md 9), the gpu marker's skip rule, and a build cache
of the session's own (never the user's default cache)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from pbframework.codegen.build import CACHE_ENV, default_cache_dir

SEED = 20261122


# ---- the build cache: $PBF_CACHE_DIR where the user set it elsewhere, else a folder of this session's --------
# The suite never writes the default location (platformdirs' user cache folder): a folder named by
# $PBF_CACHE_DIR (to reuse compiled libraries across runs) is used as it is, unless it is that default; any
# other case gets a temporary folder, removed at the end. tests/test_cache.py checks, after every other test,
# that the default location is as the session found it.

def folder_state(path: Path) -> tuple | None:
    """What a test run could change in a folder: its entries with their sizes and mtimes (None: absent)."""
    if not path.is_dir():
        return None
    return tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in path.iterdir()))


def pytest_configure(config):
    config.addinivalue_line("markers", "session_end: runs after every other test (checks the whole session)")
    default = default_cache_dir()
    config.pbf_default_cache = (default, folder_state(default))
    config.pbf_temporary_cache = None
    chosen = os.environ.get(CACHE_ENV)
    if not chosen or Path(chosen).resolve() == default.resolve():
        config.pbf_temporary_cache = tempfile.mkdtemp(prefix="pbf-test-cache-")
        os.environ[CACHE_ENV] = config.pbf_temporary_cache    # subprocesses of the tests inherit it


def pytest_unconfigure(config):
    if getattr(config, "pbf_temporary_cache", None):
        shutil.rmtree(config.pbf_temporary_cache, ignore_errors=True)


@pytest.fixture
def default_cache_at_start(request) -> tuple[Path, tuple | None]:
    """The default cache location and its :func:`folder_state` when the session started."""
    return request.config.pbf_default_cache


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
    items.sort(key=lambda item: "session_end" in item.keywords)       # stable: the rest keep their order
    if any("gpu" in item.keywords for item in items) and not _gpu_available():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU with pycuda (pip install -e '.[gpu]')")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


# ---- example-robot-data: the robots directory (tests/test_io.py, tests/test_reference_pinocchio.py) ----------
# Owned by the io work. example-robot-data installs its URDFs under <prefix>/share/example-robot-data/robots
# (pip / cmeel: site-packages/cmeel.prefix, conda: $CONDA_PREFIX, robotpkg: /opt/openrobots).

ROBOTS_DIR_ENV = "EXAMPLE_ROBOT_DATA_DIR"


def find_example_robot_data() -> Path | None:
    """The ``robots`` directory of example-robot-data, or None when it is not installed
    (:func:`pbframework.models.example_robot_data_dir`)."""
    from pbframework.models import example_robot_data_dir

    return example_robot_data_dir()


@pytest.fixture(scope="session")
def robots_dir() -> Path:
    """example-robot-data's robots directory; skips the test when the package is not installed."""
    found = find_example_robot_data()
    if found is None:
        pytest.skip(f"example-robot-data not found (pip install example-robot-data, or set {ROBOTS_DIR_ENV})")
    return found
