"""Shared helpers of the example kernels: correctness check against PyTorch and timing.

Every example module defines `example_args()` (fresh random inputs) and `CASES` (the kernels it
shows, each with its PyTorch reference); its `main()` calls `run_cases(CASES, example_args)`.

How `main()` picks a config: with `HELION_AUTOTUNE_EFFORT` set (or `HELION_INTERPRET=1`) the
kernel is simply called, so the settings decide (autotune, eager mode, ...); otherwise it runs
the default config of the kernel's ConfigSpec, so that a plain `python examples/add.py` is quick.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
import traceback
from typing import Any
from typing import Callable
from typing import Sequence

import torch

import helion

DEVICE = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")

# the example modules that make up the core kernel suite (tests and benchmarks iterate over it)
SUITE = (
    "add",
    "axpy",
    "exp",
    "sum",
    "long_sum",
    "softmax",
    "softmax_two_pass",
    "matmul",
    "bmm",
    "matmul_epilogue",
    "layer_norm",
    "rms_norm",
    "cross_entropy",
    "embedding",
    "attention",
    "jagged_mean",
    "histogram",
    "split_k",
    "batch_softmax",
    "softmax_decomposed",
    "kl_div",
    "jsd",
    "geglu",
    "swiglu",
    "rope",
    "broadcast_matmul",
    "grouped_gemm",
    "fp8_gemm",
    "int4_gemm",
    "moe_matmul",
    "se_block",
    "welford",
    "cumulative",
    "low_mem_dropout",
    "jagged_sum",
    "jagged_softmax",
    "jagged_dense_add",
    "segment_reduction",
    "sort_topk",
    "concatenate",
    "layer_norm_bwd",
    "rms_norm_bwd",
    "matmul_closure",
)


@dataclasses.dataclass
class Case:
    """One kernel of an example with the PyTorch function it must agree with."""

    name: str
    kernel: helion.Kernel
    reference: Callable[..., Any]
    atol: float = 1e-4
    rtol: float = 1e-4
    # inputs for this case; defaults to the module's example_args
    args: Callable[[], tuple] | None = None


def assert_matches(actual: Any, expected: Any, *, atol: float, rtol: float) -> None:
    """`torch.testing.assert_close` over (nested tuples of) tensors, compared in float32."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), (
            type(actual),
            type(expected),
        )
        for a, e in zip(actual, expected, strict=True):
            assert_matches(a, e, atol=atol, rtol=rtol)
        return
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"expected a tensor, got {type(actual).__name__}"
        assert actual.shape == expected.shape, (
            f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        )
        assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
        if expected.dtype.is_floating_point:
            torch.testing.assert_close(actual.float(), expected.float(), atol=atol, rtol=rtol)
        else:
            torch.testing.assert_close(actual, expected, atol=0, rtol=0)
        return
    assert actual == expected, (actual, expected)


def clone_args(args: Sequence[Any]) -> tuple:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def synchronize() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def time_ms(fn: Callable[[], Any], *, budget_s: float = 0.5, max_repeat: int = 100) -> float:
    """Median time of one call in milliseconds: CUDA events on a GPU, wall clock elsewhere."""
    fn()  # warm up (compilation, caches)
    synchronize()
    start = time.perf_counter()
    fn()
    synchronize()
    once = max(time.perf_counter() - start, 1e-6)
    repeat = int(max(1, min(max_repeat, budget_s / once)))
    samples = []
    for _ in range(repeat):
        if DEVICE.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            samples.append(begin.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
    samples.sort()
    return samples[len(samples) // 2]


def _runner(kernel: helion.Kernel, args: tuple) -> tuple[Callable[..., Any], str]:
    settings = kernel.settings
    if settings.ref_mode == helion.RefMode.EAGER:
        return kernel, "eager mode (HELION_INTERPRET)"
    if os.environ.get("HELION_AUTOTUNE_EFFORT") or kernel.configs:
        return kernel, f"kernel settings (autotune_effort={settings.autotune_effort})"
    bound = kernel.bind(args)
    config = bound.config_spec.default_config()
    return bound.compile_config(config), f"default config {config}"


def pin_default_configs(kernel: helion.Kernel, args: tuple) -> None:
    """Make plain calls of `kernel` on inputs like `args` use its default config, as `main()`
    does for the cases (for code that calls kernels itself, e.g. through autograd)."""
    settings = kernel.settings
    if settings.ref_mode == helion.RefMode.EAGER:
        return
    if os.environ.get("HELION_AUTOTUNE_EFFORT") or kernel.configs:
        return
    bound = kernel.bind(args)
    bound.set_config(bound.config_spec.default_config())


def run_case(case: Case, example_args: Callable[[], tuple]) -> None:
    """Check one case against its reference on fresh inputs and print both times."""
    args = (case.args or example_args)()
    expected = case.reference(*clone_args(args))
    run, how = _runner(case.kernel, args)
    actual = run(*clone_args(args))
    assert_matches(actual, expected, atol=case.atol, rtol=case.rtol)
    eager = case.kernel.settings.ref_mode == helion.RefMode.EAGER
    backend = "eager" if eager else case.kernel.bind(args).backend.name
    kernel_ms = time_ms(functools.partial(run, *args))
    reference_ms = time_ms(functools.partial(case.reference, *args))
    print(
        f"{case.name:>24}: ok   helion[{backend}] {kernel_ms:9.3f} ms   torch {reference_ms:9.3f} ms"
        f"   ({how}, {DEVICE.type})"
    )


def run_cases(cases: Sequence[Case], example_args: Callable[[], tuple]) -> None:
    """`run_case` for every case; a failing case is reported and the others still run, then the
    script exits with status 1."""
    failed = []
    for case in cases:
        try:
            run_case(case, example_args)
        except Exception:
            traceback.print_exc()
            print(f"{case.name:>24}: FAILED (traceback above)")
            failed.append(case.name)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")
