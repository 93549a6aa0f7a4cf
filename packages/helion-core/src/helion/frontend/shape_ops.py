"""Shape ops in device code: `torch.sort`, `argsort`, `topk`, `gather`, `stack`, `cat` and
`hl.split` / `hl.join`.

The torch functions register into the one torch table (`helion.frontend.torch_table`); the
tracer's `hl_split` / `hl_join` call `split` / `join` here.

Sort, topk and gather read all of one dimension at once (`Op.whole_dim`). A constant-size
dimension or a full slice (`x[tile, :]`) is always whole: backends that would loop over a full
slice in chunks (`reduction_loops`) keep it persistent instead. A dimension tiled by `hl.tile`
over constant bounds is made whole by raising the minimum of its block size to cover the loop's
extent, so that every config (autotuned or given; a smaller block size is raised to the minimum)
runs the dimension as one tile. Any other dimension is an error at trace time.
"""

from __future__ import annotations

from typing import Any
from typing import Sequence

import sympy
import torch

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import HostTensor
from helion.frontend.torch_table import _methods
from helion.frontend.torch_table import register
from helion.ir.core import TensorType
from helion.ir.core import Value
from helion.language import ConstExpr
from helion.language import _ops as ops

SORTABLE = {
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
}


def _next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def _constant(tracer: Any, value: Any, what: str, kinds: tuple[type, ...]) -> Any:
    if isinstance(value, ConstExpr):
        value = value.value
    if isinstance(value, bool) and bool not in kinds:
        value = None
    if not isinstance(value, kinds):
        raise exc.TypeInferenceError(
            f"{what} must be a constant {' or '.join(k.__name__ for k in kinds)}",
            loc=tracer.current_loc(),
        )
    return value


def _tensor(tracer: Any, x: Any, what: str) -> Value:
    if isinstance(x, HostTensor):
        raise exc.HostTensorDirectUsage(x.arg.name, loc=tracer.current_loc())
    value = tracer.as_value(x)
    if not isinstance(value.type, TensorType):
        raise exc.TypeInferenceError(
            f"{what} needs a tensor, got {value.type}", loc=tracer.current_loc()
        )
    return value


def _dim(tracer: Any, dim: Any, ndim: int, what: str) -> int:
    dim = _constant(tracer, dim, f"the dim of {what}", (int,))
    if not -ndim <= dim < ndim:
        raise exc.TypeInferenceError(
            f"{what}: dim {dim} is out of range for a {ndim}-D value", loc=tracer.current_loc()
        )
    return dim % ndim


def _block_of(tracer: Any, expr: sympy.Expr) -> Any:
    return next((b for b in tracer.ir.block_sizes if b.symbol == expr), None)


def concrete_extent(tracer: Any, expr: sympy.Expr) -> int | None:
    """The number of elements of a constant or full-slice dimension (None for a tile dim)."""
    if expr.is_Integer:
        return int(expr)
    info = _block_of(tracer, expr)
    if info is not None and info.kind == "reduction":
        return info.size_hint
    return None


def require_whole(tracer: Any, value: Value, dim: int, what: str) -> int:
    """Make sure every backend runs dimension `dim` of `value` as one piece; returns its extent."""
    expr = value.shape[dim]
    extent = concrete_extent(tracer, expr)
    if extent is not None:
        return extent
    loc = tracer.current_loc()
    info = _block_of(tracer, expr)
    if info is None:
        raise exc.DimensionNotWhole(what, dim, f"it is the merged dimension {expr}", loc=loc)
    if info.kind == "grid":
        return 1
    extents = tracer.loop_extents.get(info.block_id) or [None]
    if any(e is None for e in extents):
        raise exc.DimensionNotWhole(
            what, dim, "it is tiled by a loop whose bounds are only known on the device", loc=loc
        )
    extent = max(extents)
    if info.kind == "fixed":
        if int(info.fixed_value or 1) < extent:
            raise exc.DimensionNotWhole(
                what,
                dim,
                f"it is tiled with block_size={info.fixed_value} over {extent} elements",
                loc=loc,
            )
        return extent
    needed = _next_power_of_2(extent)
    if info.max_size is not None and info.max_size < needed:
        raise exc.DimensionNotWhole(
            what,
            dim,
            f"its block size may not exceed {info.max_size}, and the loop has {extent} elements",
            loc=loc,
        )
    info.min_size = max(info.min_size, needed)
    return extent


def _check_sortable(tracer: Any, value: Value, what: str) -> None:
    if value.dtype not in SORTABLE:
        raise exc.TypeInferenceError(
            f"{what} does not support {value.dtype} values", loc=tracer.current_loc()
        )


# -- sort, argsort, topk ---------------------------------------------------------------------------


def emit_sort(
    tracer: Any, x: Any, dim: Any, descending: Any, what: str
) -> tuple[DeviceValue, DeviceValue]:
    value = _tensor(tracer, x, what)
    if value.type.ndim == 0:
        raise exc.TypeInferenceError(f"{what} of a 0-D value", loc=tracer.current_loc())
    axis = _dim(tracer, dim, value.type.ndim, what)
    descending = _constant(tracer, descending, f"descending= of {what}", (bool,))
    _check_sortable(tracer, value, what)
    require_whole(tracer, value, axis, what)
    node = tracer.emit(ops.sort, [value], {"dim": axis, "descending": descending})
    return DeviceValue(tracer, node.outputs[0]), DeviceValue(tracer, node.outputs[1])


@register(torch.sort, *_methods("sort"))
def _sort(
    tracer: Any,
    x: Any,
    dim: Any = -1,
    descending: Any = False,
    stable: Any = False,
    *,
    out: Any = None,
) -> Any:
    if out is not None:
        raise exc.NotAllowedOnDevice("out= in torch.sort", loc=tracer.current_loc())
    # always stable: equal keys keep their order (what the compiled backends do)
    return torch.return_types.sort(emit_sort(tracer, x, dim, descending, "torch.sort"))


@register(torch.argsort, *_methods("argsort"))
def _argsort(
    tracer: Any, x: Any, dim: Any = -1, descending: Any = False, stable: Any = False
) -> DeviceValue:
    return emit_sort(tracer, x, dim, descending, "torch.argsort")[1]


@register(torch.topk, *_methods("topk"))
def _topk(
    tracer: Any,
    x: Any,
    k: Any,
    dim: Any = -1,
    largest: Any = True,
    sorted: Any = True,
    *,
    out: Any = None,
) -> Any:
    if out is not None:
        raise exc.NotAllowedOnDevice("out= in torch.topk", loc=tracer.current_loc())
    value = _tensor(tracer, x, "torch.topk")
    if value.type.ndim == 0:
        raise exc.TypeInferenceError("torch.topk of a 0-D value", loc=tracer.current_loc())
    k = int(_constant(tracer, k, "k of torch.topk", (int,)))
    axis = _dim(tracer, dim, value.type.ndim, "torch.topk")
    largest = _constant(tracer, largest, "largest= of torch.topk", (bool,))
    _check_sortable(tracer, value, "torch.topk")
    extent = require_whole(tracer, value, axis, "torch.topk")
    if not 1 <= k <= extent:
        raise exc.TypeInferenceError(
            f"torch.topk: k={k} is out of range for a dimension of {extent}",
            loc=tracer.current_loc(),
        )
    # results always come sorted (sorted=False allows any order)
    node = tracer.emit(ops.topk, [value], {"dim": axis, "k": k, "largest": largest})
    return torch.return_types.topk(
        (DeviceValue(tracer, node.outputs[0]), DeviceValue(tracer, node.outputs[1]))
    )


# -- gather ----------------------------------------------------------------------------------------


@register(torch.gather, *_methods("gather"))
def _gather(
    tracer: Any, x: Any, dim: Any, index: Any, *, sparse_grad: bool = False, out: Any = None
) -> DeviceValue:
    if out is not None:
        raise exc.NotAllowedOnDevice("out= in torch.gather", loc=tracer.current_loc())
    source = _tensor(tracer, x, "torch.gather")
    idx = _tensor(tracer, index, "the index of torch.gather")
    loc = tracer.current_loc()
    if idx.dtype.is_floating_point or idx.dtype == torch.bool:
        raise exc.TypeInferenceError(
            f"torch.gather needs an integer index, got {idx.dtype}", loc=loc
        )
    if source.type.ndim == 0 or idx.type.ndim != source.type.ndim:
        raise exc.RankMismatch(
            source.type.ndim, idx.type.ndim, "the index of torch.gather", loc=loc
        )
    axis = _dim(tracer, dim, source.type.ndim, "torch.gather")
    for position, (a, b) in enumerate(zip(source.shape, idx.shape, strict=True)):
        if position != axis and not ops.dims_equal(a, b):
            raise exc.ShapeMismatch(
                f"torch.gather: index dim {position} ({b}) must equal the source's ({a}) in device code",
                loc=loc,
            )
    require_whole(tracer, source, axis, "torch.gather")
    return tracer.wrap(tracer.emit(ops.gather, [source, idx], {"dim": axis}))


# -- stack, cat, split, join -------------------------------------------------------------------------


def _common(
    tracer: Any,
    values: Sequence[Value],
    shape: tuple,
    dtype: torch.dtype,
    keep_dim: int | None = None,
) -> list[Value]:
    """`values` cast to `dtype` and expanded to `shape` (except along `keep_dim`)."""
    result = []
    for value in values:
        target = list(shape)
        if keep_dim is not None:
            target[keep_dim] = value.shape[keep_dim]
        if tuple(value.shape) != tuple(target):
            value = tracer.emit(ops.view_expand, [value], {"shape": tuple(target)}).output
        if value.dtype != dtype:
            value = tracer.emit(ops.cast, [value], {"dtype": dtype}).output
        result.append(value)
    return result


def _sequence(tracer: Any, tensors: Any, what: str) -> list[Value]:
    if isinstance(tensors, (DeviceValue, HostTensor)) or not isinstance(tensors, (list, tuple)):
        raise exc.TypeInferenceError(
            f"{what} takes a list or tuple of tensors", loc=tracer.current_loc()
        )
    if not tensors:
        raise exc.TypeInferenceError(f"{what} of an empty list", loc=tracer.current_loc())
    return [_tensor(tracer, t, what) for t in tensors]


def emit_stack(tracer: Any, values: list[Value], dim: Any, what: str) -> DeviceValue:
    ndim = values[0].type.ndim
    axis = _constant(tracer, dim, f"the dim of {what}", (int,))
    if not -(ndim + 1) <= axis <= ndim:
        raise exc.TypeInferenceError(
            f"{what}: dim {axis} is out of range for {ndim}-D values", loc=tracer.current_loc()
        )
    axis %= ndim + 1
    try:
        shape = ops.broadcast_shapes(*(v.shape for v in values))
    except ValueError as error:
        raise exc.ShapeMismatch(str(error), loc=tracer.current_loc()) from None
    dtype = ops.promote_types(*values)
    return tracer.wrap(tracer.emit(ops.stack, _common(tracer, values, shape, dtype), {"dim": axis}))


@register(torch.stack, *_methods("stack"))
def _stack(tracer: Any, tensors: Any, dim: Any = 0, *, out: Any = None) -> DeviceValue:
    if out is not None:
        raise exc.NotAllowedOnDevice("out= in torch.stack", loc=tracer.current_loc())
    values = _sequence(tracer, tensors, "torch.stack")
    first = values[0].shape
    for value in values[1:]:
        if not ops.shapes_equal(value.shape, first):
            raise exc.ShapeMismatch(
                f"torch.stack needs tensors of one shape, got {list(first)} and {list(value.shape)}",
                loc=tracer.current_loc(),
            )
    return emit_stack(tracer, values, dim, "torch.stack")


def _cat(tracer: Any, tensors: Any, dim: Any = 0, *, out: Any = None) -> DeviceValue:
    loc = tracer.current_loc()
    if out is not None:
        raise exc.NotAllowedOnDevice("out= in torch.cat", loc=loc)
    values = _sequence(tracer, tensors, "torch.cat")
    ndim = values[0].type.ndim
    if ndim == 0:
        raise exc.TypeInferenceError("torch.cat of 0-D values (use torch.stack)", loc=loc)
    for value in values[1:]:
        if value.type.ndim != ndim:
            raise exc.RankMismatch(ndim, value.type.ndim, "torch.cat", loc=loc)
    axis = _dim(tracer, dim, ndim, "torch.cat")
    if len(values) == 1:
        return DeviceValue(tracer, values[0])
    sizes = []
    for value in values:
        size = concrete_extent(tracer, value.shape[axis])
        if size is None:
            raise exc.TypeInferenceError(
                f"torch.cat along dim {axis}, a tile dimension ({value.shape[axis]}): concatenate full slices "
                "or constant-size values, or store the parts to their own offsets",
                loc=loc,
            )
        sizes.append(size)
    rest = [tuple(d for i, d in enumerate(v.shape) if i != axis) for v in values]
    for other in rest[1:]:
        if not ops.shapes_equal(other, rest[0]):
            raise exc.ShapeMismatch(
                f"torch.cat: the dims other than {axis} must match, got {[list(v.shape) for v in values]}",
                loc=loc,
            )
    shape = tuple(values[0].shape)
    dtype = ops.promote_types(*values)
    inputs = _common(tracer, values, shape, dtype, keep_dim=axis)
    return tracer.wrap(tracer.emit(ops.cat, inputs, {"dim": axis, "sizes": tuple(sizes)}))


register(
    torch.cat,
    *(
        f
        for f in (getattr(torch, "concat", None), getattr(torch, "concatenate", None))
        if f is not torch.cat
    ),
)(_cat)


def split(tracer: Any, tensor: Any) -> tuple[DeviceValue, DeviceValue]:
    """`hl.split`: the two halves of a last dimension of size 2."""
    value = _tensor(tracer, tensor, "hl.split")
    if value.type.ndim == 0 or concrete_extent(tracer, value.shape[-1]) != 2:
        raise exc.ShapeMismatch(
            f"hl.split needs a last dimension of size 2, got a value of shape {list(value.shape)}",
            loc=tracer.current_loc(),
        )
    node = tracer.emit(ops.split, [value])
    return DeviceValue(tracer, node.outputs[0]), DeviceValue(tracer, node.outputs[1])


def join(tracer: Any, a: Any, b: Any) -> DeviceValue:
    """`hl.join`: stack two (broadcast) values along a new last dimension of size 2."""
    values = [_tensor(tracer, a, "hl.join"), _tensor(tracer, b, "hl.join")]
    ndim = max(v.type.ndim for v in values)
    return emit_stack(tracer, values, ndim, "hl.join")
