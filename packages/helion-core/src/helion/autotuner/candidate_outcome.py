"""What becomes of a candidate: its :class:`CandidateResult` and status, the in-process
watchdog (:func:`call_with_timeout`) and how the errors it raises are classified."""

from __future__ import annotations

import ctypes
import math
import threading
from dataclasses import dataclass
from typing import Any
from typing import Callable

#: statuses a candidate can end in; every one but "ok" means it cannot win
STATUSES = ("ok", "compile_error", "error", "oom", "crash", "timeout", "inaccurate", "skipped")
#: failures worth a warning (the others -- compile errors, OOM of huge tiles -- are normal in a search)
SURPRISING_STATUSES = frozenset({"error", "crash", "timeout", "inaccurate"})


@dataclass
class CandidateResult:
    config: Any
    status: str
    time_ms: float = math.inf
    reason: str = ""
    compile_seconds: float | None = None
    #: killed unfinished because the time budget ran out ("skipped"): maybe a hang, maybe only
    #: slow; it was not measured, so it neither counts as a failure nor can win
    stopped: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# ================================================================================ watchdog
class CandidateTimeout(Exception):
    """Raised into a thread whose candidate ran past its time limit."""


def has_time_limit(seconds: float | None) -> bool:
    """Whether ``seconds`` is a limit a watchdog can wait for: a positive number below
    ``threading.TIMEOUT_MAX`` (longer waits overflow the platform's timestamps)."""
    if seconds is None:
        return False
    try:
        value = float(seconds)
    except (TypeError, ValueError, OverflowError):
        return False
    return 0 < value < threading.TIMEOUT_MAX


def call_with_timeout(fn: Callable[[], Any], seconds: float | None) -> Any:
    """Run ``fn`` in this thread; past ``seconds`` a watchdog raises :class:`CandidateTimeout` in it.

    The exception is delivered at the next Python bytecode, so a Python-level hang is ended; a
    hang inside one C call (a spinning GPU kernel) ends when the call returns and is then still
    reported as a timeout.  Process isolation is what truly contains those.

    ``seconds`` of ``None``, 0 or less, NaN, or ``threading.TIMEOUT_MAX`` and more (292 years:
    ``HELION_AUTOTUNE_COMPILE_TIMEOUT=99999999999``, or ``math.inf``) sets no limit: a
    ``threading.Timer`` that long dies at once with an ``OverflowError`` in its own thread,
    which printed a raw traceback and left the call without a watchdog anyway.
    """
    if not has_time_limit(seconds):
        return fn()
    assert seconds is not None
    thread_id = threading.get_ident()
    lock = threading.Lock()
    state = {"done": False, "fired": False}

    def fire() -> None:
        with lock:
            if state["done"]:
                return
            state["fired"] = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread_id), ctypes.py_object(CandidateTimeout)
            )

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        try:
            result = fn()
        finally:
            with lock:
                state["done"] = True
                if state["fired"]:
                    # the call finished on its own after the watchdog fired: drop the pending exception
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)
            timer.cancel()
    except CandidateTimeout:
        raise CandidateTimeout(f"did not finish within {seconds:g}s") from None
    if state["fired"]:
        raise CandidateTimeout(f"did not finish within {seconds:g}s")
    return result


# ================================================================================ errors
def _describe(error: BaseException) -> str:
    cause = error.__cause__
    if cause is not None and getattr(error, "leads_with_source", False):
        # its text opens with the generated program, so a short reason would show only that
        return f"{type(error).__name__}: {_describe(cause)}"
    # whitespace collapsed: compiler errors often start with a bare header line
    text = " ".join(str(error).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def classify_error(error: BaseException, phase: str) -> tuple[str, str]:
    """(status, reason) of an exception raised while compiling (``phase='compile'``) or running."""
    name = type(error).__name__
    text = str(error)
    if (
        isinstance(error, MemoryError)
        or name == "OutOfMemoryError"
        or "out of memory" in text.lower()
    ):
        return (
            "oom",
            f"out of memory while {'compiling' if phase == 'compile' else 'running'}: {_describe(error)}",
        )
    if isinstance(error, CandidateTimeout):
        what = "compile" if phase == "compile" else "run"
        return "timeout", f"{what} {text or 'timed out'}"
    if phase == "compile":
        return "compile_error", _describe(error)
    return "error", _describe(error)
