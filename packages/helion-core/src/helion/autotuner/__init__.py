"""The autotuner: backend-agnostic search over a kernel's ConfigSpec.

Entry point::

    config = helion.autotuner.autotune(bound_kernel, args)              # cached, effort from settings
    config = helion.autotuner.autotune(bound, args, effort="quick", force=True)
    config = helion.autotuner.autotune(bound, args, configs=[cfg_a, cfg_b])   # pick the faster

Public Helion's form also works: ``autotuner_fn=lambda bound, args, **kw: PatternSearch(bound,
args, max_generations=1)`` (every search takes ``(bound_kernel, args, **options)`` and has
``autotune()``), ``LocalAutotuneCache(search)``, ``default_autotuner_fn`` (:mod:`.autotuner_fn`).

Pieces: :mod:`.search` (surrogate -- the default --, pattern, differential evolution, random,
finite; ``register_search`` and the ``helion_search_algorithms`` plugin hook add more),
:mod:`.benchmarking` (isolated precompile, accuracy check, timing, rebenchmarking),
:mod:`.cache` (on-disk results), :mod:`.effort` (quick/full profiles), :mod:`.progress`.

Names are imported lazily, so importing ``helion.autotuner.config_spec`` (which runs this file)
stays cheap and does not depend on the rest of the autotuner.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING
from typing import Any

_LAZY: dict[str, tuple[str, str]] = {
    # search space (fragments and spec)
    "ConfigSpecFragment": (".config_fragment", "ConfigSpecFragment"),
    "PowerOfTwoFragment": (".config_fragment", "PowerOfTwoFragment"),
    "IntegerFragment": (".config_fragment", "IntegerFragment"),
    "EnumFragment": (".config_fragment", "EnumFragment"),
    "BooleanFragment": (".config_fragment", "BooleanFragment"),
    "ListOf": (".config_fragment", "ListOf"),
    "PermutationFragment": (".config_fragment", "PermutationFragment"),
    "BlockSizeFragment": (".config_fragment", "BlockSizeFragment"),
    "ReductionLoopFragment": (".config_fragment", "ReductionLoopFragment"),
    "NumThreadsFragment": (".config_fragment", "NumThreadsFragment"),
    "ConfigSpec": (".config_spec", "ConfigSpec"),
    # driver
    "autotune": (".driver", "autotune"),
    "autotune_multi": (".multi", "autotune_multi"),
    "from_cache": (".from_cache", "from_cache"),
    "CachedFiniteSearch": (".from_cache", "CachedFiniteSearch"),
    # searches
    "BaseSearch": (".search", "BaseSearch"),
    "SurrogateSearch": (".search", "SurrogateSearch"),
    "PatternSearch": (".search", "PatternSearch"),
    "DifferentialEvolutionSearch": (".search", "DifferentialEvolutionSearch"),
    "RandomSearch": (".search", "RandomSearch"),
    "FiniteSearch": (".search", "FiniteSearch"),
    "CallableEvaluator": (".search", "CallableEvaluator"),
    "register_search": (".search", "register_search"),
    "search_algorithms": (".search", "search_algorithms"),
    "get_search": (".search", "get_search"),
    # public Helion's autotuner objects (autotuner_fn): searches made from a bound kernel
    "BaseAutotuner": (".autotuner_fn", "BaseAutotuner"),
    "LocalAutotuneCache": (".autotuner_fn", "LocalAutotuneCache"),
    "StrictLocalAutotuneCache": (".autotuner_fn", "StrictLocalAutotuneCache"),
    "default_autotuner_fn": (".autotuner_fn", "default_autotuner_fn"),
    "LFBOTreeSearch": (".autotuner_fn", "LFBOTreeSearch"),
    "LFBOPatternSearch": (".autotuner_fn", "LFBOPatternSearch"),
    "DESurrogateHybrid": (".autotuner_fn", "DESurrogateHybrid"),
    # harness, cache, effort
    "BenchmarkHarness": (".benchmarking", "BenchmarkHarness"),
    "CandidateResult": (".benchmarking", "CandidateResult"),
    "do_bench": (".benchmarking", "do_bench"),
    "AutotuneCache": (".cache", "AutotuneCache"),
    "list_entries": (".cache", "list_entries"),
    "clear_cache": (".cache", "clear"),
    "EffortProfile": (".effort", "EffortProfile"),
    "get_effort_profile": (".effort", "get_effort_profile"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'helion.autotuner' has no attribute {name!r}")
    module = importlib.import_module(target[0], __name__)
    value = getattr(module, target[1])
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:
    from helion.autotuner.autotuner_fn import BaseAutotuner as BaseAutotuner
    from helion.autotuner.autotuner_fn import DESurrogateHybrid as DESurrogateHybrid
    from helion.autotuner.autotuner_fn import LFBOPatternSearch as LFBOPatternSearch
    from helion.autotuner.autotuner_fn import LFBOTreeSearch as LFBOTreeSearch
    from helion.autotuner.autotuner_fn import LocalAutotuneCache as LocalAutotuneCache
    from helion.autotuner.autotuner_fn import StrictLocalAutotuneCache as StrictLocalAutotuneCache
    from helion.autotuner.autotuner_fn import default_autotuner_fn as default_autotuner_fn
    from helion.autotuner.benchmarking import BenchmarkHarness as BenchmarkHarness
    from helion.autotuner.benchmarking import CandidateResult as CandidateResult
    from helion.autotuner.benchmarking import do_bench as do_bench
    from helion.autotuner.cache import AutotuneCache as AutotuneCache
    from helion.autotuner.cache import clear as clear_cache  # noqa: F401
    from helion.autotuner.cache import list_entries as list_entries
    from helion.autotuner.config_fragment import BlockSizeFragment as BlockSizeFragment
    from helion.autotuner.config_fragment import BooleanFragment as BooleanFragment
    from helion.autotuner.config_fragment import ConfigSpecFragment as ConfigSpecFragment
    from helion.autotuner.config_fragment import EnumFragment as EnumFragment
    from helion.autotuner.config_fragment import IntegerFragment as IntegerFragment
    from helion.autotuner.config_fragment import ListOf as ListOf
    from helion.autotuner.config_fragment import NumThreadsFragment as NumThreadsFragment
    from helion.autotuner.config_fragment import PermutationFragment as PermutationFragment
    from helion.autotuner.config_fragment import PowerOfTwoFragment as PowerOfTwoFragment
    from helion.autotuner.config_fragment import ReductionLoopFragment as ReductionLoopFragment
    from helion.autotuner.config_spec import ConfigSpec as ConfigSpec
    from helion.autotuner.driver import autotune as autotune
    from helion.autotuner.effort import EffortProfile as EffortProfile
    from helion.autotuner.effort import get_effort_profile as get_effort_profile
    from helion.autotuner.from_cache import CachedFiniteSearch as CachedFiniteSearch
    from helion.autotuner.from_cache import from_cache as from_cache
    from helion.autotuner.multi import autotune_multi as autotune_multi
    from helion.autotuner.search import BaseSearch as BaseSearch
    from helion.autotuner.search import CallableEvaluator as CallableEvaluator
    from helion.autotuner.search import DifferentialEvolutionSearch as DifferentialEvolutionSearch
    from helion.autotuner.search import FiniteSearch as FiniteSearch
    from helion.autotuner.search import PatternSearch as PatternSearch
    from helion.autotuner.search import RandomSearch as RandomSearch
    from helion.autotuner.search import SurrogateSearch as SurrogateSearch
    from helion.autotuner.search import get_search as get_search
    from helion.autotuner.search import register_search as register_search
    from helion.autotuner.search import search_algorithms as search_algorithms
