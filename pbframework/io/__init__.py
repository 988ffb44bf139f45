"""Importers: URDF and MJCF files to :class:`~pbframework.model.ArticulatedBody`."""

from .mjcf import load_mjcf
from .urdf import InertiaBalanced, InertiaMerged, load_urdf

__all__ = ["load_urdf", "load_mjcf", "InertiaBalanced", "InertiaMerged"]
