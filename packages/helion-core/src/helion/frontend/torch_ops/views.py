"""Views in device code: reshape, permute, transpose, unsqueeze, squeeze, expand and the
identity methods (contiguous, clone, detach).
"""

from __future__ import annotations

from typing import Any

import sympy
import torch

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import SymDim
from helion.frontend.torch_ops.registry import register
from helion.frontend.torch_ops.registry import tensor_methods
from helion.frontend.torch_ops.values import as_value
from helion.frontend.torch_ops.values import shape_arg
from helion.language import _ops as ops


def _numel(shape: tuple) -> sympy.Expr:
    total: sympy.Expr = sympy.Integer(1)
    for d in shape:
        total = total * d
    return total


@register(torch.reshape, *tensor_methods("reshape", "view"))
def _reshape(tracer: Any, x: Any, *shape_args: Any) -> DeviceValue:
    if len(shape_args) == 1 and isinstance(shape_args[0], torch.dtype):
        raise exc.NotAllowedOnDevice("view(dtype) in device code", loc=tracer.current_loc())
    value = as_value(tracer, x)
    items = shape_arg(shape_args)
    dims: list[Any] = []
    unknown = None
    for i, item in enumerate(items):
        if isinstance(item, int) and not isinstance(item, SymDim) and item == -1:
            unknown = i
            dims.append(None)
        else:
            dims.append(tracer.shape_item(item))
    total = _numel(value.shape)
    if unknown is not None:
        known = _numel(tuple(d for d in dims if d is not None))
        dims[unknown] = sympy.simplify(total / known)
    if not ops.dims_equal(_numel(tuple(dims)), total):
        raise exc.ShapeMismatch(
            f"cannot reshape {list(value.shape)} to {dims}", loc=tracer.current_loc()
        )
    return tracer.wrap(tracer.emit(ops.view_reshape, [value], {"shape": tuple(dims)}))


@register(torch.permute, *tensor_methods("permute"))
def _permute(tracer: Any, x: Any, *dims: Any) -> DeviceValue:
    value = as_value(tracer, x)
    order = [d % value.type.ndim for d in shape_arg(dims)]
    if sorted(order) != list(range(value.type.ndim)):
        raise exc.ShapeMismatch(
            f"{order} is not a permutation of {value.type.ndim} dims", loc=tracer.current_loc()
        )
    return tracer.wrap(tracer.emit(ops.view_permute, [value], {"dims": tuple(order)}))


@register(torch.transpose, *tensor_methods("transpose", "swapaxes"))
def _transpose(tracer: Any, x: Any, dim0: int, dim1: int) -> DeviceValue:
    value = as_value(tracer, x)
    order = list(range(value.type.ndim))
    order[dim0], order[dim1] = order[dim1], order[dim0]
    return tracer.wrap(tracer.emit(ops.view_permute, [value], {"dims": tuple(order)}))


@register(torch.t, *tensor_methods("t"))
def _t(tracer: Any, x: Any) -> DeviceValue:
    value = as_value(tracer, x)
    if value.type.ndim < 2:
        return DeviceValue(tracer, value)
    return _transpose(tracer, x, 0, 1)


@register(torch.unsqueeze, *tensor_methods("unsqueeze"))
def _unsqueeze(tracer: Any, x: Any, dim: int) -> DeviceValue:
    value = as_value(tracer, x)
    ndim = value.type.ndim
    dim = dim % (ndim + 1)
    items: list[Any] = ["slice"] * ndim
    items.insert(dim, None)
    shape = list(value.shape)
    shape.insert(dim, sympy.Integer(1))
    return tracer.wrap(
        tracer.emit(ops.view_subscript, [value], {"items": tuple(items), "shape": tuple(shape)})
    )


@register(torch.squeeze, *tensor_methods("squeeze"))
def _squeeze(tracer: Any, x: Any, dim: Any = None) -> DeviceValue:
    value = as_value(tracer, x)
    shape = list(value.shape)
    dims = (
        range(len(shape))
        if dim is None
        else [d % len(shape) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
    )
    keep = [i for i in range(len(shape)) if not (i in dims and shape[i] == 1)]
    new_shape = tuple(shape[i] for i in keep)
    if len(new_shape) == len(shape):
        return DeviceValue(tracer, value)
    return tracer.wrap(tracer.emit(ops.view_reshape, [value], {"shape": new_shape}))


@register(*tensor_methods("expand"))
def _expand(tracer: Any, x: Any, *sizes: Any) -> DeviceValue:
    value = as_value(tracer, x)
    items = shape_arg(sizes)
    offset = len(items) - value.type.ndim
    dims = []
    for i, item in enumerate(items):
        if isinstance(item, int) and not isinstance(item, SymDim) and item == -1:
            dims.append(value.shape[i - offset])
        else:
            dims.append(tracer.shape_item(item))
    try:
        shape = ops.broadcast_shapes(value.shape, tuple(dims))
    except ValueError as error:
        raise exc.ShapeMismatch(str(error), loc=tracer.current_loc()) from None
    return tracer.wrap(tracer.emit(ops.view_expand, [value], {"shape": shape}))


@register(torch.broadcast_to, *tensor_methods("broadcast_to"))
def _broadcast_to(tracer: Any, x: Any, size: Any) -> DeviceValue:
    return _expand(tracer, x, size)


@register(*tensor_methods("expand_as"))
def _expand_as(tracer: Any, x: Any, other: Any) -> DeviceValue:
    return tracer.wrap(
        tracer.emit(
            ops.view_expand, [as_value(tracer, x)], {"shape": as_value(tracer, other).shape}
        )
    )


@register(*tensor_methods("contiguous"))
def _contiguous(tracer: Any, x: Any, memory_format: Any = None) -> Any:
    return x  # a device value has no memory layout


@register(*tensor_methods("clone"), torch.clone)
def _clone(tracer: Any, x: Any, *, memory_format: Any = None) -> Any:
    return x  # device values are never mutated, so a value is its own copy


@register(*tensor_methods("detach"))
def _detach(tracer: Any, x: Any) -> Any:
    return x
