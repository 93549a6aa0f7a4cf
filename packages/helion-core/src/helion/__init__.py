"""Helion: PyTorch with tiles. `@helion.kernel` turns a function with `hl.tile` loops into a kernel."""

from __future__ import annotations

from typing import Any
from typing import Callable
from typing import Hashable
from typing import Sequence

from helion import exc as exc
from helion import language as language
from helion.runtime.config import Config as Config
from helion.runtime.output_code import OutputCodeOptions as OutputCodeOptions
from helion.runtime.settings import RefMode as RefMode
from helion.runtime.settings import Settings as Settings

__version__ = "0.1.0"

__all__ = [
    "Config",
    "Kernel",
    "OutputCodeOptions",
    "RefMode",
    "Settings",
    "aot_kernel",
    "cdiv",
    "exc",
    "from_cache",
    "jit",
    "kernel",
    "language",
    "next_power_of_2",
    "runtime",
]


def cdiv(a: int, b: int) -> int:
    """Ceiling division: `(a + b - 1) // b`."""
    return (a + b - 1) // b


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def kernel(
    fn: Callable | None = None,
    *,
    config: Config | dict | None = None,
    configs: Sequence[Config | dict] | None = None,
    key: Callable[..., Hashable] | None = None,
    **settings: Any,
) -> Any:
    """Decorate a function into a Helion kernel; usable bare or with arguments.

    `config=` fixes one config; `configs=[...]` makes the autotuner choose among those only;
    other keywords are `helion.Settings` fields (or one `settings=Settings(...)`).
    """
    from helion.runtime.kernel import Kernel

    if config is not None and configs is not None:
        raise ValueError("give either config= or configs=, not both")
    if config is not None:
        if not isinstance(config, (Config, dict)):
            from helion.runtime.kernel import _describe_value

            several = isinstance(config, (list, tuple))
            raise exc.InvalidConfig(
                "helion.kernel(config=...) takes one helion.Config (or a dict of its entries); "
                f"got {_describe_value(config)}",
                hint="For several configs for the autotuner to choose from, pass configs=[...]."
                if several
                else "e.g. config=helion.Config(block_sizes=[64])",
            )
        configs = [config]
    if "settings" in settings:
        if len(settings) != 1:
            raise ValueError("settings= must be the only settings keyword")
        settings_obj = settings["settings"]
    else:
        settings_obj = Settings(**settings)

    def decorator(function: Callable) -> Kernel:
        return Kernel(function, configs=configs, settings=settings_obj, key=key)

    if fn is not None:
        return decorator(fn)
    return decorator


jit = kernel


def from_cache(
    *, max_configs: int | None = None, configs: Sequence[Config | dict] = ()
) -> Callable[..., Any]:
    """An `autotuner_fn` that picks the fastest of the configs cached for a kernel.

    `@helion.kernel(autotuner_fn=helion.from_cache())`: a specialization not tuned yet runs a
    finite search over the best configs cached for the same kernel source (other shapes and
    devices, most recent first, at most `max_configs`) plus `configs`; with nothing to try, the
    default config (logged). See `helion.autotuner.from_cache.CachedFiniteSearch`.
    """
    from helion.autotuner.from_cache import from_cache as make

    return make(max_configs=max_configs, configs=configs)


def aot_kernel(fn: Callable | None = None, **options: Any) -> Any:
    """Public Helion's ahead-of-time tuned kernel (``HELION_AOT_MODE`` collect / measure /
    evaluate): that workflow is not implemented here, so this raises ``InvalidAPIUsage``."""
    raise exc.InvalidAPIUsage(
        "helion.aot_kernel is not supported: there is no ahead-of-time tuning workflow "
        "(HELION_AOT_MODE, heuristics generated from collected data)",
        hint="Use @helion.kernel: tuned configs are cached on disk per shape and device "
        "(HELION_CACHE_DIR), helion.from_cache() reuses them for new shapes, and configs=[...] "
        "limits the search to given configs.",
    )


def __getattr__(name: str) -> Any:
    if name == "Kernel":
        from helion.runtime.kernel import Kernel

        return Kernel
    if name == "runtime":
        import helion.runtime as runtime

        return runtime
    if name == "experimental":
        import helion.experimental as experimental

        return experimental
    if name == "autotuner":
        import helion.autotuner as autotuner

        return autotuner
    raise AttributeError(f"module 'helion' has no attribute {name!r}")
