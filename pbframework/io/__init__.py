"""Importers: URDF and MJCF files to :class:`~pbframework.model.ArticulatedBody`."""

from .mjcf import EqualityDisabled, UnsupportedGeoms, actuator_force, from_mujoco, load_mjcf, to_mujoco
from .urdf import InertiaBalanced, InertiaMerged, load_urdf

__all__ = ["load_urdf", "load_mjcf", "InertiaBalanced", "InertiaMerged", "actuator_force", "to_mujoco",
           "from_mujoco", "EqualityDisabled", "UnsupportedGeoms"]
