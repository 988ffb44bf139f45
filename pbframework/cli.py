"""The ``pbf`` command.

::

    pbf simulate chain --links 10 --integrator pbad --order 3 --dt 0.05 --duration 10 \\
        --out traj.npz --plot energy.png
    pbf simulate --model robot.urdf --integrator rk4 --dt 0.001 --duration 2
    pbf simulate chain --links 40 --order 3 --dt 0.05 --duration 10 --backend c
    pbf plugins
    pbf cache info
    pbf cache clear

Errors in the user's input (unknown plug-in, bad dt, missing file, ...) print one line
``pbf: error: ...`` and exit with status 2. ``pbf simulate`` exits with the run's verdict
(:data:`EXIT_CODES`): 0 ok, 1 diverged, 3 unconverged; the trajectory file and plot are written either
way and carry the verdict.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

MODELS = ("chain", "swimmer", "spider", "box")
EXIT_CODES = {"ok": 0, "diverged": 1, "usage": 2, "unconverged": 3}
"""Exit status of ``pbf simulate`` by the run's status (``usage``: bad input, nothing was run)."""
EPILOG = ("exit status: 0 the run ended ok; 1 it diverged (a state not finite, a speed above max_speed, or energy "
          "above its start by more than --energy-limit); 2 bad input (nothing run); 3 a step did not converge "
          "after its halvings (--on-failure stop ends the run there, continue goes on). The saved trajectory and "
          "plot carry the verdict either way.")


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``pbf: error: ...``, exit status 2) instead of the usage block."""

    def error(self, message: str):  # type: ignore[override]
        print(f"pbf: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="pbf", description="pbframework: articulated-body simulation.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sp = sub.add_parser("simulate", help="simulate a model and report energy and solver statistics",
                        description="Simulate a built-in benchmark model or a URDF / MJCF file.", epilog=EPILOG)
    sp.add_argument("name", nargs="?", metavar="MODEL", help=f"built-in model: {', '.join(MODELS)}")
    sp.add_argument("--model", metavar="PATH", help="a URDF (.urdf) or MJCF (.xml) file instead of MODEL")
    sp.add_argument("--links", type=int, default=None,
                    help="number of links of chain (default 10, CHAIN-10) or swimmer (default 4, SWIMMER)")
    sp.add_argument("--integrator", default="pbad", help="integrator plug-in (default pbad; see pbf plugins)")
    sp.add_argument("--order", type=int, default=None, help="integrator order (default: the integrator's)")
    sp.add_argument("--solver", default="auto", help="solver plug-in for implicit integrators (default auto)")
    sp.add_argument("--objective", default="auto", help="pbad objective: auto, energy or residual")
    sp.add_argument("--fd", default="aba", help="forward-dynamics plug-in (default aba)")
    sp.add_argument("--dt", type=float, default=0.01, help="timestep in seconds (default 0.01)")
    sp.add_argument("--duration", type=float, default=1.0, help="simulated seconds (default 1)")
    sp.add_argument("--force", action="append", metavar="NAME", dest="forces",
                    help="force model (repeatable; default: gravity; 'none' for no forces)")
    sp.add_argument("--max-iter", type=int, default=None, help="solver iteration limit per step")
    sp.add_argument("--on-failure", default="stop", choices=("stop", "continue"),
                    help="a step unconverged after its halvings: stop the run there (default) or keep it and go on")
    sp.add_argument("--max-halvings", type=int, default=4,
                    help="how deep an unconverged step is retried as two half steps (default 4; 0: never)")
    sp.add_argument("--adaptive", action="store_true",
                    help="adaptive step-size control (pbad, casadi backend): --dt is then the output interval and "
                         "the first step")
    sp.add_argument("--rtol", type=float, default=None, help="relative local-error tolerance of --adaptive "
                                                             "(default 1e-4)")
    sp.add_argument("--atol", type=float, default=None, help="absolute local-error tolerance of --adaptive "
                                                             "(default: rtol)")
    sp.add_argument("--energy-limit", type=float, default=100.0,
                    help="percent of the energy scale the energy may rise above its start before the run counts "
                         "as diverged, for models without energy input (default 100; 0: no test)")
    sp.add_argument("--backend", default="casadi",
                    help="where the solver loop runs: casadi (default, CasADi VM) or c (generated C, compiled "
                         "once per model and cached)")
    sp.add_argument("--out", metavar="FILE.npz", help="save the trajectory (t, q, qd, energy, stats, ...)")
    sp.add_argument("--plot", metavar="FILE.png", help="plot energy against time")
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")
    sub.add_parser("plugins", help="list every registered plug-in with its family and description")
    cp = sub.add_parser("cache", help="the build cache of generated C libraries: info or clear",
                        description="Inspect or empty the cache of compiled step libraries ($PBF_CACHE_DIR, "
                                    "else the platform's user cache folder).")
    cp.add_argument("action", choices=("info", "clear"),
                    help="info: location, entries, size, the compiler each was built with; clear: remove all")
    return ap


def _load_model(args):
    from . import models
    from .io import load_mjcf, load_urdf

    if args.links is not None and args.model:
        raise CliError(f"--links applies to the chain and swimmer models only, not to {args.model!r}")
    if args.model:
        path = Path(args.model)
        if not path.is_file():
            raise CliError(f"model file {str(path)!r} not found")
        if path.suffix.lower() == ".urdf":
            model = load_urdf(path)
        elif path.suffix.lower() in (".xml", ".mjcf"):
            model = load_mjcf(path)
        else:
            raise CliError(f"model file {str(path)!r}: unknown format {path.suffix!r} (allowed: .urdf, .xml)")
        return model, np.zeros(model.nq)
    if not args.name:
        raise CliError(f"give a model: one of {', '.join(MODELS)}, or --model PATH")
    if args.name not in MODELS:
        raise CliError(f"unknown model {args.name!r} (built-in: {', '.join(MODELS)}; or --model PATH)")
    if args.links is not None and args.name not in ("chain", "swimmer"):
        raise CliError(f"--links applies to the chain and swimmer models only, not to {args.name!r}")
    if args.links is not None and args.links < 1:
        raise CliError(f"--links must be a positive integer, got {args.links}")
    if args.name == "chain":
        m = models.chain(10 if args.links is None else args.links)
        return m, models.chain_q0(m)
    if args.name == "swimmer":
        m = models.swimmer() if args.links is None else models.swimmer(args.links)
        return m, np.zeros(m.nq)
    if args.name == "spider":
        m = models.spider()
        return m, models.spider_q0(m)
    m = models.box()
    q0 = np.zeros(m.nq)
    q0[2] = 0.1
    return m, q0


def _simulate(args) -> int:
    from .simulate import Simulator

    model, q0 = _load_model(args)
    forces = ["gravity"] if not args.forces else ([] if args.forces == ["none"] else args.forces)
    if not np.isfinite(args.duration) or args.duration <= 0:
        raise CliError(f"--duration must be a positive number of seconds, got {args.duration}")
    opts = {} if args.max_iter is None else {"max_iter": args.max_iter}
    if not np.isfinite(args.energy_limit) or args.energy_limit < 0:
        raise CliError(f"--energy-limit must be a non-negative number (0: no test), got {args.energy_limit}")
    if (args.rtol is not None or args.atol is not None) and not args.adaptive:
        raise CliError("--rtol and --atol apply to --adaptive runs only")
    adaptive: dict | bool = False
    if args.adaptive:
        adaptive = {k: v for k, v in (("rtol", args.rtol), ("atol", args.atol)) if v is not None}
        adaptive = adaptive or True
    sim = Simulator(model, args.integrator, order=args.order, solver=args.solver, dt=args.dt, forces=forces,
                    objective=args.objective, fd=args.fd, solver_options=opts or None, backend=args.backend,
                    on_failure=args.on_failure, max_halvings=args.max_halvings,
                    energy_limit=args.energy_limit or None, adaptive=adaptive)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traj = sim.rollout(q0, np.zeros(model.nq), duration=args.duration, progress=not args.no_progress)
    print(traj.summary())
    for w in caught:
        print(f"pbf: warning: {w.message}", file=sys.stderr)
    if args.out:
        path = traj.save(args.out)
        print(f"Trajectory saved to {path}.")
    if args.plot:
        traj.plot_energy(args.plot)
        print(f"Energy plot saved to {args.plot}.")
    status = traj.status.value
    if status != "ok":
        print(f"pbf: run ended {status} at t={traj.failure_time:.6g} s (first failure; exit status "
              f"{EXIT_CODES[status]})", file=sys.stderr)
    return EXIT_CODES[status]


def _plugins() -> int:
    from .registry import registry

    rows = [(fam, info.name, info.description) for fam, info, _ in registry().all()]
    wf = max((len(r[0]) for r in rows), default=6)
    wn = max((len(r[1]) for r in rows), default=4)
    print(f"{'family':<{wf}}  {'name':<{wn}}  description")
    for fam, name, desc in rows:
        print(f"{fam:<{wf}}  {name:<{wn}}  {desc}")
    return 0


def _cache(args) -> int:
    from .codegen.build import CACHE_ENV, cache_clear, cache_entries, cache_info

    if args.action == "clear":
        n = cache_clear()
        print(f"Removed {n} cached librar{'y' if n == 1 else 'ies'}.")
        return 0
    info = cache_info()
    where = f"${CACHE_ENV}" if os.environ.get(CACHE_ENV) else "the platform's user cache folder"
    print(f"Cache: {info['path']} ({where})")
    print(f"  {info['entries']} libraries, {info['bytes'] / 1e6:.1f} MB, {info['invalid']} invalid (rebuilt on "
          f"next use); {info['compile_seconds']:.1f} s of compiling saved on each reuse")
    for compiler, n in sorted(info["compilers"].items()):
        print(f"  built with {compiler}: {n}")
    for e in cache_entries():
        flags = " ".join(f for f in e.flags if f not in ("-fPIC", "-shared"))
        print(f"  {e.path.name}  {e.bytes / 1e6:6.1f} MB  compiled in {e.compile_seconds:6.1f} s"
              + (f"  {e.compiler} {flags}" if e.valid else "  INVALID"))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pbf`` console script; returns the exit status."""
    from .model import ModelError
    from .registry import PluginError, UnknownPluginError
    from .step import StepError

    ap = _parser()
    args = ap.parse_args(argv)
    if args.command is None:
        ap.print_help()
        return 2
    try:
        if args.command == "plugins":
            return _plugins()
        if args.command == "cache":
            return _cache(args)
        return _simulate(args)
    except (CliError, StepError, UnknownPluginError, ModelError, PluginError, FileNotFoundError, ValueError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"pbf: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pbf: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
