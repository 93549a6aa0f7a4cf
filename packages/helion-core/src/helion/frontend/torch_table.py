"""The torch surface of device code: one table from torch callables to IR builders.

The function form and the method form share one entry (`torch.sum` and `torch.Tensor.sum`), so
`x.sum(-1)` and `torch.sum(x, -1)` produce the same IR. Composite ops (softmax, mean, var,
logsumexp, fmod, norms, activations, ...) are decomposed here into primitive ops, so that every
backend runs them.

A handler's signature lists exactly the arguments it handles: a call with any other argument
(`out=`, an unknown keyword, one positional too many) is refused with an `UnsupportedTorchOp`
naming the argument, the op and the kernel's line, and so is a handled argument with a value
device code cannot honour (`inplace=True`). No argument is ever dropped silently.
"""

from __future__ import annotations

import inspect
import math
import operator
from typing import Any
from typing import Callable

import sympy
import torch
import torch.nn.functional as F

from helion import exc
from helion.frontend import rng
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import HostTensor
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
    """Register `handler` for each torch callable in `funcs` (None entries are skipped).

    The table holds the handler behind a check of the call's arguments against the handler's
    signature; the decorator returns the handler itself, for direct calls from other handlers.
    """

    def decorator(handler: Handler) -> Handler:
        signature = inspect.signature(handler)
        for func in funcs:
            if func is None:
                continue
            if func in _TABLE:
                raise ValueError(f"{func} registered twice in the torch table")
            _TABLE[func] = _checked(func, handler, signature)
        return handler

    return decorator


def _checked(func: Any, handler: Handler, signature: inspect.Signature) -> Handler:
    def checked(tracer: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            signature.bind(tracer, *args, **kwargs)
        except TypeError as error:
            raise _binding_error(tracer, func, signature, args, kwargs, error) from None
        return handler(tracer, *args, **kwargs)

    return checked


_NAMESPACES = (
    ("torch.Tensor", torch.Tensor),
    ("torch.nn.functional", F),
    ("torch.linalg", torch.linalg),
    ("torch", torch),
    ("operator", operator),
)


def torch_name(func: Any) -> str:
    """The name a user writes for `func`: `torch.round`, `torch.Tensor.round`, ..."""
    name = getattr(func, "__name__", None)
    if name is not None:
        for prefix, namespace in _NAMESPACES:
            if getattr(namespace, name, None) is func:
                return f"{prefix}.{name}"
    for prefix, namespace in _NAMESPACES:  # an alias (torch.linalg.vector_norm, ...)
        for attribute, value in vars(namespace).items():
            if value is func:
                return f"{prefix}.{attribute}"
    return name or repr(func)


def unsupported_argument(
    tracer: Any, op: str, argument: str, reason: str | None = None
) -> exc.UnsupportedTorchOp:
    """The error for an argument of `op` that device code does not handle."""
    return exc.UnsupportedTorchOp(
        f"{op} with the argument `{argument}`",
        loc=tracer.current_loc(),
        hint=reason
        or f"Helion does not handle `{argument}` of {op} in device code: leave it out, or "
        "compute this on the host.",
    )


def _binding_error(
    tracer: Any,
    func: Any,
    signature: inspect.Signature,
    args: tuple,
    kwargs: dict,
    error: TypeError,
) -> exc.UnsupportedTorchOp:
    name = torch_name(func)
    parameters = list(signature.parameters.values())[1:]  # the first one is the tracer
    kinds = {p.kind for p in parameters}
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        keywords = {
            p.name
            for p in parameters
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        }
        for key in kwargs:
            if key not in keywords:
                return unsupported_argument(tracer, name, key)
    if inspect.Parameter.VAR_POSITIONAL not in kinds:
        positional = [
            p
            for p in parameters
            if p.kind
            in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ]
        if len(args) > len(positional):
            extra = args[len(positional)]
            return unsupported_argument(
                tracer, name, f"positional argument {len(positional) + 1} ({_describe(extra)})"
            )
    return exc.UnsupportedTorchOp(
        f"{name} called with these arguments",
        loc=tracer.current_loc(),
        hint=f"Helion handles {name}{_handled(parameters)} in device code ({error}).",
    )


def _describe(value: Any) -> str:
    if isinstance(value, (DeviceValue, TileProxy, torch.Tensor)):
        return "a tensor"
    text = repr(value)
    return text if len(text) <= 40 else type(value).__name__


def _handled(parameters: list[inspect.Parameter]) -> str:
    shown = [p.replace(annotation=inspect.Parameter.empty) for p in parameters]
    return str(inspect.Signature(shown))


def refuse_out(tracer: Any, op: str, out: Any) -> None:
    if out is not None:
        raise unsupported_argument(
            tracer,
            op,
            "out",
            f"device code cannot write into a given tensor: assign the result of {op} instead.",
        )


def refuse_inplace(tracer: Any, op: str, inplace: Any) -> None:
    if inplace:
        raise unsupported_argument(
            tracer,
            op,
            "inplace",
            "device values are never updated in place: drop inplace=True and assign the result "
            "instead.",
        )


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


def _call(tracer: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
    """`func(*args, **kwargs)` traced through this table (the building block of decompositions)."""
    return tracer.call_torch(func, args, kwargs)


def _emit_unary(tracer: Any, op_name: str, x: Any) -> DeviceValue:
    return tracer.wrap(tracer.emit(ops.UNARY[op_name], [_value(tracer, x)]))


def _unary(op_name: str, name: str) -> Handler:
    def handler(tracer: Any, x: Any, *, out: Any = None) -> DeviceValue:
        refuse_out(tracer, name, out)
        return _emit_unary(tracer, op_name, x)

    return handler


def _functional_unary(op_name: str, name: str) -> Handler:
    """An activation of torch.nn.functional, `F.relu(input, inplace=False)`."""

    def handler(tracer: Any, x: Any, inplace: bool = False) -> DeviceValue:
        refuse_inplace(tracer, name, inplace)
        return _emit_unary(tracer, op_name, x)

    return handler


def _require_float(tracer: Any, value: Value, op: str) -> None:
    if not value.dtype.is_floating_point:
        raise exc.TypeInferenceError(
            f"{op} needs a floating-point input, got {value.dtype} (as in torch)",
            loc=tracer.current_loc(),
        )


def _opmath(tracer: Any, x: Any, op: str) -> tuple[DeviceValue, torch.dtype]:
    """A float `x` in the dtype torch computes `op` in (float32 for fp16 and bf16, as torch's
    kernels do), and the dtype of the result."""
    value = _value(tracer, x)
    _require_float(tracer, value, op)
    return _upcast(tracer, DeviceValue(tracer, value)), value.dtype


def _rounded_to(number: float, dtype: torch.dtype) -> float:
    """`number` rounded to `dtype`, as torch rounds a coefficient it computes with in `dtype`."""
    return float(torch.tensor(number, dtype=torch.float64).to(dtype))


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float))


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
    register(_func, *_methods(_name))(_unary(_op_name, f"torch.{_name}"))
for _alias, _op_name in (
    (torch.Tensor.__neg__, "neg"),
    (torch.Tensor.__abs__, "abs"),
    (torch.Tensor.__invert__, "bitwise_not"),
):
    if _alias not in _TABLE:  # some dunders are the same object as the named method
        register(_alias)(_unary(_op_name, f"torch.{_op_name}"))
register(F.relu)(_functional_unary("relu", "torch.nn.functional.relu"))
register(F.silu)(_functional_unary("silu", "torch.nn.functional.silu"))
register(F.sigmoid if hasattr(F, "sigmoid") and F.sigmoid is not torch.sigmoid else None)(
    _unary("sigmoid", "torch.nn.functional.sigmoid")
)
register(F.tanh if hasattr(F, "tanh") and F.tanh is not torch.tanh else None)(
    _unary("tanh", "torch.nn.functional.tanh")
)


@register(torch.round, *_methods("round"))
def _round(tracer: Any, x: Any, *, decimals: int = 0, out: Any = None) -> DeviceValue:
    """torch.round, to `decimals` places as torch does: nearbyint(x * 10**d) / 10**d, and for
    d < 0 nearbyint(x / 10**-d) * 10**-d, in float32 for fp16/bf16 (ties go to even)."""
    refuse_out(tracer, "torch.round", out)
    if not isinstance(decimals, int) or isinstance(decimals, bool):
        raise unsupported_argument(
            tracer,
            "torch.round",
            f"decimals={_describe(decimals)}",
            "decimals must be a Python int.",
        )
    if decimals == 0:
        return _emit_unary(tracer, "round", x)
    source, dtype = _opmath(tracer, x, f"torch.round(decimals={decimals})")
    try:
        power = 10.0 ** abs(decimals)
    except OverflowError:
        power = math.inf
    scale = _rounded_to(power, source.dtype)
    if decimals > 0:
        scaled = _emit_unary(tracer, "round", _call(tracer, torch.mul, source, scale))
        result = _call(tracer, torch.div, scaled, scale)
    else:
        scaled = _emit_unary(tracer, "round", _call(tracer, torch.div, source, scale))
        result = _call(tracer, torch.mul, scaled, scale)
    return _cast(tracer, result, dtype)


@register(F.gelu)
def _gelu(tracer: Any, x: Any, approximate: str = "none") -> DeviceValue:
    if approximate not in ("none", "tanh"):
        raise exc.TypeInferenceError(
            f"gelu approximate must be 'none' or 'tanh', got {approximate!r}"
        )
    return tracer.wrap(
        tracer.emit(ops.UNARY["gelu"], [_value(tracer, x)], {"approximate": approximate})
    )


@register(torch.square, *_methods("square"))
def _square(tracer: Any, x: Any, *, out: Any = None) -> DeviceValue:
    refuse_out(tracer, "torch.square", out)
    if _value(tracer, x).dtype == torch.bool:
        x = _cast(tracer, x, torch.int64)  # as torch: True * True would stay bool
    return _call(tracer, torch.mul, x, x)


@register(torch.frac, *_methods("frac"))
def _frac(tracer: Any, x: Any, *, out: Any = None) -> DeviceValue:
    """x - trunc(x), exact in every float dtype (as torch computes it)."""
    refuse_out(tracer, "torch.frac", out)
    _require_float(tracer, _value(tracer, x), "torch.frac")
    return _call(tracer, torch.sub, x, _emit_unary(tracer, "trunc", x))


@register(torch.fmod, *_methods("fmod"))
def _fmod(tracer: Any, a: Any, b: Any, *, out: Any = None) -> DeviceValue:
    """The remainder of a / b truncated towards zero: it has the sign of `a` (torch.remainder's
    has the sign of `b`)."""
    refuse_out(tracer, "torch.fmod", out)
    dtype = ops.promote_types(tracer.to_operand(a), tracer.to_operand(b))
    if not dtype.is_floating_point:
        # integers: remainder is exact; where its sign differs from a's, step back by b
        rem = _call(tracer, torch.remainder, a, b)
        signs_differ = _call(
            tracer, torch.ne, _call(tracer, torch.lt, rem, 0), _call(tracer, torch.lt, a, 0)
        )
        adjust = _call(tracer, torch.logical_and, _call(tracer, torch.ne, rem, 0), signs_differ)
        return _call(tracer, torch.where, adjust, _call(tracer, torch.sub, rem, b), rem)
    # floats: fmod(a, b) = ±remainder(|a|, |b|) with a's sign (signbit, so -0.0 stays -0.0);
    # both operands of that remainder are positive, so it is the exact fmod there
    compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    a = _cast(tracer, a, compute)  # a tensor (torch.fmod takes no number first)
    b = float(b) if _is_number(b) else _cast(tracer, b, compute)
    magnitude = _call(tracer, torch.remainder, _call(tracer, torch.abs, a), _abs(tracer, b))
    negative = _call(tracer, torch.signbit, a)
    result = _call(tracer, torch.where, negative, _call(tracer, torch.neg, magnitude), magnitude)
    return _cast(tracer, result, dtype)


def _abs(tracer: Any, x: Any) -> Any:
    return abs(x) if _is_number(x) else _call(tracer, torch.abs, x)


@register(torch.nan_to_num, *_methods("nan_to_num"))
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
    value = _value(tracer, x)
    if not value.dtype.is_floating_point:
        return DeviceValue(tracer, value)  # integers hold no nan or inf
    info = torch.finfo(value.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    result = _call(tracer, torch.where, _call(tracer, torch.isnan, x), nan, x)
    result = _call(tracer, torch.where, _call(tracer, torch.eq, x, math.inf), posinf, result)
    return _call(tracer, torch.where, _call(tracer, torch.eq, x, -math.inf), neginf, result)


# -- activations (torch.nn.functional), computed in float32 for fp16/bf16 as torch does --------


def _activation(tracer: Any, x: Any, name: str, inplace: bool) -> tuple[DeviceValue, torch.dtype]:
    refuse_inplace(tracer, name, inplace)
    return _opmath(tracer, x, name)


@register(F.softplus)
def _softplus(tracer: Any, x: Any, beta: float = 1.0, threshold: float = 20.0) -> DeviceValue:
    """x where beta * x > threshold, else log1p(exp(beta * x)) / beta."""
    source, dtype = _opmath(tracer, x, "torch.nn.functional.softplus")
    scaled = _call(tracer, torch.mul, source, beta) if beta != 1 else source
    soft = _call(tracer, torch.log1p, _call(tracer, torch.exp, scaled))
    if beta != 1:
        soft = _call(tracer, torch.div, soft, beta)
    big = _call(tracer, torch.gt, scaled, threshold)
    return _cast(tracer, _call(tracer, torch.where, big, source, soft), dtype)


@register(F.leaky_relu)
def _leaky_relu(
    tracer: Any, x: Any, negative_slope: float = 0.01, inplace: bool = False
) -> DeviceValue:
    refuse_inplace(tracer, "torch.nn.functional.leaky_relu", inplace)
    positive = _call(tracer, torch.gt, x, 0)
    return _call(tracer, torch.where, positive, x, _call(tracer, torch.mul, x, negative_slope))


@register(F.hardtanh)
def _hardtanh(
    tracer: Any, x: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> DeviceValue:
    refuse_inplace(tracer, "torch.nn.functional.hardtanh", inplace)
    if min_val > max_val:
        raise exc.TypeInferenceError(
            f"hardtanh min_val ({min_val}) cannot be greater than max_val ({max_val})",
            loc=tracer.current_loc(),
        )
    return _clamp(tracer, x, min_val, max_val)


@register(F.relu6)
def _relu6(tracer: Any, x: Any, inplace: bool = False) -> DeviceValue:
    refuse_inplace(tracer, "torch.nn.functional.relu6", inplace)
    return _clamp(tracer, x, 0, 6)


def _elu_family(
    tracer: Any,
    x: Any,
    name: str,
    inplace: bool,
    *,
    alpha: float,
    scale: float = 1.0,
    input_scale: float = 1.0,
) -> DeviceValue:
    """torch's elu kernel: x * scale where x > 0, else expm1(x * input_scale) * alpha * scale."""
    source, dtype = _activation(tracer, x, name, inplace)
    positive = source if scale == 1 else _call(tracer, torch.mul, source, scale)
    inner = source if input_scale == 1 else _call(tracer, torch.mul, source, input_scale)
    negative = _call(tracer, torch.mul, _call(tracer, torch.expm1, inner), alpha * scale)
    result = _call(tracer, torch.where, _call(tracer, torch.gt, source, 0), positive, negative)
    return _cast(tracer, result, dtype)


@register(F.elu)
def _elu(tracer: Any, x: Any, alpha: float = 1.0, inplace: bool = False) -> DeviceValue:
    return _elu_family(tracer, x, "torch.nn.functional.elu", inplace, alpha=alpha)


# the constants of torch's selu (Klambauer et al., "Self-Normalizing Neural Networks")
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@register(F.selu, torch.selu)
def _selu(tracer: Any, x: Any, inplace: bool = False) -> DeviceValue:
    return _elu_family(
        tracer,
        x,
        "torch.nn.functional.selu",
        inplace,
        alpha=_SELU_ALPHA,
        scale=_SELU_SCALE,
    )


@register(F.celu, torch.celu)
def _celu(tracer: Any, x: Any, alpha: float = 1.0, inplace: bool = False) -> DeviceValue:
    if alpha == 0:
        raise exc.TypeInferenceError("celu alpha cannot be 0", loc=tracer.current_loc())
    return _elu_family(
        tracer, x, "torch.nn.functional.celu", inplace, alpha=alpha, input_scale=1.0 / alpha
    )


@register(F.mish)
def _mish(tracer: Any, x: Any, inplace: bool = False) -> DeviceValue:
    """x * tanh(log1p(exp(x)))."""
    source, dtype = _activation(tracer, x, "torch.nn.functional.mish", inplace)
    soft = _call(tracer, torch.log1p, _call(tracer, torch.exp, source))
    return _cast(tracer, _call(tracer, torch.mul, source, _call(tracer, torch.tanh, soft)), dtype)


@register(F.logsigmoid)
def _logsigmoid(tracer: Any, x: Any) -> DeviceValue:
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), which neither overflows nor cancels."""
    source, dtype = _opmath(tracer, x, "torch.nn.functional.logsigmoid")
    tail = _call(
        tracer,
        torch.log1p,
        _call(tracer, torch.exp, _call(tracer, torch.neg, _abs(tracer, source))),
    )
    result = _call(tracer, torch.sub, _call(tracer, torch.clamp_max, source, 0.0), tail)
    return _cast(tracer, result, dtype)


def _relu6_of_shift(tracer: Any, source: DeviceValue) -> DeviceValue:
    return _clamp(tracer, _call(tracer, torch.add, source, 3.0), 0.0, 6.0)


@register(F.hardsigmoid)
def _hardsigmoid(tracer: Any, x: Any, inplace: bool = False) -> DeviceValue:
    """min(max(x + 3, 0), 6) / 6."""
    source, dtype = _activation(tracer, x, "torch.nn.functional.hardsigmoid", inplace)
    return _cast(tracer, _call(tracer, torch.div, _relu6_of_shift(tracer, source), 6.0), dtype)


@register(F.hardswish)
def _hardswish(tracer: Any, x: Any, inplace: bool = False) -> DeviceValue:
    """x * min(max(x + 3, 0), 6) / 6."""
    source, dtype = _activation(tracer, x, "torch.nn.functional.hardswish", inplace)
    product = _call(tracer, torch.mul, source, _relu6_of_shift(tracer, source))
    return _cast(tracer, _call(tracer, torch.div, product, 6.0), dtype)


# -- binary --------------------------------------------------------------------------------------


def _emit_binary(tracer: Any, op_name: str, lhs: Any, rhs: Any) -> DeviceValue:
    return tracer.wrap(
        tracer.emit(ops.BINARY[op_name], [tracer.to_operand(lhs), tracer.to_operand(rhs)])
    )


def _binary(op_name: str, name: str, reverse: bool = False) -> Handler:
    def handler(tracer: Any, a: Any, b: Any, *, out: Any = None) -> DeviceValue:
        refuse_out(tracer, name, out)
        lhs, rhs = (b, a) if reverse else (a, b)
        return _emit_binary(tracer, op_name, lhs, rhs)

    return handler


def _binary_with_alpha(op_name: str, name: str) -> Handler:
    """torch.add / torch.sub: a ± alpha * b."""

    def handler(tracer: Any, a: Any, b: Any, *, alpha: Any = None, out: Any = None) -> DeviceValue:
        refuse_out(tracer, name, out)
        if alpha is not None:
            b = _call(tracer, torch.mul, b, alpha)
        return _emit_binary(tracer, op_name, a, b)

    return handler


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
    _torch_name = f"torch.{_func.__name__}"
    if _name in ("add", "sub"):
        register(_func, *_methods(*_method_names))(_binary_with_alpha(_name, _torch_name))
    else:
        register(_func, *_methods(*_method_names))(_binary(_name, _torch_name))
    if _reverse_name:
        register(*_methods(_reverse_name))(_binary(_name, _torch_name, reverse=True))
register(operator.gt)(_binary("gt", "torch.gt"))


def _divide_values(tracer: Any, lhs: Any, rhs: Any, rounding_mode: str | None) -> DeviceValue:
    if rounding_mode is None:
        return _emit_binary(tracer, "truediv", lhs, rhs)
    if rounding_mode == "floor":
        return _emit_binary(tracer, "floordiv", lhs, rhs)
    if rounding_mode == "trunc":
        return _call(tracer, torch.trunc, _emit_binary(tracer, "truediv", lhs, rhs))
    raise exc.TypeInferenceError(f"unknown rounding_mode {rounding_mode!r}")


@register(torch.div, torch.true_divide, *_methods("div", "divide", "true_divide", "__truediv__"))
def _divide(
    tracer: Any, a: Any, b: Any, *, rounding_mode: str | None = None, out: Any = None
) -> DeviceValue:
    refuse_out(tracer, "torch.div", out)
    return _divide_values(tracer, a, b, rounding_mode)


@register(*_methods("__rtruediv__"))
def _rtruediv(tracer: Any, a: Any, b: Any) -> DeviceValue:
    return _divide_values(tracer, b, a, None)


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
            [_value(tracer, condition), tracer.to_operand(input), tracer.to_operand(other)],
        )
    )


@register(*_methods("where"))
def _where_method(tracer: Any, x: Any, condition: Any, y: Any) -> DeviceValue:
    """`x.where(condition, y)` is `torch.where(condition, x, y)`."""
    return _where(tracer, condition, x, y)


@register(torch.clamp, torch.clip, *_methods("clamp", "clip"))
def _clamp(
    tracer: Any, x: Any, min: Any = None, max: Any = None, *, out: Any = None
) -> DeviceValue:
    refuse_out(tracer, "torch.clamp", out)
    if min is None and max is None:
        raise exc.TypeInferenceError(
            "torch.clamp needs min or max (as in torch)", loc=tracer.current_loc()
        )
    inputs = [
        _value(tracer, x),
        None if min is None else tracer.to_operand(min),
        None if max is None else tracer.to_operand(max),
    ]
    return tracer.wrap(tracer.emit(ops.clamp, inputs))


@register(torch.clamp_min, *_methods("clamp_min"))
def _clamp_min(tracer: Any, x: Any, min: Any, *, out: Any = None) -> DeviceValue:
    refuse_out(tracer, "torch.clamp_min", out)
    return _clamp(tracer, x, min=min)


@register(torch.clamp_max, *_methods("clamp_max"))
def _clamp_max(tracer: Any, x: Any, max: Any, *, out: Any = None) -> DeviceValue:
    refuse_out(tracer, "torch.clamp_max", out)
    return _clamp(tracer, x, max=max)


@register(torch.lerp, *_methods("lerp"))
def _lerp(tracer: Any, start: Any, end: Any, weight: Any, *, out: Any = None) -> DeviceValue:
    """start + weight * (end - start), as torch computes it: for |weight| >= 0.5 it is
    end - (end - start) * (1 - weight), so that weight 1 gives `end` exactly; in float32 for
    fp16/bf16."""
    refuse_out(tracer, "torch.lerp", out)
    start, dtype = _opmath(tracer, start, "torch.lerp")
    end = _cast(tracer, end, start.dtype)
    if not _is_number(weight):
        weight = _cast(tracer, weight, start.dtype)
    diff = _call(tracer, torch.sub, end, start)

    def from_start() -> DeviceValue:
        return _call(tracer, torch.add, start, _call(tracer, torch.mul, weight, diff))

    def from_end() -> DeviceValue:
        one_minus = 1 - weight if _is_number(weight) else _emit_binary(tracer, "sub", 1, weight)
        return _call(tracer, torch.sub, end, _call(tracer, torch.mul, diff, one_minus))

    if _is_number(weight):
        result = from_start() if abs(weight) < 0.5 else from_end()
    else:
        small = _call(tracer, torch.lt, _call(tracer, torch.abs, weight), 0.5)
        result = _call(tracer, torch.where, small, from_start(), from_end())
    return _cast(tracer, result, dtype)


# -- casts ---------------------------------------------------------------------------------------


def _cast(tracer: Any, x: Any, dtype: torch.dtype) -> DeviceValue:
    value = _value(tracer, x)
    if value.dtype == dtype:
        return DeviceValue(tracer, value)
    return tracer.wrap(tracer.emit(ops.cast, [value], {"dtype": dtype}))


@register(*_methods("to"))
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
    """`x.to(dtype)`, `x.to(other)` (other's dtype), `x.to(device, dtype)`. A device, and the
    copy, non_blocking and memory_format flags, do not change a device value."""
    for arg in args:
        if isinstance(arg, torch.dtype):
            dtype = arg
        elif isinstance(arg, (DeviceValue, HostTensor, torch.Tensor)):
            dtype = arg.dtype
        elif isinstance(arg, (str, torch.device, bool)) or _is_number(arg):
            continue  # a device, or non_blocking / copy given positionally
        else:
            raise unsupported_argument(tracer, "torch.Tensor.to", _describe(arg))
    if dtype is None:
        return x  # .to(device) is a no-op in device code
    return _cast(tracer, x, dtype)


@register(*_methods("type"))
def _type(tracer: Any, x: Any, dtype: Any = None, non_blocking: bool = False) -> DeviceValue:
    if not isinstance(dtype, torch.dtype):
        raise unsupported_argument(
            tracer,
            "torch.Tensor.type",
            "dtype",
            "in device code, x.type() takes a torch.dtype (x.type(torch.float64)); use x.dtype "
            "to read the dtype.",
        )
    return _cast(tracer, x, dtype)


def _cast_method(dtype: torch.dtype) -> Handler:
    """`x.float()`, `x.half()`, ...: memory_format does not change a device value."""

    def handler(tracer: Any, x: Any, memory_format: Any = None) -> DeviceValue:
        return _cast(tracer, x, dtype)

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
            return _emit_binary(tracer, "maximum" if kind == "max" else "minimum", x, dim)
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


# torch.softmax(input, dim, dtype) and F.softmax(input, dim, _stacklevel, dtype) differ in their
# third positional argument
@register(torch.softmax, *_methods("softmax"))
def _softmax(tracer: Any, x: Any, dim: Any = None, dtype: Any = None) -> DeviceValue:
    return _softmax_impl(tracer, x, dim, dtype, log=False)


@register(F.softmax)
def _functional_softmax(
    tracer: Any, x: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None
) -> DeviceValue:
    return _softmax_impl(tracer, x, dim, dtype, log=False)


@register(torch.log_softmax, *_methods("log_softmax"))
def _log_softmax(tracer: Any, x: Any, dim: Any = None, dtype: Any = None) -> DeviceValue:
    return _softmax_impl(tracer, x, dim, dtype, log=True)


@register(F.log_softmax)
def _functional_log_softmax(
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


# -- norms ---------------------------------------------------------------------------------------


def _vector_norm_impl(
    tracer: Any, x: Any, order: Any, dim: Any, keepdim: bool, dtype: Any, name: str
) -> DeviceValue:
    """The `order`-norm of x over one dim, accumulated in float32 for fp16/bf16 (as torch):
    2: sqrt(sum(x**2)), 1: sum(|x|), ±inf: max/min(|x|), 0: count of non-zeros, else
    sum(|x|**order) ** (1 / order)."""
    if isinstance(order, bool) or not _is_number(order):
        raise unsupported_argument(
            tracer, name, f"ord={_describe(order)}", "a vector norm's ord must be a number."
        )
    if dtype is not None:
        x = _cast(tracer, x, dtype)
    source, result_dtype = _opmath(tracer, x, name)
    axis = _norm_dim(tracer, source.value, dim, name)
    magnitude = _call(tracer, torch.abs, source)
    if order == math.inf:
        result = _reduce("amax", name)(tracer, magnitude, axis, keepdim)
    elif order == -math.inf:
        result = _reduce("amin", name)(tracer, magnitude, axis, keepdim)
    elif order == 0:
        nonzero = _cast(tracer, _call(tracer, torch.ne, source, 0), source.dtype)
        result = _reduce("sum", name)(tracer, nonzero, axis, keepdim)
    elif order == 1:
        result = _reduce("sum", name)(tracer, magnitude, axis, keepdim)
    elif order == 2:
        squares = _call(tracer, torch.mul, source, source)
        result = _call(tracer, torch.sqrt, _reduce("sum", name)(tracer, squares, axis, keepdim))
    else:
        powers = _call(tracer, torch.pow, magnitude, float(order))
        total = _reduce("sum", name)(tracer, powers, axis, keepdim)
        result = _call(tracer, torch.pow, total, 1.0 / order)
    return _cast(tracer, result, result_dtype)


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
    if dim is None and _value(tracer, x).type.ndim != 1:
        raise exc.MultipleReductionDims("torch.linalg.norm", loc=tracer.current_loc())
    order = 2 if ord is None else ord
    return _vector_norm_impl(tracer, x, order, dim, keepdim, dtype, "torch.linalg.norm")


@register(torch.norm, *_methods("norm"))
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


@register(*_methods("contiguous"))
def _contiguous(tracer: Any, x: Any, memory_format: Any = None) -> Any:
    return x  # a device value has no memory layout


@register(*_methods("clone"), torch.clone)
def _clone(tracer: Any, x: Any, *, memory_format: Any = None) -> Any:
    return x  # device values are never mutated, so a value is its own copy


@register(*_methods("detach"))
def _detach(tracer: Any, x: Any) -> Any:
    return x


# -- creation in device code ------------------------------------------------------------------------


def _check_creation(tracer: Any, name: str, layout: Any, requires_grad: Any) -> None:
    """device= and pin_memory= do not change a device value; other layouts and autograd do."""
    if layout not in (None, torch.strided):
        raise unsupported_argument(tracer, name, "layout", "device values are dense (strided).")
    if requires_grad:
        raise unsupported_argument(
            tracer, name, "requires_grad", "device values do not record autograd history."
        )


def _emit_like(tracer: Any, x: Any, fill_value: Any, dtype: Any) -> DeviceValue:
    value = _value(tracer, x)
    return tracer.wrap(
        tracer.emit(
            ops.full,
            [],
            {"shape": value.shape, "value": fill_value, "dtype": dtype or value.dtype},
        )
    )


def _like(fill: Any, name: str) -> Handler:
    def handler(
        tracer: Any,
        x: Any,
        *,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        pin_memory: bool = False,
        requires_grad: bool = False,
        memory_format: Any = None,
    ) -> DeviceValue:
        _check_creation(tracer, name, layout, requires_grad)
        return _emit_like(tracer, x, fill, dtype)

    return handler


register(torch.zeros_like)(_like(0, "torch.zeros_like"))
register(torch.ones_like)(_like(1, "torch.ones_like"))
register(torch.empty_like)(_like(0, "torch.empty_like"))


@register(torch.full_like)
def _full_like(
    tracer: Any,
    x: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool = False,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> DeviceValue:
    _check_creation(tracer, "torch.full_like", layout, requires_grad)
    return _emit_like(tracer, x, fill_value, dtype)


def _factory(fill: Any, name: str) -> Handler:
    """torch.zeros / ones / empty with a shape of tiles and sizes (reached through a tile among
    the sizes): hl.full's value, in torch's default dtype unless one is given."""

    def handler(
        tracer: Any,
        *size: Any,
        out: Any = None,
        dtype: Any = None,
        layout: Any = None,
        device: Any = None,
        pin_memory: bool = False,
        requires_grad: bool = False,
        memory_format: Any = None,
    ) -> DeviceValue:
        if out is not None:
            raise unsupported_argument(tracer, name, "out", "device code makes new values.")
        _check_creation(tracer, name, layout, requires_grad)
        return tracer.hl_full(_shape_arg(size), fill, dtype or torch.get_default_dtype())

    return handler


register(torch.zeros)(_factory(0, "torch.zeros"))
register(torch.ones)(_factory(1, "torch.ones"))
register(torch.empty)(_factory(0, "torch.empty"))


@register(torch.full)
def _full(
    tracer: Any,
    size: Any,
    fill_value: Any,
    *,
    out: Any = None,
    dtype: Any = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool = False,
    requires_grad: bool = False,
) -> DeviceValue:
    if out is not None:
        raise unsupported_argument(tracer, "torch.full", "out", "device code makes new values.")
    _check_creation(tracer, "torch.full", layout, requires_grad)
    if dtype is None:  # torch's rule: the fill value's kind decides
        dtype = (
            torch.bool
            if isinstance(fill_value, bool)
            else torch.int64
            if isinstance(fill_value, int)
            else torch.get_default_dtype()
        )
    return tracer.hl_full(list(size), fill_value, dtype)


# random numbers: Philox seeded from the kernel's per-call seed (helion.frontend.rng)
register(torch.rand)(rng.torch_rand)
register(torch.randn)(rng.torch_randn)
register(torch.rand_like)(rng.torch_rand_like)
register(torch.randn_like)(rng.torch_randn_like)


def _new(fill: Any, name: str) -> Handler:
    def handler(
        tracer: Any,
        x: Any,
        *size: Any,
        dtype: Any = None,
        device: Any = None,
        requires_grad: bool = False,
        layout: Any = None,
        pin_memory: bool = False,
    ) -> DeviceValue:
        _check_creation(tracer, name, layout, requires_grad)
        return tracer.hl_full(_shape_arg(size), fill, dtype or _dtype_of(tracer, x))

    return handler


register(*_methods("new_zeros"))(_new(0, "torch.Tensor.new_zeros"))
register(*_methods("new_ones"))(_new(1, "torch.Tensor.new_ones"))
register(*_methods("new_empty"))(_new(0, "torch.Tensor.new_empty"))


@register(*_methods("new_full"))
def _new_full(
    tracer: Any,
    x: Any,
    size: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
) -> DeviceValue:
    _check_creation(tracer, "torch.Tensor.new_full", layout, requires_grad)
    return tracer.hl_full(list(size), fill_value, dtype or _dtype_of(tracer, x))


def _dtype_of(tracer: Any, x: Any) -> torch.dtype:
    """The dtype of a device value, or of a kernel argument's tensor without loading it
    (`x.new_zeros([tile])` on an argument reads only its dtype)."""
    if isinstance(x, HostTensor):
        return x.dtype
    return _value(tracer, x).dtype


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
