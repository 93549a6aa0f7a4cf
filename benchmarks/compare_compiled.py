"""Put one benchmark kernel of benchmarks/run.py next to torch.compile's code for the same
reference: both are checked, launched a few times (for a profiler), and their generated Triton
source is written out; with --sass, the SASS of every kernel Triton compiled in this process is
disassembled and counted by opcode, to compare instruction mixes of two kernels that read and
write the same bytes.

    ncu --nvtx --nvtx-include "profile/" --section SpeedOfLight --section InstructionStats \\
        python benchmarks/compare_compiled.py geglu '{"block_sizes": [1, 2048]}' --out /tmp/cmp

    TRITON_CACHE_DIR=/tmp/tc python benchmarks/compare_compiled.py geglu '{"block_sizes": [1, 2048]}' \\
        --out /tmp/cmp --sass

--sass needs TRITON_CACHE_DIR set to a fresh directory (so that only this run's kernels are in
it) and cuobjdump (Triton's NVIDIA backend ships one).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from run import BENCHES  # benchmarks/ is on sys.path when this file runs
from run import _check

import helion

_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")


def _cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return str(bundled) if bundled.exists() else None


def opcode_counts(sass: str) -> collections.Counter:
    """Static SASS instruction counts by opcode (modifiers dropped: LDG.E.128 counts as LDG)."""
    counts: collections.Counter = collections.Counter()
    for line in sass.splitlines():
        match = _SASS_LINE.search(line)
        if match:
            counts[match.group(1)] += 1
    return counts


def dump_sass(cache: Path, out: Path) -> None:
    tool = _cuobjdump()
    if tool is None:
        print("no cuobjdump: SASS skipped")
        return
    table = {}
    for cubin in sorted(cache.rglob("*.cubin")):
        sass = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True).stdout
        (out / f"{cubin.stem}.sass").write_text(sass)
        table[cubin.stem] = opcode_counts(sass)
    opcodes = sorted({op for counts in table.values() for op in counts})
    names = list(table)
    print("opcode      " + " ".join(f"{n[:22]:>22}" for n in names))
    for op in opcodes:
        print(f"{op:<11} " + " ".join(f"{table[n].get(op, 0):>22}" for n in names))
    print("total       " + " ".join(f"{sum(table[n].values()):>22}" for n in names))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench")
    parser.add_argument("config", help="JSON of a helion.Config (missing entries: defaults)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sass", action="store_true")
    parser.add_argument("--repeat", type=int, default=4)
    args_ns = parser.parse_args()
    args_ns.out.mkdir(parents=True, exist_ok=True)
    bench = BENCHES[args_ns.bench]
    kernel = getattr(importlib.import_module(bench.module), bench.kernel)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    args = bench.make_args(device)
    expected = bench.reference(*args)

    bound = kernel.bind(args)
    config = helion.Config(**json.loads(args_ns.config))
    ours = bound.compile_config(config)
    _check(ours(*args), expected, bench)
    (args_ns.out / f"{args_ns.bench}_helion.py").write_text(ours.source)

    from torch._inductor.utils import run_and_get_code

    compiled = torch.compile(bench.reference, mode="max-autotune-no-cudagraphs")
    result, sources = run_and_get_code(compiled, *args)
    _check(result, expected, bench)
    (args_ns.out / f"{args_ns.bench}_inductor.py").write_text("\n\n# ----\n\n".join(sources))

    # profile only these launches: ncu --nvtx --nvtx-include "profile/" (not the autotuning ones)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("profile")
    for _ in range(args_ns.repeat):
        ours(*args)
        compiled(*args)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    print(
        f"{args_ns.bench}: helion {bound.normalize(config)} and torch.compile ran {args_ns.repeat} times"
    )
    if args_ns.sass:
        cache = os.environ.get("TRITON_CACHE_DIR")
        if not cache:
            print("--sass needs TRITON_CACHE_DIR", file=sys.stderr)
            return 2
        dump_sass(Path(cache), args_ns.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
