"""Checks at the boundary: argument types and ranges, the documented limits on work, output paths, and the
mass matrix of a loaded model.

Every public entry point (``Simulator``, ``rollout``, ``advance``, the loaders, ``pbf``) calls these before it
does any work, so bad input costs no time and ends in one :class:`~pbframework.errors.PbfError` naming the
parameter. The limits (``docs/errors.md``) stop a run or a build that would not end in reasonable time or
memory; each is raisable by an argument or option of the same name.
"""

from __future__ import annotations

import errno
import math
import numbers
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .errors import ArgumentTypeError, LimitError, ModelError, OutputPathError, PbfError, StepError

__all__ = ["MAX_STEPS", "MAX_MEMORY", "MAX_LINKS", "MAX_DOFS", "real", "vector", "integer", "flag", "options", "check_steps",
           "check_memory", "check_links", "output_path", "mass_matrix", "check_mass_matrix"]

MAX_STEPS = 10_000_000
"""Most steps (output intervals for adaptive runs) of one rollout: ``Simulator(max_steps=...)``,
``pbf simulate --max-steps``."""

MAX_MEMORY = 2 * 1024 ** 3
"""Most bytes the states and statistics of one rollout or batch may take (2 GiB):
``Simulator(max_memory=...)``, ``pbf simulate --max-memory`` (in MB)."""

MAX_LINKS = 1000
"""Most links of a model built or loaded (the symbolic dynamics grow with it):
``load_urdf(max_links=...)``, ``pbf simulate --max-links``."""

MAX_DOFS = 600
"""Most velocity coordinates (``model.nv``) of a model a Simulator is built for: the symbolic step grows
faster than quadratically with it (on a 2-core machine, a pbad Simulator of CHAIN-250, nv = 500, builds in
about 40 s): ``Simulator(max_dofs=...)``, ``pbf simulate --max-dofs``."""

_STEP_COLUMN_BYTES = 7 * 8
"""Bytes of the per-step statistics (seven 8-byte columns) next to the state."""


# -- arguments ---------------------------------------------------------------------------------------------

def real(value: Any, name: str, *, minimum: float | None = None, positive: bool = False,
         finite: bool = True, unit: str = "", error: type[PbfError] = StepError) -> float:
    """``value`` as a float: a real number (not a bool, not a complex, not a string), not NaN, finite unless
    ``finite=False``, ``> 0`` if ``positive``, ``>= minimum`` if given. Raises :class:`ArgumentTypeError` for
    the wrong type and ``error`` (a :class:`StepError` by default) for a value out of range, both naming
    ``name`` and saying what is allowed (``unit``: ``"seconds"`` reads "a positive finite number of
    seconds")."""
    want = ("a " + ("positive " if positive else "") + ("finite " if finite else "") + "number"
            + (f" of {unit}" if unit else "") + (f" >= {minimum:g}" if minimum is not None else ""))
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ArgumentTypeError(f"{name} must be {want}, got {type(value).__name__} {value!r}")
    try:
        x = float(value)
    except OverflowError:                  # an int too large for a float
        x = math.inf
    if math.isnan(x) or (finite and math.isinf(x)) or (positive and not x > 0) \
            or (minimum is not None and not x >= minimum):
        raise error(f"{name} must be {want}, got {value!r}")
    return x


def vector(value: Any, what: str, n: int, length: str, *, names: Sequence[str] | None = None,
           error: type[PbfError] = StepError) -> np.ndarray:
    """``value`` as a real, finite float vector of ``n`` entries; else ``error`` in one line: ``{what}: expected a
    real vector of length {length}, got ...`` (``length`` says what ``n`` is), or the first non-finite entry, by
    its name in ``names`` where given, else by its index."""
    if isinstance(value, (str, bytes)) or np.iscomplexobj(value):
        raise error(f"{what}: expected a real vector of length {length}, got {type(value).__name__} {value!r:.60}")
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise error(f"{what}: expected a real vector of length {length}, got {type(value).__name__} "
                    f"{value!r:.60}") from None
    if a.ndim != 1 or a.shape[0] != n:
        raise error(f"{what}: expected a vector of length {length}, got shape {a.shape}")
    bad = np.flatnonzero(~np.isfinite(a))
    if bad.size:
        where = f"coordinate {names[bad[0]]!r}" if names is not None else f"index {int(bad[0])}"
        raise error(f"{what}: non-finite value {a[bad[0]]} at {where}")
    return a


def integer(value: Any, name: str, *, minimum: int | None = None, error: type[StepError] = StepError) -> int:
    """``value`` as an int (a Python or NumPy integer, not a bool, not a float) ``>= minimum`` if given."""
    want = {None: "an integer", 0: "a non-negative integer", 1: "a positive integer"}.get(
        minimum, f"an integer >= {minimum}")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise ArgumentTypeError(f"{name} must be {want}, got {type(value).__name__} {value!r}")
    n = int(value)
    if minimum is not None and n < minimum:
        raise error(f"{name} must be {want}, got {n}")
    return n


def flag(value: Any, name: str) -> bool:
    """``value`` as a bool: ``True`` / ``False`` (or a NumPy bool), nothing else."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def options(value: Any, name: str) -> dict[str, Any]:
    """``value`` (``None`` or a mapping with string keys) as a dict."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ArgumentTypeError(f"{name} must be a dict of options or None, got {type(value).__name__} {value!r}")
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise ArgumentTypeError(f"{name}: option names must be strings, got {bad[0]!r}")
    return dict(value)


# -- limits ------------------------------------------------------------------------------------------------

def check_steps(duration: float | None, steps: int | None, dt: float, *, max_steps: int = MAX_STEPS,
                option: str = "max_steps") -> int:
    """The number of steps of a run of ``duration`` seconds (rounded up to whole steps of ``dt``) or
    ``steps``, exactly one of them given, checked against ``max_steps`` before any work.

    Raises:
        StepError: neither or both given, a duration that is not a positive finite number, steps not a
            positive integer.
        LimitError: more steps than ``max_steps`` (``option`` names the argument that raises it).
    """
    if steps is not None and duration is not None:
        raise StepError(f"give duration ({duration!r} s) or steps ({steps!r}), not both")
    if steps is None:
        if duration is None:
            raise StepError("give duration (seconds) or steps")
        duration = real(duration, "duration", positive=True, unit="seconds")
        n_float = duration / dt - 1e-9
        if not math.isfinite(n_float) or n_float > max_steps:
            raise LimitError(f"duration {duration:g} s at dt {dt:g} s is {n_float:.3g} steps, more than the limit "
                             f"of {max_steps} steps ({option} raises it)")
        return max(1, int(math.ceil(n_float)))
    n = integer(steps, "steps", minimum=1)
    if n > max_steps:
        raise LimitError(f"steps={n} is more than the limit of {max_steps} steps ({option} raises it)")
    return n


def check_memory(steps: int, width: int, count: int = 1, *, max_memory: int = MAX_MEMORY,
                 option: str = "max_memory") -> int:
    """The bytes ``count`` trajectories of ``steps`` steps of a ``width``-long state take (with their per-step
    statistics); :class:`LimitError` above ``max_memory``."""
    need = count * (steps + 1) * (8 * width + _STEP_COLUMN_BYTES)
    if need > max_memory:
        raise LimitError(f"{count} trajectory(ies) of {steps} steps of a {width}-number state need about "
                         f"{need / 1e6:.4g} MB, more than the limit of {max_memory / 1e6:.4g} MB ({option} raises "
                         f"it)")
    return need


def check_links(n: int, what: str, *, max_links: int = MAX_LINKS, option: str = "max_links") -> None:
    """:class:`LimitError` if a model of ``n`` links (``what`` names it) exceeds ``max_links``."""
    if n > max_links:
        raise LimitError(f"{what}: {n} links, more than the limit of {max_links} ({option} raises it)")


def check_dofs(nv: int, what: str, *, max_dofs: int = MAX_DOFS, option: str = "max_dofs") -> None:
    """:class:`LimitError` if a model of ``nv`` velocity coordinates (``what`` names it) exceeds ``max_dofs``."""
    if nv > max_dofs:
        raise LimitError(f"{what}: {nv} velocity coordinates, more than the limit of {max_dofs} ({option} raises "
                         f"it; building the step of a model this size takes minutes)")


# -- output paths ------------------------------------------------------------------------------------------

def output_path(text: Any, name: str, formats: Sequence[str] | None = None, *, directory: bool = False) -> Path:
    """An output path checked before the run: a non-empty name with a known extension (``formats``), in an
    existing folder reachable through folders only, writable, not itself a folder (or, with
    ``directory=True``, a folder or a name a folder can be made at). Every ``OSError`` the check meets (a
    regular file in the path, a name too long, no permission, a read-only file system, ...) is an
    :class:`OutputPathError` naming ``name`` and the path. Nothing is left behind: a file created to test
    writability is removed."""
    if not isinstance(text, (str, os.PathLike)):
        raise OutputPathError(f"{name} must be a path, got {type(text).__name__} {text!r}")
    raw = os.fspath(text)
    if isinstance(raw, bytes) or not raw.strip():
        raise OutputPathError(f"{name}: empty path; give a file name")
    if "\0" in raw:
        raise OutputPathError(f"{name} {raw!r}: a path cannot contain a NUL character")
    path = Path(raw).expanduser()
    if formats is not None and not directory and path.suffix.lower() not in formats:
        raise OutputPathError(f"{name} {raw!r}: unknown extension {path.suffix or '(none)'!r} (allowed: "
                              f"{', '.join(formats)})")
    folder = path.parent
    try:
        for part in [folder, *folder.parents]:       # a regular file on the way: say which
            if part.exists() and not part.is_dir():
                raise OutputPathError(f"{name} {raw!r}: {str(part)!r} is a file, not a folder")
        if not folder.is_dir():
            raise OutputPathError(f"{name} {raw!r}: folder {str(folder)!r} does not exist")
        if directory:
            if path.exists() and not path.is_dir():
                raise OutputPathError(f"{name} {raw!r} is a file; give a folder")
            probe_in = path if path.is_dir() else folder
            if not os.access(probe_in, os.W_OK | os.X_OK):
                raise OutputPathError(f"{name} {raw!r}: folder {str(probe_in)!r} is not writable")
            return path
        if path.is_dir():
            raise OutputPathError(f"{name} {raw!r} is a folder; give a file name")
        if path.exists():
            if not os.access(path, os.W_OK):
                raise OutputPathError(f"{name} {raw!r}: the file exists and is not writable")
            return path
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)   # the real test: can it be created
        os.close(fd)
        os.unlink(path)
    except OutputPathError:
        raise
    except OSError as exc:
        why = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise OutputPathError(f"{name} {raw!r}: cannot write there ({why})") from None
    except ValueError as exc:                         # e.g. an unencodable name
        raise OutputPathError(f"{name} {raw!r}: not a usable path ({exc})") from None
    return path


# -- the mass matrix of a loaded model ---------------------------------------------------------------------

def sample_configurations(model, count: int = 2, seed: int = 0) -> list[np.ndarray]:
    """The neutral configuration and ``count - 1`` seeded random ones (coordinates in ``[-1, 1]``, limited ones
    clipped to their limits, quaternions normalised): where :func:`check_mass_matrix` looks."""
    from .limits import clip_to_limits
    from .model import JointType

    rng = np.random.default_rng(seed)
    out = [clip_to_limits(model, model.neutral())]
    for _ in range(count - 1):
        q = rng.uniform(-1.0, 1.0, model.nq)
        for j in model.joints:
            if j.type in (JointType.BALL, JointType.FREE):
                sl = model.joint_q_index[j.name]
                quat = q[sl.stop - 4:sl.stop]
                q[sl.stop - 4:sl.stop] = quat / np.linalg.norm(quat)
        out.append(clip_to_limits(model, q))
    return out


def _skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def mass_matrix(model, q: np.ndarray) -> np.ndarray:
    """``M(q)`` evaluated numerically: the composite rigid body algorithm of
    :func:`pbframework.dynamics.build_crba` in NumPy for models of hinges and slides (no symbolic graph, so
    a loader can check a 1000-link model in well under a second), the CasADi ``crba`` plug-in for models
    with spherical or free joints. Overflow gives inf / NaN entries, never an exception."""
    from .dynamics import crba, motion_subspace, spatial_inertia
    from .kinematics import element_tree

    tree = element_tree(model)
    if tree.on_group:
        with np.errstate(all="ignore"):
            return np.asarray(crba(model)(q), dtype=float)
    n = len(tree.elements)
    with np.errstate(all="ignore"):
        X, Ic, S = [], [], []
        for i, e in enumerate(tree.elements):
            a, qi = np.asarray(e.axis, float), float(q[i])
            if e.kind == "R":
                K = _skew(a)
                Rj, pj = np.eye(3) + math.sin(qi) * K + (1.0 - math.cos(qi)) * (K @ K), np.zeros(3)
            else:
                Rj, pj = np.eye(3), a * qi
            R0, p0 = e.origin[:3, :3], e.origin[:3, 3]
            R, p = R0 @ Rj, p0 + R0 @ pj
            E = R.T
            X.append(np.block([[E, np.zeros((3, 3))], [-E @ _skew(p), E]]))
            Ic.append(np.asarray(spatial_inertia(e.mass, e.com, e.inertia), dtype=float))
            S.append(np.asarray(motion_subspace(e), dtype=float).ravel())
        for i in reversed(range(n)):
            parent = tree.elements[i].parent
            if parent >= 0:
                Ic[parent] = Ic[parent] + X[i].T @ Ic[i] @ X[i]
        M = np.zeros((n, n))
        for i, e in enumerate(tree.elements):
            F = Ic[i] @ S[i]
            M[i, i] = S[i] @ F + e.armature
            j = i
            while tree.elements[j].parent >= 0:
                F = X[j].T @ F
                j = tree.elements[j].parent
                M[i, j] = M[j, i] = S[j] @ F
    return M


def check_mass_matrix(model, where: str, *, count: int = 2) -> None:
    """Raise :class:`ModelError` unless the mass matrix ``M(q)`` of ``model`` is finite, symmetric and
    positive definite at the sample configurations (:func:`sample_configurations`): numbers that are each
    valid can still make ``M`` overflow or lose definiteness (a mass of 1e300, a link far away). ``where``
    starts the message (the file name). A loader calls this once a model is built."""
    if model.nv == 0:
        return
    names = model.velocity_names
    for k, q in enumerate(sample_configurations(model, count)):
        at = "the neutral configuration" if k == 0 else f"sample configuration {k} (seeded)"
        try:
            M = mass_matrix(model, q)
        except (RuntimeError, ArithmeticError) as exc:     # CasADi's crba (spherical / free joints)
            raise ModelError(f"{where}: the mass matrix cannot be evaluated ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
        bad = np.argwhere(~np.isfinite(M))
        if bad.size:
            i = int(bad[0][0])
            raise ModelError(f"{where}: the mass matrix M(q) at {at} is not finite (entry for coordinate "
                             f"{names[i]!r} is {M[i, bad[0][1]]}): a mass, inertia or length too extreme")
        scale = float(np.max(np.abs(M)))
        if not np.allclose(M, M.T, rtol=1e-9, atol=1e-12 * max(scale, 1e-300)):
            raise ModelError(f"{where}: the mass matrix M(q) at {at} is not symmetric (numbers too extreme for "
                             f"double precision)")
        try:
            eig = np.linalg.eigvalsh(0.5 * (M + M.T))
        except np.linalg.LinAlgError:
            raise ModelError(f"{where}: the mass matrix M(q) at {at} has no eigen-decomposition (numbers too "
                             f"extreme)") from None
        if not eig[0] > 1e-13 * max(eig[-1], 0.0):
            diag = np.diag(M)
            i = int(np.argmin(diag))
            raise ModelError(f"{where}: the mass matrix M(q) at {at} is not positive definite (eigenvalues "
                             f"{eig[0]:.3g} to {eig[-1]:.3g}; smallest diagonal entry {diag[i]:.3g} at coordinate "
                             f"{names[i]!r}): check the masses and inertias near it")
