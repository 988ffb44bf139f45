"""The exception family: every error pbframework raises for bad input is a :class:`PbfError`.

::

    PbfError                                   (Exception)
    ├── ModelError            + ValueError      a model, or a file describing one, is invalid
    ├── StepError             + ValueError      a Simulator / rollout / advance argument is invalid
    │   └── ArgumentTypeError + TypeError       ... of the wrong type (a bool for a number, a str for a dict)
    ├── LimitError            + ValueError      the work asked for exceeds a documented limit (raisable)
    ├── OutputPathError       + ValueError      an output path cannot be written (checked before the run)
    ├── CliError              + ValueError      a ``pbf`` option is invalid
    ├── PluginError           + RuntimeError    a plug-in failed to load or offered something malformed
    │   ├── PluginParameterError                a plug-in (or builder) parameter it does not take / needs
    │   │   ├── PluginValueError  + ValueError  ... a value its build rejects
    │   │   └── PluginTypeError   + TypeError   ... a value of a type its build rejects
    │   └── UnknownFamilyError    + ValueError  no plug-in family of that name
    ├── UnknownPluginError    + KeyError        no plug-in of that name (the message lists the available)
    └── StepFailure           + RuntimeError    a step did not converge under ``on_failure="raise"``

Each class is also the built-in exception a Python user would catch for it (``except ValueError`` still
catches a :class:`ModelError`), and each stays importable from the module that raised it before this family
existed (``pbframework.model.ModelError``, ``pbframework.step.StepError``, ``pbframework.registry.PluginError``,
``pbframework.stepping.StepFailure``, ``pbframework.cli.CliError``). A foreign error (XML, linear algebra,
CasADi, the OS) met while handling bad input is re-raised as one of these, its message naming the file,
element, parameter or path it concerns. ``docs/errors.md`` lists what raises each and the documented limits.

This module imports nothing from the package, so every module can import it.
"""

from __future__ import annotations

__all__ = ["PbfError", "ModelError", "StepError", "ArgumentTypeError", "LimitError", "OutputPathError",
           "CliError", "PluginError", "PluginParameterError", "PluginValueError",
           "PluginTypeError", "UnknownFamilyError", "UnknownPluginError", "StepFailure"]


class PbfError(Exception):
    """Base of every error pbframework raises for bad input or a failed run; the message is one line that
    says what was received, what is allowed, and what to do."""


class ModelError(PbfError, ValueError):
    """An articulated body (or a file describing one) is invalid; the message names the element."""


class StepError(PbfError, ValueError):
    """A step problem or a simulation cannot be set up as requested (a Simulator, ``rollout`` or ``advance``
    argument); the message names the value and what is allowed."""


class ArgumentTypeError(StepError, TypeError):
    """An argument of the wrong type (a bool where a number is expected, a complex for a real, a string for a
    dict of options); a :class:`StepError` and a ``TypeError``."""


class LimitError(PbfError, ValueError):
    """The work asked for (steps, model size, memory) exceeds a documented limit; the message names the
    limit and the option that raises it (``docs/errors.md``)."""


class OutputPathError(PbfError, ValueError):
    """An output path cannot be written (missing folder, a regular file in its path, no permission, a
    folder where a file is expected, an empty name); checked before any work is done."""


class ResultFileError(PbfError, ValueError):
    """A file given to ``Trajectory.load`` / ``BatchTrajectory.load`` is not one their ``save`` wrote (not an
    ``.npz``, arrays missing, malformed ``info``); the message names the file. A missing file is a
    ``FileNotFoundError``, as everywhere in the package."""


class CliError(PbfError, ValueError):
    """A ``pbf`` command-line error: printed as one line, exit status 2."""


class PluginError(PbfError, RuntimeError):
    """A plug-in could not be loaded or offered something malformed; the message names the plug-in."""


class PluginParameterError(PluginError):
    """A plug-in (or model builder) was given a parameter it does not take, or not one it needs, or a value
    it rejects; the one-line message names it and lists the parameters it accepts with their defaults."""


class PluginValueError(PluginParameterError, ValueError):
    """A plug-in's build rejected the value of a parameter it takes (``damping="x"``, ``kp=-1``); also the
    ``ValueError`` the plug-in raised, so ``except ValueError`` still catches it."""


class PluginTypeError(PluginParameterError, TypeError):
    """A plug-in's build rejected the type of a parameter's value with a ``TypeError``; also a ``TypeError``."""


class UnknownFamilyError(PluginError, ValueError):
    """No plug-in family of that name (``get_plugin("forces", ...)``); the message lists the families."""


class UnknownPluginError(PbfError, KeyError):
    """No plug-in of that name in the family; the message lists the available names."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0]) if self.args else ""


class StepFailure(PbfError, RuntimeError):
    """A step did not converge after its halvings and the failure policy is ``raise``."""
