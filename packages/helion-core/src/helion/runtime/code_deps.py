"""What a kernel's code refers to beyond its own text: the names its code objects read, and a
fingerprint of the module-level helpers and constants among them.

The autotune cache keys an entry by the kernel's source; a helper function it calls or a
module-level constant it reads can change the generated code as much (`helper(v) * SCALE`), so
`dependency_text` joins their sources and values to the key. Tensors, modules and classes are
left out (tensors are data, not code; modules and classes are versioned by the packages that
define them). In memory, `baked_globals` names what a trace baked in, for the guards that trace
the kernel again once one of them is rebound.
"""

from __future__ import annotations

import inspect
import types
from typing import Any
from typing import Callable
from typing import Collection
from typing import Sequence

import torch


def referenced_names(code: types.CodeType) -> list[str]:
    """The global and free names ``code`` and the code objects nested in it read, in order."""
    names: list[str] = []
    for name in (*code.co_names, *code.co_freevars):
        if name not in names:
            names.append(name)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += [n for n in referenced_names(const) if n not in names]
    return names


_CONSTANT_TYPES = (bool, int, float, complex, str, bytes, type(None), torch.dtype)


def dependency_text(fn: Callable[..., Any]) -> str:
    """The sources of the plain functions of ``fn``'s own module that it calls (transitively),
    and the values of the constants (numbers, strings, dtypes) they read, one per line: what
    `baked_globals` finds from all the names ``fn`` reads."""
    home = getattr(fn, "__module__", None)
    lines: list[str] = []
    for _, name, value in baked_globals(fn, referenced_names(fn.__code__), ()):
        if isinstance(value, _CONSTANT_TYPES):
            lines.append(f"{name} = {value!r}")
        elif isinstance(value, types.FunctionType) and value.__module__ == home:
            try:
                lines.append(inspect.getsource(value))
            except (OSError, TypeError):
                lines.append(f"{name}: {value.__code__.co_code.hex()}")
    return "\n".join(lines)


# what a trace bakes in when device code (or a helper it calls) reads a global of this kind:
# a later call must trace again once the name holds another object
_BAKED_TYPES = (
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    type(None),
    tuple,
    torch.dtype,
    torch.device,
    types.FunctionType,
)


def baked_globals(
    fn: Callable[..., Any], device_names: Sequence[str], runtime_names: Collection[str]
) -> tuple[tuple[dict[str, Any], str, Any], ...]:
    """``(namespace, name, value)`` of the module-level values a trace of ``fn``'s device code
    bakes in: the globals among ``device_names`` (the names the device code reads) other than
    ``runtime_names`` (host variables and the globals lifted into kernel arguments), and,
    through the plain functions of ``fn``'s module among them, the globals those read (a
    helper's numbers included: they are not lifted). Modules, classes and tensors are left
    out. The trace is stale once ``namespace.get(name) is not value``."""
    home = getattr(fn, "__module__", None)
    found: dict[tuple[int, str], tuple[dict[str, Any], str, Any]] = {}
    pending: list[tuple[dict[str, Any], list[str], Collection[str]]] = [
        (fn.__globals__, list(device_names), runtime_names)
    ]
    walked: set[int] = set()
    while pending:
        namespace, names, skip = pending.pop(0)
        for name in names:
            if name in skip or name not in namespace:
                continue
            value = namespace[name]
            if not isinstance(value, _BAKED_TYPES):
                continue
            found.setdefault((id(namespace), name), (namespace, name, value))
            if (
                isinstance(value, types.FunctionType)
                and value.__module__ == home
                and id(value) not in walked
            ):
                walked.add(id(value))
                pending.append((value.__globals__, referenced_names(value.__code__), ()))
    return tuple(found.values())
