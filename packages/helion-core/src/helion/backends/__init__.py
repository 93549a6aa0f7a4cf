"""Backends: the protocol (:mod:`helion.backends.base`) and the registry of installed backends.

Core ships the ``ref`` backend; every other backend is provided by a plugin through the
``helion_backends`` hook. The registry is built from the hooks at the first lookup and rebuilt
only when the set of plugins changes.
"""

from __future__ import annotations

import dataclasses
import threading

from helion import plugins
from helion.backends.base import Backend as Backend
from helion.backends.base import CompiledKernel as CompiledKernel
from helion.backends.base import ExportedModule as ExportedModule

__all__ = [
    "Backend",
    "CompiledKernel",
    "ExportedModule",
    "backend_availability",
    "backend_problems",
    "backend_provider",
    "default_backend_name",
    "get_backend",
    "list_backends",
]

REF_BACKEND_NAME = "ref"
PREFERRED_BACKEND_NAME = "triton"

# Where each first-party backend lives, only to tell users what to install; the backends
# themselves are found through entry points like any third-party one.
_FIRST_PARTY_DISTRIBUTIONS = {
    "triton": "helion-triton",
    "pallas": "helion-pallas",
    "cute": "helion-cute",
}


@dataclasses.dataclass
class _Registry:
    generation: int
    backends: dict[str, Backend] = dataclasses.field(default_factory=dict)
    providers: dict[str, plugins.PluginInfo] = dataclasses.field(default_factory=dict)
    conflicts: dict[str, list[plugins.PluginInfo]] = dataclasses.field(default_factory=dict)
    problems: list[str] = dataclasses.field(default_factory=list)
    availability: dict[str, tuple[bool, str]] = dataclasses.field(default_factory=dict)


_registry: _Registry | None = None
_registry_lock = threading.RLock()


def get_backend(name: str, *, require_available: bool = True) -> Backend:
    """Return the installed backend called ``name``.

    Args:
        name: A backend name such as ``"ref"`` or ``"triton"``.
        require_available: When true (the default), a backend that is installed but cannot run
            here (see ``Backend.is_available``) is an error too.

    Returns:
        The backend object.

    Raises:
        helion.exc.UnknownBackend: No installed plugin provides ``name`` and it is neither a
            first-party backend nor the name of a plugin that failed to load (a misspelt name).
            A subclass of ``BackendUnavailable``.
        helion.exc.BackendUnavailable: No plugin provides ``name``, two plugins do, or it is
            unavailable. The message names the backend, the reason, and what to install.
    """
    from helion import exc

    registry = _current_registry()
    if name in registry.conflicts:
        providers = ", ".join(_describe_plugin(info) for info in registry.conflicts[name])
        raise exc.BackendUnavailable(
            name,
            f"it is provided by more than one plugin ({providers})",
            hint="Uninstall all but one of them; `helion plugins` lists what is installed.",
        )
    backend = registry.backends.get(name)
    if backend is None:
        raise _not_installed_error(name, registry)
    if require_available:
        available, reason = _availability(registry, name)
        if not available:
            provider = _describe_plugin(registry.providers[name])
            raise exc.BackendUnavailable(name, f"{reason} (installed from {provider})")
    return backend


def list_backends() -> list[Backend]:
    """Return every installed backend, available or not, in plugin registration order.

    Names claimed by more than one plugin are left out; see :func:`backend_problems`.
    """
    return list(_current_registry().backends.values())


def backend_availability(name: str) -> tuple[bool, str]:
    """Return ``Backend.is_available()`` of backend ``name``, computed once per registry.

    Raises:
        helion.exc.BackendUnavailable: No (unique) backend of that name is installed.
    """
    registry = _current_registry()
    if name not in registry.backends:
        get_backend(name, require_available=False)  # raises the explanatory error
    return _availability(registry, name)


def backend_provider(name: str) -> plugins.PluginInfo | None:
    """Return the plugin that registered backend ``name``, or None if there is none."""
    return _current_registry().providers.get(name)


def backend_problems() -> list[str]:
    """Return messages about backend registrations that were rejected.

    These are backend names claimed by several plugins and hook results that are not
    ``Backend`` objects. Exceptions raised by the hooks are in ``helion.plugins.load_failures()``.
    """
    registry = _current_registry()
    conflicts = [
        f"backend {name!r} is provided by more than one plugin: "
        + ", ".join(_describe_plugin(info) for info in infos)
        for name, infos in registry.conflicts.items()
    ]
    return conflicts + list(registry.problems)


def default_backend_name() -> str:
    """Return the backend used when none is chosen: ``"triton"`` when usable, else ``"ref"``.

    ``HELION_BACKEND`` (read by ``helion.runtime.settings``) takes precedence over this.
    """
    registry = _current_registry()
    if PREFERRED_BACKEND_NAME in registry.backends:
        available, _ = _availability(registry, PREFERRED_BACKEND_NAME)
        if available:
            return PREFERRED_BACKEND_NAME
    return REF_BACKEND_NAME


def _current_registry() -> _Registry:
    global _registry
    registry = _registry
    if registry is not None and registry.generation == plugins.generation():
        return registry
    with _registry_lock:
        # Building the manager changes the generation, so build it before reading the counter.
        plugins.get_plugin_manager()
        current_generation = plugins.generation()
        if _registry is None or _registry.generation != current_generation:
            _registry = _build_registry(current_generation)
        return _registry


def _build_registry(generation: int) -> _Registry:
    registry = _Registry(generation=generation)
    for result in plugins.call_each_plugin("helion_backends"):
        plugin = _describe_plugin(result.plugin)
        if not isinstance(result.value, (list, tuple)):
            registry.problems.append(
                f"{plugin}: helion_backends() must return a list of Backend objects, "
                f"got {type(result.value).__name__}"
            )
            continue
        for backend in result.value:
            _add_backend(registry, backend, result.plugin)
    return registry


def _add_backend(registry: _Registry, backend: object, provider: plugins.PluginInfo) -> None:
    plugin = _describe_plugin(provider)
    if not isinstance(backend, Backend):
        registry.problems.append(
            f"{plugin}: helion_backends() returned {backend!r}, which is not an instance of "
            "helion.backends.base.Backend"
        )
        return
    name = getattr(backend, "name", None)
    if not isinstance(name, str) or not name:
        registry.problems.append(f"{plugin}: backend {backend!r} has no valid `name`")
        return
    if name in registry.conflicts:
        registry.conflicts[name].append(provider)
        return
    if name in registry.backends:
        # Neither claimant wins: picking one silently would depend on install order.
        registry.conflicts[name] = [registry.providers.pop(name), provider]
        del registry.backends[name]
        return
    registry.backends[name] = backend
    registry.providers[name] = provider


def _availability(registry: _Registry, name: str) -> tuple[bool, str]:
    cached = registry.availability.get(name)
    if cached is not None:
        return cached
    try:
        available, reason = registry.backends[name].is_available()
    except Exception as error:
        available, reason = False, f"is_available() raised {error!r}"
    result = (bool(available), str(reason))
    registry.availability[name] = result
    return result


def _not_installed_error(name: str, registry: _Registry) -> Exception:
    from helion import exc

    installed = ", ".join(sorted(registry.backends)) or "none"
    distribution = _FIRST_PARTY_DISTRIBUTIONS.get(name)
    failures = plugins.load_failures()
    related = [
        failure
        for failure in failures
        if failure.plugin == name
        or (distribution and failure.distribution == distribution)
        or (name == REF_BACKEND_NAME and failure.plugin == plugins.manager.CORE_PLUGIN_NAME)
    ]
    # neither first-party nor a plugin that failed to load: most likely a misspelt name
    unknown = name != REF_BACKEND_NAME and distribution is None and not related
    if name == REF_BACKEND_NAME:
        reason = "the built-in backend could not be created"
    elif distribution is not None:
        reason = f"it is not installed (it is provided by {distribution})"
    elif unknown:
        first_party = ", ".join(sorted({REF_BACKEND_NAME, *_FIRST_PARTY_DISTRIBUTIONS}))
        reason = (
            f"no installed plugin provides it, and it is not a first-party backend ({first_party})"
        )
    else:
        reason = "no installed plugin provides it"
    lines = [f"{reason}; installed backends: {installed}."]
    # A plugin that failed to load is the likeliest cause, so say so in the error itself.
    for failure in related or failures:
        lines.append(f"Note: {failure.describe()}")
    reason_text = "\n".join(lines)
    if name == REF_BACKEND_NAME:
        return exc.BackendUnavailable(name, reason_text)
    if distribution is not None:
        return exc.BackendUnavailable(name, reason_text, distribution)
    hint = (
        "Install the package that provides it; backends register a plugin in the "
        f"{plugins.ENTRY_POINT_GROUP!r} entry-point group (see `helion plugins`)."
    )
    if unknown:
        return exc.UnknownBackend(name, reason_text, hint=f"Check the name's spelling. {hint}")
    return exc.BackendUnavailable(name, reason_text, hint=hint)


def _describe_plugin(info: plugins.PluginInfo) -> str:
    if info.distribution is None:
        return f"plugin {info.name!r}"
    version = f" {info.version}" if info.version else ""
    return f"plugin {info.name!r} of {info.distribution}{version}"
