"""Triton lowerings of the escape hatches: ``hl.inline_triton``, ``hl.triton_kernel`` and
``hl.inline_asm_elementwise``.

An inline snippet is emitted where it stands. Its placeholders become the generated names of
their arguments; names the snippet assigns are renamed to fresh ones, so that they cannot clobber
the kernel's own variables; the last line's value is bound to the outputs, whose dtype and shape
are checked with ``tl.static_assert`` (a wrong snippet fails when Triton compiles it, or when
the interpreter runs it, with a message that names the op, the call's line, what was declared and
what came back; `explain_output_checks` makes that an `InvalidAPIUsage` at the call's line).

A ``hl.triton_kernel`` call is a call of a ``@triton.jit`` function that is defined once at
module scope, together with the jit functions, modules and constexprs it uses (Triton's own
functions are reached through their modules); the outputs are checked the same way.
"""

from __future__ import annotations

import ast
import os
import re
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
        if not out.shape:
            # a 0-D output may be a Python number: make it a typed scalar
            ctx.emit(f"{name} = tl.cast({name}, {ctx.tl(out.dtype)})")
        else:
            which = position if node.attrs["multi"] else None
            for condition, message in _output_checks(ctx, node, api, name, out, which):
                ctx.emit(f"tl.static_assert({condition}, {message})")
        ctx.exprs[out.id] = name
    return names[0]


# -- the output checks: `tl.static_assert`s whose messages say what was declared and what came ----
# back, at the call's line; Triton reports them (the interpreter when it runs the line, the
# compiler when it compiles it), and `explain_output_checks` makes them Helion errors

_CHECK = re.compile(
    r"(hl\.(?:triton_kernel|inline_triton)) on the triton backend, called at (.+?):(\d+): ([^\n]*)"
)
_APIS = {ops.triton_kernel: "hl.triton_kernel", ops.inline_triton: "hl.inline_triton"}


def explain_output_checks(compiled: Any, ir: Any) -> None:
    """Make a failed output check of ``ir``'s escape hatches, which Triton reports as an error
    about the generated module, an `exc.InvalidAPIUsage` at the call's line: wraps the
    launchers of ``compiled`` (a `TritonCompiledKernel`) where ``ir`` has such checks."""
    calls: dict[tuple[str, str, int], Node] = {}
    for node in ir.walk():
        site = _call_site(node) if node.op in _APIS and node.outputs else None
        if site is not None:
            calls.setdefault(site, node)
    if not calls:
        return

    def explained(launcher: Any) -> Any:
        def launch(*host_values: Any) -> Any:
            try:
                return launcher(*host_values)
            except Exception as error:
                problem = _failed_check(error, calls)
                if problem is None:
                    raise
                raise problem from error

        return launch

    compiled.launcher = explained(compiled.launcher)
    compiled.module_launcher = explained(compiled.module_launcher)


def _failed_check(error: BaseException, calls: dict) -> exc.InvalidAPIUsage | None:
    """The Helion error of a failed output check that ``error`` (or its cause) reports."""
    chain: list[BaseException] = []
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    # the innermost first: the interpreter's error holds the assertion's message as a repr
    for item in reversed(chain):
        text = getattr(item, "error_message", None)  # a CompilationError's own message
        match = _CHECK.search(text if isinstance(text, str) else str(item))
        if match is None:
            continue
        api, filename, line, what = match.groups()
        node = calls.get((api, filename, int(line)))
        if node is None:
            return None
        what = re.sub(r"constexpr\[([^\]]*)\]", r"\1", what)  # the interpreter's dtypes
        return exc.InvalidAPIUsage(
            f"{api} on the 'triton' backend: {what}",
            loc=node.loc,
            hint="output_like must have the dtype and shape of what the function returns: "
            "change output_like, or convert the result in the function (e.g. x.to(tl.float32))",
        )
    return None


def _call_site(node: Node) -> tuple[str, str, int] | None:
    """How a check's message names its call: the op, the file's name and the line."""
    if node.loc is None:
        return None
    return _APIS[node.op], os.path.basename(node.loc.filename), node.loc.lineno


def _f_string(parts: list[tuple[str, str]]) -> str:
    """An f-string literal of ``(kind, text)`` parts: "text" as written, "expr" evaluated.
    Triton evaluates a static assertion's f-string when the assertion fails: its expressions
    must give constexprs (``len``, ``int`` and ``tl.constexpr`` do), and so they print alike
    in the interpreter and the compiler (but for ``constexpr[...]`` in the interpreter)."""
    text = "".join(
        "{" + part + "}" if kind == "expr" else part.replace("{", "{{").replace("}", "}}")
        for kind, part in parts
    )
    return "f" + repr(text)


def _output_checks(
    ctx: Any, node: Node, api: str, name: str, out: Any, which: int | None
) -> list[tuple[str, str]]:
    """(condition, message) of each check of output ``name``: its dtype, its rank, its shape."""
    import triton.language as tl  # Triton's own name of a dtype (fp32), as its message shows

    site = _call_site(node)
    callee = node.attrs["function"].name if node.op is ops.triton_kernel else "the snippet"
    head = f"{api} on the triton backend"
    if site is not None:
        head += f", called at {site[1]}:{site[2]}"
    head += f": {callee} returned"
    result = "a result" if which is None else f"result {which}"
    declared = "output_like" if which is None else f"output_like[{which}]"
    tl_dtype = ctx.tl(out.dtype)
    triton_name = str(getattr(tl, tl_dtype.removeprefix("tl.")))
    shape = ctx.shape(out.shape)  # e.g. [_BLOCK_SIZE_0, 16]
    dims = shape[1:-1].split(", ")
    expected = _shape_parts(dims)  # the values of the block sizes, not their names
    got = _shape_parts([f"{name}.shape[{i}]" for i in range(len(dims))])
    dtype_message = [
        ("text", f"{head} {result} of dtype "),
        ("expr", f"tl.constexpr({name}.dtype)"),
        ("text", f", but {declared} has dtype {triton_name} ({out.dtype})"),
    ]
    rank_message = [
        ("text", f"{head} a "),
        ("expr", f"len({name}.shape)"),
        ("text", f"-D {result.removeprefix('a ')}, but {declared} is {len(dims)}-D (shape "),
        *expected,
        ("text", ")"),
    ]
    shape_message = [
        ("text", f"{head} {result} of shape "),
        *got,
        ("text", f", but {declared} has shape "),
        *expected,
    ]
    return [
        (f"{name}.dtype == {tl_dtype}", _f_string(dtype_message)),
        (f"len({name}.shape) == {len(dims)}", _f_string(rank_message)),
        (f"{name}.shape == {shape}", _f_string(shape_message)),
    ]


def _shape_parts(dims: list[str]) -> list[tuple[str, str]]:
    """``[d0, d1]`` as f-string parts that print the values of the dims' expressions."""
    parts = [("text", "[")]
    for position, dim in enumerate(dims):
        if position:
            parts.append(("text", ", "))
        parts.append(("expr", f"int({dim})"))
    return [*parts, ("text", "]")]


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
