"""Uniform gravity, ``model.gravity`` (default (0, 0, -9.81)), as a potential and a generalised force."""

from __future__ import annotations

import casadi as ca
import numpy as np

from pbframework.forces import ForceForm, ForceModel, tangent_gradient
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.kinematics import link_poses
from pbframework.model import ArticulatedBody


class Gravity(ForceModel):
    """Gravity ``g`` acting on every link's centre of mass.

    Args:
        scale: multiplies the model's gravity vector (1.0 = as in the model, 0.0 = off).

    Potential ``V(q) = -sum_i m_i g . c_i(q)``; generalised force ``-dV/dq``.
    """

    name = "gravity"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})
    energy_input = False
    group = True

    def __init__(self, scale: float = 1.0) -> None:
        scale = float(scale)
        if not np.isfinite(scale):
            raise ValueError(f"gravity: scale must be finite, got {scale!r}")
        self.scale = scale

    def params(self) -> dict:
        return {"scale": self.scale}

    def energy(self, model: ArticulatedBody, q):
        g = ca.DM(self.scale * model.gravity)
        V = 0
        for (R, p), link in zip(link_poses(model, q), model.links):
            V = V - link.mass * ca.dot(g, p + ca.mtimes(R, ca.DM(link.com)))
        return V

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        return self.energy(model, q_next)

    def generalized_force(self, model, q, qd, t):
        key = ("gravity_force", self.scale)
        if key not in model.cache:  # built once on fresh symbols, so q may be symbolic or numeric
            qs = ca.SX.sym("q", model.nq)
            if model.on_group:      # the gradient along the tangent: nv entries
                grad = tangent_gradient(model, self.energy, "gravity_gradient")
                model.cache[key] = ca.Function("gravity_force", [qs], [-grad(qs)])
            else:
                model.cache[key] = ca.Function("gravity_force", [qs], [-ca.gradient(self.energy(model, qs), qs)])
        return model.cache[key](q)


@hookimpl
def pbf_force_models():
    return [PluginInfo("gravity", "uniform gravity on every link (potential and generalised force)", Gravity)]
