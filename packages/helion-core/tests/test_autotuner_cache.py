"""The on-disk autotune cache and the driver's use of it (hit, miss, force, skip, warm start)."""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from typing import Callable

import pytest
import torch

from helion import exc
from helion.autotuner import cache as cache_module
from helion.autotuner.config_spec import ConfigSpec
from helion.autotuner.driver import autotune
from helion.runtime.config import Config
from helion.runtime.settings import Settings


class FakeBackend:
    name = "fake"

    def __init__(self, bound: FakeBound) -> None:
        self.bound = bound

    def benchmark(
        self, fn: Callable[[], object], *, device: Any, repeat: int | None = None
    ) -> float:
        fn()
        start = self.bound.simulated_ms
        fn()
        return self.bound.simulated_ms - start


class FakeKernel:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeBound:
    """``x * 2`` with a simulated run time of |log2(block) - 5| + 1 ms (optimum: block 32)."""

    def __init__(
        self,
        settings: Settings,
        *,
        name: str = "double",
        shape: str = "f32[64]",
        source: str = "v1",
    ) -> None:
        spec = ConfigSpec()
        spec.add_block_size(1024)
        spec.set_scalar("num_warps")
        self.config_spec = spec
        self.settings = settings
        self.kernel = FakeKernel(name)
        self.backend = FakeBackend(self)
        self.device = torch.device("cpu")
        self.simulated_ms = 0.0
        self.compiles = 0
        self.shape = shape
        self.source = source

    def seed_configs(self) -> list[Config]:
        return []

    def cache_key(self) -> dict[str, str]:
        return {
            "kernel_source_hash": self.source,
            "specialization_key": self.shape,
            "backend": "fake 1.0",
            "device": "cpu",
        }

    def format_kernel_decorator(self, config: Config) -> str:
        return f"@helion.kernel(config={config!r}, static_shapes=True)"

    def importable_ref(self) -> None:
        return None

    def compile_config(self, config: Config) -> Callable[..., Any]:
        self.compiles += 1
        cost = (
            1.0
            + abs(math.log2(config["block_sizes"][0]) - 5)
            + 0.1 * abs(math.log2(config["num_warps"]) - 2)
        )

        def run(x: torch.Tensor) -> torch.Tensor:
            self.simulated_ms += cost
            return x * 2

        return run


def make_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = dict(
        autotune_effort="quick",
        autotune_progress_bar=False,
        autotune_log_level=0,
        autotune_precompile=None,  # in-process: these kernels cannot crash, and it is faster
        autotune_random_seed=0,
    )
    values.update(overrides)
    return Settings(**values)


ARGS = (torch.ones(64),)


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path / "cache"))
    for name in (
        "HELION_SKIP_CACHE",
        "HELION_FORCE_AUTOTUNE",
        "HELION_ASSERT_CACHE_HIT",
        "HELION_DISALLOW_AUTOTUNING",
    ):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "cache"


# ------------------------------------------------------------------------------- the entry itself
def test_put_then_get_round_trips_and_records_the_key_parts(private_cache: Path) -> None:
    bound = FakeBound(make_settings())
    entry = cache_module.AutotuneCache(bound)
    assert entry.get() is None
    path = entry.put(Config(block_sizes=[32], num_warps=4), time_ms=1.25, search="surrogate")
    assert path is not None and path.parent == private_cache / "autotune"
    assert path.name.startswith("double-")
    data = json.loads(path.read_text())
    assert data["key_parts"] == cache_module.key_parts_of(bound)
    assert data["time_ms"] == 1.25 and data["search"] == "surrogate" and data["created"] > 0
    assert entry.get() == Config(block_sizes=[32], num_warps=4)


def test_each_key_part_separates_entries() -> None:
    settings = make_settings()
    paths = {
        cache_module.AutotuneCache(FakeBound(settings)).path,
        cache_module.AutotuneCache(FakeBound(settings, shape="f32[128]")).path,
        cache_module.AutotuneCache(FakeBound(settings, source="v2")).path,
        cache_module.AutotuneCache(FakeBound(settings, name="other")).path,
    }
    assert len(paths) == 4


def test_stale_key_parts_and_old_versions_are_ignored_with_a_warning() -> None:
    bound = FakeBound(make_settings())
    entry = cache_module.AutotuneCache(bound)
    entry.put(Config(block_sizes=[32], num_warps=4))
    data = json.loads(entry.path.read_text())
    data["key_parts"]["device"] = "a different GPU"
    entry.path.write_text(json.dumps(data))
    with pytest.warns(exc.CacheCorrupt, match="stale: key parts differ \\(device\\)"):
        assert entry.get() is None
    data["key_parts"]["device"] = "cpu"
    data["version"] = 0
    entry.path.write_text(json.dumps(data))
    with pytest.warns(exc.CacheCorrupt, match="another cache format"):
        assert entry.get() is None
    entry.path.write_text("[1, 2, 3]")
    with pytest.warns(exc.CacheCorrupt, match="not a JSON object"):
        assert entry.get() is None


def test_config_outside_the_space_is_stale() -> None:
    bound = FakeBound(make_settings())
    entry = cache_module.AutotuneCache(bound)
    entry.put(Config(block_sizes=[32, 16], num_warps=4))  # two block sizes for a 1-D kernel
    with pytest.warns(exc.CacheCorrupt, match="does not fit"):
        assert entry.get() is None


def test_skip_cache_disables_read_and_write(
    monkeypatch: pytest.MonkeyPatch, private_cache: Path
) -> None:
    monkeypatch.setenv("HELION_SKIP_CACHE", "1")
    bound = FakeBound(make_settings())
    first = autotune(bound, ARGS, search="random", max_evaluations=8)
    compiles = bound.compiles
    second = autotune(bound, ARGS, search="random", max_evaluations=8)
    assert first == second and bound.compiles > compiles
    assert not list(private_cache.glob("autotune/*.json"))


# ------------------------------------------------------------------------------- driver + cache
def test_second_call_is_a_cache_hit_and_force_retunes() -> None:
    bound = FakeBound(make_settings())
    best = autotune(bound, ARGS)
    assert best["block_sizes"] == [32]
    compiles = bound.compiles
    assert autotune(bound, ARGS) == best
    assert bound.compiles == compiles, "a cache hit compiles nothing"
    assert autotune(bound, ARGS, force=True) == best
    assert bound.compiles > compiles


def test_force_autotune_setting_retunes(monkeypatch: pytest.MonkeyPatch) -> None:
    autotune(FakeBound(make_settings()), ARGS, search="random", max_evaluations=6)
    bound = FakeBound(make_settings(force_autotune=True))
    autotune(bound, ARGS, search="random", max_evaluations=6)
    assert bound.compiles > 0


def test_effort_none_returns_the_default_without_measuring(private_cache: Path) -> None:
    bound = FakeBound(make_settings(autotune_effort="none"))
    assert autotune(bound, ARGS) == bound.config_spec.default_config()
    assert bound.compiles == 0
    assert not private_cache.exists()


def test_effort_argument_overrides_the_setting() -> None:
    bound = FakeBound(make_settings(autotune_effort="none"))
    best = autotune(bound, ARGS, effort="high", max_evaluations=12)
    assert bound.compiles > 0 and best["block_sizes"] == [32]


def test_configs_list_is_benchmarked_and_not_cached(private_cache: Path) -> None:
    bound = FakeBound(make_settings())
    given = [
        Config(block_sizes=[8], num_warps=4),
        Config(block_sizes=[64], num_warps=4),
        Config(block_sizes=[256]),
    ]
    assert autotune(bound, ARGS, configs=given) == bound.config_spec.normalize(given[1])
    assert not list(private_cache.glob("autotune/*.json"))
    with pytest.raises(exc.NotEnoughConfigs):
        autotune(bound, ARGS, configs=given[:1])


def test_assert_cache_hit_and_disallow_autotuning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELION_ASSERT_CACHE_HIT", "1")
    with pytest.raises(exc.CacheAssertionError):
        autotune(FakeBound(make_settings()), ARGS)
    monkeypatch.delenv("HELION_ASSERT_CACHE_HIT")
    monkeypatch.setenv("HELION_DISALLOW_AUTOTUNING", "1")
    with pytest.raises(exc.AutotuningDisallowedInEnvironment):
        autotune(FakeBound(make_settings()), ARGS)


def test_user_seed_configs_and_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    seed = Config(block_sizes=[32], num_warps=4)
    bound = FakeBound(make_settings(autotune_seed_configs=[seed]))
    # a 0-second budget still measures the first batch (the seeds come first) and returns it
    best = autotune(bound, ARGS, budget_seconds=0.0, search="pattern")
    assert best == bound.config_spec.normalize(seed)


def test_warm_start_from_other_shapes(private_cache: Path) -> None:
    other_shape = FakeBound(make_settings(), shape="f32[4096]")
    cache_module.AutotuneCache(other_shape).put(Config(block_sizes=[32], num_warps=4), time_ms=1.0)
    cache_module.AutotuneCache(FakeBound(make_settings(), source="v2")).put(
        Config(block_sizes=[2], num_warps=1)
    )
    bound = FakeBound(make_settings())
    similar = cache_module.AutotuneCache(bound).similar_configs()
    assert similar == [Config(block_sizes=[32], num_warps=4)]  # not the other source's entry
    best = autotune(bound, ARGS, max_evaluations=1)  # quick effort seeds from the cache
    assert best == Config(block_sizes=[32], num_warps=4)


def test_winner_line_progress_plot_and_csv(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plot = tmp_path / "plots" / "convergence.png"
    log_base = tmp_path / "tuning"
    bound = FakeBound(
        make_settings(
            autotune_log_level=logging.INFO, autotune_plot=str(plot), autotune_log=str(log_base)
        )
    )
    with caplog.at_level(logging.INFO, logger="helion.autotuner"):
        best = autotune(bound, ARGS, max_evaluations=12)
    text = caplog.text
    assert "One can hardcode the best config and skip autotuning with:" in text
    assert f"@helion.kernel(config={best!r}, static_shapes=True)" in text
    assert "configs measured" in text
    if importlib.util.find_spec("matplotlib") is not None:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:  # matplotlib is optional: the missing plot is reported, not silent
        assert "autotune_plot needs matplotlib" in text
        assert not plot.exists()
    rows = (tmp_path / "tuning.csv").read_text().splitlines()
    assert rows[0].startswith("index,status,time_ms") and len(rows) >= 2


def test_log_level_zero_is_silent(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    with caplog.at_level(logging.DEBUG, logger="helion.autotuner"):
        autotune(
            FakeBound(make_settings(autotune_log_level=0, autotune_progress_bar=True)),
            ARGS,
            max_evaluations=6,
        )
    assert not [r for r in caplog.records if r.name == "helion.autotuner"]
    assert "hardcode" not in capsys.readouterr().err


def test_progress_bar_renders(capsys: pytest.CaptureFixture[str]) -> None:
    from helion.autotuner.progress import AutotuneLog
    from helion.autotuner.progress import AutotuneProgress

    log = AutotuneLog(make_settings(autotune_log_level=logging.INFO))
    with AutotuneProgress(log, kernel_name="double", total=3) as progress:
        progress.record(2.0, failed=False)
        progress.record(math.inf, failed=True)
    assert progress.tried == 2 and progress.failed == 1 and progress.best_ms == 2.0
    err = capsys.readouterr().err
    assert "Autotuning double" in err and "failed 1" in err


# ------------------------------------------------------------------------------- CLI helpers
def test_list_entries_and_clear(private_cache: Path) -> None:
    assert cache_module.list_entries() == [] and cache_module.clear() == 0
    cache_module.AutotuneCache(FakeBound(make_settings())).put(
        Config(block_sizes=[32], num_warps=4), time_ms=1.0
    )
    cache_module.AutotuneCache(FakeBound(make_settings(), name="other")).put(
        Config(block_sizes=[8]), time_ms=2.0
    )
    (private_cache / "autotune" / "junk-0.json").write_text("{")
    entries = cache_module.list_entries()
    assert len(entries) == 3
    good = [e for e in entries if "error" not in e]
    assert {e["kernel"] for e in good} == {"double", "other"}
    assert all(e["backend"] == "fake 1.0" and e["device"] == "cpu" for e in good)
    assert next(e for e in entries if "error" in e)["kernel"] == "junk-0.json"
    assert cache_module.clear(kernel="other") == 1
    assert cache_module.clear() == 2
    assert cache_module.list_entries() == []
    assert not list((private_cache / "autotune").glob("*.lock"))


def test_helion_cache_cli(private_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli = pytest.importorskip("helion.cli")
    cache_module.AutotuneCache(FakeBound(make_settings())).put(
        Config(block_sizes=[32], num_warps=4), time_ms=1.0
    )
    assert cli.main(["cache", "list"]) == 0
    assert "double" in capsys.readouterr().out
    assert cli.main(["cache", "clear"]) == 0
    assert "removed 1" in capsys.readouterr().out


# ------------------------------------------------------------------------------- across processes
CHILD = textwrap.dedent(
    """
    import importlib.util, json, sys, warnings
    spec = importlib.util.spec_from_file_location("cache_test_fakes", sys.argv[1])
    fakes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fakes)
    from helion.autotuner.driver import autotune
    bound = fakes.FakeBound(fakes.make_settings())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        best = autotune(bound, fakes.ARGS)
    print(json.dumps({"config": dict(best), "compiles": bound.compiles}))
    """
)


def _tune_in_fresh_process() -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, __file__],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_second_process_reuses_the_cache_without_tuning(private_cache: Path) -> None:
    first = _tune_in_fresh_process()
    assert first["compiles"] > 0
    second = _tune_in_fresh_process()
    assert second == {"config": first["config"], "compiles": 0}


def test_csv_shows_the_rebenchmark_the_winner_was_picked_from(tmp_path: Path) -> None:
    from helion.autotuner.benchmarking import BenchmarkHarness

    log_base = tmp_path / "tuning"
    bound = FakeBound(make_settings(autotune_log=str(log_base), autotune_accuracy_check=False))
    configs = [Config(block_sizes=[32], num_warps=4), Config(block_sizes=[64], num_warps=4)]
    with BenchmarkHarness(bound, ARGS, isolation="inprocess") as harness:
        first_pass = harness.evaluate(configs)
        again = harness.rebenchmark(configs, rounds=3)
    assert first_pass == [pytest.approx(1.0), pytest.approx(2.0)]
    assert again == [pytest.approx(1.0), pytest.approx(2.0)]
    rows = [line.split(",", 5) for line in (tmp_path / "tuning.csv").read_text().splitlines()]
    assert [row[:2] for row in rows[1:]] == [
        ["0", "ok"],
        ["1", "ok"],
        ["r0", "rebenchmark"],
        ["r1", "rebenchmark"],
    ]
    assert float(rows[4][2]) == pytest.approx(2.0)
    assert rows[4][4] == "samples 2.000000 2.000000 2.000000"
