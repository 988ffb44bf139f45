"""Seed 002 Table I / Fig. 4: solver iterations and time per step for LM, JTJ-LM and L-BFGS on Eq. 6 and Eq. 13.

Two scenes of 10 links: a fixed chain under gravity without contact (where Eq. 6 and Eq. 13 coincide) and a
floating chain falling onto the ground (contact: ``pbfd_contact`` at both ends of every link). Eq. 6 is PBAD
order 2: its energy minimised by ``lm`` (exact Hessian) or ``lbfgs``, and its residual form (the energy's
gradient) by ``jtj_lm``; Eq. 13 is ``pbfd``'s gradient-level objective, a least-squares problem for
``jtj_lm``, ``lm`` (which adds the residual's second derivatives: the paper's costliest case) and
``lbfgs``. Every run uses the generated-C backend, dt = 0.01 s for ``--duration`` seconds, and reports the
mean solver iterations per step, the mean wall time per step and the steps that did not converge.

Usage::

    python benchmarks/pbfd_solvers.py               # 1 s
    python benchmarks/pbfd_solvers.py --quick       # 0.2 s, 3 links (the tests)

Writes ``pbfd_solvers.json`` to ``benchmarks/out/`` or ``$PBF_BENCH_OUT``.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pbframework as pbf  # noqa: E402

from _common import out_path, size_options, write_json  # noqa: E402

CONTACT = {"normal_stiffness": 1e5, "friction": 1e7}
CASES = (   # (equation, integrator, objective, solver)
    ("Eq. 6", "pbad", "energy", "lm"),
    ("Eq. 6", "pbad", "residual", "jtj_lm"),
    ("Eq. 6", "pbad", "energy", "lbfgs"),
    ("Eq. 13", "pbfd", "residual", "lm"),
    ("Eq. 13", "pbfd", "residual", "jtj_lm"),
    ("Eq. 13", "pbfd", "residual", "lbfgs"),
)


def scene(name: str, links: int):
    """``(model, q0, forces_eq6, forces_eq13)``."""
    if name == "fixed":
        m = pbf.models.chain(links, "revolute")
        return m, pbf.models.chain_q0(m), ["gravity"], ["gravity"]
    m = pbf.models.chain(links, "revolute", floating=True, contact_points=True)
    q0 = np.zeros(m.nq)
    q0[m.dof_index("joint0:z")] = 0.5
    q0[m.dof_index("joint0:ry")] = 0.2
    pbd = ("pbfd_contact", {**CONTACT, "tangential": "pbd"})
    return m, q0, ["gravity", pbd], ["gravity", ("pbfd_contact", CONTACT)]


def run(scene_name: str, links: int, case, dt: float, duration: float) -> dict:
    eq, integrator, objective, solver = case
    model, q0, f6, f13 = scene(scene_name, links)
    forces = f13 if integrator == "pbfd" else f6
    sim = pbf.Simulator(model, integrator, order=2 if integrator == "pbad" else None, objective=objective,
                        solver=solver, dt=dt, forces=forces, backend="c", on_failure="continue",
                        solver_options={"max_iter": 500})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = sim.rollout(q0, None, duration=duration)
    return {"scene": scene_name, "equation": eq, "integrator": integrator, "objective": objective, "solver": solver,
            "iterations_per_step": float(np.mean(tr.stats["iterations"])) if tr.steps else None,
            "ms_per_step": 1e3 * tr.wall_time / max(tr.steps, 1), "steps": tr.steps,
            "unconverged": int((~tr.stats["converged"]).sum()), "status": tr.status.value}


def main(argv=None) -> int:
    duration, links, _ = size_options(__doc__, argv, 0.2, 1.0)
    dt = 0.01
    rows = []
    print(f"{links}-link chains, dt {dt} s, {duration:g} s, generated C")
    print(f"{'scene':<9}{'equation':<9}{'solver':<8}{'objective':<10}{'iter/step':>10}{'ms/step':>10}"
          f"{'unconverged':>13}")
    for scene_name in ("fixed", "floating"):
        for case in CASES:
            r = run(scene_name, links, case, dt, duration)
            rows.append(r)
            it = "-" if r["iterations_per_step"] is None else f"{r['iterations_per_step']:.2f}"
            print(f"{scene_name:<9}{r['equation']:<9}{r['solver']:<8}{r['objective']:<10}{it:>10}"
                  f"{r['ms_per_step']:>10.3g}{r['unconverged']:>13}", flush=True)
    write_json("pbfd_solvers.json", {"links": links, "dt": dt, "duration": duration, "rows": rows})
    print(f"\nwrote {out_path('pbfd_solvers.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
