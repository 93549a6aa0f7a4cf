"""The search framework every algorithm builds on.

A search proposes configs; an *evaluator* turns configs into milliseconds (``inf`` = failed).  The
real evaluator is :class:`helion.autotuner.benchmarking.BenchmarkHarness`; tests and external
tuners can pass :class:`CallableEvaluator`.  ``BaseSearch`` owns everything the algorithms share:
the seeded RNG (same seed, same evaluator results -> same configs tried), the evaluation/time
budget, de-duplication of configs already measured, best-so-far tracking and the final
re-benchmark of the leaders.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import numbers
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable
from typing import ClassVar
from typing import Iterable
from typing import Mapping
from typing import Protocol
from typing import Sequence

from helion.autotuner.effort import FULL
from helion.autotuner.effort import EffortProfile

if TYPE_CHECKING:
    from helion.runtime.config import Config


class Evaluator(Protocol):
    def evaluate(self, configs: Sequence[Config]) -> list[float]:
        """Milliseconds per config, ``math.inf`` for a config that failed, ``math.nan`` for one
        that was not measured because the time budget ran out (it ends the search)."""
        ...


# share of the time budget for the search proper; the rest re-benchmarks the leaders
SEARCH_SHARE = 0.85


class BudgetExhausted(Exception):
    """Raised inside a search when no more evaluations or seconds are left; ends the search."""


@dataclass
class Trial:
    config: Config
    time_ms: float
    index: int  # order of measurement, from 0
    generation: int

    @property
    def ok(self) -> bool:
        return math.isfinite(self.time_ms)


class CallableEvaluator:
    """Evaluate configs with a plain function ``cost(config) -> ms`` (synthetic costs, external kernels).

    An exception or a non-finite/negative value counts as a failed config.
    """

    def __init__(self, cost: Callable[[Config], float]) -> None:
        self.cost = cost
        self.calls = 0

    def evaluate(self, configs: Sequence[Config]) -> list[float]:
        times = []
        for config in configs:
            self.calls += 1
            try:
                value = float(self.cost(config))
            except Exception:
                value = math.inf
            times.append(value if math.isfinite(value) and value >= 0 else math.inf)
        return times


def config_key(config: Mapping[str, Any]) -> str:
    """Canonical text of a config, used to recognise a config already measured."""
    values = getattr(config, "config", None)
    if not isinstance(values, dict):
        values = dict(config)
    try:
        # Config values are JSON-shaped already; this is the hot path of the surrogate's pool
        return json.dumps(values, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return json.dumps(_plain(values), sort_keys=True, separators=(",", ":"))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def make_config(values: Mapping[str, Any]) -> Config:
    from helion.runtime.config import Config

    if isinstance(values, Config):
        return values
    return Config(**dict(values))


def check_max_evaluations(value: object) -> int | None:
    """``max_evaluations=`` as given to ``autotune`` or a search: ``None`` (the effort
    profile's cap) or an int >= 1. Anything else raises ``helion.exc.InvalidSetting`` where it
    is given: a cap of 0 or less would measure nothing and end in a misleading NoConfigFound."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        from helion import exc

        raise exc.InvalidSetting(
            f"max_evaluations: expected an int >= 1 (the most configs the search measures), "
            f"got {value!r}; leave it out for the effort profile's cap"
        )
    return int(value)


def check_budget_seconds(value: object) -> float | None:
    """``budget_seconds=`` as given to ``autotune`` or a search: ``None`` (the effort profile's
    budget), a number of seconds >= 0 (0: stop once a config works), or ``math.inf`` for no
    cap. A negative number, NaN or a non-number raises ``helion.exc.InvalidSetting`` where it is
    given."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or math.isnan(value)
        or value < 0
    ):
        from helion import exc

        raise exc.InvalidSetting(
            f"budget_seconds: expected seconds >= 0 (math.inf for no cap), got {value!r}; leave "
            f"it out for the effort profile's budget"
        )
    return float(value)


def check_seed(value: object) -> int | None:
    """``seed=`` as given to ``autotune`` or a search: ``None`` (``autotune_random_seed``, else
    a time-based seed) or an int >= 0, as ``HELION_AUTOTUNE_RANDOM_SEED`` takes. A bool, a
    float (``1.7`` was silently used as 1), a string or a negative number raises
    ``helion.exc.InvalidSetting`` where it is given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        from helion import exc

        raise exc.InvalidSetting(
            f"seed: expected an int >= 0 (the search's RNG seed), got {value!r}; leave it out "
            "for autotune_random_seed (HELION_AUTOTUNE_RANDOM_SEED) or a time-based seed"
        )
    return int(value)


def check_search_options(options: Mapping[str, Any]) -> None:
    """The values of a search's common options among ``autotune`` options (``max_evaluations``,
    ``budget_seconds``, ``seed``), checked before any cache or search work."""
    check_max_evaluations(options.get("max_evaluations"))
    check_budget_seconds(options.get("budget_seconds"))
    check_seed(options.get("seed"))


#: constructor parameters the driver fills itself: not options a caller passes
DRIVER_PARAMETERS = frozenset(
    {"config_spec", "evaluator", "profile", "seed_configs", "config_overrides", "config_filter"}
)


def search_option_names(search_cls: type) -> list[str]:
    """The options ``search_cls`` takes (``seed``, ``max_evaluations``, ... and its own sizes):
    the keyword parameters of every ``__init__`` along its classes (a subclass passes what it
    does not name to its base through ``**kwargs``), less those the driver fills."""
    import inspect

    names: dict[str, None] = {}
    for klass in search_cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        init = getattr(init, "__wrapped__", init)
        try:
            parameters = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            continue
        for parameter in list(parameters)[1:]:  # after self
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            if parameter.name not in DRIVER_PARAMETERS:
                names.setdefault(parameter.name)
    return sorted(names)


def check_option_names(
    options: Mapping[str, Any],
    search_cls: type,
    *,
    exclude: Iterable[str] = (),
    where: str = "autotune()",
    also: Iterable[str] = ("force", "effort", "configs", "search"),
) -> None:
    """Refuse an option ``search_cls`` does not take (a misspelt ``max_evals=``) with
    ``helion.exc.InvalidSetting`` naming the valid ones, before any cache or search work: it
    used to be a TypeError from deep in the search, and only when tuning ran (a cache hit
    ignored it)."""
    import difflib

    valid = [name for name in search_option_names(search_cls) if name not in set(exclude)]
    unknown = [name for name in options if name not in valid]
    if not unknown:
        return
    from helion import exc

    also = [name for name in also if name not in valid]
    name = unknown[0]
    close = difflib.get_close_matches(name, [*valid, *also], n=1)
    suggestion = f" (did you mean {close[0]!r}?)" if close else ""
    search_name = getattr(search_cls, "name", None) or search_cls.__name__
    own = f"; and {where}'s own: {', '.join(also)}" if also else ""
    raise exc.InvalidSetting(
        f"{where}: unknown option {name!r}{suggestion}; the {search_name} search "
        f"({search_cls.__name__}) takes: {', '.join(valid)}{own}"
    )


def fresh_seed() -> int:
    """A time-based seed (printed by the driver so the run can be reproduced)."""
    return int(time.time_ns() % (2**31 - 1))


def is_bound_kernel(value: object) -> bool:
    """Whether ``value`` is a bound kernel (what ``Kernel.bind(args)`` returns), not a config
    space: public Helion makes its searches from one (``PatternSearch(bound_kernel, args)``)."""
    return (
        not isinstance(value, type)
        and hasattr(value, "config_spec")
        and callable(getattr(value, "compile_config", None))
        and hasattr(value, "settings")
    )


def _bound_form(args: tuple, kwargs: Mapping[str, Any]) -> bool:
    first = args[0] if args else kwargs.get("kernel", kwargs.get("bound_kernel"))
    return is_bound_kernel(first)


def _accepting_bound_kernel(init: Callable[..., None]) -> Callable[..., None]:
    """``init`` that also takes public Helion's ``(bound_kernel, args, **options)``."""
    if getattr(init, "_accepts_bound_kernel", False):
        return init

    @functools.wraps(init)
    def __init__(self: BaseSearch, *args: Any, **kwargs: Any) -> None:
        if _bound_form(args, kwargs):
            self._init_from_bound(*args, **kwargs)
        else:
            init(self, *args, **kwargs)

    __init__._accepts_bound_kernel = True  # type: ignore[attr-defined]
    return __init__


class BaseSearch:
    """Base of every search.  Subclasses implement :meth:`_search` and call :meth:`evaluate`.

    Two ways to make one:

    * ``Search(config_spec, evaluator, **options)``: the search proper; :meth:`run` measures
      configs through ``evaluator`` and returns the winner (the driver makes it this way).
    * ``Search(bound_kernel, args, **options)``, public Helion's form (``autotuner_fn=lambda
      bound, args, **kw: PatternSearch(bound, args, max_generations=1)``): the options are
      checked at once, and :meth:`autotune` tunes ``bound_kernel`` for ``args`` with this
      search through the driver (benchmark harness, seeds, time budget, final line), without
      the on-disk cache; ``helion.autotuner.LocalAutotuneCache(search).autotune()`` uses the
      cache too. ``FiniteSearch(bound_kernel, args, configs=[...])`` picks the fastest of
      ``configs`` (default: the kernel's ``configs=``).

    Constructor arguments shared by all searches:
      config_spec     -- the ConfigSpec of the bound kernel
      evaluator       -- see :class:`Evaluator`
      profile         -- an :class:`EffortProfile` (sizes, generations, thresholds)
      seed            -- RNG seed; ``None`` picks a time-based one (``self.seed`` holds it)
      seed_configs    -- configs that join the first population (default, heuristics, user's)
      max_evaluations -- cap on measured configs (default: the profile's)
      budget_seconds  -- wall-clock cap for the search (default: the profile's)
      max_generations -- overrides the profile's generation count (settings.autotune_max_generations)
      config_overrides-- keys forced onto every candidate (settings.autotune_config_overrides)
      config_filter   -- ``(Config) -> Config | None`` applied to every candidate; None drops it
    """

    name: ClassVar[str] = "base"
    #: the bound kernel and arguments of a search made from them (None: made from a config space)
    bound: Any = None
    args: tuple[Any, ...] = ()
    #: the search takes ``configs=`` (FiniteSearch): given to the driver as its ``configs``
    takes_configs: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None:
            cls.__init__ = _accepting_bound_kernel(init)  # type: ignore[method-assign]

    def __init__(
        self,
        config_spec: Any,
        evaluator: Evaluator,
        *,
        profile: EffortProfile | None = None,
        seed: int | None = None,
        seed_configs: Iterable[Mapping[str, Any]] = (),
        max_evaluations: int | None = None,
        budget_seconds: float | None = None,
        max_generations: int | None = None,
        config_overrides: Mapping[str, Any] | None = None,
        config_filter: Callable[[Config], Config | None] | None = None,
    ) -> None:
        self.spec = config_spec
        self.evaluator = evaluator
        self.profile = profile or FULL
        seed = check_seed(seed)
        self.seed = fresh_seed() if seed is None else seed
        self.rng = random.Random(self.seed)
        checked = check_max_evaluations(max_evaluations)
        self.max_evaluations = self.profile.max_evaluations if checked is None else checked
        budget = check_budget_seconds(budget_seconds)
        self.budget_seconds = self.profile.budget_seconds if budget is None else budget
        self.max_generations = max_generations
        self.config_overrides = dict(config_overrides or {})
        self.config_filter = config_filter
        self.invalid_candidates = 0  # before the seeds: preparing them counts the refused ones
        self.filtered_candidates = 0  # of those, the ones config_filter returned None for
        self.seed_configs = [c for c in (self.prepare(s) for s in seed_configs) if c is not None]
        self.history: list[Trial] = []
        self.best_config: Config | None = None
        self.best_time: float = math.inf
        self.generation = 0
        self.rebenchmarked: dict[str, float] = {}
        self._times: dict[str, float] = {}
        self._start: float | None = None

    # ------------------------------------------------------------------ public Helion's form
    def _init_from_bound(self, *positional: Any, **options: Any) -> None:
        """``Search(bound_kernel, args, **options)``: keep them for :meth:`autotune`, after
        checking the options (names and values) now, where they are given."""
        cls_name = type(self).__name__
        rest = list(positional)
        bound = rest.pop(0) if rest else options.pop("kernel", None) or options.pop("bound_kernel")
        options.pop("kernel", None)
        options.pop("bound_kernel", None)
        if rest:
            call_args = rest.pop(0)
        elif "args" in options:
            call_args = options.pop("args")
        else:
            raise TypeError(f"{cls_name}(bound_kernel, args, **options): args missing")
        if rest:
            raise TypeError(
                f"{cls_name}(bound_kernel, args, **options) takes its options by keyword; "
                f"got {len(rest)} more positional argument(s)"
            )
        if isinstance(call_args, (str, bytes)) or not isinstance(call_args, Iterable):
            raise TypeError(
                f"{cls_name}(bound_kernel, args, ...): args must be the kernel's arguments as a "
                f"tuple or list, got {type(call_args).__name__}"
            )
        check_search_options(options)
        where = f"{cls_name}(bound_kernel, args, ...)"
        check_option_names(options, type(self), where=where, also=())
        self.bound = bound
        self.args = tuple(call_args)
        self.options = dict(options)
        self.spec = bound.config_spec
        self.evaluator = None
        self.profile = FULL
        self.seed = options.get("seed")
        self.history = []
        self.best_config = None
        self.best_time = math.inf
        self.generation = 0
        self._start = None
        self._check_bound_options()

    def _check_bound_options(self) -> None:
        """More checks of ``self.options`` when made from a bound kernel (FiniteSearch: its
        configs)."""

    def autotune(self, *, skip_cache: bool = False) -> Config:
        """Tune the bound kernel this search was made from (``Search(bound_kernel, args,
        **options)``) for its arguments with this search, and return the winning config.

        The driver's machinery runs it: the benchmark harness (isolated screening, accuracy
        check, timing), the seeds, the effort profile and time budget of the kernel's settings
        (effort ``none`` counts as ``quick`` here: a search was asked for). A bare search never
        reads or writes the on-disk cache (``skip_cache`` is accepted for public Helion's
        signature); ``helion.autotuner.LocalAutotuneCache(search).autotune()`` does.
        """
        return self._tune_bound(use_cache=False)

    def _tune_bound(
        self, *, use_cache: bool, force: bool = False, strict_cache: bool | None = None
    ) -> Config:
        if self.bound is None:
            raise TypeError(
                f"{type(self).__name__}.autotune() tunes a search made from a bound kernel, "
                f"{type(self).__name__}(bound_kernel, args, **options); this one was made from "
                "(config_spec, evaluator): call run() instead"
            )
        import torch

        from helion.autotuner import driver
        from helion.autotuner.effort import normalize_effort

        options = dict(self.options)
        configs = options.pop("configs", None) if self.takes_configs else None
        settings = self.bound.settings
        effort = normalize_effort(getattr(settings, "autotune_effort", "full"))
        # tuning launches the kernel many times: keep the caller's CPU generator where it was
        with torch.random.fork_rng(devices=[]):
            config = driver._autotune(
                self.bound,
                self.args,
                force=force,
                effort="quick" if effort == "none" else effort,
                configs=configs,
                search=None if self.takes_configs else type(self),
                options=options,
                use_cache=use_cache,
                use_hook=False,
                strict_cache=strict_cache,
            )
        self.best_config = config
        return config

    # ----------------------------------------------------------------------------- budget
    @property
    def evaluations(self) -> int:
        return len(self.history)

    def elapsed(self) -> float:
        return 0.0 if self._start is None else time.perf_counter() - self._start

    def evaluations_left(self) -> int:
        return max(0, self.max_evaluations - self.evaluations)

    def out_of_time(self) -> bool:
        # the time budget never leaves the caller without a working config (nothing stops
        # before one is found); the search gets SEARCH_SHARE of it, the re-benchmark the rest
        if self.budget_seconds is None or self.best_config is None:
            return False
        return self.elapsed() >= self.budget_seconds * SEARCH_SHARE

    def budget_left(self) -> bool:
        return self.evaluations_left() > 0 and not self.out_of_time()

    def generations(self, default: int) -> int:
        return default if self.max_generations is None else int(self.max_generations)

    # ---------------------------------------------------------------------- configs
    def with_overrides(self, config: Mapping[str, Any]) -> Config:
        """``config`` with the forced overrides applied, normalized by the spec (which raises
        for a config outside the space)."""
        values = dict(config)
        values.update(self.config_overrides)
        candidate = make_config(values)
        normalized = self.spec.normalize(candidate)
        return candidate if normalized is None else make_config(normalized)

    def prepare(self, config: Mapping[str, Any] | None) -> Config | None:
        """Apply the forced overrides and normalize; ``None`` when the spec rejects the config."""
        if config is None:
            return None
        try:
            candidate = self.with_overrides(config)
        except Exception:
            # InvalidConfig and friends: the candidate simply is not part of the space
            self.invalid_candidates += 1
            return None
        if self.config_filter is None:
            return candidate
        # outside the try above: an exception raised by the filter (the user's
        # autotune_config_filter; the driver guards the backend's config_problem itself) is a
        # bug to report, not a verdict on the candidate -- swallowed, it rejected every
        # candidate and the search ended in a NoConfigFound blaming the config spec
        filtered = self.config_filter(candidate)
        if filtered is None:
            self.invalid_candidates += 1
            self.filtered_candidates += 1
            return None
        if filtered is candidate:
            return candidate
        try:
            normalized = self.spec.normalize(make_config(filtered))
            return make_config(filtered) if normalized is None else make_config(normalized)
        except Exception:
            self.invalid_candidates += 1
            return None

    def random_config(self) -> Config | None:
        return self.prepare(self.spec.random_config(self.rng))

    def random_configs(self, count: int) -> list[Config]:
        found: list[Config] = []
        seen: set[str] = set()
        attempts = 0
        while len(found) < count and attempts < count * 4 + 8:
            attempts += 1
            config = self.random_config()
            if config is None:
                continue
            key = config_key(config)
            if key not in seen:
                seen.add(key)
                found.append(config)
        return found

    def initial_population(self, size: int) -> list[Config]:
        """Seeds first, then random configs until ``size`` distinct configs."""
        population: list[Config] = []
        seen: set[str] = set()
        for config in self.seed_configs:
            key = config_key(config)
            if key not in seen:
                seen.add(key)
                population.append(config)
        attempts = 0
        while len(population) < size and attempts < size * 4 + 8:
            attempts += 1
            candidate = self.random_config()
            if candidate is None:
                continue
            key = config_key(candidate)
            if key not in seen:
                seen.add(key)
                population.append(candidate)
        return population

    def neighbors(self, config: Config) -> list[Config]:
        found = []
        for neighbor in self.spec.neighbors(config):
            prepared = self.prepare(neighbor)
            if prepared is not None:
                found.append(prepared)
        return found

    def is_measured(self, config: Config) -> bool:
        return config_key(config) in self._times

    def time_of(self, config: Config) -> float:
        return self._times.get(config_key(config), math.inf)

    # ---------------------------------------------------------------------- evaluate
    def evaluate(self, configs: Sequence[Config | Mapping[str, Any] | None]) -> list[float]:
        """Measure configs (already measured ones are not re-run), in order; ``inf`` = failed.

        Raises :class:`BudgetExhausted` after measuring what still fits in the budget.
        """
        prepared = [self.prepare(c) if c is not None else None for c in configs]
        pending: list[Config] = []
        pending_keys: set[str] = set()
        for config in prepared:
            if config is None:
                continue
            key = config_key(config)
            if key not in self._times and key not in pending_keys:
                pending_keys.add(key)
                pending.append(config)
        batch_size = max(1, self.profile.batch_size)
        position = 0
        while position < len(pending):
            if not self.budget_left():
                raise BudgetExhausted
            chunk = pending[position : position + min(batch_size, self.evaluations_left())]
            position += len(chunk)
            times = self.evaluator.evaluate(chunk)
            if len(times) != len(chunk):
                raise RuntimeError(
                    f"evaluator returned {len(times)} times for {len(chunk)} configs"
                )
            skipped = False
            for config, ms in zip(chunk, times, strict=True):
                if math.isnan(float(ms)):
                    # not measured (out of time): neither a trial nor a failure, so it does not
                    # count as measured nor teach the search that the config is bad
                    skipped = True
                    continue
                self._record(config, float(ms))
            if skipped and self.best_config is not None:
                # without a working config the search goes on (the evaluator stopped a batch
                # on the strength of a candidate that then failed to be measured)
                raise BudgetExhausted
        return [
            math.inf if c is None else self._times.get(config_key(c), math.inf) for c in prepared
        ]

    def _record(self, config: Config, ms: float) -> None:
        if not math.isfinite(ms) or ms < 0:
            ms = math.inf
        self._times[config_key(config)] = ms
        self.history.append(Trial(config, ms, len(self.history), self.generation))
        if ms < self.best_time:
            self.best_time = ms
            self.best_config = config

    def ranked(self, limit: int | None = None) -> list[Trial]:
        """Successful trials, fastest first (ties: earlier first, so results are deterministic)."""
        ok = sorted((t for t in self.history if t.ok), key=lambda t: (t.time_ms, t.index))
        return ok if limit is None else ok[:limit]

    # ---------------------------------------------------------------------- run
    def run(self) -> Config:
        """Search, then re-benchmark the leaders; returns the winner or raises NoConfigFound.
        (A search made from a bound kernel runs :meth:`autotune`.)"""
        if self.bound is not None:
            return self.autotune()
        self._start = time.perf_counter()
        timed = self.budget_seconds is not None and hasattr(self.evaluator, "deadline")
        if timed:
            # lets the harness skip the rest of a batch once the search's share is spent; the
            # rest of the budget is kept for re-benchmarking the leaders, so the whole run
            # (search + re-benchmark) ends within the budget
            self.evaluator.deadline = self._start + float(self.budget_seconds) * SEARCH_SHARE
        with contextlib.suppress(BudgetExhausted):
            self._search()
        if timed:
            self.evaluator.deadline = self._start + float(self.budget_seconds)
        self._rebenchmark_leaders()
        if self.best_config is None:
            from helion import exc

            failed = self.evaluations
            rejected = f"{self.invalid_candidates} candidate(s) were rejected by the config spec"
            if self.filtered_candidates:
                rejected = (
                    f"{self.invalid_candidates} candidate(s) were rejected ("
                    f"{self.filtered_candidates} by the config filter: "
                    "autotune_config_filter or the backend's config_problem)"
                )
            raise exc.NoConfigFound(
                hint=f"the {self.name} search measured {failed} config(s), all failed, and "
                f"{rejected}"
            )
        return self.best_config

    def _search(self) -> None:
        raise NotImplementedError

    def _rebenchmark_leaders(self) -> None:
        rebenchmark = getattr(self.evaluator, "rebenchmark", None)
        if rebenchmark is None or not math.isfinite(self.best_time):
            return
        leaders = self.rebenchmark_candidates()
        if len(leaders) < 2:
            return
        times = rebenchmark([t.config for t in leaders])
        scored = [(ms, i) for i, ms in enumerate(times) if math.isfinite(ms)]
        for trial, ms in zip(leaders, times, strict=True):
            self.rebenchmarked[config_key(trial.config)] = ms
        if not scored:
            return
        best_ms, best_index = min(scored)
        self.best_config = leaders[best_index].config
        self.best_time = best_ms

    def rebenchmark_candidates(self) -> list[Trial]:
        """The trials re-timed before the winner is picked: the ``rebenchmark_top_k`` fastest,
        then the fastest seeds not among them (at most as many again), all within
        ``rebenchmark_threshold`` of the best.

        Seeds get this second look because a search spends its later batches on the leader's
        one-step neighbours, whose first-pass times cluster around the leader's and fill the
        top k; a seed that one noisy first pass put a few percent behind would otherwise never
        be timed next to them, yet seeds are the configs most often right for the kernel."""
        limit = self.best_time * self.profile.rebenchmark_threshold
        top_k = max(0, self.profile.rebenchmark_top_k)
        leaders = [t for t in self.ranked(top_k) if t.time_ms <= limit]
        chosen = {config_key(t.config) for t in leaders}
        seed_keys = {config_key(c) for c in self.seed_configs}
        extra = 0
        for trial in self.ranked():
            if extra >= top_k or trial.time_ms > limit:
                break
            key = config_key(trial.config)
            if key in seed_keys and key not in chosen:
                chosen.add(key)
                leaders.append(trial)
                extra += 1
        return leaders

    # ---------------------------------------------------------------------- helpers
    def improved(self, previous_best: float, min_improvement: float) -> bool:
        """Did the best time improve by at least ``min_improvement`` (relative)?"""
        if not math.isfinite(self.best_time):
            return False
        if not math.isfinite(previous_best):
            return True
        return self.best_time < previous_best * (1.0 - min_improvement)

    def summary(self) -> dict[str, Any]:
        failed = sum(1 for t in self.history if not t.ok)
        return {
            "search": self.name,
            "seed": self.seed,
            "evaluations": self.evaluations,
            "failed": failed,
            "generations": self.generation,
            "best_ms": self.best_time,
            "seconds": round(self.elapsed(), 3),
        }


# the base's own __init__ takes the bound-kernel form too (a subclass without an __init__)
BaseSearch.__init__ = _accepting_bound_kernel(BaseSearch.__init__)  # type: ignore[method-assign]
