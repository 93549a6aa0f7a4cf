"""Ready collectives: all_reduce (one-shot and two-shot), all_gather, reduce_scatter.

Each is a Helion kernel over a flat view of the input with a plain host wrapper that owns the
symmetric workspace (allocated once per shape, dtype and group, reused by later calls).
"""

from __future__ import annotations

from typing import Any

import torch

import helion
import helion.language as hl
from helion_distributed.kernels._common import after_launch
from helion_distributed.kernels._common import group_info
from helion_distributed.kernels._common import workspace

#: inputs up to this many bytes use the one-shot all-reduce (every rank reads every peer's
#: whole buffer: one synchronization, world_size x the data); larger ones use the two-shot
#: (each rank reduces a share of the tiles and pushes the result to everyone: 2 x the data)
ONE_SHOT_MAX_BYTES = 256 * 1024

BLOCK = 1024
ONE_SHOT_CONFIG = helion.Config(block_sizes=[BLOCK])
TWO_SHOT_CONFIG = helion.Config(block_sizes=[BLOCK])
GATHER_CONFIG = helion.Config(block_sizes=[BLOCK])
SCATTER_CONFIG = helion.Config(block_sizes=[BLOCK])
_OPS = ("sum", "max", "min", "prod")
_LOW = (torch.float16, torch.bfloat16)


@helion.kernel(config=ONE_SHOT_CONFIG, static_shapes=True)
def one_shot_all_reduce_kernel(
    x: torch.Tensor,
    buffer: torch.Tensor,
    GROUP: hl.ProcessGroupName,
    RANK: hl.constexpr,
    OP: hl.constexpr,
) -> torch.Tensor:
    """Every rank stages its tile, then reads the tile of every peer and reduces it."""
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = hl.all_reduce(x[tile], peers, [tile], pads, RANK, op=OP)
    return out


@helion.kernel(config=TWO_SHOT_CONFIG, static_shapes=True)
def two_shot_all_reduce_kernel(
    x: torch.Tensor,
    buffer: torch.Tensor,
    GROUP: hl.ProcessGroupName,
    RANK: hl.constexpr,
    WORLD_SIZE: hl.constexpr,
    OP: hl.constexpr,
) -> torch.Tensor:
    """Tile t belongs to rank t % WORLD_SIZE, which reduces it from every peer and pushes the
    result into every peer's buffer (reduce-scatter, then all-gather by remote stores)."""
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty_like(x)
    block = hl.register_block_size(x.size(0))
    for tile in hl.tile(x.size(0), block_size=block):
        peers[RANK][tile] = x[tile]
        hl.peer_barrier(pads, RANK)
        if (tile.begin // block) % WORLD_SIZE == RANK:
            # in the buffer's dtype, as hl.all_reduce: float32 for fp16/bf16 inputs (their
            # workspace is float32), the input's own dtype otherwise (integers stay exact)
            acc = peers[0][tile]
            for peer in peers[1:]:
                value = peer[tile]
                if OP == "sum":
                    acc = acc + value
                elif OP == "max":
                    acc = torch.maximum(acc, value)
                elif OP == "min":
                    acc = torch.minimum(acc, value)
                else:
                    acc = acc * value
            for peer in peers:
                peer[tile] = acc
        hl.peer_barrier(pads, RANK)
        out[tile] = peers[RANK][tile]
    return out


@helion.kernel(config=GATHER_CONFIG, static_shapes=True)
def all_gather_kernel(
    x: torch.Tensor,
    buffer: torch.Tensor,
    GROUP: hl.ProcessGroupName,
    RANK: hl.constexpr,
    WORLD_SIZE: hl.constexpr,
) -> torch.Tensor:
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty([WORLD_SIZE, x.size(0)], dtype=x.dtype, device=x.device)
    for tile in hl.tile(x.size(0)):
        gathered = hl.all_gather(x[tile], peers, [tile], pads, RANK)
        for r in hl.static_range(WORLD_SIZE):
            out[r, tile] = gathered[r]
    return out


@helion.kernel(config=SCATTER_CONFIG, static_shapes=True)
def reduce_scatter_kernel(
    x: torch.Tensor,
    buffer: torch.Tensor,
    GROUP: hl.ProcessGroupName,
    RANK: hl.constexpr,
    OP: hl.constexpr,
) -> torch.Tensor:
    """``x`` is [world_size, n]: row d is this rank's contribution to rank d."""
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    n = x.size(1)
    out = torch.empty([n], dtype=x.dtype, device=x.device)
    for tile in hl.tile(n):
        out[tile] = hl.reduce_scatter(x[:, tile], peers, [tile], pads, RANK, op=OP)
    return out


def _check_op(op: str) -> str:
    if op not in _OPS:
        raise ValueError(f"op must be one of {', '.join(_OPS)}, got {op!r}")
    return op


def _meet_empty(
    tag: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, info: Any
) -> None:
    """A collective of a tensor without elements moves nothing and launches no kernel. On CPU
    the ranks still rendezvous the (zero-byte) workspace that a non-empty call of this shape
    would use, once per tag, dtype and group, so that a rank whose tensor is not empty fails
    with the same ``SymmetricMemoryError`` ("ranks allocated different sizes") as any other size
    mismatch instead of waiting for a launch that never comes. (Elsewhere the result is
    returned right away: a zero-byte CUDA symmetric allocation is not relied on.)"""
    if device.type == "cpu":
        workspace(tag, shape, dtype, device, info)


def all_reduce(
    t: torch.Tensor, op: str = "sum", group: Any = None, *, algorithm: str = "auto"
) -> torch.Tensor:
    """All-reduce ``t`` over ``group`` (every rank gets the reduction); returns a new tensor.

    Reduces in ``t``'s dtype (fp16 and bf16 in float32), so integer and float64 results equal
    ``dist.all_reduce``'s; a tensor without elements gives an empty result.

    Args:
        t: this rank's tensor (same shape and dtype on every rank).
        op: ``"sum"``, ``"max"``, ``"min"`` or ``"prod"``.
        group: a ``ProcessGroup``, a group name or None (the default group).
        algorithm: ``"one_shot"``, ``"two_shot"`` or ``"auto"`` (one-shot up to
            ``ONE_SHOT_MAX_BYTES``, two-shot above).
    """
    _check_op(op)
    if algorithm not in ("auto", "one_shot", "two_shot"):
        raise ValueError(f"algorithm must be 'auto', 'one_shot' or 'two_shot', got {algorithm!r}")
    info = group_info(group)
    if algorithm == "auto":
        algorithm = "one_shot" if t.numel() * t.element_size() <= ONE_SHOT_MAX_BYTES else "two_shot"
    flat = t.reshape(-1)
    if flat.numel() == 0:
        dtype = torch.float32 if t.dtype in _LOW else t.dtype
        _meet_empty(f"all_reduce_{algorithm}", (0,), dtype, t.device, info)
        return t.new_empty(t.shape)
    if algorithm == "one_shot":
        # low-precision sums go through a float32 buffer (the tile op accumulates there)
        dtype = torch.float32 if t.dtype in _LOW else t.dtype
        (ws,) = workspace("all_reduce_one_shot", (flat.numel(),), dtype, t.device, info)
        out = one_shot_all_reduce_kernel(
            flat, ws.buffer, info.name_arg, info.rank_arg, hl.constexpr(op)
        )
        after_launch(ws, what="helion_distributed.all_reduce (one-shot)")
    else:  # two_shot
        (ws,) = workspace(
            "all_reduce_two_shot",
            (flat.numel(),),
            torch.float32 if t.dtype in _LOW else t.dtype,
            t.device,
            info,
        )
        out = two_shot_all_reduce_kernel(
            flat, ws.buffer, info.name_arg, info.rank_arg, info.world_arg, hl.constexpr(op)
        )
        after_launch(ws, what="helion_distributed.all_reduce (two-shot)")
    return out.to(t.dtype).view(t.shape)


def all_gather(t: torch.Tensor, group: Any = None) -> torch.Tensor:
    """Concatenate every rank's ``t`` along dim 0 (like ``all_gather_into_tensor``)."""
    info = group_info(group)
    flat = t.reshape(-1)
    if flat.numel() == 0:  # ndim >= 1: a 0-d tensor has one element
        _meet_empty("all_gather", (0,), t.dtype, t.device, info)
        return t.new_empty((info.world_size * t.shape[0], *t.shape[1:]))
    (ws,) = workspace("all_gather", (flat.numel(),), t.dtype, t.device, info)
    out = all_gather_kernel(flat, ws.buffer, info.name_arg, info.rank_arg, info.world_arg)
    after_launch(ws, what="helion_distributed.all_gather")
    if t.ndim == 0:
        return out.view(info.world_size)
    return out.view(info.world_size * t.shape[0], *t.shape[1:])


def reduce_scatter(t: torch.Tensor, op: str = "sum", group: Any = None) -> torch.Tensor:
    """Reduce ``t`` over ``group`` and return this rank's chunk of dim 0 (like
    ``reduce_scatter_tensor``): ``t.shape[0]`` must be divisible by the world size."""
    _check_op(op)
    info = group_info(group)
    if t.ndim == 0 or t.shape[0] % info.world_size:
        raise ValueError(
            f"reduce_scatter needs dim 0 divisible by the world size {info.world_size}, got shape {list(t.shape)}"
        )
    chunk = t.numel() // info.world_size
    dtype = torch.float32 if t.dtype in _LOW else t.dtype
    if chunk == 0:
        _meet_empty("reduce_scatter", (info.world_size, 0), dtype, t.device, info)
        return t.new_empty((t.shape[0] // info.world_size, *t.shape[1:]))
    (ws,) = workspace("reduce_scatter", (info.world_size, chunk), dtype, t.device, info)
    out = reduce_scatter_kernel(
        t.reshape(info.world_size, chunk), ws.buffer, info.name_arg, info.rank_arg, hl.constexpr(op)
    )
    after_launch(ws, what="helion_distributed.reduce_scatter")
    return out.view(t.shape[0] // info.world_size, *t.shape[1:])
