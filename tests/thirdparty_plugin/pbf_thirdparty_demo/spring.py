"""A joint-space linear spring pulling every coordinate toward a rest value."""

import casadi as ca

from pbframework import ForceForm, ForceModel, PluginInfo, hookimpl


class JointSpring(ForceModel):
    """Potential k/2 ||q - rest||^2 on all coordinates."""

    name = "joint_spring"
    forms = frozenset({ForceForm.POTENTIAL, ForceForm.GENERALIZED_FORCE})

    def __init__(self, stiffness: float = 1.0, rest: float = 0.0) -> None:
        if stiffness < 0:
            raise ValueError(f"joint_spring: stiffness must be >= 0, got {stiffness!r}")
        self.stiffness, self.rest = float(stiffness), float(rest)

    def params(self):
        return {"stiffness": self.stiffness, "rest": self.rest}

    def energy(self, model, q):
        return 0.5 * self.stiffness * ca.sumsqr(q - self.rest)

    def potential(self, model, q_next, q_cur, q_prev, dt, t):
        return self.energy(model, q_next)

    def generalized_force(self, model, q, qd, t):
        return -self.stiffness * (q - self.rest)


@hookimpl
def pbf_force_models():
    return [PluginInfo("joint_spring", "linear joint-space spring (third-party demo)", JointSpring)]
