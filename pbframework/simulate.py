"""The simulate stage: :class:`Simulator` runs a step problem through a solver, step after step.

::

    import pbframework as pbf
    model = pbf.models.chain(10)
    sim = pbf.Simulator(model, integrator="pbad", order=3, solver="lm", dt=0.05, forces=["gravity"])
    traj = sim.rollout(pbf.models.chain_q0(model), np.zeros(model.nq), duration=10.0)

The step problem and solver are built once per (model, integrator configuration, forces) and cached on
``model.cache``; a second Simulator with the same settings reuses them.

This module is the Simulator's configuration: it validates the arguments, builds the step problem and the
solver, and selects the backend. The rest of the class lives by job in its own module:
:mod:`~pbframework.stepping` (one step), :mod:`~pbframework.rollouts` (the rollout loops),
:mod:`~pbframework.batch` (batches), :mod:`~pbframework.energies` (energies and the divergence test) and
:mod:`~pbframework.records` (records into a trajectory).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Iterable, Mapping

from .adaptive import AdaptiveOptions
from .batch import Batches
from .checks import MAX_DOFS, MAX_MEMORY, MAX_STEPS, check_dofs, flag, integer, options, real
from .energies import Energies
from .errors import ArgumentTypeError, PbfError
from .model import ArticulatedBody
from .records import STEP_COLUMNS, Records
from .rollouts import PROGRESS_PIECES, Rollouts, single_threaded_blas
from .stepping import StepFailure, StepStats, Stepping
from .step import (
    Objective, ProblemKind, StepConfig, StepError, StepProblem, build_step, force_sizes, integrator_info,
    resolve_forces,
)
from .verdict import DEFAULT_ENERGY_LIMIT, FailurePolicy, energy_conserving, expected_energy

__all__ = ["Simulator", "StepFailure", "StepStats", "FailurePolicy", "STEP_COLUMNS", "PROGRESS_PIECES",
           "single_threaded_blas"]


class Simulator(Stepping, Energies, Rollouts, Batches, Records):
    """Simulate an articulated body with an integrator plug-in, a solver plug-in and force models.

    Args:
        model: the :class:`~pbframework.model.ArticulatedBody`.
        integrator: integrator plug-in name (``pbf plugins`` lists them): ``"pbad"``, ``"rk4"``, ...
        order: the integrator's order (``None``: its default; ``pbad`` supports 2..8).
        solver: solver plug-in name for implicit integrators (``"lm"``, ``"jtj_lm"``, ``"lbfgs"``), or
            ``"auto"``: ``lm`` for energy (minimize) problems, ``jtj_lm`` for residual (least-squares) ones,
            ``pgm`` for constrained (NMDP) ones. An explicit integrator uses no solver: a solver other than
            ``"auto"`` is then an error, not ignored.
        dt: timestep in seconds (a positive finite real; not a bool).
        forces: force models: registered names (``"gravity"``), ``(name, params)`` pairs or
            :class:`~pbframework.forces.ForceModel` instances, each name at most once (the same force model
            twice would apply it twice). Gravity acts only if listed (default: gravity).
            The model's ``default_forces`` are added unless a force of the same name is listed (a URDF or
            MJCF model with limited joints carries ``joint_limits``).
        objective: ``"auto"``, ``"energy"`` or ``"residual"`` (:class:`~pbframework.step.Objective`);
            ``"auto"`` picks the residual form when the solver only takes least-squares problems.
        precondition: weight residual objectives by the inverse mass matrix (see
            :class:`~pbframework.step.StepConfig`); ``False`` = the literal Eq. 7.
        fd: forward-dynamics plug-in for Newton-Euler integrators and the PBAD start (default ``"aba"``).
        solver_options: options of the solver (e.g. ``{"max_iter": 50, "gtol": 1e-9}``).
        on_failure: a :class:`~pbframework.verdict.FailurePolicy`: what a rollout does with a step still
            unconverged after its halvings: ``"stop"`` (default: the run ends there, status
            ``unconverged``), ``"continue"`` (keep it, record it, go on) or ``"raise"``.
        max_halvings: how many levels deep an unconverged step is retried as two half steps (0: never).
        max_speed: a rollout ends as diverged when any |qd| exceeds this (rad/s or m/s) or a state
            becomes non-finite.
        energy_limit: percent of the energy scale (:meth:`divergence_scale`) by which the total energy
            may rise above its start before the rollout ends as diverged; applies where no force model
            has an energy input (``ForceModel.energy_input``; see :mod:`pbframework.verdict`). ``None``
            switches the test off.
        adaptive: adaptive step-size control (:mod:`pbframework.adaptive`): ``True``, a dict of
            :class:`~pbframework.adaptive.AdaptiveOptions` (``{"rtol": 1e-5}``) or an instance; ``dt`` is
            then the output interval and the first step. ``False`` (default): fixed steps of ``dt``.
        backend: where the solver loop runs (``pbf plugins`` lists the backends): ``"casadi"`` (default:
            CasADi VM and the Python solver, step by step) or ``"c"`` (generated C, compiled once per model
            and cached: a whole rollout, or a batch of rollouts on native threads, in one call).
        backend_options: options of the backend (for ``"c"``: ``real``, ``opt``, ``threads``,
            ``derivatives``, ... see ``pbframework.plugins.backends.c``).
        max_steps: the most steps (output intervals when adaptive) a rollout may ask for (default
            :data:`~pbframework.checks.MAX_STEPS`); more is a :class:`~pbframework.errors.LimitError` before
            any work.
        max_memory: the most bytes a rollout's states and statistics may take (default
            :data:`~pbframework.checks.MAX_MEMORY`, 2 GiB); checked with ``max_steps``.
        max_dofs: the most velocity coordinates of a model this Simulator is built for (default
            :data:`~pbframework.checks.MAX_DOFS`); more is a :class:`~pbframework.errors.LimitError` before the
            step is built.

    Raises:
        UnknownPluginError: unknown integrator, solver or force name (the message lists the available).
        ArgumentTypeError: an argument of the wrong type (a bool for dt, a string for solver_options, ...).
        PluginParameterError: a force model's parameter it does not take, or a value it rejects.
        StepError: bad dt, unsupported order, a force in a form the integrator cannot accept, the same force
            model twice, a solver that cannot solve this integrator's problems, bad or ignored options.
    """

    def __init__(self, model: ArticulatedBody, integrator: str = "pbad", *, order: int | None = None,
                 solver: str = "auto", dt: float = 0.01, forces: Iterable[Any] | None = ("gravity",),
                 objective: Objective | str = Objective.AUTO, fd: str = "aba", precondition: bool = True,
                 solver_options: Mapping[str, Any] | None = None,
                 on_failure: FailurePolicy | str = FailurePolicy.STOP, max_halvings: int = 4,
                 max_speed: float = 1e4, energy_limit: float | None = DEFAULT_ENERGY_LIMIT,
                 adaptive: AdaptiveOptions | Mapping[str, Any] | bool = False,
                 backend: str = "casadi", backend_options: Mapping[str, Any] | None = None,
                 max_steps: int = MAX_STEPS, max_memory: int = MAX_MEMORY, max_dofs: int = MAX_DOFS) -> None:
        from .registry import get_plugin

        if not isinstance(model, ArticulatedBody):
            raise ArgumentTypeError(f"model must be an ArticulatedBody, got {type(model).__name__}")
        for name, value in (("integrator", integrator), ("solver", solver), ("backend", backend), ("fd", fd)):
            if not isinstance(value, str):
                raise ArgumentTypeError(f"{name} must be a plug-in name (a string), got {type(value).__name__} "
                                        f"{value!r}")
        dt = real(dt, "dt", positive=True, unit="seconds")
        if order is not None:
            order = integer(order, "order")
        flag(precondition, "precondition")
        solver_options = options(solver_options, "solver_options")
        backend_options = options(backend_options, "backend_options")
        self.max_steps = integer(max_steps, "max_steps", minimum=1)
        self.max_memory = integer(max_memory, "max_memory", minimum=1)
        check_dofs(model.nv, f"model {model.name!r}", max_dofs=integer(max_dofs, "max_dofs", minimum=1))
        t_start = time.perf_counter()
        self.model = model
        self.config = StepConfig(dt=dt, order=order, objective=objective, fd=fd, precondition=precondition)
        integrator_info(integrator)                      # unknown name: lists the available ones
        self.forces = _checked_forces(forces, model)
        self.integrator = integrator
        self.solver = None
        config = self.config
        sinfo = None
        if solver != "auto":
            sinfo = get_plugin("solver", solver)
            kinds = frozenset(str(getattr(k, "value", k)) for k in sinfo.meta.get("problems", ()))
            if config.objective is Objective.AUTO and "minimize" not in kinds and "least_squares" in kinds:
                config = dataclasses.replace(config, objective=Objective.RESIDUAL)
        try:
            self.problem: StepProblem = build_step(model, integrator, config, self.forces)
        except PbfError:
            raise
        except (TypeError, ValueError) as exc:  # a force model (or plug-in) refusing this model: its own words
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            cls = ArgumentTypeError if isinstance(exc, TypeError) else StepError
            raise cls(f"integrator {integrator!r} on model {model.name!r}: {first}") from None
        self.implicit = self.problem.kind is not ProblemKind.EXPLICIT
        if not self.implicit:
            if solver_options:
                raise StepError(f"integrator {integrator!r} is explicit and uses no solver; drop solver_options")
            if solver != "auto":
                raise StepError(f"integrator {integrator!r} is explicit and uses no solver; drop solver={solver!r}")
            if self.config.objective is not Objective.AUTO or not self.config.precondition:
                what = (f"objective={self.config.objective.value!r}" if self.config.objective is not Objective.AUTO
                        else "precondition=False")
                raise StepError(f"integrator {integrator!r} is explicit and has no step objective to shape; drop "
                                f"{what}")
            self.solver_name = None
        else:
            if sinfo is None:
                solver = {ProblemKind.MINIMIZE: "lm", ProblemKind.CONSTRAINED: "pgm"}.get(self.problem.kind, "jtj_lm")
                sinfo = get_plugin("solver", solver)
            self.solver_name = solver
            try:
                self.solver = sinfo.build(**solver_options)
            except PbfError:
                raise
            except (TypeError, ValueError) as exc:
                raise StepError(f"solver {solver!r}: bad options {solver_options}: {exc}") from None
            kinds = {getattr(k, "value", str(k)) for k in self.solver.problems}
            if self.problem.kind.value not in kinds:
                if self.problem.objective is None:
                    hint = f"use a solver for {self.problem.kind.value} problems (pbf plugins lists them)"
                    what = ""
                else:
                    hint = "use objective='residual' or another solver"
                    what = f", objective {self.problem.objective.value}"
                raise StepError(f"solver {solver!r} solves {', '.join(sorted(kinds))} problems, but integrator "
                                f"{integrator!r} (order {self.problem.order}{what}) builds a "
                                f"{self.problem.kind.value} problem; {hint}")
        if self.implicit and hasattr(self.solver, "prepare"):
            self.solver.prepare(self.problem)
        try:
            self.on_failure = FailurePolicy.parse(on_failure)
        except ValueError as exc:
            raise StepError(str(exc)) from None
        self.max_halvings = integer(max_halvings, "max_halvings", minimum=0)
        self.max_speed = real(max_speed, "max_speed", positive=True, finite=False)
        self.energy_limit = None
        if energy_limit is not None:
            try:
                self.energy_limit = real(energy_limit, "energy_limit", positive=True)
            except StepError as exc:              # the type kept (ArgumentTypeError for a bool), the words ours
                raise type(exc)(f"energy_limit must be a positive number (percent of the energy scale) or None, "
                                f"got {energy_limit!r}") from None
        self.energy_checked = self.energy_limit is not None and energy_conserving(self.forces)
        self.expected_energy = expected_energy(get_plugin("integrator", integrator).meta.get("energy"),
                                               self.problem.order, self.forces)
        """What the run's energy is expected to do, in words (:func:`pbframework.verdict.expected_energy`)."""
        self.adaptive = AdaptiveOptions.parse(adaptive)
        if self.adaptive is not None:
            if self.problem.error_estimate is None or self.problem.dense is None:
                raise StepError(f"integrator {integrator!r} has no local error estimate, so it cannot take adaptive "
                                f"steps (pbad can, at every order)")
            if self.problem.meta.get("force_states"):
                raise StepError("adaptive steps do not carry the states of force models yet (actuator activations, "
                                "a PID's integral: pbframework.force_states); use a fixed dt")
        self._input_forces = [(f, n) for f in self.forces for n in (force_sizes(model, f)[0],) if n > 0]
        self.backend = str(backend)
        allowed = get_plugin("integrator", integrator).meta.get("backends")
        if allowed is not None and self.backend not in allowed:
            raise StepError(f"integrator {integrator!r} runs on the backend(s) {', '.join(allowed)} only, not "
                            f"{self.backend!r}")
        self.runner = None                    # backend "casadi": this class runs the loop itself
        if self.backend != "casadi":
            try:
                self.runner = get_plugin("backend", self.backend).build(
                    self.problem, self.solver_name or "lm", solver_options=solver_options, model=model,
                    on_failure=self.on_failure.value, max_halvings=self.max_halvings,
                    max_speed=self.max_speed,
                    **{**backend_options, **({"adaptive": True} if self.adaptive is not None else {})})
            except PbfError:
                raise
            except (TypeError, ValueError) as exc:      # an option the backend does not take, or rejects
                raise StepError(f"backend {self.backend!r}: bad backend_options {backend_options} or solver_options "
                                f"{solver_options}: {exc}") from None
        elif backend_options:
            raise StepError(f"backend 'casadi' takes no backend_options, got {dict(backend_options)}")
        self.energy_function = self._energy_function()
        self.build_time = time.perf_counter() - t_start
        self._build_time_reported = False

    def __repr__(self) -> str:
        return (f"Simulator({self.model.name!r}, {self.problem.describe()}, dt={self.config.dt}"
                + (f", solver={self.solver_name!r}" if self.implicit else "") + ")")


def _checked_forces(forces: Any, model: ArticulatedBody) -> tuple:
    """:func:`~pbframework.step.resolve_forces` with the argument's type checked first and each force-model
    name at most once (``["gravity", "gravity"]`` would apply gravity twice)."""
    from .forces import ForceModel

    single = isinstance(forces, (str, ForceModel)) or hasattr(forces, "forms")
    if forces is not None and not single and (not isinstance(forces, Iterable) or isinstance(forces, (bytes, Mapping))):
        raise ArgumentTypeError(f"forces must be a list of force models (names, (name, params) pairs or ForceModel "
                                f"instances) or None, got {type(forces).__name__} {forces!r}")
    resolved = resolve_forces(forces, model)
    seen: dict[str, int] = {}
    for k, f in enumerate(resolved):
        name = getattr(f, "name", None)
        if name is None:
            continue
        if name in seen:
            raise StepError(f"forces: force model {name!r} is listed twice (entries {seen[name]} and {k}); it would "
                            f"act twice: list it once, with the parameters you want")
        seen[name] = k
    return resolved
