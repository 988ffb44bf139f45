"""Importers: URDF and MJCF files to :class:`~pbframework.model.ArticulatedBody`."""

from .mjcf import load_mjcf
from .urdf import InertiaBalanced, load_urdf

__all__ = ["load_urdf", "load_mjcf", "InertiaBalanced"]
