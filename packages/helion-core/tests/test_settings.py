from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
from pathlib import Path

import pytest
import torch

from helion import exc
from helion.runtime import settings as settings_mod
from helion.runtime.config import Config
from helion.runtime.settings import RefMode
from helion.runtime.settings import Settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("HELION_", "TRITON_")) or name == "ENABLE_TILE":
            monkeypatch.delenv(name)


def test_defaults() -> None:
    s = Settings()
    assert s.backend is None
    assert s.static_shapes is True
    assert s.index_dtype is None
    assert s.dot_precision == "tf32"
    assert s.fast_math is False
    assert s.ref_mode is RefMode.OFF
    assert s.ignore_warnings == []
    assert s.print_output_code is False and s.print_ir is False
    assert s.output_origin_lines is True
    assert s.autotune_effort == "full"
    assert s.force_autotune is False
    assert s.autotune_log_level == logging.INFO
    assert s.autotune_log is None
    assert s.autotune_compile_timeout == 60
    assert s.autotune_benchmark_timeout == 30
    assert s.autotune_precompile == "fork"
    assert s.autotune_precompile_jobs is None
    assert isinstance(s.autotune_random_seed, int)
    assert s.autotune_accuracy_check is True
    assert s.autotune_baseline_fn is None
    assert s.autotune_baseline_atol is None and s.autotune_baseline_rtol is None
    assert s.autotune_rebenchmark_threshold is None
    assert s.autotune_progress_bar is True
    assert s.autotune_max_generations is None
    assert s.autotune_budget_seconds is None
    assert s.autotune_ignore_errors is False
    assert s.autotune_config_overrides == {}
    assert s.autotune_seed_configs is None
    assert s.autotune_search == "surrogate"
    assert s.autotune_plot is None
    assert s.pallas_interpret is False
    assert s.persistent_reserved_sms == 0
    assert s.distributed is False


def test_mutable_defaults_are_not_shared() -> None:
    a, b = Settings(), Settings()
    a.autotune_config_overrides["num_warps"] = 4
    a.ignore_warnings.append(exc.WrongDevice)
    assert b.autotune_config_overrides == {} and b.ignore_warnings == []


@pytest.mark.parametrize(
    ("var", "field", "raw", "expected"),
    [
        ("HELION_BACKEND", "backend", "pallas", "pallas"),
        ("HELION_STATIC_SHAPES", "static_shapes", "0", False),
        ("HELION_STATIC_SHAPES", "static_shapes", "OFF", False),
        ("HELION_STATIC_SHAPES", "static_shapes", "", True),
        ("HELION_FAST_MATH", "fast_math", "Yes", True),
        ("HELION_PRINT_OUTPUT_CODE", "print_output_code", "true", True),
        ("HELION_PRINT_IR", "print_ir", "1", True),
        ("HELION_OUTPUT_ORIGIN_LINES", "output_origin_lines", "no", False),
        ("HELION_INDEX_DTYPE", "index_dtype", "int64", torch.int64),
        ("HELION_INDEX_DTYPE", "index_dtype", "auto", None),
        ("TRITON_F32_DEFAULT", "dot_precision", "ieee", "ieee"),
        ("HELION_AUTOTUNE_EFFORT", "autotune_effort", "quick", "quick"),
        ("HELION_AUTOTUNE_EFFORT", "autotune_effort", "HIGH", "full"),
        ("HELION_AUTOTUNE_EFFORT", "autotune_effort", "none", "none"),
        ("HELION_FORCE_AUTOTUNE", "force_autotune", "on", True),
        ("HELION_AUTOTUNE_LOG_LEVEL", "autotune_log_level", "debug", logging.DEBUG),
        ("HELION_AUTOTUNE_LOG_LEVEL", "autotune_log_level", "0", 0),
        ("HELION_AUTOTUNE_LOG", "autotune_log", "/tmp/tune", "/tmp/tune"),
        ("HELION_AUTOTUNE_COMPILE_TIMEOUT", "autotune_compile_timeout", "15", 15),
        ("HELION_AUTOTUNE_BENCHMARK_TIMEOUT", "autotune_benchmark_timeout", "7", 7),
        ("HELION_AUTOTUNE_PRECOMPILE", "autotune_precompile", "spawn", "spawn"),
        ("HELION_AUTOTUNE_PRECOMPILE", "autotune_precompile", "0", None),
        ("HELION_AUTOTUNE_PRECOMPILE_JOBS", "autotune_precompile_jobs", "3", 3),
        ("HELION_AUTOTUNE_RANDOM_SEED", "autotune_random_seed", "1234", 1234),
        ("HELION_AUTOTUNE_ACCURACY_CHECK", "autotune_accuracy_check", "0", False),
        ("HELION_REBENCHMARK_THRESHOLD", "autotune_rebenchmark_threshold", "1.25", 1.25),
        ("HELION_AUTOTUNE_PROGRESS_BAR", "autotune_progress_bar", "false", False),
        ("HELION_AUTOTUNE_MAX_GENERATIONS", "autotune_max_generations", "5", 5),
        ("HELION_AUTOTUNE_BUDGET_SECONDS", "autotune_budget_seconds", "90", 90.0),
        ("HELION_AUTOTUNE_IGNORE_ERRORS", "autotune_ignore_errors", "1", True),
        ("HELION_AUTOTUNER", "autotune_search", "pattern", "pattern"),
        ("HELION_AUTOTUNE_PLOT", "autotune_plot", "/tmp/c.png", "/tmp/c.png"),
        ("HELION_PALLAS_INTERPRET", "pallas_interpret", "1", True),
        ("HELION_PERSISTENT_RESERVED_SMS", "persistent_reserved_sms", "2", 2),
        ("HELION_DISTRIBUTED", "distributed", "1", True),
        ("HELION_INTERPRET", "ref_mode", "1", RefMode.EAGER),
        ("HELION_INTERPRET", "ref_mode", "0", RefMode.OFF),
        ("HELION_AUTOTUNE_SEARCH_ACF", "autotune_search_acf", "a.acf, b.acf", ["a.acf", "b.acf"]),
    ],
)
def test_env_vars(
    monkeypatch: pytest.MonkeyPatch, var: str, field: str, raw: str, expected: object
) -> None:
    monkeypatch.setenv(var, raw)
    assert getattr(Settings(), field) == expected
    assert Settings.env_var(field) == var


def test_env_read_at_construction_time(monkeypatch: pytest.MonkeyPatch) -> None:
    early = Settings()
    monkeypatch.setenv("HELION_AUTOTUNE_EFFORT", "none")
    assert early.autotune_effort == "full"
    assert Settings().autotune_effort == "none"


def test_keyword_overrides_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELION_STATIC_SHAPES", "0")
    assert Settings(static_shapes=True).static_shapes is True
    # An invalid env value is not even parsed when the keyword provides the value.
    monkeypatch.setenv("HELION_STATIC_SHAPES", "perhaps")
    assert Settings(static_shapes=False).static_shapes is False


@pytest.mark.parametrize(
    ("var", "raw", "fragment"),
    [
        ("HELION_STATIC_SHAPES", "perhaps", "HELION_STATIC_SHAPES"),
        ("HELION_FORCE_AUTOTUNE", "2", "1/true/yes/on"),
        ("HELION_AUTOTUNE_EFFORT", "max", "'none', 'quick', 'full'"),
        ("HELION_AUTOTUNE_LOG_LEVEL", "loud", "logging level"),
        ("HELION_AUTOTUNE_COMPILE_TIMEOUT", "soon", "HELION_AUTOTUNE_COMPILE_TIMEOUT"),
        ("HELION_AUTOTUNE_COMPILE_TIMEOUT", "0", ">= 1"),
        ("HELION_AUTOTUNE_PRECOMPILE", "thread", "precompile mode"),
        ("HELION_INDEX_DTYPE", "float32", "int32 or torch.int64"),
        ("HELION_INDEX_DTYPE", "int65", "not a torch dtype"),
        ("HELION_IGNORE_WARNINGS", "NoSuchWarning", "NoSuchWarning"),
        ("HELION_AUTOTUNE_CONFIG_OVERRIDES", "{bad json", "invalid JSON"),
        ("HELION_AUTOTUNE_CONFIG_OVERRIDES", "/no/such/file.json", "neither a JSON object"),
        ("TRITON_F32_DEFAULT", "fp64", "TRITON_F32_DEFAULT"),
        ("HELION_REBENCHMARK_THRESHOLD", "x", "number"),
        ("HELION_INTERPRET", "sometimes", "HELION_INTERPRET"),
        ("HELION_AUTOTUNER_INITIAL_POPULATION", "from_nowhere", "from_random"),
        ("HELION_AUTOTUNE_BUDGET_SECONDS", "nan", "expected a number"),
        ("HELION_REBENCHMARK_THRESHOLD", "NaN", "expected a number"),
        ("HELION_AUTOTUNER", "NoSuchSearch", "not a search algorithm"),
        ("HELION_AUTOTUNER", "patern", "did you mean 'pattern'"),
        # boolean variables that are not fields are checked with the settings too
        ("HELION_SKIP_CACHE", "maybe", "1/true/yes/on"),
        ("HELION_ASSERT_CACHE_HIT", "maybe", "1/true/yes/on"),
        ("HELION_DISALLOW_AUTOTUNING", "maybe", "1/true/yes/on"),
    ],
)
def test_bad_env_values(monkeypatch: pytest.MonkeyPatch, var: str, raw: str, fragment: str) -> None:
    monkeypatch.setenv(var, raw)
    with pytest.raises(ValueError) as info:
        Settings()
    assert isinstance(info.value, exc.InvalidSetting)
    assert fragment in str(info.value)
    assert var in str(info.value)  # the message names the variable


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"autotune_effort": "medium"}, "choose one of 'none', 'quick', 'full'"),
        ({"static_shapes": "maybe"}, "static_shapes"),
        ({"num_warps_default": 4}, "unknown setting"),
        ({"autotune_compile_timeout": -1}, ">= 1"),
        ({"autotune_best_of_k": 0}, ">= 1"),
        ({"ignore_warnings": [ValueError]}, "BaseWarning"),
        ({"ref_mode": "fast"}, "RefMode"),
        ({"autotune_baseline_fn": 3}, "callable"),
        ({"autotune_seed_configs": [3]}, "Config or dict"),
        ({"index_dtype": torch.float16}, "torch.int32 or torch.int64"),
        ({"autotune_log_level": True}, "logging level"),
        ({"autotune_budget_seconds": float("nan")}, "expected a number"),
        ({"pallas_topk_recall_target": float("nan")}, "expected a number"),
        ({"autotune_search": "annealing"}, "not a search algorithm"),
        ({"autotune_search": 3}, "name of a search algorithm"),
    ],
)
def test_bad_keyword_values(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises((ValueError, TypeError)) as info:
        Settings(**kwargs)
    assert fragment in str(info.value)


def test_unknown_keyword_lists_close_matches() -> None:
    with pytest.raises(TypeError) as info:
        Settings(static_shape=False)
    assert "'static_shape'" in str(info.value)
    assert "did you mean 'static_shapes'" in str(info.value)
    with pytest.raises(TypeError, match="autotune_effort"):
        Settings(autotune_efort="none")


def test_assignment_is_checked_and_normalized() -> None:
    s = Settings()
    s.autotune_effort = "high"
    assert s.autotune_effort == "full"
    s.ref_mode = "eager"  # type: ignore[assignment]
    assert s.ref_mode is RefMode.EAGER
    s.index_dtype = "int32"
    assert s.index_dtype is torch.int32
    with pytest.raises(ValueError, match="autotune_effort"):
        s.autotune_effort = "extreme"
    with pytest.raises(AttributeError, match="did you mean 'static_shapes'"):
        s.static_shape = True  # type: ignore[attr-defined]


def test_ignore_warnings_from_env_and_kwargs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELION_IGNORE_WARNINGS", "TensorOperationInWrapper,WrongDevice")
    assert Settings().ignore_warnings == [exc.TensorOperationInWrapper, exc.WrongDevice]
    assert Settings(ignore_warnings=[exc.CacheCorrupt]).ignore_warnings == [exc.CacheCorrupt]
    assert Settings(ignore_warnings=["CacheCorrupt"]).ignore_warnings == [exc.CacheCorrupt]


def test_ref_mode_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(exc.RefEagerModeCodePrintError):
        Settings(ref_mode=RefMode.EAGER, print_output_code=True)
    monkeypatch.setenv("HELION_INTERPRET", "1")
    monkeypatch.setenv("HELION_PRINT_OUTPUT_CODE", "1")
    with pytest.raises(exc.RefEagerModeCodePrintError):
        Settings()
    monkeypatch.delenv("HELION_PRINT_OUTPUT_CODE")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(exc.IncompatibleInterpretModes, match="mutually exclusive"):
        Settings()
    # TRITON_INTERPRET alone is how the Triton backend runs on CPU: fine.
    monkeypatch.delenv("HELION_INTERPRET")
    assert Settings().ref_mode is RefMode.OFF


def test_tileir_requires_enable_tile(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(exc.MissingEnableTile):
        Settings(backend="tileir")
    monkeypatch.setenv("ENABLE_TILE", "1")
    assert Settings(backend="tileir").backend == "tileir"


def test_config_overrides_json_and_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HELION_AUTOTUNE_CONFIG_OVERRIDES", '{"range_unroll_factors": [0, 0]}')
    assert Settings().autotune_config_overrides == {"range_unroll_factors": [0, 0]}
    path = tmp_path / "overrides.json"
    path.write_text(json.dumps({"num_warps": 8}))
    monkeypatch.setenv("HELION_AUTOTUNE_CONFIG_OVERRIDES", str(path))
    assert Settings().autotune_config_overrides == {"num_warps": 8}
    assert Settings(autotune_config_overrides=Config(num_stages=2)).autotune_config_overrides == {
        "num_stages": 2
    }


def test_autotune_cache_accepts_only_the_caches_that_exist(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().autotune_cache == "LocalAutotuneCache"
    assert settings_mod.AUTOTUNE_CACHES == ("LocalAutotuneCache", "StrictLocalAutotuneCache")
    s = Settings(autotune_cache="strictlocalautotunecache")
    assert s.autotune_cache == "StrictLocalAutotuneCache"
    monkeypatch.setenv("HELION_AUTOTUNE_CACHE", "StrictLocalAutotuneCache")
    assert Settings().autotune_cache == "StrictLocalAutotuneCache"
    monkeypatch.setenv("HELION_AUTOTUNE_CACHE", "NoSuchCacheClass")
    with pytest.raises(exc.InvalidSetting, match="HELION_AUTOTUNE_CACHE: 'NoSuchCacheClass'"):
        Settings()
    monkeypatch.delenv("HELION_AUTOTUNE_CACHE")
    with pytest.raises(
        exc.InvalidSetting, match="'LocalAutotuneCache', 'StrictLocalAutotuneCache'"
    ):
        Settings(autotune_cache="NoSuchCacheClass")
    with pytest.raises(exc.InvalidSetting, match="did you mean 'StrictLocalAutotuneCache'"):
        Settings(autotune_cache="StrictLocalCache")
    # public Helion's other caches are refused with the reason, not silently ignored
    for name in ("RemoteAutotuneCache", "StrictRemoteAutotuneCache", "AOTAutotuneCache"):
        with pytest.raises(exc.InvalidSetting, match=f"'{name}' is not supported: there is no"):
            Settings(autotune_cache=name)
    with pytest.raises(exc.InvalidSetting):
        s.autotune_cache = "RemoteAutotuneCache"
    assert s.autotune_cache == "StrictLocalAutotuneCache"


def test_seed_configs_accept_dicts() -> None:
    s = Settings(autotune_seed_configs={"block_sizes": [32]})
    assert s.autotune_seed_configs == [Config(block_sizes=[32])]


def test_rebenchmark_threshold_and_ratio() -> None:
    assert Settings().get_rebenchmark_threshold() == 1.5
    assert Settings(autotune_effort="quick").get_rebenchmark_threshold() == 0.9
    assert Settings(autotune_rebenchmark_threshold=1.1).get_rebenchmark_threshold() == 1.1
    assert Settings().get_suspicious_rebenchmark_ratio() == 0.9
    assert Settings(autotune_benchmark_subprocess=False).get_suspicious_rebenchmark_ratio() is None


def test_check_autotuning_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    Settings().check_autotuning_disabled()
    monkeypatch.setenv("HELION_DISALLOW_AUTOTUNING", "1")
    with pytest.raises(exc.AutotuningDisallowedInEnvironment, match="HELION_DISALLOW_AUTOTUNING"):
        Settings().check_autotuning_disabled()


def test_to_dict_and_json(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Settings(
        index_dtype=torch.int64,
        ignore_warnings=[exc.WrongDevice],
        autotune_baseline_fn=len,
        autotune_seed_configs=[Config(num_warps=2)],
    )
    raw = s.to_dict()
    assert set(raw) == set(Settings.field_names())
    assert raw["index_dtype"] is torch.int64
    assert Settings(**raw) == s  # round trip through keywords
    as_json = json.loads(json.dumps(s.to_dict(jsonable=True)))
    assert as_json["ref_mode"] == "off"
    assert as_json["ignore_warnings"] == ["WrongDevice"]
    assert as_json["index_dtype"] == "torch.int64"
    assert as_json["autotune_seed_configs"] == [{"num_warps": 2}]
    assert as_json["autotune_baseline_fn"].endswith("len")


def test_codegen_key_tracks_codegen_settings() -> None:
    base = Settings(autotune_random_seed=1)
    assert base.codegen_key() == Settings(autotune_random_seed=2).codegen_key()
    assert base.codegen_key() != Settings(fast_math=True).codegen_key()
    hash(base.codegen_key())


def test_pickle_and_replace() -> None:
    s = Settings(autotune_effort="quick", ignore_warnings=[exc.WrongDevice])
    assert pickle.loads(pickle.dumps(s)) == s
    changed = dataclasses.replace(s, static_shapes=False)
    assert changed.static_shapes is False and changed.autotune_effort == "quick"


def test_describe_every_setting() -> None:
    for name in Settings.field_names():
        assert Settings.describe(name)
    with pytest.raises(TypeError):
        Settings.describe("nope")


def test_cache_dir_and_skip_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HELION_CACHE_DIR", str(tmp_path / "c"))
    assert settings_mod.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("HELION_CACHE_DIR")
    default = settings_mod.cache_dir()
    assert default.name == "helion"
    assert settings_mod.skip_cache() is False
    monkeypatch.setenv("HELION_SKIP_CACHE", "1")
    assert settings_mod.skip_cache() is True
    monkeypatch.setenv("HELION_SKIP_CACHE", "bogus")
    with pytest.raises(ValueError, match="HELION_SKIP_CACHE"):
        settings_mod.skip_cache()


def test_autotune_search_names(monkeypatch: pytest.MonkeyPatch) -> None:
    import helion.autotuner.search as search_module
    from helion.autotuner.search import RandomSearch

    # registry names, class names and public Helion's spellings, as the autotuner resolves them
    for name in ("surrogate", "pattern", "PatternSearch", "LFBOTreeSearch", "de", ""):
        assert Settings(autotune_search=name).autotune_search == name
    monkeypatch.setenv("HELION_AUTOTUNER", "random")
    assert Settings().autotune_search == "random"
    with pytest.raises(exc.InvalidSetting, match="registered_later"):
        Settings(autotune_search="registered_later")

    class RegisteredLater(RandomSearch):
        name = "registered_later"

    # what register_search("registered_later", RegisteredLater) does, undone after the test
    monkeypatch.setitem(search_module._registered, "registered_later", RegisteredLater)
    assert Settings(autotune_search="registered_later").autotune_search == "registered_later"
    settings = Settings()
    with pytest.raises(exc.InvalidSetting, match="not a search algorithm"):
        settings.autotune_search = "nope"


def test_float_settings_reject_nan_but_take_inf() -> None:
    assert Settings(autotune_budget_seconds=float("inf")).autotune_budget_seconds == float("inf")
    with pytest.raises(exc.InvalidSetting, match="autotune_rebenchmark_threshold"):
        Settings(autotune_rebenchmark_threshold=float("nan"))


def test_cache_switches_are_not_silently_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from helion.autotuner.cache import cache_disabled

    monkeypatch.setenv("HELION_SKIP_CACHE", "yes")
    assert cache_disabled() is True
    monkeypatch.setenv("HELION_SKIP_CACHE", "maybe")
    with pytest.raises(exc.InvalidSetting, match="HELION_SKIP_CACHE"):
        cache_disabled()


def test_cache_dir_without_platformdirs(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_platformdirs(name: str, *args: object, **kwargs: object) -> object:
        if name == "platformdirs":
            raise ImportError("not installed")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_platformdirs)
    assert settings_mod.cache_dir() == Path.home() / ".cache" / "helion"


def test_other_env_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings_mod.assert_cache_hit() is False
    assert settings_mod.plugin_autoload_disabled() is False
    monkeypatch.setenv("HELION_ASSERT_CACHE_HIT", "1")
    monkeypatch.setenv("HELION_DISABLE_PLUGIN_AUTOLOAD", "yes")
    assert settings_mod.assert_cache_hit() is True
    assert settings_mod.plugin_autoload_disabled() is True


def test_settings_construction_is_cheap() -> None:
    import time

    start = time.perf_counter()
    for _ in range(200):
        Settings()
    assert (time.perf_counter() - start) / 200 < 0.005


def test_docs_list_every_setting() -> None:
    docs = Path(__file__).resolve().parents[3] / "docs" / "api" / "settings.md"
    if not docs.is_file():
        pytest.skip("docs are not part of this installation")
    text = docs.read_text()
    for name in Settings.field_names():
        assert f"| `{name}` |" in text, name
        env = Settings.env_var(name)
        if env is not None:
            assert f"`{env}`" in text, env
    for env in ("HELION_CACHE_DIR", "HELION_SKIP_CACHE", "HELION_PRINT_IR", "HELION_INTERPRET",
                "TRITON_INTERPRET", "HELION_DISABLE_PLUGIN_AUTOLOAD"):  # fmt: skip
        assert f"| `{env}` |" in text, env
