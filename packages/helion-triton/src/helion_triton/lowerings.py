"""The Triton backend's lowering table: one rule per op.

A rule is ``rule(ctx, node) -> str | None``: ``ctx`` is the :class:`~helion_triton.codegen.
KernelCodegen` generating the kernel (operands, casts, shapes, masks, emitted statements), and
the result is the expression of the node's output, or for ops without outputs a statement (or
None when the rule emitted its statements itself). The output expression must have exactly the
IR dtype of the output. Ops of other packages reach this table through the
``helion_lowerings("triton")`` hook (:func:`lowering_table`); an op with two rules is an error.

This module holds the table and the elementwise rules; the other families register into the
same table from :mod:`helion_triton.reductions` (reductions, scans, dots),
:mod:`helion_triton.views` (views, creation, tile attributes) and :mod:`helion_triton.memory`.
"""

from __future__ import annotations

import threading
from typing import Any
from typing import Callable

import torch

from helion import plugins
from helion.ir.core import Node
from helion.ir.core import TensorType
from helion.ir.core import Value
from helion.language import _ops as ops
from helion_triton import fp8
from helion_triton.codegen import constant_as
from helion_triton.codegen import literal

Rule = Callable[[Any, Node], Any]
TRITON_LOWERINGS: dict[ops.Op, Rule] = {}


def triton_lowering(*op_list: ops.Op) -> Callable[[Rule], Rule]:
    """Register ``rule`` as the Triton lowering of each op in ``op_list``."""

    def decorator(rule: Rule) -> Rule:
        for op in op_list:
            if op in TRITON_LOWERINGS:
                raise ValueError(f"triton lowering for {op.name} registered twice")
            TRITON_LOWERINGS[op] = rule
        return rule

    return decorator


_table_lock = threading.Lock()
_table_cache: tuple[int, dict[ops.Op, Rule]] | None = None


def lowering_table() -> dict[ops.Op, Rule]:
    """This backend's rules merged with those plugins provide for it (rebuilt when plugins change)."""
    global _table_cache
    # the other families register into TRITON_LOWERINGS when imported
    import helion_triton.combine
    import helion_triton.inline_code
    import helion_triton.memory
    import helion_triton.reductions
    import helion_triton.rng
    import helion_triton.scaled_dot
    import helion_triton.shape_ops
    import helion_triton.stack
    import helion_triton.views  # noqa: F401

    generation = plugins.generation()
    cached = _table_cache
    if cached is not None and cached[0] == generation:
        return cached[1]
    with _table_lock:
        table = dict(TRITON_LOWERINGS)
        for result in plugins.call_each_plugin("helion_lowerings", backend="triton"):
            if not isinstance(result.value, dict):
                continue
            for op, rule in result.value.items():
                if op in table:
                    raise ValueError(
                        f"plugin {result.plugin.name!r} gives a triton lowering for {getattr(op, 'name', op)!r}, "
                        "which already has one"
                    )
                table[op] = rule
        _table_cache = (plugins.generation(), table)
        return table


LOW_PRECISION = (torch.float16, torch.bfloat16)


def compute_float(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in LOW_PRECISION else dtype


def interpreted_float(ctx: Any, dtype: torch.dtype, node: Node) -> torch.dtype:
    """The dtype plain arithmetic on ``dtype`` runs in: the Triton interpreter keeps bf16 values
    as raw uint16 bits (its add, compare, min/max act on those integers), so bf16 goes via float32."""
    interpreted = dtype == torch.bfloat16 and ctx.target.interpret
    return torch.float32 if interpreted and not _all_constant(node) else dtype


# -- elementwise: unary ---------------------------------------------------------------------------

# computed in float32 for fp16/bf16 inputs (as eager torch does), then rounded to the result dtype
_CORE_MATH = {
    "exp": "tl.exp({})",
    "exp2": "tl.exp2({})",
    "log": "tl.log({})",
    "log2": "tl.log2({})",
    "rsqrt": "tl.rsqrt({})",
    "sin": "tl.sin({})",
    "cos": "tl.cos({})",
    "erf": "tl.erf({})",
    "sigmoid": "tl.sigmoid({})",
}
_LIB_MATH = (
    "tanh",
    "expm1",
    "log1p",
    "log10",
    "tan",
    "sinh",
    "cosh",
    "atan",
    "asin",
    "acos",
    "erfinv",
)


def _float_unary(ctx: Any, node: Node, body: Callable[[str, torch.dtype], str]) -> str:
    out = node.output.dtype
    compute = compute_float(out)
    x = ctx.operand(node.inputs[0], compute)
    return ctx.cast(body(x, compute), out, compute)


def _core_math_rule(template: str) -> Rule:
    def rule(ctx: Any, node: Node) -> str:
        return _float_unary(ctx, node, lambda x, dtype: template.format(x))

    return rule


for _name, _template in _CORE_MATH.items():
    triton_lowering(ops.UNARY[_name])(_core_math_rule(_template))


def _lib_math_rule(name: str) -> Rule:
    def rule(ctx: Any, node: Node) -> str:
        return _float_unary(ctx, node, lambda x, dtype: ctx.math(name, x))

    return rule


for _name in _LIB_MATH:
    triton_lowering(ops.UNARY[_name])(_lib_math_rule(_name))


@triton_lowering(ops.UNARY["reciprocal"])
def _reciprocal(ctx: Any, node: Node) -> str:
    return _float_unary(ctx, node, lambda x, dtype: _divide(ctx, "1.0", x, dtype))


@triton_lowering(ops.UNARY["sqrt"])
def _sqrt(ctx: Any, node: Node) -> str:
    return _float_unary(
        ctx,
        node,
        lambda x, dtype: f"tl.sqrt_rn({x})" if dtype == torch.float32 else f"tl.sqrt({x})",
    )


@triton_lowering(ops.UNARY["gelu"])
def _gelu(ctx: Any, node: Node) -> str:
    def body(x: str, dtype: torch.dtype) -> str:
        if node.attrs.get("approximate", "none") == "tanh":
            inner = ctx.assign(
                f"0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})", "gelu_inner"
            )
            return f"0.5 * {x} * (1.0 + {ctx.math('tanh', inner)})"
        return f"0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476))"

    return _float_unary(ctx, node, body)


@triton_lowering(ops.UNARY["silu"])
def _silu(ctx: Any, node: Node) -> str:
    return _float_unary(ctx, node, lambda x, dtype: f"{x} * tl.sigmoid({x})")


@triton_lowering(ops.UNARY["softplus"])
def _softplus(ctx: Any, node: Node) -> str:
    return _float_unary(
        ctx,
        node,
        lambda x, dtype: f"tl.where({x} > 20.0, {x}, {ctx.math('log1p', f'tl.exp({x})')})",
    )


def _same_dtype(ctx: Any, node: Node) -> tuple[str, torch.dtype]:
    dtype = node.output.dtype
    return ctx.operand(node.inputs[0], dtype), dtype


@triton_lowering(ops.UNARY["neg"])
def _neg(ctx: Any, node: Node) -> str:
    x, dtype = _same_dtype(ctx, node)
    if dtype == torch.bool:
        return x
    compute = interpreted_float(ctx, dtype, node)
    value = ctx.cast(x, compute, dtype)
    # Triton negates as `0 - x`, which gives +0.0 for 0.0; torch flips the sign (-0.0)
    negated = f"({value} * -1.0)" if compute.is_floating_point else f"-{value}"
    return ctx.cast(negated, dtype, compute)


@triton_lowering(ops.UNARY["abs"])
def _abs(ctx: Any, node: Node) -> str:
    x, dtype = _same_dtype(ctx, node)
    return x if dtype == torch.bool else f"tl.abs({x})"


@triton_lowering(ops.UNARY["relu"])
def _relu(ctx: Any, node: Node) -> str:
    x, dtype = _same_dtype(ctx, node)
    # `x < 0` is False for NaN, which therefore passes through as torch.relu does
    negative = f"{ctx.cast(x, interpreted_float(ctx, dtype, node), dtype)} < 0"
    return x if dtype == torch.bool else f"tl.where({negative}, 0, {x})"


def _rounding_rule(template: str) -> Rule:
    def rule(ctx: Any, node: Node) -> str:
        x, dtype = _same_dtype(ctx, node)
        if not dtype.is_floating_point:
            return x
        compute = compute_float(dtype)
        value = ctx.cast(x, compute, dtype)
        return ctx.cast(template.format(value), dtype, compute)

    return rule


triton_lowering(ops.UNARY["floor"])(_rounding_rule("tl.floor({0})"))
triton_lowering(ops.UNARY["ceil"])(_rounding_rule("tl.ceil({0})"))
triton_lowering(ops.UNARY["trunc"])(
    _rounding_rule("tl.where({0} < 0, tl.ceil({0}), tl.floor({0}))")
)


@triton_lowering(ops.UNARY["round"])
def _round(ctx: Any, node: Node) -> str:
    x, dtype = _same_dtype(ctx, node)
    if not dtype.is_floating_point:
        return x
    compute = compute_float(dtype)
    return ctx.cast(ctx.math("round", ctx.cast(x, compute, dtype)), dtype, compute)


@triton_lowering(ops.UNARY["sign"])
def _sign(ctx: Any, node: Node) -> str:
    x, dtype = _same_dtype(ctx, node)
    if dtype == torch.bool:
        return x
    # compared and subtracted in float32 for bf16 in the interpreter (which holds bf16 as raw
    # bits), and the 0/1 flags converted through ctx.cast: a bare `.to(tl.bfloat16)` of a bool
    # reinterprets its bits there (sign(3.0) came out as 9.18e-41)
    compute = interpreted_float(ctx, dtype, node)
    x = ctx.assign(ctx.cast(x, compute, dtype), "value")
    positive = ctx.cast(f"({x} > 0)", compute, torch.bool)
    negative = ctx.cast(f"({x} < 0)", compute, torch.bool)
    return ctx.cast(f"({positive} - {negative})", dtype, compute)


@triton_lowering(ops.UNARY["bitwise_not"])
def _bitwise_not(ctx: Any, node: Node) -> str:
    x, dtype = _same_dtype(ctx, node)
    return f"({x} == 0)" if dtype == torch.bool else f"~{x}"


@triton_lowering(ops.UNARY["logical_not"])
def _logical_not(ctx: Any, node: Node) -> str:
    return f"({ctx.expr(node.inputs[0])} == 0)"


def _float_input(ctx: Any, node: Node) -> tuple[str, torch.dtype | None]:
    value = node.inputs[0]
    dtype = ctx.dtype_of(value)
    if dtype in (torch.bfloat16, torch.float16) or dtype in fp8.FP8:
        # checked in float32 (exact): Triton's interpreter holds bf16 (and fp8) as raw bits,
        # on which x != x is never true
        return ctx.cast(ctx.expr(value), torch.float32, dtype), torch.float32
    return ctx.expr(value), dtype


def _all_lanes(ctx: Any, node: Node, flag: bool) -> str:
    return f"tl.full({ctx.shape(node.output.shape)}, {flag}, tl.int1)"


@triton_lowering(ops.UNARY["isnan"])
def _isnan(ctx: Any, node: Node) -> str:
    x, dtype = _float_input(ctx, node)
    if dtype is not None and not dtype.is_floating_point:
        return _all_lanes(ctx, node, False)
    return f"({x} != {x})"


@triton_lowering(ops.UNARY["isinf"])
def _isinf(ctx: Any, node: Node) -> str:
    x, dtype = _float_input(ctx, node)
    if dtype is not None and not dtype.is_floating_point:
        return _all_lanes(ctx, node, False)
    return f'(tl.abs({x}) == float("inf"))'


@triton_lowering(ops.UNARY["isfinite"])
def _isfinite(ctx: Any, node: Node) -> str:
    x, dtype = _float_input(ctx, node)
    if dtype is not None and not dtype.is_floating_point:
        return _all_lanes(ctx, node, True)
    return f'(tl.abs({x}) < float("inf"))'


_SIGN_BIT_VIEW = {
    torch.float16: "tl.int16",
    torch.bfloat16: "tl.int16",
    torch.float32: "tl.int32",
    torch.float64: "tl.int64",
}


@triton_lowering(ops.UNARY["signbit"])
def _signbit(ctx: Any, node: Node) -> str:
    x, dtype = _float_input(ctx, node)
    if dtype in _SIGN_BIT_VIEW:
        return f"({x}.to({_SIGN_BIT_VIEW[dtype]}, bitcast=True) < 0)"
    if dtype == torch.bool:
        return _all_lanes(ctx, node, False)
    return f"({x} < 0)"


# -- elementwise: binary -----------------------------------------------------------------------------

_OPERATORS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "bitwise_and": "&",
    "bitwise_or": "|",
    "bitwise_xor": "^",
    "left_shift": "<<",
    "right_shift": ">>",
}
_COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _binary_operands(ctx: Any, node: Node, dtype: torch.dtype) -> tuple[str, str]:
    a, b = node.inputs[:2]
    return ctx.operand(a, dtype), ctx.operand(b, dtype)


def _all_constant(node: Node) -> bool:
    return not any(isinstance(i, Value) for i in node.inputs)


def _typed(ctx: Any, node: Node, expr: str) -> str:
    """Python-constant arithmetic made into a typed 0-D value."""
    if _all_constant(node):
        return f"tl.full([], {expr}, {ctx.tl(node.output.dtype)})"
    return expr


def _scalar_in_float32(ctx: Any, node: Node, dtype: torch.dtype) -> bool:
    """Whether a float16 / bfloat16 add, sub or mul takes a scalar torch keeps in float32.

    Torch computes these ops in float32 and rounds once; a Python number (or a CPU 0-D tensor)
    operand enters as a float32 scalar, not rounded to the tensor's dtype first (CUDA's
    ``opmath_*_gpu_kernel_with_scalars``, CPU's ``mul`` / ``div``): bf16 ``x * 1.003`` is not
    ``x * 1.0``. Such an operand here is a constant that the 16-bit dtype does not hold
    exactly, a runtime scalar argument, or a constant 0-D tensor; tensor operands are rounded
    to the dtype as torch rounds them, and then the op in the dtype is exact."""
    if dtype not in LOW_PRECISION:
        return False
    for operand in node.inputs:
        if isinstance(operand, Value):
            if not isinstance(operand.type, TensorType) or operand.type.shape:
                continue
            if operand.type.dtype == dtype:
                continue
            producer = getattr(operand, "producer", None)
            if operand.id in ctx.scalar_by_value or (
                producer is not None and producer.op is ops.constant
            ):
                return True
        elif isinstance(operand, (int, float)) and not isinstance(operand, bool):
            rounded = constant_as(operand, dtype)
            if rounded != operand and not (rounded != rounded and operand != operand):
                return True
    return False


def _operator_rule(symbol: str) -> Rule:
    def rule(ctx: Any, node: Node) -> str:
        dtype = node.output.dtype
        compute = interpreted_float(ctx, dtype, node)
        if compute != torch.float32 and _scalar_in_float32(ctx, node, dtype):
            compute = torch.float32
        a, b = _binary_operands(ctx, node, compute)
        if dtype == torch.bool and symbol in ("+", "*"):
            return _typed(ctx, node, _bool_bitwise(ctx, node, a, "|" if symbol == "+" else "&", b))
        if dtype == torch.bool and symbol in ("&", "|", "^"):
            return _typed(ctx, node, _bool_bitwise(ctx, node, a, symbol, b))
        return _typed(ctx, node, ctx.cast(f"({a} {symbol} {b})", dtype, compute))

    return rule


def _bool_bitwise(ctx: Any, node: Node, a: str, symbol: str, b: str) -> str:
    """``a & b`` (``|``, ``^``) of bools. The interpreter holds a 0-D comparison's result in a
    form NumPy's bitwise ufuncs refuse beside a bool tensor (`(x > 0) & (x.sum() > 0)`), so
    there the operands go through int8; compiled code keeps the i1 op."""
    if not ctx.target.interpret or _all_constant(node):
        return f"({a} {symbol} {b})"
    a, b = (
        f"({text}).to(tl.int8)" if isinstance(operand, Value) else str(int(bool(operand)))
        for text, operand in zip((a, b), node.inputs[:2], strict=True)
    )
    return f"(({a} {symbol} {b}) != 0)"


for _name, _symbol in _OPERATORS.items():
    triton_lowering(ops.BINARY[_name])(_operator_rule(_symbol))


def _comparison_rule(symbol: str) -> Rule:
    def rule(ctx: Any, node: Node) -> str:
        # torch compares in the operands' common dtype: a Python number or a float32 scalar
        # is rounded to a bf16 tensor's dtype first (bf16 x == 0.1 holds for x = bf16(0.1))
        common = ops.promote_types(*node.inputs)
        # fp8 compares as float32 (exact): not its bits, where -0.0 != 0.0 and NaN == NaN
        dtype = torch.float32 if common in fp8.FP8 else interpreted_float(ctx, common, node)
        a, b = (_in_common_dtype(ctx, operand, common, dtype) for operand in node.inputs[:2])
        return _typed(ctx, node, f"({a} {symbol} {b})")

    return rule


def _in_common_dtype(ctx: Any, operand: Any, common: torch.dtype, compute: torch.dtype) -> str:
    """``operand`` converted to ``common`` (as torch converts it), then to ``compute``."""
    if not isinstance(operand, Value):
        if common in fp8.FP8:
            return literal(constant_as(operand, common))  # rounded to fp8, exact in float32
        return ctx.operand(operand, common)  # a literal that ``compute`` holds exactly
    return ctx.cast(ctx.operand(operand, common), compute, common)


for _name, _symbol in _COMPARISONS.items():
    triton_lowering(ops.BINARY[_name])(_comparison_rule(_symbol))


def _logical_rule(symbol: str) -> Rule:
    def rule(ctx: Any, node: Node) -> str:
        a, b = _binary_operands(ctx, node, torch.bool)
        return _typed(ctx, node, _bool_bitwise(ctx, node, a, symbol, b))

    return rule


triton_lowering(ops.BINARY["logical_and"])(_logical_rule("&"))
triton_lowering(ops.BINARY["logical_or"])(_logical_rule("|"))
triton_lowering(ops.BINARY["logical_xor"])(_logical_rule("^"))


@triton_lowering(ops.BINARY["truediv"])
def _truediv(ctx: Any, node: Node) -> str:
    dtype = node.output.dtype
    compute = compute_float(dtype)
    a, b = _binary_operands(ctx, node, compute)
    return _typed(ctx, node, ctx.cast(_divide(ctx, a, b, compute), dtype, compute))


def _divide(ctx: Any, a: str, b: str, compute: torch.dtype) -> str:
    """``a / b`` rounded as torch rounds it. Triton's float32 `/` is div.full.f32 on the GPU
    (within 2 ulps) where torch's CUDA division is correctly rounded: round(x, decimals) and
    x / n came out an ulp off on an H100. The interpreter's `/` (numpy's) is exact already."""
    if compute == torch.float32 and not ctx.target.interpret:
        return f"tl.div_rn({a}, {b})"
    return f"({a} / {b})"


@triton_lowering(ops.BINARY["floordiv"])
def _floordiv(ctx: Any, node: Node) -> str:
    dtype = node.output.dtype
    if dtype.is_floating_point:
        compute = compute_float(dtype)
        a, b = _binary_operands(ctx, node, compute)
        return _typed(ctx, node, ctx.cast(_floor_divide(ctx, a, b, compute), dtype, compute))
    a, b = _binary_operands(ctx, node, dtype)
    a, b = ctx.assign(a, "lhs"), ctx.assign(b, "rhs")
    quotient = ctx.assign(f"{a} // {b}", "quotient")
    # `//` on integers truncates towards zero; step down where the true quotient is negative
    remainder = ctx.assign(f"{a} - {quotient} * {b}", "remainder")
    return _typed(
        ctx,
        node,
        f"tl.where(({remainder} != 0) & (({remainder} < 0) != ({b} < 0)), {quotient} - 1, {quotient})",
    )


def _floor_divide(ctx: Any, a: str, b: str, compute: torch.dtype) -> str:
    """Float ``a // b`` as torch computes it (``div_floor_floating``): through fmod, so an
    infinite or NaN dividend gives NaN (floor(inf / 1.5) was inf), an infinite divisor gives
    0 or -1, and a zero result takes the sign of ``a / b``; ``a / b`` for a zero divisor."""
    a, b = ctx.assign(a, "lhs"), ctx.assign(b, "rhs")
    mod = ctx.assign(ctx.math("fmod", a, b), "mod")
    div = ctx.assign(_divide(ctx, f"({a} - {mod})", b, compute), "div")
    div = ctx.assign(
        f"tl.where(({mod} != 0) & (({b} < 0) != ({mod} < 0)), {div} - 1, {div})", "div"
    )
    floor = ctx.assign(f"tl.floor({div})", "floor")
    floor = ctx.assign(f"tl.where({div} - {floor} > 0.5, {floor} + 1, {floor})", "floor")
    quotient = ctx.assign(_divide(ctx, a, b, compute), "quotient")
    # copysign(0, a / b) where div is zero (a / b is finite there: `* 0.0` keeps its sign)
    result = f"tl.where({div} != 0, {floor}, {quotient} * 0.0)"
    return f"tl.where({b} == 0, {quotient}, {result})"


@triton_lowering(ops.BINARY["remainder"])
def _remainder(ctx: Any, node: Node) -> str:
    dtype = node.output.dtype
    compute = compute_float(dtype) if dtype.is_floating_point else dtype
    a, b = _binary_operands(ctx, node, compute)
    a, b = ctx.assign(a, "lhs"), ctx.assign(b, "rhs")
    if dtype.is_floating_point:
        # C's fmod (exact, the dividend's sign), moved to the divisor's sign as torch does.
        # a - floor(a / b) * b was an ulp off, and nan for an infinite b; on the GPU Triton's
        # `%` kept inf for fmod(inf, b) and lost the sign of a zero: libdevice's fmod there
        remainder = ctx.assign(ctx.math("fmod", a, b), "remainder")
        moved = f"tl.where(({remainder} != 0) & (({remainder} < 0) != ({b} < 0)), {remainder} + {b}, {remainder})"
        return _typed(ctx, node, ctx.cast(moved, dtype, compute))
    remainder = ctx.assign(f"{a} - ({a} // {b}) * {b}", "remainder")
    # the sign of torch.remainder follows the divisor (Python semantics)
    return _typed(
        ctx,
        node,
        f"tl.where(({remainder} != 0) & (({remainder} < 0) != ({b} < 0)), {remainder} + {b}, {remainder})",
    )


@triton_lowering(ops.BINARY["pow"])
def _pow(ctx: Any, node: Node) -> str:
    dtype = node.output.dtype
    base, exponent = node.inputs[:2]
    constant = exponent if not isinstance(exponent, Value) else None
    compute = compute_float(dtype) if dtype.is_floating_point else dtype
    if isinstance(base, Value):
        x = ctx.assign(ctx.operand(base, compute), "base")
    else:
        # a number base (`2 ** y`): a typed value, which pow's math takes (not a Python int)
        x = ctx.assign(ctx.typed_constant(base, compute), "base")
    if constant is not None and float(constant).is_integer() and 0 <= float(constant) <= 8:
        power = int(constant)
        result = " * ".join([x] * power) if power else f"tl.full([], 1, {ctx.tl(compute)})"
        if power == 0 and isinstance(base, Value):
            result = f"({x} * 0 + 1)"
        return _typed(ctx, node, ctx.cast(f"({result})", dtype, compute))
    if not dtype.is_floating_point:
        raise ctx.unsupported("pow of integers with a non-constant or negative exponent")
    if constant is not None and float(constant) == 0.5:
        root = f"tl.sqrt_rn({x})" if compute == torch.float32 else f"tl.sqrt({x})"
        return _typed(ctx, node, ctx.cast(root, dtype, compute))
    if constant is not None and float(constant) == -1.0:
        return _typed(ctx, node, ctx.cast(_divide(ctx, "1.0", x, compute), dtype, compute))
    y = ctx.operand(exponent, compute)
    if constant is None:
        y = ctx.assign(y, "exponent")
    else:
        y = f"tl.full([], {y}, {ctx.tl(compute)})"
    return _typed(ctx, node, ctx.cast(ctx.math("pow", x, y), dtype, compute))


def _extreme_rule(name: str) -> Rule:
    def rule(ctx: Any, node: Node) -> str:
        dtype = node.output.dtype
        compute = interpreted_float(ctx, dtype, node)
        a, b = _binary_operands(ctx, node, compute)
        if dtype.is_floating_point:
            result = f"tl.{name}({a}, {b}, propagate_nan=tl.PropagateNan.ALL)"
            return _typed(ctx, node, ctx.cast(result, dtype, compute))
        if dtype == torch.bool:
            return f"({a} {'|' if name == 'maximum' else '&'} {b})"
        return _typed(ctx, node, f"tl.{name}({a}, {b})")

    return rule


triton_lowering(ops.BINARY["maximum"])(_extreme_rule("maximum"))
triton_lowering(ops.BINARY["minimum"])(_extreme_rule("minimum"))


@triton_lowering(ops.BINARY["atan2"])
def _atan2(ctx: Any, node: Node) -> str:
    dtype = node.output.dtype
    compute = compute_float(dtype)
    a, b = _binary_operands(ctx, node, compute)
    a, b = ctx.assign(a, "lhs"), ctx.assign(b, "rhs")
    return ctx.cast(ctx.math("atan2", a, b), dtype, compute)


@triton_lowering(ops.where)
def _where(ctx: Any, node: Node) -> str:
    cond, a, b = node.inputs
    dtype = node.output.dtype
    condition = ctx.operand(cond, torch.bool)
    result = f"tl.where({condition}, {ctx.operand(a, dtype)}, {ctx.operand(b, dtype)})"
    if not isinstance(a, Value) and not isinstance(b, Value):
        result = f"{result}.to({ctx.tl(dtype)})"
    return result


@triton_lowering(ops.cast)
def _cast(ctx: Any, node: Node) -> str:
    value = node.inputs[0]
    dtype = node.attrs["dtype"]
    if not isinstance(value, Value):
        return ctx.typed_constant(value, dtype)
    return ctx.cast(ctx.expr(value), dtype, ctx.dtype_of(value))


@triton_lowering(ops.clamp)
def _clamp(ctx: Any, node: Node) -> str:
    x, low, high = node.inputs
    dtype = node.output.dtype
    compute = interpreted_float(ctx, dtype, node)
    result = ctx.operand(x, compute)
    nan = ", propagate_nan=tl.PropagateNan.ALL" if dtype.is_floating_point else ""
    if low is not None:
        result = f"tl.maximum({result}, {ctx.operand(low, compute)}{nan})"
    if high is not None:
        result = f"tl.minimum({result}, {ctx.operand(high, compute)}{nan})"
    return ctx.cast(result, dtype, compute)


__all__ = ["TRITON_LOWERINGS", "compute_float", "lowering_table", "triton_lowering"]
