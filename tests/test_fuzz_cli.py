"""Property-based fuzzing of ``pbf`` (issue 27): generated argument lists for ``pbf simulate`` and ``pbf
export`` mixing valid options with the bad values a new user types (NaN, inf, 1e-300, negative counts,
unknown names, misspelt parameters, paths under regular files, empty paths, huge models and step counts,
options the integrator would ignore). Every outcome is a run whose exit status matches its verdict (0 ok, 1
diverged, 3 unconverged; a summary on stdout, the named files written) or a one-line ``pbf: error:`` with
exit status 2, within the per-case bound (``tests/_fuzz.py``). No case compiles C (the ``c`` backend is
left out: compiling is minutes, not a property of the argument checks).
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pbframework as pbf
from pbframework.cli import main

from _fuzz import long_profile, profile, run_case, write_report

VALUES = {
    "--links": ("1", "2", "3", "0", "-1", "1.5", "100000", "abc", ""),
    "--dt": ("0.01", "0.05", "1e-300", "0", "-0.1", "nan", "inf", "abc", "1e300", ""),
    "--duration": ("0.05", "0.1", "1e300", "0", "-1", "nan", "inf", "1e-300", "x"),
    "--integrator": ("rk4", "semi_implicit_euler", "pbad", "verlet", "", "RK4"),
    "--order": ("2", "3", "0", "-3", "2.5", "99"),
    "--solver": ("auto", "lm", "newton", ""),
    "--objective": ("auto", "energy", "residual", "x"),
    "--fd": ("aba", "jsiia", "cfa", "featherstone"),
    "--force": ("gravity", "none", "joint_damping:damping=0.1", "joint_damping:dampng=0.1", "wind", "pd:kp",
                "gravity:", "joint_damping:damping=nan", "joint_damping:damping='x'", "pd:kp=1e400"),
    "--param": ("joint=revolute", "length=0.5", "lenght=0.5", "n=4", "mass=-1", "length=nan", "joint=planar",
                "n=1e9", "=", "mass=1e308"),
    "--q0": ("0.1,0.2", "nan,0", "a,b", "missing.npy", "", "1e308,1e308"),
    "--qd0": ("0,0", "inf,0", "fast", ""),
    "--max-iter": ("5", "0", "-1", "1e3"),
    "--max-halvings": ("0", "4", "-1", "x"),
    "--on-failure": ("stop", "continue", "raise"),
    "--energy-limit": ("100", "0", "-5", "nan", "inf"),
    "--rtol": ("1e-4", "0", "-1", "nan"),
    "--backend": ("casadi", "cuda", ""),
    "--max-steps": ("100", "0", "-1", "10000000000"),
    "--max-links": ("5", "0", "1000"),
    "--max-memory": ("1", "0", "-1", "nan", "1e-9"),
    "--model": ("missing.urdf", "robot.txt", "{tmp}", "{file}", "", "{urdf}", "{urdf}"),
    "--out": ("{tmp}/t.npz", "{file}/t.npz", "", "{tmp}", "/proc/t.npz", "{tmp}/t.csv", "{tmp}/" + "a" * 300 + ".npz",
              "{tmp}/missing/t.npz"),
    "--plot": ("{tmp}/e.png", "{tmp}/e.txt", "{file}/e.png", ""),
}
FLAGS = ("--adaptive", "--balance-inertia", "--no-progress")


@st.composite
def argv(draw):
    model = draw(st.sampled_from(("chain", "chain", "swimmer", "box", "spider", "robot", None)))
    args = ["simulate"] + ([model] if model else [])
    args += ["--integrator", "rk4", "--duration", "0.05", "--no-progress"]    # a fast base
    if model in ("chain", "swimmer"):
        args += ["--links", "2"]
    for opt in draw(st.lists(st.sampled_from(sorted(VALUES)), max_size=4)):
        args += [opt, draw(st.sampled_from(VALUES[opt]))]
    args += draw(st.lists(st.sampled_from(FLAGS), max_size=1, unique=True))
    return args


def _resolve(args: list[str], tmp: Path) -> list[str]:
    regular = tmp / "regular_file"
    regular.write_text("x")
    robots = pbf.models.example_robot_data_dir()
    urdf = (robots / "double_pendulum_description/urdf/double_pendulum.urdf") if robots else regular
    return [a.replace("{tmp}", str(tmp)).replace("{file}", str(regular)).replace("{urdf}", str(urdf)) for a in args]


def _run(args: list[str]):
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            rc = main(args)
        except SystemExit as exc:           # argparse's own errors, through pbf's one-line handler
            rc = exc.code
    return args, rc, out.getvalue(), err.getvalue()


def _check(result) -> str | None:
    args, rc, out, err = result
    if rc == 2:
        lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("pbf: warning:")]
        assert len(lines) == 1 and lines[0].startswith("pbf: error:"), f"exit 2 without one error line: {err!r}"
        assert "Traceback" not in err
        return "clean_error"
    assert rc in (0, 1, 3), f"exit status {rc}"
    assert out.startswith("Status: "), f"no summary: {out[:200]!r}"
    verdict = out.split()[1].rstrip(".").lower()
    assert {"ok": 0, "diverged": 1, "unconverged": 3}.get(verdict) == rc, f"exit {rc} for status {verdict!r}"
    for opt in ("--out", "--plot"):
        if opt in args:
            path = Path(args[len(args) - 1 - args[::-1].index(opt) + 1])
            assert path.is_file() and f"saved to {path}." in out, f"{opt} {path} not written where printed"


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    write_report()


def _fuzz(tmp_path_factory, args, name):
    tmp = tmp_path_factory.mktemp("cli")
    resolved = _resolve(args, tmp)
    cwd = os.getcwd()
    os.chdir(tmp)                                   # relative names (missing.npy, robot.txt) resolve here
    try:
        run_case(name, lambda: _run(resolved), _check, f"pbf {' '.join(resolved)}")
    finally:
        os.chdir(cwd)


@given(args=argv())
@profile("cli", long=os.environ.get("PBF_FUZZ") == "long")
def test_generated_argument_lists(tmp_path_factory, args):
    _fuzz(tmp_path_factory, args, "cli")


@pytest.mark.slow
@given(args=argv())
@profile("cli", long=True)
@long_profile
def test_generated_argument_lists_long_profile(tmp_path_factory, args):
    _fuzz(tmp_path_factory, args, "cli_long")


@pytest.mark.parametrize("extra,message", [
    (["--dt", "1e-300"], "more than the limit of 10000000 steps (--max-steps raises it)"),
    (["--duration", "1e300"], "more than the limit of 10000000 steps (--max-steps raises it)"),
    (["--links", "100000"], "100000 links, more than the limit of 1000 (--max-links raises it)"),
    (["--out", "{file}/t.npz"], "is a file, not a folder"),
    (["--out", ""], "--out: empty path"),
    (["--solver", "lm"], "integrator 'rk4' is explicit"),
    (["--max-iter", "5"], "--max-iter would be ignored"),
    (["--on-failure", "continue"], "--on-failure would be ignored"),
])
def test_issue_examples_fail_before_any_work(tmp_path, monkeypatch, extra, message):
    """The issue's CLI examples, each a one-line error before a model is built."""
    def build(*args, **kwargs):
        raise AssertionError("the model was built before the options were checked")

    monkeypatch.setattr("pbframework.cli._load_model", build)
    base = ["simulate", "chain", "--integrator", "rk4", "--no-progress"]
    args, rc, out, err = _run(_resolve(base + extra, tmp_path))
    assert rc == 2 and err.startswith("pbf: error:") and message in err and len(err.strip().splitlines()) == 1


def test_raised_limit_lets_the_run_through(tmp_path):
    args = ["simulate", "chain", "--links", "2", "--integrator", "rk4", "--dt", "0.01", "--duration", "0.5",
            "--no-progress", "--force", "none"]
    assert _run(args + ["--max-steps", "10"])[1] == 2
    out = tmp_path / "t.npz"
    _, rc, stdout, _ = _run(args + ["--max-steps", "50", "--out", str(out)])
    assert rc == 0 and out.is_file() and f"Trajectory saved to {out}." in stdout
