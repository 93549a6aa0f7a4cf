"""Tracing the escape hatches `hl.inline_triton`, `hl.triton_kernel`, `hl.inline_asm_elementwise`.

All three put user-written backend code into the kernel. The tracer checks what it can (argument
kinds, the snippet's syntax and placeholders, output types) and records the arguments; the
Triton backend substitutes them and emits the code. No other backend can run them: they have no
lowering there, so those backends report them as unsupported with the source line.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
import math
import sys
import textwrap
import types as pytypes
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


def _placeholder(
    tracer: Any, value: Any, inputs: list[Value], what: str, api: str = "hl.inline_triton"
) -> Placeholder:
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
        f"{api}: {what} is a {type(value).__name__}; arguments may be device tensors, "
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


# -- hl.triton_kernel ------------------------------------------------------------------------------

_TRITON_KERNEL = "hl.triton_kernel"
_ABSENT = object()


@dataclasses.dataclass(frozen=True)
class TritonFunction:
    """The `@triton.jit` function an `hl.triton_kernel` call names, and everything it needs at
    module scope of the generated module.

    ``definitions`` are ``(name, kind, payload)`` in the order they are to be defined,
    dependencies first and the called function ``name`` last. Kinds: "function" (payload: its
    source from ``def`` on, without decorators; emitted under ``@triton.jit``), "module" (the
    module's ``__name__``), "constexpr" (a ``tl.constexpr`` holding a Python constant: its
    source). A function of Triton's own library is never defined: its readers name it by its
    dotted path (``triton.language.standard.sigmoid``), and so does ``name`` when it is one.

    ``names`` are ``(namespace, name, value)``: the globals the definitions were found through
    (the function's own name in its module, and each global it or a dependency reads) with the
    value each had. The trace holds while every name still has its value (`watched_names`):
    a function redefined since (a notebook cell run again) is traced and compiled anew.
    """

    name: str
    definitions: tuple[tuple[str, str, Any], ...]
    names: tuple[tuple[dict, str, Any], ...] = dataclasses.field(
        default=(), compare=False, repr=False
    )

    def __str__(self) -> str:
        # the sources' digest: the IR of two kernels that call different code differs
        digest = hashlib.sha256(repr(self.definitions).encode()).hexdigest()[:10]
        return f"{self.name}@{digest}"


def _jit_python_function(value: Any) -> Any:
    """The Python function of a Triton JIT function (`@triton.jit`, an InterpretedFunction
    under TRITON_INTERPRET=1), or None for anything else. Core does not import Triton."""
    fn = getattr(value, "fn", None)
    if inspect.isfunction(fn) and _is_triton_module(type(value).__module__):
        return fn
    return None


def _is_triton_module(name: Any) -> bool:
    return isinstance(name, str) and (name == "triton" or name.startswith("triton."))


def _is_triton_constexpr(value: Any) -> bool:
    kind = type(value)
    return kind.__name__ == "constexpr" and _is_triton_module(kind.__module__)


def _constant_source(value: Any) -> str | None:
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    return None


@dataclasses.dataclass
class _Def:
    """A parsed function: its `def` node and its source from `def` on (decorators dropped)."""

    node: ast.FunctionDef
    source: str
    namespace: dict[str, Any]  # where its free names resolve
    label: str  # how errors name it
    # the module globals behind `namespace` (a later assignment there is seen), or None
    globals: dict[str, Any] | None = None


class _TritonFunctionCollector:
    """Finds the definitions a `@triton.jit` function needs: the jit functions it calls (through
    its globals, transitively), the modules, Triton builtins and constexpr constants it uses."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.definitions: dict[str, tuple[str, Any]] = {}
        self.origins: dict[str, str] = {}
        self.visiting: set[str] = set()
        self.collected: set[tuple[str, str]] = set()
        # (id(namespace), name) -> (namespace, name, value): see TritonFunction.names
        self.names: dict[tuple[int, str], tuple[dict, str, Any]] = {}

    def watch(self, namespace: dict[str, Any] | None, name: str, value: Any) -> None:
        """Record that ``name`` in ``namespace`` gave ``value`` (where it does: a name that
        never did, an alias of a function renamed since, would re-trace every call)."""
        if namespace is not None and namespace.get(name, _ABSENT) is value:
            self.names.setdefault((id(namespace), name), (namespace, name, value))

    def fail(self, message: str, hint: str | None = None) -> exc.InvalidAPIUsage:
        kwargs = {"hint": hint} if hint else {}
        return exc.InvalidAPIUsage(
            f"{_TRITON_KERNEL}: {message}", loc=self.tracer.current_loc(), **kwargs
        )

    def parse(
        self,
        source: str,
        label: str,
        namespace: dict[str, Any],
        module_globals: dict[str, Any] | None = None,
    ) -> _Def:
        text = textwrap.dedent(source).strip("\n")
        try:
            module = ast.parse(text)
        except SyntaxError as error:
            raise self.fail(
                f"{label} is not valid Python/Triton syntax: {error.msg} (line {error.lineno})"
            ) from None
        defs = [n for n in module.body if isinstance(n, ast.FunctionDef)]
        if len(defs) != 1 or len(module.body) != 1:
            others = len(module.body) - len(defs)
            raise self.fail(
                f"{label} must hold exactly one `def` (a @triton.jit function) and nothing "
                f"else, found {len(defs)} def(s) and {others} other statement(s)"
            )
        node = defs[0]
        lines = text.splitlines()[node.lineno - 1 : node.end_lineno]
        return _Def(node, "\n".join(lines), namespace, label, module_globals)

    def from_function(self, fn: Any, label: str) -> _Def:
        if fn.__name__ == "<lambda>":
            raise self.fail(f"{label} is a lambda; pass a function defined with `def`")
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            raise self.fail(f"{label}: the source of {fn.__qualname__} is not available") from None
        namespace = dict(fn.__globals__)
        # names of enclosing functions (a jit function defined inside a test) resolve too
        namespace.update(inspect.getclosurevars(fn).nonlocals)
        return self.parse(source, label, namespace, fn.__globals__)

    def add(self, name: str, kind: str, payload: Any, origin: str) -> None:
        known = self.definitions.get(name)
        if known is not None and known != (kind, payload):
            raise self.fail(
                f"two different definitions are both named {name!r} at module scope "
                f"({self.origins[name]} and {origin}); rename one of them"
            )
        if known is None:
            self.definitions[name] = (kind, payload)
            self.origins[name] = origin

    def function(self, name: str, parsed: _Def) -> None:
        key = (name, parsed.source)
        if name in self.visiting or key in self.collected:
            return  # recursion, or already collected
        self.visiting.add(name)
        paths: dict[str, str] = {}
        for free in _free_names(parsed.node):
            if free == name or free not in parsed.namespace:
                continue  # itself, a builtin (min, range, ...) or an undefined name
            value = parsed.namespace[free]
            self.watch(parsed.globals, free, value)
            path = self.global_value(free, value, parsed.label)
            if path is not None:
                paths[free] = path
        self.visiting.discard(name)
        self.collected.add(key)
        self.add(name, "function", _with_paths(parsed, paths), parsed.label)

    def global_value(self, name: str, value: Any, user: str) -> str | None:
        """Collect what global `name` needs; a Triton library function gives the dotted path
        that replaces the name in the source instead."""
        origin = f"a global of {user}"
        fn = _jit_python_function(value)
        library = _triton_object(value)
        if library is not None:
            # Triton's own functions (tl.sum is a jit function too) are reached through their
            # module (`triton.language.standard.sum`), never copied or bound to a name at
            # import: the Triton interpreter swaps them in their modules while a kernel runs
            return ".".join(library)
        if fn is not None:
            self.function(name, self.from_function(fn, f"the @triton.jit function {name!r}"))
        elif isinstance(value, pytypes.ModuleType):
            self.add(name, "module", value.__name__, origin)
        elif _is_triton_constexpr(value):
            source = _constant_source(value.value)
            if source is None:
                raise self.fail(
                    f"{user} uses the constexpr {name!r}, whose value "
                    f"({type(value.value).__name__}) is not a Python constant"
                )
            self.add(name, "constexpr", source, origin)
        elif isinstance(value, (bool, int, float)):
            raise self.fail(
                f"{user} uses the global {name!r} = {value!r}, which is not a constexpr",
                hint=f"Triton functions read only constexpr globals: {name} = tl.constexpr({value!r})",
            )
        elif inspect.isfunction(value) or inspect.isbuiltin(value):
            raise self.fail(
                f"{user} calls {name!r}, which is not a @triton.jit function",
                hint=f"Decorate {name} with @triton.jit.",
            )
        else:
            raise self.fail(
                f"{user} uses the global {name!r} (a {type(value).__name__}), which cannot be "
                "defined in the generated module; Triton functions may use @triton.jit "
                "functions, modules, Triton builtins and tl.constexpr(...) constants"
            )
        return None


def _triton_builtin(value: Any) -> tuple[str, str] | None:
    """`(module, attribute)` of a function or object of Triton's own library (`tl.sigmoid`,
    or `where` after `from triton.language import where`), or None."""
    if isinstance(value, pytypes.ModuleType):
        return None
    module_name = getattr(value, "__module__", None)
    attribute = getattr(value, "__name__", None)
    fn = _jit_python_function(value)
    if fn is not None and not _is_triton_module(getattr(fn, "__module__", None)):
        return None  # a user's jit function (even under TRITON_INTERPRET=1)
    if fn is not None:
        # under TRITON_INTERPRET=1 a Triton library function is an InterpretedFunction whose
        # __module__ is triton.runtime.interpreter: its Python function names its real module
        module_name, attribute = fn.__module__, fn.__name__
    if not _is_triton_module(module_name):
        return None
    module = sys.modules.get(module_name)
    if isinstance(attribute, str) and getattr(module, attribute, None) is value:
        return module_name, attribute
    return None


def _triton_object(value: Any) -> tuple[str, str] | None:
    """`_triton_builtin`, or `("triton.language", name)` for an object of Triton's that
    triton.language holds under a name (a dtype such as `tl.float16`)."""
    found = _triton_builtin(value)
    if found is not None or not _is_triton_module(type(value).__module__):
        return found
    language = sys.modules.get("triton.language")
    for name, candidate in vars(language).items() if language is not None else ():
        if candidate is value and not name.startswith("_"):
            return "triton.language", name
    return None


def _free_names(node: ast.FunctionDef) -> list[str]:
    """Names a function reads that are not its parameters or locals, in order of first use."""
    arguments = node.args
    params = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    params += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    local = {a.arg for a in params}
    parts: list[ast.AST] = [*node.body, arguments]
    if node.returns is not None:
        parts.append(node.returns)
    found: dict[str, None] = {}
    for part in parts:
        for sub in ast.walk(part):
            if isinstance(sub, ast.Name):
                if isinstance(sub.ctx, ast.Load):
                    found.setdefault(sub.id)
                else:
                    local.add(sub.id)
    return [name for name in found if name not in local]


def _with_paths(parsed: _Def, paths: dict[str, str]) -> str:
    """The function's source with each read of a name in `paths` replaced by its dotted path
    (edited in place: the rest of the text, comments included, stays as written)."""
    if not paths:
        return parsed.source
    node = parsed.node
    parts: list[ast.AST] = [*node.body, node.args]
    if node.returns is not None:
        parts.append(node.returns)
    edits = sorted(
        (
            (sub.lineno - node.lineno, sub.col_offset, sub.end_col_offset, paths[sub.id])
            for part in parts
            for sub in ast.walk(part)
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in paths
        ),
        reverse=True,
    )
    lines = [line.encode() for line in parsed.source.split("\n")]
    for line, start, end, path in edits:  # last first: earlier offsets stay valid
        lines[line] = lines[line][:start] + path.encode() + lines[line][end:]
    return "\n".join(line.decode() for line in lines)


def _kernel_globals(tracer: Any) -> dict[str, Any]:
    """The globals of the kernel's module (where a function named by a string is looked up)."""
    frame = sys._getframe(1)
    first, last = tracer.source_lines
    while frame is not None:
        if frame.f_code.co_filename == tracer.ir.filename and first <= frame.f_lineno <= last:
            break
        frame = frame.f_back
    if frame is None:
        return {}
    # the device function runs in a copy of the module's globals with a few builtins replaced
    # (range -> hl.grid, ...): read the module itself where it is known (not copied: the
    # caller watches the names it reads there)
    module = sys.modules.get(frame.f_globals.get("__name__", ""))
    return vars(module) if module is not None else frame.f_globals


def _named_function(tracer: Any, collector: _TritonFunctionCollector, name: str) -> Any:
    """The value of the kernel module's global `name` (the string form of the call)."""
    namespace = _kernel_globals(tracer)
    if name not in namespace:
        raise collector.fail(
            f"no function named {name!r} in the kernel's module globals",
            hint="Pass the function itself, or the name of a module-level @triton.jit function.",
        )
    value = namespace[name]
    if _jit_python_function(value) is None and not inspect.isfunction(value):
        raise collector.fail(
            f"the global {name!r} is a {type(value).__name__}, not a @triton.jit function"
        )
    collector.watch(namespace, name, value)
    return value


def _resolve_triton_function(
    tracer: Any, collector: _TritonFunctionCollector, source_or_fn: Any
) -> _Def:
    if isinstance(source_or_fn, str):
        namespace = _kernel_globals(tracer)
        return collector.parse(source_or_fn, "the Triton source", namespace, namespace)
    fn = _jit_python_function(source_or_fn)
    if fn is not None:
        label = f"the @triton.jit function {fn.__name__!r}"
    elif inspect.isfunction(source_or_fn):
        fn, label = source_or_fn, f"the function {source_or_fn.__name__!r}"
    else:
        raise collector.fail(
            "triton_source_or_fn must be a @triton.jit function, a Python function, the source "
            "of one `def`, or the name of a function in the kernel's module, got "
            f"{type(source_or_fn).__name__}"
        )
    # the name it is defined under: redefining the function there re-traces the kernel
    collector.watch(fn.__globals__, fn.__name__, source_or_fn)
    return collector.from_function(fn, label)


def _check_call(collector: _TritonFunctionCollector, parsed: _Def, count: int) -> None:
    arguments = parsed.node.args
    positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
    required = len(positional) - len(arguments.defaults)
    missing_keywords = [
        a.arg
        for a, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
        if default is None
    ]
    if missing_keywords:
        raise collector.fail(
            f"{parsed.label} has keyword-only parameters without defaults "
            f"({', '.join(missing_keywords)}); hl.triton_kernel passes args positionally"
        )
    too_many = count > len(positional) and arguments.vararg is None
    if count < required or too_many:
        expected = (
            f"{required}" if required == len(positional) else f"{required} to {len(positional)}"
        )
        if arguments.vararg is not None:
            expected = f"at least {required}"
        raise collector.fail(
            f"{parsed.label} takes {expected} argument(s) ({', '.join(positional)}), "
            f"but args has {count}"
        )


def _returns(node: ast.FunctionDef) -> list[ast.Return]:
    found: list[ast.Return] = []
    pending: list[ast.AST] = list(node.body)
    while pending:
        item = pending.pop()
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue  # their returns are not the function's
        if isinstance(item, ast.Return):
            found.append(item)
        pending.extend(ast.iter_child_nodes(item))
    return found


def _result_width(value: ast.expr) -> int | None:
    """How many values a returned expression is, where its form tells (a tuple display, or an
    arithmetic expression); None where it does not (a name or a call may hold a tuple)."""
    if isinstance(value, ast.Tuple):
        return len(value.elts)
    if isinstance(value, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.Constant)):
        return 1
    return None


def _check_results(
    collector: _TritonFunctionCollector, parsed: _Def, count: int, structure: str
) -> None:
    if structure == "none":
        return  # a returned value, if any, is dropped
    values = [r.value for r in _returns(parsed.node) if r.value is not None]
    if not values:
        raise collector.fail(
            f"{parsed.label} returns nothing, but output_like declares {count} output(s)",
            hint="Pass output_like=None for a function called for its side effects.",
        )
    for value in values:
        width = _result_width(value)
        if width is not None and width != (1 if structure == "one" else count):
            raise collector.fail(
                f"{parsed.label} returns {width} value(s), but output_like declares {count}"
            )


def trace_triton_kernel(tracer: Any, triton_source_or_fn: Any, args: Any, output_like: Any) -> Any:
    collector = _TritonFunctionCollector(tracer)
    target = triton_source_or_fn
    if isinstance(target, str) and target.strip().isidentifier():
        target = _named_function(tracer, collector, target.strip())
    library = _triton_builtin(target)
    parsed = None
    if library is None:
        parsed = _resolve_triton_function(tracer, collector, target)
    if isinstance(args, (Mapping, str, bytes)) or not isinstance(args, Sequence):
        raise collector.fail(
            f"args must be a list or tuple (passed positionally), got {type(args).__name__}"
        )
    types, structure = _output_types(tracer, output_like, _TRITON_KERNEL)
    if parsed is not None:
        _check_call(collector, parsed, len(args))
        _check_results(collector, parsed, len(types), structure)
        name = parsed.node.name
        collector.function(name, parsed)
    else:
        # a function of Triton's own library (tl.sigmoid): called through its module
        name = ".".join(library)
    inputs: list[Value] = []
    placeholders = tuple(
        Placeholder("literal", value)
        if isinstance(value, str)  # a string argument is a Python string (for a constexpr)
        else _placeholder(tracer, value, inputs, f"args[{position}]", _TRITON_KERNEL)
        for position, value in enumerate(args)
    )
    definitions = tuple(
        (name, kind, payload) for name, (kind, payload) in collector.definitions.items()
    )
    attrs = {
        "function": TritonFunction(name, definitions, tuple(collector.names.values())),
        "args": placeholders,
        "multi": structure in ("tuple", "list"),
    }
    node = tracer.emit(ops.triton_kernel, inputs, attrs, types)
    for out in node.outputs:
        out.name_hint = name.rpartition(".")[2].strip("_") or "result"
    return _wrap_outputs(tracer, node, structure)


def watched_names(ir: Any) -> tuple[tuple[dict, str, Any], ...]:
    """The ``(namespace, name, value)`` the `hl.triton_kernel` calls of ``ir`` were resolved
    through (`TritonFunction.names`): the trace is stale once a name has another value. Empty
    for a kernel without such calls."""
    found: dict[tuple[int, str], tuple[dict, str, Any]] = {}
    for node in ir.walk():
        if node.op is ops.triton_kernel:
            for entry in node.attrs["function"].names:
                found.setdefault((id(entry[0]), entry[1]), entry)
    return tuple(found.values())
