"""Run the kernel suite compiled for an NVIDIA GPU and print correctness and timings.

Not a pytest module (it needs a GPU and JAX with CUDA): run it on a GPU machine with

    XLA_PYTHON_CLIENT_PREALLOCATE=false python packages/helion-pallas/tests/gpu_report.py [names]

Each kernel runs its default config and `--random N` random configs against PyTorch (fp32 dots
are compared in IEEE precision: `TRITON_F32_DEFAULT=ieee` is set unless already set). Times are
medians of CUDA-event timings of the compiled call (torch -> JAX -> torch included).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import random
import statistics
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("TRITON_F32_DEFAULT", "ieee")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch

import helion
from helion import backends
from helion import plugins


def ensure_plugin() -> None:
    """Register the plugin by hand when helion-pallas is on sys.path but not installed."""
    if "pallas" not in {b.name for b in backends.list_backends()}:
        import helion_pallas.plugin

        plugins.register_plugin(helion_pallas.plugin, "pallas", distribution="helion-pallas")


def to_device(value: object) -> object:
    return value.cuda() if isinstance(value, torch.Tensor) else value


def time_ms(fn, repeat: int = 50) -> float:
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="*")
    parser.add_argument("--random", type=int, default=2)
    parser.add_argument("--backend", default="pallas")
    parser.add_argument("--show", action="store_true", help="print the generated code of failures")
    parser.add_argument("--compare", default="triton", help="also time this backend ('' for none)")
    options = parser.parse_args()
    ensure_plugin()
    from pallas_kernels import CASES

    passed = 0
    for case in CASES:
        if options.names and case.name not in options.names:
            continue
        kernel = helion.kernel(case.fn, backend=options.backend, autotune_effort="none")
        args = tuple(to_device(a) for a in case.args())
        expected = case.reference(*args)
        started = time.perf_counter()
        try:
            bound = kernel.bind(args)
            configs = [bound.config_spec.default_config()]
            configs += [
                bound.config_spec.random_config(random.Random(seed))
                for seed in range(options.random)
            ]
            for config in configs:
                compiled = bound.compile_config(config)
                actual = compiled(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
                torch.testing.assert_close(
                    actual, expected, atol=max(case.atol, 1e-4), rtol=max(case.rtol, 1e-4)
                )
            compiled = bound.compile_config(configs[0])
            kernel_ms = time_ms(functools.partial(compiled, *args))
            torch_ms = time_ms(functools.partial(case.reference, *args))
            other = ""
            if options.compare:
                try:  # the same kernel and config space on the other backend, its default config
                    rival = helion.kernel(
                        case.fn, backend=options.compare, autotune_effort="none"
                    ).bind(args)
                    run = rival.compile_config(rival.config_spec.default_config())
                    rival_ms = time_ms(functools.partial(run, *args))
                    other = (
                        f"{options.compare} {rival_ms:8.3f} ms  ratio {kernel_ms / rival_ms:6.2f}  "
                    )
                except Exception as error:
                    other = f"{options.compare} failed: {type(error).__name__}  "
            passed += 1
            print(
                f"ok    {case.name:14s} {len(configs)} configs  {options.backend} {kernel_ms:8.3f} ms  "
                f"{other}torch {torch_ms:8.3f} ms  (compile+check {time.perf_counter() - started:.1f} s)",
                flush=True,
            )
        except Exception as error:  # report and go on with the next kernel
            print(f"FAIL  {case.name:14s} {type(error).__name__}: {str(error)[:3000]}", flush=True)
            if options.show:
                traceback.print_exc()
                with contextlib.suppress(Exception):
                    print(bound.to_code(config))
    print(f"{passed} passed", flush=True)


if __name__ == "__main__":
    main()
