"""The lazily built, process-wide plugin manager.

Discovery happens once, at the first call of :func:`get_plugin_manager` (normally the first
backend or op lookup), never at ``import helion``. Entry points of the group ``helion.plugins``
are loaded one at a time, so a plugin that fails to import or register is recorded in
:func:`load_failures` and the other plugins keep working.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import threading
import traceback
from typing import Any
from typing import Iterable
from typing import NamedTuple

import pluggy

from helion.plugins import hookspecs
from helion.plugins.hookspecs import hookimpl

ENTRY_POINT_GROUP = "helion.plugins"
DISABLE_AUTOLOAD_ENV = "HELION_DISABLE_PLUGIN_AUTOLOAD"
CORE_PLUGIN_NAME = "core"
CORE_DISTRIBUTION = "helion-core"

_FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})


class PluginInfo(NamedTuple):
    """One registered plugin, as listed by ``helion plugins``."""

    name: str
    distribution: str | None
    version: str | None


@dataclasses.dataclass(frozen=True)
class PluginFailure:
    """A plugin that could not be loaded, registered, or whose hook raised.

    Attributes:
        plugin: The plugin's name (its entry-point name for installed plugins).
        distribution: The distribution that provides it, when known.
        version: That distribution's version, when known.
        entry_point: The entry point as written in its metadata (``"name = module"``), if any.
        phase: ``"import"``, ``"register"``, ``"discovery"`` or ``"hook <hook name>"``.
        error: ``repr`` of the exception.
        traceback: The formatted traceback, for ``helion plugins --verbose``.
    """

    plugin: str
    distribution: str | None
    version: str | None
    entry_point: str | None
    phase: str
    error: str
    traceback: str = dataclasses.field(default="", compare=False)

    def describe(self) -> str:
        """Return a one-line human-readable description of the failure."""
        source = _format_distribution(
            self.distribution,
            self.version,
            unknown="unknown distribution" if self.entry_point else "registered explicitly",
        )
        where = f", entry point {self.entry_point!r}" if self.entry_point else ""
        if self.phase == "import":
            action = "failed to import"
        elif self.phase == "register":
            action = "could not be registered"
        elif self.phase == "discovery":
            action = "could not be discovered"
        else:
            action = f"raised in {self.phase.removeprefix('hook ')}()"
        return f"plugin {self.plugin!r} ({source}{where}) {action}: {self.error}"


@dataclasses.dataclass(frozen=True)
class HookResult:
    """The non-None value one plugin returned from a hook, with the plugin that returned it."""

    plugin: PluginInfo
    value: Any


class _CorePlugin:
    """Core's own hook implementations: core registers its built-ins through the same hooks."""

    @hookimpl
    def helion_backends(self) -> list[Any]:
        # Imported here so that building the manager never imports the ref backend's modules.
        from helion.backends.ref import RefBackend

        return [RefBackend()]


class _State:
    """Everything the manager caches; replaced wholesale by reset_plugin_manager()."""

    def __init__(self) -> None:
        self.manager: pluggy.PluginManager | None = None
        # Set only once discovery has finished, so other threads never see a half-loaded manager.
        self.ready_manager: pluggy.PluginManager | None = None
        self.plugins: dict[str, PluginInfo] = {}
        self.failures: list[PluginFailure] = []
        self.autoload_disabled = False


_lock = threading.RLock()
_state = _State()
# Bumped whenever the set of plugins changes, so caches built from hooks know to rebuild.
_generation = 0


def get_plugin_manager() -> pluggy.PluginManager:
    """Return the process-wide plugin manager, building it on first use.

    The first call registers core's built-in plugin, then loads every entry point of the group
    ``helion.plugins`` unless ``HELION_DISABLE_PLUGIN_AUTOLOAD`` is set. The result is cached
    until :func:`reset_plugin_manager`.

    Returns:
        The ``pluggy.PluginManager`` for project ``"helion"``.
    """
    manager = _state.ready_manager
    if manager is not None:
        return manager
    with _lock:
        # A plugin that looks something up while being imported re-enters here on the building
        # thread (the lock is reentrant) and gets the partly loaded manager instead of recursing.
        if _state.manager is None:
            _build_manager()
        assert _state.manager is not None
        return _state.manager


def reset_plugin_manager() -> None:
    """Forget the manager, its plugins and recorded failures; the next lookup rebuilds it.

    Meant for tests. Objects obtained from the old manager (backends, ops) stay usable.
    """
    global _state
    with _lock:
        _state = _State()
        _bump_generation()


def register_plugin(
    plugin: object,
    name: str,
    *,
    distribution: str | None = None,
    version: str | None = None,
) -> None:
    """Register a plugin object explicitly (tests, notebooks, embedding applications).

    Args:
        plugin: A module, class or instance whose ``hookimpl``-marked functions implement hooks.
        name: The name the plugin is listed under; must not be in use.
        distribution: Distribution to report for it in ``list_plugins()``, if any.
        version: Version to report for it, if any.

    Raises:
        ValueError: The name, or the object itself, is already registered.
        pluggy.PluginValidationError: An implementation does not match its hook spec, or names
            a hook that does not exist.
    """
    manager = get_plugin_manager()
    with _lock:
        _register_checked(manager, plugin, name)
        _state.plugins[name] = PluginInfo(name, distribution, version)
        _bump_generation()


def unregister_plugin(name: str) -> None:
    """Remove the plugin registered under ``name``.

    Raises:
        KeyError: No plugin is registered under that name.
    """
    manager = get_plugin_manager()
    with _lock:
        if manager.get_plugin(name) is None:
            raise KeyError(f"no helion plugin is registered under the name {name!r}")
        manager.unregister(name=name)
        _state.plugins.pop(name, None)
        _bump_generation()


def list_plugins() -> list[PluginInfo]:
    """Return one ``(name, distribution, version)`` row per registered plugin, core first."""
    get_plugin_manager()
    with _lock:
        return list(_state.plugins.values())


def load_failures() -> list[PluginFailure]:
    """Return the plugins that failed to import or register, and hook calls that raised."""
    get_plugin_manager()
    with _lock:
        return list(_state.failures)


def plugin_info(name: str) -> PluginInfo | None:
    """Return the listing row of the plugin registered under ``name``, or None."""
    get_plugin_manager()
    with _lock:
        return _state.plugins.get(name)


def autoload_disabled() -> bool:
    """Return whether the current manager skipped entry-point loading."""
    get_plugin_manager()
    return _state.autoload_disabled


def is_loaded() -> bool:
    """Return whether the manager has been built (discovery has run) in this process."""
    return _state.manager is not None


def generation() -> int:
    """Return a counter that changes whenever plugins are registered, removed or reset.

    Caches derived from hook results (backend registry, op tables) compare it to know when to
    rebuild, without the manager having to know about them.
    """
    return _generation


def call_each_plugin(hook_name: str, **kwargs: Any) -> list[HookResult]:
    """Call a hook on every plugin separately, attributing each result to its plugin.

    Unlike ``manager.hook.<name>(...)``, an implementation that raises does not abort the call:
    its exception is recorded in :func:`load_failures` (phase ``"hook <name>"``) and the other
    plugins' results are still returned.

    Args:
        hook_name: One of the hooks in ``helion.plugins.hookspecs``.
        **kwargs: Every argument of that hook's spec.

    Returns:
        One entry per plugin that returned a non-None value, in registration order.

    Raises:
        ValueError: ``hook_name`` is not a helion hook.
        TypeError: An argument of the spec is missing from ``kwargs``.
    """
    manager = get_plugin_manager()
    caller = getattr(manager.hook, hook_name, None)
    if caller is None or not caller.has_spec():
        raise ValueError(f"{hook_name!r} is not a helion hook; known hooks: {_known_hooks()}")
    missing = [arg for arg in caller.spec.argnames if arg not in kwargs]
    if missing:
        raise TypeError(f"hook {hook_name} needs the argument(s) {', '.join(missing)}")
    results: list[HookResult] = []
    for impl in caller.get_hookimpls():
        info = _state.plugins.get(impl.plugin_name) or PluginInfo(impl.plugin_name, None, None)
        try:
            value = impl.function(*[kwargs[arg] for arg in impl.argnames])
        except Exception as error:
            _record_failure(info, None, f"hook {hook_name}", error)
            continue
        if value is not None:
            results.append(HookResult(info, value))
    return results


def _build_manager() -> None:
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    _state.manager = manager
    try:
        _register_checked(manager, _CorePlugin(), CORE_PLUGIN_NAME)
        _state.plugins[CORE_PLUGIN_NAME] = PluginInfo(
            CORE_PLUGIN_NAME, CORE_DISTRIBUTION, _distribution_version(CORE_DISTRIBUTION)
        )
        _state.autoload_disabled = _autoload_disabled_by_env()
        if not _state.autoload_disabled:
            _load_entry_points(manager)
    except BaseException:
        # Never leave a half-built manager cached: the next call starts over.
        _state.manager = None
        raise
    _state.ready_manager = manager
    _bump_generation()


def _load_entry_points(manager: pluggy.PluginManager) -> None:
    for entry_point in _discover_entry_points():
        distribution, version = _distribution_of(entry_point)
        info = PluginInfo(entry_point.name, distribution, version)
        written = f"{entry_point.name} = {entry_point.value}"
        existing = _state.plugins.get(entry_point.name)
        if existing is not None:
            error = ValueError(
                f"the plugin name {entry_point.name!r} is already used by "
                f"{_format_distribution(existing.distribution, existing.version)}"
            )
            _record_failure(info, written, "register", error)
            continue
        try:
            plugin = entry_point.load()
        except Exception as error:
            _record_failure(info, written, "import", error)
            continue
        try:
            _register_checked(manager, plugin, entry_point.name)
        except Exception as error:
            _record_failure(info, written, "register", error)
            continue
        _state.plugins[entry_point.name] = info


def _discover_entry_points() -> Iterable[importlib.metadata.EntryPoint]:
    try:
        found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception as error:
        # A distribution with corrupt metadata must not take every plugin down with it.
        _record_failure(PluginInfo("<discovery>", None, None), None, "discovery", error)
        return []
    return sorted(found, key=lambda entry_point: (entry_point.name, entry_point.value))


def _register_checked(manager: pluggy.PluginManager, plugin: object, name: str) -> None:
    """Register one plugin, rejecting implementations of hooks that do not exist.

    pluggy's ``check_pending()`` checks all plugins at once; checking each plugin as it is
    registered lets a plugin with a misspelled hook fail alone.
    """
    if manager.has_plugin(name):
        raise ValueError(f"a helion plugin named {name!r} is already registered")
    if manager.is_registered(plugin):
        raise ValueError(
            f"{plugin!r} is already registered as helion plugin {manager.get_name(plugin)!r}"
        )
    manager.register(plugin, name=name)
    unknown = sorted(
        caller.name for caller in manager.get_hookcallers(plugin) or [] if not caller.has_spec()
    )
    if unknown:
        manager.unregister(plugin)
        raise pluggy.PluginValidationError(
            plugin,
            f"helion plugin {name!r} implements unknown hook(s) {', '.join(unknown)}; "
            f"known hooks: {_known_hooks()}",
        )


def _record_failure(
    info: PluginInfo, entry_point: str | None, phase: str, error: BaseException
) -> None:
    failure = PluginFailure(
        plugin=info.name,
        distribution=info.distribution,
        version=info.version,
        entry_point=entry_point,
        phase=phase,
        error=repr(error),
        traceback="".join(traceback.format_exception(error)),
    )
    with _lock:
        # Hook calls can be repeated (one registry rebuild per reset); report each problem once.
        if failure not in _state.failures:
            _state.failures.append(failure)


def _distribution_of(entry_point: importlib.metadata.EntryPoint) -> tuple[str | None, str | None]:
    dist = getattr(entry_point, "dist", None)
    if dist is None:
        return None, None
    try:
        return dist.metadata["Name"], dist.version
    except Exception:
        return None, None


def _distribution_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        # Running from a source tree that is on sys.path but not installed.
        return None


def _autoload_disabled_by_env() -> bool:
    return os.environ.get(DISABLE_AUTOLOAD_ENV, "").strip().lower() not in _FALSE_WORDS


def _known_hooks() -> str:
    return ", ".join(sorted(name for name in vars(hookspecs) if name.startswith("helion_")))


def _format_distribution(
    distribution: str | None, version: str | None, *, unknown: str = "registered explicitly"
) -> str:
    if distribution is None:
        return unknown
    if version is None:
        return distribution
    return f"{distribution} {version}"


def _bump_generation() -> None:
    global _generation
    _generation += 1
