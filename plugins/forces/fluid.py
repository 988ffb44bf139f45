"""MuJoCo's fluid forces, its default inertia-box model (issue 25), as ``mj_inertiaBoxFluidModel`` computes them.

Each link in the fluid is replaced by the box of uniform density with its mass ``m`` and principal moments
``I0, I1, I2`` about its centre of mass, edge lengths ``b_k = sqrt(max(1e-15, I_i + I_j - I_k) / m * 6)``
(``{i, j, k} = {0, 1, 2}``; MuJoCo's ``mjMINVAL`` guards a flat body), its edges along the principal axes. In
that frame (``R``, at the centre of mass ``c``) with the body's angular velocity ``w`` and the velocity
``v = R^T (c' - wind)`` of its centre of mass relative to the wind, MuJoCo's force ``f`` and torque ``g`` are

    viscous (Stokes, ``viscosity`` mu > 0), ``d = (b_0 + b_1 + b_2) / 3``:
        f = -3 pi d mu v,          g = -pi d^3 mu w
    quadratic drag (``density`` rho > 0), per axis k with the other two i, j:
        f_k -= 1/2 rho b_i b_j |v_k| v_k,
        g_k -= rho b_k (b_i^4 + b_j^4) |w_k| w_k / 64

applied at the centre of mass, ``tau = J_c^T R f + J_w^T R g`` (``J_c`` the Jacobian of ``c``, ``J_w`` the
body's angular-velocity Jacobian). Links lighter than 1e-15 (MuJoCo's ``mjMINVAL``) feel nothing.

The force depends on the velocity and has no potential form (generalised-force form only). In still air
(``wind = 0``) it only removes energy: every term is ``-(positive) x`` against its velocity, so the power
``tau . qd = f . v + g . w <= 0`` (dissipative, stores none). A wind can do work on the bodies: the model then
says it may add energy.

The principal axes matter where moments repeat (a cube, a cylinder): the quadratic drag ``|v_k| v_k`` is not
invariant under a turn of the axes about a symmetry axis. ``axes`` gives them per link (``load_mjcf`` passes
MuJoCo's ``body_iquat``); without it they are the eigenvectors of the link's inertia.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import casadi as ca
import numpy as np

from pbframework.forces import ForceForm, ForceModel
from pbframework.hookspecs import PluginInfo, hookimpl
from pbframework.kinematics import link_poses
from pbframework.lie import q_integrate
from pbframework.model import ArticulatedBody

from ._common import cached_function, finite_number
from .actuators import _vee

MIN_VALUE = 1e-15
"""MuJoCo's ``mjMINVAL``: links lighter than this are skipped, box edges use it as the least squared size."""


def inertia_box(mass: float, moments: Sequence[float]) -> np.ndarray:
    """The edge lengths of the uniform box with ``mass`` and principal ``moments`` (MuJoCo's arithmetic)."""
    i0, i1, i2 = (float(x) for x in moments)
    return np.array([math.sqrt(max(MIN_VALUE, i1 + i2 - i0) / mass * 6.0),
                     math.sqrt(max(MIN_VALUE, i0 + i2 - i1) / mass * 6.0),
                     math.sqrt(max(MIN_VALUE, i0 + i1 - i2) / mass * 6.0)])


class FluidDrag(ForceModel):
    """MuJoCo's inertia-box fluid model (module docstring): viscous and quadratic drag on each link's
    equivalent box, in a wind.

    Args:
        density: ``rho`` >= 0 (kg/m^3): quadratic drag (MJCF ``<option density>``; air 1.2, water 1000).
        viscosity: ``mu`` >= 0 (Pa s): viscous drag (``<option viscosity>``; air 1.8e-5, water 9e-4).
        wind: the fluid's velocity in the world frame (m/s), default still.
        links: names of the links in the fluid (default every link of mass >= 1e-15).
        axes: ``{link name: 3 x 3 rotation}`` whose columns are that link's principal axes of inertia in its
            own frame (default: the eigenvectors of its inertia).
    """

    name = "fluid_drag"
    forms = frozenset({ForceForm.GENERALIZED_FORCE})
    energy_input = False
    dissipative = True
    group = True

    def __init__(self, density: float = 0.0, viscosity: float = 0.0, *, wind: Sequence[float] = (0.0, 0.0, 0.0),
                 links: Sequence[str] | None = None, axes: Mapping[str, Any] | None = None) -> None:
        who = self.name
        self.density = finite_number(who, "density", density, minimum=0.0)
        self.viscosity = finite_number(who, "viscosity", viscosity, minimum=0.0)
        try:
            w = np.asarray(wind, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            w = np.zeros(0)
        if w.shape != (3,) or not np.all(np.isfinite(w)):
            raise ValueError(f"{who}: wind must be 3 finite numbers (m/s, world frame), got {wind!r}")
        self.wind = w
        if links is not None:
            links = [links] if isinstance(links, str) else list(links)
            if not all(isinstance(x, str) for x in links):
                raise ValueError(f"{who}: links must be a list of link names (or None for every link with mass), "
                                 f"got {links!r}")
        self.links = None if links is None else tuple(links)
        self.axes: dict[str, np.ndarray] = {}
        for k, A in (axes or {}).items():
            a = np.asarray(A, dtype=float)
            if a.shape != (3, 3) or not np.all(np.isfinite(a)) or np.abs(a.T @ a - np.eye(3)).max() > 1e-9 \
                    or np.linalg.det(a) <= 0:
                raise ValueError(f"{who}: axes[{k!r}] must be a 3 x 3 rotation matrix (the principal axes in the "
                                 f"link's frame, as columns), got {A!r}")
            self.axes[str(k)] = a
        if w.any():                      # a wind does work on the bodies
            self.energy_input, self.dissipative = True, False

    def params(self) -> dict[str, Any]:
        return {"density": self.density, "viscosity": self.viscosity, "wind": self.wind.tolist(),
                "links": None if self.links is None else list(self.links),
                "axes": {k: a.tolist() for k, a in self.axes.items()}}

    def bodies(self, model: ArticulatedBody) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """``(link index, principal axes in the link frame, box edges)`` of each link in the fluid."""
        names = [x.name for x in model.links]
        bad = [x for x in (self.links or ()) + tuple(self.axes) if x not in names]
        if bad:
            raise ValueError(f"{self.name}: model {model.name!r} has no link(s) {bad} (links: {', '.join(names)})")
        chosen = [names.index(x) for x in self.links] if self.links is not None else range(len(names))
        out = []
        for i in chosen:
            link = model.links[i]
            if link.mass < MIN_VALUE:
                continue
            inertia = np.asarray(link.inertia, float)
            A = self.axes[link.name] if link.name in self.axes else np.linalg.eigh(inertia)[1]
            A = A * np.array([1.0, 1.0, np.sign(np.linalg.det(A))])       # a rotation (no mirror)
            out.append((i, A, inertia_box(link.mass, np.diag(A.T @ inertia @ A))))
        return out

    def generalized_force(self, model, q, qd, t):
        def build() -> ca.Function:
            qs, vs, e = ca.SX.sym("q", model.nq), ca.SX.sym("qd", model.nv), ca.SX.sym("e", model.nv)
            qe = q_integrate(model)(qs, e) if model.on_group else qs + e
            zero = ca.DM.zeros(model.nv)
            poses = link_poses(model, qe)
            rho, mu, wind = self.density, self.viscosity, ca.DM(self.wind)
            tau = ca.DM.zeros(model.nv)
            for i, A, b in self.bodies(model):
                R, p = poses[i]
                Ri, c = ca.mtimes(R, ca.DM(A)), p + ca.mtimes(R, ca.DM(model.links[i].com))
                R0 = ca.substitute(Ri, e, zero)
                # Jacobians in the inertial frame: of its origin (the centre of mass) and of its turning
                Jc = ca.substitute(ca.jacobian(ca.mtimes(R0.T, c), e), e, zero)
                Jw = ca.substitute(ca.jacobian(_vee(ca.mtimes(R0.T, Ri)), e), e, zero)
                w = ca.mtimes(Jw, vs)
                v = ca.mtimes(Jc, vs) - ca.mtimes(R0.T, wind)
                f, g = ca.SX.zeros(3), ca.SX.zeros(3)
                if mu > 0:
                    d = (b[0] + b[1] + b[2]) / 3.0
                    g = g - math.pi * d ** 3 * mu * w
                    f = f - 3.0 * math.pi * d * mu * v
                if rho > 0:
                    f = f - 0.5 * rho * ca.DM([b[1] * b[2], b[0] * b[2], b[0] * b[1]]) * ca.fabs(v) * v
                    g = g - rho * ca.DM([b[0] * (b[1] ** 4 + b[2] ** 4), b[1] * (b[0] ** 4 + b[2] ** 4),
                                         b[2] * (b[0] ** 4 + b[1] ** 4)]) / 64.0 * ca.fabs(w) * w
                tau = tau + ca.mtimes(Jc.T, f) + ca.mtimes(Jw.T, g)
            return ca.Function("fluid_drag_f", [qs, vs], [tau], ["q", "qd"], ["f"])

        return cached_function(model, self, "f", build)(q, qd)


@hookimpl
def pbf_force_models():
    return [PluginInfo("fluid_drag", "MuJoCo's inertia-box fluid forces: viscous and quadratic drag on each link's "
                                     "equivalent box, in a wind (MJCF density, viscosity, wind)", FluidDrag)]
