"""Facts about one Kernel IR that do not depend on the config, computed once per IR.

The code generator runs once per config, so everything here (def-use chains, which reduction
dimensions can be generated as looped reductions, which loops can be flattened, the position of
each memory op in the per-op config lists) is derived once and cached on the analysis object.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import weakref
from typing import Any

import sympy

from helion.ir.core import Block
from helion.ir.core import BlockSizeInfo
from helion.ir.core import KernelIR
from helion.ir.core import LoopInfo
from helion.ir.core import Node
from helion.ir.core import TensorType
from helion.ir.core import TileType
from helion.ir.core import Value
from helion.language import _ops as ops
from helion.passes.tile_origins import TileOrigins


@dataclasses.dataclass
class Use:
    node: Node | None  # None: the value is yielded by `block`
    block: Block


@dataclasses.dataclass
class MemorySlot:
    """Where a memory op's entries sit in the per-op config lists."""

    indexing: int | None = None
    eviction: int | None = None


class KernelAnalysis:
    """Config-independent facts about ``ir``; build with :func:`analyze`."""

    def __init__(self, ir: KernelIR) -> None:
        self.ir = ir
        self.block_of_symbol: dict[sympy.Symbol, BlockSizeInfo] = {
            info.symbol: info for info in ir.block_sizes
        }
        self.defining_block: dict[int, Block] = {}
        self.node_block: dict[int, Block] = {}
        self.uses: dict[int, list[Use]] = {}
        self.loop_of_node: dict[int, LoopInfo] = {}
        self._index_block(ir.body)
        for loop in ir.loops:
            if loop.node is not None:
                self.loop_of_node[id(loop.node)] = loop
        self.inner_loop_index = {loop.loop_id: i for i, loop in enumerate(ir.inner_loops())}
        self.multi_dim_loop_index: dict[int, int] = {}
        for loop in ir.loops:
            if len(loop.block_ids) > 1:
                self.multi_dim_loop_index[loop.loop_id] = len(self.multi_dim_loop_index)
        self.top_level_index = {loop.loop_id: i for i, loop in enumerate(ir.top_level_loops())}
        self.flatten_index: dict[int, int] = {}
        self.l2_index: dict[int, int] = {}
        for loop in ir.top_level_loops():
            node = loop.node
            starts_at_zero = node is not None and all(b == 0 for b in node.attrs["begins"])
            if len(loop.block_ids) > 1 and starts_at_zero and not node.attrs["is_grid"]:
                self.flatten_index[loop.loop_id] = len(self.flatten_index)
            if len(loop.block_ids) > 1:
                self.l2_index[loop.loop_id] = len(self.l2_index)
        self.memory_slots: dict[int, MemorySlot] = {}
        indexing = eviction = 0
        for mem in ir.memory_ops():
            slot = MemorySlot()
            if mem.kind in ("load", "store"):
                slot.indexing = indexing
                indexing += 1
            if mem.kind == "load":
                slot.eviction = eviction
                eviction += 1
            self.memory_slots[id(mem.node)] = slot
        # per top-level node of the device body (a device loop, in practice): its position and
        # the kernel tensors written anywhere inside it
        self.device_loop_of: dict[int, int] = {}
        self.written_in_loop: list[set[int]] = []
        for position, top in enumerate(ir.body.nodes):
            written: set[int] = set()
            for node in (top, *(inner for region in top.regions for inner in region.walk())):
                self.device_loop_of[id(node)] = position
                if node.op.memory in ("store", "atomic"):
                    written.add(node.attrs["tensor"].index)
            self.written_in_loop.append(written)
        self.rdim_infeasible: dict[int, str] = {}
        for info in ir.reduction_blocks():
            reason = self._looped_reduction_problem(info)
            if reason is not None:
                self.rdim_infeasible[info.block_id] = reason
        self.flatten_problems: dict[int, str] = {}
        for loop in ir.top_level_loops():
            if loop.loop_id in self.flatten_index:
                reason = self._flatten_problem(loop)
                if reason is not None:
                    self.flatten_problems[loop.loop_id] = reason

    @functools.cached_property
    def tile_origins(self) -> TileOrigins | None:
        """The tile each dimension of each value came from, where one block size sizes more than
        one tile (``hl.register_block_size`` shared by loops); None where each block size has
        one tile, which then bounds all of its dimensions."""
        tiles = collections.Counter(b for loop in self.ir.loops for b in loop.block_ids)
        if all(count == 1 for count in tiles.values()):
            return None
        return TileOrigins(self.ir)

    # -- def/use --------------------------------------------------------------------------------

    def _index_block(self, block: Block) -> None:
        for arg in block.args:
            self.defining_block[arg.id] = block
        for node in block.nodes:
            self.node_block[id(node)] = block
            for operand in node.inputs:
                if isinstance(operand, Value):
                    self.uses.setdefault(operand.id, []).append(Use(node, block))
            for out in node.outputs:
                self.defining_block[out.id] = block
            for region in node.regions:
                self._index_block(region)
        for operand in block.yields:
            if isinstance(operand, Value):
                self.uses.setdefault(operand.id, []).append(Use(None, block))

    def users(self, value: Value) -> list[Use]:
        return self.uses.get(value.id, [])

    # -- dimensions -------------------------------------------------------------------------------

    def symbols_in(self, dim: Any) -> set[sympy.Symbol]:
        if isinstance(dim, sympy.Expr) and not dim.is_Integer:
            return set(dim.free_symbols)  # type: ignore[arg-type]
        return set()

    def rdim_symbols(self) -> set[sympy.Symbol]:
        return {info.symbol for info in self.ir.reduction_blocks()}

    # -- looped reductions --------------------------------------------------------------------------

    def has_rdim(self, value: Any, symbol: sympy.Symbol) -> bool:
        if not isinstance(value, Value) or not isinstance(value.type, TensorType):
            return False
        return any(symbol in self.symbols_in(dim) for dim in value.type.shape)

    def is_rdim_node(self, node: Node, symbol: sympy.Symbol) -> bool:
        """Does ``node`` compute per element of reduction dim ``symbol`` (its own loop body
        when that dim is looped)?"""
        if any(self.has_rdim(out, symbol) for out in node.outputs):
            return True
        if node.op.memory in ("store", "atomic"):
            return self.has_rdim(node.inputs[node.attrs["value"]], symbol)
        return False

    def is_rdim_sink(self, node: Node, value: Value, symbol: sympy.Symbol) -> bool:
        """Does ``node`` consume the per-element ``value`` and leave ``symbol`` behind?"""
        if node.op.reduction:
            position = _position(value.type.shape, symbol)
            # (a custom reduction reduces every one of its inputs)
            return (
                any(operand is value for operand in node.inputs) and node.attrs["dim"] == position
            )
        if node.op is ops.dot:
            a, b = node.inputs[0], node.inputs[1]
            return (
                value in (a, b)
                and a.type.shape[-1] == symbol
                and not self.has_rdim(node.inputs[2], symbol)
            )
        return False

    def _looped_reduction_problem(self, info: BlockSizeInfo) -> str | None:
        symbol = info.symbol
        others = self.rdim_symbols() - {symbol}
        # (device loop, tensor) of each load over the dimension
        reads: set[tuple[int, int]] = set()
        for node in self.ir.walk():
            block = self.node_block[id(node)]
            for out in node.outputs:
                if not isinstance(out.type, TensorType):
                    continue
                if info.size_hint > 1 and any(d == info.size_hint for d in out.type.shape):
                    # core treats a constant of the same size as the same dimension, but a chunk
                    # of the reduction dimension would no longer line up with it
                    return "a constant dimension of the same size stands for it"
                hits = [dim for dim in out.type.shape if symbol in self.symbols_in(dim)]
                if len(hits) > 1:
                    return "the dimension appears twice in one value"
                if hits and hits[0] != symbol:
                    return "the dimension is merged with another by a reshape"
                if hits and any(o in self.symbols_in(d) for d in out.type.shape for o in others):
                    return "a value spans two reduction dimensions"
            if not self.is_rdim_node(node, symbol):
                continue
            if node.op.structural:
                return f"a {node.op.name} carries a value over the dimension"
            if node.op is ops.device_print:
                return "device_print of a value over the dimension"
            if node.op.opaque:
                return f"{node.op.name} (user code) computes over the dimension"
            if node.op.scan and _position(node.inputs[0].type.shape, symbol) == node.attrs["dim"]:
                return "a scan along the dimension"
            if (
                node.op.whole_dim
                and _position(node.inputs[0].type.shape, symbol) == node.attrs["dim"]
            ):
                return f"{node.op.name} along the dimension"
            if node.op.memory == "load":
                reads.add((self.device_loop_of[id(node)], node.attrs["tensor"].index))
            if node.op.memory == "atomic" and any(self.users(out) for out in node.outputs):
                return "the result of an atomic over the dimension is used"
            for out in node.outputs:
                for use in self.users(out):
                    if use.node is None or use.block is not block:
                        return "a value over the dimension crosses a loop or branch boundary"
                    if self.is_rdim_node(use.node, symbol):
                        continue
                    if not self.is_rdim_sink(use.node, out, symbol):
                        return f"{use.node.op.name} removes the dimension without reducing it"
        # A looped reduction loads each chunk where the reduction consuming it stands (once per
        # loop over the chunks that needs it), not where the load was written: a write to the
        # same tensor in the same device loop could land in between. Writes in other device
        # loops cannot: a program runs one loop's tile bodies apart from another's, and across
        # programs only hl.barrier orders the loops (without one the kernel races whatever the
        # config). This is what lets a split-K buffer filled by one loop be reduced by the next.
        if any(tensor in self.written_in_loop[loop] for loop, tensor in reads):
            return "a tensor read over the dimension is also written in the same device loop"
        return None

    # -- flattened loops ------------------------------------------------------------------------------

    def _flatten_problem(self, loop: LoopInfo) -> str | None:
        node = loop.node
        assert node is not None
        loop_shape = tuple(self.ir.block(b).symbol for b in loop.block_ids)
        body = node.regions[0]
        if len(body.args) != len(loop.block_ids):
            return "the loop carries values"

        def shape_ok(value: Any) -> bool:
            if not isinstance(value, Value) or isinstance(value.type, TileType):
                return True
            return tuple(value.type.shape) in ((), loop_shape)

        for inner in body.walk():
            op = inner.op
            if op.structural:
                return "the loop body has nested loops or branches"
            if not (op.elementwise or op in (ops.constant, ops.full, ops.view_expand) or op.memory):
                return f"{op.name} is not a pointwise op"
            if not all(shape_ok(v) for v in (*inner.inputs, *inner.outputs)):
                return "a value does not have the loop's shape"
            if op is ops.full and tuple(inner.attrs["shape"]) not in ((), loop_shape):
                return "hl.full of another shape"
            if op is ops.view_expand and shape_of(inner.inputs[0]) != ():
                return "an expand of a non-scalar"
            if op.memory:
                tiles = [item[2] for item in inner.attrs["items"] if item[0] == "tile"]
                if any(item[0] not in ("tile", "const", "scalar") for item in inner.attrs["items"]):
                    return "a memory op with slices, new axes or index tensors"
                if tiles != list(loop.block_ids):
                    return "a memory op that does not index by the loop's tiles in order"
            for operand in inner.inputs:
                if (
                    isinstance(operand, Value)
                    and isinstance(operand.type, TileType)
                    and not op.memory
                ):
                    return "a tile is used as a value"
        return None


def shape_of(value: Any) -> tuple:
    if isinstance(value, Value) and isinstance(value.type, TensorType):
        return tuple(value.type.shape)
    return ()


def _position(shape: tuple, symbol: sympy.Symbol) -> int | None:
    for position, dim in enumerate(shape):
        if dim == symbol:
            return position
    return None


_CACHE: weakref.WeakKeyDictionary[KernelIR, KernelAnalysis] = weakref.WeakKeyDictionary()


def analyze(ir: KernelIR) -> KernelAnalysis:
    """The analysis of ``ir``, computed at the first call and cached while ``ir`` lives."""
    analysis = _CACHE.get(ir)
    if analysis is None:
        analysis = KernelAnalysis(ir)
        _CACHE[ir] = analysis
    return analysis
