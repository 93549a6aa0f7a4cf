"""Fault injection: candidates that fail to compile, crash, hang, return wrong results or run out
of memory, corrupt cache files and concurrent tuners -- every run must end in a valid config.

The kernel is a fake bound kernel on CPU with the BoundKernel surface the autotuner uses.  Its
"time" comes from a simulated clock (each run adds the config's cost), so rankings are exact.
"""

from __future__ import annotations

import json
import logging
import math
import multiprocessing
import os
import re
import signal
import time
import warnings
from pathlib import Path
from typing import Any
from typing import Callable

import pytest
import torch

from helion import exc
from helion.autotuner import cache as cache_module
from helion.autotuner.benchmarking import BenchmarkHarness
from helion.autotuner.benchmarking import CandidateTimeout
from helion.autotuner.benchmarking import call_with_timeout
from helion.autotuner.benchmarking import clone_args
from helion.autotuner.config_spec import ConfigSpec
from helion.autotuner.driver import autotune
from helion.autotuner.effort import QUICK
from helion.runtime.config import Config
from helion.runtime.settings import Settings

FORK_AVAILABLE = "fork" in multiprocessing.get_all_start_methods()
needs_fork = pytest.mark.skipif(not FORK_AVAILABLE, reason="needs the fork start method")


# ============================================================================ the fake kernel
class SimulatedClock:
    def __init__(self) -> None:
        self.ms = 0.0


class FakeBackend:
    name = "fake"

    def __init__(self, clock: SimulatedClock) -> None:
        self.clock = clock

    def version(self) -> str:
        return "1.0"

    def benchmark(
        self, fn: Callable[[], object], *, device: Any, repeat: int | None = None
    ) -> float:
        repeat = repeat or 5
        fn()
        start = self.clock.ms
        for _ in range(repeat):
            fn()
        return (self.clock.ms - start) / repeat


def busy_hang() -> None:
    # a Python-level hang (the in-process watchdog can interrupt it; a child is simply killed)
    end = time.time() + 600
    while time.time() < end:
        pass


def cost_of(config: Config) -> float:
    block = config["block_sizes"][0]
    warps = config["num_warps"]
    return 1.0 + abs(math.log2(block) - 4) + 0.5 * abs(math.log2(warps) - 2)


class FakeKernel:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeBound:
    """``out[:] = x + 1`` (in place, and returned).  ``faults`` maps (block, warps) to a fault."""

    def __init__(
        self,
        *,
        settings: Settings,
        faults: dict[tuple[int, int], str] | None = None,
        name: str = "fake_add",
        source_hash: str = "src-v1",
        shape: tuple[int, ...] = (16,),
        seeds: list[Config] | None = None,
        reference: tuple[str, str] | None = None,
    ) -> None:
        spec = ConfigSpec()
        spec.add_block_size(256)
        spec.set_scalar("num_warps")
        self.config_spec = spec
        self.settings = settings
        self.kernel = FakeKernel(name)
        self.clock = SimulatedClock()
        self.backend = FakeBackend(self.clock)
        self.device = torch.device("cpu")
        self.faults = dict(faults or {})
        self.source_hash = source_hash
        self.shape = shape
        self.seeds = list(seeds or [])
        self.reference = reference
        self.compiles = 0

    def seed_configs(self) -> list[Config]:
        return list(self.seeds)

    def cache_key(self) -> dict[str, str]:
        return {
            "kernel_source_hash": self.source_hash,
            "specialization_key": f"float32{list(self.shape)}",
            "backend": "fake 1.0",
            "device": "cpu",
            "torch": torch.__version__,
        }

    def format_kernel_decorator(self, config: Config) -> str:
        return f"@helion.kernel(config={config!r})"

    def importable_ref(self) -> tuple[str, str] | None:
        return self.reference

    def compile_config(self, config: Config) -> Callable[..., Any]:
        self.compiles += 1
        key = (config["block_sizes"][0], config["num_warps"])
        fault = self.faults.get(key)
        if fault == "compile":
            raise RuntimeError("simulated compile failure: out of registers")
        if fault == "compile_hang":
            busy_hang()
        cost = cost_of(config)
        clock = self.clock

        def run(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
            if fault == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)
            if fault == "exit":
                os._exit(7)
            if fault == "hang":
                busy_hang()
            if fault == "oom":
                raise MemoryError("simulated: cannot allocate 80 GiB")
            if fault == "raise":
                raise ValueError("simulated runtime failure")
            clock.ms += cost * (0.1 if fault == "wrong" else 1.0)
            out.copy_(x + (5 if fault == "wrong" else 1))
            return out

        return run


class FakeKernelObject:
    """What ``importable_ref()`` points at: a module-level kernel with ``bind(args)``."""

    def __init__(self, faults: dict[tuple[int, int], str]) -> None:
        self.faults = faults
        self.settings = make_settings()

    def bind(self, args: tuple[Any, ...]) -> FakeBound:
        return FakeBound(settings=self.settings, faults=self.faults)


def make_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = dict(
        autotune_effort="quick",
        autotune_progress_bar=False,
        autotune_log_level=0,
        autotune_compile_timeout=5,
        autotune_benchmark_timeout=1,
        autotune_precompile_jobs=2,
        autotune_random_seed=0,
    )
    values.update(overrides)
    return Settings(**values)


def make_args() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.arange(16, dtype=torch.float32), torch.zeros(16)


def config(block: int, warps: int) -> Config:
    return Config(block_sizes=[block], num_warps=warps)


# the fastest configs are all broken; the best working ones, (16, 1) and the default (32, 4),
# cost 2.0
FAULTS = {
    (16, 4): "wrong",
    (16, 2): "segv",
    (8, 4): "exit",
    (32, 2): "oom",
    (16, 8): "hang",
    (4, 4): "compile",
    (16, 16): "raise",
}
BEST_VALID_COST = 2.0


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HELION_SKIP_CACHE", raising=False)
    monkeypatch.delenv("HELION_FORCE_AUTOTUNE", raising=False)
    return tmp_path / "cache"


def silenced() -> Any:
    context = warnings.catch_warnings(record=True)
    return context


# ============================================================================ harness
@needs_fork
def test_every_fault_is_recorded_with_its_reason_in_forked_children() -> None:
    bound = FakeBound(settings=make_settings(), faults=FAULTS)
    args = make_args()
    harness = BenchmarkHarness(bound, args, profile=QUICK)
    candidates = [config(b, w) for (b, w) in FAULTS] + [config(16, 32)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        times = harness.evaluate(candidates)
    assert harness.isolation == "fork"
    by_config = {(r.config["block_sizes"][0], r.config["num_warps"]): r for r in harness.results}
    expected = {
        (16, 4): ("inaccurate", "max abs diff"),
        (16, 2): ("crash", "SIGSEGV"),
        (8, 4): ("crash", "code 7"),
        (32, 2): ("oom", "MemoryError"),
        (16, 8): ("timeout", "did not finish within 1s"),
        (4, 4): ("compile_error", "simulated compile failure"),
        (16, 16): ("error", "ValueError"),
    }
    for key, (status, words) in expected.items():
        assert by_config[key].status == status, (key, by_config[key])
        assert words in by_config[key].reason
    assert times[:-1] == [math.inf] * len(FAULTS)
    assert times[-1] == pytest.approx(cost_of(config(16, 32)))
    # crashes, hangs, wrong results and exceptions are reported; compile errors and OOM are routine
    reported = [w for w in caught if isinstance(w.message, exc.AutotuneCandidateFailed)]
    assert len(reported) == 5
    assert torch.equal(args[1], torch.zeros(16)), "the caller's in-place output must stay untouched"


@needs_fork
def test_compile_hang_times_out() -> None:
    bound = FakeBound(
        settings=make_settings(autotune_compile_timeout=1), faults={(64, 4): "compile_hang"}
    )
    harness = BenchmarkHarness(bound, make_args(), profile=QUICK)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = harness.evaluate([config(64, 4), config(16, 4)])
    assert times[0] == math.inf and math.isfinite(times[1])
    assert harness.results[0].status == "timeout"
    assert "compile did not finish" in harness.results[0].reason


def test_in_process_isolation_survives_python_level_faults() -> None:
    faults = {key: kind for key, kind in FAULTS.items() if kind not in ("segv", "exit")}
    bound = FakeBound(settings=make_settings(), faults=faults)
    harness = BenchmarkHarness(bound, make_args(), profile=QUICK, isolation="inprocess")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = harness.evaluate([config(b, w) for (b, w) in faults] + [config(16, 1)])
    statuses = [r.status for r in harness.results]
    assert statuses == ["inaccurate", "oom", "timeout", "compile_error", "error", "ok"]
    assert times[-1] == pytest.approx(cost_of(config(16, 1)))


def test_watchdog_interrupts_and_then_disarms() -> None:
    with pytest.raises(CandidateTimeout):
        call_with_timeout(busy_hang, 0.3)
    assert call_with_timeout(lambda: 42, 0.5) == 42
    time.sleep(0.7)  # a stale watchdog firing now would raise here
    assert call_with_timeout(lambda: "fine", None) == "fine"


@needs_fork
def test_default_config_crash_disables_the_accuracy_check_but_tuning_succeeds() -> None:
    settings = make_settings()
    bound = FakeBound(settings=settings, faults={(32, 4): "segv"})  # (32, 4) is the default config
    assert bound.config_spec.default_config() == config(32, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        best = autotune(bound, make_args())
    assert best != config(32, 4)
    assert cost_of(best) <= cost_of(config(32, 8))


@needs_fork
def test_autotune_with_every_fault_returns_a_valid_accurate_config() -> None:
    bound = FakeBound(
        settings=make_settings(), faults=FAULTS, seeds=[config(16, 4), config(16, 2), config(8, 4)]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        best = autotune(bound, make_args(), search="pattern", max_evaluations=54)
    key = (best["block_sizes"][0], best["num_warps"])
    assert key not in FAULTS
    assert cost_of(best) == pytest.approx(BEST_VALID_COST)


@pytest.mark.parametrize("search", ["surrogate", "pattern", "differential_evolution", "random"])
@needs_fork
def test_every_search_survives_faults(search: str) -> None:
    bound = FakeBound(settings=make_settings(), faults=FAULTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        best = autotune(bound, make_args(), search=search, force=True, max_evaluations=20)
    assert (best["block_sizes"][0], best["num_warps"]) not in FAULTS
    bound.config_spec.normalize(best)


def test_ignore_errors_silences_candidate_warnings() -> None:
    bound = FakeBound(
        settings=make_settings(autotune_ignore_errors=True), faults={(16, 4): "raise"}
    )
    harness = BenchmarkHarness(bound, make_args(), profile=QUICK, isolation="inprocess")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        harness.evaluate([config(16, 4), config(8, 8)])
    assert not [w for w in caught if isinstance(w.message, exc.AutotuneCandidateFailed)]
    assert harness.failures[0].status == "error"


def test_all_candidates_failing_raises_no_config_found_with_reasons() -> None:
    every = {(1 << b, 1 << w): "raise" for b in range(9) for w in range(6)}
    bound = FakeBound(settings=make_settings(autotune_accuracy_check=False), faults=every)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc.NoConfigFound) as info:
            autotune(bound, make_args(), search="random", max_evaluations=6)
    assert "error" in str(info.value) and "ValueError" in str(info.value)


# ============================================================================ spawn workers
SPAWN_FAULTS = {(16, 4): "segv", (16, 8): "hang", (8, 4): "wrong"}
SPAWN_KERNEL = FakeKernelObject(SPAWN_FAULTS)


@pytest.mark.slow
def test_spawned_workers_survive_a_segfault_and_a_hang() -> None:
    bound = FakeBound(
        settings=make_settings(autotune_precompile="spawn", autotune_precompile_jobs=1),
        faults=SPAWN_FAULTS,
        reference=(
            __file__,
            "SPAWN_KERNEL",
        ),  # loaded by path: pytest's importlib mode names aren't importable
    )
    harness = BenchmarkHarness(bound, make_args(), profile=QUICK)
    with harness, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = harness.evaluate([config(16, 4), config(16, 8), config(8, 4), config(16, 2)])
        assert harness.isolation == "spawn"
    statuses = [r.status for r in harness.results]
    assert statuses == ["crash", "timeout", "inaccurate", "ok"], [
        (r.status, r.reason) for r in harness.results
    ]
    assert times[-1] == pytest.approx(cost_of(config(16, 2)))


@pytest.mark.slow
def test_workers_that_cannot_start_fall_back_to_in_process_screening() -> None:
    bound = FakeBound(
        settings=make_settings(autotune_precompile="spawn", autotune_precompile_jobs=1),
        reference=(__file__, "NO_SUCH_KERNEL"),
    )
    harness = BenchmarkHarness(bound, make_args(), profile=QUICK)
    with harness, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = harness.evaluate([config(16, 4), config(8, 2)])
    assert harness.isolation == "inprocess"
    assert [r.status for r in harness.results] == ["ok", "ok"]
    assert times == [pytest.approx(cost_of(config(16, 4))), pytest.approx(cost_of(config(8, 2)))]


# ============================================================================ cache faults
def test_corrupt_cache_file_is_ignored_with_a_warning_and_retuned(private_cache: Path) -> None:
    bound = FakeBound(settings=make_settings())
    entry = cache_module.AutotuneCache(bound)
    entry.path.parent.mkdir(parents=True, exist_ok=True)
    entry.path.write_text('{"version": 1, "config": {"block_sizes": [1')  # a torn write
    with pytest.warns(exc.CacheCorrupt, match="not valid JSON"):
        best = autotune(bound, make_args(), search="random", max_evaluations=10)
    bound.config_spec.normalize(best)
    assert json.loads(entry.path.read_text())["config"] == dict(best)
    compiles = bound.compiles
    assert autotune(bound, make_args()) == best  # the re-tuned entry is used
    assert bound.compiles == compiles


def test_cache_entry_with_an_unknown_field_is_stale(private_cache: Path) -> None:
    bound = FakeBound(settings=make_settings())
    entry = cache_module.AutotuneCache(bound)
    entry.put(Config(block_sizes=[16], num_warps=4, not_a_tunable=3), time_ms=1.0)
    with pytest.warns(exc.CacheCorrupt, match="stale"):
        assert entry.get() is None
    with pytest.warns(exc.CacheCorrupt):
        best = autotune(bound, make_args(), search="random", max_evaluations=5)
    assert entry.get() == best


def _hammer_cache(directory: str, worker: int, rounds: int) -> None:
    os.environ["HELION_CACHE_DIR"] = directory
    bound = FakeBound(settings=make_settings())
    entry = cache_module.AutotuneCache(bound)
    for i in range(rounds):
        entry.put(config(1 << (i % 8), 1 << worker), time_ms=float(i), writer=worker)


@needs_fork
def test_concurrent_writers_never_corrupt_the_entry(private_cache: Path) -> None:
    context = multiprocessing.get_context("fork")
    writers = [
        context.Process(target=_hammer_cache, args=(str(private_cache), w, 60)) for w in (1, 2)
    ]
    for process in writers:
        process.start()
    bound = FakeBound(settings=make_settings())
    entry = cache_module.AutotuneCache(bound)
    seen = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", exc.CacheCorrupt)  # a torn read would raise here
        while any(p.is_alive() for p in writers):
            found = entry.get()
            if found is not None:
                seen += 1
                assert found["num_warps"] in (2, 4)
    for process in writers:
        process.join()
        assert process.exitcode == 0
    final = json.loads(entry.path.read_text())
    assert final["writer"] in (1, 2) and final["key"] == entry.key
    assert not list(private_cache.glob("autotune/.*.tmp")), "no temporary files are left behind"


def _tune_in_child(directory: str, results: Any) -> None:
    os.environ["HELION_CACHE_DIR"] = directory
    bound = FakeBound(settings=make_settings())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        best = autotune(bound, make_args(), search="random", max_evaluations=12)
    results.put((dict(best), bound.compiles))


@needs_fork
def test_two_processes_tuning_the_same_kernel_agree_and_tune_once(private_cache: Path) -> None:
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    tuners = [
        context.Process(target=_tune_in_child, args=(str(private_cache), results)) for _ in range(2)
    ]
    for process in tuners:
        process.start()
    outcomes = [results.get(timeout=120) for _ in tuners]
    for process in tuners:
        process.join(timeout=30)
        assert process.exitcode == 0
    (first, first_compiles), (second, second_compiles) = outcomes
    assert first == second
    assert min(first_compiles, second_compiles) == 0, (
        "the second tuner reuses the first one's result"
    )
    bound = FakeBound(settings=make_settings())
    assert cache_module.AutotuneCache(bound).get() == Config(**first)


def test_clone_args_keeps_strides_and_protects_inputs() -> None:
    base = torch.arange(12.0).reshape(3, 4).t()  # non-contiguous
    cloned = clone_args((base, [base], {"k": base}, 3))
    assert cloned[0].stride() == base.stride() and cloned[0].data_ptr() != base.data_ptr()
    cloned[0].add_(1)
    assert torch.equal(base, torch.arange(12.0).reshape(3, 4).t())
    assert cloned[3] == 3 and cloned[1][0].data_ptr() != base.data_ptr()


def test_first_run_timeout_follows_the_budget_and_then_the_samples() -> None:
    import time

    from helion.autotuner.benchmarking import BenchmarkHarness

    harness = BenchmarkHarness.__new__(BenchmarkHarness)  # only the timeout policy is exercised
    harness.adaptive_timeout, harness.run_timeout = True, 30.0
    harness.deadline, harness._first_run_seconds = None, []
    assert harness._first_run_timeout() == 30.0  # no budget, no samples: the configured limit
    harness.deadline = time.perf_counter() + 30.0  # a quick search's share of 35 s
    assert harness._first_run_timeout() == 10.0  # a hung first run may not take it all
    harness.deadline = time.perf_counter() + 600.0
    assert harness._first_run_timeout() == 30.0
    harness._first_run_seconds = [0.5] * 9 + [4.0]  # ten samples: 3 x their 0.9 quantile
    assert harness._first_run_timeout() == 12.0
    harness.adaptive_timeout = False
    assert harness._first_run_timeout() == 30.0


class PickyBackend(FakeBackend):
    """Knows, without compiling, that blocks over 64 cannot work (like a tile size limit)."""

    def __init__(self, clock: SimulatedClock) -> None:
        super().__init__(clock)
        self.asked = 0
        self.rejected = 0

    def config_problem(self, ir: Any, config: Config, device: Any) -> str | None:
        self.asked += 1
        if config["block_sizes"][0] > 64:
            self.rejected += 1
            return "a block over 64 is over the fake limit"
        return None


class CountingBound(FakeBound):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.backend = PickyBackend(self.clock)
        self.compiled_blocks: list[int] = []

    def compile_config(self, config: Config) -> Callable[..., Any]:
        self.compiled_blocks.append(config["block_sizes"][0])
        return super().compile_config(config)


@pytest.mark.parametrize("search", ["random", "surrogate"])
def test_configs_the_backend_rejects_are_never_compiled(search: str) -> None:
    seen_by_user: list[int] = []

    def user_filter(candidate: Config) -> Config:
        seen_by_user.append(candidate["block_sizes"][0])
        return candidate

    settings = make_settings(autotune_config_filter=user_filter)
    bound = CountingBound(settings=settings)
    best = autotune(bound, make_args(), search=search, force=True, max_evaluations=16)
    # blocks 128 and 256 are 2 of the 9 block values: a search of 16 meets some of them
    assert bound.backend.rejected > 0
    assert bound.compiled_blocks and max(bound.compiled_blocks) <= 64
    # the user's filter only sees what the backend let through
    assert seen_by_user and max(seen_by_user) <= 64
    assert best["block_sizes"][0] <= 64 and math.isfinite(cost_of(best))


def test_a_hanging_default_config_costs_the_baseline_no_more_than_a_first_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the accuracy baseline (the default config) ran with the configured 30 s run timeout,
    # before a quick search's 35 s budget: a default config that hangs made a quick tune of a
    # Triton kernel take 51-61 s. It now gets a candidate's first-run limit (a third of the
    # search time left), here scaled down
    import helion.autotuner.benchmarking as benchmarking

    monkeypatch.setattr(benchmarking, "ADAPTIVE_RUN_FLOOR", 0.3)
    bound = FakeBound(
        settings=make_settings(autotune_benchmark_timeout=20), faults={(32, 4): "hang"}
    )
    assert bound.config_spec.default_config() == config(32, 4)
    harness = BenchmarkHarness(bound, make_args(), profile=QUICK, isolation="inprocess")
    harness.deadline = time.perf_counter() + 1.2
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        harness.prepare()
    assert time.perf_counter() - start < 5.0
    assert harness.baseline is None  # the check is off, as for any failing default config


@pytest.mark.parametrize("isolation", ["inprocess", pytest.param("fork", marks=needs_fork)])
def test_a_default_config_that_hung_the_baseline_is_not_run_again(
    monkeypatch: pytest.MonkeyPatch, isolation: str
) -> None:
    # searches seed the default config: after hanging the baseline it hung again as a candidate
    import helion.autotuner.benchmarking as benchmarking

    monkeypatch.setattr(benchmarking, "ADAPTIVE_RUN_FLOOR", 0.3)
    bound = FakeBound(
        settings=make_settings(autotune_benchmark_timeout=20), faults={(32, 4): "hang"}
    )
    harness = BenchmarkHarness(bound, make_args(), profile=QUICK, isolation=isolation)
    harness.deadline = time.perf_counter() + 1.2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        harness.prepare()
        compiles = bound.compiles
        times = harness.evaluate([config(32, 4), config(16, 4)])
    assert times[0] == math.inf and math.isfinite(times[1])
    assert harness.results[0].status == "timeout"
    assert "accuracy baseline" in harness.results[0].reason
    if isolation == "inprocess":
        assert bound.compiles == compiles + 1  # only (16, 4) was compiled


# ============================================================================ many hangs
# of the 54 configs, only those with 4 warps or a block of 32 run; the 40 others hang, the
# fastest of all ((16, 2) and (16, 8)) among them
BLOCKS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
WARPS = (1, 2, 4, 8, 16, 32)
MANY_HANGS = {(b, w): "hang" for b in BLOCKS for w in WARPS if w != 4 and b != 32}
HANG_BUDGET = 6.0
#: fork/kill overheads on a loaded 2-core machine; a hang used to cost 10 s alone
HANG_SLACK = 3.5


@pytest.mark.parametrize("isolation", [pytest.param("fork", marks=needs_fork), "inprocess"])
def test_a_quick_search_full_of_hanging_configs_ends_within_its_budget(
    isolation: str, caplog: pytest.LogCaptureFixture
) -> None:
    # the configured limits (30 s first run, 60 s compile): each hung candidate used to cost
    # the first-run floor (10 s) or more, so a quick search meeting a few dozen of them ran for
    # minutes past its budget
    settings = make_settings(
        autotune_benchmark_timeout=30,
        autotune_compile_timeout=60,
        autotune_precompile="fork" if isolation == "fork" else None,
        autotune_log_level=logging.INFO,
    )
    bound = FakeBound(settings=settings, faults=MANY_HANGS)
    start = time.perf_counter()
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="helion.autotuner"):
        warnings.simplefilter("ignore")
        best = autotune(bound, make_args(), force=True, budget_seconds=HANG_BUDGET)
    elapsed = time.perf_counter() - start
    assert elapsed < HANG_BUDGET + HANG_SLACK, f"took {elapsed:.1f}s for a {HANG_BUDGET}s budget"
    key = (best["block_sizes"][0], best["num_warps"])
    assert key not in MANY_HANGS, f"a hanging config won: {best}"
    assert math.isfinite(cost_of(best))
    # the candidates killed unfinished are in the summary line
    [done] = [r.getMessage() for r in caplog.records if "autotuning done" in r.getMessage()]
    assert re.search(r"\d+ (of them timed out|still running at the time budget)", done), done


class WarningInChildBound(FakeBound):
    """Warns, in a screening child only, when a config compiles: as a backend that warns once
    per process does in every child it runs in (Triton's unusable HELION_CACHE_DIR)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.parent = os.getpid()

    def compile_config(self, config: Config) -> Callable[..., Any]:
        if os.getpid() != self.parent:
            warnings.warn(f"cannot use the cache for {config}", UserWarning, stacklevel=1)
        return super().compile_config(config)


@needs_fork
def test_a_warning_every_screening_child_raises_is_shown_once_by_the_parent() -> None:
    bound = WarningInChildBound(settings=make_settings())
    harness = BenchmarkHarness(bound, make_args(), profile=QUICK, isolation="fork")
    with harness, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        times = harness.evaluate([config(16, 4), config(8, 2), config(64, 1), config(4, 8)])
    assert all(math.isfinite(t) for t in times)
    shown = [str(w.message) for w in caught if "cannot use the cache" in str(w.message)]
    assert len(shown) == 1, shown
