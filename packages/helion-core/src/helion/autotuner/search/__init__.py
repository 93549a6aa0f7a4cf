"""Search algorithms and their registry.

Built-ins: ``surrogate`` (default), ``pattern``, ``differential_evolution``, ``random``, ``finite``.
More come from ``register_search`` and from plugins' ``helion_search_algorithms()`` hook, which
returns ``{name: BaseSearch subclass}``; a plugin name replaces a built-in of the same name.
Lookup accepts the registry name, the class name (``PatternSearch``) and public Helion's names
(``LFBOTreeSearch`` -> surrogate).
"""

from __future__ import annotations

import logging
from typing import Callable
from typing import TypeVar

from helion.autotuner.search.base import BaseSearch
from helion.autotuner.search.base import BudgetExhausted
from helion.autotuner.search.base import CallableEvaluator
from helion.autotuner.search.base import Evaluator
from helion.autotuner.search.base import Trial
from helion.autotuner.search.base import config_key
from helion.autotuner.search.differential_evolution import DifferentialEvolutionSearch
from helion.autotuner.search.finite import FiniteSearch
from helion.autotuner.search.forest import RandomForestRegressor
from helion.autotuner.search.pattern_search import PatternSearch
from helion.autotuner.search.random_search import RandomSearch
from helion.autotuner.search.surrogate import SurrogateSearch

log = logging.getLogger("helion.autotuner")

BUILTIN_SEARCHES: dict[str, type[BaseSearch]] = {
    cls.name: cls
    for cls in (
        SurrogateSearch,
        PatternSearch,
        DifferentialEvolutionSearch,
        RandomSearch,
        FiniteSearch,
    )
}

# spellings used by public Helion (HELION_AUTOTUNER=...) and common shorthands
SEARCH_ALIASES = {
    "lfbotreesearch": "surrogate",
    "lfbopatternsearch": "surrogate",
    "desurrogatehybrid": "surrogate",
    "default": "surrogate",
    "de": "differential_evolution",
    "differentialevolution": "differential_evolution",
}

_registered: dict[str, type[BaseSearch]] = {}

S = TypeVar("S", bound=type)


def register_search(
    name: str, cls: type[BaseSearch] | None = None
) -> Callable[[S], S] | type[BaseSearch]:
    """Register a search under ``name``; usable as ``register_search("x", Cls)`` or as a decorator."""

    def add(search_cls: S) -> S:
        if not (isinstance(search_cls, type) and issubclass(search_cls, BaseSearch)):
            raise TypeError(f"search {name!r} must be a BaseSearch subclass, got {search_cls!r}")
        _registered[name] = search_cls
        return search_cls

    if cls is not None:
        return add(cls)
    return add


def _plugin_searches() -> dict[str, type[BaseSearch]]:
    found: dict[str, type[BaseSearch]] = {}
    try:
        from helion import plugins

        if hasattr(plugins, "call_each_plugin"):
            # one plugin whose hook raises must not hide the others' searches
            results = [r.value for r in plugins.call_each_plugin("helion_search_algorithms")]
        else:
            results = plugins.get_plugin_manager().hook.helion_search_algorithms()
    except Exception as error:  # no plugin manager in this installation, or it failed to load
        log.debug("no plugin search algorithms: %s", error)
        return found
    for result in results or ():
        if not result:
            continue
        for name, cls in dict(result).items():
            if isinstance(cls, type) and issubclass(cls, BaseSearch):
                found[str(name)] = cls
            else:
                log.warning(
                    "plugin search %r is not a helion.autotuner.BaseSearch subclass; ignored", name
                )
    return found


def search_algorithms() -> dict[str, type[BaseSearch]]:
    """Every search by name: built-ins, then registered, then plugins (later ones win)."""
    merged = dict(BUILTIN_SEARCHES)
    merged.update(_registered)
    merged.update(_plugin_searches())
    return merged


def get_search(name: str | type[BaseSearch] | None) -> type[BaseSearch]:
    if name is None:
        return SurrogateSearch
    if isinstance(name, type):
        if issubclass(name, BaseSearch):
            return name
        raise TypeError(f"{name!r} is not a BaseSearch subclass")
    available = search_algorithms()
    wanted = str(name).strip()
    if wanted in available:
        return available[wanted]
    folded = wanted.lower().replace("-", "_")
    folded = SEARCH_ALIASES.get(folded.replace("_", ""), SEARCH_ALIASES.get(folded, folded))
    for key, cls in available.items():
        if folded in (
            key.lower(),
            cls.__name__.lower(),
            cls.__name__.lower().removesuffix("search"),
        ):
            return cls
    raise ValueError(f"unknown autotune search {name!r}; available: {', '.join(sorted(available))}")


__all__ = [
    "BUILTIN_SEARCHES",
    "BaseSearch",
    "BudgetExhausted",
    "CallableEvaluator",
    "DifferentialEvolutionSearch",
    "Evaluator",
    "FiniteSearch",
    "PatternSearch",
    "RandomForestRegressor",
    "RandomSearch",
    "SurrogateSearch",
    "Trial",
    "config_key",
    "get_search",
    "register_search",
    "search_algorithms",
]
