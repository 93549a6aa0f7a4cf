"""The torch surface of device code: one table from torch callables to IR builders.

The function form and the method form share one entry (`torch.sum` and `torch.Tensor.sum`), so
`x.sum(-1)` and `torch.sum(x, -1)` produce the same IR. Composite ops (softmax, mean, var,
logsumexp, ...) are decomposed here into primitive ops.
"""

from __future__ import annotations

import operator
from typing import Any
from typing import Callable

import sympy
import torch
import torch.nn.functional as F

from helion import exc
from helion.frontend import rng
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import SymDim
from helion.frontend.proxies import TileProxy
from helion.ir.core import Value
from helion.language import _ops as ops

Handler = Callable[..., Any]
_TABLE: dict[Any, Handler] = {}


def lookup(func: Any) -> Handler | None:
    try:
        return _TABLE.get(func)
    except TypeError:
        return None


def register(*funcs: Any) -> Callable[[Handler], Handler]:
    def decorator(handler: Handler) -> Handler:
        for func in funcs:
            if func is None:
                continue
            if func in _TABLE:
                raise ValueError(f"{func} registered twice in the torch table")
            _TABLE[func] = handler
        return handler

    return decorator


def _methods(*names: str) -> list[Any]:
    found: list[Any] = []
    for name in names:
        method = getattr(torch.Tensor, name, None)
        if method is not None and method not in found:
            found.append(method)
    return found


def _value(tracer: Any, x: Any) -> Value:
    return tracer.as_value(x)


# -- elementwise ---------------------------------------------------------------------------------


def _unary(op_name: str) -> Handler:
    op = ops.UNARY[op_name]

    def handler(tracer: Any, x: Any, *args: Any, **kwargs: Any) -> DeviceValue:
        return tracer.wrap(tracer.emit(op, [_value(tracer, x)], kwargs_to_attrs(kwargs)))

    return handler


def kwargs_to_attrs(kwargs: dict) -> dict:
    return {k: v for k, v in kwargs.items() if k in ("approximate",)}


def _binary(op_name: str, reverse: bool = False) -> Handler:
    op = ops.BINARY[op_name]

    def handler(
        tracer: Any, a: Any, b: Any, *, alpha: Any = None, out: Any = None, **kwargs: Any
    ) -> DeviceValue:
        if out is not None:
            raise exc.NotAllowedOnDevice(f"out= in torch.{op_name}", loc=tracer.current_loc())
        if alpha is not None:
            b = tracer.call_torch(torch.mul, (b, alpha), {})
        lhs, rhs = (b, a) if reverse else (a, b)
        return tracer.wrap(tracer.emit(op, [tracer.to_operand(lhs), tracer.to_operand(rhs)]))

    return handler


_UNARY_FUNCS = {
    "exp": (torch.exp, "exp"),
    "exp2": (torch.exp2, "exp2"),
    "expm1": (torch.expm1, "expm1"),
    "log": (torch.log, "log"),
    "log2": (torch.log2, "log2"),
    "log10": (torch.log10, "log10"),
    "log1p": (torch.log1p, "log1p"),
    "sqrt": (torch.sqrt, "sqrt"),
    "rsqrt": (torch.rsqrt, "rsqrt"),
    "sin": (torch.sin, "sin"),
    "cos": (torch.cos, "cos"),
    "tan": (torch.tan, "tan"),
    "tanh": (torch.tanh, "tanh"),
    "sigmoid": (torch.sigmoid, "sigmoid"),
    "erf": (torch.erf, "erf"),
    "erfinv": (torch.erfinv, "erfinv"),
    "atan": (torch.atan, "atan"),
    "asin": (torch.asin, "asin"),
    "acos": (torch.acos, "acos"),
    "sinh": (torch.sinh, "sinh"),
    "cosh": (torch.cosh, "cosh"),
    "reciprocal": (torch.reciprocal, "reciprocal"),
    "neg": (torch.neg, "neg"),
    "abs": (torch.abs, "abs"),
    "relu": (torch.relu, "relu"),
    "floor": (torch.floor, "floor"),
    "ceil": (torch.ceil, "ceil"),
    "round": (torch.round, "round"),
    "trunc": (torch.trunc, "trunc"),
    "sign": (torch.sign, "sign"),
    "bitwise_not": (torch.bitwise_not, "bitwise_not"),
    "logical_not": (torch.logical_not, "logical_not"),
    "isnan": (torch.isnan, "isnan"),
    "isinf": (torch.isinf, "isinf"),
    "isfinite": (torch.isfinite, "isfinite"),
    "signbit": (torch.signbit, "signbit"),
}
for _name, (_func, _op_name) in _UNARY_FUNCS.items():
    register(_func, *_methods(_name))(_unary(_op_name))
for _alias, _op_name in (
    (torch.Tensor.__neg__, "neg"),
    (torch.Tensor.__abs__, "abs"),
    (torch.Tensor.__invert__, "bitwise_not"),
):
    if _alias not in _TABLE:  # some dunders are the same object as the named method
        register(_alias)(_unary(_op_name))
register(F.relu)(_unary("relu"))
register(F.silu)(_unary("silu"))
register(F.sigmoid if hasattr(F, "sigmoid") and F.sigmoid is not torch.sigmoid else None)(
    _unary("sigmoid")
)
register(F.tanh if hasattr(F, "tanh") and F.tanh is not torch.tanh else None)(_unary("tanh"))


@register(F.gelu)
def _gelu(tracer: Any, x: Any, approximate: str = "none") -> DeviceValue:
    if approximate not in ("none", "tanh"):
        raise exc.TypeInferenceError(
            f"gelu approximate must be 'none' or 'tanh', got {approximate!r}"
        )
    return tracer.wrap(
        tracer.emit(ops.UNARY["gelu"], [_value(tracer, x)], {"approximate": approximate})
    )


@register(F.softplus)
def _softplus(tracer: Any, x: Any, beta: float = 1.0, threshold: float = 20.0) -> DeviceValue:
    scaled = tracer.call_torch(torch.mul, (x, beta), {}) if beta != 1.0 else x
    soft = tracer.call_torch(torch.log1p, (tracer.call_torch(torch.exp, (scaled,), {}),), {})
    if beta != 1.0:
        soft = tracer.call_torch(torch.div, (soft, beta), {})
    big = tracer.call_torch(operator.gt, (scaled, threshold), {})
    return tracer.call_torch(torch.where, (big, x, soft), {})


register(F.leaky_relu)(
    lambda tracer, x, negative_slope=0.01, inplace=False: tracer.call_torch(
        torch.where,
        (
            tracer.call_torch(operator.gt, (x, 0), {}),
            x,
            tracer.call_torch(torch.mul, (x, negative_slope), {}),
        ),
        {},
    )
)

_BINARY_FUNCS = {
    "add": (torch.add, ("add", "__add__"), "__radd__"),
    "sub": (torch.sub, ("sub", "subtract", "__sub__"), "__rsub__"),
    "mul": (torch.mul, ("mul", "multiply", "__mul__"), "__rmul__"),
    "floordiv": (torch.floor_divide, ("floor_divide", "__floordiv__"), "__rfloordiv__"),
    "remainder": (torch.remainder, ("remainder", "__mod__"), "__rmod__"),
    "pow": (torch.pow, ("pow", "__pow__"), "__rpow__"),
    "maximum": (torch.maximum, ("maximum",), None),
    "minimum": (torch.minimum, ("minimum",), None),
    "bitwise_and": (torch.bitwise_and, ("bitwise_and", "__and__"), "__rand__"),
    "bitwise_or": (torch.bitwise_or, ("bitwise_or", "__or__"), "__ror__"),
    "bitwise_xor": (torch.bitwise_xor, ("bitwise_xor", "__xor__"), "__rxor__"),
    "left_shift": (torch.bitwise_left_shift, ("bitwise_left_shift", "__lshift__"), None),
    "right_shift": (torch.bitwise_right_shift, ("bitwise_right_shift", "__rshift__"), None),
    "atan2": (torch.atan2, ("atan2",), None),
    "eq": (torch.eq, ("eq", "__eq__"), None),
    "ne": (torch.ne, ("ne", "__ne__"), None),
    "lt": (torch.lt, ("lt", "__lt__"), None),
    "le": (torch.le, ("le", "__le__"), None),
    "gt": (torch.gt, ("gt", "__gt__"), None),
    "ge": (torch.ge, ("ge", "__ge__"), None),
    "logical_and": (torch.logical_and, ("logical_and",), None),
    "logical_or": (torch.logical_or, ("logical_or",), None),
    "logical_xor": (torch.logical_xor, ("logical_xor",), None),
}
for _name, (_func, _method_names, _reverse_name) in _BINARY_FUNCS.items():
    register(_func, *_methods(*_method_names))(_binary(_name))
    if _reverse_name:
        register(*_methods(_reverse_name))(_binary(_name, reverse=True))
register(operator.gt)(_binary("gt"))


def _divide(
    tracer: Any, a: Any, b: Any, *, rounding_mode: str | None = None, reverse: bool = False
) -> DeviceValue:
    lhs, rhs = (b, a) if reverse else (a, b)
    if rounding_mode is None:
        return tracer.wrap(
            tracer.emit(ops.BINARY["truediv"], [tracer.to_operand(lhs), tracer.to_operand(rhs)])
        )
    if rounding_mode == "floor":
        return tracer.wrap(
            tracer.emit(ops.BINARY["floordiv"], [tracer.to_operand(lhs), tracer.to_operand(rhs)])
        )
    if rounding_mode == "trunc":
        quotient = tracer.wrap(
            tracer.emit(ops.BINARY["truediv"], [tracer.to_operand(lhs), tracer.to_operand(rhs)])
        )
        return tracer.call_torch(torch.trunc, (quotient,), {})
    raise exc.TypeInferenceError(f"unknown rounding_mode {rounding_mode!r}")


register(torch.div, torch.true_divide, *_methods("div", "divide", "true_divide", "__truediv__"))(
    _divide
)
register(*_methods("__rtruediv__"))(lambda tracer, a, b: _divide(tracer, a, b, reverse=True))


@register(torch.where, *_methods("where"))
def _where(tracer: Any, cond: Any, a: Any = None, b: Any = None) -> DeviceValue:
    if a is None or b is None:
        raise exc.DataDependentOutputShapeNotSupported(
            "torch.where with one argument", loc=tracer.current_loc()
        )
    return tracer.wrap(
        tracer.emit(ops.where, [_value(tracer, cond), tracer.to_operand(a), tracer.to_operand(b)])
    )


@register(torch.clamp, torch.clip, *_methods("clamp", "clip"))
def _clamp(tracer: Any, x: Any, min: Any = None, max: Any = None) -> DeviceValue:
    inputs = [
        _value(tracer, x),
        None if min is None else tracer.to_operand(min),
        None if max is None else tracer.to_operand(max),
    ]
    return tracer.wrap(tracer.emit(ops.clamp, inputs))


@register(*_methods("clamp_min"))
def _clamp_min(tracer: Any, x: Any, min: Any) -> DeviceValue:
    return _clamp(tracer, x, min=min)


@register(*_methods("clamp_max"))
def _clamp_max(tracer: Any, x: Any, max: Any) -> DeviceValue:
    return _clamp(tracer, x, max=max)


@register(torch.lerp, *_methods("lerp"))
def _lerp(tracer: Any, start: Any, end: Any, weight: Any) -> DeviceValue:
    diff = tracer.call_torch(torch.sub, (end, start), {})
    return tracer.call_torch(
        torch.add, (start, tracer.call_torch(torch.mul, (weight, diff), {})), {}
    )


# -- casts ---------------------------------------------------------------------------------------


def _cast(tracer: Any, x: Any, dtype: torch.dtype) -> DeviceValue:
    value = _value(tracer, x)
    if value.dtype == dtype:
        return DeviceValue(tracer, value)
    return tracer.wrap(tracer.emit(ops.cast, [value], {"dtype": dtype}))


@register(*_methods("to", "type"))
def _to(tracer: Any, x: Any, *args: Any, **kwargs: Any) -> DeviceValue:
    dtype = kwargs.get("dtype")
    for arg in args:
        if isinstance(arg, torch.dtype):
            dtype = arg
        elif isinstance(arg, DeviceValue):
            dtype = arg.dtype
    if dtype is None:
        return x  # .to(device) is a no-op in device code
    return _cast(tracer, x, dtype)


for _method, _dtype in {
    "float": torch.float32,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "double": torch.float64,
    "int": torch.int32,
    "long": torch.int64,
    "bool": torch.bool,
}.items():
    register(getattr(torch.Tensor, _method))(lambda tracer, x, _d=_dtype: _cast(tracer, x, _d))


# -- reductions ----------------------------------------------------------------------------------


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
        value = _value(tracer, x)
        axis = _norm_dim(tracer, value, dim, f"torch.{kind}")
        attrs = {"dim": axis, "keepdim": bool(keepdim)}
        if dtype is not None:
            value = _cast(tracer, DeviceValue(tracer, value), dtype).value
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
    register(getattr(torch, _kind), *_methods(_kind))(_reduce(_kind))


def _max_min(kind: str) -> Handler:
    def handler(tracer: Any, x: Any, dim: Any = None, keepdim: bool = False) -> Any:
        if isinstance(dim, (DeviceValue, TileProxy, float)):
            return _binary("maximum" if kind == "max" else "minimum")(tracer, x, dim)
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


register(torch.max, *_methods("max"))(_max_min("max"))
register(torch.min, *_methods("min"))(_max_min("min"))


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


@register(torch.mean, *_methods("mean"))
def _mean(
    tracer: Any, x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> DeviceValue:
    value = _value(tracer, x)
    if dtype is not None:
        value = _cast(tracer, DeviceValue(tracer, value), dtype).value
    axis = _norm_dim(tracer, value, dim, "torch.mean")
    source = DeviceValue(tracer, value)
    total = _reduce("sum")(tracer, _upcast(tracer, source), axis, keepdim)
    result = tracer.call_torch(torch.div, (total, _extent(tracer, value, axis)), {})
    return _cast(tracer, result, value.dtype if value.dtype.is_floating_point else torch.float32)


def _upcast(tracer: Any, x: DeviceValue) -> DeviceValue:
    if x.dtype in (torch.float16, torch.bfloat16):
        return _cast(tracer, x, torch.float32)
    return x


def _var_parts(tracer: Any, x: Any, dim: Any, correction: Any, unbiased: Any, keepdim: bool):
    value = _value(tracer, x)
    axis = _norm_dim(tracer, value, dim, "torch.var")
    if correction is None:
        correction = 1 if unbiased in (None, True) else 0
    source = _upcast(tracer, DeviceValue(tracer, value))
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


@register(torch.var, *_methods("var"))
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
    return _cast(tracer, var, dtype)


@register(torch.std, *_methods("std"))
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
    return _cast(tracer, tracer.call_torch(torch.sqrt, (var,), {}), dtype)


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
    return _cast(tracer, var, dtype), _cast(tracer, mean, dtype)


@register(torch.logsumexp, *_methods("logsumexp"))
def _logsumexp(tracer: Any, x: Any, dim: Any, keepdim: bool = False) -> DeviceValue:
    value = _value(tracer, x)
    axis = _norm_dim(tracer, value, dim, "torch.logsumexp")
    source = _upcast(tracer, DeviceValue(tracer, value))
    if _empty_dim(tracer, value.shape[axis]):
        # log(0): torch gives -inf, where the amax below has nothing to reduce
        attrs = {"dim": axis, "keepdim": keepdim}
        empty = _empty_reduce(tracer, "sum", source.value, attrs, "torch.logsumexp")
        result = tracer.call_torch(torch.log, (empty,), {})
        return _cast(
            tracer, result, value.dtype if value.dtype.is_floating_point else torch.float32
        )
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
    return _cast(tracer, result, value.dtype if value.dtype.is_floating_point else torch.float32)


def _softmax_impl(tracer: Any, x: Any, dim: Any, dtype: Any, log: bool) -> DeviceValue:
    value = _value(tracer, x)
    if dtype is not None:
        value = _cast(tracer, DeviceValue(tracer, value), dtype).value
    axis = _norm_dim(tracer, value, dim, "softmax")
    source = _upcast(tracer, DeviceValue(tracer, value))
    if _empty_dim(tracer, value.shape[axis]):
        # an empty result: its shape is all there is, where the amax below has nothing to reduce
        return _cast(tracer, source, value.dtype)
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
    return _cast(tracer, result, value.dtype)


@register(torch.softmax, F.softmax, *_methods("softmax"))
def _softmax(
    tracer: Any, x: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None
) -> DeviceValue:
    return _softmax_impl(tracer, x, dim, dtype, log=False)


@register(torch.log_softmax, F.log_softmax, *_methods("log_softmax"))
def _log_softmax(
    tracer: Any, x: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None
) -> DeviceValue:
    return _softmax_impl(tracer, x, dim, dtype, log=True)


def _scan(kind: str) -> Handler:
    def handler(tracer: Any, x: Any, dim: int, *, dtype: Any = None) -> DeviceValue:
        value = _value(tracer, x)
        if dtype is not None:
            value = _cast(tracer, DeviceValue(tracer, value), dtype).value
        axis = _norm_dim(tracer, value, dim, f"torch.{kind}")
        attrs = {"dim": axis, "reverse": False}
        if not value.dtype.is_floating_point:
            attrs["dtype"] = torch.int64
        return tracer.wrap(tracer.emit(ops.SCANS[kind], [value], attrs))

    return handler


register(torch.cumsum, *_methods("cumsum"))(_scan("cumsum"))
register(torch.cumprod, *_methods("cumprod"))(_scan("cumprod"))


def _cum_extreme(kind: str) -> Handler:
    def handler(tracer: Any, x: Any, dim: int) -> Any:
        from helion.frontend.combine import trace_cum_extreme

        return trace_cum_extreme(tracer, kind, x, dim)

    return handler


register(torch.cummax, *_methods("cummax"))(_cum_extreme("cummax"))
register(torch.cummin, *_methods("cummin"))(_cum_extreme("cummin"))


# -- matmul --------------------------------------------------------------------------------------


def emit_dot(
    tracer: Any, a: Any, b: Any, acc: Any, out_dtype: Any, *, default_float32: bool
) -> DeviceValue:
    va, vb = _value(tracer, a), _value(tracer, b)
    if va.type.ndim not in (2, 3) or vb.type.ndim not in (2, 3) or va.type.ndim != vb.type.ndim:
        raise exc.RankMismatch(
            "2-D x 2-D or 3-D x 3-D",
            f"{va.type.ndim}-D x {vb.type.ndim}-D",
            "matmul",
            loc=tracer.current_loc(),
        )
    k_a, k_b = va.shape[-1], vb.shape[-2]
    if not ops.dims_equal(k_a, k_b):
        raise exc.ShapeMismatch(
            f"matmul inner dimensions differ: {k_a} vs {k_b}", loc=tracer.current_loc()
        )
    if va.type.ndim == 3:
        try:
            ops.broadcast_shapes(va.shape[:1], vb.shape[:1])
        except ValueError:
            raise exc.DotBatchDimensionMismatch(
                str(va.shape[0]), str(vb.shape[0]), loc=tracer.current_loc()
            ) from None
    allowed = {
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.int8,
        torch.float8_e4m3fn,
        torch.float8_e5m2,
    }
    for v in (va, vb):
        if v.dtype not in allowed:
            raise exc.TypeInferenceError(
                f"matmul does not support {v.dtype} inputs", loc=tracer.current_loc()
            )
    if (va.dtype == torch.int8) != (vb.dtype == torch.int8):
        raise exc.TypeInferenceError(
            f"matmul of {va.dtype} with {vb.dtype}: int8 must pair with int8",
            loc=tracer.current_loc(),
        )
    if va.dtype != vb.dtype and not default_float32:
        raise exc.TypeInferenceError(
            f"matmul of mismatched dtypes {va.dtype} and {vb.dtype}", loc=tracer.current_loc()
        )
    acc_value = None
    if acc is not None:
        acc_value = _value(tracer, acc)
        if va.dtype == torch.int8 and acc_value.dtype != torch.int32:
            raise exc.TypeInferenceError(
                "int8 matmul needs an int32 accumulator", loc=tracer.current_loc()
            )
        result_dtype = acc_value.dtype
    elif out_dtype is not None:
        result_dtype = out_dtype
    elif va.dtype == torch.int8:
        result_dtype = torch.int32
    elif default_float32:
        result_dtype = torch.float32
    else:
        result_dtype = ops.promote_types(va, vb)
    for dim in (va.shape[-2], va.shape[-1], vb.shape[-1]):
        for info in tracer.ir.block_sizes:
            if info.symbol == dim:
                info.used_in_dot = True
    if va.dtype.itemsize == 1 or vb.dtype.itemsize == 1:
        # 8-bit (fp8, int8) MMA instructions are 32 deep: a K tile below 32 does not compile
        for info in tracer.ir.block_sizes:
            if info.symbol == va.shape[-1]:
                info.min_size = max(info.min_size, 32)
    node = tracer.emit(ops.dot, [va, vb, acc_value], {"out_dtype": result_dtype})
    result = node.output
    if acc_value is not None and not ops.shapes_equal(result.shape, acc_value.shape):
        raise exc.ShapeMismatch(
            f"accumulator shape {list(acc_value.shape)} != product shape {list(result.shape)}",
            loc=tracer.current_loc(),
        )
    return DeviceValue(tracer, result)


@register(torch.mm, torch.matmul, *_methods("mm", "matmul", "__matmul__"))
def _mm(tracer: Any, a: Any, b: Any, *, out: Any = None) -> DeviceValue:
    if out is not None:
        raise exc.NotAllowedOnDevice("matmul(out=...)", loc=tracer.current_loc())
    return emit_dot(tracer, a, b, None, None, default_float32=False)


@register(*_methods("__rmatmul__"))
def _rmatmul(tracer: Any, a: Any, b: Any) -> DeviceValue:
    return emit_dot(tracer, b, a, None, None, default_float32=False)


@register(torch.bmm, *_methods("bmm"))
def _bmm(tracer: Any, a: Any, b: Any, out_dtype: Any = None) -> DeviceValue:
    return emit_dot(tracer, a, b, None, out_dtype, default_float32=False)


def _addmm_like(
    tracer: Any, acc: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1
) -> DeviceValue:
    if beta != 1 or alpha != 1:
        product = emit_dot(tracer, a, b, None, torch.float32, default_float32=True)
        scaled = tracer.call_torch(torch.mul, (product, alpha), {})
        return tracer.call_torch(
            torch.add, (tracer.call_torch(torch.mul, (acc, beta), {}), scaled), {}
        )
    acc_value = _value(tracer, acc)
    product_shape = None
    try:
        return emit_dot(tracer, a, b, DeviceValue(tracer, acc_value), None, default_float32=True)
    except exc.ShapeMismatch:
        product_shape = "mismatch"
    if product_shape:  # acc broadcasts (e.g. a bias row): add it to the product
        product = emit_dot(tracer, a, b, None, acc_value.dtype, default_float32=True)
        return tracer.call_torch(torch.add, (DeviceValue(tracer, acc_value), product), {})
    raise AssertionError("unreachable")


register(torch.addmm, *_methods("addmm"))(_addmm_like)
register(torch.baddbmm, *_methods("baddbmm"))(_addmm_like)


# -- views ---------------------------------------------------------------------------------------


def _shape_arg(args: tuple) -> list:
    if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)):
        return list(args[0])
    return list(args)


def _numel(shape: tuple) -> sympy.Expr:
    total: sympy.Expr = sympy.Integer(1)
    for d in shape:
        total = total * d
    return total


@register(torch.reshape, *_methods("reshape", "view"))
def _reshape(tracer: Any, x: Any, *shape_args: Any) -> DeviceValue:
    if len(shape_args) == 1 and isinstance(shape_args[0], torch.dtype):
        raise exc.NotAllowedOnDevice("view(dtype) in device code", loc=tracer.current_loc())
    value = _value(tracer, x)
    items = _shape_arg(shape_args)
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


@register(torch.permute, *_methods("permute"))
def _permute(tracer: Any, x: Any, *dims: Any) -> DeviceValue:
    value = _value(tracer, x)
    order = [d % value.type.ndim for d in _shape_arg(dims)]
    if sorted(order) != list(range(value.type.ndim)):
        raise exc.ShapeMismatch(
            f"{order} is not a permutation of {value.type.ndim} dims", loc=tracer.current_loc()
        )
    return tracer.wrap(tracer.emit(ops.view_permute, [value], {"dims": tuple(order)}))


@register(torch.transpose, *_methods("transpose", "swapaxes"))
def _transpose(tracer: Any, x: Any, dim0: int, dim1: int) -> DeviceValue:
    value = _value(tracer, x)
    order = list(range(value.type.ndim))
    order[dim0], order[dim1] = order[dim1], order[dim0]
    return tracer.wrap(tracer.emit(ops.view_permute, [value], {"dims": tuple(order)}))


@register(torch.t, *_methods("t"))
def _t(tracer: Any, x: Any) -> DeviceValue:
    value = _value(tracer, x)
    if value.type.ndim < 2:
        return DeviceValue(tracer, value)
    return _transpose(tracer, x, 0, 1)


@register(torch.unsqueeze, *_methods("unsqueeze"))
def _unsqueeze(tracer: Any, x: Any, dim: int) -> DeviceValue:
    value = _value(tracer, x)
    ndim = value.type.ndim
    dim = dim % (ndim + 1)
    items: list[Any] = ["slice"] * ndim
    items.insert(dim, None)
    shape = list(value.shape)
    shape.insert(dim, sympy.Integer(1))
    return tracer.wrap(
        tracer.emit(ops.view_subscript, [value], {"items": tuple(items), "shape": tuple(shape)})
    )


@register(torch.squeeze, *_methods("squeeze"))
def _squeeze(tracer: Any, x: Any, dim: Any = None) -> DeviceValue:
    value = _value(tracer, x)
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


@register(*_methods("expand"))
def _expand(tracer: Any, x: Any, *sizes: Any) -> DeviceValue:
    value = _value(tracer, x)
    items = _shape_arg(sizes)
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


@register(torch.broadcast_to, *_methods("broadcast_to"))
def _broadcast_to(tracer: Any, x: Any, size: Any) -> DeviceValue:
    return _expand(tracer, x, size)


@register(*_methods("expand_as"))
def _expand_as(tracer: Any, x: Any, other: Any) -> DeviceValue:
    return tracer.wrap(
        tracer.emit(ops.view_expand, [_value(tracer, x)], {"shape": _value(tracer, other).shape})
    )


@register(*_methods("contiguous", "clone", "detach"), torch.clone)
def _identity(tracer: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    return x


# -- creation in device code ------------------------------------------------------------------------


def _like(fill: Any) -> Handler:
    def handler(tracer: Any, x: Any, *args: Any, dtype: Any = None, **kwargs: Any) -> DeviceValue:
        value = _value(tracer, x)
        fill_value = args[0] if fill is None else fill
        return tracer.wrap(
            tracer.emit(
                ops.full,
                [],
                {"shape": value.shape, "value": fill_value, "dtype": dtype or value.dtype},
            )
        )

    return handler


register(torch.zeros_like)(_like(0))
register(torch.ones_like)(_like(1))
register(torch.empty_like)(_like(0))
register(torch.full_like)(_like(None))

# random numbers: Philox seeded from the kernel's per-call seed (helion.frontend.rng)
register(torch.rand)(rng.torch_rand)
register(torch.randn)(rng.torch_randn)
register(torch.rand_like)(rng.torch_rand_like)
register(torch.randn_like)(rng.torch_randn_like)


def _new(fill: Any) -> Handler:
    def handler(tracer: Any, x: Any, *args: Any, dtype: Any = None, **kwargs: Any) -> DeviceValue:
        value = _value(tracer, x)
        if fill is None:
            size, fill_value = args[0], args[1]
        else:
            size, fill_value = _shape_arg(args), fill
        return tracer.hl_full(list(size), fill_value, dtype or value.dtype)

    return handler


register(*_methods("new_zeros"))(_new(0))
register(*_methods("new_ones"))(_new(1))
register(*_methods("new_empty"))(_new(0))
register(*_methods("new_full"))(_new(None))


# -- things that cannot work on device, with the reason -------------------------------------------


def _not_on_device(what: str, hint: str) -> Handler:
    def handler(tracer: Any, *args: Any, **kwargs: Any) -> Any:
        raise exc.NotAllowedOnDevice(f"{what} ({hint})", loc=tracer.current_loc())

    return handler


register(torch.nonzero, *_methods("nonzero"))(
    _not_on_device("torch.nonzero", "its output shape depends on data")
)
register(
    torch.chunk,
    torch.split,
    torch.unbind,
    torch.tensor_split,
    *_methods("chunk", "split", "unbind"),
)(_not_on_device("splitting a tile", "use hl.split"))
register(*_methods("item", "tolist"))(
    _not_on_device(".item()", "device values cannot be read on the host")
)
# device values are values (an alias of a loaded tile never changes), so a method that would
# mutate one is refused; eager mode refuses the same names (`w += 1` rebinds in both)
REFUSED_INPLACE_METHODS = ("add_", "mul_", "sub_", "div_", "copy_", "zero_", "fill_")
INPLACE_METHOD_HINT = ("in-place tensor methods", "assign the result instead")
register(*_methods(*REFUSED_INPLACE_METHODS))(_not_on_device(*INPLACE_METHOD_HINT))


# shape ops (sort, topk, gather, stack, cat) register into this table from their own module
from helion.frontend import shape_ops as _shape_ops  # noqa: E402,F401
