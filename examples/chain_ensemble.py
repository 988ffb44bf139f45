"""An ensemble of CHAIN-10 falls in generated C on every core: chaos, and what numerical damping does to it.

The falling chain of DESIGN.md (CHAIN-N) is chaotic: starts that differ by a millionth of a radian end up
metres apart within seconds. This script runs M such starts at once with ``Simulator.rollout_batch`` on the
``c`` backend (one native call, the trajectories spread over native threads; each equals its single
``rollout`` exactly, which the script checks for two of them) with two integrators, and reports how the
spread of the chain's tip across the ensemble grows:

* ``rk4`` at dt = 1 ms, whose energy error on the unperturbed start is close to MuJoCo's RK4 at the same
  step (``benchmarks/peer_mujoco.py`` measures both): the spread grows by orders of magnitude within the
  10 s, and some members whip harder than the unperturbed start;
* ``pbad`` order 2 at dt = 10 ms, stable at any step but dissipative: the damping also removes the
  sensitivity, and the spread stays near its start. Use it where robustness at large steps matters more
  than the motion's fine detail; order 3 at small steps follows RK4's spread, at much higher cost.

The script prints, per integrator, the spread over time, the largest energy error in the ensemble and the
wall time (this docstring quotes no figure: they depend on the machine and on ``--members``).

The first run compiles the generated C (a few seconds per integrator; ``pbf cache info`` shows the cached
libraries), later runs load it from the cache.

    python examples/chain_ensemble.py                    # 128 starts, 10 s
    python examples/chain_ensemble.py --members 256 --threads 2   # ~5 MB of states per member and 10 s
    python examples/chain_ensemble.py --fast             # 8 starts, 1 s (also: PBF_EXAMPLES_FAST=1)
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import pbframework as pbf
from pbframework import models
from pbframework.kinematics import point_position

from _common import output_dir, pyplot, save  # examples/_common.py

INTEGRATORS = (("rk4", None, 0.001), ("pbad", 2, 0.01))
"""(integrator, order, dt) of the two ensembles."""


def tip_positions(model: pbf.ArticulatedBody, q: np.ndarray) -> np.ndarray:
    """World position of the far end of the last link for every configuration in ``q`` (..., nq) -> (..., 3)."""
    last = model.links[-1]
    tip = 2.0 * np.asarray(last.com, float)            # a uniform rod: its far end is twice its centre of mass
    flat = q.reshape(-1, model.nq)
    X = point_position(model, last.name).map(flat.shape[0])
    return np.asarray(X(flat.T, tip)).T.reshape(q.shape[:-1] + (3,))


def tip_spread(model: pbf.ArticulatedBody, q: np.ndarray) -> np.ndarray:
    """rms distance of the tips to their ensemble mean at every time, from ``q`` of shape (M, steps+1, nq)
    (the members that did not diverge: a diverged member's rows repeat its last state)."""
    tips = tip_positions(model, q)
    return np.sqrt(((tips - tips.mean(axis=0)) ** 2).sum(axis=2).mean(axis=0))


def batch_error(batch, m: int) -> float:
    """DESIGN.md's energy error of member ``m``: max_t |E(t) - E(0)| in percent of the energy scale."""
    E = batch.energy[m, : int(batch.steps_done[m]) + 1]
    return float(np.max(np.abs(E - E[0])) / batch.info["energy_scale"] * 100.0)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true", help="8 members, 1 s (also PBF_EXAMPLES_FAST=1)")
    ap.add_argument("--members", type=int, default=None, help="ensemble size M (default 128; fast: 8)")
    ap.add_argument("--duration", type=float, default=None, help="seconds (default 10; fast: 1)")
    ap.add_argument("--sigma", type=float, default=1e-6, help="std of the start perturbation [rad] (1e-6)")
    ap.add_argument("--threads", type=int, default=None, help="native threads (default: all cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="output folder (default $PBF_EXAMPLES_OUT or <tmp>/pbframework_examples)")
    args = ap.parse_args(argv)
    fast = args.fast or os.environ.get("PBF_EXAMPLES_FAST") == "1"
    M = args.members if args.members is not None else (8 if fast else 128)
    duration = args.duration if args.duration is not None else (1.0 if fast else 10.0)
    if M < 2:
        ap.error(f"--members must be at least 2 (a spread needs two trajectories), got {M}")
    if not (np.isfinite(duration) and duration > 0):
        ap.error(f"--duration must be a positive number of seconds, got {duration}")
    if not (np.isfinite(args.sigma) and args.sigma > 0):
        ap.error(f"--sigma must be a positive angle in radians, got {args.sigma}")
    if args.threads is not None and args.threads < 1:
        ap.error(f"--threads must be at least 1, got {args.threads}")
    out = output_dir(args.out)

    model = models.chain(10)
    rng = np.random.default_rng(args.seed)
    Q0 = models.chain_q0(model) + args.sigma * rng.standard_normal((M, model.nq))
    results, curves = {}, []
    for integrator, order, dt in INTEGRATORS:
        sim = pbf.Simulator(model, integrator=integrator, order=order, dt=dt, backend="c")
        label = f"{integrator}{order or ''} dt={dt:g}"
        batch = sim.rollout_batch(Q0, None, duration, threads=args.threads)
        print(f"{label}: {M} rollouts of {duration:g} s on {batch.info['threads']} thread(s) in "
              f"{batch.wall_time:.2f} s (build {sim.build_time:.1f} s), diverged: {int(batch.diverged.sum())}")
        identical = True                  # each member of the batch is exactly the single rollout from its start
        for m in (0, M - 1):
            one = sim.rollout(Q0[m], None, duration)
            identical &= bool(np.array_equal(one.q, batch.q[m, : int(batch.steps_done[m]) + 1]))
        alive = ~batch.diverged
        if alive.sum() < 2:
            raise SystemExit(f"{label}: fewer than two members ran {duration:g} s without diverging")
        spread = tip_spread(model, batch.q[alive])
        above = np.flatnonzero(spread > 0.1)
        horizon = float(batch.t[above[0]]) if above.size else None
        print(f"  members 0 and {M - 1} identical to single rollouts: {'yes' if identical else 'NO'}; tip spread "
              + ", ".join(f"{spread[min(int(round(tk / dt)), len(spread) - 1)]:.2g} m at {tk:g} s"
                          for tk in np.linspace(0.0, duration, 6))
              + "; above 0.1 m " + (f"from t = {horizon:.2f} s" if horizon is not None else "never"))
        results[label] = {"integrator": integrator, "order": order, "dt_s": dt, "threads": batch.info["threads"],
                          "wall_time_s": batch.wall_time, "diverged": int(batch.diverged.sum()),
                          "identical_to_single": identical, "spread_start_m": float(spread[0]),
                          "spread_end_m": float(spread[-1]), "spread_max_m": float(spread.max()),
                          "horizon_0.1m_s": horizon, "energy_error_percent": float(np.max(
                              [batch_error(batch, m) for m in range(M)])),
                          "unconverged_steps": int((~batch.stats["converged"]).sum())}
        curves.append((label, batch.t, spread, tip_positions(model, batch.q[: min(M, 16)])))

    plt = pyplot()

    fig, axes = plt.subplots(1, 1 + len(curves), figsize=(5 * (1 + len(curves)), 3.8))
    for label, t, spread, _ in curves:
        axes[0].semilogy(t, spread, label=label)
    axes[0].set_xlabel("time [s]")
    axes[0].set_ylabel("rms tip distance to the ensemble mean [m]")
    axes[0].set_title(f"CHAIN-10, {M} starts, sigma = {args.sigma:g} rad")
    axes[0].legend()
    for ax, (label, _, _, tips) in zip(axes[1:], curves):
        for path in tips:
            ax.plot(path[:, 0], path[:, 2], lw=0.6)
        ax.set_xlabel("tip x [m]")
        ax.set_ylabel("tip z [m]")
        ax.set_aspect("equal")
        ax.set_title(f"{label}: tip paths")
    summary = {"members": M, "duration_s": duration, "sigma_rad": args.sigma, "runs": results}
    png = save(fig, out / "chain_ensemble.png", out / "chain_ensemble.json", summary)
    print(f"plot written to {png}")
    return results


if __name__ == "__main__":
    main()
