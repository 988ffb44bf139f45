"""Build, cache and load emitted C (:mod:`pbframework.codegen.emit`).

* :func:`build_shared` compiles a :class:`~pbframework.codegen.emit.CSource` into a shared library with the
  system C compiler (``gcc``, ``-O1`` by default) and caches it under :func:`cache_dir` (``$PBF_CACHE_DIR``,
  else the platform's user cache folder, :func:`default_cache_dir`), keyed by the sha256 of the source,
  the compiler's version and the flags. An entry is a directory holding the library and ``meta.json``
  (the library's size and sha256, the compiler and flags it was built with); it is built in a private temporary directory and moved into place with
  one atomic ``rename``, so two processes building the same entry at once are safe (the loser discards its
  copy). An entry whose library is missing, truncated or altered (size or hash mismatch) or fails to load
  is discarded and rebuilt.
* :func:`load_function` returns the compiled function as a ``casadi.Function`` (``casadi.external``).
* :class:`BatchRunner` calls ``<f>_batch`` / ``<f>_repeat`` through ctypes on numpy arrays, with the work
  arrays owned by the runner: the way to evaluate (or time) many instances without Python overhead per
  instance.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import casadi as ca
import numpy as np

from .emit import CSource

__all__ = ["BuildError", "Library", "build_shared", "cache_dir", "default_cache_dir", "compiler_version",
           "load_function", "BatchRunner", "PackedLibrary", "pack_library", "install_library", "rebuild_library"]

DEFAULT_OPT = "-O1"


class BuildError(RuntimeError):
    """The C compiler failed or is missing; the message holds the command and the compiler's output."""


CACHE_ENV = "PBF_CACHE_DIR"
"""The environment variable that overrides :func:`default_cache_dir`."""


def default_cache_dir() -> Path:
    """The platform's user cache folder for pbframework (``platformdirs.user_cache_dir``): on Linux
    ``$XDG_CACHE_HOME/pbframework`` or ``~/.cache/pbframework``, on macOS ``~/Library/Caches/pbframework``, on
    Windows ``%LOCALAPPDATA%\\pbframework\\Cache``."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("pbframework", appauthor=False))


def cache_dir() -> Path:
    """Where built libraries are cached: ``$PBF_CACHE_DIR``, else :func:`default_cache_dir`."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else default_cache_dir()


_CC_VERSION: dict[str, str] = {}


def compiler_version(cc: str = "gcc") -> str:
    """First line of ``cc --version`` (part of the cache key)."""
    if cc not in _CC_VERSION:
        try:
            out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            raise BuildError(f"C compiler {cc!r} not found or not working ({exc}); install gcc or pass cc=") from exc
        _CC_VERSION[cc] = out.splitlines()[0].strip() if out else cc
    return _CC_VERSION[cc]


@dataclass(frozen=True)
class Library:
    """A built shared library.

    Attributes:
        path: the ``.so`` file.
        key: the cache key (sha256 of source, compiler version and flags).
        functions: exported function names.
        compile_seconds: wall time of the compiler run in this call (0 when found in the cache).
        cached: whether it came from the cache.
        flags: the compiler flags used.
        build_seconds: wall time of the compiler run that built the entry (recorded in its meta.json).
    """

    path: Path
    key: str
    functions: tuple[str, ...]
    compile_seconds: float
    cached: bool
    flags: tuple[str, ...]
    build_seconds: float = 0.0


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _entry_meta(entry: Path, libname: str) -> dict | None:
    """The ``meta.json`` of a valid entry, None if the entry is missing, truncated or altered."""
    lib, meta = entry / libname, entry / "meta.json"
    try:
        info = json.loads(meta.read_text())
        if lib.stat().st_size == info["size"] and _sha256_file(lib) == info["sha256"]:
            return info
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _entry_ok(entry: Path, libname: str) -> float | None:
    """The recorded compile time of a valid entry, None if the entry is missing, truncated or altered."""
    info = _entry_meta(entry, libname)
    return None if info is None else float(info.get("compile_seconds", 0.0))


def _discard(entry: Path) -> None:
    """Move a bad entry aside atomically, then delete it (a concurrent reader never sees half of it)."""
    trash = entry.with_name(f"{entry.name}.bad.{os.getpid()}.{time.monotonic_ns()}")
    try:
        os.rename(entry, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def build_shared(source: CSource, *, opt: str = DEFAULT_OPT, flags: Sequence[str] = (), cc: str = "gcc",
                 cache: Path | str | None = None, force: bool = False) -> Library:
    """Compile ``source`` into a shared library, or return the cached one.

    Args:
        source: emitted C (:func:`~pbframework.codegen.emit.emit_c`).
        opt: optimisation level flag (``-O0`` .. ``-O3``); ``-O1`` keeps compile time low on large graphs.
        flags: extra compiler flags (for example ``("-march=native",)`` or ``("-Dcasadi_real=float",)``).
        cc: the compiler.
        cache: cache root (default :func:`cache_dir`).
        force: rebuild even if a valid entry exists.

    Raises:
        BuildError: the compiler failed (its output is in the message).
    """
    all_flags = (opt, "-fPIC", "-shared", *flags)
    version = compiler_version(cc)
    key = hashlib.sha256("\0".join([source.sha256, cc, version, *all_flags]).encode()).hexdigest()[:32]
    root = Path(cache) if cache is not None else cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    entry = root / f"{source.name}-{key}"
    libname = f"lib{source.name}.so"
    if entry.exists() and not force:
        recorded = _entry_ok(entry, libname)
        if recorded is not None:
            return Library(entry / libname, key, source.functions, 0.0, True, all_flags, recorded)
        _discard(entry)
    elif entry.exists():
        _discard(entry)
    tmp = Path(tempfile.mkdtemp(prefix=f".{source.name}-", dir=root))
    try:
        src = tmp / f"{source.name}.c"
        src.write_text(source.text)
        cmd = [cc, *all_flags, str(src), "-o", str(tmp / libname), "-lm"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise BuildError(f"compiling {source.name} failed: {' '.join(cmd)}\n{proc.stderr[-4000:]}")
        lib = tmp / libname
        (tmp / "meta.json").write_text(json.dumps({
            "size": lib.stat().st_size, "sha256": _sha256_file(lib), "source_sha256": source.sha256,
            "compiler": version, "flags": list(all_flags), "functions": list(source.functions),
            "compile_seconds": seconds}))
        try:
            os.rename(tmp, entry)          # atomic publish; fails if another process published first
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            recorded = _entry_ok(entry, libname)
            if recorded is None:
                raise BuildError(f"cache entry {entry} is invalid after a concurrent build; remove it and retry")
            return Library(entry / libname, key, source.functions, seconds, True, all_flags, recorded)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Library(entry / libname, key, source.functions, seconds, False, all_flags, seconds)


@dataclass(frozen=True)
class PackedLibrary:
    """A built library as bytes, to send to another process or machine (:func:`pack_library`), which writes
    it into its own cache once (:func:`install_library`) and needs no compiler.

    Attributes:
        name: the unit name (the cache entry is ``<name>-<key>``, the file ``lib<name>.so``).
        key: the cache key it was built under.
        data: the library's bytes.
        meta: its ``meta.json`` (size, sha256, compiler, flags, functions, ...).
        platform: ``sys.platform``, ``platform.machine()`` and the pointer size of the building machine.
        source: the C source it was built from (zlib-compressed), if packed with it: a machine of another
            platform, or one that cannot load the library, rebuilds from it (:func:`rebuild_library`).
    """

    name: str
    key: str
    data: bytes
    meta: dict
    platform: tuple[str, str, int]
    source: bytes | None = None


def _platform() -> tuple[str, str, int]:
    import platform
    import sys

    return (sys.platform, platform.machine(), ctypes.sizeof(ctypes.c_void_p))


def pack_library(library: Library, source: CSource | None = None) -> PackedLibrary:
    """``library`` as a :class:`PackedLibrary` (its bytes and ``meta.json`` read from its cache entry), with
    the ``source`` it was built from where given (compressed)."""
    import zlib

    entry = library.path.parent
    meta = json.loads((entry / "meta.json").read_text())
    name = library.path.name[3:-3]                 # lib<name>.so
    text = None if source is None else zlib.compress(source.text.encode(), 6)
    return PackedLibrary(name, library.key, library.path.read_bytes(), meta, _platform(), text)


def rebuild_library(packed: PackedLibrary, why: str, cache: Path | str | None = None) -> Library:
    """Build a :class:`PackedLibrary`'s shipped source here, with the flags it was built with (its compiler
    replaced by this machine's ``gcc``), for a machine that cannot use the shipped bytes (``why``).

    Raises:
        BuildError: no source was shipped, or building it failed (no compiler here, ...); the message says
            ``why`` the bytes could not be used and why the rebuild failed.
    """
    import zlib

    if packed.source is None:
        raise BuildError(f"{why}; no source came with it to rebuild from: build it here (a compiler is needed) "
                         f"or run on machines of the same platform")
    flags = tuple(packed.meta.get("flags", (DEFAULT_OPT, "-fPIC", "-shared")))
    source = CSource(packed.name, zlib.decompress(packed.source).decode(), tuple(packed.meta.get("functions", ())))
    try:
        return build_shared(source, opt=flags[0], flags=flags[3:], cache=cache)
    except (BuildError, OSError) as exc:
        raise BuildError(f"{why}; rebuilding it from the shipped source failed: {exc}") from None


def install_library(packed: PackedLibrary, cache: Path | str | None = None) -> Library:
    """Write a :class:`PackedLibrary` into the cache (default :func:`cache_dir`) under its own key, unless a
    valid entry is there already, and return it as a :class:`Library`; no compiler runs. Publishing is
    atomic, as in :func:`build_shared`. A library built for another platform is rebuilt from its shipped
    source (:func:`rebuild_library`).

    Raises:
        BuildError: the library was built for another platform and cannot be rebuilt here (no source
            shipped, no compiler), or its bytes do not match its recorded size and sha256.
    """
    here = _platform()
    if tuple(packed.platform) != here:
        return rebuild_library(packed, f"library {packed.name} was built for {'/'.join(map(str, packed.platform))}, "
                                       f"this machine is {'/'.join(map(str, here))}", cache)
    meta = packed.meta
    if len(packed.data) != meta.get("size") or hashlib.sha256(packed.data).hexdigest() != meta.get("sha256"):
        raise BuildError(f"library {packed.name}-{packed.key}: its bytes do not match its recorded size and sha256")
    root = Path(cache) if cache is not None else cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    entry, libname = root / f"{packed.name}-{packed.key}", f"lib{packed.name}.so"
    functions, flags = tuple(meta.get("functions", ())), tuple(meta.get("flags", ()))
    recorded = float(meta.get("compile_seconds", 0.0))
    if entry.exists():
        if _entry_ok(entry, libname) is not None:
            return Library(entry / libname, packed.key, functions, 0.0, True, flags, recorded)
        _discard(entry)
    tmp = Path(tempfile.mkdtemp(prefix=f".{packed.name}-", dir=root))
    try:
        (tmp / libname).write_bytes(packed.data)
        (tmp / "meta.json").write_text(json.dumps({**meta, "installed": True}))
        try:
            os.rename(tmp, entry)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if _entry_ok(entry, libname) is None:
                raise BuildError(f"cache entry {entry} is invalid after a concurrent install; remove it and retry")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Library(entry / libname, packed.key, functions, 0.0, False, flags, recorded)


def load_function(library: Library, name: str | None = None) -> ca.Function:
    """The compiled function ``name`` (default: the first) as a ``casadi.Function`` (``casadi.external``)."""
    fname = name or library.functions[0]
    if fname not in library.functions:
        raise KeyError(f"library {library.path.name} has no function {fname!r} (has: {', '.join(library.functions)})")
    return ca.external(fname, str(library.path))


_INT = ctypes.c_longlong
_VOIDP_P = ctypes.POINTER(ctypes.c_void_p)


class BatchRunner:
    """Evaluate a compiled function on many instances through ``<f>_batch`` (ctypes, double precision).

    Args:
        library: the built library.
        f: the ``casadi.Function`` it was generated from (for sizes); its name selects the C symbol.

    ``runner(*inputs)`` takes per input a ``(N, nnz_in)`` array (or ``(nnz_in,)`` for N = 1) and returns
    ``(N, nnz_out)`` arrays. ``runner.time_per_call(inputs, reps)`` runs ``<f>_repeat`` and returns
    seconds per instance, measured around one C loop. The runner owns the work arrays and its pointer
    buffers: one runner per thread.
    """

    def __init__(self, library: Library, f: ca.Function):
        self.f = f
        self.name = f.name()
        if self.name not in library.functions:
            raise KeyError(f"library {library.path.name} has no function {self.name!r}")
        self.lib = ctypes.CDLL(str(library.path))
        sz = [_INT() for _ in range(4)]
        work = getattr(self.lib, f"{self.name}_work")
        work.argtypes = [ctypes.POINTER(_INT)] * 4
        work(*[ctypes.byref(x) for x in sz])
        self.iw = np.zeros(max(sz[2].value, 1), dtype=np.int64)
        self.w = np.zeros(max(sz[3].value, 1), dtype=np.float64)
        self._batch = getattr(self.lib, f"{self.name}_batch")
        self._batch.argtypes = [_INT, _VOIDP_P, _VOIDP_P, ctypes.c_void_p, ctypes.c_void_p]
        self._batch.restype = ctypes.c_int
        self._repeat = getattr(self.lib, f"{self.name}_repeat")
        self._repeat.argtypes = [_INT, _INT, _VOIDP_P, _VOIDP_P, ctypes.c_void_p, ctypes.c_void_p]
        self._repeat.restype = ctypes.c_int
        self.nnz_in = [f.nnz_in(j) for j in range(f.n_in())]
        self.nnz_out = [f.nnz_out(j) for j in range(f.n_out())]
        self._arg = (ctypes.c_void_p * max(len(self.nnz_in), 1))()
        self._res = (ctypes.c_void_p * max(len(self.nnz_out), 1))()
        self._iw_p, self._w_p = self.iw.ctypes.data, self.w.ctypes.data

    def _prepare(self, inputs: Sequence[np.ndarray]) -> tuple[int, list[np.ndarray], list[np.ndarray]]:
        if len(inputs) != len(self.nnz_in):
            raise ValueError(f"{self.name}: expected {len(self.nnz_in)} inputs, got {len(inputs)}")
        keep = []
        N = -1
        for j, x in enumerate(inputs):
            a = x if (type(x) is np.ndarray and x.dtype == np.float64 and x.flags.c_contiguous) \
                else np.ascontiguousarray(x, dtype=np.float64)
            if a.ndim == 1:
                a = a.reshape(1, -1)
            if a.ndim != 2 or a.shape[1] != self.nnz_in[j]:
                raise ValueError(f"{self.name}: input {j} needs {self.nnz_in[j]} values per instance, got shape "
                                 f"{np.shape(x)}")
            if N < 0:
                N = a.shape[0]
            elif a.shape[0] != N:
                raise ValueError(f"{self.name}: inputs have different batch sizes ({N} and {a.shape[0]})")
            self._arg[j] = a.ctypes.data
            keep.append(a)
        outs = [np.empty((N, k)) for k in self.nnz_out]
        for o, out in enumerate(outs):
            self._res[o] = out.ctypes.data
        return N, keep, outs

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        N, _keep, outs = self._prepare(inputs)
        if self._batch(N, self._arg, self._res, self._iw_p, self._w_p):
            raise RuntimeError(f"{self.name}_batch returned an error")
        return outs

    def bind(self, *inputs: np.ndarray):
        """A zero-argument callable evaluating the batch on these (kept) inputs into fixed output arrays:
        one ctypes call, no per-call array handling. For timing batch calls from Python.

        Returns:
            ``call() -> list of output arrays`` (the same arrays on every call, overwritten).
        """
        N, keep, outs = self._prepare(inputs)
        arg = (ctypes.c_void_p * len(self._arg))(*self._arg)
        res = (ctypes.c_void_p * len(self._res))(*self._res)
        batch, iw, w, name = self._batch, self._iw_p, self._w_p, self.name

        def call() -> list[np.ndarray]:
            if batch(N, arg, res, iw, w):
                raise RuntimeError(f"{name}_batch returned an error")
            return outs

        call.inputs = keep  # type: ignore[attr-defined]  # keep the arrays alive
        call.runner = self  # type: ignore[attr-defined]  # and the runner, whose work arrays call() writes
        return call

    def time_per_call(self, inputs: Sequence[np.ndarray], reps: int) -> float:
        """Seconds per instance: one ``<f>_repeat(reps, N)`` C loop timed as a whole, divided by ``reps * N``."""
        N, _keep, _outs = self._prepare(inputs)
        t0 = time.perf_counter()
        if self._repeat(reps, N, self._arg, self._res, self._iw_p, self._w_p):
            raise RuntimeError(f"{self.name}_repeat returned an error")
        return (time.perf_counter() - t0) / (reps * N)


# ---- cache inspection (added by the native-backend work: `pbf cache info` / `pbf cache clear`) ----------

@dataclass(frozen=True)
class CacheEntry:
    """One cached library: its directory, unit name, size on disk, validity, recorded compile time, and the
    compiler (first line of ``cc --version``) and flags it was built with (empty for an invalid entry)."""

    path: Path
    name: str
    bytes: int
    valid: bool
    compile_seconds: float
    compiler: str = ""
    flags: tuple[str, ...] = ()


def cache_entries(cache: Path | str | None = None) -> list[CacheEntry]:
    """Every entry under the cache root (temporary and discarded directories excluded)."""
    root = Path(cache) if cache is not None else cache_dir()
    out = []
    if not root.is_dir():
        return out
    for entry in sorted(root.iterdir()):
        if not entry.is_dir() or entry.name.startswith(".") or ".bad." in entry.name:
            continue
        name = entry.name.rsplit("-", 1)[0]
        size = sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
        meta = _entry_meta(entry, f"lib{name}.so") or {}
        out.append(CacheEntry(entry, name, size, bool(meta), float(meta.get("compile_seconds", 0.0)),
                              str(meta.get("compiler", "")), tuple(meta.get("flags", ()))))
    return out


def cache_info(cache: Path | str | None = None) -> dict:
    """``{"path", "entries", "bytes", "invalid", "compile_seconds", "compilers"}`` of the cache
    (compile_seconds: the recorded compile time the valid entries saved on each reuse; compilers: the number
    of valid entries built by each compiler)."""
    entries = cache_entries(cache)
    compilers: dict[str, int] = {}
    for e in entries:
        if e.valid:
            compilers[e.compiler or "unknown"] = compilers.get(e.compiler or "unknown", 0) + 1
    return {"path": str(Path(cache) if cache is not None else cache_dir()), "entries": len(entries),
            "bytes": sum(e.bytes for e in entries), "invalid": sum(not e.valid for e in entries),
            "compile_seconds": sum(e.compile_seconds for e in entries if e.valid), "compilers": compilers}


def cache_clear(cache: Path | str | None = None) -> int:
    """Remove every cached library (each entry is renamed aside first, so a process reading it is not left
    with half an entry); returns the number of entries removed."""
    root = Path(cache) if cache is not None else cache_dir()
    n = 0
    if not root.is_dir():
        return 0
    for entry in list(root.iterdir()):
        if not entry.is_dir() or entry.name.startswith("."):    # ".<name>-*": a build in progress
            continue
        if ".bad." in entry.name:
            shutil.rmtree(entry, ignore_errors=True)
            continue
        _discard(entry)
        n += 1
    return n


__all__ += ["CacheEntry", "cache_entries", "cache_info", "cache_clear"]
