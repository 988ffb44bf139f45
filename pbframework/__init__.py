"""pbframework: articulated-body simulation with large-timestep position-based integrators.

The public front. Everything listed in ``__all__`` is stable API; other modules may change.
"""

from __future__ import annotations

from . import dynamics, geometry, inertia, kinematics, models
from .errors import (ArgumentTypeError, CliError, LimitError, ModelError, OutputPathError, PbfError, PluginError,
                     PluginParameterError, PluginTypeError, PluginValueError, ResultFileError, StepError,
                     StepFailure, UnknownFamilyError, UnknownPluginError)
from .forces import ForceForm, ForceModel, force_model
from .hookspecs import PluginInfo, hookimpl
from .io import load_mjcf, load_urdf
from .model import WORLD, ArticulatedBody, Joint, JointType, Link, Shape, ShapeType, transform
from .registry import available, get_plugin, register, registry
from .result import BatchTrajectory, Trajectory
from .simulate import FailurePolicy, Simulator
from .export import ExportReport, export
from .solving import SolveResult
from .step import Objective, ProblemKind, StepConfig, StepProblem, build_step
from .view import view  # the function; the module stays importable as pbframework.view's Viewer etc.

__version__ = "0.1.0"

__all__ = [
    "ArticulatedBody", "Link", "Joint", "JointType", "Shape", "ShapeType", "ModelError", "WORLD", "transform",
    "models", "kinematics", "inertia", "dynamics", "geometry",
    "load_urdf", "load_mjcf",
    "ForceForm", "ForceModel", "force_model",
    "PluginInfo", "hookimpl", "PluginError", "PluginParameterError", "UnknownPluginError",
    "registry", "get_plugin", "available", "register",
    "Simulator", "Trajectory", "BatchTrajectory", "FailurePolicy", "StepFailure",
    "StepConfig", "StepProblem", "StepError", "ProblemKind", "Objective", "SolveResult", "build_step",
    "export", "ExportReport", "view", "__version__",
    "PbfError", "ArgumentTypeError", "LimitError", "OutputPathError", "ResultFileError", "CliError",
    "UnknownFamilyError",
    "PluginValueError", "PluginTypeError",
]
