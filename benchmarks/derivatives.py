"""DERIVATIVES (issue 20): the full one-step Jacobian, pbframework's exact one against MuJoCo's finite
differences (``mujoco.mjd_transitionFD``), time and accuracy, measured in the same run.

Scenes (gravity and a torque input on every actuated coordinate, no contact, no joint limits, no damping;
one seeded state each: random velocities and torques):

* CHAIN-10 (``models.chain(10)``, ball2 joints: 20 coordinates), from ``models.chain_q0``;
* the panda (example-robot-data URDF, 9 coordinates: 7 revolute, 2 prismatic fingers), every joint at the
  middle of its limits;
* solo12 (``models.solo12()``, free base + 12 leg joints), from ``models.solo12_q0``, floating in gravity:
  no ground, so no contact (the benchmark measures the smooth step's derivatives only).

pbframework: ``pbframework.differentiable.step_function(sim.problem, jacobian=True,
rootfinder="fast_newton")``, one ``casadi.Function`` ``(s, t, dt, u) -> (s_next, d s_next / d s,
d s_next / d u)``: the step solved by Newton to ``tol`` = 1e-12 on its first-order conditions, the
Jacobians by the implicit function theorem at that solution (one LDL^T factorisation of the energy's
Hessian). Timed on the CasADi VM and as generated C: the library's own compiled step function
(``sim.step_function(backend="c")``, i.e. ``differentiable.compile_step``: one cached library holding
``step`` and ``step_jacobian``, whose Jacobian also has the two columns d/dt and d/ddt, one back-substitution
more here) at ``-O1``, the repository default, ``--opt``; the compile time is printed, a cached build's as
recorded when it was built), one call from Python each (the C one through ``BatchRunner.bind`` on the
library's ``step_jacobian``: one ctypes call). Integrators: ``pbad``
order 2 (implicit, energy objective; state ``(q_k, v_k, q_{k-1})``, ``ns = 2 nq + nv``) and ``rk4``
(explicit, the baseline; state ``(q, v)``). rk4's Jacobian is one SX graph (four forward-dynamics stages
differentiated together): its C is 53 MB on CHAIN-10, over ``--max-source-mb`` (5), so rk4 is timed on
the VM only. For comparison, ``pbad2 casadi.jacobian`` times the library's plain route on the VM:
``casadi.jacobian`` of ``sim.step_function()`` (forward sweeps through the rootfinder and every SX
function in the graph).

MuJoCo: the same robot (benchmarks/_mjcf.py: same masses, inertias, joint frames; a ``motor`` actuator,
gear 1, on each actuated coordinate, in pbframework's order), ``timestep`` = the same dt, integrator
``implicitfast`` (with no damping and no velocity-dependent actuator it is semi-implicit Euler): the peer of
both of ours, since ``mjd_transitionFD`` refuses MuJoCo's RK4 ("RK4 integrator is not supported").
``mjd_transitionFD(m, d, eps, centered, A, B, None, None)`` with ``eps`` = 1e-6 (``--eps``), centred
(``2 (2 nv + nu)`` steps) and forward (``2 nv + nu + 1``), A and B only, preallocated, from Python. The
error of both at eps = 1e-4 .. 1e-8 is printed too (at 1e-6 the centred differences are already
noise-dominated on these models; 1e-5 is their best).

The two Jacobians are of *different* maps (different integrators, and pbad's state carries the previous
configuration where MuJoCo's carries a velocity), so their entries are not compared with each other; each
is compared with a high-precision reference of *its own* step map: Richardson extrapolation of centred
differences of that map, a tableau of 4 rows (steps h / 2^0..3, error O(h^8)), for each column from the
base step h among 1e-1, 3e-2, 1e-2, 3e-3, 1e-3 (``--ref-hs``) with the smallest estimated error. The
estimate (printed as ``ref_est``, relative like the errors) is the tableau's last correction plus the map's
own noise carried through the tableau, that noise measured from differences at steps 1e-8 and 2e-8 (pure
noise there): large steps keep rounding and solver noise from being amplified by 1/h, and the steps are
analytic (no contact), so extrapolation removes the truncation error. An error at or below ``ref_est`` is
below the reference's resolution and counts as equal. MuJoCo's map is evaluated by
``mjd_transitionFD`` itself (centred, eps = h: MuJoCo's own tangent-space perturbation of quaternions);
pbframework's by the ``newton`` rootfinder to 1e-13 (``--ref-tol``) followed by 3 more Newton steps
(:func:`polished_step`: differences of the unpolished map differentiate Newton's last iterate, which
still depends on the initial guess). The reference is independent of the implicit-function formula it
checks. Errors are ``max |J - J_ref| / max |J_ref|``, separately for the state part (``err_s``:
``d s_next / d s``, MuJoCo's ``A``) and the control part (``err_u``: ``d s_next / d u``, MuJoCo's ``B``).

Target (the issue): pbframework's Jacobian (generated C) costs at most 1/3 of MuJoCo's centred FD at equal
or better accuracy on every model. The summary prints ``ours C / MuJoCo centred`` and ``/ forward`` for
pbad2 and rk4, and whether the target is met.

Usage::

    python benchmarks/derivatives.py             # CHAIN-10, panda, solo12 (about a minute, mostly compiling)
    python benchmarks/derivatives.py --quick     # CHAIN-3 only, fewer repeats (the tests)

Writes ``derivatives.json`` and ``derivatives.png`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT``.
"""

from __future__ import annotations

import argparse
import sys
import time
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import casadi as ca
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pbframework as pbf  # noqa: E402
from pbframework import models  # noqa: E402
from pbframework.differentiable import Rootfinder, compile_step, step_function, step_source  # noqa: E402
from pbframework.step import ProblemKind  # noqa: E402

from _common import median_time, out_path, write_json  # noqa: E402

SCENES = ("chain10", "panda", "solo12")
QUICK_SCENES = ("chain3",)
DT = 0.01
EPS = 1e-6
EPS_SCAN = (1e-4, 1e-5, 1e-6, 1e-7, 1e-8)
REF_HS = (1e-1, 3e-2, 1e-2, 3e-3, 1e-3)
TINY = 1e-8
REF_LEVELS = 4
REF_TOL = 1e-13
POLISH = 3
TOL = 1e-12
SEED = 20
MAX_SOURCE_MB = 5.0
QUICK_MAX_SOURCE_MB = 1.0
OURS = (("pbad2", "pbad", 2), ("rk4", "rk4", None))
PEER = "implicitfast"


# -- scenes ---------------------------------------------------------------------------------------------

def scene(name: str) -> dict:
    """The model, its start ``(q0, v0)``, the actuated coordinates and a torque ``u0`` on them (random, seeded
    by the scene's name)."""
    if name.startswith("chain"):
        m = models.chain(int(name[5:]))
        q0 = models.chain_q0(m)
        label = f"CHAIN-{name[5:]}"
    elif name == "panda":
        from pbframework.io import load_urdf

        m = load_urdf(models.example_robot_data_dir() / "panda_description" / "urdf" / "panda.urdf")
        q0 = np.array([0.5 * (j.lower + j.upper) for j in m.joints if j.type.value != "fixed"])
        label = "panda"
    elif name == "solo12":
        m = models.solo12()
        q0 = models.solo12_q0(m)
        label = "solo12"
    else:
        raise ValueError(f"unknown scene {name!r} (chainN, panda, solo12)")
    dofs = pbf.force_model("joint_torque", torque=0.0).coordinates(m)
    rng = np.random.default_rng([SEED, zlib.crc32(name.encode())])
    v0, u0 = 0.5 * rng.standard_normal(m.nv), 0.5 * rng.standard_normal(len(dofs))
    torque = pbf.force_model("joint_torque", controller=lambda t, q, qd: u0)    # the input u, held at u0
    return {"name": name, "label": label, "model": m, "q0": q0, "v0": v0, "u0": u0, "torque": torque,
            "dofs": dofs}


# -- references -----------------------------------------------------------------------------------------

def richardson(D) -> tuple[np.ndarray, np.ndarray]:
    """Richardson extrapolation of centred differences ``D[i]`` at steps ``h / 2**i`` (even error terms):
    the extrapolated matrix and, per column, its error estimate (the largest change of the column from the
    previous row's extrapolation: conservative)."""
    T = [[np.asarray(d, float)] for d in D]
    for i in range(1, len(T)):
        for j in range(1, i + 1):
            T[i].append(T[i][j - 1] + (T[i][j - 1] - T[i - 1][j - 1]) / (4.0 ** j - 1.0))
    best = T[-1][-1]
    return best, np.abs(best - T[-2][-1]).max(axis=0)


def reference(differences, bases, levels, tiny: float = TINY) -> tuple[np.ndarray, np.ndarray]:
    """The high-precision Jacobian of a step map and its per-column error estimate.

    ``differences(h)`` returns the map's centred differences at step ``h`` (all columns). For each base step
    in ``bases`` a Richardson tableau of ``levels`` rows gives a candidate; its error estimate is the
    tableau's truncation estimate (:func:`richardson`) plus a bound on the map's own noise carried through
    the tableau, ``sum_i |w_i| delta / h_i`` (``w_i`` the tableau's weights on the differences at
    ``h_i = h / 2**i``), where ``delta``, the map's absolute noise, is measured as ``tiny |D(tiny) -
    D(2 tiny)|`` (at so small a step the differences are noise). Each column keeps the candidate with the
    smallest estimate."""
    delta = tiny * float(np.abs(differences(tiny) - differences(2 * tiny)).max())
    weights = richardson([np.eye(levels)[i][None, :] for i in range(levels)])[0].ravel()
    tables = []
    for h in bases:
        best, trunc = richardson([differences(h / 2 ** i) for i in range(levels)])
        noise = delta * sum(abs(w) * 2 ** i / h for i, w in enumerate(weights))
        est = trunc + noise
        tables.append((best, np.where(np.isfinite(est) & np.isfinite(best).all(axis=0), est, np.inf)))
    pick = np.argmin(np.stack([e for _, e in tables]), axis=0)
    ref = np.stack([tables[b][0][:, j] for j, b in enumerate(pick)], axis=1)
    est = np.array([tables[b][1][j] for j, b in enumerate(pick)])
    return ref, est


def rel_err(J, ref) -> float:
    return float(np.abs(np.asarray(J) - ref).max() / max(np.abs(ref).max(), 1e-300))


def rel_est(est, ref) -> float:
    return float(est.max() / max(np.abs(ref).max(), 1e-300)) if est.size else 0.0


def polished_step(problem, tol: float, polish: int) -> ca.Function:
    """The step map ``(s, t, dt, u) -> s_next`` with its root polished: Newton from the integrator's guess to
    ``tol`` (or to its rounding floor, which far from the start state can lie above ``tol``: no error is
    raised, a poor root shows in the tableau's estimate), then ``polish`` more Newton steps. Without them the
    differences would differentiate the *iterate* Newton stops at, whose dependence on the guess (through the
    last iterations) decays only quadratically: on solo12 (measured) an iterate with residual 5e-16 still
    moved ``v_next`` by 1.7e-6 per unit of ``v_k``, which enters the step through the guess alone (the exact
    derivative is 0)."""
    from pbframework.differentiable import _conditions

    if problem.kind is ProblemKind.EXPLICIT:
        return step_function(problem)
    g = _conditions(problem)
    xs, ps = ca.SX.sym("x", problem.nx), ca.SX.sym("p", problem.np)
    gs = g(xs, ps)
    newton = ca.Function("newton_step", [xs, ps], [ca.jacobian(gs, xs), gs])
    S, T, DT, U = ca.MX.sym("s", problem.ns), ca.MX.sym("t"), ca.MX.sym("dt"), ca.MX.sym("u", problem.nu)
    P = problem.params(S, T, DT, U)
    solve = ca.rootfinder("reference_solve", "newton", g, {"abstol": tol, "max_iter": 100, "error_on_fail": False})
    X = solve(problem.guess(P), P)
    for _ in range(polish):
        Gx, gx = newton(X, P)
        X = X - ca.solve(Gx, gx)
    return ca.Function("reference_step", [S, T, DT, U], [problem.advance(X, P)])


def ours_reference(sim, s0, u0, dt, bases, levels, tol) -> dict:
    """:func:`reference` of pbframework's step map (``newton`` to ``tol``, polished: :func:`polished_step`)."""
    F = polished_step(sim.problem, tol, POLISH)
    z0 = np.concatenate([s0, u0])
    ns, nz = s0.size, z0.size
    Fmap = F.map(2 * nz)

    def differences(h):
        Z = np.concatenate([z0[:, None] + h * np.eye(nz), z0[:, None] - h * np.eye(nz)], axis=1)
        out = np.asarray(Fmap(Z[:ns], 0.0, dt, Z[ns:]))
        return (out[:, :nz] - out[:, nz:]) / (2 * h)

    J, est = reference(differences, bases, levels)
    return {"s": J[:, :ns], "u": J[:, ns:], "est_s": rel_est(est[:ns], J[:, :ns]),
            "est_u": rel_est(est[ns:], J[:, ns:])}


# -- pbframework ----------------------------------------------------------------------------------------

def run_ours(sc: dict, key: str, integrator: str, order, dt: float, args) -> list[dict]:
    """pbframework's Jacobian of one scene and integrator: the VM, the plain ``casadi.jacobian`` route (pbad)
    and generated C, each with its error against :func:`ours_reference`; on C also the step alone."""
    from pbframework.codegen.build import BatchRunner, BuildError

    m = sc["model"]
    sim = pbf.Simulator(m, integrator, order=order, dt=dt, forces=["gravity", sc["torque"]])
    pb = sim.problem
    s0, u0 = sim.initial_state(sc["q0"], sc["v0"]), sc["u0"]
    ref = ours_reference(sim, s0, u0, dt, args.ref_hs, args.ref_levels, args.ref_tol)
    base = {"model": sc["label"], "integrator": key, "ns": pb.ns, "nu": pb.nu, "nx": pb.nx,
            "ref_est_s": ref["est_s"], "ref_est_u": ref["est_u"]}
    t0 = time.perf_counter()
    FJ = step_function(pb, tol=TOL, jacobian=True, rootfinder=Rootfinder.FAST_NEWTON)
    build_graph = time.perf_counter() - t0
    vm_out = [np.asarray(ca.densify(o)) for o in FJ(s0, 0.0, dt, u0)]
    rows = []
    t_vm = median_time(lambda: FJ(s0, 0.0, dt, u0), repeats=args.repeats, min_time=args.min_time)
    rows.append({**base, "method": f"{key} exact", "backend": "vm", "time": t_vm, "build_graph": build_graph,
                 "err_s": rel_err(vm_out[1], ref["s"]), "err_u": rel_err(vm_out[2], ref["u"])})
    if integrator == "pbad":             # the plain route: casadi.jacobian of the library's step function
        F = sim.step_function()
        S, U = ca.MX.sym("s", pb.ns), ca.MX.sym("u", pb.nu)
        o = F(S, 0.0, dt, U)
        t0 = time.perf_counter()
        JA = ca.Function("jac_ad", [S, U], [ca.jacobian(o, S), ca.jacobian(o, U)])
        build_ad = time.perf_counter() - t0
        Js, Ju = (np.asarray(ca.densify(x)) for x in JA(s0, u0))
        t_ad = median_time(lambda: JA(s0, u0), repeats=max(3, args.repeats // 2), min_time=args.min_time)
        rows.append({**base, "method": f"{key} casadi.jacobian", "backend": "vm", "time": t_ad,
                     "build_graph": build_ad, "err_s": rel_err(Js, ref["s"]), "err_u": rel_err(Ju, ref["u"])})
    if args.no_c:
        return rows
    src = step_source(pb, tol=TOL)            # step, step_jacobian (+ jac_step): the library's backend="c" unit
    if src.size > args.max_source_mb * 1e6:
        print(f"  {sc['label']} {key}: generated C is {src.size / 1e6:.1f} MB, over --max-source-mb "
              f"{args.max_source_mb:g}: not compiled (VM only)", flush=True)
        rows[0]["source_mb"] = src.size / 1e6
        return rows
    try:
        compiled = compile_step(pb, opt=args.opt, source=src)
    except BuildError as exc:
        print(f"  {sc['label']} {key}: C build failed ({str(exc).splitlines()[0]}); VM only", flush=True)
        return rows
    lib = compiled.library
    CJ = compiled.step_jacobian               # (s, t, dt, u) -> (s_next, jac_s, jac_u, jac_t, jac_dt)
    runner = BatchRunner(lib, CJ)
    args_c = (s0, np.array([0.0]), np.array([dt]), u0)
    c_out = runner(*args_c)
    Js = np.asarray(ca.DM(CJ.sparsity_out(1), c_out[1][0]).full())
    Ju = np.asarray(ca.DM(CJ.sparsity_out(2), c_out[2][0]).full())
    agree = max(rel_err(Js, vm_out[1]), rel_err(Ju, vm_out[2]) if Ju.size else 0.0)
    t_c = median_time(runner.bind(*args_c), repeats=args.repeats, min_time=args.min_time)
    rows.append({**base, "method": f"{key} exact", "backend": "c", "time": t_c, "build_graph": build_graph,
                 "err_s": rel_err(Js, ref["s"]), "err_u": rel_err(Ju, ref["u"]), "c_vs_vm": agree,
                 "compile_s": lib.build_seconds, "compile_cached": lib.cached, "source_mb": src.size / 1e6,
                 "opt": args.opt})
    step_runner = BatchRunner(lib, compiled.step)   # kept alive: bind()'s closure holds only its work arrays
    t_step = median_time(step_runner.bind(*args_c), repeats=args.repeats, min_time=args.min_time)
    rows.append({**base, "method": f"{key} step alone (no Jacobian)", "backend": "c", "time": t_step,
                 "err_s": None, "err_u": None})
    return rows


# -- MuJoCo ---------------------------------------------------------------------------------------------

def mujoco_model(sc: dict, dt: float, integrator: str):
    import mujoco
    from _mjcf import model_mjcf

    m = sc["model"]
    root = ET.fromstring(model_mjcf(m, dt=dt, integrator=integrator, floor=False))
    act = ET.SubElement(root, "actuator")
    for i in sc["dofs"]:
        n = m.dof_names[i]
        ET.SubElement(act, "motor", name=n, joint=n, gear="1")
    return mujoco.MjModel.from_xml_string(ET.tostring(root, encoding="unicode"))


def run_mujoco(sc: dict, integrator: str, dt: float, args) -> list[dict]:
    import mujoco
    from _mjcf import to_mujoco_qpos, to_mujoco_qvel

    m = sc["model"]
    mm = mujoco_model(sc, dt, integrator)
    d = mujoco.MjData(mm)
    d.qpos[:] = to_mujoco_qpos(m, sc["q0"])
    d.qvel[:] = to_mujoco_qvel(m, sc["q0"], sc["v0"])
    d.ctrl[:] = sc["u0"]
    mujoco.mj_forward(mm, d)
    nx, nu = 2 * mm.nv + mm.na, mm.nu

    def fd(eps, centered):
        A, B = np.zeros((nx, nx)), np.zeros((nx, nu))
        mujoco.mjd_transitionFD(mm, d, eps, centered, A, B, None, None)
        return A, B

    ref, est = reference(lambda h: np.hstack(fd(h, True)), args.ref_hs, args.ref_levels)
    ref_A, ref_B = ref[:, :nx], ref[:, nx:]
    est_A, est_B = rel_est(est[:nx], ref_A), rel_est(est[nx:], ref_B)
    scan = {}
    for eps in EPS_SCAN:                 # how the FD error depends on eps (the timed runs use args.eps)
        for centered, label in ((True, "centred"), (False, "forward")):
            A, B = fd(eps, centered)
            scan.setdefault(label, []).append(max(rel_err(A, ref_A), rel_err(B, ref_B)))
    rows = []
    for centered, label in ((True, "centred"), (False, "forward")):
        A, B = np.zeros((nx, nx)), np.zeros((nx, nu))
        mujoco.mjd_transitionFD(mm, d, args.eps, centered, A, B, None, None)
        t = median_time(lambda: mujoco.mjd_transitionFD(mm, d, args.eps, centered, A, B, None, None),
                        repeats=args.repeats, min_time=args.min_time)
        rows.append({"model": sc["label"], "integrator": integrator, "method": f"MuJoCo {integrator} FD {label}",
                     "backend": "mujoco", "time": t, "err_s": rel_err(A, ref_A), "err_u": rel_err(B, ref_B),
                     "ref_est_s": est_A, "ref_est_u": est_B, "nv": mm.nv, "nu": nu, "eps": args.eps,
                     "steps": (2 if centered else 1) * (nx + nu) + (0 if centered else 1),
                     "eps_scan": list(EPS_SCAN), "err_scan": scan[label]})
    return rows


# -- report ---------------------------------------------------------------------------------------------

def print_rows(rows: list[dict]) -> None:
    print(f"\n{'model':<9} {'method':<32} {'backend':<7} {'time [us]':>10} {'err_s':>9} {'err_u':>9} "
          f"{'ref_est s/u':>19} {'compile [s]':>12}")
    for r in rows:
        comp = ""
        if "compile_s" in r:
            comp = f"{r['compile_s']:.1f}" + (" cached" if r["compile_cached"] else "")
        if r["err_s"] is None:           # a timing row (the step alone)
            acc = f"{'-':>9} {'-':>9} {'-':>19}"
        else:
            acc = f"{r['err_s']:>9.1e} {r['err_u']:>9.1e} {r['ref_est_s']:>9.1e}/{r['ref_est_u']:<9.1e}"
        print(f"{r['model']:<9} {r['method']:<32} {r['backend']:<7} {r['time'] * 1e6:>10.1f} {acc} {comp:>12}")


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        for key, _, _ in OURS:
            ours = {r["backend"]: r for r in rows if r["model"] == model and r["method"] == f"{key} exact"}
            mj = {r["method"].rsplit(" ", 1)[1]: r for r in rows
                  if r["model"] == model and r["method"].startswith(f"MuJoCo {PEER} ")}
            if not ours or not mj:
                continue
            o = ours.get("c") or ours["vm"]
            err = max(o["err_s"], o["err_u"])
            floor = max(o["ref_est_s"], o["ref_est_u"])
            c = mj["centred"]
            mj_err = max(c["err_s"], c["err_u"])
            ratio = o["time"] / c["time"]
            out.append({"model": model, "ours": key, "backend": o["backend"], "peer": PEER,
                        "ratio_centred": ratio, "ratio_forward": o["time"] / mj["forward"]["time"],
                        "ratio_vm_centred": ours["vm"]["time"] / c["time"], "err": err, "err_mujoco": mj_err,
                        "err_mujoco_forward": max(mj["forward"]["err_s"], mj["forward"]["err_u"]),
                        "accuracy_ok": err <= max(mj_err, floor),
                        "target_met": ratio <= 1 / 3 and err <= max(mj_err, floor)})
    scans = [r for r in rows if "err_scan" in r]
    if scans:
        print(f"\nMuJoCo FD error (max of err_s, err_u) against eps: "
              + "  ".join(f"{e:g}" for e in scans[0]["eps_scan"]))
        for r in scans:
            print(f"{r['model']:<9} {r['method']:<32} " + "  ".join(f"{e:.1e}" for e in r["err_scan"]))
    print(f"\nours / MuJoCo {PEER} FD (time ratios, ours on C where built; err = max of err_s, err_u)")
    print(f"{'model':<9} {'ours':<6} {'backend':<7} {'/centred':>9} {'/forward':>9} {'VM/centred':>11} "
          f"{'err ours':>9} {'err centred':>12} {'err forward':>12}  target (<= 1/3, err <=)")
    for s in out:
        print(f"{s['model']:<9} {s['ours']:<6} {s['backend']:<7} {s['ratio_centred']:>9.2f} {s['ratio_forward']:>9.2f} "
              f"{s['ratio_vm_centred']:>11.2f} {s['err']:>9.1e} {s['err_mujoco']:>12.1e} "
              f"{s['err_mujoco_forward']:>12.1e}  {'met' if s['target_met'] else 'NOT met'}")
    return out


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models_ = list(dict.fromkeys(r["model"] for r in rows))
    fig, axes = plt.subplots(1, len(models_), figsize=(5 * len(models_), 4), squeeze=False)
    for ax, model in zip(axes[0], models_):
        for r in (r for r in rows if r["model"] == model and r["err_s"] is not None):
            err = max(r["err_s"], r["err_u"])
            mk = "o" if r["backend"] == "mujoco" else ("s" if r["backend"] == "c" else "^")
            ax.loglog(r["time"] * 1e6, max(err, 1e-17), mk, label=f"{r['method']} ({r['backend']})")
        ax.set_title(f"{model}: one step Jacobian (state and control)")
        ax.set_xlabel("time per Jacobian [us]")
        ax.set_ylabel("error against the reference (max rel.)")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CHAIN-3 only, fewer repeats (the tests)")
    ap.add_argument("--scenes", nargs="+", default=None, help=f"scenes (default {' '.join(SCENES)}; chainN)")
    ap.add_argument("--dt", type=float, default=DT, help="step of both simulators [s]")
    ap.add_argument("--eps", type=float, default=EPS, help="MuJoCo's finite-difference step")
    ap.add_argument("--ref-hs", type=float, nargs="+", default=list(REF_HS),
                    help="base steps of the Richardson references (the best per column is kept)")
    ap.add_argument("--ref-levels", type=int, default=REF_LEVELS, help="halvings in the Richardson tableau")
    ap.add_argument("--ref-tol", type=float, default=REF_TOL, help="rootfinder tolerance of our reference map")
    ap.add_argument("--opt", default="-O1", help="C optimisation flag of the generated code")
    ap.add_argument("--no-c", action="store_true", help="VM only (no compiler)")
    ap.add_argument("--max-source-mb", type=float, default=None,
                    help=f"compile generated C only up to this size (default {MAX_SOURCE_MB:g}; quick "
                         f"{QUICK_MAX_SOURCE_MB:g})")
    args = ap.parse_args(argv)
    scenes = args.scenes or (QUICK_SCENES if args.quick else SCENES)
    args.repeats, args.min_time = (3, 0.01) if args.quick else (7, 0.05)
    if args.max_source_mb is None:
        args.max_source_mb = QUICK_MAX_SOURCE_MB if args.quick else MAX_SOURCE_MB
    try:
        import mujoco  # noqa: F401
        has_mujoco = True
    except ImportError:
        has_mujoco = False
        print("mujoco not installed: pbframework only")
    print(f"DERIVATIVES: one step's Jacobian d s_next / d (s, u) at dt = {args.dt:g} s; MuJoCo eps = {args.eps:g}; "
          f"references: Richardson, h = ({', '.join(f'{h:g}' for h in args.ref_hs)}) / 2^0..{args.ref_levels - 1}")
    rows: list[dict] = []
    for name in scenes:
        sc = scene(name)
        t0 = time.perf_counter()
        for key, integrator, order in OURS:
            rows += run_ours(sc, key, integrator, order, args.dt, args)
        if has_mujoco:
            rows += run_mujoco(sc, PEER, args.dt, args)
        print(f"{sc['label']}: nq {sc['model'].nq}, nv {sc['model'].nv}, nu {len(sc['dofs'])}  "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    print_rows(rows)
    summ = summary(rows) if has_mujoco else []
    print("\nerr: against a Richardson reference of the same simulator's own step map (the two Jacobians are of "
          "different integrators); ref_est: that reference's own error estimate.")
    write_json("derivatives.json", {"dt": args.dt, "eps": args.eps, "ref_hs": args.ref_hs,
                                    "ref_levels": args.ref_levels, "ref_tol": args.ref_tol, "polish": POLISH,
                                    "tol": TOL, "opt": args.opt, "rows": rows, "summary": summ})
    plot(rows, out_path("derivatives.png"))
    print(f"\nwrote {out_path('derivatives.json')} and {out_path('derivatives.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
