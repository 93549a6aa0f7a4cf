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


def test_a_newer_formats_entry_is_a_quiet_miss_and_is_not_overwritten() -> None:
    """A shared cache used by a newer Helion too: its entries are misses here, without a
    corrupt-entry warning, and tuning here does not replace them. A `version` of `true` or
    `1.0` is no format (`True == 1` let it pass)."""
    import warnings

    entry = cache_module.AutotuneCache(FakeBound(make_settings()))
    entry.put(Config(block_sizes=[32], num_warps=4))
    data = json.loads(entry.path.read_text())
    data["version"] = cache_module.ENTRY_VERSION + 1
    entry.path.write_text(json.dumps(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert entry.get() is None
    assert entry.put(Config(block_sizes=[16], num_warps=4)) is None
    assert json.loads(entry.path.read_text()) == data
    for version in (True, 1.0):
        data["version"] = version
        entry.path.write_text(json.dumps(data))
        with pytest.warns(exc.CacheCorrupt, match="another cache format"):
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


# ------------------------------------------------------------------------------- damaged caches
def _corrupt_warnings(record: list[Any]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, exc.CacheCorrupt)]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (bytes([0xF8, 0x81, 0x00, 0xFF]) * 50, "not UTF-8 text"),
        (b"[" * 100_000, "nested too deeply"),
        (b"not json", "not valid JSON"),
    ],
)
def test_damaged_entry_is_retuned_with_one_warning(content: bytes, reason: str) -> None:
    import warnings

    bound = FakeBound(make_settings())
    best = autotune(bound, ARGS)
    entry = cache_module.AutotuneCache(bound)
    entry.path.write_bytes(content)
    bound = FakeBound(make_settings())
    # "always": the driver reads the entry twice (before and under the tuning lock), and
    # neither read may repeat the warning of the other
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert autotune(bound, ARGS) == best
    assert bound.compiles > 0, "re-tuned"
    found = _corrupt_warnings(record)
    assert len(found) == 1 and reason in found[0], found
    assert entry.get() == best, "the entry was rewritten"


def test_list_entries_reports_an_undecodable_entry(private_cache: Path) -> None:
    entry = cache_module.AutotuneCache(FakeBound(make_settings()))
    entry.put(Config(block_sizes=[32], num_warps=4))
    entry.path.write_bytes(b"\xff\xfe\x00")
    [listed] = cache_module.list_entries()
    assert "not UTF-8 text" in listed["error"]


def _cache_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "autotune cache directory" in r.getMessage()]


def test_cache_dir_that_is_a_file_tunes_without_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_directory = tmp_path / "cache-file"
    not_a_directory.write_text("x")
    monkeypatch.setenv("HELION_CACHE_DIR", str(not_a_directory))
    bound = FakeBound(make_settings(autotune_log_level=logging.WARNING))
    with caplog.at_level(logging.WARNING, logger="helion.autotuner"):
        best = autotune(bound, ARGS)
    assert best["block_sizes"] == [32] and bound.compiles > 0
    [warning] = _cache_warnings(caplog)
    assert str(not_a_directory / "autotune") in warning and "without the cache" in warning
    assert not_a_directory.read_text() == "x"


def test_unusable_cache_dir_is_one_warning_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, private_cache: Path
) -> None:
    # what an unwritable directory does to the lock (simulated: this may run as root)
    def refuse(path: Path, **_: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cache_module, "file_lock", refuse)
    bound = FakeBound(make_settings(autotune_log_level=logging.WARNING))
    with caplog.at_level(logging.WARNING, logger="helion.autotuner"):
        assert autotune(bound, ARGS)["block_sizes"] == [32]
    [warning] = _cache_warnings(caplog)
    assert str(private_cache / "autotune") in warning and "Permission denied" in warning
    assert not any("could not write" in r.getMessage() for r in caplog.records)


def test_read_only_cache_dir_tunes_without_the_cache(
    private_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = private_cache / "autotune"
    directory.mkdir(parents=True)
    directory.chmod(0o500)
    try:
        try:
            (directory / "probe").touch()
        except PermissionError:
            pass
        else:
            pytest.skip("this user can write a 0o500 directory (root)")
        bound = FakeBound(make_settings(autotune_log_level=logging.WARNING))
        with caplog.at_level(logging.WARNING, logger="helion.autotuner"):
            assert autotune(bound, ARGS)["block_sizes"] == [32]
        [warning] = _cache_warnings(caplog)
        assert str(directory) in warning
    finally:
        directory.chmod(0o700)


# ------------------------------------------------------------------------------- config overrides
@pytest.mark.parametrize("from_env", [False, True])
def test_config_overrides_are_checked_before_searching(
    monkeypatch: pytest.MonkeyPatch, from_env: bool
) -> None:
    def bound_with(overrides: dict[str, Any]) -> FakeBound:
        if from_env:
            monkeypatch.setenv("HELION_AUTOTUNE_CONFIG_OVERRIDES", json.dumps(overrides))
            return FakeBound(make_settings())
        return FakeBound(make_settings(autotune_config_overrides=overrides))

    bound = bound_with({"blok_sizes": [16]})
    with pytest.raises(exc.InvalidConfig) as raised:
        autotune(bound, ARGS)
    message = str(raised.value)
    assert "'blok_sizes'" in message and "Did you mean 'block_sizes'?" in message
    assert "Valid keys: block_sizes, num_warps" in message
    assert bound.compiles == 0, "nothing was measured"

    bound = bound_with({"block_sizes": [3]})
    with pytest.raises(exc.InvalidConfig, match=r"config\['block_sizes'\]\[0\] = 3"):
        autotune(bound, ARGS)
    assert bound.compiles == 0

    bound = bound_with({"block_sizes": [16]})
    assert autotune(bound, ARGS)["block_sizes"] == [16]


# ------------------------------------------------------------------------------- autotune_cache
def test_strict_cache_is_also_keyed_on_the_library_sources() -> None:
    local = cache_module.AutotuneCache(FakeBound(make_settings()))
    strict_bound = FakeBound(make_settings(autotune_cache="StrictLocalAutotuneCache"))
    strict = cache_module.AutotuneCache(strict_bound)
    assert "library_sources" not in local.key_parts
    assert strict.key_parts["library_sources"].startswith("helion:")
    assert strict.path != local.path
    # a Local entry is not a Strict hit; a Strict entry is
    local.put(Config(block_sizes=[32], num_warps=4))
    assert strict.get() is None
    best = autotune(strict_bound, ARGS)
    compiles = strict_bound.compiles
    assert autotune(strict_bound, ARGS) == best and strict_bound.compiles == compiles
    assert strict.get() == best


def test_library_source_hash_follows_the_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    package = tmp_path / "fakeplugin"
    package.mkdir()
    (package / "__init__.py").write_text("VERSION = '1.0'\n")
    module = types.ModuleType("fakeplugin")
    module.__file__ = str(package / "__init__.py")
    module.__path__ = [str(package)]
    monkeypatch.setitem(sys.modules, "fakeplugin", module)
    monkeypatch.setattr(cache_module, "_SOURCE_HASHES", {})

    class PluginBackend:
        pass

    PluginBackend.__module__ = "fakeplugin.backend"
    bound = FakeBound(make_settings())
    bound.backend = PluginBackend()  # type: ignore[assignment]
    before = cache_module.library_source_hash(bound)
    assert before.startswith("helion:") and "+fakeplugin:" in before
    (package / "__init__.py").write_text("VERSION = '1.0'  # edited, same version\n")
    monkeypatch.setattr(cache_module, "_SOURCE_HASHES", {})  # as in a new process
    assert cache_module.library_source_hash(bound) != before


# ------------------------------------------------------------------------------- exploratory-testing regressions
def test_configs_skipped_at_the_deadline_are_not_counted_as_measured(
    private_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # a budget that runs out within a batch skips the rest of it: those configs were never
    # run, yet the summary said "7 configs measured" and the cache entry recorded 7 evaluations
    # where one config had run (seen with HELION_AUTOTUNE_BUDGET_SECONDS=2 on the Triton backend)
    seeds = [Config(block_sizes=[b], num_warps=4) for b in (32, 16, 64, 8)]
    bound = FakeBound(make_settings(autotune_seed_configs=seeds, autotune_log_level=logging.INFO))
    with caplog.at_level(logging.INFO, logger="helion.autotuner"):
        best = autotune(bound, ARGS, budget_seconds=0.0)
    assert best == Config(block_sizes=[32], num_warps=4)
    entry = json.loads(cache_module.AutotuneCache(bound).path.read_text())
    assert entry["evaluations"] == 1
    assert "1 configs measured (0 failed)" in caplog.text


def test_search_does_not_record_configs_the_evaluator_did_not_measure() -> None:
    from helion.autotuner.search import RandomSearch

    class OutOfTime:
        """Measures the first config it is given, then reports the rest as not measured."""

        def __init__(self) -> None:
            self.calls = 0

        def evaluate(self, configs: list[Config]) -> list[float]:
            times = []
            for _ in configs:
                self.calls += 1
                times.append(1.0 if self.calls == 1 else math.nan)
            return times

    spec = FakeBound(make_settings()).config_spec
    seeds = [Config(block_sizes=[b], num_warps=4) for b in (32, 16, 64)]
    search = RandomSearch(spec, OutOfTime(), seed=0, seed_configs=seeds, budget_seconds=None)
    assert search.run() == spec.normalize(seeds[0])
    assert [t.config for t in search.history] == [spec.normalize(seeds[0])]
    assert search.summary()["failed"] == 0
    assert not search.is_measured(spec.normalize(seeds[1]))


def test_settings_that_change_the_generated_code_separate_cache_entries() -> None:
    # helion.kernel(fn, index_dtype=torch.int64) and helion.kernel(fn) share the source, the
    # shapes and the backend: the second one used to reuse the first one's tuned config
    import torch as _torch

    plain = cache_module.AutotuneCache(FakeBound(make_settings()))
    variants = [
        cache_module.AutotuneCache(FakeBound(make_settings(index_dtype=_torch.int64))),
        cache_module.AutotuneCache(FakeBound(make_settings(fast_math=True))),
        cache_module.AutotuneCache(FakeBound(make_settings(dot_precision="ieee"))),
    ]
    assert len({plain.path, *(v.path for v in variants)}) == 4
    assert all("settings" in v.key_parts for v in variants)
    plain.put(Config(block_sizes=[8], num_warps=4))
    assert variants[1].get() is None
    # settings that do not change the code (effort, logging, the backend's spelling) share it
    assert cache_module.AutotuneCache(FakeBound(make_settings(autotune_effort="full"))).path == (
        plain.path
    )
    assert cache_module.AutotuneCache(FakeBound(make_settings(output_origin_lines=False))).path == (
        plain.path
    )


def test_assert_cache_hit_prints_why_it_missed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the error says "See stderr for diagnostic information", and nothing was printed there
    cache_module.AutotuneCache(FakeBound(make_settings())).put(Config(block_sizes=[8]))
    monkeypatch.setenv("HELION_ASSERT_CACHE_HIT", "1")
    edited = FakeBound(make_settings(), source="v2")
    with pytest.raises(exc.CacheAssertionError):
        autotune(edited, ARGS)
    err = capsys.readouterr().err
    assert "autotune cache miss for kernel 'double'" in err
    assert str(cache_module.AutotuneCache(edited).path) in err
    assert "differs in: kernel_source_hash" in err
    assert "cached 'v1', now 'v2'" in err


def test_autotune_log_writes_the_log_and_the_details(tmp_path: Path) -> None:
    # documented: <autotune_log>.csv and <autotune_log>.log, plus <autotune_log>.meta.jsonl
    # with autotune_log_details; only the .csv was written
    base = tmp_path / "logs" / "run"
    bound = FakeBound(make_settings(autotune_log=str(base), autotune_log_details=True))
    best = autotune(bound, ARGS, max_evaluations=6)
    log_text = (tmp_path / "logs" / "run.log").read_text()
    assert "autotuning with the" in log_text and "One can hardcode" in log_text
    assert "configs measured" in log_text  # written although autotune_log_level=0
    records = [
        json.loads(line) for line in (tmp_path / "logs" / "run.meta.jsonl").read_text().splitlines()
    ]
    assert [r["event"] for r in records] == ["start", "result"]
    assert records[0]["settings"]["autotune_log_details"] is True
    assert records[0]["key_parts"]["kernel_source_hash"] == "v1"
    assert records[1]["config"] == dict(best)
    # a cache hit tunes nothing and leaves the last run's log alone
    assert autotune(bound, ARGS) == best
    assert (tmp_path / "logs" / "run.log").read_text() == log_text


def test_cache_entries_get_the_usual_file_mode(private_cache: Path) -> None:
    # mkstemp's 0o600 made entries in a shared HELION_CACHE_DIR unreadable to other users
    old = os.umask(0o022)
    try:
        saved_mode = cache_module._FILE_MODE
        cache_module._FILE_MODE = None
        path = cache_module.AutotuneCache(FakeBound(make_settings())).put(Config(block_sizes=[8]))
    finally:
        os.umask(old)
        cache_module._FILE_MODE = saved_mode
    assert path is not None and (path.stat().st_mode & 0o777) == 0o666 & ~old


def test_effort_argument_accepts_what_the_setting_accepts() -> None:
    # kernel.autotune(args, effort="low") tuned while autotune_effort="low" was refused
    bound = FakeBound(make_settings())
    for spelling in ("low", "max", "off", "medium"):
        with pytest.raises(exc.InvalidSetting, match="not a valid autotune effort"):
            autotune(bound, ARGS, effort=spelling)
    assert bound.compiles == 0
    assert autotune(bound, ARGS, effort=" High ", max_evaluations=4)["block_sizes"]


def test_budget_seconds_option_is_the_budget_logged(caplog: pytest.LogCaptureFixture) -> None:
    # kernel.autotune(args, budget_seconds=5) searched for 5 s but announced "35s budget"
    bound = FakeBound(make_settings(autotune_log_level=logging.INFO))
    with caplog.at_level(logging.INFO, logger="helion.autotuner"):
        autotune(bound, ARGS, budget_seconds=5, max_evaluations=4)
    assert "5s budget" in caplog.text and "35s budget" not in caplog.text
