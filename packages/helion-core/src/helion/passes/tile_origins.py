"""Which tile each dimension of each device value, and of each memory access, came from.

An IR shape names block size symbols, not tiles. One `hl.register_block_size` may size several
tiles in scope at once (an outer and an inner `hl.tile`, or both dimensions of
`hl.tile([m, n], block_size=[bs, bs])`); each tile has its own bounds, hence its own mask of
in-bounds lanes, but a dimension `_BLOCK_SIZE_0` does not say whose. A backend that masks padded
lanes must know: a reduction over the outer tile's dimension inside the inner loop, or a store of
the last partial outer tile, needs the outer tile's mask, not the inner one's.

This analysis follows every dimension back to its tile: from the tile items of loads, stores and
atomics (and the pointer dimensions of StackTensor accesses) and from `tile.index`, through
elementwise ops, views, reductions, scans, dots, shape ops (sort, topk, gather, stack, cat,
split), random numbers, `if` results and loop-carried values. `TileOrigins.of` gives the origins
of a value, `TileOrigins.of_access` those of the shape a memory access covers.

Origins are tile *values* (the tile arguments of a loop's region), so the result depends on the
IR alone, not on the config: backends compute it once per IR and map origins to the tiles they
emit. A dimension nothing traces (`hl.zeros([ti, tj])` with both tiles in scope) is UNKNOWN, one
where two tiles meet is CONFLICT; what to do with those is the backend's decision.
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

# The origin of one dimension: a tile value id, UNKNOWN (nothing traced) or CONFLICT (two tiles
# met). They are ordered UNKNOWN < tile < CONFLICT and loop-carried values only move up, so the
# iteration over a loop body reaches a fixpoint.
UNKNOWN = None
CONFLICT = -1  # value ids count up from 0

Row = tuple  # the origins of the dimensions of one shape, in order


def join(a: Any, b: Any) -> Any:
    """The origin of a dimension that has origin `a` on one path and `b` on another."""
    if a is UNKNOWN:
        return b
    if b is UNKNOWN or a == b:
        return a
    return CONFLICT


def join_rows(*rows: Row) -> Row:
    """Dimension by dimension `join` of rows of one rank."""
    result = rows[0]
    for row in rows[1:]:
        result = tuple(join(a, b) for a, b in zip(result, row, strict=True))
    return result


def _align(own: Sequence[Any], row: Row, shape: Sequence[Any]) -> Row:
    """`row`, the origins of a value of shape `own`, broadcast to `shape` (right-aligned; UNKNOWN
    where the value is broadcast along, or has more dimensions than `shape`)."""
    lead = len(shape) - len(row)
    if lead < 0:
        return (UNKNOWN,) * len(shape)
    return (UNKNOWN,) * lead + tuple(
        origin if own[i] == shape[lead + i] else UNKNOWN for i, origin in enumerate(row)
    )


class TileOrigins:
    """The origins of every device value of `ir` and of every memory access in it."""

    def __init__(self, ir: KernelIR) -> None:
        self._info_of_symbol = {info.symbol: info for info in ir.block_sizes}
        self._block_of_tile: dict[int, int] = {}  # tile value id -> block id
        self._scope: list[int] = []  # tile value ids of the enclosing loops
        self._values: dict[int, Row] = {}  # value id -> origins
        self._accesses: dict[int, Row] = {}  # id(node) -> origins of the shape it covers
        self._block(ir.body)

    def of(self, value: Any) -> Row | None:
        """The origins of `value`'s dimensions; None for an operand that is no device tensor."""
        return self._values.get(value.id) if isinstance(value, Value) else None

    def of_access(self, node: Node) -> Row | None:
        """The origins of the shape a load, store or atomic covers (a StackTensor access: the
        pointer dimensions first); None for any other node."""
        return self._accesses.get(id(node))

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
            # a load's or atomic's result has the shape the access covers, as has a store's
            # value; an op with neither (a plugin's, like the distributed package's hl.signal)
            # records that shape as its "shape"
            if node.outputs:
                shape = node.outputs[0].shape
            elif "value" in node.attrs:
                shape = node.inputs[node.attrs["value"]].shape
            else:
                shape = tuple(node.attrs.get("shape", ()))
            row = self._checked(shape, self._access(node))
            self._accesses[id(node)] = row
            if node.outputs:
                self._values[node.outputs[0].id] = row
            return
        for position, out in enumerate(node.outputs):
            if isinstance(out.type, TensorType):
                self._set(out, self._derive(node, position, out))

    def _loop(self, node: Node) -> None:
        body = node.regions[0]
        count = len(node.attrs["block_ids"])
        tiles, carried = body.args[:count], body.args[count:]
        for tile, block_id in zip(tiles, node.attrs["block_ids"], strict=True):
            self._block_of_tile[tile.id] = block_id
        for arg, init in zip(carried, node.inputs, strict=True):
            self._values[arg.id] = self._like(init, arg)
        self._scope += [tile.id for tile in tiles]
        changed = True
        while changed:  # each round moves some carried dimension up, or is the last
            self._block(body)
            changed = False
            for arg, result in zip(carried, body.yields, strict=True):
                if isinstance(arg.type, TensorType):
                    row = join_rows(self._values[arg.id], self._like(result, arg))
                    changed |= row != self._values[arg.id]
                    self._values[arg.id] = row
        del self._scope[len(self._scope) - count :]
        for arg, out in zip(carried, node.outputs, strict=True):
            if isinstance(out.type, TensorType):
                self._set(out, self._values[arg.id])

    # -- rules ------------------------------------------------------------------------------------

    def _aligned(self, value: Any, shape: Sequence[Any]) -> Row:
        """`value`'s origins broadcast to `shape`."""
        row = self.of(value)
        if row is None:
            return (UNKNOWN,) * len(shape)
        return _align(value.shape, row, shape)

    def _like(self, operand: Any, like: Value) -> Row:
        """`operand`'s origins broadcast to the shape of `like`."""
        if not isinstance(like.type, TensorType):
            return ()
        return self._aligned(operand, like.shape)

    def _broadcast(self, operands: Sequence[Any], shape: Sequence[Any]) -> Row:
        return join_rows((UNKNOWN,) * len(shape), *(self._aligned(o, shape) for o in operands))

    def _access(self, node: Node) -> Row:
        """Origins of the shape a memory access covers, from its index items."""
        row: list[Any] = []
        if "ptrs" in node.attrs:  # a StackTensor access: the dimensions of its pointers lead
            ptrs = node.inputs[node.attrs["ptrs"]]
            row += self._aligned(ptrs, ptrs.shape)
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
        """Origins of output `position` of a node that is neither a loop, an `if` nor an access
        (None: nothing traced)."""
        op, inputs, attrs = node.op, node.inputs, node.attrs
        if op is ops.TILE_ATTRS["index"]:
            return (inputs[0].id,)
        if op.elementwise or op in (ops.view_expand, ops.random, ops.inline_asm):
            return self._broadcast(inputs, out.shape)
        if op.scan or op is ops.sort:
            # output k of a multi-input scan comes from input k; both of sort's from its input
            return self.of(inputs[position] if op.scan else inputs[0])
        if op.reduction or op is ops.topk:
            # output k of a multi-input hl.reduce comes from input k; both of topk's from its input
            source = self.of(inputs[position] if op.reduction else inputs[0])
            dim = attrs.get("dim")
            if not source or not isinstance(dim, int):
                return None
            kept = list(source)
            if op is ops.topk or attrs.get("keepdim"):
                kept[dim] = UNKNOWN  # now k lanes, or 1
            else:
                del kept[dim]
            return tuple(kept)
        if op is ops.split:
            source = self.of(inputs[0])
            return None if source is None else source[:-1]  # the halves of a last dim of 2
        if op is ops.gather:
            return self.of(inputs[1])  # the result has the index's shape
        if op is ops.stack or op is ops.cat:
            rows = []
            for value in inputs:
                row = list(self._aligned(value, value.shape))
                if op is ops.stack:
                    row.insert(attrs["dim"], UNKNOWN)  # the new dimension
                else:
                    row[attrs["dim"]] = UNKNOWN  # the inputs end to end
                rows.append(tuple(row))
            return join_rows(*rows)
        if op is ops.view_permute:
            source = self.of(inputs[0])
            return None if source is None else tuple(source[d] for d in attrs["dims"])
        if op is ops.view_subscript:
            return self._subscript(inputs[0], attrs["items"])
        if op is ops.view_reshape:
            return self._reshape(inputs[0], out.shape)
        if op is ops.dot or op is ops.dot_scaled:
            return self._dot(node, out.shape)
        return None  # creation ops (hl.zeros, hl.full, arange) and opaque ones name no tile

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
            if item == "slice":
                if dim >= len(source):
                    return None
                row.append(source[dim])
            dim += 1  # an integer selects: the dimension is gone
        return tuple(row)

    def _reshape(self, x: Any, shape: Sequence[Any]) -> Row | None:
        """Only reshapes that add or drop dimensions of 1 keep the other dimensions apart; one
        that merges or splits dimensions leaves them untraced."""
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
        the right one, the batch from both (and all from the accumulator, when there is one)."""
        a, b = node.inputs[0], node.inputs[2 if node.op is ops.dot_scaled else 1]
        acc = node.inputs[-1]
        rows_a, rows_b = self.of(a), self.of(b)
        if rows_a is None or rows_b is None or min(len(shape), len(rows_a), len(rows_b)) < 2:
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
        self._values[value.id] = self._checked(value.shape, row)

    def _checked(self, shape: Sequence[Any], row: Row | None) -> Row:
        """`row` made to fit `shape`: a dimension that no loop's block size sizes (a problem size,
        a reduction dimension) has no tile, one traced to a tile of another block size is not
        that tile's, and an untraced one whose block size sizes just one tile in scope is that
        tile's."""
        if row is None or len(row) != len(shape):
            row = (UNKNOWN,) * len(shape)
        checked = []
        for dim, origin in zip(shape, row, strict=True):
            info = self._info_of_symbol.get(dim)
            if info is None or info.kind == "reduction":
                checked.append(UNKNOWN)
                continue
            if origin != CONFLICT and self._block_of_tile.get(origin) != info.block_id:
                origin = UNKNOWN  # untraced, or traced to a tile of another block size
            if origin is UNKNOWN:
                in_scope = [t for t in self._scope if self._block_of_tile[t] == info.block_id]
                if len(in_scope) == 1:
                    origin = in_scope[0]
            checked.append(origin)
        return tuple(checked)
