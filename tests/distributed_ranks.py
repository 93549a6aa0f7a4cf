"""What each rank process runs in tests/test_distributed.py (importable by the rank processes,
which ``helion_distributed.testing.run_ranks`` starts; not a test module itself)."""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

import helion
import helion.language as hl
from helion_distributed.testing import ATTEMPT_ENV
from helion_distributed.testing import SHARED_DIR_ENV
from helion_distributed.testing import forming_group
from helion_distributed.testing import join_gloo_group

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples" / "distributed"

EXAMPLES = [
    "all_reduce",
    "all_gather_matmul",
    "matmul_reduce_scatter",
    "fp8_matmul_reduce_scatter",
    "fp8_scaled_all_gather_matmul",
    "allreduce_bias_rmsnorm",
    "two_dim_parallel_matmul",
    "signal_wait",
]


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}\n{traceback.format_exc()}"[:4000]


def run_examples(rank: int, world_size: int, names: list[str]) -> dict[str, str]:
    """Run each example's ``run(rank, world_size, device)`` on CPU; "ok" or the error per name."""
    if str(EXAMPLES_DIR) not in sys.path:
        sys.path.insert(0, str(EXAMPLES_DIR))
    results: dict[str, str] = {}
    for name in names:
        start = time.perf_counter()
        try:
            importlib.import_module(name).run(rank, world_size, torch.device("cpu"))
            results[name] = "ok"
        except Exception as error:  # reported per example; the next one still runs
            results[name] = _describe(error)
        results[name + ":seconds"] = f"{time.perf_counter() - start:.2f}"
        dist.barrier()
    return results


def symm_mem_handle(rank: int, world_size: int) -> dict:
    """The facade's handle API on CPU ranks: pointers, peer views, get_buffer, signal pads,
    host barriers and put/wait signals."""
    from helion_distributed import symm_mem

    buffer = symm_mem.empty(7, 5, dtype=torch.float32)
    assert symm_mem.is_symm_mem_tensor(buffer) and not symm_mem.is_symm_mem_tensor(torch.empty(3))
    buffer.fill_(rank + 1)
    handle = symm_mem.rendezvous(buffer, dist.group.WORLD)
    assert symm_mem.rendezvous(buffer) is handle  # cached, not collective again
    handle.barrier()
    peers = symm_mem.get_remote_tensors(buffer)
    assert peers[rank] is buffer
    sums = [float(p.sum()) for p in peers]
    handle.barrier()
    peers[(rank + 1) % world_size][0, 0] = 100.0 + rank  # a store into the next rank's memory
    handle.barrier(channel=3)
    received = float(buffer[0, 0])
    flat = handle.get_buffer((rank + 1) % world_size, [35], torch.float32)
    offset = handle.get_buffer(rank, [5], torch.float32, storage_offset=30)
    pads = symm_mem.get_signal_pads(buffer)
    for peer in range(world_size):  # a ring of put_signal / wait_signal
        if peer == (rank + 1) % world_size:
            handle.put_signal(peer, channel=1)
    handle.wait_signal((rank - 1) % world_size, channel=1)
    handle.barrier()
    return {
        "rank": handle.rank,
        "world_size": handle.world_size,
        "sums": sums,
        "received": received,
        "next_rank_buffer": float(flat[1]),
        "offset_view": float(offset[0]),
        "pads": [(p.dtype, p.numel()) for p in pads],
        # our own pad: every signal sent to us was consumed (peers may still be consuming theirs)
        "pads_zero": int(pads[rank].abs().sum()) == 0,
        "ptrs": len(set(handle.buffer_ptrs)) == world_size
        and len(handle.signal_pad_ptrs) == world_size,
        "buffer_size": handle.buffer_size,
    }


def die_mid_run(rank: int, world_size: int, size: int) -> tuple:
    """The last rank exits in the middle of a run of all-reduces; the others must raise a
    DistributedTimeout naming it, within the (short) distributed timeout."""
    import helion_distributed as hd

    x = torch.ones(size)
    assert float(hd.all_reduce(x, algorithm="two_shot")[0]) == world_size
    dist.barrier()
    if rank == world_size - 1:
        threading.Timer(0.2, os._exit, (7,)).start()
    start = time.monotonic()
    try:
        for _ in range(1000):
            hd.all_reduce(x, algorithm="two_shot")
    except hd.DistributedTimeout as error:
        return ("timeout", str(error), list(error.missing_ranks), time.monotonic() - start)
    return ("no error", "", [], time.monotonic() - start)


def lockstep_autotune(rank: int, world_size: int) -> tuple:
    """Tune the one-shot all-reduce kernel together: same winner everywhere, correct results."""
    import helion_distributed as hd
    from helion_distributed.kernels import collectives
    from helion_distributed.kernels._common import group_info
    from helion_distributed.kernels._common import workspace

    info = group_info()
    x = torch.randn(3000, generator=torch.Generator().manual_seed(rank))
    (space,) = workspace("all_reduce_one_shot", (3000,), torch.float32, x.device, info)
    args = (x, space.buffer, info.name_arg, info.rank_arg, hl.constexpr("sum"))
    candidates = [
        helion.Config(block_sizes=[256]),
        helion.Config(block_sizes=[512]),
        helion.Config(block_sizes=[2048]),
    ]
    winner = hd.autotune(collectives.one_shot_all_reduce_kernel, args, configs=candidates)
    searched = hd.autotune(
        collectives.one_shot_all_reduce_kernel, args, search="random", max_evaluations=3
    )
    out = collectives.one_shot_all_reduce_kernel(*args)
    expected = x.clone()
    dist.all_reduce(expected)
    torch.testing.assert_close(out, expected)
    return repr(winner), repr(searched)


@helion.kernel(config=helion.Config(block_sizes=[16]), static_shapes=True)
def ping(
    x: torch.Tensor,
    buffer: torch.Tensor,
    round_: int,
    GROUP: hl.ProcessGroupName,
    RANK: hl.constexpr,
) -> torch.Tensor:
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        if RANK == 0:
            peers[1][tile] = x[tile] + round_
            hl.signal(pads[1], [0], round_, sem="release", scope="sys")
            hl.wait(pads[0], [0], round_, sem="acquire", scope="sys")
            out[tile] = peers[0][tile]
        else:
            hl.wait(pads[1], [0], round_, sem="acquire", scope="sys")
            out[tile] = peers[1][tile]
            peers[0][tile] = peers[1][tile] * 2
            hl.signal(pads[0], [0], round_, sem="release", scope="sys")
    return out


def signal_wait_ordering(rank: int, world_size: int) -> list:
    """hl.signal / hl.wait order memory: a value written before a release signal is seen by the
    rank that acquires it, in every round of a ping-pong between rank 0 and rank 1."""
    from helion_distributed import symm_mem

    group = dist.group.WORLD
    buffer = symm_mem.empty(16, dtype=torch.float32)
    symm_mem.rendezvous(buffer, group)
    seen = []
    for round_ in range(1, 6):
        x = torch.arange(16, dtype=torch.float32)
        out = ping(x, buffer, round_, hl.ProcessGroupName(group.group_name), hl.constexpr(rank))
        expected = (x + round_) * (2 if rank == 0 else 1)
        seen.append(bool(torch.equal(out, expected)))
    return seen


def join_fails_once_on_rank_zero(
    rank: int, world_size: int, store_path: str, timeout: float
) -> None:
    """Forms the group as run_ranks does, except that rank 0's first attempt fails the way a
    gloo connect does on a loaded machine."""
    if rank == 0 and os.environ[ATTEMPT_ENV] == "1":
        raise RuntimeError("Gloo connectFullMesh failed with: Connection closed by peer")
    join_gloo_group(rank, world_size, store_path, timeout)


def second_group_fails_once(rank: int, world_size: int) -> tuple:
    """Forms a subgroup of all ranks; on attempt 1 rank 0's fails as gloo's connect can."""
    with forming_group():
        if rank == 0 and os.environ[ATTEMPT_ENV] == "1":
            raise RuntimeError("Gloo connectFullMesh failed with: Connection closed by peer")
        sub = dist.new_group(list(range(world_size)))
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total, group=sub)
    return os.environ[ATTEMPT_ENV], total.item()


def join_never_works(rank: int, world_size: int, store_path: str, timeout: float) -> None:
    raise RuntimeError(f"no group on attempt {os.environ[ATTEMPT_ENV]}")


def attempt_and_sum(rank: int, world_size: int) -> tuple:
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    return os.environ[ATTEMPT_ENV], total.item()


def fail_on_rank_one(rank: int, world_size: int) -> None:
    if rank == 1:
        raise ValueError("boom")


def group_lifetime(rank: int, world_size: int, store_name: str) -> dict:
    """After ready kernels ran on a group: destroying it frees it (no cached symmetric handle or
    workspace keeps it, and so its gloo threads, alive into interpreter shutdown, where they
    abort the process), and a group re-created under the same name gets fresh handles."""
    import gc
    import weakref

    import helion_distributed as hd
    from helion_distributed.kernels import _common

    def reduce_once(seed: int) -> bool:
        x = torch.randn(1001, generator=torch.Generator().manual_seed(seed + rank))
        out = hd.all_reduce(x, algorithm="one_shot")
        expected = x.clone()
        dist.all_reduce(expected)
        return bool(torch.allclose(out, expected, atol=1e-5, rtol=1e-4))

    first_ok = reduce_once(1)
    old = weakref.ref(dist.group.WORLD)
    old_name = dist.group.WORLD.group_name
    dist.destroy_process_group()
    gc.collect()
    freed = old() is None
    store_path = os.path.join(os.environ[SHARED_DIR_ENV], store_name)  # fresh per attempt
    with forming_group():
        dist.init_process_group(
            "gloo", init_method=f"file://{store_path}", rank=rank, world_size=world_size
        )
    same_name = dist.group.WORLD.group_name == old_name
    second_ok = reduce_once(2)
    spaces = [s for found in _common._workspaces.values() for s in found]
    refs = [getattr(s.handle, "group_ref", lambda: None) for s in spaces[-1:]]
    current = bool(refs) and all(ref() is dist.group.WORLD for ref in refs)
    return {
        "first_ok": first_ok,
        "freed": freed,
        "same_name": same_name,
        "second_ok": second_ok,
        "current": current,
    }


def regroup_by_size(rank: int, world_size: int) -> list:
    """A one-shot all-reduce on 2 of the 3 ranks, then, after destroying that group, on all 3
    under the same group name: the kernel compiled for 2 peers must not serve 3 (it summed 2
    ranks' data and the third rank timed out)."""
    import helion_distributed as hd

    store_dir = os.environ[SHARED_DIR_ENV]  # fresh per attempt: no stale store files
    x = torch.arange(11, dtype=torch.float32) + rank
    sums = []
    dist.destroy_process_group()  # the 3-rank group run_ranks made: start from 2 ranks
    for size in (2, 3):
        if rank < size:
            with forming_group():
                dist.init_process_group(
                    "gloo",
                    init_method=f"file://{store_dir}/store-{size}",
                    rank=rank,
                    world_size=size,
                )
            name = dist.group.WORLD.group_name
            sums.append((size, name, hd.all_reduce(x, algorithm="one_shot").tolist()))
            dist.destroy_process_group()
    with forming_group():
        dist.init_process_group(
            "gloo", init_method=f"file://{store_dir}/store-last", rank=rank, world_size=world_size
        )
    return sums


def non_member_call(rank: int, world_size: int) -> str:
    """A ready kernel called on a subgroup by a rank outside it: a clear error on that rank
    (torch hands it a placeholder, not a group), the members' result unchanged."""
    import helion_distributed as hd

    with forming_group():
        sub = dist.new_group([0, 1])
    x = torch.arange(7, dtype=torch.float32) + rank
    try:
        out = hd.all_reduce(x, group=sub)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "ok" if out.tolist() == (torch.arange(7) * 2 + 1).tolist() else f"wrong {out.tolist()}"


def _wait_then_copy(
    x: torch.Tensor, buffer: torch.Tensor, GROUP: hl.ProcessGroupName, RANK: hl.constexpr
) -> torch.Tensor:
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        hl.wait(pads[RANK], [3], 1, timeout=0.3)
        out[tile] = x[tile]
    return out


_wait_then_copy_on_pallas = helion.kernel(
    _wait_then_copy, backend="pallas", config=helion.Config(block_sizes=[8]), static_shapes=True
)


def refusal_without_a_lowering(rank: int, world_size: int) -> str:
    """The error of a backend with no lowering for a distributed op (Pallas has none for
    hl.wait): it names the op's public function, the backend and the kernel's line."""
    from helion_distributed import symm_mem

    buffer = symm_mem.empty(16, dtype=torch.float32)
    group = hl.ProcessGroupName(dist.group.WORLD.group_name)
    try:
        _wait_then_copy_on_pallas(torch.ones(16), buffer, group, hl.constexpr(rank))
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "no error"


def _shm_usage() -> tuple[int, int]:
    """(files this process owns, mappings it holds) of CPU symmetric memory; -1 for the
    mappings where /proc/self/maps does not exist."""
    from helion_distributed.symm_mem._cpu import PREFIX
    from helion_distributed.symm_mem._cpu import shm_dir

    mine = f"{PREFIX}-{os.getpid()}-"
    files = sum(name.startswith(mine) for name in os.listdir(shm_dir()))
    try:
        with open("/proc/self/maps") as maps:
            mapped = sum(f"/{PREFIX}-" in line for line in maps)
    except OSError:
        mapped = -1
    return files, mapped


def group_rounds(rank: int, world_size: int, rounds: int) -> dict:
    """``rounds`` times: a new group, a 240 KB all-reduce on it, destroy it. The shared memory of
    a destroyed group is released (files unlinked, mappings unmapped), so neither grows with the
    rounds; an allocation the user still holds survives its group and can be rendezvoused again."""
    import gc

    import helion_distributed as hd
    from helion_distributed import symm_mem

    everyone = list(range(world_size))
    base = _shm_usage()
    kept = symm_mem.empty(16, dtype=torch.float32)
    with forming_group():
        sub = dist.new_group(everyone)
    symm_mem.rendezvous(kept, sub)
    dist.destroy_process_group(sub)
    del sub
    x = torch.full((60_000,), float(rank + 1))
    expected = float(sum(range(1, world_size + 1)))
    ok = True
    usage = []
    for _ in range(rounds):
        with forming_group():
            group = dist.new_group(everyone)
        out = hd.all_reduce(x, group=group)
        ok = ok and bool((out == expected).all())
        dist.destroy_process_group(group)
        usage.append(_shm_usage())
    del group
    gc.collect()
    end = _shm_usage()
    kept.fill_(rank + 1)
    handle = symm_mem.rendezvous(kept, dist.group.WORLD)
    handle.barrier()
    peer = float(handle.get_buffer((rank + 1) % world_size, [16], torch.float32)[15])
    handle.barrier()
    return {"ok": ok, "base": base, "usage": usage, "end": end, "peer": peer}
