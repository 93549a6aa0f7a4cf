"""Core's conformance cases (`helion.testing`) on a GPU, for backends whose unit tests run them
only on the CPU (Triton's interpreter, Pallas interpret mode) or not at all (CuTe, which cannot
launch without a GPU):

    python benchmarks/conformance_gpu.py --backend triton
    python benchmarks/conformance_gpu.py --backend cute --families empty_slices
    python benchmarks/conformance_gpu.py --backend pallas --shard 1/4   # cases 1, 5, 9, ...

Families: `empty_slices` (length-0 slices, loops over a size-0 dim), `shared_block_size` (one
block size shared by several tiles), `atomics` (duplicate addresses; checked against some order
of the lanes, as a GPU applies them in no fixed order, where the case allows it), `merged_dims`
(a dimension `c * block` on partial tiles, public int4 GEMM among them). Each case is
checked under the default config and random ones against PyTorch. Prints one line per case and
a summary; exits non-zero if any case failed.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

import torch

from helion import exc
from helion.testing import atomics
from helion.testing import empty_slices
from helion.testing import merged_dims
from helion.testing import shared_block_size


def _families(device: torch.device) -> dict:
    def atomic(case, backend):
        # on a GPU lanes run in no fixed order: a case that needs one is checked on the CPU only
        if not case.order_free:
            return "lane order"
        atomics.check_atomic_case(case, backend, in_lane_order=False, device=device)
        return None

    def empty(case, backend):
        empty_slices.check_empty_slice_case(case, backend, device=device)
        return None

    def shared(case, backend):
        shared_block_size.check_block_size_case(case, backend, device=device)
        return None

    def merged(case, backend):
        try:
            merged_dims.check_merged_dim_case(case, backend, device=device)
        except exc.BackendUnsupported as error:  # a clear refusal (CuTe's), not a wrong result
            lines = str(error).splitlines()
            what = next((line for line in lines if "not supported" in line), lines[-1])
            return f"what {backend} refuses: {what[:120]}"
        return None

    return {
        "empty_slices": (empty_slices.EMPTY_SLICE_CASES, empty),
        "shared_block_size": (shared_block_size.BLOCK_SIZE_CASES, shared),
        "atomics": (atomics.ATOMIC_CASES, atomic),
        "merged_dims": (merged_dims.MERGED_DIM_CASES, merged),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="triton")
    parser.add_argument("--families", default="empty_slices,shared_block_size,atomics,merged_dims")
    parser.add_argument(
        "--shard",
        default="0/1",
        help="I/N: every Nth case from the Ith, to split a run over processes",
    )
    args = parser.parse_args()
    shard, shards = (int(part) for part in args.shard.split("/"))
    if not torch.cuda.is_available():
        print("conformance_gpu.py needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    families = _families(device)
    counts = {"ok": 0, "failed": 0, "not checked": 0}
    for family in [f.strip() for f in args.families.split(",") if f.strip()]:
        cases, check = families[family]
        start = time.perf_counter()
        for case in list(cases)[shard::shards]:
            try:
                reason = check(case, args.backend)
            except BaseException as error:  # a skip is a failure here: the backend must run
                if isinstance(error, KeyboardInterrupt):
                    raise
                counts["failed"] += 1
                detail = "".join(traceback.format_exception_only(type(error), error)).strip()
                print(f"FAIL {family} {case.id}: {detail[:600]}", flush=True)
                continue
            if reason is not None:
                counts["not checked"] += 1
                print(f"skip {family} {case.id}: needs {reason}", flush=True)
            else:
                counts["ok"] += 1
                print(f"ok   {family} {case.id}", flush=True)
        print(f"== {family}: {time.perf_counter() - start:.1f} s", flush=True)
    print(
        f"{args.backend} on {torch.cuda.get_device_name()}: {counts['ok']} ok, "
        f"{counts['failed']} failed, {counts['not checked']} not checkable on a GPU"
    )
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
