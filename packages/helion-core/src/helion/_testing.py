"""Public Helion's example harness, for examples written against it (``from helion._testing
import DEVICE, run_example``): check a kernel against a baseline, time both, print a table.

`run_example` checks every implementation's output against the first baseline's (each run on
its own clones of the arguments, compared in float32 with ``torch.testing.assert_close``),
times each with `helion.autotuner.timing.do_bench` (CUDA events with the L2 cache flushed, or
the wall clock elsewhere), prints "Implementation / Time (ms) / Speedup" to stderr and returns
``{name: ms}``. `code_and_output` / `output_only` run a kernel with a config given as keywords.
Public Helion's backward check (``bwd=True``), profiler traces and distributed options are not
implemented: they raise ``helion.exc.InvalidAPIUsage``.
"""

from __future__ import annotations

import sys
from typing import Any
from typing import Callable
from typing import Mapping

import torch

from helion import exc

DEVICE = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
HALF_DTYPE = torch.float16
LONG_INT_TYPE = torch.int64

_UNSUPPORTED = ("bwd", "trace_path", "process_group_name")


def _named(fns: Callable[..., Any] | Mapping[str, Callable[..., Any]], name: str) -> dict:
    if isinstance(fns, Mapping):
        return dict(fns)
    return {name: fns}


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(item) for item in value)
    return value


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [tensor for item in value for tensor in _tensors(item)]
    return []


def run_example(
    kernel_fn: Callable[..., Any] | Mapping[str, Callable[..., Any]],
    baseline_fn: Callable[..., Any] | Mapping[str, Callable[..., Any]],
    args: tuple[Any, ...],
    kernel_name: str = "helion",
    baseline_name: str = "torch",
    rtol: float = 1e-2,
    atol: float = 1e-1,
    **options: Any,
) -> dict[str, float]:
    """Check each kernel (and each further baseline) against the first baseline, time them
    all, print the table to stderr and return ``{name: median ms}``."""
    asked = [name for name in _UNSUPPORTED if options.get(name)]
    unknown = [name for name in options if name not in (*_UNSUPPORTED, "interleaved")]
    if asked or unknown:
        raise exc.InvalidAPIUsage(
            f"run_example({', '.join(asked + unknown)}=...) is not supported here: it checks "
            "forward outputs and times them"
        )
    from helion.autotuner.timing import do_bench

    baselines = _named(baseline_fn, baseline_name)
    kernels = _named(kernel_fn, kernel_name)
    implementations = {**baselines, **kernels}
    first = next(iter(baselines.values()))
    expected = _tensors(first(*_clone(args)))
    for name, fn in implementations.items():
        got = _tensors(fn(*_clone(args)))
        if len(got) != len(expected):
            raise AssertionError(
                f"{name} returned {len(got)} tensors, the baseline {len(expected)}"
            )
        for actual, wanted in zip(got, expected, strict=True):
            torch.testing.assert_close(
                actual.float(),
                wanted.float(),
                rtol=rtol,
                atol=atol,
                msg=lambda m, n=name: f"{n}: {m}",
            )
    device = next((t.device for t in _tensors(args)), DEVICE)
    times = {}
    for name, fn in implementations.items():
        run_args = _clone(args)  # each implementation on copies of its own
        times[name] = do_bench(lambda fn=fn, run_args=run_args: fn(*run_args), device=device)
    best_baseline = min(times[name] for name in baselines)
    width = max(len(name) for name in times) + 2
    lines = [f"{'Implementation':<{width}} {'Time (ms)':>10} {'Speedup':>10}"]
    for name, ms in times.items():
        ratio = best_baseline / ms if ms > 0 else float("inf")
        marker = " (ref)" if name in baselines and ms == best_baseline else ""
        lines.append(f"{name:<{width}} {ms:>10.4f} {ratio:>9.2f}x{marker}")
    print("\n".join(lines), file=sys.stderr)
    return times


def _config_of(config_kwargs: dict[str, Any]) -> Any:
    from helion.runtime.config import Config

    return Config(**config_kwargs) if config_kwargs else None


def code_and_output(fn: Any, args: tuple[Any, ...], **config_kwargs: Any) -> tuple[str, Any]:
    """The generated code of kernel ``fn`` for ``args`` with the config ``config_kwargs`` (none:
    the config a call would run), and its result on ``args``."""
    bound = fn.bind(args)
    config = _config_of(config_kwargs)
    code = bound.to_code(config)
    return code, bound.compile_config(config)(*args)


def output_only(fn: Any, args: tuple[Any, ...], **config_kwargs: Any) -> Any:
    """`code_and_output` without the code."""
    bound = fn.bind(args)
    return bound.compile_config(_config_of(config_kwargs))(*args)
