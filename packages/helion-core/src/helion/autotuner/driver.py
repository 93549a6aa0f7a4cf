"""``autotune(bound, args)``: from a bound kernel to the config it should run with.

Order of decisions:
1. ``configs=[...]`` given: benchmark exactly those (FiniteSearch; fewer than 2 -> NotEnoughConfigs);
   the result is not cached (the choice is the caller's list, not the kernel's).
2. effort ``none``: the spec's default config, no measuring.
2b. ``settings.autotuner_fn`` set (e.g. ``helion.from_cache()``): its autotuner decides, in
   place of the cache and the search (inside it, ``autotune`` runs the built-in tuner).
3. the on-disk cache, unless ``force`` / ``HELION_FORCE_AUTOTUNE`` / ``HELION_SKIP_CACHE``; a
   cache directory that cannot hold the tuning lock is warned about and tuning goes on without
   the cache.
4. tune: check ``settings.autotune_config_overrides`` against the spec (InvalidConfig naming the
   bad key or value); seeds = default config + backend heuristics (``bound.seed_configs()``) +
   user seeds (``settings.autotune_seed_configs``) + cached configs of the same kernel at other
   shapes when the initial-population strategy is ``from_best_available`` (the default for quick
   effort); run the search within the time budget; store the winner; print the line that
   hard-codes it.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import math
import sys
import time
from typing import Any
from typing import Callable
from typing import Iterable
from typing import Sequence

from helion.autotuner.cache import AutotuneCache
from helion.autotuner.effort import EffortProfile
from helion.autotuner.effort import get_effort_profile
from helion.autotuner.effort import normalize_effort
from helion.autotuner.progress import TIME
from helion.autotuner.progress import AutotuneLog
from helion.autotuner.progress import AutotuneProgress
from helion.autotuner.progress import Score
from helion.autotuner.progress import plot_convergence
from helion.autotuner.progress import report_winner


def autotune(
    bound: Any,
    args: Sequence[Any],
    *,
    force: bool = False,
    effort: str | None = None,
    configs: Iterable[Any] | None = None,
    search: str | type | None = None,
    **options: Any,
) -> Any:
    """Tune ``bound`` for ``args`` and return the winning ``helion.Config``.

    Args:
        bound: a BoundKernel (``config_spec``, ``settings``, ``compile_config``, ``cache_key``, ...).
        args: the kernel arguments to tune with (they are cloned, never modified).
        force: ignore a cached result (the new result is still stored).
        effort: ``none | quick | full`` (``high`` = full); default ``settings.autotune_effort``.
        configs: benchmark exactly these configs instead of searching.
        search: a search name or class; default ``settings.autotune_search`` (``surrogate``).
        **options: passed to the search's constructor (``max_evaluations=``, ``budget_seconds=``,
            ``seed=``, search-specific sizes such as ``initial=`` or ``copies=``).

    Raises:
        helion.exc.InvalidSetting: an option the search does not take (checked before the
            cache is read, so a cache hit does not hide it), or a bad ``max_evaluations``,
            ``budget_seconds`` or ``seed`` (an int >= 0).
        helion.exc.InvalidConfig: an entry of ``configs`` that is not a config of this kernel
            (its position and the reason are named).
    """
    return _autotune(
        bound, args, force=force, effort=effort, configs=configs, search=search, options=options
    )


def _autotune(
    bound: Any,
    args: Sequence[Any],
    *,
    force: bool = False,
    effort: str | None = None,
    configs: Iterable[Any] | None = None,
    search: str | type | None = None,
    options: dict[str, Any],
    use_cache: bool = True,
    use_hook: bool = True,
    strict_cache: bool | None = None,
) -> Any:
    """:func:`autotune`; a search object made from a bound kernel (``PatternSearch(bound,
    args).autotune()``) runs it without the ``autotuner_fn`` hook (``use_hook=False``) and, bare,
    without the on-disk cache (``use_cache=False``); ``LocalAutotuneCache(search)`` keeps the
    cache, and ``StrictLocalAutotuneCache`` keys it on the Helion sources too
    (``strict_cache=True``)."""
    from helion.autotuner.search import FiniteSearch
    from helion.autotuner.search.base import check_option_names
    from helion.autotuner.search.base import check_search_options

    options = dict(options)
    check_search_options(options)  # before any cache or search work
    settings = bound.settings
    name = _kernel_name(bound)
    log = AutotuneLog(settings, kernel_name=name)
    spec = bound.config_spec
    args = tuple(args)

    if configs is not None:
        check_option_names(options, FiniteSearch, exclude=("configs",))
        _check_plugins_allow_tuning(bound, args)
        with _run_log(log, bound, None):
            return _run_finite(bound, args, list(configs), log, options)

    effort_name = normalize_effort(
        effort if effort is not None else getattr(settings, "autotune_effort", "full")
    )
    hook = getattr(settings, "autotuner_fn", None) if use_hook else None
    if hook is not None and _in_autotuner_fn.get():
        hook = None
    if hook is None:
        # a misspelt option is refused now, cache hit or not (the user's autotuner_fn gets
        # the options as they are: they are its own)
        search_cls = _search_class_to_check(search, settings, effort_name)
        if search_cls is not None:
            check_option_names(options, search_cls)
    if effort_name == "none":
        config = _normalized(spec, spec.default_config())
        log.info("%s: autotune_effort='none', using the default config %s", name, config)
        return config

    if hook is not None:
        # the user's autotuner replaces the cache and the search (as public Helion's default
        # autotuner_fn is the one that wraps its search in the cache)
        return _run_autotuner_fn(hook, bound, args, options, force=force)

    force = force or bool(getattr(settings, "force_autotune", False))
    cache = _open_cache(bound, settings, log, strict=strict_cache) if use_cache else None
    if cache is not None and not force:
        hit = cache.get()
        if hit is not None:
            log.debug("%s: using cached config %s (%s)", name, hit, cache.path)
            return hit
        if _assert_cache_hit():
            from helion import exc

            # the error's message points here for the diagnostics
            with contextlib.suppress(Exception):
                print(cache.miss_report(), file=sys.stderr, flush=True)
            raise exc.CacheAssertionError(name)
    _check_plugins_allow_tuning(bound, args)
    check = getattr(settings, "check_autotuning_disabled", None)
    if check is not None:
        check()

    with contextlib.ExitStack() as lock:
        if cache is not None and not _distributed():
            try:
                lock.enter_context(
                    cache.tuning_lock(
                        on_wait=lambda: log.info(
                            "%s: another process is tuning this kernel; waiting for its result",
                            name,
                        )
                    )
                )
            except OSError as error:
                # the directory cannot hold a lock file, so it cannot hold the entry either
                _warn_cache_unusable(log, name, cache, error)
                cache = None
        if cache is not None and not force:
            hit = cache.get()  # written by the process we waited for
            if hit is not None:
                log.info("%s: reusing the config another process just tuned: %s", name, hit)
                return hit
        with _run_log(log, bound, cache):
            winner, tuned = _tune(bound, args, effort_name, search, cache, log, options)
        if cache is not None:
            try:
                cache.put(
                    winner,
                    time_ms=tuned.best_time,
                    search=tuned.name,
                    effort=effort_name,
                    seed=tuned.seed,
                    evaluations=tuned.evaluations,
                    tuning_seconds=round(tuned.elapsed(), 3),
                )
            except OSError as error:
                log.warning("%s: could not write the autotune cache (%s)", name, error)
    return winner


def _search_class_to_check(
    search: str | type | None, settings: Any, effort_name: str
) -> type | None:
    """:func:`_search_class`, for checking option names before the cache is read: a search
    named by the settings that cannot be found here (a plugin's, not installed) is None, so
    a cache hit still needs no search; ``search=`` that cannot be found raises now."""
    if search is not None:
        return _search_class(search, settings, effort_name)
    try:
        return _search_class(None, settings, effort_name)
    except (ValueError, TypeError):
        return None


def _search_class(search: str | type | None, settings: Any, effort_name: str) -> type:
    """The search class a tuning of ``effort_name`` runs: ``search=``, else
    ``settings.autotune_search``, else the effort profile's default."""
    from helion.autotuner.search import get_search

    return get_search(
        search
        or getattr(settings, "autotune_search", None)
        or get_effort_profile(effort_name).default_search
    )


# ------------------------------------------------------------------------------------ hook
# set while settings.autotuner_fn runs: an autotuner that calls autotune() itself (to tune the
# usual way after all) gets the built-in tuner, not itself again
_in_autotuner_fn: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "helion_in_autotuner_fn", default=False
)


def _run_autotuner_fn(
    hook: Callable[..., Any],
    bound: Any,
    args: tuple[Any, ...],
    options: dict[str, Any],
    force: bool = False,
) -> Any:
    """``settings.autotuner_fn(bound, args, **options).autotune()``, normalized for ``bound``.

    The hook may also return a config itself (a ``helion.Config`` or a dict of its entries).
    An autotuner whose ``autotune`` takes ``skip_cache`` (public Helion's signature, e.g.
    ``LocalAutotuneCache``) gets ``skip_cache=force``."""
    from collections.abc import Mapping

    token = _in_autotuner_fn.set(True)
    try:
        tuner = hook(bound, args, **options)
        method = getattr(tuner, "autotune", None)
        if isinstance(tuner, Mapping):
            config = tuner
        elif callable(method) and not isinstance(tuner, type):
            config = method(skip_cache=force) if _takes_skip_cache(method) else method()
        else:
            raise TypeError(
                f"settings.autotuner_fn {_hook_name(hook)} returned {_describe_value(tuner)} for "
                f"kernel {_kernel_name(bound)!r}: it must return an autotuner, an object whose "
                "autotune() returns a helion.Config (e.g. helion.autotuner.LocalAutotuneCache("
                "PatternSearch(bound_kernel, args)), or PatternSearch(bound_kernel, args)), or "
                "a helion.Config"
            )
    finally:
        _in_autotuner_fn.reset(token)
    if not isinstance(config, Mapping):
        raise TypeError(
            f"settings.autotuner_fn {_hook_name(hook)}: the autotune() of "
            f"{_describe_value(tuner)} returned {_describe_value(config)} for kernel "
            f"{_kernel_name(bound)!r}; it must return a helion.Config"
        )
    return _normalized(bound.config_spec, _as_config(config))


def _takes_skip_cache(method: Callable[..., Any]) -> bool:
    import inspect

    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return "skip_cache" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def _hook_name(hook: Any) -> str:
    return getattr(hook, "__qualname__", None) or repr(hook)


def _describe_value(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _as_config(value: Any) -> Any:
    from helion.runtime.config import Config

    return value if isinstance(value, Config) else Config(**dict(value))


# ------------------------------------------------------------------------------------ tune
def _tune(
    bound: Any,
    args: tuple[Any, ...],
    effort_name: str,
    search: str | type | None,
    cache: AutotuneCache | None,
    log: AutotuneLog,
    options: dict[str, Any],
    *,
    space: Any = None,
    seeds: list[Any] | None = None,
    config_filter: Callable[[Any], Any] | bool | None = True,
    make_evaluator: Callable[[EffortProfile, AutotuneProgress], Any] | None = None,
    score: Score = TIME,
) -> tuple[Any, Any]:
    """Search ``bound``'s config space with ``args``. ``autotune_multi`` passes the rest: the
    shared ``space``, the ``seeds`` of every argument set, their combined ``config_filter``
    (``True``: the bound kernel's own), an evaluator that measures every set (and records each
    config's score in the progress it is given), and what that score is (for the progress
    display and the final line)."""
    from helion.autotuner.benchmarking import BenchmarkHarness
    from helion.autotuner.search import get_search
    from helion.autotuner.search_space import SearchSpaceReport

    settings = bound.settings
    name = _kernel_name(bound)
    space = bound.config_spec if space is None else space
    overrides = _checked_overrides(bound, settings, space)
    profile = _profile_for(effort_name, settings)
    search_cls = get_search(
        search or getattr(settings, "autotune_search", None) or profile.default_search
    )
    options = dict(options)
    seed = options.pop("seed", None)
    if seed is None:
        seed = getattr(settings, "autotune_random_seed", None)
    if seeds is None:
        seeds = _seed_configs(bound, settings, cache, effort_name, profile, log)
    if config_filter is True:
        config_filter = _candidate_filter(bound, settings, log)
    report = SearchSpaceReport(settings, log, name)
    report.start(space, search=search_cls.name, effort=effort_name)
    repeats = max(1, int(getattr(settings, "autotune_best_of_k", 1) or 1))
    cap = int(options.get("max_evaluations", profile.max_evaluations))
    # what the search will obey: budget_seconds= passed to autotune() beats the profile's
    budget = options.get("budget_seconds", profile.budget_seconds)
    progress_enabled = bool(getattr(settings, "autotune_progress_bar", True))
    log.info(
        "%s: autotuning with the %s search (effort %s, seed %s, up to %d configs%s)",
        name,
        search_cls.name,
        effort_name,
        seed,
        cap,
        f", {float(budget):g}s budget" if budget is not None else "",
    )
    best = None
    progress = AutotuneProgress(
        log,
        kernel_name=name,
        total=cap * repeats,
        enabled=progress_enabled,
        score=score,
    )
    if make_evaluator is None:
        harness = BenchmarkHarness(
            bound, args, settings=settings, profile=profile, log=log, progress=progress
        )
    else:
        harness = make_evaluator(profile, progress)
    measured: list[Any] = []
    with progress, harness:
        # an option given to `autotune(args, max_generations=...)` wins over the setting
        search_options = {
            "max_generations": getattr(settings, "autotune_max_generations", None),
            **options,
        }
        for attempt in range(repeats):
            if budget is not None:
                # autotune_best_of_k searches share the one wall-clock budget evenly
                left = float(budget) - (time.perf_counter() - progress.start)
                if left <= 0 and best is not None:
                    break
                search_options["budget_seconds"] = max(left, 1e-3) / (repeats - attempt)
            searcher = search_cls(
                space,
                harness,
                profile=profile,
                seed=None if seed is None else int(seed) + attempt,
                seed_configs=seeds,
                config_overrides=overrides,
                config_filter=config_filter,
                **search_options,
            )
            try:
                searcher.run()
            except Exception as error:
                _raise_with_failures(error, harness)
            finally:
                measured.extend(trial.config for trial in searcher.history)
            if best is None or searcher.best_time < best.best_time:
                best = searcher
    report.finish(space, measured)
    assert best is not None and best.best_config is not None
    summary = best.summary()
    summary["seconds"] = round(time.perf_counter() - progress.start, 3)
    summary["failed"] = len(harness.failures)
    # the candidates killed: hung past their own limit, or unfinished when the budget ran out
    summary["timed_out"] = sum(1 for failure in harness.failures if failure.status == "timeout")
    summary["stopped"] = len(getattr(harness, "stopped", ()))
    report_winner(log, bound, best.best_config, summary, score)
    _write_details(settings, "result", config=dict(best.best_config), summary=summary)
    plot_path = getattr(settings, "autotune_plot", None)
    if plot_path:
        written = plot_convergence(
            best.history, plot_path, title=f"{name}: {best.name} search, {effort_name} effort"
        )
        if written:
            log.info("%s: convergence plot written to %s", name, written)
        else:
            log.warning("%s: autotune_plot needs matplotlib; no plot written", name)
    return best.best_config, best


def backend_refuses(bound: Any, config: Any, log: AutotuneLog) -> bool:
    """Whether ``bound``'s backend knows it cannot compile ``config`` (its ``config_problem``),
    logged. A backend whose check itself fails refuses nothing: compiling the candidate
    decides (a backend bug must not hide configs)."""
    problem_of = getattr(getattr(bound, "backend", None), "config_problem", None)
    if problem_of is None:
        return False
    try:
        problem = problem_of(getattr(bound, "ir", None), config, bound.device)
    except Exception as error:
        log.debug("config_problem failed on %s: %s", config, error)
        return False
    if problem is not None:
        log.debug("skipping %s: %s", config, problem)
        return True
    return False


def _candidate_filter(bound: Any, settings: Any, log: AutotuneLog) -> Callable[[Any], Any] | None:
    """The user's ``autotune_config_filter`` after the backend's ``config_problem``: a config
    the backend knows it cannot compile is dropped before it costs a compile."""
    user = getattr(settings, "autotune_config_filter", None)
    if getattr(getattr(bound, "backend", None), "config_problem", None) is None:
        return user

    def keep(config: Any) -> Any:
        if backend_refuses(bound, config, log):
            return None
        # the user's filter is not guarded: its exception reaches the caller
        return config if user is None else user(config)

    return keep


def _run_finite(
    bound: Any, args: tuple[Any, ...], configs: list[Any], log: AutotuneLog, options: dict[str, Any]
) -> Any:
    from helion.autotuner.benchmarking import BenchmarkHarness
    from helion.autotuner.search import FiniteSearch

    settings = bound.settings
    profile = _profile_for(normalize_effort(getattr(settings, "autotune_effort", "full")), settings)
    if profile.name == "none":
        profile = get_effort_profile("quick")
    enabled = bool(getattr(settings, "autotune_progress_bar", True))
    progress = AutotuneProgress(
        log, kernel_name=_kernel_name(bound), total=len(configs), enabled=enabled
    )
    harness = BenchmarkHarness(
        bound, args, settings=settings, profile=profile, log=log, progress=progress
    )
    # before the progress display starts: a bad entry of `configs` is refused without one
    # (the harness starts no process before its first evaluation)
    search = FiniteSearch(bound.config_spec, harness, configs=configs, profile=profile, **options)
    with progress, harness:
        try:
            winner = search.run()
        except Exception as error:
            _raise_with_failures(error, harness)
    log.info(
        "%s: best of %d given configs: %s (%.5f ms)",
        _kernel_name(bound),
        len(search.configs),
        winner,
        search.best_time,
    )
    _write_details(settings, "result", config=dict(winner), summary=search.summary())
    return winner


# ------------------------------------------------------------------------------------ run log
@contextlib.contextmanager
def _run_log(log: AutotuneLog, bound: Any, cache: AutotuneCache | None) -> Any:
    """``<autotune_log>.log`` for the run (see AutotuneLog.start_file) and, with
    ``autotune_log_details``, a first ``<autotune_log>.meta.jsonl`` record: the settings, the
    cache key parts, the kernel IR and the config space's default config."""
    settings = bound.settings
    log.start_file()
    try:
        if getattr(settings, "autotune_log", None) and getattr(
            settings, "autotune_log_details", False
        ):
            _start_details(settings, bound, cache)
        yield
    finally:
        log.close_file()


def _details_path(settings: Any) -> str | None:
    base = getattr(settings, "autotune_log", None)
    if not base or not getattr(settings, "autotune_log_details", False):
        return None
    return f"{base}.meta.jsonl"


def _start_details(settings: Any, bound: Any, cache: AutotuneCache | None) -> None:
    def attempt(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as error:
            return f"<unavailable: {type(error).__name__}: {error}>"

    to_dict = getattr(settings, "to_dict", None)
    record = {
        "kernel": _kernel_name(bound),
        "settings": attempt(lambda: to_dict(jsonable=True)) if callable(to_dict) else None,
        "key_parts": cache.key_parts if cache is not None else None,
        "ir": attempt(bound.ir_text) if hasattr(bound, "ir_text") else None,
        "default_config": attempt(lambda: dict(bound.config_spec.default_config())),
    }
    _write_details(settings, "start", truncate=True, **record)


def _write_details(
    run_settings: Any, event: str, /, *, truncate: bool = False, **fields: Any
) -> None:
    import json

    path = _details_path(run_settings)
    if path is None:
        return

    def finite(value: Any) -> Any:  # strict JSON: no Infinity/NaN
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {str(k): finite(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [finite(v) for v in value]
        return value

    record = finite({"event": event, "time": time.time(), **fields})
    try:
        line = json.dumps(record, default=repr, sort_keys=True)
        with open(path, "w" if truncate else "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    except (OSError, TypeError, ValueError):
        pass


# ------------------------------------------------------------------------------------ parts
def _profile_for(effort_name: str, settings: Any) -> EffortProfile:
    profile = get_effort_profile(effort_name)
    changes: dict[str, Any] = {}
    threshold = getattr(settings, "autotune_rebenchmark_threshold", None)
    if threshold is not None:
        changes["rebenchmark_threshold"] = float(threshold)
    budget = getattr(settings, "autotune_budget_seconds", None)
    if budget is not None:
        changes["budget_seconds"] = float(budget) if budget > 0 else None
    return profile.replace(**changes) if changes else profile


def _seed_configs(
    bound: Any,
    settings: Any,
    cache: AutotuneCache | None,
    effort_name: str,
    profile: EffortProfile,
    log: AutotuneLog,
) -> list[Any]:
    spec = bound.config_spec
    seeds: list[Any] = []
    with contextlib.suppress(Exception):
        seeds.append(spec.default_config())
    if not getattr(settings, "disable_autotuner_heuristics", False):
        try:
            seeds.extend(bound.seed_configs() or ())
        except Exception as error:
            log.debug("backend seed configs unavailable: %s", error)
    user = getattr(settings, "autotune_seed_configs", None)
    if user:
        seeds.extend(user if isinstance(user, (list, tuple)) else [user])
    strategy = getattr(settings, "autotune_initial_population_strategy", None)
    if strategy is None:
        strategy = "from_best_available" if effort_name == "quick" else "from_random"
    if strategy == "from_best_available" and cache is not None:
        limit = min(
            profile.warm_start_configs,
            int(getattr(settings, "autotune_best_available_max_configs", 20)),
        )
        scan = int(getattr(settings, "autotune_best_available_max_cache_scan", 500))
        try:
            warm = cache.similar_configs(limit=limit, max_scan=scan)
        except Exception as error:
            log.debug("warm start from the cache failed: %s", error)
            warm = []
        if warm:
            log.debug("%d seed config(s) from cached tunings of other shapes", len(warm))
        seeds.extend(warm)
    return seeds


def _open_cache(
    bound: Any, settings: Any, log: AutotuneLog, *, strict: bool | None = None
) -> AutotuneCache | None:
    try:
        cache = AutotuneCache(bound, settings=settings, strict=strict)
    except Exception as error:
        # no cache key (e.g. a kernel without source): tune every time rather than fail
        log.debug("autotune cache unavailable: %s", error)
        return None
    return cache if cache.enabled else None


def _warn_cache_unusable(log: AutotuneLog, name: str, cache: AutotuneCache, error: OSError) -> None:
    log.warning(
        "%s: the autotune cache directory %s cannot be used (%s); tuning without the cache (check "
        "HELION_CACHE_DIR, and who owns the file named: another user's lock file in a shared "
        "cache is one cause)",
        name,
        cache.directory,
        error,
    )


def _checked_overrides(bound: Any, settings: Any, space: Any = None) -> dict[str, Any] | None:
    """``settings.autotune_config_overrides`` once the kernel's spec accepts them on top of its
    default config: the search forces them on every candidate, so a bad key or value would
    otherwise reject every candidate without saying which override is to blame."""
    from helion import exc
    from helion.autotuner.search.base import make_config

    overrides = getattr(settings, "autotune_config_overrides", None)
    if not overrides:
        return None
    spec = bound.config_spec if space is None else space
    try:
        spec.normalize(make_config({**dict(spec.default_config()), **overrides}))
    except (exc.InvalidConfig, TypeError, ValueError) as error:
        raise exc.InvalidConfig(
            f"autotune_config_overrides (HELION_AUTOTUNE_CONFIG_OVERRIDES) {overrides!r} do "
            f"not fit kernel {_kernel_name(bound)!r}: {error}"
        ) from None
    return dict(overrides)


def _raise_with_failures(error: Exception, harness: Any) -> None:
    from helion import exc

    if not isinstance(error, exc.NoConfigFound):
        raise error
    failures = harness.failures
    counts = collections.Counter(f.status for f in failures)
    examples = []
    seen_status: set[str] = set()
    for failure in failures:
        if failure.status not in seen_status:
            seen_status.add(failure.status)
            examples.append(f"  {failure.status}: {failure.reason} (config {failure.config})")
    detail = ", ".join(f"{count} {status}" for status, count in counts.most_common())
    message = f"{getattr(error, 'hint', None) or ''}\nFailures: {detail or 'none recorded'}".strip()
    if examples:
        message += "\n" + "\n".join(examples)
    raise exc.NoConfigFound(hint=message) from error


def _normalized(spec: Any, config: Any) -> Any:
    result = spec.normalize(config)
    return config if result is None else result


def _kernel_name(bound: Any) -> str:
    return str(getattr(getattr(bound, "kernel", None), "name", None) or "kernel")


def _assert_cache_hit() -> bool:
    from helion import exc

    try:
        from helion.runtime.settings import assert_cache_hit

        return bool(assert_cache_hit())
    except exc.InvalidSetting:
        raise  # HELION_ASSERT_CACHE_HIT=maybe: not a boolean
    except Exception:
        return False


def _check_plugins_allow_tuning(bound: Any, args: tuple[Any, ...]) -> None:
    """Raise what a plugin's ``helion_autotune_refusal`` hook returns (helion-distributed: a
    kernel whose launches are collective cannot be tuned by one rank on its own), before any
    candidate runs."""
    from helion import plugins

    for result in plugins.call_each_plugin("helion_autotune_refusal", bound=bound, args=args):
        if isinstance(result.value, BaseException):
            raise result.value


def _distributed() -> bool:
    # ranks of a distributed kernel must tune together; never make one wait for another
    try:
        import torch.distributed as dist

        return dist.is_available() and dist.is_initialized()
    except Exception:
        return False
