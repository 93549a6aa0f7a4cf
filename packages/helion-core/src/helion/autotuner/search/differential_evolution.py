"""Differential evolution over the spec's numeric encoding (rand/1/bin, dithered F)."""

from __future__ import annotations

import math
from typing import Any

from helion.autotuner.search.base import BaseSearch
from helion.autotuner.search.base import config_key


class DifferentialEvolutionSearch(BaseSearch):
    name = "differential_evolution"

    def __init__(
        self,
        config_spec: Any,
        evaluator: Any,
        *,
        population_size: int | None = None,
        crossover: float | None = None,
        patience: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(config_spec, evaluator, **kwargs)
        p = self.profile
        self.population_size = max(
            4, p.de_population if population_size is None else population_size
        )
        self.crossover = p.de_crossover if crossover is None else crossover
        self.patience = p.de_patience if patience is None else patience

    def _trial_vector(
        self, target: list[float], members: list[list[float]], index: int
    ) -> list[float]:
        others = [m for j, m in enumerate(members) if j != index]
        a, b, c = self.rng.sample(others, 3)
        scale = self.rng.uniform(0.5, 1.0)  # dithering keeps the step size from collapsing
        forced = self.rng.randrange(len(target))
        return [
            a[j] + scale * (b[j] - c[j])
            if (j == forced or self.rng.random() < self.crossover)
            else target[j]
            for j in range(len(target))
        ]

    def _mutate(
        self, target_config: Any, target_vec: list[float], vectors: list[list[float]], i: int
    ) -> Any:
        for _ in range(3):
            trial = self.prepare(self.spec.decode(self._trial_vector(target_vec, vectors, i)))
            if trial is not None and config_key(trial) != config_key(target_config):
                return trial
        # the encoding collapsed onto the target (e.g. identical members): step to a neighbour
        neighbors = self.neighbors(target_config)
        return self.rng.choice(neighbors) if neighbors else self.random_config()

    def _search(self) -> None:
        population = self.initial_population(self.population_size)
        times = self.evaluate(population)
        stalled = 0
        for generation in range(1, self.generations(self.profile.de_max_generations) + 1):
            self.generation = generation
            if len(population) < 4:
                population.extend(self.random_configs(4 - len(population)))
                times = self.evaluate(population)
                if len(population) < 4:
                    return  # the space is too small for DE; what was measured stands
            vectors = [list(map(float, self.spec.encode(c))) for c in population]
            trials = [
                self._mutate(population[i], vectors[i], vectors, i) for i in range(len(population))
            ]
            before = self.best_time
            trial_times = self.evaluate(trials)
            for i, (trial, ms) in enumerate(zip(trials, trial_times, strict=True)):
                if trial is not None and math.isfinite(ms) and ms <= times[i]:
                    population[i], times[i] = trial, ms
            if self.improved(before, self.profile.surrogate_min_improvement):
                stalled = 0
            else:
                stalled += 1
                if stalled >= self.patience:
                    return
