"""Display geometry (pbframework.display; issue 26 item 1): URDF visuals stored with the model, collision
shapes, primitives consistent with the inertia, and their triangles."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.display import (Display, MeshesMissing, Visual, VisualType, display_geometry, inertia_visuals,
                                 resolve_uri, visual_mesh)
from pbframework.model import transform
from pbframework.models import box_inertia


def test_builtin_rods_are_capsules_of_the_radius_their_inertia_gives():
    m = models.chain(3, radius=0.07, length=0.8)
    d = display_geometry(m)
    assert d.source == "inertia" and set(d.links) == {link.name for link in m.links}
    for link in m.links:
        (v,) = d.links[link.name]
        assert v.type is VisualType.CAPSULE
        np.testing.assert_allclose(v.size, (0.07, 0.4), rtol=1e-12)               # radius, half the link
        np.testing.assert_allclose(v.pose[:3, 3], (0.4, 0, 0), atol=1e-12)        # centred on the rod
        np.testing.assert_allclose(v.pose[:3, 2], (1, 0, 0), atol=1e-12)          # along it


def test_a_body_without_offset_is_the_box_of_its_principal_moments():
    inertia = box_inertia(2.0, (0.4, 0.2, 0.1))
    link = pbf.Link("b", 2.0, inertia=inertia)
    m = pbf.ArticulatedBody([link], [pbf.Joint("root", "floating", pbf.WORLD, "b")])
    (v,) = inertia_visuals(m, "b")
    assert v.type is VisualType.BOX
    half = np.asarray(v.size)
    R = v.pose[:3, :3]
    np.testing.assert_allclose(sorted(half), sorted((0.2, 0.1, 0.05)), rtol=1e-9)
    np.testing.assert_allclose(R @ box_inertia(2.0, 2 * half) @ R.T, inertia, atol=1e-12)    # same inertia


def test_collision_shapes_are_drawn_where_a_model_has_them():
    shapes = (pbf.Shape("sphere", [0.1], transform((0.5, 0, 0)), "ball"), pbf.Shape("capsule", [0.05, 0.2]))
    links = [pbf.Link("a", 1.0, com=(0.5, 0, 0), shapes=shapes), pbf.Link("b", 1.0, com=(0.5, 0, 0))]
    m = pbf.ArticulatedBody(links, [pbf.Joint("j", "revolute", "a", "b", origin=transform((1, 0, 0)))])
    d = display_geometry(m)
    assert d.source == "shapes"
    assert [(v.type, v.size) for v in d.links["a"]] == [(VisualType.SPHERE, (0.1,)), (VisualType.CAPSULE, (0.05, 0.2))]
    np.testing.assert_allclose(d.links["a"][0].pose, transform((0.5, 0, 0)))
    assert [v.type for v in d.links["b"]] == [VisualType.CAPSULE]          # no shapes: from its inertia


def test_urdf_visuals_of_merged_links_move_into_their_link(tmp_path):
    urdf = tmp_path / "r.urdf"
    inertial = '<inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial>'
    urdf.write_text(
        '<robot name="r"><material name="red"><color rgba="1 0 0 1"/></material>'
        f'<link name="a">{inertial}<visual><geometry><box size="0.2 0.4 0.6"/></geometry>'
        '<material name="red"/></visual></link>'
        f'<link name="b">{inertial}<visual><origin xyz="0 0 0.5"/><geometry><cylinder radius="0.1" length="1"/>'
        '</geometry></visual></link>'
        '<link name="tool"><visual><origin xyz="0.1 0 0"/><geometry><sphere radius="0.05"/></geometry></visual>'
        '</link>'
        '<joint name="j" type="revolute"><parent link="a"/><child link="b"/><origin xyz="0 0 1"/>'
        '<axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>'
        '<joint name="t" type="fixed"><parent link="b"/><child link="tool"/><origin xyz="0 0 1"/></joint>'
        '</robot>')
    m = pbf.load_urdf(urdf)
    assert [link.name for link in m.links] == ["a", "b"]                  # the massless tool is merged into b
    d = m.display
    assert isinstance(d, Display) and d.source == "urdf"
    (box,) = d.links["a"]
    assert box.type is VisualType.BOX and box.size == (0.1, 0.2, 0.3) and box.color == (1.0, 0.0, 0.0, 1.0)
    cyl, sphere = d.links["b"]
    assert cyl.type is VisualType.CYLINDER and cyl.size == (0.1, 0.5)
    assert sphere.type is VisualType.SPHERE
    np.testing.assert_allclose(sphere.pose, transform((0.1, 0, 1.0)), atol=1e-15)   # tool frame composed in


def test_package_uri_found_beside_an_ancestor(tmp_path, monkeypatch):
    mesh = tmp_path / "share" / "my_robot" / "meshes" / "a.stl"
    mesh.parent.mkdir(parents=True)
    mesh.write_text("solid a\nendsolid a\n")
    base = tmp_path / "share" / "my_robot" / "urdf"
    base.mkdir()
    assert resolve_uri("package://my_robot/meshes/a.stl", base) == mesh.resolve()
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(tmp_path / "share"))
    assert resolve_uri("package://my_robot/meshes/a.stl", other) == mesh.resolve()
    assert resolve_uri("meshes/a.stl", tmp_path / "share" / "my_robot") == mesh.resolve()


def test_missing_meshes_are_one_warning_when_drawn(tmp_path):
    urdf = tmp_path / "r.urdf"
    inertial = '<inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial>'
    vis = '<visual><geometry><mesh filename="package://gone/{}.stl"/></geometry></visual>'
    urdf.write_text(f'<robot name="r"><link name="a">{inertial}{vis.format("a")}</link>'
                    f'<link name="b"><inertial><mass value="1"/><origin xyz="0.5 0 0"/><inertia ixx="0.001" '
                    f'iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>{vis.format("b")}</link>'
                    '<joint name="j" type="continuous"><parent link="a"/><child link="b"/><axis xyz="0 1 0"/>'
                    '</joint></robot>')
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # loading for a simulation: no warning
        m = pbf.load_urdf(urdf)
    with pytest.warns(MeshesMissing) as caught:
        d = display_geometry(m)
    assert len(caught) == 1 and "2 mesh files not found" in str(caught[0].message)
    assert [v.type for v in d.links["b"]] == [VisualType.CAPSULE]
    assert [v.type for v in d.links["a"]] == [VisualType.BOX]


@pytest.mark.parametrize("kind,size", [(VisualType.BOX, (0.1, 0.2, 0.3)), (VisualType.SPHERE, (0.2,)),
                                       (VisualType.CYLINDER, (0.1, 0.4)), (VisualType.CAPSULE, (0.1, 0.4))])
def test_primitives_tessellate_inside_their_bounds(kind, size):
    T = transform((1.0, 2.0, 3.0), (0.3, 0.2, 0.1))
    V, F = visual_mesh(Visual(kind, T, size), segments=24)
    assert F.min() >= 0 and F.max() < len(V) and len(F) >= 12
    local = (V - T[:3, 3]) @ T[:3, :3]
    r, half = size[0], size[-1]
    extent = {VisualType.BOX: np.asarray(size), VisualType.SPHERE: np.full(3, r),
              VisualType.CYLINDER: np.array([r, r, half]), VisualType.CAPSULE: np.array([r, r, half + r])}[kind]
    np.testing.assert_allclose(np.abs(local).max(axis=0), extent, rtol=1e-12)


def test_visuals_of_a_dropped_base_are_fixed_to_the_world(tmp_path):
    urdf = tmp_path / "r.urdf"
    urdf.write_text(
        '<robot name="r"><link name="world"/>'
        '<link name="base"><visual><geometry><box size="1 1 0.1"/></geometry></visual></link>'
        '<link name="arm"><inertial><mass value="1"/><origin xyz="0 0 0.5"/><inertia ixx="0.1" iyy="0.1" '
        'izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>'
        '<joint name="fix" type="fixed"><parent link="world"/><child link="base"/><origin xyz="0 0 2"/></joint>'
        '<joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 1 0"/>'
        '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>')
    m = pbf.load_urdf(urdf)
    assert [link.name for link in m.links] == ["arm"]                   # the massless base is dropped
    (plate,) = m.display.world
    assert plate.type is VisualType.BOX
    np.testing.assert_allclose(plate.pose, transform((0, 0, 2)), atol=1e-15)
    assert m.display.links["arm"] == ()
    from pbframework.render import render

    tr = pbf.Simulator(m, "pbad", order=2, dt=0.05).rollout(np.array([0.5]), np.zeros(1), 0.1)
    assert render(tr, tmp_path / "r.gif", model=m, fps=10)["frames"] == 2      # world visuals drawn, unmoved
