"""The code's layout: the Simulator split by job, each piece small and saying what it does; the seed-003
modules together; the C driver split by job. Public imports stay where README says they are."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import pbframework as pbf

ROOT = Path(__file__).resolve().parents[1]
SIMULATOR_PARTS = ("simulate", "stepping", "rollouts", "batch", "energies", "records")


@pytest.mark.parametrize("name", SIMULATOR_PARTS)
def test_each_piece_of_the_simulator_is_small_and_names_its_job(name):
    mod = importlib.import_module(f"pbframework.{name}")
    lines = Path(mod.__file__).read_text().count("\n")
    assert lines < 300, (name, lines)
    assert mod.__doc__ and len(mod.__doc__.split()) >= 10, name


def test_the_simulator_is_composed_of_its_pieces():
    from pbframework.batch import Batches
    from pbframework.energies import Energies
    from pbframework.records import Records
    from pbframework.rollouts import Rollouts
    from pbframework.stepping import Stepping

    for part in (Stepping, Rollouts, Batches, Energies, Records):
        assert issubclass(pbf.Simulator, part)
    names = {n for part in (Stepping, Rollouts, Batches, Energies, Records) for n in vars(part)
             if not n.startswith("__")}
    assert {"advance", "rollout", "rollout_batch", "energy", "divergence_test", "_trajectory"} <= names


def test_public_imports_and_the_seed_003_subpackage():
    from pbframework.parallel import globalform, oddeven, scan  # noqa: F401

    for name in ("Simulator", "Trajectory", "BatchTrajectory", "load_urdf", "load_mjcf", "StepFailure"):
        assert hasattr(pbf, name), name
    for gone in ("globalform", "scan", "oddeven"):
        assert not (ROOT / "pbframework" / f"{gone}.py").exists()


def test_the_c_driver_is_split_by_job():
    from pbframework.codegen.step_library import C_SRC, DRIVER_PARTS

    for part in DRIVER_PARTS:
        text = (C_SRC / part).read_text()
        assert text.startswith("/* pbframework solver driver, part"), part
        assert text.count("\n") < 600, part
    assert not (C_SRC / "pbf_driver.c").exists()


def test_readme_table_names_every_module():
    table = (ROOT / "README.md").read_text().split("## What is where", 1)[1].split("\n## ", 1)[0]
    for name in SIMULATOR_PARTS + ("step_library", "step_runner", "parallel"):
        assert f"`{name}`" in table or f"pbframework.{name}" in table, name
