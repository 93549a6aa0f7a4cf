"""Surrogate-guided search, the default.

Compiling and timing a candidate costs seconds; scoring one with a model costs microseconds.  So:

1. measure the seeds plus a small random sample;
2. each generation, fit a random forest (:mod:`.forest`) on log(time) of everything measured so
   far (failed configs get a penalty so the model learns to steer away from them);
3. build a large pool of unmeasured candidates: greedy descents *on the model* from the leaders,
   one-step neighbours of the leaders, 1-4 step mutations and key-wise crossovers of the
   leaders, and random configs;
4. measure only the few the model likes best (``mean - kappa * spread``, a small share with a
   larger kappa to keep exploring), with part of every batch reserved for the leader's
   unmeasured one-step neighbours -- effects of a few percent are below what the model
   resolves, and after a generation without progress the whole batch goes there;
5. stop when the budget is spent, or when the best time has not improved for ``patience``
   generations and the leader's whole neighbourhood has been measured.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from helion.autotuner.search.base import BaseSearch
from helion.autotuner.search.base import config_key
from helion.autotuner.search.base import make_config
from helion.autotuner.search.forest import RandomForestRegressor

# A failed config is scored as this many log-units (e ~ 2.7x) slower than the slowest good one.
FAILURE_PENALTY = 1.0


class SurrogateSearch(BaseSearch):
    name = "surrogate"

    def __init__(
        self,
        config_spec: Any,
        evaluator: Any,
        *,
        initial: int | None = None,
        batch: int | None = None,
        pool_random: int | None = None,
        pool_mutations: int | None = None,
        patience: int | None = None,
        trees: int | None = None,
        leaders: int = 6,
        **kwargs: Any,
    ) -> None:
        super().__init__(config_spec, evaluator, **kwargs)
        p = self.profile
        self.initial = p.surrogate_initial if initial is None else initial
        self.batch = max(1, p.surrogate_batch if batch is None else batch)
        self.pool_random = p.surrogate_pool_random if pool_random is None else pool_random
        self.pool_mutations = (
            p.surrogate_pool_mutations if pool_mutations is None else pool_mutations
        )
        self.patience = p.surrogate_patience if patience is None else patience
        self.trees = p.surrogate_trees if trees is None else trees
        self.leaders = leaders
        self._encodings: dict[str, list[float]] = {}
        self._entries: list[Any] | None = None
        self.model_fits = 0
        self.candidates_scored = 0

    # ------------------------------------------------------------------ model
    def _encode(self, key: str, config: Any) -> list[float]:
        vector = self._encodings.get(key)
        if vector is None:
            vector = [float(v) for v in self.spec.encode(config)]
            self._encodings[key] = vector
        return vector

    def _training_data(self) -> tuple[np.ndarray, np.ndarray] | None:
        ok = [t for t in self.history if t.ok]
        if len(ok) < 2:
            return None
        logs = np.log([max(t.time_ms, 1e-9) for t in ok])
        penalty = float(logs.max()) + FAILURE_PENALTY
        rows, targets = [], []
        for trial in self.history:
            rows.append(self._encode(config_key(trial.config), trial.config))
            targets.append(math.log(max(trial.time_ms, 1e-9)) if trial.ok else penalty)
        return np.asarray(rows, dtype=np.float64), np.asarray(targets, dtype=np.float64)

    def _fit(self) -> RandomForestRegressor | None:
        data = self._training_data()
        if data is None:
            return None
        X, y = data
        self.model_fits += 1
        model = RandomForestRegressor(
            self.trees,
            min_samples_leaf=1 if len(y) < 60 else 2,
            feature_fraction=0.8,
            seed=self.rng.getrandbits(32),
        )
        return model.fit(X, y)

    # ------------------------------------------------------------------ candidates
    def _flat_entries(self) -> list[Any] | None:
        if self._entries is None:
            try:
                self._entries = list(self.spec.flat_fields())
            except Exception:
                self._entries = []
        return self._entries or None

    def _mutate(self, config: Any, changes: int) -> Any:
        """Change ``changes`` random tunables of ``config`` by one or two steps each."""
        entries = self._flat_entries()
        if entries is None:
            return self._walk(config, changes)
        try:
            values = list(self.spec.flatten(config))
        except Exception:
            return None
        for _ in range(changes):
            position = self.rng.randrange(len(entries))
            options = entries[position].fragment.neighbors(
                values[position], self.rng.choice((1, 1, 2))
            )
            if options:
                values[position] = self.rng.choice(options)
        try:
            return self.spec.unflatten(values)
        except Exception:
            return None

    def _walk(self, config: Any, steps: int) -> Any:
        for _ in range(steps):
            options = list(self.spec.neighbors(config))
            if not options:
                break
            config = self.rng.choice(options)
        return config

    def _crossover(self, a: Any, b: Any) -> Any:
        mixed = {}
        # in the configs' own key order: a set's order follows PYTHONHASHSEED, and the draws
        # below would then differ between processes of one seed
        for key in [*a, *(k for k in b if k not in a)]:
            if key in a and key in b:
                mixed[key] = a[key] if self.rng.random() < 0.5 else b[key]
            else:
                mixed[key] = a[key] if key in a else b[key]
        return make_config(mixed)

    def _scores(self, model: RandomForestRegressor, configs: list[Any], kappa: float) -> np.ndarray:
        rows = [self._encode(config_key(c), c) for c in configs]
        mean, spread = model.predict(np.asarray(rows, dtype=np.float64))
        return mean - kappa * spread

    def _descend(
        self, model: RandomForestRegressor, start: Any, kappa: float, max_steps: int = 8
    ) -> list[Any]:
        """Greedy descent on the *model* from ``start``: cheap, and it walks the leaders toward
        what the model believes is better even several steps away."""
        path = []
        current = start
        current_score = float(self._scores(model, [current], kappa)[0])
        for _ in range(max_steps):
            options = list(self.spec.neighbors(current))
            if not options:
                break
            scores = self._scores(model, options, kappa)
            best = int(np.argmin(scores))
            if not scores[best] < current_score - 1e-12:
                break
            current, current_score = options[best], float(scores[best])
            path.append(current)
        return path

    def _candidate_pool(self, model: RandomForestRegressor) -> list[tuple[str, Any]]:
        """Unmeasured candidates, de-duplicated, as (key, config) pairs."""
        pool: dict[str, Any] = {}

        def add(config: Any) -> None:
            if config is None:
                return
            try:
                key = config_key(config)
            except Exception:
                return
            if key not in pool and key not in self._times:
                pool[key] = config

        leaders = [t.config for t in self.ranked(self.leaders)]
        if leaders:
            for start in leaders[:3]:
                for config in self._descend(model, start, 0.5):
                    add(config)
            for leader in leaders[:3]:
                for neighbor in self.spec.neighbors(leader):
                    add(neighbor)
            for _ in range(self.pool_mutations):
                parent = self.rng.choice(leaders)
                if len(leaders) >= 2 and self.rng.random() < 0.3:
                    other = self.rng.choice([c for c in leaders if c is not parent] or leaders)
                    add(self._mutate(self._crossover(parent, other), self.rng.choice((0, 1))))
                else:
                    add(self._mutate(parent, self.rng.choice((1, 2, 2, 3, 4))))
        for _ in range(self.pool_random):
            add(self.spec.random_config(self.rng))
        return list(pool.items())

    # ------------------------------------------------------------------ selection
    def _local_candidates(self) -> list[tuple[str, Any]]:
        """Unmeasured one-step neighbours of the best two configs.

        Small effects (a 2% eviction policy) are below what the model can resolve; always
        spending part of each batch on the leader's neighbourhood guarantees they get tried.
        """
        found: dict[str, Any] = {}
        for trial in self.ranked(2):
            for neighbor in self.spec.neighbors(trial.config):
                key = config_key(neighbor)
                if key not in self._times:
                    found.setdefault(key, neighbor)
        return list(found.items())

    def _pick(
        self,
        model: RandomForestRegressor,
        candidates: list[tuple[str, Any]],
        limit: int,
        kappa: float,
        chosen: list[Any],
        chosen_keys: set[str],
    ) -> None:
        """Append the best-scoring candidates (``mean - kappa * spread``) until ``chosen`` has ``limit``."""
        if len(chosen) >= limit or not candidates:
            return
        rows, kept = [], []
        for key, config in candidates:
            try:
                rows.append(self._encode(key, config))
                kept.append(config)
            except Exception:
                continue  # a candidate the encoding cannot represent is not worth measuring
        if not kept:
            return
        self.candidates_scored += len(kept)
        mean, spread = model.predict(np.asarray(rows, dtype=np.float64))
        for index in np.argsort(mean - kappa * spread, kind="stable"):
            if len(chosen) >= limit:
                return
            prepared = self.prepare(kept[int(index)])
            if prepared is None:
                continue
            key = config_key(prepared)
            if key in chosen_keys or key in self._times:
                continue  # normalization mapped it onto something already known
            chosen_keys.add(key)
            chosen.append(prepared)

    def _select(self, model: RandomForestRegressor, count: int, stalled: bool) -> list[Any]:
        chosen: list[Any] = []
        chosen_keys: set[str] = set()
        # after a generation without progress, finish the leader's neighbourhood first: the
        # model may be confidently wrong about a tunable it has hardly seen varied
        local_count = count if stalled else count // 2
        explore_count = max(1, count // 5) if count >= 4 else 0
        self._pick(model, self._local_candidates(), local_count, 0.5, chosen, chosen_keys)
        pool = self._candidate_pool(model)
        self._pick(model, pool, count - explore_count, 0.5, chosen, chosen_keys)
        self._pick(model, pool, count, 2.0, chosen, chosen_keys)
        return chosen

    # ------------------------------------------------------------------ search
    def _search(self) -> None:
        population = self.initial_population(self.initial)
        seeds = len({config_key(c) for c in self.seed_configs})
        # the seeds form a batch of their own: a random config that hangs its first run must
        # not take the heuristic configs down with the rest of the batch
        self.evaluate(population[:seeds])
        if population[seeds:] and self.budget_left():
            self.evaluate(population[seeds:])
        stalled = 0
        for generation in range(1, self.generations(self.profile.surrogate_max_generations) + 1):
            self.generation = generation
            if not self.budget_left():
                return
            count = min(self.batch, self.evaluations_left())
            model = self._fit()
            if model is None:
                # fewer than two working configs: the model has nothing to learn from yet
                measured = self.evaluations
                self.evaluate(self.random_configs(count))
                if self.evaluations == measured:
                    return
                continue
            if len(self._encodings) > 50_000:
                # candidates of past generations are not needed again; keep measured ones
                self._encodings = {k: v for k, v in self._encodings.items() if k in self._times}
            chosen = self._select(model, count, stalled > 0)
            if not chosen:
                return  # the space is exhausted
            before = self.best_time
            self.evaluate(chosen)
            if self.improved(before, self.profile.surrogate_min_improvement):
                stalled = 0
            else:
                stalled += 1
                # stop only once the leader is a local optimum: every neighbour measured
                if stalled >= self.patience and not self._local_candidates():
                    return
