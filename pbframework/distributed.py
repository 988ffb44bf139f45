"""Batches beyond one machine: a batch of rollouts split into chunks, each run as the native threaded batch
on a worker of an executor, gathered in order into one batch.

``sim.rollout_batch(Q0, QD0, duration, executor=ex)`` takes any :class:`concurrent.futures.Executor`-like
object (``submit(fn, *args)`` returning futures with ``result()``): a ``ProcessPoolExecutor``, or a
``dask.distributed.Client``. The batch (``c`` backend) is cut into chunks of ``chunk_size`` trajectories;
each chunk carries the compiled step library (:class:`~pbframework.codegen.step_runner.NativeBatch`: its bytes,
keyed by its cache hash, written into the worker's cache once), so workers of the same platform need no
compiler; the chunks' results, concatenated in order, equal the single-machine batch bit for bit (every
trajectory of the native batch is independent of the others and of the thread that runs it).

With Dask (the optional extra ``distributed``)::

    from dask.distributed import Client
    from pbframework.distributed import rollout_batch
    batch = rollout_batch(Client("tcp://host:8786"), sim, Q0, QD0, duration=2.0)

the library is scattered to every worker once (``Client.scatter(..., broadcast=True)``) instead of riding
with each chunk, and a chunk whose worker is lost is re-run elsewhere (Dask reschedules it; ``retries``
re-runs chunks that raised).
"""

from __future__ import annotations

import math
import os
import time
import weakref
from typing import Any

import numpy as np

__all__ = ["DaskExecutor", "rollout_batch", "run_chunks", "executor_slots"]


def _run_chunk(native, Q0: np.ndarray, QD0: np.ndarray, t0: float, dt: float, steps: int, threads: int | None):
    """One chunk on a worker: the native threaded batch (``native`` arrives as a NativeBatch, its library
    installed into the worker's cache on unpickling)."""
    return native.rollout_batch(Q0, QD0, t0, dt, steps, threads=threads)


def executor_slots(executor: Any) -> tuple[int, int] | None:
    """``(workers, threads per worker)`` of an executor where it says: a Dask client (or
    :class:`DaskExecutor`) through ``nthreads()``, a ``concurrent.futures`` pool through its worker count
    (the machine's cores shared among its workers); None where unknown."""
    nthreads = getattr(executor, "nthreads", None)
    if callable(nthreads):
        try:
            per_worker = dict(nthreads())
        except Exception:                       # noqa: BLE001 -- a look, not a requirement
            per_worker = {}
        if per_worker:
            return len(per_worker), max(1, min(int(n) for n in per_worker.values()))
    workers = getattr(executor, "_max_workers", None)
    if isinstance(workers, int) and workers > 0:
        return workers, max(1, (os.cpu_count() or 1) // workers)
    return None


def run_chunks(native, Q0: np.ndarray, QD0: np.ndarray, t0: float, dt: float, steps: int, executor: Any, *,
               chunk_size: int | None = None, threads: int | None = None):
    """Run a native batch (:class:`~pbframework.codegen.step_runner.NativeBatch`) in chunks on ``executor``.

    Args:
        native: the batch part of the runner (``runner.native``).
        Q0, QD0, t0, dt, steps: as ``NativeBatch.rollout_batch``.
        executor: an object with ``submit(fn, *args)`` returning futures; one with ``scatter`` (a Dask
            client) receives the library once per worker (``scatter(native, broadcast=True)``).
        chunk_size: trajectories per chunk (default: the batch split evenly over the executor's workers,
            :func:`executor_slots`, else over this machine's cores).
        threads: native threads per chunk (default: the threads per worker where known, else the worker's
            cores).

    Returns:
        ``(BatchArrays, chunks)``: the chunks' results concatenated in order (``wall_time``: from the first
        submission to the last result, on this machine) and the number of chunks.
    """
    from pbframework.codegen.step_runner import BatchArrays
    from pbframework.step import StepError

    M = Q0.shape[0]
    slots = executor_slots(executor)
    if chunk_size is None:
        workers = slots[0] if slots else (os.cpu_count() or 1)
        chunk_size = max(1, math.ceil(M / workers))
    elif isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise StepError(f"chunk_size must be a positive integer (trajectories per chunk), got {chunk_size!r}")
    if threads is None and slots:
        threads = slots[1]
    if not callable(getattr(executor, "submit", None)):
        raise StepError(f"executor must have a submit(fn, *args) method returning futures (a "
                        f"concurrent.futures.Executor or a dask.distributed.Client), got {type(executor).__name__}")
    payload = native
    scatter = getattr(executor, "scatter", None)
    t_start = time.perf_counter()
    if callable(scatter):
        payload = scatter(native, broadcast=True)
    futures = [executor.submit(_run_chunk, payload, Q0[a:a + chunk_size], QD0[a:a + chunk_size], t0, dt, steps,
                               threads)
               for a in range(0, M, int(chunk_size))]
    parts = [f.result() for f in futures]
    return BatchArrays.concatenate(parts, time.perf_counter() - t_start), len(parts)


_SHIPPED: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()
"""Per Dask client: the futures of the libraries scattered to its workers, by ``NativeBatch.memo_key``."""


class DaskExecutor:
    """A ``dask.distributed.Client`` as the executor of :func:`run_chunks`: chunks submitted as impure tasks
    (each runs) with ``retries`` re-runs of a chunk that raised; the library scattered to every worker once
    per client (later batches reuse it).

    Args:
        client: the ``dask.distributed.Client``.
        retries: re-runs of a chunk that raised (a chunk on a lost worker is rescheduled by Dask anyway).
    """

    def __init__(self, client: Any, retries: int = 2) -> None:
        self.client = client
        self.retries = int(retries)

    def submit(self, fn, *args):
        return self.client.submit(fn, *args, pure=False, retries=self.retries)

    def scatter(self, data, broadcast: bool = True):
        """Send ``data`` to every worker once per client: a library already shipped (same cache key, options
        and precision) is not sent again; its future keeps it on the cluster."""
        memo = getattr(data, "memo_key", None)
        if memo is None:
            return self.client.scatter(data, broadcast=broadcast)
        shipped = _SHIPPED.setdefault(self.client, {})
        if memo not in shipped or shipped[memo].status != "finished":      # new, or every copy lost
            shipped[memo] = self.client.scatter(data, broadcast=broadcast)
        return shipped[memo]

    def nthreads(self) -> dict:
        return self.client.nthreads()


def rollout_batch(client: Any, sim, Q0, QD0=None, duration: float | None = None, *, steps: int | None = None,
                  t0: float = 0.0, chunk_size: int | None = None, threads: int | None = None, retries: int = 2):
    """``sim.rollout_batch`` on a Dask cluster: the batch in chunks on the workers of ``client``.

    Args:
        client: a ``dask.distributed.Client``.
        sim: a :class:`~pbframework.simulate.Simulator` on the ``c`` backend.
        Q0, QD0, duration, steps, t0: as ``Simulator.rollout_batch``.
        chunk_size, threads: as :func:`run_chunks` (defaults: one chunk per worker, its threads).
        retries: re-runs of a chunk that raised.

    Returns:
        A :class:`~pbframework.result.BatchTrajectory` equal to ``sim.rollout_batch(Q0, QD0, duration)``.
    """
    return sim.rollout_batch(Q0, QD0, duration, steps=steps, t0=t0, executor=DaskExecutor(client, retries),
                             chunk_size=chunk_size, threads=threads)
