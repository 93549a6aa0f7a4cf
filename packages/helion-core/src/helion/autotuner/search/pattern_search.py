"""Pattern search: hill-climb from the best few configs by changing one tunable at a time."""

from __future__ import annotations

from typing import Any

from helion.autotuner.search.base import BaseSearch
from helion.autotuner.search.base import config_key


class PatternSearch(BaseSearch):
    """Keep the ``copies`` fastest configs as centres; each generation measures (up to
    ``neighbors_cap`` of) each centre's unmeasured one-step neighbours.  Stops when the centres'
    neighbourhoods are exhausted or the best time stops improving."""

    name = "pattern"

    def __init__(
        self,
        config_spec: Any,
        evaluator: Any,
        *,
        initial_population: int | None = None,
        copies: int | None = None,
        neighbors_cap: int | None = None,
        min_improvement: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(config_spec, evaluator, **kwargs)
        p = self.profile
        self.initial_size = (
            p.pattern_initial_population if initial_population is None else initial_population
        )
        self.copies = max(1, p.pattern_copies if copies is None else copies)
        self.neighbors_cap = p.pattern_neighbors_cap if neighbors_cap is None else neighbors_cap
        self.min_improvement = (
            p.pattern_min_improvement if min_improvement is None else min_improvement
        )

    def _search(self) -> None:
        self.evaluate(self.initial_population(self.initial_size))
        stalled = 0
        for generation in range(1, self.generations(self.profile.pattern_max_generations) + 1):
            self.generation = generation
            centres = [t.config for t in self.ranked(self.copies)]
            if not centres:
                # nothing works yet: widen the net instead of climbing
                self.evaluate(self.random_configs(self.profile.batch_size))
                continue
            before = self.best_time
            candidates = []
            seen: set[str] = set()
            for centre in centres:
                fresh = [n for n in self.neighbors(centre) if not self.is_measured(n)]
                fresh = [n for n in fresh if config_key(n) not in seen]
                self.rng.shuffle(fresh)
                fresh = fresh[: self.neighbors_cap]
                seen.update(config_key(n) for n in fresh)
                candidates.extend(fresh)
            if not candidates:
                return  # every centre is a local optimum of its full neighbourhood
            self.evaluate(candidates)
            if self.improved(before, self.min_improvement):
                stalled = 0
            else:
                stalled += 1
                # the other centres may still be moving; give them one more round
                if stalled >= 2:
                    return
