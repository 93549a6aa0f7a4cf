"""Public Helion's autotuner objects, for ``Settings.autotuner_fn``.

``autotuner_fn(bound_kernel, args, **options)`` returns an autotuner: an object whose
``autotune()`` returns the config. The pieces public Helion builds one from:

* a search made from the bound kernel, ``PatternSearch(bound_kernel, args, **options)`` (every
  search class takes this form besides its ``(config_spec, evaluator)`` one): its
  ``autotune()`` tunes with that search, without the on-disk cache;
* :class:`LocalAutotuneCache` around it: the same, through the on-disk cache (a hit is
  returned without tuning, a tuning is stored); :class:`StrictLocalAutotuneCache` also keys
  the entry on the Helion sources;
* :func:`default_autotuner_fn`: what the kernel does without an ``autotuner_fn`` (the
  settings' search, through the cache).
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING
from typing import Any
from typing import Sequence

from helion.autotuner.search import BaseSearch
from helion.autotuner.search import DifferentialEvolutionSearch
from helion.autotuner.search import FiniteSearch
from helion.autotuner.search import PatternSearch
from helion.autotuner.search import RandomSearch
from helion.autotuner.search import SurrogateSearch

if TYPE_CHECKING:
    from helion.runtime.config import Config


class BaseAutotuner(abc.ABC):
    """What ``Settings.autotuner_fn`` returns: ``autotune()`` gives the config to run."""

    @abc.abstractmethod
    def autotune(self, *, skip_cache: bool = False) -> Config:
        """The config the kernel should run with."""


BaseAutotuner.register(BaseSearch)


class LocalAutotuneCache(BaseAutotuner):
    """``LocalAutotuneCache(search)``: ``autotune()`` returns the config cached on disk for the
    search's bound kernel and arguments, else tunes with ``search`` and stores the winner
    (``helion.autotuner.autotune`` with that search: the same entry, lock and warm start).

    Args:
        autotuner: a search made from a bound kernel, ``PatternSearch(bound_kernel, args,
            **options)``.
    """

    strict = False

    def __init__(self, autotuner: BaseSearch) -> None:
        if not isinstance(autotuner, BaseSearch) or autotuner.bound is None:
            raise TypeError(
                f"{type(self).__name__}(search) takes a search made from a bound kernel, e.g. "
                f"{type(self).__name__}(PatternSearch(bound_kernel, args)); got "
                f"{_describe(autotuner)}"
            )
        self.autotuner = autotuner
        self.kernel = autotuner.bound
        self.args = autotuner.args

    def autotune(self, *, skip_cache: bool = False) -> Config:
        """The cached config, else the search's winner (stored). ``skip_cache=True`` (or
        ``force_autotune``) tunes even on a hit, and stores the new result."""
        return self.autotuner._tune_bound(
            use_cache=True, force=bool(skip_cache), strict_cache=self.strict
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.autotuner).__name__}(...))"


class StrictLocalAutotuneCache(LocalAutotuneCache):
    """:class:`LocalAutotuneCache` whose entries are also keyed on the content of the installed
    Helion sources (``autotune_cache="StrictLocalAutotuneCache"``)."""

    strict = True


# public Helion's search names: ours closest to each (as HELION_AUTOTUNER already maps them).
# The surrogate search fits a tree model (a random forest) to the measured times and picks
# its next batch from model-ranked candidates and the leaders' one-step neighbours, as LFBO's
# tree search and pattern search do; DESurrogateHybrid is mapped there by HELION_AUTOTUNER too.
LFBOTreeSearch = SurrogateSearch
LFBOPatternSearch = SurrogateSearch
DESurrogateHybrid = SurrogateSearch


def default_autotuner_fn(bound_kernel: Any, args: Sequence[Any], **options: Any) -> BaseAutotuner:
    """The autotuner a kernel uses without ``autotuner_fn``: the search of its settings
    (``autotune_search``, else the effort's default, the surrogate search) made from
    ``bound_kernel`` and ``args`` with ``options``, in a :class:`LocalAutotuneCache`
    (:class:`StrictLocalAutotuneCache` with ``autotune_cache="StrictLocalAutotuneCache"``)."""
    from helion.autotuner import driver
    from helion.autotuner.cache import STRICT_CACHES
    from helion.autotuner.effort import normalize_effort

    settings = bound_kernel.settings
    effort = normalize_effort(getattr(settings, "autotune_effort", "full"))
    search_cls = driver._search_class(None, settings, effort)
    search = search_cls(bound_kernel, args, **options)
    if getattr(settings, "autotune_cache", None) in STRICT_CACHES:
        return StrictLocalAutotuneCache(search)
    return LocalAutotuneCache(search)


def _describe(value: object) -> str:
    if isinstance(value, BaseSearch):
        return f"a {type(value).__name__} made from (config_spec, evaluator)"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    return f"a {type(value).__name__}"


__all__ = [
    "BaseAutotuner",
    "DESurrogateHybrid",
    "DifferentialEvolutionSearch",
    "FiniteSearch",
    "LFBOPatternSearch",
    "LFBOTreeSearch",
    "LocalAutotuneCache",
    "PatternSearch",
    "RandomSearch",
    "StrictLocalAutotuneCache",
    "default_autotuner_fn",
]
