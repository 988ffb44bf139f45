"""Every script in ``benchmarks/`` runs once in a tiny configuration (STYLE.md 11: benchmarks are not tests,
but a refactor must not break them silently).

Each script is run as a user would, ``python benchmarks/<name>.py ...`` from the repository root, in a
subprocess with ``PBF_BENCH_OUT`` set to a temporary folder (benchmarks/_common.py), on CHAIN-3 / CHAIN-5
for a fraction of a second. It must exit with status 0 and write its JSON (and PNG where it draws one);
the JSON must hold a row for every requested configuration with finite, sane values. Timings are only
checked to be finite and positive: no test asserts how fast anything is.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 600
HAS_MUJOCO = importlib.util.find_spec("mujoco") is not None
PEER_REL_TOL = 1e-2
"""MuJoCo's RK4 and Euler against ours at the same dt on the same chain: the same method, so the same energy
error up to rounding (measured agreement ~1e-7 relative)."""


def run_benchmark(tmp_path: Path, script: str, *args: object) -> tuple[Path, str]:
    """Run ``benchmarks/<script>`` with outputs (and temporary build folders) under ``tmp_path``; returns the
    output folder and stdout."""
    out = tmp_path / "out"
    env = {**os.environ, "PBF_BENCH_OUT": str(out), "TMPDIR": str(tmp_path), "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(Path("benchmarks", script)), *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, (f"{script} exited with {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n"
                                  f"--- stderr\n{proc.stderr[-4000:]}")
    assert f"wrote {out}" in proc.stdout, "the script must say where it wrote, and write to $PBF_BENCH_OUT"
    return out, proc.stdout


def load(out: Path, name: str, png: bool = True) -> dict:
    if png:
        assert (out / f"{name}.png").stat().st_size > 0
    return json.loads((out / f"{name}.json").read_text())


def positive(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def nonnegative(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x >= 0


def check_energy_row(r: dict) -> None:
    """A rollout row of energy.py / work_precision.py that did not diverge."""
    assert not r["diverged"], r
    assert nonnegative(r["error"]), r
    assert 0.0 <= r["rise"] <= r["error"] + 1e-12, r
    assert nonnegative(r["wall"]), r


# ---------------------------------------------------------------------------------------------------------


def test_symbolic_scaling(tmp_path):
    out, _ = run_benchmark(tmp_path, "symbolic_scaling.py", "--sizes", 3, 5, "--batch", 4)
    data = load(out, "symbolic_scaling")
    rows = data["rows"]
    assert {(r["N"], r["what"]) for r in rows} == {(n, w) for n in (3, 5) for w in ("I", "grad", "hess")}
    assert len(rows) == 6
    for r in rows:
        assert r["nq"] == 2 * r["N"]
        assert positive(r["instructions"]) and positive(r["eval_s"]) and nonnegative(r["build_s"]), r
    for what, expected in (("I", 1), ("grad", 1), ("hess", 2)):
        size = {r["N"]: r["instructions"] for r in rows if r["what"] == what}
        assert size[5] > size[3], what
        fit = data["fits"][what]
        assert fit["expected"] == expected
        assert math.isfinite(fit["time"]) and fit["nodes"] > 0, fit


def test_step_cost(tmp_path):
    out, _ = run_benchmark(tmp_path, "step_cost.py", "--sizes", 3, 5, "--duration", 0.1, "--vm-limit", 3)
    data = load(out, "step_cost")
    assert data["dt"] == 0.01
    assert [r["N"] for r in data["rows"]] == [3, 5]
    for r in data["rows"]:
        assert r["nq"] == 2 * r["N"] and r["status"] == "done"
        for k in ("gradient", "hessian", "solve", "iteration", "step", "instructions"):
            assert positive(r[k]), (k, r)
        assert r["iteration"] == pytest.approx(r["hessian"] + r["solve"])
        assert 1.0 <= r["iterations_per_step"] < 100, r
        assert ("vm_step" in r) == (r["N"] <= 3), "--vm-limit picks the sizes measured on the CasADi VM"
        if "vm_step" in r:
            assert positive(r["vm_gradient"]) and positive(r["vm_hessian"]) and positive(r["vm_step"])
    assert set(data["exponents"]) == {"gradient", "hessian", "iteration", "step"}
    assert all(math.isfinite(p) for p in data["exponents"].values())


def test_batch(tmp_path):
    pytest.importorskip("mujoco")
    out, _ = run_benchmark(tmp_path, "batch.py", "--links", 3, "--sizes", 1, 4, "--duration", 0.1, "--repeats", 1)
    data = load(out, "batch")
    assert data["links"] == 3 and data["duration"] == 0.1
    assert data["identical"] is True, "batched rollouts must equal single rollouts on 1 and 2 threads"
    assert [r["M"] for r in data["rows"]] == [1, 4]
    for r in data["rows"]:
        for k in ("pbf_1", "pbf_2", "mj_1", "mj_2", "speedup", "mj_speedup"):
            assert positive(r[k]), (k, r)
        assert r["speedup"] == pytest.approx(r["pbf_1"] / r["pbf_2"]), "one repeat: the ratio of its pair"


def test_compile_time(tmp_path):
    out, stdout = run_benchmark(tmp_path, "compile_time.py", "--models", "chain3:3,chain5:2")
    data = load(out, "compile_time", png=False)
    rows = data["rows"]
    assert [(r["model"], r["order"]) for r in rows] == [("CHAIN-3", 3), ("CHAIN-5", 2)]
    for r, n in zip(rows, (3, 5)):
        first, second = r["first"], r["second"]
        assert r["target_s"] is None, "only the issue's three models have a budget"
        assert first["solver"] == ("jtj_lm" if r["order"] == 3 else "lm")
        assert first["nx"] == (r["order"] - 1) * 2 * n
        assert not first["cached"] and positive(first["compile_s"]), "first build: into an empty cache"
        assert second["cached"] and second["compile_s"] == 0, "second build: nothing compiled"
        assert positive(first["source_bytes"]) and first["source_bytes"] == second["source_bytes"]
        assert positive(first["instructions"]) and first["instructions"] == second["instructions"]
        for k in ("total_s", "problem_s", "kernels_s", "emit_s", "gcc_cpu_s"):
            assert math.isfinite(first[k]), k
    peer = data["peer_flattened_chain3"]
    assert positive(peer["instructions"]) and positive(peer["source_bytes"]) and positive(peer["compile_s"])
    assert peer["function"] == "residual_jacobian" and "CHAIN-3 order 3 flattened residual_jacobian" in stdout
    assert not list(tmp_path.glob("pbf-compile-*")), "the throwaway build folders are removed"


def test_compile_time_rejects_a_malformed_model(tmp_path):
    proc = subprocess.run([sys.executable, "benchmarks/compile_time.py", "--models", "chain3"], cwd=ROOT,
                          env={**os.environ, "PBF_BENCH_OUT": str(tmp_path)}, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert proc.returncode == 2 and "chainN:order" in proc.stderr, proc.stderr
    assert not (tmp_path / "compile_time.json").exists()


def test_energy(tmp_path):
    duration = 0.2
    out, _ = run_benchmark(tmp_path, "energy.py", "--chains", 3, "--duration", duration, "--ne-dt", 0.01,
                           "--pbad-dt", "3:0.02", "--stability-chains", 3, "--name", "energy_tiny")
    data = load(out, "energy_tiny")
    assert data["duration"] == duration and data["pbad_dt"] == {"3": 0.02}
    rows = {r["name"]: r for r in data["fig2"]["3"]["rows"]}
    ne = ["forward_euler", "semi_implicit_euler", "rk2", "rk3", "rk4"]
    assert list(rows) == ne + ["rk4 (reference)"] + (["mujoco_rk4"] if HAS_MUJOCO else []) + ["pbad2", "pbad3"]
    for name, r in rows.items():
        check_energy_row(r)
        steps = round(duration / r["dt"])
        assert len(r["t"]) == len(r["E"]) == steps + 1, name
        assert r["t"][-1] == pytest.approx(duration), name
        assert all(math.isfinite(e) for e in r["E"]), name
    assert rows["rk4"]["dt"] == 0.01 and rows["pbad2"]["dt"] == 0.02 and rows["rk4 (reference)"]["dt"] == 1e-4
    # RK4's error falls as dt^4: the reference at 1e-4 s is far more exact than RK4 at 0.01 s
    assert rows["rk4 (reference)"]["error"] <= rows["rk4"]["error"]
    assert (rows["pbad2"]["solver"], rows["pbad3"]["solver"]) == ("lm", "jtj_lm")
    for name in ("pbad2", "pbad3"):
        assert rows[name]["iterations"] >= 1 and rows[name]["unconverged"] == 0, rows[name]
    if HAS_MUJOCO:
        assert rows["mujoco_rk4"]["error"] == pytest.approx(rows["rk4"]["error"], rel=PEER_REL_TOL)
    stab = data["stability"]
    assert [(r["chain"], r["dt"]) for r in stab] == [(3, 0.05), (3, 0.1)]
    for r in stab:
        check_energy_row(r)
        assert r["rise"] <= 1.0, "the stability criterion: energy never rises more than 1% of the scale"


def test_energy_stopped_and_resumed_equals_one_run(tmp_path):
    """--max-run-seconds 0 stops each PBAD rollout after its first 0.1 s piece; --resume continues it from
    the checkpoint: three runs give the series, counters and verdict of one uninterrupted run."""
    common = ["--chains", 3, "--duration", 0.3, "--ne-dt", 0.05, "--pbad-dt", "3:0.01", "--no-stability",
              "--pbad-orders", 3]
    out, _ = run_benchmark(tmp_path, "energy.py", *common, "--name", "whole")
    whole = load(out, "whole")["fig2"]["3"]["rows"][-1]
    for stop_at in (0.1, 0.2):
        _, stdout = run_benchmark(tmp_path, "energy.py", *common, "--name", "parts", "--resume",
                                  "--max-run-seconds", 0)
        part = load(out, "parts")["fig2"]["3"]["rows"][-1]
        assert part["name"] == f"pbad3 [to {stop_at:g} s]" and part["status"] == "timeout"
        assert len(part["E"]) == round(stop_at / 0.01) + 1
        assert ("resuming from" in stdout) == (stop_at > 0.1)
    # --report-only: the checkpoint as it is (t = 0.2 s), twice, without a step
    for _ in range(2):
        _, stdout = run_benchmark(tmp_path, "energy.py", *common, "--name", "parts", "--resume", "--report-only")
        reported = load(out, "parts")["fig2"]["3"]["rows"][-1]
        assert reported["name"] == "pbad3 [to 0.2 s]" and reported["E"] == part["E"]
        assert reported["iterations"] == part["iterations"] and reported["wall"] == part["wall"]
    _, stdout = run_benchmark(tmp_path, "energy.py", *common, "--name", "parts", "--resume")
    assert "resuming from parts_chain3_pbad3_dt0.01.ckpt.npz at t=0.2 s" in stdout
    part = load(out, "parts")["fig2"]["3"]["rows"][-1]
    assert part["name"] == whole["name"] == "pbad3" and part["status"] == "done"
    assert part["E"] == whole["E"] and part["error"] == whole["error"]
    for key in ("iterations", "halvings", "unconverged"):
        assert part[key] == whole[key], key


def test_energy_limit_ends_a_series_that_gains_energy(tmp_path):
    """--energy-limit: a series ends before its first state more than the limit above its start, diverged
    there ("energy"), for a Newton-Euler rollout and a native PBAD one (stopped in its piece, counters over
    the steps kept) alike; series below the limit are untouched; a checkpoint keeps the verdict."""
    common = ["--chains", 3, "--duration", 0.3, "--ne-dt", 0.01, "--pbad-dt", "3:0.01", "--no-stability",
              "--reference-dt", 0]
    out, _ = run_benchmark(tmp_path, "energy.py", *common, "--energy-limit", "inf", "--name", "free")
    free = {r["name"]: r for r in load(out, "free")["fig2"]["3"]["rows"]}
    scale = load(out, "free")["fig2"]["3"]["scale"]
    limit = 0.003                       # measured rises: forward Euler 0.94%, pbad3 0.0062%, rk2 0.0023%
    assert free["forward_euler"]["rise"] > limit and free["pbad3"]["rise"] > limit > free["rk2"]["rise"]
    out, stdout = run_benchmark(tmp_path, "energy.py", *common, "--energy-limit", limit, "--name", "cut",
                                "--resume")
    cut = {r["name"]: r for r in load(out, "cut")["fig2"]["3"]["rows"]}
    assert list(cut) == list(free)
    for name, r in cut.items():
        rise = (np.asarray(free[name]["E"]) - free[name]["E"][0]) / scale * 100
        if rise.max() <= limit:
            assert not r["diverged"] and r["E"] == free[name]["E"], name
            continue
        j = int(np.argmax(rise > limit))
        assert r["diverged"] and r["diverged_by"] == "energy" and r["diverged_at"] == pytest.approx(j * 0.01), name
        assert r["E"] == free[name]["E"][:j] and math.isinf(r["error"]), name
    assert {n for n, r in cut.items() if r["diverged"]} == {"forward_euler", "pbad3"}
    assert cut["pbad3"]["status"] == "diverged" and cut["pbad3"]["iterations"] > 0
    assert " (E)" in stdout
    # the checkpoint of the stopped PBAD rollout reports the same verdict
    run_benchmark(tmp_path, "energy.py", *common, "--energy-limit", limit, "--name", "cut", "--resume",
                  "--report-only")
    again = {r["name"]: r for r in load(out, "cut")["fig2"]["3"]["rows"]}["pbad3"]
    assert again["E"] == cut["pbad3"]["E"] and again["diverged_by"] == "energy"
    assert again["diverged_at"] == cut["pbad3"]["diverged_at"]


def test_energy_refuses_a_checkpoint_of_another_run(tmp_path):
    """--resume never glues a checkpoint onto a different run: a longer one, or one of another build;
    --report-only without a checkpoint is an error, not an empty series."""
    common = ["--chains", 3, "--ne-dt", 0.05, "--pbad-dt", "3:0.01", "--no-stability", "--pbad-orders", 3,
              "--name", "ck", "--resume"]
    out, _ = run_benchmark(tmp_path, "energy.py", "--duration", 0.2, *common)
    ck = out / "ck_chain3_pbad3_dt0.01.ckpt.npz"
    env = {**os.environ, "PBF_BENCH_OUT": str(out), "MPLBACKEND": "Agg"}

    def rerun(duration, *extra):
        return subprocess.run([sys.executable, "benchmarks/energy.py", "--duration", str(duration),
                               *map(str, common), *extra], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)

    proc = rerun(0.1)
    assert proc.returncode != 0 and "the checkpoint has 20 steps, this run asks for 10" in proc.stderr
    with np.load(ck) as z:
        data = dict(z)
    data["signature"] = np.array("another build")
    np.savez(ck, **data)
    proc = rerun(0.2)
    assert proc.returncode != 0 and "a checkpoint of a different run" in proc.stderr
    ck.unlink()
    proc = rerun(0.2, "--report-only")
    assert proc.returncode != 0 and "--report-only: no checkpoint ck_chain3_pbad3_dt0.01.ckpt.npz" in proc.stderr


def test_solvers(tmp_path):
    out, _ = run_benchmark(tmp_path, "solvers.py", "--ab-chains", 3, "--c-sizes", 3, 5, "--d-chain", 3,
                           "--d-dts", 0.01, 0.05, "--duration", 0.2, "--steps", 4, "--name", "solvers_tiny")
    data = load(out, "solvers_tiny")
    assert data["backend"] == "c"
    variants = {"LM / Eq.5": ("lm", "energy"), "LBFGS / Eq.5": ("lbfgs", "energy"),
                "JtJ-LM / Eq.7": ("jtj_lm", "residual"), "LBFGS / Eq.7": ("lbfgs", "residual")}
    ab = data["ab"]["3"]
    assert set(ab) == set(variants)
    for label, r in ab.items():
        assert (r["solver"], r["objective"]) == variants[label]
        assert (r["n"], r["dt"], r["steps"]) == (3, 0.05, 4), "0.2 s at dt = 0.05 s"
        assert len(r["iterations"]) == 4 and all(i >= 1 for i in r["iterations"]), r
        assert r["unconverged"] == 0 and not r["diverged"] and math.isfinite(r["energy_rise"]), r
        assert positive(r["time_per_step"])
    assert set(data["c"]) == {"LM / Eq.5", "LBFGS / Eq.5", "JtJ-LM / Eq.7"}
    for label, r in data["c"].items():
        assert r["n"] == [3, 5]
        assert len(r["time_per_step"]) == len(r["mean_iter"]) == len(r["time_per_iteration"]) == 2
        assert all(positive(t) for t in r["time_per_step"] + r["time_per_iteration"]), label
        assert all(i >= 1 for i in r["mean_iter"]), label
        assert math.isfinite(r["growth_exponent"]) and math.isfinite(r["iteration_growth_exponent"]), label
    assert set(data["d"]) == {"LM / Eq.5", "LBFGS / Eq.5"}
    for label, r in data["d"].items():
        assert r["dt"] == [0.01, 0.05]
        assert len(r["time_per_step"]) == 2 and all(positive(t) for t in r["time_per_step"]), label
        assert all(i >= 1 for i in r["mean_iter"]), label


def test_peer_mujoco(tmp_path):
    pytest.importorskip("mujoco")
    duration = 0.1
    out, _ = run_benchmark(tmp_path, "peer_mujoco.py", "--links", 3, "--duration", duration, "--orders", 2, 3,
                           "--dts", 0.02, 0.05)
    data = load(out, "peer_mujoco")
    assert data["duration"] == duration and list(data["results"]) == ["CHAIN-3"]
    rows = data["results"]["CHAIN-3"]
    mj = [r for r in rows if r["peer"] == "MuJoCo"]
    ours = [r for r in rows if r["peer"] == "pbframework"]
    assert [r["config"] for r in mj] == ["RK4"] * 4 + ["Euler"] * 4 + ["implicitfast"] * 4
    assert [(r["config"], r["dt"]) for r in ours] == [("pbad2/lm", 0.02), ("pbad2/lm", 0.05),
                                                       ("pbad3/jtj_lm", 0.02), ("pbad3/jtj_lm", 0.05)]
    for r in mj + ours:
        assert not r["diverged"] and not r["timeout"], r
        assert nonnegative(r["error"]) and nonnegative(r["wall"]), r
    for r in mj:
        # MuJoCo's own energy of its states and pbframework's exact energy of the same coordinates agree
        # (read straight after an RK4 mj_step, data.energy is a Runge-Kutta stage's and does not)
        assert r["error_pbf_energy"] == pytest.approx(r["error"], rel=PEER_REL_TOL, abs=1e-9), r
    for r in ours:
        assert r["t_reached"] == pytest.approx(duration), r
        assert r["iterations_per_step"] >= 1 and r["unconverged_steps"] == 0, r
        steps = round(duration / r["dt"])
        assert r["iteration_s"] > 0 and r["floor_wall"] == pytest.approx(steps * r["iteration_s"]), r
    ratios = data["ratios"]["CHAIN-3"]
    assert len(ratios) == len(mj)
    for r in ratios:
        assert r["target"] == pytest.approx(1 / 3)
        if r["pbframework"] is None:
            assert r["ratio"] == math.inf and not r["met"] and r["floor_ratio"] == math.inf
        else:
            assert r["pbframework_error"] <= r["mujoco_error"], "matched: ours at the same or a smaller error"
            assert positive(r["ratio"]) and r["met"] == (r["ratio"] <= r["target"]), r
            floors = [o["floor_wall"] for o in ours if o["error"] <= r["mujoco_error"]]
            assert r["floor_ratio"] == pytest.approx(min(floors) / r["mujoco_wall"]), r
    assert [(b["model"], b["order"]) for b in data["builds"]] == [("CHAIN-3", 2), ("CHAIN-3", 3)]


def test_work_precision(tmp_path):
    duration = 0.2
    out, text = run_benchmark(tmp_path, "work_precision.py", "--links", 3, "--duration", duration,
                              "--largest-dts", 2, "--rtols", "1e-3,1e-4", "--adaptive-orders", "3")
    data = load(out, "work_precision")
    assert data["links"] == 3 and data["duration"] == duration and positive(data["scale"])
    methods = ["forward_euler", "semi_implicit_euler", "rk2", "rk3", "rk4", "pbad2", "pbad3", "pbad4"]
    methods += ["pbad3_adaptive"] + (["mujoco_rk4", "mujoco_euler"] if HAS_MUJOCO else [])
    rows = data["rows"]
    assert [r["method"] for r in rows] == [m for m in methods for _ in range(2)], "the 2 largest dt per method"
    adaptive = [r for r in rows if r["method"] == "pbad3_adaptive"]
    assert [r["rtol"] for r in adaptive] == [1e-3, 1e-4]
    assert all(r["status"] == "ok" and r["accepted"] > 0 and r["backend"] == "c" for r in adaptive)
    assert adaptive[1]["accepted"] > adaptive[0]["accepted"]
    if HAS_MUJOCO:
        assert "adaptive PBAD (c backend) against MuJoCo RK4" in text
    for r in rows:
        check_energy_row(r)
    by = {(r["method"], r["dt"]): r for r in rows}
    assert {dt for m, dt in by if m == "pbad2"} == {0.05, 0.1}
    if HAS_MUJOCO:
        for ours, peer in (("rk4", "mujoco_rk4"), ("semi_implicit_euler", "mujoco_euler")):
            for dt in {dt for m, dt in by if m == peer}:
                assert by[peer, dt]["error"] == pytest.approx(by[ours, dt]["error"], rel=PEER_REL_TOL), (peer, dt)
    assert set(data["summary"]) == {"1.0", "10.0", "50.0"}
    for budget, best in data["summary"].items():
        for m, b in best.items():
            assert m in methods and b["error"] <= float(budget), (budget, m, b)
            assert b["wall"] == min(r["wall"] for r in rows if r["method"] == m and r["error"] <= float(budget))


def test_work_precision_ball_joints(tmp_path):
    """CHAIN-3 on quaternion ball joints: every method runs on the group (Runge-Kutta as RKMK), adaptive
    rows included, and MuJoCo's peer uses ball joints."""
    duration = 0.2
    out, text = run_benchmark(tmp_path, "work_precision.py", "--links", 3, "--duration", duration, "--joint", "ball",
                              "--largest-dts", 1, "--rtols", "1e-3", "--adaptive-orders", "3")
    data = load(out, "work_precision")
    assert data["joint"] == "ball"
    methods = [r["method"] for r in data["rows"]]
    assert methods[:8] == ["forward_euler", "semi_implicit_euler", "rk2", "rk3", "rk4", "pbad2", "pbad3", "pbad4"]
    assert "skipped" not in text
    adaptive = [r for r in data["rows"] if r["method"] == "pbad3_adaptive"]
    assert len(adaptive) == 1 and adaptive[0]["status"] == "ok" and adaptive[0]["accepted"] > 0
    for r in data["rows"]:
        check_energy_row(r)
    if HAS_MUJOCO:
        assert "mujoco_rk4" in methods


def test_backend_agreement(tmp_path):
    """VM against C on CHAIN-3, order 3: full kernels at this size, so identical; every solve converged."""
    out, stdout = run_benchmark(tmp_path, "backend_agreement.py", "--links", 3, "--order", 3, "--dt", 0.01,
                                "--duration", 0.2)
    data = load(out, "backend_agreement")
    assert (data["links"], data["order"], data["dt"], data["steps"], data["steps_compared"]) == (3, 3, 0.01, 20, 20)
    assert "derivatives full" in data["c_plan"]
    assert data["max_difference"] == 0.0 and data["first_different_work"] is None
    assert set(data["first_differing_step"].values()) == {None} and data["at"] == {}
    assert data["unconverged"] == {"vm": 0, "c": 0}
    assert data["energy_error"]["vm"] == data["energy_error"]["c"] and nonnegative(data["energy_error"]["c"])
    assert len(data["difference"]) == 21 and "states differ by > 1e-09: never in 20 steps" in stdout


def test_whip_steps(tmp_path):
    """Single steps redone from a rollout: bitwise the rollout's, grouped by halving depth, against an RK4
    motion that conserves energy; the same from an energy.py checkpoint."""
    out, stdout = run_benchmark(tmp_path, "whip_steps.py", "--chain", 3, "--dt", 0.01, "--until", 0.3,
                                "--from", 0.1, "--every", 5, "--probe-every", 2)
    data = load(out, "whip_steps")
    assert (data["chain"], data["order"], data["dt"]) == (3, 3, 0.01)
    rows = data["rows"]
    assert [round(r["t"], 6) for r in rows] == [0.1, 0.15, 0.2, 0.25]       # steps 10..29 hold ends to 0.3 s
    assert all(r["reproduced"] and r["converged"] for r in rows)
    assert ["probe" in r for r in rows] == [True, False, True, False]
    assert all(r["probe"]["converged"] and r["probe"]["iterations"] >= 1 for r in rows if "probe" in r)
    # the exact motion over 10 ms at 50 substeps: energy to rounding, the step within its truncation error
    assert data["rk4_max_abs_dE"] < 1e-8
    assert all(0 < r["error_q"] < 1e-3 and abs(r["dE"]) < 0.1 for r in rows)
    assert sum(line["steps"] for line in data["summary"]) == len(rows)
    assert "steps reproduced bitwise: 4 of 4" in stdout
    # from a checkpoint of energy.py's order-3 rollout (its name carries the order)
    run_benchmark(tmp_path, "energy.py", "--chains", 3, "--duration", 0.2, "--ne-dt", 0.05, "--pbad-dt",
                  "3:0.01", "--no-stability", "--pbad-orders", 3, "--name", "ck", "--resume")
    ck = out / "ck_chain3_pbad3_dt0.01.ckpt.npz"
    _, stdout = run_benchmark(tmp_path, "whip_steps.py", "--checkpoint", ck, "--from", 0.05, "--every", 4,
                              "--name", "from_ck")
    data = load(out, "from_ck")
    assert (data["chain"], data["order"], data["dt"]) == (3, 3, 0.01)
    assert len(data["rows"]) == 4 and all(r["reproduced"] for r in data["rows"])   # t = 0.05 .. 0.17 s
    for args, message in ((["--checkpoint", out / "none.npz"], "none.npz: no such file"),
                          (["--checkpoint", ck, "--from", 1.0], "no step to sample: the rollout holds steps up to")):
        proc = subprocess.run([sys.executable, "benchmarks/whip_steps.py", *map(str, args)], cwd=ROOT,
                              env={**os.environ, "PBF_BENCH_OUT": str(out)}, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_fd_scaling(tmp_path):
    pytest.importorskip("pinocchio")
    out, _ = run_benchmark(tmp_path, "fd_scaling.py", "--n", 2, 3, "--batch-n", 2, "--batch", 1, 4, "--repeat", 1)
    data = load(out, "fd_scaling")
    variants = [f"{a}/{s}" for a in ("abia", "jsiia", "cfa") for s in ("seq", "par")]
    assert [(r["n"], f"{r['alg']}/{r['schedule']}") for r in data["build"]] == [(n, v) for n in (2, 3)
                                                                                   for v in variants]
    for r in data["build"]:
        assert positive(r["depth"]) and positive(r["src_kB"]) and nonnegative(r["compile_s"]), r
    assert [r["n"] for r in data["accuracy"]] == [2, 3]
    for r in data["accuracy"]:
        assert positive(r["cond_M"]) and r["pin_vs_ref"] < 1e-12, r
        for v in variants:
            assert r[v]["vs_pin"] < 1e-9 and r[v]["vs_ref"] < 1e-9, (v, r)
    assert [r["n"] for r in data["time_vs_n"]] == [2, 3]
    for r in data["time_vs_n"]:
        assert all(positive(r[f"{v}_s"]) for v in variants) and positive(r["pin_aba_s"]), r
    assert [(r["n"], r["B"]) for r in data["batch"]] == [(2, 1), (2, 4)]
    for r in data["batch"]:
        assert all(positive(r[f"{a}_s"]) for a in ("abia", "jsiia", "cfa", "pin_aba")), r
    depth = {r["n"]: r for r in data["depth"]}
    assert {2, 3, 1000} <= set(depth)
    assert all(depth[1000][v] > depth[2][v] for v in variants)


def test_box_slide(tmp_path):
    """Seed 002 Fig. 5 in its quick form: PBFD's distance falls as C_par grows at dt 0.01; PBD's does not;
    MuJoCo (pyramidal and elliptic cones) stands in for the dry-friction model."""
    out, text = run_benchmark(tmp_path, "box_slide.py", "--quick")
    data = load(out, "box_slide")
    rows = data["rows"]
    pbfd = [r["distance"] for r in rows if r["method"] == "pbfd" and r["dt"] == 0.01]
    pbd = [r["distance"] for r in rows if r["method"] == "pbd" and r["dt"] == 0.01]
    assert len(pbfd) == 3 and all(a > b for a, b in zip(pbfd, pbfd[1:]))
    assert not all(a > b for a, b in zip(pbd, pbd[1:]))
    assert all(r["status"] == "ok" and r["wall"] > 0 for r in rows if r["method"] == "pbfd")
    dry = [r["distance"] for r in rows if r["method"] == "ne_dry_friction" and r["dt"] == 0.01]
    assert len(dry) == 3 and all(a > b for a, b in zip(dry, dry[1:]))
    if HAS_MUJOCO:
        assert {r["method"] for r in rows} >= {"mujoco_pyramidal", "mujoco_elliptic"}


def test_pbfd_solvers(tmp_path):
    """Seed 002 Table I in its quick form: every solver on Eq. 6 and Eq. 13 on both scenes, converged."""
    out, text = run_benchmark(tmp_path, "pbfd_solvers.py", "--quick")
    data = load(out, "pbfd_solvers", png=False)
    rows = data["rows"]
    assert len(rows) == 12 and {r["scene"] for r in rows} == {"fixed", "floating"}
    assert {(r["equation"], r["solver"]) for r in rows} == {(e, s) for e in ("Eq. 6", "Eq. 13")
                                                             for s in ("lm", "jtj_lm", "lbfgs")}
    for r in rows:
        assert r["status"] == "ok" and r["unconverged"] == 0 and positive(r["ms_per_step"]), r
        assert r["iterations_per_step"] >= 1


def test_chain_slope(tmp_path):
    """Seed 002 Fig. 6 in its quick form. dt axis: every run of ours ends ok, the baseline and MuJoCo's tiny
    spheres (both cones) slide as Coulomb friction says (0.5 g (sin 20 deg - mu cos 20 deg) t^2 = 0.755 m in
    1 s, within 5%), as do MuJoCo's spheres on the square prism; MuJoCo's capsule chain rolls instead
    (g sin 20 deg t^2 / 3 = 1.118 m in 1 s); every MuJoCo run records its warnings, and the
    time-to-a-consistent-answer summary and ratios are printed. Contact-count axis: denser sampling gives
    more points and more of them in contact, finite distances. Friction axis: the distance falls as the
    friction parameter grows, and the baseline's chain sticks for mu > tan 20 deg."""
    out, text = run_benchmark(tmp_path, "chain_slope.py", "--quick")
    data = load(out, "chain_slope", png=False)
    rows = data["rows"]
    assert {r["method"] for r in rows} >= {"pbfd", "ne_dry_friction"}
    ours = [r for r in rows if not r["method"].startswith("mujoco")]
    assert all(r["status"] == "ok" and r["outcome"] is not None and positive(r["wall"]) for r in ours)
    exact = 0.5 * 9.81 * (math.sin(math.radians(20)) - 0.2 * math.cos(math.radians(20)))
    rolling = 9.81 * math.sin(math.radians(20)) / 3
    for r in rows:
        if r["method"] == "pbfd" or r["dt"] > 0.01 or r["outcome"] is None:
            continue
        assert r["outcome"] == pytest.approx(rolling if "capsule" in r["method"] else exact, rel=0.05), r
    assert set(data["summary"]) >= {"pbfd", "ne_dry_friction"} and "PBFD / ne_dry_friction" in text
    if HAS_MUJOCO:
        mujoco = [r for r in rows if r["method"].startswith("mujoco")]
        assert {r["method"] for r in mujoco} == {f"mujoco_{g}{c}" for g in ("", "capsule_", "prism_")
                                                  for c in ("pyramidal", "elliptic")}
        for r in mujoco:
            assert isinstance(r["warnings"], dict) and positive(r["wall"]), r
            assert (r["outcome"] is None) == (r["status"] != "ok"), r
            assert r["outcome"] is None or math.isfinite(r["outcome"]), r
    # the contact-count axis
    contacts = data["contacts"]
    assert contacts["duration"] > 0 and contacts["dt"] > 0
    for method in ("pbfd", "ne_dry_friction") + (("mujoco_pyramidal", "mujoco_elliptic") if HAS_MUJOCO else ()):
        mine = [r for r in contacts["rows"] if r["method"] == method]
        assert len(mine) == 2, mine
        assert mine[0]["points"] < mine[1]["points"]
        if method.startswith("mujoco") and any(r["outcome"] is None for r in mine):
            continue                                     # MuJoCo went bad: its warning is the result
        assert all(r["outcome"] is not None and math.isfinite(r["outcome"]) and positive(r["wall"]) for r in mine)
        assert 0 < mine[0]["in_contact"] < mine[1]["in_contact"] <= mine[1]["points"], mine
        assert all(0 <= r["penetrating"] <= r["points"] for r in mine), mine
    # the friction axis
    friction = data["friction"]["rows"]
    for method in ("pbfd", "ne_dry_friction"):
        mine = sorted((r for r in friction if r["method"] == method), key=lambda r: r["param"])
        assert len(mine) == 3 and all(r["status"] == "ok" and r["outcome"] is not None for r in mine), mine
        assert all(a["outcome"] >= b["outcome"] for a, b in zip(mine, mine[1:])), mine
    stuck = [r for r in friction if r["method"] == "ne_dry_friction" and r["param"] > math.tan(math.radians(20))]
    assert stuck and all(abs(r["outcome"]) < 0.01 for r in stuck), stuck


def test_quadruped_track(tmp_path):
    """Seed 001's QUADRUPED-TRACK in its quick form (solo12, 0.4 s, dt 5 and 50 ms): every NMDP run and the
    stable-PD NE-MDP stay upright, NE-MDP with the PD at the step's start (the authors' baseline) does not at
    50 ms, the NMDP runs record PGM iterations and Alg. 2 substeps, and the summaries are printed."""
    out, text = run_benchmark(tmp_path, "quadruped_track.py", "--quick")
    data = load(out, "quadruped_track")
    rows = data["rows"]
    ours = [r for r in rows if r["method"] not in ("mujoco", "ne_mdp_pd")]
    assert {r["method"] for r in ours} == {"ne_mdp", "ne_nmdp", "pbd_nmdp"}
    assert {r["task"] for r in ours} == {"walk", "jump"} and {r["dt"] for r in ours} == {0.005, 0.05}
    explicit = [r for r in rows if r["method"] == "ne_mdp_pd"]
    assert {(r["task"], r["dt"]) for r in explicit} == {(k, dt) for k in ("walk", "jump") for dt in (0.005, 0.05)}
    assert not any(r["stable"] for r in explicit if r["dt"] == 0.05)
    assert "Stable or not per method" in text and "ne_mdp_pd/walk: stable at" in text
    assert "Against the dt -> 0 answer" in text and data["reference"] == {"solo12": {}}   # --quick: no small dt
    for r in ours:
        assert r["stable"] and r["status"] == "ok" and positive(r["wall"]), r
        assert r["t_end"] == pytest.approx(0.4)
    for r in (r for r in ours if r["method"] != "ne_mdp"):
        assert r["iterations"] >= 1 and len(r["outer"]) == len(r["substep"]) == round(0.4 / r["dt"])
        assert all(0 < s <= r["dt"] for s in r["substep"])
    assert "Table I" in text and "Time to a consistent answer" in text and "Fig. 6 at dt = 50 ms" in text
    if HAS_MUJOCO:
        assert any(r["method"] == "mujoco" for r in rows)


DERIV_TOL = 1e-9
"""pbframework's exact step Jacobians against the Richardson references of benchmarks/derivatives.py (measured
on CHAIN-3: 8e-13 state, 9e-12 control; the references resolve about 1e-11)."""


def test_derivatives(tmp_path):
    """Issue 20's derivative benchmark in its quick form (CHAIN-3): the exact Jacobians (VM, generated C, the
    plain casadi.jacobian route, rk4) match their references, the C build agrees with the VM, MuJoCo's finite
    differences are measured against their own reference, and the ratios are printed."""
    import shutil

    out, text = run_benchmark(tmp_path, "derivatives.py", "--quick")
    data = load(out, "derivatives")
    rows = data["rows"]
    ours = [r for r in rows if r["backend"] != "mujoco" and r["err_s"] is not None]
    assert {r["method"] for r in ours} >= {"pbad2 exact", "pbad2 casadi.jacobian", "rk4 exact"}
    for r in rows:
        assert r["model"] == "CHAIN-3" and positive(r["time"]), r
    for r in ours:
        assert r["err_s"] <= DERIV_TOL and r["err_u"] <= DERIV_TOL, r
        assert nonnegative(r["ref_est_s"]) and nonnegative(r["ref_est_u"])
    c_rows = [r for r in ours if r["backend"] == "c"]
    if shutil.which("gcc"):
        assert c_rows and all(r["c_vs_vm"] <= 1e-12 and nonnegative(r["compile_s"]) for r in c_rows)
        assert any(r["method"] == "pbad2 step alone (no Jacobian)" for r in rows)
    if HAS_MUJOCO:
        mj = {r["method"]: r for r in rows if r["backend"] == "mujoco"}
        assert set(mj) == {"MuJoCo implicitfast FD centred", "MuJoCo implicitfast FD forward"}
        for r in mj.values():
            assert nonnegative(r["err_s"]) and nonnegative(r["err_u"]) and len(r["err_scan"]) == len(r["eps_scan"])
        assert mj["MuJoCo implicitfast FD forward"]["err_s"] > mj["MuJoCo implicitfast FD centred"]["err_s"]
        assert {(s["model"], s["ours"]) for s in data["summary"]} == {("CHAIN-3", "pbad2"), ("CHAIN-3", "rk4")}
        assert all(positive(s["ratio_centred"]) and positive(s["ratio_forward"]) for s in data["summary"])
        assert "ours / MuJoCo implicitfast FD" in text and "MuJoCo FD error" in text


def test_distributed(tmp_path):
    pytest.importorskip("dask.distributed", reason="dask.distributed is not installed (extra: distributed)")
    out, stdout = run_benchmark(tmp_path, "dask_batch.py", "--links", 3, "--size", 8, "--duration", 0.1,
                                "--repeats", 1, "--overhead-chunks", 8)
    data = json.loads((out / "distributed.json").read_text())
    assert [r["config"] for r in data["rows"]] == ["threads", "dask-1", "dask-2"]
    assert all(r["identical"] for r in data["rows"]), "chunks on the workers must equal the threaded batch"
    assert [r.get("chunks") for r in data["rows"]] == [None, 1, 2]
    for k in ("library_bytes", "ship_seconds", "core_seconds_per_trajectory"):
        assert positive(data[k]), k
    assert nonnegative(data["overhead_per_chunk"]) and "overhead per chunk" in stdout


def test_render_speed(tmp_path):
    """``pbf render``'s timings in their quick form: a row per job and format, one frame per 1/fps of simulated
    time, a file written; the panda's rows where example-robot-data and the meshes' readers are installed."""
    pytest.importorskip("imageio_ffmpeg", reason="MP4 needs the 'render' extra")
    out, stdout = run_benchmark(tmp_path, "render_speed.py", "--links", 3, "--duration", 0.3, "--panda-duration", 0.1,
                                "--fps", 10)
    rows = load(out, "render_speed", png=False)
    chain = [r for r in rows if r["job"] == "CHAIN-3"]
    assert sorted(r["format"] for r in chain) == ["gif", "mp4"]
    for r in rows:
        assert positive(r["wall_s"]) and r["bytes"] > 0, r
    assert all(r["frames"] == 4 for r in chain)
    assert all(r["frames"] == 2 for r in rows if r["job"].startswith("panda"))
