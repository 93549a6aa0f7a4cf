"""Does the autotuner's timer agree with the benchmarks' timer? rms_norm 8192^2 bf16, a few configs.

    python benchmarks/timing_probe.py

For each config: the harness's do_bench (as autotuning times candidates), the benchmarks' Timer
and triton.testing.do_bench, in one process, in milliseconds.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from _timing import Timer
from rms_norm import rms_norm

import helion
from helion.autotuner.benchmarking import clone_args
from helion.autotuner.benchmarking import do_bench

CONFIGS = [
    dict(
        block_sizes=[1],
        num_warps=16,
        num_stages=1,
        indexing=["pointer"] * 3,
        load_eviction_policies=["", ""],
    ),
    dict(
        block_sizes=[1],
        num_warps=16,
        num_stages=1,
        indexing=["pointer"] * 3,
        load_eviction_policies=["last", "last"],
    ),
    dict(
        block_sizes=[1],
        num_warps=8,
        num_stages=1,
        indexing=["pointer"] * 3,
        load_eviction_policies=["last", "last"],
    ),
    dict(
        block_sizes=[2],
        num_warps=8,
        num_stages=1,
        indexing=["pointer"] * 3,
        load_eviction_policies=["last", "last"],
    ),
]


def main() -> None:
    device = torch.device("cuda")
    x = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    w = torch.randn(8192, device=device, dtype=torch.bfloat16)
    timer = Timer(device)
    bound = rms_norm.bind((x, w))
    print(f"{'config':70} {'harness':>9} {'harness*':>9} {'Timer':>9} {'triton':>9}")
    for values in CONFIGS:
        fn = bound.compile_config(helion.Config(**values))
        args = clone_args((x, w))
        call = lambda fn=fn, args=args: fn(*args)  # noqa: E731
        call()
        torch.cuda.synchronize()
        harness = do_bench(call, device=device, repeat=60, warmup=1)
        harness_again = do_bench(call, device=device, repeat=200, warmup=5)
        timer_ms = timer.median_ms(call)
        triton_ms = triton.testing.do_bench(call, warmup=5, rep=50, return_mode="median")
        text = f"w{values['num_warps']} b{values['block_sizes'][0]} ev{values['load_eviction_policies']}"
        print(
            f"{text:70} {harness:9.4f} {harness_again:9.4f} {timer_ms:9.4f} {triton_ms:9.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
