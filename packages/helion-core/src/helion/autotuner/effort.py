"""Effort profiles: how much searching each ``autotune_effort`` level buys.

``none``  -- no search: the spec's default config.
``quick`` -- built to finish in seconds to a minute: the surrogate model screens a few thousand
             encoded candidates and only a few dozen are compiled and timed.
``full``  -- a thorough search (hundreds of timed candidates, more generations, wider rebenchmark).

Every number a search reads lives here, so a search class never hard-codes an effort decision.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

#: the spellings ``Settings(autotune_effort=...)`` / ``HELION_AUTOTUNE_EFFORT`` accept, and no
#: others: ``kernel.autotune(args, effort="low")`` used to tune while the setting refused "low"
EFFORT_ALIASES = {"high": "full"}
EFFORT_LEVELS = ("none", "quick", "full")


@dataclass(frozen=True)
class EffortProfile:
    name: str
    #: search used when neither the caller nor settings.autotune_search names one
    default_search: str = "surrogate"
    #: hard cap on timed candidates for any search (seeds included)
    max_evaluations: int = 400
    #: wall-clock cap in seconds for the search phase (None: no cap besides max_evaluations)
    budget_seconds: float | None = None
    #: leaders within ``threshold * best`` are re-timed (interleaved) before a winner is picked
    rebenchmark_threshold: float = 1.5
    #: at most this many leaders are re-timed
    rebenchmark_top_k: int = 8
    #: target milliseconds of kernel time per timing (first pass) and per rebenchmark round
    benchmark_target_ms: float = 25.0
    rebenchmark_target_ms: float = 100.0
    #: configs handed to the harness at once (so precompilation runs them in parallel)
    batch_size: int = 16
    #: cached configs of the same kernel at other shapes used as extra seeds
    warm_start_configs: int = 8

    # random search
    random_count: int = 400

    # pattern search
    pattern_initial_population: int = 60
    pattern_copies: int = 5
    pattern_max_generations: int = 20
    pattern_neighbors_cap: int = 40
    pattern_min_improvement: float = 0.001

    # differential evolution
    de_population: int = 40
    de_max_generations: int = 40
    de_crossover: float = 0.8
    de_patience: int = 4

    # surrogate-guided search (the default)
    surrogate_initial: int = 24
    surrogate_batch: int = 8
    surrogate_max_generations: int = 40
    surrogate_patience: int = 4
    surrogate_pool_random: int = 600
    surrogate_pool_mutations: int = 600
    surrogate_trees: int = 32
    surrogate_min_improvement: float = 0.005

    def replace(self, **changes: object) -> EffortProfile:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


NONE = EffortProfile(name="none", max_evaluations=0)

QUICK = EffortProfile(
    name="quick",
    max_evaluations=40,
    # the anchor's quick effort takes 77-97 s on the H200 for matmul/softmax/rms_norm; we aim at
    # no more than half of that, everything included
    budget_seconds=35.0,
    rebenchmark_threshold=1.15,
    rebenchmark_top_k=4,
    benchmark_target_ms=15.0,
    rebenchmark_target_ms=60.0,
    batch_size=12,
    random_count=40,
    pattern_initial_population=12,
    pattern_copies=2,
    pattern_max_generations=5,
    pattern_neighbors_cap=12,
    de_population=12,
    de_max_generations=3,
    de_patience=2,
    # 8 timed to start (seeds first), then 8 rounds of 4 picked from ~1,000 screened candidates
    # each: small rounds let every measurement steer the next pick
    surrogate_initial=8,
    surrogate_batch=4,
    surrogate_max_generations=8,
    surrogate_patience=3,
    surrogate_pool_random=500,
    surrogate_pool_mutations=500,
    surrogate_trees=24,
)

FULL = EffortProfile(name="full", budget_seconds=600.0)

PROFILES = {"none": NONE, "quick": QUICK, "full": FULL}


def normalize_effort(effort: str | None) -> str:
    """Map a user spelling (``high``, ``QUICK``) to one of ``none|quick|full``."""
    if effort is None:
        return "full"
    try:
        from helion.runtime.settings import parse_autotune_effort
    except ImportError:
        parse_autotune_effort = None  # type: ignore[assignment]
    if parse_autotune_effort is not None:
        # one parser for the setting and the effort= argument: same spellings, same error
        # (helion.exc.InvalidSetting, a ValueError)
        return parse_autotune_effort(effort, "effort")
    name = effort.strip().lower() if isinstance(effort, str) else None
    name = EFFORT_ALIASES.get(name, name) if name is not None else None
    if name not in PROFILES:
        raise ValueError(
            f"unknown autotune effort {effort!r}; expected one of {', '.join(EFFORT_LEVELS)} "
            "('high' is accepted as 'full')"
        )
    return name


def get_effort_profile(effort: str | None) -> EffortProfile:
    return PROFILES[normalize_effort(effort)]
