"""The ``pbf`` command: simulate, plugins, and one-line errors with exit status 2."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest

import pbframework as pbf
from pbframework.cli import EXIT_BROKEN_PIPE, main


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
    assert main(["simulate", "--model", str(urdf), "--param", "mass=2"]) == 2
    assert "--param applies to the built-in models (chain, swimmer, spider, box)" in capsys.readouterr().err


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
    (["simulate", "chain", "--links", "3", "--force", "gravity", "--force", "joint_damping:dampng=0.1"],
     "pbf: error: force model 'joint_damping': unknown parameter 'dampng' (did you mean 'damping'?); accepted: "
     "damping=0.1, dofs=None"),
    (["simulate", "chain", "--force", "pd:kp"], "--force pd: expected KEY=VALUE, got 'kp'"),
    (["simulate", "chain", "--force", "none", "--force", "gravity"], "cannot be combined with other --force"),
    (["simulate", "chain", "--out", "/nonexistent/x.npz"], "--out '/nonexistent/x.npz': folder '/nonexistent' "
                                                           "does not exist"),
    (["simulate", "chain", "--out", "traj.csv"], "--out 'traj.csv': unknown extension '.csv' (allowed: .npz)"),
    (["simulate", "chain", "--plot", "energy.txt"], "--plot 'energy.txt': unknown extension '.txt' (allowed: "),
    (["simulate", "chain", "--q0=0.1,0.2"], "--q0: expected a vector of length nq=20 for model 'chain10'"),
    (["simulate", "chain", "--qd0", "fast"], "--qd0: expected comma-separated numbers or a .npy file, got 'fast'"),
    (["simulate", "chain", "--q0", "missing.npy"], "--q0: file 'missing.npy' not found"),
    (["simulate", "chain", "--param", "lenght=0.5"], "model 'chain' (pbframework.models.chain): unknown parameter "
                                                     "'lenght' (did you mean 'length'?); accepted: n (required), "
                                                     "joint='ball2', length=1.0"),
    (["simulate", "chain", "--links", "3", "--param", "n=4"], "give the number of links once"),
    (["simulate", "chain", "--balance-inertia"], "--balance-inertia applies to model files"),
    (["simulate", "chain", "--links", "2", "--fd", "cfa"], "cfa supports serial chains of 1-DOF joints (revolute, "
                                                           "prismatic; fixed ones merged) only"),
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


# -- issue 16: parity with Python, failing before the work, pipes --------------------------------------------

def _nothing_built(monkeypatch):
    def build(*args, **kwargs):
        raise AssertionError("the model was built before the options were checked")

    monkeypatch.setattr("pbframework.cli._load_model", build)


@pytest.mark.parametrize("argv", [
    ["simulate", "chain", "--out", "/nonexistent/x.npz"],
    ["simulate", "chain", "--links", "3", "--force", "gravity", "--force", "joint_damping:dampng=0.1"],
    ["simulate", "chain", "--plot", "energy.txt"],
    ["simulate", "chain", "--q0", "missing.npy"],
    ["simulate", "chain", "--param", "lenght=0.5"],
    ["simulate", "chain", "--integrator", "rk4", "--order", "2"],
    ["simulate", "chain", "--fd", "featherstone"],
    ["simulate", "chain", "--max-halvings", "-1"],
])
def test_bad_options_fail_before_the_model_is_built(argv, monkeypatch, capsys):
    _nothing_built(monkeypatch)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pbf: error:") and len(err.strip().splitlines()) == 1


def test_force_parameters_initial_state_and_model_parameters_reach_the_run(tmp_path, capsys):
    q0 = tmp_path / "q0.npy"
    np.save(q0, [0.3, -0.2])
    out = tmp_path / "traj.npz"
    assert main(["simulate", "chain", "--links", "2", "--param", "joint=revolute,length=0.5", "--force", "gravity",
                 "--force", "pd:kp=100,kd=5,dofs=[joint0]", "--force", "joint_damping:damping=0.2",
                 "--q0", str(q0), "--qd0=-1,0.5", "--integrator", "rk4", "--dt", "0.001", "--duration", "0.002",
                 "--out", str(out), "--no-progress"]) == 0
    tr = pbf.Trajectory.load(out)
    assert tr.q.shape == (3, 2) and np.allclose(tr.q[0], [0.3, -0.2])
    assert np.allclose(tr.qd[0], [-1.0, 0.5])
    forces = " ".join(tr.info["forces"])
    assert "PD(kp=[100.0], kd=[5.0]" in forces and "dofs=['joint0']" in forces and "damping=[0.2]" in forces
    ref = pbf.Simulator(pbf.models.chain(2, "revolute", length=0.5), "rk4", dt=0.001,
                        forces=["gravity", ("pd", {"kp": 100, "kd": 5, "dofs": ["joint0"]}),
                                ("joint_damping", {"damping": 0.2})]).rollout([0.3, -0.2], [-1.0, 0.5], steps=2)
    assert np.allclose(tr.q, ref.q, rtol=0, atol=1e-12)
    capsys.readouterr()


def _pbf(*args: str) -> list[str]:
    exe = shutil.which("pbf")
    return [exe, *args] if exe else [sys.executable, "-m", "pbframework.cli", *args]


def test_cache_info_into_head_ends_quietly(tmp_path):
    """``pbf cache info | head -1`` through a real shell pipe, and a reader that is gone before the first
    write (the broken pipe for certain): no traceback, the SIGPIPE status."""
    for i in range(3):                               # entries, so the listing has several lines
        (tmp_path / f"unit{i}-0123").mkdir()
    env = dict(os.environ, PBF_CACHE_DIR=str(tmp_path))
    cmd = " ".join(shlex.quote(a) for a in _pbf("cache", "info"))
    r = subprocess.run(["sh", "-c", f"{cmd} | head -1"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.splitlines() == [f"Cache: {tmp_path} ($PBF_CACHE_DIR)"]
    assert r.stderr == ""
    p = subprocess.Popen(_pbf("cache", "info"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.close()                                 # the reader leaves before pbf writes anything
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == EXIT_BROKEN_PIPE and err == ""


def test_no_progress_bar_where_stderr_is_not_a_terminal():
    r = subprocess.run(_pbf("simulate", "chain", "--links", "2", "--integrator", "rk4", "--duration", "0.05"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stderr == "" and "Status: ok." in r.stdout


def test_export_writes_a_library_and_refuses_what_it_cannot(tmp_path, capsys):
    out = tmp_path / "chain2"
    assert main(["export", "chain", "--links", "2", "--dt", "0.01", "--out", str(out), "--name", "2 links"]) == 0
    printed = capsys.readouterr().out
    assert "sanitised to 'm_2_links'" in printed and (out / "m_2_links.h").is_file()
    assert main(["export", "chain", "--links", "2", "--out", str(out)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(["export", "chain", "--links", "2", "--out", str(out), "--overwrite", "--precision", "float"]) == 0
    assert main(["export", "box", "--integrator", "ne_nmdp", "--force", "gravity", "--force", "wrench_polytope",
                 "--out", str(tmp_path / "nmdp")]) == 2
    assert "cannot be exported to C" in capsys.readouterr().err
