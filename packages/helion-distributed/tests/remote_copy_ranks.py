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


# -- sizes under static_shapes=False ------------------------------------------------------------


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=False)
def push_rows(x: torch.Tensor, buffer: torch.Tensor, peer: int) -> None:
    """x[tile] (rows of any width) into the peer's buffer[tile], the tiles running over x."""
    for tile in hl.tile(x.size(0)):
        copy = hl.make_async_remote_copy(x, [tile], peer, buffer, [tile])
        copy.start()
        copy.wait()


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=False)
def push_over_dst(x: torch.Tensor, buffer: torch.Tensor, peer: int) -> None:
    """As push_rows, the tiles running over the destination."""
    for tile in hl.tile(buffer.size(0)):
        copy = hl.make_async_remote_copy(x, [tile], peer, buffer, [tile])
        copy.start()
        copy.wait()


@helion.kernel(config=helion.Config(block_sizes=[]), static_shapes=False)
def push_grid_rows(x: torch.Tensor, buffer: torch.Tensor, peer: int) -> None:
    """Row i of x into the peer's row i of buffer, for every row of x (an hl.grid index)."""
    for i in hl.grid(x.size(0)):
        hl.make_async_remote_copy(x, [i], peer, buffer, [i]).start()


def _error_text(call, *args) -> str:
    try:
        call(*args)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "no error"


def sizes(rank: int, world_size: int) -> dict:
    """One kernel of static_shapes=False called with other sizes: the copy follows each call's
    tensors (a row width, a row count), and a call whose tiles run past src or dst is refused
    with the op and the line before anything is copied (the memory after dst stays as it was)."""
    peer = (rank + 1) % world_size
    left = (rank - 1) % world_size
    results = {}
    wide = symm_mem.empty(8, 16, dtype=torch.float32)
    for rows, cols in ((6, 8), (4, 5), (8, 16), (6, 8)):
        x = torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols) + 1000 * rank
        buffer = wide.view(-1)[: rows * cols].view(rows, cols)  # every rank: the same view
        wide.fill_(-1.0)
        dist.barrier()
        push_rows(x, buffer, peer)
        dist.barrier()
        expected = torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols) + 1000 * left
        tail_untouched = bool((wide.view(-1)[rows * cols :] == -1).all())
        results[f"rows[{rows}x{cols}]"] = bool(torch.equal(buffer, expected)) and tail_untouched
        dist.barrier()
    big = symm_mem.empty(128, dtype=torch.float32)
    for call, (n, m) in enumerate(((40, 40), (24, 40), (64, 40), (40, 40))):
        x = torch.arange(n, dtype=torch.float32) + 100 * rank
        big.fill_(-1.0)
        dist.barrier()
        text = _error_text(push_rows, x, big[:m], peer)
        dist.barrier()
        copied = min(n, m)
        expected = torch.arange(copied, dtype=torch.float32) + 100 * left
        landed = bool(torch.equal(big[:copied], expected)) and bool((big[copied:] == -1).all())
        results[f"push{call}[{n}->{m}]"] = (text, landed if text == "no error" else None)
        results[f"untouched{call}[{n}->{m}]"] = bool((big[m:] == -1).all())
        dist.barrier()
    source = torch.full((64,), 7.0)  # x is a view of it: reading past x stays inside it
    for n, m in ((40, 40), (24, 40)):
        big.fill_(-1.0)
        dist.barrier()
        text = _error_text(push_over_dst, source[:n], big[:m], peer)
        dist.barrier()
        results[f"over_dst[{n}->{m}]"] = text
        results[f"over_dst_untouched[{n}->{m}]"] = bool((big[n:] == -1).all()) if n < m else True
        dist.barrier()
    rows_of_four = wide[:4]
    for n in (4, 6):
        x = torch.full((n, 16), float(rank))
        dist.barrier()
        results[f"grid[{n}->4]"] = _error_text(push_grid_rows, x, rows_of_four, peer)
        dist.barrier()
    return results


# -- a run-time device_id outside the group ---------------------------------------------------


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def push_to(x: torch.Tensor, buffer: torch.Tensor, peer: int) -> None:
    """device_id is a host scalar argument."""
    for tile in hl.tile(x.size(0)):
        copy = hl.make_async_remote_copy(x, [tile], peer, buffer, [tile])
        copy.start()
        copy.wait_recv()


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def push_shifted(x: torch.Tensor, buffer: torch.Tensor, shift: int, RANK: hl.constexpr) -> None:
    """device_id is computed in device code."""
    for tile in hl.tile(x.size(0)):
        copy = hl.make_async_remote_copy(x, [tile], RANK + shift, buffer, [tile])
        copy.start()
        copy.wait_recv()


@helion.kernel(config=helion.Config(block_sizes=[BLOCK]), static_shapes=True)
def meet_shifted(x: torch.Tensor, shift: int, RANK: hl.constexpr) -> None:
    """A barrier with one peer, computed in device code."""
    for _tile in hl.tile(x.size(0)):
        hl.remote_barrier([RANK + shift])


BAD_PEER_TIMEOUT = 30.0


def bad_peers(rank: int, world_size: int) -> dict:
    """Rank 0 names a rank outside the group at run time (a host scalar, a value computed on the
    device, a remote_barrier peer); every other rank pushes to (or meets) the next one. Rank 0
    reports the op, the line, the rank and the group size; rank 1, which waits for rank 0, is
    released long before the timeout and names rank 0."""
    import time

    import helion_distributed

    helion_distributed.set_timeout(BAD_PEER_TIMEOUT)
    bad = world_size + 3
    right = (rank + 1) % world_size
    found = {}
    x = torch.arange(40, dtype=torch.float32) + 100 * rank
    buffer = symm_mem.empty(40, dtype=torch.float32)
    cases = {
        "host_scalar": (push_to, (x, buffer, bad if rank == 0 else right)),
        "device_value": (
            push_shifted,
            (x, buffer, bad if rank == 0 else right - rank, hl.constexpr(rank)),
        ),
        # rank 1 meets rank 0, which names `bad` instead of 1; rank 2 meets itself
        "barrier": (meet_shifted, (x, {0: bad, 1: -1}.get(rank, 0), hl.constexpr(rank))),
    }

    def run(kernel, *args) -> None:
        kernel(*args)
        helion_distributed.check_timeouts()  # what a compiled kernel recorded

    for case, (kernel, args) in cases.items():
        dist.barrier()
        start = time.monotonic()
        found[case] = (_error_text(run, kernel, *args), time.monotonic() - start)
        dist.barrier()
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
