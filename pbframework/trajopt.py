"""Direct transcription: a trajectory optimisation problem whose dynamics constraints are the integrator's own
step equations, solved by IPOPT through ``casadi.Opti``.

::

    sim = pbf.Simulator(model, "pbad", order=2, dt=0.05,
                        forces=["gravity", ("joint_torque", {"controller": zero, "dofs": [0, 1]})])
    tp = Transcription(sim, steps=40, q0=q_down)
    tp.bound_controls(-5.0, 5.0)
    tp.opti.subject_to(tp.q(40) == q_up)
    tp.minimize(ca.sumsqr(tp.U) * sim.config.dt)
    sol = tp.solve()                      # IPOPT; sol.q, sol.u, sol.iterations, sol.success

The decision variables are the integrator's states ``S[:, k]`` (``k = 0 .. steps``; ``S[:, 0]`` fixed to
``sim.initial_state(q0, qd0)``), the step unknowns ``X[:, k]`` and the per-step force inputs ``U[:, k]``
(``sim.problem.nu`` of them: a ``joint_torque`` with a ``controller`` gives one per controlled coordinate; the
controller itself is never called here). Between consecutive knots the constraints are exactly what a
Simulator step solves: the step problem's first-order conditions ``g(X_k, p_k) = 0`` (the position-based
energy's gradient of PBAD order 2, seed 000 Eq. 5; the collocation residual of orders >= 3, Eq. 6-7; PBFD's
Eq. 13) and ``S_{k+1} = advance(X_k, p_k)``, with ``p_k = [S_k; dt; t_k; U_k]``. Explicit integrators have
no ``X``. So a trajectory the Simulator produced satisfies the constraints to its solver tolerance, and large
position-based steps make the horizon short. Steps that are not smooth (NMDP, the QP baselines) are refused.

Models with quaternion joints (``ball``, ``free``: ``nq != nv``). The integrators on the rotation group
(:mod:`pbframework.plugins.integrators.pbad_group`, PBFD) already solve each step for *tangent* increments
in a chart centred on the step's start, so ``X[:, k]`` are tangent increments (``nv`` per node) and
``advance`` rebuilds the next configuration by the exponential map, ``q_{k+1} = q_k (+) xi``
(:func:`pbframework.lie.q_integrate`). The knot states keep their ``nq`` quaternion entries as decision
variables, and no norm constraint is added: the equality ``S[:, k + 1] == advance(X_k, p_k)`` carries the unit
norm of ``S[:, 0]`` (fixed to ``sim.initial_state``) from knot to knot, exactly at a feasible point (to
IPOPT's constraint tolerance in practice); a norm constraint as well would duplicate it, and equality
constraints that are linearly dependent stall IPOPT. For the same reason a goal on a group model is stated
in the tangent, ``opti.subject_to(tp.q_error(N, q_goal) == 0)`` (:meth:`Transcription.q_error`, ``nv``
equations: :func:`pbframework.lie.q_difference`), not as ``q(N) == q_goal`` (``nq`` equations of which only
``nv`` are independent on the group). ``max_step`` bounds the tangent displacement ``q_k (-) q_{k+1}`` and
:meth:`Transcription.set_initial` takes finite-difference velocities on the group.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import casadi as ca
import numpy as np

from .differentiable import NOT_SMOOTH
from .step import ProblemKind, StepError

__all__ = ["Transcription", "TranscriptionResult"]


@dataclass
class TranscriptionResult:
    """What :meth:`Transcription.solve` found.

    Attributes:
        success: IPOPT reported success.
        status: IPOPT's return status.
        iterations: IPOPT iterations.
        t, q, s, u: knot times, configurations (steps + 1, nq), states (steps + 1, ns), inputs (steps, nu).
        cost: the objective at the solution.
        wall_time: seconds in IPOPT.
    """

    success: bool
    status: str
    iterations: int
    t: np.ndarray
    q: np.ndarray
    s: np.ndarray
    u: np.ndarray
    cost: float
    wall_time: float


class Transcription:
    """A direct transcription of ``steps`` steps of ``sim`` from ``(q0, qd0)`` (module docstring).

    Args:
        sim: the Simulator whose integrator, forces and ``dt`` define the steps.
        steps: the number of steps (knots ``0 .. steps``).
        q0, qd0: the start (``S[:, 0]`` is fixed to ``sim.initial_state(q0, qd0, t0)``, its inputs at zero).
        max_step: bound on every coordinate's change over one step (rad or m) for implicit integrators,
            ``None`` for none. The first-order conditions of a large
            position-based step have other roots far away (a step's energy is not convex over the whole
            space); without the bound IPOPT may pick one, a step the Simulator would never take (measured:
            a double-pendulum swing-up through a 3-rad jump of one joint in one 50 ms step).

    Attributes:
        opti: the ``casadi.Opti`` problem (add constraints with ``opti.subject_to``).
        S, X, U: the decision variables (states, step unknowns, inputs), one column per knot / step.

    Raises:
        StepError: a non-smooth integrator, bad ``steps``.
    """

    def __init__(self, sim, steps: int, q0, qd0=None, *, t0: float = 0.0, max_step: float | None = 0.5) -> None:
        pb = sim.problem
        if pb.integrator in NOT_SMOOTH or pb.kind is ProblemKind.CONSTRAINED:
            raise StepError(f"{pb.integrator}: its step is not smooth (a QP's active set or a projected-gradient "
                            f"loop), so it cannot be a constraint of a gradient-based transcription")
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
            raise StepError(f"Transcription: steps must be a positive integer, got {steps!r}")
        self.sim, self.problem, self.steps = sim, pb, int(steps)
        self.dt = float(sim.config.dt)
        self.t0 = float(t0)
        self.opti = opti = ca.Opti()
        N, ns, nx, nu = self.steps, pb.ns, pb.nx, pb.nu
        self.S = opti.variable(ns, N + 1)
        self.X = opti.variable(nx, N) if nx else None
        self.U = opti.variable(nu, N) if nu else None
        s0 = sim.initial_state(q0, qd0, t0)
        opti.subject_to(self.S[:, 0] == s0)
        self._s0 = s0
        if pb.kind is not ProblemKind.EXPLICIT:
            from .differentiable import _conditions

            g = _conditions(pb)
        for k in range(N):
            u = self.U[:, k] if nu else ca.MX(0, 1)
            p = pb.params(self.S[:, k], self.t0 + k * self.dt, self.dt, u)
            x = self.X[:, k] if nx else ca.MX(0, 1)
            if nx:
                opti.subject_to(g(x, p) == 0)
                if max_step is not None:
                    dq = self._displacement(self.S[: pb.nq, k], self.S[: pb.nq, k + 1])
                    opti.subject_to(opti.bounded(-max_step, dq, max_step))
            opti.subject_to(self.S[:, k + 1] == pb.advance(x, p))
        self._cost = None
        self._guess_from_simulation()

    # -- views and helpers --------------------------------------------------------------------------------
    def _displacement(self, q0, q1):
        """``q1 - q0`` on flat models, the tangent displacement ``q0 (-) q1`` (``nv``) on the group."""
        if not self.sim.model.on_group:
            return q1 - q0
        from .lie import q_difference

        return q_difference(self.sim.model)(q0, q1)

    def q(self, k: int):
        """The configuration at knot ``k`` (an Opti expression; ``nq`` entries, quaternions included)."""
        return self.S[: self.problem.nq, k]

    def q_error(self, k: int, q_ref):
        """The displacement from ``q_ref`` (``nq`` values) to the configuration at knot ``k``: ``q(k) - q_ref``
        on flat models, the tangent ``q_ref (-) q(k)`` (``nv`` entries, :func:`pbframework.lie.q_difference`)
        on models with quaternion joints; ``q_error(N, q_goal) == 0`` states a goal with independent
        equations on either (module docstring)."""
        ref = np.asarray(q_ref, float).ravel()
        if ref.size != self.problem.nq:
            raise StepError(f"Transcription: q_ref needs {self.problem.nq} values (nq), got {ref.size}")
        return self._displacement(ca.DM(ref), self.q(k))

    def qd(self, k: int):
        """The velocity estimate at knot ``k``."""
        nq = self.problem.nq
        return self.S[nq:nq + self.problem.nv, k]

    def bound_controls(self, lower, upper) -> None:
        """``lower <= U <= upper`` (scalars or one value per input)."""
        nu = self.problem.nu
        if not nu:
            raise StepError("Transcription: the force models read no per-step inputs (no controls to bound); "
                            "give a joint_torque with a controller")
        def values(b):
            a = np.asarray(b, float).ravel()
            if a.size == 1:
                a = np.full(nu, a[0])
            if a.size != nu:
                raise StepError(f"Transcription: control bounds must be a scalar or {nu} values (one per input), "
                                f"got {a.size}")
            return a

        lo, hi = values(lower), values(upper)
        for k in range(self.steps):
            self.opti.subject_to(self.opti.bounded(lo, self.U[:, k], hi))

    def bound_configurations(self, lower, upper, from_knot: int = 1) -> None:
        """``lower <= q_k <= upper`` for every knot from ``from_knot`` (``nq`` values each; ``inf`` = none)."""
        nq = self.problem.nq
        lo, hi = np.asarray(lower, float).ravel(), np.asarray(upper, float).ravel()
        if lo.size != nq or hi.size != nq:
            raise StepError(f"Transcription: configuration bounds need {nq} values each, got {lo.size} and {hi.size}")
        rows = [i for i in range(nq) if np.isfinite(lo[i]) or np.isfinite(hi[i])]
        for k in range(from_knot, self.steps + 1):
            for i in rows:
                self.opti.subject_to(self.opti.bounded(lo[i], self.S[i, k], hi[i]))

    def minimize(self, cost) -> None:
        """Minimise ``cost``, a CasADi expression of the decision variables."""
        dv = [v for v in (self.S, self.X, self.U) if v is not None]
        if not isinstance(cost, ca.MX) or cost.numel() != 1 or not ca.depends_on(cost, ca.vertcat(*[ca.vec(v) for v in dv])):
            raise StepError("Transcription: the cost must be a scalar CasADi expression of the decision variables "
                            "(S, X, U or the views q(k), qd(k)); this one does not depend on them")
        self._cost = cost
        self.opti.minimize(cost)

    def _guess_from_simulation(self) -> None:
        """Initial guess: the start state at every knot, zero step unknowns (``set_initial`` gives a better one)."""
        S = np.repeat(self._s0[:, None], self.steps + 1, axis=1)
        self.opti.set_initial(self.S, S)
        if self.X is not None:
            self.opti.set_initial(self.X, np.zeros((self.problem.nx, self.steps)))

    def set_initial(self, q=None, u=None) -> None:
        """Initial guess: configurations ``q`` (steps + 1, nq; the states are built from them with finite-
        difference velocities, tangent ones on the group) and / or inputs ``u`` (steps, nu)."""
        if q is not None:
            q = np.asarray(q, float)
            if q.shape != (self.steps + 1, self.problem.nq):
                raise StepError(f"Transcription: initial q must have shape {(self.steps + 1, self.problem.nq)}, "
                                f"got {q.shape}")
            if self.sim.model.on_group:
                diff = self._displacement
                dq = np.array([np.asarray(diff(ca.DM(q[k]), ca.DM(q[k + 1]))).ravel() for k in range(self.steps)])
                qd = np.vstack([dq[:1], 0.5 * (dq[1:] + dq[:-1]), dq[-1:]]) / self.dt   # np.gradient's stencil
            else:
                qd = np.gradient(q, self.dt, axis=0)
            S = np.array([self.sim.initial_state(q[k], qd[k], self.t0 + k * self.dt) for k in range(self.steps + 1)])
            self.opti.set_initial(self.S, S.T)
            if self.X is not None:
                p = [self.problem.params(S[k], self.t0 + k * self.dt, self.dt, np.zeros(self.problem.nu))
                     for k in range(self.steps)]
                self.opti.set_initial(self.X, np.column_stack([np.asarray(self.problem.guess(pk)).ravel() for pk in p]))
        if u is not None:
            u = np.asarray(u, float)
            if self.U is None or u.shape != (self.steps, self.problem.nu):
                raise StepError(f"Transcription: initial u must have shape {(self.steps, self.problem.nu)}, got "
                                f"{u.shape}")
            self.opti.set_initial(self.U, u.T)

    def solve(self, *, max_iter: int = 500, tol: float = 1e-8, verbose: bool = False,
              jit: bool = False) -> TranscriptionResult:
        """Solve with IPOPT; a failed solve is returned (``success`` False, the last iterate), not raised.

        ``jit=True`` has CasADi generate C for the NLP's functions (constraints, their Jacobian, the
        Lagrangian's Hessian) and compile them with ``gcc -O1`` before IPOPT starts (CasADi's ``jit`` with
        the ``shell`` compiler; compiled anew at every ``solve``, not cached), so the iterations run native
        code instead of the virtual machine; ``wall_time`` includes the compilation."""
        import time

        if self._cost is None:
            raise StepError("Transcription: set a cost with minimize(...) before solve()")
        opts = {"ipopt.max_iter": int(max_iter), "ipopt.tol": float(tol), "print_time": False}
        if not verbose:
            opts.update({"ipopt.print_level": 0, "ipopt.sb": "yes"})
        scratch = None
        if jit:
            import tempfile

            # CasADi's jit writes its C and object files into the working directory: run the solve (which
            # compiles) from a scratch folder, removed afterwards
            scratch = tempfile.TemporaryDirectory(prefix="pbf_jit_")
            opts.update({"jit": True, "compiler": "shell", "jit_options": {"flags": ["-O1"], "verbose": False}})
        self.opti.solver("ipopt", opts)
        t0 = time.perf_counter()
        cwd = os.getcwd()
        try:
            if scratch is not None:
                os.chdir(scratch.name)
            sol = self.opti.solve()
            value, stats = sol.value, sol.stats()
        except RuntimeError:
            value, stats = self.opti.debug.value, self.opti.stats()
        finally:
            os.chdir(cwd)
        wall = time.perf_counter() - t0
        S = np.asarray(value(self.S)).reshape(self.problem.ns, self.steps + 1).T
        U = np.asarray(value(self.U)).reshape(self.problem.nu, self.steps).T if self.U is not None else \
            np.zeros((self.steps, 0))
        cost = float(value(self._cost))
        if scratch is not None:
            scratch.cleanup()
        return TranscriptionResult(bool(stats.get("success", False)), str(stats.get("return_status", "")),
                                   int(stats.get("iter_count", 0)), self.t0 + np.arange(self.steps + 1) * self.dt,
                                   S[:, : self.problem.nq], S, U, cost, wall)
