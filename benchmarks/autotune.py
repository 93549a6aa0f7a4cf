"""How fast the autotuner finds a good config, on a GPU, against the anchor (public Helion 1.4.0).

    python benchmarks/autotune.py --effort quick --json autotune.json

For matmul 4096³ bf16, softmax 8192² bf16 and rms_norm 8192² bf16 it tunes from scratch (a fresh
cache directory, forced autotuning), times the winner with device events and an L2 flush, and
reports the tuning wall time, TFLOP/s or TB/s, the ratio to cuBLAS / copy bandwidth measured in
the same run, and both against what the anchor's quick effort reached on the H200.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Timer
from _timing import copy_bandwidth_tbs
from _timing import cublas_peak_tflops
from run import BENCHES  # also puts examples/ on sys.path

# the anchor's quick effort on the H200: (rate, unit, tuning seconds)
ANCHOR = {
    "matmul": (619.0, "TFLOP/s", 97.0),
    "softmax": (3.80, "TB/s", 83.0),
    "rms_norm": (3.93, "TB/s", 77.0),
}


def tune_one(
    name: str, effort: str, timer: Timer, rooflines: dict[str, float], backend: str | None
) -> dict:
    bench = BENCHES[name]
    kernel = getattr(importlib.import_module(bench.module), bench.kernel)
    if backend:
        kernel.settings.backend = backend
    kernel.settings.autotune_effort = effort
    kernel.settings.force_autotune = True
    kernel.reset()
    args = bench.make_args(timer.device)
    expected = bench.reference(*args)
    timer.sync()
    start = time.perf_counter()
    bound = kernel.bind(args)
    config = bound.ensure_config_exists(args)
    tune_s = time.perf_counter() - start
    run = bound.compile_config(config)
    torch.testing.assert_close(
        run(*args).float(), expected.float(), atol=bench.atol, rtol=bench.rtol
    )
    ms = timer.median_ms(lambda: run(*args))
    work = bench.work(args)
    compute = bench.bound == "compute"
    rate = work / (ms * 1e-3) / 1e12
    roof = rooflines["cublas_tflops"] if compute else rooflines["copy_tbs"]
    anchor_rate, unit, anchor_s = ANCHOR[name]
    return {
        "kernel": name,
        "effort": effort,
        "tune_s": round(tune_s, 1),
        "ms": round(ms, 4),
        "unit": unit,
        "rate": round(rate, 3),
        "of_roofline": round(rate / roof, 3),
        "anchor_rate": anchor_rate,
        "anchor_tune_s": anchor_s,
        "rate_vs_anchor": round(rate / anchor_rate, 3),
        "time_vs_anchor": round(tune_s / anchor_s, 3),
        "config": repr(config),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kernels", default="matmul,softmax,rms_norm")
    parser.add_argument("--effort", default="quick", choices=["quick", "full"])
    parser.add_argument("--backend", default=None)
    parser.add_argument("--json", default=None)
    ns = parser.parse_args()
    if not torch.cuda.is_available():
        print("benchmarks/autotune.py needs a CUDA device", file=sys.stderr)
        return 2
    # tune from scratch: nothing an earlier run cached may shorten the search
    os.environ["HELION_CACHE_DIR"] = tempfile.mkdtemp(prefix="helion-autotune-bench-")
    timer = Timer(torch.device("cuda"))
    rooflines = {"copy_tbs": copy_bandwidth_tbs(timer), "cublas_tflops": cublas_peak_tflops(timer)}
    print(
        f"copy {rooflines['copy_tbs']:.2f} TB/s, cuBLAS bf16 {rooflines['cublas_tflops']:.0f} TFLOP/s"
    )
    rows = []
    for name in ns.kernels.split(","):
        try:
            rows.append(tune_one(name, ns.effort, timer, rooflines, ns.backend))
        except Exception as error:
            traceback.print_exc()
            rows.append({"kernel": name, "error": f"{type(error).__name__}: {error}"[:300]})
    print(
        f"\n{'kernel':10} {'tune s':>7} {'anchor s':>8} {'rate':>9} {'unit':7} {'anchor':>7} {'of roof':>8}"
    )
    for r in rows:
        if "error" in r:
            print(f"{r['kernel']:10} ERROR {r['error']}")
            continue
        print(
            f"{r['kernel']:10} {r['tune_s']:7.1f} {r['anchor_tune_s']:8.0f} {r['rate']:9.3f} {r['unit']:7} "
            f"{r['anchor_rate']:7.2f} {r['of_roofline']:8.1%}   {r['config']}"
        )
    if ns.json:
        Path(ns.json).write_text(json.dumps({"rooflines": rooflines, "rows": rows}, indent=2))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
