"""Small kernels exercising one construct each (control flow, indexing, atomics, dtypes, ...)."""

from __future__ import annotations

import torch

import helion
import helion.language as hl


def scaled_add(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        out[tile] = alpha * x[tile] + y[tile]
    return out


def branchy(x: torch.Tensor, flag: int) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        value = x[tile]
        if tile.begin == 0:
            value = value * 10
        else:
            value = value + 1
        if flag > 0:
            value = -value
        out[tile] = value
    return out


def grid_rows(x: torch.Tensor) -> torch.Tensor:
    rows, _ = x.shape
    out = torch.empty_like(x)
    for row in hl.grid(rows):
        out[row, :] = x[row, :] * 2
    return out


def grid_then_tile(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    out = torch.empty_like(x)
    for row in hl.grid(rows):
        for tile in hl.tile(cols):
            out[row, tile] = x[row, tile] + row
    return out


def split_k(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    _, n = y.shape
    split = hl.register_tunable("split_k", helion.autotuner.PowerOfTwoFragment(1, 8, 2))
    k_block = helion.cdiv(k, split)
    out = torch.zeros([m, n], dtype=torch.float32)
    for tile_m, tile_n, tile_k in hl.tile([m, n, k], block_size=[None, None, k_block]):
        acc = hl.zeros([tile_m, tile_n])
        for inner_k in hl.tile(tile_k.begin, tile_k.end):
            acc = torch.addmm(acc, x[tile_m, inner_k], y[inner_k, tile_n])
        hl.atomic_add(out, [tile_m, tile_n], acc)
    return out


def in_place_double(x: torch.Tensor) -> torch.Tensor:
    for tile in hl.tile(x.size()):
        x[tile] = x[tile] * 2
    return x


def two_loops(x: torch.Tensor) -> torch.Tensor:
    tmp = torch.empty_like(x)
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        tmp[tile] = x[tile] + 1
    hl.barrier()  # the second loop reads what the first writes (LoopDependencyError without it)
    for tile in hl.tile(x.size(0)):
        out[tile] = tmp[tile] * 3
    return out


def row_argmax(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty([m], dtype=torch.int64)
    for tile in hl.tile(m):
        out[tile] = torch.argmax(x[tile, :], dim=-1)
    return out


def row_cumsum(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty_like(x)
    for tile in hl.tile(m):
        out[tile, :] = torch.cumsum(x[tile, :], dim=1)
    return out


def column_max(x: torch.Tensor) -> torch.Tensor:
    """A reduction over a tiled dimension carried through an inner loop (masked lanes = -inf)."""
    m, n = x.shape
    out = torch.empty([n], dtype=x.dtype)
    for tile_n in hl.tile(n):
        best = hl.full([tile_n], float("-inf"), dtype=torch.float32)
        for tile_m in hl.tile(m):
            best = torch.maximum(best, x[tile_m, tile_n].amax(dim=0))
        out[tile_n] = best
    return out


def tile_attributes(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([x.size(0), 4], dtype=torch.int32)
    for tile in hl.tile(x.size(0)):
        ones = hl.full([tile], 1, dtype=torch.int32)
        out[tile, 0] = ones * tile.begin
        out[tile, 1] = ones * tile.end
        out[tile, 2] = ones * tile.id
        out[tile, 3] = ones * tile.block_size
    return out


def matmul_bf16(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    _, n = y.shape
    out = torch.empty([m, n], dtype=torch.bfloat16)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = hl.dot(x[tile_m, tile_k], y[tile_k, tile_n], acc=acc)
        out[tile_m, tile_n] = acc.to(torch.bfloat16)
    return out


def keepdim_reshape(x: torch.Tensor) -> torch.Tensor:
    m, _ = x.shape
    out = torch.empty([m], dtype=x.dtype)
    for tile in hl.tile(m):
        total = x[tile, :].sum(-1, keepdim=True)
        out[tile] = total.reshape([tile])
    return out


def masked_where(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size()):
        value = x[tile]
        out[tile] = torch.where(value > 0, value, 0.0)
    return out


def scatter_rows(idx: torch.Tensor, src: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    for tile_i, tile_d in hl.tile([idx.size(0), src.size(1)]):
        out[idx[tile_i], tile_d] = src[tile_i, tile_d]
    return out


def int_ops(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.size(0)):
        value = x[tile]
        out[tile] = (value // 3) + (value % 5) - (value & 7)
    return out


def atomic_max_bins(x: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    out = torch.full([8], -1000.0)
    for tile in hl.tile(x.size(0)):
        hl.atomic_max(out, [bins[tile]], x[tile])
    return out


def row_mean_permuted(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([n, m], dtype=x.dtype)
    for tile_m, tile_n in hl.tile([m, n]):
        out[tile_n, tile_m] = x[tile_m, tile_n].permute(1, 0)
    return out


def xor_bins(x: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    out = torch.zeros([4], dtype=torch.int32)
    for tile in hl.tile(x.size(0)):
        hl.atomic_xor(out, [bins[tile]], x[tile])
    return out


def claim_slots(slots: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Each id claims slot `id % 8` if it is still free (-1): compare-and-swap."""
    for tile in hl.tile(ids.size(0)):
        hl.atomic_cas(slots, [ids[tile] % 8], -1, ids[tile])
    return slots


def flat_sum(x: torch.Tensor) -> torch.Tensor:
    """Reshapes a 2-D tile to 1-D: the padded layout cannot do that."""
    m, n = x.shape
    out = torch.zeros([1], dtype=x.dtype)
    for tile_m, tile_n in hl.tile([m, n]):
        hl.atomic_add(out, [0], x[tile_m, tile_n].reshape(-1).sum(0))
    return out


def scalar_atomic_sum(x: torch.Tensor) -> torch.Tensor:
    """One atomic per tile, at one index: the form Pallas' GPU lowering compiles."""
    out = torch.zeros([1], dtype=x.dtype)
    for tile in hl.tile(x.size(0)):
        hl.atomic_add(out, [0], x[tile].sum(0))
    return out


def runtime_grid(x: torch.Tensor, n: int) -> torch.Tensor:
    """The top-level loop's bound is a runtime scalar: a Pallas grid must be static."""
    out = torch.zeros_like(x)
    for tile in hl.tile(n):
        out[tile] = x[tile] + 1
    return out


def rows_plus_integer_dim(x: torch.Tensor) -> torch.Tensor:
    """`hl.zeros([tile, n])` (an integer dim) meets `x[tile, :]` (a full slice of extent n)."""
    m, n = x.shape
    out = torch.empty_like(x)
    for tile in hl.tile(m):
        acc = hl.zeros([tile, n], dtype=torch.float32)
        acc = acc + x[tile, :] * 2
        out[tile, :] = acc + acc.sum(-1, keepdim=True)
    return out
