"""``helion.from_cache``: tune by trying only the configs already cached for a kernel.

``from_cache()`` returns an ``autotuner_fn`` (the ``Settings.autotuner_fn`` hook). For a new
specialization of a kernel (a new shape, a new device) it builds a :class:`CachedFiniteSearch`,
which benchmarks the best configs cached for the same kernel source -- every other
specialization and device, newest first -- plus the configs the caller gave, and returns the
fastest. It is a finite search: no config outside that list is tried, so it costs a handful of
runs instead of a search. With nothing to try it returns the default config (and logs why).
The result is not written to the cache (like ``configs=[...]``, the choice is the list's).
"""

from __future__ import annotations

from typing import Any
from typing import Callable
from typing import Iterable
from typing import Mapping

from helion.autotuner.progress import AutotuneLog


class CachedFiniteSearch:
    """The autotuner ``from_cache`` makes: ``autotune()`` returns the fastest candidate.

    Args:
        bound: the bound kernel to tune.
        args: its arguments (cloned by the benchmark, never modified).
        max_configs: at most this many cached configs, the most recent first (None: all).
        configs: configs tried in addition to the cached ones.
        **options: passed to the finite search (``budget_seconds=``).
    """

    def __init__(
        self,
        bound: Any,
        args: Iterable[Any],
        *,
        max_configs: int | None = None,
        configs: Iterable[Any] = (),
        **options: Any,
    ) -> None:
        self.bound = bound
        self.args = tuple(args)
        self.max_configs = max_configs
        self.extra_configs = list(configs)
        self.options = options
        self.settings = bound.settings
        self.kernel_name = str(getattr(getattr(bound, "kernel", None), "name", None) or "kernel")
        self.log = AutotuneLog(self.settings, kernel_name=self.kernel_name)

    def cached_configs(self) -> list[Any]:
        """Configs cached for this kernel's source that fit this specialization."""
        from helion.autotuner.cache import AutotuneCache

        try:
            cache = AutotuneCache(self.bound, settings=self.settings)
        except Exception as error:
            self.log.debug("%s: no autotune cache to read (%s)", self.kernel_name, error)
            return []
        scan = int(getattr(self.settings, "autotune_best_available_max_cache_scan", 500) or 500)
        return cache.kernel_configs(limit=self.max_configs, max_scan=scan)

    def candidates(self) -> list[Any]:
        """Cached configs (newest first), then the given ones; normalized for this kernel,
        without duplicates. A given config that does not fit is an InvalidConfig error."""
        from helion.autotuner.search.base import config_key
        from helion.autotuner.search.base import make_config

        spec = self.bound.config_spec
        found: list[Any] = []
        seen: set[str] = set()
        given = [make_config(c) for c in self.extra_configs]
        for config in [*self.cached_configs(), *given]:
            normalized = spec.normalize(config)
            config = config if normalized is None else normalized
            key = config_key(config)
            if key not in seen:
                seen.add(key)
                found.append(config)
        return found

    def autotune(self) -> Any:
        from helion.autotuner import driver

        candidates = self.candidates()
        if not candidates:
            config = self.bound.config_spec.default_config()
            self.log.info(
                "%s: from_cache found no cached configs for this kernel and was given none; "
                "using the default config %s",
                self.kernel_name,
                config,
            )
            return config
        if len(candidates) == 1:
            self.log.info(
                "%s: from_cache has one config to try, using it: %s",
                self.kernel_name,
                candidates[0],
            )
            return candidates[0]
        self.log.info(
            "%s: from_cache benchmarks %d config(s) (cached for this kernel, and given)",
            self.kernel_name,
            len(candidates),
        )
        with driver._run_log(self.log, self.bound, None):
            return driver._run_finite(
                self.bound, self.args, candidates, self.log, dict(self.options)
            )


def from_cache(
    *, max_configs: int | None = None, configs: Iterable[Mapping[str, Any]] = ()
) -> Callable[..., CachedFiniteSearch]:
    """An ``autotuner_fn`` that tunes a kernel by benchmarking the configs cached for it.

    ``@helion.kernel(autotuner_fn=helion.from_cache())``: a specialization not tuned yet (a new
    shape or device) picks the fastest of the best configs cached for the same kernel source
    (its other specializations and devices, the most recent first) and of ``configs``; with
    none of either, the default config (logged).

    Args:
        max_configs: at most this many cached configs (None: every one found).
        configs: more configs to try (``helion.Config`` or dicts).

    Returns:
        ``autotuner_fn(bound_kernel, args, **options) -> CachedFiniteSearch``.

    Raises:
        ValueError: ``max_configs`` is negative.
        TypeError: ``configs`` is not a list of configs (a lone ``Config`` included).
    """
    if max_configs is not None and (
        isinstance(max_configs, bool) or not isinstance(max_configs, int) or max_configs < 0
    ):
        raise ValueError(f"max_configs must be None or an int >= 0, got {max_configs!r}")
    if isinstance(configs, (Mapping, str, bytes)) or not isinstance(configs, Iterable):
        # a lone Config (a Mapping) would iterate over its keys and fail at the kernel's call
        raise TypeError(
            "from_cache(configs=...) takes a list of configs (helion.Config or dicts), got a "
            f"{type(configs).__name__}; write configs=[config]"
        )
    given = list(configs)
    for position, config in enumerate(given):
        if not isinstance(config, Mapping):
            raise TypeError(
                f"from_cache(configs=...): item {position} is a {type(config).__name__}, not a "
                "helion.Config or a dict"
            )

    def autotuner_fn(bound: Any, args: Iterable[Any], **options: Any) -> CachedFiniteSearch:
        return CachedFiniteSearch(bound, args, max_configs=max_configs, configs=given, **options)

    autotuner_fn.__qualname__ = autotuner_fn.__name__ = "from_cache"
    return autotuner_fn
