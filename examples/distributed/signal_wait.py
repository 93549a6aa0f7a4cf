"""Writing your own distributed kernel: peer buffers, hl.signal / hl.wait and a tile collective.

    python -m torch.distributed.run --standalone --nproc-per-node 3 examples/distributed/signal_wait.py

`ring_shift` sends every tile to the next rank: it stores the tile straight into the peer's
symmetric buffer (a peer tensor from hl.peer_tensors), then signals the peer's pad; the peer
waits for the signal (consuming it) before it reads. `scaled_sum` fuses compute with a tile-level
hl.all_reduce. Both are checked against torch.distributed.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from _dist_common import main
from _dist_common import randn

import helion
import helion.language as hl
from helion_distributed import symm_mem


@helion.kernel(config=helion.Config(block_sizes=[64]), static_shapes=True)
def ring_shift(
    x: torch.Tensor,
    buffer: torch.Tensor,
    GROUP: hl.ProcessGroupName,
    RANK: hl.constexpr,
    WORLD_SIZE: hl.constexpr,
) -> torch.Tensor:
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        slot = (
            tile.begin // 64
        )  # this tile's two words: 2 * slot ("data ready"), 2 * slot + 1 ("consumed")
        right = (RANK + 1) % WORLD_SIZE
        left = (RANK + WORLD_SIZE - 1) % WORLD_SIZE
        # 1. write the tile straight into the right neighbour's buffer, 2. tell it (release)
        peers[right][tile] = x[tile]
        hl.signal(pads[right], [2 * slot], 1, wait_for=0, sem="release", scope="sys")
        # 3. wait for the left neighbour's tile (acquire, and consume the signal), 4. read it
        hl.wait(pads[RANK], [2 * slot], 1, update=0, sem="acquire", scope="sys")
        out[tile] = peers[RANK][tile]
        # 5. tell the left neighbour its tile was read, 6. wait until ours was: only then may
        # the next launch overwrite the right neighbour's buffer again
        hl.signal(pads[left], [2 * slot + 1], 1, wait_for=0, scope="sys")
        hl.wait(pads[RANK], [2 * slot + 1], 1, update=0, scope="sys")
    return out


@helion.kernel(config=helion.Config(block_sizes=[32]), static_shapes=True)
def scaled_sum(
    x: torch.Tensor, buffer: torch.Tensor, GROUP: hl.ProcessGroupName, RANK: hl.constexpr
) -> torch.Tensor:
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        y = torch.sigmoid(x[tile]) * 2.0
        out[tile] = hl.all_reduce(y, peers, [tile], pads, RANK) + 1.0
    return out


def run(rank: int, world_size: int, device: torch.device) -> None:
    group = dist.group.WORLD
    name = hl.ProcessGroupName(group.group_name)
    n = 300
    buffer = symm_mem.empty(n, dtype=torch.float32, device=device)
    symm_mem.rendezvous(buffer, group)
    for step in range(2):
        x = randn(n, seed=90 + 10 * step + rank, device=device)
        out = ring_shift(x, buffer, name, hl.constexpr(rank), hl.constexpr(world_size))
        everyone = [torch.empty_like(x) for _ in range(world_size)]
        dist.all_gather(everyone, x)
        torch.testing.assert_close(out, everyone[(rank - 1) % world_size])  # the left neighbour's
    x = randn(n, seed=99 + rank, device=device)
    out = scaled_sum(x, buffer, name, hl.constexpr(rank))
    expected = torch.sigmoid(x) * 2.0
    dist.all_reduce(expected)
    torch.testing.assert_close(out, expected + 1.0, atol=1e-5, rtol=1e-5)


if __name__ == "__main__":
    raise SystemExit(main(run, "signal_wait"))
