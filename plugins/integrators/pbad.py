r"""Position-based articulated dynamics (PBAD, seed 000 §4) and its high-order collocation (§4.1).

Collocation nodes
-----------------
For order ``K >= 2`` the step from ``t_k`` to ``t_{k+1} = t_k + dt`` has the unknown configurations
``q_{k+alpha_1} ... q_{k+alpha_{K-1}}`` where ``alpha_1 < ... < alpha_{K-2}`` are the roots of the
shifted Legendre polynomial ``L_{K-2}(2 alpha - 1)`` and ``alpha_{K-1} = 1``. In step units
``tau = (t - t_k) / dt`` the degree-K collocation polynomial passes through the K+1 nodes

    tau_0 = alpha_{K-2} - 1   (the previous step's last interior node; alpha_0 = 0, so tau_0 = -1 for K=2)
    tau_1 = 0                 (q_k)
    tau_{1+j} = alpha_j       (the unknowns, j = 1..K-1)

Every body point follows the *workspace* polynomial ``P(tau) = sum_m l_m(tau) P(q_m)`` through its
positions at the nodes (``l_m`` the Lagrange basis), so ``Pdd(tau_i) = dt^-2 sum_m l_m''(tau_i) P(q_m)``.

Residual form (Eq. 6-7), derived
--------------------------------
Eq. 6 at node i: ``int dP(q_i)/dq_i^T [rho Pdd(tau_i) - f] dp = 0``. With homogeneous link transforms
``T_e(q)`` and the second-moment matrix ``M~_e = int (p;1)(p;1)^T dm`` of each link (seed 000 Eq. 8),

    int P(q_a) . (sum_m w_m P(q_m)) dm = sum_e (T_e(q_a)^T D_e) : M~_e,    D_e = sum_m w_m T_e(q_m),

and since ``sum_m l_m''(tau) = 0`` the bottom row of ``D_e`` vanishes. Differentiating in ``q_a`` with
``D_e`` held fixed gives the inertial term of Eq. 6 as a *gradient of the inertia integral*
``d/dq_a sum_m w_m I(q_a, q_m)`` (the ``dI/dq_b`` entries of Table 1), evaluated at ``q_a = q_i`` with
``w_m = l_m''(tau_i)``. The external term ``int dP/dq^T f dp`` is the generalised force ``F_i`` of the
force models (their ``generalized_force`` at ``(q_i, qd_i, t_k + tau_i dt)``, the velocity ``qd_i`` being
the derivative of the configuration-space polynomial through the nodes). Scaling by ``dt^2``:

    r_i(x) = d/dq_a [ sum_e (T_e(q_a)^T D_e^{(i)}) : M~_e ]_{q_a = q_i}  -  dt^2 F_i ,   i = 2..K,

one block of ``nq`` per unknown node; Eq. 7 is ``sum_i ||r_i||^2`` (we minimise ``0.5 ||r||^2``). The
residual is a sum of squares over generalised coordinates because the workspace residual
``rho Pdd - f`` has been projected by ``J^T = dP/dq^T``. Its Jacobian needs ``d^2 I / dq_b^2`` and
``d^2 I / dq_a dq_b`` only (Table 1), i.e. second derivatives of the kinematics.

Preconditioning (``StepConfig.precondition``, default on): the Jacobian of ``r`` is close to
``W (x) M`` (``W`` the node weights, ``M`` the mass matrix), whose condition number for a chain is 1e6 and
more, so ``J^T J`` (1e12) makes damped Gauss-Newton and L-BFGS crawl. We therefore minimise
``0.5 sum_i ||M_k^-1 r_i||^2`` with ``M_k = M(q_k)`` fixed during the step: the weighted residual is an
acceleration times ``dt^2`` (radians), its Jacobian ``~ W (x) I + O(dt)`` is far better conditioned, and
because the collocation system is square its zero-residual solution is unchanged. The problem carries
``M_k`` as its ``metric`` and the solvers apply the weight numerically (one Cholesky factorisation per
step, :func:`pbframework.step.evaluator`), so the CasADi graphs stay those of the raw residual (an
in-graph factorisation made the CHAIN-100 Jacobian 6x larger). With ``precondition=False`` the objective is
the literal Eq. 7.

Energy form (Eq. 5), order 2
----------------------------
With nodes (q_{k-1}, q_k, q_{k+1}) the weights are (1, -2, 1) and Eq. 5 times ``dt^2`` is

    E(q) = 1/2 int ||P(q) - 2 P(q_k) + P(q_{k-1})||^2 dm + dt^2 sum Q(q, q_k, q_{k-1}; dt, t_{k+1})
         = 1/2 sum_e (D_e^T D_e) : M~_e + dt^2 sum Q ,     D_e = T_e(q) - 2 T_e(q_k) + T_e(q_{k-1}),

which equals ``1/2 (I(q,q) - 4 I(q,q_k) + 2 I(q,q_{k-1}) + const)`` of the inertia integral but is
evaluated from the small difference ``D_e`` (no cancellation of large terms at small dt). Its gradient is
``dt^2`` times the left side of Eq. 4, so the minimiser is Eq. 4's solution. The factor ``dt^2`` makes the
gradient a mass-weighted displacement (kg m^2): solver tolerances mean the same at every dt.

Velocity estimate, start and initial guess
------------------------------------------
The velocity carried in the state (and used for the reported kinetic energy) is, for K = 2, the backward
difference ``v_{k+1} = (q_{k+1} - q_k) / dt``: it is the scheme's own velocity. For ``x'' = -w^2 x`` the
scheme ``x_{k+1} - 2 x_k + x_{k-1} = -dt^2 w^2 x_{k+1}`` multiplied by ``x_{k+1} - x_k`` gives

    (v_{k+1}^2 + w^2 x_{k+1}^2)/2 - (v_k^2 + w^2 x_k^2)/2 = -(v_{k+1} - v_k)^2/2 - w^2 (x_{k+1} - x_k)^2/2 <= 0,

so the scheme's energy never grows from step to step (the second-order BDF2 estimate has no such property and, at large dt
on long chains, reports energy the positions do not have). For K >= 3 it is the derivative at ``t_{k+1}``
of the configuration-space polynomial through the K+1 node configurations (accurate to the scheme's
order). The first history node ``q(t0 + tau_0 dt)`` is the exact motion's, integrated backwards from
``(q0, qd0)`` by classical RK4 (forward dynamics with the generalised-force models, inputs held;
:func:`pbframework.step.start_configurations`, the same arithmetic in the generated-C driver) in
2 :data:`START_SUBSTEPS` steps, error O(dt^5), where that motion is resolved and shaped little by
dissipation; otherwise the local third-order Taylor node (O(dt^4)). ``init`` takes the RK4 node where the
same integration in half as many steps, and the one with the forces' velocity argument reversed (equal for
time-reversible dynamics), both agree with it to a tenth of its distance from the Taylor node
(:func:`pbframework.step.start_node`). On CHAIN-100 at rest at dt = 0.1 s the Taylor node alone is
0.113 rad from the exact one (tip joint), and the scheme carried that error as spurious kinetic energy:
5.1% of DESIGN.md's energy scale above the initial energy after the first step; with the RK4 node
(1.3e-5 rad off) the run never rises above its initial energy (2 s measured: largest value after t0
-0.076%). Backwards in time, friction, damping and drag are exponential growth, and the exact past carries
velocities far above ``qd0`` into the first step (a damped pendulum: first-step velocity 1.74 from the RK4
node, 1.07 from the Taylor node, 0.32 exact; with ``tests/test_forces.py``'s box on a slope the RK4 runs
reach 1e6-1e20): there the Taylor node is kept. The solver starts
from the second-order Taylor prediction ``q_k + a dt v_k + (a dt)^2 / 2 qdd(q_k, v_k)`` at each node
(forward dynamics with the generalised-force models), scaled down to at most :data:`GUESS_STEP` rad.

Reported kinetic energy: for K >= 3, ``qd^T M(q) qd / 2`` with the velocity above. For K = 2 it is the
kinetic energy of the scheme's own velocity estimate of every body point, the chord
``(P(q_{k+1}) - P(q_k)) / dt``: ``T = 1/2 int ||P(q_{k+1}) - P(q_k)||^2 dm / dt^2`` (the inertia-integral
form, evaluated from the difference of the transforms), which equals ``v^T M v / 2`` up to O(dt) but,
unlike it, does not depend on the coordinate chart (near a ball joint's gimbal lock a coordinate may turn
by radians while the body barely moves). At the start the Simulator reports the exact ``qd0^T M qd0 / 2``
instead: there the chord runs to the history node, the mean velocity over the step before t0, an O(dt)
estimate of ``qd0`` (CHAIN-100 at rest, dt = 0.1 s: 0.022% of the energy scale, where the exact value is 0).

A step retried as two half steps re-expresses the history without dynamics (``restart``): for K = 2 the
history node moves along the chord ``q_k + ratio (q_h - q_k)`` (exact: the velocity is the chord); for
K >= 3 it moves along the quadratic with value ``q_k`` and slope ``v_k`` at ``t_k`` through the old history
node, ``q_k + r l + r^2 (q_h - q_k - l)`` with ``l = tau_0 dt v_k``, accurate to O(dt^3) (a straight line
would move the node by O(dt^2) and, at 2.5 ms on a whipping CHAIN-10, change its velocity by ~1% per
retry).

Adaptive steps
--------------
For step-size control (:mod:`pbframework.adaptive`) the problem carries ``error_estimate``: the solved end
configuration ``q_{k+1}`` minus its prediction by the degree-(K-1) polynomial through the other K nodes
(``tau_0 .. tau_{K-1}``) extrapolated to ``tau_K = 1``. Both are accurate to ``O(dt^K)``, the scheme's
local error (global order K-1), so the difference estimates it (a predictor-corrector, Milne-type
estimate; for K = 2 it is ``dt^2 qdd``, twice the local position error of the scheme). ``dense`` evaluates
the degree-K collocation polynomial through the K+1 nodes at ``t_k + theta dt`` and its derivative (for
K = 2 the velocity is the linear interpolation of the chord velocities ``v_k`` and ``v_{k+1}``, so both
ends are the states' own).

Accuracy and limits (measured, see tests/test_convergence.py and benchmarks/): global order K-1 (the
paper's §6.1 remark: order-K collocation is comparable to Runge-Kutta of order K-1): 0.84 (fit, -> 1),
1.97 and 3.04 for K = 2, 3, 4 on CHAIN-3. Order 2 is strongly dissipative and stable at any tested step
(CHAIN-10/40/100 at 0.05 and 0.1 s for 10 s without divergence and the energy never above its exact start
value). Order 3 is not dissipative:
on CHAIN-10 at 2.5 ms (``benchmarks/energy.py``) it holds the energy within 0.1% of the scale for 4.2 s
and within 0.5% to 6.7 s, then gains energy once the chain whips (|qd| > 20 rad/s, up to 200 rad/s in
the ball joints' coordinates): +4% at 6.75 s, and from 8.3 s jumps of 20-37% in single steps whose sign
and size change from run to run with any rounding-level change (max rise +18% and +58% for two versions
of the start); at 0.05 s its steps need hundreds of solver iterations. Use order 2 for large steps,
order >= 3 for accuracy at small ones. On ``x'' = -w^2 x`` (spectral radius rho of the step map, h = dt w)
order 3 is dissipative at every tested h (rho - 1 = -3e-6 at h = 0.1, -3e-2 at h = 1, -0.29 at h = 2);
order 4 -- the paper's nodes, with the history node at alpha_{K-2} - 1 -- is weakly anti-dissipative at
every h (rho - 1 = +2.3e-7 at h = 0.1, +1.9e-3 at h = 1, +0.28 at h = 3), so its energy drifts up over
long runs. Where a ball joint's axes come near alignment (CHAIN-N whipping: coordinate speeds of 40-100
rad/s while the body moves slowly) the collocation equations in these coordinates become ill-conditioned
(Jacobian condition 1e6 and more): Gauss-Newton from the predicted start can sit in a valley of Eq. 7 with
residual left while a root exists (plain Newton from the same start finds it after wandering), and the
step is retried as two halves. The energy excursions of order 3 in a whip are the scheme's (second-order)
truncation error, not the velocity estimate: on CHAIN-10 at 2.5 ms the total energy rises by 5.8% for three
steps at t = 6.75 s (|qd| up to 46 rad/s, no retries, 3 iterations per step) and settles 2% above its
start; the kinetic energy of the workspace-polynomial velocity ``1/2 int ||Pdot||^2 dm``, of its
mass-weighted projection ``M^-1 int J^T Pdot dm`` and of the configuration-polynomial velocity agree there
within 0.8% of the scale (5.06%, 5.06%, 5.78%). On CHAIN-100 at 2.5 ms (``benchmarks/energy.py``) the whip
(t > 1.6 s, |qd| 20-140 rad/s) is where the scheme's energy comes from; ``benchmarks/whip_steps.py`` redid
every 5th step from 1.6 to 2.6 s (81 steps, bitwise the rollout's) against 50 RK4 substeps from the same
(q_k, v_k), which change the energy by at most 7e-7% of the scale: the 25 steps taken whole gained +0.019%
each on average (0.47% in all) at 5e-4 rad from the exact motion, the 56 halved ones +5.2% in all (by
halving depth +0.11%, +0.23%, +0.06%, +0.13% on average at depths 1-4) at ~1e-3 rad; 56 of the 81 first
solves from the guess stalled unconverged (median 37 iterations) before their halving.
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from pbframework.dynamics import crba
from pbframework.forces import ForceForm
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.kinematics import element_poses, element_tree
from pbframework.model import ArticulatedBody
from pbframework.step import (
    INIT_NAMES, Objective, acceleration_expr, ProblemKind, StepConfig, StepError, StepProblem, force_forms, force_label,
    generalized_force_expr, init_symbols, input_slices, potential_expr, require_forms, split_params,
    standard_params, start_node, taylor_start,
)

MAX_ORDER = 8
START_SUBSTEPS = 8
"""RK4 steps of the start's check run over the history node's offset; the node itself takes twice as many
(CHAIN-100 at rest, dt = 0.1 s: 1.3e-5 rad from the exact node with 16 steps, 1.5e-4 with 8, against 0.113
for a third-order Taylor expansion)."""
GUESS_STEP = 0.25
"""Largest predicted displacement (infinity norm, rad / m) of the initial guess; a longer Taylor prediction
is scaled down (near a joint singularity forward dynamics predicts accelerations the implicit step never
takes)."""


def collocation_nodes(order: int) -> np.ndarray:
    """The K+1 node times ``tau`` (in steps, relative to t_k) of the order-K scheme (module docstring)."""
    K = int(order)
    if K < 2:
        raise StepError(f"pbad: order must be >= 2, got {order!r}")
    interior = (np.polynomial.legendre.leggauss(K - 2)[0] + 1.0) / 2.0 if K > 2 else np.zeros(0)
    alphas = np.concatenate([np.sort(interior), [1.0]])
    last_interior = alphas[-2] if K > 2 else 0.0
    return np.concatenate([[last_interior - 1.0, 0.0], alphas])


def lagrange_derivative_weights(nodes: np.ndarray, at: np.ndarray, derivative: int) -> np.ndarray:
    """``W[i, m] = l_m^{(derivative)}(at[i])`` for the Lagrange basis through ``nodes``."""
    nodes = np.asarray(nodes, float)
    n = len(nodes)
    V = np.vander(nodes, n, increasing=True)           # V[m, j] = nodes[m]^j
    C = np.linalg.inv(V)                               # l_m(tau) = sum_j C[j, m] tau^j
    W = np.zeros((len(at), n))
    for i, a in enumerate(np.atleast_1d(at)):
        row = np.zeros(n)
        for j in range(derivative, n):
            coef = np.prod(np.arange(j - derivative + 1, j + 1)) if derivative else 1.0
            row[j] = coef * a ** (j - derivative)
        W[i] = row @ C
    return W


def _error_and_dense(tau: np.ndarray, Q: list, x, p, dt, v_k, v_next) -> tuple[ca.Function, ca.Function]:
    """The step's local error estimate and dense output (see "Adaptive steps" in the module docstring)."""
    K = len(tau) - 1
    w = lagrange_derivative_weights(tau[:K], np.array([tau[K]]), 0)[0]      # predictor at tau_K = 1
    e = Q[K] - sum(float(w[m]) * Q[m] for m in range(K))
    error_estimate = ca.Function("error_estimate", [x, p], [e], ["x", "p"], ["e"])
    theta = ca.SX.sym("theta")
    V = np.vander(tau, K + 1, increasing=True)
    C = np.linalg.inv(V)                                  # l_m(theta) = sum_j C[j, m] theta^j
    powers = [theta**j for j in range(K + 1)]
    dpowers = [j * theta**(j - 1) if j else ca.SX(0) for j in range(K + 1)]
    lag = [sum(float(C[j, m]) * powers[j] for j in range(K + 1)) for m in range(K + 1)]
    dlag = [sum(float(C[j, m]) * dpowers[j] for j in range(K + 1)) for m in range(K + 1)]
    q = sum(lag[m] * Q[m] for m in range(K + 1))
    if K == 2:      # the scheme's velocities are chords: interpolate them, exact at both ends
        v = (1 - theta) * v_k + theta * v_next
    else:
        v = sum(dlag[m] * Q[m] for m in range(K + 1)) / dt
    dense = ca.Function("dense", [x, p, theta], [ca.vertcat(q, v)], ["x", "p", "theta"], ["qv"])
    return error_estimate, dense


def _massive(model: ArticulatedBody):
    return [(i, e.second_moment) for i, e in enumerate(element_tree(model).elements) if e.mass > 0.0]


def armature_vector(model: ArticulatedBody) -> np.ndarray:
    """Per configuration coordinate the joint armature (reflected rotor inertia, ``Joint.armature``; hinges
    and slides only, zeros on quaternion entries): it adds ``1/2 a qd^2`` to the kinetic energy, so the energy
    form gains ``1/2 a (q_{k+1} - 2 q_k + q_{k-1})^2`` and the residual ``a sum_m w_m q_m`` (a hinge's or
    slide's coordinate is additive on the group too, so the same terms hold in the chart of
    :mod:`.pbad_group`)."""
    tree = element_tree(model)
    a = np.zeros(model.nq)
    for i, e in enumerate(tree.elements):
        a[tree.q_start[i]] = e.armature if e.nq == 1 else 0.0
    return a


def armature_velocity_map(model: ArticulatedBody) -> np.ndarray:
    """``(nv, nq)``: the armature of each hinge / slide at its velocity row and configuration column, so
    ``A @ sum_m w_m q_m`` is the armature's share of the residual in velocity coordinates."""
    tree = element_tree(model)
    A = np.zeros((model.nv, model.nq))
    for i, e in enumerate(tree.elements):
        if e.nq == 1:
            A[tree.v_start[i], tree.q_start[i]] = e.armature
    return A


def _quad(DR, Dt, M) -> ca.SX:
    """``(D^T D) : M~`` = int ||DR p + Dt||^2 dm for a homogeneous difference D with zero bottom row."""
    S, mc, m = ca.DM(M[:3, :3]), ca.DM(M[:3, 3]), float(M[3, 3])
    return ca.sum1(ca.sum2(ca.mtimes(DR.T, DR) * S)) + 2 * ca.dot(Dt, ca.mtimes(DR, mc)) + m * ca.dot(Dt, Dt)


def inertia_force_function(model: ArticulatedBody) -> ca.Function:
    """``G: (qa, D) -> d/dqa sum_e (T_e(qa)^T D_e) : M~_e`` with ``D`` the stacked (DR, Dt) of every massive
    element (12 numbers each, column-major DR then Dt). Cached on the model."""
    key = "_pbad_inertia_force"
    if key not in model.cache:
        qa = ca.SX.sym("qa", model.nq)
        D = ca.SX.sym("D", 12 * len(_massive(model)))
        w = inertia_pairing(model, element_poses(model, qa), D)
        model.cache[key] = ca.Function("pbad_inertia_force", [qa, D], [ca.gradient(w, qa)], ["qa", "D"], ["G"])
    return model.cache[key]


def chord_kinetic(model: ArticulatedBody, s_sym, q_cur, q_prev, dts) -> ca.Function:
    """Order 2's kinetic energy ``T = 1/2 int ||P(q_{k+1}) - P(q_k)||^2 dm / dt^2`` of a state ``s_sym``
    whose configuration is ``q_cur`` and history node ``q_prev`` (module docstring)."""
    pa, pb = element_poses(model, q_cur), element_poses(model, q_prev)
    T = sum(0.5 * _quad(pa[i][0] - pb[i][0], pa[i][1] - pb[i][1], M) for i, M in _massive(model)) / dts**2
    A = armature_vector(model)
    if A.any():
        T = T + 0.5 * ca.dot(ca.DM(A) * (q_cur - q_prev), q_cur - q_prev) / dts**2
    return ca.Function("kinetic", [s_sym, dts], [T], ["s", "dt"], ["T"])


def node_differences(model: ArticulatedBody, Q: list):
    """``(weights, element) -> (DR, Dt)``: the weighted sum of the element's pose over the nodes ``Q``."""
    poses = [element_poses(model, Qm) for Qm in Q]

    def difference(weights, i_elem):
        DR = sum(float(w) * poses[m][i_elem][0] for m, w in enumerate(weights) if w != 0.0)
        Dt = sum(float(w) * poses[m][i_elem][1] for m, w in enumerate(weights) if w != 0.0)
        return DR, Dt
    return difference


def order2_energy(model: ArticulatedBody, forces, difference, Q: list, dt, t, u) -> ca.SX:
    """Eq. 5 times ``dt^2`` over the nodes ``Q = [q_{k-1}, q_k, q_{k+1}]`` (module docstring, "Energy form")."""
    E = 0
    for i_elem, M in _massive(model):
        DR, Dt = difference((1.0, -2.0, 1.0), i_elem)       # nodes (q_{k-1}, q_k, q_{k+1})
        E = E + 0.5 * _quad(DR, Dt, M)
    A = armature_vector(model)
    if A.any():
        d2 = Q[2] - 2 * Q[1] + Q[0]
        E = E + 0.5 * ca.dot(ca.DM(A) * d2, d2)
    return E + dt**2 * potential_expr(model, forces, Q[2], Q[1], Q[0], dt, t + dt, u)


def node_weighted_poses(massive, difference, weights) -> ca.SX:
    """The stacked ``(DR, Dt)`` of every massive element for one node's weights (:func:`inertia_pairing`'s
    ``D``)."""
    D = []
    for i_elem, _ in massive:
        DR, Dt = difference(weights, i_elem)
        D += [ca.reshape(DR, 9, 1), Dt]
    return ca.vertcat(*D) if D else ca.SX(0, 1)


def inertia_pairing(model: ArticulatedBody, poses, D) -> ca.SX:
    """``sum_e (T_e^T D_e) : M~_e`` for the element poses ``poses`` and the stacked differences ``D`` of
    every massive element (see :func:`inertia_force_function`)."""
    w = 0
    for k, (i, M) in enumerate(_massive(model)):
        Ra, ta = poses[i]
        DR = ca.reshape(D[12 * k:12 * k + 9], 3, 3)
        Dt = D[12 * k + 9:12 * k + 12]
        S, mc, m = ca.DM(M[:3, :3]), ca.DM(M[:3, 3]), float(M[3, 3])
        w = (w + ca.sum1(ca.sum2(Ra * ca.mtimes(DR, S))) + ca.dot(ta, ca.mtimes(DR, mc))
             + ca.dot(ca.mtimes(Ra, mc), Dt) + m * ca.dot(ta, Dt))
    return w


def build_pbad(model: ArticulatedBody, config: StepConfig, forces) -> StepProblem:
    """Assemble one PBAD / position-based collocation step (see the module docstring)."""
    K = int(config.order or 2)
    nq = model.nq
    forces = tuple(forces)
    objective = config.objective
    if objective is Objective.AUTO:
        has_potential = all(ForceForm.POTENTIAL in force_forms(f) for f in forces)
        objective = Objective.ENERGY if (K == 2 and has_potential) else Objective.RESIDUAL
    if objective is Objective.ENERGY:
        if K != 2:
            raise StepError(f"pbad: objective='energy' (seed 000 Eq. 5) exists for order 2 only, got "
                            f"order={K} (use objective='residual', Eq. 7)")
        require_forms(forces, ForceForm.POTENTIAL, "pbad", "the energy objective (Eq. 5)")
    elif K == 2:
        require_forms(forces, ForceForm.GENERALIZED_FORCE, "pbad", "the residual objective (Eq. 7)",
                      alternative=ForceForm.POTENTIAL)
    else:
        require_forms(forces, ForceForm.GENERALIZED_FORCE, f"pbad order {K}",
                      f"collocation of order {K} (Eq. 7, potentials act only over one full step)")

    if model.on_group:            # ball / free joints: the same scheme in a chart centred on q_k
        from pbframework.plugins.integrators.pbad_group import build_pbad_group, check_forces

        if objective is Objective.RESIDUAL:
            check_forces(forces)
        return build_pbad_group(model, config, forces, objective)
    tau = collocation_nodes(K)
    W2 = lagrange_derivative_weights(tau, tau, 2)      # W2[i, m] = l_m''(tau_i)
    W1 = lagrange_derivative_weights(tau, tau, 1)      # W1[i, m] = l_m'(tau_i)
    ns, nx = 3 * nq, (K - 1) * nq
    nu = input_slices(model, forces)[-1][1] if forces else 0
    x, p = ca.SX.sym("x", nx), ca.SX.sym("p", ns + 2 + nu)
    s, dt, t, u = split_params(p, ns)
    q_k, v_k, q_h = s[:nq], s[nq:2 * nq], s[2 * nq:]
    Q = [q_h, q_k] + [x[j * nq:(j + 1) * nq] for j in range(K - 1)]

    # -- init, guess, advance --------------------------------------------------------------------------
    q0, qd0, t0, dt0, u0, qs0, qc0, qr0 = init_symbols(nq, nu)
    qt0 = taylor_start(model, forces, q0, qd0, t0, tau[0] * dt0, config.fd, u0 if nu else None)
    init = ca.Function("init", [q0, qd0, t0, dt0, u0, qs0, qc0, qr0],
                       [ca.vertcat(q0, qd0, start_node(qs0, qc0, qr0, qt0))], INIT_NAMES, ["s0"])
    qa, va, ta, ua, sg = ca.SX.sym("q", nq), ca.SX.sym("v", nq), ca.SX.sym("t"), ca.SX.sym("u", nu), ca.SX.sym("sign")
    start_acceleration = ca.Function(
        "start_acceleration", [qa, va, ta, ua, sg],
        [acceleration_expr(model, forces, qa, sg * va, ta, config.fd, ua if nu else None)],
        ["q", "v", "t", "u", "sign"], ["qdd"])
    a_k = acceleration_expr(model, forces, q_k, v_k, t, config.fd, u if nu else None)
    moves = [a * dt * v_k + (a * dt) ** 2 / 2 * a_k for a in tau[2:]]
    cap = ca.fmin(1.0, GUESS_STEP / ca.fmax(ca.norm_inf(moves[-1]), 1e-300))
    guess = ca.Function("guess", [p], [ca.vertcat(*[q_k + cap * d for d in moves])], ["p"], ["x0"])
    s_sym, ratio, dts = ca.SX.sym("s", ns), ca.SX.sym("ratio"), ca.SX.sym("dt")
    qs, vs, hs = s_sym[:nq], s_sym[nq:2 * nq], s_sym[2 * nq:]
    if K == 2:     # the history is the chord: exact
        h_new = qs + ratio * (hs - qs)
    else:          # the quadratic with q(0) = q_k, q'(0) = v_k through the history node, at ratio * offset
        lin = float(tau[0]) * dts * vs
        h_new = qs + ratio * lin + ratio**2 * (hs - qs - lin)
    restart = ca.Function("restart", [s_sym, ratio, dts], [ca.vertcat(s_sym[:2 * nq], h_new)],
                          ["s", "ratio", "dt"], ["s_restart"])
    if K == 2:     # backward difference: the scheme's own velocity (its discrete energy cannot grow)
        v_next = (Q[2] - Q[1]) / dt
    else:          # derivative of the degree-K collocation polynomial at t_{k+1}
        v_next = sum(float(W1[K, m]) * Q[m] for m in range(K + 1)) / dt
    advance = ca.Function("advance", [x, p], [ca.vertcat(Q[K], v_next, Q[K - 1])], ["x", "p"], ["s_next"])
    error_estimate, dense = _error_and_dense(tau, Q, x, p, dt, v_k, v_next)

    massive = _massive(model)
    kinetic = chord_kinetic(model, s_sym, qs, hs, dts) if K == 2 else None
    difference = node_differences(model, Q)

    Mk = crba(model)(q_k)
    metric = ca.Function("metric", [p], [Mk], ["p"], ["M"])
    meta = {"nodes": tau.tolist(), "weights_acc": W2.tolist(), "weights_vel": W1.tolist()}
    common = dict(integrator="pbad", config=config, nq=nq, nx=nx, ns=ns, nu=nu, init=init,
                  params=standard_params(ns, nu), guess=guess, advance=advance, order=K, objective=objective,
                  forces=tuple(force_label(f) for f in forces), metric=metric, restart=restart,
                  kinetic=kinetic,
                  velocity=("backward difference (q_{k+1} - q_k)/dt" if K == 2 else
                            "derivative at t_{k+1} of the degree-K configuration polynomial through the "
                            "K+1 collocation configurations"),
                  start=(f"history node q(t0{tau[0]:+.4f} dt): {2 * START_SUBSTEPS} RK4 steps of the exact motion "
                         f"from (q0, qd0) with forward dynamics '{config.fd}' where resolved and little "
                         f"shaped by dissipation (the {START_SUBSTEPS}-step run and the run with reversed "
                         f"velocity forces agree to a tenth of the distance from the 3rd-order Taylor node), "
                         f"else that Taylor node"),
                  start_acceleration=start_acceleration, start_offset=float(tau[0]), start_substeps=START_SUBSTEPS,
                  error_estimate=error_estimate, dense=dense, error_order=K, meta=meta)

    if objective is Objective.ENERGY:
        E = order2_energy(model, forces, difference, Q, dt, t, u)
        fobj = ca.Function("pbad_energy", [x, p], [E], ["x", "p"], ["f"])
        return StepProblem(kind=ProblemKind.MINIMIZE, objective_fn=fobj, **common)

    G = inertia_force_function(model)
    A = armature_vector(model)
    blocks = []
    for i in range(2, K + 1):
        D = node_weighted_poses(massive, difference, W2[i])
        inertial = G(Q[i], D) if massive else ca.SX.zeros(nq)
        if A.any():
            inertial = inertial + ca.DM(A) * sum(float(W2[i, m]) * Q[m] for m in range(K + 1))
        v_i = sum(float(W1[i, m]) * Q[m] for m in range(K + 1)) / dt
        F = generalized_force_expr(model, forces, Q[i], v_i, t + tau[i] * dt, u)
        potential_only = [f for f in forces if ForceForm.GENERALIZED_FORCE not in force_forms(f)]
        if potential_only:   # order 2 only (checked above): they enter as -dQ/dq_{k+1}
            qn = ca.SX.sym("qn", nq)
            slices = dict(zip(map(id, forces), input_slices(model, forces)))
            Qsum = 0
            for f in potential_only:
                a, b = slices[id(f)]
                Qsum = Qsum + f.potential(model, qn, q_k, q_h, dt, t + dt, **({"u": u[a:b]} if b > a else {}))
            gradQ = ca.Function("dQ", [qn, p], [ca.gradient(Qsum, qn)])
            F = F - gradQ(Q[i], p)
        blocks.append(inertial - dt**2 * F)
    if not config.precondition:   # the literal Eq. 7; otherwise the metric weights the residual blocks
        common["metric"] = None
    r = ca.vertcat(*blocks)
    fres = ca.Function("pbad_residual", [x, p], [r], ["x", "p"], ["r"])
    return StepProblem(kind=ProblemKind.LEAST_SQUARES, residual=fres, **common)


@hookimpl
def pbf_integrators():
    return [PluginInfo(
        "pbad",
        "position-based articulated dynamics (seed 000 Eq. 5) and Legendre collocation of order K >= 3 (Eq. 7)",
        build_pbad,
        meta={"armature": True, "forms": frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE}),
              "orders": tuple(range(2, MAX_ORDER + 1)), "default_order": 2,
              "objectives": (Objective.ENERGY, Objective.RESIDUAL), "implicit": True,
              "energy": lambda order: "dissipates" if order == 2 else "conserves", "group": True},
    )]
