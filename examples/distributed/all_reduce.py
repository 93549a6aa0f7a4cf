"""All-reduce with helion_distributed.all_reduce: one-shot and two-shot, checked against
torch.distributed.all_reduce.

    python -m torch.distributed.run --standalone --nproc-per-node 2 examples/distributed/all_reduce.py

One-shot: every rank stages its tile in symmetric memory, the ranks meet (signal pads), and each
reads the tile of every peer and reduces it. Two-shot: tile t is reduced by rank t % world_size,
which pushes the result into every peer's buffer; each rank moves 2x the data instead of world_size x.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from _dist_common import main
from _dist_common import randn
from _dist_common import tolerance

import helion_distributed as hd


def run(rank: int, world_size: int, device: torch.device) -> None:
    for numel, algorithm in ((3001, "one_shot"), (3001, "two_shot"), (70_001, "auto")):
        x = randn(numel, seed=100 + rank, device=device)
        out = hd.all_reduce(x, algorithm=algorithm)
        expected = x.clone()
        dist.all_reduce(expected)
        torch.testing.assert_close(out, expected, **tolerance(device, 1e-5, 1e-4))
    x = randn(37, 19, seed=7 + rank, device=device)
    out = hd.all_reduce(x, op="max")
    expected = x.clone()
    dist.all_reduce(expected, op=dist.ReduceOp.MAX)
    torch.testing.assert_close(out, expected)
    x = randn(5, 300, seed=rank, device=device, dtype=torch.bfloat16)
    out = hd.all_reduce(x, algorithm="two_shot")
    expected = x.float()
    dist.all_reduce(expected)
    torch.testing.assert_close(out, expected.to(torch.bfloat16), atol=1e-2, rtol=1e-2)


if __name__ == "__main__":
    raise SystemExit(main(run, "all_reduce"))
