"""The browser viewer (pbframework.view, ``pbf view``; issue 26), headless: the server side of viser, and one
test in a real headless browser (marker ``browser``)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import pbframework as pbf
from pbframework import models
from pbframework.cli import main
from pbframework.kinematics import contact_positions, forward_kinematics
from pbframework.model import ModelError

pytest.importorskip("viser", reason="the viewer needs the 'view' extra: pip install 'pbframework[view]'")

from viser.transforms import SO3  # noqa: E402

from pbframework.display import MissingExtra  # noqa: E402
from pbframework.view import ViewError, Viewer  # noqa: E402

FK_TOL = 1e-9
"""Link poses on the scene nodes against the forward kinematics of the same sample."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chain3():
    m = models.chain(3)
    tr = pbf.Simulator(m, "pbad", order=2, dt=0.05).rollout(models.chain_q0(m), np.zeros(m.nq), 1.0)
    tr.info["model_source"] = {"builtin": "chain", "params": {"n": 3}}
    return m, tr


@pytest.fixture
def viewer(chain3):
    m, tr = chain3
    v = pbf.view(tr, model=m, port=0, block=False)
    yield v
    v.close()


def _fk_check(v: Viewer, q: np.ndarray, m: int = 0) -> None:
    T = np.asarray(forward_kinematics(v.model)(q))
    poses = v.link_poses(m)
    for i, link in enumerate(v.model.links):
        pos, wxyz = poses[link.name]
        np.testing.assert_allclose(pos, T[:3, 4 * i + 3], rtol=0, atol=FK_TOL)
        np.testing.assert_allclose(SO3(wxyz).as_matrix(), T[:3, 4 * i:4 * i + 3], rtol=0, atol=FK_TOL)


def test_page_served_one_node_per_link_and_timeline_poses_at_forward_kinematics(viewer, chain3):
    m, tr = chain3
    assert viewer.url.startswith("http://127.0.0.1:")
    page = urllib.request.urlopen(viewer.url, timeout=10).read().decode()
    assert "<html" in page.lower()
    names = [h.name for h in viewer.frames[0]]
    assert names == [f"/traj0/{link.name}" for link in m.links]                 # one node per link
    for k in (0, 7, len(tr.t) - 1):
        viewer.slider.value = k                                               # the timeline, as a user moves it
        assert viewer.sample == k
        _fk_check(viewer, tr.q[k])


def test_play_advances_the_timeline(viewer):
    viewer.slider.value = 0
    viewer.speed.value = "4"
    viewer.play.value = True
    deadline = time.time() + 10
    while viewer.sample == 0 and time.time() < deadline:
        time.sleep(0.05)
    viewer.play.value = False
    assert viewer.sample > 0


def test_other_model_and_port_in_use_are_one_clear_line(chain3, tmp_path, capsys):
    m, tr = chain3
    with pytest.raises(ModelError, match=r"has 6 coordinates but model 'chain2' has nq = 4"):
        pbf.view(tr, model=models.chain(2), port=0, block=False)
    wrong = pbf.Trajectory(tr.t, tr.q, tr.qd, tr.kinetic, tr.potential, tr.energy, dict(tr.stats),
                           info=dict(tr.info, model_source={"builtin": "chain", "params": {"n": 2}}))
    assert main(["view", str(wrong.save(tmp_path / "wrong.npz")), "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pbf: error: view: trajectory 0 has 6 coordinates but model 'chain2' has nq = 4 (a trajectory "
                   "of another model)"]
    npz = tr.save(tmp_path / "c.npz")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ViewError, match=f"cannot serve on 127.0.0.1:{port}"):
            pbf.view(tr, model=m, port=port, block=False)
        assert main(["view", str(npz), "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pbf: error: view: cannot serve on") and "--port" in err[0]


def test_missing_viser_names_the_pip_command(chain3, monkeypatch):
    m, tr = chain3
    monkeypatch.setitem(sys.modules, "viser", None)
    with pytest.raises(MissingExtra, match=r"pip install 'pbframework\[view\]'"):
        pbf.view(tr, model=m, port=0, block=False)


def test_first_failure_marked_on_timeline_and_energy(chain3):
    m, tr = chain3
    failed = pbf.Trajectory(tr.t, tr.q, tr.qd, tr.kinetic, tr.potential, tr.energy, dict(tr.stats),
                            info=dict(tr.info, status="unconverged", failure_time=float(tr.t[12])))
    with pbf.view(failed, model=m, port=0, block=False) as v:
        assert v.first_failure == (0, float(tr.t[12]), 12)
        assert (12, "failure") in v.marks
        series = [s["label"] for s in v.energy_plot.series]
        assert "first failure" in series
        marker = np.asarray(v.energy_plot.data[-1], float)
        assert np.flatnonzero(np.isfinite(marker)).tolist() == [12]


def test_batch_overlaid_each_held_at_its_end(chain3):
    m, tr = chain3
    short = pbf.Trajectory(tr.t[:5], tr.q[:5], tr.qd[:5], tr.kinetic[:5], tr.potential[:5], tr.energy[:5],
                           {k: v[:4] for k, v in tr.stats.items()}, info=dict(tr.info))
    q_other = tr.q[:, ::-1].copy()
    other = pbf.Trajectory(tr.t, q_other, tr.qd, tr.kinetic, tr.potential, tr.energy, dict(tr.stats),
                           info=dict(tr.info))
    with pbf.view([tr, short, other], model=m, port=0, block=False) as v:
        assert [h.name for h in v.frames[2]] == [f"/traj2/{link.name}" for link in m.links]
        v.slider.value = 10
        _fk_check(v, tr.q[10], 0)
        _fk_check(v, short.q[4], 1)                                   # ended at sample 4: stays there
        _fk_check(v, q_other[10], 2)


def test_trajectories_on_other_time_grids_follow_the_timeline_time(chain3):
    m, tr = chain3                                                     # dt 0.05
    coarse = pbf.Simulator(m, "pbad", order=2, dt=0.1).rollout(models.chain_q0(m), np.zeros(m.nq), 1.0)
    with pbf.view([coarse, tr], model=m, port=0, block=False) as v:
        np.testing.assert_allclose(v.times, tr.t)                      # the longest grid is the timeline
        v.slider.value = 5                                             # t = 0.25 s: the coarse run's 0.2 s
        _fk_check(v, coarse.q[2], 0)
        _fk_check(v, tr.q[5], 1)


def test_a_saved_batch_is_overlaid(tmp_path):
    m = models.chain(2)
    sim = pbf.Simulator(m, "pbad", order=2, dt=0.05)
    q0 = np.stack([models.chain_q0(m, z) for z in (0.1, 0.3, 0.5)])
    batch = sim.rollout_batch(q0, np.zeros_like(q0), 0.3)
    batch.info["model_source"] = {"builtin": "chain", "params": {"n": 2}}
    npz = batch.save(tmp_path / "b.npz")
    with pbf.view(npz, port=0, block=False) as v:
        assert len(v.frames) == 3 and len(v.energy_plot.data) == 1 + 3          # t, one energy curve each
        v.slider.value = 5
        for k in range(3):
            _fk_check(v, batch.q[k, 5], k)


def test_contact_points_follow_the_model(tmp_path):
    m = models.box()
    q0 = np.zeros(m.nq)
    q0[2], q0[3] = 0.5, 0.3
    tr = pbf.Simulator(m, "pbad", order=2, dt=0.05).rollout(q0, np.zeros(m.nv), 0.5)
    with pbf.view(tr, model=m, port=0, block=False) as v:
        v.slider.value = 6
        P = np.asarray(contact_positions(m)(tr.q[6])).T
        np.testing.assert_allclose(np.asarray(v.contacts[0].points, float), P, atol=1e-6)   # float32 on the wire
        below = np.asarray(v.contacts[0].colors)[:, 0] == 220
        assert below.tolist() == (P[:, 2] <= 0).tolist()


def test_contact_forces_are_drawn_from_the_saved_force_models(tmp_path):
    """A box dropped on the ground with penalty contact: the saved trajectory names its force models
    (info["force_specs"]), and at sample k every arrow runs from a contact point to that point plus the scale
    times the penalty force there (server side)."""
    m = models.box()
    q0 = np.zeros(m.nq)
    q0[2] = 0.12
    forces = ["gravity", ("penalty_contact", {"stiffness": 2e4, "friction": 50.0})]
    tr = pbf.Simulator(m, "rk4", dt=1e-3, forces=forces).rollout(q0, np.zeros(m.nv), 0.3)
    path = tr.save(tmp_path / "box.npz")
    assert [name for name, _ in pbf.Trajectory.load(path).info["force_specs"]] == ["gravity", "penalty_contact"]
    contact = pbf.force_model("penalty_contact", stiffness=2e4, friction=50.0)
    with pbf.view(pbf.Trajectory.load(path), model=m, port=0, block=False) as v:
        assert v.force_scale > 0
        for k in (0, 150, 299):
            v.slider.value = k
            P = np.asarray(contact_positions(m)(tr.q[k])).T
            F = np.asarray(contact.contact_forces(m, tr.q[k], tr.qd[k], 0.0)).T
            seg = v.contact_force_segments()
            np.testing.assert_allclose(seg[:, 0], P, atol=1e-6)
            np.testing.assert_allclose(seg[:, 1], P + v.force_scale * F, atol=1e-5)
        peak = max(np.abs(np.asarray(contact.contact_forces(m, q, qd, 0.0))).max() for q, qd in zip(tr.q, tr.qd))
        assert peak > 1.0                                  # the box lands: forces of newtons were drawn


def test_penalty_contact_forces_sum_to_its_generalised_force_on_a_free_box():
    """contact_forces is the same physics as the generalised-force form: on a free box (base at the origin,
    identity orientation) the points' forces sum to the form's linear force."""
    m = models.box()
    contact = pbf.force_model("penalty_contact", stiffness=1e4, friction=30.0)
    q = m.neutral()
    q[2] = -0.01
    v = np.zeros(m.nv)
    v[:3] = (0.3, -0.2, -0.1)
    F = np.asarray(contact.contact_forces(m, q, v, 0.0))
    f = np.asarray(contact.generalized_force(m, q, v, 0.0)).ravel()
    np.testing.assert_allclose(F.sum(axis=1), f[:3], rtol=1e-12, atol=1e-9)


@pytest.mark.slow
def test_pbf_view_cli_serves_the_page_until_ctrl_c(chain3, tmp_path):
    """Served until Ctrl-C, then exits 0 saying so. The child gets SIGINT's default disposition: a test run
    started in the background without job control (``cmd &`` in a script) inherits SIGINT ignored, and Python
    then never raises KeyboardInterrupt (a CI run hung here that way)."""
    m, tr = chain3
    npz = tr.save(tmp_path / "c.npz")
    port = _free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "pbframework.cli", "view", str(npz), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = proc.stdout.readline()
        assert f"at http://127.0.0.1:{port} " in line and "chain3" in line
        assert b"<html" in urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=10).read().lower()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"pbf view did not exit within 30 s of Ctrl-C (killed); stderr: {err[-2000:]!r}")
    assert proc.returncode == 0 and "Viewer stopped." in out and err == "", (proc.returncode, out, err)


def _browser():
    """A headless Chromium driven by selenium, or the reason there is none."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None, "selenium is not installed (pip install selenium)"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        return None, "no chromium and chromium-driver on PATH (apt-get install chromium chromium-driver)"
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,800",
              "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        return webdriver.Chrome(service=Service(driver), options=opts), ""
    except Exception as exc:                                  # the driver cannot start the browser here
        return None, f"chromium does not start here: {str(exc).splitlines()[0]}"


@pytest.mark.browser
@pytest.mark.slow
def test_page_draws_in_a_real_browser_without_console_errors(viewer):
    drv, why = _browser()
    if drv is None:
        pytest.skip(why)
    try:
        drv.get(viewer.url)
        deadline, blank = time.time() + 60, True
        while time.time() < deadline and blank:
            time.sleep(1.0)
            canvases = drv.find_elements("tag name", "canvas")
            if not canvases:
                continue
            png = canvases[0].screenshot_as_png
            from io import BytesIO

            from PIL import Image

            px = np.asarray(Image.open(BytesIO(png)).convert("RGB"), float)
            blank = px.std() < 1.0
        assert not blank, "the canvas stayed blank"
        if os.environ.get("PBF_VIEW_SCREENSHOT"):                      # to look at it by eye
            Path(os.environ["PBF_VIEW_SCREENSHOT"]).write_bytes(png)
        errors = [e for e in drv.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors
    finally:
        drv.quit()
