"""Emitting C (pure) and building it (compiler, cache, loader): pbframework.codegen.emit / .build."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import casadi as ca
import numpy as np
import pytest

from pbframework.codegen.build import BatchRunner, BuildError, build_shared, cache_dir, load_function
from pbframework.codegen.emit import CSource, emit_c

pytestmark = pytest.mark.skipif(subprocess.run(["which", "gcc"], capture_output=True).returncode != 0,
                                reason="needs gcc")


def small_function(name: str = "poly") -> ca.Function:
    x, y = ca.SX.sym("x", 3), ca.SX.sym("y", 2)
    return ca.Function(name, [x, y], [ca.sin(x) * y[0] + y[1], ca.dot(x, x)], ["x", "y"], ["z", "r"])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("PBF_CACHE_DIR", str(d))
    return d


# -- emit ---------------------------------------------------------------------------------------------

def test_emit_is_pure_and_deterministic(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a, b = emit_c(small_function()), emit_c(small_function())
    assert list(tmp_path.iterdir()) == []                       # nothing written
    assert isinstance(a, CSource) and a.sha256 == b.sha256
    assert a.functions == ("poly",)
    for sym in ("int poly(", "int poly_batch(", "int poly_repeat(", "poly_work("):
        assert sym in a.text
    assert "malloc" not in a.text
    assert "#define casadi_real double" in a.text                 # -Dcasadi_real=float overrides it


def test_emit_rejects_bad_names():
    with pytest.raises(ValueError, match="not a C identifier"):
        emit_c(small_function(), name="has space")
    with pytest.raises(ValueError, match="duplicate function names"):
        emit_c([small_function(), small_function()])
    with pytest.raises(ValueError, match="no functions"):
        emit_c([])


# -- build, cache, load -------------------------------------------------------------------------------

def test_build_load_and_batch(cache):
    f = small_function()
    lib = build_shared(emit_c(f))
    assert lib.path.is_file() and str(lib.path).startswith(str(cache)) and cache_dir() == cache
    assert not lib.cached and lib.compile_seconds > 0 and lib.flags[0] == "-O1"
    g = load_function(lib)
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(7, 3)), rng.normal(size=(7, 2))
    for k in range(3):
        for out_f, out_g in zip(f(X[k], Y[k]), g(X[k], Y[k])):
            assert np.allclose(np.asarray(out_f), np.asarray(out_g), rtol=1e-15, atol=1e-15)
    runner = BatchRunner(lib, f)
    Z, R = runner(X, Y)
    assert Z.shape == (7, 3) and R.shape == (7, 1)
    for k in range(7):
        z, r = f(X[k], Y[k])
        assert np.allclose(Z[k], np.asarray(z).ravel(), rtol=1e-15) and np.isclose(R[k, 0], float(r))
    assert runner.time_per_call([X, Y], reps=10) > 0
    bound = runner.bind(X, Y)
    Zb, Rb = bound()
    assert np.array_equal(Zb, Z) and np.array_equal(Rb, R) and bound()[0] is Zb
    with pytest.raises(ValueError, match="needs 3 values per instance"):
        runner(Y, Y)


def test_cache_hit_flags_and_corruption(cache):
    src = emit_c(small_function())
    first = build_shared(src)
    again = build_shared(src)
    assert again.cached and again.path == first.path and again.compile_seconds == 0.0
    assert again.build_seconds == pytest.approx(first.compile_seconds)
    other = build_shared(src, opt="-O2")
    assert other.key != first.key                                 # flags are part of the key
    # a truncated library is detected (size / sha256 in meta.json) and rebuilt
    data = first.path.read_bytes()
    first.path.write_bytes(data[: len(data) // 2])
    rebuilt = build_shared(src)
    assert not rebuilt.cached and rebuilt.path.read_bytes() == data
    # a missing meta.json also forces a rebuild
    (rebuilt.path.parent / "meta.json").unlink()
    assert not build_shared(src).cached


def test_single_precision_source_compiles(cache):
    lib = build_shared(emit_c(small_function("polyf")), flags=("-Dcasadi_real=float",))
    assert lib.path.is_file()


def test_compiler_errors_are_reported(cache):
    bad = CSource("broken", "int broken( { return 0; }\n", ("broken",))
    with pytest.raises(BuildError, match="compiling broken failed"):
        build_shared(bad)
    assert not any(p.name.startswith(".broken") for p in cache.iterdir())   # temp dir cleaned up


def test_two_processes_building_at_once_are_safe(cache, tmp_path):
    """Both processes publish the same entry; the loser discards its copy; no temp dirs remain."""
    script = tmp_path / "build_one.py"
    script.write_text(textwrap.dedent("""
        import casadi as ca
        from pbframework.codegen.emit import emit_c
        from pbframework.codegen.build import build_shared, load_function
        x = ca.SX.sym("x", 4)
        f = ca.Function("race", [x], [ca.exp(x) * 2])
        lib = build_shared(emit_c(f))
        print(float(load_function(lib)([1, 2, 3, 4])[0]))
    """))
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert abs(float(out.strip()) - 2 * np.e) < 1e-12
    entries = [p for p in Path(cache).iterdir()]
    assert len([p for p in entries if p.name.startswith("pbf_race-")]) == 1
    assert not [p for p in entries if p.name.startswith(".")]
