"""Unit tests of the model stage: construction, coordinates, builders, and every validation error."""

from __future__ import annotations

import numpy as np
import pytest

import pbframework as pbf
from pbframework import WORLD, ArticulatedBody, Joint, Link, ModelError, transform
from pbframework.models import chain, chain_energy_scale, chain_q0


def _two_links(**joint_kw):
    links = [Link("base", 1.0), Link("arm", 1.0)]
    kw = dict(name="j", type="revolute", parent="base", child="arm")
    kw.update(joint_kw)
    return ArticulatedBody(links, [Joint(**kw)])


def test_chain_matches_design_md():
    m = chain(10)
    assert m.nq == 20
    link = m.links[0]
    assert link.mass == 1.0
    np.testing.assert_allclose(link.com, [0.5, 0, 0])
    np.testing.assert_allclose(np.diag(link.inertia), [0.00125, 0.083958, 0.083958], atol=5e-7)
    assert m.dof_names[:2] == ("joint0:ry", "joint0:rz")
    np.testing.assert_allclose(m.joints[1].origin[:3, 3], [1, 0, 0])
    np.testing.assert_allclose(m.gravity, [0, 0, -9.81])
    q0 = chain_q0(m)
    np.testing.assert_allclose(q0[0::2], 0.0)
    np.testing.assert_allclose(q0[1::2], 0.3)
    # M g sum_i (i + 0.5) L for 10 links of 1 kg, 1 m
    assert chain_energy_scale(m) == pytest.approx(9.81 * sum(i + 0.5 for i in range(10)))


def test_dof_names_per_joint_type():
    links = [Link(n, 1.0) for n in "abcdef"]
    joints = [
        Joint("free", "floating", WORLD, "a"),
        Joint("hinge", "continuous", "a", "b"),
        Joint("slide", "prismatic", "b", "c", axis=(1, 0, 0)),
        Joint("ball", "ball2", "c", "d"),
        Joint("sph", "spherical", "d", "e"),
        Joint("weld", "fixed", "e", "f"),
    ]
    m = ArticulatedBody(links, joints)
    assert m.dof_names == ("free:x", "free:y", "free:z", "free:rx", "free:ry", "free:rz", "hinge", "slide",
                           "ball:ry", "ball:rz", "sph:rx", "sph:ry", "sph:rz")
    assert m.nq == 13
    assert m.joint("hinge").type is pbf.JointType.REVOLUTE
    assert m.has_floating_base
    assert m.joint_q_index["ball"] == slice(8, 10)


def test_tree_is_ordered_topologically():
    links = [Link(n, 1.0) for n in ("leaf", "root", "mid")]
    joints = [Joint("j2", "revolute", "mid", "leaf"), Joint("j1", "revolute", "root", "mid")]
    m = ArticulatedBody(links, joints)
    assert [j.name for j in m.joints] == ["j1", "j2"]
    assert m.base == "root"
    assert [x.name for x in m.links] == ["root", "mid", "leaf"]


def test_builders_sizes():
    assert pbf.models.swimmer().nq == 9
    sp = pbf.models.spider()
    assert sp.nq == 18
    assert sp.n_contacts == 8 + 8
    assert pbf.models.box().nq == 6 and pbf.models.box().n_contacts == 8
    assert chain(5, joint="revolute").nq == 5


@pytest.mark.parametrize("mass", [0.0, -1.0, float("nan")])
def test_bad_mass_names_link(mass):
    with pytest.raises(ModelError, match=r"link 'shin'.*mass"):
        Link("shin", mass)


def test_non_symmetric_inertia_names_link():
    with pytest.raises(ModelError, match=r"link 'shin'.*not symmetric"):
        Link("shin", 1.0, inertia=[[1, 0.5, 0], [0, 1, 0], [0, 0, 1]])


def test_non_positive_definite_inertia_names_link():
    with pytest.raises(ModelError, match=r"link 'shin'.*not positive definite"):
        Link("shin", 1.0, inertia=[1.0, 1.0, -0.1])


def test_triangle_inequality_names_link():
    with pytest.raises(ModelError, match=r"link 'shin'.*triangle inequality"):
        Link("shin", 1.0, inertia=[1.0, 1.0, 3.0])


def test_unknown_parent_names_joint():
    with pytest.raises(ModelError, match=r"joint 'knee' of link 'arm'.*unknown parent link 'thigh'"):
        _two_links(name="knee", parent="thigh")


def test_unknown_child_names_joint():
    with pytest.raises(ModelError, match=r"joint 'knee'.*unknown child link 'calf'"):
        _two_links(name="knee", child="calf")


def test_cycle_names_links():
    links = [Link(n, 1.0) for n in ("base", "a", "b")]
    joints = [Joint("ja", "revolute", "b", "a"), Joint("jb", "revolute", "a", "b")]
    with pytest.raises(ModelError, match=r"cycle.*'?a'?.*b"):
        ArticulatedBody(links, joints)


def test_duplicate_link_and_joint_names():
    with pytest.raises(ModelError, match=r"duplicate link name 'a'"):
        ArticulatedBody([Link("a", 1.0), Link("a", 2.0)])
    links = [Link(n, 1.0) for n in ("base", "a", "b")]
    with pytest.raises(ModelError, match=r"duplicate joint name 'j'"):
        ArticulatedBody(links, [Joint("j", "revolute", "base", "a"), Joint("j", "revolute", "a", "b")])


def test_unsupported_joint_type_lists_supported():
    with pytest.raises(ModelError, match=r"joint 'knee' of link 'shin': unsupported type 'planar' \(supported: "
                                         r"fixed, revolute, prismatic, ball2, spherical, floating, ball, free, "
                                         r"continuous\)"):
        Joint("knee", "planar", "thigh", "shin")


def test_two_bases_and_two_parents():
    with pytest.raises(ModelError, match=r"links \['a', 'b'\] have no parent joint"):
        ArticulatedBody([Link("a", 1.0), Link("b", 1.0)])
    links = [Link(n, 1.0) for n in ("base", "a", "c")]
    joints = [Joint("j1", "revolute", "base", "c"), Joint("j2", "revolute", "a", "c")]
    with pytest.raises(ModelError, match=r"link 'c' has two parent joints: 'j1' and 'j2'"):
        ArticulatedBody(links, joints)


def test_floating_joint_must_attach_to_world():
    with pytest.raises(ModelError, match=r"joint 'free'.*floating joint must have parent 'world'"):
        _two_links(name="free", type="floating")


def test_bad_axis_and_origin():
    with pytest.raises(ModelError, match=r"joint 'j'.*axis must be non-zero"):
        _two_links(axis=(0, 0, 0))
    bad = np.eye(4)
    bad[:3, :3] = 2 * np.eye(3)
    with pytest.raises(ModelError, match=r"joint 'j'.*not a proper rotation"):
        _two_links(origin=bad)


def test_check_state_errors():
    m = chain(2)
    with pytest.raises(ValueError, match=r"length nq=4.*shape \(3,\)"):
        m.check_state(np.zeros(3))
    with pytest.raises(ValueError, match=r"non-finite value nan at coordinate 'joint1:ry'"):
        m.check_state([0, 0, np.nan, 0])


def test_second_moment_of_a_link():
    link = Link("rod", 2.0, com=(0.5, 0, 0), inertia=[0.1, 0.2, 0.3])
    M = link.second_moment
    # int p p^T dm about the link origin: S_c + m c c^T, with S_c = tr(Ic)/2 I - Ic
    np.testing.assert_allclose(M[:3, :3], np.diag([0.2, 0.1, 0.0]) + 2.0 * np.diag([0.25, 0, 0]), atol=1e-15)
    np.testing.assert_allclose(M[:3, 3], [1.0, 0, 0])
    assert M[3, 3] == 2.0


def test_transform_rpy():
    T = transform((1, 2, 3), (0, 0, np.pi / 2))
    np.testing.assert_allclose(T[:3, :3] @ [1, 0, 0], [0, 1, 0], atol=1e-15)
    np.testing.assert_allclose(T[:3, 3], [1, 2, 3])


def test_balance_inertia_is_mujocos_repair():
    bad = np.diag([0.001, 0.002, 0.01])                       # 0.001 + 0.002 < 0.01
    fixed = pbf.model.balance_inertia(bad)
    np.testing.assert_allclose(fixed, np.eye(3) * 0.013 / 3, rtol=1e-14)
    Link("ok_now", 1.0, inertia=fixed)                        # accepted
    R = transform(rpy=(0.3, -0.2, 1.1))[:3, :3]               # the same body, rotated: same repair
    np.testing.assert_allclose(pbf.model.balance_inertia(R @ bad @ R.T), fixed, rtol=1e-12)
    good, negative = np.diag([0.01, 0.02, 0.025]), np.diag([-0.001, 0.01, 0.02])
    assert pbf.model.balance_inertia(good) is good            # valid tensors are left alone
    assert pbf.model.balance_inertia(negative) is negative    # a negative moment is not repaired (MuJoCo: error)


def test_default_forces_are_named_pairs():
    links, joints = [Link("a", 1.0)], []
    m = ArticulatedBody(links, joints, default_forces=["gravity", ("joint_damping", {"damping": 0.3})])
    assert m.default_forces == (("gravity", {}), ("joint_damping", {"damping": 0.3}))
    with pytest.raises(ModelError, match="default_forces entries must be force-model names or"):
        ArticulatedBody(links, joints, default_forces=[("joint_damping", 0.3)])


def test_chain_slope_starts_on_the_slope_across_it():
    """models.chain_slope: a free base, every contact point on the slope's surface, the links horizontal."""
    import pbframework as pbf
    from pbframework.kinematics import contact_positions

    model, q0, normal = pbf.models.chain_slope(4, 30.0)
    assert model.joints[0].type.value == "free" and model.n_contacts == 8
    P = np.asarray(contact_positions(model)(q0))
    assert np.allclose(np.asarray(normal) @ P, 0.0, atol=1e-12)
    assert np.allclose(P[2], P[2, 0], atol=1e-12) and np.allclose(P[0], P[0, 0], atol=1e-12)
    with pytest.raises(ModelError, match="slope_deg must lie in"):
        pbf.models.chain_slope(3, 95.0)
