"""Does rope get faster when every load is issued before the first store? (GPU only)

The example's loop over (q, q_out) and (k, k_out) loads k after storing q_out: Triton cannot
move a load above a store to another pointer (they might alias), so each program waits for
two rounds of loads. This probe times the example against the same kernel written loads-first,
under the same configs, in one run."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import rope as example  # noqa: E402
from _timing import Timer  # noqa: E402
from _timing import copy_bandwidth_tbs  # noqa: E402
from run import BENCHES  # noqa: E402

import helion  # noqa: E402
import helion.language as hl  # noqa: E402


@helion.kernel()
def rope_loads_first(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    b, s, h, d = q.shape
    head_dim = hl.specialize(d)
    half = head_dim // 2
    hk = k.size(2)
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    for tile_b, tile_s, tile_h in hl.tile([b, s, max(h, hk)]):
        cos_lo = cos[tile_s, :half].to(torch.float32)[None, :, None, :]
        cos_hi = cos[tile_s, half:].to(torch.float32)[None, :, None, :]
        sin_lo = sin[tile_s, :half].to(torch.float32)[None, :, None, :]
        sin_hi = sin[tile_s, half:].to(torch.float32)[None, :, None, :]
        q_valid = (tile_h.index < h)[None, None, :, None]
        k_valid = (tile_h.index < hk)[None, None, :, None]
        lo = [tile_b, tile_s, tile_h, slice(None, half)]
        hi = [tile_b, tile_s, tile_h, slice(half, None)]
        q_lo = hl.load(q, lo, extra_mask=q_valid).to(torch.float32)
        q_hi = hl.load(q, hi, extra_mask=q_valid).to(torch.float32)
        k_lo = hl.load(k, lo, extra_mask=k_valid).to(torch.float32)
        k_hi = hl.load(k, hi, extra_mask=k_valid).to(torch.float32)
        hl.store(q_out, lo, (q_lo * cos_lo - q_hi * sin_lo).to(q_out.dtype), extra_mask=q_valid)
        hl.store(q_out, hi, (q_hi * cos_hi + q_lo * sin_hi).to(q_out.dtype), extra_mask=q_valid)
        hl.store(k_out, lo, (k_lo * cos_lo - k_hi * sin_lo).to(k_out.dtype), extra_mask=k_valid)
        hl.store(k_out, hi, (k_hi * cos_hi + k_lo * sin_hi).to(k_out.dtype), extra_mask=k_valid)
    return q_out, k_out


CONFIGS = [
    {"block_sizes": [1, 1, 16], "loop_orders": [[0, 2, 1]], "num_warps": 4},
    {"block_sizes": [1, 2, 32], "num_warps": 8},
    {"block_sizes": [1, 1, 32], "num_warps": 4},
    {"block_sizes": [1, 4, 32], "num_warps": 8},
]


def main() -> int:
    device = torch.device("cuda")
    timer = Timer(device)
    copy = copy_bandwidth_tbs(timer)
    bench = BENCHES["rope"]
    args = bench.make_args(device)
    expected = bench.reference(*args)
    work = bench.work(args)
    print(f"copy {copy:.3f} TB/s")
    for config in CONFIGS:
        for kernel in (example.rope, rope_loads_first):
            run = kernel.bind(args).compile_config(helion.Config(**config))
            for got, want in zip(run(*args), expected, strict=True):
                torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2)
            ms = timer.median_ms(lambda run=run: run(*args))
            rate = work / (ms * 1e-3) / 1e12
            print(f"{kernel.name:18} {config}  {ms * 1e3:7.2f} us  {rate:.3f} TB/s  {rate / copy:6.1%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
