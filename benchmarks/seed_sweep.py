"""Time each benchmark kernel's seed configs and variants of them on a GPU.

    python benchmarks/seed_sweep.py [--kernels add,softmax] [--warps 4,8,16] [--policies ,first,last]
                                    [--stages 2,3] [--random N]

For every seed config of a kernel (at run.py's sizes) it times the seed and the seed with each
load eviction policy, warp count and (with --stages) pipeline depth, plus N random valid configs,
against the roofline measured in the same run (copy bandwidth for memory-bound kernels, the
vendor baseline for compute-bound ones); the table says which variant of which seed is fastest.
This is how the seed heuristics are checked: a variant that beats every seed by a clear margin
is a seed the heuristic is missing.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import random
import sys
import time

import torch
from _timing import Timer
from _timing import copy_bandwidth_tbs
from run import BENCHES  # benchmarks/ is on sys.path when this file runs
from run import _check

import helion


def variants(
    seed: helion.Config, warps: list[int], policies: list[str], stages: list[int]
) -> list[helion.Config]:
    values = dict(seed)
    loads = len(values.get("load_eviction_policies", []))
    out = [seed]
    for count, policy, depth in itertools.product(warps, policies, stages or [None]):
        changed = dict(values, num_warps=count)
        if depth is not None:
            changed["num_stages"] = depth
        if loads and policy != "keep":
            changed["load_eviction_policies"] = [policy] * loads
        config = helion.Config(**changed)
        if config not in out:
            out.append(config)
    return out


def sweep(
    name: str,
    timer: Timer,
    copy: float,
    warps: list[int],
    policies: list[str],
    stages: list[int],
    n_random: int,
    extra: list[dict] = (),
    verbose: bool = False,
) -> list[tuple]:
    bench = BENCHES[name]
    kernel = getattr(importlib.import_module(bench.module), bench.kernel)
    kernel.settings.autotune_effort = "none"
    kernel.reset()
    args = bench.make_args(timer.device)
    expected = bench.reference(*args)
    bound = kernel.bind(args)
    work = bench.work(args)
    compute = bench.bound == "compute"
    roofline, unit = (copy, "TB/s") if not compute else (None, "TFLOP/s")
    if compute and bench.vendor is not None:
        vendor_ms = timer.median_ms(lambda: bench.vendor[1](*args))
        roofline = work / (vendor_ms * 1e-3) / 1e12
        print(f"   {bench.vendor[0]}: {roofline:.1f} TFLOP/s", flush=True)
    rng = random.Random(0)
    candidates = [
        (f"seed{index}" + ("" if config == seed else " variant"), config)
        for index, seed in enumerate(bound.seed_configs())
        for config in variants(seed, warps, policies, stages)
    ]
    candidates += [(f"random{i}", bound.config_spec.random_config(rng)) for i in range(n_random)]
    for i, changes in enumerate(extra):  # the first seed with these entries changed
        candidates.append(
            (f"extra{i}", helion.Config(**{**dict(bound.seed_configs()[0]), **changes}))
        )
    rows = []
    for label, config in candidates:
        try:
            run = bound.compile_config(config)
            _check(run(*args), expected, bench)
            ms = timer.median_ms(lambda run=run: run(*args), target_s=0.05)
        except Exception as error:  # a variant that does not compile is reported, not fatal
            rows.append((name, label, float("nan"), f"{type(error).__name__}", config))
            continue
        rate = work / (ms * 1e-3) / 1e12
        share = f"{rate / roofline:6.1%}" if roofline else ""
        rows.append((name, label, ms, f"{rate:.3f} {unit} {share}", config))
        if verbose:  # each row as it is measured: a sweep cut short by a timeout keeps them
            print(
                f"   . {label:15} {ms:8.4f} ms  {rows[-1][3]}  {_changed(config, candidates[0][1])}",
                flush=True,
            )
    return rows


def _changed(config: helion.Config, reference: helion.Config) -> str:
    """The entries of ``config`` that differ from ``reference`` (short rows for the live log)."""
    values, base = dict(config), dict(reference)
    return (
        ", ".join(f"{k}={v}" for k, v in values.items() if base.get(k) != v) or "(the first seed)"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    memory_bound = [n for n, b in BENCHES.items() if b.bound == "memory"]
    parser.add_argument("--kernels", default=",".join(memory_bound))
    parser.add_argument("--warps", default="4,8,16")
    parser.add_argument(
        "--policies", default=",first,last", help="'keep' leaves the seed's policies"
    )
    parser.add_argument(
        "--stages", default="", help="num_stages values to try (default: the seed's)"
    )
    parser.add_argument("--random", type=int, default=0, help="random valid configs per kernel")
    parser.add_argument(
        "--extra", default="[]", help="JSON list of config entries to try on the first seed"
    )
    options = parser.parse_args()
    if not torch.cuda.is_available():
        print("seed_sweep.py needs a CUDA device", file=sys.stderr)
        return 2
    timer = Timer(torch.device("cuda"))
    copy = copy_bandwidth_tbs(timer)
    print(f"copy bandwidth {copy:.3f} TB/s", flush=True)
    warps = [int(w) for w in options.warps.split(",")]
    policies = options.policies.split(",")
    stages = [int(s) for s in options.stages.split(",") if s]
    for name in options.kernels.split(","):
        started = time.perf_counter()
        rows = sweep(
            name,
            timer,
            copy,
            warps,
            policies,
            stages,
            options.random,
            json.loads(options.extra),
            verbose=True,
        )
        timed = [r for r in rows if r[2] == r[2]]
        best_seed = min(
            (r for r in timed if r[1].startswith("seed") and not r[1].endswith("variant")),
            key=lambda r: r[2],
            default=None,
        )
        best = min(timed, key=lambda r: r[2], default=None)
        print(
            f"== {name}: {len(rows)} configs in {time.perf_counter() - started:.0f} s", flush=True
        )
        for row in sorted(timed, key=lambda r: r[2])[:8]:
            print(f"   {row[1]:15} {row[2]:8.4f} ms  {row[3]}  {row[4]!r}", flush=True)
        if best_seed and best:
            print(
                f"   best seed {best_seed[2]:.4f} ms, best variant {best[2]:.4f} ms "
                f"({best_seed[2] / best[2]:.2f}x)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
