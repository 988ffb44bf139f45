"""Batches on executors (:mod:`pbframework.distributed`): chunks of the native batch run in other processes
(a ``ProcessPoolExecutor``, a Dask ``LocalCluster`` of 2 worker processes whose compiler is hidden) equal the
batch on this machine bit for bit; the step library travels with the chunks (:class:`NativeBatch` pickles)."""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

import pbframework as pbf
from pbframework.codegen import step_runner
from pbframework.codegen.build import BuildError, PackedLibrary, cache_entries, install_library, pack_library
from pbframework.step import StepError

M = 12


@pytest.fixture(scope="module")
def chain3():
    """CHAIN-3, PBAD order 2 on the c backend, with a start that diverges (max_speed) among ordinary ones."""
    model = pbf.models.chain(3)
    sim = pbf.Simulator(model, "pbad", order=2, dt=0.05, max_speed=5.0, backend="c",
                        backend_options={"threads": 2})
    rng = np.random.default_rng(20261124)
    Q0 = pbf.models.chain_q0(model) + 0.3 * rng.standard_normal((M, model.nq))
    QD0 = 0.1 * rng.standard_normal((M, model.nv))
    QD0[5] = 50.0                                    # diverges at its first step
    return sim, Q0, QD0


def assert_same_batch(a, b) -> None:
    """Every array of two BatchTrajectory objects equal bit for bit (NaN where NaN)."""
    for name in ("t", "q", "qd", "kinetic", "potential", "energy", "steps_done", "diverged", "status"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(a.failure_time, b.failure_time, equal_nan=True)
    assert set(a.stats) == set(b.stats)
    for k in a.stats:
        assert np.array_equal(a.stats[k], b.stats[k]), k


@pytest.fixture(scope="module")
def local(chain3):
    sim, Q0, QD0 = chain3
    ref = sim.rollout_batch(Q0, QD0, duration=1.0)
    assert set(ref.status) >= {"ok", "diverged"}     # the per-trajectory verdicts are part of the comparison
    return ref


# ---- the executor seam ------------------------------------------------------------------------------------

@pytest.mark.parametrize("chunk_size", [1, 5, M, 100, None])
def test_process_pool_equals_local_batch(chain3, local, chunk_size):
    sim, Q0, QD0 = chain3
    with ProcessPoolExecutor(2) as ex:
        batch = sim.rollout_batch(Q0, QD0, duration=1.0, executor=ex, chunk_size=chunk_size)
    assert_same_batch(batch, local)
    expect = -(-M // (chunk_size or -(-M // 2)))
    assert batch.info["chunks"] == expect and batch.info["executor"] == "ProcessPoolExecutor"


def test_thread_pool_and_bare_submit_objects(chain3, local):
    sim, Q0, QD0 = chain3
    with ThreadPoolExecutor(3) as ex:
        assert_same_batch(sim.rollout_batch(Q0, QD0, duration=1.0, executor=ex, chunk_size=4), local)

    class Inline:                                   # anything with submit(fn, *args) -> future-like
        def submit(self, fn, *args):
            value = fn(*pickle.loads(pickle.dumps(args)))
            return type("Done", (), {"result": lambda self: value})()

    assert_same_batch(sim.rollout_batch(Q0, QD0, duration=1.0, executor=Inline(), chunk_size=7), local)


def test_executor_errors_in_the_users_words(chain3):
    sim, Q0, QD0 = chain3
    vm = pbf.Simulator(pbf.models.chain(3), "pbad", order=2, dt=0.05)
    with ThreadPoolExecutor(1) as ex:
        with pytest.raises(StepError, match="backend 'casadi'.*backend='c'"):
            vm.rollout_batch(Q0, QD0, duration=0.1, executor=ex)
        with pytest.raises(StepError, match="chunk_size must be a positive integer"):
            sim.rollout_batch(Q0, QD0, duration=0.1, executor=ex, chunk_size=0)
    with pytest.raises(StepError, match="pass executor="):
        sim.rollout_batch(Q0, QD0, duration=0.1, chunk_size=2)
    with pytest.raises(StepError, match="submit"):
        sim.rollout_batch(Q0, QD0, duration=0.1, executor=object())


# ---- the library travels ----------------------------------------------------------------------------------

def test_native_batch_pickle_installs_the_library_once(chain3, tmp_path, monkeypatch):
    sim, Q0, QD0 = chain3
    native = sim.runner.native
    data = pickle.dumps(native)
    assert native.library.path.read_bytes() in data            # the bytes ride with it
    monkeypatch.setenv("PBF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(step_runner, "_NATIVE", {})
    other = pickle.loads(data)
    assert other.library.path.parent.parent == tmp_path and not other.library.cached
    assert other.library.key == native.library.key
    assert pickle.loads(data) is other                            # once per process
    (entry,) = cache_entries(tmp_path)
    assert entry.valid and entry.name == native.library.path.name[3:-3]
    a = native.rollout_batch(Q0, QD0, 0.0, 0.05, 10, threads=1)
    b = other.rollout_batch(Q0, QD0, 0.0, 0.05, 10, threads=2)
    assert np.array_equal(a.states, b.states) and np.array_equal(a.status, b.status)
    again = install_library(pack_library(native.library), cache=tmp_path)
    assert again.cached and again.path == other.library.path


def test_install_refuses_another_platform_and_altered_bytes(chain3, tmp_path):
    packed = pack_library(chain3[0].runner.native.library)
    alien = PackedLibrary(packed.name, packed.key, packed.data, packed.meta, ("linux", "riscv64", 8))
    with pytest.raises(BuildError, match="built for linux/.*riscv64.*this machine is"):
        install_library(alien, cache=tmp_path)
    flipped = packed.data[:100] + bytes([packed.data[100] ^ 1]) + packed.data[101:]
    bad = PackedLibrary(packed.name, packed.key, flipped, packed.meta, packed.platform)
    with pytest.raises(BuildError, match="do not match"):
        install_library(bad, cache=tmp_path)
    assert not cache_entries(tmp_path)


def test_another_platform_rebuilds_from_the_shipped_source(chain3, tmp_path, monkeypatch):
    from pbframework.codegen import build

    sim, Q0, QD0 = chain3
    native = sim.runner.native
    packed = pack_library(native.library, native.source)
    alien = PackedLibrary(packed.name, packed.key, b"not for this machine", packed.meta, ("linux", "riscv64", 8),
                          packed.source)
    rebuilt = install_library(alien, cache=tmp_path / "with-gcc")
    assert rebuilt.path.read_bytes() == native.library.path.read_bytes()       # same source, compiler, flags
    monkeypatch.setenv("PATH", str(tmp_path))                                  # no compiler here
    monkeypatch.setattr(build, "_CC_VERSION", {})
    with pytest.raises(BuildError, match="built for linux/riscv64.*rebuilding it from the shipped source failed"
                                         ".*not found"):
        install_library(alien, cache=tmp_path / "without")


# ---- Dask: a LocalCluster of 2 worker processes without a compiler ------------------------------------------

def _no_compiler() -> dict:
    """What a worker sees: its compiler, its cache folder, the cache's entries (name, installed or built)."""
    import shutil

    from pbframework.codegen.build import cache_dir

    return {"gcc": shutil.which("gcc"), "cache": str(cache_dir()),
            "entries": [(e.name, "installed" in (e.path / "meta.json").read_text()) for e in cache_entries()]}


@pytest.fixture(scope="module")
def dask_client(tmp_path_factory):
    distributed = pytest.importorskip("dask.distributed", reason="dask.distributed is not installed (pip install "
                                                            "'pbframework[distributed]')")
    worker_cache = tmp_path_factory.mktemp("worker-cache")
    # the workers' PATH holds no compiler, and their cache starts empty: the library must come with the tasks
    env = {"PATH": str(worker_cache), "PBF_CACHE_DIR": str(worker_cache), "OMP_NUM_THREADS": "1"}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  env=env) as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(2, timeout=60)
        yield client


def test_dask_cluster_without_compiler_equals_local_batch(chain3, local, dask_client):
    from pbframework.distributed import rollout_batch

    sim, Q0, QD0 = chain3
    batch = rollout_batch(dask_client, sim, Q0, QD0, duration=1.0, chunk_size=3)
    assert_same_batch(batch, local)
    assert batch.info["chunks"] == 4 and batch.info["executor"] == "DaskExecutor"
    seen = dask_client.run(_no_compiler)
    key_entry = sim.runner.native.library.path.parent.name
    for worker, state in seen.items():
        assert state["gcc"] is None, worker                          # no compiler on the workers ...
        assert state["entries"] == [(key_entry.rsplit("-", 1)[0], True)], state   # ... one library, installed


@pytest.mark.slow
def test_dask_cluster_runs_a_256_trajectory_chain10_batch_exactly(dask_client):
    """The issue's batch: 256 CHAIN-10 trajectories on the 2 compiler-less workers equal the local batch."""
    from pbframework.distributed import rollout_batch

    model = pbf.models.chain(10)
    sim = pbf.Simulator(model, "pbad", order=2, dt=0.05, backend="c", backend_options={"threads": 2})
    rng = np.random.default_rng(256)
    Q0 = pbf.models.chain_q0(model) + 0.2 * rng.standard_normal((256, model.nq))
    QD0 = np.zeros((256, model.nv))
    local = sim.rollout_batch(Q0, QD0, duration=1.0)
    assert_same_batch(rollout_batch(dask_client, sim, Q0, QD0, duration=1.0), local)


def test_dask_ships_a_library_once_per_client(chain3, dask_client):
    from pbframework.distributed import DaskExecutor

    native = chain3[0].runner.native
    first = DaskExecutor(dask_client).scatter(native)
    assert DaskExecutor(dask_client).scatter(native) is first       # a later batch finds it on the cluster


def test_dask_client_as_plain_executor(chain3, local, dask_client):
    sim, Q0, QD0 = chain3
    batch = sim.rollout_batch(Q0, QD0, duration=1.0, executor=dask_client)     # a Client has submit too
    assert_same_batch(batch, local)
    assert batch.info["chunks"] == 2                                    # one per worker


def test_pbf_simulate_batch_with_scheduler_equals_the_local_batch(chain3, dask_client, tmp_path, capsys):
    from pbframework.cli import main
    from pbframework.result import BatchTrajectory

    _, Q0, QD0 = chain3
    np.save(tmp_path / "q0.npy", Q0)
    np.save(tmp_path / "qd0.npy", QD0)
    args = ["simulate", "chain", "--links", "3", "--order", "2", "--dt", "0.05", "--duration", "0.5", "--backend",
            "c", "--q0", str(tmp_path / "q0.npy"), "--qd0", str(tmp_path / "qd0.npy")]
    rc_here = main([*args, "--out", str(tmp_path / "here.npz")])
    rc_dask = main([*args, "--out", str(tmp_path / "dask.npz"), "--scheduler", dask_client.scheduler.address])
    assert rc_here == rc_dask
    here, there = (BatchTrajectory.load(tmp_path / f"{n}.npz") for n in ("here", "dask"))
    assert_same_batch(there, here)
    assert there.info["executor"] == "DaskExecutor" and len(there.status) == M
    assert main(["simulate", "chain", "--links", "3", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "--scheduler runs a batch" in capsys.readouterr().err


def test_dask_worker_killed_mid_batch_still_gives_the_whole_batch(chain3, dask_client):
    """Chunks long enough to be running when one worker's process is killed (SIGKILL): Dask re-runs them
    on the other worker (or the restarted one); the result is complete, in order and identical."""
    from pbframework.distributed import DaskExecutor

    sim, Q0, QD0 = chain3
    Q0, QD0 = np.tile(Q0, (2, 1)), np.tile(QD0, (2, 1))
    ref = sim.rollout_batch(Q0, QD0, duration=20.0)
    pids = dask_client.run(os.getpid)

    class KillOne(DaskExecutor):
        def submit(self, fn, *args):
            future = super().submit(fn, *args)
            self.futures.append(future)
            return future

    ex = KillOne(dask_client, retries=2)
    ex.futures = []
    killed = []

    def kill_when_running():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            ours = {f.key for f in ex.futures}
            busy = [(w, set(keys) & ours) for w, keys in dask_client.processing().items() if set(keys) & ours]
            if busy and len(ex.futures) >= 4:
                os.kill(pids[busy[0][0]], signal.SIGKILL)
                killed.append(busy[0])
            time.sleep(0.01)

    killer = threading.Thread(target=kill_when_running)
    killer.start()
    batch = sim.rollout_batch(Q0, QD0, duration=20.0, executor=ex, chunk_size=2)
    killer.join()
    assert killed, "no worker was busy to be killed"
    worker, lost = killed[0]
    assert lost                                  # chunks were on it when it died: they ran again elsewhere
    assert_same_batch(batch, ref)
    deadline = time.monotonic() + 60                                  # the nanny restarts it
    while time.monotonic() < deadline and pids[worker] in dask_client.run(os.getpid).values():
        time.sleep(0.2)
    dask_client.wait_for_workers(2, timeout=60)
    assert pids[worker] not in dask_client.run(os.getpid).values()


def test_swimmer_cmaes_population_on_a_local_cluster_takes_the_same_search(tmp_path):
    """examples/swimmer_cmaes.py --scheduler local (2 Dask worker processes) finds the gait the one-process
    run finds, generation for generation."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("dask.distributed", reason="dask.distributed is not installed (extra: distributed)")
    pytest.importorskip("cma", reason="the example's CMA-ES needs the package cma")
    script = Path(__file__).resolve().parents[1] / "examples" / "swimmer_cmaes.py"
    runs = {}
    for name, extra in (("here", []), ("dask", ["--scheduler", "local"])):
        out = tmp_path / name
        proc = subprocess.run([sys.executable, str(script), "--fast", "--out", str(out), *extra], cwd=script.parent,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[name] = json.loads((out / "swimmer_cmaes.json").read_text())
    assert "Dask worker(s)" in proc.stdout and runs["dask"]["population_on"] == "dask"
    for key in ("best_speed_per_generation", "best_gait", "speed_after"):
        assert runs["dask"][key] == runs["here"][key], key
