"""Elementwise torch ops in device code: unary math, binary arithmetic and comparisons,
`where`, `clamp`, `lerp` and dtype casts (`x.to(dtype)`, `x.float()`, ...).

The function form and the method form share one entry (`torch.sum` and `torch.Tensor.sum`), and
the operator dunders (`__add__`, `__radd__`, ...) map to the same IR op. Ops torch computes in
float32 for fp16/bf16 (round with decimals, lerp, fmod) are decomposed the same way here.
"""

from __future__ import annotations

import math
import operator
from typing import Any
from typing import Callable

import torch
import torch.nn.functional as F

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import HostTensor
from helion.frontend.torch_ops.creation import check_device
from helion.frontend.torch_ops.registry import Handler
from helion.frontend.torch_ops.registry import describe
from helion.frontend.torch_ops.registry import lookup
from helion.frontend.torch_ops.registry import refuse_inplace
from helion.frontend.torch_ops.registry import refuse_out
from helion.frontend.torch_ops.registry import register
from helion.frontend.torch_ops.registry import tensor_methods
from helion.frontend.torch_ops.registry import unsupported_argument
from helion.frontend.torch_ops.values import as_value
from helion.frontend.torch_ops.values import call
from helion.frontend.torch_ops.values import cast
from helion.frontend.torch_ops.values import is_number
from helion.frontend.torch_ops.values import opmath
from helion.frontend.torch_ops.values import require_float
from helion.language import _ops as ops


def emit_unary(tracer: Any, op_name: str, x: Any) -> DeviceValue:
    return tracer.wrap(tracer.emit(ops.UNARY[op_name], [as_value(tracer, x)]))


def _unary(op_name: str, name: str) -> Handler:
    def handler(tracer: Any, x: Any, *, out: Any = None) -> DeviceValue:
        refuse_out(tracer, name, out)
        return emit_unary(tracer, op_name, x)

    return handler


def _functional_unary(op_name: str, name: str) -> Handler:
    """An activation of torch.nn.functional, `F.relu(input, inplace=False)`."""

    def handler(tracer: Any, x: Any, inplace: bool = False) -> DeviceValue:
        refuse_inplace(tracer, name, inplace)
        return emit_unary(tracer, op_name, x)

    return handler


def _rounded_to(number: float, dtype: torch.dtype) -> float:
    """`number` rounded to `dtype`, as torch rounds a coefficient it computes with in `dtype`."""
    return float(torch.tensor(number, dtype=torch.float64).to(dtype))


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
    register(_func, *tensor_methods(_name))(_unary(_op_name, f"torch.{_name}"))
for _alias, _op_name in (
    (torch.Tensor.__neg__, "neg"),
    (torch.Tensor.__abs__, "abs"),
    (torch.Tensor.__invert__, "bitwise_not"),
):
    if lookup(_alias) is None:  # some dunders are the same object as the named method
        register(_alias)(_unary(_op_name, f"torch.{_op_name}"))
register(F.relu)(_functional_unary("relu", "torch.nn.functional.relu"))
register(F.silu)(_functional_unary("silu", "torch.nn.functional.silu"))
register(F.sigmoid if hasattr(F, "sigmoid") and F.sigmoid is not torch.sigmoid else None)(
    _unary("sigmoid", "torch.nn.functional.sigmoid")
)
register(F.tanh if hasattr(F, "tanh") and F.tanh is not torch.tanh else None)(
    _unary("tanh", "torch.nn.functional.tanh")
)


@register(torch.round, *tensor_methods("round"))
def _round(tracer: Any, x: Any, *, decimals: int = 0, out: Any = None) -> DeviceValue:
    """torch.round, to `decimals` places as torch does: nearbyint(x * 10**d) / 10**d, and for
    d < 0 nearbyint(x / 10**-d) * 10**-d, in float32 for fp16/bf16 (ties go to even)."""
    refuse_out(tracer, "torch.round", out)
    if not isinstance(decimals, int) or isinstance(decimals, bool):
        raise unsupported_argument(
            tracer,
            "torch.round",
            f"decimals={describe(decimals)}",
            "decimals must be a Python int.",
        )
    if decimals == 0:
        return emit_unary(tracer, "round", x)
    source, dtype = opmath(tracer, x, f"torch.round(decimals={decimals})")
    try:
        power = 10.0 ** abs(decimals)
    except OverflowError:
        power = math.inf
    scale = _rounded_to(power, source.dtype)
    if decimals > 0:
        scaled = emit_unary(tracer, "round", call(tracer, torch.mul, source, scale))
        result = call(tracer, torch.div, scaled, scale)
    else:
        scaled = emit_unary(tracer, "round", call(tracer, torch.div, source, scale))
        result = call(tracer, torch.mul, scaled, scale)
    return cast(tracer, result, dtype)


@register(F.gelu)
def _gelu(tracer: Any, x: Any, approximate: str = "none") -> DeviceValue:
    if approximate not in ("none", "tanh"):
        raise exc.TypeInferenceError(
            f"gelu approximate must be 'none' or 'tanh', got {approximate!r}"
        )
    return tracer.wrap(
        tracer.emit(ops.UNARY["gelu"], [as_value(tracer, x)], {"approximate": approximate})
    )


@register(torch.square, *tensor_methods("square"))
def _square(tracer: Any, x: Any, *, out: Any = None) -> DeviceValue:
    refuse_out(tracer, "torch.square", out)
    if as_value(tracer, x).dtype == torch.bool:
        x = cast(tracer, x, torch.int64)  # as torch: True * True would stay bool
    return call(tracer, torch.mul, x, x)


@register(torch.frac, *tensor_methods("frac"))
def _frac(tracer: Any, x: Any, *, out: Any = None) -> DeviceValue:
    """x - trunc(x), exact in every float dtype (as torch computes it)."""
    refuse_out(tracer, "torch.frac", out)
    require_float(tracer, as_value(tracer, x), "torch.frac")
    return call(tracer, torch.sub, x, emit_unary(tracer, "trunc", x))


@register(torch.fmod, *tensor_methods("fmod"))
def _fmod(tracer: Any, a: Any, b: Any, *, out: Any = None) -> DeviceValue:
    """The remainder of a / b truncated towards zero: it has the sign of `a` (torch.remainder's
    has the sign of `b`)."""
    refuse_out(tracer, "torch.fmod", out)
    dtype = ops.promote_types(tracer.to_operand(a), tracer.to_operand(b))
    if not dtype.is_floating_point:
        # integers: remainder is exact; where its sign differs from a's, step back by b
        rem = call(tracer, torch.remainder, a, b)
        signs_differ = call(
            tracer, torch.ne, call(tracer, torch.lt, rem, 0), call(tracer, torch.lt, a, 0)
        )
        adjust = call(tracer, torch.logical_and, call(tracer, torch.ne, rem, 0), signs_differ)
        return call(tracer, torch.where, adjust, call(tracer, torch.sub, rem, b), rem)
    # floats: fmod(a, b) = ±remainder(|a|, |b|) with a's sign (signbit, so -0.0 stays -0.0);
    # both operands of that remainder are positive, so it is the exact fmod there
    compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    a = cast(tracer, a, compute)  # a tensor (torch.fmod takes no number first)
    b = float(b) if is_number(b) else cast(tracer, b, compute)
    magnitude = call(tracer, torch.remainder, call(tracer, torch.abs, a), absolute(tracer, b))
    negative = call(tracer, torch.signbit, a)
    result = call(tracer, torch.where, negative, call(tracer, torch.neg, magnitude), magnitude)
    return cast(tracer, result, dtype)


def absolute(tracer: Any, x: Any) -> Any:
    return abs(x) if is_number(x) else call(tracer, torch.abs, x)


@register(torch.nan_to_num, *tensor_methods("nan_to_num"))
def _nan_to_num(
    tracer: Any,
    x: Any,
    nan: float = 0.0,
    posinf: float | None = None,
    neginf: float | None = None,
    *,
    out: Any = None,
) -> DeviceValue:
    """NaN to `nan`, +inf to `posinf` and -inf to `neginf` (by default the largest and the
    lowest finite value of x's dtype, as torch)."""
    refuse_out(tracer, "torch.nan_to_num", out)
    value = as_value(tracer, x)
    if not value.dtype.is_floating_point:
        return DeviceValue(tracer, value)  # integers hold no nan or inf
    info = torch.finfo(value.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    result = call(tracer, torch.where, call(tracer, torch.isnan, x), nan, x)
    result = call(tracer, torch.where, call(tracer, torch.eq, x, math.inf), posinf, result)
    return call(tracer, torch.where, call(tracer, torch.eq, x, -math.inf), neginf, result)


# -- binary --------------------------------------------------------------------------------------


def emit_binary(tracer: Any, op_name: str, lhs: Any, rhs: Any) -> DeviceValue:
    return tracer.wrap(
        tracer.emit(ops.BINARY[op_name], [tracer.to_operand(lhs), tracer.to_operand(rhs)])
    )


def _binary(op_name: str, name: str, reverse: bool = False) -> Handler:
    def handler(tracer: Any, a: Any, b: Any, *, out: Any = None) -> DeviceValue:
        refuse_out(tracer, name, out)
        lhs, rhs = (b, a) if reverse else (a, b)
        return emit_binary(tracer, op_name, lhs, rhs)

    return handler


def _binary_with_alpha(op_name: str, name: str) -> Handler:
    """torch.add / torch.sub: a ± alpha * b."""

    def handler(tracer: Any, a: Any, b: Any, *, alpha: Any = None, out: Any = None) -> DeviceValue:
        refuse_out(tracer, name, out)
        if alpha is not None:
            b = call(tracer, torch.mul, b, alpha)
        if op_name == "add":
            _warn_rounded_product_accumulation(tracer, a, b)
        return emit_binary(tracer, op_name, a, b)

    return handler


def _warn_rounded_product_accumulation(tracer: Any, a: Any, b: Any) -> None:
    """`acc += x @ y` (or `acc = acc + torch.mm(x, y)`) in a loop, with a product narrower than
    the accumulator: torch rounds the product to its 16-bit (or fp8) dtype before the add,
    every iteration, where `torch.addmm(acc, x, y)` / `hl.dot(x, y, acc=acc)` accumulate at
    the accumulator's precision. Warned as public Helion warns (TiledKMatmulAccumulationWarning)."""
    for acc, product in ((a, b), (b, a)):
        if not isinstance(acc, DeviceValue) or not isinstance(product, DeviceValue):
            continue
        producer = product.value.producer
        if (
            acc.value.id in tracer.carried_ids
            and producer is not None
            and producer.op is ops.dot
            and product.dtype.itemsize < acc.dtype.itemsize
        ):
            warning = exc.TiledKMatmulAccumulationWarning(
                str(product.dtype), str(acc.dtype), loc=tracer.current_loc()
            )
            exc.warn(warning, tracer.settings)
            return


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
# Tensor.__radd__, __rmul__, __rand__, __ror__, __rxor__ are the forward methods of the tensor
_SELF_FIRST_REFLECTED = frozenset({"add", "mul", "bitwise_and", "bitwise_or", "bitwise_xor"})
for _name, (_func, _method_names, _reverse_name) in _BINARY_FUNCS.items():
    _torch_name = f"torch.{_func.__name__}"
    if _name in ("add", "sub"):
        register(_func, *tensor_methods(*_method_names))(_binary_with_alpha(_name, _torch_name))
    else:
        register(_func, *tensor_methods(*_method_names))(_binary(_name, _torch_name))
    if _reverse_name:
        # torch's own reflected methods: `s * x` is `x.mul(s)` (the tensor first, which decides
        # how a 16-bit op reads the number), `s - x` is `torch.sub(s, x)`, `s ** x` is
        # `torch.pow(s, x)`; so a number first in the IR means a torch function called so
        reverse = _name not in _SELF_FIRST_REFLECTED
        register(*tensor_methods(_reverse_name))(_binary(_name, _torch_name, reverse=reverse))
register(operator.gt)(_binary("gt", "torch.gt"))


def _divide_values(tracer: Any, lhs: Any, rhs: Any, rounding_mode: str | None) -> DeviceValue:
    if rounding_mode is None:
        return emit_binary(tracer, "truediv", lhs, rhs)
    if rounding_mode == "floor":
        return emit_binary(tracer, "floordiv", lhs, rhs)
    if rounding_mode == "trunc":
        return _divide_truncating(tracer, lhs, rhs)
    raise exc.TypeInferenceError(f"unknown rounding_mode {rounding_mode!r}")


def _divide_truncating(tracer: Any, lhs: Any, rhs: Any) -> DeviceValue:
    """torch.div(a, b, rounding_mode="trunc"): exact for integers (a float quotient loses
    integers past 2**24). For float16/bfloat16 `a` and a divisor that torch reads at float32 (a
    number, or a 0-D value of a wider dtype) trunc(a / b) in float32, rounded once: a quotient
    rounded to 16 bits first can reach the next integer (bf16 1.4 / 0.7 -> 2, torch 1). Two
    16-bit tensors keep the rounded quotient, as torch's CPU kernel does (bf16 arithmetic)."""
    dtype = ops.promote_types(tracer.to_operand(lhs), tracer.to_operand(rhs))
    if not dtype.is_floating_point:
        # floor division, one up where the division was not exact and the signs differ
        quotient = emit_binary(tracer, "floordiv", lhs, rhs)
        inexact = call(tracer, torch.ne, call(tracer, torch.remainder, lhs, rhs), 0)
        rhs_negative = rhs < 0 if is_number(rhs) else call(tracer, torch.lt, rhs, 0)
        signs_differ = call(tracer, torch.ne, call(tracer, torch.lt, lhs, 0), rhs_negative)
        adjust = call(tracer, torch.logical_and, inexact, signs_differ)
        return call(tracer, torch.where, adjust, call(tracer, torch.add, quotient, 1), quotient)
    wide_divisor = is_number(rhs) or (rhs.ndim == 0 and rhs.dtype.itemsize > dtype.itemsize)
    if dtype in (torch.float16, torch.bfloat16) and wide_divisor:
        lhs = cast(tracer, lhs, torch.float32)
        rhs = rhs if is_number(rhs) else cast(tracer, rhs, torch.float32)
    result = call(tracer, torch.trunc, emit_binary(tracer, "truediv", lhs, rhs))
    return cast(tracer, result, dtype)


@register(
    torch.div, torch.true_divide, *tensor_methods("div", "divide", "true_divide", "__truediv__")
)
def _divide(
    tracer: Any, a: Any, b: Any, *, rounding_mode: str | None = None, out: Any = None
) -> DeviceValue:
    refuse_out(tracer, "torch.div", out)
    return _divide_values(tracer, a, b, rounding_mode)


@register(*tensor_methods("__rtruediv__"))
def _rtruediv(tracer: Any, a: Any, b: Any) -> DeviceValue:
    """`s / x`: torch's Tensor.__rtruediv__ is `x.reciprocal() * s` (two roundings, at every
    dtype), not `torch.div(s, x)`."""
    return call(tracer, torch.mul, call(tracer, torch.reciprocal, a), b)


@register(torch.where)
def _where(
    tracer: Any, condition: Any, input: Any = None, other: Any = None, *, out: Any = None
) -> DeviceValue:
    refuse_out(tracer, "torch.where", out)
    if input is None or other is None:
        raise exc.DataDependentOutputShapeNotSupported(
            "torch.where with one argument", loc=tracer.current_loc()
        )
    return tracer.wrap(
        tracer.emit(
            ops.where,
            [as_value(tracer, condition), tracer.to_operand(input), tracer.to_operand(other)],
        )
    )


@register(*tensor_methods("where"))
def _where_method(tracer: Any, x: Any, condition: Any, y: Any) -> DeviceValue:
    """`x.where(condition, y)` is `torch.where(condition, x, y)`."""
    return _where(tracer, condition, x, y)


@register(torch.clamp, torch.clip, *tensor_methods("clamp", "clip"))
def clamp(tracer: Any, x: Any, min: Any = None, max: Any = None, *, out: Any = None) -> DeviceValue:
    refuse_out(tracer, "torch.clamp", out)
    if min is None and max is None:
        raise exc.TypeInferenceError(
            "torch.clamp needs min or max (as in torch)", loc=tracer.current_loc()
        )
    inputs = [
        as_value(tracer, x),
        None if min is None else tracer.to_operand(min),
        None if max is None else tracer.to_operand(max),
    ]
    return tracer.wrap(tracer.emit(ops.clamp, inputs))


@register(torch.clamp_min, *tensor_methods("clamp_min"))
def _clamp_min(tracer: Any, x: Any, min: Any, *, out: Any = None) -> DeviceValue:
    refuse_out(tracer, "torch.clamp_min", out)
    return clamp(tracer, x, min=min)


@register(torch.clamp_max, *tensor_methods("clamp_max"))
def _clamp_max(tracer: Any, x: Any, max: Any, *, out: Any = None) -> DeviceValue:
    refuse_out(tracer, "torch.clamp_max", out)
    return clamp(tracer, x, max=max)


@register(torch.lerp, *tensor_methods("lerp"))
def _lerp(tracer: Any, start: Any, end: Any, weight: Any, *, out: Any = None) -> DeviceValue:
    """start + weight * (end - start), as torch computes it: for |weight| >= 0.5 it is
    end - (end - start) * (1 - weight), so that weight 1 gives `end` exactly; in float32 for
    fp16/bf16."""
    refuse_out(tracer, "torch.lerp", out)
    start, dtype = opmath(tracer, start, "torch.lerp")
    end = cast(tracer, end, start.dtype)
    if not is_number(weight):
        weight = cast(tracer, weight, start.dtype)
    diff = call(tracer, torch.sub, end, start)

    def from_start() -> DeviceValue:
        return call(tracer, torch.add, start, call(tracer, torch.mul, weight, diff))

    def from_end() -> DeviceValue:
        one_minus = 1 - weight if is_number(weight) else emit_binary(tracer, "sub", 1, weight)
        return call(tracer, torch.sub, end, call(tracer, torch.mul, diff, one_minus))

    if is_number(weight):
        result = from_start() if abs(weight) < 0.5 else from_end()
    else:
        small = call(tracer, torch.lt, call(tracer, torch.abs, weight), 0.5)
        result = call(tracer, torch.where, small, from_start(), from_end())
    return cast(tracer, result, dtype)


# -- casts ---------------------------------------------------------------------------------------


@register(*tensor_methods("to"))
def _to(
    tracer: Any,
    x: Any,
    *args: Any,
    dtype: Any = None,
    device: Any = None,
    non_blocking: bool = False,
    copy: bool = False,
    memory_format: Any = None,
) -> DeviceValue:
    """`x.to(dtype)`, `x.to(other)` (other's dtype), `x.to(device, dtype)`. A device must be
    the kernel's (`check_device`, as for creation ops); it, and the copy, non_blocking and
    memory_format flags, do not change a device value."""
    check_device(tracer, "torch.Tensor.to", to_device(*args, device=device))
    for arg in args:
        if isinstance(arg, torch.dtype):
            dtype = arg
        elif isinstance(arg, (DeviceValue, HostTensor, torch.Tensor)):
            dtype = arg.dtype
        elif isinstance(arg, (str, torch.device, bool)) or is_number(arg):
            continue  # a device, or non_blocking / copy given positionally
        else:
            raise unsupported_argument(tracer, "torch.Tensor.to", describe(arg))
    if dtype is None:
        return x  # .to(device) is a no-op in device code
    return cast(tracer, x, dtype)


def to_device(*args: Any, device: Any = None, **flags: Any) -> Any:
    """The device a call `x.to(*args, device=..., **flags)` names, or None: `device=`, a device
    among the positional arguments (an int first is a device index, as torch reads it), or the
    device of a tensor `other` (`x.to(other)`)."""
    if device is not None:
        return device
    for position, arg in enumerate(args):
        if isinstance(arg, (str, torch.device)):
            return arg
        if position == 0 and isinstance(arg, int) and not isinstance(arg, bool):
            return arg
        if isinstance(arg, (DeviceValue, HostTensor, torch.Tensor)):
            return arg.device
    return None


def _cuda_device(device: Any = None, *args: Any, **flags: Any) -> Any:
    """The device a call `x.cuda(device, ...)` names: an index is one of CUDA's devices."""
    if device is None:
        return "cuda"
    if isinstance(device, int) and not isinstance(device, bool):
        return f"cuda:{device}"
    return device


@register(*tensor_methods("cpu"))
def _cpu(tracer: Any, x: Any, memory_format: Any = None) -> Any:
    """`x.cpu()`: allowed where the kernel runs on the CPU (a device value stays where it is)."""
    check_device(tracer, "torch.Tensor.cpu", "cpu")
    return x


@register(*tensor_methods("cuda"))
def _cuda(
    tracer: Any, x: Any, device: Any = None, non_blocking: bool = False, memory_format: Any = None
) -> Any:
    """`x.cuda()`: allowed where the kernel runs on that CUDA device."""
    check_device(tracer, "torch.Tensor.cuda", _cuda_device(device))
    return x


# the device moves of device code: the op's name and the device a call names (the arguments
# after the tensor); eager mode checks the same calls with `check_device` (`helion.eager.mode`)
DEVICE_MOVES: dict[Any, tuple[str, Callable[..., Any]]] = {
    **{func: ("torch.Tensor.to", to_device) for func in tensor_methods("to")},
    **{func: ("torch.Tensor.cpu", lambda *args, **kwargs: "cpu") for func in tensor_methods("cpu")},
    **{func: ("torch.Tensor.cuda", _cuda_device) for func in tensor_methods("cuda")},
}


@register(*tensor_methods("type"))
def _type(tracer: Any, x: Any, dtype: Any = None, non_blocking: bool = False) -> DeviceValue:
    if not isinstance(dtype, torch.dtype):
        raise unsupported_argument(
            tracer,
            "torch.Tensor.type",
            "dtype",
            "in device code, x.type() takes a torch.dtype (x.type(torch.float64)); use x.dtype "
            "to read the dtype.",
        )
    return cast(tracer, x, dtype)


def _cast_method(dtype: torch.dtype) -> Handler:
    """`x.float()`, `x.half()`, ...: memory_format does not change a device value."""

    def handler(tracer: Any, x: Any, memory_format: Any = None) -> DeviceValue:
        return cast(tracer, x, dtype)

    return handler


for _method, _dtype in {
    "float": torch.float32,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "double": torch.float64,
    "int": torch.int32,
    "long": torch.int64,
    "bool": torch.bool,
}.items():
    register(getattr(torch.Tensor, _method))(_cast_method(_dtype))
