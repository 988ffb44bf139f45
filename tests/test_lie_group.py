"""Ball and free joints on the rotation group (issue 17, first part): quaternion configurations, nq != nv,
the exponential and logarithm maps, and RNEA / CRBA / ABA against Pinocchio's spherical and free-flyer
joints (solo12 and anymal with a free base, a random chain of 12 ball joints)."""

from __future__ import annotations

from pathlib import Path

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework import dynamics
from pbframework.io.urdf import ROOT_JOINT
from pbframework.lie import q_difference, q_integrate, quat_exp, quat_log
from pbframework.model import ArticulatedBody, Joint, JointType, Link, ModelError, transform

pin = pytest.importorskip("pinocchio")

TOL = 1e-9


def random_quaternion(rng) -> np.ndarray:
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def rel_err(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a) - b) / max(np.linalg.norm(b), 1.0))


def ball_chain(n: int, rng) -> tuple[ArticulatedBody, "pin.Model"]:
    """``n`` links on ball joints with random offsets and inertias, in pbframework and in Pinocchio."""
    links, joints = [], []
    pm = pin.Model()
    pm.gravity = pin.Motion(np.array([0.0, 0.0, -9.81, 0.0, 0.0, 0.0]))
    parent_id = 0
    for i in range(n):
        com, mass = rng.uniform(-0.3, 0.3, 3), float(rng.uniform(0.5, 2.0))
        a, b, c = rng.uniform(0.1, 1.0, 3)                     # a box's inertia, turned at random
        R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        inertia = R @ np.diag(mass / 12 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])) @ R.T
        xyz, rpy = rng.uniform(-0.5, 0.5, 3), rng.uniform(-np.pi, np.pi, 3)
        links.append(Link(f"l{i}", mass=mass, com=com, inertia=inertia))
        if i:
            joints.append(Joint(f"j{i}", "ball", f"l{i - 1}", f"l{i}", origin=transform(xyz, rpy)))
        else:
            joints.append(Joint("j0", "ball", "world", "l0", origin=transform(xyz, rpy)))
        T = transform(xyz, rpy)
        jid = pm.addJoint(parent_id, pin.JointModelSpherical(), pin.SE3(T[:3, :3], T[:3, 3]), f"j{i}")
        pm.appendBodyToJoint(jid, pin.Inertia(mass, com, inertia), pin.SE3.Identity())
        parent_id = jid
    return ArticulatedBody(links, joints, name=f"ballchain{n}"), pm


def free_base(robots_dir: Path, rel: str) -> tuple[ArticulatedBody, "pin.Model", np.ndarray, np.ndarray]:
    """A URDF with a free base in both, and the maps of our q / v coordinates to Pinocchio's."""
    path = robots_dir / rel
    ours = pbf.load_urdf(path, floating_base="free", limits=False)
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    qperm, vperm = np.full(pm.nq, -1), np.full(pm.nv, -1)
    for i in range(1, pm.njoints):
        jm, name = pm.joints[i], pm.names[i]
        qs, vs = ours.joint_q_index[name], ours.joint_v_index[name]
        assert (qs.stop - qs.start, vs.stop - vs.start) == (jm.nq, jm.nv), name
        qperm[jm.idx_q:jm.idx_q + jm.nq] = np.arange(qs.start, qs.stop)
        vperm[jm.idx_v:jm.idx_v + jm.nv] = np.arange(vs.start, vs.stop)
    assert sorted(qperm) == list(range(ours.nq)) and sorted(vperm) == list(range(ours.nv))
    return ours, pm, qperm, vperm


def compare_dynamics(ours: ArticulatedBody, pm, qperm, vperm, rng, trials: int = 3) -> None:
    data = pm.createData()
    rnea, crba, aba = dynamics.rnea(ours), dynamics.crba(ours), dynamics.aba(ours)
    for _ in range(trials):
        q = rng.uniform(-1.5, 1.5, ours.nq)
        for j in ours.joints:
            if j.type in (JointType.BALL, JointType.FREE):
                sl = ours.joint_q_index[j.name]
                q[sl.stop - 4:sl.stop] = random_quaternion(rng)
        v, a, tau = (rng.normal(size=ours.nv) for _ in range(3))
        qp, vp, ap, taup = q[qperm], v[vperm], a[vperm], tau[vperm]
        assert rel_err(np.asarray(rnea(q, v, a)).ravel()[vperm], pin.rnea(pm, data, qp, vp, ap)) < TOL
        pin.crba(pm, data, qp)
        M = np.triu(data.M) + np.triu(data.M, 1).T
        assert rel_err(np.asarray(crba(q))[np.ix_(vperm, vperm)], M) < TOL
        assert rel_err(np.asarray(aba(q, v, tau)).ravel()[vperm], pin.aba(pm, data, qp, vp, taup)) < TOL


def test_ball_and_free_joint_sizes_names_and_neutral():
    m, _ = ball_chain(3, np.random.default_rng(0))
    assert (m.nq, m.nv) == (12, 9) and m.on_group
    assert m.dof_names[:4] == ("j0:qx", "j0:qy", "j0:qz", "j0:qw") and m.velocity_names[:3] == ("j0:wx", "j0:wy", "j0:wz")
    q = m.neutral()
    assert np.array_equal(q[:4], [0, 0, 0, 1]) and m.check_state(q) is not None
    with pytest.raises(ValueError, match="quaternion of ball joint 'j0' has norm 0, not 1"):
        m.check_state(np.zeros(12))
    with pytest.raises(ValueError, match="length nv=9"):
        m.check_velocity(np.zeros(12))
    assert JointType.FREE.nq == 7 and JointType.FREE.nv == 6 and "nv=9" in repr(m)
    with pytest.raises(ModelError, match="a free joint must have parent 'world'"):
        ArticulatedBody([Link("a", mass=1.0), Link("b", mass=1.0)],
                        [Joint("r", "revolute", "world", "a"), Joint("f", "free", "a", "b")])


def test_exponential_and_logarithm_agree_with_pinocchio(robots_dir):
    rng = np.random.default_rng(1)
    ours, pm, qperm, vperm = free_base(robots_dir, "solo_description/robots/solo12.urdf")
    integ, diff = q_integrate(ours), q_difference(ours)
    for scale in (1e-9, 1e-4, 0.3, 2.5):
        q0 = pin.randomConfiguration(pm, -np.ones(pm.nq), np.ones(pm.nq))
        v = scale * rng.normal(size=pm.nv)
        q0_ours, v_ours = np.zeros(ours.nq), np.zeros(ours.nv)
        q0_ours[qperm], v_ours[vperm] = q0, v
        q1 = pin.integrate(pm, q0, v)
        q1_ours = np.asarray(integ(q0_ours, v_ours)).ravel()
        got = q1_ours[qperm]
        if np.dot(got[3:7], q1[3:7]) < 0:                     # q and -q are the same rotation
            got[3:7] *= -1
        assert np.abs(got - q1).max() < 1e-12 and abs(np.linalg.norm(q1_ours[3:7]) - 1) < 1e-14
        v_back = np.asarray(diff(q0_ours, q1_ours)).ravel()
        if scale < 1:                                          # rotations below pi: the log is v itself
            assert np.abs(v_back - v_ours).max() < 1e-10
        assert np.abs(v_back[vperm] - pin.difference(pm, q0, q1)).max() < 1e-10 * max(1.0, scale)
        again = np.asarray(integ(q0_ours, v_back)).ravel()
        sign = np.sign(np.dot(again[3:7], q1_ours[3:7]))
        assert np.abs(np.concatenate([again[:3], sign * again[3:7], again[7:]]) - q1_ours).max() < 1e-10


def test_maps_are_smooth_at_the_identity():
    """Derivatives through the series branches are finite and equal the exact map's nearby."""
    w = ca.SX.sym("w", 3)
    J = ca.Function("J", [w], [ca.jacobian(quat_exp(w), w)])
    at0 = np.asarray(J([0, 0, 0]))
    assert np.all(np.isfinite(at0)) and np.allclose(at0[:3], 0.5 * np.eye(3)) and np.allclose(at0[3], 0)
    near = np.asarray(J([1e-3, -2e-3, 0.5e-3]))
    assert np.allclose(near, np.asarray(J([1.001e-3, -2e-3, 0.5e-3])), atol=1e-6)
    q = ca.SX.sym("q", 4)
    L = ca.Function("L", [q], [ca.jacobian(quat_log(q), q)])
    assert np.all(np.isfinite(np.asarray(L([0, 0, 0, 1]))))
    assert np.allclose(np.asarray(ca.Function("r", [w], [quat_log(quat_exp(w))])([0.3, -2.0, 1.0])).ravel(),
                       [0.3, -2.0, 1.0])


def test_random_ball_chain_dynamics_equal_pinocchio():
    rng = np.random.default_rng(2)
    ours, pm = ball_chain(12, rng)
    compare_dynamics(ours, pm, np.arange(ours.nq), np.arange(ours.nv), rng)


@pytest.mark.parametrize("rel", ["solo_description/robots/solo12.urdf",
                                 "anymal_b_simple_description/robots/anymal.urdf"])
def test_free_base_dynamics_equal_pinocchio(robots_dir, rel):
    rng = np.random.default_rng(3)
    ours, pm, qperm, vperm = free_base(robots_dir, rel)
    assert ours.joint(ROOT_JOINT).type is JointType.FREE and (ours.nq, ours.nv) == (pm.nq, pm.nv)
    compare_dynamics(ours, pm, qperm, vperm, rng)


def test_seed_003_algorithms_refuse_quaternion_joints():
    ours, _ = ball_chain(2, np.random.default_rng(4))
    for algorithm in ("abia", "jsiia", "cfa"):
        with pytest.raises(Exception, match="ball / free joints .* are quaternions: use fd='aba'"):
            dynamics.forward_dynamics(ours, algorithm)


def test_integrators_without_the_group_refuse_quaternion_models_in_one_line():
    from pbframework.step import StepConfig, build_step

    ours, _ = ball_chain(2, np.random.default_rng(5))
    info = pbf.step.integrator_info("rk4")
    saved = dict(info.meta)
    info.meta.pop("group")          # as a third-party integrator that does not say it steps on the group
    try:
        with pytest.raises(pbf.step.StepError, match="does not step on the rotation group yet.*nq=8, nv=6"):
            build_step(ours, "rk4", StepConfig(dt=0.01), ())
    finally:
        info.meta.clear()
        info.meta.update(saved)


# -- integrators on the group (issue 17 item 2) -------------------------------------------------------

def _racket(joint: str) -> ArticulatedBody:
    return ArticulatedBody([Link("racket", mass=1.0, inertia=np.diag([1.0, 2.0, 3.0]))],
                           [Joint("base", joint, "world", "racket")], gravity=(0, 0, 0), name=f"racket_{joint}")


def _rotation(quat: np.ndarray) -> np.ndarray:
    x, y, z, w = quat
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


W0 = np.array([0.01, 2.0, 0.0])          # about the intermediate axis, slightly off


def test_tennis_racket_flips_on_a_free_joint_and_locks_on_euler_angles():
    """A free body spun about its intermediate axis, pbad order 3, dt = 0.01 s, 20 s: it flips (the body
    axis turns over, twice), the run ends ok without a halving, the world angular momentum is kept (measured
    3.6e-5 relative) and every quaternion is unit to 1e-12. The same start on the Euler-angle base
    ('floating') reaches pitch 90 degrees at 0.79 s, where its mass matrix is singular: the step there
    cannot be solved and the run stops."""
    m = _racket("free")
    tr = pbf.Simulator(m, "pbad", order=3, dt=0.01, forces=[]).rollout(m.neutral(), np.r_[0, 0, 0, W0], duration=20)
    assert tr.ok and tr.steps == 2000 and int(tr.stats["halvings"].sum()) == 0
    assert np.abs(np.linalg.norm(tr.q[:, 3:7], axis=1) - 1).max() < 1e-12
    L = np.array([_rotation(q[3:7]) @ (np.diag([1.0, 2.0, 3.0]) @ v[3:6]) for q, v in zip(tr.q, tr.qd)])
    assert np.linalg.norm(L - L[0], axis=1).max() / np.linalg.norm(L[0]) < 1e-3
    y_axis = np.array([_rotation(q[3:7])[1, 1] for q in tr.q])        # body y axis along world y
    assert y_axis.max() > 0.99 and y_axis.min() < -0.99
    euler = _racket("floating")
    with pytest.warns(RuntimeWarning, match="did not converge"):
        tre = pbf.Simulator(euler, "pbad", order=3, dt=0.01, forces=[]).rollout(np.zeros(6), np.r_[0, 0, 0, W0],
                                                                                duration=20)
    assert tre.status.value == "unconverged" and tre.failure_time < 1.0
    assert tre.info["failure"]["halvings"] >= 1 and abs(tre.q[-1, 4]) > 1.4        # pitch near pi / 2


@pytest.mark.parametrize("integrator,order", [("pbad", 2), ("pbad", 3), ("semi_implicit_euler", None)])
def test_a_free_body_falls_and_spins_on_the_group(integrator, order):
    """Under gravity a free body's centre moves as ``c0 + (w0 x c) t + g t^2 / 2`` while it spins (the joint's
    origin starts at rest, the body turning about it); quaternions stay unit."""
    m = ArticulatedBody([Link("b", mass=2.0, com=(0.1, 0.0, 0.0), inertia=np.diag([0.1, 0.2, 0.25]))],
                        [Joint("base", "free", "world", "b")], name="tumbler")
    dt = 0.001 if integrator == "semi_implicit_euler" else 0.01
    tr = pbf.Simulator(m, integrator, order=order, dt=dt).rollout(m.neutral(), np.r_[0, 0, 0, 1.0, 2.0, 0.5],
                                                                  duration=1.0)
    assert tr.ok and np.abs(np.linalg.norm(tr.q[:, 3:7], axis=1) - 1).max() < 1e-12
    com = tr.q[-1, :3] + _rotation(tr.q[-1, 3:7]) @ np.array([0.1, 0.0, 0.0])
    exact = np.array([0.1, 0.0, 0.0]) + np.cross([1.0, 2.0, 0.5], [0.1, 0.0, 0.0]) + np.array([0, 0, -9.81 / 2])
    assert np.abs(com - exact).max() < (0.02 if integrator == "semi_implicit_euler" else 1e-3)


def test_a_ball_chain_swings_under_gravity_as_its_euler_angle_twin():
    """A chain of 4 ball joints from rest under gravity for 1 s, against the same chain on Euler-angle
    ('spherical') joints, which stays away from its gimbal lock here, and RK4 at 0.25 ms on the twin as the
    reference: order 2 moves the links as the twin does (the same scheme in another chart; they differ by
    the start node, second-order Taylor on the group against RK4: measured 7.7e-5 m); order 3 converges to
    the reference as dt^2 like the twin (link positions off by 0.11, 0.018, 0.0038 m at 10, 5, 2.5 ms;
    the twin 0.097, 0.018, 0.0038 m), and quaternions stay unit."""
    from pbframework.kinematics import forward_kinematics

    m, _ = ball_chain(4, np.random.default_rng(6))
    twin = ArticulatedBody(m.links, [Joint(j.name, "spherical", j.parent, j.child, origin=j.origin)
                                     for j in m.joints], name="ballchain4_euler")
    fk, fk_twin = forward_kinematics(m), forward_kinematics(twin)
    ref = pbf.Simulator(twin, "rk4", dt=2.5e-4).rollout(np.zeros(twin.nq), duration=1.0)

    def run(model, order, dt):
        q0 = model.neutral()
        tr = pbf.Simulator(model, "pbad", order=order, dt=dt).rollout(q0, duration=1.0)
        assert tr.ok and tr.q.shape[1] == model.nq and tr.qd.shape[1] == model.nv
        return tr

    def gap(a, fa, b, fb):
        return max(np.abs(np.asarray(fa(x)) - np.asarray(fb(y))).max() for x, y in zip(a, b))

    two, two_twin = run(m, 2, 0.01), run(twin, 2, 0.01)
    assert two.info["nv"] == 12 and two.info["nq"] == 16
    assert gap(two.q, fk, two_twin.q, fk_twin) < 1e-3
    errors = []
    for dt in (0.005, 0.0025):
        tr, tw = run(m, 3, dt), run(twin, 3, dt)
        assert np.abs(np.linalg.norm(tr.q.reshape(len(tr.t), 4, 4), axis=2) - 1).max() < 1e-12
        every = int(round(dt / 2.5e-4))
        e_group, e_twin = gap(tr.q, fk, ref.q[::every], fk_twin), gap(tw.q, fk_twin, ref.q[::every], fk_twin)
        assert e_group < 1.1 * e_twin + 1e-4, (dt, e_group, e_twin)
        errors.append(e_group)
    assert errors[1] < errors[0] / 3


def test_what_the_group_does_not_take_yet_is_refused_in_one_line():
    m = _racket("free")
    with pytest.raises(ValueError, match="belongs to free joint 'base', a quaternion: joint-space forces act on hinge"):
        pbf.Simulator(m, "pbad", dt=0.01, forces=["gravity", ("pd", {"dofs": ["base:qx"]})])

    class Flat(pbf.ForceModel):               # a third-party force that does not say it takes the group
        name = "flat"
        forms = frozenset({pbf.forces.ForceForm.GENERALIZED_FORCE})

        def generalized_force(self, model, q, qd, t):
            return ca.SX.zeros(model.nq)

    with pytest.raises(pbf.step.StepError, match="force model\\(s\\) flat do not take ball / free joints yet"):
        pbf.Simulator(m, "pbad", dt=0.01, forces=["gravity", Flat()])


def test_chain_with_ball_joints_starts_where_the_papers_chain_does():
    from pbframework.kinematics import forward_kinematics

    ball, ball2 = pbf.models.chain(4, "ball"), pbf.models.chain(4)
    assert (ball.nq, ball.nv) == (16, 12) and ball.name == ball2.name
    a = np.asarray(forward_kinematics(ball)(pbf.models.chain_q0(ball)))
    b = np.asarray(forward_kinematics(ball2)(pbf.models.chain_q0(ball2)))
    assert np.abs(a - b).max() < 1e-15
    assert pbf.models.chain_energy_scale(ball) == pbf.models.chain_energy_scale(ball2)


@pytest.mark.parametrize("order", [2, 3])
def test_generated_c_on_the_group_equals_the_vm_and_batches_equal_single_runs(order):
    """The C driver with nv != nq (PBF_NVEL: the metric, residual weight and velocity blocks): the same bits
    as the VM with the same derivative kernels (full), to 1e-9 with the default directional ones; every
    trajectory of a native batch equals its single run."""
    m, _ = ball_chain(4, np.random.default_rng(6))
    kw = dict(order=order, dt=0.01)
    vm = pbf.Simulator(m, "pbad", **kw).rollout(m.neutral(), duration=1.0)
    full = pbf.Simulator(m, "pbad", backend="c", backend_options={"derivatives": "full"}, **kw)
    c = full.rollout(m.neutral(), duration=1.0)
    assert c.ok and np.array_equal(c.q, vm.q) and np.array_equal(c.qd, vm.qd)
    d = pbf.Simulator(m, "pbad", backend="c", **kw).rollout(m.neutral(), duration=1.0)
    assert np.abs(d.q - vm.q).max() < 1e-9 and np.abs(d.qd - vm.qd).max() < 1e-9
    Q0 = np.tile(m.neutral(), (3, 1))
    QD0 = 0.5 * np.random.default_rng(0).normal(size=(3, m.nv))
    batch = full.rollout_batch(Q0, QD0, duration=0.3)
    for i in range(3):
        single = full.rollout(Q0[i], QD0[i], duration=0.3)
        assert np.array_equal(batch[i].q, single.q) and np.array_equal(batch[i].qd, single.qd)


def test_contact_and_drag_on_a_free_box_equal_the_euler_angle_twin():
    """penalty_contact and drag take the free joint (gradients along the tangent): a box dropped sliding and
    spinning onto the ground moves as the same box on the Euler-angle base, which stays far from its
    singularity here (pbad order 2 / 3: link poses within 1e-5 / 1e-6 m over 0.5 s, measured 2.6e-6 and
    8.9e-8 at 2 / 1 ms)."""
    from pbframework.kinematics import forward_kinematics

    pts = [(sx * 0.2, sy * 0.1, sz * 0.05) for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]

    def box(joint):
        return ArticulatedBody([Link("box", mass=1.0, inertia=np.diag([0.004, 0.014, 0.017]), contact_points=pts)],
                               [Joint("base", joint, "world", "box")], name=f"box_{joint}")

    free, euler = box("free"), box("floating")
    q_free, q_euler = free.neutral(), np.zeros(6)
    q_free[2] = q_euler[2] = 0.1
    forces = ["gravity", ("penalty_contact", {"stiffness": 1e4, "friction": 50.0}), ("drag", {"coefficient": 0.1})]
    v0 = np.r_[1.0, 0, 0, 0, 0, 3.0]          # at the identity, body and world velocities coincide
    for order, dt, tol in ((2, 0.002, 1e-5), (3, 0.001, 1e-6)):
        a = pbf.Simulator(free, "pbad", order=order, dt=dt, forces=forces).rollout(q_free, v0, duration=0.5)
        b = pbf.Simulator(euler, "pbad", order=order, dt=dt, forces=forces).rollout(q_euler, v0, duration=0.5)
        assert a.ok and b.ok and a.q[-1, 2] < 0.08           # landed
        fa, fb = forward_kinematics(free), forward_kinematics(euler)
        assert max(np.abs(np.asarray(fa(x)) - np.asarray(fb(y))).max() for x, y in zip(a.q, b.q)) < tol


def test_joint_damping_on_ball_joints_acts_on_the_angular_velocity():
    m, _ = ball_chain(2, np.random.default_rng(7))
    damping = pbf.force_model("joint_damping", damping=0.5)
    q, v = m.neutral(), np.arange(1.0, 7.0)
    assert np.allclose(np.asarray(damping.generalized_force(m, q, v, 0.0)).ravel(), -0.5 * v)
    free = pbf.Simulator(m, "pbad", order=3, dt=0.01).rollout(q, v, duration=1.0)
    damped = pbf.Simulator(m, "pbad", order=3, dt=0.01, forces=["gravity", damping]).rollout(q, v, duration=1.0)
    assert damped.ok and damped.energy[-1] < free.energy[-1] - 1.0
    with pytest.raises(ValueError, match="has no velocity or joint 'j0:qx'"):
        pbf.Simulator(m, "pbad", dt=0.01, forces=[("joint_damping", {"dofs": ["j0:qx"]})])



def test_joint_space_forces_on_the_hinges_of_a_free_based_robot_equal_the_euler_angle_twin():
    """pd, stable_pd, joint_torque and joint_limits act on the hinge coordinates of a model with a free
    base (their velocities mapped to v): a two-link leg on a free base in free fall, driven (and, apart,
    limited), moves as its Euler-angle twin while the base stays far from gimbal lock. The two differ by
    their start (the twin's history node is RK4's, the group's a second-order Taylor node), so the gap
    shrinks as dt^2 (measured with the driving forces 9.8e-5 m at 2 ms, 2.5e-5 m at 1 ms)."""
    from pbframework.kinematics import forward_kinematics

    def leg(base, limits):
        links = [Link("pelvis", mass=3.0, inertia=np.diag([0.02, 0.03, 0.04])),
                 Link("thigh", mass=1.0, com=(0, 0, -0.2), inertia=np.diag([0.01, 0.01, 0.002])),
                 Link("shin", mass=0.5, com=(0, 0, -0.2), inertia=np.diag([0.005, 0.005, 0.001]))]
        joints = [Joint("base", base, "world", "pelvis"),
                  Joint("hip", "revolute", "pelvis", "thigh", axis=(0, 1, 0), lower=-0.6, upper=0.6),
                  Joint("knee", "revolute", "thigh", "shin", origin=transform((0, 0, -0.4)), axis=(0, 1, 0),
                        lower=-1.0, upper=0.0)]
        return ArticulatedBody(links, joints, name=f"leg_{base}", default_forces=["joint_limits"] if limits else [])

    def gap(forces, dt, limits):
        free, euler = leg("free", limits), leg("floating", limits)
        a = pbf.Simulator(free, "pbad", order=3, dt=dt, forces=forces).rollout(free.neutral(), duration=0.4)
        b = pbf.Simulator(euler, "pbad", order=3, dt=dt, forces=forces).rollout(np.zeros(euler.nq), duration=0.4)
        assert a.ok and b.ok
        fa, fb = forward_kinematics(free), forward_kinematics(euler)
        return max(np.abs(np.asarray(fa(x)) - np.asarray(fb(y))).max() for x, y in zip(a.q, b.q)), a, free

    driving = ["gravity", ("pd", {"kp": 50.0, "kd": 2.0, "target": 0.5, "dofs": ["hip"]}),
               ("stable_pd", {"kp": 20.0, "kd": 1.0, "target": -0.3, "dofs": ["knee"], "dt": 0.002}),
               ("joint_torque", {"torque": [0.5], "dofs": ["knee"]})]
    coarse, run, free = gap(driving, 0.002, False)
    fine, _, _ = gap(driving, 0.001, False)
    assert run.q[-1, free.dof_index("hip")] > 0.3                   # driven toward its target
    assert coarse < 3e-4 and fine < coarse / 3, (coarse, fine)
    limited, run, _ = gap(["gravity"], 0.002, True)
    assert run.info["forces"][-1].startswith("JointLimits") and limited < 1e-5


def test_runge_kutta_munthe_kaas_keeps_its_order_on_the_group():
    """rk2 / rk3 / rk4 on ball joints (RKMK in the chart at the step's start) converge to the Euler-angle
    twin's fine RK4 motion at their orders (measured 2.03, 3.00, 4.1), and on a free joint the tennis
    racket keeps its world angular momentum to 1e-12 with rk4 at 1 ms."""
    from pbframework.kinematics import forward_kinematics

    m, _ = ball_chain(4, np.random.default_rng(6))
    twin = ArticulatedBody(m.links, [Joint(j.name, "spherical", j.parent, j.child, origin=j.origin)
                                     for j in m.joints], name="ballchain4_euler")
    fk, fk_twin = forward_kinematics(m), forward_kinematics(twin)
    ref = pbf.Simulator(twin, "rk4", dt=2.5e-4).rollout(np.zeros(twin.nq), duration=0.5)
    for method, order in (("rk2", 2), ("rk3", 3), ("rk4", 4)):
        errors = []
        for dt in (0.004, 0.002):
            tr = pbf.Simulator(m, method, dt=dt).rollout(m.neutral(), duration=0.5)
            every = int(round(dt / 2.5e-4))
            errors.append(max(np.abs(np.asarray(fk(a)) - np.asarray(fk_twin(b))).max()
                              for a, b in zip(tr.q, ref.q[::every])))
        assert np.log2(errors[0] / errors[1]) > order - 0.3, (method, errors)
    r = _racket("free")
    tr = pbf.Simulator(r, "rk4", dt=0.001, forces=[]).rollout(r.neutral(), np.r_[0, 0, 0, W0], duration=20)
    L = np.array([_rotation(q[3:7]) @ (np.diag([1.0, 2.0, 3.0]) @ v[3:6]) for q, v in zip(tr.q, tr.qd)])
    assert tr.ok and np.linalg.norm(L - L[0], axis=1).max() / np.linalg.norm(L[0]) < 1e-12


def test_runge_kutta_on_a_free_body_equals_the_euler_angle_twin():
    """The se(3) bracket of a free joint's twist: a spinning, translating free body under gravity, RK4 on
    the free joint and on the Euler-angle twin, agree to the methods' error (1e-9 m at 1 ms over 0.5 s)."""
    from pbframework.kinematics import forward_kinematics

    def body(joint):
        return ArticulatedBody([Link("b", mass=2.0, com=(0.1, 0.0, 0.0), inertia=np.diag([0.1, 0.2, 0.25]))],
                               [Joint("base", joint, "world", "b")], name=f"tumbler_{joint}")

    free, euler = body("free"), body("floating")
    v0 = np.r_[0.5, -0.2, 1.0, 1.0, 2.0, 0.5]          # at the identity, body and world velocities coincide
    a = pbf.Simulator(free, "rk4", dt=0.001).rollout(free.neutral(), v0, duration=0.5)
    b = pbf.Simulator(euler, "rk4", dt=0.001).rollout(np.zeros(6), v0, duration=0.5)
    fa, fb = forward_kinematics(free), forward_kinematics(euler)
    assert max(np.abs(np.asarray(fa(x)) - np.asarray(fb(y))).max() for x, y in zip(a.q, b.q)) < 1e-9



@pytest.mark.parametrize("backend", ["casadi", "c"])
def test_adaptive_steps_on_the_group(backend):
    """Adaptive pbad on quaternion joints (error estimate and dense output in the chart at each step's
    start): the tennis racket for 20 s ends ok with every quaternion unit, the error shrinks with rtol
    against the fixed-step run at 1 ms, and the two backends take the same steps (full derivatives)."""
    r = _racket("free")
    v0 = np.r_[0, 0, 0, W0]
    opts = {"backend_options": {"derivatives": "full"}} if backend == "c" else {}
    ref = pbf.Simulator(r, "pbad", order=4, dt=0.001, forces=[]).rollout(r.neutral(), v0, duration=5.0)
    errors = []
    for rtol in (1e-4, 1e-6):
        tr = pbf.Simulator(r, "pbad", order=3, dt=0.05, forces=[], backend=backend, adaptive={"rtol": rtol},
                           **opts).rollout(r.neutral(), v0, duration=5.0)
        assert tr.ok and tr.q.shape == (101, 7) and tr.qd.shape == (101, 6)
        assert np.abs(np.linalg.norm(tr.q[:, 3:7], axis=1) - 1).max() < 1e-12
        R = np.array([_rotation(q[3:7]) for q in tr.q])
        R_ref = np.array([_rotation(q[3:7]) for q in ref.q[::50]])
        errors.append(np.abs(R - R_ref).max())
    assert errors[1] < errors[0] / 4, errors
    if backend == "c":
        vm = pbf.Simulator(r, "pbad", order=3, dt=0.05, forces=[], adaptive={"rtol": 1e-6}).rollout(
            r.neutral(), v0, duration=5.0)
        assert vm.info["adaptive"]["h"] == tr.info["adaptive"]["h"] and np.array_equal(vm.q, tr.q)
