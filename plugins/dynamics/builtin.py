"""Built-in rigid-body dynamics functions: RNEA, CRBA, bias and gravity torques."""

from __future__ import annotations

from pbframework import dynamics
from pbframework.hookspecs import PluginInfo, hookimpl


@hookimpl
def pbf_dynamics():
    return [
        PluginInfo("rnea", "inverse dynamics (q, v, a) -> tau, recursive Newton-Euler, O(N)",
                   dynamics.build_rnea),
        PluginInfo("crba", "joint-space mass matrix q -> M, composite rigid body algorithm",
                   dynamics.build_crba),
        PluginInfo("nle", "bias torques (q, v) -> C(q, v) v + g(q)", dynamics.build_nonlinear_effects),
        PluginInfo("gravity_torque", "gravity torques q -> g(q)", dynamics.build_gravity_torque),
    ]
