"""Every script in ``examples/`` runs in fast mode (STYLE.md 13: examples are executed documentation).

Each script is run as a user would, ``python examples/<name>.py --out DIR`` with ``PBF_EXAMPLES_FAST=1``,
in a subprocess. It must exit with status 0, print something and write its results into DIR; the
built-in examples are also checked for a meaningful result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(p for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))
TIMEOUT_S = 120


def _check_chain_fall(out: Path, stdout: str) -> None:
    results = json.loads((out / "chain_fall.json").read_text())
    assert (out / "chain_fall_energy.png").stat().st_size > 0
    for name, r in results.items():
        assert r["status"] == "ok" and not r["diverged"], name
        assert 0.0 <= r["energy_error_percent"] < 5.0, (name, r)
    assert results["pbad3"]["adaptive_rtol"] == 5e-6 and results["pbad2"]["adaptive_rtol"] is None
    assert "energy error" in stdout and "status ok" in stdout


def _check_swimmer_cmaes(out: Path, stdout: str) -> None:
    results = json.loads((out / "swimmer_cmaes.json").read_text())
    assert (out / "swimmer_com.png").stat().st_size > 0
    assert results["speed_after"] > results["speed_before"] + 0.05, results
    assert abs(results["speed_isotropic_drag"]) < 1e-4, results
    assert "forward speed before CMA-ES" in stdout


def _check_spider_walk(out: Path, stdout: str) -> None:
    results = json.loads((out / "spider_walk.json").read_text())
    assert (out / "spider_walk.png").stat().st_size > 0
    assert results["distance_m"] > 0.05, results
    assert results["torso_height_min_m"] > 0.05, results  # it walks, it does not crawl on its belly
    assert results["unconverged_steps"] == 0, results
    assert "spider walked" in stdout


def _check_chain_ensemble(out: Path, stdout: str) -> None:
    results = json.loads((out / "chain_ensemble.json").read_text())
    assert (out / "chain_ensemble.png").stat().st_size > 0
    runs = results["runs"]
    assert results["members"] == 8 and results["duration_s"] == 1.0, results
    assert set(runs) == {"rk4 dt=0.001", "pbad2 dt=0.01"}, results
    for name, r in runs.items():
        assert r["identical_to_single"] and r["diverged"] == 0 and r["unconverged_steps"] == 0, (name, r)
        # sigma = 1e-6 rad on 20 angles of a 10 m chain: a tip spread of ~1e-5 m, not grown within 1 s
        assert 1e-6 < r["spread_start_m"] < 1e-4 and r["spread_end_m"] < 1e-4, (name, r)
        assert r["horizon_0.1m_s"] is None, (name, r)
    assert runs["rk4 dt=0.001"]["spread_start_m"] == runs["pbad2 dt=0.01"]["spread_start_m"], "the same starts"
    # the first second has no whip: RK4 at 1 ms holds the energy (measured 2e-7 %), order-2 PBAD at 10 ms
    # has begun to dissipate (3.9 %)
    assert runs["rk4 dt=0.001"]["energy_error_percent"] < 1e-3, runs
    assert 0.5 < runs["pbad2 dt=0.01"]["energy_error_percent"] < 10.0, runs
    assert "identical to single rollouts: yes" in stdout


CHECKS = {"chain_fall": _check_chain_fall, "chain_ensemble": _check_chain_ensemble,
          "swimmer_cmaes": _check_swimmer_cmaes,
          "spider_walk": _check_spider_walk}


def _check_quadruped_walk(out: Path, stdout: str) -> None:
    results = json.loads((out / "quadruped_walk.json").read_text())
    assert (out / "quadruped_walk.png").stat().st_size > 0
    assert results["status"] == "ok" and results["max_tilt_deg"] < 30.0, results
    assert results["walked_m"] > 0.0 and results["iterations_per_step"] >= 1, results
    assert "PGM iterations per step" in stdout


CHECKS["quadruped_walk"] = _check_quadruped_walk


def _check_swing_up(out: Path, stdout: str) -> None:
    results = json.loads((out / "swing_up.json").read_text())
    assert (out / "swing_up.png").stat().st_size > 0
    assert results["success"] and results["status"] == "Solve_Succeeded", results
    assert results["max_abs_torque"] <= 6.0 + 1e-6 and results["max_step_mismatch"] < 1e-6, results
    assert abs(results["final_q"][0] + 1.5707963) < 1e-6, results
    assert "IPOPT: Solve_Succeeded" in stdout


CHECKS["swing_up"] = _check_swing_up


def _check_panda_reach(out: Path, stdout: str) -> None:
    results = json.loads((out / "panda_reach.json").read_text())
    assert (out / "panda_reach.png").stat().st_size > 0
    assert results["success"] and results["within_limits"], results
    assert results["via_error_m"] < 1e-6 and results["target_error_m"] < 1e-6, results
    assert results["max_torque_fraction"] <= 1.0 + 1e-6, results


CHECKS["panda_reach"] = _check_panda_reach


def _check_mjcf_pid_finger(out: Path, stdout: str) -> None:
    runs = json.loads((out / "mjcf_pid_finger.json").read_text())["runs"]
    assert (out / "mjcf_pid_finger.png").stat().st_size > 0
    euler, pid, p_only = runs["semi-implicit Euler 2 ms"], runs["pbad 20 ms"], runs["pbad 20 ms, P only"]
    assert euler["max_deviation_rad"] < 1e-9 and euler["max_state_deviation"] < 1e-9, euler
    assert all(r["status"] == "ok" for r in runs.values()), runs
    # P alone sags by m g l / kp = 0.0383 N m / 4 under gravity; the integral takes the error away
    assert abs(p_only["base_error_at_0.8s_rad"] - 0.0383 / 4) < 1e-3, p_only
    assert pid["base_error_at_0.8s_rad"] < 0.1 * p_only["base_error_at_0.8s_rad"], runs


CHECKS["mjcf_pid_finger"] = _check_mjcf_pid_finger


def _check_swimmer_gradient(out: Path, stdout: str) -> None:
    results = json.loads((out / "swimmer_gradient.json").read_text())
    assert (out / "swimmer_gradient.png").stat().st_size > 0
    assert results["speed_after"] > results["speed_before"] + 0.1 and results["rollouts"] >= 2, results
    assert "rollouts with gradients" in stdout


CHECKS["swimmer_gradient"] = _check_swimmer_gradient


def _check_jump(out: Path, stdout: str) -> None:
    results = json.loads((out / "jump.json").read_text())
    assert (out / "jump.png").stat().st_size > 0
    assert results["success"] and results["status"] == "Solve_Succeeded", results
    assert results["max_abs_torque"] <= 5.0 + 1e-6, results
    assert results["rise_m"] > 0.02 and results["airborne_knots"] >= 5, results     # a jump, not a stretch
    assert results["lowest_foot_best_m"] >= 0.01 - 1e-6, results                  # all four feet up at once
    assert results["max_step_mismatch"] < 1e-6 and results["replay_converged"], results
    assert "IPOPT: Solve_Succeeded" in stdout and "the torso rises" in stdout


CHECKS["jump"] = _check_jump


def test_examples_exist():
    assert {p.stem for p in SCRIPTS} >= set(CHECKS)


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_example_runs_in_fast_mode(script: Path, tmp_path: Path):
    first_line = (script.read_text().split('"""')[1].strip().splitlines() or [""])[0]
    assert first_line, f"{script.name} needs a title docstring"
    env = {**os.environ, "PBF_EXAMPLES_FAST": "1", "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.strip(), f"{script.name} printed nothing"
    assert any(tmp_path.iterdir()), f"{script.name} wrote nothing to --out"
    check = CHECKS.get(script.stem)
    if check is not None:
        check(tmp_path, proc.stdout)


def _check_box_slide(out: Path, stdout: str) -> None:
    results = json.loads((out / "box_slide.json").read_text())
    assert (out / "box_slide.png").stat().st_size > 0
    assert set(results) == {"dt=0.01", "dt=0.1"}
    for name, r in results.items():
        assert r["status"] == "ok" and 0.0 < r["distance_m"] < 2.0, (name, r)
    assert results["dt=0.1"]["steps"] * 10 == results["dt=0.01"]["steps"]
    assert "pbfd dt = 0.1 s: status ok" in stdout


CHECKS["box_slide"] = _check_box_slide


def test_spider_walks_with_pbfd_contact(tmp_path: Path):
    """examples/spider_walk.py --contact pbfd: the same gait on seed 002's frictional contact (fast mode, 1 s)."""
    env = {**os.environ, "PBF_EXAMPLES_FAST": "1", "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(EXAMPLES / "spider_walk.py"), "--out", str(tmp_path), "--contact", "pbfd"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "spider_walk.json").read_text())
    assert results["contact"] == "pbfd" and results["unconverged_steps"] == 0, results
    assert results["distance_m"] > 0.02 and results["torso_height_min_m"] > 0.05, results
    assert "pbfd (pbfd contact)" in proc.stdout


def _check_chain_slide(out: Path, stdout: str) -> None:
    results = json.loads((out / "chain_slide.json").read_text())
    assert (out / "chain_slide.png").stat().st_size > 0
    assert results["ne_dry_friction"]["status"] == "ok" and results["pbfd"]["status"] == "ok"
    assert results["ne_dry_friction"]["slid_m"] == pytest.approx(results["coulomb_m"], rel=0.05), results
    assert results["pbfd"]["slid_m"] > 0, results
    assert "Coulomb" in stdout


CHECKS["chain_slide"] = _check_chain_slide


def _check_mjcf_arm(out: Path, stdout: str) -> None:
    results = json.loads((out / "mjcf_arm.json").read_text())
    assert (out / "mjcf_arm.png").stat().st_size > 0
    runs = results["runs"]
    assert all(r["status"] == "ok" for r in runs.values()), runs
    assert runs["rk4 0.5 ms"]["final_deviation_from_mujoco_rad"] < 1e-9, runs      # the same RK4 as MuJoCo
    assert runs["pbad3 10 ms"]["final_deviation_from_mujoco_rad"] < 0.01, runs
    assert "forces from the file: joint_damping, mj_actuators" in stdout


CHECKS["mjcf_arm"] = _check_mjcf_arm
