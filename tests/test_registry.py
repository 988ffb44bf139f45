"""The plug-in machinery: look-ups, error messages naming the plug-in, and a real third-party plug-in
package installed through its entry point."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

import pbframework as pbf
from pbframework import PluginError, PluginInfo, UnknownPluginError, hookimpl
from pbframework.registry import Registry

HERE = Path(__file__).parent


def _plugin(**hooks):
    return SimpleNamespace(**{k: hookimpl(v) for k, v in hooks.items()})


def test_builtins_are_registered_through_entry_points():
    reg = Registry()
    assert "gravity" in reg.names("force")
    assert reg.owner("force", "gravity") == "gravity"
    assert {"rnea", "crba"} <= set(reg.names("dynamics"))
    fams = {f for f, _, _ in reg.all()}
    assert {"force", "dynamics", "fd"} <= fams


def test_unknown_name_lists_available():
    with pytest.raises(UnknownPluginError, match=r"unknown force model 'gravty' \(available: .*gravity"):
        pbf.get_plugin("force", "gravty")
    with pytest.raises(ValueError, match=r"unknown plug-in family 'forces' \(families: force, "):
        pbf.registry().names("forces")


def test_force_model_by_name_builds_with_params():
    g = pbf.force_model("gravity", scale=0.5)
    assert g.params() == {"scale": 0.5}
    with pytest.raises(pbf.PluginParameterError):
        pbf.force_model("gravity", stiffness=1.0)


def test_misspelt_force_parameter_is_one_line_listing_the_accepted_ones():
    """Through the Simulator as a user writes it: the plug-in named, its parameters with their defaults (read
    from its signature), a close match suggested; a PluginError, not the constructor's raw TypeError."""
    with pytest.raises(pbf.PluginParameterError) as e:
        pbf.Simulator(pbf.models.chain(2), forces=["gravity", ("joint_damping", {"dampng": 0.1})])
    assert str(e.value) == ("force model 'joint_damping': unknown parameter 'dampng' (did you mean 'damping'?); "
                            "accepted: damping=0.1, dofs=None")
    assert isinstance(e.value, PluginError) and not isinstance(e.value, TypeError)
    with pytest.raises(pbf.PluginParameterError, match=r"accepted: kp=1.0, kd=0.0, target=0.0, dofs=None, "
                                                       r"track_velocity=False$"):
        pbf.force_model("pd", kx=1.0)
    with pytest.raises(pbf.PluginParameterError, match=r"friction_depth='current'"):   # an enum as a user writes it
        pbf.force_model("penalty_contact", stifness=1.0)


def test_missing_required_parameter_is_named():
    from pbframework.registry import check_parameters

    def build(radius, *, height=2.0):
        return radius * height

    with pytest.raises(pbf.PluginParameterError, match=r"^thing 'cone': missing parameter 'radius'; accepted: "
                                                       r"radius \(required\), height=2.0$"):
        check_parameters("thing 'cone'", build, {"height": 1.0})
    check_parameters("thing 'cone'", build, {}, given=["radius"])          # supplied another way
    check_parameters("thing 'open'", lambda **kw: None, {"anything": 1})  # **kwargs: nothing to check


def test_misspelt_hook_is_reported_with_plugin_name():
    bad = _plugin(pbf_force_model=lambda: [])
    with pytest.raises(PluginError, match=r"plug-in 'typo_plugin' implements unknown hook\(s\) \['pbf_force_model'\]"):
        Registry(entry_points=False).register(bad, name="typo_plugin")


def test_unexpected_hook_arguments_are_reported_with_plugin_name():
    bad = _plugin(pbf_force_models=lambda model: [])
    with pytest.raises(PluginError, match=r"plug-in 'args_plugin' has a malformed hook implementation"):
        Registry(entry_points=False).register(bad, name="args_plugin")


@pytest.mark.parametrize("result, message", [
    (PluginInfo("x", "d", dict), r"must return a list of PluginInfo"),
    ([("x", "d")], r"returned tuple, expected pbframework.PluginInfo"),
    ([PluginInfo("x", "d", 3)], r"'x' has a non-callable build"),
    ([PluginInfo("bad name", "d", dict)], r"invalid name 'bad name'"),
    ([PluginInfo("x", "", dict)], r"'x' needs a one-line description"),
])
def test_malformed_results_are_reported_with_plugin_name(result, message):
    reg = Registry(entry_points=False)
    reg.register(_plugin(pbf_force_models=lambda: result), name="sloppy")
    with pytest.raises(PluginError, match=r"plug-in 'sloppy'.*" + message):
        reg.names("force")


def test_hook_that_raises_is_reported():
    def boom():
        raise RuntimeError("no licence file")

    reg = Registry(entry_points=False)
    reg.register(_plugin(pbf_solvers=boom), name="exploding")
    with pytest.raises(PluginError, match=r"plug-in 'exploding': pbf_solvers\(\) raised RuntimeError: no licence"):
        reg.names("solver")


def test_duplicate_names_name_both_plugins():
    reg = Registry(entry_points=True)
    reg.register(_plugin(pbf_force_models=lambda: [PluginInfo("gravity", "mine", dict)]), name="impostor")
    with pytest.raises(PluginError, match=r"force model 'gravity' is offered twice: by plug-in '\w+' and by "
                                          r"plug-in '\w+'"):
        reg.names("force")


def test_runtime_registration_and_unregistration():
    reg = Registry(entry_points=False)
    reg.register(_plugin(pbf_backends=lambda: [PluginInfo("null", "does nothing", lambda problem: None)]),
                 name="nullbackend")
    assert reg.names("backend") == ["null"]
    reg.unregister("nullbackend")
    assert reg.names("backend") == []


@pytest.fixture(scope="module")
def installed_thirdparty(tmp_path_factory):
    """pip-install tests/thirdparty_plugin into a private target directory (not the test environment)."""
    target = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
           str(HERE / "thirdparty_plugin")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return target


def test_third_party_plugin_is_found_through_its_entry_point_and_used(installed_thirdparty):
    script = textwrap.dedent("""
        import numpy as np, casadi as ca
        import pbframework as pbf
        reg = pbf.registry()
        assert "joint_spring" in reg.names("force"), reg.names("force")
        print("owner", reg.owner("force", "joint_spring"))
        spring = pbf.force_model("joint_spring", stiffness=3.0)
        model = pbf.models.chain(2)
        q = ca.SX.sym("q", model.nq)
        f = ca.Function("f", [q], [spring.generalized_force(model, q, 0 * q, 0.0)])
        print("force", np.array(f(np.ones(model.nq))).ravel().tolist())
    """)
    env = dict(os.environ, PYTHONPATH=str(installed_thirdparty) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "owner thirdparty_spring" in proc.stdout
    assert "force [-3.0, -3.0, -3.0, -3.0]" in proc.stdout
