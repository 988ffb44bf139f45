"""States of force models (actuator activations, a controller's integral) carried in the step state.

A force model may keep a state of its own, ``a`` (``ForceModel.n_states(model) > 0``): MuJoCo's actuator
activations (``dyntype`` ``integrator``, ``filter``, ``filterexact``, ``muscle``), or the integral and the
slew-limited set-point of MuJoCo's ``mujoco.pid`` actuator. Integrators know nothing of it. :func:`with_force_states`
(called by :func:`~pbframework.step.build_step` on every problem) wraps the integrator's problem so that:

* the step state ends with the states of all force models, in the order of the forces:
  ``s = [s_integrator; a]`` (``ns`` grows by their total; ``problem.meta["force_states"]`` is
  ``(start, stop)`` of ``a`` in ``s``);
* each step computes ``a_next = next_states(q, qd, t, dt, u, a)`` from the state it starts from and its
  inputs -- explicitly, once per step, as MuJoCo's Euler and implicit integrators advance ``act``
  (``act + dt act_dot``, or the exact filter) -- and the next state carries ``a_next``;
* the force model's forms receive ``u = [inputs; a; a_next]``: both are constants of the step, so an
  implicit integrator solves its step with them held, and a model picks which one its force uses (MuJoCo's
  activation force uses ``a``; with ``actearly`` and in the PID actuator, ``a_next``);
* the problem's ``u`` stays the inputs alone (``nu`` does not count the states), so the Simulator, the
  step function, the exported C and the batch backends run it unchanged.

An integrator may instead carry the states itself (it sets ``meta["force_states"]``): the explicit
Runge-Kutta methods integrate them with their stages from ``ForceModel.state_rates`` and finish the step with
``ForceModel.advance_states`` at the weighted rate, as MuJoCo's RK4 integrates ``act`` (:func:`stage_inputs`,
:func:`advance_all`).

A rollout starts from ``ForceModel.initial_states`` (zeros by default, MuJoCo's reset), or from the states
given to ``Simulator.rollout(force_states0=...)`` (:func:`start_with_states`). The start runs of
PBAD's history node (``start_acceleration``) hold the states at their initial values, with ``a_next`` the
states after a step of length zero. Halving a step halves it for the states too (two updates with ``dt / 2``).
Constrained (NMDP) problems do not take force models with states yet: one clear error.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import casadi as ca
import numpy as np

from .errors import StepError
from .model import ArticulatedBody


def _sizes(model: ArticulatedBody, forces: Sequence[Any]) -> list[tuple[int, int]]:
    from .step import force_sizes

    return [force_sizes(model, f) for f in forces]


def initial_force_states(model: ArticulatedBody, forces: Sequence[Any]) -> np.ndarray:
    """The states ``a`` a rollout starts from: every force model's ``initial_states``, concatenated, checked."""
    parts = []
    for f, (_, n) in zip(forces, _sizes(model, forces)):
        if n:
            a = np.asarray(f.initial_states(model), float).reshape(-1)
            if a.size != n or not np.all(np.isfinite(a)):
                raise StepError(f"force model {getattr(f, 'name', f)!r}: initial_states must be {n} finite numbers "
                                f"(n_states), got {a.tolist()}")
            parts.append(a)
    return np.concatenate(parts) if parts else np.zeros(0)


def _column(force, what: str, value, n: int):
    """The result of ``force``'s ``what`` as an ``n x 1`` CasADi column; a :class:`StepError` naming the model and
    the method where it has another number of entries (or is not numbers at all)."""
    name = getattr(force, "name", force)
    try:
        col = ca.vertcat(*value) if isinstance(value, (list, tuple)) else value
        if isinstance(col, np.ndarray):
            col = ca.DM(col)
        numel = int(col.numel())
    except (TypeError, ValueError, AttributeError, RuntimeError, NotImplementedError):
        raise StepError(f"force model {name!r}: {what} must return a CasADi expression or a list of them, got "
                        f"{type(value).__name__}") from None
    if numel != n:
        raise StepError(f"force model {name!r}: {what} returned {numel} values, n_states declares {n}")
    return ca.reshape(col, n, 1)


def _per_force(model, forces, u, a, after):
    """``(U, extra)``: the integrator's ``u`` -- per force its inputs from ``u``, then for a force with states its
    states from ``a`` and ``after(f, uf, af, k)[0]`` (the states after the step; ``k`` where they start in
    ``a``) -- and the concatenated ``after(...)[1]``."""
    U, extra, i, k = [], [], 0, 0
    for f, (n_in, n_st) in zip(forces, _sizes(model, forces)):
        uf = u[i:i + n_in]
        if n_st:
            af = a[k:k + n_st]
            an, x = after(f, uf, af, k)
            U += [uf, af, an]
            extra.append(x)
            k += n_st
        elif n_in:
            U.append(uf)
        i += n_in
    return ca.vertcat(*U), ca.vertcat(*extra)


def _step_inputs(model, forces, q, qd, t, dt, u, a):
    """``(U, a_next)``: the integrator's ``u`` (per force: its inputs, ``a``, ``a_next``) from the inputs ``u``
    and the states ``a`` of a step from ``(q, qd)`` at ``t`` of length ``dt``."""
    def after(f, uf, af, _):
        an = _column(f, "next_states", f.next_states(model, q, qd, t, dt, uf, af), af.shape[0])
        return an, an

    return _per_force(model, forces, u, a, after)


def stage_inputs(model: ArticulatedBody, forces: Sequence[Any], q, qd, t, dt, u, a):
    """For an integrator that integrates the states itself (``meta["force_states"]``, the explicit Runge-Kutta
    methods): ``(U, rates)`` at one stage ``(q, qd, t, a)`` of a step of ``dt`` -- the integrator's ``u`` (per force:
    its inputs from ``u``, the stage's ``a`` and ``advance_states`` of it at its rate over ``dt``) and the
    states' rates (``state_rates``)."""
    def after(f, uf, af, _):
        n = af.shape[0]
        rf = _column(f, "state_rates", f.state_rates(model, q, qd, t, dt, uf, af), n)
        return _column(f, "advance_states", f.advance_states(model, q, qd, t, dt, uf, af, rf), n), rf

    return _per_force(model, forces, u, a, after)


def advance_all(model: ArticulatedBody, forces: Sequence[Any], q, qd, t, dt, u, a, rates):
    """Every force model's ``advance_states`` from ``a`` at ``rates`` (concatenated as in the state)."""
    def after(f, uf, af, k):
        n = af.shape[0]
        an = _column(f, "advance_states", f.advance_states(model, q, qd, t, dt, uf, af, rates[k:k + n]), n)
        return an, an

    return _per_force(model, forces, u, a, after)[1]


def with_force_states(problem, model: ArticulatedBody, forces: Sequence[Any]):
    """``problem`` with the force models' states in its state (module docstring); ``problem`` itself when no
    force model has any."""
    from .step import ProblemKind

    sizes = _sizes(model, forces)
    na = sum(n for _, n in sizes)
    if na == 0:
        return problem
    stateful = [getattr(f, "name", str(f)) for f, (_, n) in zip(forces, sizes) if n]
    if problem.meta.get("force_states") is not None:  # the integrator carries them itself (explicit Runge-Kutta)
        start, stop = problem.meta["force_states"]
        if stop - start != na or stop != problem.ns:
            raise StepError(f"integrator {problem.integrator!r} carries {stop - start} force-model states at the end "
                            f"of its state (ns = {problem.ns}); its force models have {na}")
        return problem
    if problem.kind is ProblemKind.CONSTRAINED:
        raise StepError(f"integrator {problem.integrator!r} does not carry the states of force models yet "
                        f"({', '.join(stateful)}: {na} states); use pbad or a Newton-Euler integrator")
    nu = sum(n for n, _ in sizes)
    if problem.nu != nu + 2 * na:
        raise StepError(f"integrator {problem.integrator!r} built a step with {problem.nu} inputs; its force models "
                        f"need {nu + 2 * na} (inputs {nu}, states {na} at the start and after the step)")
    a0 = initial_force_states(model, forces)
    try:
        return _wrap(problem, model, forces, nu, na, a0, ca.SX)
    except (RuntimeError, NotImplementedError):       # a function only MX can call (a QP in the step's graph)
        return _wrap(problem, model, forces, nu, na, a0, ca.MX)


def _wrap(pb, model, forces, nu, na, a0, X):
    from .step import standard_params

    nq, nv, ns0 = pb.nq, pb.nv, pb.ns
    ns = ns0 + na
    s, t, dt, u = X.sym("s", ns), X.sym("t"), X.sym("dt"), X.sym("u", nu)
    x, theta = X.sym("x", pb.nx), X.sym("theta")
    a = s[ns0:]
    U, a_next = _step_inputs(model, forces, s[:nq], s[nq:nq + nv], t, dt, u, a)
    p = ca.vertcat(s, dt, t, u)                          # the standard layout [s; dt; t; u]
    p_inner = ca.vertcat(s[:ns0], dt, t, U)

    def fn(name, f, args, inner_args, out=None):
        if f is None:
            return None
        res = f.call(inner_args)
        res = res if out is None else out(res)
        return ca.Function(name, args, res, f.name_in(), f.name_out())

    fields: dict[str, Any] = {
        "ns": ns, "nu": nu, "params": standard_params(ns, nu), "_derived": {},
        "meta": {**dict(pb.meta), "force_states": (ns0, ns)},
        "guess": fn("guess", pb.guess, [p], [p_inner]),
        "advance": fn("advance", pb.advance, [x, p], [x, p_inner], lambda r: [ca.vertcat(r[0], a_next)]),
        "objective_fn": fn("objective", pb.objective_fn, [x, p], [x, p_inner]),
        "residual": fn("residual", pb.residual, [x, p], [x, p_inner]),
        "metric": fn("metric", pb.metric, [p], [p_inner]),
        "error_estimate": fn("error_estimate", pb.error_estimate, [x, p], [x, p_inner]),
        "dense": fn("dense", pb.dense, [x, p, theta], [x, p_inner, theta]),
    }
    ratio = X.sym("ratio")
    fields["restart"] = fn("restart", pb.restart, [s, ratio, dt], [s[:ns0], ratio, dt],
                           lambda r: [ca.vertcat(r[0], a)])
    fields["kinetic"] = fn("kinetic", pb.kinetic, [s, dt], [s[:ns0], dt])
    # init: the inner init with the inputs of the first step (the states a0, a_next over a step of dt)
    q0, qd0, t0, h0 = X.sym("q0", nq), X.sym("qd0", nv), X.sym("t0"), X.sym("dt")
    u0, runs = X.sym("u0", nu), [X.sym(n, nq) for n in ("q_start", "q_check", "q_reverse")]
    U0, _ = _step_inputs(model, forces, q0, qd0, t0, h0, u0, ca.DM(a0))
    fields["init"] = fn("init", pb.init, [q0, qd0, t0, h0, u0, *runs], [q0, qd0, t0, h0, U0, *runs],
                        lambda r: [ca.vertcat(r[0], ca.DM(a0))])
    if pb.start_acceleration is not None:               # the start runs: a held at a0, a_next after a zero step
        qq, vv, tt, uu, sign = X.sym("q", nq), X.sym("v", nv), X.sym("t"), X.sym("u", nu), X.sym("sign")
        Us, _ = _step_inputs(model, forces, qq, vv, tt, 0.0, uu, ca.DM(a0))
        fields["start_acceleration"] = fn("start_acceleration", pb.start_acceleration, [qq, vv, tt, uu, sign],
                                          [qq, vv, tt, Us, sign])
    return dataclasses.replace(pb, **fields)


def start_with_states(sim, q0, qd0, t0: float, force_states0) -> np.ndarray:
    """The first state of ``sim``'s rollout from ``(q0, qd0)`` at ``t0`` with the force models' states set to
    ``force_states0`` (``Simulator.rollout(force_states0=...)``); a :class:`StepError` where its force models keep
    no states or ``force_states0`` is not a real vector of their number."""
    from .checks import vector

    fs = sim.problem.meta.get("force_states")
    if fs is None:
        raise StepError(f"force_states0: this Simulator's force models keep no states ({sim.integrator}, forces "
                        f"{', '.join(sim.problem.forces)})")
    s0 = sim.initial_state(q0, qd0, t0)
    n = fs[1] - fs[0]
    s0[fs[0]:fs[1]] = vector(force_states0, "force_states0", n, f"{n} (the force models' states)")
    return s0
