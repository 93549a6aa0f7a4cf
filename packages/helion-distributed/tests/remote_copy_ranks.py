"""What each rank process runs in test_remote_copy.py (importable by the rank processes that
``helion_distributed.testing.run_ranks`` starts; not a test module itself)."""

from __future__ import annotations

import torch
import torch.distributed as dist

import helion
import helion.language as hl
from helion_distributed import symm_mem

BLOCK = 16


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def push_next(
    buffer: torch.Tensor, GROUP: hl.ProcessGroupName, RANK: hl.constexpr, WORLD: hl.constexpr
) -> None:
    """One-shot: row RANK of the symmetric buffer goes to the same row of the next rank."""
    for tile in hl.tile(buffer.size(1)):
        copy = hl.make_async_remote_copy(buffer, [RANK, tile], (RANK + 1) % WORLD)
        copy.start()
        copy.wait()


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def ring_all_gather(
    out: torch.Tensor, GROUP: hl.ProcessGroupName, RANK: hl.constexpr, WORLD: hl.constexpr
) -> None:
    """out[RANK] holds this rank's shard; WORLD - 1 steps of a ring through one descriptor."""
    for tile in hl.tile(out.size(1)):
        for step in range(WORLD - 1):
            chunk = (RANK - step + WORLD) % WORLD
            copy = hl.make_async_remote_copy(out, [chunk, tile], (RANK + 1) % WORLD)
            copy.start()
            copy.wait_recv()
            copy.wait_send()


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def push_into(
    x: torch.Tensor,
    buffer: torch.Tensor,
    shift: int,
    GROUP: hl.ProcessGroupName,
    RANK: hl.constexpr,
    WORLD: hl.constexpr,
) -> None:
    """Non-default dst/dst_index and a runtime device_id: x[1] (local) goes to row RANK of the
    symmetric buffer of rank (RANK + shift) % WORLD."""
    for tile in hl.tile(x.size(1)):
        copy = hl.make_async_remote_copy(x, [1, tile], (RANK + shift) % WORLD, buffer, [RANK, tile])
        copy.start()
        copy.wait()


def transfers(rank: int, world_size: int) -> dict:
    group = dist.group.WORLD
    name = hl.ProcessGroupName(group.group_name)
    n = 40  # two full tiles and a partial one
    results = {}
    buffer = symm_mem.empty(world_size, n, dtype=torch.float32)
    for call in range(2):  # the second launch reuses the cached workspace and its words
        buffer.fill_(-1.0)
        buffer[rank] = torch.arange(n, dtype=torch.float32) + 100 * rank + call
        dist.barrier()
        push_next(buffer, name, hl.constexpr(rank), hl.constexpr(world_size))
        left = (rank - 1) % world_size
        expected = torch.arange(n, dtype=torch.float32) + 100 * left + call
        results[f"push_next[{call}]"] = bool(torch.equal(buffer[left], expected))
        dist.barrier()
    gathered = symm_mem.empty(world_size, n, dtype=torch.int32)
    for call in range(2):
        gathered.fill_(-1)
        gathered[rank] = torch.arange(n, dtype=torch.int32) * (rank + 1) + call
        dist.barrier()
        ring_all_gather(gathered, name, hl.constexpr(rank), hl.constexpr(world_size))
        expected = torch.stack(
            [torch.arange(n, dtype=torch.int32) * (r + 1) + call for r in range(world_size)]
        )
        results[f"ring_all_gather[{call}]"] = bool(torch.equal(gathered, expected))
        dist.barrier()
    target = symm_mem.empty(world_size, n, dtype=torch.float32)
    for shift in (1, world_size - 1):
        target.fill_(-1.0)
        x = torch.stack([torch.zeros(n), torch.arange(n, dtype=torch.float32) * 3 + rank])
        dist.barrier()
        push_into(x, target, shift, name, hl.constexpr(rank), hl.constexpr(world_size))
        source = (rank - shift) % world_size
        expected = torch.arange(n, dtype=torch.float32) * 3 + source
        results[f"push_into[shift={shift}]"] = bool(torch.equal(target[source], expected))
        dist.barrier()
    return results


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def pair_exchange(
    buffer: torch.Tensor, GROUP: hl.ProcessGroupName, RANK: hl.constexpr
) -> torch.Tensor:
    """Push row RANK to the partner (RANK ^ 1), meet only the partner, read the partner's row."""
    out = torch.empty_like(buffer[0])
    for tile in hl.tile(buffer.size(1)):
        copy = hl.make_async_remote_copy(buffer, [RANK, tile], RANK ^ 1)
        copy.start()
        copy.wait_send()
        hl.remote_barrier([RANK ^ 1])
        out[tile] = buffer[RANK ^ 1, tile]
        hl.remote_barrier(RANK ^ 1)  # the partner has read our row: it may be overwritten
    return out


def pairs(rank: int, world_size: int) -> list:
    """remote_barrier is peer-scoped: in the second call, ranks 2 and 3 start only after ranks 0
    and 1 have finished theirs (a barrier over the whole group would hang)."""
    group = dist.group.WORLD
    name = hl.ProcessGroupName(group.group_name)
    store = dist.distributed_c10d._get_default_store()
    n = 40
    buffer = symm_mem.empty(world_size, n, dtype=torch.float32)
    seen = []
    for call in range(3):
        buffer[rank] = torch.arange(n, dtype=torch.float32) + 10 * rank + call
        dist.barrier()
        if call == 2 and rank >= 2:
            store.wait([f"pair-done-{call}"])
        out = pair_exchange(buffer, name, hl.constexpr(rank))
        if call == 2 and rank == 0:
            store.set(f"pair-done-{call}", "1")
        partner = rank ^ 1
        seen.append(
            bool(torch.equal(out, torch.arange(n, dtype=torch.float32) + 10 * partner + call))
        )
    return seen


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def sliced(buffer: torch.Tensor, RANK: hl.constexpr) -> None:
    for tile in hl.tile(buffer.size(1)):
        hl.make_async_remote_copy(buffer, [slice(None), tile], 1 - RANK).start()


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def mixed(x: torch.Tensor, buffer: torch.Tensor, RANK: hl.constexpr) -> None:
    for tile in hl.tile(x.size(0)):
        hl.make_async_remote_copy(x, [tile], 1 - RANK, buffer, [tile]).start()


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def computed(x: torch.Tensor, buffer: torch.Tensor, RANK: hl.constexpr) -> None:
    for tile in hl.tile(x.size(0)):
        hl.make_async_remote_copy(x[tile] * 2, [tile], 1 - RANK, buffer, [tile]).start()


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def far_peer(buffer: torch.Tensor, RANK: hl.constexpr) -> None:
    for tile in hl.tile(buffer.size(0)):
        hl.make_async_remote_copy(buffer, [tile], RANK + 7).start()


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def far_barrier(buffer: torch.Tensor, RANK: hl.constexpr) -> None:
    for _tile in hl.tile(buffer.size(0)):
        hl.remote_barrier([RANK + 7])


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def lonely(x: torch.Tensor, RANK: hl.constexpr) -> None:
    for tile in hl.tile(x.size(0)):
        hl.make_async_remote_copy(x, [tile], 1 - RANK).wait_recv()


def errors(rank: int, world_size: int) -> dict:
    """The clear errors: a slice index, a dtype mismatch, a destination that is not symmetric,
    a computed source; and a receive that never comes times out naming the rank and the op."""
    import helion_distributed

    buffer = symm_mem.empty(2, 32, dtype=torch.float32)
    found = {}
    cases = {
        "slice": lambda: sliced(buffer, hl.constexpr(rank)),
        "dtype": lambda: mixed(torch.zeros(32, dtype=torch.int32), buffer[0], hl.constexpr(rank)),
        "not_symmetric": lambda: mixed(torch.zeros(32), torch.zeros(32), hl.constexpr(rank)),
        "computed": lambda: computed(torch.zeros(32), buffer[0], hl.constexpr(rank)),
        "far_peer": lambda: far_peer(buffer[0], hl.constexpr(rank)),
        "far_barrier": lambda: far_barrier(buffer[0], hl.constexpr(rank)),
    }
    for case, call in cases.items():
        try:
            call()
            found[case] = "no error"
        except Exception as error:
            found[case] = f"{type(error).__name__}: {error}"
    helion_distributed.set_timeout(1.0)
    timeout_buffer = symm_mem.empty(32, dtype=torch.float32)
    try:
        lonely(timeout_buffer, hl.constexpr(rank))
        if rank == 0:
            helion_distributed.check_timeouts()  # a compiled kernel records the timeout
        found["timeout"] = "no error"
    except Exception as error:
        found["timeout"] = f"{type(error).__name__}: {error}"
    return found


def example(rank: int, world_size: int) -> str:
    """examples/distributed/remote_copy.py's run() on this rank."""
    import importlib
    import sys
    from pathlib import Path

    examples = Path(__file__).resolve().parents[3] / "examples" / "distributed"
    if str(examples) not in sys.path:
        sys.path.insert(0, str(examples))
    importlib.import_module("remote_copy").run(rank, world_size, torch.device("cpu"))
    return "ok"
