"""Headless rendering of a trajectory to an animated GIF or an MP4 (issue 26): ``pbf render`` and :func:`render`.

Each link is drawn with its display geometry (:mod:`pbframework.display`: URDF visual meshes and primitives,
collision shapes, or capsules / boxes consistent with the inertia), flat shaded under a fixed light, with the
model's contact points as dots and the ground plane where the model has contact points. Mesh files are read by
trimesh and decimated to ``max_faces`` triangles each (extra ``render``). The picture is matplotlib's 3-D
view (no display, no GPU): the camera is a :class:`Camera` (elevation, azimuth, roll, target, extent; the view
fitted to the whole motion by default). Frames are sampled from the trajectory at ``fps`` (linear interpolation
of the configurations on vector-space coordinates, the nearest sample for quaternion joints), simulated time
at real speed. A ``.gif`` is written by Pillow (a dependency of matplotlib, so nothing extra is needed); an
``.mp4`` (H.264) by the ffmpeg that ``imageio-ffmpeg`` bundles: ``pip install 'pbframework[render]'``.

``pbf render FILE.npz --out anim.gif|anim.mp4`` rebuilds the model from what ``pbf simulate`` stored in the
file (``info["model_source"]``: a built-in model's name and builder parameters, or a model file's path and its
sha256, checked).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .model import ArticulatedBody, ModelError

__all__ = ["render", "Camera", "link_transforms", "model_source", "model_from_source", "RENDER_FORMATS"]

RENDER_FORMATS = (".gif", ".mp4")
"""Extensions :func:`render` writes."""


@dataclass(frozen=True)
class Camera:
    """Where :func:`render` looks from.

    Attributes:
        elev: elevation above the x-y plane, degrees.
        azim: azimuth about the z axis, degrees.
        roll: roll about the viewing axis, degrees.
        target: the point at the centre of the picture (world, m); None: the centre of the whole motion.
        extent: half the width of the cube in view (m); None: fitted to the whole motion.
    """

    elev: float = 20.0
    azim: float = -60.0
    roll: float = 0.0
    target: Sequence[float] | None = None
    extent: float | None = None

def model_source(name: str | None = None, params: dict | None = None, path: str | Path | None = None,
                 **load_options: Any) -> dict:
    """What :func:`model_from_source` needs to rebuild a model: a built-in's name and builder parameters, or a
    model file's absolute path, sha256 and loader options."""
    if path is not None:
        p = Path(path).resolve()
        return {"path": str(p), "sha256": hashlib.sha256(p.read_bytes()).hexdigest(), "options": load_options}
    return {"builtin": name, "params": dict(params or {})}


def model_from_source(source: dict, who: str = "render") -> ArticulatedBody:
    """The model :func:`model_source` described.

    Raises:
        ModelError: no source, a model file that is gone or has changed since the run (sha256 differs).
    """
    if not source:
        raise ModelError(f"{who}: the trajectory does not say which model made it (save it with pbf simulate, or "
                         "pass the model: model=...)")
    if "path" in source:
        p = Path(source["path"])
        if not p.is_file():
            raise ModelError(f"{who}: the model file {str(p)!r} that made the trajectory is gone")
        if hashlib.sha256(p.read_bytes()).hexdigest() != source.get("sha256"):
            raise ModelError(f"{who}: the model file {str(p)!r} changed since the run (sha256 differs)")
        from .io import load_mjcf, load_urdf

        load = load_urdf if p.suffix.lower() == ".urdf" else load_mjcf
        return load(p, **source.get("options", {}))
    from .cli import BUILDERS

    name = source.get("builtin")
    if name not in BUILDERS:
        raise ModelError(f"{who}: unknown built-in model {name!r}")
    return BUILDERS[name][0](**source.get("params", {}))


def _frames(traj, model: ArticulatedBody, fps: float) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(traj.t, float)
    times = np.arange(t[0], t[-1] + 1e-12, 1.0 / fps)
    if model.on_group:
        idx = np.clip(np.searchsorted(t, times), 0, len(t) - 1)
        return times, np.asarray(traj.q)[idx]
    return times, np.column_stack([np.interp(times, t, np.asarray(traj.q)[:, k]) for k in range(model.nq)])


def link_transforms(model: ArticulatedBody, Q: np.ndarray) -> np.ndarray:
    """World transforms of every link at every configuration: shape ``(len(Q), nlinks, 4, 4)`` (the package's
    forward kinematics, evaluated numerically)."""
    from .kinematics import forward_kinematics

    Q = np.atleast_2d(np.asarray(Q, float))
    T = np.asarray(forward_kinematics(model).map(len(Q))(Q.T)).reshape(4, len(Q), len(model.links), 4)
    return T.transpose(1, 2, 0, 3)


def _triangles(model: ArticulatedBody, max_faces: int) -> tuple[list[tuple[int, np.ndarray, np.ndarray]], list]:
    """Per visual: (link index, vertices in the link frame, faces), and the visuals' colours."""
    from .display import display_geometry, visual_mesh

    display = display_geometry(model)
    parts, colors = [], []
    for i, link in enumerate(model.links):
        for v in display.links.get(link.name, ()):
            V, F = visual_mesh(v, max_faces=max_faces, segments=12)
            parts.append((i, V, F))
            colors.append(v.color)
    for v in display.world:
        V, F = visual_mesh(v, max_faces=max_faces, segments=12)
        parts.append((-1, V, F))
        colors.append(v.color)
    return parts, colors


def render(traj, out: str | Path, *, model: ArticulatedBody | None = None, fps: float = 30.0,
           camera: Camera | None = None, size: float = 4.0, dpi: int = 80, max_faces: int = 800) -> dict:
    """Write ``traj`` (a :class:`~pbframework.result.Trajectory` or a path to its ``.npz``) as an animated GIF
    or an MP4.

    Args:
        traj: the trajectory.
        out: the ``.gif`` or ``.mp4`` to write.
        model: the model that made it (default: rebuilt from ``traj.info["model_source"]``).
        fps: frames per second of the animation (simulated time runs at real speed).
        camera: the view (:class:`Camera`; default: elevation 20, azimuth -60, fitted to the motion).
        size, dpi: figure size (inches, square) and resolution: ``size * dpi`` pixels a side.
        max_faces: triangles per mesh file at most (decimated where it has more).

    Returns:
        ``{"path", "frames", "seconds"}`` (wall seconds spent).

    Raises:
        ModelError: the model cannot be rebuilt, or its ``nq`` does not match the trajectory's.
        ValueError: an output that is neither ``.gif`` nor ``.mp4``, a non-positive ``fps``.
        ImportError: an ``.mp4`` or mesh files without the ``render`` extra (one line naming the pip command).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    from .kinematics import contact_positions
    from .result import Trajectory

    t_start = time.perf_counter()
    out = Path(out)
    camera = camera or Camera()
    if out.suffix.lower() not in RENDER_FORMATS:
        raise ValueError(f"render: the output must be a .gif or .mp4 file, got {str(out)!r}")
    if not (isinstance(fps, (int, float)) and np.isfinite(fps) and fps > 0):
        raise ValueError(f"render: fps must be a positive number, got {fps!r}")
    if not (isinstance(max_faces, int) and max_faces >= 4):
        raise ValueError(f"render: max_faces must be an integer of at least 4, got {max_faces!r}")
    writer = _writer(out, float(fps))            # a missing extra fails before any work
    if not isinstance(traj, Trajectory):
        traj = Trajectory.load(traj)
    model = model if model is not None else model_from_source(traj.info.get("model_source") or {}, "render")
    if np.asarray(traj.q).shape[1] != model.nq:
        raise ModelError(f"render: the trajectory has {np.asarray(traj.q).shape[1]} coordinates but model "
                         f"{model.name!r} has nq = {model.nq}")
    times, Q = _frames(traj, model, float(fps))
    T = link_transforms(model, Q)                                                    # frames x links x 4 x 4
    parts, colors = _triangles(model, max_faces)
    world = np.broadcast_to(np.eye(4), (len(Q), 1, 4, 4))
    T = np.concatenate([T, world], axis=1)                                           # index -1: the world
    tris = [V[F] for _, V, F in parts]                                               # faces x 3 x 3, link frame
    owner = np.concatenate([np.full(len(x), i) for (i, _, _), x in zip(parts, tris)]) if tris else np.zeros(0, int)
    local = np.concatenate(tris) if tris else np.zeros((0, 3, 3))
    base_rgb = (np.concatenate([np.tile(_rgb(c), (len(x), 1)) for c, x in zip(colors, tris)]) if tris
                else np.zeros((0, 3)))
    contacts = (np.asarray(contact_positions(model).map(len(Q))(Q.T)).reshape(3, len(Q), -1).transpose(1, 2, 0)
                if model.n_contacts else np.zeros((len(Q), 0, 3)))

    def world_tris(k: int) -> np.ndarray:
        R, p = T[k, owner, :3, :3], T[k, owner, :3, 3]
        return np.einsum("fij,fvj->fvi", R, local) + p[:, None, :]

    light = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])

    def shade(w: np.ndarray) -> np.ndarray:
        n = np.cross(w[:, 1] - w[:, 0], w[:, 2] - w[:, 0])
        n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
        return np.clip(base_rgb * (0.45 + 0.55 * np.abs(n @ light))[:, None], 0.0, 1.0)

    centre, half = _view(camera, T, owner, local, contacts)
    fig = plt.figure(figsize=(size, size), dpi=dpi)
    ax = fig.add_subplot(projection="3d")
    ax.view_init(elev=camera.elev, azim=camera.azim, roll=camera.roll)
    for setter, c in zip((ax.set_xlim, ax.set_ylim, ax.set_zlim), centre):
        setter(c - half, c + half)
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_zlabel("z")
    if model.n_contacts:
        g = np.linspace(-1, 1, 2) * half
        X, Y = np.meshgrid(centre[0] + g, centre[1] + g)
        ax.plot_surface(X, Y, np.zeros_like(X), alpha=0.15, color="grey")
    body = Poly3DCollection(np.zeros((0, 3, 3)), linewidths=0.6)     # edges: no seams, thin rods stay visible
    ax.add_collection3d(body)
    dots = ax.plot([], [], [], "o", ms=3, color="tab:red")[0]
    title = ax.set_title("")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        for k in range(len(Q)):
            w = world_tris(k)
            body.set_verts(w)
            rgb = shade(w)
            body.set_facecolor(rgb)
            body.set_edgecolor(rgb)
            if contacts.shape[1]:
                dots.set_data_3d(contacts[k, :, 0], contacts[k, :, 1], contacts[k, :, 2])
            title.set_text(f"{model.name}   t = {times[k]:.2f} s")
            fig.canvas.draw()
            writer.send(np.asarray(fig.canvas.buffer_rgba())[:, :, :3].copy())
        writer.close()
    finally:
        plt.close(fig)
    return {"path": out, "frames": len(Q), "seconds": time.perf_counter() - t_start}


def _rgb(color) -> np.ndarray:
    return np.array([0.30, 0.50, 0.78]) if color is None else np.asarray(color[:3], float)


def _view(camera: Camera, T: np.ndarray, owner: np.ndarray, local: np.ndarray,
          contacts: np.ndarray) -> tuple[np.ndarray, float]:
    """The centre and half width of the view: the camera's, else fitted to the geometry over the motion (60
    frames spread over it, at most 20000 triangles of the model)."""
    frames = np.unique(np.linspace(0, len(T) - 1, min(len(T), 60)).astype(int))
    sel = slice(None, None, max(1, len(local) // 20000))
    pts = [contacts[frames].reshape(-1, 3)]
    pts += [np.einsum("fij,fvj->fvi", T[k, owner[sel], :3, :3], local[sel]).reshape(-1, 3)
            + np.repeat(T[k, owner[sel], :3, 3], 3, axis=0) for k in frames]
    pts = np.concatenate(pts)
    if not len(pts):
        pts = np.zeros((1, 3))
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    centre = np.asarray(camera.target, float) if camera.target is not None else 0.5 * (lo + hi)
    half = float(camera.extent) if camera.extent is not None else 0.5 * max(float(np.max(hi - lo)), 1e-3) * 1.05
    return centre, half


class _Frames:
    """Collects frames and writes them as a GIF (Pillow) when closed: one 255-colour palette for the whole
    animation (median cut over eight frames spread over it), no dithering, so still areas compress."""

    def __init__(self, out: Path, fps: float) -> None:
        self.out, self.fps, self.frames = out, fps, []

    def send(self, rgb: np.ndarray) -> None:
        self.frames.append(rgb)

    def close(self) -> None:
        from PIL import Image

        picks = np.unique(np.linspace(0, len(self.frames) - 1, min(8, len(self.frames))).astype(int))
        sample = Image.fromarray(np.concatenate([self.frames[k] for k in picks], axis=0))
        palette = sample.quantize(colors=255, method=Image.Quantize.MEDIANCUT)
        images = [Image.fromarray(f).quantize(palette=palette, dither=Image.Dither.NONE) for f in self.frames]
        images[0].save(self.out, save_all=True, append_images=images[1:], duration=1000.0 / self.fps, loop=0)


class _Mp4:
    """Streams frames to the ffmpeg that imageio-ffmpeg bundles (H.264, yuv420p)."""

    def __init__(self, out: Path, fps: float) -> None:
        from .display import missing_extra

        try:
            import imageio_ffmpeg
        except ImportError:
            raise missing_extra("render", "writing .mp4", "imageio-ffmpeg") from None
        self.ffmpeg, self.out, self.fps, self.gen = imageio_ffmpeg, out, fps, None

    def send(self, rgb: np.ndarray) -> None:
        if self.gen is None:
            h, w = rgb.shape[:2]
            self.size = (w - w % 2, h - h % 2)                       # yuv420p wants even sides
            self.gen = self.ffmpeg.write_frames(str(self.out), self.size, fps=self.fps, codec="libx264",
                                                pix_fmt_out="yuv420p", macro_block_size=1, quality=7,
                                                output_params=["-loglevel", "error"])
            self.gen.send(None)
        self.gen.send(np.ascontiguousarray(rgb[:self.size[1], :self.size[0]]))

    def close(self) -> None:
        if self.gen is not None:
            self.gen.close()


def _writer(out: Path, fps: float):
    return _Mp4(out, fps) if out.suffix.lower() == ".mp4" else _Frames(out, fps)
