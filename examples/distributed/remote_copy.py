"""One-sided remote copies: a ring all-gather with hl.make_async_remote_copy, and a pairwise
exchange fenced by hl.remote_barrier.

    python -m torch.distributed.run --standalone --nproc-per-node 3 examples/distributed/remote_copy.py

`ring_all_gather` pushes one chunk per step to the next rank through a single descriptor
(created in the loop, so every step reuses its completion word) and waits for the chunk the
previous rank pushed before forwarding it. `pair_swap` pushes a row to the partner rank
(rank ^ 1) and meets only that partner. The user passes no signal pads: the compiler reserves
its completion words in a symmetric workspace of the kernel's group. Both are checked against
torch.distributed.
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
def ring_all_gather(
    out: torch.Tensor, GROUP: hl.ProcessGroupName, RANK: hl.constexpr, WORLD_SIZE: hl.constexpr
) -> None:
    """``out`` is symmetric, ``[WORLD_SIZE, n]``; on entry row RANK holds this rank's shard."""
    for tile in hl.tile(out.size(1)):
        for step in range(WORLD_SIZE - 1):
            chunk = (RANK - step + WORLD_SIZE) % WORLD_SIZE
            copy = hl.make_async_remote_copy(out, [chunk, tile], (RANK + 1) % WORLD_SIZE)
            copy.start()
            copy.wait_recv()  # the previous rank's chunk has landed: forward it next step
            copy.wait_send()


@helion.kernel(config=helion.Config(block_sizes=[64]), static_shapes=True)
def pair_swap(
    x: torch.Tensor, inbox: torch.Tensor, GROUP: hl.ProcessGroupName, RANK: hl.constexpr
) -> torch.Tensor:
    """Send ``x`` (local) into row RANK of the partner's symmetric ``inbox``; read the partner's."""
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        partner = RANK ^ 1
        copy = hl.make_async_remote_copy(x, [tile], partner, inbox, [RANK, tile])
        copy.start()
        copy.wait_send()
        hl.remote_barrier([partner])  # our push has landed at the partner, and theirs here
        out[tile] = inbox[partner, tile] * 2.0
    return out


def run(rank: int, world_size: int, device: torch.device) -> None:
    group = dist.group.WORLD
    name = hl.ProcessGroupName(group.group_name)
    n = 200
    out = symm_mem.empty(world_size, n, dtype=torch.float32, device=device)
    for step in range(2):
        shard = randn(n, seed=30 + 10 * step + rank, device=device)
        out.zero_()
        out[rank] = shard
        dist.barrier()
        ring_all_gather(out, name, hl.constexpr(rank), hl.constexpr(world_size))
        everyone = [torch.empty_like(shard) for _ in range(world_size)]
        dist.all_gather(everyone, shard)
        torch.testing.assert_close(out, torch.stack(everyone), atol=0, rtol=0)
        dist.barrier()
    if world_size % 2 == 0:  # every rank needs a partner
        inbox = symm_mem.empty(world_size, n, dtype=torch.float32, device=device)
        x = randn(n, seed=70 + rank, device=device)
        result = pair_swap(x, inbox, name, hl.constexpr(rank))
        everyone = [torch.empty_like(x) for _ in range(world_size)]
        dist.all_gather(everyone, x)
        torch.testing.assert_close(result, everyone[rank ^ 1] * 2.0, atol=0, rtol=0)


if __name__ == "__main__":
    raise SystemExit(main(run, "remote_copy"))
