"""Unit and reference tests of the importers (pbframework.io): URDF and MJCF.

- small files under tests/data (arm.urdf, walker.urdf, chain3.xml, tree_free_ball.xml) and what they must
  load to (frames, inertia conversion, merged massless links, limits, floating bases);
- every error a user can make, written to a temporary file: a ModelError (FileNotFoundError for a missing
  file) whose message names the file and the offending element;
- real robots from example-robot-data (mass conservation through merging; the robots our Link validation
  rejects and why);
- MJCF against MuJoCo (optional dependency): mass matrix, bias forces and forward dynamics of CHAIN-3, and a
  free / ball / hinge tree through the velocity map of Euler angles (``omega = E(e) de/dt``).
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from pbframework import dynamics, kinematics, models
from pbframework.io import InertiaBalanced, load_mjcf, load_urdf
from pbframework.model import WORLD, JointType, ModelError, rpy_to_matrix, transform

DATA = Path(__file__).parent / "data"

EXACT = 1e-12
"""Tolerance for quantities the importer computes in closed form (transforms, merged inertia)."""

MUJOCO_TOL = 1e-9
"""Norm-wise relative tolerance against MuJoCo, ``||ours - mj|| / max(||mj||, 1)``."""

FD_TOL = 1e-7
"""Same, where MuJoCo's side uses a central finite difference of the velocity map (O(h^2), h = 1e-6)."""


def rel_err(ours, ref) -> float:
    ref = np.asarray(ref, float)
    return float(np.linalg.norm(np.asarray(ours, float) - ref) / max(np.linalg.norm(ref), 1.0))


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def assert_names(exc: pytest.ExceptionInfo, path: Path, *fragments: str) -> None:
    """The error message names the file and every fragment (element names, what is allowed)."""
    msg = str(exc.value)
    assert str(path) in msg, msg
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"


# ==========================================================================================================
# URDF: tests/data/arm.urdf
# ==========================================================================================================

@pytest.fixture(scope="module")
def arm():
    return load_urdf(DATA / "arm.urdf")


def test_urdf_arm_structure(arm) -> None:
    assert arm.name == "test_arm"
    # imu (massless leaf), flange (massless, carries the tool) and tip_mass (point mass) are merged.
    assert [x.name for x in arm.links] == ["base", "upper", "fore", "carriage", "tool"]
    assert [(j.name, j.type, j.parent) for j in arm.joints] == [
        ("mount", JointType.FIXED, WORLD), ("shoulder", JointType.REVOLUTE, "base"),
        ("elbow", JointType.REVOLUTE, "upper"), ("slide", JointType.PRISMATIC, "fore"),
        ("tool_joint", JointType.FIXED, "carriage")]
    assert arm.dof_names == ("shoulder", "elbow", "slide")
    assert arm.gravity.tolist() == [0.0, 0.0, -9.81]
    assert arm.total_mass == pytest.approx(2.0 + 1.5 + 1.0 + 0.5 + 0.0 + 0.3 + 0.05, abs=EXACT)


def test_urdf_arm_joint_data(arm) -> None:
    sh, el, sl = arm.joint("shoulder"), arm.joint("elbow"), arm.joint("slide")
    np.testing.assert_allclose(sh.origin, transform((0, 0, 0.1), (0.1, 0.2, 0.3)), atol=EXACT)
    np.testing.assert_allclose(sh.axis, (0, 1, 0))
    assert (sh.lower, sh.upper, sh.effort, sh.velocity) == (-1.5, 2.0, 40.0, 3.0)
    assert (el.lower, el.upper, el.effort, el.velocity) == (-math.inf, math.inf, 20.0, 5.0)  # continuous
    assert (sl.lower, sl.upper, sl.effort, sl.velocity) == (0.0, 0.2, 100.0, 0.5)
    np.testing.assert_allclose(arm.joint("mount").origin, transform((0, 0, 0.1), (0, 0, 0.5)), atol=EXACT)
    # The tool hangs from the carriage through the merged flange: the two fixed origins compose.
    np.testing.assert_allclose(arm.joint("tool_joint").origin,
                               transform((0.1, 0, 0), (0, 0, 1.0)) @ transform((0.05, 0, 0)), atol=EXACT)


def test_urdf_inertial_frame_is_converted_to_the_link_frame(arm) -> None:
    upper = arm.link("upper")
    R = rpy_to_matrix((0.3, -0.2, 0.7))
    I_inertial = np.array([[0.002, 0.0001, 0], [0.0001, 0.02, 0], [0, 0, 0.021]])
    np.testing.assert_allclose(upper.com, (0.2, 0, 0), atol=EXACT)
    np.testing.assert_allclose(upper.inertia, R @ I_inertial @ R.T, atol=EXACT)
    assert upper.mass == 1.5


def test_urdf_massless_and_point_mass_frames_merge_exactly(arm) -> None:
    # tip_mass: a 0.05 kg point mass at x = 0.06 in the tool frame, merged into the tool (0.3 kg at x = 0.02).
    tool = arm.link("tool")
    assert tool.mass == pytest.approx(0.35, abs=EXACT)
    c = (0.3 * 0.02 + 0.05 * 0.06) / 0.35
    np.testing.assert_allclose(tool.com, (c, 0, 0), atol=EXACT)
    d1, d2 = 0.02 - c, 0.06 - c
    expected = np.diag([0.0001, 0.0002, 0.0002]) + (0.3 * d1 * d1 + 0.05 * d2 * d2) * np.diag([0, 1, 1])
    np.testing.assert_allclose(tool.inertia, expected, atol=EXACT)
    # The massless imu leaf leaves the forearm untouched.
    assert arm.link("fore").mass == 1.0
    np.testing.assert_allclose(arm.link("fore").com, (0.15, 0.01, 0), atol=EXACT)


def test_urdf_floating_base_replaces_the_world_mount() -> None:
    m = load_urdf(DATA / "arm.urdf", floating_base="floating")
    assert m.has_floating_base and m.nq == 9
    root = m.joint("root_joint")
    assert (root.type, root.parent, root.child) == (JointType.FLOATING, WORLD, "base")
    np.testing.assert_array_equal(root.origin, np.eye(4))
    assert m.dof_names[:6] == ("root_joint:x", "root_joint:y", "root_joint:z",
                               "root_joint:rx", "root_joint:ry", "root_joint:rz")
    assert "mount" not in {j.name for j in m.joints}
    q = np.zeros(m.nq)
    q[:6] = (0.3, -0.1, 0.7, 0.2, 0.1, -0.4)
    T = np.array(kinematics.link_transform(m, "base")(q))
    np.testing.assert_allclose(T, transform(q[:3]) @ _rot_xyz(q[3:6]), atol=EXACT)


def _rot_xyz(e) -> np.ndarray:
    T = np.eye(4)
    c, s = np.cos(e), np.sin(e)
    Rx = np.array([[1, 0, 0], [0, c[0], -s[0]], [0, s[0], c[0]]])
    Ry = np.array([[c[1], 0, s[1]], [0, 1, 0], [-s[1], 0, c[1]]])
    Rz = np.array([[c[2], -s[2], 0], [s[2], c[2], 0], [0, 0, 1]])
    T[:3, :3] = Rx @ Ry @ Rz
    return T


# ==========================================================================================================
# URDF: tests/data/walker.urdf (massless root frame, dummy trunk inertia)
# ==========================================================================================================

@pytest.mark.parametrize("floating", [False, True])
def test_urdf_massless_root_absorbs_its_rigid_children(floating: bool) -> None:
    m = load_urdf(DATA / "walker.urdf", floating_base="floating" if floating else False)
    assert m.base == "base_footprint"
    assert [x.name for x in m.links] == ["base_footprint", "left_thigh", "right_thigh", "left_shin", "right_shin"]
    assert m.total_mass == pytest.approx(1e-6 + 8.0 + 2 * 1.2 + 2 * 0.6, abs=EXACT)
    # The hips keep their place: footprint -> trunk -> hip origins compose.
    np.testing.assert_allclose(m.joint("left_hip").origin,
                               transform((0, 0, 0.4), (0, 0.05, 0)) @ transform((0, 0.12, -0.05)), atol=EXACT)
    assert m.nq == (10 if floating else 4)
    assert m.joint("right_knee").lower == -math.inf  # continuous


def test_urdf_merging_preserves_the_dynamics() -> None:
    """walker.urdf's merged trunk equals a hand-built model of the same rigid bodies."""
    from pbframework.model import ArticulatedBody, Joint, Link

    m = load_urdf(DATA / "walker.urdf", floating_base="floating")
    T_trunk = transform((0, 0, 0.4), (0, 0.05, 0))
    T_inertia = T_trunk @ transform((0.01, 0, 0.02), (0, 0, 0.1)) @ transform((0, 0.003, 0), (0.02, 0, 0))
    R, p = T_inertia[:3, :3], T_inertia[:3, 3]
    I_in = np.array([[0.05, 0.001, 0.0005], [0.001, 0.2, 0], [0.0005, 0, 0.22]])
    dummy = T_trunk[:3, 3]  # the 1e-6 kg dummy's centre of mass (its rank-1 tensor is added below)
    mass = 8.0 + 1e-6
    com = (8.0 * p + 1e-6 * dummy) / mass
    Rt = T_trunk[:3, :3]

    def shift(mi, ci, Ii):
        d = ci - com
        return Ii + mi * (d @ d * np.eye(3) - np.outer(d, d))

    inertia = shift(8.0, p, R @ I_in @ R.T) + shift(1e-6, dummy, Rt @ np.full((3, 3), 1e-6) @ Rt.T)
    links = [Link("base", mass, com=com, inertia=inertia)]
    joints = [Joint("root_joint", "floating", WORLD, "base")]
    leg = dict(thigh=(1.2, (0, 0, -0.12), (0.006, 0.006, 0.0008)), shin=(0.6, (0, 0, -0.1), (0.003, 0.003, 0.0003)))
    for side, y in (("left", 0.12), ("right", -0.12)):
        links += [Link(f"{side}_{k}", mm, com=c, inertia=i) for k, (mm, c, i) in leg.items()]
        joints += [Joint(f"{side}_hip", "revolute", "base", f"{side}_thigh",
                         origin=T_trunk @ transform((0, y, -0.05)), axis=(0, 1, 0)),
                   Joint(f"{side}_knee", "revolute", f"{side}_thigh", f"{side}_shin",
                         origin=transform((0, 0, -0.25)), axis=(0, 1, 0))]
    ref = ArticulatedBody(links, joints)
    q = np.linspace(-0.8, 0.9, 10)
    order = [ref.dof_index(n) for n in m.dof_names]
    np.testing.assert_allclose(np.array(dynamics.crba(m)(q)),
                               np.array(dynamics.crba(ref)(q[np.argsort(order)]))[np.ix_(order, order)],
                               atol=1e-12)


# ==========================================================================================================
# URDF errors
# ==========================================================================================================

URDF_OK = """<robot name="r">
  <link name="base"><inertial><mass value="1"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <link name="shin"><inertial><origin xyz="0 0 -0.1"/><mass value="0.5"/>
    <inertia ixx="0.002" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.001"/></inertial></link>
  <joint name="knee" type="revolute"><parent link="base"/><child link="shin"/>
    <origin xyz="0 0 -0.3" rpy="0 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="10" velocity="2"/></joint>
</robot>
"""


def test_urdf_template_is_valid(tmp_path: Path) -> None:
    m = load_urdf(write(tmp_path, "ok.urdf", URDF_OK))
    assert m.dof_names == ("knee",) and m.total_mass == 1.5


# (case id, text substitution applied to URDF_OK, fragments the message must contain)
URDF_ERRORS = [
    ("planar", ('type="revolute"', 'type="planar"'),
     ["joint 'knee' of link 'shin': unsupported type 'planar'",
      "(supported: revolute, continuous, prismatic, fixed, floating)"]),
    ("unknown-type", ('type="revolute"', 'type="hinge"'), ["joint 'knee'", "unsupported type 'hinge'"]),
    ("no-type", (' type="revolute"', ''), ["joint 'knee'", "missing attribute 'type'"]),
    ("floating-not-from-world", ('type="revolute"', 'type="floating"'),
     ["joint 'knee' of link 'shin'", "world link as parent"]),
    ("moving-link-no-inertial", (re.compile(r'<link name="shin">.*?</link>', re.S), '<link name="shin"/>'),
     ["link 'shin'", "joint 'knee'", "no mass"]),
    ("moving-link-zero-mass", ('<mass value="0.5"/>', '<mass value="0"/>'), ["link 'shin'", "no mass"]),
    ("negative-mass", ('<mass value="0.5"/>', '<mass value="-0.5"/>'), ["link 'shin'", "mass"]),
    ("no-mass", ('<mass value="0.5"/>', ''), ["link 'shin'", "<inertial> has no <mass>"]),
    ("no-inertia", (re.compile(r'<inertia ixx="0.002"[^>]*/>'), ''), ["link 'shin'", "no <inertia>"]),
    ("missing-ixx", ('ixx="0.002" ', ''), ["link 'shin'", "'ixx'"]),
    ("bad-number", ('iyy="0.002"', 'iyy="two"'), ["link 'shin'", "iyy='two'"]),
    ("not-psd", ('ixx="0.002" ixy="0"', 'ixx="0.002" ixy="0.01"'), ["link 'shin'", "positive definite",
                                                                     "joint 'knee'"]),
    ("triangle", ('izz="0.001"', 'izz="0.009"'), ["link 'shin'", "triangle inequality"]),
    ("bad-origin", ('xyz="0 0 -0.3"', 'xyz="0 -0.3"'), ["joint 'knee'", "<origin> attribute xyz"]),
    ("zero-axis", ('<axis xyz="0 1 0"/>', '<axis xyz="0 0 0"/>'), ["joint 'knee'", "axis"]),
    ("limits-reversed", ('lower="-1" upper="1"', 'lower="1" upper="-1"'), ["joint 'knee'", "exceeds"]),
    ("no-child", ('<child link="shin"/>', ''), ["joint 'knee'", "<child"]),
    ("unknown-parent", ('<parent link="base"/>', '<parent link="torso"/>'), ["joint 'knee'", "'torso'"]),
    ("self-parent", ('<parent link="base"/>', '<parent link="shin"/>'), ["joint 'knee'", "own parent"]),
    ("joint-no-name", ('<joint name="knee" ', '<joint '), ["<joint> number 1", "'name'"]),
    ("link-no-name", ('<link name="base">', '<link>'), ["<link> number 1", "'name'"]),
    ("duplicate-link", ('<link name="shin">', '<link name="base">'), ["duplicate link name 'base'"]),
    ("not-urdf", ('<robot name="r">', '<sdf name="r">', '</robot>', '</sdf>'), ["<sdf>", "expected <robot>"]),
    ("xacro", ('<robot name="r">', '<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro">'
                                  '<xacro:property name="l" value="1"/>'), ["xacro"]),
    ("malformed", ('</robot>', ''), ["malformed XML", "line"]),
]


def _apply(text: str, subs: tuple) -> str:
    for old, new in zip(subs[::2], subs[1::2]):
        if isinstance(old, re.Pattern):
            assert old.search(text), old
            text = old.sub(new, text, count=1)
        else:
            assert old in text, old
            text = text.replace(old, new, 1)
    return text


@pytest.mark.parametrize("subs,fragments", [c[1:] for c in URDF_ERRORS], ids=[c[0] for c in URDF_ERRORS])
def test_urdf_errors_name_the_file_and_element(tmp_path: Path, subs: tuple, fragments: list[str]) -> None:
    path = write(tmp_path, "robot.urdf", _apply(URDF_OK, subs))
    with pytest.raises(ModelError) as exc:
        load_urdf(path)
    assert_names(exc, path, *fragments)


def test_urdf_error_two_roots_and_cycle(tmp_path: Path) -> None:
    extra = ('<link name="arm"><inertial><mass value="1"/>'
             '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>')
    path = write(tmp_path, "two.urdf", URDF_OK.replace("</robot>", extra + "</robot>"))
    with pytest.raises(ModelError) as exc:
        load_urdf(path)
    assert_names(exc, path, "one root link", "'arm'", "'base'")
    cyc = extra + ('<link name="hand"/><joint name="a" type="fixed"><parent link="arm"/><child link="hand"/></joint>'
                   '<joint name="b" type="fixed"><parent link="hand"/><child link="arm"/></joint>')
    path = write(tmp_path, "cycle.urdf", URDF_OK.replace("</robot>", cyc + "</robot>"))
    with pytest.raises(ModelError) as exc:
        load_urdf(path)
    assert_names(exc, path, "cycle", "'arm'", "'hand'")


def test_urdf_error_two_parents(tmp_path: Path) -> None:
    extra = ('<link name="thigh"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" '
             'iyz="0" izz="0.01"/></inertial></link><joint name="hip" type="fixed"><parent link="base"/>'
             '<child link="thigh"/></joint><joint name="knee2" type="fixed"><parent link="thigh"/>'
             '<child link="shin"/></joint>')
    path = write(tmp_path, "robot.urdf", URDF_OK.replace("</robot>", extra + "</robot>"))
    with pytest.raises(ModelError) as exc:
        load_urdf(path)
    assert_names(exc, path, "link 'shin'", "'knee'", "'knee2'")


def test_urdf_error_massless_fixed_base_with_two_moving_children(tmp_path: Path) -> None:
    text = URDF_OK.replace(
        '<link name="base"><inertial><mass value="1"/>\n    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" '
        'iyz="0" izz="0.01"/></inertial></link>',
        '<link name="base"/>')
    extra = ('<link name="shin2"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" '
             'iyz="0" izz="0.01"/></inertial></link><joint name="knee2" type="revolute"><parent link="base"/>'
             '<child link="shin2"/></joint>')
    assert text != URDF_OK
    path = write(tmp_path, "robot.urdf", text.replace("</robot>", extra + "</robot>"))
    with pytest.raises(ModelError) as exc:
        load_urdf(path)
    assert_names(exc, path, "link 'base'", "no mass", "'knee'", "'knee2'")
    # With one moving child the massless fixed base is dropped: the child hangs from the world.
    one = write(tmp_path, "one.urdf", text)
    m = load_urdf(one)
    assert m.base == "shin" and m.joint("knee").parent == WORLD


def test_urdf_floating_base_errors(tmp_path: Path) -> None:
    world = URDF_OK.replace("</robot>", '<link name="world"/><joint name="rail" type="prismatic">'
                                        '<parent link="world"/><child link="base"/><axis xyz="1 0 0"/>'
                                        '</joint></robot>')
    path = write(tmp_path, "rail.urdf", world)
    assert load_urdf(path).dof_names == ("rail", "knee")
    with pytest.raises(ModelError) as exc:
        load_urdf(path, floating_base=True)
    assert_names(exc, path, "floating_base=True", "'rail'")
    free = world.replace('type="prismatic"', 'type="floating"')
    path = write(tmp_path, "free.urdf", free)
    assert load_urdf(path).joint("rail").type is JointType.FLOATING  # URDF floating from the world link
    with pytest.raises(ModelError) as exc:
        load_urdf(path, floating_base=True)
    assert_names(exc, path, "already has a floating joint 'rail'")
    named = write(tmp_path, "named.urdf", URDF_OK.replace('name="knee"', 'name="root_joint"'))
    with pytest.raises(ModelError) as exc:
        load_urdf(named, floating_base=True)
    assert_names(exc, named, "'root_joint'")


def test_urdf_world_link_must_be_the_root(tmp_path: Path) -> None:
    path = write(tmp_path, "robot.urdf", URDF_OK.replace('"shin"', '"world"'))
    with pytest.raises(ModelError) as exc:
        load_urdf(path)
    assert_names(exc, path, "link 'world' must be the root", "'knee'")


def test_urdf_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no_such.urdf"):
        load_urdf(tmp_path / "no_such.urdf")


def test_urdf_directory_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="cannot read"):
        load_urdf(tmp_path)


# ==========================================================================================================
# URDF: real robots (example-robot-data)
# ==========================================================================================================

# Robots that load; checked for mass conservation through merging (dynamics: test_reference_pinocchio.py).
REAL_ROBOTS = [
    "panda_description/urdf/panda.urdf", "ur_description/urdf/ur5_robot.urdf",
    "solo_description/robots/solo12.urdf", "anymal_b_simple_description/robots/anymal.urdf",
    "anymal_c_simple_description/urdf/anymal.urdf", "a1_description/urdf/a1.urdf",
    "talos_data/robots/talos_full_v2.urdf", "allegro_hand_description/urdf/allegro_left_hand.urdf",
    "tiago_description/robots/tiago_dual.urdf", "hyq_description/robots/hyq_no_sensors.urdf",
]


def _urdf_mass(path: Path) -> float:
    root = ET.parse(path).getroot()
    return sum(float(m.get("value")) for link in root.findall("link") if link.get("name") != "world"
               for m in link.findall("inertial/mass"))


@pytest.mark.parametrize("rel", REAL_ROBOTS, ids=[Path(r).stem + "-" + r.split("_")[0] for r in REAL_ROBOTS])
def test_real_robots_load_and_keep_their_mass(robots_dir: Path, rel: str) -> None:
    path = robots_dir / rel
    if not path.exists():
        pytest.skip(f"{rel} not in this example-robot-data version")
    fixed, floating = load_urdf(path), load_urdf(path, floating_base="floating")
    assert floating.nq == fixed.nq + 6
    assert fixed.total_mass == pytest.approx(_urdf_mass(path), rel=1e-12)
    assert floating.total_mass == pytest.approx(_urdf_mass(path), rel=1e-12)


# Genuine files that Link validation rejects (Pinocchio accepts them): the error names the file, the link and
# the joint moving it. icub: a point mass (zero tensor) on r_hip_1, triangle violations on r_hip_2 and others;
# romeo_small: a triangle violation (loads with balance_inertia=True, below); human: massless intermediate links
# between hinges. If Link validation is relaxed (point masses, triangle inequality), update this list.
REJECTED = [
    ("icub_description/robots/icub.urdf", ["link 'r_hip_", "(moved by joint 'r_hip_", "inertia"]),
    ("romeo_description/urdf/romeo_small.urdf", ["link 'RShoulderYawLink'", "triangle inequality",
                                                 "balance_inertia=True (pbf simulate --balance-inertia)"]),
    ("human_description/robots/human.urdf", ["link 'left_upperleg_virtual'", "no mass"]),
]


@pytest.mark.parametrize("rel,fragments", REJECTED, ids=[Path(r[0]).stem for r in REJECTED])
def test_real_robots_rejected_with_a_clear_message(robots_dir: Path, rel: str, fragments: list[str]) -> None:
    path = robots_dir / rel
    if not path.exists():
        pytest.skip(f"{rel} not in this example-robot-data version")
    with pytest.raises(ModelError) as exc:
        load_urdf(path)
    assert_names(exc, path, *fragments)


def test_romeo_small_loads_with_balance_inertia_and_names_the_links_it_changed(robots_dir: Path) -> None:
    path = robots_dir / "romeo_description/urdf/romeo_small.urdf"
    if not path.exists():
        pytest.skip("romeo_small.urdf not in this example-robot-data version")
    with pytest.raises(ModelError) as exc:
        load_urdf(path)
    assert "\n" not in str(exc.value) and "balance_inertia=True" in str(exc.value)
    with pytest.warns(InertiaBalanced) as caught:
        model = load_urdf(path, balance_inertia=True)
    msg = str(caught[0].message)
    assert len(caught) == 1 and str(path) in msg and "2 links" in msg
    assert "'RShoulderYawLink' (0.000662, 0.000679, 0.00657) -> (0.00264, 0.00264, 0.00264)" in msg
    assert "'RElbowYawLink' (0.000211, 0.000347, 0.00213) -> (0.000896, 0.000896, 0.000896)" in msg
    shoulder = model.link("RShoulderYawLink").inertia
    np.testing.assert_allclose(shoulder, np.eye(3) * (0.0006617815827754761 + 0.0006793632730488165
                                                      + 0.006565310144175709) / 3, rtol=1e-12)
    assert model.total_mass == pytest.approx(_urdf_mass(path), rel=1e-12)   # masses as read


BAD_INERTIA_MJCF = """<mujoco model="flat"><compiler {compiler}/><worldbody><body name="plate">
  <joint name="spin" type="hinge" axis="0 0 1"/>
  <inertial pos="0 0 0" mass="1" diaginertia="0.001 0.002 0.01"/></body></worldbody></mujoco>"""


@pytest.mark.parametrize("compiler, option", [('balanceinertia="true"', False), ('angle="radian"', True)])
def test_mjcf_balanceinertia_from_the_compiler_or_the_option(tmp_path: Path, compiler: str, option: bool) -> None:
    """MuJoCo's compiler balances the inertia (principal moments set to their mean)."""
    path = tmp_path / "flat.xml"
    path.write_text(BAD_INERTIA_MJCF.format(compiler=compiler))
    model = load_mjcf(path, balance_inertia=option)
    np.testing.assert_allclose(model.link("plate").inertia, np.eye(3) * 0.013 / 3, rtol=1e-14)
    if not option:
        return
    with pytest.raises(ModelError, match=r"flat.xml: MuJoCo's compiler: .*A \+ B >= C.*'plate'.*balance_inertia=True "
                                         r"\(pbf simulate --balance-inertia, or <compiler balanceinertia=\"true\">\)"):
        load_mjcf(path)


# ==========================================================================================================
# MJCF: tests/data/chain3.xml (CHAIN-3) and tests/data/tree_free_ball.xml
# ==========================================================================================================

def test_mjcf_chain3_is_the_chain_builder() -> None:
    """Two hinges in one body: a massless frame between them, the body's link after the second; the
    dynamics are the chain builder's (ball2 joints)."""
    m, ref = load_mjcf(DATA / "chain3.xml"), models.chain(3)
    assert m.name == "chain3" and m.nq == 6
    assert [j.type for j in m.joints] == [JointType.REVOLUTE] * 6
    assert m.dof_names == ("joint0_y", "joint0_z", "joint1_y", "joint1_z", "joint2_y", "joint2_z")
    assert [x.name for x in m.links] == ["link0/joint0_y", "link0", "link1/joint1_y", "link1", "link2/joint2_y", "link2"]
    assert [x.mass for x in m.links[::2]] == [0.0] * 3
    for a, b in zip(m.links[1::2], ref.links):
        assert a.mass == b.mass
        np.testing.assert_allclose(a.com, b.com, atol=EXACT)
        np.testing.assert_allclose(a.inertia, b.inertia, atol=1e-15)
    q, v, acc = np.linspace(-1, 1, 6), np.linspace(0.5, -0.7, 6), np.linspace(2, -1, 6)
    np.testing.assert_allclose(np.array(dynamics.crba(m)(q)), np.array(dynamics.crba(ref)(q)), atol=EXACT)
    np.testing.assert_allclose(np.array(dynamics.rnea(m)(q, v, acc)), np.array(dynamics.rnea(ref)(q, v, acc)),
                               atol=EXACT)


@pytest.fixture(scope="module")
def tree():
    return load_mjcf(DATA / "tree_free_ball.xml", quaternions=False)


def test_mjcf_tree_structure(tree) -> None:
    assert [x.name for x in tree.links] == ["torso", "arm", "forearm", "hand_site"]  # hand_site: a massless frame
    assert tree.link("hand_site").mass == 0.0
    assert [(j.name, j.type) for j in tree.joints] == [
        ("root", JointType.FLOATING), ("shoulder", JointType.SPHERICAL), ("elbow", JointType.REVOLUTE),
        ("hand_site_weld", JointType.FIXED)]
    elbow = tree.joint("elbow")
    assert (elbow.lower, elbow.upper) == pytest.approx((-math.pi / 2, math.pi / 2), abs=EXACT)  # degrees
    np.testing.assert_allclose(elbow.axis, np.array([0, 1, 1]) / math.sqrt(2), atol=EXACT)
    np.testing.assert_array_equal(tree.joint("root").origin, np.eye(4))
    assert tree.total_mass == pytest.approx(4.7, abs=EXACT)
    # fullinertia is "ixx iyy izz ixy ixz iyz"
    np.testing.assert_allclose(tree.link("arm").inertia,
                               [[0.01, 0.001, 0], [0.001, 0.05, 0.002], [0, 0.002, 0.05]], atol=EXACT)


def test_mjcf_joint_anchor_moves_the_link_frame(tree) -> None:
    """A joint ``pos`` becomes the link frame origin; the body's inertial is re-expressed in it."""
    np.testing.assert_allclose(tree.link("arm").com, (0.3 - 0.05, 0, 0), atol=EXACT)
    np.testing.assert_allclose(tree.link("forearm").com, (0.25 - 0.02, 0.01, -0.01), atol=EXACT)


def _mujoco():
    return pytest.importorskip("mujoco")


def _full_mass_matrix(mj, m, d) -> np.ndarray:
    """MuJoCo's dense mass matrix (``mj_fullM`` takes ``(m, d, M)`` since 3.3, ``(m, M, qM)`` before)."""
    M = np.zeros((m.nv, m.nv))
    try:
        mj.mj_fullM(m, d, M)
    except TypeError:
        mj.mj_fullM(m, M, d.qM)
    return M


def test_mjcf_chain3_matches_mujoco(rng: np.random.Generator) -> None:
    mj = _mujoco()
    path = DATA / "chain3.xml"
    ours = load_mjcf(path)
    m = mj.MjModel.from_xml_path(str(path))
    d = mj.MjData(m)
    assert (m.nq, m.nv) == (ours.nq, ours.nq)
    for _ in range(3):
        q, v, tau = rng.uniform(-np.pi, np.pi, 6), rng.uniform(-2, 2, 6), rng.uniform(-5, 5, 6)
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q, v, tau
        mj.mj_forward(m, d)
        M = _full_mass_matrix(mj, m, d)
        assert rel_err(dynamics.crba(ours)(q), M) <= MUJOCO_TOL
        assert rel_err(np.array(dynamics.nonlinear_effects(ours)(q, v)).ravel(), d.qfrc_bias) <= MUJOCO_TOL
        assert rel_err(np.array(dynamics.aba(ours)(q, v, tau)).ravel(), d.qacc) <= MUJOCO_TOL


def _rot(axis: int, a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return [np.array([[1, 0, 0], [0, c, -s], [0, s, c]]), np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])][axis]


def _euler_rate_map(e: np.ndarray) -> np.ndarray:
    """E(e): body angular velocity = E(e) @ de/dt for intrinsic x-y-z Euler angles."""
    Ry, Rz = _rot(1, e[1]), _rot(2, e[2])
    return np.column_stack([(Ry @ Rz).T[:, 0], Rz.T[:, 1], [0.0, 0.0, 1.0]])


def test_mjcf_free_ball_hinge_tree_matches_mujoco(tree, rng: np.random.Generator) -> None:
    """Through MuJoCo's coordinates: qpos = (p, quat(root), quat(shoulder), elbow), qvel = J(q) v."""
    mj = _mujoco()
    m = mj.MjModel.from_xml_path(str(DATA / "tree_free_ball.xml"))
    d = mj.MjData(m)
    assert (m.nq, m.nv, tree.nq) == (12, 10, 10)

    def quat(e):
        out = np.zeros(4)
        mj.mju_mat2Quat(out, (_rot(0, e[0]) @ _rot(1, e[1]) @ _rot(2, e[2])).ravel())
        return out

    def J(q):
        out = np.eye(10)
        out[3:6, 3:6], out[6:9, 6:9] = _euler_rate_map(q[3:6]), _euler_rate_map(q[6:9])
        return out

    body_origin = {"torso": np.zeros(3), "arm": np.array([-0.05, 0, 0]), "forearm": np.array([-0.02, 0, -0.01])}
    h = 1e-6
    for _ in range(3):
        q, v, a = rng.uniform(-1.2, 1.2, 10), rng.uniform(-2, 2, 10), rng.uniform(-5, 5, 10)
        Jq = J(q)
        Jdot_v = (J(q + h * v) - J(q - h * v)) @ v / (2 * h)
        d.qpos[:] = np.concatenate([q[:3], quat(q[3:6]), quat(q[6:9]), q[9:]])
        d.qvel[:] = Jq @ v
        mj.mj_forward(m, d)
        M = _full_mass_matrix(mj, m, d)
        assert rel_err(dynamics.crba(tree)(q), Jq.T @ M @ Jq) <= MUJOCO_TOL
        d.qacc[:] = Jq @ a + Jdot_v
        tau = np.zeros(10)
        mj.mj_rne(m, d, 1, tau)
        assert rel_err(np.array(dynamics.rnea(tree)(q, v, a)).ravel(), Jq.T @ tau) <= FD_TOL
        for name, origin in body_origin.items():  # MuJoCo's body frames, seen from our link frames
            bid = mj.mj_name2id(m, mj.mjtObj.mjOBJ_BODY, name)
            T = np.array(kinematics.link_transform(tree, name)(q))
            np.testing.assert_allclose(T[:3, :3], d.xmat[bid].reshape(3, 3), atol=EXACT)
            np.testing.assert_allclose(T[:3, :3] @ origin + T[:3, 3], d.xpos[bid], atol=EXACT)


ORIENTATIONS = [
    ("radian", "xyz", 'quat="0.7 0.2 -0.4 0.5"'),
    ("degree", "xyz", 'euler="30 -45 60"'),
    ("degree", "ZYX", 'euler="30 -45 60"'),
    ("radian", "xYz", 'euler="0.3 1.1 -2.0"'),
    ("degree", "xyz", 'axisangle="1 2 -1 75"'),
    ("radian", "xyz", 'xyaxes="1 1 0 -1 2 0.5"'),
    ("radian", "xyz", 'zaxis="0.2 -0.3 0.9"'),
    ("radian", "xyz", 'zaxis="0 0 -1"'),
]


@pytest.mark.parametrize("angle,seq,attr", ORIENTATIONS, ids=[f"{a}-{s}-{o.split('=')[0]}" for a, s, o in ORIENTATIONS])
def test_mjcf_orientations_match_mujoco(tmp_path: Path, angle: str, seq: str, attr: str) -> None:
    mj = _mujoco()
    path = write(tmp_path, "o.xml", f"""<mujoco><compiler angle="{angle}" eulerseq="{seq}"/><worldbody>
      <body name="b" pos="0.1 0.2 0.3" {attr}><joint name="j" axis="1 0 0"/>
        <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/></body></worldbody></mujoco>""")
    m = mj.MjModel.from_xml_path(str(path))
    d = mj.MjData(m)
    mj.mj_forward(m, d)
    T = np.array(kinematics.link_transform(load_mjcf(path), "b")(np.zeros(1)))
    np.testing.assert_allclose(T[:3, :3], d.xmat[1].reshape(3, 3), atol=EXACT)
    np.testing.assert_allclose(T[:3, 3], d.xpos[1], atol=EXACT)


# ==========================================================================================================
# MJCF: more of the subset, and errors
# ==========================================================================================================

MJCF_OK = """<mujoco model="m">
  <compiler angle="radian"/>
  <worldbody>
    <body name="torso" pos="0 0 1">
      <joint name="hip" type="hinge" axis="0 1 0"/>
      <inertial pos="0 0 0" mass="2" diaginertia="0.02 0.02 0.01"/>
      <body name="leg" pos="0 0 -0.5">
        <joint name="knee" type="slide" axis="0 0 1" range="-0.1 0.1"/>
        <inertial pos="0 0 -0.2" mass="1" diaginertia="0.01 0.01 0.001"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_mjcf_template_is_valid(tmp_path: Path) -> None:
    m = load_mjcf(write(tmp_path, "ok.xml", MJCF_OK))
    assert m.dof_names == ("hip", "knee")
    assert (m.joint("knee").lower, m.joint("knee").upper) == (-0.1, 0.1)
    np.testing.assert_allclose(m.joint("hip").origin, transform((0, 0, 1)), atol=EXACT)


def test_mjcf_ref_keeps_mujoco_coordinates(tmp_path: Path) -> None:
    """With ``ref``, the body is drawn at qpos = ref: our coordinate is MuJoCo's qpos."""
    m = load_mjcf(write(tmp_path, "ref.xml", MJCF_OK.replace('axis="0 1 0"', 'axis="0 1 0" ref="0.4"')
                        .replace('axis="0 0 1" range', 'axis="0 0 1" ref="0.05" range')))
    T = np.array(kinematics.link_transform(m, "leg")(np.array([0.4, 0.05])))
    np.testing.assert_allclose(T, transform((0, 0, 1)) @ transform((0, 0, -0.5)), atol=EXACT)


def test_mjcf_gravity_includes_defaults_and_three_joints_in_one_body(tmp_path: Path) -> None:
    write(tmp_path, "leg.xml", """<mujoco>
      <body name="leg" pos="0 0 -0.5">
        <joint name="knee"/>
        <inertial pos="0 0 -0.2" mass="1" diaginertia="0.01 0.01 0.001"/>
      </body>
    </mujoco>""")
    path = write(tmp_path, "main.xml", """<mujoco model="inc">
      <compiler angle="degree"/>
      <option gravity="0 0 -3.7"/>
      <default><joint type="hinge" axis="1 0 0"/><default class="y"><joint axis="0 1 0"/></default></default>
      <worldbody>
        <body name="torso" pos="0 0 1" euler="0 0 90">
          <joint name="rx" pos="0 0 0.1"/>
          <joint name="ry" class="y" pos="0 0 0.1"/>
          <joint name="rz" axis="0 0 1" pos="0 0 0.1"/>
          <inertial pos="0 0 0" mass="2" diaginertia="0.02 0.02 0.01"/>
          <include file="leg.xml"/>
        </body>
      </worldbody>
    </mujoco>""")
    m = load_mjcf(path)
    assert m.gravity.tolist() == [0.0, 0.0, -3.7]
    assert [(j.name, j.type) for j in m.joints] == [("rx", JointType.REVOLUTE), ("ry", JointType.REVOLUTE),
                                                    ("rz", JointType.REVOLUTE), ("knee", JointType.REVOLUTE)]
    assert m.dof_names == ("rx", "ry", "rz", "knee")
    np.testing.assert_allclose(m.joint("knee").axis, (1, 0, 0))
    np.testing.assert_allclose(m.joint("ry").axis, (0, 1, 0))
    np.testing.assert_allclose(m.joint("rx").origin, transform((0, 0, 1), (0, 0, math.pi / 2))
                               @ transform((0, 0, 0.1)), atol=EXACT)
    np.testing.assert_allclose(m.joint("ry").origin, np.eye(4), atol=EXACT)     # the same anchor
    np.testing.assert_allclose(m.joint("knee").origin, transform((0, 0, -0.6)), atol=EXACT)


def test_mjcf_static_scenery_is_dropped(tmp_path: Path) -> None:
    text = MJCF_OK.replace("<worldbody>", '<worldbody><body name="table" pos="1 0 0">'
                                          '<inertial pos="0 0 0" mass="10" diaginertia="1 1 1"/></body>')
    m = load_mjcf(write(tmp_path, "scene.xml", text))
    assert "table" not in {x.name for x in m.links} and m.nq == 2


def test_mjcf_a_url_like_robot_root_is_refused_before_mujoco_reads_it_as_urdf(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"model.xml: not an MJCF file: the root element is <robot>"):
        load_mjcf(write(tmp_path, "model.xml", '<robot name="r"><link name="a"/></robot>'))


MJCF_ERRORS = [   # MuJoCo's compiler reads the file: its messages, after the file name
    ("unknown-type", ('type="slide"', 'type="spring"'), ["MuJoCo's compiler", "invalid keyword: 'spring'", "joint"]),
    ("free-not-top", ('<joint name="knee" type="slide" axis="0 0 1" range="-0.1 0.1"/>', '<freejoint name="fj"/>'),
     ["free joint can only be used on top level", "'leg'"]),
    ("moving-no-mass", ('<inertial pos="0 0 -0.2" mass="1" diaginertia="0.01 0.01 0.001"/>', ''),
     ["mass and inertia of moving bodies", "'leg'"]),
    ("no-mass", ('mass="1" ', ''), ["required attribute missing: 'mass'", "inertial"]),
    ("bad-pos", ('<body name="leg" pos="0 0 -0.5">', '<body name="leg" pos="0 -0.5">'),
     ["attribute 'pos' does not have enough data", "body"]),
    ("two-orientations", ('<body name="leg" pos="0 0 -0.5">', '<body name="leg" quat="1 0 0 0" euler="0 0 1">'),
     ["multiple orientation specifiers"]),
    ("unknown-class", ('type="slide"', 'type="slide" class="legs"'), ["unknown default class name 'legs'"]),
    ("duplicate-body", ('<body name="leg"', '<body name="torso"'), ["repeated name 'torso'"]),
    ("unsupported-element", ('<body name="leg"', '<composite type="rope"/><body name="leg"'),
     ["unrecognized element", "composite"]),
    ("world-joint", ('<worldbody>', '<worldbody><joint name="j"/>'), ["World body cannot have joints"]),
    ("not-mjcf", ('<mujoco model="m">', '<robot name="m">', '</mujoco>', '</robot>'), ["expected <mujoco>"]),
    ("malformed", ('</mujoco>', ''), ["MuJoCo's compiler", "XML"]),
    ("equality-tendon", ('</worldbody>', '</worldbody><tendon><fixed name="t1"><joint joint="hip" coef="1"/></fixed>'
                                         '<fixed name="t2"><joint joint="knee" coef="1"/></fixed></tendon><equality>'
                                         '<tendon tendon1="t1" tendon2="t2"/></equality>'),
     ["<equality> number 0", "a tendon equality (joint, connect and weld only)"]),
    ("tendon-armature", ('</worldbody>', '</worldbody><tendon><fixed name="t" armature="3"><joint joint="hip" '
                                         'coef="1"/></fixed></tendon>'), ["<tendon name='t'>", "attribute armature"]),
    ("actuator-dynamics", ('</worldbody>', '</worldbody><actuator><general joint="hip" dyntype="user"/></actuator>'),
     ["actuator", "dyntype='user'", "activation dynamics"]),
    ("body-transmission", ('</worldbody>', '</worldbody><actuator><adhesion body="leg" ctrlrange="0 1"/></actuator>'),
     ["actuator", "body transmission"]),
    ("fluid-wind", ('<compiler angle="radian"/>', '<compiler angle="radian"/><option density="1.2" wind="nan 0 0"/>'),
     ['<option wind="nan 0.0 0.0">', "fluid forces need finite numbers"]),
]


@pytest.mark.parametrize("subs,fragments", [c[1:] for c in MJCF_ERRORS], ids=[c[0] for c in MJCF_ERRORS])
def test_mjcf_errors_name_the_file_and_element(tmp_path: Path, subs: tuple, fragments: list[str]) -> None:
    path = write(tmp_path, "model.xml", _apply(MJCF_OK, subs))
    with pytest.raises(ModelError) as exc:
        load_mjcf(path)
    assert_names(exc, path, *fragments)


def test_mjcf_missing_file_or_include(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing.xml"):
        load_mjcf(tmp_path / "nothing.xml")
    path = write(tmp_path, "model.xml", MJCF_OK.replace("<worldbody>", '<include file="parts.xml"/><worldbody>'))
    with pytest.raises(FileNotFoundError, match="parts.xml"):
        load_mjcf(path)


def test_mjcf_ball_and_free_joints_are_mujocos_quaternions(rng: np.random.Generator) -> None:
    """load_mjcf's default (quaternions=True): MuJoCo's own coordinates up to the quaternion order (MuJoCo
    (w, x, y, z), ours (x, y, z, w)) and the free joint's linear velocity (MuJoCo: world frame, ours:
    body frame, v_mj = T v with T = blockdiag(R_root, I)): M = T^T M_mj T and h = T^T (M_mj Tdot v + bias)."""
    mj = _mujoco()
    ours = load_mjcf(DATA / "tree_free_ball.xml")
    m = mj.MjModel.from_xml_path(str(DATA / "tree_free_ball.xml"))
    d = mj.MjData(m)
    assert (ours.nq, ours.nv) == (m.nq, m.nv) == (12, 10)
    assert [j.type.value for j in ours.joints] == ["free", "ball", "revolute", "fixed"]
    for _ in range(3):
        qr, qs = (x / np.linalg.norm(x) for x in rng.normal(size=(2, 4)))      # (x, y, z, w)
        p, elbow = rng.uniform(-1, 1, 3), rng.uniform(-1.2, 1.2, 1)
        q = np.concatenate([p, qr, qs, elbow])
        d.qpos[:] = np.concatenate([p, np.roll(qr, 1), np.roll(qs, 1), elbow])
        v = rng.uniform(-2, 2, 10)
        x, y, z, w = qr
        R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                      [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                      [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        T = np.eye(10)
        T[:3, :3] = R
        d.qvel[:] = T @ v
        mj.mj_forward(m, d)
        M = _full_mass_matrix(mj, m, d)
        assert rel_err(dynamics.crba(ours)(q), T.T @ M @ T) <= MUJOCO_TOL
        Tdot_v = np.zeros(10)
        Tdot_v[:3] = R @ np.cross(v[3:6], v[:3])
        h = np.array(dynamics.nonlinear_effects(ours)(q, v)).ravel()
        assert rel_err(h, T.T @ (M @ Tdot_v + d.qfrc_bias)) <= MUJOCO_TOL
    euler = load_mjcf(DATA / "tree_free_ball.xml", quaternions=False)
    assert [j.type.value for j in euler.joints] == ["floating", "spherical", "revolute", "fixed"]


def test_urdf_floating_base_is_a_free_joint_unless_asked_for_euler_angles() -> None:
    free, euler = load_urdf(DATA / "arm.urdf", floating_base=True), load_urdf(DATA / "arm.urdf", floating_base="floating")
    assert free.joint("root_joint").type.value == "free" and (free.nq, free.nv) == (10, 9)
    assert euler.joint("root_joint").type.value == "floating" and euler.nq == euler.nv == 9
    with pytest.raises(ModelError, match="floating_base must be False, True"):
        load_urdf(DATA / "arm.urdf", floating_base="quaternion")
