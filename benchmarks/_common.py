"""Helpers shared by the benchmark scripts: output folder, timing, growth-exponent fit, JSON.

Every script writes its JSON and PNG to :data:`OUT`: ``benchmarks/out/`` by default, or the folder named by
the environment variable ``PBF_BENCH_OUT`` (created if missing). tests/test_benchmarks.py runs each script
in a tiny configuration with ``PBF_BENCH_OUT`` set to a temporary folder, so tests never write to
``benchmarks/out/``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

OUT_ENV = "PBF_BENCH_OUT"
OUT = Path(os.environ.get(OUT_ENV) or Path(__file__).resolve().parent / "out")
"""Output folder of every benchmark: ``$PBF_BENCH_OUT``, else ``benchmarks/out/``."""


def out_path(name: str) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    return OUT / name


def median_time(fn: Callable[[], object], repeats: int = 7, min_time: float = 0.05) -> float:
    """Median wall time of one call of ``fn`` (each repeat loops until ``min_time`` has passed)."""
    samples = []
    for _ in range(repeats):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= min_time:
                break
        samples.append(elapsed / n)
    return statistics.median(samples)


def growth_exponent(ns: Sequence[float], values: Sequence[float]) -> float:
    """Least-squares slope of log(value) against log(n)."""
    return float(np.polyfit(np.log(np.asarray(ns, float)), np.log(np.asarray(values, float)), 1)[0])


def energy_error(E, scale: float, diverged: bool = False) -> float:
    """DESIGN.md's energy error of a series: ``max_t |E(t) - E(0)|`` in percent of ``scale``; inf if diverged
    (the formula of :meth:`pbframework.Trajectory.energy_error`, for series that are not Trajectories)."""
    E = np.asarray(E, float)
    return math.inf if diverged else float(np.max(np.abs(E - E[0]))) / scale * 100.0


def energy_rise(E, scale: float, diverged: bool = False) -> float:
    """``max_t (E(t) - E(0))`` in percent of ``scale``; inf if diverged
    (:meth:`pbframework.Trajectory.energy_rise`)."""
    E = np.asarray(E, float)
    return math.inf if diverged else float(np.max(E - E[0])) / scale * 100.0


def first_above(E, scale: float, limit: float, E0: float | None = None) -> int | None:
    """Index of the first entry of the energy series ``E`` more than ``limit`` percent of ``scale`` above
    ``E0`` (default ``E[0]``), or None (always None for an infinite ``limit``). A non-finite entry counts as
    above."""
    E = np.asarray(E, float)
    if not math.isfinite(limit) or len(E) == 0:
        return None
    ref = float(E[0]) if E0 is None else float(E0)
    above = ~((E - ref) / scale * 100.0 <= limit)
    return int(np.argmax(above)) if above.any() else None


def size_options(doc: str, argv, quick_duration: float, duration: float, quick_links: int = 3,
                 links: int = 10) -> tuple[float, int, "object"]:
    """``--quick``, ``--duration`` and ``--links`` of a benchmark script: ``(duration, links, args)`` with the
    script's defaults for its full and quick forms."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small, short configuration (the tests)")
    ap.add_argument("--duration", type=float, default=None, help="simulated seconds")
    ap.add_argument("--links", type=int, default=None, help="links of the chains")
    args = ap.parse_args(argv)
    return (args.duration or (quick_duration if args.quick else duration),
            args.links or (quick_links if args.quick else links), args)


def write_json(name: str, data) -> Path:
    path = out_path(name)
    path.write_text(json.dumps(data, indent=2, default=float))
    return path
