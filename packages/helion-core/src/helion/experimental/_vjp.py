"""Vector-Jacobian rules of the ops `helion.experimental.backward` can differentiate.

One table, `RULES`, maps an IR op name to an `AdRule`: how to write the op again as source
(the backward kernel recomputes the forward values it needs) and how to turn the gradient of the
op's output into gradients of its inputs. Rules work on source text: `{x}`, `{y}` (and `{c}`
for `where`'s condition) are the operands, `{out}` the op's result and `{g}` the gradient of
the result; all are plain names or parenthesized literals, so templates need no extra
parentheses around them.

An op missing from the table, or one whose rule has no `vjp` while a gradient reaches it, is
reported as `helion.exc.AutodiffNotSupported` by the generator.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import Callable


class RuleUnsupported(Exception):
    """A rule cannot differentiate this instance of its op (the generator reports it)."""


@dataclasses.dataclass(frozen=True)
class AdRule:
    """How one op is recomputed and differentiated.

    forward: the op as a source expression, from the operand sources and the node's attrs.
    vjp: the gradients of the inputs, one source template (or None: no gradient) per input;
        None when the op's gradient is not supported.
    elementwise: operands broadcast against each other; the generator then sums a gradient
        back to each operand's shape. Other rules get a gradient of the output's exact shape
        and give gradients of the inputs' shapes (their `vjp` returns `(template, shape)`).
    """

    forward: Callable[[dict[str, str], dict[str, Any]], str]
    vjp: Callable[[dict[str, str], dict[str, Any]], list[Any]] | None
    elementwise: bool = True


RULES: dict[str, AdRule] = {}


def _register(name: str, rule: AdRule) -> None:
    if name in RULES:
        raise ValueError(f"autodiff rule for {name!r} defined twice")
    RULES[name] = rule


def _unary(name: str, forward: str, grad: str | None) -> None:
    """An elementwise op of one operand; `grad` is the template of the operand's gradient
    ("0": none, the op is piecewise constant)."""

    def vjp(names: dict[str, str], attrs: dict[str, Any]) -> list[Any]:
        return [None if grad == "0" else grad.format(**names, **attrs)]

    _register(
        name,
        AdRule(lambda names, attrs: forward.format(**names, **attrs), vjp if grad else None),
    )


def _binary(name: str, forward: str, grad_x: str | None, grad_y: str | None) -> None:
    def vjp(names: dict[str, str], attrs: dict[str, Any]) -> list[Any]:
        return [
            None if grad is None else grad.format(**names, **attrs) for grad in (grad_x, grad_y)
        ]

    _register(name, AdRule(lambda names, attrs: forward.format(**names), vjp))


def _no_grad(name: str, forward: str) -> None:
    """An op whose result carries no gradient (a bool or integer result)."""
    _register(name, AdRule(lambda names, attrs: forward.format(**names), lambda n, a: [None, None]))


# -- elementwise, one operand ----------------------------------------------------------------

_unary("exp", "torch.exp({x})", "{g} * {out}")
_unary("exp2", "torch.exp2({x})", "{g} * {out} * 0.6931471805599453")
_unary("expm1", "torch.expm1({x})", "{g} * ({out} + 1.0)")
_unary("log", "torch.log({x})", "{g} / {x}")
_unary("log2", "torch.log2({x})", "{g} / ({x} * 0.6931471805599453)")
_unary("log1p", "torch.log1p({x})", "{g} / ({x} + 1.0)")
_unary("sqrt", "torch.sqrt({x})", "{g} * 0.5 / {out}")
_unary("rsqrt", "torch.rsqrt({x})", "{g} * -0.5 * {out} * {out} * {out}")
_unary("reciprocal", "torch.reciprocal({x})", "-{g} * {out} * {out}")
_unary("sin", "torch.sin({x})", "{g} * torch.cos({x})")
_unary("cos", "torch.cos({x})", "-{g} * torch.sin({x})")
_unary("tanh", "torch.tanh({x})", "{g} * (1.0 - {out} * {out})")
_unary("sigmoid", "torch.sigmoid({x})", "{g} * {out} * (1.0 - {out})")
_unary("erf", "torch.erf({x})", "{g} * 1.1283791670955126 * torch.exp(-{x} * {x})")
_unary("neg", "-{x}", "-{g}")
_unary("abs", "torch.abs({x})", "{g} * torch.sign({x})")
# torch's relu backward passes the gradient where the result is positive
_unary("relu", "torch.relu({x})", "torch.where({out} > 0, {g}, 0.0)")
_unary(
    "silu",
    "torch.nn.functional.silu({x})",
    "{g} * torch.sigmoid({x}) * (1.0 + {x} * (1.0 - torch.sigmoid({x})))",
)
for _name in ("floor", "ceil", "round", "trunc", "sign"):
    _unary(_name, f"torch.{_name}({{x}})", "0")
for _name in ("logical_not", "isnan", "isinf", "isfinite", "signbit"):
    _no_grad(_name, f"torch.{_name}({{x}})")


def _gelu_forward(names: dict[str, str], attrs: dict[str, Any]) -> str:
    return f"torch.nn.functional.gelu({names['x']}, approximate={attrs['approximate']!r})"


def _gelu_vjp(names: dict[str, str], attrs: dict[str, Any]) -> list[Any]:
    if attrs["approximate"] != "none":
        raise RuleUnsupported("gelu(approximate='tanh')")
    x = names["x"]
    # d/dx x * Phi(x) = Phi(x) + x * phi(x)
    cdf = f"0.5 * (1.0 + torch.erf({x} * 0.7071067811865476))"
    pdf = f"torch.exp(-0.5 * {x} * {x}) * 0.3989422804014327"
    return [f"{names['g']} * ({cdf} + {x} * {pdf})"]


_register("gelu", AdRule(_gelu_forward, _gelu_vjp))


def _cast_forward(names: dict[str, str], attrs: dict[str, Any]) -> str:
    return f"{names['x']}.to({dtype_source(attrs['dtype'])})"


# the generator casts every gradient to its operand's dtype, which is the whole rule of a cast
_register("cast", AdRule(_cast_forward, lambda names, attrs: [names["g"]]))

# -- elementwise, two operands ---------------------------------------------------------------

_binary("add", "({x} + {y})", "{g}", "{g}")
_binary("sub", "({x} - {y})", "{g}", "-{g}")
_binary("mul", "({x} * {y})", "{g} * {y}", "{g} * {x}")
_binary("truediv", "({x} / {y})", "{g} / {y}", "-{g} * {x} / ({y} * {y})")
# ties split the gradient in halves, as torch does
_binary(
    "maximum",
    "torch.maximum({x}, {y})",
    "torch.where({x} > {y}, {g}, torch.where({x} == {y}, {g} * 0.5, 0.0))",
    "torch.where({y} > {x}, {g}, torch.where({x} == {y}, {g} * 0.5, 0.0))",
)
_binary(
    "minimum",
    "torch.minimum({x}, {y})",
    "torch.where({x} < {y}, {g}, torch.where({x} == {y}, {g} * 0.5, 0.0))",
    "torch.where({y} < {x}, {g}, torch.where({x} == {y}, {g} * 0.5, 0.0))",
)
for _name, _symbol in (
    ("eq", "=="),
    ("ne", "!="),
    ("lt", "<"),
    ("le", "<="),
    ("gt", ">"),
    ("ge", ">="),
):
    _no_grad(_name, f"({{x}} {_symbol} {{y}})")
for _name in ("logical_and", "logical_or", "logical_xor"):
    _no_grad(_name, f"torch.{_name}({{x}}, {{y}})")


def _pow_vjp(names: dict[str, str], attrs: dict[str, Any]) -> list[Any]:
    exponent = attrs["constants"][1]
    if exponent is None:
        raise RuleUnsupported("pow with a tensor exponent")
    if exponent == 0:
        return [None, None]
    return [f"{names['g']} * {exponent!r} * {names['x']} ** {exponent - 1!r}", None]


_register("pow", AdRule(lambda names, attrs: f"({names['x']} ** {names['y']})", _pow_vjp))

_register(
    "where",
    AdRule(
        lambda names, attrs: f"torch.where({names['c']}, {names['x']}, {names['y']})",
        lambda names, attrs: [
            None,
            "torch.where({c}, {g}, 0.0)".format(**names),
            "torch.where({c}, 0.0, {g})".format(**names),
        ],
    ),
)

# -- reductions over a `:` dimension ------------------------------------------------------------
# attrs: dim, keepdim, in_shape and kept_shape (the output's shape with the reduced dimension
# as size 1; sympy tuples), grad_dtype (source) and `expand(name)`: the output-shaped source
# `name` with the reduced dimension put back as size 1


def _reduce_forward(function: str) -> Callable[[dict[str, str], dict[str, Any]], str]:
    def forward(names: dict[str, str], attrs: dict[str, Any]) -> str:
        dtype = attrs.get("dtype")
        extra = f", dtype={dtype_source(dtype)}" if dtype is not None else ""
        return f"torch.{function}({names['x']}, {attrs['dim']}, keepdim={attrs['keepdim']}{extra})"

    return forward


def _sum_vjp(names: dict[str, str], attrs: dict[str, Any]) -> list[Any]:
    # the gradient of every summed element is the gradient of the sum: broadcast it back
    return [(attrs["expand"](names["g"]), attrs["kept_shape"])]


def _extremum_vjp(names: dict[str, str], attrs: dict[str, Any]) -> list[Any]:
    # like torch.amax / amin: the gradient goes to the positions holding the extremum, split
    # evenly where several do
    hits = f"({names['x']} == {attrs['expand'](names['out'])}).to({attrs['grad_dtype']})"
    count = f"torch.sum({hits}, {attrs['dim']}, keepdim=True)"
    return [(f"{hits} * ({attrs['expand'](names['g'])} / {count})", attrs["in_shape"])]


_register("reduce_sum", AdRule(_reduce_forward("sum"), _sum_vjp, elementwise=False))
_register("reduce_amax", AdRule(_reduce_forward("amax"), _extremum_vjp, elementwise=False))
_register("reduce_amin", AdRule(_reduce_forward("amin"), _extremum_vjp, elementwise=False))


# -- views ------------------------------------------------------------------------------------
# subscript attrs: items (None: new axis, "slice": kept dim, int: a size-1 dim dropped),
# in_shape and g_shape (the gradient's shape, the output's with some dims possibly 1)


def _subscript_source(name: str, items: list[str]) -> str:
    return f"{name}[{', '.join(items)}]"


def _subscript_forward(names: dict[str, str], attrs: dict[str, Any]) -> str:
    items = [
        "None" if item is None else ":" if item == "slice" else str(item) for item in attrs["items"]
    ]
    return _subscript_source(names["x"], items)


def _subscript_vjp(names: dict[str, str], attrs: dict[str, Any]) -> list[Any]:
    items = []
    shape = []
    g_dims = iter(attrs["g_shape"])
    in_dims = iter(attrs["in_shape"])
    for item in attrs["items"]:
        if item is None:
            next(g_dims)
            items.append("0")
        elif item == "slice":
            items.append(":")
            shape.append(next(g_dims))
            next(in_dims)
        else:
            if next(in_dims) != 1:
                raise RuleUnsupported("selecting one element of a device tensor")
            items.append("None")
            shape.append(1)
    return [(_subscript_source(names["g"], items), tuple(shape))]


_register("subscript", AdRule(_subscript_forward, _subscript_vjp, elementwise=False))


def dtype_source(dtype: Any) -> str:
    """`torch.float32` for torch.float32."""
    return str(dtype)
