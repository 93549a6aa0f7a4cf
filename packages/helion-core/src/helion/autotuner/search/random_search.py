"""Random search: seeds plus uniformly random configs, measured in batches until the budget ends."""

from __future__ import annotations

from typing import Any

from helion.autotuner.search.base import BaseSearch


class RandomSearch(BaseSearch):
    name = "random"

    def __init__(
        self, config_spec: Any, evaluator: Any, *, count: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(config_spec, evaluator, **kwargs)
        self.count = self.profile.random_count if count is None else int(count)

    def _search(self) -> None:
        # seeds are measured first so a tiny budget still sees the default/heuristic configs
        target = min(self.count, self.max_evaluations)
        self.evaluate(self.initial_population(min(target, len(self.seed_configs))))
        batch = max(1, self.profile.batch_size)
        stalled_batches = 0
        while self.evaluations < target and self.budget_left():
            before = self.evaluations
            self.evaluate(self.random_configs(min(batch, target - self.evaluations)))
            self.generation += 1
            # a tiny space runs out of unseen configs: stop instead of spinning
            stalled_batches = stalled_batches + 1 if self.evaluations == before else 0
            if stalled_batches >= 3:
                break
