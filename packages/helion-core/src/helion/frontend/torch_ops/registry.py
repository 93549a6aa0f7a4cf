"""The torch table itself: torch callables mapped to handlers, and how a call is checked.

A handler's signature lists exactly the arguments it handles: a call with any other argument
(`out=`, an unknown keyword, one positional too many) is refused with an `UnsupportedTorchOp`
naming the argument, the op and the kernel's line, and so is a handled argument with a value
device code cannot honour (`inplace=True`). No argument is ever dropped silently. A TypeError
that torch (or Python) raises while a handler runs comes out as a `TorchOpTracingError` naming
the op, with the kernel's line and torch's message.
"""

from __future__ import annotations

import contextvars
import inspect
import operator
import re
from typing import Any
from typing import Callable

import torch
import torch.nn.functional as F

from helion import exc
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import TileProxy

Handler = Callable[..., Any]
_TABLE: dict[Any, Handler] = {}
# the signature each table entry handles (for the hint of an error)
_SIGNATURES: dict[Any, inspect.Signature] = {}
# whether a table op is running: the ops its decomposition calls leave a TypeError to it, so that
# the error names the op the kernel called
_IN_TABLE_OP: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "helion_in_torch_table_op", default=False
)


def lookup(func: Any) -> Handler | None:
    try:
        return _TABLE.get(func)
    except TypeError:
        return None


def register(*funcs: Any) -> Callable[[Handler], Handler]:
    """Register `handler` for each torch callable in `funcs` (None entries are skipped).

    The table holds the handler behind a check of the call's arguments against the handler's
    signature; the decorator returns the handler itself, for direct calls from other handlers.
    """

    def decorator(handler: Handler) -> Handler:
        signature = inspect.signature(handler)
        for func in funcs:
            if func is None:
                continue
            if func in _TABLE:
                raise ValueError(f"{func} registered twice in the torch table")
            _TABLE[func] = _checked(func, handler, signature)
            _SIGNATURES[func] = signature
        return handler

    return decorator


def _checked(func: Any, handler: Handler, signature: inspect.Signature) -> Handler:
    def checked(tracer: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            signature.bind(tracer, *args, **kwargs)
        except TypeError as error:
            raise _binding_error(tracer, func, signature, args, kwargs, error) from None
        if _IN_TABLE_OP.get():
            return handler(tracer, *args, **kwargs)
        token = _IN_TABLE_OP.set(True)
        try:
            return handler(tracer, *args, **kwargs)
        except TypeError as error:
            if isinstance(error, exc.Base):
                raise
            raise _traced_type_error(func, error, tracer.current_loc()) from error
        finally:
            _IN_TABLE_OP.reset(token)

    return checked


def _traced_type_error(
    func: Any, error: TypeError, loc: exc.SourceLocation | None
) -> exc.TorchOpTracingError:
    name = torch_name(func)
    signature = _SIGNATURES.get(func)
    hint = None
    if signature is not None:
        parameters = list(signature.parameters.values())[1:]  # the first one is the tracer
        hint = f"Helion handles {name}{_handled(parameters)} in device code."
        if any(p.name == "size" for p in parameters):
            hint += " Sizes that are tiles go in one list: [tile_m, tile_n]."
    return exc.TorchOpTracingError(
        f"{name} raised TypeError while it was traced: {error}", loc=loc, hint=hint
    )


def type_error_at_call(tracer: Any, error: TypeError) -> exc.TorchOpTracingError | None:
    """The helion error for a TypeError that torch's argument parser (or Python's call of a
    function of torch.nn.functional) raised at a call of a table op in the kernel's source, such
    as `torch.ones(tile_m, tile_n)`: no handler ran, so the tracer asks here. None when the error
    was not raised by a call of a table op on a kernel line."""
    tb = error.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    first, last = tracer.source_lines
    if frame.f_code.co_filename != tracer.ir.filename or not first <= tb.tb_lineno <= last:
        return None  # raised deeper than the kernel's own line
    positions = list(frame.f_code.co_positions())
    index = tb.tb_lasti // 2
    line, col, end_col = tb.tb_lineno, None, None
    if 0 <= index < len(positions):
        start, _, col, end_col = positions[index]
        line = start or line
    loc = tracer.location_fn(line, col, end_col)
    func = _callee(frame, loc)
    if func is None or lookup(func) is None:
        return None
    return _traced_type_error(func, error, loc)


_DOTTED_CALL = re.compile(r"\s*([A-Za-z_][A-Za-z_0-9]*(?:\s*\.\s*[A-Za-z_][A-Za-z_0-9]*)*)\s*\(")


def _callee(frame: Any, loc: exc.SourceLocation) -> Any:
    """The function a call expression `a.b.c(...)` at `loc` names in `frame`, found by name only
    (nothing in the kernel is evaluated)."""
    text = loc.line()
    if text is None:
        return None
    match = _DOTTED_CALL.match(text, loc.col_offset)
    if match is None:
        return None
    head, *attributes = (part.strip() for part in match.group(1).split("."))
    scopes = (frame.f_locals, frame.f_globals, frame.f_builtins)
    value = next((scope[head] for scope in scopes if head in scope), None)
    for attribute in attributes:
        if value is None or isinstance(value, (DeviceValue, TileProxy)):
            return None  # a method of a proxy: it reached the table (or its own error)
        value = getattr(value, attribute, None)
    return value


_NAMESPACES = (
    ("torch.Tensor", torch.Tensor),
    ("torch.nn.functional", F),
    ("torch.linalg", torch.linalg),
    ("torch", torch),
    ("operator", operator),
)


def torch_name(func: Any) -> str:
    """The name a user writes for `func`: `torch.round`, `torch.Tensor.round`, ..."""
    name = getattr(func, "__name__", None)
    if name is not None:
        for prefix, namespace in _NAMESPACES:
            if getattr(namespace, name, None) is func:
                return f"{prefix}.{name}"
    for prefix, namespace in _NAMESPACES:  # an alias (torch.linalg.vector_norm, ...)
        for attribute, value in vars(namespace).items():
            if value is func:
                return f"{prefix}.{attribute}"
    return name or repr(func)


def tensor_methods(*names: str) -> list[Any]:
    """The methods of torch.Tensor with these names (each once; a missing one is left out)."""
    found: list[Any] = []
    for name in names:
        method = getattr(torch.Tensor, name, None)
        if method is not None and method not in found:
            found.append(method)
    return found


# -- refusals ------------------------------------------------------------------------------------


def unsupported_argument(
    tracer: Any, op: str, argument: str, reason: str | None = None
) -> exc.UnsupportedTorchOp:
    """The error for an argument of `op` that device code does not handle."""
    return exc.UnsupportedTorchOp(
        f"{op} with the argument `{argument}`",
        loc=tracer.current_loc(),
        hint=reason
        or f"Helion does not handle `{argument}` of {op} in device code: leave it out, or "
        "compute this on the host.",
    )


def _binding_error(
    tracer: Any,
    func: Any,
    signature: inspect.Signature,
    args: tuple,
    kwargs: dict,
    error: TypeError,
) -> exc.UnsupportedTorchOp:
    name = torch_name(func)
    parameters = list(signature.parameters.values())[1:]  # the first one is the tracer
    kinds = {p.kind for p in parameters}
    if inspect.Parameter.VAR_KEYWORD not in kinds:
        keywords = {
            p.name
            for p in parameters
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        }
        for key in kwargs:
            if key not in keywords:
                return unsupported_argument(tracer, name, key)
    if inspect.Parameter.VAR_POSITIONAL not in kinds:
        positional = [
            p
            for p in parameters
            if p.kind
            in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        ]
        if len(args) > len(positional):
            extra = args[len(positional)]
            return unsupported_argument(
                tracer, name, f"positional argument {len(positional) + 1} ({describe(extra)})"
            )
    return exc.UnsupportedTorchOp(
        f"{name} called with these arguments",
        loc=tracer.current_loc(),
        hint=f"Helion handles {name}{_handled(parameters)} in device code ({error}).",
    )


def describe(value: Any) -> str:
    """A short text for an argument in an error: its repr, or its type when that is long."""
    if isinstance(value, (DeviceValue, TileProxy, torch.Tensor)):
        return "a tensor"
    text = repr(value)
    return text if len(text) <= 40 else type(value).__name__


def _handled(parameters: list[inspect.Parameter]) -> str:
    shown = [p.replace(annotation=inspect.Parameter.empty) for p in parameters]
    return str(inspect.Signature(shown))


def refuse_out(tracer: Any, op: str, out: Any) -> None:
    if out is not None:
        raise unsupported_argument(
            tracer,
            op,
            "out",
            f"device code cannot write into a given tensor: assign the result of {op} instead.",
        )


def refuse_inplace(tracer: Any, op: str, inplace: Any) -> None:
    if inplace:
        raise unsupported_argument(
            tracer,
            op,
            "inplace",
            "device values are never updated in place: drop inplace=True and assign the result "
            "instead.",
        )
