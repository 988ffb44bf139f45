"""The build cache of generated libraries: hits, invalidation, concurrent builds, corrupt entries.

Each test uses its own cache folder (``tmp_path``) and a two-link chain, whose step library compiles in
about a second.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import pbframework as pbf
from pbframework.codegen.build import (build_shared, cache_clear, cache_dir, cache_entries, cache_info,
                                       compiler_version, default_cache_dir)
from pbframework.codegen.step_library import emit_step_library
from pbframework.codegen.step_runner import CRunner
from pbframework.simulate import Simulator


def _problem(mass: float = 1.0):
    model = pbf.models.chain(2, mass=mass)
    return Simulator(model, "pbad", order=2, solver="lm", dt=0.02).problem, model


def test_second_build_is_a_cache_hit(tmp_path):
    problem, _ = _problem()
    first = CRunner(problem, "lm", cache=tmp_path)
    second = CRunner(problem, "lm", cache=tmp_path)
    assert not first.library.cached and first.library.compile_seconds > 0
    assert second.library.cached and second.library.compile_seconds == 0.0
    assert second.library.path == first.library.path
    assert len(cache_entries(tmp_path)) == 1


def test_changed_model_or_flags_build_a_new_entry(tmp_path):
    a, _ = _problem(1.0)
    b, _ = _problem(2.0)
    ra = CRunner(a, "lm", cache=tmp_path)
    rb = CRunner(b, "lm", cache=tmp_path)
    rf = CRunner(a, "lm", cache=tmp_path, real="float")
    assert not rb.library.cached and not rf.library.cached
    assert len({ra.library.key, rb.library.key, rf.library.key}) == 3
    assert len(cache_entries(tmp_path)) == 3


def test_two_processes_building_the_same_model_at_once(tmp_path):
    script = textwrap.dedent("""
        import sys, numpy as np, pbframework as pbf
        from pbframework.simulate import Simulator
        from pbframework.codegen.step_runner import CRunner
        model = pbf.models.chain(2)
        problem = Simulator(model, "pbad", order=2, solver="lm", dt=0.02).problem
        r = CRunner(problem, "lm", cache=sys.argv[1])
        out = r.rollout(pbf.models.chain_q0(model), np.zeros(model.nq), 0.0, 0.02, 5)
        print(out.status, float(out.q[-1].sum()).hex())
    """)
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert outs[0][0].split() == outs[1][0].split() and outs[0][0].startswith("done")
    entries = cache_entries(tmp_path)
    assert len(entries) == 1 and entries[0].valid
    assert not [e for e in tmp_path.iterdir() if e.name.startswith(".")]   # no temporary folders left


def test_truncated_library_is_detected_and_rebuilt(tmp_path):
    problem, model = _problem()
    source, _ = emit_step_library(problem, "lm")
    # build without loading (a library mapped into this process must not be truncated under it)
    lib = build_shared(source, flags=("-pthread", "-ffp-contract=off"), cache=tmp_path)   # CRunner's flags
    data = lib.path.read_bytes()
    lib.path.write_bytes(data[: len(data) // 3])             # a half-written file
    assert cache_info(tmp_path)["invalid"] == 1
    again = CRunner(problem, "lm", cache=tmp_path)
    assert not again.library.cached and again.library.path == lib.path   # rebuilt in place, not loaded
    q0 = pbf.models.chain_q0(model)
    out = again.rollout(q0, np.zeros(model.nq), 0.0, 0.02, 5)
    traj = Simulator(model, "pbad", order=2, solver="lm", dt=0.02).rollout(q0, steps=5)
    assert out.status == "done" and np.max(np.abs(out.q - traj.q)) <= 1e-10
    assert cache_info(tmp_path)["invalid"] == 0


def test_cache_info_and_clear(tmp_path):
    problem, _ = _problem()
    CRunner(problem, "lm", cache=tmp_path)
    info = cache_info(tmp_path)
    assert info["entries"] == 1 and info["bytes"] > 0 and info["invalid"] == 0
    assert cache_clear(tmp_path) == 1
    assert cache_info(tmp_path)["entries"] == 0


def test_pbf_cache_command(tmp_path, monkeypatch, capsys):
    from pbframework.cli import main

    monkeypatch.setenv("PBF_CACHE_DIR", str(tmp_path))
    problem, _ = _problem()
    CRunner(problem, "lm")
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path) in out and "1 libraries" in out
    assert f"built with {compiler_version()}: 1" in out                 # the compiler, from the entry's meta
    entry, = cache_entries(tmp_path)
    assert entry.compiler == compiler_version() and "-O1" in entry.flags
    assert main(["cache", "clear"]) == 0
    assert "Removed 1 cached library" in capsys.readouterr().out
    assert cache_info(tmp_path)["entries"] == 0


def test_cache_location_follows_the_platform_and_the_override(monkeypatch, tmp_path):
    from platformdirs import user_cache_dir

    monkeypatch.delenv("PBF_CACHE_DIR")
    assert cache_dir() == default_cache_dir() == Path(user_cache_dir("pbframework", appauthor=False))
    monkeypatch.setenv("PBF_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path


@pytest.mark.session_end
def test_the_suite_leaves_the_default_cache_untouched(default_cache_at_start):
    """Run after every other test of the session (conftest.py orders it last): the session's cache is not the
    user's default location, and that location is as the session found it (absent, or the same entries,
    sizes and times)."""
    from conftest import folder_state

    default, before = default_cache_at_start
    assert cache_dir().resolve() != default.resolve()
    assert Path(os.environ["PBF_CACHE_DIR"]).resolve() != default.resolve()
    assert folder_state(default) == before, f"the test session wrote the user's cache {default}"
