"""MuJoCo against pbframework on CHAIN-10 and CHAIN-40 (DESIGN.md "Canonical benchmarks"), 10 s each.

Both simulators run the same chain (MJCF built here with DESIGN.md's inertia; ball joints as two hinges,
y then z; contacts off, no damping) from the same state, measured in the same run on this machine:

* MuJoCo: RK4, Euler (semi-implicit) and implicitfast at several dt. Wall time: one native
  ``mujoco.rollout`` call on one thread, energy computation switched off. Energy error: a second,
  Python-stepped pass with ``mjENBL_ENERGY``: ``mj_energyPos`` + ``mj_energyVel`` of every state, read after
  ``mj_forward`` on it (read straight after an RK4 ``mj_step`` it is the last Runge-Kutta stage's, which
  overstates RK4's error 10-20x: CHAIN-10 at 1 ms 9.2% against the states' 0.45%), cross-checked against
  pbframework's exact energy of the same coordinates; a run is *diverged* when MuJoCo reports a bad
  qacc / qpos (it then resets the state) or the energy is not finite.
* pbframework: ``pbad`` orders 2-4 (solver ``auto``: ``lm`` on the order-2 energy, ``jtj_lm`` on the
  residuals of orders 3-4), dt from 0.01 to 0.1, ``backend="c"``. Wall time: the native rollout (the
  build and the energy evaluation are not included; build times are printed separately). A run that
  exceeds ``--max-run-seconds`` is stopped and reported as a timeout.

Energy error (DESIGN.md): ``max_t |E(t) - E(0)|`` in percent of ``M g sum_i (i + 0.5) L``; pbframework's
energy is the Simulator's (exact potential, the integrator's kinetic energy).

Ratios at matched error: for every MuJoCo run that did not diverge, the fastest pbframework run with the
same or a smaller energy error; ``ratio = wall(pbframework) / wall(MuJoCo)``. Targets (the issue): at
most 1/3 on CHAIN-10 at every error level MuJoCo reaches; on CHAIN-40, against RK4 at 0.2 ms, at most 1/10.

Floor: next to each pbframework run, the CPU time of one native iteration of its solver (derivatives plus
one Cholesky solve, timed at the first step) and ``floor_wall`` = that times the run's steps: what the run
would cost if this solver converged in one iteration at every step. The ratio table's ``floor`` column is
the smallest ``floor_wall`` among the runs that reach MuJoCo's error, over MuJoCo's wall time: where it
exceeds the target, fewer iterations of these solvers alone cannot meet it.

Writes ``peer_mujoco.json`` and ``peer_mujoco.png`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT``
(benchmarks/_common.py).

    python benchmarks/peer_mujoco.py                  # CHAIN-10 and CHAIN-40, 10 s
    python benchmarks/peer_mujoco.py --links 10 --duration 2 --max-run-seconds 20   # quick look
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import energy_error, out_path, write_json  # noqa: E402

import pbframework as pbf  # noqa: E402

MJ_DTS = {"RK4": (0.0002, 0.0005, 0.001, 0.0025), "Euler": (0.0001, 0.0002, 0.0005, 0.001),
          "implicitfast": (0.0001, 0.0002, 0.0005, 0.001)}
PBF_ORDERS = (2, 3, 4)
PBF_DTS = (0.01, 0.02, 0.05, 0.1)


# ---------------------------------------------------------------------------------------------------------
# MuJoCo
# ---------------------------------------------------------------------------------------------------------

def chain_mjcf(model: pbf.ArticulatedBody, integrator: str, dt: float, energy: bool) -> str:
    """CHAIN-N of ``model`` (a :func:`pbframework.models.chain`) in MJCF: same masses, centres of mass and
    inertias, joints hinge-y then hinge-z at each parent's tip (a ``ball`` joint where the model has ``ball``
    joints: MuJoCo's quaternion is ``(w, x, y, z)``, see :func:`mujoco_qpos`), contacts disabled, no
    damping."""
    bodies = ""
    links = list(model.links)
    for i in reversed(range(len(links))):
        link = links[i]
        I = np.diag(link.inertia)
        pos = "0 0 0" if i == 0 else f"{2 * links[i - 1].com[0]:.17g} 0 0"
        joints = (f'<joint name="{link.name}_ball" type="ball"/>' if model.joints[i].type.value == "ball" else
                  f'<joint name="{link.name}_y" type="hinge" axis="0 1 0"/>'
                  f'<joint name="{link.name}_z" type="hinge" axis="0 0 1"/>')
        bodies = (f'<body name="{link.name}" pos="{pos}">' + joints +
                  f'<inertial pos="{link.com[0]:.17g} {link.com[1]:.17g} {link.com[2]:.17g}" mass="{link.mass:.17g}" '
                  f'diaginertia="{I[0]:.17g} {I[1]:.17g} {I[2]:.17g}"/>' + bodies + "</body>")
    g = model.gravity
    flags = '<flag contact="disable" energy="enable"/>' if energy else '<flag contact="disable"/>'
    return (f'<mujoco model="{model.name}"><option timestep="{float(dt)!r}" integrator="{integrator}" '
            f'gravity="{float(g[0])!r} {float(g[1])!r} {float(g[2])!r}">{flags}</option><worldbody>{bodies}</worldbody></mujoco>')


def mujoco_qpos(model: pbf.ArticulatedBody, q: np.ndarray, inverse: bool = False) -> np.ndarray:
    """pbframework's configurations (rows) in MuJoCo's coordinate order: a ``ball`` joint's quaternion is
    ``(x, y, z, w)`` here and ``(w, x, y, z)`` in MuJoCo (``inverse``: back)."""
    q = np.array(q, dtype=float, copy=True)
    for j in model.joints:
        if j.type.value == "ball":
            sl = model.joint_q_index[j.name]
            block = q[..., sl].copy()
            q[..., sl] = np.roll(block, -1 if inverse else 1, axis=-1)
    return q


def mujoco_run(model: pbf.ArticulatedBody, q0: np.ndarray, integrator: str, dt: float, duration: float,
               scale: float, energy_fn=None) -> dict:
    """One MuJoCo row: a timed native rollout, then an accuracy pass stepped from Python.

    The energy of a state is read after ``mj_forward`` on that state. ``data.energy`` right after ``mj_step``
    is not the new state's: with RK4 it is evaluated at the last Runge-Kutta stage, and for CHAIN-10 at 1 ms
    that reads as a 9.2% error where the states' true error is 0.45% (0.55% against 0.043% at 0.5 ms).
    ``energy_fn(Q, V) -> (T, V)`` (pbframework's exact energy on MuJoCo's identical coordinates) gives a
    second, independent error, ``error_pbf_energy``, which must agree.
    """
    import mujoco
    import mujoco.rollout

    nstep = int(round(duration / dt))
    # timing pass: one native rollout, energy off
    m = mujoco.MjModel.from_xml_string(chain_mjcf(model, integrator, dt, energy=False))
    d = mujoco.MjData(m)
    d.qpos[:] = q0
    mujoco.mj_forward(m, d)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    s0 = np.zeros(mujoco.mj_stateSize(m, spec))
    mujoco.mj_getState(m, d, s0, spec)
    t0 = time.perf_counter()
    mujoco.rollout.rollout(m, d, s0[None], nstep=nstep)
    wall = time.perf_counter() - t0
    # accuracy pass: the energy of every state
    me = mujoco.MjModel.from_xml_string(chain_mjcf(model, integrator, dt, energy=True))
    de = mujoco.MjData(me)
    de.qpos[:] = q0
    mujoco.mj_forward(me, de)
    E = [de.energy[0] + de.energy[1]]
    Q, V = [de.qpos.copy()], [de.qvel.copy()]
    diverged = False
    bad = (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL)
    for _ in range(nstep):
        mujoco.mj_step(me, de)
        mujoco.mj_forward(me, de)          # data.energy of the state just reached (see above)
        e = de.energy[0] + de.energy[1]
        if any(de.warning[w].number for w in bad) or not math.isfinite(e):
            diverged = True
            break
        E.append(e)
        Q.append(de.qpos.copy())
        V.append(de.qvel.copy())
    E = np.asarray(E)
    err = energy_error(E, scale, diverged)
    row = {"peer": "MuJoCo", "config": integrator, "dt": dt, "wall": wall, "error": err, "diverged": diverged,
           "timeout": False}
    if energy_fn is not None and not diverged:
        T, P = energy_fn(np.asarray(Q), np.asarray(V))
        Ep = np.asarray(T) + np.asarray(P)
        row["error_pbf_energy"] = energy_error(Ep, scale)
    return row


# ---------------------------------------------------------------------------------------------------------
# pbframework
# ---------------------------------------------------------------------------------------------------------

def trajectory_energy(sim: pbf.Simulator, states: np.ndarray, dt: float) -> np.ndarray:
    """The Simulator's total energy of the integrator states of a rollout at step ``dt`` from its start
    (:meth:`pbframework.Simulator.rollout_energy`)."""
    T, V = sim.rollout_energy(states, dt)
    return T + V


COUNTERS = ("wall", "steps_done", "iterations", "halvings", "unconverged")


def rollout_steps(duration: float, dt: float) -> int:
    """Steps of a rollout of ``duration`` seconds, rounded up as :meth:`pbframework.Simulator.rollout` does."""
    return max(1, int(math.ceil(duration / dt - 1e-9)))


def chunked_rollout(sim: pbf.Simulator, q0: np.ndarray, dt: float, duration: float, max_seconds: float = math.inf,
                    chunk_seconds: float = 0.1, log=None, resume: dict | None = None, checkpoint=None,
                    stop=None) -> dict:
    """A rollout through the simulator's native runner (dt is a parameter of the compiled step, so one
    library serves every dt) in pieces of ``chunk_seconds`` simulated time, so a run far slower than its
    peers can be stopped after ``max_seconds`` of wall time (counted over this call only); the pieces
    continue exactly (identical results).

    ``log(done_t, wall, iterations, halvings)`` is called after every piece, ``checkpoint(snapshot)`` too,
    where ``snapshot()`` returns the result so far (the dict below, status ``running``). ``resume``: such a
    result of an earlier, stopped call (e.g. saved by ``checkpoint``); the rollout continues from its last
    state and its counters, with results identical to an uninterrupted run. ``stop(states)``, called with
    the states of every piece that follow the rollout's first state (the pieces' new rows), returns the
    index of the first one that counts as diverged (e.g. the energy benchmark's energy limit) or None; the
    rollout then ends before that state, status ``diverged``, its counters over the steps kept, and the
    result says ``stopped: True`` (kept when a stopped result is resumed).

    Returns a dict: ``states`` (integrator states, one row per step reached), ``wall``, ``steps_done``,
    ``status`` (``done``, ``diverged``, ``failed`` or ``timeout``), ``iterations``, ``halvings``,
    ``unconverged`` (totals)."""
    steps = rollout_steps(duration, dt)
    per = max(1, int(round(chunk_seconds / dt)))
    runner = sim.runner
    states, state = [], None
    acc = dict.fromkeys(COUNTERS, 0)
    acc["wall"] = 0.0
    if resume is not None:
        S0 = np.asarray(resume["states"], float)
        if S0.ndim != 2 or S0.shape[1] != runner.ns or len(S0) != int(resume["steps_done"]) + 1:
            raise ValueError(f"resume: states of shape {S0.shape} do not fit this simulator (ns = {runner.ns}) "
                             f"and steps_done = {resume['steps_done']}")
        states, state = [S0], S0[-1]
        acc.update({k: resume[k] for k in COUNTERS})
        if resume.get("status") in ("diverged", "failed"):     # it ended there: nothing to continue
            return {"states": S0, "status": resume["status"], "stopped": bool(resume.get("stopped", False)),
                    **acc}
    status, wall_here, cut = "done", 0.0, None
    while acc["steps_done"] < steps:
        done = acc["steps_done"]
        n = min(per, steps - done)
        out = runner.rollout(q0, np.zeros(sim.model.nv), 0.0, dt, n, state=state, first_step=done)
        acc["wall"] += out.wall_time
        wall_here += out.wall_time
        kept = out.steps_done
        cut = stop(out.states[1:kept + 1]) if stop is not None else None
        if cut is not None:
            kept = int(cut)
        states.append(out.states[:kept + 1] if not states else out.states[1:kept + 1])
        acc["steps_done"] += kept
        acc["iterations"] += int(out.iterations[:kept].sum())
        acc["halvings"] += int(out.halvings[:kept].sum())
        acc["unconverged"] += int((~out.converged[:kept]).sum())
        if log is not None:
            log(acc["steps_done"] * dt, acc["wall"], acc["iterations"], acc["halvings"])
        if cut is not None or out.status != "done":
            status = "diverged" if cut is not None else out.status
            break
        state = out.states[-1]
        if checkpoint is not None:
            def snapshot():
                states[:] = [np.concatenate(states)]
                return {"states": states[0], "status": "running", **acc}

            checkpoint(snapshot)
        if wall_here > max_seconds and acc["steps_done"] < steps:
            status = "timeout"
            break
    return {"states": np.concatenate(states), "status": status, "stopped": cut is not None, **acc}


def iteration_seconds(sim: pbf.Simulator, q0: np.ndarray, dt: float) -> float:
    """CPU seconds of one native iteration of ``sim``'s solver at its first step from rest at ``q0``: the
    solver's derivatives (f, g and the Hessian or Gauss-Newton matrix; f and g for ``lbfgs``) plus, for
    ``lm`` / ``jtj_lm``, one damped Cholesky factorisation and solve. Each part is the best of five native
    loops of about 50 ms, timed in this thread's CPU time (on a shared machine a wall-clock loop that is
    preempted reads 2-3x slower). ``steps`` times this is what a run would cost if the solver converged in
    one iteration at every step.

    Raises:
        ValueError: ``sim`` is not an implicit integrator on the ``c`` backend (nothing to time)."""
    if sim.runner is None or not sim.implicit or getattr(sim.runner, "time_kernel", None) is None:
        raise ValueError(f"iteration_seconds: needs an implicit integrator on the c backend, got "
                         f"{sim.integrator!r} on {sim.backend!r}")
    runner, pb, nq = sim.runner, sim.problem, sim.model.nq
    s = runner.init(q0, np.zeros(nq), 0.0, dt)
    p = np.asarray(pb.params(s, 0.0, dt, sim.inputs(0.0, s[:nq], s[nq:2 * nq]))).ravel()
    x = np.asarray(pb.guess(p)).ravel()

    def cpu_seconds(what: str, reps: int) -> float:
        c0 = time.thread_time()
        runner.time_kernel(p, x, what, reps)
        return (time.thread_time() - c0) / reps

    def best(what: str) -> float:
        reps = max(1, int(0.05 / max(cpu_seconds(what, 1), 1e-9)))
        return min(cpu_seconds(what, reps) for _ in range(5))

    if sim.solver_name == "lbfgs":
        return best("gradient")
    return best("hessian") + best("solve")


def pbf_run(sim: pbf.Simulator, q0: np.ndarray, dt: float, duration: float, scale: float, max_seconds: float,
            chunk_seconds: float = 0.1) -> dict:
    """One pbframework row of the table: :func:`chunked_rollout`, its energy error, and the floor of its wall
    time (:func:`iteration_seconds` times the steps of the whole duration)."""
    out = chunked_rollout(sim, q0, dt, duration, max_seconds, chunk_seconds)
    iteration = iteration_seconds(sim, q0, dt)
    status, done = out["status"], out["steps_done"]
    E = trajectory_energy(sim, out["states"], dt)
    diverged = status in ("diverged", "failed") or not np.all(np.isfinite(E))
    err = energy_error(E, scale, diverged)
    return {"peer": "pbframework", "config": f"pbad{sim.problem.order}/{sim.solver_name}", "dt": dt,
            "wall": out["wall"], "error": err, "diverged": diverged, "timeout": status == "timeout",
            "t_reached": done * dt, "iterations_per_step": out["iterations"] / max(done, 1),
            "iteration_s": iteration, "floor_wall": iteration * rollout_steps(duration, dt),
            "halvings": out["halvings"], "unconverged_steps": out["unconverged"]}


# ---------------------------------------------------------------------------------------------------------

def fmt_err(r: dict) -> str:
    if r["diverged"]:
        return "diverged"
    return f"{r['error']:.3g}%" + (f" (to t={r['t_reached']:.2g} s)" if r.get("timeout") else "")


def matched(mj_rows: list[dict], pbf_rows: list[dict], target: float) -> list[dict]:
    ok = [r for r in pbf_rows if not r["diverged"] and not r["timeout"]]
    out = []
    for m in mj_rows:
        if m["diverged"]:
            continue
        cands = [r for r in ok if r["error"] <= m["error"]]
        best = min(cands, key=lambda r: r["wall"]) if cands else None
        ratio = best["wall"] / m["wall"] if best else math.inf
        out.append({"mujoco": f"{m['config']} dt={m['dt']}", "mujoco_error": m["error"], "mujoco_wall": m["wall"],
                    "pbframework": f"{best['config']} dt={best['dt']}" if best else None,
                    "pbframework_error": best["error"] if best else None,
                    "pbframework_wall": best["wall"] if best else None, "ratio": ratio, "target": target,
                    "met": ratio <= target,
                    "floor_ratio": min(r["floor_wall"] for r in cands) / m["wall"] if cands else math.inf})
    return out


def plot(results: dict, path: Path, duration: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6.5 * len(results), 4.8), squeeze=False)
    markers = {"RK4": "o", "Euler": "s", "implicitfast": "^"}
    for ax, (name, rows) in zip(axes[0], results.items()):
        finite = [r["error"] for r in rows if math.isfinite(r["error"]) and r["error"] > 0]
        top = 10 ** math.ceil(math.log10(max(finite))) * 3 if finite else 1e3
        for r in rows:
            y = r["error"] if math.isfinite(r["error"]) and r["error"] > 0 else top
            if r["peer"] == "MuJoCo":
                ax.scatter(r["wall"], y, marker=markers.get(r["config"], "o") if not r["diverged"] else "x",
                           color="tab:red", s=36)
                ax.annotate(f"{r['config']} {r['dt'] * 1e3:g}ms", (r["wall"], y), fontsize=6, color="tab:red")
            else:
                order = r["config"][4]
                color = {"2": "tab:blue", "3": "tab:green", "4": "tab:purple"}[order]
                ax.scatter(r["wall"], y, marker="D" if not (r["diverged"] or r["timeout"]) else "x", color=color,
                           s=30)
                ax.annotate(f"K{order} {r['dt']:g}", (r["wall"], y), fontsize=6, color=color)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(top, color="0.7", lw=0.5)
        ax.set_xlabel(f"wall time for {duration:g} s [s]")
        ax.set_ylabel("energy error max|E-E0| [% of scale] (top line: diverged)")
        ax.set_title(f"{name}: MuJoCo (red) vs pbframework pbad backend c")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--links", type=int, nargs="+", default=[10, 40])
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--max-run-seconds", type=float, default=60.0,
                    help="stop a pbframework run after this much wall time (reported as a timeout)")
    ap.add_argument("--orders", type=int, nargs="+", default=list(PBF_ORDERS))
    ap.add_argument("--dts", type=float, nargs="+", default=list(PBF_DTS))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} (shared: compare within this run)")
    results, ratios, builds = {}, {}, []
    for n in args.links:
        model = pbf.models.chain(n)
        q0 = pbf.models.chain_q0(model)
        scale = pbf.models.chain_energy_scale(model)
        name = f"CHAIN-{n}"
        rows = []
        print(f"\n== {name}: {args.duration:g} s, energy scale {scale:.4g} J")
        energy_fn = pbf.Simulator(model, "rk4", dt=0.001).energy       # exact energy of any state
        for integ, dts in MJ_DTS.items():
            for dt in dts:
                r = mujoco_run(model, q0, integ, dt, args.duration, scale, energy_fn)
                rows.append(r)
                check = (f"  (pbframework's energy of the same states: {r['error_pbf_energy']:.3g}%)"
                         if "error_pbf_energy" in r else "")
                print(f"  MuJoCo {integ:12s} dt={dt * 1e3:6.2f} ms  wall {r['wall']:8.3f} s  error {fmt_err(r)}"
                      + check, flush=True)
        for order in args.orders:
            t0 = time.perf_counter()
            options = {"derivatives": "full"} if model.nq <= 20 else {}
            sim = pbf.Simulator(model, "pbad", order=order, dt=args.dts[0], backend="c", backend_options=options,
                                on_failure="continue", energy_limit=None)
            build = time.perf_counter() - t0
            lib = sim.runner.library
            builds.append({"model": name, "order": order, "solver": sim.solver_name, "build_s": build,
                           "compile_s": lib.compile_seconds, "cached": lib.cached, "plan": sim.runner.plan.describe()})
            print(f"  pbframework pbad order {order} ({sim.solver_name}): built in {build:.1f} s "
                  f"({'cache hit' if lib.cached else f'compiled in {lib.compile_seconds:.1f} s'}); "
                  f"{sim.runner.plan.describe()}", flush=True)
            for dt in args.dts:
                r = pbf_run(sim, q0, dt, args.duration, scale, args.max_run_seconds)
                rows.append(r)
                print(f"  pbframework {r['config']:14s} dt={dt:5.3f} s   wall {r['wall']:8.3f} s  error {fmt_err(r)}"
                      f"  ({r['iterations_per_step']:.1f} it/step, {r['halvings']} halvings, "
                      f"{r['unconverged_steps']} unconverged; one iteration {r['iteration_s'] * 1e6:.1f} us, "
                      f"floor {r['floor_wall']:.3f} s)", flush=True)
        results[name] = rows
        mj = [r for r in rows if r["peer"] == "MuJoCo"]
        if n == 40:
            mj = [r for r in mj if r["config"] == "RK4" and abs(r["dt"] - 0.0002) < 1e-12] or mj
            target = 0.1
        else:
            target = 1.0 / 3.0
        ratios[name] = matched(mj, [r for r in rows if r["peer"] == "pbframework"], target)

    print(f"\nWork-precision table (wall time of the {args.duration:g} s simulation; energy error in % of the scale)")
    print(f"{'model':9s} {'peer':12s} {'config':18s} {'dt [s]':>8s} {'wall [s]':>9s}  {'energy error':>14s}  diverged")
    for name, rows in results.items():
        for r in rows:
            print(f"{name:9s} {r['peer']:12s} {r['config']:18s} {r['dt']:8.4g} {r['wall']:9.3f}  {fmt_err(r):>14s}  "
                  f"{'yes' if r['diverged'] else ('timeout' if r['timeout'] else 'no')}")
    print("\nRatio of wall times at matched energy error: fastest pbframework run with error <= MuJoCo's;")
    print("floor: the smallest floor_wall (one solver iteration per step) of the runs with error <= MuJoCo's, "
          "over MuJoCo's wall")
    print(f"{'model':9s} {'MuJoCo run':22s} {'error':>8s} {'wall':>8s} | {'pbframework run':24s} {'error':>8s} "
          f"{'wall':>8s} | {'ratio':>7s} {'target':>7s} met | {'floor':>7s}")
    for name, rows in ratios.items():
        for r in rows:
            pe = f"{r['pbframework_error']:.3g}%" if r["pbframework"] else "-"
            pw = f"{r['pbframework_wall']:.3f}" if r["pbframework"] else "-"
            print(f"{name:9s} {r['mujoco']:22s} {r['mujoco_error']:7.3g}% {r['mujoco_wall']:8.3f} | "
                  f"{r['pbframework'] or 'none reaches it':24s} {pe:>8s} {pw:>8s} | {r['ratio']:7.3g} "
                  f"{r['target']:7.3g} {'yes' if r['met'] else 'NO ':3s} | {r['floor_ratio']:7.3g}")
    write_json("peer_mujoco.json", {"duration": args.duration, "results": results, "ratios": ratios,
                                    "builds": builds, "load_average": os.getloadavg()[0]})
    plot(results, out_path("peer_mujoco.png"), args.duration)
    print(f"\nwrote {out_path('peer_mujoco.json')} and {out_path('peer_mujoco.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
