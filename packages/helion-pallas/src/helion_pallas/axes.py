"""Which tile each dimension of each device value belongs to.

An IR shape names block size symbols, not tiles. When one `hl.register_block_size` is shared by
two tiles in scope at once (an outer and an inner `hl.tile`, or two dimensions of one
`hl.tile([m, n], block_size=[bs, bs])`), a dimension `_BLOCK_SIZE_0` does not say whose bounds
mask its lanes. This pass follows every dimension back to the tile it came from: the tile
indexing a load, `tile.index`, then through elementwise ops, views, reductions, scans, dots, `if`
results and loop-carried values. A dimension nothing traces (`hl.zeros([bs, bs])` with both tiles
in scope) stays unknown; the code generator rejects it where a mask is needed.

Origins are tile *values* (the loop's region arguments), so the result does not depend on the
config; the code generator maps them to the tile states it emits.
"""

from __future__ import annotations

from typing import Any
from typing import Sequence

import sympy

import helion.language._ops as ops
from helion.ir.core import Block
from helion.ir.core import KernelIR
from helion.ir.core import Node
from helion.ir.core import TensorType
from helion.ir.core import Value

# per dimension: a tile value id, UNKNOWN (nothing traced yet) or CONFLICT (two tiles met);
# UNKNOWN < tile < CONFLICT, and loop-carried values only ever move up, so loops reach a fixpoint
UNKNOWN = None
CONFLICT = -1

Origins = tuple  # one entry per dimension


def join(a: Any, b: Any) -> Any:
    if a is UNKNOWN:
        return b
    if b is UNKNOWN or a == b:
        return a
    return CONFLICT


def join_all(*rows: Origins) -> Origins:
    """Per-dimension join of origin rows of one rank."""
    result: list[Any] = [UNKNOWN] * len(rows[0])
    for row in rows:
        result = [join(r, o) for r, o in zip(result, row, strict=True)]
    return tuple(result)


class AxisOrigins:
    """The origins of every device value of a kernel, and of the shape of every memory access."""

    def __init__(self, ir: KernelIR) -> None:
        self.symbols = {info.symbol: info for info in ir.block_sizes}
        self.values: dict[int, Origins] = {}
        self.accesses: dict[int, Origins] = {}  # id(node) -> origins of the access shape
        self.tile_blocks: dict[int, int] = {}  # tile value id -> block id
        self.scope: list[int] = []  # tile value ids of the enclosing loops
        self._block(ir.body)

    # -- queries -------------------------------------------------------------------------------

    def of(self, value: Any) -> Origins | None:
        """Origins of a value (None for operands that are not device tensors)."""
        if isinstance(value, Value):
            return self.values.get(value.id)
        return None

    def of_access(self, node: Node) -> Origins | None:
        return self.accesses.get(id(node))

    # -- the walk ------------------------------------------------------------------------------

    def _block(self, block: Block) -> None:
        for node in block.nodes:
            self._node(node)

    def _enter_tiles(self, node: Node, args: Sequence[Value]) -> None:
        for block_id, arg in zip(node.attrs["block_ids"], args, strict=True):
            self.tile_blocks[arg.id] = block_id
            self.scope.append(arg.id)

    def _node(self, node: Node) -> None:
        if node.op is ops.grid_loop:
            body = node.regions[0]
            n_tiles = len(node.attrs["block_ids"])
            self._enter_tiles(node, body.args[:n_tiles])
            self._block(body)
            del self.scope[-n_tiles:]
            return
        if node.op is ops.tile_loop:
            self._tile_loop(node)
            return
        if node.op is ops.if_:
            for region in node.regions:
                self._block(region)
            for position, out in enumerate(node.outputs):
                rows = [self._row(region.yields[position], out) for region in node.regions]
                self._set(out, join_all(*rows))
            return
        for region in node.regions:  # combiners of custom reductions: 0-D, nothing to trace
            self._block(region)
        if node.op.memory and "items" in node.attrs:
            # a load's or atomic's result, or the value a store writes, has the access's shape
            value = node.outputs[0] if node.outputs else node.inputs[node.attrs["value"]]
            access = self._checked(value.shape, self._access(node))
            self.accesses[id(node)] = access
            if node.outputs:
                self.values[node.outputs[0].id] = access
            return
        for position, out in enumerate(node.outputs):
            if isinstance(out.type, TensorType):
                self._set(out, self._derive(node, position, out))

    def _tile_loop(self, node: Node) -> None:
        body = node.regions[0]
        n_tiles = len(node.attrs["block_ids"])
        carried = body.args[n_tiles:]
        for arg, init in zip(carried, node.inputs, strict=True):
            self.values[arg.id] = self._row(init, arg)
        changed = True
        while changed:  # each round raises some carried dimension, or is the last
            self._enter_tiles(node, body.args[:n_tiles])
            self._block(body)
            del self.scope[-n_tiles:]
            changed = False
            for arg, value in zip(carried, body.yields, strict=True):
                if not isinstance(arg.type, TensorType):
                    continue
                row = join_all(self.values[arg.id], self._row(value, arg))
                if row != self.values[arg.id]:
                    self.values[arg.id] = row
                    changed = True
        for arg, out in zip(carried, node.outputs, strict=True):
            if isinstance(out.type, TensorType):
                self._set(out, self.values[arg.id])

    # -- rules ---------------------------------------------------------------------------------

    def _row(self, operand: Any, like: Value) -> Origins:
        """Origins of `operand` broadcast to the shape of `like`."""
        if not isinstance(like.type, TensorType):
            return ()
        rank = len(like.shape)
        row = self.of(operand)
        if row is None or len(row) > rank:
            return (UNKNOWN,) * rank
        return self._aligned(operand.shape, row, like.shape)

    def _aligned(self, own_shape: Sequence[Any], row: Origins, shape: Sequence[Any]) -> Origins:
        """`row` (of a value of `own_shape`) right-aligned to `shape`; dimensions it broadcasts
        along are UNKNOWN."""
        lead = len(shape) - len(row)
        result: list[Any] = [UNKNOWN] * lead
        for dim, origin, own in zip(shape[lead:], row, own_shape, strict=True):
            result.append(origin if sympy.sympify(own) == sympy.sympify(dim) else UNKNOWN)
        return tuple(result)

    def _broadcast(self, operands: Sequence[Any], shape: Sequence[Any]) -> Origins:
        rows = [(UNKNOWN,) * len(shape)]
        for operand in operands:
            row = self.of(operand)
            if row is not None and len(row) <= len(shape):
                rows.append(self._aligned(operand.shape, row, shape))
        return join_all(*rows)

    def _access(self, node: Node) -> Origins:
        """Origins of the shape a load / store / atomic covers, from its index items."""
        items = node.attrs["items"]
        index_values = [node.inputs[item[1]] for item in items if item[0] == "tensor"]
        index_shape = ops.broadcast_shapes(*[v.shape for v in index_values]) if index_values else ()
        row: list[Any] = []
        placed = False
        for item in items:
            kind = item[0]
            if kind == "tile":
                row.append(node.inputs[item[1]].id)
            elif kind in ("full", "none"):
                row.append(UNKNOWN)
            elif kind == "tensor" and not placed:
                # all index tensors broadcast together into one run of dimensions
                row.extend(self._broadcast(index_values, index_shape))
                placed = True
        return tuple(row)

    def _derive(self, node: Node, position: int, out: Value) -> Origins:
        op = node.op
        shape = out.shape
        rank = len(shape)
        inputs = node.inputs
        row: Origins | None = None
        if op is ops.TILE_ATTRS["index"]:
            row = (inputs[0].id,)
        elif op.elementwise:
            row = self._broadcast(inputs, shape)
        elif op.reduction or op.scan:
            # output k of a (multi-operand) reduction or scan comes from input k
            source = self.of(inputs[position]) if position < len(inputs) else None
            dim = node.attrs.get("dim")
            if source is not None and op.scan:
                row = source
            elif source and isinstance(dim, int):
                kept = list(source)
                if node.attrs.get("keepdim"):
                    kept[dim] = UNKNOWN  # now of size 1
                else:
                    del kept[dim]
                row = tuple(kept)
        elif op is ops.view_permute:
            source = self.of(inputs[0])
            if source is not None:
                row = tuple(source[d] for d in node.attrs["dims"])
        elif op is ops.view_subscript:
            row = self._subscript(inputs[0], node.attrs["items"])
        elif op is ops.view_reshape:
            row = self._reshape(inputs[0], shape)
        elif op is ops.view_expand:
            row = self._broadcast(inputs[:1], shape)
        elif op is ops.dot:
            row = self._dot(node, shape)
        if row is None or len(row) != rank:
            row = (UNKNOWN,) * rank
        return row

    def _subscript(self, x: Any, items: Sequence[Any]) -> Origins | None:
        source = self.of(x)
        if source is None:
            return None
        row = []
        dim = 0
        for item in items:
            if item is None:
                row.append(UNKNOWN)
            elif item == "slice":
                if dim >= len(source):
                    return None
                row.append(source[dim])
                dim += 1
            else:
                dim += 1
        return tuple(row)

    def _reshape(self, x: Any, shape: Sequence[Any]) -> Origins | None:
        """Reshapes the backend accepts only add or drop size-1 dimensions: the others keep
        their order."""
        source = self.of(x)
        if source is None:
            return None
        kept = [o for o, d in zip(source, x.shape, strict=True) if sympy.sympify(d) != 1]
        sizes = [d for d in x.shape if sympy.sympify(d) != 1]
        if [sympy.sympify(d) for d in shape if sympy.sympify(d) != 1] != [
            sympy.sympify(d) for d in sizes
        ]:
            return None
        remaining = iter(kept)
        return tuple(UNKNOWN if sympy.sympify(d) == 1 else next(remaining) for d in shape)

    def _dot(self, node: Node, shape: Sequence[Any]) -> Origins | None:
        a, b, acc = node.inputs
        rows_a, rows_b = self.of(a), self.of(b)
        if rows_a is None or rows_b is None or min(len(shape), len(rows_a), len(rows_b)) < 2:
            return None
        # [*batch, M, N] from [*batch_a, M, K] @ [*batch_b, K, N], the batches broadcast
        batch = shape[:-2]
        parts = [(UNKNOWN,) * len(batch)]
        for operand, row in ((a, rows_a), (b, rows_b)):
            if len(row) - 2 <= len(batch):
                parts.append(self._aligned(operand.shape[:-2], row[:-2], batch))
        row = (*join_all(*parts), rows_a[-2], rows_b[-1])
        if isinstance(acc, Value):
            row = join_all(row, self._broadcast([acc], shape))
        return row

    # -- results -------------------------------------------------------------------------------

    def _set(self, value: Value, row: Origins) -> None:
        self.values[value.id] = self._checked(value.shape, row)

    def _checked(self, shape: Sequence[Any], row: Origins) -> Origins:
        """`row` checked against `shape`: an untraced dimension of a block with exactly one tile
        in scope is that tile's, and dimensions that are no tile's block size have no tile."""
        if len(row) != len(shape):
            row = (UNKNOWN,) * len(shape)
        fixed = []
        for dim, origin in zip(shape, row, strict=True):
            info = self.symbols.get(sympy.sympify(dim))
            if info is None or info.kind == "reduction":
                fixed.append(UNKNOWN)
                continue
            if origin not in (UNKNOWN, CONFLICT) and self.tile_blocks.get(origin) != info.block_id:
                origin = UNKNOWN  # traced to a tile of another block size: not this dimension's
            in_scope = [t for t in self.scope if self.tile_blocks[t] == info.block_id]
            if origin is UNKNOWN and len(in_scope) == 1:
                origin = in_scope[0]
            fixed.append(origin)
        return tuple(fixed)
