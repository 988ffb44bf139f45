"""The browser viewer (issue 26): ``pbf view FILE.npz`` and :func:`view`, on viser.

A local web server (viser: pip-installable, serves its page itself, needs no network) shows the motion in 3-D:
every link a scene node (``/traj<m>/<link>``) carrying the link's display geometry
(:mod:`pbframework.display`), posed at the package's forward kinematics (:func:`pbframework.render.link_transforms`,
evaluated numerically) of the sample on the timeline. Beside it: the timeline slider (the first failure marked
on it), play / pause, the playback speed (simulated time against wall time), the energy curve, the step
verdicts (0 converged, 1 converged after halving, 2 unconverged) and the run's status line. The model's
contact points are drawn at each sample (red below the ground plane z = 0), and the contact forces as green
segments from each point (scaled so the largest is a quarter of the scene's extent) where the trajectory's
force models give them as a function of the state (``info["force_specs"]``, :meth:`ForceModel.contact_forces`:
penalty contact and PBFD's normal force; not the forces of a QP step). A batch
(:class:`~pbframework.result.BatchTrajectory`) is overlaid: one copy of the model per trajectory, each in its
own colour, each held at its last state after it ended (at most :data:`MAX_OVERLAY` of them).

The model is rebuilt from what ``pbf simulate`` stored in the file (``info["model_source"]``: a built-in's name
and parameters, or a model file's path and sha256), or given. Needs the ``view`` extra: ``pip install
'pbframework[view]'``.
"""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from .model import ArticulatedBody, ModelError

__all__ = ["view", "Viewer", "ViewError", "MAX_OVERLAY"]

MAX_OVERLAY = 32
"""Trajectories of a batch the viewer overlays at most (the first ones)."""

_PALETTE = ((77, 128, 199), (230, 126, 34), (46, 160, 67), (214, 39, 40), (148, 103, 189), (140, 86, 75),
            (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207))


class ViewError(ValueError):
    """The viewer cannot start: a port in use, a trajectory of another model; the message says which."""


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ViewError(f"view: cannot serve on {host}:{port} ({exc.strerror or exc}); pass another --port "
                            f"(port=...), or 0 for a free one") from None


def _load(traj) -> list:
    """The trajectories to show: one, a batch's (cut at their ends), or those of a list."""
    from .result import BatchTrajectory, Trajectory

    if isinstance(traj, (str, Path)):
        try:
            traj = Trajectory.load(traj)
        except ValueError:
            traj = BatchTrajectory.load(traj)
    if isinstance(traj, Trajectory):
        return [traj]
    if isinstance(traj, BatchTrajectory):
        return [traj[m] for m in range(min(len(traj), MAX_OVERLAY))]
    trajs = list(traj)
    if not trajs or not all(isinstance(t, Trajectory) for t in trajs):
        raise ViewError("view: expected a Trajectory, a BatchTrajectory, a list of Trajectory or a .npz path")
    return trajs[:MAX_OVERLAY]


class Viewer:
    """A running viewer (from :func:`view`).

    Attributes:
        server: the ``viser.ViserServer``.
        url: where the page is served, ``http://host:port``.
        model: the model drawn.
        trajectories: the trajectories shown (a batch's first :data:`MAX_OVERLAY`).
        times: the timeline's sample times (the longest trajectory's).
        title: one line naming the model and the run.
        marks: the timeline's marks, ``(sample, label)``: its ends and the first failure (``"failure"``).
        first_failure: ``(trajectory, time, sample)`` of the earliest failure, or None.
    """

    def __init__(self, trajs: list, model: ArticulatedBody, host: str, port: int) -> None:
        try:
            import viser
            import viser.transforms as vtf
        except ImportError:
            from .display import missing_extra

            raise missing_extra("view", "the viewer", "viser") from None
        from .display import display_geometry
        from .render import link_transforms

        for m, tr in enumerate(trajs):
            nq = np.asarray(tr.q).shape[1]
            if nq != model.nq:
                raise ModelError(f"view: trajectory {m} has {nq} coordinates but model {model.name!r} has "
                                 f"nq = {model.nq} (a trajectory of another model)")
        self.model, self.trajectories = model, trajs
        longest = max(trajs, key=lambda tr: len(tr.t))
        self.times = np.asarray(longest.t, float)
        info = trajs[0].info
        self.title = (f"{model.name}, {info.get('integrator')} order {info.get('order')}, dt={info.get('dt')} s"
                      + (f", {len(trajs)} trajectories" if len(trajs) > 1 else ""))
        # poses of every link at every sample: (trajectories, samples, links, 4, 4)
        self._T = [link_transforms(model, np.asarray(tr.q, float)) for tr in trajs]
        self._wxyz = [np.asarray(vtf.SO3.from_matrix(T[:, :, :3, :3]).wxyz, float) for T in self._T]
        # each trajectory's sample at every timeline sample: the last one at or before that time
        self._index = [np.clip(np.searchsorted(np.asarray(tr.t, float), self.times + 1e-12, side="right") - 1, 0,
                               len(tr.t) - 1) for tr in trajs]
        if port == 0:
            port = _free_port(host)
        _check_port(host, port)
        with contextlib.redirect_stdout(io.StringIO()):          # viser's banner: the caller prints the URL
            self.server = viser.ViserServer(host=host, port=port, verbose=False)
        if self.server.get_port() != port:                        # viser moved to another port: refuse
            self.server.stop()
            raise ViewError(f"view: port {port} on {host} is in use; pass another --port (port=...)")
        self.url = f"http://{host}:{port}"
        self._stop = threading.Event()
        self._sample = 0
        self._playhead = float(self.times[0])
        try:
            self._camera()
            self._scene(display_geometry(model), len(trajs) > 1)
            self._gui()
            self.set_sample(0)
        except BaseException:                                     # e.g. a mesh reader missing: free the port
            self.server.stop()
            raise
        self._player = threading.Thread(target=self._play_loop, name="pbf-view-player", daemon=True)
        self._player.start()

    # -- scene ---------------------------------------------------------------------------------------------
    def _scene(self, display, overlay: bool) -> None:
        from .display import visual_mesh

        scene = self.server.scene
        model = self.model
        meshes = {}
        self.frames: list[list[Any]] = []
        for m in range(len(self.trajectories)):
            colour = _PALETTE[m % len(_PALETTE)]
            handles = []
            for i, link in enumerate(model.links):
                h = scene.add_frame(self.node(m, link.name), show_axes=False)
                for k, v in enumerate(display.links.get(link.name, ())):
                    key = (link.name, k)
                    if key not in meshes:
                        meshes[key] = visual_mesh(v, max_faces=4000 if overlay else None)
                    V, F = meshes[key]
                    rgb = colour if overlay or v.color is None else tuple(int(255 * c) for c in v.color[:3])
                    scene.add_mesh_simple(f"{self.node(m, link.name)}/visual{k}", V.astype(np.float32), F, color=rgb,
                                          opacity=None if not overlay else 0.8)
                handles.append(h)
            self.frames.append(handles)
        for k, v in enumerate(display.world):
            V, F = visual_mesh(v)
            scene.add_mesh_simple(f"/world/visual{k}", V.astype(np.float32), F, color=(180, 180, 180))
        self.contacts, self._F = [], None
        if model.n_contacts:
            from .kinematics import contact_positions

            P = contact_positions(model)
            self._P = [np.asarray(P.map(len(tr.q))(np.asarray(tr.q, float).T)).reshape(3, len(tr.q), -1)
                       .transpose(1, 2, 0) for tr in self.trajectories]
            extent = max(float(np.ptp(np.concatenate([p.reshape(-1, 3) for p in self._P]), axis=0)[:2].max()), 1.0)
            scene.add_grid("/ground", width=2 * extent, height=2 * extent, plane="xy")
            self.contacts = [scene.add_point_cloud(f"/traj{m}/contacts", np.zeros((model.n_contacts, 3)),
                                                   np.zeros((model.n_contacts, 3), np.uint8), point_size=0.03,
                                                   precision="float32", point_shape="circle")
                             for m in range(len(self.trajectories))]
            self._F = self._contact_forces()
            if self._F is not None:
                peak = max(float(np.abs(F).max()) for F in self._F)
                self.force_scale = 0.25 * extent / peak if peak > 0 else 0.0   # the largest force: extent / 4
                self.force_lines = [scene.add_line_segments(f"/traj{m}/contact_forces",
                                                            np.zeros((model.n_contacts, 2, 3), np.float32),
                                                            (20, 140, 40), thickness=0.004)
                                    for m in range(len(self.trajectories))]

    def _contact_forces(self) -> list | None:
        """Per trajectory the world force on every contact point at every sample (samples, points, 3), summed
        over the force models of ``info["force_specs"]`` that give one (:meth:`ForceModel.contact_forces`:
        penalty contact, PBFD's normal force); ``None`` when none does."""
        from .forces import force_model

        models = []
        for name, params in self.trajectories[0].info.get("force_specs") or []:
            try:
                f = force_model(name, **params)
                if f.contact_forces(self.model, np.zeros(self.model.nq) if not self.model.on_group
                                    else self.model.neutral(), np.zeros(self.model.nv), 0.0) is not None:
                    models.append(f)
            except Exception:  # noqa: BLE001 - a force of a plug-in not installed here: nothing to draw
                continue
        if not models:
            return None
        import casadi as ca

        q, v = ca.SX.sym("q", self.model.nq), ca.SX.sym("v", self.model.nv)
        total = sum(ca.SX(f.contact_forces(self.model, q, v, 0.0)) for f in models)
        fn = ca.Function("contact_forces", [q, v], [total])
        out = []
        for tr in self.trajectories:
            Q, V = np.asarray(tr.q, float), np.asarray(tr.qd, float)
            F = np.asarray(fn.map(len(Q))(Q.T, V.T)).reshape(3, len(Q), -1)
            out.append(F.transpose(1, 2, 0))
        return out

    def contact_force_segments(self, m: int = 0) -> np.ndarray:
        """The contact-force arrows of trajectory ``m`` as set on the scene (points, 2, 3): from each contact
        point to the point plus ``force_scale`` times its force (server side)."""
        return np.asarray(self.force_lines[m].points, float)

    def _camera(self) -> None:
        """z up; the first view looks at the centre of every link origin over the motion, from far enough to
        see them all."""
        origins = np.concatenate([T[:, :, :3, 3].reshape(-1, 3) for T in self._T])
        lo, hi = origins.min(axis=0), origins.max(axis=0)
        centre, radius = 0.5 * (lo + hi), max(0.5 * float(np.linalg.norm(hi - lo)), 0.3)
        self.server.scene.set_up_direction("+z")
        self.server.initial_camera.look_at = centre
        self.server.initial_camera.position = centre + 2.2 * radius * np.array([0.55, -0.7, 0.45])

    @staticmethod
    def node(m: int, link: str) -> str:
        """The scene node name of link ``link`` of trajectory ``m``."""
        return f"/traj{m}/{link.replace('/', '_')}"

    # -- controls ------------------------------------------------------------------------------------------
    def _gui(self) -> None:
        import viser.uplot as uplot

        gui = self.server.gui
        n = len(self.times)
        gui.add_markdown(f"**{self.title}**")
        failures = [(m, tr.failure_time) for m, tr in enumerate(self.trajectories) if tr.failure_time is not None]
        marks: list = [(0, "0"), (n - 1, f"{self.times[-1]:.3g} s")]
        self.first_failure = None
        if failures:
            m, ft = min(failures, key=lambda x: x[1])
            k = int(np.clip(np.searchsorted(self.times, ft - 1e-12), 0, n - 1))
            self.first_failure = (m, float(ft), k)
            marks.append((k, "failure"))
        self.marks = tuple(marks)
        self.slider = gui.add_slider("Sample", 0, max(n - 1, 1), 1, 0, marks=self.marks)
        self.time_text = gui.add_text("t [s]", "0", disabled=True)
        self.play = gui.add_checkbox("Play", False)
        self.speed = gui.add_dropdown("Speed", ("0.1", "0.25", "0.5", "1", "2", "4"), initial_value="1")
        self.slider.on_update(lambda _: self.set_sample(int(self.slider.value)))
        status = [tr.status_line() for tr in self.trajectories]
        if len(status) == 1:
            gui.add_markdown(status[0])
        else:
            ok = sum(tr.ok for tr in self.trajectories)
            first = (f"; first failure: trajectory {self.first_failure[0]} at t={self.first_failure[1]:.4g} s"
                     if self.first_failure else ".")
            gui.add_markdown(f"{ok} of {len(status)} trajectories ok{first}")
        ended = [self.times > float(tr.t[-1]) + 1e-12 for tr in self.trajectories]
        E = np.array([np.where(end, np.nan, np.asarray(tr.energy, float)[ix])
                      for tr, ix, end in zip(self.trajectories, self._index, ended)])
        series = [uplot.Series(label="t [s]")]
        series += [uplot.Series(label="energy [J]" if len(E) == 1 else f"E{m}", width=1.5,
                                stroke="rgb({},{},{})".format(*_PALETTE[m % len(_PALETTE)])) for m in range(len(E))]
        data = [self.times, *E]
        if self.first_failure is not None:
            fail = np.full(n, np.nan)
            m, _, k = self.first_failure
            fail[k] = self.trajectories[m].energy[self._index[m][k]]
            data.append(fail)
            series.append(uplot.Series(label="first failure", stroke="red", width=0,
                                       points=uplot.Series_Points(show=True, size=10, fill="red")))
        self.energy_plot = gui.add_uplot(tuple(data), tuple(series), title="Energy", aspect=1.6,
                                          scales={"x": {"time": False}})
        outcome = np.full((len(self.trajectories), max(n - 1, 1)), np.nan)
        for m, tr in enumerate(self.trajectories):                   # step j ends at sample j + 1
            oc = np.asarray(tr.stats.get("outcome", np.zeros(len(tr.t) - 1)), float)
            if len(oc) and n > 1:
                outcome[m] = np.where(ended[m][1:], np.nan, oc[np.clip(self._index[m][1:] - 1, 0, len(oc) - 1)])
        self.verdict_plot = gui.add_uplot(
            (self.times[1:] if n > 1 else self.times, *outcome),
            (uplot.Series(label="t [s]"),
             *[uplot.Series(label="step outcome" if len(outcome) == 1 else f"outcome {m}", width=1,
                            stroke="rgb({},{},{})".format(*_PALETTE[m % len(_PALETTE)])) for m in range(len(outcome))]),
            title="Step verdicts: 0 converged, 1 halved, 2 unconverged", aspect=2.5,
            scales={"x": {"time": False}, "y": {"auto": False, "range": (-0.2, 2.2)}})

    def _play_loop(self) -> None:
        """While ``Play`` is ticked, move the playhead at ``Speed`` times wall time (looping at the end)."""
        last = time.perf_counter()
        while not self._stop.wait(1.0 / 30.0):
            now = time.perf_counter()
            elapsed, last = now - last, now
            if not self.play.value or len(self.times) < 2:
                continue
            t = self._playhead + float(self.speed.value) * elapsed
            self._playhead = t if t <= self.times[-1] else float(self.times[0])
            k = int(np.searchsorted(self.times, self._playhead, side="right") - 1)
            if k != self._sample:
                self.slider.value = k                                  # on_update poses the links

    # -- state ---------------------------------------------------------------------------------------------
    def set_sample(self, k: int) -> None:
        """Pose every link of every trajectory at sample ``k`` of the timeline: each trajectory at its last sample
        at or before that time (one that ended earlier stays at its last state)."""
        k = int(np.clip(k, 0, len(self.times) - 1))
        self._sample = k
        if not self.times[k] <= self._playhead < (self.times[k + 1] if k + 1 < len(self.times) else np.inf):
            self._playhead = float(self.times[k])                      # moved by hand: play on from here
        with self.server.atomic():
            for m, handles in enumerate(self.frames):
                km = self._index[m][k]
                for i, h in enumerate(handles):
                    h.position = self._T[m][km, i, :3, 3]
                    h.wxyz = self._wxyz[m][km, i]
                if self.contacts:
                    P = self._P[m][km]
                    self.contacts[m].points = P.astype(np.float32)
                    below = P[:, 2:3] <= 0.0                              # at or under the ground plane
                    self.contacts[m].colors = np.where(below, [[220, 30, 30]], [[30, 30, 30]]).astype(np.uint8)
                    if self._F is not None:
                        ends = P + self.force_scale * self._F[m][km]
                        self.force_lines[m].points = np.stack([P, ends], axis=1).astype(np.float32)
        self.time_text.value = f"{self.times[k]:.4f}"
        if int(self.slider.value) != k:
            self.slider.value = k

    @property
    def sample(self) -> int:
        """The timeline's sample."""
        return self._sample

    def link_poses(self, m: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Link name -> ``(position, wxyz)`` as set on the scene nodes of trajectory ``m`` (server side)."""
        return {link.name: (np.asarray(h.position, float), np.asarray(h.wxyz, float))
                for link, h in zip(self.model.links, self.frames[m])}

    def wait(self) -> None:
        """Serve until interrupted (KeyboardInterrupt) or closed."""
        while not self._stop.wait(0.5):
            pass

    def close(self) -> None:
        """Stop playing and serving (the port is free again)."""
        if not self._stop.is_set():
            self._stop.set()
            self._player.join(timeout=2.0)
            self.server.stop()

    def __enter__(self) -> "Viewer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def view(traj, *, model: ArticulatedBody | None = None, host: str = "127.0.0.1", port: int = 8080,
         block: bool = True) -> Viewer:
    """Show ``traj`` in the browser viewer and return it (module docstring).

    Args:
        traj: a :class:`~pbframework.result.Trajectory`, a :class:`~pbframework.result.BatchTrajectory`, a list
            of trajectories of one model, or the path of a ``.npz`` saved by ``pbf simulate --out``.
        model: the model that made it (default: rebuilt from ``info["model_source"]``).
        host: the address to serve on (default this machine only; ``"0.0.0.0"``: every interface).
        port: the port (0: a free one).
        block: print the URL and serve until interrupted (then close); False: return the running viewer at
            once (close it with :meth:`Viewer.close`, or use it as a context manager).

    Raises:
        ImportError: viser is not installed (one line naming ``pip install 'pbframework[view]'``).
        ViewError: the port is in use.
        ModelError: the model cannot be rebuilt, or the trajectory has another number of coordinates.
    """
    from .render import model_from_source

    trajs = _load(traj)
    if model is None:
        model = model_from_source(trajs[0].info.get("model_source") or {}, who="view")
    viewer = Viewer(trajs, model, host, int(port))
    if block:
        try:
            print(f"Viewer of {viewer.title} at {viewer.url} (Ctrl-C to stop).", flush=True)
            viewer.wait()
        except KeyboardInterrupt:
            pass
        finally:
            viewer.close()
    return viewer
