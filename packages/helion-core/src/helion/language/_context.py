"""The active mode that `helion.language` functions hand their work to.

Three modes exist: the host mode (host code of a running kernel: tunables read the active config),
the tracer (device code being turned into IR) and eager mode (HELION_INTERPRET=1). A language
function called with no mode active raises `exc.NotInsideKernel`.
"""

from __future__ import annotations

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

        raise exc.NotInsideKernel(api_name)
    handler = getattr(mode, f"hl_{api_name}", None)
    if handler is None:
        return mode.unsupported(api_name)
    return handler(*args, **kwargs)
