"""Embedded export (pbframework.export, issue 21): the standalone C99 library, built on the host and for ARM."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.step import StepError

CC = shutil.which("gcc") or shutil.which("cc")
FORBIDDEN = {"malloc", "free", "calloc", "realloc", "printf", "fprintf", "puts", "putchar", "alloca", "exit"}
M4 = ["-std=c99", "-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard", "-mthumb", "-Os", "-Wall", "-Wextra",
      "-Werror", "-Wdouble-promotion", "-Wvla"]
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler (gcc)")


def _sim(n: int):
    m = models.chain(n)
    return m, pbf.Simulator(m, "pbad", order=2, dt=0.01)


def _export(tmp_path: Path, n: int, precision: str, steps: int = 100, name: str = "chain"):
    m, sim = _sim(n)
    out = tmp_path / f"{precision}{n}"
    report = pbf.export(sim, out, precision=precision, q0=models.chain_q0(m), steps=steps, name=name)
    return m, sim, report


def _run(cmd, **kw) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout + proc.stderr


def _build_and_run(report, cc: str = CC, runner=(), extra=()) -> np.ndarray:
    d, c = report.directory, report.name
    exe = d / f"example_{Path(cc).name}"
    _run([cc, "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", *extra, "-o", str(exe), str(d / "example_main.c"),
          str(d / f"{c}.c"), "-lm"])
    out = _run([*runner, str(exe)])
    assert "workspaces agree: yes; status 0" in out            # two workspaces side by side, bit for bit
    rows = [line for line in out.splitlines() if line and line[0].isdigit()]
    return np.array([[float(v) for v in line.split(",")] for line in rows])


def _energy_gap(sim, data: np.ndarray, traj) -> float:
    """Largest difference of total energy 1/2 qd^T M qd + V between the exported rollout's states and the VM's."""
    nq = sim.model.nq
    E = np.sum(sim.energy(data[:, 1:1 + nq], data[:, 1 + nq:]), axis=0)
    E_ref = np.sum(sim.energy(traj.q, traj.qd), axis=0)
    return float(np.abs(E - E_ref).max())


def test_double_export_equals_the_vm(tmp_path):
    m, sim, report = _export(tmp_path, 3, "double")
    assert {p.name for p in report.files} == {"chain.h", "chain.c", "CMakeLists.txt", "example_main.c", "README.md"}
    data = _build_and_run(report)
    traj = sim.rollout(models.chain_q0(m), np.zeros(m.nq), steps=100)
    assert data.shape == (101, 1 + 2 * m.nq)
    assert np.abs(data[:, 1:1 + m.nq] - traj.q).max() < 1e-10
    assert np.abs(data[:, 1 + m.nq:] - traj.qd).max() < 1e-10


STATEFUL = """<mujoco><extension><plugin plugin="mujoco.pid"><instance name="p"><config key="kp" value="8"/>
  <config key="ki" value="5"/><config key="slewmax" value="2"/></instance></plugin></extension>
  <worldbody><body pos="0 0 1"><joint name="a" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
    <body pos="0.3 0 0"><joint name="b" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
    </body></body></worldbody>
  <actuator><general joint="a" dyntype="filter" dynprm="0.05" gainprm="3" biastype="affine" biasprm="0 -3 -0.3"/>
    <plugin joint="b" plugin="mujoco.pid" instance="p" actdim="2"/></actuator></mujoco>"""


def test_an_export_with_several_inputs_and_actuator_states_equals_the_vm(tmp_path):
    """The example passes ``u = NULL`` (zeros) for two inputs, and the step carries three actuator states
    (a filter's activation, a PID's integral and set-point): the C rollout is the VM's with zero controls."""
    path = tmp_path / "stateful.xml"
    path.write_text(STATEFUL)
    m = pbf.load_mjcf(path)
    sim = pbf.Simulator(m, "pbad", order=2, dt=0.01, forces=["gravity", pbf.io.actuator_force(m, [0.0, 0.0])])
    assert sim.problem.nu == 2 and sim.problem.meta["force_states"][1] - sim.problem.meta["force_states"][0] == 3
    q0 = np.array([0.4, -0.3])
    report = pbf.export(sim, tmp_path / "stateful", q0=q0, steps=60)
    data = _build_and_run(report)
    traj = sim.rollout(q0, np.zeros(m.nv), steps=60)
    assert np.abs(traj.force_states[-1]).max() > 1e-3                # the states moved
    assert np.abs(data[:, 1:1 + m.nq] - traj.q).max() < 1e-10
    assert np.abs(data[:, 1 + m.nq:] - traj.qd).max() < 1e-10


def test_float_export_is_single_precision_clean_and_close_to_double(tmp_path):
    m, sim, report = _export(tmp_path, 3, "float")
    data = _build_and_run(report, extra=["-Wdouble-promotion"])
    traj = sim.rollout(models.chain_q0(m), np.zeros(m.nq), steps=100)
    assert _energy_gap(sim, data, traj) < 1e-4 * models.chain_energy_scale(m)
    text = (report.directory / "chain.c").read_text()
    assert "casadi_int int" in text and " sin(" not in text and " sqrt(" not in text


@pytest.mark.parametrize("precision", ["double", "float"])
def test_library_uses_no_heap_and_no_io(tmp_path, precision):
    _, _, report = _export(tmp_path, 2, precision)
    obj = tmp_path / "lib.o"
    _run([CC, "-std=c99", "-O1", "-c", str(report.directory / "chain.c"), "-o", str(obj)])
    undefined = {line.split()[-1] for line in _run(["nm", "-u", str(obj)]).splitlines() if line.strip()}
    assert not (undefined & FORBIDDEN), undefined & FORBIDDEN


def test_cmake_builds_the_example(tmp_path):
    if shutil.which("cmake") is None:
        pytest.skip("needs cmake")
    _, _, report = _export(tmp_path, 2, "double", steps=5)
    b = tmp_path / "b"
    _run(["cmake", "-S", str(report.directory), "-B", str(b)])
    _run(["cmake", "--build", str(b)])
    assert "workspaces agree: yes" in _run([str(b / "example")])


def test_bad_input_is_one_clear_line(tmp_path):
    m, sim = _sim(2)
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    with pytest.raises(StepError, match="exists and is not empty"):
        pbf.export(sim, out)
    assert pbf.export(sim, out, force=True).directory == out and not (out / "keep.txt").exists()
    report = pbf.export(sim, tmp_path / "named", name="2-link chain!")
    assert report.name == "m_2_link_chain_" and "sanitised to 'm_2_link_chain_'" in str(report)
    with pytest.raises(StepError, match="precision must be"):
        pbf.export(sim, tmp_path / "p", precision="half")
    nm = pbf.Simulator(models.box(), "ne_nmdp", dt=0.01, forces=["gravity", "wrench_polytope"])
    with pytest.raises(StepError, match="cannot be exported to C"):
        pbf.export(nm, tmp_path / "nmdp")


@pytest.mark.embedded
def test_cortex_m4f_cross_build_has_no_warnings(tmp_path):
    cc = shutil.which("arm-none-eabi-gcc")
    if cc is None:
        pytest.skip("needs arm-none-eabi-gcc (apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)")
    _, _, report = _export(tmp_path, 10, "float")
    obj = tmp_path / "chain_m4.o"
    out = _run([cc, *M4, "-fstack-usage", "-c", str(report.directory / "chain.c"), "-o", str(obj)],
               cwd=tmp_path)
    assert "warning" not in out.lower()
    frames = [int(line.split("\t")[1]) for line in (tmp_path / "chain_m4.su").read_text().splitlines()]
    size = _run([shutil.which("arm-none-eabi-size") or "arm-none-eabi-size", str(obj)])
    text_bytes = int(size.splitlines()[1].split()[0])
    print(f"CHAIN-10 float on Cortex-M4F: text {text_bytes} bytes, workspace {report.workspace_bytes} bytes, "
          f"largest stack frame {max(frames)} bytes")
    assert text_bytes > 0 and 0 < max(frames) < 64 * 1024


@pytest.mark.embedded
def test_qemu_arm_float_rollout_agrees_with_host_double(tmp_path):
    cc, qemu = shutil.which("arm-linux-gnueabihf-gcc"), shutil.which("qemu-arm")
    if cc is None or qemu is None:
        pytest.skip("needs arm-linux-gnueabihf-gcc and qemu-arm (apt-get install gcc-arm-linux-gnueabihf "
                    "qemu-user)")
    m, sim, report = _export(tmp_path, 10, "float")
    data = _build_and_run(report, cc=cc, runner=[qemu], extra=["-static", "-Wdouble-promotion"])
    traj = sim.rollout(models.chain_q0(m), np.zeros(m.nq), duration=1.0)
    assert data.shape[0] == len(traj.t) == 101
    assert _energy_gap(sim, data, traj) < 1e-4 * models.chain_energy_scale(m)
