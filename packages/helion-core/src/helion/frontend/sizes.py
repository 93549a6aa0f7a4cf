"""Sizes computed from block sizes in device code, and slices whose start is known only on the
device.

- `symbolic(tracer, operand)`: an integer operand as a sympy expression: block sizes are their
  symbols, ints are numbers, `+ - *`, negation and exact `//` are followed, and any other value
  (a tile's begin, a load, a scalar argument) is an opaque symbol of its own.
- `size_expr(tracer, value)`: the size a 0-D device value stands for when it is computed from
  block sizes and ints alone (`t.block_size * 2`), else None.
- `size_value(tracer, expr)`: device code's view of a size expression (`x.shape[0]` of a value
  of shape `[2*_BLOCK_SIZE_0]`): a 0-D value computed from the block sizes.
- `dynamic_slice_items(tracer, index, sizes)`: `x[s : s + n]` with a start known only on the
  device, as the index `s + hl.arange(n)` masked to the dimension, for a length `n` that is a
  size (an int, a block size or an expression of them).
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING
from typing import Any
from typing import Sequence

import sympy
import torch

from helion import exc
from helion.frontend.proxies import SYMBOLIC_INTS
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import TileProxy
from helion.frontend.proxies import exact_floordiv
from helion.ir.core import TensorType
from helion.ir.core import Value
from helion.language import _ops as ops

if TYPE_CHECKING:
    from helion.frontend.tracer import Tracer

_LINEAR = {
    ops.BINARY["add"]: operator.add,
    ops.BINARY["sub"]: operator.sub,
    ops.BINARY["mul"]: operator.mul,
}
_MAX_DEPTH = 32
_TILE_ATTR_OPS = frozenset(ops.TILE_ATTRS.values())


def _opaque(tracer: Tracer, value: Value) -> sympy.Symbol:
    """The symbol of a value `symbolic` does not see into. Values of pure ops (a tile's
    `begin`, arithmetic) on the same inputs share one, so that the `t.begin` of `x[t.begin :
    t.begin + 8]`, read twice, is one symbol; a load or a block argument is its own."""
    key = _structural_key(value, 8)
    known = tracer.opaque_symbols.get(key)
    if known is None:
        known = sympy.Symbol(f"_value_{len(tracer.opaque_symbols)}", integer=True)
        tracer.opaque_symbols[key] = known
    return known


def _structural_key(operand: Any, depth: int) -> Any:
    if not isinstance(operand, Value):
        return ("constant", type(operand).__name__, repr(operand))
    producer = operand.producer
    if producer is None or depth == 0 or not _is_pure(producer.op):
        return ("value", operand.id)
    attrs = tuple(sorted((k, repr(v)) for k, v in producer.attrs.items()))
    inputs = tuple(_structural_key(x, depth - 1) for x in producer.inputs)
    return (producer.op.name, attrs, inputs, producer.outputs.index(operand))


def _is_pure(op: ops.Op) -> bool:
    return op.elementwise or op in _TILE_ATTR_OPS or op is ops.constant


def _is_int_scalar(value: Value) -> bool:
    ty = value.type
    return (
        isinstance(ty, TensorType)
        and ty.ndim == 0
        and not ty.dtype.is_floating_point
        and not ty.dtype.is_complex
        and ty.dtype != torch.bool
    )


def symbolic(tracer: Tracer, operand: Any, depth: int = _MAX_DEPTH) -> sympy.Expr | None:
    """`operand` (a proxy, an IR operand or an int) as a sympy expression, or None where it is
    not an integer scalar."""
    if isinstance(operand, SYMBOLIC_INTS):
        return operand.expr
    if isinstance(operand, bool):
        return None
    if isinstance(operand, int):
        return sympy.Integer(operand)
    if isinstance(operand, sympy.Expr):
        return operand
    if isinstance(operand, DeviceValue):
        operand = operand.value
    if not isinstance(operand, Value) or not _is_int_scalar(operand):
        return None
    producer = operand.producer
    if producer is None or depth == 0:
        return _opaque(tracer, operand)
    op = producer.op
    if op is ops.TILE_ATTRS["block_size"]:
        return tracer.ir.block_sizes[producer.attrs["block_id"]].symbol
    if op is ops.constant:
        value = producer.attrs["value"]
        if isinstance(value, int) and not isinstance(value, bool):
            return sympy.Integer(value)
        return _opaque(tracer, operand)
    if op is ops.cast and len(producer.inputs) == 1:
        inner = producer.inputs[0]
        if isinstance(inner, Value) and _is_int_scalar(inner):
            return symbolic(tracer, inner, depth - 1)
        return _opaque(tracer, operand)
    if op is ops.UNARY["neg"]:
        inner_expr = symbolic(tracer, producer.inputs[0], depth - 1)
        return _opaque(tracer, operand) if inner_expr is None else -inner_expr
    combine = _LINEAR.get(op)
    if (combine is not None or op is ops.BINARY["floordiv"]) and len(producer.inputs) == 2:
        lhs, rhs = (symbolic(tracer, x, depth - 1) for x in producer.inputs)
        if lhs is None or rhs is None:
            return _opaque(tracer, operand)
        if combine is not None:
            return sympy.expand(combine(lhs, rhs))
        quotient = exact_floordiv(lhs, rhs)
        return _opaque(tracer, operand) if quotient is None else quotient
    return _opaque(tracer, operand)


def _block_symbols(tracer: Tracer) -> set[sympy.Symbol]:
    return {info.symbol for info in tracer.ir.block_sizes}


def is_size(tracer: Tracer, expr: sympy.Expr | None) -> bool:
    """Whether `expr` is known when the kernel is compiled: an int or an expression of block
    sizes (no value known only on the device)."""
    return expr is not None and expr.free_symbols <= _block_symbols(tracer)


def size_expr(tracer: Tracer, value: DeviceValue) -> sympy.Expr | None:
    """The size a 0-D integer device value computed from block sizes stands for, else None."""
    expr = symbolic(tracer, value)
    return expr if is_size(tracer, expr) else None


def size_value(tracer: Tracer, expr: sympy.Expr) -> Any:
    """A 0-D int32 device value (or an int) computing the size `expr` from block sizes, which
    `size_expr` reads back as `expr`; a full slice's dimension is its extent."""
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        return tracer.dim_size(expr)
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        combine = operator.add if isinstance(expr, sympy.Add) else operator.mul
        result: Any = None
        for term in expr.args:
            part = size_value(tracer, term)
            result = part if result is None else combine(result, part)
        return result
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        base = size_value(tracer, expr.base)
        result = base
        for _ in range(int(expr.exp) - 1):
            result = result * base
        return result
    raise exc.TypeInferenceError(f"the size {expr} is not known in device code")


# ----------------------------------------------------------------------------------------------
# slices with a start known only on the device


def is_dynamic_slice(item: Any) -> bool:
    """A slice with a bound that is a device value (`x[t.begin : t.begin + 8]`) or a size of
    block sizes (`x[:, :bk]`: its length is the config's, not the int the trace computes with)."""
    return isinstance(item, slice) and any(
        isinstance(bound, (DeviceValue, TileProxy, *SYMBOLIC_INTS))
        for bound in (item.start, item.stop, item.step)
    )


def _slice_text(item: slice) -> str:
    def text(bound: Any) -> str:
        if bound is None:
            return ""
        if isinstance(bound, (DeviceValue, TileProxy)):
            return "<device value>"
        return str(bound)

    return f"{text(item.start)}:{text(item.stop)}"


def _bound(tracer: Tracer, bound: Any, default: int, item: slice) -> Any:
    if bound is None:
        return default
    if isinstance(bound, TileProxy):
        raise exc.IncorrectTileUsage(
            "a tile used as a slice bound (use tile.begin / tile.end, or index with the tile)",
            loc=tracer.current_loc(),
        )
    if isinstance(bound, DeviceValue):
        if bound.ndim != 0 or not _is_int_scalar(bound.value):
            raise exc.InvalidIndexingType(
                f"a slice bound that is a {bound.dtype} device tensor of shape "
                f"{list(bound.value.shape)} (slice bounds are 0-D integers)",
                loc=tracer.current_loc(),
            )
        return bound
    if isinstance(bound, int) and not isinstance(bound, bool):
        return bound
    raise exc.InvalidIndexingType(
        f"a slice bound of type {type(bound).__name__} ({_slice_text(item)})",
        loc=tracer.current_loc(),
    )


def _slice_length(tracer: Tracer, item: slice, size: int) -> tuple[Any, sympy.Expr]:
    """The start of the slice `item` of a dimension of `size` and its length, a size."""
    if item.step is not None and not (isinstance(item.step, int) and item.step == 1):
        raise exc.InvalidIndexingType("slices with a step", loc=tracer.current_loc())
    start = _bound(tracer, item.start, 0, item)
    stop = _bound(tracer, item.stop, size, item)
    start_expr = symbolic(tracer, start)
    stop_expr = symbolic(tracer, stop)
    assert start_expr is not None and stop_expr is not None
    length = sympy.expand(stop_expr - start_expr)
    if not is_size(tracer, length):
        raise exc.TypeInferenceError(
            f"the slice [{_slice_text(item)}] has a bound known only on the device, and its "
            "length (stop - start) is not a size known when the kernel is compiled",
            loc=tracer.current_loc(),
            hint="Write the stop as the start plus an int, a block size or an expression of "
            "them (`x[s : s + 16]`, `x[s : s + tile.block_size * 2]`, `x[s : s + bk]` for "
            "`bk = hl.register_block_size(...)`); for the positions of a tile, index with the "
            "tile itself (`x[tile]`).",
        )
    if length.is_Integer and int(length) <= 0:
        raise exc.TypeInferenceError(
            f"the slice [{_slice_text(item)}] has a bound known only on the device and a "
            f"length of {int(length)}; such a slice must have a positive length",
            loc=tracer.current_loc(),
        )
    return start, length


def dynamic_slice_items(
    tracer: Tracer, index: Sequence[Any], sizes: Sequence[int], what: str
) -> tuple[list[Any], Value | None]:
    """`index` (one entry per dimension of the access, `None`s removed from `sizes`' count)
    with each slice whose bound is a device value replaced by the index tensor
    `start + hl.arange(length)`, and the mask of the lanes inside their dimensions.

    Such slices must be next to each other and come with no other index tensor: their index
    tensors are then shaped to broadcast to the slices' own dimensions, in order (an index
    tensor elsewhere would broadcast with them, unlike torch's slices)."""
    positions = [i for i, item in enumerate(index) if is_dynamic_slice(item)]
    if not positions:
        return list(index), None
    if positions != list(range(positions[0], positions[0] + len(positions))):
        raise exc.InvalidIndexingType(
            f"slices with a device-valued bound in {what} that are not next to each other "
            "(the dimensions between them would be placed after them)",
            loc=tracer.current_loc(),
        )
    others = [
        item
        for item in index
        if isinstance(item, DeviceValue) and item.ndim > 0 and not is_dynamic_slice(item)
    ]
    if others:
        raise exc.InvalidIndexingType(
            f"a slice with a device-valued bound together with an index tensor in {what} "
            "(they would broadcast together, unlike torch's slices)",
            loc=tracer.current_loc(),
            hint="Index that dimension with `start + hl.arange(length)` instead, broadcast "
            "against the other index tensor as you mean it.",
        )
    dims = _dims_of(index)
    result = list(index)
    mask: Any = None
    count = len(positions)
    trailing = sum(_output_dims(tracer, item) for item in index[positions[-1] + 1 :])
    for k, position in enumerate(positions):
        item = index[position]
        size = sizes[dims[position]]
        start, length = _slice_length(tracer, item, size)
        lanes = tracer.wrap(
            tracer.emit(
                ops.arange, [], {"start": 0, "length": length, "dtype": tracer.ir.index_dtype}
            )
        )
        positions_value = lanes if isinstance(start, int) and start == 0 else start + lanes
        if count > 1:
            view = [None] * k + [slice(None)] + [None] * (count - k - 1)
            positions_value = tracer.subscript(positions_value, tuple(view))
        result[position] = positions_value
        inside = positions_value < size
        if trailing:
            inside = tracer.subscript(inside, tuple([slice(None)] * count + [None] * trailing))
        mask = inside if mask is None else tracer.call_torch(torch.logical_and, (mask, inside), {})
    return result, tracer.as_value(mask, torch.bool)


def _output_dims(tracer: Tracer, item: Any) -> int:
    """How many dimensions of the access's result an index entry (not an index tensor) makes."""
    if item is None or isinstance(item, slice):
        return 1
    if isinstance(item, TileProxy):
        return 0 if tracer.ir.block_sizes[item.block_id].kind == "grid" else 1
    return 0  # an int or a 0-D value picks one element


def _dims_of(index: Sequence[Any]) -> list[int]:
    """For each entry of `index`, the dimension of the tensor it indexes (`None` indexes none)."""
    dims = []
    dim = 0
    for item in index:
        dims.append(dim)
        if item is not None:
            dim += 1
    return dims
