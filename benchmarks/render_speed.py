"""Wall time of ``pbf render`` (issue 26): CHAIN-10 for 10 s at 30 fps to GIF and to MP4, and the panda with its
visual meshes (example-robot-data).

Each trajectory is simulated first (not timed: PBAD order 2 at ``--dt``), saved as ``pbf simulate --out``
does (with its ``model_source``), then rendered from the file as ``pbf render`` does it, the model rebuilt
from the file; the time printed is :func:`pbframework.render.render`'s own wall time (model rebuild, forward
kinematics, mesh reading and decimation, drawing, encoding). The issue asks for CHAIN-10 at under 30 s.

    python benchmarks/render_speed.py                      # CHAIN-10 10 s, panda 2 s, 30 fps
    python benchmarks/render_speed.py --links 3 --duration 0.3 --panda-duration 0.1   # quick

Writes ``render_speed.json`` to the benchmark output folder (benchmarks/_common.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import out_path  # noqa: E402

import pbframework as pbf  # noqa: E402
from pbframework import models  # noqa: E402
from pbframework.render import model_source, render  # noqa: E402


def _chain(n: int, duration: float, dt: float, folder: Path) -> Path:
    m = models.chain(n)
    tr = pbf.Simulator(m, "pbad", order=2, dt=dt).rollout(models.chain_q0(m), np.zeros(m.nq), duration)
    tr.info["model_source"] = model_source("chain", {"n": n})
    return tr.save(folder / f"chain{n}.npz")


def _panda(duration: float, dt: float, folder: Path) -> Path | None:
    root = models.example_robot_data_dir()
    if root is None:
        return None
    urdf = root / "panda_description" / "urdf" / "panda.urdf"
    m = pbf.load_urdf(urdf)
    q0 = m.neutral()
    for j in m.joints:                                   # pbf simulate's start: zero clipped into the limits
        if j.type.nq == 1:
            q0[m.joint_q_index[j.name]] = np.clip(0.0, j.lower, j.upper)
    tr = pbf.Simulator(m, "pbad", order=2, dt=dt).rollout(q0, np.zeros(m.nv), duration)
    tr.info["model_source"] = model_source(path=urdf)
    return tr.save(folder / "panda.npz")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--links", type=int, default=10, help="CHAIN-N's N (default 10)")
    ap.add_argument("--duration", type=float, default=10.0, help="simulated seconds of the chain (default 10)")
    ap.add_argument("--panda-duration", type=float, default=2.0, help="simulated seconds of the panda (default 2)")
    ap.add_argument("--dt", type=float, default=0.01, help="the simulations' step (default 0.01)")
    ap.add_argument("--fps", type=float, default=30.0, help="frames per second of the animations (default 30)")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        jobs = [(f"CHAIN-{args.links}", _chain(args.links, args.duration, args.dt, folder), args.duration)]
        panda = _panda(args.panda_duration, args.dt, folder)
        if panda is None:
            print("panda: example-robot-data is not installed; skipped")
        else:
            jobs.append(("panda (visual meshes)", panda, args.panda_duration))
        for name, npz, duration in jobs:
            for ext in (".gif", ".mp4"):
                r = render(npz, folder / f"{npz.stem}{ext}", fps=args.fps)
                size = (folder / f"{npz.stem}{ext}").stat().st_size
                rows.append({"job": name, "format": ext[1:], "simulated_s": duration, "fps": args.fps,
                             "frames": r["frames"], "wall_s": r["seconds"], "bytes": size})
    print(f"{'job':<24} {'format':<6} {'sim s':>6} {'frames':>7} {'wall s':>8} {'ms/frame':>9} {'MB':>6}")
    for r in rows:
        print(f"{r['job']:<24} {r['format']:<6} {r['simulated_s']:>6.3g} {r['frames']:>7} {r['wall_s']:>8.2f} "
              f"{1e3 * r['wall_s'] / r['frames']:>9.1f} {r['bytes'] / 1e6:>6.2f}")
    path = out_path("render_speed.json")
    path.write_text(json.dumps(rows, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
