"""`make demo`: four kernels end to end on the default backend.

For each kernel: bind it to example inputs, run a quick autotune (a 20 s budget), check the
result against PyTorch, time both, and print the code the backend generated for the winning
config. If the autotuner fails, the demo says so, shows the error, and instead times a few
random valid configs itself.
"""

from __future__ import annotations

import functools
import random
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import add as add_example
import layer_norm as layer_norm_example
import matmul as matmul_example
import softmax as softmax_example
from _common import DEVICE
from _common import assert_matches
from _common import clone_args
from _common import time_ms

import helion

BUDGET_SECONDS = 20
FALLBACK_CONFIGS = 4


def _fallback_search(bound, args, reason: str) -> helion.Config:
    print(f"  autotune FAILED ({reason}); timing {FALLBACK_CONFIGS} random configs instead")
    rng = random.Random(0)
    candidates = [bound.config_spec.default_config()]
    candidates += [bound.config_spec.random_config(rng) for _ in range(FALLBACK_CONFIGS - 1)]
    best, best_ms = None, float("inf")
    for config in candidates:
        try:
            compiled = bound.compile_config(config)
            ms = time_ms(functools.partial(compiled, *args), budget_s=0.2, max_repeat=10)
        except Exception as error:  # a failing candidate is reported, not hidden
            print(f"    {config}: failed: {type(error).__name__}: {error}")
            continue
        print(f"    {config}: {ms:.3f} ms")
        if ms < best_ms:
            best, best_ms = config, ms
    if best is None:
        raise RuntimeError("every fallback config failed")
    return best


def demo(module) -> bool:
    case = module.CASES[0]
    kernel = helion.kernel(
        case.kernel.fn, autotune_effort="quick", autotune_budget_seconds=BUDGET_SECONDS
    )
    args = module.example_args()
    bound = kernel.bind(args)
    print(f"== {case.name}  (backend: {bound.backend.name}, device: {DEVICE.type})")
    start = time.perf_counter()
    try:
        config = bound.autotune(args, force=True)
        print(f"  autotuned in {time.perf_counter() - start:.1f} s: {config}")
    except Exception as error:
        traceback.print_exc()
        config = _fallback_search(bound, args, f"{type(error).__name__}: {error}")
        print(f"  best of the fallback configs: {config}")
    compiled = bound.compile_config(config)
    expected = case.reference(*clone_args(args))
    actual = compiled(*clone_args(args))
    try:
        assert_matches(actual, expected, atol=case.atol, rtol=case.rtol)
        verdict = "matches PyTorch"
    except AssertionError as error:
        verdict = f"MISMATCH against PyTorch: {error}"
    kernel_ms = time_ms(lambda: compiled(*args))
    reference_ms = time_ms(lambda: case.reference(*args))
    print(f"  {verdict}; helion {kernel_ms:.3f} ms, torch {reference_ms:.3f} ms")
    print("  generated code:")
    for line in bound.to_code(config).splitlines():
        print("    " + line)
    print()
    return verdict == "matches PyTorch"


def main() -> int:
    torch.manual_seed(0)
    results = {}
    for module in (add_example, softmax_example, matmul_example, layer_norm_example):
        results[module.CASES[0].name] = demo(module)
    print(
        "summary: "
        + ", ".join(f"{name} {'ok' if ok else 'FAILED'}" for name, ok in results.items())
    )
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
