"""The Pallas backend's lowering table: one rule per op, registered with `@pallas_lowering`.

A rule receives the code generator (`helion_pallas.codegen.KernelCodegen`, the context) and the
node, and returns the JAX expression of the node's value (or emits statements and returns None
for ops without a value). Values are padded arrays (see `codegen`); rules that look across a
dimension (reductions, scans, dots) put the op's neutral element in the lanes the dimension's
mask marks out of bounds. Memory ops (load, store, atomic) live in `helion_pallas.memory`.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable

import sympy
import torch

import helion.language._ops as ops
from helion import exc
from helion.ir.core import Node
from helion.ir.core import TensorType
from helion.ir.core import Value
from helion.ir.host_scalars import value_is_host_scalar
from helion.passes.upcasts import needs_exact_small_k_products
from helion_pallas.writer import literal
from helion_pallas.writer import tuple_text

if TYPE_CHECKING:
    from helion_pallas.codegen import KernelCodegen

Rule = Callable[["KernelCodegen", Node], "str | None"]

PALLAS_LOWERINGS: dict[ops.Op, Rule] = {}


def pallas_lowering(*op_list: ops.Op) -> Callable[[Rule], Rule]:
    """Register `rule` as the Pallas lowering of each op in `op_list` (a duplicate is an error)."""

    def decorator(rule: Rule) -> Rule:
        for op in op_list:
            if op in PALLAS_LOWERINGS:
                raise ValueError(f"pallas lowering for {op.name} registered twice")
            PALLAS_LOWERINGS[op] = rule
        return rule

    return decorator


_merged: tuple[int, dict[ops.Op, Rule]] | None = None


def lowering_table() -> dict[ops.Op, Rule]:
    """This package's rules plus those other packages give through `helion_lowerings("pallas")`."""
    global _merged
    from helion import plugins

    generation = plugins.generation()
    if _merged is not None and _merged[0] == generation:
        return _merged[1]
    table = dict(PALLAS_LOWERINGS)
    for result in plugins.call_each_plugin("helion_lowerings", backend="pallas"):
        if not isinstance(result.value, dict):
            continue
        for op, rule in result.value.items():
            if op in table:
                raise ValueError(
                    f"pallas lowering for {op.name} given twice (again by plugin {result.plugin.name!r})"
                )
            table[op] = rule
    _merged = (plugins.generation(), table)
    return table


# ---------------------------------------------------------------------------------------------
# elementwise

_HALF = (torch.float16, torch.bfloat16)


def _weak_literal_ok(operand: Any, dtype: torch.dtype) -> bool:
    """Whether a Python scalar can stay an untyped literal next to a `dtype` array (JAX weak
    typing keeps the array's dtype)."""
    if isinstance(operand, sympy.Expr):
        return bool(operand.is_Integer) and dtype != torch.bool
    if isinstance(operand, bool):
        return True
    if isinstance(operand, int):
        return dtype != torch.bool
    if isinstance(operand, float):
        return dtype.is_floating_point
    return False


def compute_operands(ctx: KernelCodegen, inputs: list[Any], dtype: torch.dtype) -> list[str]:
    """Operands converted to the op's compute dtype; literals stay weak where that is exact."""
    anchored = any(isinstance(x, Value) and x.dtype == dtype for x in inputs)
    texts = []
    for operand in inputs:
        if isinstance(operand, Value) or not (anchored and _weak_literal_ok(operand, dtype)):
            texts.append(ctx.typed(operand, dtype))
        else:
            texts.append(ctx.operand(operand))
    return texts


_UNARY = {
    "exp": "jnp.exp({0})",
    "exp2": "jnp.exp2({0})",
    "expm1": "jnp.expm1({0})",
    "log": "jnp.log({0})",
    "log2": "jnp.log2({0})",
    "log10": "jnp.log10({0})",
    "log1p": "jnp.log1p({0})",
    "sqrt": "jnp.sqrt({0})",
    "rsqrt": "jax.lax.rsqrt({0})",
    "sin": "jnp.sin({0})",
    "cos": "jnp.cos({0})",
    "tan": "jnp.tan({0})",
    "tanh": "jnp.tanh({0})",
    "sigmoid": "jax.nn.sigmoid({0})",
    "erf": "jax.lax.erf({0})",
    "erfinv": "jax.lax.erf_inv({0})",
    "atan": "jnp.arctan({0})",
    "asin": "jnp.arcsin({0})",
    "acos": "jnp.arccos({0})",
    "sinh": "jnp.sinh({0})",
    "cosh": "jnp.cosh({0})",
    "silu": "jax.nn.silu({0})",
    "softplus": "jnp.where({0} > 20, {0}, jnp.log1p(jnp.exp(jnp.minimum({0}, 20))))",
    "neg": "-{0}",
    "abs": "jnp.abs({0})",
    "relu": "jnp.maximum({0}, 0)",
    "floor": "jnp.floor({0})",
    "ceil": "jnp.ceil({0})",
    "round": "jnp.round({0})",
    "trunc": "jnp.trunc({0})",
    "bitwise_not": "~{0}",
    "logical_not": "jnp.logical_not({0})",
    "isnan": "jnp.isnan({0})",
    "isinf": "jnp.isinf({0})",
    "isfinite": "jnp.isfinite({0})",
    "signbit": "jnp.signbit({0})",
}
# rounding an integer is the identity (jnp's rounding functions want floats)
_INTEGER_IDENTITY = {"floor", "ceil", "round", "trunc"}
# Unary ops whose float16/bfloat16 result is exact in the input's dtype. Every other float op
# (exp, exp2, log2, sigmoid, silu, asin, gelu, ...) computes a float16/bfloat16 input in float32
# and rounds the result once, as PyTorch's kernels do: JAX computes exp2, log2, sigmoid, silu,
# ... of a bf16 array in bf16 (exp2 of bf16 9.9 is 908, PyTorch's 940).
_EXACT_IN_HALF = {"neg", "abs", "relu", "floor", "ceil", "round", "trunc", "bitwise_not"}


def _unary_rule(name: str) -> Rule:
    template = _UNARY[name]

    def rule(ctx: KernelCodegen, node: Node) -> str:
        x = node.inputs[0]
        out = node.output.dtype
        if name in ops.BOOL_UNARY:
            return template.format(
                ctx.operand(x) if isinstance(x, Value) else ctx.typed(x, torch.float32)
            )
        if out in _HALF and name not in _EXACT_IN_HALF:
            text = _float32_operand(ctx, x, out, unrounded=False)
            return _rounded_to(ctx, _unary_text(ctx, name, text, torch.float32), out)
        return _unary_text(ctx, name, ctx.typed(x, out), out)

    return rule


def _unary_text(ctx: KernelCodegen, name: str, text: str, out: torch.dtype) -> str:
    """`name` of `text`, an operand typed for the computation, whose dtype is `out`."""
    template = _UNARY[name]
    if name in _INTEGER_IDENTITY and not out.is_floating_point:
        return text
    if name == "relu" and out == torch.bool:
        return text
    if name == "relu" and out.is_floating_point:
        # keeps NaN (also on the GPU, whose maxnumf drops it) and -0.0, as PyTorch does
        value = _bind(ctx, text, "x")
        return f"jnp.where({value} < 0, 0, {value})"
    if gpu_numerics(ctx) and out.is_floating_point:
        if name == "round":
            return round_half_even(ctx, text)
        if name == "neg":
            return f"{_paren(text)} * -1"  # `0 - x` there: -(0.0) would be +0.0
        if name == "softplus":
            value = _bind(ctx, text, "x")
            return f"jnp.where(jnp.isnan({value}), {value}, {template.format(value)})"
    return template.format(text)


for _name in _UNARY:
    pallas_lowering(ops.UNARY[_name])(_unary_rule(_name))


@pallas_lowering(ops.UNARY["sign"])
def _sign(ctx: KernelCodegen, node: Node) -> str:
    """PyTorch's sign: `(0 < x) - (x < 0)`, so sign(nan) and sign(-0.0) are 0.0 (`jnp.sign`
    keeps the NaN and the zero's sign)."""
    out = node.output.dtype
    text = ctx.typed(node.inputs[0], out)
    if out == torch.bool:
        return text
    if not out.is_floating_point:
        return f"jnp.sign({text})"
    value, dtype = _paren(text), ctx.dtype(out)
    return f"({value} > 0).astype({dtype}) - ({value} < 0).astype({dtype})"


@pallas_lowering(ops.UNARY["reciprocal"])
def _reciprocal(ctx: KernelCodegen, node: Node) -> str:
    return _quotient(ctx, node, 1, node.inputs[0], node.output.dtype)


@pallas_lowering(ops.UNARY["gelu"])
def _gelu(ctx: KernelCodegen, node: Node) -> str:
    approximate = node.attrs.get("approximate", "none") == "tanh"
    x, out = node.inputs[0], node.output.dtype
    if out in _HALF:  # computed in float32 and rounded once, as the unary ops above
        text = _float32_operand(ctx, x, out, unrounded=False)
        return _rounded_to(ctx, f"jax.nn.gelu({text}, approximate={approximate})", out)
    return f"jax.nn.gelu({ctx.typed(x, out)}, approximate={approximate})"


_BINARY = {
    "add": "{0} + {1}",
    "sub": "{0} - {1}",
    "mul": "{0} * {1}",
    "truediv": "{0} / {1}",
    "floordiv": "jnp.floor_divide({0}, {1})",
    "remainder": "jnp.remainder({0}, {1})",
    "pow": "jnp.power({0}, {1})",
    "maximum": "jnp.maximum({0}, {1})",
    "minimum": "jnp.minimum({0}, {1})",
    "bitwise_and": "{0} & {1}",
    "bitwise_or": "{0} | {1}",
    "bitwise_xor": "{0} ^ {1}",
    "left_shift": "jnp.left_shift({0}, {1})",
    "right_shift": "jnp.right_shift({0}, {1})",
    "atan2": "jnp.arctan2({0}, {1})",
    "eq": "{0} == {1}",
    "ne": "{0} != {1}",
    "lt": "{0} < {1}",
    "le": "{0} <= {1}",
    "gt": "{0} > {1}",
    "ge": "{0} >= {1}",
    "logical_and": "jnp.logical_and({0}, {1})",
    "logical_or": "jnp.logical_or({0}, {1})",
    "logical_xor": "jnp.logical_xor({0}, {1})",
}
_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}
_LOGICAL = {"logical_and", "logical_or", "logical_xor"}


def _binary_rule(name: str) -> Rule:
    template = _BINARY[name]

    def rule(ctx: KernelCodegen, node: Node) -> str:
        inputs = list(node.inputs)
        if name in _LOGICAL:
            dtype = torch.bool
        elif name in _COMPARISONS:
            dtype = ops.promote_types(*inputs)
        else:
            dtype = node.output.dtype
        a, b = compute_operands(ctx, inputs, dtype)
        text = template.format(_paren(a), _paren(b))
        if not any(isinstance(x, Value) for x in inputs):
            text = f"jnp.asarray({text}, dtype={ctx.dtype(node.output.dtype)})"
        return text

    return rule


_ATOM = re.compile(r"[\w.]+")


def _paren(text: str) -> str:
    """Parenthesize an operand unless it is a name, a number, or one call / subscript of one."""
    if _ATOM.fullmatch(text):
        return text
    head = _ATOM.match(text)
    if (
        head
        and text[head.end() : head.end() + 1] in ("(", "[")
        and _closes_at_end(text, head.end())
    ):
        return text
    return f"({text})"


def _closes_at_end(text: str, start: int) -> bool:
    """Whether the bracket opened at `start` closes at the last character."""
    depth = 0
    for position in range(start, len(text)):
        if text[position] in "([":
            depth += 1
        elif text[position] in ")]":
            depth -= 1
            if depth == 0:
                return position == len(text) - 1
    return False


_GENERIC_BINARY = {_name: _binary_rule(_name) for _name in _BINARY}
for _name in _BINARY:
    if _name not in ("mul", "truediv", "floordiv", "remainder", "maximum", "minimum"):
        pallas_lowering(ops.BINARY[_name])(_GENERIC_BINARY[_name])


# -- Pallas' Triton lowering (GPU) -------------------------------------------------------------
#
# It has no `round` primitive (which `jnp.round` and float `jnp.floor_divide` use), lowers
# `jnp.maximum`/`jnp.minimum` of floats to maxnumf/minnumf (which drop NaN; PyTorch keeps it)
# and `-x` to `0 - x` (+0.0 for x = 0.0). These rules avoid each on that target.


def gpu_numerics(ctx: KernelCodegen) -> bool:
    """Whether the kernel goes through Pallas' Triton lowering."""
    return ctx.options.target == "gpu"


def _bind(ctx: KernelCodegen, text: str, hint: str) -> str:
    """`text` as a name (emitted to a fresh one unless it is one or a literal)."""
    if _ATOM.fullmatch(text):
        return text
    name = ctx.fresh(hint)
    ctx.emit(f"{name} = {text}")
    return name


def round_half_even(ctx: KernelCodegen, text: str) -> str:
    """`torch.round` of a float from floor and comparisons (exact: `x - floor(x)` is exact
    where it decides anything). A zero result takes x's sign (round(-0.3) is -0.0); inf and
    NaN pass through."""
    x = _bind(ctx, text, "x")
    low, fraction = ctx.fresh("low"), ctx.fresh("fraction")
    ctx.emit(f"{low} = jnp.floor({x})")
    ctx.emit(f"{fraction} = {x} - {low}")
    odd = f"jnp.floor({low} * 0.5) * 2 != {low}"
    up = f"({fraction} > 0.5) | (({fraction} == 0.5) & ({odd}))"
    rounded = ctx.fresh("rounded")
    ctx.emit(f"{rounded} = jnp.where({up}, {low} + 1, {low})")
    return f"jnp.where({rounded} == 0, {x} * 0, {rounded})"


def _may_be_nan(operand: Any) -> bool:
    if isinstance(operand, Value):
        return True
    return isinstance(operand, float) and math.isnan(operand)


def extremum(ctx: KernelCodegen, function: str, operands: list[Any], texts: list[str]) -> str:
    """`function` (jnp.maximum or jnp.minimum) of two float operands; on the GPU NaN where
    either is NaN (`a + b` is then NaN)."""
    if not gpu_numerics(ctx) or not any(_may_be_nan(x) for x in operands):
        return f"{function}({texts[0]}, {texts[1]})"
    a, b = (_bind(ctx, text, "operand") for text in texts)
    nan = " | ".join(
        f"jnp.isnan({text})" for x, text in zip(operands, (a, b), strict=True) if _may_be_nan(x)
    )
    return f"jnp.where({nan}, {_paren(a)} + {_paren(b)}, {function}({a}, {b}))"


def _extremum_rule(name: str) -> Rule:
    def rule(ctx: KernelCodegen, node: Node) -> str:
        out = node.output.dtype
        if not out.is_floating_point or not gpu_numerics(ctx):
            return _GENERIC_BINARY[name](ctx, node)
        inputs = list(node.inputs)
        texts = compute_operands(ctx, inputs, out)
        text = extremum(ctx, f"jnp.{name}", inputs, texts)
        if not any(isinstance(x, Value) for x in inputs):
            text = f"jnp.asarray({text}, dtype={ctx.dtype(out)})"
        return text

    return rule


for _name in ("maximum", "minimum"):
    pallas_lowering(ops.BINARY[_name])(_extremum_rule(_name))


def float_fmod(ctx: KernelCodegen, a: str, b: str) -> str:
    """C's fmod of float operands. On the GPU `jnp.fmod` is LLVM's frem, `a - trunc(a / b) * b`
    (and `a` for an infinite `b`): a zero result lost the dividend's sign (+0.0 for -2 % 1) and
    fmod(inf, inf) was inf; both are set here as C (and PyTorch) has them."""
    if not gpu_numerics(ctx):
        return f"jnp.fmod({a}, {b})"
    a = _bind(ctx, a, "dividend")
    mod = ctx.fresh("mod")
    ctx.emit(f"{mod} = jnp.fmod({a}, {_paren(b)})")
    return f"jnp.where(jnp.isinf({a}), jnp.nan, jnp.where({mod} == 0, {a} * 0, {mod}))"


@pallas_lowering(ops.BINARY["remainder"])
def _remainder(ctx: KernelCodegen, node: Node) -> str:
    """torch.remainder: fmod moved to the divisor's sign (jnp.remainder, from frem on the GPU)."""
    out = node.output.dtype
    if not (gpu_numerics(ctx) and out.is_floating_point):
        return _GENERIC_BINARY["remainder"](ctx, node)
    a, b = compute_operands(ctx, list(node.inputs), out)
    b = _bind(ctx, b, "divisor")
    mod = ctx.fresh("mod")
    ctx.emit(f"{mod} = {float_fmod(ctx, a, b)}")
    text = f"jnp.where(({mod} != 0) & (({mod} < 0) != ({b} < 0)), {mod} + {b}, {mod})"
    if not any(isinstance(v, Value) for v in node.inputs):
        text = f"jnp.asarray({text}, dtype={ctx.dtype(out)})"
    return text


def floor_divide(ctx: KernelCodegen, a: str, b: str, out: torch.dtype) -> str:
    """`a // b` (`a`, `b`: operands typed for the computation, `out` its dtype). Floats follow
    PyTorch's div_floor_floating, without `round` (the GPU has none) and with a zero quotient
    signed as `a / b` (jnp.floor_divide's takes b's sign)."""
    if ctx.options.target == "tpu" or not out.is_floating_point:
        return f"jnp.floor_divide({a}, {b})"
    a, b = _bind(ctx, a, "dividend"), _bind(ctx, b, "divisor")
    mod, div, low = ctx.fresh("mod"), ctx.fresh("div"), ctx.fresh("low")
    ctx.emit(f"{mod} = {float_fmod(ctx, a, b)}")
    ctx.emit(f"{div} = ({a} - {mod}) / {_paren(b)}")
    ctx.emit(f"{div} = jnp.where(({mod} != 0) & (({b} < 0) != ({mod} < 0)), {div} - 1, {div})")
    ctx.emit(f"{low} = jnp.floor({div})")
    floor = f"jnp.where({div} - {low} > 0.5, {low} + 1, {low})"
    quotient = f"{_paren(a)} / {_paren(b)}"
    zero = f"({quotient}) * 0"  # copysign(0, a / b)
    return f"jnp.where({b} == 0, {quotient}, jnp.where({div} == 0, {zero}, {floor}))"


# -- float16/bfloat16 ops with a scalar operand, and divisions ---------------------------------
#
# PyTorch (CPU) reads a Python number (or a 0-D tensor of another dtype) that multiplies or
# divides a float16/bfloat16 tensor at float32, computes in float32 and rounds once: bf16 x * 1.003
# is not x * bf16(1.003) = x * 1.0. `+`, `-`, `**`, `%`, comparisons and `where` round the number
# to the tensor's dtype first, which is what JAX's weak typing does, so those keep the generic
# rule. Only the second operand is read so: the tracer gives `s * x` as `x * s` and `s / x` as
# `x.reciprocal() * s` (torch's reflected methods), so a number first is `torch.mul(s, x)` or
# `torch.div(s, x)`, which round it.


def _host_scalar(ctx: KernelCodegen, operand: Any) -> bool:
    """Whether `operand` is a Python number in eager PyTorch: a literal, a size, or a 0-D value
    computed from the kernel's scalar arguments and literals alone."""
    if not isinstance(operand, Value):
        return isinstance(operand, (int, float, sympy.Expr))
    return value_is_host_scalar(ctx.ir, operand)


def _read_at_float32(ctx: KernelCodegen, operand: Any, out: torch.dtype) -> bool:
    """Whether PyTorch reads `operand`, the second operand of a float16/bfloat16 `*`, `/` or
    `//`, at float32 rather than rounded to `out` (`iter.original_scalar_value<opmath_t>`)."""
    if out not in _HALF:
        return False
    if _host_scalar(ctx, operand):
        return True
    return (
        isinstance(operand, Value)
        and isinstance(operand.type, TensorType)
        and operand.type.ndim == 0
        and operand.dtype != out
    )


def divide(ctx: KernelCodegen, node: Node, a: str, b: str) -> str:
    """`a / b` correctly rounded (`a`, `b`: typed operands of `node`).

    XLA rewrites divisions: by a constant or a broadcast value into a multiply by the
    reciprocal, `a / sqrt(b)` into `a * rsqrt(b)`, `(a / b) / c` into `a / (b * c)` — each up to
    an ulp off, which `round(x, decimals=)` and friends show. In interpret mode both operands
    go through an optimization barrier at the result's shape, so XLA sees nothing to rewrite.
    Pallas' Triton lowering has no barrier: there the division is the GPU's."""
    if not ctx.options.interpret:
        return f"{_paren(a)} / {_paren(b)}"
    shape = ctx.shape_text(node.output.shape)
    numerator, denominator = ctx.fresh("numerator"), ctx.fresh("denominator")
    ctx.emit(
        f"{numerator}, {denominator} = jax.lax.optimization_barrier("
        f"(jnp.broadcast_to({a}, {shape}), jnp.broadcast_to({b}, {shape})))"
    )
    return f"{numerator} / {denominator}"


def _rounded_to(ctx: KernelCodegen, text: str, out: torch.dtype) -> str:
    """A float32 result rounded once to `out`."""
    return f"({text}).astype({ctx.dtype(out)})"


def _float32_operand(ctx: KernelCodegen, operand: Any, out: torch.dtype, unrounded: bool) -> str:
    """An operand of a float16/bfloat16 op computed in float32: the number itself when PyTorch
    reads it unrounded, else its value rounded to `out` (as PyTorch's common dtype makes it)."""
    exact = (
        operand.dtype == out
        if isinstance(operand, Value)
        else type(operand) is int and abs(operand) <= 256
    )
    if unrounded or exact:
        return ctx.typed(operand, torch.float32)
    return f"{ctx.typed(operand, out)}.astype(jnp.float32)"


@pallas_lowering(ops.BINARY["mul"])
def _mul(ctx: KernelCodegen, node: Node) -> str:
    a, b = node.inputs
    out = node.output.dtype
    if not _read_at_float32(ctx, b, out):
        return _GENERIC_BINARY["mul"](ctx, node)
    x = _float32_operand(ctx, a, out, unrounded=False)
    y = _float32_operand(ctx, b, out, unrounded=True)
    return _rounded_to(ctx, f"{_paren(x)} * {_paren(y)}", out)


@pallas_lowering(ops.BINARY["truediv"])
def _truediv(ctx: KernelCodegen, node: Node) -> str:
    a, b = node.inputs
    out = node.output.dtype
    if not out.is_floating_point:
        return _GENERIC_BINARY["truediv"](ctx, node)
    return _quotient(ctx, node, a, b, out)


def _quotient(ctx: KernelCodegen, node: Node, a: Any, b: Any, out: torch.dtype) -> str:
    """`a / b` as PyTorch computes it for a result of dtype `out`: float16/bfloat16 in float32,
    rounded once (also the only way Pallas' Triton lowering divides them)."""
    if out not in _HALF:
        return divide(ctx, node, ctx.typed(a, out), ctx.typed(b, out))
    x = _float32_operand(ctx, a, out, unrounded=False)
    y = _float32_operand(ctx, b, out, unrounded=_read_at_float32(ctx, b, out))
    return _rounded_to(ctx, divide(ctx, node, x, y), out)


@pallas_lowering(ops.BINARY["floordiv"])
def _floordiv(ctx: KernelCodegen, node: Node) -> str:
    a, b = node.inputs
    out = node.output.dtype
    if not _read_at_float32(ctx, b, out):
        if ctx.options.target == "tpu" or not out.is_floating_point:
            return _GENERIC_BINARY["floordiv"](ctx, node)
        x, y = compute_operands(ctx, [a, b], out)
        text = floor_divide(ctx, x, y, out)
        if not any(isinstance(v, Value) for v in (a, b)):
            text = f"jnp.asarray({text}, dtype={ctx.dtype(out)})"
        return text
    x = _float32_operand(ctx, a, out, unrounded=False)
    y = _float32_operand(ctx, b, out, unrounded=True)
    return _rounded_to(ctx, floor_divide(ctx, x, y, torch.float32), out)


@pallas_lowering(ops.where)
def _where(ctx: KernelCodegen, node: Node) -> str:
    condition, a, b = node.inputs
    cond_text = ctx.typed(condition, torch.bool)
    a_text, b_text = compute_operands(ctx, [a, b], node.output.dtype)
    text = f"jnp.where({cond_text}, {a_text}, {b_text})"
    if not isinstance(a, Value) and not isinstance(b, Value):
        text = f"{text}.astype({ctx.dtype(node.output.dtype)})"
    return text


@pallas_lowering(ops.cast)
def _cast(ctx: KernelCodegen, node: Node) -> str:
    x = node.inputs[0]
    if ctx.is_zero_padded(x) and node.attrs["dtype"] != torch.bool:
        ctx.mark_zero_padded(node.output)
    return ctx.typed(x, node.attrs["dtype"])


@pallas_lowering(ops.clamp)
def _clamp(ctx: KernelCodegen, node: Node) -> str:
    x, low, high = [*node.inputs, None, None][:3]
    dtype = node.output.dtype
    text = ctx.typed(x, dtype)
    floating = dtype.is_floating_point
    if low is not None:
        bound = compute_operands(ctx, [x, low], dtype)[1]
        if floating:
            text = extremum(ctx, "jnp.maximum", [x, low], [text, bound])
        else:
            text = f"jnp.maximum({text}, {bound})"
    if high is not None:
        bound = compute_operands(ctx, [x, high], dtype)[1]
        if floating:
            text = extremum(ctx, "jnp.minimum", [x, high], [text, bound])
        else:
            text = f"jnp.minimum({text}, {bound})"
    return text


# ---------------------------------------------------------------------------------------------
# reductions and scans


def neutral(kind: str, dtype: torch.dtype) -> str:
    """The identity of a reduction, as source text for `dtype`."""
    if kind in ("sum", "any", "cumsum"):
        return "False" if dtype == torch.bool else "0"
    if kind in ("prod", "all", "cumprod"):
        return "True" if dtype == torch.bool else "1"
    high = kind in ("amin", "argmin", "cummin")
    if dtype == torch.bool:
        return "True" if high else "False"
    if dtype.is_floating_point:
        return "jnp.inf" if high else "-jnp.inf"
    info = torch.iinfo(dtype)
    return str(info.max if high else info.min)


def _masked_along(ctx: KernelCodegen, x: Value, text: str, axis: int, fill: str) -> str:
    mask = ctx.axis_mask(x, axis)
    if mask is None:
        return text
    return f"jnp.where({ctx.at_axis(mask, axis, len(x.shape))}, {text}, {fill})"


_REDUCE_FUNCTIONS = {
    "sum": "jnp.sum",
    "prod": "jnp.prod",
    "amax": "jnp.max",
    "amin": "jnp.min",
    "any": "jnp.any",
    "all": "jnp.all",
    "argmax": "jnp.argmax",
    "argmin": "jnp.argmin",
}


def _reduce_rule(kind: str) -> Rule:
    def rule(ctx: KernelCodegen, node: Node) -> str:
        x = node.inputs[0]
        out = node.output.dtype
        axis = node.attrs["dim"]
        keepdims = bool(node.attrs.get("keepdim"))
        function = _REDUCE_FUNCTIONS[kind]
        if kind in ("sum", "prod"):
            compute = torch.float32 if out in _HALF else out
        elif kind in ("any", "all"):
            compute = torch.bool
        else:
            compute = x.dtype
        if compute == torch.bool and kind in ("amax", "amin"):
            function = "jnp.any" if kind == "amax" else "jnp.all"
        text = ctx.typed(x, compute)
        if not (kind == "sum" and ctx.is_zero_padded(x)):
            text = _masked_along(ctx, x, text, axis, neutral(kind, compute))
        if compute.is_floating_point and kind in ("amax", "amin", "argmax", "argmin"):
            result = _nan_propagating(ctx, kind, function, text, axis, keepdims)
        elif kind in ("argmax", "argmin") and not ctx.options.interpret:
            result = _int32_arg_reduce(kind, text, axis, keepdims)
        else:
            result = f"{function}({text}, axis={axis}, keepdims={keepdims})"
        if compute != out or kind in ("argmax", "argmin"):
            result = f"{result}.astype({ctx.dtype(out)})"
        return result

    return rule


for _kind in _REDUCE_FUNCTIONS:
    pallas_lowering(ops.REDUCTIONS[_kind])(_reduce_rule(_kind))


def _nan_propagating(
    ctx: KernelCodegen, kind: str, function: str, text: str, axis: int, keepdims: bool
) -> str:
    """A max/min reduction of floats that gives NaN where PyTorch does (`amax`/`amin`: NaN
    when the reduced lanes hold one; `argmax`/`argmin`: the index of the first NaN).

    XLA on CPU drops NaNs from `jnp.max`/`jnp.min` of larger blocks (4096 elements and more
    with jax 0.10: a (2, 2048) block loses them), and Pallas' Triton lowering
    reduces with `maxnumf`/`minnumf`, which ignore NaNs, also in its argmax/argmin combiners.
    `jnp.argmax`/`jnp.argmin` are right in interpret mode, so they are left alone there. The
    NaN test is a max over int32 (Pallas' Triton lowering has no `any` reduction)."""
    dims = f"axis={axis}, keepdims={keepdims}"
    if kind in ("argmax", "argmin") and ctx.options.interpret:
        return f"{function}({text}, {dims})"
    values = ctx.fresh("reduced")
    ctx.emit(f"{values} = {text}")
    is_nan = ctx.fresh("is_nan")
    ctx.emit(f"{is_nan} = jnp.isnan({values}).astype(jnp.int32)")
    has_nan = f"jnp.max({is_nan}, {dims}) > 0"
    if kind in ("amax", "amin"):
        return f"jnp.where({has_nan}, jnp.nan, {function}({values}, {dims}))"
    first_nan = _int32_arg_reduce("argmax", is_nan, axis, keepdims)
    return f"jnp.where({has_nan}, {first_nan}, {_int32_arg_reduce(kind, values, axis, keepdims)})"


def _int32_arg_reduce(kind: str, text: str, axis: int, keepdims: bool) -> str:
    """`jax.lax.argmax`/`argmin` with int32 indices: Pallas' Triton lowering takes no other
    (`jnp.argmax` gives int64 ones under `jax.enable_x64`)."""
    result = f"jax.lax.{kind}({text}, {axis}, jnp.int32)"
    return f"jnp.expand_dims({result}, {axis})" if keepdims else result


_SCAN_FUNCTIONS = {
    "cumsum": "jax.lax.cumsum",
    "cumprod": "jax.lax.cumprod",
    "cummax": "jax.lax.cummax",
    "cummin": "jax.lax.cummin",
}


def _scan_rule(kind: str) -> Rule:
    def rule(ctx: KernelCodegen, node: Node) -> str:
        x = node.inputs[0]
        out = node.output.dtype
        axis = node.attrs["dim"]
        # float16/bfloat16 sums and products accumulate in float32, each output rounded once
        # (as PyTorch's cumsum/cumprod and the reductions above)
        compute = torch.float32 if out in _HALF and kind in ("cumsum", "cumprod") else out
        if compute == out:
            text = ctx.typed(x, out)
        else:
            text = _float32_operand(ctx, x, out, unrounded=False)
        text = _masked_along(ctx, x, text, axis, neutral(kind, compute))
        reverse = bool(node.attrs.get("reverse"))
        result = f"{_SCAN_FUNCTIONS[kind]}({text}, axis={axis}, reverse={reverse})"
        return _rounded_to(ctx, result, out) if compute != out else result

    return rule


for _kind in _SCAN_FUNCTIONS:
    pallas_lowering(ops.SCANS[_kind])(_scan_rule(_kind))


# ---------------------------------------------------------------------------------------------
# matmul


def _dot_dtypes(a: torch.dtype, b: torch.dtype) -> tuple[torch.dtype | None, torch.dtype]:
    """(dtype both operands are cast to, or None to keep them; accumulation dtype)."""
    if a == torch.int8 and b == torch.int8:
        return None, torch.int32
    compute = torch.float64 if torch.float64 in (a, b) else torch.float32
    if a == b and a.is_floating_point:
        return None, compute
    return compute, compute


@pallas_lowering(ops.dot)
def _dot(ctx: KernelCodegen, node: Node) -> str:
    a, b, acc = node.inputs
    out = node.attrs["out_dtype"]
    cast, accumulate = _dot_dtypes(a.dtype, b.dtype)
    exact = ctx.options.target == "gpu" and needs_exact_small_k_products(
        a, b, cast or a.dtype, ctx.dim_size(a.shape[-1])
    )
    if exact:  # Pallas lowers through Triton: see helion.passes.upcasts
        cast, accumulate = torch.float32, torch.float32
    a_text = ctx.typed(a, cast) if cast is not None else ctx.operand(a)
    b_text = ctx.typed(b, cast) if cast is not None else ctx.operand(b)
    # lanes past the end of the contracted dimension must contribute nothing
    if not ctx.is_zero_padded(a):
        a_text = _masked_along(ctx, a, a_text, len(a.shape) - 1, "0")
    if not ctx.is_zero_padded(b):
        b_text = _masked_along(ctx, b, b_text, len(b.shape) - 2, "0")
    operand_dtype = cast or a.dtype
    precision = ""
    if exact:
        precision = ", precision=jax.lax.Precision.HIGHEST"  # float32 FMA products
    elif operand_dtype == torch.float32 and ctx.options.precision_expr is not None:
        precision = f", precision={ctx.options.precision_expr}"
    preferred = f"preferred_element_type={ctx.dtype(accumulate)}{precision}"
    a_shape, b_shape = ctx.shape(a.shape), ctx.shape(b.shape)
    out_shape = ctx.shape(node.output.shape)
    if len(a_shape) == 2 and len(b_shape) == 2:
        product = f"jnp.dot({a_text}, {b_text}, {preferred})"
    elif ctx.options.target != "gpu":
        product = f"jnp.matmul({a_text}, {b_text}, {preferred})"
    elif all(d == 1 for d in out_shape[:-2]):
        # Pallas' Triton dot is 2-D: a batch tile of one is a reshape away from it
        a2 = f"{_paren(a_text)}.reshape({a_shape[-2]}, {a_shape[-1]})"
        b2 = f"{_paren(b_text)}.reshape({b_shape[-2]}, {b_shape[-1]})"
        product = (
            f"jnp.dot({a2}, {b2}, {preferred}).reshape({tuple_text([str(d) for d in out_shape])})"
        )
    else:
        raise exc.BackendUnsupported(
            "a batched matmul whose batch tile is larger than 1 on GPU",
            "pallas",
            loc=node.loc,
            hint="Pallas' Triton lowering only has 2-D dots; use a batch block size of 1.",
        )
    if acc is not None:
        product = f"{ctx.typed(acc, accumulate)} + {product}"
    if out != accumulate:
        product = f"({product}).astype({ctx.dtype(out)})"
    return product


# ---------------------------------------------------------------------------------------------
# views


def _is_unpadded(dim: sympy.Expr) -> bool:
    """A dim held at its exact size for every config: a power-of-two int."""
    return bool(dim.is_Integer) and int(dim) & (int(dim) - 1) == 0


def _reshape_groups(dims_in: list, dims_out: list) -> list[tuple[list, list]] | None:
    """Pair runs of input dims with runs of output dims of equal products (a merge, a split or
    one dim each). None when the products do not line up run by run."""
    groups, i, j = [], 0, 0
    while i < len(dims_in) and j < len(dims_out):
        run_in, run_out = [dims_in[i]], [dims_out[j]]
        i, j = i + 1, j + 1
        while sympy.simplify(sympy.Mul(*run_in) - sympy.Mul(*run_out)) != 0:
            numerator, denominator = sympy.fraction(
                sympy.simplify(sympy.Mul(*run_out) / sympy.Mul(*run_in))
            )
            if denominator == 1 and i < len(dims_in):
                run_in.append(dims_in[i])
                i += 1
            elif numerator == 1 and j < len(dims_out):
                run_out.append(dims_out[j])
                j += 1
            else:
                return None
        groups.append((run_in, run_out))
    return groups if i == len(dims_in) and j == len(dims_out) else None


def reshape_supported(in_shape: tuple, out_shape: tuple) -> bool:
    """Whether a reshape of arrays held padded to powers of two is exact: size-1 dims come and
    go, runs of power-of-two ints regroup freely, and each run of dims merged into one (or one
    split into a run) has only its first dim padded (``[bk, 2, n] -> [2 * bk, n]``: lane ``j`` of ``2 * bk`` is lane ``j // 2`` of the
    tile, as the merged dimension's mask has it). A padded dim after another in a run
    (``[2, bk] -> [2 * bk]``) would put padding inside the merged dim."""
    strip = lambda dims: [sympy.sympify(d) for d in dims if sympy.sympify(d) != 1]  # noqa: E731
    groups = _reshape_groups(strip(in_shape), strip(out_shape))
    if groups is None:
        return False
    for run_in, run_out in groups:
        if all(_is_unpadded(d) for d in run_in + run_out):
            continue  # nothing padded: any regrouping is exact
        if len(run_in) > 1 and len(run_out) > 1:
            return False
        run = run_in if len(run_in) > 1 else run_out
        if not all(_is_unpadded(d) for d in run[1:]):
            return False
    return True


@pallas_lowering(ops.view_reshape)
def _reshape(ctx: KernelCodegen, node: Node) -> str:
    x = node.inputs[0]
    if not reshape_supported(x.shape, node.attrs["shape"]):
        raise exc.BackendUnsupported(
            f"reshape {list(x.shape)} -> {list(node.attrs['shape'])}", "pallas", loc=node.loc
        )
    if ctx.is_zero_padded(x):
        ctx.mark_zero_padded(node.output)
    return f"{ctx.operand(x)}.reshape({ctx.shape_text(node.attrs['shape'])})"


@pallas_lowering(ops.stack)
def _stack(ctx: KernelCodegen, node: Node) -> str:
    """Each input with a new axis at ``dim``, picked by the lane along it: elementwise after a
    broadcast, so it lowers wherever ``jnp.where`` does (padded lanes of ``k`` take the last
    input; ``valid_k`` masks them)."""
    dim, rank = node.attrs["dim"], len(node.output.shape)
    index = ["None" if axis == dim else ":" for axis in range(rank)]
    parts = [f"{ctx.operand(v)}[{', '.join(index)}]" for v in node.inputs]
    lane = ctx.fresh("stack_lane")
    ctx.emit(f"{lane} = jnp.arange({ctx.dim_size(node.output.shape[dim])}, dtype=jnp.int32)")
    placed = ctx.at_axis(lane, dim, rank)
    result = parts[-1]
    for position in range(len(parts) - 2, -1, -1):
        result = f"jnp.where({placed} == {position}, {parts[position]}, {result})"
    if len(parts) == 1:
        return result
    return f"jnp.broadcast_to({result}, {ctx.shape_text(node.output.shape)})"


@pallas_lowering(ops.view_permute)
def _permute(ctx: KernelCodegen, node: Node) -> str:
    x = node.inputs[0]
    if ctx.is_zero_padded(x):
        ctx.mark_zero_padded(node.output)
    return f"jnp.transpose({ctx.operand(x)}, {tuple_text([str(d) for d in node.attrs['dims']])})"


@pallas_lowering(ops.view_expand)
def _expand(ctx: KernelCodegen, node: Node) -> str:
    x = node.inputs[0]
    shape = ctx.shape_text(node.attrs["shape"])
    if not isinstance(x, Value):
        return f"jnp.full({shape}, {ctx.operand(x)}, dtype={ctx.dtype(node.output.dtype)})"
    return f"jnp.broadcast_to({ctx.operand(x)}, {shape})"


@pallas_lowering(ops.view_subscript)
def _subscript(ctx: KernelCodegen, node: Node) -> str:
    parts = []
    for item in node.attrs["items"]:
        if item is None:
            parts.append("None")
        elif item == "slice":
            parts.append(":")
        else:
            parts.append(str(int(item)))
    x = node.inputs[0]
    if ctx.is_zero_padded(x):
        ctx.mark_zero_padded(node.output)
    return f"{ctx.operand(x)}[{', '.join(parts) or '...'}]"


# ---------------------------------------------------------------------------------------------
# creation and tile attributes


@pallas_lowering(ops.full)
def _full(ctx: KernelCodegen, node: Node) -> str:
    value = node.attrs["value"]
    if value == 0:
        ctx.mark_zero_padded(node.output)
    return f"jnp.full({ctx.shape_text(node.attrs['shape'])}, {literal(value)}, dtype={ctx.dtype(node.attrs['dtype'])})"


@pallas_lowering(ops.arange)
def _arange(ctx: KernelCodegen, node: Node) -> str:
    size = ctx.dim_size(node.attrs["length"])
    start = node.attrs["start"]
    text = f"jnp.arange({size}, dtype={ctx.dtype(node.attrs['dtype'])})"
    return f"{text} + {start}" if start else text


@pallas_lowering(ops.constant)
def _constant(ctx: KernelCodegen, node: Node) -> str:
    return f"jnp.asarray({literal(node.attrs['value'])}, dtype={ctx.dtype(node.attrs['dtype'])})"


@pallas_lowering(*ops.TILE_ATTRS.values())
def _tile_attr(ctx: KernelCodegen, node: Node) -> str:
    name = node.op.name.removeprefix("tile_")
    dtype = ctx.dtype(node.output.dtype)
    if name == "block_size" and not node.inputs:
        return f"jnp.asarray({ctx.block[node.attrs['block_id']]}, dtype={dtype})"
    tile = ctx.tile_of(node.inputs[0])
    end = f"jnp.minimum({tile.begin} + {tile.block}, {tile.hi})"
    if name == "index":
        return f"jnp.arange({tile.padded}, dtype={dtype}) + {tile.begin}"
    if name == "begin":
        return f"jnp.asarray({tile.begin}, dtype={dtype})"
    if name == "end":
        return f"jnp.asarray({end}, dtype={dtype})"
    if name == "block_size":
        return f"jnp.asarray({tile.block}, dtype={dtype})"
    if name == "id":
        return f"jnp.asarray({tile.begin} // {tile.block}, dtype={dtype})"
    if name == "count":  # tiles in the whole loop, from its start bound
        count = f"({tile.hi} - ({tile.lo}) + {tile.block - 1}) // {tile.block}"
        return f"jnp.asarray({count}, dtype={dtype})"
    raise exc.InternalError(f"unknown tile attribute {name}", loc=node.loc)


@pallas_lowering(ops.device_print)
def _device_print(ctx: KernelCodegen, node: Node) -> None:
    values = [ctx.operand(v) for v in node.inputs]
    placeholders = " ".join("{}" for _ in values)
    text = f"{node.attrs['prefix']} {placeholders}".replace('"', '\\"')
    ctx.emit(f'pl.debug_print("{text}", {", ".join(values)})')


# memory rules register themselves into PALLAS_LOWERINGS; imported last so the table is complete
from helion_pallas import memory as _memory  # noqa: E402,F401
