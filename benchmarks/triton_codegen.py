"""Per-config code generation time of the Triton backend (IR -> source), for the example kernels.

    python benchmarks/triton_codegen.py [--configs 30] [--kernels add,matmul,...]

For each kernel of examples/, binds it on CPU tensors (the generated code does not depend on
the device except for the math helpers and descriptors), then generates the source for the
default config and for random valid configs, timing only ``TritonBackend.generate``. Also
reports how long a cache hit of ``TritonBackend.compile`` takes (the same config again).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
import time
from pathlib import Path

import torch

import helion

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))  # the examples import their helpers as `_common`

from _common import SUITE  # noqa: E402


def _load(stem: str):
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(
        f"helion_examples_{stem}", EXAMPLES / f"{stem}.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--configs", type=int, default=30, help="random configs per kernel (plus the default)"
    )
    parser.add_argument(
        "--kernels", default="", help="comma-separated example names (default: all)"
    )
    options = parser.parse_args()
    wanted = [k for k in options.kernels.split(",") if k] or SUITE
    torch.manual_seed(0)
    print(
        f"{'kernel':<20} {'nodes':>5} {'median ms':>10} {'max ms':>8} {'lines':>6} {'cache hit us':>13}"
    )
    medians = []
    for stem in wanted:
        module = _load(stem)
        for case in module.CASES:
            kernel = helion.kernel(case.kernel.fn, backend="triton", autotune_effort="none")
            args = (case.args or module.example_args)()
            args = tuple(a.cpu() if isinstance(a, torch.Tensor) else a for a in args)
            bound = kernel.bind(args)
            backend = bound.backend
            ir = bound.ir
            configs = [bound.config_spec.default_config()]
            configs += [
                bound.config_spec.random_config(random.Random(seed))
                for seed in range(options.configs)
            ]
            backend.generate(ir, configs[0])  # warm the per-IR analysis and lowering table
            times = []
            lines = 0
            for config in configs:
                start = time.perf_counter()
                generated = backend.generate(ir, config)
                times.append(time.perf_counter() - start)
                lines = max(lines, generated.source.count("\n"))
            backend.compile(ir, configs[0])
            start = time.perf_counter()
            for _ in range(100):
                backend.compile(ir, configs[0])
            hit = (time.perf_counter() - start) / 100
            median = statistics.median(times)
            medians.append(median)
            nodes = sum(1 for _ in ir.walk())
            print(
                f"{case.name:<20} {nodes:>5} {median * 1e3:>10.2f} {max(times) * 1e3:>8.2f} {lines:>6} {hit * 1e6:>13.2f}"
            )
    print(
        f"\nall kernels: median of medians {statistics.median(medians) * 1e3:.2f} ms, worst median {max(medians) * 1e3:.2f} ms"
    )


if __name__ == "__main__":
    main()
