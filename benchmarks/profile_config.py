"""Run one benchmark kernel of benchmarks/run.py with one config a few times, for a profiler.

    ncu --kernel-name regex:_helion_ --launch-skip 2 --launch-count 1 --section SpeedOfLight \\
        python benchmarks/profile_config.py rope '{"block_sizes": [1, 1, 16], "num_warps": 4}'

The config's missing entries take the kernel's defaults. The output is checked against the
reference before the profiled launches, so a profile is never of a wrong kernel.
"""

from __future__ import annotations

import importlib
import json
import sys

import torch
from run import BENCHES  # benchmarks/ is on sys.path when this file runs
from run import _check

import helion


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    name, config_json = sys.argv[1], sys.argv[2]
    bench = BENCHES[name]
    kernel = getattr(importlib.import_module(bench.module), bench.kernel)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    args = bench.make_args(device)
    bound = kernel.bind(args)
    run = bound.compile_config(helion.Config(**json.loads(config_json)))
    _check(run(*args), bench.reference(*args), bench)
    for _ in range(4):
        run(*args)
    if device.type == "cuda":
        torch.cuda.synchronize()
    print(f"{name}: ran {bound.normalize(helion.Config(**json.loads(config_json)))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
