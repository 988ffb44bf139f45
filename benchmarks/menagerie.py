"""Every robot of a MuJoCo Menagerie checkout through ``pbf.load_mjcf``, against MuJoCo (issue 25).

Usage::

    python benchmarks/menagerie.py PATH [--states 5] [--seed 0] [--only NAME ...]

``PATH`` is a Menagerie checkout (``fetch`` reads one; the tests do not need it). The entries are the
robot files: every ``<dir>/<file>.xml`` with a ``<worldbody>`` that is not a ``scene*.xml`` (scenes add a
floor and lights to a robot file). Per entry it prints whether pbframework loads it (or the one-line
reason), then the worst relative error, ``||ours - mj|| / max(||mj||, 1)``, over ``--states`` random states
within the joint ranges (free bases at random orientations, random ``ctrl``; each entry's own generator,
seeded by ``--seed`` and the entry's name) of the mass matrix (armature
included), the bias forces, the passive forces (damping, springs, gravity compensation: MuJoCo's
``qfrc_passive``), the actuator forces (``qfrc_actuator``) and the equality constraints' violations (MuJoCo's
``efc_pos`` rows; their forces are soft-constraint springs here, not MuJoCo's solver: see
``plugins/forces/equality.py``) and, for entries with actuator states (activations, a PID's integral and
set-point; random ``act`` and time 0 or 1), the states after one step against MuJoCo's ``act`` after an Euler
``mj_step`` (``-`` where there are none); then a summary line. An entry MuJoCo itself
cannot compile from this checkout (a mesh missing from the snapshot) is reported as such and counted apart.
Target: every entry loads, every error below 1e-9.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _mujoco_check import compare  # noqa: E402

import pbframework as pbf  # noqa: E402
from pbframework.model import ModelError  # noqa: E402

TARGET = 1e-9


def entries(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.glob("*/*.xml")):
        if p.name.startswith("scene"):
            continue
        if "<worldbody" in p.read_text(errors="replace"):
            out.append(p)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path, help="a MuJoCo Menagerie checkout")
    ap.add_argument("--states", type=int, default=5, help="random states per entry (default 5)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", default=None, help="entries whose path contains one of these")
    ap.add_argument("--equality", choices=("soft", "disable", "error"), default="soft",
                    help="load_mjcf's equality option (default soft: equality constraints as soft constraints; "
                         "disable: without them, as MuJoCo's <flag equality=\"disable\"/>; error: refuse)")
    args = ap.parse_args(argv)
    import mujoco

    if not args.path.is_dir():
        ap.error(f"{args.path} is not a directory")
    files = entries(args.path)
    if args.only:
        files = [f for f in files if any(s in str(f) for s in args.only)]
    print(f"{len(files)} entries in {args.path} (mujoco {mujoco.__version__}), {args.states} random states each")
    print(f"{'entry':48s} {'nq':>3s} {'nv':>3s} {'nu':>3s} {'M':>8s} {'bias':>8s} {'passive':>8s} {'actuator':>8s} "
          f"{'equality':>8s} {'states':>8s} {'s':>5s}")
    loaded = worse = mj_fail = 0
    refused: dict[str, int] = {}
    worst_all = 0.0
    for f in files:
        name = str(f.relative_to(args.path))
        try:
            mujoco.MjModel.from_xml_path(str(f))
        except Exception as exc:  # noqa: BLE001 - MuJoCo's own verdict on the file
            mj_fail += 1
            print(f"{name:48s} MuJoCo cannot compile it here: {' '.join(str(exc).split())[:110]}")
            continue
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", pbf.io.mjcf.UnsupportedGeoms)
                warnings.simplefilter("ignore", pbf.io.mjcf.EqualityDisabled)
                model = pbf.load_mjcf(f, equality=args.equality)
        except (ModelError, FileNotFoundError) as exc:
            reason = str(exc).replace(str(f), "").lstrip(": ")
            key = reason.split(" (")[0] if "not supported" in reason else reason[:60]
            refused[key] = refused.get(key, 0) + 1
            print(f"{name:48s} does not load: {reason[:150]}")
            continue
        loaded += 1
        # a generator per entry, seeded by --seed and the entry's name: its states do not depend on which
        # entries before it loaded
        rng = np.random.default_rng([args.seed, zlib.crc32(name.encode())])
        w = compare(f, rng, args.states, model=model)
        worst = max(w.values())
        worst_all = max(worst_all, worst)
        worse += worst > TARGET
        nu = len(dict(model.default_forces).get("mj_actuators", {}).get("actuators", []))
        print(f"{name:48s} {model.nq:3d} {model.nv:3d} {nu:3d} "
              f"{w['M']:8.1e} {w['bias']:8.1e} {w['passive']:8.1e} {w['actuator']:8.1e} {w['equality']:8.1e} "
              f"{format(w['states'], '8.1e') if 'states' in w else '-':>8s} "
              f"{time.perf_counter() - t0:5.1f}"
              f"{'  > 1e-9' if worst > TARGET else ''}")
    n = len(files) - mj_fail
    print(f"summary: {loaded}/{n} entries load ({mj_fail} more that MuJoCo itself cannot compile from this checkout); "
          f"{loaded - worse}/{loaded} loaded entries within {TARGET:g} (worst {worst_all:.1e})")
    for reason, k in sorted(refused.items(), key=lambda x: -x[1]):
        print(f"  not loaded ({k}): {reason}")
    return 0 if loaded == n and worse == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
