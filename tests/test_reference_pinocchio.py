"""Reference tests: RNEA / CRBA / ABA of URDF models loaded by pbframework against Pinocchio.

The robots come from example-robot-data (arms, quadrupeds, humanoids, a mobile manipulator) plus the small
URDFs under tests/data. Each is checked with a fixed base (``pin.buildModelFromUrdf(path)``) and with a
floating base: ``load_urdf(path, floating_base="floating")`` against Pinocchio's composite root joint
[PX, PY, PZ, RX, RY, RZ], which has the same coordinates as our ``floating`` joint.

Coordinates are matched by joint name. Pinocchio models a URDF ``continuous`` joint with two coordinates
(cos, sin) and one velocity; ours is a revolute angle, so ``q_pin = (cos q, sin q)`` and velocities map 1:1.

Error measure: ``rel_err(ours, pin) = ||ours - pin||_F / max(||pin||_F, 1)`` over the whole matrix or
vector (a norm-wise relative error that stays meaningful for entries near zero), at most ``REL_TOL``.

States: joint angles uniform in [-pi, pi], except the floating base's pitch (``root_joint:ry``), drawn in
[-PITCH_MAX, PITCH_MAX]: at +-pi/2 the Euler-angle coordinates (ours and Pinocchio's composite alike) are
singular, M(q) loses rank and ABA's result is ill-conditioned in both libraries (condition numbers of 1e8
and relative differences near 1e-9 were seen within 0.01 rad of it; 1e-14 elsewhere).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pbframework import dynamics
from pbframework.io import load_urdf
from pbframework.io.urdf import ROOT_JOINT

pin = pytest.importorskip("pinocchio")

REL_TOL = 1e-9
"""Maximum norm-wise relative error between our results and Pinocchio's."""

N_STATES = 3
"""Random states per robot and algorithm (drawn from the seeded ``rng`` fixture)."""

PITCH_MAX = 1.2
"""Bound on the floating base's pitch in random states (away from the Euler singularity at pi/2)."""

DATA = Path(__file__).parent / "data"

# (path relative to example-robot-data's robots directory, what it exercises)
ROBOTS = {
    "panda": ("panda_description/urdf/panda.urdf", "arm, prismatic fingers, mimic joint"),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", "arm fixed to a world link"),
    "kinova": ("kinova_description/robots/kinova.urdf", "arm with continuous joints, massless root"),
    "solo12": ("solo_description/robots/solo12.urdf", "quadruped"),
    "anymal": ("anymal_b_simple_description/robots/anymal.urdf", "quadruped, dummy base inertia"),
    "a1": ("a1_description/urdf/a1.urdf", "quadruped, massless root frame"),
    "g1": ("g1_description/urdf/g1_29dof_rev_1_0.urdf", "humanoid, 29 joints"),
    "talos": ("talos_data/robots/talos_reduced.urdf", "humanoid, point-mass sensor frames"),
    "pr2": ("pr2_description/urdf/pr2.urdf", "mobile manipulator, continuous wheels, prismatic torso"),
    "baxter": ("baxter_description/urdf/baxter.urdf", "dual arm, prismatic grippers"),
    "double_pendulum": ("double_pendulum_description/urdf/double_pendulum_continuous.urdf",
                        "continuous joints only"),
}
LOCAL = {"arm": DATA / "arm.urdf", "walker": DATA / "walker.urdf"}


def rel_err(ours: np.ndarray, ref: np.ndarray) -> float:
    """``||ours - ref||_F / max(||ref||_F, 1)``."""
    return float(np.linalg.norm(np.asarray(ours) - ref) / max(np.linalg.norm(ref), 1.0))


def _root_joint() -> "pin.JointModelComposite":
    root = pin.JointModelComposite()
    for j in (pin.JointModelPX(), pin.JointModelPY(), pin.JointModelPZ(),
              pin.JointModelRX(), pin.JointModelRY(), pin.JointModelRZ()):
        root.addJoint(j)
    return root


class Pair:
    """Our model and Pinocchio's for one URDF, with the coordinate maps between them."""

    def __init__(self, path: Path, floating: bool) -> None:
        self.ours = load_urdf(path, floating_base="floating" if floating else False)
        self.pin = (pin.buildModelFromUrdf(str(path), _root_joint(), ROOT_JOINT) if floating
                    else pin.buildModelFromUrdf(str(path)))
        self.data = self.pin.createData()
        self.perm = np.full(self.pin.nv, -1)  # ours[perm] is in Pinocchio's velocity order
        self.qmap: list[tuple[int, int, int]] = []  # (Pinocchio idx_q, its nq, our first coordinate)
        for i in range(1, self.pin.njoints):
            jm, name = self.pin.joints[i], self.pin.names[i]
            sl = self.ours.joint_q_index[name]
            assert sl.stop - sl.start == jm.nv, f"joint {name}: {jm.nv} velocities in Pinocchio, ours {sl}"
            self.perm[jm.idx_v:jm.idx_v + jm.nv] = np.arange(sl.start, sl.stop)
            assert jm.nq == jm.nv or (jm.nq, jm.nv) == (2, 1), f"joint {name}: unexpected nq={jm.nq}"
            self.qmap.append((jm.idx_q, jm.nq, sl.start))
        assert sorted(self.perm) == list(range(self.ours.nq)), "coordinates do not map one to one"

    def random_q(self, rng: np.random.Generator) -> np.ndarray:
        q = rng.uniform(-np.pi, np.pi, self.ours.nq)
        if ROOT_JOINT in self.ours.joint_q_index:
            q[self.ours.dof_index(f"{ROOT_JOINT}:ry")] = rng.uniform(-PITCH_MAX, PITCH_MAX)
        return q

    def q_pin(self, q: np.ndarray) -> np.ndarray:
        out = np.zeros(self.pin.nq)
        for iq, nq, k in self.qmap:
            if nq == 2:  # continuous joint: (cos, sin)
                out[iq:iq + 2] = np.cos(q[k]), np.sin(q[k])
            else:
                out[iq:iq + nq] = q[k:k + nq]
        return out


_PAIRS: dict[tuple[str, bool], Pair] = {}


def _pair(key: str, floating: bool, robots_dir: Path | None) -> Pair:
    if (key, floating) not in _PAIRS:
        path = LOCAL[key] if key in LOCAL else robots_dir / ROBOTS[key][0]
        if not path.exists():
            pytest.skip(f"{path} not in this example-robot-data version")
        _PAIRS[key, floating] = Pair(path, floating)
    return _PAIRS[key, floating]


# tests/data/arm.urdf is bolted to a world link through a fixed joint with a non-identity origin: with a
# floating base, load_urdf replaces that joint by the floating one while Pinocchio floats the world link
# itself, so the coordinates differ by that constant offset (documented in load_urdf). Fixed base only.
CASES = [(r, f) for r in [*ROBOTS, *LOCAL] for f in (False, True) if not (r == "arm" and f)]


@pytest.fixture(params=CASES, ids=[f"{r}-{'floating' if f else 'fixed'}" for r, f in CASES])
def pair(request) -> Pair:
    robot, floating = request.param
    robots_dir = None if robot in LOCAL else request.getfixturevalue("robots_dir")
    return _pair(robot, floating, robots_dir)


def test_models_agree_on_sizes_and_gravity(pair: Pair) -> None:
    assert pair.ours.nq == pair.pin.nv
    assert pair.ours.total_mass == pytest.approx(sum(Y.mass for Y in pair.pin.inertias), rel=1e-12)
    np.testing.assert_array_equal(pair.ours.gravity, pair.pin.gravity.linear)


def test_crba_matches_pinocchio(pair: Pair, rng: np.random.Generator) -> None:
    crba = dynamics.crba(pair.ours)
    for _ in range(N_STATES):
        q = pair.random_q(rng)
        M_pin = pin.crba(pair.pin, pair.data, pair.q_pin(q))
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T  # Pinocchio fills the upper triangle
        M = np.array(crba(q))[np.ix_(pair.perm, pair.perm)]
        assert rel_err(M, M_pin) <= REL_TOL


def test_rnea_matches_pinocchio(pair: Pair, rng: np.random.Generator) -> None:
    rnea = dynamics.rnea(pair.ours)
    n = pair.ours.nq
    for _ in range(N_STATES):
        q, v, a = pair.random_q(rng), rng.uniform(-2, 2, n), rng.uniform(-5, 5, n)
        tau_pin = pin.rnea(pair.pin, pair.data, pair.q_pin(q), v[pair.perm], a[pair.perm])
        tau = np.array(rnea(q, v, a)).ravel()[pair.perm]
        assert rel_err(tau, tau_pin) <= REL_TOL


def test_aba_matches_pinocchio(pair: Pair, rng: np.random.Generator) -> None:
    aba = dynamics.aba(pair.ours)
    n = pair.ours.nq
    for _ in range(N_STATES):
        q, v, tau = pair.random_q(rng), rng.uniform(-2, 2, n), rng.uniform(-10, 10, n)
        a_pin = pin.aba(pair.pin, pair.data, pair.q_pin(q), v[pair.perm], tau[pair.perm])
        a = np.array(aba(q, v, tau)).ravel()[pair.perm]
        assert rel_err(a, a_pin) <= REL_TOL


def test_floating_base_is_pinocchios_composite_root_joint(robots_dir: Path) -> None:
    """Our floating joint's six coordinates are Pinocchio's [PX, PY, PZ, RX, RY, RZ], in that order."""
    pair = _pair("solo12", True, robots_dir)
    sl = pair.ours.joint_q_index[ROOT_JOINT]
    assert pair.ours.dof_names[sl] == tuple(f"{ROOT_JOINT}:{a}" for a in ("x", "y", "z", "rx", "ry", "rz"))
    q = np.zeros(pair.ours.nq)
    q[sl] = (0.1, -0.2, 0.3, 0.4, -0.5, 0.6)
    pin.forwardKinematics(pair.pin, pair.data, pair.q_pin(q))
    M = pair.data.oMi[pair.pin.getJointId(ROOT_JOINT)]
    from pbframework.kinematics import link_transform

    T = np.array(link_transform(pair.ours, pair.ours.base)(q))
    np.testing.assert_allclose(T[:3, :3], M.rotation, atol=1e-14)
    np.testing.assert_allclose(T[:3, 3], M.translation, atol=1e-14)
