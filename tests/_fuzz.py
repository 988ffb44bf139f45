"""Shared machinery of the property-based fuzz tests (``tests/test_fuzz_*.py``, issue 27).

The property every case must satisfy: it ends within :data:`CASE_BOUND` seconds, and its outcome is either a
success that the test then checks (a finite positive-definite mass matrix, a trajectory whose status is
truthful, an exit status that matches the run) or one library error (:class:`pbframework.PbfError`). A
foreign exception, a hang past the bound, or a success that does not check out fails the test.

Two profiles: ``fast`` (the default, a few dozen examples per test, part of the CI suite) and ``long``
(``PBF_FUZZ=long`` or the tests marked ``slow``; hundreds of examples). With ``PBF_FUZZ_REPORT=path`` the
outcome counts of every fuzz test are written there as JSON at the end of the session.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections import Counter
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import pbframework as pbf

CASE_BOUND = 60.0
"""Seconds one fuzz case may take (a deadline, not a timing: a case past it is a hang, the issue's "no
answer"); generous so a loaded 2-core machine never trips it on a case that does end."""

FAST_EXAMPLES = {"urdf": 400, "api": 150, "cli": 150, "mjcf": 200}
LONG_EXAMPLES = {"urdf": 8000, "api": 2500, "cli": 1500, "mjcf": 1200}


def profile(kind: str, long: bool) -> settings:
    """Hypothesis settings of the fast or long profile for fuzz family ``kind``. No hypothesis deadline (it
    times examples; the bound here is :func:`bounded`'s), derandomised in the fast profile so CI sees the
    same cases every run."""
    n = (LONG_EXAMPLES if long else FAST_EXAMPLES)[kind]
    return settings(max_examples=n, deadline=None, derandomize=not long, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])


COUNTS: dict[str, Counter] = {}
"""Outcome counts per fuzz test: ``tried``, ``clean_error``, ``accepted``, ``foreign``, ``past_bound``."""


class PastBound(Exception):
    """A fuzz case did not end within :data:`CASE_BOUND`."""


@contextlib.contextmanager
def bounded(seconds: float = CASE_BOUND):
    """Raise :class:`PastBound` in the main thread if the block runs longer than ``seconds`` (SIGALRM; a
    no-op off the main thread or without the signal)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def alarm(signum, frame):
        raise PastBound(f"no answer within {seconds:g} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_case(name: str, case: Callable[[], object], check: Callable[[object], None], what: str) -> str:
    """Run ``case`` within the bound and classify it; ``check`` verifies a success, and returns
    ``"clean_error"`` where the result is itself a clean error report (the command line's exit status 2).
    Returns the outcome (``accepted`` or ``clean_error``) and counts it; raises AssertionError (with
    ``what``, the input) for a foreign exception, a case past the bound, or a success that fails its check."""
    counts = COUNTS.setdefault(name, Counter())
    counts["tried"] += 1
    try:
        with bounded():
            result = case()
    except PastBound:
        counts["past_bound"] += 1
        raise AssertionError(f"no answer within {CASE_BOUND:g} s for {what}") from None
    except pbf.PbfError as exc:
        text = str(exc)
        if not text.strip() or "\n" in text.strip():
            counts["foreign"] += 1
            raise AssertionError(f"{type(exc).__name__} without a one-line message for {what}: {text!r}")
        counts["clean_error"] += 1
        return "clean_error"
    except Exception as exc:  # noqa: BLE001 - the property under test: nothing but a PbfError escapes
        counts["foreign"] += 1
        raise AssertionError(f"foreign {type(exc).__name__} for {what}: {exc}") from exc
    try:
        outcome = check(result) or "accepted"
    except AssertionError as exc:
        counts["bad_success"] += 1
        raise AssertionError(f"success that does not check out for {what}: {exc}") from None
    counts[outcome] += 1
    return outcome


def check_mass_matrix_pd(model: pbf.ArticulatedBody) -> None:
    """The property of an accepted model: ``M(q)`` finite, symmetric and positive definite at the neutral
    configuration (computed here, independently of the loader's own check)."""
    from pbframework.dynamics import crba

    if model.nv == 0:
        return
    M = np.asarray(crba(model)(model.neutral()), dtype=float)
    assert np.all(np.isfinite(M)), "M(q) not finite"
    assert np.allclose(M, M.T, rtol=1e-8, atol=1e-12 * max(1.0, float(np.abs(M).max()))), "M(q) not symmetric"
    eig = np.linalg.eigvalsh(0.5 * (M + M.T))
    assert eig[0] > 0, f"M(q) not positive definite (smallest eigenvalue {eig[0]:.3g})"


def check_trajectory(traj) -> None:
    """The property of an accepted rollout: its status is truthful. ``ok``: every state finite and every step
    converged; ``diverged`` / ``unconverged``: a failure time inside the run; states finite up to the end."""
    from pbframework.verdict import Status

    assert traj.status in (Status.OK, Status.DIVERGED, Status.UNCONVERGED), traj.status
    assert np.all(np.isfinite(traj.q)) and np.all(np.isfinite(traj.qd)), "non-finite state kept in the trajectory"
    conv = np.asarray(traj.stats["converged"], bool)
    if traj.status is Status.OK:
        assert traj.failure_time is None and conv.all(), "status ok with a failure recorded"
    else:
        assert traj.failure_time is not None, f"status {traj.status.value} without a failure time"
    if traj.status is Status.UNCONVERGED:
        assert not conv.all() or traj.info.get("failure"), "unconverged without an unconverged step"


def write_report() -> None:
    """Write :data:`COUNTS` to ``$PBF_FUZZ_REPORT`` (JSON) when it is set."""
    path = os.environ.get("PBF_FUZZ_REPORT")
    if path and COUNTS:
        existing = {}
        if os.path.exists(path):
            with open(path) as fh:
                existing = json.load(fh)
        for name, c in COUNTS.items():
            merged = Counter(existing.get(name, {}))
            merged.update(c)
            existing[name] = dict(merged)
        with open(path, "w") as fh:
            json.dump(existing, fh, indent=1, sort_keys=True)
        COUNTS.clear()


long_profile = pytest.mark.skipif(os.environ.get("PBF_FUZZ") != "long",
                                  reason="the long fuzz profile takes minutes (the URDF one about 10 on 2 cores): "
                                         "PBF_FUZZ=long pytest -m slow tests/test_fuzz_*.py")
"""Marks a long-profile test: run only with ``PBF_FUZZ=long`` (the suite, and CI, run the fast profile)."""


def file_tails(encodings):
    """What may happen to a mutated XML file as a whole: nothing, an XML declaration naming one of
    ``encodings`` (the body encoded in it where Python knows it), truncation, or stray bytes inserted."""
    return st.one_of(st.none(), st.tuples(st.just("encoding"), st.sampled_from(encodings)),
                     st.tuples(st.just("truncate"), st.floats(0.0, 1.0)),
                     st.tuples(st.just("bytes"), st.integers(0, 10_000), st.binary(min_size=1, max_size=4)))


def apply_tail(text: str, tail) -> bytes:
    """``text`` as the bytes of a file, with :func:`file_tails`' ``tail`` applied."""
    data = text.encode("utf-8")
    if tail is None:
        return data
    if tail[0] == "encoding":
        enc = tail[1]
        try:
            body = text.encode(enc) if enc and enc not in ("x" * 50, "klingon") else data
        except (LookupError, UnicodeEncodeError):
            body = data
        return f'<?xml version="1.0" encoding="{enc}"?>\n'.encode("ascii") + body
    if tail[0] == "truncate":
        return data[:int(len(data) * tail[1])]
    k = tail[1] % max(len(data), 1)
    return data[:k] + tail[2] + data[k:]
