"""``Kernel.autotune_multi``: one config for several argument sets.

The same kernel at several sizes (``static_shapes=False``, or a config to hard-code across
shapes) gets one config: every candidate is timed on every argument set, each through the bound
kernel of its own set (sets may specialize differently), and its score aggregates the per-set
times. The search, its budget, effort, progress, seeds, overrides and filters are the ordinary
ones of :mod:`helion.autotuner.driver`; only the evaluator and the config space differ:

* the space is the first set's ConfigSpec narrowed to what every set's spec accepts (each
  fragment to the values common to all), and a candidate is kept only if every set's spec
  normalizes it. Specs of different structure (e.g. another number of block sizes) are an
  :class:`helion.exc.AutotuneMultiError`.
* a candidate is measured set after set (accuracy-checked against each set's own baseline); one
  that fails on any set is rejected, and not run on the sets after it.
* score: ``geomean`` of the per-set values, or ``max`` (the worst set). A value is the set's
  time in ms (``relative_to=None``), or that time divided by a reference measured once on the
  same set: ``"default"``, the set's default config; ``"baseline"``, the autotuner's accuracy
  baseline: ``settings.autotune_baseline_fn`` when given (typically the eager PyTorch
  reference), else the default config, as for the accuracy check.

The winner is set on the bound kernel of every set and cached under a key covering all of
them (every set's key parts, argument shapes and dtypes, the aggregation, ``cache_tag``).
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any
from typing import Callable
from typing import Sequence

import torch

from helion import exc
from helion.autotuner import driver
from helion.autotuner.cache import AutotuneCache
from helion.autotuner.cache import key_parts_of
from helion.autotuner.effort import EffortProfile
from helion.autotuner.effort import normalize_effort
from helion.autotuner.progress import AutotuneLog
from helion.autotuner.progress import AutotuneProgress
from helion.autotuner.progress import Score
from helion.autotuner.search.base import check_option_names
from helion.autotuner.search.base import check_search_options
from helion.autotuner.search.base import config_key

AGGREGATIONS = ("geomean", "max")
RELATIVE_TO = (None, "default", "baseline")
#: times below this are clamped before a geometric mean (a 0.0 ms reading has no logarithm)
_SMALLEST_MS = 1e-9


# ------------------------------------------------------------------------------ arguments
def _checked_arg_sets(kernel: Any, arg_sets: Any) -> list[tuple[Any, ...]]:
    if isinstance(arg_sets, torch.Tensor) or not isinstance(arg_sets, (list, tuple)):
        raise exc.AutotuneMultiError(
            f"arg_sets must be a list of argument tuples, one per set, not a "
            f"{type(arg_sets).__name__}"
        )
    if not arg_sets:
        raise exc.AutotuneMultiError("arg_sets is empty: give at least one argument tuple")
    raw = [kernel._argument_tuple("autotune_multi", args) for args in arg_sets]
    arities = sorted({len(args) for args in raw})
    if len(arities) > 1:
        counts = ", ".join(f"set {i}: {len(args)}" for i, args in enumerate(raw))
        raise exc.AutotuneMultiError(
            f"the argument sets of {kernel.name} have different numbers of arguments ({counts}); "
            "every set must call the kernel the same way"
        )
    return [kernel.normalize_args(*args) for args in raw]


def _check_choices(aggregation: str, relative_to: str | None, cache_tag: Any) -> None:
    if aggregation not in AGGREGATIONS:
        raise exc.AutotuneMultiError(
            f"aggregation={aggregation!r} is not one of {', '.join(map(repr, AGGREGATIONS))}"
        )
    if relative_to not in RELATIVE_TO:
        raise exc.AutotuneMultiError(
            f"relative_to={relative_to!r} is not one of {', '.join(map(repr, RELATIVE_TO))}"
        )
    if cache_tag is not None and not isinstance(cache_tag, str):
        raise exc.AutotuneMultiError(f"cache_tag must be a str or None, not {cache_tag!r}")


# ------------------------------------------------------------------------------ the space
def _structure(spec: Any) -> list[tuple[str, int | None]]:
    return [(entry.name, entry.index) for entry in spec.flat_fields()]


def _describe_structure(spec: Any) -> str:
    counts: dict[str, int] = {}
    for name, _ in _structure(spec):
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{count} {name}" for name, count in counts.items()) or "no tunables"


def shared_space(specs: Sequence[Any]) -> Any:
    """The first spec with each fragment narrowed to the values every spec accepts.

    Raises:
        helion.exc.AutotuneMultiError: the specs differ in structure, or some tunable has no
            value that every set accepts.
    """
    first = specs[0]
    shape = _structure(first)
    for position, spec in enumerate(specs[1:], start=1):
        if _structure(spec) != shape:
            raise exc.AutotuneMultiError(
                f"the argument sets have config spaces of different shape: set 0 has "
                f"{_describe_structure(first)}, set {position} has {_describe_structure(spec)}; "
                "one config cannot fit both (tune these sets separately)"
            )
    space = first.copy()
    columns = [spec.flat_fields() for spec in specs]
    for position, entry in enumerate(columns[0]):
        fragments = [column[position].fragment for column in columns]
        if all(repr(f) == repr(fragments[0]) for f in fragments[1:]):
            continue
        common = _common_fragment(fragments, entry.name, entry.index)
        field = space.fields[entry.name]
        if entry.index is None:
            field.fragment = common
        else:
            field.fragments[entry.index] = common
    return space


def _common_fragment(fragments: list[Any], name: str, index: int | None) -> Any:
    choices = [f.all_values() for f in fragments]
    if any(values is None for values in choices):
        # not enumerable: the first set's fragment; the per-set check rejects the rest
        return fragments[0]
    common = [v for v in choices[0] if all(v in values for values in choices[1:])]
    if not common:
        where = name if index is None else f"{name}[{index}]"
        raise exc.AutotuneMultiError(
            f"no value of {where} is accepted by every argument set "
            f"({'; '.join(repr(f) for f in fragments)})"
        )
    for fragment, values in zip(fragments, choices, strict=True):
        if len(values) == len(common):
            return fragment  # one set's own fragment is the intersection (e.g. smallest bound)
    return fragments[0].restrict(common)


def _member_filter(bounds: Sequence[Any], settings: Any, log: AutotuneLog) -> Callable[[Any], Any]:
    """Keep a candidate only when every set's spec takes it and no set's backend knows it
    cannot compile it; then the user's ``autotune_config_filter`` (once)."""
    user = getattr(settings, "autotune_config_filter", None)
    distinct = list({id(b): b for b in bounds}.values())

    def keep(config: Any) -> Any:
        for bound in distinct:
            try:
                bound.config_spec.normalize(config)
            except Exception:
                return None
            if driver.backend_refuses(bound, config, log):
                return None
        return config if user is None else user(config)

    return keep


# ------------------------------------------------------------------------------ evaluator
class MultiSetEvaluator:
    """Scores a config over every argument set (see the module docstring); an
    :class:`~helion.autotuner.search.base.Evaluator` with ``rebenchmark`` and ``deadline``."""

    def __init__(
        self,
        harnesses: list[Any],
        *,
        aggregation: str,
        relative_to: str | None,
        default_configs: list[Any],
        baseline_fn: Callable[..., Any] | None,
        profile: EffortProfile,
        progress: AutotuneProgress | None = None,
    ) -> None:
        self.harnesses = harnesses
        #: gets each config's score; the harnesses have none (their per-set times are not it)
        self.progress = progress
        self.aggregation = aggregation
        self.relative_to = relative_to
        self.default_configs = default_configs
        self.baseline_fn = baseline_fn
        self.profile = profile
        self.references: list[float] | None = None
        #: raw per-set milliseconds of each config measured, by config key (re-timings win)
        self.set_times: dict[str, list[float]] = {}
        self._deadline: float | None = None

    @property
    def deadline(self) -> float | None:
        return self._deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self._deadline = value
        for harness in self.harnesses:
            harness.deadline = value

    @property
    def failures(self) -> list[Any]:
        return [failure for harness in self.harnesses for failure in harness.failures]

    @property
    def stopped(self) -> list[Any]:
        return [result for harness in self.harnesses for result in getattr(harness, "stopped", ())]

    def __enter__(self) -> MultiSetEvaluator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        for harness in self.harnesses:
            harness.close()

    # -------------------------------------------------------------- references
    def _reference(self, index: int) -> float:
        harness = self.harnesses[index]
        source = "the default config"
        if self.relative_to == "baseline" and self.baseline_fn is not None:
            harness.prepare()
            source = "autotune_baseline_fn"
            try:
                ms = harness._time(self.baseline_fn, self.profile.benchmark_target_ms)
            except Exception as error:
                raise exc.AutotuneMultiError(
                    f"relative_to='baseline': timing {source} on arg set {index} failed: {error}"
                ) from error
        else:
            ms = harness.evaluate([self.default_configs[index]])[0]
        if not math.isfinite(ms) or ms <= 0:
            raise exc.AutotuneMultiError(
                f"relative_to={self.relative_to!r}: {source} did not run on arg set {index} "
                f"(time {ms!r}), so times cannot be taken relative to it; use relative_to=None"
            )
        return ms

    def _ensure_references(self) -> list[float]:
        if self.references is None:
            if self.relative_to is None:
                self.references = [1.0] * len(self.harnesses)
            else:
                self.references = [self._reference(i) for i in range(len(self.harnesses))]
        return self.references

    # -------------------------------------------------------------- measuring
    def _per_set(
        self, configs: Sequence[Any], measure: Callable[[Any, list[Any]], list[float]]
    ) -> list[list[float]]:
        rows = [[math.nan] * len(self.harnesses) for _ in configs]
        alive = list(range(len(configs)))
        for set_index, harness in enumerate(self.harnesses):
            if not alive:
                break
            times = measure(harness, [configs[i] for i in alive])
            still = []
            for position, ms in zip(alive, times, strict=True):
                rows[position][set_index] = ms
                if math.isfinite(ms):
                    still.append(position)
                # failed (inf) or not measured (nan): not worth running on the other sets
            alive = still
        return rows

    def score(self, row: Sequence[float]) -> float:
        """The aggregate of one config's per-set times: inf if any set failed, nan if one was
        not measured (out of time), else geomean / max of the (relative) times."""
        if any(ms == math.inf for ms in row):
            return math.inf
        if any(math.isnan(ms) for ms in row):
            return math.nan
        references = self._ensure_references()
        values = [max(ms / ref, _SMALLEST_MS) for ms, ref in zip(row, references, strict=True)]
        if self.aggregation == "max":
            return max(values)
        return math.exp(sum(math.log(v) for v in values) / len(values))

    def _scored(self, configs: Sequence[Any], rows: list[list[float]]) -> list[float]:
        scores = []
        for config, row in zip(configs, rows, strict=True):
            if all(math.isfinite(ms) for ms in row):
                self.set_times[config_key(config)] = list(row)
            scores.append(self.score(row))
        return scores

    def evaluate(self, configs: Sequence[Any]) -> list[float]:
        self._ensure_references()
        rows = self._per_set(configs, lambda harness, chunk: harness.evaluate(chunk))
        scores = self._scored(configs, rows)
        if self.progress is not None:
            for value in scores:
                if not math.isnan(value):  # nan: not measured (out of time)
                    self.progress.record(value, failed=not math.isfinite(value))
        return scores

    def rebenchmark(self, configs: Sequence[Any], rounds: int = 5) -> list[float]:
        rows = self._per_set(
            configs, lambda harness, chunk: harness.rebenchmark(chunk, rounds=rounds)
        )
        return self._scored(configs, rows)


def multi_score(aggregation: str, relative_to: str | None) -> Score:
    """How the progress display and the final line show an ``autotune_multi`` score: the
    aggregate of per-set times is in ms, of relative times a ratio."""
    if relative_to is None:
        return Score(label=f"best {aggregation}")
    return Score(label=f"best {aggregation} vs {relative_to}", ratio=True)


# ------------------------------------------------------------------------------ cache key
def _describe_arg(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{value.dtype}{list(value.shape)}@{value.device.type}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_describe_arg(v) for v in value) + "]"
    return (
        repr(value)
        if isinstance(value, (int, float, bool, str, type(None)))
        else type(value).__name__
    )


def multi_key_parts(
    bounds: Sequence[Any],
    arg_sets: Sequence[tuple[Any, ...]],
    settings: Any,
    *,
    aggregation: str,
    relative_to: str | None,
    cache_tag: str | None,
) -> dict[str, str]:
    """Key parts of an ``autotune_multi`` entry: each part shared by every set as is, a part
    that differs as the list of the sets' values, the arguments of every set (under
    ``static_shapes=False`` sizes are not in the specialization key, yet the result depends on
    them), the aggregation and the tag."""
    per_set = [key_parts_of(bound, settings) for bound in bounds]
    merged: dict[str, str] = {}
    for name in sorted({name for parts in per_set for name in parts}):
        values = [parts.get(name) for parts in per_set]
        merged[name] = values[0] if all(v == values[0] for v in values) else json.dumps(values)
    merged["arg_sets"] = json.dumps([[_describe_arg(value) for value in args] for args in arg_sets])
    merged["multi"] = json.dumps(
        {"aggregation": aggregation, "relative_to": relative_to, "cache_tag": cache_tag},
        sort_keys=True,
    )
    return merged


# ------------------------------------------------------------------------------ entry point
def autotune_multi(
    kernel: Any,
    arg_sets: Sequence[Sequence[Any]],
    *,
    aggregation: str = "geomean",
    relative_to: str | None = None,
    cache_tag: str | None = None,
    force: bool = True,
    **options: Any,
) -> Any:
    """See :meth:`helion.Kernel.autotune_multi`."""
    _check_choices(aggregation, relative_to, cache_tag)
    check_search_options(options)
    sets = _checked_arg_sets(kernel, arg_sets)
    bounds = [kernel.bind(args) for args in sets]
    settings = kernel.settings
    name = str(kernel.name)
    log = AutotuneLog(settings, kernel_name=name)
    space = shared_space([bound.config_spec for bound in bounds])

    effort = options.pop("effort", None)
    search = options.pop("search", None)
    effort_name = normalize_effort(
        effort if effort is not None else getattr(settings, "autotune_effort", "full")
    )
    # a misspelt option is refused before the cache is read
    search_cls = driver._search_class_to_check(search, settings, effort_name)
    if search_cls is not None:
        check_option_names(
            options,
            search_cls,
            where="autotune_multi()",
            also=("force", "effort", "search", "aggregation", "relative_to", "cache_tag"),
        )
    if effort_name == "none":
        config = space.normalize(space.default_config())
        log.info("%s: autotune_effort='none', using the default config %s", name, config)
        _install(bounds, sets, config)
        return config

    cache = _multi_cache(bounds, sets, settings, space, log, aggregation, relative_to, cache_tag)
    force = force or bool(getattr(settings, "force_autotune", False))
    if cache is not None and not force:
        hit = cache.get()
        if hit is not None:
            log.debug("%s: using cached autotune_multi config %s (%s)", name, hit, cache.path)
            _install(bounds, sets, hit)
            return hit

    for bound, args in zip(bounds, sets, strict=True):
        driver._check_plugins_allow_tuning(bound, tuple(args))
    profile_for_seeds = driver._profile_for(effort_name, settings)
    seeds: list[Any] = []
    for bound in {id(b): b for b in bounds}.values():
        own_cache = driver._open_cache(bound, settings, log)
        seeds.extend(
            driver._seed_configs(bound, settings, own_cache, effort_name, profile_for_seeds, log)
        )
    log.info(
        "%s: autotune_multi over %d argument set(s), score %s of %s times",
        name,
        len(sets),
        aggregation,
        "raw" if relative_to is None else f"{relative_to}-relative",
    )
    evaluators: list[MultiSetEvaluator] = []

    def make_evaluator(profile: EffortProfile, progress: AutotuneProgress) -> MultiSetEvaluator:
        from helion.autotuner.benchmarking import BenchmarkHarness

        harnesses = []
        csv_base = getattr(settings, "autotune_log", None)
        for index, (bound, args) in enumerate(zip(bounds, sets, strict=True)):
            # no progress: the evaluator records each config's score, not each set's time
            harness = BenchmarkHarness(bound, args, settings=settings, profile=profile, log=log)
            if csv_base:
                harness._csv_path = f"{csv_base}.set{index}"  # one CSV per argument set
            harnesses.append(harness)
        evaluator = MultiSetEvaluator(
            harnesses,
            aggregation=aggregation,
            relative_to=relative_to,
            default_configs=[bound.config_spec.default_config() for bound in bounds],
            baseline_fn=getattr(settings, "autotune_baseline_fn", None),
            profile=profile,
            progress=progress,
        )
        evaluators.append(evaluator)
        return evaluator

    with contextlib.ExitStack() as stack:
        # tuning launches the kernel many times: keep the caller's CPU generator where it was
        stack.enter_context(torch.random.fork_rng(devices=[]))
        with driver._run_log(log, bounds[0], cache):
            winner, tuned = driver._tune(
                bounds[0],
                sets[0],
                effort_name,
                search,
                cache,
                log,
                options,
                space=space,
                seeds=seeds,
                config_filter=_member_filter(bounds, settings, log),
                make_evaluator=make_evaluator,
                score=multi_score(aggregation, relative_to),
            )
    per_set = evaluators[-1].set_times.get(config_key(winner)) if evaluators else None
    if per_set is not None:
        score = multi_score(aggregation, relative_to)
        log.info(
            "%s: autotune_multi winner: score %s (%s), per set %s ms",
            name,
            score.format(tuned.best_time),
            score.label.removeprefix("best "),
            ", ".join(f"{ms:.5f}" for ms in per_set),
        )
    _install(bounds, sets, winner)
    if cache is not None:
        try:
            cache.put(
                winner,
                time_ms=tuned.best_time if relative_to is None else None,
                score=tuned.best_time,
                set_times_ms=per_set,
                search=tuned.name,
                effort=effort_name,
                seed=tuned.seed,
                evaluations=tuned.evaluations,
                tuning_seconds=round(tuned.elapsed(), 3),
            )
        except OSError as error:
            log.warning("%s: could not write the autotune cache (%s)", name, error)
    return winner


def _multi_cache(
    bounds: list[Any],
    sets: list[tuple[Any, ...]],
    settings: Any,
    space: Any,
    log: AutotuneLog,
    aggregation: str,
    relative_to: str | None,
    cache_tag: str | None,
) -> AutotuneCache | None:
    try:
        parts = multi_key_parts(
            bounds,
            sets,
            settings,
            aggregation=aggregation,
            relative_to=relative_to,
            cache_tag=cache_tag,
        )
        cache = AutotuneCache(
            bounds[0],
            settings=settings,
            key_parts=parts,
            config_spec=space,
            label=f"multi-{cache_tag}" if cache_tag else "multi",
        )
    except Exception as error:
        log.debug("autotune cache unavailable: %s", error)
        return None
    return cache if cache.enabled else None


def _install(bounds: list[Any], sets: list[tuple[Any, ...]], config: Any) -> None:
    """Make ``config`` the config of every set's bound kernel (later calls run it)."""
    done: set[int] = set()
    for bound, args in zip(bounds, sets, strict=True):
        if id(bound) in done:
            continue
        done.add(id(bound))
        with bound._trace_args.using(args):
            bound.set_config(config)
