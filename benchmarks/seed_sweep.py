"""Time each memory-bound benchmark kernel's seed configs and variants of them on a GPU.

    python benchmarks/seed_sweep.py [--kernels add,softmax] [--warps 4,8,16] [--policies ,first,last]

For every seed config of a kernel (at run.py's sizes) it times the seed and the seed with each
load eviction policy and warp count, against copy bandwidth measured in the same run; the table
says which variant of which seed is fastest. This is how the seed heuristics are checked: a
variant that beats every seed by a clear margin is a seed the heuristic is missing.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import sys
import time

import torch

from run import BENCHES  # benchmarks/ is on sys.path when this file runs

import helion
from _timing import Timer, copy_bandwidth_tbs


def variants(seed: helion.Config, warps: list[int], policies: list[str]) -> list[helion.Config]:
    values = dict(seed)
    loads = len(values.get("load_eviction_policies", []))
    out = [seed]
    for count, policy in itertools.product(warps, policies):
        changed = dict(values, num_warps=count)
        if loads:
            changed["load_eviction_policies"] = [policy] * loads
        config = helion.Config(**changed)
        if config not in out:
            out.append(config)
    return out


def sweep(name: str, timer: Timer, copy: float, warps: list[int], policies: list[str]) -> list[tuple]:
    bench = BENCHES[name]
    kernel = getattr(importlib.import_module(bench.module), bench.kernel)
    kernel.settings.autotune_effort = "none"
    kernel.reset()
    args = bench.make_args(timer.device)
    expected = bench.reference(*args)
    bound = kernel.bind(args)
    work = bench.work(args)
    rows = []
    for index, seed in enumerate(bound.seed_configs()):
        for config in variants(seed, warps, policies):
            label = f"seed{index}" + ("" if config == seed else " variant")
            try:
                run = bound.compile_config(config)
                torch.testing.assert_close(run(*args).float(), expected.float(), atol=bench.atol, rtol=bench.rtol)
                ms = timer.median_ms(lambda: run(*args), target_s=0.05)
            except Exception as error:  # a variant that does not compile is reported, not fatal
                rows.append((name, label, float("nan"), f"{type(error).__name__}", config))
                continue
            rate = work / (ms * 1e-3) / 1e12
            rows.append((name, label, ms, f"{rate:.3f} TB/s {rate / copy:6.1%}", config))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    memory_bound = [n for n, b in BENCHES.items() if b.bound == "memory"]
    parser.add_argument("--kernels", default=",".join(memory_bound))
    parser.add_argument("--warps", default="4,8,16")
    parser.add_argument("--policies", default=",first,last")
    options = parser.parse_args()
    if not torch.cuda.is_available():
        print("seed_sweep.py needs a CUDA device", file=sys.stderr)
        return 2
    timer = Timer(torch.device("cuda"))
    copy = copy_bandwidth_tbs(timer)
    print(f"copy bandwidth {copy:.3f} TB/s", flush=True)
    warps = [int(w) for w in options.warps.split(",")]
    policies = options.policies.split(",")
    for name in options.kernels.split(","):
        started = time.perf_counter()
        rows = sweep(name, timer, copy, warps, policies)
        timed = [r for r in rows if r[2] == r[2]]
        best_seed = min((r for r in timed if not r[1].endswith("variant")), key=lambda r: r[2], default=None)
        best = min(timed, key=lambda r: r[2], default=None)
        print(f"== {name}: {len(rows)} configs in {time.perf_counter() - started:.0f} s", flush=True)
        for row in sorted(timed, key=lambda r: r[2])[:5]:
            print(f"   {row[1]:15} {row[2]:8.4f} ms  {row[3]}  {row[4]!r}", flush=True)
        if best_seed and best:
            print(f"   best seed {best_seed[2]:.4f} ms, best variant {best[2]:.4f} ms "
                  f"({best_seed[2] / best[2]:.2f}x)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
