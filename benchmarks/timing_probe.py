"""Does the autotuner's timer agree with the benchmarks' timer, and if not, which difference
between them moves a config?

    python benchmarks/timing_probe.py [--bench embedding] [--config JSON ...] [--rounds 5]

Needs a CUDA device. For the bench's default config, its seeds and each ``--config``
(repeatable), in one process and interleaved rounds, at run.py's sizes, milliseconds:

- ``tuner``: the harness's ``do_bench`` on fresh clones of the arguments, as the autotuner times a
  candidate (``clone_args`` per candidate, its own flush buffer, its own repeat count);
- ``tuner/orig``: the same timer on the bench's original arguments;
- ``Timer/clone``: the benchmarks' queued ``Timer`` on fresh clones;
- ``Timer``: the benchmarks' queued ``Timer`` on the original arguments (as run.py and
  pick_stability.py's final race time it);
- ``Timer/read``: the same under the read flush;
- ``Timer/sync``: the write flush, each sample waited for before the next is queued (the GPU
  idles between samples, so the flush's dirty lines may drain before the timed call).

Where ``tuner`` and ``Timer`` order two configs differently, the column that first agrees with
``Timer`` names the cause.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Timer
from run import BENCHES  # also puts examples/ on sys.path
from run import _check

import helion
from helion.autotuner.benchmarking import clone_args
from helion.autotuner.benchmarking import do_bench


def _label(config: helion.Config) -> str:
    values = dict(config)
    keep = (
        "block_sizes",
        "num_warps",
        "num_stages",
        "pid_type",
        "indexing",
        "load_eviction_policies",
    )
    return " ".join(f"{k}={values[k]}" for k in keep if k in values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default="embedding")
    parser.add_argument("--config", action="append", default=[], help="a config as JSON")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    if not torch.cuda.is_available():
        print("timing_probe.py needs a CUDA device", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    bench = BENCHES[options.bench]
    kernel = getattr(__import__(bench.module), bench.kernel)
    args = bench.make_args(device)
    expected = bench.reference(*args)
    bound = kernel.bind(args)
    configs = [bound.config_spec.default_config(), *bound.seed_configs()]
    configs += [helion.Config(**json.loads(text)) for text in options.config]
    write, read = Timer(device), Timer(device, flush="read")
    runs = []
    for config in configs:
        run = bound.compile_config(config)
        _check(run(*args), expected, bench)
        runs.append(run)

    def ways(run: Any) -> dict[str, Callable[[], float]]:
        def tuner() -> float:
            fresh = clone_args(args)
            return do_bench(lambda: run(*fresh), device=device, repeat=200, warmup=1)

        def timer_clone() -> float:
            fresh = clone_args(args)
            return write.median_ms(lambda: run(*fresh), target_s=0.05, queued=True)

        return {
            "tuner": tuner,
            "tuner/orig": lambda: do_bench(lambda: run(*args), device=device, repeat=200, warmup=1),
            "Timer/clone": timer_clone,
            "Timer": lambda: write.median_ms(lambda: run(*args), target_s=0.05, queued=True),
            "Timer/read": lambda: read.median_ms(lambda: run(*args), target_s=0.05, queued=True),
            "Timer/sync": lambda: write.median_ms(lambda: run(*args), target_s=0.05),
        }

    columns = list(ways(runs[0]))
    samples: list[dict[str, list[float]]] = [{c: [] for c in columns} for _ in runs]
    for index in range(options.rounds):
        order = list(range(len(runs)))
        shift = index % len(order)
        for i in order[shift:] + order[:shift]:
            for column, measure in ways(runs[i]).items():
                samples[i][column].append(measure())
    print(f"== {options.bench}: medians of {options.rounds} interleaved rounds, ms")
    print(" ".join(f"{c:>11}" for c in columns) + "  config")
    for config, sample in zip(configs, samples, strict=True):
        cells = " ".join(f"{statistics.median(sample[c]):11.4f}" for c in columns)
        print(f"{cells}  {_label(config)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
