"""Contact geometry (pbframework.geometry): obstacles, depths and normals, contact points from files and
from sampled shapes, the symbolic function of a model.

- unit tests against hand-computed values: plane, tilted plane, box (inside, outside a face, an edge, a
  corner; rotated), the union of obstacles, the softplus depth converging to the exact one;
- reference tests: every derivative against central finite differences (tests/_fd.py) at seeded points;
- the loaders' collision shapes (URDF ``<collision>``, MJCF ``<geom>``) from small files, sampled contact
  points whose number grows with density, a model on a ``free`` joint (nq != nv);
- bad input, each one clear line.
"""

from __future__ import annotations

import math

import casadi as ca
import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.geometry import (Box, Plane, Union, contact_geometry, depth, sample_contact_points, sample_surface,
                                  with_contact_points)
from pbframework.io import load_mjcf, load_urdf
from pbframework.io.mjcf import UnsupportedGeoms
from pbframework.kinematics import contact_positions
from pbframework.lie import q_integrate
from pbframework.model import WORLD, Joint, Link, ModelError, Shape, transform

from _fd import fd_jacobian

EXACT = 1e-12
"""Closed-form quantities (distances, normals, sampled coordinates)."""

FD_TOL = 1e-6
"""Derivatives against central differences (h = 1e-6), relative to max(1, |J|)."""


def _eval(obstacle, points, smoothing=None):
    """(phi, n) of the (3 x k) ``points``; with ``smoothing`` also the depth."""
    P = ca.SX.sym("P", 3, np.asarray(points).shape[1])
    outs = [obstacle.signed_distance(P), obstacle.normal_at(P)]
    if smoothing is not None:
        outs.append(depth(obstacle, P, smoothing))
    return [np.asarray(v) for v in ca.Function("f", [P], outs)(np.asarray(points, float))]


def _col(*p):
    return np.array(p, float).reshape(3, 1)


# -- planes -------------------------------------------------------------------------------------------------

def test_ground_plane_depth_and_normal():
    phi, n, d = _eval(Plane(), np.array([[0.3, -1.0, 0.25], [0.0, 2.0, -0.04]]).T, smoothing=0.0)
    assert np.allclose(phi, [[0.25, -0.04]], atol=EXACT) and np.allclose(d, [[0.0, 0.04]], atol=EXACT)
    assert np.allclose(n, [[0, 0], [0, 0], [1, 1]], atol=EXACT)


def test_tilted_plane_through_a_point():
    a = 0.3
    normal = np.array([-math.sin(a), 0.0, math.cos(a)])
    point = np.array([1.0, 2.0, 0.5])
    plane = Plane(3.0 * normal, point=point)               # any length: normalised
    assert plane.offset == pytest.approx(normal @ point, abs=EXACT)
    below = point - 0.07 * normal + np.cross(normal, [0, 1, 0])   # 7 cm inside, moved along the plane
    phi, n, d = _eval(plane, below.reshape(3, 1), smoothing=0.0)
    assert phi[0, 0] == pytest.approx(-0.07, abs=EXACT) and d[0, 0] == pytest.approx(0.07, abs=EXACT)
    assert np.allclose(n[:, 0], normal, atol=EXACT)
    assert Plane(normal, offset=plane.offset).offset == plane.offset


# -- boxes --------------------------------------------------------------------------------------------------

BOX = Box((1.0, 0.0, 0.5), (0.5, 1.0, 0.25))
"""A box 1 x 2 x 0.5 m centred at (1, 0, 0.5): x in [0.5, 1.5], y in [-1, 1], z in [0.25, 0.75]."""


@pytest.mark.parametrize("point, phi, normal", [
    ((1.0, 0.0, 0.7), -0.05, (0, 0, 1)),                          # inside, near the top face
    ((0.6, 0.2, 0.5), -0.1, (-1, 0, 0)),                          # inside, near the -x face
    ((1.0, -0.95, 0.5), -0.05, (0, -1, 0)),                       # inside, near the -y face
    ((1.0, 0.0, 0.9), 0.15, (0, 0, 1)),                           # above the top face
    ((1.8, 0.0, 1.15), math.hypot(0.3, 0.4), (0.6, 0, 0.8)),      # outside the +x / top edge
    ((1.8, 1.2, 0.95), math.sqrt(0.09 + 0.04 + 0.04), np.array([0.3, 0.2, 0.2]) / math.sqrt(0.17)),  # corner
    ((1.5, 0.3, 0.4), 0.0, (1, 0, 0)),                            # on the +x face
])
def test_box_signed_distance_and_normal_by_hand(point, phi, normal):
    got_phi, got_n = _eval(BOX, _col(*point))
    assert got_phi[0, 0] == pytest.approx(phi, abs=EXACT)
    assert np.allclose(got_n[:, 0], normal, atol=EXACT)


def test_rotated_box_is_the_box_turned():
    R = transform(rpy=(0.2, -0.4, 0.9))[:3, :3]
    c = np.array([0.3, -0.2, 0.1])
    turned = Box(c, BOX.half_extents, R)
    rng = np.random.default_rng(5)
    local = rng.uniform(-1.5, 1.5, size=(3, 20))                  # points about the box, in its frame
    phi0, n0 = _eval(Box((0, 0, 0), BOX.half_extents), local)
    phi, n = _eval(turned, R @ local + c[:, None])
    assert np.allclose(phi, phi0, atol=EXACT) and np.allclose(n, R @ n0, atol=EXACT)


# -- depth, smoothing, unions --------------------------------------------------------------------------------

def test_smoothed_depth_converges_to_the_hard_depth():
    z = np.linspace(-0.02, 0.02, 41).reshape(1, -1)
    pts = np.vstack([np.zeros_like(z), np.zeros_like(z), z])
    hard = np.maximum(-z, 0)
    errors = []
    for eps in (1e-2, 1e-3, 1e-4, 1e-5):
        d = _eval(Plane(), pts, smoothing=eps)[2]
        assert np.all(d >= hard - EXACT)                          # never below the hard depth
        errors.append(np.abs(d - hard).max())
        assert errors[-1] <= eps * math.log(2) + EXACT            # the largest gap is at the surface
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-5


def test_union_takes_the_deepest_obstacle():
    ground, ledge = Plane(), Box((1.0, 0.0, 0.0), (0.5, 0.5, 0.2))   # a block half buried in the ground
    union = Union([ground, ledge])
    pts = np.array([[0.0, 0.0, -0.05],                            # in the ground only
                    [1.0, 0.0, 0.15],                             # in the block (0.05 below its top)
                    [1.0, 0.0, -0.15],                            # in both: ground 0.15 deep, block 0.05
                    [1.0, 0.0, 0.5]]).T                           # above the block: 0.3 away
    phi, n = _eval(union, pts)
    assert np.allclose(phi, [[-0.05, -0.05, -0.15, 0.3]], atol=EXACT)
    assert np.allclose(n, [[0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], atol=EXACT)
    side = _col(1.45, 0.0, 0.1)                                   # in the block, nearest its +x face
    assert np.allclose(_eval(union, side)[1][:, 0], [1, 0, 0], atol=EXACT)
    smooth_errors = []
    for eps in (1e-2, 1e-3, 1e-4):
        s_phi, s_n = _eval(Union([ground, ledge], smoothing=eps), pts)
        assert np.all(s_phi <= phi + EXACT) and np.allclose(np.linalg.norm(s_n, axis=0), 1.0, atol=EXACT)
        smooth_errors.append(np.abs(s_phi - phi).max())
        assert smooth_errors[-1] <= eps * math.log(2) + EXACT
    assert smooth_errors == sorted(smooth_errors, reverse=True)


# -- derivatives ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("obstacle", [
    Plane((-0.3, 0.2, 1.0), offset=0.1),
    BOX,
    Union([Plane(), BOX], smoothing=0.05),
], ids=["tilted_plane", "box", "smooth_union"])
def test_distance_normal_and_depth_derivatives_match_finite_differences(obstacle, rng):
    P = ca.SX.sym("P", 3)
    outs = ca.vertcat(obstacle.signed_distance(P), obstacle.normal_at(P), depth(obstacle, P, 1e-2))
    f = ca.Function("f", [P], [outs])
    J = ca.Function("J", [P], [ca.jacobian(outs, P)])
    checked = 0
    while checked < 8:
        p = BOX.centre + rng.uniform(-1.2, 1.2, size=3) * np.array([1.0, 1.5, 1.0])
        q = np.abs(p - BOX.centre) - BOX.half_extents
        if np.sort(np.abs(q))[0] < 1e-3 or (np.all(q < 0) and np.sort(-q)[1] + np.sort(q)[-1] < 1e-3):
            continue                      # a face, edge or the box's medial surface: not differentiable there
        ref = fd_jacobian(lambda x: np.asarray(f(x)), p)
        assert np.allclose(np.asarray(J(p)), ref, atol=FD_TOL * max(1.0, np.abs(ref).max()), rtol=0), p
        checked += 1


def test_contact_geometry_derivative_matches_finite_differences(rng):
    model = models.box()
    geo = contact_geometry(model, [Plane(), Box((0.0, 0.0, -0.5), (1.0, 1.0, 0.55))], smoothing=1e-3)
    q = ca.SX.sym("q", model.nq)
    d, n, phi = geo(q)
    J = ca.Function("J", [q], [ca.jacobian(ca.vertcat(ca.vec(d), ca.vec(n), ca.vec(phi)), q)])
    f = ca.Function("f", [q], [ca.vertcat(ca.vec(d), ca.vec(n), ca.vec(phi))])
    for _ in range(3):
        q0 = np.r_[0.1, -0.2, 0.12, 0.0, 0.0, 0.0] + rng.normal(scale=0.05, size=6)
        ref = fd_jacobian(lambda x: np.asarray(f(x)), q0)
        assert np.allclose(np.asarray(J(q0)), ref, atol=FD_TOL * max(1.0, np.abs(ref).max()), rtol=0)


# -- the symbolic function of a model -----------------------------------------------------------------------

def test_contact_geometry_of_the_box_model_on_the_ground():
    model = models.box()                                          # a 0.2 m cube, contact points at its corners
    d, n, phi = (np.asarray(v) for v in contact_geometry(model, Plane())(np.r_[0, 0, 0.1 - 2e-3, 0, 0, 0]))
    P = np.asarray(contact_positions(model)(np.r_[0, 0, 0.1 - 2e-3, 0, 0, 0]))
    bottom = P[2] < 0
    assert bottom.sum() == 4
    assert np.allclose(d[0, bottom], 2e-3, atol=EXACT) and np.all(d[0, ~bottom] == 0.0)
    assert np.allclose(phi, P[2:3], atol=EXACT) and np.allclose(n, np.array([[0], [0], [1]]), atol=EXACT)


def _free_body(contact_points) -> pbf.ArticulatedBody:
    link = Link("body", 1.0, inertia=np.diag([0.01, 0.02, 0.03]), contact_points=contact_points)
    return pbf.ArticulatedBody([link], [Joint("base", "free", WORLD, "body")], name="free_body")


def test_contact_geometry_on_a_free_joint(rng):
    model = _free_body([(0.1, 0.0, -0.05), (-0.1, 0.2, -0.05), (0.0, 0.0, 0.3)])
    assert (model.nq, model.nv) == (7, 6)
    geo = contact_geometry(model, Plane())
    q = model.neutral()
    q[2] = 0.04                                                   # the base 4 cm up: two points 1 cm deep
    d, n, phi = (np.asarray(v) for v in geo(q))
    assert np.allclose(phi, [[-0.01, -0.01, 0.34]], atol=EXACT) and np.allclose(d, [[0.01, 0.01, 0.0]], atol=EXACT)
    # turned a quarter about x (quaternion (sin 45, 0, 0, cos 45)): z of a body point (x, y, z) becomes y
    q[3:7] = (math.sin(math.pi / 4), 0.0, 0.0, math.cos(math.pi / 4))
    phi = np.asarray(geo(q)[2])
    assert np.allclose(phi, [[0.04, 0.24, 0.04]], atol=EXACT)
    # the derivative along the tangent, at a random unit quaternion, against differences of q (+) e
    q[3:7] = rng.normal(size=4)
    q[3:7] /= np.linalg.norm(q[3:7])
    q[2] = 0.0
    e = ca.SX.sym("e", model.nv)
    qe = q_integrate(model)(q, e)
    smooth = contact_geometry(model, Plane(), smoothing=1e-2)
    out = ca.vertcat(*[ca.vec(v) for v in smooth(qe)])
    J = np.asarray(ca.Function("J", [e], [ca.jacobian(out, e)])(np.zeros(6)))
    ref = fd_jacobian(lambda x: np.asarray(ca.Function("f", [e], [out])(x)), np.zeros(6))
    assert np.abs(J).max() > 0.1
    assert np.allclose(J, ref, atol=FD_TOL * max(1.0, np.abs(ref).max()), rtol=0)


# -- contact points from files and from shapes ----------------------------------------------------------------

MJCF_GEOMS = """
<mujoco model="geoms">
  <compiler angle="radian" inertiafromgeom="false"/>
  <default><geom type="box" size="0.05 0.05 0.05"/></default>
  <asset><mesh name="m" vertex="0 0 0  0.1 0 0  0 0.1 0  0 0 0.1"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="torso" pos="0 0 1">
      <freejoint/>
      <inertial pos="0 0 0" mass="2" diaginertia="0.1 0.1 0.1"/>
      <geom name="ball" type="sphere" size="0.1" pos="0 0 0.3"/>
      <geom name="slab" size="0.2 0.1 0.05" pos="0.1 0 0" euler="0 0 1.5707963267948966"/>
      <geom name="shell" type="mesh" mesh="m"/>
      <geom name="look" type="sphere" size="0.5" contype="0" conaffinity="0"/>
      <frame pos="0 0 -0.2">
        <geom name="default_box"/>
      </frame>
      <body name="arm" pos="0.3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" pos="0.1 0 0"/>
        <inertial pos="0 0 0" mass="0.5" diaginertia="0.01 0.01 0.01"/>
        <geom name="rod" type="capsule" size="0.02" fromto="0 0 0 0.4 0 0"/>
        <body name="hand" pos="0.4 0 0">
          <geom name="palm" type="sphere" size="0.03"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_mjcf_sphere_box_and_capsule_geoms_become_link_shapes(tmp_path):
    path = tmp_path / "geoms.xml"
    path.write_text(MJCF_GEOMS)
    with pytest.warns(UnsupportedGeoms, match=r"geoms.xml: 1 colliding geom.*mesh 'shell' of body 'torso'"):
        model = load_mjcf(path)
    assert model.obstacles[0].normal.tolist() == [0, 0, 1] and model.obstacles[0].offset == 0   # the floor
    torso = model.link("torso")
    assert [s.name for s in torso.shapes] == ["ball", "slab", "default_box"]      # mesh and visual-only not shapes
    ball, slab, dflt = torso.shapes
    assert ball.type.value == "sphere" and np.allclose(ball.size, [0.1]) and np.allclose(ball.pose[:3, 3], [0, 0, 0.3])
    assert slab.type.value == "box" and np.allclose(slab.size, [0.2, 0.1, 0.05])
    assert np.allclose(slab.pose[:3, :3] @ [1, 0, 0], [0, 1, 0], atol=EXACT)       # euler: a quarter turn about z
    assert np.allclose(dflt.size, [0.05] * 3) and np.allclose(dflt.pose[:3, 3], [0, 0, -0.2])  # default class, frame
    arm = model.link("arm")                       # the link frame sits at the hinge anchor, 0.1 along the body's x
    rod, = arm.shapes
    assert rod.type.value == "capsule" and np.allclose(rod.size, [0.02, 0.2])
    assert np.allclose(rod.pose[:3, 3], [0.1, 0, 0], atol=EXACT)
    assert np.allclose(np.abs(rod.pose[:3, 2]), [1, 0, 0], atol=EXACT)       # along x (MuJoCo points it to -x)
    palm, = model.link("hand").shapes             # the massless hand is a frame welded to the arm
    assert palm.name == "palm" and np.allclose(palm.pose[:3, 3], [0, 0, 0], atol=EXACT)
    assert model.joint("hand_weld").origin[:3, 3].tolist() == pytest.approx([0.3, 0, 0], abs=EXACT)
    assert [x.name for x in model.links] == ["torso", "arm", "hand"] and model.n_contacts == 0   # no points yet


URDF_COLLISIONS = """<robot name="bot">
  <link name="base">
    <inertial><mass value="2"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial>
    <collision name="hull"><origin xyz="0 0 0.1" rpy="0 0 1.5707963267948966"/>
      <geometry><box size="0.4 0.2 0.1"/></geometry></collision>
    <collision><geometry><mesh filename="package://bot/hull.stl"/></geometry></collision>
    <visual><geometry><sphere radius="9"/></geometry></visual>
  </link>
  <link name="wheel">
    <inertial><mass value="0.5"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
    <collision><origin xyz="0 0 0"/><geometry><sphere radius="0.05"/></geometry></collision>
  </link>
  <link name="bumper">
    <collision name="nose"><origin xyz="0.02 0 0"/><geometry><sphere radius="0.01"/></geometry></collision>
  </link>
  <joint name="axle" type="continuous"><parent link="base"/><child link="wheel"/>
    <origin xyz="0.2 0 0"/><axis xyz="0 1 0"/></joint>
  <joint name="mount" type="fixed"><parent link="base"/><child link="bumper"/><origin xyz="-0.3 0 0"/></joint>
</robot>
"""


def test_urdf_sphere_and_box_collisions_become_link_shapes(tmp_path):
    path = tmp_path / "bot.urdf"
    path.write_text(URDF_COLLISIONS)
    model = load_urdf(path, floating_base=True)
    base = model.link("base")
    assert [s.name for s in base.shapes] == ["hull", "nose"]       # mesh and visual ignored; massless bumper merged
    hull, nose = base.shapes
    assert hull.type.value == "box" and np.allclose(hull.size, [0.2, 0.1, 0.05])   # half the URDF's edge lengths
    assert np.allclose(hull.pose[:3, 3], [0, 0, 0.1]) and np.allclose(hull.pose[:3, 0], [0, 1, 0], atol=EXACT)
    assert nose.type.value == "sphere" and np.allclose(nose.pose[:3, 3], [-0.28, 0, 0], atol=EXACT)
    assert np.allclose(model.link("wheel").shapes[0].size, [0.05])
    # sampled at the coarsest: the hull's 8 corners, the nose's and the wheel's 6 axis points
    sampled = sample_contact_points(model)
    assert model.n_contacts == 0 and sampled.n_contacts == 8 + 6 + 6
    q = sampled.neutral()
    q[2] = 0.3
    phi = np.asarray(contact_geometry(sampled, Plane())(q)[2]).ravel()
    assert np.sort(phi)[0] == pytest.approx(0.3 - 0.05, abs=EXACT)   # the wheel's lowest point
    assert np.sort(phi[:8]) == pytest.approx([0.35] * 4 + [0.45] * 4, abs=EXACT)   # the hull's corners first
    assert sampled.nq == 8 and sampled.nv == 7                       # a free base and the wheel


@pytest.mark.parametrize("shape", [
    Shape("box", (0.3, 0.1, 0.05), transform((0.1, 0.2, 0.3), (0.3, 0.2, 0.1))),
    Shape("sphere", (0.1,), transform((0.0, 0.0, 0.5))),
    Shape("capsule", (0.05, 0.2), transform(rpy=(0.0, 1.0, 0.0))),
], ids=["box", "sphere", "capsule"])
def test_sampled_points_lie_on_the_surface_and_grow_with_density(shape):
    counts = []
    for spacing in (None, 0.2, 0.1, 0.05, 0.02):
        pts = sample_surface(shape, spacing)
        local = (pts - shape.pose[:3, 3]) @ shape.pose[:3, :3]
        if shape.type.value == "box":
            q = np.abs(local) / shape.size
            assert np.allclose(q.max(axis=1), 1.0, atol=EXACT) and np.all(q <= 1 + EXACT)
        else:
            half = shape.size[1] if shape.type.value == "capsule" else 0.0
            axis = np.clip(local[:, 2], -half, half)
            r = np.linalg.norm(local - np.outer(axis, [0, 0, 1]), axis=1)
            assert np.allclose(r, shape.size[0], atol=EXACT)
        assert len({tuple(np.round(p, 12)) for p in pts}) == len(pts)     # no point twice
        counts.append(len(pts))
    assert counts == sorted(counts) and counts[-1] > 5 * counts[0], counts
    if shape.type.value == "box":
        assert counts[0] == 8
    if shape.type.value == "sphere":
        assert counts[0] == 6


def test_sample_contact_points_keeps_or_replaces_and_names_links():
    link = Link("block", 1.0, contact_points=[(0.0, 0.0, 0.0)], shapes=(Shape("box", (0.1, 0.1, 0.1)),))
    model = pbf.ArticulatedBody([link], [Joint("base", "free", WORLD, "block")], name="block")
    assert sample_contact_points(model).n_contacts == 1 + 8
    assert sample_contact_points(model, keep=False).n_contacts == 8
    fine = sample_contact_points(model, 0.05, links=["block"], keep=False)
    assert fine.n_contacts == 5**3 - 3**3
    more = with_contact_points(fine, {"block": [(0, 0, 0.2)]})
    assert more.n_contacts == fine.n_contacts + 1 and more.nq == 7
    assert with_contact_points(more, {"block": [(0, 0, 0.2)]}, replace=True).n_contacts == 1


# -- bad input ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make, message", [
    (lambda: Plane((0, 0, 0)), r"plane: normal must be 3 finite numbers, not all zero, got \(0, 0, 0\)"),
    (lambda: Plane((0, 0, 1), 0.0, point=(0, 0, 0)), "plane: give offset or point, not both"),
    (lambda: Box((0, 0, 0), (0.1, 0.0, 0.2)), r"box: half_extents must all be > 0, got \(0.1, 0.0, 0.2\)"),
    (lambda: Box((0, 0, 0), (0.1, -1, 0.2)), "box: half_extents must all be > 0"),
    (lambda: Box((0, 0, 0), (1, 1, 1), np.diag([1.0, 1.0, -1.0])), "box: rotation must be a proper 3x3 rotation"),
    (lambda: Union([]), "union: needs at least one obstacle"),
    (lambda: Union([Plane()], smoothing=-1.0), "union: smoothing must be a finite number >= 0"),
    (lambda: with_contact_points(models.box(), {"lid": [(0, 0, 0)]}),
     "with_contact_points: model 'box' has no link 'lid' \\(links: box\\)"),
    (lambda: sample_contact_points(models.box()), "sample_contact_points: model 'box' has no collision shapes"),
    (lambda: sample_surface(Shape("sphere", (0.1,)), 0.0), "sample_surface: spacing must be a number > 0"),
    (lambda: contact_geometry(models.swimmer(), Plane()), "contact_geometry: model 'swimmer4' has no contact points"),
    (lambda: Shape("sphere", (-0.1,), name="s"), r"shape 's': sphere radius must be > 0"),
    (lambda: Shape("cylinder", (0.1, 0.2)), "shape: unsupported type 'cylinder' \\(supported: sphere, box, capsule\\)"),
])
def test_bad_input_is_one_clear_line(make, message):
    with pytest.raises(ValueError, match=message) as exc:
        make()
    assert "\n" not in str(exc.value)


def test_a_bad_collision_shape_in_a_file_names_the_file_and_link(tmp_path):
    path = tmp_path / "bad.urdf"
    path.write_text(URDF_COLLISIONS.replace('<sphere radius="0.05"/>', '<sphere radius="0"/>'))
    with pytest.raises(ModelError, match=r"bad.urdf: link 'wheel' <collision> number 1: .*radius must be > 0"):
        load_urdf(path)
    path = tmp_path / "bad.xml"
    path.write_text(MJCF_GEOMS.replace('size="0.2 0.1 0.05"', 'size="0.2 -0.1 0.05"'))
    with pytest.raises(ModelError, match=r"bad.xml: MuJoCo's compiler: .*slab"):
        load_mjcf(path)
