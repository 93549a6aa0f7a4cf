"""`hl.jagged_tile` in eager mode.

Compiled kernels mask the lanes of a jagged tile past each row's end (`tile.index < parent`).
Eager mode has no dimension names to line such a mask up with the values the kernel computes,
so it makes the mask unnecessary instead: every `hl.tile` loop whose body holds an
`hl.jagged_tile` loop steps one index at a time. The parent, whose axes all come from those
enclosing tiles, then holds a single length, and the jagged loop runs exactly to it; loads,
stores and reductions see only valid lanes. (The loops are found in the kernel's source once.)
"""

from __future__ import annotations

import ast
import sys
from typing import Any
from typing import Callable

import torch

from helion import exc

_UNIT_STEP_LINES: dict[Any, tuple[tuple[int, int], ...]] = {}


def _resolves_to(expr: ast.expr, namespace: dict[str, Any], target: Any) -> bool:
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return False
    value = namespace.get(expr.id)
    for name in reversed(parts):
        value = getattr(value, name, None)
    return value is target


def _is_jagged_loop(node: ast.AST, namespace: dict[str, Any]) -> bool:
    import helion.language as hl

    return (
        isinstance(node, ast.For)
        and isinstance(node.iter, ast.Call)
        and _resolves_to(node.iter.func, namespace, hl.jagged_tile)
    )


def unit_step_lines(fn: Callable) -> tuple[tuple[int, int], ...]:
    """Line spans of the loop headers (the `hl.tile(...)` calls) of `fn` whose body holds an
    `hl.jagged_tile` loop."""
    code = getattr(fn, "__code__", None)
    cached = _UNIT_STEP_LINES.get(code)
    if cached is not None:
        return cached
    spans: list[tuple[int, int]] = []
    try:
        from helion.frontend.ast_rewrite import read_source

        func_def = read_source(fn).func_def
    except Exception:
        func_def = None
    if func_def is not None:
        namespace = fn.__globals__
        for node in ast.walk(func_def):
            if not isinstance(node, ast.For):
                continue
            inner = [n for stmt in node.body for n in ast.walk(stmt)]
            if any(_is_jagged_loop(n, namespace) for n in inner):
                spans.append((node.iter.lineno, node.iter.end_lineno or node.iter.lineno))
    result = tuple(spans)
    if code is not None:
        _UNIT_STEP_LINES[code] = result
    return result


def encloses_jagged(fn: Callable) -> bool:
    """Whether the `hl.tile` call running now (called from `fn`'s frame) heads a loop around an
    `hl.jagged_tile` loop."""
    spans = unit_step_lines(fn)
    if not spans:
        return False
    code = fn.__code__
    frame = sys._getframe(1)
    # eager mode runs a copy of the code (`ast_rewrite.eager_code`): same file, name and line
    key = (code.co_filename, code.co_name, code.co_firstlineno)
    while (
        frame is not None
        and (
            frame.f_code.co_filename,
            frame.f_code.co_name,
            frame.f_code.co_firstlineno,
        )
        != key
    ):
        frame = frame.f_back
    if frame is None:
        return False
    line = frame.f_lineno
    return any(first <= line <= last for first, last in spans)


def jagged_end(parent: Any) -> int:
    """The end of a jagged loop in eager mode: the single length in `parent`."""
    if not isinstance(parent, torch.Tensor):
        raise exc.InvalidJaggedTileUsage(
            f"the parent must be an integer tensor, got {type(parent).__name__}"
        )
    if parent.dtype.is_floating_point or parent.dtype == torch.bool:
        raise exc.InvalidJaggedTileUsage(
            f"the parent must hold integers (lengths), got {parent.dtype}"
        )
    if parent.ndim == 0:
        raise exc.InvalidJaggedTileUsage(
            "the parent has rank 0; it needs one axis per enclosing tile (for a single length use hl.tile(0, n))"
        )
    if parent.numel() != 1:
        raise exc.InvalidJaggedTileUsage(
            f"in eager mode the parent must hold one length per jagged loop, got shape {list(parent.shape)}: "
            "its axes must be the tiles of the loops around it (those loops step by one in eager mode)"
        )
    with torch._C.DisableTorchFunction():
        return int(parent.reshape(()).item())
