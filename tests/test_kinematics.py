"""Forward kinematics: analytic configurations, joint conventions, and Jacobians against finite differences."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework import kinematics as K
from pbframework.models import chain

from _fd import fd_jacobian

JAC_TOL = 1e-7  # absolute, central differences with h = 1e-6 on O(1) quantities


def test_straight_chain_positions():
    m = chain(4)
    T = np.array(K.forward_kinematics(m)(np.zeros(m.nq)))
    for i in range(4):
        np.testing.assert_allclose(T[:, 4 * i:4 * i + 4][:3, 3], [i, 0, 0], atol=1e-15)


def test_ball2_is_y_then_z():
    m = chain(1)
    a, b = 0.4, -0.7
    R = np.array(K.link_transform(m, "link0")(np.array([a, b])))[:3, :3]
    Ry = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
    Rz = np.array([[np.cos(b), -np.sin(b), 0], [np.sin(b), np.cos(b), 0], [0, 0, 1]])
    np.testing.assert_allclose(R, Ry @ Rz, atol=1e-15)


def test_floating_is_translation_then_xyz():
    m = pbf.models.box()
    q = np.array([1.0, 2.0, 3.0, 0.3, -0.2, 0.5])
    T = np.array(K.link_transform(m, "box")(q))
    c, s = np.cos, np.sin
    Rx = np.array([[1, 0, 0], [0, c(0.3), -s(0.3)], [0, s(0.3), c(0.3)]])
    Ry = np.array([[c(-0.2), 0, s(-0.2)], [0, 1, 0], [-s(-0.2), 0, c(-0.2)]])
    Rz = np.array([[c(0.5), -s(0.5), 0], [s(0.5), c(0.5), 0], [0, 0, 1]])
    np.testing.assert_allclose(T[:3, :3], Rx @ Ry @ Rz, atol=1e-15)
    np.testing.assert_allclose(T[:3, 3], [1, 2, 3])


def test_fixed_joints_are_merged_but_frames_kept():
    links = [pbf.Link("base", 1.0), pbf.Link("arm", 2.0, com=(0.5, 0, 0)), pbf.Link("tool", 0.5)]
    joints = [pbf.Joint("hinge", "revolute", "base", "arm", axis=(0, 0, 1)),
              pbf.Joint("weld", "fixed", "arm", "tool", origin=pbf.transform((1, 0, 0)))]
    m = pbf.ArticulatedBody(links, joints)
    assert m.nq == 1
    tree = K.element_tree(m)
    assert len(tree.elements) == 1 and tree.elements[0].mass == pytest.approx(2.5)
    T = np.array(K.link_transform(m, "tool")(np.array([np.pi / 2])))
    np.testing.assert_allclose(T[:3, 3], [0, 1, 0], atol=1e-15)


@pytest.mark.parametrize("builder", [lambda: chain(5), pbf.models.spider, pbf.models.swimmer])
def test_point_jacobian_matches_finite_differences(builder, rng):
    m = builder()
    for link in (m.links[-1].name, m.links[len(m.links) // 2].name):
        X, J = K.point_position(m, link), K.point_jacobian(m, link)
        for _ in range(3):
            q, x = rng.normal(size=m.nq), rng.normal(size=3)
            num = fd_jacobian(lambda qq: np.array(X(qq, x)), q)
            np.testing.assert_allclose(np.array(J(q, x)), num, atol=JAC_TOL)


def test_contact_positions_and_com(rng):
    m = pbf.models.spider()
    q = rng.normal(size=m.nq)
    P = np.array(K.contact_positions(m)(q))
    assert P.shape == (3, m.n_contacts)
    i, p = m.contact_points[-1]
    np.testing.assert_allclose(P[:, -1], np.array(K.point_position(m, m.links[i].name)(q, p)).ravel())
    c = np.array(K.center_of_mass(m)(q)).ravel()
    manual = sum(x.mass * np.array(K.point_position(m, x.name)(q, x.com)).ravel() for x in m.links)
    np.testing.assert_allclose(c, manual / m.total_mass, atol=1e-14)


def test_functions_are_cached_on_the_model():
    m = chain(3)
    assert K.forward_kinematics(m) is K.forward_kinematics(m)
    assert isinstance(K.forward_kinematics(m), ca.Function)
