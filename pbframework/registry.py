"""The plug-in manager: loads built-in and third-party plug-ins and looks them up by family and name."""

from __future__ import annotations

import difflib
import enum
import importlib.metadata
import inspect
import threading
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping

import pluggy

from . import hookspecs
from .errors import (PbfError, PluginError, PluginParameterError, PluginTypeError, PluginValueError, UnknownFamilyError,
                     UnknownPluginError)
from .hookspecs import PROJECT, PluginInfo

FAMILIES: dict[str, str] = {
    "force": "pbf_force_models",
    "dynamics": "pbf_dynamics",
    "fd": "pbf_forward_dynamics",
    "integrator": "pbf_integrators",
    "solver": "pbf_solvers",
    "backend": "pbf_backends",
}
"""Family name -> the hook that offers it."""

_FAMILY_WORDS = {"force": "force model", "dynamics": "dynamics function", "fd": "forward-dynamics algorithm",
                 "integrator": "integrator", "solver": "solver", "backend": "backend"}


class Registry:
    """Plug-ins by family and name.

    Args:
        entry_points: load the ``pbframework`` entry-point group (built-ins and installed plug-ins).
        plugins: extra plug-in objects (modules or instances with ``@hookimpl`` functions) to register.
    """

    def __init__(self, entry_points: bool = True, plugins: Iterable[Any] = ()) -> None:
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._entries: dict[str, dict[str, tuple[PluginInfo, str]]] | None = None
        self._lock = threading.RLock()
        if entry_points:
            self._load_entry_points()
        for p in plugins:
            self.register(p)

    # -- loading ----------------------------------------------------------------------------------------
    def _load_entry_points(self) -> None:
        eps = importlib.metadata.entry_points(group=PROJECT)
        seen: set[str] = set()
        for ep in sorted(eps, key=lambda e: e.name):
            if ep.value in seen:  # the same module installed twice (editable + regular): load once
                continue
            seen.add(ep.value)
            try:
                obj = ep.load()
            except Exception as exc:  # noqa: BLE001 - reported with the plug-in's name
                raise PluginError(f"plug-in {ep.name!r} ({ep.value}) failed to import: "
                                  f"{type(exc).__name__}: {exc}") from exc
            self.register(obj, name=ep.name)

    def register(self, plugin: Any, name: str | None = None) -> str:
        """Register a plug-in object (module or instance with ``@hookimpl`` functions).

        Raises:
            PluginError: a hook implementation is misspelt or has unexpected arguments.
        """
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        with self._lock:
            try:
                self.pm.register(plugin, name=name)
            except ValueError as exc:
                raise PluginError(f"plug-in {name!r}: {exc}") from exc
            except pluggy.PluginValidationError as exc:
                raise PluginError(f"plug-in {name!r} has a malformed hook implementation: {exc}") from exc
            unknown = [h for h in dir(plugin) if h.startswith("pbf_") and h not in FAMILIES.values()
                       and self.pm.parse_hookimpl_opts(plugin, h) is not None]
            if unknown:
                self.pm.unregister(plugin)
                raise PluginError(f"plug-in {name!r} implements unknown hook(s) {unknown} (known hooks: "
                                  f"{', '.join(sorted(FAMILIES.values()))})")
            self._entries = None
        return name

    def unregister(self, name: str) -> None:
        with self._lock:
            self.pm.unregister(name=name)
            self._entries = None

    def _collect(self) -> dict[str, dict[str, tuple[PluginInfo, str]]]:
        with self._lock:
            if self._entries is not None:
                return self._entries
            entries: dict[str, dict[str, tuple[PluginInfo, str]]] = {f: {} for f in FAMILIES}
            for family, hook_name in FAMILIES.items():
                hook = getattr(self.pm.hook, hook_name)
                for impl in hook.get_hookimpls():
                    owner = self.pm.get_name(impl.plugin) or repr(impl.plugin)
                    try:
                        result = impl.function()
                    except Exception as exc:  # noqa: BLE001 - reported with the plug-in's name
                        raise PluginError(f"plug-in {owner!r}: {hook_name}() raised "
                                          f"{type(exc).__name__}: {exc}") from exc
                    if result is None:
                        continue
                    if isinstance(result, PluginInfo) or not isinstance(result, (list, tuple)):
                        raise PluginError(f"plug-in {owner!r}: {hook_name}() must return a list of PluginInfo, "
                                          f"got {type(result).__name__}")
                    for info in result:
                        self._check(info, owner, hook_name)
                        if info.name in entries[family]:
                            other = entries[family][info.name][1]
                            raise PluginError(f"{_FAMILY_WORDS[family]} {info.name!r} is offered twice: by "
                                              f"plug-in {other!r} and by plug-in {owner!r}")
                        entries[family][info.name] = (info, owner)
            self._entries = entries
            return entries

    @staticmethod
    def _check(info: Any, owner: str, hook_name: str) -> None:
        if not isinstance(info, PluginInfo):
            raise PluginError(f"plug-in {owner!r}: {hook_name}() returned {type(info).__name__}, expected "
                              f"pbframework.PluginInfo")
        if not isinstance(info.name, str) or not info.name.isidentifier():
            raise PluginError(f"plug-in {owner!r}: {hook_name}() offers an invalid name {info.name!r} "
                              f"(use an identifier such as 'my_drag')")
        if not callable(info.build):
            raise PluginError(f"plug-in {owner!r}: {info.name!r} has a non-callable build "
                              f"({type(info.build).__name__})")
        if not isinstance(info.description, str) or not info.description.strip():
            raise PluginError(f"plug-in {owner!r}: {info.name!r} needs a one-line description")

    # -- look-up --------------------------------------------------------------------------------------
    def _family(self, family: str) -> dict[str, tuple[PluginInfo, str]]:
        if family not in FAMILIES:
            raise UnknownFamilyError(f"unknown plug-in family {family!r} (families: {', '.join(FAMILIES)})")
        return self._collect()[family]

    def get(self, family: str, name: str) -> PluginInfo:
        """The plug-in ``name`` of ``family``; :class:`UnknownPluginError` lists the available names."""
        entries = self._family(family)
        if name not in entries:
            avail = ", ".join(sorted(entries)) or "none"
            raise UnknownPluginError(f"unknown {_FAMILY_WORDS[family]} {name!r} (available: {avail})")
        return entries[name][0]

    def names(self, family: str) -> list[str]:
        return sorted(self._family(family))

    def owner(self, family: str, name: str) -> str:
        self.get(family, name)
        return self._family(family)[name][1]

    def all(self) -> list[tuple[str, PluginInfo, str]]:
        """Every registered plug-in as (family, info, owning plug-in name), sorted."""
        return [(f, info, owner) for f in FAMILIES for _, (info, owner) in sorted(self._family(f).items())]


_default: Registry | None = None
_default_lock = threading.Lock()


def registry() -> Registry:
    """The process-wide registry (built on first use from the ``pbframework`` entry points)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Registry()
        return _default


def get_plugin(family: str, name: str) -> PluginInfo:
    """Shortcut for ``registry().get(family, name)``."""
    return registry().get(family, name)


def describe_parameters(build: Callable) -> str:
    """``build``'s keyword parameters with their defaults, as one line (``damping=0.1, dofs=None``; a
    parameter without a default reads ``name (required)``)."""
    out = []
    for p in inspect.signature(build).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            continue
        default = p.default.value if isinstance(p.default, enum.Enum) else p.default     # as a user writes it
        out.append(f"{p.name} (required)" if p.default is p.empty else f"{p.name}={default!r}")
    return ", ".join(out) or "none"


def check_parameters(what: str, build: Callable, params: Mapping[str, Any], *, given: Iterable[str] = ()) -> None:
    """Raise :class:`PluginParameterError` unless ``build(**params)`` binds to ``build``'s signature.

    Args:
        what: who takes the parameters, for the message (``"force model 'joint_damping'"``).
        build: the callable (a class: its constructor).
        params: the keyword arguments.
        given: parameter names supplied in another way (positionally, or by another option), counted as
            present when looking for missing ones.
    """
    sig = inspect.signature(build)
    accepted = {n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    open_ended = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    where = f"; accepted: {describe_parameters(build)}"
    for name in params:
        if name not in accepted and not open_ended:
            close = difflib.get_close_matches(name, sorted(accepted), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise PluginParameterError(f"{what}: unknown parameter {name!r}{hint}{where}")
    have = set(params) | set(given)
    missing = [n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               and p.default is p.empty and n not in have]
    if missing:
        raise PluginParameterError(f"{what}: missing parameter {missing[0]!r}{where}")


def build_plugin(family: str, name: str, **params: Any) -> Any:
    """``get_plugin(family, name).build(**params)``, the parameters checked against the build's signature
    first (:class:`PluginParameterError` lists the accepted ones with their defaults); a value the build
    rejects with a ``ValueError`` or ``TypeError`` is a :class:`PluginValueError` / :class:`PluginTypeError` (a
    :class:`PluginParameterError` and the built-in the plug-in raised) naming the plug-in."""
    if not isinstance(name, str):
        raise UnknownPluginError(f"{_FAMILY_WORDS.get(family, family)} name must be a string, got "
                                 f"{type(name).__name__} {name!r} (available: {', '.join(available(family))})")
    info = get_plugin(family, name)
    what = f"{_FAMILY_WORDS[family]} {name!r}"
    check_parameters(what, info.build, params)
    try:
        return info.build(**params)
    except PbfError:
        raise
    except (TypeError, ValueError, ArithmeticError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        first = first if first.startswith(f"{name}: ") else f"{what}: {first}"    # the plug-in named once
        cls = PluginTypeError if isinstance(exc, TypeError) else PluginValueError
        raise cls(f"{first}; accepted: {describe_parameters(info.build)}") from None


def available(family: str) -> list[str]:
    """Names registered in ``family``."""
    return registry().names(family)


def register(plugin: ModuleType | Any, name: str | None = None) -> str:
    """Register a plug-in object at run time (in addition to the installed entry points)."""
    return registry().register(plugin, name=name)


def unregister(name: str) -> None:
    registry().unregister(name)
