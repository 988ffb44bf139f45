"""MuJoCo's fluid forces (issue 25): its default inertia-box model and its ellipsoid model, as
``mj_inertiaBoxFluidModel`` and ``mj_ellipsoidFluidModel`` compute them.

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

**Ellipsoids** (MuJoCo's ``fluidshape="ellipsoid"``, ``mj_ellipsoidFluidModel``): a link listed in
``ellipsoids`` feels, instead of its box's drag, the sum over its geoms of the forces on each geom's equivalent
ellipsoid (semi-axes ``s``, MuJoCo's ``geom_fluid`` coefficients: interaction ``c``, blunt drag ``C_b``,
slender drag ``C_s``, angular drag ``C_a``, Kutta lift ``C_K``, Magnus lift ``C_M``, virtual mass ``m_v`` and
inertia ``I_v``), in the geom's frame at its origin, with ``v`` and ``w`` the geom's velocities there:

    added mass:   f += (rho m_v v) x w,    g += (rho m_v v) x v + (rho I_v w) x w
    Magnus lift:  f += C_M rho V (w x v)                              (V the ellipsoid's volume)
    Kutta lift:   f += C_K rho cos(a) A_p ((n x v) x v)               (n, A_p, cos(a): MuJoCo's projection)
    drag:         f -= (mu 3 pi D + rho |v| (A_p C_b + C_s (A_max - A_p))) v,     D = 2 (s_0 + s_1 + s_2) / 3
                  g -= (mu pi D^3 + rho |(C_a I_k + C_s (I_max - I_k)) w_k|) w

all scaled by ``c``. Added mass and lift do no work (each is a cross product with the velocity it meets), so
this model too only removes energy in still fluid. Its ``|v|`` and projected area are not differentiable at
rest; there their derivatives are taken as zero (the values stay MuJoCo's).

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
from pbframework.geometry import _vector3
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
    """MuJoCo's fluid models (module docstring): viscous and quadratic drag on each link's equivalent box, or
    MuJoCo's ellipsoid model on the links in ``ellipsoids``, in a wind.

    Args:
        density: ``rho`` >= 0 (kg/m^3): quadratic drag (MJCF ``<option density>``; air 1.2, water 1000).
        viscosity: ``mu`` >= 0 (Pa s): viscous drag (``<option viscosity>``; air 1.8e-5, water 9e-4).
        wind: the fluid's velocity in the world frame (m/s), default still.
        links: names of the links in the fluid (default every link of mass >= 1e-15).
        axes: ``{link name: 3 x 3 rotation}`` whose columns are that link's principal axes of inertia in its
            own frame (default: the eigenvectors of its inertia).
        ellipsoids: ``{link name: [geom, ...]}``: links that feel MuJoCo's ellipsoid model instead, each geom
            ``{"frame": its 4 x 4 pose in the link's frame, "semiaxes": 3 numbers, "coefficients": MuJoCo's 12
            geom_fluid numbers}`` (module docstring).
    """

    name = "fluid_drag"
    forms = frozenset({ForceForm.GENERALIZED_FORCE})
    energy_input = False
    dissipative = True
    group = True

    def __init__(self, density: float = 0.0, viscosity: float = 0.0, *, wind: Sequence[float] = (0.0, 0.0, 0.0),
                 links: Sequence[str] | None = None, axes: Mapping[str, Any] | None = None,
                 ellipsoids: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> None:
        who = self.name
        self.density = finite_number(who, "density", density, minimum=0.0)
        self.viscosity = finite_number(who, "viscosity", viscosity, minimum=0.0)
        self.wind = _vector3(who, "wind", wind)                 # m/s, world frame
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
        self.ellipsoids = {str(k): [_ellipsoid(who, f"ellipsoids[{k!r}][{n}]", g) for n, g in enumerate(geoms)]
                           for k, geoms in (ellipsoids or {}).items()}
        if self.wind.any():                      # a wind does work on the bodies
            self.energy_input, self.dissipative = True, False

    def params(self) -> dict[str, Any]:
        return {"density": self.density, "viscosity": self.viscosity, "wind": self.wind.tolist(),
                "links": None if self.links is None else list(self.links),
                "axes": {k: a.tolist() for k, a in self.axes.items()},
                "ellipsoids": {k: [dict(g) for g in v] for k, v in self.ellipsoids.items()}}

    def bodies(self, model: ArticulatedBody) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """``(link index, principal axes in the link frame, box edges)`` of each link in the fluid."""
        names = [x.name for x in model.links]
        bad = [x for x in (self.links or ()) + tuple(self.axes) + tuple(self.ellipsoids) if x not in names]
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

            def local(R, p, A, x):
                """Jacobians, in the frame ``R A`` at the point ``p + R x``, of that point and of the turning."""
                Ri, c = ca.mtimes(R, ca.DM(A)), p + ca.mtimes(R, ca.DM(x))
                R0 = ca.substitute(Ri, e, zero)
                return (R0, ca.substitute(ca.jacobian(ca.mtimes(R0.T, c), e), e, zero),
                        ca.substitute(ca.jacobian(_vee(ca.mtimes(R0.T, Ri)), e), e, zero))

            for i, A, b in self.bodies(model):
                R, p = poses[i]
                if model.links[i].name in self.ellipsoids:
                    for geom in self.ellipsoids[model.links[i].name]:
                        F = np.asarray(geom["frame"], float)
                        R0, Jc, Jw = local(R, p, F[:3, :3], F[:3, 3])
                        w = ca.mtimes(Jw, vs)
                        f, g = ellipsoid_wrench(ca.mtimes(Jc, vs) - ca.mtimes(R0.T, wind), w, rho, mu,
                                                geom["semiaxes"], geom["coefficients"])
                        tau = tau + ca.mtimes(Jc.T, f) + ca.mtimes(Jw.T, g)
                    continue
                # in the inertial frame, at the centre of mass
                R0, Jc, Jw = local(R, p, A, model.links[i].com)
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


def _ellipsoid(who: str, where: str, geom: Any) -> dict[str, list]:
    """One geom of ``ellipsoids``, checked: ``{"frame": 4 x 4, "semiaxes": 3 >= 0, "coefficients": 12}``."""
    try:
        frame = np.asarray(geom["frame"], float)
        axes = np.asarray(geom["semiaxes"], float)
        coefs = np.asarray(geom["coefficients"], float)
        ok = (set(geom) == {"frame", "semiaxes", "coefficients"} and frame.shape == (4, 4) and axes.shape == (3,)
              and coefs.shape == (12,) and np.all(np.isfinite(frame))
              and np.abs(frame[:3, :3].T @ frame[:3, :3] - np.eye(3)).max() <= 1e-9
              and np.linalg.det(frame[:3, :3]) > 0 and np.array_equal(frame[3], [0.0, 0.0, 0.0, 1.0])
              and np.all(axes >= 0)
              and np.all(np.isfinite(axes)) and np.all(np.isfinite(coefs)))
    except (TypeError, ValueError, KeyError):
        ok = False
    if not ok:
        raise ValueError(f"{who}: {where} must be {{'frame': its 4 x 4 pose (a rotation and a translation) in the "
                         f"link's frame, 'semiaxes': 3 numbers >= 0, 'coefficients': MuJoCo's 12 geom_fluid "
                         f"numbers}}, got {geom!r}")
    return {"frame": frame.tolist(), "semiaxes": axes.tolist(), "coefficients": coefs.tolist()}


def _norm(x):
    """``|x|``, with the derivative zero where ``x = 0`` (the plain norm's is 0 / 0 there)."""
    return ca.sqrt(ca.fmax(ca.dot(x, x), 1e-300))


def ellipsoid_wrench(v, w, rho: float, mu: float, semiaxes: Sequence[float], coefficients: Sequence[float]):
    """MuJoCo's ``(force, torque)`` on one geom's ellipsoid in its frame (``mj_addedMassForces`` with no
    acceleration, then ``mj_viscousForces``, scaled by the interaction coefficient): ``v``, ``w`` the geom's
    velocity relative to the fluid and angular velocity in its frame."""
    s0, s1, s2 = (float(x) for x in semiaxes)
    c, blunt, slender, angular, kutta, magnus = (float(x) for x in coefficients[:6])
    mass, inertia = ca.DM(list(coefficients[6:9])), ca.DM(list(coefficients[9:12]))
    if c == 0.0:
        return ca.SX.zeros(3), ca.SX.zeros(3)
    p_lin, p_ang = rho * mass * v, rho * inertia * w                      # added mass
    f = ca.cross(p_lin, w)
    g = ca.cross(p_lin, v) + ca.cross(p_ang, w)
    volume = 4.0 / 3.0 * math.pi * s0 * s1 * s2
    d_max, d_min = max(s0, s1, s2), min(s0, s1, s2)
    d_mid = s0 + s1 + s2 - d_max - d_min
    a_max = math.pi * d_max * d_mid
    magnus_force = magnus * rho * volume * ca.cross(w, v)
    q4 = ca.DM([(s1 * s2) ** 4, (s2 * s0) ** 4, (s0 * s1) ** 4])
    q2 = ca.DM([(s1 * s2) ** 2, (s2 * s0) ** 2, (s0 * s1) ** 2])
    proj_denom, proj_num = ca.dot(q4, v * v), ca.dot(q2, v * v)
    a_proj = math.pi * ca.sqrt(ca.fmax(proj_denom / ca.fmax(MIN_VALUE, proj_num), 1e-300))
    speed = _norm(v)
    cos_alpha = proj_num / ca.fmax(MIN_VALUE, speed * proj_denom)
    circulation = kutta * rho * cos_alpha * a_proj * ca.cross(q2 * v, v)
    kutta_force = ca.cross(circulation, v)
    diameter = 2.0 / 3.0 * (s0 + s1 + s2)
    i_max = 8.0 / 15.0 * math.pi * d_mid * d_max ** 4
    size = (s0, s1, s2)
    moments = ca.DM([8.0 / 15.0 * math.pi * size[k] * max(size[(k + 1) % 3], size[(k + 2) % 3]) ** 4
                     for k in range(3)])
    spin = w * (angular * moments + slender * (i_max - moments))
    drag_lin = mu * 3.0 * math.pi * diameter + rho * speed * (a_proj * blunt + slender * (a_max - a_proj))
    drag_ang = mu * math.pi * diameter ** 3 + rho * _norm(spin)
    g = g - drag_ang * w
    f = f + magnus_force + kutta_force - drag_lin * v
    return c * f, c * g


@hookimpl
def pbf_force_models():
    return [PluginInfo("fluid_drag", "MuJoCo's fluid forces: viscous and quadratic drag on each link's equivalent "
                                     "box or its geoms' ellipsoids, in a wind (MJCF density, viscosity, wind, "
                                     "fluidshape)", FluidDrag)]
