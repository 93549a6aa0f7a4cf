"""Triton lowerings of the escape hatches: ``hl.inline_triton``, ``hl.triton_kernel`` and
``hl.inline_asm_elementwise``.

An inline snippet is emitted where it stands. Its placeholders become the generated names of
their arguments; names the snippet assigns are renamed to fresh ones, so that they cannot clobber
the kernel's own variables; the last line's value is bound to the outputs, whose dtype and shape
are checked with ``tl.static_assert`` (a wrong snippet fails when Triton compiles it, with a
message that names the op).

A ``hl.triton_kernel`` call is a call of a ``@triton.jit`` function that is defined once at
module scope, together with the jit functions, modules and constexprs it uses (Triton's own
functions are reached through their modules); the outputs are checked the same way.
"""

from __future__ import annotations

import ast
from typing import Any

from helion import exc
from helion.ir.core import Node
from helion.language import _ops as ops
from helion_triton.codegen import RESERVED
from helion_triton.codegen import atom
from helion_triton.codegen import literal
from helion_triton.lowerings import triton_lowering


def _placeholder_text(ctx: Any, node: Node, placeholder: Any) -> str:
    kind, payload = placeholder.kind, placeholder.payload
    if kind == "value":
        return atom(ctx.expr(node.inputs[payload]))
    if kind == "tensor":
        return ctx.tensor_param(payload.index)
    if kind == "dtype":
        return ctx.tl(payload)
    if kind == "text":
        return payload
    if payload is None:
        return "None"
    return literal(payload)


class _Renamer(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.mapping:
            node.id = self.mapping[node.id]
        return node


def _snippet_module(ctx: Any, node: Node) -> tuple[list[str], str | None]:
    """The snippet's statements (lines) and its final expression, names substituted."""
    snippet = node.attrs["snippet"]
    module = ast.parse(snippet.with_sentinels())
    sentinels = {snippet.sentinel(i) for i in range(len(snippet.keys))}
    assigned = sorted(
        {
            n.id
            for n in ast.walk(module)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in sentinels
        }
    )
    module = _Renamer({name: ctx.fresh(name) for name in assigned}).visit(module)
    body = list(module.body)
    last = None
    if node.outputs:
        last = ast.unparse(body.pop().value)
    lines = [line for statement in body for line in ast.unparse(statement).splitlines()]
    texts = {
        snippet.sentinel(i): _placeholder_text(ctx, node, p)
        for i, p in enumerate(snippet.placeholders)
    }

    def substitute(text: str) -> str:
        # sentinels are unique identifiers: replacing them textually is exact
        for sentinel, replacement in texts.items():
            text = text.replace(sentinel, replacement)
        return text

    return [substitute(line) for line in lines], None if last is None else substitute(last)


@triton_lowering(ops.inline_triton)
def _inline_triton(ctx: Any, node: Node) -> str | None:
    lines, last = _snippet_module(ctx, node)
    for line in lines:
        ctx.emit(line)
    if last is None:
        return None
    return _bind_outputs(ctx, node, last, "hl.inline_triton")


def _bind_outputs(ctx: Any, node: Node, value: str, api: str) -> str:
    """Bind ``value`` (an expression giving the outputs) to fresh names and check them."""
    outs = node.outputs
    base = "inline" if node.op is ops.inline_triton else "result"
    names = [ctx.fresh(f"{base}_{i}" if len(outs) > 1 else base) for i in range(len(outs))]
    if node.attrs["multi"]:
        ctx.emit(
            f"{', '.join(names)}, = {value}" if len(names) == 1 else f"{', '.join(names)} = {value}"
        )
    else:
        ctx.emit(f"{names[0]} = {value}")
    for position, (out, name) in enumerate(zip(outs, names, strict=True)):
        tl_dtype = ctx.tl(out.dtype)
        label = f"{api} output {position}" if len(outs) > 1 else f"{api} output"
        if not out.shape:
            # a 0-D output may be a Python number: make it a typed scalar
            ctx.emit(f"{name} = tl.cast({name}, {tl_dtype})")
        else:
            shape = ctx.shape(out.shape)
            ctx.emit(
                f'tl.static_assert({name}.dtype == {tl_dtype}, "{label}: expected dtype {tl_dtype}")'
            )
            ctx.emit(
                f'tl.static_assert({name}.shape == {shape}, "{label}: expected shape {shape}")'
            )
        ctx.exprs[out.id] = name
    return names[0]


# -- hl.triton_kernel ----------------------------------------------------------------------------

# module names the generated code itself may use, and the modules they must be
_KNOWN_MODULES = {
    "torch": "torch",
    "triton": "triton",
    "tl": "triton.language",
    "math": "math",
    "libdevice": "triton.language.extra.libdevice",
}
_HEADER = ("torch", "triton", "tl")  # imported by every generated module


def _definition_source(ctx: Any, node: Node, name: str, kind: str, payload: Any) -> str | None:
    """Module-level source of one definition a called function needs (None: already there)."""
    known = _KNOWN_MODULES.get(name)
    if kind == "module" and (known is None or known == payload):
        if name in _HEADER:
            return None
        return f"import {payload}" if payload == name else f"import {payload} as {name}"
    if known is not None or name in RESERVED or name.startswith("_helion_"):
        raise exc.InvalidAPIUsage(
            f"hl.triton_kernel: {name!r} cannot be defined at module scope of the generated "
            "Triton module (the name is taken by the generated code); rename it",
            loc=node.loc,
        )
    if name == ctx.launcher_name:
        raise exc.InvalidAPIUsage(
            f"hl.triton_kernel: {name!r} is the name of the kernel's launcher in the generated "
            "module; rename the Triton function (or the kernel)",
            loc=node.loc,
        )
    if kind == "constexpr":
        return f"{name} = tl.constexpr({payload})"
    return f"@triton.jit\n{payload}"


def _module_scope(ctx: Any, node: Node) -> str:
    """Define the called function and what it needs once; the name the kernel calls it by."""
    function = node.attrs["function"]
    for name, kind, payload in function.definitions:
        source = _definition_source(ctx, node, name, kind, payload)
        if source is None:
            continue
        existing = ctx.helpers.get(name)
        if existing is not None:
            if existing != source:
                raise exc.InvalidAPIUsage(
                    f"hl.triton_kernel: two different definitions are both named {name!r} at "
                    "module scope of the generated Triton module; rename one of them",
                    loc=node.loc,
                )
            continue
        # a kernel variable named like a module-level function hides it inside the kernel: the
        # kernel calls such a function through an alias with a name of its own
        hidden = name in ctx.names.used
        ctx.helper(name, source)
        ctx.names.used.add(name)
        if hidden and kind == "function":
            alias = ctx.fresh(name)
            ctx.helper(alias, f"{alias} = {name}")
    for name, source in ctx.helpers.items():
        if source == f"{name} = {function.name}":
            return name
    return function.name


@triton_lowering(ops.triton_kernel)
def _triton_kernel(ctx: Any, node: Node) -> str | None:
    callee = _module_scope(ctx, node)
    args = ", ".join(_placeholder_text(ctx, node, p) for p in node.attrs["args"])
    call = f"{callee}({args})"
    if not node.outputs:
        ctx.emit(call)
        return None
    return _bind_outputs(ctx, node, call, "hl.triton_kernel")


@triton_lowering(ops.inline_asm)
def _inline_asm(ctx: Any, node: Node) -> str:
    if ctx.target.interpret:
        raise ctx.unsupported(
            "hl.inline_asm_elementwise in the Triton interpreter (it cannot run inline assembly; "
            "run the kernel on a GPU)"
        )
    attrs = node.attrs
    args = ", ".join(ctx.expr(value) for value in node.inputs)
    dtypes = [ctx.tl(d) for d in attrs["dtypes"]]
    dtype = dtypes[0]
    if attrs["multi"]:
        dtype = f"({dtypes[0]},)" if len(dtypes) == 1 else f"({', '.join(dtypes)})"
    call = (
        f"tl.inline_asm_elementwise({attrs['asm']!r}, {attrs['constraints']!r}, [{args}], "
        f"dtype={dtype}, is_pure={attrs['is_pure']}, pack={attrs['pack']})"
    )
    if not attrs["multi"]:
        return call
    names = [ctx.fresh("asm") for _ in node.outputs]
    ctx.emit(f"{', '.join(names)}, = {call}" if len(names) == 1 else f"{', '.join(names)} = {call}")
    for out, name in zip(node.outputs, names, strict=True):
        ctx.exprs[out.id] = name
    return names[0]
