"""The README's Python snippets are executed documentation: each must run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_python_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_snippet_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(BLOCKS[index], f"README.md[python block {index}]", "exec"), {"__name__": "__readme__"})


MAIN_JOB = re.search(r"```bash\n(pbf simulate [^\n]*)\n```", README.read_text())


@pytest.mark.slow
def test_main_job_runs_as_written_and_prints_what_the_readme_says(tmp_path, monkeypatch, capsys):
    """The README's main job, run as written: ends ok, and every figure README quotes for it (energy
    drift, accepted and rejected steps) is within 10% of the run's (a count of 10 or fewer: within one)."""
    from pbframework.cli import main

    assert MAIN_JOB, "README has no ```bash block with the pbf simulate main job"
    argv = MAIN_JOB.group(1).split()[1:]
    monkeypatch.chdir(tmp_path)
    assert main(argv + ["--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Status: ok.")
    assert (tmp_path / "traj.npz").stat().st_size > 0 and (tmp_path / "energy.png").stat().st_size > 0
    text = README.read_text()
    quoted = re.search(r"energy drift of ([\d.]+)% of\s+the energy scale, (\d+) accepted and (\d+) rejected", text)
    assert quoted, "README no longer quotes the main job's figures in the form this test reads"
    drift = float(re.search(r"max\|E-E0\| = ([\d.]+)%", out).group(1))
    accepted, rejected = (int(v) for v in re.search(r"(\d+) accepted, (\d+) rejected", out).groups())
    assert drift == pytest.approx(float(quoted.group(1)), rel=0.1), (drift, quoted.group(1))
    assert accepted == pytest.approx(int(quoted.group(2)), rel=0.1)
    assert abs(rejected - int(quoted.group(3))) <= max(1, 0.1 * int(quoted.group(3)))


@pytest.mark.slow
def test_main_job_at_a_fixed_step_fails_as_the_readme_says(tmp_path, monkeypatch, capsys):
    """The README's failing variant (the main job without --adaptive --rtol): exit 3 at the time it quotes."""
    from pbframework.cli import main

    words = MAIN_JOB.group(1).split()[1:]
    rtol = words.index("--rtol")
    argv = [a for i, a in enumerate(words) if a != "--adaptive" and i not in (rtol, rtol + 1)]
    monkeypatch.chdir(tmp_path)
    assert main(argv + ["--no-progress"]) == 3
    out = capsys.readouterr().out
    quoted = re.search(r"`(Status: UNCONVERGED at t=[\d.]+ s) \.\.\.`", README.read_text())
    assert quoted and out.startswith(quoted.group(1) + ":"), (quoted, out[:120])
    assert (tmp_path / "traj.npz").stat().st_size > 0 and (tmp_path / "energy.png").stat().st_size > 0
