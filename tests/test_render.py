"""Headless rendering to GIF (pbframework.render, ``pbf render``; issue 26, first part)."""

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
    with pytest.raises(ValueError, match="must be a .gif"):
        render(tr, tmp_path / "x.mp4", model=m)
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
