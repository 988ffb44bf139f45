"""Central finite differences for derivative checks (STYLE.md 9)."""

from __future__ import annotations

import numpy as np


def fd_jacobian(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """d f / d x by central differences; ``f`` maps a vector to an array (flattened column-major)."""
    x = np.asarray(x, float)
    cols = []
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        cols.append((np.ravel(f(x + e), order="F") - np.ravel(f(x - e), order="F")) / (2 * h))
    return np.stack(cols, axis=1)
