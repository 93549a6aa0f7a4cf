"""``helion.Settings``: every knob that is not part of a Config.

Each field's default is computed from the environment when the Settings object is created
(i.e. when ``@helion.kernel`` runs), so ``HELION_*`` variables set later do not affect kernels
that already exist; keyword arguments override the environment. Values are checked and
normalized both at construction and on assignment (``kernel.settings.autotune_effort = "high"``
stores ``"full"``).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable
from typing import Literal
from typing import Sequence

from helion import exc

if TYPE_CHECKING:
    import torch

    from helion.runtime.config import Config


class RefMode(enum.Enum):
    """``EAGER`` runs the kernel body directly in PyTorch (``HELION_INTERPRET=1``)."""

    OFF = "off"
    EAGER = "eager"


AutotuneEffort = Literal["none", "quick", "full"]
AUTOTUNE_EFFORTS: tuple[str, ...] = ("none", "quick", "full")
_EFFORT_ALIASES = {"high": "full"}
DOT_PRECISIONS: tuple[str, ...] = ("tf32", "tf32x3", "ieee", "default", "high", "highest")
PRECOMPILE_MODES: tuple[str, ...] = ("fork", "spawn")
INITIAL_POPULATION_STRATEGIES: tuple[str, ...] = ("from_random", "from_best_available")
#: ``autotune_cache`` values this implementation has (see helion.autotuner.cache)
AUTOTUNE_CACHES: tuple[str, ...] = ("LocalAutotuneCache", "StrictLocalAutotuneCache")
#: cache classes of public Helion that are not implemented here, and why
_UNSUPPORTED_AUTOTUNE_CACHES: dict[str, str] = {
    "RemoteAutotuneCache": "there is no remote cache backend (HELION_REMOTE_CACHE_BACKEND)",
    "StrictRemoteAutotuneCache": "there is no remote cache backend (HELION_REMOTE_CACHE_BACKEND)",
    "AOTAutotuneCache": "there is no ahead-of-time tuning workflow (helion.aot_kernel)",
}

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})

# Re-benchmark threshold per effort when the setting is left unset.
_REBENCHMARK_THRESHOLD_BY_EFFORT = {"none": 1.5, "quick": 0.9, "full": 1.5}


# ---------------------------------------------------------------------------------------------
# Parsing helpers (shared by env reading and keyword coercion)
# ---------------------------------------------------------------------------------------------


def _invalid(source: str, message: str) -> exc.InvalidSetting:
    return exc.InvalidSetting(f"{source}: {message}")


def parse_bool(raw: object, source: str) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise _invalid(source, f"{raw!r} is not a boolean; use 1/true/yes/on or 0/false/no/off")


def _env(name: str) -> str | None:
    """The variable's value, or None when unset or empty (empty means 'use the default')."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return None
    return raw.strip()


def env_bool(name: str, default: bool) -> bool:
    raw = _env(name)
    return default if raw is None else parse_bool(raw, name)


def _parse_int(raw: object, source: str, *, minimum: int | None = None) -> int:
    if isinstance(raw, bool):
        raise _invalid(source, f"expected an int, got {raw!r}")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str):
        try:
            value = int(raw.strip())
        except ValueError:
            raise _invalid(source, f"expected an int, got {raw!r}") from None
    else:
        raise _invalid(source, f"expected an int, got {raw!r} ({type(raw).__name__})")
    if minimum is not None and value < minimum:
        raise _invalid(source, f"must be >= {minimum}, got {value}")
    return value


def _parse_float(raw: object, source: str, *, minimum: float | None = None) -> float:
    if isinstance(raw, bool):
        raise _invalid(source, f"expected a number, got {raw!r}")
    if isinstance(raw, (int, float)):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            raise _invalid(source, f"expected a number, got {raw!r}") from None
    else:
        raise _invalid(source, f"expected a number, got {raw!r} ({type(raw).__name__})")
    if value != value:  # every comparison with NaN is False: it would pass any bound below
        raise _invalid(source, f"expected a number, got {raw!r}")
    if minimum is not None and value < minimum:
        raise _invalid(source, f"must be >= {minimum}, got {value}")
    return value


def _parse_choice(raw: object, source: str, choices: Sequence[str]) -> str:
    text = raw.strip().lower() if isinstance(raw, str) else None
    if text is None or text not in choices:
        raise _invalid(source, f"{raw!r} is not one of {', '.join(map(repr, choices))}")
    return text


def parse_autotune_effort(raw: object, source: str = "autotune_effort") -> str:
    text = raw.strip().lower() if isinstance(raw, str) else None
    if text is not None:
        text = _EFFORT_ALIASES.get(text, text)
    if text is None or text not in AUTOTUNE_EFFORTS:
        raise _invalid(
            source,
            f"{raw!r} is not a valid autotune effort; choose one of "
            f"{', '.join(map(repr, AUTOTUNE_EFFORTS))} ('high' is accepted as 'full')",
        )
    return text


def parse_log_level(raw: object, source: str = "autotune_log_level") -> int:
    if isinstance(raw, bool):
        raise _invalid(source, f"expected a logging level, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        text = raw.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        level = logging.getLevelName(text.upper())
        if isinstance(level, int):
            return level
    raise _invalid(
        source,
        f"{raw!r} is not a logging level; use an int or one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
    )


def parse_index_dtype(raw: object, source: str = "index_dtype") -> torch.dtype | None:
    if raw is None:
        return None
    import torch

    if isinstance(raw, torch.dtype):
        dtype = raw
    elif isinstance(raw, str):
        text = raw.strip().lower().removeprefix("torch.")
        if text in ("", "auto", "none"):
            return None
        found = getattr(torch, text, None)
        if not isinstance(found, torch.dtype):
            raise _invalid(source, f"{raw!r} is not a torch dtype; use int32, int64 or auto")
        dtype = found
    else:
        raise _invalid(source, f"expected a torch dtype, got {raw!r}")
    if dtype not in (torch.int32, torch.int64):
        raise _invalid(source, f"index dtype must be torch.int32 or torch.int64, got {dtype}")
    return dtype


def parse_ref_mode(raw: object, source: str = "ref_mode") -> RefMode:
    if isinstance(raw, RefMode):
        return raw
    if isinstance(raw, str):
        try:
            return RefMode(raw.strip().lower())
        except ValueError:
            pass
    raise _invalid(source, f"{raw!r} is not a RefMode; use RefMode.OFF or RefMode.EAGER")


def parse_ignore_warnings(
    raw: object, source: str = "ignore_warnings"
) -> list[type[exc.BaseWarning]]:
    if raw is None:
        return []
    if isinstance(raw, str):
        items: list[object] = [n.strip() for n in raw.split(",") if n.strip()]
    elif isinstance(raw, type):
        items = [raw]
    elif isinstance(raw, (list, tuple, set, frozenset)):
        items = list(raw)
    else:
        raise _invalid(source, f"expected a list of helion.exc warning classes, got {raw!r}")
    result: list[type[exc.BaseWarning]] = []
    for item in items:
        if isinstance(item, str):
            try:
                item = exc.warning_class_by_name(item)
            except ValueError as error:
                raise _invalid(source, str(error)) from None
        if not (isinstance(item, type) and issubclass(item, exc.BaseWarning)):
            raise _invalid(source, f"{item!r} is not a helion.exc.BaseWarning subclass")
        result.append(item)
    return result


def parse_precompile(raw: object, source: str = "autotune_precompile") -> str | None:
    if raw is None or raw is False:
        return None
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in ("", "0", "false", "no", "off", "none"):
            return None
        if text in PRECOMPILE_MODES:
            return text
    raise _invalid(source, f"{raw!r} is not a precompile mode; use 'fork', 'spawn' or None")


def parse_config_overrides(
    raw: object, source: str = "autotune_config_overrides"
) -> dict[str, object]:
    """A dict, a JSON object string, or a path to a JSON file holding one."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return dict(raw)
    if hasattr(raw, "config") and isinstance(raw.config, dict):  # a Config
        return dict(raw.config)
    if isinstance(raw, (str, os.PathLike)):
        text = os.fspath(raw).strip()
        if not text:
            return {}
        if not text.startswith("{"):
            path = Path(text).expanduser()
            if not path.is_file():
                raise _invalid(source, f"{text!r} is neither a JSON object nor a readable file")
            text = path.read_text()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise _invalid(source, f"invalid JSON: {error}") from None
        if not isinstance(data, dict):
            raise _invalid(source, f"expected a JSON object, got {type(data).__name__}")
        return data
    raise _invalid(source, f"expected a dict, JSON string or path, got {raw!r}")


def parse_autotune_cache(raw: object, source: str = "autotune_cache") -> str:
    # class names are CamelCase; any case is accepted and the canonical spelling stored
    text = raw.strip().lower() if isinstance(raw, str) else ""
    choices = ", ".join(map(repr, AUTOTUNE_CACHES))
    for name in AUTOTUNE_CACHES:
        if name.lower() == text:
            return name
    for name, reason in _UNSUPPORTED_AUTOTUNE_CACHES.items():
        if name.lower() == text:
            raise _invalid(source, f"{name!r} is not supported: {reason}; use one of {choices}")
    close = difflib.get_close_matches(text, [n.lower() for n in AUTOTUNE_CACHES], n=1)
    suggestion = (
        f" (did you mean {next(n for n in AUTOTUNE_CACHES if n.lower() == close[0])!r}?)"
        if close
        else ""
    )
    raise _invalid(source, f"{raw!r} is not an autotune cache; use one of {choices}{suggestion}")


def parse_dot_precision(raw: object, source: str = "dot_precision") -> str:
    return _parse_choice(raw, source, DOT_PRECISIONS)


def parse_autotune_search(raw: object, source: str = "autotune_search") -> str:
    """A search name the autotuner knows (``helion.autotuner.search.get_search``): a built-in,
    one given to ``register_search`` or by a plugin, their class names and public Helion's
    spellings. Checked when the Settings are made, so a search registered later cannot be named
    (register it before creating the kernel)."""
    if not isinstance(raw, str):
        raise _invalid(source, f"expected the name of a search algorithm, got {raw!r}")
    name = raw.strip()
    if name in ("", "surrogate"):  # "": the effort's default search; no autotuner import
        return name
    from helion.autotuner.search import get_search
    from helion.autotuner.search import search_algorithms

    try:
        get_search(name)
    except ValueError:
        available = sorted(search_algorithms())
        close = difflib.get_close_matches(name.lower(), available, n=1)
        suggestion = f" (did you mean {close[0]!r}?)" if close else ""
        raise _invalid(
            source,
            f"{raw!r} is not a search algorithm; use one of {', '.join(map(repr, available))}"
            f"{suggestion}",
        ) from None
    return name


def _parse_acf_list(raw: object, source: str) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [p.strip() for p in raw.split(",") if p.strip()]
    if isinstance(raw, (list, tuple)) and all(isinstance(p, str) for p in raw):
        return list(raw)
    raise _invalid(source, f"expected a list of file paths, got {raw!r}")


def _parse_optional_str(raw: object, source: str) -> str | None:
    if raw is None or isinstance(raw, str):
        return raw or None
    if isinstance(raw, os.PathLike):
        return os.fspath(raw)
    raise _invalid(source, f"expected a string, got {raw!r}")


def _parse_str(raw: object, source: str) -> str:
    if isinstance(raw, str):
        return raw
    raise _invalid(source, f"expected a string, got {raw!r}")


def _parse_callable(raw: object, source: str) -> Callable[..., Any] | None:
    if raw is None or callable(raw):
        return raw
    raise _invalid(source, f"expected a callable or None, got {raw!r}")


def _parse_seed_configs(raw: object, source: str) -> list[Config] | None:
    if raw is None:
        return None
    from helion.runtime.config import Config

    items = [raw] if isinstance(raw, (Config, dict)) else raw
    if not isinstance(items, (list, tuple)):
        raise _invalid(source, f"expected a Config or a list of Configs, got {raw!r}")
    result = []
    for item in items:
        if isinstance(item, dict):
            item = Config(**item)
        if not isinstance(item, Config):
            raise _invalid(source, f"expected a Config or dict, got {item!r}")
        result.append(item)
    return result


def _default_random_seed() -> int:
    return int(time.time() * 1000) % 2**32


# ---------------------------------------------------------------------------------------------
# Field table: name -> (env var or None, coercer(raw, source) -> value, default from env)
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _FieldInfo:
    env: str | None
    coerce: Callable[[Any, str], Any]
    from_env: Callable[[], Any]
    doc: str


_FIELDS: dict[str, _FieldInfo] = {}


def _setting(
    env: str | None,
    coerce: Callable[[Any, str], Any],
    default: Any,
    doc: str,
    *,
    parse_env: Callable[[str, str], Any] | None = None,
) -> Any:
    """Declare a Settings field whose default is read from ``env`` at construction time."""
    parser = parse_env or coerce

    def from_env() -> Any:
        base = (
            default() if callable(default) else default
        )  # list/dict/seed fn: fresh value each time
        if env is None:
            return base
        raw = _env(env)
        return base if raw is None else parser(raw, env)

    info = _FieldInfo(env, coerce, from_env, doc)
    return dataclasses.field(default_factory=from_env, metadata={"info": info})


def _bool_setting(env: str | None, default: bool, doc: str) -> Any:
    return _setting(env, parse_bool, default, doc)


def _int_setting(
    env: str | None,
    default: int | Callable[[], int] | None,
    doc: str,
    *,
    minimum: int | None = None,
    optional: bool = False,
) -> Any:
    def coerce(raw: object, source: str) -> int | None:
        if optional and raw is None:
            return None
        return _parse_int(raw, source, minimum=minimum)

    return _setting(env, coerce, default, doc)


def _float_setting(
    env: str | None,
    default: float | None,
    doc: str,
    *,
    minimum: float | None = None,
    optional: bool = False,
) -> Any:
    def coerce(raw: object, source: str) -> float | None:
        if optional and raw is None:
            return None
        return _parse_float(raw, source, minimum=minimum)

    return _setting(env, coerce, default, doc)


def _interpret_ref_mode(raw: str, source: str) -> RefMode:
    # HELION_INTERPRET is a boolean switch; "eager"/"off" are accepted too.
    if raw.strip().lower() in ("eager", "off"):
        return parse_ref_mode(raw, source)
    return RefMode.EAGER if parse_bool(raw, source) else RefMode.OFF


@dataclasses.dataclass
class _SettingsFields:
    # -- core / codegen --------------------------------------------------------------------
    backend: str | None = _setting(
        "HELION_BACKEND",
        _parse_optional_str,
        None,
        "Backend to compile with (e.g. 'triton', 'pallas', 'cute', 'ref'); None picks the default backend.",
    )
    static_shapes: bool = _bool_setting(
        "HELION_STATIC_SHAPES",
        True,
        "Specialize on exact tensor sizes and strides (False: one compiled kernel for all sizes of a rank).",
    )
    index_dtype: Any = _setting(  # noqa: RUF009 (returns a dataclasses.field)
        "HELION_INDEX_DTYPE",
        parse_index_dtype,
        None,
        "Dtype of index arithmetic (torch.int32/int64); None chooses int64 only when a tensor needs it.",
    )
    dot_precision: str = _setting(
        "TRITON_F32_DEFAULT",
        parse_dot_precision,
        "tf32",
        "Precision of fp32 matmuls: tf32, tf32x3, ieee, default, high (=tf32x3), highest (=ieee).",
    )
    fast_math: bool = _bool_setting(
        "HELION_FAST_MATH", False, "Allow fast-math approximations of transcendental functions."
    )
    persistent_reserved_sms: int = _int_setting(
        "HELION_PERSISTENT_RESERVED_SMS",
        0,
        "SMs left free when launching persistent kernels.",
        minimum=0,
    )
    distributed: bool = _bool_setting(
        "HELION_DISTRIBUTED",
        False,
        "Force distributed compile behaviour (normally detected from symmetric-memory arguments).",
    )
    allow_warp_specialize: bool = _bool_setting(
        "HELION_ALLOW_WARP_SPECIALIZE", True, "Allow the range_warp_specializes tunable (sm100+)."
    )
    debug_dtype_asserts: bool = _bool_setting(
        "HELION_DEBUG_DTYPE_ASSERTS", False, "Emit static dtype assertions into generated code."
    )
    triton_do_not_specialize: bool = _bool_setting(
        "HELION_TRITON_DO_NOT_SPECIALIZE",
        False,
        "Pass do_not_specialize for dynamic size/stride args (static_shapes=False, Triton only).",
    )
    ref_mode: RefMode = _setting(  # noqa: RUF009 (returns a dataclasses.field)
        "HELION_INTERPRET",
        parse_ref_mode,
        RefMode.OFF,
        "RefMode.EAGER runs the kernel body eagerly in PyTorch (tiles as slices).",
        parse_env=_interpret_ref_mode,
    )
    ignore_warnings: list = _setting(  # noqa: RUF009 (returns a field())
        "HELION_IGNORE_WARNINGS",
        parse_ignore_warnings,
        list,
        "helion.exc warning classes to suppress (env: comma-separated class names).",
    )
    print_output_code: bool = _bool_setting(
        "HELION_PRINT_OUTPUT_CODE", False, "Print generated kernel code to stderr."
    )
    print_ir: bool = _bool_setting(
        "HELION_PRINT_IR", False, "Print the Kernel IR to stderr when it is built."
    )
    print_repro: bool = _bool_setting(
        "HELION_PRINT_REPRO", False, "Print a standalone reproduction script to stderr."
    )
    output_origin_lines: bool = _bool_setting(
        "HELION_OUTPUT_ORIGIN_LINES",
        True,
        "Annotate generated code with '# src[file:line]' comments.",
    )
    torch_compile_fusion: bool = _bool_setting(
        "HELION_TORCH_COMPILE_FUSION",
        False,
        "Allow prologue/epilogue fusion when the kernel is called under torch.compile.",
    )
    autotune_with_torch_compile_fusion: bool = _bool_setting(
        "HELION_AUTOTUNE_WITH_TORCH_COMPILE_FUSION",
        False,
        "Autotune the fused kernel under torch.compile.",
    )
    pallas_interpret: bool = _bool_setting(
        "HELION_PALLAS_INTERPRET", False, "Run Pallas kernels with interpret=True (on CPU)."
    )
    pallas_collective_id: int | None = _int_setting(
        None, None, "Pallas collective namespace override.", optional=True
    )
    pallas_topk_recall_target: float = _float_setting(
        None, 0.99, "Recall target of approximate top-k on Pallas.", minimum=0.0
    )

    # -- autotuning --------------------------------------------------------------------------
    autotune_effort: str = _setting(
        "HELION_AUTOTUNE_EFFORT",
        parse_autotune_effort,
        "full",
        "Autotuning effort: 'none' (default config), 'quick', or 'full' ('high' = 'full').",
    )
    force_autotune: bool = _bool_setting(
        "HELION_FORCE_AUTOTUNE",
        False,
        "Autotune even when configs were given (results are still cached).",
    )
    autotune_force_persistent: bool = _bool_setting(
        "HELION_AUTOTUNE_FORCE_PERSISTENT", False, "Restrict pid_type to the persistent kinds."
    )
    autotune_log_level: int = _setting(
        "HELION_AUTOTUNE_LOG_LEVEL",
        parse_log_level,
        logging.INFO,
        "Autotuner verbosity (int or level name); 0 disables output.",
    )
    autotune_log: str | None = _setting(
        "HELION_AUTOTUNE_LOG",
        _parse_optional_str,
        None,
        "Base path: writes <path>.csv (one row per candidate) and <path>.log.",
    )
    autotune_log_details: bool = _bool_setting(
        "HELION_AUTOTUNE_LOG_DETAILS",
        False,
        "Also write <autotune_log>.meta.jsonl (settings, IR, configs).",
    )
    autotune_log_search_space: bool = _bool_setting(
        "HELION_AUTOTUNE_LOG_SEARCH_SPACE",
        False,
        "Log the config space (fields, choices, size) before a search and its coverage after.",
    )
    autotune_log_search_space_verbose: bool = _bool_setting(
        "HELION_AUTOTUNE_LOG_SEARCH_SPACE_VERBOSE",
        False,
        "Also log each fragment's choices (implies autotune_log_search_space).",
    )
    autotune_log_search_space_path: str | None = _setting(
        "HELION_AUTOTUNE_LOG_SEARCH_SPACE_PATH",
        _parse_optional_str,
        None,
        "Write the search-space report (space, choices, coverage) as JSON to this path.",
    )
    autotune_compile_timeout: int = _int_setting(
        "HELION_AUTOTUNE_COMPILE_TIMEOUT",
        60,
        "Per-candidate compile timeout in seconds.",
        minimum=1,
    )
    autotune_adaptive_timeout: bool = _bool_setting(
        "HELION_AUTOTUNE_ADAPTIVE_TIMEOUT",
        True,
        "Shrink the compile timeout to the 0.9 quantile of observed compile times (at least 30 s).",
    )
    autotune_benchmark_subprocess: bool = _bool_setting(
        "HELION_AUTOTUNE_BENCHMARK_SUBPROCESS",
        True,
        "Benchmark candidates in a long-lived subprocess.",
    )
    autotune_benchmark_timeout: int = _int_setting(
        "HELION_AUTOTUNE_BENCHMARK_TIMEOUT",
        30,
        "Per-candidate benchmark timeout in seconds.",
        minimum=1,
    )
    autotune_precompile: str | None = _setting(
        "HELION_AUTOTUNE_PRECOMPILE",
        parse_precompile,
        "fork",
        "Parallel precompile in subprocesses: 'fork', 'spawn' or None (sequential, in process).",
    )
    autotune_precompile_jobs: int | None = _int_setting(
        "HELION_AUTOTUNE_PRECOMPILE_JOBS",
        None,
        "Max concurrent precompile jobs (None: CPU count).",
        minimum=1,
        optional=True,
    )
    autotune_random_seed: int = _int_setting(
        "HELION_AUTOTUNE_RANDOM_SEED",
        _default_random_seed,
        "Seed of the search RNG (default: time based).",
        minimum=0,
    )
    autotune_best_of_k: int = _int_setting(
        "HELION_AUTOTUNE_BEST_OF_K",
        1,
        "Run K searches (seed+i) and keep the best result.",
        minimum=1,
    )
    autotune_accuracy_check: bool = _bool_setting(
        "HELION_AUTOTUNE_ACCURACY_CHECK",
        True,
        "Compare each candidate's output with the baseline output.",
    )
    autotune_baseline_fn: Callable[..., Any] | None = _setting(
        None,
        _parse_callable,
        None,
        "Callable producing the baseline output (default: the default config).",
    )
    autotune_baseline_atol: float | None = _float_setting(
        None,
        None,
        "Absolute tolerance of the accuracy check (None: 1e-2; 0.0 for fp8).",
        minimum=0.0,
        optional=True,
    )
    autotune_baseline_rtol: float | None = _float_setting(
        None,
        None,
        "Relative tolerance of the accuracy check (None: 1e-2; 0.0 for fp8).",
        minimum=0.0,
        optional=True,
    )
    autotune_baseline_accuracy_check_fn: Callable[..., Any] | None = _setting(
        None,
        _parse_callable,
        None,
        "(actual, expected) -> None raising AssertionError; replaces assert_close.",
    )
    autotune_rebenchmark_threshold: float | None = _float_setting(
        "HELION_REBENCHMARK_THRESHOLD",
        None,
        "Re-benchmark candidates within threshold x best (None: 1.5 full, 0.9 quick).",
        minimum=0.0,
        optional=True,
    )
    autotune_suspicious_rebenchmark_ratio: float | None = _float_setting(
        "HELION_AUTOTUNE_SUSPICIOUS_REBENCHMARK_RATIO",
        None,
        "Recheck re-benchmarks faster than ratio x first time (None: 0.9 with subprocess benchmarking).",
        minimum=0.0,
        optional=True,
    )
    autotune_search_acf: list = _setting(  # noqa: RUF009 (returns a field())
        "HELION_AUTOTUNE_SEARCH_ACF",
        _parse_acf_list,
        list,
        "PTXAS advanced-controls files to search.",
    )
    autotune_progress_bar: bool = _bool_setting(
        "HELION_AUTOTUNE_PROGRESS_BAR", True, "Show a progress bar while autotuning."
    )
    autotune_max_generations: int | None = _int_setting(
        "HELION_AUTOTUNE_MAX_GENERATIONS",
        None,
        "Override the number of search generations.",
        minimum=0,
        optional=True,
    )
    autotune_budget_seconds: float | None = _float_setting(
        "HELION_AUTOTUNE_BUDGET_SECONDS",
        None,
        "Wall-clock autotuning budget; the best so far is returned.",
        minimum=0.0,
        optional=True,
    )
    autotune_ignore_errors: bool = _bool_setting(
        "HELION_AUTOTUNE_IGNORE_ERRORS", False, "Skip failing candidates without reporting them."
    )
    autotune_config_overrides: dict = _setting(  # noqa: RUF009 (returns a field())
        "HELION_AUTOTUNE_CONFIG_OVERRIDES",
        parse_config_overrides,
        dict,
        "Config keys forced on every candidate (env: JSON object or path to a JSON file).",
    )
    autotune_seed_configs: list | None = _setting(  # noqa: RUF009 (returns a field())
        None, _parse_seed_configs, None, "Config(s) added to the initial population."
    )
    autotune_config_filter: Callable[..., Any] | None = _setting(
        None,
        _parse_callable,
        None,
        "(Config) -> Config | None applied to every candidate (None skips it).",
    )
    disable_autotuner_heuristics: bool = _bool_setting(
        "HELION_DISABLE_AUTOTUNER_HEURISTICS", False, "Do not add compiler/backend seed configs."
    )
    autotune_cache: str = _setting(
        "HELION_AUTOTUNE_CACHE",
        parse_autotune_cache,
        "LocalAutotuneCache",
        "Autotune cache: 'LocalAutotuneCache' or 'StrictLocalAutotuneCache' (also keyed on the Helion sources).",
    )
    autotune_search: str = _setting(
        "HELION_AUTOTUNER",
        parse_autotune_search,
        "surrogate",
        "Name of the search algorithm the autotuner runs.",
    )
    autotuner_fn: Callable[..., Any] | None = _setting(
        None,
        _parse_callable,
        None,
        "(bound_kernel, args, **kw) -> autotuner with autotune() -> Config, replacing the cache "
        "and the search (e.g. helion.from_cache()); None uses the default (autotune_search + cache).",
    )
    autotune_benchmark_fn: Callable[..., Any] | None = _setting(
        None,
        _parse_callable,
        None,
        "(fns, *, repeat, desc=None) -> list[float] custom benchmarking.",
    )
    autotune_initial_population_strategy: str | None = _setting(
        "HELION_AUTOTUNER_INITIAL_POPULATION",
        lambda raw, src: (
            None if raw is None else _parse_choice(raw, src, INITIAL_POPULATION_STRATEGIES)
        ),
        None,
        "'from_random' or 'from_best_available' (None: chosen by effort).",
    )
    autotune_best_available_max_configs: int = _int_setting(
        "HELION_BEST_AVAILABLE_MAX_CONFIGS",
        20,
        "Max cached configs seeded by from_best_available.",
        minimum=0,
    )
    autotune_best_available_max_cache_scan: int = _int_setting(
        "HELION_BEST_AVAILABLE_MAX_CACHE_SCAN",
        500,
        "Max cache entries scanned by from_best_available.",
        minimum=0,
    )
    autotune_plot: str | None = _setting(
        "HELION_AUTOTUNE_PLOT",
        _parse_optional_str,
        None,
        "Write a convergence plot (PNG) to this path.",
    )


_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(_SettingsFields))
for _f in dataclasses.fields(_SettingsFields):
    _FIELDS[_f.name] = _f.metadata["info"]
del _f

#: Settings that change generated code, and so belong in compile/autotune cache keys.
CODEGEN_FIELDS: tuple[str, ...] = (
    "backend",
    "static_shapes",
    "index_dtype",
    "dot_precision",
    "fast_math",
    "persistent_reserved_sms",
    "distributed",
    "allow_warp_specialize",
    "debug_dtype_asserts",
    "triton_do_not_specialize",
    "output_origin_lines",
    "pallas_interpret",
)


#: boolean environment variables that are not Settings fields (see the end of this module)
_ENV_SWITCHES: tuple[str, ...] = (
    "HELION_SKIP_CACHE",
    "HELION_ASSERT_CACHE_HIT",
    "HELION_DISALLOW_AUTOTUNING",
)


def _unknown_setting(name: str) -> TypeError:
    close = difflib.get_close_matches(name, _FIELD_NAMES, n=3, cutoff=0.6)
    suggestion = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    return TypeError(f"Settings() got an unknown setting {name!r}{suggestion}")


class Settings(_SettingsFields):
    """All Helion settings; defaults come from ``HELION_*`` environment variables."""

    def __init__(self, **settings: Any) -> None:
        for name in settings:
            if name not in _FIELDS:
                raise _unknown_setting(name)
        super().__init__(**settings)
        self._check_combinations()

    def __setattr__(self, name: str, value: object) -> None:
        info = _FIELDS.get(name)
        if info is None:
            if name.startswith("_"):
                object.__setattr__(self, name, value)
                return
            raise AttributeError(str(_unknown_setting(name)))
        object.__setattr__(self, name, info.coerce(value, name))

    def _check_combinations(self) -> None:
        # the boolean variables that are not fields are read where they act (a tuning run, a
        # cache lookup); a value that is not a boolean is reported now, as for the fields
        for name in _ENV_SWITCHES:
            env_bool(name, False)
        if self.ref_mode is RefMode.EAGER:
            if self.print_output_code:
                raise exc.RefEagerModeCodePrintError
            if env_bool("TRITON_INTERPRET", False) and env_bool("HELION_INTERPRET", False):
                raise exc.IncompatibleInterpretModes
        if self.backend == "tileir" and os.environ.get("ENABLE_TILE") != "1":
            raise exc.MissingEnableTile

    # -- queries --------------------------------------------------------------------------

    def to_dict(self, *, jsonable: bool = False) -> dict[str, object]:
        """Every setting by name. ``jsonable=True`` turns enums, dtypes, classes and callables into strings."""
        values = {name: getattr(self, name) for name in _FIELD_NAMES}
        if not jsonable:
            return values
        return {name: _jsonable(value) for name, value in values.items()}

    def codegen_key(self) -> tuple[object, ...]:
        """Hashable summary of the settings that change generated code (for cache keys)."""
        return tuple((name, _jsonable(getattr(self, name))) for name in CODEGEN_FIELDS)

    def check_autotuning_disabled(self) -> None:
        if env_bool("HELION_DISALLOW_AUTOTUNING", False):
            raise exc.AutotuningDisallowedInEnvironment("via HELION_DISALLOW_AUTOTUNING=1")

    def get_rebenchmark_threshold(self) -> float:
        if self.autotune_rebenchmark_threshold is not None:
            return self.autotune_rebenchmark_threshold
        return _REBENCHMARK_THRESHOLD_BY_EFFORT[self.autotune_effort]

    def get_suspicious_rebenchmark_ratio(self) -> float | None:
        if self.autotune_suspicious_rebenchmark_ratio is not None:
            return self.autotune_suspicious_rebenchmark_ratio
        return 0.9 if self.autotune_benchmark_subprocess else None

    @staticmethod
    def field_names() -> tuple[str, ...]:
        return _FIELD_NAMES

    @staticmethod
    def env_var(name: str) -> str | None:
        """The environment variable that provides the default of setting ``name``."""
        if name not in _FIELDS:
            raise _unknown_setting(name)
        return _FIELDS[name].env

    @staticmethod
    def describe(name: str) -> str:
        if name not in _FIELDS:
            raise _unknown_setting(name)
        return _FIELDS[name].doc


def _jsonable(value: object) -> object:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "config") and isinstance(value.config, dict):
        return _jsonable(value.config)
    if callable(value):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}"
    return str(value)  # torch.dtype and the like


# ---------------------------------------------------------------------------------------------
# Environment variables that are not Settings fields
# ---------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """Root of Helion's on-disk caches: ``HELION_CACHE_DIR`` or the user cache dir + ``helion``."""
    configured = _env("HELION_CACHE_DIR")
    if configured is not None:
        return Path(configured).expanduser()
    try:
        import platformdirs
    except ImportError:
        return Path.home() / ".cache" / "helion"
    return Path(platformdirs.user_cache_dir("helion", appauthor=False))


def skip_cache() -> bool:
    """``HELION_SKIP_CACHE=1``: neither read nor write the autotune cache."""
    return env_bool("HELION_SKIP_CACHE", False)


def assert_cache_hit() -> bool:
    """``HELION_ASSERT_CACHE_HIT=1``: a cache miss raises ``exc.CacheAssertionError``."""
    return env_bool("HELION_ASSERT_CACHE_HIT", False)


def plugin_autoload_disabled() -> bool:
    """``HELION_DISABLE_PLUGIN_AUTOLOAD=1``: do not load ``helion.plugins`` entry points."""
    return env_bool("HELION_DISABLE_PLUGIN_AUTOLOAD", False)
