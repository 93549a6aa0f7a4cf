"""All-reduce + bias + RMSNorm fused: helion_distributed.all_reduce_bias_rms_norm, checked
against torch.distributed.all_reduce followed by bias and RMSNorm in float32.

    python -m torch.distributed.run --standalone --nproc-per-node 2 examples/distributed/allreduce_bias_rmsnorm.py
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from _dist_common import main
from _dist_common import randn
from _dist_common import tolerance

import helion_distributed as hd


def reference(
    x: torch.Tensor, bias: torch.Tensor, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    summed = x.float().clone()
    dist.all_reduce(summed)
    row = summed + bias.float()
    return (row * torch.rsqrt(row.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def run(rank: int, world_size: int, device: torch.device) -> None:
    n, d, eps = 37, 96, 1e-5
    bias = randn(d, seed=11, device=device)
    weight = randn(d, seed=12, device=device)
    for step in range(2):
        x = randn(n, d, seed=60 + 10 * step + rank, device=device)
        out = hd.all_reduce_bias_rms_norm(x, bias, weight, eps)
        torch.testing.assert_close(
            out, reference(x, bias, weight, eps), **tolerance(device, 1e-4, 1e-3)
        )


if __name__ == "__main__":
    raise SystemExit(main(run, "allreduce_bias_rmsnorm"))
