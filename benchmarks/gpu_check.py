"""Run the example suite compiled on a GPU: correctness for the default config, every seed config,
random configs, every pid_type and tensor_descriptor indexing where the spec allows them; then
each kernel's best seed config timed against torch.

    python benchmarks/gpu_check.py --backend triton --random 4 --json out.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import SUITE  # noqa: E402
from _timing import Timer  # noqa: E402


def _variants(spec, rng: random.Random, n_random: int) -> list[tuple[str, object]]:
    configs = [("default", spec.default_config())]
    for i in range(n_random):
        configs.append((f"random{i}", spec.random_config(rng)))
    fields = spec.fields
    if "pid_type" in fields:
        for pid in fields["pid_type"].fragments[0].all_values():
            configs.append(
                (f"pid={pid}", spec.normalize({**dict(spec.default_config()), "pid_type": pid}))
            )
    if "indexing" in fields and spec.length("indexing"):
        allowed = fields["indexing"].fragments[0].all_values()
        if "tensor_descriptor" in allowed:
            configs.append(
                (
                    "tensor_descriptor",
                    spec.normalize(
                        {**dict(spec.default_config()), "indexing": "tensor_descriptor"}
                    ),
                )
            )
    return configs


def check_module(
    name: str,
    backend: str,
    n_random: int,
    timer: Timer,
    static_shapes: bool = True,
    seed: int = 0,
) -> list[dict]:
    from _common import assert_matches
    from _common import clone_args

    module = importlib.import_module(name)
    rows = []
    for case in module.CASES:
        kernel = case.kernel
        kernel.settings.backend = backend
        kernel.settings.autotune_effort = "none"
        kernel.settings.static_shapes = static_shapes
        kernel.reset()
        args = (case.args or module.example_args)()
        expected = case.reference(*clone_args(args))
        bound = kernel.bind(args)
        rng = random.Random(seed)
        passed, failed = 0, []
        variants = _variants(bound.config_spec, rng, n_random)
        variants += [(f"seed{i}", c) for i, c in enumerate(bound.seed_configs())]
        best = (float("inf"), None)
        for label, config in variants:
            try:
                run = bound.compile_config(config)
                assert_matches(
                    run(*clone_args(args)),
                    expected,
                    atol=max(case.atol, 1e-2),
                    rtol=max(case.rtol, 1e-2),
                )
                passed += 1
                if label.startswith("seed") or label == "default":
                    ms = timer.median_ms(lambda run=run, args=args: run(*args), target_s=0.05)
                    if ms < best[0]:
                        best = (ms, config)
            except Exception as error:
                if not failed:  # the whole story of a case's first failure goes to the log
                    print(f"--- {case.name} {label}: {config}", flush=True)
                    traceback.print_exc()
                failed.append(
                    f"{label}: {type(error).__name__}: {str(error).splitlines()[-1][:160] if str(error) else ''}"
                )
        torch_ms = timer.median_ms(
            lambda case=case, args=args: case.reference(*args), target_s=0.05
        )
        rows.append(
            {
                "kernel": case.name,
                "passed": passed,
                "failed": failed,
                "best_ms": best[0],
                "torch_ms": torch_ms,
                "best_config": repr(best[1]),
            }
        )
        # a line per case as it finishes: a run cut short by a timeout still says how far it got
        print(
            f"[{name}] {case.name}: {passed} passed, {len(failed)} failed, best {best[0]:.4f} ms, "
            f"torch {torch_ms:.4f} ms",
            flush=True,
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="triton")
    parser.add_argument("--random", type=int, default=4)
    parser.add_argument("--kernels", default=",".join(SUITE))
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--seed", type=int, default=0, help="of the random configs (0 repeats earlier runs')"
    )
    parser.add_argument(
        "--dynamic", action="store_true", help="static_shapes=False (sizes as kernel arguments)"
    )
    ns = parser.parse_args()
    timer = Timer(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    rows = []
    for name in ns.kernels.split(","):
        try:
            rows.extend(check_module(name, ns.backend, ns.random, timer, not ns.dynamic, ns.seed))
        except Exception as error:
            traceback.print_exc()
            rows.append(
                {
                    "kernel": name,
                    "passed": 0,
                    "failed": [f"module: {type(error).__name__}: {error}"[:300]],
                }
            )
    print(f"\n{'kernel':20} {'pass':>5} {'fail':>5} {'best ms':>9} {'torch ms':>9} {'speedup':>8}")
    for row in rows:
        best, ref = row.get("best_ms", float("nan")), row.get("torch_ms", float("nan"))
        speed = ref / best if best and best == best and best != float("inf") else float("nan")
        print(
            f"{row['kernel']:20} {row['passed']:5d} {len(row['failed']):5d} {best:9.4f} {ref:9.4f} {speed:8.2f}"
        )
        for failure in row["failed"][:4]:
            print(f"    {failure}")
    if ns.json:
        Path(ns.json).write_text(json.dumps(rows, indent=2, default=str))
    return 0 if all(not r["failed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
