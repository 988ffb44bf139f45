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
