"""The tile_origins analysis (`helion.passes.tile_origins`) on kernels where one
`hl.register_block_size` sizes several tiles in scope: the tile each dimension of a value, and of
a memory access, came from; UNKNOWN where nothing traces it, CONFLICT where two tiles meet.
Backend independent: the IR comes from binding on the ref backend."""

from __future__ import annotations

import torch

import helion
import helion.language as hl
from helion.ir.core import KernelIR
from helion.ir.core import Node
from helion.language import _ops as ops
from helion.passes.tile_origins import CONFLICT
from helion.passes.tile_origins import UNKNOWN
from helion.passes.tile_origins import TileOrigins
from helion.passes.tile_origins import join
from helion.passes.tile_origins import join_rows
from helion.testing.shared_block_size import shared_matmul

U = UNKNOWN


def _ir(fn, *args) -> KernelIR:
    return helion.kernel(fn, backend="ref", autotune_effort="none").bind(args).ir


def _tiles(ir: KernelIR) -> list[int]:
    """The tile value ids of every loop, in program order."""
    ids = []
    for loop in ir.loops:
        ids += [tile.id for tile in loop.node.regions[0].args[: len(loop.block_ids)]]
    return ids


def _nodes(ir: KernelIR, op) -> list[Node]:
    return [node for node in ir.walk() if node.op is op]


def _access(ir: KernelIR, op, tensor: str) -> Node:
    (node,) = [n for n in _nodes(ir, op) if n.attrs["tensor"].name == tensor]
    return node


# -- kernels ----------------------------------------------------------------------------------


def nested(x: torch.Tensor, bias: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    bs = hl.register_block_size(max(m, n))
    out = torch.empty_like(x)
    for ti in hl.tile(m, block_size=bs):
        b = bias[ti] + 1.0
        rows = w[ti, :]
        for tj in hl.tile(n, block_size=bs):
            v = x[ti, tj]
            index = ti.index[:, None] * 1000 + tj.index[None, :]
            ones = hl.zeros([ti, tj], dtype=torch.float32) + 1.0
            total = v.sum(0) + v.amax(1)[:, None] + rows.sum(1)[:, None] + b[:, None]
            out[ti, tj] = total + index.to(x.dtype) + ones
    return out


def one_loop_two_dims(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    bs = hl.register_block_size(max(m, n))
    out = torch.empty_like(x)
    for ti, tj in hl.tile([m, n], block_size=[bs, bs]):
        v = x[ti, tj]
        out[ti, tj] = v + v.T
    return out


def nested_topk(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    m, n, _ = x.shape
    bs = hl.register_block_size(max(m, n))
    out = torch.empty([m, n, 2], dtype=x.dtype)
    positions = torch.empty([m, n, 2], dtype=torch.int64)
    for ti in hl.tile(m, block_size=bs):
        for tj in hl.tile(n, block_size=bs):
            values, indices = x[ti, tj, :].topk(2, dim=2)
            out[ti, tj, :] = values
            positions[ti, tj, :] = indices
    return out, positions


# -- tests ------------------------------------------------------------------------------------


def test_join() -> None:
    assert join(U, 3) == 3 and join(3, U) == 3 and join(3, 3) == 3
    assert join(3, 4) == CONFLICT and join(CONFLICT, U) == CONFLICT
    assert join_rows((U, 3, 3), (4, U, 5)) == (4, 3, CONFLICT)


def test_outer_and_inner_loop_share_a_block_size() -> None:
    ir = _ir(nested, torch.randn(37, 50), torch.randn(37), torch.randn(37, 24))
    ti, tj = _tiles(ir)
    origins = TileOrigins(ir)
    load_x = _access(ir, ops.load, "x")
    assert origins.of(load_x.output) == (ti, tj)
    assert origins.of_access(load_x) == (ti, tj)
    # defined in the outer loop, where its one tile of the block size is in scope
    load_bias = _access(ir, ops.load, "bias")
    assert origins.of(load_bias.output) == (ti,)
    # a full slice (a reduction dimension) has no tile
    assert origins.of(_access(ir, ops.load, "w").output) == (ti, U)
    assert origins.of_access(_access(ir, ops.store, "out")) == (ti, tj)
    first, second = _nodes(ir, ops.TILE_ATTRS["index"])
    assert origins.of(first.output) == (ti,) and origins.of(second.output) == (tj,)
    # `hl.zeros([ti, tj])` names the block size twice with both tiles in scope: untraceable
    (zeros,) = _nodes(ir, ops.full)
    assert origins.of(zeros.output) == (U, U)
    # reductions keep the dimensions they do not reduce
    (total,) = [n for n in _nodes(ir, ops.REDUCTIONS["sum"]) if n.inputs[0] is load_x.output]
    assert origins.of(total.output) == (tj,)
    (high,) = _nodes(ir, ops.REDUCTIONS["amax"])
    assert origins.of(high.output) == (ti,)
    # a value of the outer tile, given a new axis inside the inner loop, keeps its tile
    (b,) = [n for n in _nodes(ir, ops.BINARY["add"]) if n.inputs[0] is load_bias.output]
    (b_column,) = [n for n in _nodes(ir, ops.view_subscript) if n.inputs[0] is b.output]
    assert origins.of(b_column.output) == (ti, U)
    assert origins.of(None) is None and origins.of_access(zeros) is None


def test_two_dimensions_of_one_loop_share_a_block_size() -> None:
    ir = _ir(one_loop_two_dims, torch.randn(37, 37))
    ti, tj = _tiles(ir)
    origins = TileOrigins(ir)
    (transposed,) = _nodes(ir, ops.view_permute)
    assert origins.of(transposed.output) == (tj, ti)
    # `v + v.T` adds lanes of tile ti to lanes of tile tj: neither tile's mask is right
    (added,) = _nodes(ir, ops.BINARY["add"])
    assert origins.of(added.output) == (CONFLICT, CONFLICT)
    assert origins.of_access(_access(ir, ops.store, "out")) == (ti, tj)


def test_loop_carried_accumulator_of_a_dot() -> None:
    ir = _ir(shared_matmul, torch.randn(37, 45), torch.randn(45, 50))
    ti, tj, tk = _tiles(ir)
    origins = TileOrigins(ir)
    assert origins.of(_access(ir, ops.load, "x").output) == (ti, tk)
    assert origins.of(_access(ir, ops.load, "y").output) == (tk, tj)
    (zeros,) = _nodes(ir, ops.full)
    assert origins.of(zeros.output) == (U, U)
    (dot,) = _nodes(ir, ops.dot)
    assert origins.of(dot.output) == (ti, tj)
    # the untraced initial value takes the tiles of what the loop body yields
    (loop,) = _nodes(ir, ops.tile_loop)
    assert origins.of(loop.regions[0].args[1]) == (ti, tj)
    assert origins.of(loop.output) == (ti, tj)


def test_shape_op() -> None:
    ir = _ir(nested_topk, torch.randn(9, 13, 8))
    ti, tj = _tiles(ir)
    origins = TileOrigins(ir)
    (topk,) = _nodes(ir, ops.topk)
    assert [origins.of(out) for out in topk.outputs] == [(ti, tj, U), (ti, tj, U)]
