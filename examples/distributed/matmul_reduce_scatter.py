"""Matmul + reduce-scatter fused: helion_distributed.matmul_reduce_scatter, checked against a
matmul followed by torch.distributed.reduce_scatter_tensor.

    python -m torch.distributed.run --standalone --nproc-per-node 2 examples/distributed/matmul_reduce_scatter.py

Every output tile of this rank's shard is reduced with the tile-level hl.reduce_scatter right
after each rank computed its partial products: each rank writes its partial for rank d into
rank d's symmetric buffer, and reads only its own buffer.
"""

from __future__ import annotations

import torch
from _dist_common import main
from _dist_common import randn
from _dist_common import reduce_scatter_ref
from _dist_common import tolerance

import helion_distributed as hd


def run(rank: int, world_size: int, device: torch.device) -> None:
    rows, k, n = 13 * world_size, 29, 45
    b = randn(k, n, seed=3, device=device)
    a = randn(rows, k, seed=20 + rank, device=device)
    out = hd.matmul_reduce_scatter(a, b)
    expected = torch.empty(13, n, device=device)
    reduce_scatter_ref(expected, a @ b)
    torch.testing.assert_close(out, expected, **tolerance(device, 1e-4, 2e-2))
    # scatter the columns instead
    b_wide = randn(k, 7 * world_size, seed=4, device=device)
    out = hd.matmul_reduce_scatter(a, b_wide, scatter_dim=1)
    columns = torch.empty(7, rows, device=device)
    reduce_scatter_ref(columns, (a @ b_wide).t().contiguous())
    torch.testing.assert_close(out, columns.t(), **tolerance(device, 1e-4, 2e-2))


if __name__ == "__main__":
    raise SystemExit(main(run, "matmul_reduce_scatter"))
