"""Tracing the escape hatches `hl.inline_triton` and `hl.inline_asm_elementwise`.

Both put user-written backend code into the kernel. The tracer checks what it can (argument
kinds, the snippet's syntax and placeholders, output types) and records the arguments; the
Triton backend substitutes them and emits the code. No other backend can run them: they have no
lowering there, so those backends report them as unsupported with the source line.
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from typing import Any
from typing import Mapping
from typing import Sequence

import sympy
import torch

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import HostTensor
from helion.frontend.proxies import SymDim
from helion.frontend.proxies import TileProxy
from helion.ir.core import TensorArg
from helion.ir.core import TensorType
from helion.ir.core import Value
from helion.language import ConstExpr
from helion.language import _ops as ops


@dataclasses.dataclass(frozen=True)
class Placeholder:
    """One argument of an inline snippet.

    kind: "value" (input number ``payload`` of the node), "tensor" (a kernel tensor argument,
    the snippet gets its pointer), "dtype" (a torch dtype, the snippet gets the backend's name
    of it), "text" (a string, inserted as written) or "literal" (a Python constant).
    """

    kind: str
    payload: Any

    def __str__(self) -> str:
        if isinstance(self.payload, TensorArg):
            return f"{self.kind}:{self.payload.name}"
        return f"{self.kind}:{self.payload!r}"


@dataclasses.dataclass(frozen=True)
class InlineSnippet:
    """The dedented source of an `hl.inline_triton` snippet and its placeholders.

    ``keys`` are the ``str.format`` field names: ints for positional args, strings for a mapping.
    """

    source: str
    keys: tuple
    placeholders: tuple

    def sentinel(self, position: int) -> str:
        return f"_helion_placeholder_{position}_"

    def with_sentinels(self) -> str:
        """The source with each placeholder replaced by a unique identifier."""
        names = [self.sentinel(i) for i in range(len(self.keys))]
        if self.keys and isinstance(self.keys[0], str):
            return self.source.format(**dict(zip(self.keys, names, strict=True)))
        return self.source.format(*names)

    def __str__(self) -> str:
        args = ", ".join(f"{k}={p}" for k, p in zip(self.keys, self.placeholders, strict=True))
        return f"{self.source!r} [{args}]"


def _placeholder(tracer: Any, value: Any, inputs: list[Value], what: str) -> Placeholder:
    if isinstance(value, ConstExpr):
        value = value.value
    if isinstance(value, torch.Tensor) and not isinstance(value, HostTensor):
        value = tracer.lift_tensor(value)  # captured by a callable argument
    if isinstance(value, HostTensor):
        return Placeholder("tensor", value.arg)
    if isinstance(value, (DeviceValue, TileProxy)):
        inputs.append(tracer.to_operand(value))
        return Placeholder("value", len(inputs) - 1)
    if isinstance(value, SymDim):
        return Placeholder("literal", int(value))
    if isinstance(value, torch.dtype):
        return Placeholder("dtype", value)
    if isinstance(value, str):
        return Placeholder("text", value)
    if value is None or isinstance(value, (bool, int, float)):
        return Placeholder("literal", value)
    raise exc.InvalidAPIUsage(
        f"hl.inline_triton: {what} is a {type(value).__name__}; arguments may be device tensors, "
        "tiles, kernel tensor arguments, numbers, dtypes or strings",
        loc=tracer.current_loc(),
    )


def _output_types(tracer: Any, output_like: Any, api: str) -> tuple[list[TensorType], str]:
    """The declared output types and the structure to return: "none", "one", "tuple" or "list"."""
    if output_like is None:
        return [], "none"
    items, structure = (
        ([output_like], "one")
        if not isinstance(output_like, (tuple, list))
        else (
            list(output_like),
            "tuple" if isinstance(output_like, tuple) else "list",
        )
    )
    if structure != "one" and not items:
        raise exc.InvalidAPIUsage(f"{api}: output_like must not be empty", loc=tracer.current_loc())
    types = []
    for position, item in enumerate(items):
        if not isinstance(item, DeviceValue):
            where = "output_like" if structure == "one" else f"output_like[{position}]"
            raise exc.InvalidAPIUsage(
                f"{api}: {where} must be a device tensor (a loaded tile or hl.zeros(...)) that "
                f"shows the output's shape and dtype, got {type(item).__name__}",
                loc=tracer.current_loc(),
            )
        types.append(item.value.type)
    return types, structure


def _parse(tracer: Any, snippet: InlineSnippet, needs_value: bool) -> None:
    try:
        text = snippet.with_sentinels()
    except (KeyError, IndexError, ValueError) as error:
        raise exc.InvalidAPIUsage(
            f"hl.inline_triton: the source does not match its args ({type(error).__name__}: {error})",
            loc=tracer.current_loc(),
        ) from None
    try:
        module = ast.parse(text)
    except SyntaxError as error:
        raise exc.InvalidAPIUsage(
            f"hl.inline_triton: the source is not valid Python/Triton syntax: {error.msg} (line {error.lineno})",
            loc=tracer.current_loc(),
        ) from None
    if not module.body:
        raise exc.InvalidAPIUsage("hl.inline_triton: the source is empty", loc=tracer.current_loc())
    if needs_value and not isinstance(module.body[-1], ast.Expr):
        raise exc.InvalidAPIUsage(
            "hl.inline_triton: the last line of the source must be an expression (the value of "
            "the outputs declared by output_like)",
            loc=tracer.current_loc(),
        )
    sentinels = {snippet.sentinel(i): key for i, key in enumerate(snippet.keys)}
    for node in ast.walk(module):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in sentinels:
            raise exc.InvalidAPIUsage(
                f"hl.inline_triton: the source assigns to the placeholder {{{sentinels[node.id]}}}; "
                "assign to a new name instead",
                loc=tracer.current_loc(),
            )


def _wrap_outputs(tracer: Any, node: Any, structure: str) -> Any:
    values = [DeviceValue(tracer, out) for out in node.outputs]
    if structure == "none":
        return None
    if structure == "one":
        return values[0]
    return tuple(values) if structure == "tuple" else values


def trace_inline_triton(tracer: Any, triton_source: Any, args: Any, output_like: Any) -> Any:
    if not isinstance(triton_source, str):
        raise exc.InvalidAPIUsage(
            f"hl.inline_triton: triton_source must be a string, got {type(triton_source).__name__}",
            loc=tracer.current_loc(),
        )
    inputs: list[Value] = []
    if isinstance(args, Mapping):
        keys = tuple(str(k) for k in args)
        placeholders = tuple(
            _placeholder(tracer, v, inputs, f"args[{k!r}]") for k, v in args.items()
        )
    elif isinstance(args, Sequence) and not isinstance(args, (str, bytes)):
        keys = tuple(range(len(args)))
        placeholders = tuple(
            _placeholder(tracer, v, inputs, f"args[{i}]") for i, v in enumerate(args)
        )
    else:
        raise exc.InvalidAPIUsage(
            "hl.inline_triton: args must be a list/tuple (for {0}, {1}, ...) or a mapping (for {name})",
            loc=tracer.current_loc(),
        )
    types, structure = _output_types(tracer, output_like, "hl.inline_triton")
    snippet = InlineSnippet(textwrap.dedent(triton_source).strip(), keys, placeholders)
    _parse(tracer, snippet, needs_value=bool(types))
    attrs = {"snippet": snippet, "multi": structure in ("tuple", "list")}
    node = tracer.emit(ops.inline_triton, inputs, attrs, types)
    for out in node.outputs:
        out.name_hint = "inline"
    return _wrap_outputs(tracer, node, structure)


def trace_inline_asm(
    tracer: Any, asm: Any, constraints: Any, args: Any, dtype: Any, is_pure: Any, pack: Any
) -> Any:
    api = "hl.inline_asm_elementwise"
    if not isinstance(asm, str) or not isinstance(constraints, str):
        raise exc.InvalidAPIUsage(
            f"{api}: asm and constraints must be strings", loc=tracer.current_loc()
        )
    if not isinstance(args, (list, tuple)):
        raise exc.InvalidAPIUsage(
            f"{api}: args must be a list or tuple of tensors", loc=tracer.current_loc()
        )
    if isinstance(pack, bool) or not isinstance(pack, int) or pack < 1:
        raise exc.InvalidAPIUsage(
            f"{api}: pack must be a positive int, got {pack!r}", loc=tracer.current_loc()
        )
    multi = isinstance(dtype, (list, tuple))
    dtypes = tuple(dtype) if multi else (dtype,)
    if not dtypes or not all(isinstance(d, torch.dtype) for d in dtypes):
        raise exc.InvalidAPIUsage(
            f"{api}: dtype must be a torch.dtype or a non-empty sequence of them, got {dtype!r}",
            loc=tracer.current_loc(),
        )
    inputs = []
    for position, arg in enumerate(args):
        if isinstance(arg, HostTensor):
            raise exc.HostTensorDirectUsage(arg.arg.name, loc=tracer.current_loc())
        if not isinstance(arg, (DeviceValue, TileProxy)):
            raise exc.InvalidAPIUsage(
                f"{api}: args[{position}] must be a device tensor, got {type(arg).__name__}",
                loc=tracer.current_loc(),
            )
        inputs.append(tracer.to_operand(arg))
    try:
        shape = ops.broadcast_shapes(*(v.shape for v in inputs))
    except ValueError as error:
        raise exc.ShapeMismatch(str(error), loc=tracer.current_loc()) from None
    attrs = {
        "asm": asm,
        "constraints": constraints,
        "dtypes": dtypes,
        "is_pure": bool(is_pure),
        "pack": pack,
        "multi": multi,
    }
    types = [TensorType(tuple(sympy.sympify(d) for d in shape), d) for d in dtypes]
    node = tracer.emit(ops.inline_asm, inputs, attrs, types)
    for out in node.outputs:
        out.name_hint = "asm"
    values = tuple(DeviceValue(tracer, out) for out in node.outputs)
    return values if multi else values[0]
