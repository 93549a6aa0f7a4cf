"""Does the quick search pick the same config run after run, and why does a pick lose to a seed?

    python benchmarks/pick_stability.py [--kernels add,swiglu,geglu,rope] [--runs 3]
                                        [--effort quick] [--rounds 5] [--out DIR] [--json FILE]

Needs a CUDA device. For each kernel, at run.py's sizes, it tunes ``--runs`` times from scratch
(forced, a fresh cache directory, the search's own time-based RNG seed), each search writing its
CSV log (every first-pass time and the final re-benchmark's ``r<n>`` rows) under ``--out``. Then
it times every run's pick and every seed config in ``--rounds`` interleaved rounds with the
benchmarks' queued timer, and prints per run:

- the pick's final rate and the fastest config's (both as TB/s and as a share of copy bandwidth);
- where the fastest config stood in that run's first pass (its time, its rank), and whether the
  run re-benchmarked it;
- the first-pass spread: the pick's first-pass time against the final time of the same config.

A pick that loses while the fastest config was never measured is a search problem; one measured
but ranked low is a first-pass timing problem; one re-benchmarked and still lost is a
re-benchmark problem.

Every config a run re-benchmarked is raced too, and listed with the search's own re-benchmark
time beside the benchmarks' time of it ("tuner vs final"): where the two orders disagree, the
autotuner's timing differs from the benchmarks' in some systematic way, and no search change
would fix the pick. ``--extra JSON`` adds configs of one's own (hand-picked rivals) to the race.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Timer
from _timing import copy_bandwidth_tbs
from run import BENCHES  # also puts examples/ on sys.path
from run import _check

import helion


def config_text(config: Any) -> str:
    """One spelling per config, whether it comes from a Config or from the CSV's JSON."""
    values = json.loads(config) if isinstance(config, str) else dict(config)
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def read_log(path: Path) -> dict[str, Any]:
    """First-pass times (in measured order) and re-benchmark medians from one search's CSV."""
    first: dict[str, float] = {}
    again: dict[str, float] = {}
    failures: list[str] = []  # "index status: reason" of each candidate that failed
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            key = config_text(row["config"])
            if row["status"] == "ok":
                first[key] = float(row["time_ms"])
            elif row["status"] == "rebenchmark":
                again[key] = float(row["time_ms"])
            elif row["status"] not in ("skipped", "rebenchmark failed"):
                failures.append(f"{row['index']} {row['status']}: {row['reason'][:160]}")
    ranked = sorted(first, key=first.get)
    return {
        "first": first,
        "again": again,
        "rank": {k: i + 1 for i, k in enumerate(ranked)},
        "failed": len(failures),
        "failures": failures,
    }


def candidate_set(
    picks: list[Any], seeds: list[Any], logs: list[dict[str, Any]], extras: list[Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The configs to race, by `config_text`, and a label each: the runs' picks (``pick<run>``),
    the default and the seeds (``default``, ``seed<n>``), every config a run re-benchmarked
    (``r<run>.<n>``) and the ``--extra`` ones (``extra<n>``); a config with several roles gets
    every label, joined by ``+``."""
    candidates: dict[str, Any] = {}
    labels: dict[str, str] = {}

    def add(config: Any, label: str) -> None:
        key = config_text(config)
        candidates.setdefault(
            key, config if not isinstance(config, str) else helion.Config(**json.loads(config))
        )
        labels[key] = f"{labels[key]}+{label}" if key in labels else label

    for index, config in enumerate(picks):
        add(config, f"pick{index}")
    for index, config in enumerate(seeds):
        add(config, "default" if index == 0 else f"seed{index}")
    for run, log in enumerate(logs):
        for position, key in enumerate(sorted(log["again"], key=log["again"].get)):
            if key not in labels:  # picks and seeds keep their names; the rest are the search's own
                add(key, f"r{run}.{position}")
    for index, config in enumerate(extras):
        add(config, f"extra{index}")
    return candidates, labels


def tuner_vs_final(
    log: dict[str, Any], final: dict[str, float], labels: dict[str, str]
) -> list[dict[str, Any]]:
    """Each config one run re-benchmarked, fastest first by the search's own re-benchmark, with
    the benchmarks' final time beside it and each one's rank by either."""
    timed = [key for key in log["again"] if key in final]
    by_tuner = sorted(timed, key=log["again"].get)
    by_final = sorted(timed, key=final.get)
    return [
        {
            "config": labels[key],
            "tuner_ms": log["again"][key],
            "final_ms": round(final[key], 5),
            "tuner_rank": by_tuner.index(key) + 1,
            "final_rank": by_final.index(key) + 1,
        }
        for key in by_tuner
    ]


def final_times(
    candidates: dict[str, Any],
    args: tuple,
    bound: Any,
    expected: Any,
    bench: Any,
    timer: Timer,
    rounds: int,
) -> dict[str, float]:
    """Median over interleaved rounds of each config's queued median (order rotated per round)."""
    runs: dict[str, Any] = {}
    for key, config in candidates.items():
        try:
            run = bound.compile_config(config)
            _check(run(*args), expected, bench)
            runs[key] = run
        except Exception as error:  # reported, not fatal: the other configs still count
            print(f"   {config!r}: {type(error).__name__}: {str(error)[:160]}", flush=True)
    samples: dict[str, list[float]] = {key: [] for key in runs}
    order = list(runs)
    for index in range(rounds):
        shift = index % max(len(order), 1)
        for key in order[shift:] + order[:shift]:
            run = runs[key]
            samples[key].append(
                timer.median_ms(lambda run=run: run(*args), target_s=0.05, queued=True)
            )
    return {key: statistics.median(values) for key, values in samples.items()}


def study(name: str, options: argparse.Namespace, timer: Timer, copy: float, out: Path) -> dict:
    bench = BENCHES[name]
    kernel = getattr(importlib.import_module(bench.module), bench.kernel)
    args = bench.make_args(timer.device)
    expected = bench.reference(*args)
    work = bench.work(args)
    kernel.settings.autotune_effort = options.effort
    kernel.reset()
    bound = kernel.bind(args)
    picks, runs = [], []
    for index in range(options.runs):
        log = out / f"{name}-run{index}"
        bound.settings.autotune_log = str(log)
        # a fresh RNG seed per run, as separate processes get: the same seed would repeat a run
        bound.settings.autotune_random_seed = (time.time_ns() + index) % (2**31 - 1)
        started = time.perf_counter()
        config = bound.autotune(args, force=True)
        seconds = time.perf_counter() - started
        picks.append(config)
        runs.append(
            {
                "seconds": round(seconds, 1),
                "pick": config,
                "seed": bound.settings.autotune_random_seed,
                "log": read_log(Path(f"{log}.csv")),
            }
        )
        print(f"   run {index}: {seconds:.1f} s, pick {config!r}", flush=True)
    seeds = [bound.config_spec.default_config(), *bound.seed_configs()]
    extras = [helion.Config(**json.loads(text)) for text in options.extra]
    candidates, labels = candidate_set(picks, seeds, [run["log"] for run in runs], extras)
    final = final_times(candidates, args, bound, expected, bench, timer, options.rounds)
    fastest = min(final, key=final.get)

    def rate(ms: float) -> float:
        return work / (ms * 1e-3) / 1e12

    rows = []
    for index, run in enumerate(runs):
        pick = config_text(run["pick"])
        log = run["log"]
        rows.append(
            {
                "run": index,
                "tuner_vs_final": tuner_vs_final(log, final, labels),
                "rng_seed": run["seed"],
                "seconds": run["seconds"],
                "pick": labels[pick],
                "pick_tbs": round(rate(final[pick]), 3) if pick in final else None,
                "pick_first_pass_ms": log["first"].get(pick),
                "pick_final_ms": final.get(pick),
                "fastest": labels[fastest],
                "fastest_tbs": round(rate(final[fastest]), 3),
                "fastest_first_pass_ms": log["first"].get(fastest),
                "fastest_rank": log["rank"].get(fastest),
                "fastest_rebenchmarked_ms": log["again"].get(fastest),
                "rebenchmarked": len(log["again"]),
                "measured": len(log["first"]),
                "failed": log["failed"],
                "failures": log["failures"],
            }
        )
    configs = {
        labels[k]: {
            "config": repr(candidates[k]),
            "final_ms": round(final[k], 5),
            "tbs": round(rate(final[k]), 3),
            "of_copy": round(rate(final[k]) / copy, 3),
        }
        for k in final
    }
    return {"kernel": name, "copy_tbs": copy, "runs": rows, "configs": configs}


def print_study(result: dict) -> None:
    copy = result["copy_tbs"]
    print(f"== {result['kernel']}")
    for label, entry in sorted(result["configs"].items(), key=lambda item: item[1]["final_ms"]):
        print(
            f"   {label:18} {entry['final_ms']:8.4f} ms {entry['tbs']:6.3f} TB/s {entry['of_copy']:6.1%}  {entry['config']}"
        )
    print(
        f"   {'run':>3} {'pick':>8} {'TB/s':>6} {'%copy':>6} {'1st ms':>8} {'fin ms':>8} | "
        f"{'fastest':>8} {'1st ms':>8} {'rank':>4} {'reb ms':>8} | {'meas':>4} {'reb':>3} {'fail':>4}"
    )
    for row in result["runs"]:

        def ms(value: float | None) -> str:
            return f"{value:8.4f}" if value is not None else f"{'-':>8}"

        share = f"{row['pick_tbs'] / copy:6.1%}" if row["pick_tbs"] else f"{'-':>6}"
        print(
            f"   {row['run']:>3} {row['pick']:>8} {row['pick_tbs'] or 0:6.3f} {share} {ms(row['pick_first_pass_ms'])} "
            f"{ms(row['pick_final_ms'])} | {row['fastest']:>8} {ms(row['fastest_first_pass_ms'])} "
            f"{row['fastest_rank'] or '-':>4} {ms(row['fastest_rebenchmarked_ms'])} | "
            f"{row['measured']:>4} {row['rebenchmarked']:>3} {row['failed']:>4}",
            flush=True,
        )
    for row in result[
        "runs"
    ]:  # does the benchmarks' order of what the search re-timed match its own?
        print(f"   run {row['run']}: tuner vs final, the search's re-benchmark order")
        for entry in row["tuner_vs_final"]:
            flag = "" if entry["tuner_rank"] == entry["final_rank"] else "  <- order differs"
            print(
                f"      {entry['config']:>18} tuner {entry['tuner_ms']:8.4f} ms #{entry['tuner_rank']}  "
                f"final {entry['final_ms']:8.4f} ms #{entry['final_rank']}{flag}",
                flush=True,
            )
    for row in result["runs"]:  # why candidates failed: a failed seed never competes
        for failure in row["failures"][:4]:
            print(f"   run {row['run']} failed: {failure}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kernels", default="add,swiglu,geglu,rope")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--effort", default="quick")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--out", default=None, help="directory of the searches' CSV logs (default: a temp dir)"
    )
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        help="JSON of a config to race beside the picks and seeds (every kernel)",
    )
    options = parser.parse_args()
    if not torch.cuda.is_available():
        print("pick_stability.py needs a CUDA device", file=sys.stderr)
        return 2
    # a private cache: no run may reuse another's result, nor a config tuned outside this script
    os.environ["HELION_CACHE_DIR"] = tempfile.mkdtemp(prefix="helion-pick-stability-")
    out = Path(options.out or tempfile.mkdtemp(prefix="helion-pick-logs-"))
    out.mkdir(parents=True, exist_ok=True)
    timer = Timer(torch.device("cuda"))
    copy = copy_bandwidth_tbs(timer, queued=True)
    print(f"copy bandwidth (queued) {copy:.3f} TB/s; logs in {out}", flush=True)
    results = []
    for name in options.kernels.split(","):
        try:
            result = study(name, options, timer, copy, out)
        except Exception as error:  # one kernel's failure must not cost the others' rows
            print(f"== {name}: {type(error).__name__}: {str(error)[:300]}", flush=True)
            continue
        results.append(result)
        print_study(result)
        if options.json:
            Path(options.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
