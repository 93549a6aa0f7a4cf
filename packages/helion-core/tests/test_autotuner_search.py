"""Searches over real ConfigSpecs with synthetic cost functions whose optimum is known.

The matmul-like spec has 3 block sizes, loop order, L2 grouping, a reduction loop, 3 indexing
choices, num_warps, num_stages and pid_type (about 1.75e9 configs).  The cost is smooth in the
log2 block sizes with an interaction (the best num_warps depends on the tile area), small
categorical effects (1-6 %) and an infeasible region (huge tiles fail), like real kernels.
"""

from __future__ import annotations

import contextlib
import math
import time

import pytest

from helion import exc
from helion.autotuner.config_fragment import EnumFragment
from helion.autotuner.config_fragment import PermutationFragment
from helion.autotuner.config_fragment import ReductionLoopFragment
from helion.autotuner.config_spec import ConfigSpec
from helion.autotuner.effort import FULL
from helion.autotuner.effort import QUICK
from helion.autotuner.effort import get_effort_profile
from helion.autotuner.effort import normalize_effort
from helion.autotuner.search import BaseSearch
from helion.autotuner.search import CallableEvaluator
from helion.autotuner.search import DifferentialEvolutionSearch
from helion.autotuner.search import FiniteSearch
from helion.autotuner.search import PatternSearch
from helion.autotuner.search import RandomForestRegressor
from helion.autotuner.search import RandomSearch
from helion.autotuner.search import SurrogateSearch
from helion.autotuner.search import config_key
from helion.autotuner.search import get_search
from helion.autotuner.search import register_search
from helion.autotuner.search import search_algorithms
from helion.runtime.config import Config

PID_FACTOR = {"flat": 1.0, "xyz": 1.06, "persistent_blocked": 0.95, "persistent_interleaved": 0.97}
INDEXING_FACTOR = {"pointer": 1.0, "block_ptr": 0.99, "tensor_descriptor": 0.97}


def matmul_like_spec() -> ConfigSpec:
    spec = ConfigSpec()
    for _ in range(3):
        spec.add_block_size(4096)
    spec.append("loop_orders", PermutationFragment(2))
    spec.append("l2_groupings")
    spec.append("reduction_loops", ReductionLoopFragment(8192))
    for _ in range(3):
        spec.append("indexing")
    spec.set_scalar("num_warps")
    spec.set_scalar("num_stages")
    spec.set_scalar("pid_type")
    return spec


def matmul_like_cost(config: Config) -> float:
    m, n, k = config["block_sizes"]
    if m * n * k > 2**19:
        raise RuntimeError("tile does not fit in shared memory")
    log2 = math.log2
    cost = 1.0
    cost *= 1 + 0.15 * (log2(m) - 7) ** 2
    cost *= 1 + 0.15 * (log2(n) - 6) ** 2
    cost *= 1 + 0.10 * (log2(k) - 5) ** 2
    cost *= 1 + 0.10 * (log2(config["num_warps"]) - log2(max(1, m * n // 2048))) ** 2
    cost *= 1 + 0.05 * (config["num_stages"] - 3) ** 2
    cost *= PID_FACTOR[config["pid_type"]]
    for choice in config["indexing"]:
        cost *= INDEXING_FACTOR[choice]
    cost *= 0.98 if config["loop_orders"][0] == [1, 0] else 1.0
    cost *= 1 + 0.02 * (log2(config["l2_groupings"][0]) - 3) ** 2
    chunk = config.get("reduction_loops", [None])[0]
    cost *= 1.0 if chunk is None else 1 + 0.01 * (13 - log2(chunk))
    return cost


OPTIMUM = Config(
    block_sizes=[128, 64, 32],
    loop_orders=[[1, 0]],
    l2_groupings=[8],
    reduction_loops=[None],
    indexing=["tensor_descriptor"] * 3,
    num_warps=4,
    num_stages=3,
    pid_type="persistent_blocked",
)
OPTIMUM_COST = matmul_like_cost(matmul_like_spec().normalize(OPTIMUM))


def small_spec() -> ConfigSpec:
    spec = ConfigSpec()
    spec.add_block_size(64, min_size=8)  # 8..64: 4 values
    spec.add_block_size(32, min_size=8)  # 8..32: 3 values
    spec.set_scalar("num_warps", EnumFragment((1, 2, 4, 8)))
    spec.set_scalar("pid_type", EnumFragment(("flat", "persistent_blocked")))
    return spec  # 96 configs


def small_cost(config: Config) -> float:
    a, b = config["block_sizes"]
    return (
        1.0
        + abs(math.log2(a) - 5)
        + 0.5 * abs(math.log2(b) - 4)
        + 0.25 * abs(math.log2(config["num_warps"]) - 1)
        + (0.0 if config["pid_type"] == "persistent_blocked" else 0.1)
    )


def evaluations_to_reach(search: BaseSearch, target: float) -> int | None:
    for trial in search.history:
        if trial.ok and trial.time_ms <= target:
            return trial.index + 1
    return None


def run(
    cls: type[BaseSearch], spec: ConfigSpec, cost, *, seed: int = 0, profile=FULL, **options
) -> BaseSearch:
    search = cls(
        spec,
        CallableEvaluator(cost),
        profile=profile,
        seed=seed,
        seed_configs=[spec.default_config()],
        budget_seconds=None,
        **options,
    )
    search.run()
    return search


# ----------------------------------------------------------------------------- sanity of the setup
def test_synthetic_optimum_is_the_true_minimum_of_its_neighbourhood() -> None:
    spec = matmul_like_spec()
    optimum = spec.normalize(OPTIMUM)
    for neighbor in spec.neighbors(optimum):
        with contextlib.suppress(RuntimeError):
            assert matmul_like_cost(neighbor) > OPTIMUM_COST
    assert spec.config_size() > 10**9


# ----------------------------------------------------------------------------- each search finds it
def test_surrogate_finds_the_optimum_within_400_evaluations() -> None:
    spec = matmul_like_spec()
    search = run(SurrogateSearch, spec, matmul_like_cost, seed=2)
    assert search.best_time == pytest.approx(OPTIMUM_COST)
    assert search.best_config == spec.normalize(OPTIMUM)
    assert search.evaluations <= 400
    assert search.model_fits >= 1 and search.candidates_scored > 10 * search.evaluations


def test_pattern_search_finds_the_optimum_within_1000_evaluations() -> None:
    spec = matmul_like_spec()
    search = run(
        PatternSearch,
        spec,
        matmul_like_cost,
        seed=1,
        initial_population=20,
        copies=2,
        max_evaluations=1000,
        max_generations=60,
    )
    assert search.best_time == pytest.approx(OPTIMUM_COST)
    assert search.evaluations <= 1000


def test_differential_evolution_finds_the_optimum_within_4000_evaluations() -> None:
    spec = matmul_like_spec()
    search = run(
        DifferentialEvolutionSearch,
        spec,
        matmul_like_cost,
        seed=0,
        max_evaluations=4000,
        max_generations=200,
        patience=30,
    )
    assert search.best_time == pytest.approx(OPTIMUM_COST)
    assert search.evaluations <= 4000


def test_random_search_finds_the_optimum_of_a_small_space() -> None:
    spec = small_spec()
    assert spec.config_size() == 96
    search = run(RandomSearch, spec, small_cost, seed=0, count=96, max_evaluations=96)
    assert search.best_time == pytest.approx(1.0)
    assert search.evaluations <= 96


@pytest.mark.parametrize("cls", [SurrogateSearch, PatternSearch, DifferentialEvolutionSearch])
def test_small_space_optimum_found_quickly(cls: type[BaseSearch]) -> None:
    search = run(cls, small_spec(), small_cost, seed=3, max_evaluations=60)
    assert search.best_time == pytest.approx(1.0)


# ----------------------------------------------------------------------------- efficiency
def test_surrogate_needs_fewer_evaluations_than_random_search_for_the_same_quality() -> None:
    spec = matmul_like_spec()
    target = 1.25 * OPTIMUM_COST
    surrogate = run(SurrogateSearch, spec, matmul_like_cost, seed=1, max_evaluations=150)
    random_search = run(
        RandomSearch, spec, matmul_like_cost, seed=1, count=400, max_evaluations=400
    )
    surrogate_needed = evaluations_to_reach(surrogate, target)
    random_needed = evaluations_to_reach(random_search, target)
    assert surrogate_needed is not None and surrogate_needed <= 150
    assert random_needed is None or random_needed > surrogate_needed
    assert surrogate.best_time < random_search.best_time


def test_quick_profile_is_small_and_improves_on_its_seeds() -> None:
    spec = matmul_like_spec()
    heuristics = [
        Config(block_sizes=[64, 64, 32], num_warps=4, num_stages=2),
        Config(block_sizes=[128, 128, 32], num_warps=8, num_stages=3),
    ]
    best_seed = min(matmul_like_cost(spec.normalize(h)) for h in heuristics)
    search = SurrogateSearch(
        spec,
        CallableEvaluator(matmul_like_cost),
        profile=QUICK,
        seed=0,
        seed_configs=[spec.default_config(), *heuristics],
        budget_seconds=None,
    )
    search.run()
    assert search.evaluations <= QUICK.max_evaluations <= 48
    assert search.best_time < 0.9 * best_seed


# ----------------------------------------------------------------------------- reproducibility & budget
@pytest.mark.parametrize(
    "cls", [SurrogateSearch, PatternSearch, DifferentialEvolutionSearch, RandomSearch]
)
def test_same_seed_same_search(cls: type[BaseSearch]) -> None:
    spec = matmul_like_spec()
    first = run(cls, spec, matmul_like_cost, seed=7, profile=QUICK)
    second = run(cls, spec, matmul_like_cost, seed=7, profile=QUICK)
    assert [config_key(t.config) for t in first.history] == [
        config_key(t.config) for t in second.history
    ]
    third = run(cls, spec, matmul_like_cost, seed=8, profile=QUICK)
    assert [config_key(t.config) for t in first.history] != [
        config_key(t.config) for t in third.history
    ]


_HISTORY_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import test_autotuner_search as t
from helion.autotuner.search import SurrogateSearch, config_key
search = t.run(SurrogateSearch, t.matmul_like_spec(), t.matmul_like_cost, seed=1, max_evaluations=60)
print([config_key(trial.config) for trial in search.history])
"""


def test_same_seed_same_search_in_processes_of_other_hash_seeds() -> None:
    # the surrogate's crossover walked a set of config keys, whose order follows
    # PYTHONHASHSEED: one seed gave other searches in other processes
    import os
    import subprocess
    import sys
    from pathlib import Path

    histories = []
    for hash_seed in ("1", "13"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", _HISTORY_SCRIPT, str(Path(__file__).parent)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        histories.append(done.stdout)
    assert histories[0] == histories[1]


def test_every_measured_config_is_valid_and_measured_once() -> None:
    spec = matmul_like_spec()
    search = run(SurrogateSearch, spec, matmul_like_cost, seed=4, profile=QUICK)
    keys = [config_key(t.config) for t in search.history]
    assert len(keys) == len(set(keys))
    for trial in search.history:
        assert spec.normalize(trial.config) == trial.config


def test_evaluation_budget_is_respected() -> None:
    spec = matmul_like_spec()
    evaluator = CallableEvaluator(matmul_like_cost)
    search = SurrogateSearch(
        spec, evaluator, profile=FULL, seed=0, max_evaluations=23, budget_seconds=None
    )
    search.run()
    assert search.evaluations == evaluator.calls == 23


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
@pytest.mark.parametrize(
    "cls", [SurrogateSearch, PatternSearch, DifferentialEvolutionSearch, RandomSearch]
)
def test_a_cap_below_one_evaluation_is_refused_where_it_is_given(
    cls: type[BaseSearch], bad: object
) -> None:
    # max_evaluations=0 / -1 measured nothing and ended in "NoConfigFound: ... measured 0
    # config(s), all failed ... Failures: none recorded"
    evaluator = CallableEvaluator(small_cost)
    with pytest.raises(exc.InvalidSetting, match=r"max_evaluations: expected an int >= 1"):
        cls(small_spec(), evaluator, profile=QUICK, seed=0, max_evaluations=bad)
    assert evaluator.calls == 0
    configs = [Config(block_sizes=[8, 8]), Config(block_sizes=[16, 16])]
    with pytest.raises(exc.InvalidSetting, match="max_evaluations"):
        FiniteSearch(small_spec(), evaluator, configs=configs, max_evaluations=bad)
    # a cap of 1 is the smallest that measures something
    search = cls(small_spec(), evaluator, profile=QUICK, seed=0, max_evaluations=1)
    search.run()
    assert search.evaluations == 1 and search.best_config is not None


@pytest.mark.parametrize("bad", [-1.5, float("nan"), True])
def test_a_negative_time_budget_is_refused_where_it_is_given(bad: object) -> None:
    evaluator = CallableEvaluator(small_cost)
    with pytest.raises(exc.InvalidSetting, match=r"budget_seconds: expected seconds >= 0"):
        SurrogateSearch(small_spec(), evaluator, profile=QUICK, seed=0, budget_seconds=bad)
    assert evaluator.calls == 0


def test_time_budget_returns_best_so_far() -> None:
    spec = matmul_like_spec()

    def slow_cost(config: Config) -> float:
        time.sleep(0.01)
        return matmul_like_cost(config)

    start = time.perf_counter()
    search = PatternSearch(
        spec, CallableEvaluator(slow_cost), profile=FULL, seed=0, budget_seconds=0.5
    )
    best = search.run()
    assert time.perf_counter() - start < 3.0
    assert best is not None and math.isfinite(search.best_time)
    assert search.evaluations < FULL.max_evaluations


def test_seed_configs_are_measured_first_and_overrides_apply() -> None:
    spec = matmul_like_spec()
    seed_config = Config(block_sizes=[128, 64, 32], num_warps=4)
    search = SurrogateSearch(
        spec,
        CallableEvaluator(matmul_like_cost),
        profile=QUICK,
        seed=0,
        seed_configs=[seed_config],
        config_overrides={"num_stages": 3},
        budget_seconds=None,
    )
    search.run()
    assert search.history[0].config == spec.normalize(
        Config(block_sizes=[128, 64, 32], num_warps=4, num_stages=3)
    )
    assert all(t.config["num_stages"] == 3 for t in search.history)


def test_seeds_are_a_batch_of_their_own() -> None:
    # a random config that hangs its first run must not hold the heuristic configs' batch back
    class BatchRecorder(CallableEvaluator):
        def __init__(self, cost):
            super().__init__(cost)
            self.batches: list[list] = []

        def evaluate(self, configs):
            self.batches.append(list(configs))
            return super().evaluate(configs)

    spec = matmul_like_spec()
    seeds = [
        Config(block_sizes=[128, 64, 32], num_warps=4),
        Config(block_sizes=[64, 64, 32], num_warps=8),
    ]
    evaluator = BatchRecorder(matmul_like_cost)
    search = SurrogateSearch(
        spec, evaluator, profile=QUICK, seed=0, seed_configs=seeds, budget_seconds=None
    )
    search.run()
    assert evaluator.batches[0] == [spec.normalize(s) for s in seeds]
    assert len(evaluator.batches[1]) > 0
    assert not {config_key(c) for c in evaluator.batches[1]} & {
        config_key(c) for c in evaluator.batches[0]
    }


def test_config_filter_drops_candidates() -> None:
    spec = matmul_like_spec()
    search = RandomSearch(
        spec,
        CallableEvaluator(matmul_like_cost),
        profile=QUICK,
        seed=0,
        budget_seconds=None,
        config_filter=lambda c: None if c["pid_type"] == "xyz" else c,
    )
    search.run()
    assert search.history and all(t.config["pid_type"] != "xyz" for t in search.history)


@pytest.mark.parametrize("search_cls", [RandomSearch, SurrogateSearch])
def test_a_seed_the_filter_refuses_is_dropped_and_counted(search_cls) -> None:
    # the backend's config_problem refuses some seeds on a GPU (rows that would spill): the
    # search must start from the others, not fail while preparing them
    spec = matmul_like_spec()
    seeds = [Config(block_sizes=[128, 64, 32], pid_type="xyz"), Config(block_sizes=[64, 64, 32])]
    search = search_cls(
        spec,
        CallableEvaluator(matmul_like_cost),
        profile=QUICK,
        seed=0,
        seed_configs=seeds,
        budget_seconds=None,
        config_filter=lambda c: None if c["pid_type"] == "xyz" else c,
    )
    assert search.invalid_candidates == 1
    assert search.seed_configs == [spec.normalize(seeds[1])]
    search.run()
    assert search.history[0].config == spec.normalize(seeds[1])


def test_all_failures_raise_no_config_found() -> None:
    def broken(config: Config) -> float:
        raise RuntimeError("nothing compiles")

    search = RandomSearch(
        small_spec(), CallableEvaluator(broken), profile=QUICK, seed=0, budget_seconds=None
    )
    with pytest.raises(exc.NoConfigFound):
        search.run()


class FirstPassNoise(CallableEvaluator):
    """The first pass scales the true cost by ``noise(config)``; the re-benchmark tells the truth
    (and records what it was asked to re-time)."""

    def __init__(self, true_cost, noise) -> None:
        super().__init__(true_cost)
        self.noise = noise
        self.rebenchmarked: list[Config] = []

    def evaluate(self, configs):
        times = super().evaluate(configs)
        return [t * self.noise(c) for c, t in zip(configs, times, strict=True)]

    def rebenchmark(self, configs):
        self.rebenchmarked = list(configs)
        return [self.cost(c) for c in configs]


def test_rebenchmark_of_leaders_picks_the_stable_winner() -> None:
    # the first pass flatters one config
    evaluator = FirstPassNoise(
        small_cost, lambda c: 0.9 if c["block_sizes"] == [16, 16] and c["num_warps"] == 2 else 1.0
    )
    spec = small_spec()
    search = RandomSearch(
        spec,
        evaluator,
        profile=FULL.replace(rebenchmark_threshold=1.5),
        seed=0,
        count=96,
        max_evaluations=96,
    )
    best = search.run()
    assert len(evaluator.rebenchmarked) >= 2
    assert small_cost(best) == pytest.approx(1.0)


def test_rebenchmark_gives_a_seed_crowded_out_by_the_leaders_neighbours_a_second_look() -> None:
    """The seed is truly fastest, but its first pass came out 6% slow, behind seven configs
    within 2% of each other: the top k alone would re-time only those."""
    seed = Config(block_sizes=[32, 16], num_warps=2, pid_type="persistent_blocked")

    def true_cost(config: Config) -> float:
        if config_key(config) == config_key(seed):
            return 1.0
        return 1.02 if config["block_sizes"] == [32, 16] else 2.0 + small_cost(config)

    evaluator = FirstPassNoise(
        true_cost, lambda c: 1.06 if config_key(c) == config_key(seed) else 1.0
    )
    search = RandomSearch(
        small_spec(),
        evaluator,
        profile=QUICK.replace(rebenchmark_top_k=4, rebenchmark_threshold=1.15),
        seed=0,
        seed_configs=[seed],
        count=96,
        max_evaluations=96,
        budget_seconds=None,
    )
    best = search.run()
    keys = [config_key(c) for c in evaluator.rebenchmarked]
    assert len(keys) == 5 and config_key(seed) in keys  # four leaders and the seed
    assert config_key(best) == config_key(seed)
    assert search.best_time == pytest.approx(1.0)


def test_rebenchmark_candidates_keep_the_threshold_and_the_cap() -> None:
    spec = small_spec()
    configs = [
        Config(block_sizes=[a, b], num_warps=w, pid_type="flat")
        for a in (8, 16, 32, 64)
        for b in (8, 16, 32)
        for w in (1, 2)
    ]  # 24 distinct configs, measured in this order with times 1.00, 1.01, ...
    times = {config_key(spec.normalize(c) or c): 1.0 + 0.01 * i for i, c in enumerate(configs)}

    def cost(config: Config) -> float:
        return times[config_key(config)]

    seeds = [*configs[10:], configs[5]]  # 1.10 .. 1.23 and 1.05
    search = RandomSearch(
        spec,
        CallableEvaluator(cost),
        profile=QUICK.replace(rebenchmark_top_k=3, rebenchmark_threshold=1.125),
        seed_configs=seeds,
        max_evaluations=len(configs),
        budget_seconds=None,
    )
    search.evaluate(configs)
    picked = [round(t.time_ms, 2) for t in search.rebenchmark_candidates()]
    # the top three, then at most three more seeds, fastest first, none above 1.125 x best
    assert picked == [1.0, 1.01, 1.02, 1.05, 1.10, 1.11]


# ----------------------------------------------------------------------------- finite search
def test_finite_search_benchmarks_exactly_the_given_configs() -> None:
    spec = small_spec()
    configs = [
        Config(block_sizes=[8, 8]),
        Config(block_sizes=[32, 16], num_warps=2),
        Config(block_sizes=[64, 32]),
    ]
    evaluator = CallableEvaluator(small_cost)
    search = FiniteSearch(spec, evaluator, configs=configs, profile=QUICK)
    best = search.run()
    assert evaluator.calls == 3
    assert best == spec.normalize(configs[1])


def test_finite_search_needs_two_configs() -> None:
    with pytest.raises(exc.NotEnoughConfigs):
        FiniteSearch(
            small_spec(), CallableEvaluator(small_cost), configs=[Config(block_sizes=[8, 8])]
        )


def test_finite_search_rejects_invalid_config() -> None:
    with pytest.raises(exc.InvalidConfig):
        FiniteSearch(
            small_spec(),
            CallableEvaluator(small_cost),
            configs=[Config(block_sizes=[8, 8]), Config(block_sizes=[8])],
        )


# ----------------------------------------------------------------------------- registry & effort
def test_registry_names_aliases_and_registration() -> None:
    assert {"surrogate", "pattern", "differential_evolution", "random", "finite"} <= set(
        search_algorithms()
    )
    assert get_search(None) is SurrogateSearch
    assert get_search("PatternSearch") is PatternSearch
    assert get_search("LFBOTreeSearch") is SurrogateSearch
    assert get_search("de") is DifferentialEvolutionSearch
    assert get_search("differential-evolution") is DifferentialEvolutionSearch
    with pytest.raises(ValueError, match="unknown autotune search"):
        get_search("simulated_annealing")

    @register_search("first_seed_only")
    class FirstSeedOnly(BaseSearch):
        def _search(self) -> None:
            self.evaluate(self.seed_configs[:1])

    assert get_search("first_seed_only") is FirstSeedOnly
    spec = small_spec()
    search = FirstSeedOnly(
        spec, CallableEvaluator(small_cost), seed_configs=[spec.default_config()]
    )
    assert search.run() == spec.default_config()
    with pytest.raises(TypeError):
        register_search("not_a_search", dict)  # type: ignore[arg-type]


def test_plugin_searches_are_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    import helion.autotuner.search as search_module

    class PluginSearch(RandomSearch):
        name = "from_plugin"

    monkeypatch.setattr(
        search_module,
        "_plugin_searches",
        lambda: {"from_plugin": PluginSearch, "random": PluginSearch},
    )
    merged = search_algorithms()
    assert merged["from_plugin"] is PluginSearch
    assert merged["random"] is PluginSearch  # a plugin may replace a built-in by name
    assert get_search("from_plugin") is PluginSearch


def test_effort_profiles() -> None:
    assert normalize_effort("high") == "full"
    assert normalize_effort("QUICK") == "quick"
    assert get_effort_profile("none").max_evaluations == 0
    quick, full = get_effort_profile("quick"), get_effort_profile("full")
    assert quick.max_evaluations <= 48 < full.max_evaluations
    assert (
        quick.surrogate_pool_random + quick.surrogate_pool_mutations >= 20 * quick.max_evaluations
    )
    assert quick.budget_seconds is not None and quick.budget_seconds < full.budget_seconds
    with pytest.raises(ValueError):
        normalize_effort("medium")


def test_random_forest_learns_a_simple_function() -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (200, 6))
    y = (X[:, 0] - 0.3) ** 2 + 0.5 * X[:, 1]
    model = RandomForestRegressor(16, seed=0).fit(X, y)
    X_test = rng.uniform(0, 1, (300, 6))
    mean, spread = model.predict(X_test)
    truth = (X_test[:, 0] - 0.3) ** 2 + 0.5 * X_test[:, 1]
    assert np.corrcoef(mean, truth)[0, 1] > 0.9
    assert spread.shape == mean.shape and (spread >= 0).all()


def test_an_exception_in_the_config_filter_reaches_the_caller() -> None:
    # a bug in the user's autotune_config_filter was swallowed: every candidate was "rejected by
    # the config spec" and the search ended in NoConfigFound, hiding the user's exception
    def buggy_filter(config: Config) -> Config:
        raise KeyError("my filter's bug")

    search = RandomSearch(
        small_spec(),
        CallableEvaluator(small_cost),
        profile=QUICK,
        seed=0,
        budget_seconds=None,
        config_filter=buggy_filter,
    )
    with pytest.raises(KeyError, match="my filter's bug"):
        search.run()


def test_a_filter_that_refuses_everything_is_named_in_no_config_found() -> None:
    search = RandomSearch(
        small_spec(),
        CallableEvaluator(small_cost),
        profile=QUICK,
        seed=0,
        budget_seconds=None,
        config_filter=lambda config: None,
    )
    with pytest.raises(exc.NoConfigFound, match="by the config filter"):
        search.run()
    assert search.filtered_candidates == search.invalid_candidates > 0
