"""Launch plumbing shared by the distributed examples (not an example itself).

Every example runs with ``python -m torch.distributed.run --standalone --nproc-per-node N
examples/distributed/<name>.py``: on a machine with GPUs each rank takes one GPU (NCCL, torch
symmetric memory), otherwise every rank is a CPU process (gloo, shared-memory symmetric memory).
``HELION_DIST_DEVICE=cpu`` forces CPU ranks on a GPU machine.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Callable

import torch
import torch.distributed as dist


def device_for_rank() -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available() and os.environ.get("HELION_DIST_DEVICE", "") != "cpu":
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        return device
    return torch.device("cpu")


def main(run: Callable[[int, int, torch.device], None], name: str) -> int:
    """Initialize the process group (unless the caller did), run ``run(rank, world_size,
    device)`` and report; returns the process exit code (non-zero on a mismatch)."""
    device = device_for_rank()
    owns_group = not dist.is_initialized()
    if owns_group:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    code = 0
    try:
        run(rank, world_size, device)
    except Exception:
        traceback.print_exc()
        print(f"[rank {rank}] {name}: FAILED", file=sys.stderr, flush=True)
        code = 1
    finally:
        if owns_group:
            failed = torch.tensor([code], dtype=torch.int32, device=device)
            try:
                dist.all_reduce(failed, op=dist.ReduceOp.MAX)
                code = max(code, int(failed.item()))
            except Exception:
                code = 1
            dist.destroy_process_group()
    if rank == 0 and code == 0:
        print(
            f"{name}: OK ({world_size} rank{'s' if world_size > 1 else ''} on {device.type})",
            flush=True,
        )
    return code


def seeded(seed: int, device: torch.device) -> torch.Generator:
    generator = torch.Generator(device="cpu")
    generator.manual_seed(seed)
    return generator


def randn(
    *shape: int, seed: int, device: torch.device, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Reproducible random numbers (the same on every backend and device)."""
    return torch.randn(*shape, generator=seeded(seed, device)).to(device=device, dtype=dtype)


def reduce_scatter_ref(output: torch.Tensor, input: torch.Tensor, group=None) -> None:
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    fn(output, input, group=group)


def all_gather_ref(output: torch.Tensor, input: torch.Tensor, group=None) -> None:
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    fn(output, input, group=group)


def tolerance(device: torch.device, cpu: float, gpu: float) -> dict:
    value = gpu if device.type == "cuda" else cpu
    return {"atol": value, "rtol": value}
