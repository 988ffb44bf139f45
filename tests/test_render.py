"""Headless rendering to GIF and MP4 (pbframework.render, ``pbf render``; issue 26), with display geometry."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import pbframework as pbf
from pbframework import models
from pbframework.cli import main
from pbframework.model import ModelError
from pbframework.render import render


def _traj(n=3, duration=1.0):
    m = models.chain(n)
    return m, pbf.Simulator(m, "pbad", order=2, dt=0.05).rollout(models.chain_q0(m), np.zeros(m.nq), duration)


def test_render_writes_one_frame_per_sample_and_shows_the_motion(tmp_path):
    m, tr = _traj()
    r = render(tr, tmp_path / "c.gif", model=m, fps=10)
    im = Image.open(r["path"])
    assert r["frames"] == 11 and im.n_frames == 11
    first = np.asarray(im.convert("RGB"))
    im.seek(10)
    last = np.asarray(im.convert("RGB"))
    assert first.shape == last.shape and np.abs(first.astype(int) - last.astype(int)).sum() > 0
    assert first.std() > 0                                     # not blank


def test_pbf_render_rebuilds_the_model_from_the_file(tmp_path, capsys):
    npz, gif = tmp_path / "c.npz", tmp_path / "c.gif"
    assert main(["simulate", "chain", "--links", "2", "--dt", "0.05", "--duration", "0.5", "--out", str(npz),
                 "--no-progress"]) == 0
    assert main(["render", str(npz), "--out", str(gif), "--fps", "10"]) == 0
    assert "Animation of 6 frames" in capsys.readouterr().out and Image.open(gif).n_frames == 6


def test_bad_input_is_one_clear_line(tmp_path, capsys):
    m, tr = _traj()
    with pytest.raises(ModelError, match="has 6 coordinates but model"):
        render(tr, tmp_path / "x.gif", model=models.chain(2))
    with pytest.raises(ValueError, match=r"must be a .gif or .mp4 file"):
        render(tr, tmp_path / "x.avi", model=m)
    with pytest.raises(ModelError, match="does not say which model"):
        render(tr, tmp_path / "x.gif")
    urdf = tmp_path / "r.urdf"
    urdf.write_text('<robot name="r"><link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" '
                    'ixy="0" ixz="0" iyz="0"/></inertial></link><link name="b"><inertial><mass value="1"/>'
                    '<origin xyz="0.5 0 0"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial>'
                    '</link><joint name="j" type="continuous"><parent link="a"/><child link="b"/>'
                    '<axis xyz="0 1 0"/></joint></robot>')
    npz = tmp_path / "u.npz"
    assert main(["simulate", "--model", str(urdf), "--duration", "0.1", "--out", str(npz), "--no-progress"]) == 0
    urdf.write_text(urdf.read_text().replace('mass value="1"/><origin', 'mass value="2"/><origin'))
    assert main(["render", str(npz), "--out", str(tmp_path / "u.gif")]) == 2
    assert "changed since the run" in capsys.readouterr().err
    assert main(["render", str(tmp_path / "none.npz"), "--out", str(tmp_path / "n.gif")]) == 2


def _frames_of(path):
    """The frames of an animation, read back: Pillow for a GIF, the bundled ffmpeg for an MP4."""
    if str(path).endswith(".gif"):
        out = []
        with Image.open(path) as im:
            for k in range(im.n_frames):
                im.seek(k)
                out.append(np.asarray(im.convert("RGB")))
        return out
    import imageio_ffmpeg

    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    w, h = meta["size"]
    return [np.frombuffer(f, np.uint8).reshape(h, w, 3) for f in reader]


def test_mp4_has_one_frame_per_sample_and_shows_the_motion(tmp_path):
    pytest.importorskip("imageio_ffmpeg", reason="MP4 needs the 'render' extra")
    m, tr = _traj()
    r = render(tr, tmp_path / "c.mp4", model=m, fps=10)
    frames = _frames_of(r["path"])
    assert r["frames"] == 11 and len(frames) == 11
    assert frames[0].shape == (320, 320, 3) and frames[0].std() > 0
    assert np.abs(frames[0].astype(int) - frames[-1].astype(int)).sum() > 0


def test_mp4_without_imageio_ffmpeg_is_one_line_naming_pip(tmp_path, monkeypatch, capsys):
    import sys

    m, tr = _traj()
    npz = tr.save(tmp_path / "c.npz")
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)
    assert main(["render", str(npz), "--out", str(tmp_path / "c.mp4")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pbf: error: writing .mp4 needs the optional package 'imageio-ffmpeg': pip install "
                   "'pbframework[render]'"]


def test_camera_options_change_the_picture(tmp_path):
    npz, a, b = tmp_path / "c.npz", tmp_path / "a.gif", tmp_path / "b.gif"
    assert main(["simulate", "chain", "--links", "2", "--dt", "0.05", "--duration", "0.2", "--out", str(npz),
                 "--no-progress"]) == 0
    assert main(["render", str(npz), "--out", str(a), "--fps", "5", "--pixels", "200"]) == 0
    assert main(["render", str(npz), "--out", str(b), "--fps", "5", "--pixels", "200", "--elev", "80", "--azim",
                 "10", "--target", "0", "0", "0", "--extent", "3"]) == 0
    fa, fb = _frames_of(a), _frames_of(b)
    assert fa[0].shape == fb[0].shape == (200, 200, 3)
    assert np.abs(fa[0].astype(int) - fb[0].astype(int)).sum() > 0


def _mesh_urdf(tmp_path, mesh: str):
    urdf = tmp_path / "m.urdf"
    inertial = ('<inertial><mass value="1"/><origin xyz="0 0 -0.25"/><inertia ixx="0.02" iyy="0.02" izz="0.001" '
                'ixy="0" ixz="0" iyz="0"/></inertial>')
    urdf.write_text(f'<robot name="mesh_pendulum"><link name="base">{inertial}</link>'
                    f'<link name="arm">{inertial}<visual><origin xyz="0 0 -0.25"/><geometry>'
                    f'<mesh filename="{mesh}" scale="1 1 1"/></geometry></visual></link>'
                    '<joint name="j" type="continuous"><parent link="base"/><child link="arm"/>'
                    '<axis xyz="0 1 0"/></joint></robot>')
    return urdf


def test_urdf_mesh_is_drawn_and_a_missing_one_falls_back_with_one_warning(tmp_path):
    trimesh = pytest.importorskip("trimesh", reason="meshes need the 'render' extra")
    from pbframework.display import MeshesMissing, VisualType, display_geometry

    meshes = tmp_path / "meshes"
    meshes.mkdir()
    trimesh.creation.box(extents=(0.05, 0.05, 0.5)).export(meshes / "arm.stl")
    m = pbf.load_urdf(_mesh_urdf(tmp_path, "meshes/arm.stl"))
    vis = display_geometry(m).links["arm"]
    assert [v.type for v in vis] == [VisualType.MESH] and vis[0].mesh == (meshes / "arm.stl").resolve()
    tr = pbf.Simulator(m, "pbad", order=2, dt=0.05).rollout(np.array([1.0]), np.zeros(1), 0.4)
    frames = _frames_of(render(tr, tmp_path / "mesh.gif", model=m, fps=10)["path"])
    assert len(frames) == 5 and np.abs(frames[0].astype(int) - frames[-1].astype(int)).sum() > 0
    gone = pbf.load_urdf(_mesh_urdf(tmp_path, "package://nowhere/arm.stl"))
    with pytest.warns(MeshesMissing) as caught:
        r = render(tr, tmp_path / "gone.gif", model=gone, fps=10)
    assert len(caught) == 1 and "1 mesh file not found" in str(caught[0].message)
    assert len(_frames_of(r["path"])) == 5
    assert [v.type for v in gone.display.links["arm"]] == [VisualType.CAPSULE]


@pytest.mark.slow
def test_panda_renders_with_its_meshes(tmp_path, capsys):
    pytest.importorskip("trimesh", reason="meshes need the 'render' extra")
    pytest.importorskip("collada", reason="the panda's .dae meshes need pycollada (the 'render' extra)")
    from pbframework.display import VisualType, display_geometry
    from pbframework.models import example_robot_data_dir

    root = example_robot_data_dir()
    if root is None:
        pytest.skip("example-robot-data is not installed")
    urdf = root / "panda_description" / "urdf" / "panda.urdf"
    d = display_geometry(pbf.load_urdf(urdf))
    assert d.source == "urdf" and len(d.meshes) == 11 and all(p.is_file() for p in d.meshes)
    assert all(v.type is VisualType.MESH for vs in d.links.values() for v in vs)
    npz, gif = tmp_path / "p.npz", tmp_path / "p.gif"
    assert main(["simulate", "--model", str(urdf), "--duration", "0.3", "--dt", "0.01", "--out", str(npz),
                 "--no-progress"]) == 0
    assert main(["render", str(npz), "--out", str(gif), "--fps", "10"]) == 0
    assert "Animation of 4 frames" in capsys.readouterr().out
    frames = _frames_of(gif)
    assert len(frames) == 4 and frames[0].std() > 0


def test_gif_of_primitives_needs_no_extra(tmp_path, monkeypatch):
    import sys

    for name in ("trimesh", "imageio_ffmpeg", "fast_simplification", "collada"):
        monkeypatch.setitem(sys.modules, name, None)                    # as if not installed
    m, tr = _traj(2, 0.2)
    r = render(tr, tmp_path / "c.gif", model=m, fps=10)
    assert r["frames"] == 3 and len(_frames_of(r["path"])) == 3
