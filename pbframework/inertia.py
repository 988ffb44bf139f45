"""The inertia stage: the PBAD inertia integral of seed 000 Eq. 8.

``I(qa, qb) = sum_i (T_i(qa)^T T_i(qb)) : M~_i`` with ``M~_i = int (p;1)(p;1)^T dm`` the second-moment
matrix of link ``i`` in its own frame (:attr:`pbframework.model.Link.second_moment`). Integrals of squared
position differences over the whole body are linear combinations of it:

    int ||P(qa) - P(qb)||^2 dm = I(qa, qa) - 2 I(qa, qb) + I(qb, qb),

so ``(I(q+hv, q+hv) - 2 I(q+hv, q) + I(q, q)) / h^2 -> v^T M(q) v`` as h -> 0.

The graph is built link by link (each transform from its parent's), so reverse-mode gradients cost O(N)
and Hessians O(N^2) in the number of links N.
"""

from __future__ import annotations

import casadi as ca

from .kinematics import element_poses, element_tree
from .model import ArticulatedBody


def inertia_integral_expr(model: ArticulatedBody, qa, qb):
    """The symbolic ``I(qa, qb)`` for symbolic or numeric configurations ``qa``, ``qb``."""
    tree = element_tree(model)
    pa, pb = element_poses(model, qa), element_poses(model, qb)
    total = 0
    for e, (Ra, ta), (Rb, tb) in zip(tree.elements, pa, pb):
        if e.mass <= 0.0:
            continue
        M = e.second_moment
        S, mc, m = ca.DM(M[:3, :3]), ca.DM(M[:3, 3]), float(M[3, 3])
        # T_a^T T_b : M~  with T = [[R, t], [0, 1]]:
        #   (Ra^T Rb) : S + (Ra^T tb + Rb^T ta) . mc + (ta . tb + 1) m
        total = (total + ca.sum1(ca.sum2(ca.mtimes(Ra.T, Rb) * S))
                 + ca.dot(ca.mtimes(Ra.T, tb) + ca.mtimes(Rb.T, ta), mc) + m * (ca.dot(ta, tb) + 1.0))
    return total


def inertia_integral(model: ArticulatedBody) -> ca.Function:
    """``I: (qa, qb) -> scalar``, cached on the model."""
    if "inertia_integral" not in model.cache:
        qa, qb = ca.SX.sym("qa", model.nq), ca.SX.sym("qb", model.nq)
        model.cache["inertia_integral"] = ca.Function(
            "inertia_integral", [qa, qb], [inertia_integral_expr(model, qa, qb)], ["qa", "qb"], ["I"])
    return model.cache["inertia_integral"]


def kinetic_energy_fd(model: ArticulatedBody, q, v, h: float = 1e-4):
    """Kinetic energy 1/2 v^T M v from the inertia integral by a second difference (used in checks)."""
    f = inertia_integral(model)
    q1 = q + h * v
    return 0.5 * float(f(q1, q1) - 2 * f(q1, q) + f(q, q)) / h**2
