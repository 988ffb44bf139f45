"""The ``pbf`` command: simulate, plugins, and one-line errors with exit status 2."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

import pbframework as pbf
from pbframework.cli import main


def test_simulate_writes_npz_and_plot(tmp_path, capsys):
    out, png = tmp_path / "traj.npz", tmp_path / "energy.png"
    rc = main(["simulate", "chain", "--links", "3", "--integrator", "pbad", "--order", "3", "--dt", "0.05",
               "--duration", "0.5", "--out", str(out), "--plot", str(png), "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "10 steps" in text and "wall time" in text and "Energy drift" in text and "iterations" in text
    z = np.load(out)
    assert {"t", "q", "energy"} <= set(z.files) and z["q"].shape == (11, 6)
    assert png.stat().st_size > 1000
    tr = pbf.Trajectory.load(out)
    assert tr.info["order"] == 3 and tr.info["integrator"] == "pbad"


def test_simulate_urdf(tmp_path, capsys):
    urdf = tmp_path / "pendulum.urdf"
    urdf.write_text("""<robot name="pendulum">
  <link name="base"/>
  <link name="rod"><inertial><origin xyz="0.5 0 0"/><mass value="1"/>
    <inertia ixx="0.00125" iyy="0.084" izz="0.084" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="rod"/><axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
</robot>""")
    rc = main(["simulate", "--model", str(urdf), "--integrator", "rk4", "--dt", "0.01", "--duration", "0.2",
               "--no-progress"])
    assert rc == 0 and "20 steps" in capsys.readouterr().out


def test_plugins_lists_every_family(capsys):
    assert main(["plugins"]) == 0
    text = capsys.readouterr().out
    for family, name in [("integrator", "pbad"), ("integrator", "rk4"), ("solver", "lm"), ("solver", "jtj_lm"),
                         ("solver", "lbfgs"), ("force", "gravity"), ("fd", "aba")]:
        line = next(ln for ln in text.splitlines() if ln.split()[:2] == [family, name])
        assert len(line.split()) > 2          # has a description


@pytest.mark.parametrize("argv,message", [
    (["simulate", "chain", "--integrator", "verlet"], "unknown integrator 'verlet' (available:"),
    (["simulate", "chain", "--dt", "-0.1"], "dt must be a positive finite number of seconds, got -0.1"),
    (["simulate", "chain", "--dt", "abc"], "argument --dt: invalid float value: 'abc'"),
    (["simulate", "--model", "missing.urdf"], "model file 'missing.urdf' not found"),
    (["simulate", "chain", "--integrator", "rk4", "--order", "2"], "does not support order=2"),
    (["simulate", "chain", "--force", "wind"], "unknown force model 'wind'"),
    (["simulate", "robot"], "unknown model 'robot'"),
    (["simulate", "chain", "--solver", "newton"], "unknown solver 'newton'"),
    (["simulate", "spider", "--links", "6"], "--links applies to the chain and swimmer models only, not to 'spider'"),
    (["simulate", "--model", "robot.urdf", "--links", "6"], "--links applies to the chain and swimmer models only"),
    (["simulate", "chain", "--links", "0"], "--links must be a positive integer, got 0"),
])
def test_errors_are_one_line_exit_2(argv, message, capsys):
    try:
        rc = main(argv)
    except SystemExit as exc:          # argparse's own errors (through pbf's one-line handler)
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("pbf: error:") and "Traceback" not in err


def test_default_links_are_the_canonical_models(tmp_path, capsys):
    """Without --links: CHAIN-10 and the 4-link SWIMMER of DESIGN.md."""
    for name, nq in (("chain", 20), ("swimmer", 9)):
        out = tmp_path / f"{name}.npz"
        assert main(["simulate", name, "--integrator", "rk4", "--dt", "0.01", "--duration", "0.02",
                     "--force", "none", "--out", str(out), "--no-progress"]) == 0
        assert np.load(out)["q"].shape == (3, nq)
    capsys.readouterr()


@pytest.mark.skipif(shutil.which("pbf") is None, reason="console script not installed (pip install -e .)")
def test_console_script():
    r = subprocess.run(["pbf", "simulate", "chain", "--dt", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip().startswith("pbf: error: dt must be a positive")
    r = subprocess.run([sys.executable, "-m", "pbframework.cli", "plugins"], capture_output=True, text=True)
    assert r.returncode == 0 and "pbad" in r.stdout


def test_balance_inertia_flag_loads_romeo_small(robots_dir, capsys):
    romeo = robots_dir / "romeo_description/urdf/romeo_small.urdf"
    args = ["simulate", "--model", str(romeo), "--dt", "0.01", "--duration", "0.02", "--no-progress"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'RShoulderYawLink'" in err and "--balance-inertia" in err
    with pytest.warns(pbf.io.InertiaBalanced, match="'RShoulderYawLink'"):
        assert main(args + ["--balance-inertia"]) == 0
    assert "Status: ok." in capsys.readouterr().out
