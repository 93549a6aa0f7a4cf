"""What each rank process runs in test_collectives.py (importable by the rank processes that
``helion_distributed.testing.run_ranks`` starts; not a test module itself)."""

from __future__ import annotations

import torch
import torch.distributed as dist

import helion_distributed as hd
from helion_distributed import symm_mem

N = 2500  # three tiles of the ready kernels' 1024 block: every rank owns a tile of the two-shot


def _expected(x: torch.Tensor, op: str) -> torch.Tensor:
    expected = x.clone()
    dist.all_reduce(expected, op=getattr(dist.ReduceOp, {"prod": "PRODUCT"}.get(op, op.upper())))
    return expected


def _values(dtype: torch.dtype, op: str, rank: int) -> torch.Tensor:
    """Values a float32 accumulator rounds (above 2**24, 2**53, or below float32's epsilon)."""
    index = torch.arange(N, dtype=torch.int64)
    if op == "prod":  # small factors, so the product stays in range
        return ((index % 5) + 2 + rank).to(dtype)
    if dtype == torch.int32:
        return (2**24 + 1 + 2 * index + rank).to(dtype)
    if dtype == torch.int64:
        return 2**53 + 1 + 2 * index + rank
    if dtype == torch.float64:
        return 1.0 + (index.to(dtype) + rank) * 2.0**-40
    return (index % 7 - 3 + rank).to(dtype)  # int8 and float32: plain small values


def exact_two_shot(rank: int, world_size: int) -> dict[str, str]:
    """Every dtype and op of the two-shot (and one-shot) all-reduce against dist.all_reduce,
    compared exactly; returns what differed (empty when everything matched)."""
    wrong = {}
    for dtype in (torch.int32, torch.int64, torch.float64, torch.int8, torch.float32):
        for op in ("sum", "max", "min", "prod"):
            x = _values(dtype, op, rank)
            expected = _expected(x, op)
            for algorithm in ("two_shot", "one_shot"):
                out = hd.all_reduce(x, op, algorithm=algorithm)
                if out.dtype != dtype or not torch.equal(out, expected):
                    bad = (out != expected).nonzero()
                    where = int(bad[0]) if len(bad) else -1
                    wrong[f"{algorithm} {dtype} {op}"] = (
                        f"{out.dtype} at {where}: {out[where].item()} != {expected[where].item()}"
                    )
    # bf16 keeps its float32 accumulation: the sum of the ranks' bf16 values, rounded once
    x = (torch.arange(N) % 11 / 3 + rank).to(torch.bfloat16)
    wide = x.to(torch.float32)
    dist.all_reduce(wide)
    out = hd.all_reduce(x, algorithm="two_shot")
    if not torch.equal(out, wide.to(torch.bfloat16)):
        wrong["two_shot bf16 sum"] = "not the float32 sum rounded to bf16"
    # bool as torch reduces it: a sum is an "or" (True + True is True, not a wrapped False)
    x = torch.arange(2 * world_size * 64) % (rank + 2) == 0
    everyone = [torch.empty_like(x, dtype=torch.uint8) for _ in range(world_size)]
    dist.all_gather(everyone, x.to(torch.uint8))
    stack = torch.stack(everyone).to(torch.int32)
    for op, reduced in (
        ("sum", stack.sum(0)),
        ("max", stack.amax(0)),
        ("min", stack.amin(0)),
        ("prod", stack.prod(0)),
    ):
        expected = reduced != 0
        for algorithm in ("two_shot", "one_shot"):
            out = hd.all_reduce(x, op, algorithm=algorithm)
            if out.dtype != torch.bool or not torch.equal(out, expected):
                wrong[f"{algorithm} bool {op}"] = str(out.tolist())
        mine = expected.view(world_size, -1)[rank]
        out = hd.reduce_scatter(x, op)
        if out.dtype != torch.bool or not torch.equal(out, mine):
            wrong[f"reduce_scatter bool {op}"] = str(out.tolist())
    return wrong


def auto_picks_two_shot_for_large_int32(rank: int, world_size: int) -> bool:
    """70,000 int32 elements (over ONE_SHOT_MAX_BYTES): algorithm='auto' takes the two-shot."""
    x = torch.full((70000,), 2**24 + 1 + rank, dtype=torch.int32)
    return torch.equal(hd.all_reduce(x), _expected(x, "sum"))


def empty_tensors(rank: int, world_size: int) -> dict[str, object]:
    """The ready collectives on tensors without elements, and a 0-element symm_mem.empty."""
    found: dict[str, object] = {}
    buffer = symm_mem.empty(0, 4)
    found["symmetric"] = symm_mem.is_symm_mem_tensor(buffer)
    peers = symm_mem.get_remote_tensors(buffer)
    found["peers"] = [tuple(p.shape) for p in peers]
    found["pads"] = len(symm_mem.get_signal_pads(buffer))
    for algorithm in ("auto", "one_shot", "two_shot"):
        out = hd.all_reduce(torch.empty(0, 4), algorithm=algorithm)
        found[f"all_reduce {algorithm}"] = (tuple(out.shape), out.dtype)
    out = hd.all_reduce(torch.empty(3, 0, dtype=torch.int32), "max")
    found["all_reduce int32"] = (tuple(out.shape), out.dtype)
    out = hd.all_gather(torch.empty(0, 4))
    found["all_gather"] = (tuple(out.shape), out.dtype)
    out = hd.reduce_scatter(torch.empty(2 * world_size, 0))
    found["reduce_scatter"] = (tuple(out.shape), out.dtype)
    out = hd.reduce_scatter(torch.empty(0, 4, dtype=torch.bfloat16))
    found["reduce_scatter rows"] = (tuple(out.shape), out.dtype)
    # still working afterwards, with elements
    x = torch.arange(6.0) + rank
    found["after"] = torch.equal(hd.all_reduce(x), _expected(x, "sum"))
    return found


def empty_on_one_rank(rank: int, world_size: int) -> str:
    """Rank 0 passes an empty tensor, the others one with elements: every rank must fail fast
    (at the workspace rendezvous), none may wait for the others."""
    x = torch.empty(0) if rank == 0 else torch.ones(5)
    try:
        hd.all_reduce(x)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "no error"
