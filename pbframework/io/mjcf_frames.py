"""Homogeneous transforms from MuJoCo's ``pos`` / ``quat`` (w, x, y, z) arrays: the frame arithmetic the
MJCF loader (:mod:`pbframework.io.mjcf`) and its force specs (:mod:`pbframework.io.mjcf_forces`) share."""

from __future__ import annotations

import math

import numpy as np


def _quat_matrix(quat: np.ndarray) -> np.ndarray:
    """Rotation matrix of a MuJoCo quaternion ``(w, x, y, z)`` (normalised here)."""
    w, x, y, z = np.asarray(quat, float) / np.linalg.norm(quat)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _pose(pos, quat) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = _quat_matrix(quat)
    T[:3, 3] = pos
    return T


def _translation(p) -> np.ndarray:
    T = np.eye(4)
    T[:3, 3] = p
    return T


def _axis_rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    T = np.eye(4)
    T[:3, :3] = np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K
    return T

