"""How the L2 flush before each sample moves the numbers, and close races measured many times.

    python benchmarks/flush_probe.py --kernels rms_norm,embedding --rounds 7 --json out.json \\
        --extra 'rms_norm={"block_sizes": [1], "num_warps": 16, "load_eviction_policies": ["first", "last"]}'

1. A device copy of several sizes (before the races and again after them), queued, under each
   flush mode of _timing.Timer: a write flush leaves the L2 full of dirty lines that the timed
   kernel writes back, a cost that a small copy feels more than a large one.
2. For each kernel of benchmarks/run.py: our quick-effort pick (and any ``--extra`` configs),
   torch.compile, and a copy of the same bytes, timed in ``--rounds`` interleaved rounds under
   each flush mode, so that drift of the device between rounds hits every implementation alike.
   Reports the median of the rounds' queued medians and how many rounds each of ours beat
   torch.compile.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import FLUSH_MODES
from _timing import Timer
from _timing import copy_fn
from run import BENCHES
from run import _check
from run import _tune

import helion

# bytes read (as many written), in MB; 67.108864 is 64 MiB, the size of the copy that the
# 8192-token embedding race times (8192 x 4096 bf16), which ran 7-8% faster than 67 MB here
COPY_MB = (32, 67, 67.108864, 134, 268, 402, 2048)


def copy_sizes(timers: dict[str, Timer], device: torch.device) -> list[dict]:
    rows = []
    for mb in COPY_MB:
        nbytes = round(mb * 10**6)
        fn = copy_fn(nbytes, device)
        row = {"read_MB": mb}
        for mode, timer in timers.items():
            ms = timer.median_ms(fn, queued=True)
            row[f"{mode}_TB/s"] = round(2 * nbytes / (ms * 1e-3) / 1e12, 3)
        rows.append(row)
        print(
            f"copy {mb:>10} MB: "
            + "  ".join(f"{m} flush {row[f'{m}_TB/s']:.3f} TB/s" for m in timers),
            flush=True,
        )
        del fn
        torch.cuda.empty_cache()
    return rows


def race(
    name: str,
    extras: list[dict],
    timers: dict[str, Timer],
    rounds: int,
    device: torch.device,
    autotune_log: str | None = None,
) -> dict:
    bench = BENCHES[name]
    kernel = getattr(importlib.import_module(bench.module), bench.kernel)
    args = bench.make_args(device)
    expected = bench.reference(*args)
    run, config, tune_s = _tune(kernel, args, None, "quick", autotune_log, name)
    _check(run(*args), expected, bench)
    impls: dict[str, Callable[[], Any]] = {"helion": lambda: run(*args)}
    configs = {"helion": repr(config)}
    bound = kernel.bind(args)
    for i, extra in enumerate(extras):
        extra_run = bound.compile_config(helion.Config(**extra))
        _check(extra_run(*args), expected, bench)
        impls[f"helion_extra{i}"] = lambda extra_run=extra_run: extra_run(*args)
        configs[f"helion_extra{i}"] = repr(bound.normalize(helion.Config(**extra)))
    compiled = torch.compile(bench.reference, mode="max-autotune-no-cudagraphs")
    _check(compiled(*args), expected, bench)
    impls["torch.compile"] = lambda: compiled(*args)
    work = bench.work(args)
    impls["copy_same_bytes"] = copy_fn(max(int(work) // 2, 1 << 20), device)
    samples: dict[str, dict[str, list[float]]] = {m: {k: [] for k in impls} for m in timers}
    for _ in range(rounds):
        for mode, timer in timers.items():
            for key, fn in impls.items():
                samples[mode][key].append(timer.median_ms(fn, queued=True))
    row: dict[str, Any] = {
        "kernel": name,
        "tune_s": round(tune_s, 1),
        "configs": configs,
        "rounds": rounds,
    }
    print(f"\n{name}: tuned in {tune_s:.1f} s: {config}")
    for mode in timers:
        compile_ms = samples[mode]["torch.compile"]
        copy_ms = statistics.median(samples[mode]["copy_same_bytes"])
        result = {}
        for key, ms_list in samples[mode].items():
            ms = statistics.median(ms_list)
            entry = {
                "ms": round(ms, 5),
                "TB/s": round(work / (ms * 1e-3) / 1e12, 3),
                "of_copy_same_bytes": round(copy_ms / ms, 4),
                "rounds_ms": [round(v, 5) for v in ms_list],
            }
            if key.startswith("helion"):
                entry["rounds_won_vs_compile"] = sum(
                    a < b for a, b in zip(ms_list, compile_ms, strict=True)
                )
                entry["vs_compile"] = round(statistics.median(compile_ms) / ms, 4)
            result[key] = entry
            won = (
                f"  beat torch.compile in {entry['rounds_won_vs_compile']}/{rounds} rounds, speed {entry['vs_compile']:.4f}x"
                if "vs_compile" in entry
                else ""
            )
            print(
                f"  {mode:5} flush {key:16} {ms * 1e3:8.2f} us {entry['TB/s']:7.3f} TB/s  "
                f"{entry['of_copy_same_bytes']:6.1%} of a same-size copy{won}",
                flush=True,
            )
        row[mode] = result
    kernel.reset()
    return row


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kernels", default="rms_norm,embedding")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--extra", action="append", default=[], help="NAME=JSON: another config of NAME to race"
    )
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--autotune-log",
        default=None,
        help="directory for each kernel's autotuner log (<kernel>.csv)",
    )
    parser.add_argument(
        "--fresh-tune",
        action="store_true",
        help="tune from scratch: neither read nor write the autotune cache (HELION_SKIP_CACHE=1), "
        "so that each process races a pick of its own",
    )
    ns = parser.parse_args()
    if ns.fresh_tune:
        os.environ["HELION_SKIP_CACHE"] = "1"
    if not torch.cuda.is_available():
        print("benchmarks/flush_probe.py needs a CUDA device", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    timers = {mode: Timer(device, flush=mode) for mode in FLUSH_MODES}
    extras: dict[str, list[dict]] = {}
    for item in ns.extra:
        name, _, text = item.partition("=")
        extras.setdefault(name, []).append(json.loads(text))
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "copy": copy_sizes(timers, device),
        "races": [],
    }
    status = 0
    for name in filter(None, ns.kernels.split(",")):
        try:
            result["races"].append(
                race(name, extras.get(name, []), timers, ns.rounds, device, ns.autotune_log)
            )
        except Exception as error:
            status = 1
            print(f"{name}: {type(error).__name__}: {error}", flush=True)
            result["races"].append(
                {"kernel": name, "error": f"{type(error).__name__}: {error}"[:300]}
            )
        if ns.json:
            Path(ns.json).write_text(json.dumps(result, indent=2))
    # the size table again, after the races: the first one, made as the process starts, has
    # read 4-9% below copies of the same size timed in the races
    print("copy sizes again, after the races:")
    result["copy_after_races"] = copy_sizes(timers, device)
    if ns.json:
        Path(ns.json).write_text(json.dumps(result, indent=2))
    return status


if __name__ == "__main__":
    sys.exit(main())
