"""Headless rendering of a trajectory to an animated GIF (issue 26, first part): ``pbf render`` and
:func:`render`.

Each link is drawn as the segments from its frame's origin to its children's joint origins (a leaf link: to
twice its centre of mass, the far end of a uniform rod), with the model's contact points as dots and the
ground plane where the model has contact points; the camera is matplotlib's 3-D view (``elev``, ``azim``), the
axes fitted to the whole motion. Frames are sampled from the trajectory at ``fps`` (linear interpolation of
the configurations on vector-space coordinates, the nearest sample for quaternion joints) and written by
matplotlib's Pillow writer, so nothing beyond the package's own dependencies is needed, and no display.

``pbf render FILE.npz --out anim.gif`` rebuilds the model from what ``pbf simulate`` stored in the file
(``info["model_source"]``: a built-in model's name and builder parameters, or a model file's path and its
sha256, checked). Not built yet (issue 26): display meshes, MP4, the browser viewer ``pbf view``.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import numpy as np

from .model import ArticulatedBody, ModelError

__all__ = ["render", "model_source", "model_from_source"]


def model_source(name: str | None = None, params: dict | None = None, path: str | Path | None = None,
                 **load_options: Any) -> dict:
    """What :func:`model_from_source` needs to rebuild a model: a built-in's name and builder parameters, or a
    model file's absolute path, sha256 and loader options."""
    if path is not None:
        p = Path(path).resolve()
        return {"path": str(p), "sha256": hashlib.sha256(p.read_bytes()).hexdigest(), "options": load_options}
    return {"builtin": name, "params": dict(params or {})}


def model_from_source(source: dict) -> ArticulatedBody:
    """The model :func:`model_source` described.

    Raises:
        ModelError: no source, a model file that is gone or has changed since the run (sha256 differs).
    """
    if not source:
        raise ModelError("render: the trajectory does not say which model made it (save it with pbf simulate, or "
                         "pass the model: render(traj, out, model=...))")
    if "path" in source:
        p = Path(source["path"])
        if not p.is_file():
            raise ModelError(f"render: the model file {str(p)!r} that made the trajectory is gone")
        if hashlib.sha256(p.read_bytes()).hexdigest() != source.get("sha256"):
            raise ModelError(f"render: the model file {str(p)!r} changed since the run (sha256 differs)")
        from .io import load_mjcf, load_urdf

        load = load_urdf if p.suffix.lower() == ".urdf" else load_mjcf
        return load(p, **source.get("options", {}))
    from .cli import BUILDERS

    name = source.get("builtin")
    if name not in BUILDERS:
        raise ModelError(f"render: unknown built-in model {name!r}")
    return BUILDERS[name][0](**source.get("params", {}))


def _segments(model: ArticulatedBody) -> list[tuple[int, np.ndarray]]:
    """``(link index, point in that link's frame)`` pairs: each link's segment ends."""
    ends: dict[int, list[np.ndarray]] = {i: [] for i in range(len(model.links))}
    for j in model.joints:
        if j.parent in (None, "world") or j.parent not in [lk.name for lk in model.links]:
            continue
        ends[model.link_index(j.parent)].append(np.asarray(j.origin, float)[:3, 3])
    for i, link in enumerate(model.links):
        if not ends[i] and np.linalg.norm(link.com) > 1e-9:
            ends[i].append(2.0 * np.asarray(link.com, float))
    return [(i, e) for i, es in ends.items() for e in es]


def _frames(traj, model: ArticulatedBody, fps: float) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(traj.t, float)
    times = np.arange(t[0], t[-1] + 1e-12, 1.0 / fps)
    if model.on_group:
        idx = np.clip(np.searchsorted(t, times), 0, len(t) - 1)
        return times, np.asarray(traj.q)[idx]
    return times, np.column_stack([np.interp(times, t, np.asarray(traj.q)[:, k]) for k in range(model.nq)])


def render(traj, out: str | Path, *, model: ArticulatedBody | None = None, fps: float = 30.0,
           elev: float = 20.0, azim: float = -60.0, size: float = 4.0, dpi: int = 80) -> dict:
    """Write ``traj`` (a :class:`~pbframework.result.Trajectory` or a path to its ``.npz``) as an animated GIF.

    Args:
        traj: the trajectory.
        out: the ``.gif`` to write.
        model: the model that made it (default: rebuilt from ``traj.info["model_source"]``).
        fps: frames per second of the animation (simulated time runs at real speed).
        elev, azim: the camera's elevation and azimuth (degrees).
        size, dpi: figure size (inches, square) and resolution.

    Returns:
        ``{"path", "frames", "seconds"}`` (wall seconds spent).

    Raises:
        ModelError: the model cannot be rebuilt, or its ``nq`` does not match the trajectory's.
        ValueError: an output that is not ``.gif``, a non-positive ``fps``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation, PillowWriter

    from .kinematics import contact_positions, forward_kinematics
    from .result import Trajectory

    t_start = time.perf_counter()
    out = Path(out)
    if out.suffix.lower() != ".gif":
        raise ValueError(f"render: the output must be a .gif file (MP4 is not built yet), got {str(out)!r}")
    if not (isinstance(fps, (int, float)) and np.isfinite(fps) and fps > 0):
        raise ValueError(f"render: fps must be a positive number, got {fps!r}")
    if not isinstance(traj, Trajectory):
        traj = Trajectory.load(traj)
    model = model if model is not None else model_from_source(traj.info.get("model_source") or {})
    if np.asarray(traj.q).shape[1] != model.nq:
        raise ModelError(f"render: the trajectory has {np.asarray(traj.q).shape[1]} coordinates but model "
                         f"{model.name!r} has nq = {model.nq}")
    times, Q = _frames(traj, model, float(fps))
    T = np.asarray(forward_kinematics(model).map(len(Q))(Q.T)).reshape(4, len(Q), len(model.links) * 4)
    segs = _segments(model)
    starts = np.array([[T[:3, k, 4 * i + 3] for i, _ in segs] for k in range(len(Q))])          # frames x segs x 3
    ends = np.array([[T[:3, k, 4 * i:4 * i + 3] @ e + T[:3, k, 4 * i + 3] for i, e in segs] for k in range(len(Q))])
    contacts = (np.asarray(contact_positions(model).map(len(Q))(Q.T)).reshape(3, len(Q), -1).transpose(1, 2, 0)
                if model.n_contacts else np.zeros((len(Q), 0, 3)))
    pts = np.concatenate([starts.reshape(-1, 3), ends.reshape(-1, 3), contacts.reshape(-1, 3)])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    centre, half = 0.5 * (lo + hi), 0.5 * max(float(np.max(hi - lo)), 1e-3) * 1.05
    fig = plt.figure(figsize=(size, size), dpi=dpi)
    ax = fig.add_subplot(projection="3d")
    ax.view_init(elev=elev, azim=azim)
    for setter, c in zip((ax.set_xlim, ax.set_ylim, ax.set_zlim), centre):
        setter(c - half, c + half)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_zlabel("z")
    if model.n_contacts:
        g = np.linspace(-1, 1, 2) * half
        X, Y = np.meshgrid(centre[0] + g, centre[1] + g)
        ax.plot_surface(X, Y, np.zeros_like(X), alpha=0.15, color="grey")
    lines = [ax.plot([], [], [], "-", lw=3, color="tab:blue")[0] for _ in segs]
    dots = ax.plot([], [], [], "o", ms=3, color="tab:red")[0]
    title = ax.set_title("")

    def draw(k):
        for line, a, b in zip(lines, starts[k], ends[k]):
            line.set_data_3d([a[0], b[0]], [a[1], b[1]], [a[2], b[2]])
        if contacts.shape[1]:
            dots.set_data_3d(contacts[k, :, 0], contacts[k, :, 1], contacts[k, :, 2])
        title.set_text(f"{model.name}   t = {times[k]:.2f} s")
        return [*lines, dots, title]

    out.parent.mkdir(parents=True, exist_ok=True)
    FuncAnimation(fig, draw, frames=len(Q), blit=False).save(str(out), writer=PillowWriter(fps=float(fps)))
    plt.close(fig)
    return {"path": out, "frames": len(Q), "seconds": time.perf_counter() - t_start}
