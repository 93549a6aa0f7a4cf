"""All-reduce + bias + RMSNorm in one kernel: each row tile is all-reduced across the ranks with
the tile-level ``hl.all_reduce`` and normalized right away, so the reduction of one tile overlaps
the normalization of another on a GPU and no full-size intermediate is written."""

from __future__ import annotations

from typing import Any

import torch

import helion
import helion.language as hl
from helion_distributed.kernels._common import after_launch
from helion_distributed.kernels._common import group_info
from helion_distributed.kernels._common import workspace

NORM_CONFIG = helion.Config(block_sizes=[16])


@helion.kernel(config=NORM_CONFIG, static_shapes=True)
def all_reduce_bias_rms_norm_kernel(
    x: torch.Tensor,
    bias: torch.Tensor,
    weight: torch.Tensor,
    buffer: torch.Tensor,
    EPS: hl.constexpr,
    GROUP: hl.ProcessGroupName,
    RANK: hl.constexpr,
) -> torch.Tensor:
    n = x.size(0)
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty_like(x)
    for tile_n in hl.tile(n):
        reduced = hl.all_reduce(x[tile_n, :], peers, [tile_n, slice(None)], pads, RANK)
        row = reduced + bias[None, :].to(torch.float32)
        variance = torch.mean(row * row, dim=-1, keepdim=True)
        normed = row * torch.rsqrt(variance + EPS)
        out[tile_n, :] = (normed * weight[None, :].to(torch.float32)).to(out.dtype)
    return out


def all_reduce_bias_rms_norm(
    x: torch.Tensor, bias: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, group: Any = None
) -> torch.Tensor:
    """``rms_norm(all_reduce(x) + bias) * weight`` for ``x`` [n, d] (the same ``bias`` and
    ``weight`` [d] on every rank); the sum and the norm are computed in float32."""
    info = group_info(group)
    if x.ndim != 2 or bias.shape != (x.shape[1],) or weight.shape != (x.shape[1],):
        raise ValueError(
            f"all_reduce_bias_rms_norm needs x [n, d], bias [d] and weight [d], got {list(x.shape)}, "
            f"{list(bias.shape)}, {list(weight.shape)}"
        )
    (ws,) = workspace("all_reduce_bias_rms_norm", tuple(x.shape), torch.float32, x.device, info)
    out = all_reduce_bias_rms_norm_kernel(
        x, bias, weight, ws.buffer, hl.constexpr(float(eps)), info.name_arg, info.rank_arg
    )
    after_launch(ws, what="helion_distributed.all_reduce_bias_rms_norm")
    return out
