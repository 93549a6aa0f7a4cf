"""The tile each dimension of each device value came from.

An IR shape names block size symbols, not tiles. One ``hl.register_block_size`` may size several
tiles in scope at once (an outer and an inner ``hl.tile``, or both dimensions of
``hl.tile([m, n], block_size=[bs, bs])``); each tile has its own bounds, so its own mask, but a
dimension ``_BLOCK_SIZE_0`` does not say whose. This pass follows every dimension back to its
tile: the tile items of a load / store / atomic and ``tile.index``, then through elementwise ops,
views, reductions, scans, dots, shape ops, ``if`` results and loop-carried values.

Origins are tile *values* (a loop region's tile arguments), so the result does not depend on the
config; the code generator maps them to the tiles it emits (``KernelCodegen.dim_mask``) and
consults them only where several tiles of one block size are in scope. A dimension nothing
traces (``hl.zeros([ti, tj])`` with both tiles in scope) stays UNKNOWN.
"""

from __future__ import annotations

from typing import Any
from typing import Sequence

from helion.ir.core import Block
from helion.ir.core import KernelIR
from helion.ir.core import Node
from helion.ir.core import TensorType
from helion.ir.core import Value
from helion.language import _ops as ops

# Per dimension: a tile value id, UNKNOWN (nothing traced) or CONFLICT (two tiles met). They are
# ordered UNKNOWN < tile < CONFLICT and loop-carried values only move up, so loops reach a fixpoint.
UNKNOWN = None
CONFLICT = -1  # value ids count up from 0

Row = tuple  # the origin of each dimension of one shape


def join(a: Any, b: Any) -> Any:
    if a is UNKNOWN:
        return b
    if b is UNKNOWN or a == b:
        return a
    return CONFLICT


def join_rows(*rows: Row) -> Row:
    """Dimension by dimension join of rows of one rank."""
    result = rows[0]
    for row in rows[1:]:
        result = tuple(join(a, b) for a, b in zip(result, row, strict=True))
    return result


def _align(own: Sequence[Any], row: Row, shape: Sequence[Any]) -> Row:
    """``row``, the origins of a value of shape ``own``, broadcast to ``shape`` (right-aligned;
    UNKNOWN where it is broadcast along)."""
    lead = len(shape) - len(row)
    if lead < 0:
        return (UNKNOWN,) * len(shape)
    return (UNKNOWN,) * lead + tuple(
        origin if own[i] == shape[lead + i] else UNKNOWN for i, origin in enumerate(row)
    )


class TileOrigins:
    """Origins of every device value of ``ir`` (see the module docstring)."""

    def __init__(self, ir: KernelIR) -> None:
        self.block_of_symbol = {info.symbol: info for info in ir.block_sizes}
        self.values: dict[int, Row] = {}
        self.block_of_tile: dict[int, int] = {}  # tile value id -> block id
        self._scope: list[int] = []  # tile value ids of the enclosing loops
        self._block(ir.body)

    def of(self, value: Any) -> Row | None:
        """The origins of ``value``'s dimensions; None for an operand that is no device tensor."""
        return self.values.get(value.id) if isinstance(value, Value) else None

    # -- the walk ---------------------------------------------------------------------------------

    def _block(self, block: Block) -> None:
        for node in block.nodes:
            self._node(node)

    def _node(self, node: Node) -> None:
        op = node.op
        if op is ops.grid_loop or op is ops.tile_loop:
            self._loop(node)
            return
        for region in node.regions:  # if branches; 0-D combiners of hl.reduce / associative_scan
            self._block(region)
        if op is ops.if_:
            for position, out in enumerate(node.outputs):
                if isinstance(out.type, TensorType):
                    rows = [self._like(region.yields[position], out) for region in node.regions]
                    self._set(out, join_rows(*rows))
            return
        if "items" in node.attrs and "tensor" in node.attrs:
            # a load's (or atomic's) result has the access's shape, as has a store's value
            row = self._access(node)
            if node.outputs:
                self._set(node.outputs[0], row)
            return
        for position, out in enumerate(node.outputs):
            if isinstance(out.type, TensorType):
                self._set(out, self._derive(node, position, out))

    def _loop(self, node: Node) -> None:
        body = node.regions[0]
        count = len(node.attrs["block_ids"])
        tiles, carried = body.args[:count], body.args[count:]
        for tile, block_id in zip(tiles, node.attrs["block_ids"], strict=True):
            self.block_of_tile[tile.id] = block_id
        for arg, init in zip(carried, node.inputs, strict=False):
            self.values[arg.id] = self._like(init, arg)
        self._scope += [tile.id for tile in tiles]
        changed = True
        while changed:  # each round moves a carried dimension up, or is the last
            self._block(body)
            changed = False
            for arg, result in zip(carried, body.yields, strict=False):
                if isinstance(arg.type, TensorType):
                    row = join_rows(self.values[arg.id], self._like(result, arg))
                    changed |= row != self.values[arg.id]
                    self.values[arg.id] = row
        del self._scope[len(self._scope) - count :]
        for arg, out in zip(carried, node.outputs, strict=False):
            if isinstance(out.type, TensorType):
                self._set(out, self.values[arg.id])

    # -- rules --------------------------------------------------------------------------------------

    def _aligned(self, value: Any, shape: Sequence[Any]) -> Row:
        """``value``'s origins broadcast to ``shape``."""
        row = self.of(value)
        if row is None:
            return (UNKNOWN,) * len(shape)
        return _align(value.shape, row, shape)

    def _like(self, operand: Any, like: Value) -> Row:
        if not isinstance(like.type, TensorType):
            return ()
        return self._aligned(operand, like.shape)

    def _broadcast(self, operands: Sequence[Any], shape: Sequence[Any]) -> Row:
        return join_rows((UNKNOWN,) * len(shape), *(self._aligned(o, shape) for o in operands))

    def _access(self, node: Node) -> Row:
        """Origins of the shape a memory op covers, from its index items (the pointer dims of a
        StackTensor access lead)."""
        row: list[Any] = []
        if "ptrs" in node.attrs:
            row += self.of(node.inputs[node.attrs["ptrs"]]) or ()
        items = node.attrs["items"]
        indices = [node.inputs[item[1]] for item in items if item[0] == "tensor"]
        placed = False
        for item in items:
            if item[0] == "tile":
                row.append(node.inputs[item[1]].id)
            elif item[0] in ("full", "none"):
                row.append(UNKNOWN)
            elif item[0] == "tensor" and not placed:
                # the index tensors broadcast together into one run of dimensions
                row += self._broadcast(indices, ops.broadcast_shapes(*(v.shape for v in indices)))
                placed = True
        return tuple(row)

    def _derive(self, node: Node, position: int, out: Value) -> Row | None:
        op, inputs, shape = node.op, node.inputs, out.shape
        if op is ops.TILE_ATTRS["index"]:
            return (inputs[0].id,) if inputs and isinstance(inputs[0], Value) else None
        if op.elementwise or op in (ops.view_expand, ops.random, ops.inline_asm):
            return self._broadcast(inputs, shape)
        if op.reduction or op.scan or op in (ops.sort, ops.topk, ops.split):
            # output k of a multi-input reduction or scan comes from input k; sort's and
            # topk's values and indices both from the one input
            source = self.of(inputs[position] if op.reduction or op.scan else inputs[0])
            if source is None:
                return None
            if op.scan or op is ops.sort:
                return source
            if op is ops.split:
                return source[:-1]
            kept = list(source)
            dim = node.attrs["dim"]
            if not isinstance(dim, int):
                return None
            if op is ops.topk or node.attrs.get("keepdim"):
                kept[dim] = UNKNOWN  # now k or 1 lanes
            else:
                del kept[dim]
            return tuple(kept)
        if op is ops.gather:
            return self.of(inputs[1])
        if op in (ops.stack, ops.cat):
            dim = node.attrs["dim"]
            parts = [list(self._like(v, v)) for v in inputs]
            for part in parts:
                if op is ops.stack:
                    part.insert(dim, UNKNOWN)  # the new dimension
                else:
                    part[dim] = UNKNOWN  # the inputs end to end
            return join_rows(*(tuple(part) for part in parts))
        if op is ops.view_permute:
            source = self.of(inputs[0])
            return None if source is None else tuple(source[d] for d in node.attrs["dims"])
        if op is ops.view_subscript:
            return self._subscript(inputs[0], node.attrs["items"])
        if op is ops.view_reshape:
            return self._reshape(inputs[0], shape)
        if op in (ops.dot, ops.dot_scaled):
            return self._dot(node, shape)
        return None

    def _subscript(self, x: Any, items: Sequence[Any]) -> Row | None:
        source = self.of(x)
        if source is None:
            return None
        row: list[Any] = []
        dim = 0
        for item in items:
            if item is None:
                row.append(UNKNOWN)  # a new axis
                continue
            if item == "slice" and dim < len(source):
                row.append(source[dim])
            dim += 1  # an integer selects: the dimension is gone
        return tuple(row)

    def _reshape(self, x: Any, shape: Sequence[Any]) -> Row | None:
        """Only reshapes that add or drop dimensions of 1 keep their dimensions apart (others
        merge dimensions, rejected by the code generator where padded)."""
        source = self.of(x)
        if source is None:
            return None
        kept = [(d, o) for d, o in zip(x.shape, source, strict=True) if d != 1]
        if [d for d, _ in kept] != [d for d in shape if d != 1]:
            return None
        rest = iter(o for _, o in kept)
        return tuple(UNKNOWN if d == 1 else next(rest) for d in shape)

    def _dot(self, node: Node, shape: Sequence[Any]) -> Row | None:
        """[*batch, M, N] from [*batch, M, K] @ [*batch, K, N]: M from the left operand, N from
        the right one, the batch from both (and from the accumulator, when there is one)."""
        a, b = node.inputs[0], node.inputs[2 if node.op is ops.dot_scaled else 1]
        acc = node.inputs[-1]
        rows_a, rows_b = self.of(a), self.of(b)
        if rows_a is None or rows_b is None or len(rows_a) < 2 or len(rows_b) < 2:
            return None
        batch = shape[:-2]
        joined = join_rows(
            (UNKNOWN,) * len(batch),
            _align(a.shape[:-2], rows_a[:-2], batch),
            _align(b.shape[:-2], rows_b[:-2], batch),
        )
        row = (*joined, rows_a[-2], rows_b[-1])
        if isinstance(acc, Value):
            row = join_rows(row, self._aligned(acc, shape))
        return row

    # -- results ----------------------------------------------------------------------------------

    def _set(self, value: Value, row: Row | None) -> None:
        """Record ``row`` for ``value``, checked against its shape: a dimension that is no tile's
        block size has no tile, one traced to a tile of another block size is not that tile's,
        and an untraced one whose block size sizes just one tile in scope is that tile's."""
        shape = value.shape
        if row is None or len(row) != len(shape):
            row = (UNKNOWN,) * len(shape)
        checked = []
        for dim, origin in zip(shape, row, strict=True):
            info = self.block_of_symbol.get(dim)
            if info is None or info.kind in ("reduction", "grid"):
                checked.append(UNKNOWN)
                continue
            if origin != CONFLICT and self.block_of_tile.get(origin) != info.block_id:
                origin = UNKNOWN  # untraced, or traced to a tile of another block size
            if origin is UNKNOWN:
                in_scope = [t for t in self._scope if self.block_of_tile[t] == info.block_id]
                if len(in_scope) == 1:
                    origin = in_scope[0]
            checked.append(origin)
        self.values[value.id] = tuple(checked)
