"""``Settings.print_repro``: a standalone script that reproduces one run of a bound kernel.

The script imports torch and helion, recreates what the kernel's code refers to (modules,
plain constants, helper functions of the kernel's own module), repeats the kernel's source with
its decorator replaced by ``@helion.kernel(config=..., static_shapes=..., ...)``, and defines
``helion_repro_caller()``, which builds arguments of the same shapes, strides, dtypes and
devices (random values) and calls the kernel. What it cannot recreate is left as a
``# TODO`` comment; the script is valid Python either way.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
import types
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable

import torch

from helion.runtime.code_deps import referenced_names
from helion.runtime.output_code import literal_source

if TYPE_CHECKING:
    from helion.runtime.config import Config
    from helion.runtime.kernel import BoundKernel

HEADER = "# === HELION KERNEL REPRO ==="
FOOTER = "# === END HELION KERNEL REPRO ==="

# settings written into the decorator when they differ from these defaults
_DECORATOR_SETTINGS: dict[str, object] = {
    "index_dtype": None,
    "dot_precision": "tf32",
    "persistent_reserved_sms": 0,
    "allow_warp_specialize": True,
}
# dtypes torch.randn makes directly (others are drawn in float32 and converted)
_RANDN_DTYPES = frozenset(
    {torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128}
)
_RANDINT_DTYPES = frozenset({torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64})
# integer tensors hold values in [0, _INT_HIGH): small, so that index tensors stay in bounds
_INT_HIGH = 4


def print_repro(bound: BoundKernel, config: Config, args: tuple) -> None:
    """Print the script to stderr; a debugging aid never fails the call it describes."""
    try:
        script = repro_script(bound, config, args)
    except Exception as error:
        script = f"# helion: could not write a repro of {bound.kernel.name!r}: {error!r}"
    print(script, file=sys.stderr)


def repro_script(bound: BoundKernel, config: Config, args: tuple) -> str:
    """The reproduction script of ``bound`` running ``config`` on arguments like ``args``."""
    fn = bound.kernel.fn
    name = fn.__name__
    lines = [
        HEADER,
        "from __future__ import annotations",
        "",
        "import torch",
        "",
        "import helion",
        "import helion.language as hl",
    ]
    context = _context_lines(fn)
    if context:
        lines += ["", *context]
    lines += ["", "", _decorator(bound, config)]
    lines += _function_source(bound).rstrip("\n").splitlines()
    lines += ["", "", *_caller(bound, args, name), "", "", "helion_repro_caller()", FOOTER]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# the kernel and what it refers to


def _decorator(bound: BoundKernel, config: Config) -> str:
    settings = bound.settings
    parts = [f"config={config!r}", f"static_shapes={settings.static_shapes!r}"]
    if settings.backend is not None:
        parts.append(f"backend={settings.backend!r}")
    for field, default in _DECORATOR_SETTINGS.items():
        value = getattr(settings, field)
        if value != default:
            parts.append(f"{field}={_scalar_expr(value) or repr(value)}")
    return f"@helion.kernel({', '.join(parts)})"


def _function_source(bound: BoundKernel) -> str:
    """The kernel's ``def`` and body, without its decorators, dedented to module level."""
    src = bound.split.source
    start = max(src.func_def.lineno - src.first_lineno, 0)
    return textwrap.dedent("".join(src.lines[start:]))


def _namespace(fn: Callable[..., Any]) -> dict[str, Any]:
    """The globals of ``fn`` with the values of its closure cells on top."""
    namespace = dict(getattr(fn, "__globals__", {}))
    code = getattr(fn, "__code__", None)
    for var, cell in zip(
        getattr(code, "co_freevars", ()), getattr(fn, "__closure__", None) or (), strict=False
    ):
        try:
            namespace[var] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    return namespace


def _context_lines(fn: Callable[..., Any]) -> list[str]:
    """Imports, constants and helper functions the kernel's code refers to."""
    imports: list[str] = []
    constants: list[str] = []
    helpers: list[str] = []
    todos: list[str] = []
    done = {"torch", "helion", "hl", fn.__name__}
    queue: list[tuple[Callable[..., Any], str]] = [(fn, fn.__module__)]
    while queue:
        current, home = queue.pop(0)
        namespace = _namespace(current)
        for name in referenced_names(current.__code__):
            if name in done or name not in namespace:
                continue  # a builtin, an attribute name, or already written
            done.add(name)
            value = namespace[name]
            if isinstance(value, types.ModuleType):
                module = value.__name__
                imports.append(
                    f"import {module}" if module == name else f"import {module} as {name}"
                )
                continue
            scalar = _scalar_expr(value)
            if scalar is not None:
                constants.append(f"{name} = {scalar}")
                continue
            if isinstance(value, types.FunctionType) and value.__module__ == home:
                source = _plain_function_source(value)
                if source is not None and value.__name__ == name:
                    helpers.append(source)
                    queue.append((value, home))
                    continue
            module = getattr(value, "__module__", None)
            qualname = getattr(value, "__qualname__", None)
            if (
                isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType))
                and isinstance(module, str)
                and module not in ("__main__", home)
                and qualname == getattr(value, "__name__", None)
            ):
                alias = "" if qualname == name else f" as {name}"
                imports.append(f"from {module} import {qualname}{alias}")
                continue
            todos.append(f"# TODO: {name!r} (a {type(value).__name__}) is not reproduced")
    lines = imports + constants + todos
    for source in helpers:
        if lines:
            lines += ["", ""]
        lines += source.rstrip("\n").splitlines()
    return lines


def _plain_function_source(fn: types.FunctionType) -> str | None:
    """The source of an undecorated module-level ``def``, or None."""
    if "<" in fn.__qualname__ or "." in fn.__qualname__:
        return None  # a lambda, a nested function or a method
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return None
    if not source.startswith("def "):
        return None  # decorated: the decorator's name may not be reproducible
    return source


# ---------------------------------------------------------------------------------------------
# the arguments


def _caller(bound: BoundKernel, args: tuple, name: str) -> list[str]:
    params = list(bound.kernel.signature.parameters)
    lines = ["def helion_repro_caller():", "    torch.manual_seed(0)"]
    seen: dict[int, str] = {}
    names: list[str] = []
    for index, arg in enumerate(args):
        var = params[index] if index < len(params) else f"arg{index}"
        names.append(var)
        if isinstance(arg, torch.Tensor) and id(arg) in seen:
            lines.append(f"    {var} = {seen[id(arg)]}")
            continue
        expr = _value_expr(arg)
        if expr is None:
            lines.append(f"    {var} = None  # TODO: argument of type {_type_name(arg)}")
        else:
            lines.append(f"    {var} = {expr}")
        if isinstance(arg, torch.Tensor):
            seen[id(arg)] = var
    lines.append(f"    return {name}({', '.join(names)})")
    return lines


def _type_name(value: object) -> str:
    cls = type(value)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


class _NoExpression(Exception):
    """A value inside an argument that the script cannot build."""


def _value_expr(value: object) -> str | None:
    """A Python expression building a value like ``value``, or None when there is none."""
    try:
        return literal_source(value, leaf=_argument_leaf)
    except _NoExpression:
        return None


def _argument_leaf(value: object) -> str | None:
    if isinstance(value, torch.Tensor):
        text = _tensor_expr(value)
        if text is None:
            raise _NoExpression
        return text
    if isinstance(value, tuple) and type(value) is not tuple:
        raise _NoExpression  # a named tuple: its class may not be importable
    return None


def _scalar_expr(value: object) -> str | None:
    """The source of a number, string, bool, None, dtype or device (None for other values)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, torch.dtype)):
        return literal_source(value)
    return literal_source(value) if isinstance(value, torch.device) else None


def _tensor_expr(tensor: torch.Tensor) -> str | None:
    if tensor.layout != torch.strided or tensor.is_quantized or tensor.is_nested:
        return None
    dtype, device = tensor.dtype, str(tensor.device)
    contiguous = tensor.is_contiguous()
    if contiguous:
        size = repr(tuple(tensor.shape))
    else:  # drawn flat, then viewed with the argument's strides
        needed = 1 + sum((s - 1) * st for s, st in zip(tensor.shape, tensor.stride(), strict=True))
        size = repr((needed if tensor.numel() else 0,))
    if dtype in _RANDN_DTYPES:
        expr = f"torch.randn({size}, dtype={dtype}, device={device!r})"
    elif dtype.is_floating_point:
        expr = f"torch.randn({size}, device={device!r}).to({dtype})"
    elif dtype == torch.bool:
        expr = f"torch.randint(0, 2, {size}, device={device!r}).bool()"
    elif dtype in _RANDINT_DTYPES:
        expr = f"torch.randint(0, {_INT_HIGH}, {size}, dtype={dtype}, device={device!r})"
    elif not dtype.is_complex:  # uint16/32/64 and the like
        expr = f"torch.randint(0, {_INT_HIGH}, {size}, device={device!r}).to({dtype})"
    else:
        expr = f"torch.randn({size}, dtype=torch.complex64, device={device!r}).to({dtype})"
    if not contiguous:
        expr += f".as_strided({tuple(tensor.shape)!r}, {tuple(tensor.stride())!r})"
    if tensor.requires_grad:
        expr += ".requires_grad_()"
    return expr
