r"""The nonconvex maximal-dissipation step (NMDP, seed 001) as data: what its integrators build and its
projected-gradient solvers read.

An NMDP step (seed 001 Eq. 6 and 12) finds the next configuration ``theta`` and the contact weights ``w``
that minimise a kinetic energy ``K(theta)`` subject to the discretised dynamics ``G(theta, w) = 0`` and the
simplex constraints ``w_x >= 0``, ``1^T w_x <= 1`` at every contact point ``x`` (Eq. 5: the contact force
``f_x = v_x(theta) w_x`` lies in the wrench polytope with vertices ``v_x``).

The unknowns are ``x = [delta; w]``: ``theta = q_k (+) delta`` (``q_k + delta`` without ``ball`` / ``free``
joints; on the group the exponential map, so ``delta`` has ``nv`` entries) and ``w`` (``nw`` weights, grouped by
contact point). :class:`ConstrainedParts` holds the CasADi functions of ``(delta, w; p)``, ``p`` the step's
parameters ``[s; dt; t; u]`` as for every step problem:

* ``K(delta, p) -> K`` and ``K_derivs(delta, p) -> (K, dK/ddelta, d2K/ddelta2)``;
* ``G(delta, w, p) -> G`` (``nv``) and ``G_derivs(delta, w, p) -> (G, G_delta, G0_delta, G_w)``: ``G_delta``
  the exact Jacobian, ``G0_delta`` the zeroth-order one of Eq. 10-11 (the vertices ``v_x`` held fixed: no
  derivative of the polytope is taken) and ``G_w`` (nv x nw, ``-sum_x J_x^T v_x``);
* ``groups``: the number of weights of each contact point (the simplex blocks, in order);
* ``forces(delta, w, p) -> f`` (3 x nc): the contact force at each point, for records;
* the same pieces alone, for the solvers' inner loops: ``G_jacobian[order](delta, w, p) -> (G, A)`` with ``A``
  the zeroth-order (``order`` 0) or exact (1) Jacobian, and ``G_weights(delta, p) -> G_w`` (``G`` is linear in
  ``w``, so ``G_w`` does not depend on it).

The solvers (``pgm`` first-order, ``zopgm`` zeroth-order; ``plugins/solvers/pgm.py``) run Alg. 1 on these
functions with the QPs solved by qpOASES; the Simulator's halving retries are Alg. 2's subdivision.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from typing import Iterator, Sequence

import casadi as ca
import numpy as np

from .forces import ForceForm
from .kinematics import contact_positions
from .model import ArticulatedBody

__all__ = ["ConstrainedParts", "polytope_terms", "silenced_stdout", "qpoases_conic", "simplex_rows"]


@contextlib.contextmanager
def silenced_stdout() -> Iterator[None]:
    """Send the process's C-level standard output to ``/dev/null`` for the duration: qpOASES prints its
    copyright notice there when a solver instance is created (its first call), whatever ``printLevel`` says."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        yield
        return
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def qpoases_conic(name: str, h: ca.Sparsity, a: ca.Sparsity, **options) -> ca.Function:
    """``casadi.conic(name, "qpoases", ...)`` as every QP of the package makes it: quiet (``printLevel``
    ``"none"``, the copyright banner of a new instance kept off stdout) and reporting a failed solve in its
    stats rather than raising (``error_on_fail`` off); ``options`` are further qpOASES options."""
    with silenced_stdout():
        return ca.conic(name, "qpoases", {"h": h, "a": a},
                        {"printLevel": "none", "error_on_fail": False, **options})


def simplex_rows(groups: Sequence[int]) -> ca.DM:
    """The constraint rows ``1^T w_x`` of the simplex blocks ``groups`` (one row per block, len(groups) x sum)."""
    rows = np.zeros((len(groups), int(sum(groups))))
    off = 0
    for k, n in enumerate(groups):
        rows[k, off:off + n] = 1.0
        off += n
    return ca.DM(rows)


@dataclass(frozen=True, eq=False)
class ConstrainedParts:
    """The functions of a :attr:`~pbframework.step.ProblemKind.CONSTRAINED` step (module docstring).

    Attributes:
        nv: size of ``delta`` (the model's velocity size).
        nw: number of contact weights.
        groups: weights per contact point (simplex blocks); sums to ``nw``.
        K, K_derivs, G, G_derivs, forces, G_jacobian, G_weights: the CasADi functions described in the module
            docstring.
        scheme: ``"ne"`` (seed 001 Eq. 6) or ``"pbd"`` (Eq. 12).
    """

    nv: int
    nw: int
    groups: tuple[int, ...]
    K: ca.Function
    K_derivs: ca.Function
    G: ca.Function
    G_derivs: ca.Function
    forces: ca.Function
    scheme: str
    G_jacobian: tuple[ca.Function, ca.Function]
    G_weights: ca.Function


def polytope_terms(model: ArticulatedBody, polytopes: Sequence, theta, var, w, *, tangent=None):
    r"""The contact terms of a step at configuration ``theta`` for the wrench-polytope force models
    ``polytopes``.

    Args:
        model: the model (with contact points).
        polytopes: force models with the :attr:`~pbframework.forces.ForceForm.WRENCH_POLYTOPE` form.
        theta: the configuration (nq, SX).
        var: the symbol the generalised force is taken along: ``theta`` itself, or ``e`` where ``tangent`` is
            ``q_integrate(theta, e)`` (models with ``ball`` / ``free`` joints; evaluated at ``e = 0``).
        w: the weights (SX, ``sum(groups)`` entries).
        tangent: the configuration to evaluate positions at for the Jacobian (default ``theta``).

    Returns:
        ``(gen, gen_frozen, V_all, V_sym, F, groups)``: ``gen`` the generalised contact force
        ``sum_x J_x^T v_x(theta) w_x`` (nv), ``gen_frozen`` the same with the vertices replaced by the symbol
        ``V_sym`` (3 x nw; substitute ``V_all`` back after differentiating, which drops the polytope's
        derivatives: the zeroth-order Jacobian), ``F`` the contact forces (3 x nc, summed over the models)
        and ``groups`` the weights per (model, contact point).
    """
    qe = theta if tangent is None else tangent
    P = contact_positions(model)(qe)
    J = ca.jacobian(ca.vec(P), var)
    nc = model.n_contacts
    blocks, groups = [], []
    for f in polytopes:
        Vs = f.wrench_polytope(model, theta)
        if len(Vs) != nc:
            raise ValueError(f"{f.name}: wrench_polytope returned {len(Vs)} polytopes for {nc} contact points")
        for i, V in enumerate(Vs):
            if V.shape[0] != 3 or V.shape[1] == 0:
                raise ValueError(f"{f.name}: the polytope at contact point {i} has shape {V.shape}; it needs 3 rows "
                                 f"and at least one vertex (column)")
            blocks.append((i, V))
            groups.append(int(V.shape[1]))
    nw = sum(groups)
    V_sym = ca.SX.sym("V", 3, nw)
    gen = ca.SX.zeros(J.shape[1])
    gen_frozen = ca.SX.zeros(J.shape[1])
    F = ca.SX.zeros(3, nc)
    off = 0
    for (i, V), k in zip(blocks, groups):
        wi = w[off:off + k]
        Ji = J[3 * i:3 * i + 3, :]
        fi = ca.mtimes(V, wi)
        gen = gen + ca.mtimes(Ji.T, fi)
        gen_frozen = gen_frozen + ca.mtimes(Ji.T, ca.mtimes(V_sym[:, off:off + k], wi))
        F[:, i] = F[:, i] + fi
        off += k
    V_all = ca.horzcat(*[V for _, V in blocks]) if blocks else ca.SX(3, 0)
    return gen, gen_frozen, V_all, V_sym, F, tuple(groups)


def is_polytope(force) -> bool:
    return ForceForm.WRENCH_POLYTOPE in frozenset(getattr(force, "forms", ()))
