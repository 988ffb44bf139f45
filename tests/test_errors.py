"""The exception family (issue 27): one base, the old names where they were, each still the built-in it was;
the checks of pbframework.checks; the loader checks the physics needs."""

from __future__ import annotations

import os
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import pbframework as pbf
from pbframework import checks
from pbframework.errors import (ArgumentTypeError, CliError, LimitError, ModelError, OutputPathError, PbfError,
                                PluginError, PluginParameterError, PluginTypeError, PluginValueError, StepError,
                                StepFailure, UnknownFamilyError, UnknownPluginError)


@pytest.mark.parametrize("cls,builtin", [
    (ModelError, ValueError), (StepError, ValueError), (ArgumentTypeError, TypeError),
    (ArgumentTypeError, StepError), (LimitError, ValueError), (OutputPathError, ValueError), (CliError, ValueError),
    (PluginError, RuntimeError), (PluginParameterError, PluginError), (UnknownPluginError, KeyError),
    (PluginValueError, ValueError), (PluginValueError, PluginParameterError), (PluginTypeError, TypeError),
    (UnknownFamilyError, ValueError), (UnknownFamilyError, PluginError),
    (StepFailure, RuntimeError),
])
def test_every_error_is_a_pbf_error_and_the_builtin_it_was(cls, builtin):
    assert issubclass(cls, PbfError) and issubclass(cls, builtin)


def test_old_names_import_from_where_they_were():
    from pbframework.cli import CliError as a
    from pbframework.model import ModelError as b
    from pbframework.registry import PluginError as c, PluginParameterError as d, UnknownPluginError as e
    from pbframework.step import StepError as f
    from pbframework.stepping import StepFailure as g
    assert (a, b, c, d, e, f, g) == (CliError, ModelError, PluginError, PluginParameterError, UnknownPluginError,
                                     StepError, StepFailure)
    for name in ("PbfError", "ArgumentTypeError", "LimitError", "OutputPathError", "CliError", "PluginValueError",
                 "PluginTypeError", "UnknownFamilyError"):
        assert name in pbf.__all__ and getattr(pbf, name) is getattr(pbframework_errors(), name)


def pbframework_errors():
    import pbframework.errors

    return pbframework.errors


def test_unknown_plugin_message_is_plain():
    with pytest.raises(UnknownPluginError) as e:
        pbf.get_plugin("integrator", "verlet")
    assert str(e.value).startswith("unknown integrator 'verlet' (available:")


# -- argument checks -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value,error", [
    (True, ArgumentTypeError), (1j, ArgumentTypeError), ("0.1", ArgumentTypeError), (None, ArgumentTypeError),
    (float("nan"), StepError), (float("inf"), StepError), (-1.0, StepError), (0, StepError), (10 ** 400, StepError),
])
def test_real_refuses_what_is_not_a_positive_finite_real(value, error):
    with pytest.raises(error, match="dt must be a positive finite number of seconds"):
        checks.real(value, "dt", positive=True, unit="seconds")


def test_real_and_integer_accept_numpy_scalars():
    assert checks.real(np.float32(0.5), "x") == 0.5
    assert checks.integer(np.int64(3), "n", minimum=1) == 3
    with pytest.raises(ArgumentTypeError, match="n must be a positive integer, got float 3.0"):
        checks.integer(3.0, "n", minimum=1)
    with pytest.raises(ArgumentTypeError):
        checks.integer(np.bool_(True), "n")


def test_check_steps_limits_and_conflicts():
    assert checks.check_steps(0.1, None, 0.01) == 10
    assert checks.check_steps(None, 7, 0.01) == 7
    with pytest.raises(StepError, match="not both"):
        checks.check_steps(0.1, 7, 0.01)
    with pytest.raises(StepError, match="give duration"):
        checks.check_steps(None, None, 0.01)
    with pytest.raises(LimitError, match=r"--max-steps raises it"):
        checks.check_steps(1.0, None, 1e-300, option="--max-steps")
    with pytest.raises(LimitError):
        checks.check_steps(None, 11, 0.01, max_steps=10)


def test_check_memory():
    assert checks.check_memory(10, 4) == 11 * (8 * 4 + 56)
    with pytest.raises(LimitError, match="max_memory raises it"):
        checks.check_memory(10 ** 7, 100, 10)


# -- output paths ----------------------------------------------------------------------------------------------

def test_output_path_every_kind(tmp_path):
    regular = tmp_path / "file"
    regular.write_text("x")
    fmt = (".npz",)
    assert checks.output_path(str(tmp_path / "t.npz"), "--out", fmt) == tmp_path / "t.npz"
    assert not (tmp_path / "t.npz").exists()                          # the probe leaves nothing behind
    cases = {"": "empty path", str(regular / "t.npz"): "is a file, not a folder",
             str(tmp_path / "missing" / "t.npz"): "does not exist", str(tmp_path / "t.csv"): "unknown extension",
             str(tmp_path / ("a" * 300 + ".npz")): "cannot write there", "a\0b.npz": "NUL"}
    os.mkdir(tmp_path / "dir.npz")
    cases[str(tmp_path / "dir.npz")] = "is a folder"
    for text, message in cases.items():
        with pytest.raises(OutputPathError, match=message):
            checks.output_path(text, "--out", fmt)
    with pytest.raises(OutputPathError, match="must be a path"):
        checks.output_path(5, "--out", fmt)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes everywhere")
def test_output_path_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(OutputPathError):
            checks.output_path(str(ro / "t.npz"), "--out", (".npz",))
    finally:
        ro.chmod(0o700)


# -- joints ----------------------------------------------------------------------------------------------------

def test_joint_axis_normalised_without_overflow():
    j = pbf.Joint("j", "revolute", "world", "a", axis=[1e200, 1e200, 0.0])
    assert np.allclose(j.axis, [2 ** -0.5, 2 ** -0.5, 0.0], rtol=0, atol=1e-15)
    j = pbf.Joint("j", "prismatic", "world", "a", axis=[1e-11, 0.0, 0.0])
    assert np.array_equal(j.axis, [1.0, 0.0, 0.0])
    with pytest.raises(ModelError, match="axis must be non-zero"):
        pbf.Joint("j", "revolute", "world", "a", axis=[0.0, 0.0, 0.0])


@pytest.mark.parametrize("kwargs,message", [
    ({"lower": float("nan")}, "lower must be a number"),
    ({"upper": "1"}, "upper must be a number"),
    ({"lower": True}, "lower must be a number"),
    ({"lower": 1.0, "upper": -1.0}, "exceeds upper limit"),
    ({"lower": float("inf"), "upper": float("inf")}, "admit no finite position"),
    ({"effort": -1.0}, "effort limit must be >= 0"),
])
def test_joint_limits_are_numbers_that_admit_a_position(kwargs, message):
    with pytest.raises(ModelError, match=message):
        pbf.Joint("j", "revolute", "world", "a", **kwargs)


def test_state_vectors_are_model_errors():
    m = pbf.models.chain(2, joint="revolute")
    for bad in ("ab", np.array([0.1j, 0.0]), [[0.0, 0.0]], [object(), 1]):
        with pytest.raises(ModelError, match="q"):
            m.check_state(bad, "q")


# -- loaders ---------------------------------------------------------------------------------------------------

def _pendulum(tmp_path: Path, robots_dir: Path, edit) -> Path:
    tree = ET.parse(robots_dir / "double_pendulum_description/urdf/double_pendulum.urdf")
    edit(tree.getroot())
    path = tmp_path / "robot.urdf"
    path.write_bytes(ET.tostring(tree.getroot()))
    return path


def _weld_point_mass(root, mass="0.5", inertia="1e300"):
    """A child welded to the first moving link: a link with the given mass and inertia moments."""
    parent = root.findall("joint")[-1].find("child").get("link")
    link = ET.SubElement(root, "link", name="tool")
    inertial = ET.SubElement(link, "inertial")
    ET.SubElement(inertial, "mass", value=mass)
    ET.SubElement(inertial, "inertia", ixx=inertia, ixy="0", ixz="0", iyy=inertia, iyz="0", izz=inertia)
    j = ET.SubElement(root, "joint", name="tool_weld", type="fixed")
    ET.SubElement(j, "parent", link=parent)
    ET.SubElement(j, "child", link="tool")
    ET.SubElement(j, "origin", xyz="0 0 1e200")


def test_extreme_merge_is_a_model_error_not_linalg(tmp_path, robots_dir):
    """A point mass (zero tensor) welded 1e200 m away merges into its parent with an overflowing inertia."""
    path = _pendulum(tmp_path, robots_dir, lambda root: _weld_point_mass(root, mass="0.5", inertia="0"))
    with pytest.raises(ModelError, match="merging link 'tool' into .* gives a non-finite mass or inertia"):
        pbf.load_urdf(path)


def test_unphysical_welded_child_is_merged_with_a_warning(tmp_path, robots_dir):
    def edit(root):
        _weld_point_mass(root, mass="0.01", inertia="1e-6")
        root.find("link[@name='tool']/inertial/inertia").set("izz", "1e-3")       # 1e-6 + 1e-6 < 1e-3
        root.find("joint[@name='tool_weld']/origin").set("xyz", "0 0 0.1")

    with pytest.warns(pbf.io.InertiaMerged, match="'tool' has an inertia with principal moments .* break the "
                                                  "triangle inequality; it is welded to"):
        model = pbf.load_urdf(_pendulum(tmp_path, robots_dir, edit))
    assert "tool" not in [link.name for link in model.links]


def test_mass_matrix_check_names_the_coordinate(tmp_path, robots_dir):
    """Each number valid (a 1e300 body that can stand alone, welded 1e200 m away), M(q) overflows."""
    with pytest.raises(ModelError, match="mass matrix M\\(q\\) at the neutral configuration is not finite "
                                         "\\(entry for coordinate 'joint1'"):
        pbf.load_urdf(_pendulum(tmp_path, robots_dir, _weld_point_mass))


def test_xml_errors_are_model_errors(tmp_path, robots_dir):
    src = (robots_dir / "double_pendulum_description/urdf/double_pendulum.urdf").read_bytes()
    body = src.split(b"?>", 1)[1] if src.startswith(b"<?xml") else src
    cases = {b'<?xml version="1.0" encoding="klingon"?>' + body: "unknown XML encoding",
             b'<?xml version="1.0" encoding="utf-8"?><robot name="\xff\xfe">' + b"</robot>": "malformed XML",
             b"<robot>" + b"<a>" * 100_000 + b"</a>" * 100_000 + b"</robot>": "the robot has no <link>"}
    for data, message in cases.items():
        path = tmp_path / "r.urdf"
        path.write_bytes(data)
        with pytest.raises(ModelError, match=message):
            pbf.load_urdf(path)


def test_load_urdf_arguments(tmp_path, robots_dir):
    path = robots_dir / "double_pendulum_description/urdf/double_pendulum.urdf"
    with pytest.raises(ModelError, match="path must be a str or os.PathLike"):
        pbf.load_urdf(5)
    with pytest.raises(ModelError, match="floating_base must be"):
        pbf.load_urdf(path, floating_base=np.zeros(2))
    with pytest.raises(ModelError, match="limits must be True or False"):
        pbf.load_urdf(path, limits="no")
    with pytest.raises(LimitError, match="more than the limit of 2"):
        pbf.load_urdf(path, max_links=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pbf.load_urdf(path).nv == 2


def test_inertia_near_the_largest_double_is_a_model_error(tmp_path, robots_dir):
    """Found by the long fuzz profile: an inertia entry of 1e308 made LAPACK's eigenvalue solver fail
    (LinAlgError); each inertia is now decomposed scaled, and the model refused in one line."""
    def edit(root):
        inertia = root.findall("link/inertial/inertia")[-1]
        for k in ("ixx", "ixy", "iyy", "izz"):
            inertia.set(k, "1e308")

    with pytest.raises(ModelError):
        pbf.load_urdf(_pendulum(tmp_path, robots_dir, edit))


@pytest.mark.parametrize("xpath,tag", [("joint", "axis"), ("joint", "limit"), ("joint", "origin"), ("joint", "parent"),
                                       ("link", "inertial"), ("link/inertial", "mass"), ("link/inertial", "inertia")])
def test_a_second_element_urdf_allows_once_is_an_error(tmp_path, robots_dir, xpath, tag):
    """A duplicated <axis>, <limit>, <inertial>, ... used to be silently ignored (the first one read)."""
    def edit(root):
        parent = next(p for p in root.findall(xpath) if p.find(tag) is not None)
        parent.append(ET.fromstring(ET.tostring(parent.find(tag))))

    with pytest.raises(ModelError, match=f"2 <{tag}> elements in <{xpath.split('/')[-1]}>; URDF allows one"):
        pbf.load_urdf(_pendulum(tmp_path, robots_dir, edit))


def test_numeric_mass_matrix_equals_crba(robots_dir, rng):
    """checks.mass_matrix (NumPy CRBA, what the loaders' check evaluates) against the crba plug-in, to a
    relative 1e-12, at seeded random configurations; a floating base goes through the crba plug-in itself."""
    from pbframework.dynamics import crba

    models = [pbf.models.chain(4), pbf.models.spider(), pbf.load_urdf(robots_dir / "panda_description/urdf/panda.urdf"),
              pbf.load_urdf(robots_dir / "ur_description/urdf/ur5_robot.urdf", floating_base=True)]
    for m in models:
        for _ in range(3):
            q = checks.sample_configurations(m, 2, seed=int(rng.integers(1 << 30)))[1]
            B = np.asarray(crba(m)(q))
            assert np.abs(checks.mass_matrix(m, q) - B).max() <= 1e-12 * np.abs(B).max()


def test_model_size_is_checked_before_the_step_is_built(capsys):
    """CHAIN-400 (nv 800) would take minutes to build: refused at once, in Python and on the command line;
    the limit is raisable."""
    from pbframework.cli import main

    big = pbf.models.chain(400)
    with pytest.raises(LimitError, match="800 velocity coordinates, more than the limit of 600 \\(max_dofs"):
        pbf.Simulator(big, "rk4")
    with pytest.raises(LimitError, match="more than the limit of 3"):
        pbf.Simulator(pbf.models.chain(2), "rk4", max_dofs=3)
    assert pbf.Simulator(pbf.models.chain(2), "rk4", max_dofs=4).model.nv == 4
    assert main(["simulate", "chain", "--links", "400", "--no-progress"]) == 2
    assert "(--max-dofs raises it" in capsys.readouterr().err


def test_results_and_models_refuse_bad_input_in_the_family(tmp_path):
    """The entry points issue 27's review found still raw: Trajectory.save / load / plot_energy, an
    ArticulatedBody of something that is not a list, state_energy of strings or of the wrong width."""
    import numpy as np

    m = pbf.models.chain(2)
    sim = pbf.Simulator(m, "rk4", dt=0.01)
    tr = sim.rollout(np.zeros(m.nq), np.zeros(m.nv), duration=0.05)
    (tmp_path / "file").write_text("x")
    with pytest.raises(pbf.OutputPathError, match="cannot write the trajectory"):
        tr.save(tmp_path / "file" / "t.npz")
    with pytest.raises(pbf.OutputPathError, match="cannot write the energy plot"):
        tr.plot_energy(tmp_path / "file" / "e.png")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(pbf.ResultFileError, match="bad.npz: not a trajectory file written by save"):
        pbf.Trajectory.load(tmp_path / "bad.npz")
    saved = tr.save(tmp_path / "t.npz")
    with pytest.raises(pbf.ResultFileError, match="holds a single trajectory; read it with Trajectory.load"):
        pbf.BatchTrajectory.load(saved)
    with pytest.raises(FileNotFoundError):
        pbf.Trajectory.load(tmp_path / "missing.npz")
    with pytest.raises(pbf.ModelError, match="links and joints must be iterables"):
        pbf.ArticulatedBody(5)
    with pytest.raises(pbf.ArgumentTypeError, match="state_energy: states must be an array of numbers"):
        sim.state_energy("abc")
    with pytest.raises(pbf.StepError, match="state_energy: states must have"):
        sim.state_energy(np.zeros(3))
