"""Featherstone's articulated body algorithm as a forward-dynamics plug-in (O(N) sequential levels)."""

from __future__ import annotations

from pbframework import dynamics
from pbframework.hookspecs import PluginInfo, hookimpl


@hookimpl
def pbf_forward_dynamics():
    return [PluginInfo("aba", "articulated body algorithm (q, qd, tau) -> qdd, recursive, O(N)",
                       dynamics.build_aba, meta={"depth": lambda n, schedule="sequential": 3 * n, "trees": True})]
