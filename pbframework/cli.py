"""The ``pbf`` command.

::

    pbf simulate chain --links 10 --integrator pbad --order 3 --dt 0.05 --duration 10 \\
        --out traj.npz --plot energy.png
    pbf simulate chain --links 3 --force gravity --force joint_damping:damping=0.1 --q0 q0.npy
    pbf simulate chain --param length=0.5,mass=2 --force gravity --force "pd:kp=100,kd=5,dofs=[joint0:ry]"
    pbf simulate --model robot.urdf --integrator rk4 --dt 0.001 --duration 2 --qd0=0.1,0,0,0,0,0,0
    pbf simulate chain --links 40 --order 3 --dt 0.05 --duration 10 --backend c
    pbf simulate chain --links 10 --backend c --q0 starts.npy --scheduler tcp://host:8786
    pbf plugins
    pbf cache info
    pbf cache clear

What Python takes, the command takes:

* ``--force NAME[:KEY=VALUE,...]`` (repeatable; default ``gravity``, ``none`` for no forces) is
  ``forces=[(NAME, {KEY: VALUE})]``. A VALUE is a Python literal (``0.1``, ``True``, ``None``, ``'text'``,
  ``[1, 2]``); a bare word is a string and ``[a,b]`` a list of them (``dofs=[joint0:ry,joint1:ry]``).
* ``--param KEY=VALUE[,...]`` (repeatable): a parameter of the built-in model's builder in
  :mod:`pbframework.models` (``chain``: ``joint``, ``length``, ``radius``, ``mass``, ``axis``, ``floating``,
  ``gravity``, ``contact_points``; ``swimmer``; ``spider``; ``box``: ``size``, ``mass``); ``--links`` is
  the builder's ``n`` (chain) or ``n_links`` (swimmer).
* ``--q0`` / ``--qd0``: the initial configuration and velocity, each ``nq`` numbers (the model's
  coordinates, ``model.dof_names``) as a comma list or a ``.npy`` file. Defaults: the built-in model's
  benchmark pose (``chain_q0``, ``spider_q0``, the box on the ground) or zeros, at rest. A list that
  starts with a minus sign is written ``--q0=-0.1,0.2``. A ``.npy`` of shape ``(M, nq)`` runs a batch of M
  rollouts (``rollout_batch``; ``--qd0`` then ``(M, nv)`` or one velocity for all); ``--scheduler
  tcp://host:8786`` runs that batch on a Dask cluster (``c`` backend, extra ``distributed``).

A misspelt or missing parameter is one line naming the force model or builder and listing the parameters
it accepts with their defaults (:class:`~pbframework.registry.PluginParameterError` in Python). Every
option, plug-in name, force parameter, ``.npy`` file and output path (``--out`` a ``.npz`` in a writable
folder, ``--plot`` an image format matplotlib writes) is checked before the model is built, the lengths of
``--q0`` / ``--qd0`` right after, so a bad one costs no time.

Errors in the user's input print one line ``pbf: error: ...`` and exit with status 2. ``pbf simulate``
exits with the run's verdict (:data:`EXIT_CODES`): 0 ok, 1 diverged, 3 unconverged; the trajectory file and
plot are written either way and carry the verdict. In a pipe the command behaves as Unix tools do: a reader
that stops early (``pbf cache info | head -1``) ends it quietly with status 141 (128 + SIGPIPE, what a
shell reports for a process that signal ended), and the progress bar, on stderr, shows only where stderr is
a terminal.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from . import models
from .checks import MAX_DOFS, MAX_LINKS, MAX_MEMORY, MAX_STEPS
from .errors import CliError
from .model import ArticulatedBody


def _box_q0(model: ArticulatedBody) -> np.ndarray:
    """The box resting on the ground z = 0 (its lowest corner on it)."""
    q0 = np.zeros(model.nq)
    q0[2] = -float(np.min(model.links[0].contact_points[:, 2]))
    return q0


BUILDERS: dict[str, tuple[Callable[..., ArticulatedBody], Callable[[ArticulatedBody], np.ndarray] | None,
                          str | None]] = {
    "chain": (models.chain, models.chain_q0, "n"),
    "swimmer": (models.swimmer, None, "n_links"),
    "spider": (models.spider, models.spider_q0, None),
    "box": (models.box, _box_q0, None),
}
"""Built-in model -> (builder, its initial configuration or None for zeros, the parameter ``--links`` sets)."""
MODELS = tuple(BUILDERS)
LINKS_DEFAULT = {"chain": 10}
"""``--links`` where not given (CHAIN-10; the swimmer's builder default is SWIMMER's 4 links)."""
EXIT_CODES = {"ok": 0, "diverged": 1, "usage": 2, "unconverged": 3}
"""Exit status of ``pbf simulate`` by the run's status (``usage``: bad input, nothing was run)."""
EXIT_BROKEN_PIPE = 141
"""Exit status when the reader of standard output went away (128 + SIGPIPE, as a shell reports it)."""
TRAJECTORY_FORMATS = (".npz",)
"""Extensions ``--out`` accepts (:meth:`~pbframework.result.Trajectory.save`)."""
EPILOG = ("exit status: 0 the run ended ok; 1 it diverged (a state not finite, a speed above max_speed, or energy "
          "above its start by more than --energy-limit); 2 bad input (nothing run); 3 a step did not converge "
          "after its halvings (--on-failure stop ends the run there, continue goes on). The saved trajectory and "
          "plot carry the verdict either way.")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``pbf: error: ...``, exit status 2) instead of the usage block."""

    def error(self, message: str):  # type: ignore[override]
        print(f"pbf: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(2)


def _model_options(p: argparse.ArgumentParser) -> None:
    """The options that build a Simulator, shared by ``pbf simulate`` and ``pbf export``."""
    p.add_argument("name", nargs="?", metavar="MODEL", help=f"built-in model: {', '.join(MODELS)}")
    p.add_argument("--model", metavar="PATH", help="a URDF (.urdf) or MJCF (.xml) file instead of MODEL")
    p.add_argument("--balance-inertia", action="store_true",
                    help="--model: make a link inertia that breaks the triangle inequality valid as MuJoCo's "
                         "balanceinertia does (principal moments set to their mean), with a warning naming the links")
    p.add_argument("--links", type=int, default=None,
                    help="number of links of chain (default 10, CHAIN-10) or swimmer (default 4, SWIMMER)")
    p.add_argument("--integrator", default="pbad", help="integrator plug-in (default pbad; see pbf plugins)")
    p.add_argument("--order", type=int, default=None, help="integrator order (default: the integrator's)")
    p.add_argument("--solver", default="auto", help="solver plug-in for implicit integrators (default auto)")
    p.add_argument("--objective", default="auto", help="pbad objective: auto, energy or residual")
    p.add_argument("--fd", default="aba", help="forward-dynamics plug-in (default aba)")
    p.add_argument("--dt", type=float, default=0.01, help="timestep in seconds (default 0.01)")
    p.add_argument("--force", action="append", metavar="NAME[:KEY=VALUE,...]", dest="forces",
                    help="force model with its parameters, e.g. pd:kp=100,kd=5 (repeatable; default: gravity; "
                         "'none' for no forces; a misspelt parameter lists the accepted ones)")
    p.add_argument("--param", action="append", metavar="KEY=VALUE[,...]", dest="params",
                    help="parameter of the built-in model's builder, e.g. length=0.5,mass=2 or joint=revolute "
                         "(repeatable; see pbframework.models)")
    p.add_argument("--q0", metavar="VALUES|FILE.npy",
                    help="initial configuration: nq comma-separated numbers or a .npy file (default: the "
                         "built-in model's benchmark pose, else zeros); --q0=-0.1,... for a leading minus")
    p.add_argument("--qd0", metavar="VALUES|FILE.npy",
                    help="initial velocity, nq numbers as for --q0 (default: at rest)")
    p.add_argument("--max-iter", type=int, default=None, help="solver iteration limit per step")
    p.add_argument("--max-halvings", type=int, default=None,
                    help="how deep an unconverged step is retried as two half steps (default 4; 0: never)")
    p.add_argument("--max-links", type=int, default=MAX_LINKS,
                    help=f"refuse a model of more links, before building it (default {MAX_LINKS}; docs/errors.md)")
    p.add_argument("--max-dofs", type=int, default=MAX_DOFS,
                    help=f"refuse a model of more velocity coordinates, before building its step (default {MAX_DOFS})")


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="pbf", description="pbframework: articulated-body simulation.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sp = sub.add_parser("simulate", help="simulate a model and report energy and solver statistics",
                        description="Simulate a built-in benchmark model or a URDF / MJCF file.", epilog=EPILOG)
    _model_options(sp)
    sp.add_argument("--duration", type=float, default=1.0, help="simulated seconds (default 1)")
    sp.add_argument("--on-failure", default=None, choices=("stop", "continue"),
                    help="a step unconverged after its halvings: stop the run there (default) or keep it and go on")
    sp.add_argument("--adaptive", action="store_true",
                    help="adaptive step-size control (pbad, both backends): --dt is then the output interval and "
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
    sp.add_argument("--scheduler", metavar="ADDRESS",
                    help="run a batch (--q0 FILE.npy of shape (M, nq)) on this Dask scheduler, tcp://host:8786 "
                         "(backend c; extra 'distributed')")
    sp.add_argument("--out", metavar="FILE.npz", help="save the trajectory (t, q, qd, energy, stats, ...)")
    sp.add_argument("--plot", metavar="FILE.png", help="plot energy against time (.png, .pdf, .svg, ...)")
    sp.add_argument("--no-progress", action="store_true",
                    help="no progress bar (it shows on stderr only where stderr is a terminal)")
    sp.add_argument("--max-steps", type=int, default=MAX_STEPS,
                    help=f"refuse a run of more steps (--duration / --dt), before building anything (default "
                         f"{MAX_STEPS}; docs/errors.md)")
    sp.add_argument("--max-memory", type=float, default=MAX_MEMORY / 1e6, metavar="MB",
                    help=f"refuse a run whose trajectory would take more memory, in MB (default {MAX_MEMORY / 1e6:g})")
    ep = sub.add_parser("export", help="write a model's step as a standalone C99 library (embedded use)",
                        description="Write the step of a built-in model or a URDF / MJCF file as a standalone C99 "
                                    "library: header, source, CMakeLists.txt, example_main.c, README.md "
                                    "(pbframework.export).")
    _model_options(ep)
    ep.add_argument("--precision", default="double", choices=("double", "float"),
                    help="double (default) or true single precision (float literals, sinf/cosf, 32-bit indices)")
    ep.add_argument("--out", metavar="DIR", required=True, help="the directory to write (new or empty)")
    ep.add_argument("--name", dest="lib_name",
                    help="the library's C name (default: the model's name; sanitised to a C identifier)")
    ep.add_argument("--overwrite", action="store_true",
                    help="replace a non-empty --out directory (--force names force models in every command)")
    ep.add_argument("--steps", type=int, default=100, help="steps of the example's rollout (default 100)")
    rp = sub.add_parser("render", help="render a saved trajectory to an animated GIF or an MP4 (headless)",
                        description="Render a trajectory saved by pbf simulate --out to an animated GIF or an MP4, "
                                    "without a display or a GPU (pbframework.render); the model is rebuilt from the "
                                    "file and drawn with its display geometry. MP4 and mesh files: pip install "
                                    "'pbframework[render]'.")
    rp.add_argument("trajectory", metavar="FILE.npz", help="a trajectory saved by pbf simulate --out")
    rp.add_argument("--out", metavar="FILE.gif|FILE.mp4", required=True, help="the animation to write")
    rp.add_argument("--fps", type=float, default=30.0, help="frames per second (default 30; real time)")
    rp.add_argument("--elev", type=float, default=20.0, help="camera elevation in degrees (default 20)")
    rp.add_argument("--azim", type=float, default=-60.0, help="camera azimuth in degrees (default -60)")
    rp.add_argument("--roll", type=float, default=0.0, help="camera roll in degrees (default 0)")
    rp.add_argument("--target", type=float, nargs=3, metavar=("X", "Y", "Z"),
                    help="the point at the centre of the picture (default: the centre of the motion)")
    rp.add_argument("--extent", type=float, metavar="M",
                    help="half the width of the cube in view, metres (default: fitted to the motion)")
    rp.add_argument("--pixels", type=int, default=320, help="width and height of the picture (default 320)")
    rp.add_argument("--max-faces", type=int, default=800,
                    help="triangles per mesh file at most, decimated where it has more (default 800)")
    vp = sub.add_parser("view", help="open a saved trajectory in the browser viewer (extra 'view')",
                        description="Serve a browser viewer of a trajectory (or a batch) saved by pbf simulate "
                                    "--out on this machine (pbframework.view, on viser): timeline, play / pause, "
                                    "speed, the energy curve and step verdicts, the first failure marked. Prints "
                                    "the URL and serves until interrupted (Ctrl-C). pip install "
                                    "'pbframework[view]'.")
    vp.add_argument("trajectory", metavar="FILE.npz", help="a trajectory or batch saved by pbf simulate --out")
    vp.add_argument("--port", type=int, default=8080, help="the port to serve on (default 8080)")
    vp.add_argument("--host", default="127.0.0.1",
                    help="the address to serve on (default 127.0.0.1, this machine only; 0.0.0.0: every interface)")
    sub.add_parser("plugins", help="list every registered plug-in with its family and description")
    cp = sub.add_parser("cache", help="the build cache of generated C libraries: info or clear",
                        description="Inspect or empty the cache of compiled step libraries ($PBF_CACHE_DIR, "
                                    "else the platform's user cache folder).")
    cp.add_argument("action", choices=("info", "clear"),
                    help="info: location, entries, size, the compiler each was built with; clear: remove all")
    return ap


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes."""
    parts, current, depth, quote = [], [], 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


def _value(text: str) -> Any:
    """A parameter value: a Python literal, a bracketed list of values, else the text itself."""
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    if len(text) >= 2 and text[0] + text[-1] in ("[]", "()"):
        return [_value(v) for v in _split_top(text[1:-1]) if v.strip()]
    return text


def _key_values(text: str, option: str) -> dict[str, Any]:
    """``KEY=VALUE,KEY=VALUE`` as a dict (see :func:`_value`)."""
    out: dict[str, Any] = {}
    for item in _split_top(text):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key.isidentifier():
            raise CliError(f"{option}: expected KEY=VALUE, got {item!r} (in {text!r})")
        if key in out:
            raise CliError(f"{option}: {key!r} given twice (in {text!r})")
        out[key] = _value(value)
    return out


def _force_specs(entries: list[str] | None) -> list[tuple[str, dict[str, Any]]]:
    """``--force`` options as ``(name, params)`` pairs (default gravity; ``none``: no forces)."""
    if not entries:
        return [("gravity", {})]
    if "none" in entries:
        if entries != ["none"]:
            raise CliError("--force none means no forces; it cannot be combined with other --force options")
        return []
    specs = []
    for entry in entries:
        name, colon, rest = entry.partition(":")
        if colon and not rest.strip():
            raise CliError(f"--force {entry!r}: no parameters after ':' (write NAME or NAME:KEY=VALUE,...)")
        specs.append((name.strip(), _key_values(rest, f"--force {name.strip()}") if colon else {}))
    return specs


def _vector(text: str | None, option: str) -> np.ndarray | None:
    """``--q0`` / ``--qd0``: comma-separated numbers or a ``.npy`` file (its length is checked later)."""
    if text is None:
        return None
    if text.lower().endswith(".npy"):
        path = Path(text)
        if not path.is_file():
            raise CliError(f"{option}: file {text!r} not found")
        try:
            return np.asarray(np.load(path, allow_pickle=False), dtype=float)
        except (OSError, ValueError, TypeError) as exc:
            raise CliError(f"{option}: cannot read {text!r} as a numeric .npy array ({exc})") from None
    try:
        return np.array([float(v) for v in text.split(",")])
    except ValueError:
        raise CliError(f"{option}: expected comma-separated numbers or a .npy file, got {text!r}") from None


def _output_path(text: str | None, option: str, formats: Sequence[str]) -> Path | None:
    """An output file's path, checked before the run for every way writing it can fail
    (:func:`pbframework.checks.output_path`: an empty name, an unknown extension, a missing folder, a regular
    file on the way, no permission, a folder itself, ...); :class:`~pbframework.errors.OutputPathError`."""
    from .checks import output_path

    return None if text is None else output_path(text, option, formats)


def _builder_params(args) -> dict[str, Any]:
    """The built-in model's builder parameters from ``--param`` and ``--links``, checked against its signature."""
    from .registry import check_parameters

    params: dict[str, Any] = {}
    for text in args.params or ():
        for key, value in _key_values(text, "--param").items():
            if key in params:
                raise CliError(f"--param: {key!r} given twice")
            params[key] = value
    if args.model:
        if params:
            raise CliError(f"--param applies to the built-in models ({', '.join(MODELS)}), not to {args.model!r}")
        return params
    build, _, links_param = BUILDERS[args.name]
    if args.links is not None:
        if links_param is None:
            raise CliError(f"--links applies to the chain and swimmer models only, not to {args.name!r}")
        if args.links < 1:
            raise CliError(f"--links must be a positive integer, got {args.links}")
        if links_param in params:
            raise CliError(f"give the number of links once: --links or --param {links_param}=...")
        params[links_param] = args.links
    elif args.name in LINKS_DEFAULT and links_param not in params:
        params[links_param] = LINKS_DEFAULT[args.name]
    check_parameters(f"model {args.name!r} (pbframework.models.{build.__name__})", build, params)
    n = params.get(links_param) if links_param is not None else None
    if isinstance(n, int) and not isinstance(n, bool) and n > args.max_links:
        from .checks import check_links

        check_links(n, f"model {args.name!r}", max_links=args.max_links, option="--max-links")
    return params


def _check_model_source(args) -> None:
    if args.balance_inertia and not args.model:
        raise CliError("--balance-inertia applies to model files (--model PATH); the built-in models' inertias are valid")
    if args.links is not None and args.model:
        raise CliError(f"--links applies to the chain and swimmer models only, not to {args.model!r}")
    if args.model:
        path = Path(args.model)
        if not path.is_file():
            raise CliError(f"model file {str(path)!r} not found")
        if path.suffix.lower() not in (".urdf", ".xml", ".mjcf"):
            raise CliError(f"model file {str(path)!r}: unknown format {path.suffix!r} (allowed: .urdf, .xml)")
        return
    if not args.name:
        raise CliError(f"give a model: one of {', '.join(MODELS)}, or --model PATH")
    if args.name not in MODELS:
        raise CliError(f"unknown model {args.name!r} (built-in: {', '.join(MODELS)}; or --model PATH)")


def _load_model(args, params: dict[str, Any]) -> tuple[ArticulatedBody, np.ndarray]:
    """The model and its default initial configuration."""
    from .checks import check_dofs, check_links
    from .io import load_mjcf, load_urdf
    from .limits import clip_to_limits

    if args.model:
        path = Path(args.model)
        if path.suffix.lower() == ".urdf":
            model = load_urdf(path, balance_inertia=args.balance_inertia, max_links=args.max_links)
        else:
            model = load_mjcf(path, balance_inertia=args.balance_inertia)
        check_links(model.nlinks, str(path), max_links=args.max_links, option="--max-links")
        check_dofs(model.nv, str(path), max_dofs=args.max_dofs, option="--max-dofs")
        return model, clip_to_limits(model, model.neutral())
    build, q0_of, _ = BUILDERS[args.name]
    try:
        model = build(**params)
    except (TypeError, ValueError) as exc:        # a value of the wrong kind for the builder
        raise CliError(f"model {args.name!r} with {params}: {exc}") from None
    check_dofs(model.nv, f"model {args.name!r}", max_dofs=args.max_dofs, option="--max-dofs")
    return model, (q0_of(model) if q0_of is not None else np.zeros(model.nq))


def _configuration(args):
    """``(builder parameters, force models, step configuration)`` from the options, checked without a model."""
    from .step import StepConfig, resolve_config, resolve_forces

    _check_model_source(args)
    params = _builder_params(args)
    forces = resolve_forces(_force_specs(args.forces))
    config = resolve_config(args.integrator, StepConfig(dt=args.dt, order=args.order, objective=args.objective,
                                                        fd=args.fd), forces)
    if args.max_iter is not None and args.max_iter < 1:
        raise CliError(f"--max-iter must be a positive integer, got {args.max_iter}")
    if args.max_halvings is not None and args.max_halvings < 0:
        raise CliError(f"--max-halvings must be a non-negative integer, got {args.max_halvings}")
    if args.max_links < 1:
        raise CliError(f"--max-links must be a positive integer, got {args.max_links}")
    if args.max_dofs < 1:
        raise CliError(f"--max-dofs must be a positive integer, got {args.max_dofs}")
    _check_ignored(args)
    return params, forces, config


def _check_ignored(args) -> None:
    """An option the chosen integrator would ignore is an error, not a silent no-op: an explicit integrator
    has no solver, no iterations, no objective and no unconverged steps to retry or stop at."""
    from .step import integrator_info

    if integrator_info(args.integrator).meta.get("implicit", True):
        return
    given = [opt for opt, on in (("--solver", args.solver != "auto"), ("--max-iter", args.max_iter is not None),
                                 ("--objective", args.objective != "auto"),
                                 ("--max-halvings", args.max_halvings is not None),
                                 ("--on-failure", getattr(args, "on_failure", None) is not None)) if on]
    if given:
        raise CliError(f"integrator {args.integrator!r} is explicit (no solver, every step converges), so "
                       f"{', '.join(given)} would be ignored; drop {'it' if len(given) == 1 else 'them'}")


def _limits(args, config) -> int:
    """The run's step count from ``--duration`` / ``--dt``, checked against ``--max-steps`` before any build."""
    from .checks import check_steps, integer, real

    integer(args.max_steps, "--max-steps", minimum=1, error=CliError)
    real(args.max_memory, "--max-memory", positive=True, unit="MB", error=CliError)
    return check_steps(args.duration, None, config.dt, max_steps=args.max_steps, option="--max-steps")


def _simulate(args) -> int:
    from .limits import limit_report
    from .adaptive import AdaptiveOptions
    from .registry import get_plugin
    from .result import plot_formats
    from .simulate import Simulator

    # everything that needs no model, before building one
    params, forces, config = _configuration(args)
    get_plugin("fd", config.fd)
    get_plugin("backend", args.backend)
    if args.solver != "auto":
        get_plugin("solver", args.solver)
    if not np.isfinite(args.duration) or args.duration <= 0:
        raise CliError(f"--duration must be a positive number of seconds, got {args.duration}")
    steps = _limits(args, config)
    opts = {} if args.max_iter is None else {"max_iter": args.max_iter}
    if not np.isfinite(args.energy_limit) or args.energy_limit < 0:
        raise CliError(f"--energy-limit must be a non-negative number (0: no test), got {args.energy_limit}")
    if (args.rtol is not None or args.atol is not None) and not args.adaptive:
        raise CliError("--rtol and --atol apply to --adaptive runs only")
    adaptive: dict | bool = False
    if args.adaptive:
        adaptive = {k: v for k, v in (("rtol", args.rtol), ("atol", args.atol)) if v is not None}
        AdaptiveOptions.parse(adaptive)
        adaptive = adaptive or True
    out = _output_path(args.out, "--out", TRAJECTORY_FORMATS)
    plot = _output_path(args.plot, "--plot", plot_formats())
    q0, qd0 = _vector(args.q0, "--q0"), _vector(args.qd0, "--qd0")

    batch = q0 is not None and q0.ndim == 2
    if args.scheduler and not batch:
        raise CliError("--scheduler runs a batch: give --q0 a .npy file of shape (M, nq), one start per row")
    if args.scheduler and args.backend != "c":
        raise CliError(f"--scheduler runs the c backend's native batch on the workers; add --backend c "
                       f"(got --backend {args.backend})")
    if batch and args.adaptive:
        raise CliError("a batch (--q0 of shape (M, nq)) takes fixed steps; drop --adaptive")

    model, default_q0 = _load_model(args, params)
    if batch:
        q0 = np.stack([model.check_state(row, f"--q0 row {m}") for m, row in enumerate(q0)])
        qd0 = np.zeros((len(q0), model.nv)) if qd0 is None else np.atleast_2d(qd0)
        if qd0.shape[0] == 1:
            qd0 = np.repeat(qd0, len(q0), axis=0)
        if qd0.shape[0] != len(q0):
            raise CliError(f"--qd0: {qd0.shape[0]} rows for {len(q0)} starts in --q0")
        qd0 = np.stack([model.check_velocity(row, f"--qd0 row {m}") for m, row in enumerate(qd0)])
    else:
        q0 = model.check_state(default_q0 if q0 is None else q0, "--q0")
        qd0 = model.check_velocity(np.zeros(model.nv) if qd0 is None else qd0, "--qd0")
    from .checks import check_memory

    max_memory = int(args.max_memory * 1e6)
    check_memory(steps, 3 * (model.nq + model.nv), len(q0) if batch else 1, max_memory=max_memory,
                 option="--max-memory")
    sim = Simulator(model, args.integrator, order=config.order, solver=args.solver, dt=config.dt, forces=forces,
                    objective=config.objective, fd=config.fd, solver_options=opts or None, backend=args.backend,
                    on_failure=args.on_failure or "stop", max_halvings=4 if args.max_halvings is None else
                    args.max_halvings, energy_limit=args.energy_limit or None, adaptive=adaptive,
                    max_steps=args.max_steps, max_memory=max_memory, max_dofs=args.max_dofs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if batch:
            traj = _batch(sim, q0, qd0, args)
        else:
            traj = sim.rollout(q0, qd0, duration=args.duration,
                               progress=not args.no_progress and sys.stderr.isatty())
    from .render import model_source

    traj.info["model_source"] = (model_source(path=args.model, balance_inertia=args.balance_inertia) if args.model
                                 else model_source(args.name, params))
    written = []                                  # the files first: a reader of stdout that left loses no file
    try:
        if out:
            written.append(f"Trajectory saved to {traj.save(out)}.")
        if plot:
            written.append(f"Energy plot saved to {traj.plot_energy(plot)}.")
    except OSError as exc:                        # checked before the run; the disk can still fill up
        raise CliError(f"cannot write {exc.filename or out or plot}: {exc.strerror or exc}") from None
    for w in caught:
        print(f"pbf: warning: {w.message}", file=sys.stderr)
    print(traj.summary())
    limits = None if batch else limit_report(model, traj.q, traj.t)
    if limits is not None:
        print(limits)
    for line in written:
        print(line)
    if batch:                      # the worst verdict among the trajectories
        worst = max(set(traj.status), key=lambda s: EXIT_CODES[s])
        if worst != "ok":
            print(f"pbf: {int(np.sum(traj.status != 'ok'))} of {len(traj.status)} trajectories did not end ok "
                  f"(exit status {EXIT_CODES[worst]}: {worst})", file=sys.stderr)
        return EXIT_CODES[worst]
    status = traj.status.value
    if status != "ok":
        print(f"pbf: run ended {status} at t={traj.failure_time:.6g} s (first failure; exit status "
              f"{EXIT_CODES[status]})", file=sys.stderr)
    return EXIT_CODES[status]


def _batch(sim, Q0: np.ndarray, QD0: np.ndarray, args):
    """A batch of rollouts, on the Dask scheduler of ``--scheduler`` where given."""
    if not args.scheduler:
        return sim.rollout_batch(Q0, QD0, args.duration)
    try:
        from dask.distributed import Client
    except ImportError:
        raise CliError("--scheduler needs Dask: pip install 'pbframework[distributed]'") from None
    from .distributed import rollout_batch

    try:
        client = Client(args.scheduler, timeout=30)
    except (OSError, TimeoutError, ValueError) as exc:
        raise CliError(f"--scheduler: cannot reach the Dask scheduler at {args.scheduler!r} ({exc})") from None
    with client:
        return rollout_batch(client, sim, Q0, QD0, args.duration)


def _export(args) -> int:
    from .export import export
    from .simulate import Simulator

    params, forces, config = _configuration(args)
    if args.steps < 1:
        raise CliError(f"--steps must be a positive integer, got {args.steps}")
    q0, qd0 = _vector(args.q0, "--q0"), _vector(args.qd0, "--qd0")
    model, default_q0 = _load_model(args, params)
    q0 = model.check_state(default_q0 if q0 is None else q0, "--q0")
    sim = Simulator(model, args.integrator, order=config.order, solver=args.solver, dt=config.dt, forces=forces,
                    objective=config.objective, fd=config.fd,
                    max_halvings=4 if args.max_halvings is None else args.max_halvings, max_dofs=args.max_dofs,
                    solver_options=None if args.max_iter is None else {"max_iter": args.max_iter})
    report = export(sim, args.out, precision=args.precision, name=args.lib_name, force=args.overwrite, q0=q0,
                    qd0=qd0, steps=args.steps)
    print(report)
    return 0


def _render(args) -> int:
    from .render import Camera, render

    path = Path(args.trajectory)
    if not path.is_file():
        raise CliError(f"trajectory file {str(path)!r} not found")
    if args.pixels < 16:
        raise CliError(f"--pixels must be at least 16, got {args.pixels}")
    camera = Camera(elev=args.elev, azim=args.azim, roll=args.roll, target=args.target, extent=args.extent)
    r = render(path, args.out, fps=args.fps, camera=camera, size=args.pixels / 80.0, dpi=80,
               max_faces=args.max_faces)
    print(f"Animation of {r['frames']} frames written to {r['path']} in {r['seconds']:.1f} s.")
    return 0


def _view(args) -> int:
    from .view import view

    path = Path(args.trajectory)
    if not path.is_file():
        raise CliError(f"trajectory file {str(path)!r} not found")
    viewer = view(path, host=args.host, port=args.port, block=False)
    try:                                          # the URL inside: a Ctrl-C right after it still stops cleanly
        print(f"Viewer of {viewer.title} at {viewer.url} (Ctrl-C to stop).", flush=True)
        viewer.wait()
    except KeyboardInterrupt:                     # the way to stop it: not an error
        print("Viewer stopped.")
    finally:
        viewer.close()
    return 0


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
    try:
        status = _main(argv)
        sys.stdout.flush()                  # a reader that left early shows here at the latest
        return status
    except BrokenPipeError:
        # the recipe of Python's signal module docs ("Note on SIGPIPE"): point stdout at devnull so the
        # interpreter's final flush does not fail again, and end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    from .display import MissingExtra
    from .errors import PbfError

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
        if args.command == "export":
            return _export(args)
        if args.command == "render":
            return _render(args)
        if args.command == "view":
            return _view(args)
        return _simulate(args)
    except (PbfError, FileNotFoundError, ValueError, MissingExtra) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"pbf: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pbf: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
