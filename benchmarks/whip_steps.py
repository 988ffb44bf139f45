"""Single PBAD steps of a rollout, each against the exact motion over the same interval: where a whipping
chain's energy comes from and why its steps cost what they cost.

For sampled steps k of a PBAD rollout (``--from`` .. ``--to``, every ``--every``-th step) the script redoes the
Simulator's step from the stored state (halving retries included) and reports

* its solver iterations and halvings, and whether the redone step equals the rollout's bitwise;
* the change of the total energy over the step (kinetic energy from the state's velocity slot), in percent
  of DESIGN.md's scale ``M g sum (i + 0.5) L``;
* the exact motion's over the same interval: ``--rk4-substeps`` RK4 steps from the same ``(q_k, v_k)``
  (forward dynamics on ABA, generated C), its energy change and the step's distance from it
  (``max |q_{k+1} - q_rk4|``, radians);
* every ``--probe-every``-th sample, the first solve alone from the integrator's guess (what the halving
  retry is called after): converged or not, its reason and iterations, the guess's distance from the
  solution found.

The summary groups the steps by halving depth. The states come from a checkpoint of ``energy.py``
(``--checkpoint``: its Fig. 2 rollouts at 2.5 ms are hours long on CHAIN-100) or from a rollout run here
(``--until``).

    python benchmarks/whip_steps.py --checkpoint \\
        benchmarks/out/energy_chain100_s6b_chain100_pbad3_dt0.0025.ckpt.npz --from 1.6 --to 2.6
                                       # CHAIN-100, order 3, 2.5 ms: the whip of Fig. 2(b)
    python benchmarks/whip_steps.py --chain 10 --order 3 --dt 0.0025 --until 7 --from 6.5
                                       # CHAIN-10's whip, rollout run here (~10 s)

Measured (CHAIN-100, order 3, 2.5 ms, ``--from 1.6 --to 2.6`` on the checkpoint of ``energy.py``'s
run; 81 steps, all reproduced bitwise): RK4 changes the energy by at most 7e-7% of the scale per step; the 25
steps taken whole gained +0.019% on average at 5e-4 rad from the exact motion, the 56 halved ones +5.2% in
all at ~1e-3 rad; 56 of the 81 first solves stalled unconverged (median 37 iterations). About 20 minutes of
wall time beside the ``energy.py`` run on a 2-core machine.

Writes ``whip_steps.json`` and ``whip_steps.png`` (``--name``) to ``benchmarks/out/`` or ``$PBF_BENCH_OUT``
(benchmarks/_common.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import pbframework as pbf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import out_path, write_json  # noqa: E402  (same folder)


def load_states(args) -> tuple[np.ndarray, int, int, float]:
    """The rollout's integrator states (one row per step from t = 0), chain length, order and dt."""
    if args.checkpoint:
        path = Path(args.checkpoint)
        if not path.is_file():
            raise SystemExit(f"--checkpoint {path}: no such file")
        with np.load(path) as z:
            states, nq, dt = z["states"], int(z["nq"]), float(z["dt"])
        order = args.order if args.order else _order_from_name(path.name)
        return np.asarray(states, float), nq // 2, order, dt
    model = pbf.models.chain(args.chain)
    sim = pbf.Simulator(model, "pbad", order=args.order or 3, dt=args.dt, backend="c", on_failure="continue", energy_limit=None)
    out = sim.runner.rollout(pbf.models.chain_q0(model), np.zeros(model.nq), 0.0, args.dt,
                             int(round(args.until / args.dt)))
    return np.asarray(out.states, float), args.chain, args.order or 3, args.dt


def _order_from_name(name: str) -> int:
    for k in range(2, 9):
        if f"_pbad{k}_" in name:
            return k
    raise SystemExit(f"cannot tell the PBAD order from the checkpoint's name {name!r}; pass --order")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="", help="energy.py checkpoint (.ckpt.npz) of a PBAD rollout")
    ap.add_argument("--chain", type=int, default=10, help="CHAIN-N when no checkpoint is given (default 10)")
    ap.add_argument("--order", type=int, default=0, help="PBAD order (default: the checkpoint's, else 3)")
    ap.add_argument("--dt", type=float, default=0.0025, help="step when no checkpoint is given")
    ap.add_argument("--until", type=float, default=7.0, help="rollout length when no checkpoint is given")
    ap.add_argument("--from", dest="t_from", type=float, default=0.0, help="first sampled step's time")
    ap.add_argument("--to", dest="t_to", type=float, default=float("inf"), help="last sampled step's time")
    ap.add_argument("--every", type=int, default=5, help="sample every n-th step (default 5)")
    ap.add_argument("--probe-every", type=int, default=1,
                    help="probe the first solve of every n-th sample (default 1; 0: none)")
    ap.add_argument("--rk4-substeps", type=int, default=50, help="RK4 steps of the exact motion per step")
    ap.add_argument("--name", default="whip_steps", help="output file stem (default whip_steps)")
    args = ap.parse_args(argv)
    if args.every < 1 or args.rk4_substeps < 1 or args.probe_every < 0:
        raise SystemExit("--every and --rk4-substeps must be >= 1, --probe-every >= 0")

    states, n, order, dt = load_states(args)
    model = pbf.models.chain(n)
    nq = model.nq
    if states.shape[1] != 3 * nq:
        raise SystemExit(f"the states have {states.shape[1]} entries, PBAD on CHAIN-{n} has {3 * nq}")
    sim = pbf.Simulator(model, "pbad", order=order, dt=dt, backend="c", on_failure="continue", energy_limit=None)
    exact = pbf.Simulator(model, "rk4", dt=dt / args.rk4_substeps, backend="c")
    scale, problem = sim.energy_scale, sim.problem

    def energy(q, qd) -> float:
        T, V = sim.energy(q, qd)
        return float(T[0] + V[0])

    last = len(states) - 2                            # the last step whose end the rollout holds
    k0 = max(0, int(np.ceil(args.t_from / dt - 1e-9)))
    k1 = min(last, int(np.floor(min(args.t_to, last * dt) / dt + 1e-9)))
    if k1 < k0:
        raise SystemExit(f"no step to sample: the rollout holds steps up to t = {last * dt:g} s")
    print(f"CHAIN-{n}, pbad order {order}, dt = {dt:g} s: steps at t = {k0 * dt:g} .. {k1 * dt:g} s, "
          f"every {args.every}", flush=True)
    rows = []
    for i, k in enumerate(range(k0, k1 + 1, args.every)):
        s, t = states[k], k * dt
        q, v = s[:nq], s[nq:2 * nq]
        e0 = energy(q, v)
        s1, st = sim.runner.step(s, t, dt)
        ref = exact.rollout(q, v, steps=args.rk4_substeps, t0=t)
        row = {"t": t, "speed": float(np.max(np.abs(v))), "halvings": st["halvings"],
               "iterations": st["iterations"], "converged": st["converged"],
               "reproduced": bool(np.array_equal(s1, states[k + 1])),
               "dE": (energy(s1[:nq], s1[nq:2 * nq]) - e0) / scale * 100,
               "dE_rk4": (float(ref.energy[-1]) - float(ref.energy[0])) / scale * 100,
               "error_q": float(np.max(np.abs(s1[:nq] - ref.q[-1])))}
        if args.probe_every and i % args.probe_every == 0:
            p = np.asarray(problem.params(s, t, dt, np.zeros(problem.nu))).ravel()
            x0 = np.asarray(problem.guess(p)).ravel()
            sol = sim.runner.solve(x0, p)
            row["probe"] = {"converged": sol.converged, "reason": sol.reason, "iterations": sol.iterations,
                            "guess_distance": float(np.max(np.abs(sol.x - x0)))}
        rows.append(row)
        probe = row.get("probe")
        first = (f"  first solve: {'' if probe['converged'] else 'un'}converged ({probe['reason']}), "
                 f"{probe['iterations']} it" if probe else "")
        print(f"  t={t:.4f} |qd|max={row['speed']:7.1f}  halvings {row['halvings']}  iterations "
              f"{row['iterations']:4d}  dE {row['dE']:+.4f}%  RK4 dE {row['dE_rk4']:+.2e}%  |q-q_rk4| "
              f"{row['error_q']:.2g}{first}{'' if row['reproduced'] else '  (not reproduced)'}", flush=True)

    summary = []
    print(f"\n{'halvings':>9}{'steps':>7}{'mean dE %':>12}{'sum dE %':>11}{'mean |q-q_rk4|':>16}")
    for h in sorted({r["halvings"] for r in rows}):
        sel = [r for r in rows if r["halvings"] == h]
        line = {"halvings": h, "steps": len(sel), "mean_dE": float(np.mean([r["dE"] for r in sel])),
                "sum_dE": float(np.sum([r["dE"] for r in sel])),
                "mean_error_q": float(np.mean([r["error_q"] for r in sel]))}
        summary.append(line)
        print(f"{h:>9}{line['steps']:>7}{line['mean_dE']:>+12.4f}{line['sum_dE']:>+11.3f}"
              f"{line['mean_error_q']:>16.3g}")
    probes = [r["probe"] for r in rows if "probe" in r]
    rk4_max = max(abs(r["dE_rk4"]) for r in rows)
    print(f"RK4 ({args.rk4_substeps} substeps): largest |dE| {rk4_max:.2e}%; steps reproduced bitwise: "
          f"{sum(r['reproduced'] for r in rows)} of {len(rows)}")
    if probes:
        print(f"first solves from the guess: {sum(not p['converged'] for p in probes)} of {len(probes)} unconverged "
              f"(median {np.median([p['iterations'] for p in probes]):g} iterations)")

    data = {"chain": n, "order": order, "dt": dt, "rk4_substeps": args.rk4_substeps, "scale": scale,
            "rows": rows, "summary": summary, "rk4_max_abs_dE": rk4_max}
    path = write_json(f"{args.name}.json", data)
    plot(rows, n, order, dt, out_path(f"{args.name}.png"))
    print(f"wrote {path} and {args.name}.png to {path.parent}")
    return 0


def plot(rows, n, order, dt, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.array([r["t"] for r in rows])
    h = np.array([r["halvings"] for r in rows])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for depth in sorted(set(h.tolist())):
        sel = h == depth
        axes[0].plot(t[sel], [rows[i]["dE"] for i in np.flatnonzero(sel)], "o", ms=3, label=f"{depth} halvings")
        axes[1].semilogy(t[sel], [max(rows[i]["error_q"], 1e-16) for i in np.flatnonzero(sel)], "o", ms=3,
                         label=f"{depth} halvings")
    axes[0].plot(t, [r["dE_rk4"] for r in rows], "k-", lw=0.8, label="RK4 (exact motion)")
    axes[0].set_ylabel("energy change over the step [% of scale]")
    axes[1].set_ylabel("max |q_{k+1} - q_rk4| [rad]")
    for ax in axes:
        ax.set_xlabel("t [s]")
        ax.legend(fontsize=7)
    fig.suptitle(f"CHAIN-{n}, pbad order {order}, dt = {dt:g} s: single steps against the exact motion")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
