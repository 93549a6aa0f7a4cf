"""The active mode that `helion.language` functions hand their work to.

Three modes exist: the host mode (host code of a running kernel: tunables read the active config),
the tracer (device code being turned into IR) and eager mode (HELION_INTERPRET=1). A language
function called with no mode active raises `exc.NotInsideKernel`.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any
from typing import Iterator

_state = threading.local()


def current_mode() -> Any:
    return getattr(_state, "mode", None)


@contextmanager
def active_mode(mode: Any) -> Iterator[Any]:
    previous = getattr(_state, "mode", None)
    _state.mode = mode
    try:
        yield mode
    finally:
        _state.mode = previous


def dispatch(api_name: str, *args: Any, **kwargs: Any) -> Any:
    """Call `mode.hl_<api_name>(*args, **kwargs)` on the active mode."""
    mode = getattr(_state, "mode", None)
    if mode is None:
        from helion import exc

        raise exc.NotInsideKernel(f"hl.{api_name}")
    handler = getattr(mode, f"hl_{api_name}", None)
    try:
        if handler is None:
            return mode.unsupported(api_name)
        return handler(*args, **kwargs)
    except Exception as error:
        _add_host_line(mode, error)
        raise


def dispatch_as(public_name: str, api_name: str, *args: Any, **kwargs: Any) -> Any:
    """`dispatch(api_name, ...)` for the language function `hl.<public_name>`, which a mode
    implements as `hl_<api_name>` (`hl.zeros` is `full`, `hl.atomic_add` is `atomic`): errors
    saying where the op may be used name the function the user called."""
    from helion import exc

    mode = getattr(_state, "mode", None)
    if mode is None:
        raise exc.NotInsideKernel(f"hl.{public_name}")
    if getattr(mode, f"hl_{api_name}", None) is None:
        return dispatch(public_name)  # the mode's refusal, naming hl.<public_name>
    try:
        return dispatch(api_name, *args, **kwargs)
    except exc.DeviceAPIOnHost as error:
        if error.template_args[:1] != (f"hl.{api_name}",):
            raise
        raise exc.DeviceAPIOnHost(
            f"hl.{public_name}", loc=error.loc, hint=error._hint_override
        ).with_traceback(error.__traceback__) from None


def _add_host_line(mode: Any, error: BaseException) -> None:
    """Give a helion error raised by a language function called from a compiled kernel's host
    code (`hl.zeros` there, `hl.tile` outside a `for`) the kernel line it was called from.
    Device code (the tracer) and eager mode attach their lines themselves."""
    from helion import exc

    if not isinstance(error, exc.BaseError) or error.loc is not None:
        return
    # the host mode of a bound kernel: its split kernel holds the source the host code runs
    source = getattr(getattr(getattr(mode, "bound", None), "split", None), "source", None)
    if source is None:
        return
    from helion.frontend.ast_rewrite import KernelSource
    from helion.frontend.ast_rewrite import source_location

    if not isinstance(source, KernelSource):
        return
    first, last = source.first_lineno, source.first_lineno + len(source.lines)
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_filename == source.filename and first <= frame.f_lineno < last:
            positions = list(code.co_positions())
            index = frame.f_lasti // 2
            line, col, end_col = frame.f_lineno, None, None
            if 0 <= index < len(positions):
                line, _, col, end_col = positions[index]
            error.with_location(source_location(source, line or frame.f_lineno, col, end_col))
            return
        frame = frame.f_back
