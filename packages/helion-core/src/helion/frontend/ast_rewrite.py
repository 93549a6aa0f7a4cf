"""Split a kernel function into host code and device code, and put device code in functional form.

The host part is the function with its consecutive top-level device loops replaced by one call
`__helion_device__(<host values the device code reads>)`. The device part is a function of those
values whose loops and `if`s are rewritten into calls on the tracer:

    for tk in hl.tile(k):                     def __loop_3(__target, acc):
        acc = torch.addmm(acc, a, b)     ─▶       tk = __target
                                                  acc = torch.addmm(acc, a, b)
                                                  return (acc,)
                                              (acc,) = __hl.loop(hl.tile(k), __loop_3, (acc,), loc)

Loop-carried values are the names a loop body assigns that were bound before the loop.
"""

from __future__ import annotations

import ast
import builtins
import copy
import dataclasses
import inspect
import textwrap
import types
from typing import Any
from typing import Callable
from typing import Collection

from helion import exc

HOST_DEVICE_CALL = "__helion_device__"
TRACER_NAME = "__hl"


@dataclasses.dataclass
class KernelSource:
    fn: Callable
    filename: str
    first_lineno: int
    indent: int
    lines: list[str]
    func_def: ast.FunctionDef

    def location(self, node: ast.AST) -> exc.SourceLocation:
        return source_location(
            self,
            getattr(node, "lineno", self.first_lineno),
            getattr(node, "col_offset", 0),
            getattr(node, "end_col_offset", None),
        )


def source_location(
    src: KernelSource, lineno: int, col: int | None, end_col: int | None
) -> exc.SourceLocation:
    line_text = ""
    offset = lineno - src.first_lineno
    if 0 <= offset < len(src.lines):
        line_text = src.lines[offset].rstrip("\n")
    col_text = (col or 0) + src.indent
    end_text = None if end_col is None else end_col + src.indent
    return exc.SourceLocation(
        filename=src.filename,
        lineno=lineno,
        col_offset=col_text,
        end_col_offset=end_text,
        source_line=line_text,
        name=src.fn.__name__,
    )


def read_source(fn: Callable) -> KernelSource:
    src = _parse_source(fn)
    if not isinstance(src.func_def, ast.FunctionDef):
        raise exc.InternalError(f"kernel {fn.__name__!r} is not a plain function definition")
    return src


def _parse_source(fn: Callable) -> KernelSource:
    try:
        lines, first_lineno = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError) as error:
        raise exc.KernelSourceUnavailable(fn.__name__, error) from error
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    tree = ast.parse(dedented)
    ast.increment_lineno(tree, first_lineno - 1)
    func_def = tree.body[0]
    return KernelSource(fn, filename, first_lineno, indent, lines, func_def)  # type: ignore[arg-type]


def generator_construct(fn: Callable) -> tuple[str, exc.SourceLocation | None]:
    """What makes ``fn`` a generator or coroutine function (``yield``, ``yield from``, ``await``
    or ``async def``) and where it is, for the error refusing it as a kernel; no location where
    the source cannot be read."""
    fallback = "yield" if inspect.isgeneratorfunction(fn) else "async def"
    try:
        src = _parse_source(fn)
    except (exc.BaseError, SyntaxError):
        return fallback, None
    if not isinstance(src.func_def, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return fallback, None  # a lambda: its line is the best there is
    names = {ast.Yield: "yield", ast.YieldFrom: "yield from", ast.Await: "await"}
    found: list[ast.expr] = []
    pending: list[ast.AST] = list(src.func_def.body)
    while pending:  # not into nested functions: their yields are their own
        node = pending.pop()
        if type(node) in names:
            found.append(node)  # type: ignore[arg-type]
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))
    if not found:
        return fallback, src.location(src.func_def)
    first = min(found, key=lambda n: (n.lineno, n.col_offset))
    return names[type(first)], src.location(first)


# ---------------------------------------------------------------------------------------------
# name analysis


def assigned_names(nodes: list[ast.stmt] | ast.AST) -> list[str]:
    """Names bound by assignments, loop targets and augmented assignments (in order)."""
    found: list[str] = []
    roots = nodes if isinstance(nodes, list) else [nodes]
    for root in roots:
        own = comprehension_targets(root)
        for node in ast.walk(root):
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Store)
                and node.id not in found
                and id(node) not in own
            ):
                found.append(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.Lambda)) and node is not root:
                pass  # names inside nested functions are their own scope (walk still visits; rare)
    return found


def host_bound_names(stmts: list[ast.stmt]) -> list[str]:
    """Every name host statements bind in the kernel's scope: assignments (`assigned_names`) and
    also `import` / `from ... import`, `def`, `class` and `except ... as` names, so that device
    code reads them as it reads other host locals. Nested function and class bodies are scopes
    of their own and are not looked into."""
    found = assigned_names(stmts)
    pending: list[ast.AST] = list(stmts)
    while pending:
        node = pending.pop(0)
        names: list[str] = []
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name != "*":
                    names.append(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or (
            isinstance(node, ast.ExceptHandler) and node.name
        ):
            names.append(node.name)  # type: ignore[arg-type]
        for name in names:
            if name not in found:
                found.append(name)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))
    return found


def global_names(func: ast.FunctionDef) -> dict[str, ast.stmt]:
    """The names a function declares `global` or `nonlocal` (not in nested functions), with the
    declaring statement."""
    found: dict[str, ast.stmt] = {}
    pending: list[ast.AST] = list(func.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                found.setdefault(name, node)
        elif not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
        ):
            pending.extend(ast.iter_child_nodes(node))
    return found


def check_global_writes(src: KernelSource, namespace: dict[str, Any]) -> None:
    """Device code (the body of an `hl.tile` / `hl.grid` loop) may not assign a name the kernel
    declares `global` (or `nonlocal`), nor declare one: device code cannot change Python
    globals (compiled, the assignment would be dropped; eagerly it would happen once per tile)."""
    declared = global_names(src.func_def)
    for loop in _device_loops(src.func_def, namespace):
        for node in ast.walk(loop):
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                raise exc.GlobalMutation(", ".join(node.names), loc=src.location(node))
        own = comprehension_targets(loop)
        for node in ast.walk(loop):
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, (ast.Store, ast.Del))
                and node.id in declared
                and id(node) not in own
            ):
                raise exc.GlobalMutation(node.id, loc=src.location(node))


def _device_loops(func: ast.FunctionDef, namespace: dict[str, Any]) -> list[ast.For]:
    loops: list[ast.For] = []
    pending: list[ast.AST] = list(func.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.For) and is_device_loop(node, namespace):
            loops.append(node)
        elif not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
        ):
            pending.extend(ast.iter_child_nodes(node))
    return loops


# code object of a kernel run in eager mode -> the line spans of its top-level device loops
_EAGER_CHECKED: dict[Any, tuple[tuple[int, int], ...]] = {}


def check_eager_global_writes(fn: Callable) -> None:
    """`check_global_writes` (and that hl.tile / hl.grid calls are `for` iterables) for a
    kernel run in eager mode (once per function; a kernel whose source cannot be read runs
    unchecked)."""
    code = getattr(fn, "__code__", None)
    if code is None or code in _EAGER_CHECKED:
        return
    spans: tuple[tuple[int, int], ...] = ()
    try:
        src = _parse_source(fn)
    except (exc.BaseError, SyntaxError, IndexError):
        src = None
    if src is not None and isinstance(src.func_def, ast.FunctionDef):
        check_global_writes(src, fn.__globals__)
        _check_loop_calls_in_for(src, fn.__globals__)
        spans = tuple(
            (loop.lineno, loop.end_lineno or loop.lineno)
            for loop in _device_loops(src.func_def, fn.__globals__)
        )
    _EAGER_CHECKED[code] = spans


# code object of a kernel -> the code eager mode runs (`eager_code`)
_EAGER_CODE: dict[types.CodeType, types.CodeType] = {}


def _unbind(name: str, where: ast.stmt) -> ast.stmt:
    """``try: del name / except NameError: pass`` at ``where``'s position."""
    statement = ast.Try(
        body=[ast.Delete([ast.Name(name, ast.Del())])],
        handlers=[ast.ExceptHandler(ast.Name("NameError", ast.Load()), None, [ast.Pass()])],
        orelse=[],
        finalbody=[],
    )
    for node in ast.walk(statement):
        ast.copy_location(node, where)
    return statement


def eager_code(fn: Callable) -> types.CodeType:
    """The code eager mode runs for kernel ``fn``: its own, except that each top-level device
    loop first unbinds the names its body binds. An iteration is a program of its own in a
    compiled kernel, so it cannot read what an earlier one left: reading a name bound in only
    one branch of an `if` is `UndefinedVariable` there, and now in eager mode too, where it
    silently read the previous iteration's value. Same file, lines and columns as ``fn``'s."""
    code = fn.__code__
    cached = _EAGER_CODE.get(code)
    if cached is not None:
        return cached
    result = code
    try:
        src = _parse_source(fn)
    except (exc.BaseError, SyntaxError, IndexError):
        src = None
    if src is not None and isinstance(src.func_def, ast.FunctionDef) and not code.co_freevars:
        func = src.func_def
        loops = _device_loops(func, fn.__globals__)
        args = func.args
        outside = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
        outside |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        outside |= set(host_bound_names([stmt for stmt in func.body if stmt not in loops]))
        changed = False
        for loop in loops:
            names = set(host_bound_names(loop.body)) - set(assigned_names(loop.target)) - outside
            if names:
                loop.body[0:0] = [_unbind(name, loop.body[0]) for name in sorted(names)]
                changed = True
        if changed:
            func.decorator_list = []
            func.lineno = code.co_firstlineno  # a decorated function's code starts at its decorator
            for node in ast.walk(func):  # the columns of the source as written (indented)
                if src.indent and hasattr(node, "col_offset"):
                    node.col_offset += src.indent
                    if getattr(node, "end_col_offset", None) is not None:
                        node.end_col_offset += src.indent
            module = ast.fix_missing_locations(ast.Module([func], []))
            compiled = compile(module, code.co_filename, "exec", dont_inherit=True)
            result = next(
                c
                for c in compiled.co_consts
                if isinstance(c, types.CodeType) and c.co_name == code.co_name
            )
    _EAGER_CODE[code] = result
    return result


def in_device_loop(fn: Callable, filename: str, lineno: int) -> bool:
    """Whether line `lineno` of `filename` is inside one of `fn`'s device loops (as found by
    `check_eager_global_writes`, which must have run)."""
    code = getattr(fn, "__code__", None)
    if code is None or filename != code.co_filename:
        return False
    return any(first <= lineno <= last for first, last in _EAGER_CHECKED.get(code, ()))


def comprehension_targets(root: ast.AST) -> set[int]:
    """The ids of the name nodes a comprehension binds: its own variables, as in Python 3 (not
    the scope's: a host variable of the same name is neither modified nor read)."""
    return {
        id(target)
        for node in ast.walk(root)
        if isinstance(node, ast.comprehension)
        for target in ast.walk(node.target)
    }


def scope_bound_names(stmts: list[ast.stmt], defined: set[str]) -> list[str]:
    """Names that device statements bind in their own scope, in order.

    A device loop is a function of its carried values: it rebinds only the names it carries
    (names bound before it and assigned in its body); names first assigned inside it stay
    local to it. An `if` binds what either branch binds.
    """
    found: list[str] = []
    defined = set(defined)
    for stmt in stmts:
        if isinstance(stmt, ast.For):
            targets = assigned_names(stmt.target)
            names = [n for n in assigned_names(stmt.body) if n in defined and n not in targets]
        elif isinstance(stmt, ast.If):
            names = scope_bound_names(stmt.body, defined) + scope_bound_names(stmt.orelse, defined)
        else:
            names = assigned_names(stmt)
        for name in names:
            if name not in found:
                found.append(name)
        defined |= set(names)
    return found


# in-place tensor methods that change a tensor's shape or strides, not its data
_METADATA_METHODS = frozenset(
    {
        "t_",
        "transpose_",
        "swapdims_",
        "swapaxes_",
        "squeeze_",
        "unsqueeze_",
        "resize_",
        "resize_as_",
        "as_strided_",
        "set_",
    }
)


def changes_tensor_metadata(split: SplitKernel) -> bool:
    """Whether the host code before the device loops may change a tensor's shape or strides in
    place (`x.t_()`): an argument then no longer has the layout its specialization key was
    taken with, and the guards must compare its layout at each call."""
    return host_calls_method(split, _METADATA_METHODS)


def host_calls_method(split: SplitKernel, names: Collection[str]) -> bool:
    """Whether the host code before the device loops calls a method of one of ``names``."""
    for node in ast.walk(ast.Module(body=split.host_before, type_ignores=[])):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in names
        ):
            return True
    return False


def loaded_names(nodes: list[ast.AST] | ast.AST) -> list[str]:
    found: list[str] = []
    roots = nodes if isinstance(nodes, list) else [nodes]
    for root in roots:
        for node in ast.walk(root):
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and node.id not in found
            ):
                found.append(node.id)
    return found


# ---------------------------------------------------------------------------------------------
# finding device loops


def _resolve(expr: ast.expr, namespace: dict[str, Any]) -> Any:
    try:
        return eval(compile(ast.Expression(expr), "<helion>", "eval"), namespace)
    except Exception:
        return None


def is_device_loop(node: ast.stmt, namespace: dict[str, Any]) -> bool:
    if not isinstance(node, ast.For) or not isinstance(node.iter, ast.Call):
        return False
    import helion.language as hl

    # hl.jagged_tile counts so that a top-level one reaches the tracer, which reports it
    return _resolve(node.iter.func, namespace) in (hl.tile, hl.grid, hl.jagged_tile)


def _is_barrier(node: ast.stmt, namespace: dict[str, Any]) -> bool:
    import helion.language as hl

    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and _resolve(node.value.func, namespace) is hl.barrier
    )


@dataclasses.dataclass
class SplitKernel:
    source: KernelSource
    host_before: list[ast.stmt]
    device_stmts: list[ast.stmt]  # the top-level loops (and barriers between them)
    host_after: list[ast.stmt]
    device_inputs: list[str]  # host names the device code reads, in order
    param_names: list[str]
    host_assigned: set[str]


def split_kernel(fn: Callable) -> SplitKernel:
    src = read_source(fn)
    func = src.func_def
    namespace = fn.__globals__
    _check_signature(src)
    _check_decorators(src, namespace)
    if fn.__code__.co_freevars:
        raise exc.ClosuresNotSupported(fn.__name__, loc=src.location(func))

    body = func.body
    _check_loop_calls_in_for(src, namespace)
    loop_positions = [i for i, stmt in enumerate(body) if is_device_loop(stmt, namespace)]
    for stmt in body:
        if not is_device_loop(stmt, namespace):
            for inner in ast.walk(stmt):
                if isinstance(inner, ast.For) and is_device_loop(inner, namespace):
                    raise exc.NestedGridLoop(loc=src.location(inner))
    if not loop_positions:
        raise exc.NoDeviceLoopsInKernel(fn.__name__, loc=src.location(func))
    first, last = loop_positions[0], loop_positions[-1]
    for stmt in body[first:last]:
        if not is_device_loop(stmt, namespace) and not _is_barrier(stmt, namespace):
            raise exc.TopLevelStatementBetweenLoops(loc=src.location(stmt))
    for stmt in body[:first] + body[last + 1 :]:
        if _is_barrier(stmt, namespace):
            raise exc.BarrierOnlyAllowedAtTopLevel(loc=src.location(stmt))

    check_global_writes(src, namespace)
    host_before, device_stmts, host_after = body[:first], body[first : last + 1], body[last + 1 :]
    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    host_assigned = set(params) | set(host_bound_names(host_before))
    device_written = set(assigned_names(device_stmts))
    for stmt in device_stmts:
        own = comprehension_targets(stmt)
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Store)
                and node.id in host_assigned
                and id(node) not in own
            ):
                raise exc.CannotModifyHostVariableOnDevice(node.id, loc=src.location(node))
    after_assigned = set(host_bound_names(host_after))
    for node in ast.walk(ast.Module(body=host_after, type_ignores=[])):
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id in device_written
            and node.id not in host_assigned
            and node.id not in after_assigned
        ):
            raise exc.CannotReadDeviceVariableOnHost(node.id, loc=src.location(node))

    device_reads = loaded_names(device_stmts)
    device_inputs = [n for n in device_reads if n in host_assigned]
    # module-level tensors and numbers read by device code are lifted into kernel arguments
    for name in device_reads:
        if name in host_assigned or name in device_written:
            continue
        value = namespace.get(name)
        if _is_liftable_global(value):
            device_inputs.append(name)
    return SplitKernel(
        src, host_before, device_stmts, host_after, device_inputs, params, host_assigned
    )


def _check_loop_calls_in_for(src: KernelSource, namespace: dict[str, Any]) -> None:
    """`hl.tile(...)`, `hl.grid(...)` and `hl.jagged_tile(...)` make device loops only as the
    iterable of a `for` statement: a call anywhere else in the kernel's host code (`tiles =
    hl.tile(n)` before a `for t in tiles:`) is refused at the call. (In device code such a call
    is refused by the tracer when it is iterated other than by a `for`.)"""
    import helion.language as hl

    names = {hl.tile: "hl.tile", hl.grid: "hl.grid", hl.jagged_tile: "hl.jagged_tile"}
    loop_iters: set[int] = set()
    pending: list[ast.AST] = list(src.func_def.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, ast.For):
            if is_device_loop(node, namespace):
                continue  # device code: the tracer's business
            loop_iters.add(id(node.iter))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue  # a helper's own scope
        elif (
            isinstance(node, ast.Call) and id(node) not in loop_iters and _is_dotted_name(node.func)
        ):
            api = names.get(_resolve(node.func, namespace))  # type: ignore[call-overload]
            if api is not None:
                raise exc.LoopFunctionNotInFor(
                    api,
                    loc=src.location(node),
                    hint=f"{api}(...) makes a device loop only as the iterable of a `for` "
                    "statement of the kernel's body: write the call in the `for` itself.",
                )
        pending.extend(ast.iter_child_nodes(node))


def _is_dotted_name(expr: ast.expr) -> bool:
    """Whether ``expr`` is `name` or `name.attr...`: safe to evaluate (no call runs)."""
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name)


def _is_liftable_global(value: Any) -> bool:
    import torch

    return isinstance(value, (torch.Tensor, int, float)) and not isinstance(value, bool)


def _check_signature(src: KernelSource) -> None:
    args = src.func_def.args
    if args.vararg or args.kwarg or args.kwonlyargs:
        raise TypeError(
            f"Helion kernel {src.fn.__name__!r} may not take *args, **kwargs or keyword-only arguments"
        )


def _check_decorators(src: KernelSource, namespace: dict[str, Any]) -> None:
    import helion

    decorators = src.func_def.decorator_list
    for position, decorator in enumerate(decorators):
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (
            _resolve(target, namespace) in (helion.kernel, helion.jit)
            and position != len(decorators) - 1
        ):
            raise exc.DecoratorAfterHelionKernelDecorator(
                loc=src.location(decorators[position + 1])
            )


# ---------------------------------------------------------------------------------------------
# host function


def build_host_factory(split: SplitKernel) -> Callable[[Callable], Callable]:
    """Returns make_host(device_call) -> the host function with the device loops replaced."""
    func = split.source.func_def
    call = ast.Expr(
        ast.Call(
            func=ast.Name(HOST_DEVICE_CALL, ast.Load()),
            args=[ast.Name(name, ast.Load()) for name in split.device_inputs],
            keywords=[],
        )
    )
    ast.copy_location(call, split.device_stmts[0])
    ast.copy_location(call.value, split.device_stmts[0])
    host_def = ast.FunctionDef(
        name=func.name,
        args=func.args,
        body=[*split.host_before, call, *split.host_after],
        decorator_list=[],
        returns=None,
        type_params=[],
    )
    ast.copy_location(host_def, func)
    return _compile_factory(split, host_def, "__helion_make_host__", [HOST_DEVICE_CALL])


def _compile_factory(
    split: SplitKernel, inner: ast.FunctionDef, factory_name: str, factory_args: list[str]
):
    factory = ast.FunctionDef(
        name=factory_name,
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(a) for a in factory_args],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        ),
        body=[inner, ast.Return(ast.Name(inner.name, ast.Load()))],
        decorator_list=[],
        returns=None,
        type_params=[],
    )
    ast.copy_location(factory, inner)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, split.source.filename, "exec")
    factory_code = next(
        c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == factory_name
    )
    return factory_code


def make_host_function(
    split: SplitKernel, factory_code: types.CodeType, device_call: Callable
) -> Callable:
    fn = split.source.fn
    factory = types.FunctionType(factory_code, fn.__globals__, "__helion_make_host__")
    host = factory(device_call)
    host.__defaults__ = fn.__defaults__
    return host


# ---------------------------------------------------------------------------------------------
# device function


class DeviceRewriter:
    """Rewrites device statements into functional form (see module docstring)."""

    def __init__(self, split: SplitKernel) -> None:
        self.split = split
        self.counter = 0

    def _loc_tuple(self, node: ast.AST) -> ast.Tuple:
        # a statement spanning lines (a `for` or an `if` with its body) is underlined to the
        # end of its first line: its end column belongs to its last line
        end_col = node.end_col_offset if node.end_lineno == node.lineno else None
        return ast.Tuple(
            [
                ast.Constant(node.lineno),
                ast.Constant(node.col_offset),
                ast.Constant(end_col),
            ],
            ast.Load(),
        )

    def _tracer_call(self, method: str, args: list[ast.expr]) -> ast.Call:
        return ast.Call(
            func=ast.Attribute(ast.Name(TRACER_NAME, ast.Load()), method, ast.Load()),
            args=args,
            keywords=[],
        )

    def _unpack_assign(self, names: list[str], value: ast.expr) -> ast.stmt:
        if not names:
            return ast.Expr(value)
        target = ast.Tuple([ast.Name(n, ast.Store()) for n in names], ast.Store())
        return ast.Assign(targets=[target], value=value)

    def _function(
        self, name: str, params: list[str], body: list[ast.stmt], returns: list[ast.expr]
    ) -> ast.FunctionDef:
        return ast.FunctionDef(
            name=name,
            args=ast.arguments(
                posonlyargs=[],
                args=[ast.arg(p) for p in params],
                kwonlyargs=[],
                kw_defaults=[],
                defaults=[],
            ),
            body=[*body, ast.Return(ast.Tuple(returns, ast.Load()))],
            decorator_list=[],
            returns=None,
            type_params=[],
        )

    def _guard_comprehensions(self, node: Any) -> Any:
        """``node``, or a copy of it whose comprehensions are guarded (`_ComprehensionGuard`):
        the kernel's AST is shared by every specialization's rewrite, so it stays as it is."""
        if not any(isinstance(n, tuple(_COMPREHENSION_KINDS)) for n in ast.walk(node)):
            return node
        return _ComprehensionGuard(self._loc_tuple).visit(copy.deepcopy(node))

    def rewrite_block(self, stmts: list[ast.stmt], defined: set[str]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        defined = set(defined)
        for stmt in stmts:
            new = self.rewrite_stmt(stmt, defined)
            for node in new:
                ast.copy_location(node, stmt)
            out.extend(new)
            defined |= set(scope_bound_names([stmt], defined))
        return out

    def rewrite_stmt(self, stmt: ast.stmt, defined: set[str]) -> list[ast.stmt]:
        loc = self.split.source.location
        if isinstance(stmt, ast.For):
            return self._rewrite_for(stmt, defined)
        if isinstance(stmt, ast.If):
            return self._rewrite_if(stmt, defined)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) > 1:
            raise exc.AssignmentMultipleTargets(loc=loc(stmt))
        if isinstance(stmt, _SIMPLE_STATEMENTS):
            return [self._guard_comprehensions(stmt)]
        names = {
            ast.Return: "return",
            ast.While: "while",
            ast.With: "with",
            ast.Try: "try",
            ast.Raise: "raise",
            ast.Break: "break",
            ast.Continue: "continue",
            ast.Delete: "del",
            ast.Global: "global",
            ast.Nonlocal: "nonlocal",
            ast.Import: "import",
            ast.ImportFrom: "import",
        }
        raise exc.StatementNotSupported(names.get(type(stmt), type(stmt).__name__), loc=loc(stmt))

    def _rewrite_for(self, stmt: ast.For, defined: set[str]) -> list[ast.stmt]:
        if stmt.orelse:
            raise exc.DeviceLoopElseBlock(loc=self.split.source.location(stmt))
        self.counter += 1
        body_name = f"__loop_body_{self.counter}"
        targets = assigned_names(stmt.target)
        carried = [n for n in assigned_names(stmt.body) if n in defined and n not in targets]
        inner_defined = defined | set(targets) | set(carried)
        body = [ast.Assign(targets=[stmt.target], value=ast.Name("__target", ast.Load()))]
        body += self.rewrite_block(stmt.body, inner_defined)
        fn = self._function(
            body_name, ["__target", *carried], body, [ast.Name(n, ast.Load()) for n in carried]
        )
        call = self._tracer_call(
            "loop",
            [
                self._guard_comprehensions(stmt.iter),
                ast.Name(body_name, ast.Load()),
                ast.Tuple([ast.Name(n, ast.Load()) for n in carried], ast.Load()),
                self._loc_tuple(stmt),
            ],
        )
        return [fn, self._unpack_assign(carried, call)]

    def _device_condition(self, test: ast.expr) -> ast.expr:
        """An `if` test with its `and` / `or` / `not` going through the tracer (`bool_op`,
        `bool_not`), which combines 0-D device values on the device; a copy (the kernel's AST
        is shared by every specialization's rewrite)."""
        test = self._guard_comprehensions(test)
        if not any(
            isinstance(n, ast.BoolOp) or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not))
            for n in ast.walk(test)
        ):
            return test
        return _ConditionRewriter(self._loc_tuple).visit(copy.deepcopy(test))

    def _rewrite_if(self, stmt: ast.If, defined: set[str]) -> list[ast.stmt]:
        self.counter += 1
        then_assigned = scope_bound_names(stmt.body, defined)
        else_assigned = scope_bound_names(stmt.orelse, defined)
        outputs = [n for n in then_assigned + [x for x in else_assigned if x not in then_assigned]]
        inputs = [n for n in outputs if n in defined]

        def branch(name: str, body: list[ast.stmt], assigned: list[str]) -> ast.FunctionDef:
            new_body = self.rewrite_block(body, defined) if body else [ast.Pass()]
            returns: list[ast.expr] = []
            for out in outputs:
                if out in assigned or out in inputs:
                    returns.append(ast.Name(out, ast.Load()))
                else:
                    returns.append(
                        ast.Attribute(ast.Name(TRACER_NAME, ast.Load()), "UNDEFINED", ast.Load())
                    )
            return self._function(name, inputs, new_body, returns)

        then_fn = branch(f"__if_then_{self.counter}", stmt.body, then_assigned)
        else_fn = branch(f"__if_else_{self.counter}", stmt.orelse, else_assigned)
        call = self._tracer_call(
            "if_",
            [
                self._device_condition(stmt.test),
                ast.Name(then_fn.name, ast.Load()),
                ast.Name(else_fn.name, ast.Load()),
                ast.Tuple([ast.Name(n, ast.Load()) for n in inputs], ast.Load()),
                self._loc_tuple(stmt),
            ],
        )
        return [then_fn, else_fn, self._unpack_assign(outputs, call)]


class _ConditionRewriter(ast.NodeTransformer):
    """`a and b` -> `__tracer__.bool_op("and", [lambda: a, lambda: b], loc)` (thunks keep
    Python's short-circuit for Python values), `not a` -> `__tracer__.bool_not(a, loc)`. Not
    into lambdas or comprehensions: their own `and` / `or` stay Python's."""

    def __init__(self, loc_tuple: Callable[[ast.AST], ast.Tuple]) -> None:
        self.loc_tuple = loc_tuple

    def _call(self, method: str, args: list[ast.expr], node: ast.AST) -> ast.expr:
        func = ast.Attribute(ast.Name(TRACER_NAME, ast.Load()), method, ast.Load())
        call = ast.Call(func=func, args=[*args, self.loc_tuple(node)], keywords=[])
        return ast.copy_location(call, node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        self.generic_visit(node)
        thunks = [
            ast.Lambda(
                ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                value,
            )
            for value in node.values
        ]
        kind = "and" if isinstance(node.op, ast.And) else "or"
        return self._call("bool_op", [ast.Constant(kind), ast.List(thunks, ast.Load())], node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return self._call("bool_not", [node.operand], node)
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.expr:
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda


# device statements that run as they are (their comprehensions guarded)
_SIMPLE_STATEMENTS = (
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Expr,
    ast.Pass,
    ast.Assert,
    ast.FunctionDef,
)

_COMPREHENSION_KINDS = {
    ast.ListComp: "list comprehension",
    ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension",
    ast.GeneratorExp: "generator expression",
}


class _ComprehensionGuard(ast.NodeTransformer):
    """Passes each iterable of a comprehension in device code through `Tracer.comprehension_iter`.

    A comprehension runs in Python while the kernel is traced: over a tuple or list of values
    it works, but `range` (there a device loop, `hl.grid`), `hl.tile` and device tensors are not
    Python iterables, and would fail deep inside the tracer without naming the construct."""

    def __init__(self, loc_tuple: Callable[[ast.AST], ast.Tuple]) -> None:
        self.loc_tuple = loc_tuple

    def _guard(self, node: ast.AST) -> ast.AST:
        self.generic_visit(node)  # comprehensions nested in this one
        kind = _COMPREHENSION_KINDS[type(node)]
        for generator in node.generators:  # type: ignore[attr-defined]
            call = ast.Call(
                func=ast.Attribute(
                    ast.Name(TRACER_NAME, ast.Load()), "comprehension_iter", ast.Load()
                ),
                args=[
                    generator.iter,
                    ast.Constant(kind),
                    ast.Constant(ast.unparse(generator.iter)),
                    self.loc_tuple(node),
                ],
                keywords=[],
            )
            generator.iter = ast.copy_location(call, generator.iter)
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _guard


def build_device_factory(split: SplitKernel) -> types.CodeType:
    rewriter = DeviceRewriter(split)
    body = rewriter.rewrite_block(split.device_stmts, set(split.device_inputs))
    params = [TRACER_NAME, *split.device_inputs]
    device_def = ast.FunctionDef(
        name="__helion_device_fn__",
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(p) for p in params],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        ),
        body=body or [ast.Pass()],
        decorator_list=[],
        returns=None,
        type_params=[],
    )
    ast.copy_location(device_def, split.device_stmts[0])
    return _compile_factory(split, device_def, "__helion_make_device__", [])


def make_device_function(
    split: SplitKernel, factory_code: types.CodeType, overrides: dict[str, Any]
) -> Callable:
    """The device function, with builtins replaced as device code expects (range → hl.grid, ...)."""
    from helion.language._device_globals import device_replacements

    namespace = dict(split.source.fn.__globals__)
    namespace.update(device_replacements(namespace))  # torch functions with a device meaning
    namespace.update(overrides)
    namespace.setdefault("__builtins__", builtins)
    factory = types.FunctionType(factory_code, namespace, "__helion_make_device__")
    return factory()
