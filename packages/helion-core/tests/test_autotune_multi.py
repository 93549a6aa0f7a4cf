"""`Kernel.autotune_multi`, `helion.from_cache` (the `autotuner_fn` hook), the search-space
report settings and the warning when the accuracy baseline fails, on the core `ref` backend
(plus one run through the Triton interpreter when helion-triton is installed)."""

from __future__ import annotations

import json
import logging
import math
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import helion
import helion.language as hl
from helion import exc
from helion.autotuner import driver
from helion.autotuner.benchmarking import BenchmarkHarness
from helion.autotuner.cache import AutotuneCache
from helion.autotuner.config_spec import ConfigSpec
from helion.autotuner.effort import QUICK
from helion.autotuner.multi import MultiSetEvaluator
from helion.autotuner.multi import shared_space

QUICK_SETTINGS: dict[str, Any] = dict(
    backend="ref",
    autotune_effort="quick",
    autotune_progress_bar=False,
    autotune_precompile=None,
    autotune_random_seed=0,
    autotune_log_level=0,
)


def double(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        out[tile] = x[tile] * 2.0
    return out


def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = x[tile] + alpha * y[tile]
    return out


def make(fn: Any, **settings: Any) -> Any:
    return helion.kernel(fn, **{**QUICK_SETTINGS, **settings})


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("HELION_SKIP_CACHE", "HELION_FORCE_AUTOTUNE", "HELION_ASSERT_CACHE_HIT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "cache" / "autotune"


SIZES = (37, 100, 300)


def size_sets() -> list[tuple[torch.Tensor]]:
    return [(torch.randn(n),) for n in SIZES]


# ================================================================================ autotune_multi
def test_one_config_is_tuned_over_every_set_and_set_on_each_bound_kernel(
    private_cache: Path,
) -> None:
    kernel = make(double)
    sets = size_sets()
    measured: list[int] = []
    original = BenchmarkHarness.evaluate

    def counting(self: BenchmarkHarness, configs: Any) -> list[float]:
        measured.append(self.args[0].numel())
        return original(self, configs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BenchmarkHarness, "evaluate", counting)
        config = kernel.autotune_multi(sets, max_evaluations=6, budget_seconds=20)
    assert isinstance(config, helion.Config)
    assert set(measured) == set(SIZES)  # every candidate batch ran on every size
    # static shapes: block sizes of the 37-element set stop at 64, so the shared space does too
    assert config["block_sizes"][0] <= 64
    for (x,) in sets:
        bound = kernel.bind((x,))
        assert bound._config == bound.normalize(config)
        torch.testing.assert_close(kernel(x), x * 2)
    entries = list(private_cache.glob("double-multi-*.json"))
    assert len(entries) == 1
    parts = json.loads(entries[0].read_text())["key_parts"]
    assert json.loads(parts["multi"])["aggregation"] == "geomean"
    assert len(json.loads(parts["arg_sets"])) == 3


def test_cached_result_is_reused_and_the_tag_names_another_entry(
    private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = make(double)
    sets = size_sets()
    first = kernel.autotune_multi(sets, max_evaluations=4, budget_seconds=20)

    def no_tuning(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("tuned although the result is cached")

    monkeypatch.setattr(driver, "_tune", no_tuning)
    assert kernel.autotune_multi(sets, force=False) == first
    with pytest.raises(AssertionError, match="tuned although"):
        kernel.autotune_multi(sets, force=False, cache_tag="other")  # another key: a miss
    with pytest.raises(AssertionError, match="tuned although"):
        kernel.autotune_multi(sets[:2], force=False)  # other sets: another key


def test_dynamic_shapes_share_one_bound_kernel_and_still_time_each_set() -> None:
    kernel = make(scaled_add, static_shapes=False)
    sets = [(torch.randn(n), torch.randn(n), 0.5) for n in (33, 65)]
    config = kernel.autotune_multi(
        sets, aggregation="max", relative_to="default", max_evaluations=4, budget_seconds=20
    )
    assert kernel.bind(sets[0]) is kernel.bind(sets[1])
    for x, y, alpha in sets:
        torch.testing.assert_close(kernel(x, y, alpha), x + alpha * y)
    assert kernel.bind(sets[0])._config == kernel.bind(sets[0]).normalize(config)


def test_effort_none_gives_the_shared_default_config() -> None:
    kernel = make(double, autotune_effort="none")
    sets = size_sets()
    config = kernel.autotune_multi(sets)
    assert config["block_sizes"] == [64]  # the 37-element set's largest block, common to all


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda k, s: k.autotune_multi([]), "arg_sets is empty"),
        (lambda k, s: k.autotune_multi(s[0][0]), "list of argument tuples"),
        (
            lambda k, s: k.autotune_multi([(s[0][0], s[0][0]), (s[1][0], s[1][0], 2.0)]),
            "different numbers of arguments",
        ),
        (lambda k, s: k.autotune_multi(s, aggregation="mean"), "aggregation='mean'"),
        (lambda k, s: k.autotune_multi(s, relative_to="eager"), "relative_to='eager'"),
    ],
)
def test_bad_arguments_are_clear_errors(call: Any, message: str) -> None:
    kernel = make(scaled_add)
    sets = [(torch.randn(8),), (torch.randn(16),)]
    with pytest.raises(exc.AutotuneMultiError, match=message):
        call(kernel, sets)


def test_config_spaces_of_different_shape_are_refused() -> None:
    kernel = make(double)
    with pytest.raises(exc.AutotuneMultiError, match=r"1 block_sizes.*set 1 has 2 block_sizes"):
        kernel.autotune_multi([(torch.randn(8),), (torch.randn(4, 8),)])


def test_shared_space_keeps_only_values_every_set_accepts() -> None:
    small, large = ConfigSpec(), ConfigSpec()
    small.add_block_size(64)
    large.add_block_size(512)
    for spec in (small, large):
        spec.set_scalar("num_warps")
    space = shared_space([large, small])
    assert space.block_sizes[0].all_values() == small.block_sizes[0].all_values()
    assert repr(space["num_warps"].fragment) == repr(large["num_warps"].fragment)


class FakeHarness:
    """Per-set times by block size; ``inf`` where the config fails on this set."""

    def __init__(self, times: dict[int, float]) -> None:
        self.times = times
        self.deadline = None
        self.failures: list[Any] = []
        self.calls = 0

    def evaluate(self, configs: Any) -> list[float]:
        self.calls += len(configs)
        return [self.times[c["block_sizes"][0]] for c in configs]

    rebenchmark = evaluate

    def close(self) -> None:
        pass


def config(block: int) -> helion.Config:
    return helion.Config(block_sizes=[block])


@pytest.mark.parametrize(
    ("aggregation", "relative_to", "expected"),
    [
        ("geomean", None, math.sqrt(2.0 * 8.0)),
        ("max", None, 8.0),
        ("geomean", "default", math.sqrt((2.0 / 1.0) * (8.0 / 4.0))),
        ("max", "baseline", 2.0),  # no autotune_baseline_fn: the default config is the baseline
    ],
)
def test_scores_aggregate_the_per_set_times(
    aggregation: str, relative_to: str | None, expected: float
) -> None:
    sets = [FakeHarness({16: 1.0, 32: 2.0}), FakeHarness({16: 4.0, 32: 8.0})]
    evaluator = MultiSetEvaluator(
        sets,  # type: ignore[arg-type]
        aggregation=aggregation,
        relative_to=relative_to,
        default_configs=[config(16), config(16)],
        baseline_fn=None,
        profile=QUICK,
    )
    assert evaluator.evaluate([config(32)])[0] == pytest.approx(expected)


def test_a_config_failing_on_one_set_is_rejected_and_not_run_on_later_sets() -> None:
    first, second, third = (
        FakeHarness({16: 1.0, 32: 2.0}),
        FakeHarness({16: math.inf, 32: 3.0}),
        FakeHarness({16: 1.0, 32: 1.0}),
    )
    evaluator = MultiSetEvaluator(
        [first, second, third],  # type: ignore[list-item]
        aggregation="geomean",
        relative_to=None,
        default_configs=[config(16)] * 3,
        baseline_fn=None,
        profile=QUICK,
    )
    scores = evaluator.evaluate([config(16), config(32)])
    assert scores[0] == math.inf and math.isfinite(scores[1])
    assert third.calls == 1  # block 16 was never run on the third set


# ================================================================================ progress
def _in_ms(value: str, unit: str) -> float:
    return float(value) / 1000.0 if unit == "us" else float(value)


@pytest.mark.parametrize(
    ("aggregation", "relative_to", "shown"),
    [
        ("geomean", "default", r"best geomean vs default (?P<value>[\d.]+)x"),
        ("max", None, r"best max (?P<value>[\d.]+) (?P<unit>ms|us)"),
    ],
)
def test_the_progress_shows_the_score_being_optimized(
    aggregation: str,
    relative_to: str | None,
    shown: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the live line showed the fastest time of any one set (the references' included) as
    # "best", and counted set measurements: "21/21 ... best 31.84 us" for six configs over
    # three sets whose best score was 1.79 times the default's; the final line printed that
    # ratio as "1.791 ms"
    scores: list[float] = []
    original = MultiSetEvaluator.evaluate

    def keep_scores(self: MultiSetEvaluator, configs: Any) -> list[float]:
        found = original(self, configs)
        scores.extend(found)
        return found

    monkeypatch.setattr(MultiSetEvaluator, "evaluate", keep_scores)
    kernel = make(double, autotune_progress_bar=True, autotune_log_level=logging.INFO)
    with caplog.at_level(logging.INFO, logger="helion.autotuner"):
        kernel.autotune_multi(
            size_sets(),
            aggregation=aggregation,
            relative_to=relative_to,
            max_evaluations=6,
            budget_seconds=30,
        )
    measured = [s for s in scores if not math.isnan(s)]
    best = min(measured)
    [bar] = [line for line in capsys.readouterr().err.splitlines() if "Autotuning double" in line]
    assert f" {len(measured)}/{len(measured)} " in bar, bar  # configs, not set measurements
    match = re.search(shown, bar)
    assert match is not None, bar
    value = _in_ms(match["value"], match.groupdict().get("unit") or "")
    assert value == pytest.approx(best, rel=0.01, abs=0.01), (bar, best)
    [done] = [r.getMessage() for r in caplog.records if "autotuning done" in r.getMessage()]
    assert re.search(shown, done), done


# ================================================================================ from_cache
def test_from_cache_tries_the_configs_cached_for_other_shapes(
    private_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tuned = make(double)
    for n, block in ((100, 16), (300, 32)):
        x = torch.randn(n)
        AutotuneCache(tuned.bind((x,))).put(config(block), time_ms=1.0)
    given = config(8)
    kernel = make(double, autotuner_fn=helion.from_cache(configs=[given]), autotune_log_level=20)
    seen: list[list[Any]] = []
    original = driver._run_finite

    def spy(bound: Any, args: Any, configs: list[Any], *rest: Any) -> Any:
        seen.append([c["block_sizes"][0] for c in configs])
        return original(bound, args, configs, *rest)

    x = torch.randn(50)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(driver, "_run_finite", spy)
        with caplog.at_level(logging.INFO, logger="helion.autotuner"):
            torch.testing.assert_close(kernel(x), x * 2)
    assert seen == [[32, 16, 8]]  # newest cached first, then the given ones
    assert kernel.bind((x,))._config["block_sizes"][0] in (32, 16, 8)
    assert "from_cache benchmarks 3 config(s)" in caplog.text

    limited = make(double, autotuner_fn=helion.from_cache(max_configs=1))
    bound = limited.bind((torch.randn(20),))
    fn = limited.settings.autotuner_fn
    assert [c["block_sizes"][0] for c in fn(bound, (torch.randn(20),)).candidates()] == [32]


def test_from_cache_with_nothing_to_try_uses_the_default_config(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kernel = make(double, autotuner_fn=helion.from_cache(), autotune_log_level=20)
    x = torch.randn(40)
    with caplog.at_level(logging.INFO, logger="helion.autotuner"):
        torch.testing.assert_close(kernel(x), x * 2)
    bound = kernel.bind((x,))
    assert bound._config == bound.config_spec.default_config()
    assert "found no cached configs" in caplog.text


def test_from_cache_refuses_a_negative_limit() -> None:
    with pytest.raises(ValueError, match="max_configs"):
        helion.from_cache(max_configs=-1)


def test_from_cache_refuses_a_lone_config() -> None:
    """A lone Config (a Mapping) was taken as the list: its keys became "configs" and the
    kernel's first call failed with `dictionary update sequence element #0 has length 1`."""
    with pytest.raises(TypeError, match=r"write configs=\[config\]"):
        helion.from_cache(configs=helion.Config(block_sizes=[8]))
    with pytest.raises(TypeError, match="item 1 is a int"):
        helion.from_cache(configs=[helion.Config(block_sizes=[8]), 3])
    helion.from_cache(configs=[helion.Config(block_sizes=[8]), {"block_sizes": [4]}])


def test_autotuner_fn_replaces_the_search_and_may_call_the_driver_itself() -> None:
    calls: list[str] = []

    class Tuner:
        def __init__(self, bound: Any, args: Any) -> None:
            self.bound, self.args = bound, args

        def autotune(self) -> Any:
            calls.append("custom")
            # inside the hook the driver runs the built-in tuner, not the hook again
            return driver.autotune(self.bound, self.args, configs=[config(8), config(16)])

    kernel = make(double, autotuner_fn=lambda bound, args, **kw: Tuner(bound, args))
    x = torch.randn(30)
    torch.testing.assert_close(kernel(x), x * 2)
    assert calls == ["custom"]


# ================================================================================ options
@pytest.mark.parametrize("bad", [0, -1])
def test_max_evaluations_below_one_is_an_invalid_setting(bad: int, private_cache: Path) -> None:
    # it was "NoConfigFound: ... measured 0 config(s), all failed ... Failures: none recorded"
    kernel = make(double)
    args = (torch.randn(100),)
    with pytest.raises(exc.InvalidSetting, match=rf"max_evaluations: .* got {bad}"):
        kernel.autotune(args, max_evaluations=bad)
    with pytest.raises(exc.InvalidSetting, match="max_evaluations"):
        kernel.autotune(args, effort="none", max_evaluations=bad)
    with pytest.raises(exc.InvalidSetting, match="max_evaluations"):
        kernel.autotune_multi([args, (torch.randn(37),)], max_evaluations=bad)
    with pytest.raises(exc.InvalidSetting, match="max_evaluations"):
        kernel.autotune(args, configs=[{"block_size": 8}, {"block_size": 16}], max_evaluations=bad)
    assert not private_cache.exists() or not any(private_cache.iterdir())  # nothing was tuned
    assert kernel.autotune(args, max_evaluations=1, budget_seconds=20)["block_sizes"]


@pytest.mark.parametrize("bad", [-5, float("nan"), "10"])
def test_a_negative_time_budget_is_an_invalid_setting(bad: object, private_cache: Path) -> None:
    # a negative or NaN budget was taken as given (a search that stops once a config works)
    kernel = make(double)
    args = (torch.randn(100),)
    with pytest.raises(exc.InvalidSetting, match=r"budget_seconds: expected seconds >= 0"):
        kernel.autotune(args, budget_seconds=bad)
    with pytest.raises(exc.InvalidSetting, match="budget_seconds"):
        kernel.autotune_multi([args, (torch.randn(37),)], budget_seconds=bad)
    assert not private_cache.exists() or not any(private_cache.iterdir())  # nothing was tuned
    assert kernel.autotune(args, max_evaluations=2, budget_seconds=math.inf)["block_sizes"]


# ================================================================================ search space
def test_search_space_is_logged_and_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "space" / "report.json"
    kernel = make(
        double,
        autotune_log_level=20,
        autotune_log_search_space=True,
        autotune_log_search_space_verbose=True,
        autotune_log_search_space_path=str(path),
    )
    with caplog.at_level(logging.INFO, logger="helion.autotuner"):
        kernel.autotune((torch.randn(100),), max_evaluations=4, budget_seconds=20)
    text = caplog.text
    assert "search space: 1 field(s), 1 tunable value(s), 8 distinct configs" in text
    assert "block_sizes: 1 item(s), choices 8 (8)" in text
    assert "block_sizes[0]: " in text and "1, 2, 4, 8, 16, 32, 64, 128" in text  # verbose
    assert "search-space coverage:" in text
    report = json.loads(path.read_text())
    assert report["kernel"] == "double" and report["total_configs"] == 8
    assert report["fields"][0]["name"] == "block_sizes"
    assert report["fragments"][0]["choices"] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert 1 <= report["coverage"]["configs_measured"] <= 8


def test_search_space_report_is_off_by_default(caplog: pytest.LogCaptureFixture) -> None:
    kernel = make(double, autotune_log_level=20)
    with caplog.at_level(logging.INFO, logger="helion.autotuner"):
        kernel.autotune((torch.randn(100),), max_evaluations=3, budget_seconds=20)
    assert "search space" not in caplog.text


# ================================================================================ baseline warning
class BrokenDefault:
    """A bound kernel whose default config cannot compile: no accuracy baseline."""

    def __init__(self) -> None:
        spec = ConfigSpec()
        spec.add_block_size(64)
        self.config_spec = spec
        self.settings = helion.Settings(**{k: v for k, v in QUICK_SETTINGS.items()})
        self.kernel = type("K", (), {"name": "broken"})()
        self.device = torch.device("cpu")

    def compile_config(self, config: Any) -> Any:
        if config["block_sizes"][0] == self.config_spec.default_config()["block_sizes"][0]:
            raise RuntimeError("the default config does not compile")
        return lambda x: x * 2


def test_a_failing_baseline_warns_that_configs_are_not_checked() -> None:
    harness = BenchmarkHarness(BrokenDefault(), (torch.randn(8),), isolation="inprocess")
    with pytest.warns(exc.AccuracyCheckDisabled, match="will not be checked against a reference"):
        harness.prepare()
    assert harness.baseline is None


def test_the_baseline_warning_can_be_silenced() -> None:
    bound = BrokenDefault()
    bound.settings = helion.Settings(**QUICK_SETTINGS, ignore_warnings=[exc.AccuracyCheckDisabled])
    harness = BenchmarkHarness(bound, (torch.randn(8),), isolation="inprocess")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        harness.prepare()
    assert harness.baseline is None


# ================================================================================ Triton
def test_autotune_multi_through_the_triton_interpreter() -> None:
    pytest.importorskip("helion_triton")
    from helion import backends

    if "triton" not in {b.name for b in backends.list_backends()}:
        pytest.skip("the triton backend is not registered in this installation")
    kernel = make(scaled_add, backend="triton", static_shapes=False)
    sets = [(torch.randn(n), torch.randn(n), 0.25) for n in (37, 100, 513)]
    config = kernel.autotune_multi(sets, effort="quick", max_evaluations=3, budget_seconds=30)
    for x, y, alpha in sets:
        bound = kernel.bind((x, y, alpha))
        assert bound._config == bound.normalize(config)
        torch.testing.assert_close(kernel(x, y, alpha), x + alpha * y)
