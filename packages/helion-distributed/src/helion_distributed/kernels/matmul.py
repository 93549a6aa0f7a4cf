"""Matmuls fused with communication: all-gather + matmul, matmul + reduce-scatter, their FP8
(scaled) variants, and the 2-D (sequence parallel x tensor parallel) matmul.

- ``all_gather_matmul``: every rank publishes its shard of A into its symmetric buffer chunk by
  chunk, signalling each chunk to every peer (``hl.signal``); the matmul tiles wait only for the
  chunk they read (``hl.wait``), so the product of the first chunks starts before the last
  chunks are published. Two buffers alternate between calls, so no barrier ends a call.
- ``matmul_reduce_scatter``: each output tile of this rank's shard is reduced from the partial
  products of every rank with a tile-level ``hl.reduce_scatter``, right after they are computed.
- ``two_dim_parallel_matmul``: a partial product over this rank's K shard, all-reduced in the
  tensor-parallel group inside the tile loop (``hl.all_reduce``); sequence-parallel ranks never
  talk to each other.
"""

from __future__ import annotations

from typing import Any

import torch

import helion
import helion.language as hl
from helion_distributed.kernels._common import after_launch
from helion_distributed.kernels._common import check_fp8
from helion_distributed.kernels._common import check_slots
from helion_distributed.kernels._common import group_info
from helion_distributed.kernels._common import normalize_dim
from helion_distributed.kernels._common import workspace

AG_CONFIG = helion.Config(block_sizes=[64, 64, 64])
RS_CONFIG = helion.Config(block_sizes=[64, 64, 64])
TWO_D_CONFIG = helion.Config(block_sizes=[64, 64, 64])
_LOW = (torch.float16, torch.bfloat16)


# ---------------------------------------------------------------------------------------------
# all-gather + matmul


@helion.kernel(config=AG_CONFIG, static_shapes=True)
def all_gather_matmul_kernel(
    a_shard: torch.Tensor,
    b: torch.Tensor,
    buffer: torch.Tensor,
    epoch: int,
    GROUP: hl.ProcessGroupName,
    RANK: hl.constexpr,
    WORLD_SIZE: hl.constexpr,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``a_shard`` [m, k] of every rank, gathered to [WORLD_SIZE, m, k], times ``b`` [k, n]."""
    m, k = a_shard.shape
    n = b.size(1)
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    # registered in host code: the K loop is unrolled once per rank and must share one block size
    block_m = hl.register_block_size(m)
    block_n = hl.register_block_size(n)
    block_k = hl.register_block_size(k)
    a_gathered = torch.empty([WORLD_SIZE, m, k], dtype=a_shard.dtype, device=a_shard.device)
    out = torch.empty(
        [WORLD_SIZE, m, n], dtype=torch.promote_types(a_shard.dtype, b.dtype), device=a_shard.device
    )
    # publish: copy a chunk of rows into the symmetric buffer, then tell every rank it is there
    for tile_m in hl.tile(m, block_size=block_m):
        peers[RANK][tile_m, :] = a_shard[tile_m, :]
        for r in hl.static_range(WORLD_SIZE):
            hl.signal(pads[r], [tile_m.id * WORLD_SIZE + RANK], epoch, sem="release", scope="sys")
    hl.barrier()
    # consume: each tile waits for the chunk it needs, starting with the local one
    for tile_m, tile_n in hl.tile([m, n], block_size=[block_m, block_n]):
        for step in hl.static_range(WORLD_SIZE):
            source = (RANK + step) % WORLD_SIZE
            hl.wait(
                pads[RANK], [tile_m.id * WORLD_SIZE + source], epoch, sem="acquire", scope="sys"
            )
            acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
            for tile_k in hl.tile(k, block_size=block_k):
                acc = torch.addmm(acc, peers[source][tile_m, tile_k], b[tile_k, tile_n])
            out[source, tile_m, tile_n] = acc
            if tile_n.id == 0:
                a_gathered[source, tile_m, :] = peers[source][tile_m, :]
    return a_gathered, out


def _gather_layout(a_shard: torch.Tensor, gather_dim: int) -> tuple[torch.Tensor, list[int]]:
    if a_shard.ndim < 2:
        raise ValueError(
            f"all_gather_matmul needs A with at least 2 dims, got shape {list(a_shard.shape)}"
        )
    gather_dim = normalize_dim(gather_dim, a_shard.ndim, "gather_dim")
    if gather_dim == a_shard.ndim - 1:
        raise ValueError("gather_dim must not be the contraction (last) dim of A")
    moved = a_shard.movedim(gather_dim, 0)
    return moved.reshape(-1, a_shard.shape[-1]), list(moved.shape)


def _ungather(
    result: torch.Tensor, moved_shape: list[int], world_size: int, gather_dim: int, last: int
) -> torch.Tensor:
    # result: [world_size, rows, last] with rows = prod(moved_shape[:-1]) in moved order
    shape = [world_size, *moved_shape[:-1], last]
    full = result.reshape(shape)
    full = full.reshape(world_size * moved_shape[0], *moved_shape[1:-1], last)
    return full.movedim(0, gather_dim)


def all_gather_matmul(
    a_shard: torch.Tensor, b: torch.Tensor, *, gather_dim: int = 0, group: Any = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """All-gather ``a_shard`` along ``gather_dim`` over ``group`` and multiply by ``b``.

    Returns:
        ``(a_gathered, a_gathered @ b)``, like ``torch.ops.symm_mem.fused_all_gather_matmul``
        with one B.
    """
    info = group_info(group)
    gather_dim = normalize_dim(gather_dim, a_shard.ndim, "gather_dim")
    a2, moved_shape = _gather_layout(a_shard, gather_dim)
    rows, k = a2.shape
    if b.ndim != 2 or b.shape[0] != k:
        raise ValueError(f"b must be [{k}, n], got {list(b.shape)}")
    copies = workspace(
        "all_gather_matmul", (rows, k), a_shard.dtype, a_shard.device, info, copies=2
    )
    ws = copies[(copies[0].calls + copies[1].calls) % 2]
    epoch = ws.next_epoch()
    check_slots(ws.handle, -(-rows // 16) * info.world_size, "all_gather_matmul")
    gathered, product = all_gather_matmul_kernel(
        a2, b, ws.buffer, epoch, info.name_arg, info.rank_arg, info.world_arg
    )
    after_launch(ws, what="helion_distributed.all_gather_matmul")
    return (
        _ungather(gathered, moved_shape, info.world_size, gather_dim, k),
        _ungather(product, moved_shape, info.world_size, gather_dim, b.shape[1]),
    )


# ---------------------------------------------------------------------------------------------
# matmul + reduce-scatter


@helion.kernel(config=RS_CONFIG, static_shapes=True)
def matmul_reduce_scatter_kernel(
    a: torch.Tensor,
    b: torch.Tensor,
    buffer: torch.Tensor,
    GROUP: hl.ProcessGroupName,
    RANK: hl.constexpr,
    WORLD_SIZE: hl.constexpr,
    OP: hl.constexpr,
) -> torch.Tensor:
    """``a`` [WORLD_SIZE, m, k] (row block d is rank d's share), ``b`` [k, n]: returns this rank's
    [m, n] block of the product, reduced over the ranks."""
    _, m, k = a.shape
    n = b.size(1)
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty([m, n], dtype=torch.promote_types(a.dtype, b.dtype), device=a.device)
    block_k = hl.register_block_size(k)  # shared by the K loop's per-rank copies
    for tile_m, tile_n in hl.tile([m, n]):
        partials = []
        for d in hl.static_range(WORLD_SIZE):
            acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
            for tile_k in hl.tile(k, block_size=block_k):
                acc = torch.addmm(acc, a[d, tile_m, tile_k], b[tile_k, tile_n])
            partials.append(acc)
        out[tile_m, tile_n] = hl.reduce_scatter(
            partials, peers, [tile_m, tile_n], pads, RANK, op=OP
        )
    return out


def _scatter_layout(
    a: torch.Tensor, scatter_dim: int, world_size: int
) -> tuple[torch.Tensor, list[int]]:
    moved = a.movedim(scatter_dim, 0)
    if moved.shape[0] % world_size:
        raise ValueError(
            f"matmul_reduce_scatter needs dim {scatter_dim} ({moved.shape[0]}) divisible by the world size {world_size}"
        )
    rows = moved.numel() // moved.shape[-1]
    return moved.reshape(world_size, rows // world_size, moved.shape[-1]), list(moved.shape)


def matmul_reduce_scatter(
    a: torch.Tensor, b: torch.Tensor, *, scatter_dim: int = 0, op: str = "sum", group: Any = None
) -> torch.Tensor:
    """``reduce_scatter(a @ b)`` along ``scatter_dim`` of the product: every rank holds its own
    ``a`` (same shape) and the same-shaped ``b``; returns this rank's shard, reduced with ``op``
    (``"sum"``, ``"max"``, ``"min"``, ``"prod"``)."""
    if op not in ("sum", "max", "min", "prod"):
        raise ValueError(f"op must be sum, max, min or prod, got {op!r}")
    info = group_info(group)
    if a.ndim < 2 or b.ndim != 2 or a.shape[-1] != b.shape[0]:
        raise ValueError(
            f"matmul_reduce_scatter needs a [..., k] and b [k, n], got {list(a.shape)} and {list(b.shape)}"
        )
    scatter_dim = normalize_dim(scatter_dim, a.ndim, "scatter_dim")
    if scatter_dim == a.ndim - 1:
        if a.ndim != 2:
            raise ValueError("scattering the last dim of the product is supported for 2-D a only")
        # columns of a @ b are rows of b.T @ a.T
        return matmul_reduce_scatter(b.t(), a.t(), scatter_dim=0, op=op, group=group).t()
    a3, moved_shape = _scatter_layout(a, scatter_dim, info.world_size)
    _, m, _ = a3.shape
    n = b.shape[1]
    (ws,) = workspace(
        "matmul_reduce_scatter", (info.world_size, m, n), torch.float32, a.device, info
    )
    out = matmul_reduce_scatter_kernel(
        a3, b, ws.buffer, info.name_arg, info.rank_arg, info.world_arg, hl.constexpr(op)
    )
    after_launch(ws, what="helion_distributed.matmul_reduce_scatter")
    shard = out.reshape(moved_shape[0] // info.world_size, *moved_shape[1:-1], n)
    return shard.movedim(0, scatter_dim)


# ---------------------------------------------------------------------------------------------
# FP8 (scaled) variants: fp8 e4m3 inputs, float32 row/column scales, bf16 (or given) output


@helion.kernel(config=AG_CONFIG, static_shapes=True)
def fp8_all_gather_matmul_kernel(
    a_shard: torch.Tensor,
    scale_a: torch.Tensor,
    b: torch.Tensor,
    scale_b: torch.Tensor,
    buffer: torch.Tensor,
    scale_buffer: torch.Tensor,
    epoch: int,
    GROUP: hl.ProcessGroupName,
    RANK: hl.constexpr,
    WORLD_SIZE: hl.constexpr,
    out_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Like ``all_gather_matmul_kernel``; the row scales of A travel with their rows."""
    m, k = a_shard.shape
    n = b.size(1)
    peers = hl.peer_tensors(buffer, GROUP)
    peer_scales = hl.peer_tensors(scale_buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    block_m = hl.register_block_size(m)
    block_n = hl.register_block_size(n)
    block_k = hl.register_block_size(k)
    a_gathered = torch.empty([WORLD_SIZE, m, k], dtype=a_shard.dtype, device=a_shard.device)
    out = torch.empty([WORLD_SIZE, m, n], dtype=out_dtype, device=a_shard.device)
    for tile_m in hl.tile(m, block_size=block_m):
        peers[RANK][tile_m, :] = a_shard[tile_m, :]
        peer_scales[RANK][tile_m, :] = scale_a[tile_m, :]
        for r in hl.static_range(WORLD_SIZE):
            hl.signal(pads[r], [tile_m.id * WORLD_SIZE + RANK], epoch, sem="release", scope="sys")
    hl.barrier()
    for tile_m, tile_n in hl.tile([m, n], block_size=[block_m, block_n]):
        for step in hl.static_range(WORLD_SIZE):
            source = (RANK + step) % WORLD_SIZE
            hl.wait(
                pads[RANK], [tile_m.id * WORLD_SIZE + source], epoch, sem="acquire", scope="sys"
            )
            acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
            for tile_k in hl.tile(k, block_size=block_k):
                acc = hl.dot(peers[source][tile_m, tile_k], b[tile_k, tile_n], acc=acc)
            acc = acc * peer_scales[source][tile_m, :] * scale_b[:, tile_n]
            out[source, tile_m, tile_n] = acc.to(out_dtype)
            if tile_n.id == 0:
                a_gathered[source, tile_m, :] = peers[source][tile_m, :]
    return a_gathered, out


def _row_scale(scale: torch.Tensor, rows: int, what: str) -> torch.Tensor:
    scale = scale.to(torch.float32)
    if scale.numel() == 1:
        return scale.reshape(1, 1).expand(rows, 1).contiguous()
    if scale.numel() != rows:
        raise ValueError(
            f"{what} must have one scale per row ({rows}) or be a single scale, got shape {list(scale.shape)}"
        )
    return scale.reshape(rows, 1).contiguous()


def _col_scale(scale: torch.Tensor, cols: int, what: str) -> torch.Tensor:
    scale = scale.to(torch.float32)
    if scale.numel() == 1:
        return scale.reshape(1, 1).expand(1, cols).contiguous()
    if scale.numel() != cols:
        raise ValueError(
            f"{what} must have one scale per column ({cols}) or be a single scale, got shape {list(scale.shape)}"
        )
    return scale.reshape(1, cols).contiguous()


def fp8_all_gather_matmul(
    a_shard: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    *,
    gather_dim: int = 0,
    group: Any = None,
    out_dtype: torch.dtype = torch.bfloat16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """All-gather the FP8 shard ``a_shard`` [m, k] (with its row scales ``scale_a`` [m, 1] or a
    single scale) and compute ``(A * scale_a) @ (b * scale_b)`` in float32, output ``out_dtype``.

    Returns:
        ``(a_gathered (fp8), product)``.

    Raises:
        FP8Unsupported: this torch has no usable ``float8_e4m3fn``.
    """
    check_fp8(a_shard, b)
    info = group_info(group)
    if a_shard.ndim != 2 or b.ndim != 2 or a_shard.shape[1] != b.shape[0]:
        raise ValueError(
            f"fp8_all_gather_matmul needs a_shard [m, k] and b [k, n], got {list(a_shard.shape)}, {list(b.shape)}"
        )
    if normalize_dim(gather_dim, 2, "gather_dim") != 0:
        raise ValueError("fp8_all_gather_matmul gathers rows (gather_dim=0)")
    m, k = a_shard.shape
    n = b.shape[1]
    sa = _row_scale(scale_a, m, "scale_a")
    sb = _col_scale(scale_b, n, "scale_b")
    copies = workspace(
        "fp8_all_gather_matmul", (m, k), a_shard.dtype, a_shard.device, info, copies=2
    )
    scale_copies = workspace(
        "fp8_all_gather_matmul_scales", (m, 1), torch.float32, a_shard.device, info, copies=2
    )
    which = (copies[0].calls + copies[1].calls) % 2
    ws = copies[which]
    epoch = ws.next_epoch()
    check_slots(ws.handle, -(-m // 16) * info.world_size, "fp8_all_gather_matmul")
    gathered, product = fp8_all_gather_matmul_kernel(
        a_shard,
        sa,
        b,
        sb,
        ws.buffer,
        scale_copies[which].buffer,
        epoch,
        info.name_arg,
        info.rank_arg,
        info.world_arg,
        out_dtype,
    )
    after_launch(ws, what="helion_distributed.fp8_all_gather_matmul")
    return gathered.reshape(info.world_size * m, k), product.reshape(info.world_size * m, n)


@helion.kernel(config=RS_CONFIG, static_shapes=True)
def fp8_matmul_reduce_scatter_kernel(
    a: torch.Tensor,
    scale_a: torch.Tensor,
    b: torch.Tensor,
    scale_b: torch.Tensor,
    buffer: torch.Tensor,
    GROUP: hl.ProcessGroupName,
    RANK: hl.constexpr,
    WORLD_SIZE: hl.constexpr,
    out_dtype: torch.dtype,
) -> torch.Tensor:
    _, m, k = a.shape
    n = b.size(1)
    peers = hl.peer_tensors(buffer, GROUP)
    pads = hl.signal_pads(buffer, GROUP)
    out = torch.empty([m, n], dtype=out_dtype, device=a.device)
    block_k = hl.register_block_size(k)
    for tile_m, tile_n in hl.tile([m, n]):
        partials = []
        for d in hl.static_range(WORLD_SIZE):
            acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
            for tile_k in hl.tile(k, block_size=block_k):
                acc = hl.dot(a[d, tile_m, tile_k], b[tile_k, tile_n], acc=acc)
            partials.append(acc * scale_a[d, tile_m, :] * scale_b[:, tile_n])
        out[tile_m, tile_n] = hl.reduce_scatter(partials, peers, [tile_m, tile_n], pads, RANK).to(
            out_dtype
        )
    return out


def fp8_matmul_reduce_scatter(
    a: torch.Tensor,
    b: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    *,
    scatter_dim: int = 0,
    group: Any = None,
    out_dtype: torch.dtype = torch.bfloat16,
) -> torch.Tensor:
    """``reduce_scatter((a * scale_a) @ (b * scale_b))`` over rows: FP8 ``a`` [M, k] and ``b``
    [k, n], float32 ``scale_a`` [M, 1] (or one scale) and ``scale_b`` [1, n] (or one scale);
    returns this rank's [M / world_size, n] rows in ``out_dtype``, summed in float32."""
    check_fp8(a, b)
    info = group_info(group)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(
            f"fp8_matmul_reduce_scatter needs a [M, k] and b [k, n], got {list(a.shape)}, {list(b.shape)}"
        )
    if normalize_dim(scatter_dim, 2, "scatter_dim") != 0:
        raise ValueError("fp8_matmul_reduce_scatter scatters rows (scatter_dim=0)")
    rows, k = a.shape
    n = b.shape[1]
    if rows % info.world_size:
        raise ValueError(
            f"fp8_matmul_reduce_scatter needs M ({rows}) divisible by the world size {info.world_size}"
        )
    m = rows // info.world_size
    sa = _row_scale(scale_a, rows, "scale_a").reshape(info.world_size, m, 1)
    sb = _col_scale(scale_b, n, "scale_b")
    (ws,) = workspace(
        "fp8_matmul_reduce_scatter", (info.world_size, m, n), torch.float32, a.device, info
    )
    out = fp8_matmul_reduce_scatter_kernel(
        a.reshape(info.world_size, m, k),
        sa,
        b,
        sb,
        ws.buffer,
        info.name_arg,
        info.rank_arg,
        info.world_arg,
        out_dtype,
    )
    after_launch(ws, what="helion_distributed.fp8_matmul_reduce_scatter")
    return out


# ---------------------------------------------------------------------------------------------
# 2-D parallel matmul


@helion.kernel(config=TWO_D_CONFIG, static_shapes=True)
def two_dim_parallel_matmul_kernel(
    a_local: torch.Tensor,
    b_local: torch.Tensor,
    buffer: torch.Tensor,
    TP_GROUP: hl.ProcessGroupName,
    TP_RANK: hl.constexpr,
) -> torch.Tensor:
    """``a_local`` [m, k_tp] @ ``b_local`` [k_tp, n], summed over the tensor-parallel group."""
    m, k = a_local.shape
    n = b_local.size(1)
    peers = hl.peer_tensors(buffer, TP_GROUP)
    pads = hl.signal_pads(buffer, TP_GROUP)
    out = torch.empty(
        [m, n], dtype=torch.promote_types(a_local.dtype, b_local.dtype), device=a_local.device
    )
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, a_local[tile_m, tile_k], b_local[tile_k, tile_n])
        out[tile_m, tile_n] = hl.all_reduce(acc, peers, [tile_m, tile_n], pads, TP_RANK)
    return out


def two_dim_parallel_matmul(
    a_local: torch.Tensor, b_local: torch.Tensor, *, tp_group: Any, sp_group: Any = None
) -> torch.Tensor:
    """The rows of ``A @ B`` this rank's sequence-parallel shard owns, on a 2-D mesh.

    Rank (sp, tp) holds ``a_local`` = A[rows of sp, K columns of tp] and ``b_local`` = B[K rows
    of tp, :]; the result is this rank's [rows of sp, N] block of ``A @ B``: the partial product
    over the local K shard, all-reduced in ``tp_group`` inside the kernel. ``sp_group`` is
    accepted for symmetry and is not used: sequence-parallel ranks never communicate.
    See ``helion_distributed.mesh_2d`` for building the groups.
    """
    del sp_group
    info = group_info(tp_group)
    if a_local.ndim != 2 or b_local.ndim != 2 or a_local.shape[1] != b_local.shape[0]:
        raise ValueError(
            f"two_dim_parallel_matmul needs a_local [m, k] and b_local [k, n], got {list(a_local.shape)}, {list(b_local.shape)}"
        )
    m = a_local.shape[0]
    n = b_local.shape[1]
    (ws,) = workspace("two_dim_parallel_matmul", (m, n), torch.float32, a_local.device, info)
    out = two_dim_parallel_matmul_kernel(a_local, b_local, ws.buffer, info.name_arg, info.rank_arg)
    after_launch(ws, what="helion_distributed.two_dim_parallel_matmul")
    return out


def mesh_2d(sp_size: int, tp_size: int) -> tuple[Any, Any]:
    """Split the default group into a (sp_size x tp_size) mesh; rank = sp * tp_size + tp.

    Returns:
        ``(sp_group, tp_group)`` of this rank: the ranks that share its tp index, and those that
        share its sp index. Collective: every rank must call it.
    """
    import torch.distributed as dist

    world = dist.get_world_size()
    if sp_size * tp_size != world:
        raise ValueError(
            f"a {sp_size} x {tp_size} mesh needs {sp_size * tp_size} ranks, the world has {world}"
        )
    rank = dist.get_rank()
    sp_index, tp_index = divmod(rank, tp_size)
    mine_tp = mine_sp = None
    for s in range(sp_size):  # tensor-parallel groups: one per sp row
        group = dist.new_group([s * tp_size + t for t in range(tp_size)])
        if s == sp_index:
            mine_tp = group
    for t in range(tp_size):  # sequence-parallel groups: one per tp column
        group = dist.new_group([s * tp_size + t for s in range(sp_size)])
        if t == tp_index:
            mine_sp = group
    return mine_sp, mine_tp
