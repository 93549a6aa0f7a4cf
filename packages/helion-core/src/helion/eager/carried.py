"""Loop-carried values in eager mode: the check compiled kernels make when they trace a loop.

A compiled device loop is traced once, with the types its carried values (names the body assigns
that were bound before the loop) have on entry; a body that changes one to a wider dtype or
another shape is refused (`helion.exc.LoopCarriedTypeChange`), where Python would let it change.
Eager mode runs the kernel's own Python, so `EagerMode._loop` snapshots the carried values of a
nested `hl.tile` / `hl.grid` loop from the frame running it, and compares after each iteration.
"""

from __future__ import annotations

import ast
import linecache
import types
from typing import Any

import torch

from helion import exc

# (filename, line of the `for`) -> the names its body assigns, less its targets; None when the
# source cannot be read (then nothing is checked)
_CARRIED: dict[tuple[str, int], tuple[str, ...] | None] = {}


def _assigned(nodes: list[ast.stmt]) -> list[str]:
    from helion.frontend.ast_rewrite import assigned_names

    return assigned_names(nodes)


def _bound(stmt: ast.stmt, defined: set[str]) -> list[str]:
    from helion.frontend.ast_rewrite import scope_bound_names

    return scope_bound_names([stmt], defined)


def _carried(loop: ast.For, defined: set[str]) -> list[str]:
    """What `ast_rewrite.DeviceRewriter` carries through `loop`: the names its body assigns that
    were bound before it (lexically, in the kernel's order), less its targets."""
    targets = set(_assigned([loop.target]))  # type: ignore[list-item]
    return [n for n in _assigned(loop.body) if n in defined and n not in targets]


def _find(body: list[ast.stmt], loop: ast.For, defined: set[str]) -> list[str] | None:
    for stmt in body:
        if stmt is loop:
            return _carried(loop, defined)
        if any(node is loop for node in ast.walk(stmt)):
            if isinstance(stmt, ast.For):
                inner = defined | set(_assigned([stmt.target])) | set(_carried(stmt, defined))  # type: ignore[list-item]
                return _find(stmt.body, loop, inner)
            for field in ("body", "orelse", "finalbody", "handlers"):
                block = getattr(stmt, field, None)
                if isinstance(block, list):
                    statements = [s for s in block if isinstance(s, ast.stmt)]
                    found = _find(statements, loop, set(defined))
                    if found is not None:
                        return found
            return None
        defined = defined | set(_bound(stmt, defined))
    return None


def carried_names(code: types.CodeType, lineno: int) -> tuple[str, ...] | None:
    key = (code.co_filename, lineno)
    if key in _CARRIED:
        return _CARRIED[key]
    names: tuple[str, ...] | None = None
    try:
        tree = ast.parse("".join(linecache.getlines(code.co_filename)))
    except (SyntaxError, ValueError):
        tree = None
    if tree is not None:
        functions = [
            node
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.lineno <= lineno <= (node.end_lineno or node.lineno)
        ]
        # the innermost function holding the line, and the loop whose header is on it
        function = max(functions, key=lambda f: f.lineno, default=None)
        loop = None
        if function is not None:
            loop = next(
                (
                    node
                    for node in ast.walk(function)
                    if isinstance(node, ast.For)
                    and node.lineno <= lineno <= (node.iter.end_lineno or node.lineno)
                ),
                None,
            )
        if function is not None and loop is not None:
            args = function.args
            params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
            found = _find(function.body, loop, params)
            names = None if found is None else tuple(found)
    _CARRIED[key] = names
    return names


def _type_of(value: Any) -> tuple[torch.dtype, tuple[int, ...]] | None:
    """A carried value's dtype and shape as a compiled kernel types it (Python numbers are 0-D
    values: bool, int64, float32); None for values a loop cannot carry."""
    if isinstance(value, torch.Tensor):
        return value.dtype, tuple(value.shape)
    if isinstance(value, bool):
        return torch.bool, ()
    if isinstance(value, int):
        return torch.int64, ()
    if isinstance(value, float):
        return torch.float32, ()
    return None


class CarriedCheck:
    """The types of the carried values of one running loop, taken when it starts."""

    def __init__(self, frame: types.FrameType) -> None:
        self.frame = frame
        self.lineno = frame.f_lineno
        names = carried_names(frame.f_code, self.lineno) or ()
        local_values = frame.f_locals if names else {}
        self.initial: dict[str, tuple[torch.dtype, tuple[int, ...]]] = {}
        for name in names:
            if name in local_values:
                found = _type_of(local_values[name])
                if found is not None:
                    self.initial[name] = found

    def check(self) -> None:
        """After an iteration: a carried value whose dtype widened, or whose shape does not
        broadcast to its initial one, is refused as a compiled kernel refuses it."""
        if not self.initial:
            return
        local_values = self.frame.f_locals
        for name, (dtype, shape) in self.initial.items():
            if name not in local_values:
                continue
            found = _type_of(local_values[name])
            if found is None:
                continue
            new_dtype, new_shape = found
            widens = torch.promote_types(dtype, new_dtype) != dtype
            try:
                fits = tuple(torch.broadcast_shapes(new_shape, shape)) == shape
            except RuntimeError:
                fits = False
            if widens or not fits:
                loc = exc.SourceLocation(self.frame.f_code.co_filename, self.lineno)
                raise exc.LoopCarriedTypeChange(
                    f"{name!r}",
                    f"{str(dtype).removeprefix('torch.')}{list(shape)}",
                    f"{str(new_dtype).removeprefix('torch.')}{list(new_shape)}",
                    loc=loc,
                )
