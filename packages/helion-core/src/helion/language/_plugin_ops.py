"""Language ops contributed by plugins through the `helion_language_ops` hook.

A plugin op is an object with a `name` attribute that is callable (the public function). Names
that a known distribution provides but that are not installed get an error saying what to install.
"""

from __future__ import annotations

from typing import Any

# ops we know a first-party distribution provides, for a helpful error when it is missing
KNOWN_PROVIDERS = {
    name: "helion-distributed"
    for name in (
        "signal",
        "wait",
        "peer_barrier",
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "peer_tensors",
        "signal_pads",
        "symm_mem",
        "make_async_remote_copy",
        "remote_barrier",
        "AsyncCopyDescriptor",
    )
}

_cache: dict[str, Any] | None = None
_cache_generation = -1


def _plugin_ops() -> dict[str, Any]:
    global _cache, _cache_generation
    from helion import plugins

    if _cache is None or _cache_generation != plugins.generation():
        ops: dict[str, Any] = {}
        # one raising plugin is recorded in load_failures() and does not hide the others' ops
        for result in plugins.call_each_plugin("helion_language_ops"):
            for op in result.value or ():
                name = getattr(op, "name", None) or op.__name__
                if name in ops:
                    raise ValueError(f"language op hl.{name} is provided by two plugins")
                ops[name] = op
        _cache = ops
        _cache_generation = plugins.generation()
    return _cache


def reset_plugin_ops() -> None:
    global _cache
    _cache = None


def plugin_op(name: str) -> Any:
    if name.startswith("_"):
        # private names (submodules mid-import, dunders) never trigger plugin discovery
        raise AttributeError(f"module 'helion.language' has no attribute {name!r}")
    ops = _plugin_ops()
    if name in ops:
        return ops[name]
    if name in KNOWN_PROVIDERS:
        from helion import exc

        raise exc.PluginOpNotInstalled(f"hl.{name}", KNOWN_PROVIDERS[name])
    raise AttributeError(f"module 'helion.language' has no attribute {name!r}")
