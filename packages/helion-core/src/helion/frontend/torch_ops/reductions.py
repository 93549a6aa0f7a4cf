"""Reductions, scans and norms in device code: sum, prod, amax, argmax, max/min, mean, var,
std, logsumexp, softmax, cumsum, cummax, vector norms.

Every reduction is over one dim; composite ones (mean, var, softmax, norms) are decomposed into
the primitive reductions, accumulating in float32 for fp16/bf16 as torch does.
"""

from __future__ import annotations

import math
from typing import Any

import sympy
import torch
import torch.nn.functional as F

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import TileProxy
from helion.frontend.torch_ops.elementwise import emit_binary
from helion.frontend.torch_ops.registry import Handler
from helion.frontend.torch_ops.registry import describe
from helion.frontend.torch_ops.registry import refuse_out
from helion.frontend.torch_ops.registry import register
from helion.frontend.torch_ops.registry import tensor_methods
from helion.frontend.torch_ops.registry import unsupported_argument
from helion.frontend.torch_ops.values import as_value
from helion.frontend.torch_ops.values import call
from helion.frontend.torch_ops.values import cast
from helion.frontend.torch_ops.values import is_number
from helion.frontend.torch_ops.values import opmath
from helion.frontend.torch_ops.values import upcast
from helion.ir.core import Value
from helion.language import _ops as ops


def _norm_dim(tracer: Any, value: Value, dim: Any, what: str) -> int:
    ndim = value.type.ndim
    if dim is None:
        if ndim == 1:
            return 0
        if ndim == 0:
            raise exc.InvalidReductionDim(what, "a 0-D value", loc=tracer.current_loc())
        raise exc.MultipleReductionDims(what, loc=tracer.current_loc())
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            raise exc.MultipleReductionDims(what, loc=tracer.current_loc())
        dim = dim[0]
    if not isinstance(dim, int) or not -max(ndim, 1) <= dim < max(ndim, 1):
        raise exc.InvalidReductionDim(what, dim, loc=tracer.current_loc())
    return dim % ndim


def _reduce(kind: str, name: str | None = None) -> Handler:
    op = ops.REDUCTIONS[kind]
    name = name or f"torch.{kind}"

    def handler(
        tracer: Any, x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
    ) -> DeviceValue:
        value = as_value(tracer, x)
        axis = _norm_dim(tracer, value, dim, f"torch.{kind}")
        attrs = {"dim": axis, "keepdim": bool(keepdim)}
        if dtype is not None:
            value = cast(tracer, DeviceValue(tracer, value), dtype).value
        if kind in ("sum", "prod") and not value.dtype.is_floating_point:
            attrs["dtype"] = torch.int64
        if kind in ("argmax", "argmin"):
            attrs["dtype"] = torch.int64
        if kind in ("any", "all"):
            attrs["dtype"] = torch.bool
        if _empty_dim(tracer, value.shape[axis]):
            return _empty_reduce(tracer, kind, value, attrs, name)
        return tracer.wrap(tracer.emit(op, [value], attrs))

    return handler


# what a reduction over no elements gives (torch's values); the others raise, as in torch
_EMPTY_IDENTITIES = {"sum": 0, "prod": 1, "any": False, "all": True}


def _empty_dim(tracer: Any, dim: sympy.Expr) -> bool:
    """Whether a dimension is known to have no elements (a `:` slice of a size-0 dimension)."""
    if dim.is_Integer:
        return int(dim) == 0
    # the symbol of a length-0 slice stands for one lane in code (block sizes are positive)
    return tracer.rdim_extents.get(dim) == 0


def _empty_reduce(tracer: Any, kind: str, value: Value, attrs: dict, name: str) -> DeviceValue:
    """A reduction over a dimension of size 0: its identity, without reading `value` (the
    compiled backends would reduce the one padded lane they hold for the empty dimension)."""
    if kind not in _EMPTY_IDENTITIES:
        raise exc.EmptyReduction(name, attrs["dim"], loc=tracer.current_loc())
    shape = list(value.shape)
    if attrs["keepdim"]:
        shape[attrs["dim"]] = sympy.Integer(1)
    else:
        del shape[attrs["dim"]]
    full_attrs = {
        "shape": tuple(shape),
        "value": _EMPTY_IDENTITIES[kind],
        "dtype": attrs.get("dtype") or value.dtype,
    }
    return tracer.wrap(tracer.emit(ops.full, [], full_attrs))


for _kind in ("sum", "prod", "amax", "amin", "any", "all", "argmax", "argmin"):
    register(getattr(torch, _kind), *tensor_methods(_kind))(_reduce(_kind))


def _max_min(kind: str) -> Handler:
    def handler(tracer: Any, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
        if isinstance(dim, (DeviceValue, TileProxy, float)):
            return emit_binary(tracer, "maximum" if kind == "max" else "minimum", x, dim)
        if dim is None:
            return _reduce("a" + kind, f"torch.{kind}")(tracer, x, None, False)
        values = _reduce("a" + kind, f"torch.{kind}")(tracer, x, dim, keepdim)
        indices = _reduce("arg" + kind, f"torch.{kind}")(tracer, x, dim, keepdim)
        return (
            torch.return_types.max((values, indices))
            if kind == "max"
            else torch.return_types.min((values, indices))
        )

    return handler


register(torch.max, *tensor_methods("max"))(_max_min("max"))
register(torch.min, *tensor_methods("min"))(_max_min("min"))


def _extent(tracer: Any, value: Value, dim: int) -> Any:
    """The number of valid elements along `dim` (for mean / var)."""
    if _empty_dim(tracer, value.shape[dim]):
        return 0  # dim_size gives the one lane code holds for it
    size = tracer.dim_size(value.shape[dim])
    if isinstance(size, int):
        return int(size)
    # a tile dimension: the valid lanes of this tile, end - begin
    info = next(b for b in tracer.ir.block_sizes if b.symbol == value.shape[dim])
    raise exc.InvalidReductionDim(
        "mean/var",
        f"tile dimension {info.block_id} (the count of valid lanes varies per tile; use sum() and divide)",
        loc=tracer.current_loc(),
    )


@register(torch.mean, *tensor_methods("mean"))
def _mean(
    tracer: Any, x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> DeviceValue:
    value = as_value(tracer, x)
    if dtype is not None:
        value = cast(tracer, DeviceValue(tracer, value), dtype).value
    axis = _norm_dim(tracer, value, dim, "torch.mean")
    source = DeviceValue(tracer, value)
    total = _reduce("sum")(tracer, upcast(tracer, source), axis, keepdim)
    result = tracer.call_torch(torch.div, (total, _extent(tracer, value, axis)), {})
    return cast(tracer, result, value.dtype if value.dtype.is_floating_point else torch.float32)


def _var_parts(tracer: Any, x: Any, dim: Any, correction: Any, unbiased: Any, keepdim: bool):
    value = as_value(tracer, x)
    axis = _norm_dim(tracer, value, dim, "torch.var")
    if correction is None:
        correction = 1 if unbiased in (None, True) else 0
    source = upcast(tracer, DeviceValue(tracer, value))
    count = _extent(tracer, value, axis)
    mean = tracer.call_torch(torch.div, (_reduce("sum")(tracer, source, axis, True), count), {})
    centered = tracer.call_torch(torch.sub, (source, mean), {})
    squares = tracer.call_torch(torch.mul, (centered, centered), {})
    var = tracer.call_torch(
        torch.div, (_reduce("sum")(tracer, squares, axis, keepdim), max(count - correction, 0)), {}
    )
    if not keepdim:
        mean = tracer.call_torch(torch.squeeze, (mean, axis), {})
    return value.dtype, var, mean


@register(torch.var, *tensor_methods("var"))
def _var(
    tracer: Any,
    x: Any,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> DeviceValue:
    dtype, var, _ = _var_parts(tracer, x, dim, correction, unbiased, keepdim)
    return cast(tracer, var, dtype)


@register(torch.std, *tensor_methods("std"))
def _std(
    tracer: Any,
    x: Any,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
) -> DeviceValue:
    dtype, var, _ = _var_parts(tracer, x, dim, correction, unbiased, keepdim)
    return cast(tracer, tracer.call_torch(torch.sqrt, (var,), {}), dtype)


@register(torch.var_mean)
def _var_mean(
    tracer: Any,
    x: Any,
    dim: Any = None,
    unbiased: Any = None,
    keepdim: bool = False,
    *,
    correction: Any = None,
):
    dtype, var, mean = _var_parts(tracer, x, dim, correction, unbiased, keepdim)
    return cast(tracer, var, dtype), cast(tracer, mean, dtype)


@register(torch.logsumexp, *tensor_methods("logsumexp"))
def _logsumexp(tracer: Any, x: Any, dim: Any, keepdim: bool = False) -> DeviceValue:
    value = as_value(tracer, x)
    axis = _norm_dim(tracer, value, dim, "torch.logsumexp")
    source = upcast(tracer, DeviceValue(tracer, value))
    if _empty_dim(tracer, value.shape[axis]):
        # log(0): torch gives -inf, where the amax below has nothing to reduce
        attrs = {"dim": axis, "keepdim": keepdim}
        empty = _empty_reduce(tracer, "sum", source.value, attrs, "torch.logsumexp")
        result = tracer.call_torch(torch.log, (empty,), {})
        return cast(tracer, result, value.dtype if value.dtype.is_floating_point else torch.float32)
    peak = _reduce("amax")(tracer, source, axis, True)
    # a row of -inf would give nan from (-inf) - (-inf); use 0 as its shift instead
    safe_peak = tracer.call_torch(
        torch.where, (tracer.call_torch(torch.isinf, (peak,), {}), 0.0, peak), {}
    )
    shifted = tracer.call_torch(
        torch.exp, (tracer.call_torch(torch.sub, (source, safe_peak), {}),), {}
    )
    total = _reduce("sum")(tracer, shifted, axis, keepdim)
    if not keepdim:
        safe_peak = tracer.call_torch(torch.squeeze, (safe_peak, axis), {})
    result = tracer.call_torch(
        torch.add, (tracer.call_torch(torch.log, (total,), {}), safe_peak), {}
    )
    return cast(tracer, result, value.dtype if value.dtype.is_floating_point else torch.float32)


def _softmax_impl(tracer: Any, x: Any, dim: Any, dtype: Any, log: bool) -> DeviceValue:
    value = as_value(tracer, x)
    if dtype is not None:
        value = cast(tracer, DeviceValue(tracer, value), dtype).value
    axis = _norm_dim(tracer, value, dim, "softmax")
    source = upcast(tracer, DeviceValue(tracer, value))
    if _empty_dim(tracer, value.shape[axis]):
        # an empty result: its shape is all there is, where the amax below has nothing to reduce
        return cast(tracer, source, value.dtype)
    peak = _reduce("amax")(tracer, source, axis, True)
    shifted = tracer.call_torch(torch.sub, (source, peak), {})
    exps = tracer.call_torch(torch.exp, (shifted,), {})
    total = _reduce("sum")(tracer, exps, axis, True)
    if log:
        result = tracer.call_torch(
            torch.sub, (shifted, tracer.call_torch(torch.log, (total,), {})), {}
        )
    else:
        result = tracer.call_torch(torch.div, (exps, total), {})
    return cast(tracer, result, value.dtype)


# torch.softmax(input, dim, dtype) and F.softmax(input, dim, _stacklevel, dtype) differ in their
# third positional argument
@register(torch.softmax, *tensor_methods("softmax"))
def _softmax(tracer: Any, x: Any, dim: Any = None, dtype: Any = None) -> DeviceValue:
    return _softmax_impl(tracer, x, dim, dtype, log=False)


@register(F.softmax)
def _functional_softmax(
    tracer: Any, x: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None
) -> DeviceValue:
    return _softmax_impl(tracer, x, dim, dtype, log=False)


@register(torch.log_softmax, *tensor_methods("log_softmax"))
def _log_softmax(tracer: Any, x: Any, dim: Any = None, dtype: Any = None) -> DeviceValue:
    return _softmax_impl(tracer, x, dim, dtype, log=True)


@register(F.log_softmax)
def _functional_log_softmax(
    tracer: Any, x: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None
) -> DeviceValue:
    return _softmax_impl(tracer, x, dim, dtype, log=True)


def _scan(kind: str) -> Handler:
    def handler(tracer: Any, x: Any, dim: int, *, dtype: Any = None) -> DeviceValue:
        value = as_value(tracer, x)
        if dtype is not None:
            value = cast(tracer, DeviceValue(tracer, value), dtype).value
        axis = _norm_dim(tracer, value, dim, f"torch.{kind}")
        attrs = {"dim": axis, "reverse": False}
        if not value.dtype.is_floating_point:
            attrs["dtype"] = torch.int64
        return tracer.wrap(tracer.emit(ops.SCANS[kind], [value], attrs))

    return handler


register(torch.cumsum, *tensor_methods("cumsum"))(_scan("cumsum"))
register(torch.cumprod, *tensor_methods("cumprod"))(_scan("cumprod"))


def _cum_extreme(kind: str) -> Handler:
    def handler(tracer: Any, x: Any, dim: int) -> Any:
        from helion.frontend.combine import trace_cum_extreme

        return trace_cum_extreme(tracer, kind, x, dim)

    return handler


register(torch.cummax, *tensor_methods("cummax"))(_cum_extreme("cummax"))
register(torch.cummin, *tensor_methods("cummin"))(_cum_extreme("cummin"))


# -- norms ---------------------------------------------------------------------------------------


def _vector_norm_impl(
    tracer: Any, x: Any, order: Any, dim: Any, keepdim: bool, dtype: Any, name: str
) -> DeviceValue:
    """The `order`-norm of x over one dim, accumulated in float32 for fp16/bf16 (as torch):
    2: sqrt(sum(x**2)), 1: sum(|x|), ±inf: max/min(|x|), 0: count of non-zeros, else
    sum(|x|**order) ** (1 / order)."""
    if isinstance(order, bool) or not is_number(order):
        raise unsupported_argument(
            tracer, name, f"ord={describe(order)}", "a vector norm's ord must be a number."
        )
    if dtype is not None:
        x = cast(tracer, x, dtype)
    source, result_dtype = opmath(tracer, x, name)
    axis = _norm_dim(tracer, source.value, dim, name)
    magnitude = call(tracer, torch.abs, source)
    if order == math.inf:
        result = _reduce("amax", name)(tracer, magnitude, axis, keepdim)
    elif order == -math.inf:
        result = _reduce("amin", name)(tracer, magnitude, axis, keepdim)
    elif order == 0:
        nonzero = cast(tracer, call(tracer, torch.ne, source, 0), source.dtype)
        result = _reduce("sum", name)(tracer, nonzero, axis, keepdim)
    elif order == 1:
        result = _reduce("sum", name)(tracer, magnitude, axis, keepdim)
    elif order == 2:
        squares = call(tracer, torch.mul, source, source)
        result = call(tracer, torch.sqrt, _reduce("sum", name)(tracer, squares, axis, keepdim))
    else:
        powers = call(tracer, torch.pow, magnitude, float(order))
        total = _reduce("sum", name)(tracer, powers, axis, keepdim)
        result = call(tracer, torch.pow, total, 1.0 / order)
    return cast(tracer, result, result_dtype)


@register(torch.linalg.vector_norm)
def _vector_norm(
    tracer: Any,
    x: Any,
    ord: Any = 2,
    dim: Any = None,
    keepdim: bool = False,
    *,
    dtype: Any = None,
    out: Any = None,
) -> DeviceValue:
    refuse_out(tracer, "torch.linalg.vector_norm", out)
    return _vector_norm_impl(tracer, x, ord, dim, keepdim, dtype, "torch.linalg.vector_norm")


@register(torch.linalg.norm)
def _linalg_norm(
    tracer: Any,
    x: Any,
    ord: Any = None,
    dim: Any = None,
    keepdim: bool = False,
    *,
    out: Any = None,
    dtype: Any = None,
) -> DeviceValue:
    """torch.linalg.norm over one dim (a vector norm); matrix norms are refused."""
    refuse_out(tracer, "torch.linalg.norm", out)
    if isinstance(ord, str) or (isinstance(dim, (list, tuple)) and len(dim) != 1):
        raise unsupported_argument(
            tracer,
            "torch.linalg.norm",
            f"ord={ord!r}" if isinstance(ord, str) else f"dim={dim!r}",
            "device code computes vector norms over one dim; matrix norms are not supported.",
        )
    if dim is None and as_value(tracer, x).type.ndim != 1:
        raise exc.MultipleReductionDims("torch.linalg.norm", loc=tracer.current_loc())
    order = 2 if ord is None else ord
    return _vector_norm_impl(tracer, x, order, dim, keepdim, dtype, "torch.linalg.norm")


@register(torch.norm, *tensor_methods("norm"))
def _norm(
    tracer: Any,
    x: Any,
    p: Any = "fro",
    dim: Any = None,
    keepdim: bool = False,
    out: Any = None,
    dtype: Any = None,
) -> DeviceValue:
    """torch.norm / x.norm over one dim: p='fro' (the default) is the 2-norm there."""
    refuse_out(tracer, "torch.norm", out)
    if p == "fro":
        p = 2
    if isinstance(p, str):
        raise unsupported_argument(
            tracer,
            "torch.norm",
            f"p={p!r}",
            "device code computes vector norms over one dim; matrix norms are not supported.",
        )
    return _vector_norm_impl(tracer, x, 2 if p is None else p, dim, keepdim, dtype, "torch.norm")
