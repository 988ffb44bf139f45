"""``c``: the step problem's whole solver loop as generated C, compiled into a cached shared library.

``build(problem, **options)`` returns a :class:`pbframework.codegen.step_runner.CRunner`: one native call per
step (``step``), per rollout (``rollout``) or per batch of rollouts spread over native threads
(``rollout_batch``). Emitting the source (:mod:`pbframework.codegen.step_library`) is separate from building and
caching it (:mod:`pbframework.codegen.build`).

Options (all optional):

=================  ====================================================================================
``solver``         ``"lm"``, ``"jtj_lm"`` or ``"lbfgs"`` (default ``"lm"``; ignored for explicit problems)
``solver_options`` the solver plug-in's options (``max_iter``, ``gtol``, ...), same meaning as in Python
``model``          the problem's model: lets the emitter build the metric from inverse dynamics
``on_failure``     ``"stop"`` (default), ``"continue"`` or ``"raise"``: the Simulator's failure policy
``max_halvings``   how deep an unconverged step is retried as two half steps (default 4; 0: never)
``max_speed``      divergence threshold on ``|qd|`` (default 1e4)
``real``           ``"double"`` (default) or ``"float"``
``opt``            optimisation flag, ``"-O1"`` by default
``flags``          extra compiler flags
``threads``        default thread count of ``rollout_batch`` (default: all cores)
``derivatives``    ``"auto"``, ``"full"`` or ``"directional"`` (see :func:`~pbframework.codegen.step_library.plan_kernels`)
``directions``     seed columns per directional kernel call
``metric``         ``"auto"``, ``"full"``, ``"directional"`` or ``"none"`` (how the problem's metric is built)
``emitter``        ``"chunked"`` (default) or ``"casadi"`` (``casadi.CodeGenerator``)
``chunk``          instructions per emitted C function of the chunked emitter (default 250)
``cold_above``     run-once kernels above this many instructions are compiled without optimisation
``cache``          cache folder (default ``$PBF_CACHE_DIR``, else the platform's user cache folder)
=================  ====================================================================================

The runner (the interface every backend's ``build`` returns, see also the ``casadi`` backend):
``solve(x0, p) -> SolveResult``, ``init(q0, qd0, t0, dt, u=None) -> s0``,
``step(s, t, dt, u=None) -> (s_next, stats)``, ``rollout(q0, qd0, t0, dt, steps, u=None, state=None,
first_step=0) -> RolloutArrays`` and ``rollout_batch(Q0, QD0, t0, dt, steps, U=None, threads=None)
-> BatchArrays``.
"""

from __future__ import annotations

from typing import Any

from pbframework.hookspecs import PluginInfo, hookimpl


def build_c_backend(problem, solver: str = "lm", **options: Any):
    """A :class:`~pbframework.codegen.step_runner.CRunner` for ``problem`` (see the module docstring)."""
    from pbframework.codegen.step_runner import CRunner

    return CRunner(problem, solver, **options)


@hookimpl
def pbf_backends():
    return [PluginInfo("c", "generated C: the whole step / rollout in one native call, batches on threads "
                            "(gcc, cached shared library)", build_c_backend,
                       meta={"batch_threads": True, "solvers": ("lm", "jtj_lm", "lbfgs"),
                             "reals": ("double", "float")})]
