"""All-gather + matmul fused: helion_distributed.all_gather_matmul, checked against
torch.distributed.all_gather_into_tensor followed by a matmul.

    python -m torch.distributed.run --standalone --nproc-per-node 2 examples/distributed/all_gather_matmul.py

Each rank publishes its shard of A chunk by chunk (hl.signal per chunk); the matmul tiles wait
only for the chunk they read (hl.wait), starting with the local one, so compute starts before the
gather is complete.
"""

from __future__ import annotations

import torch
from _dist_common import all_gather_ref
from _dist_common import main
from _dist_common import randn
from _dist_common import tolerance

import helion_distributed as hd


def run(rank: int, world_size: int, device: torch.device) -> None:
    m, k, n = 37, 29, 45
    b = randn(k, n, seed=1, device=device)
    for step in range(2):  # the second call reuses (alternates) the symmetric buffers
        a_shard = randn(m, k, seed=10 * step + rank, device=device)
        a_gathered, product = hd.all_gather_matmul(a_shard, b)
        expected_a = torch.empty(world_size * m, k, device=device)
        all_gather_ref(expected_a, a_shard)
        torch.testing.assert_close(a_gathered, expected_a)
        torch.testing.assert_close(product, expected_a @ b, **tolerance(device, 1e-4, 2e-2))
    # gathering along another dim of a 3-D A
    a3 = randn(3, 5, k, seed=50 + rank, device=device)
    a_gathered, product = hd.all_gather_matmul(a3, b, gather_dim=1)
    pieces = torch.empty(world_size * 3, 5, k, device=device)
    all_gather_ref(pieces, a3)
    expected = torch.cat(pieces.chunk(world_size), dim=1)
    torch.testing.assert_close(a_gathered, expected)
    torch.testing.assert_close(product, expected @ b, **tolerance(device, 1e-4, 2e-2))


if __name__ == "__main__":
    raise SystemExit(main(run, "all_gather_matmul"))
