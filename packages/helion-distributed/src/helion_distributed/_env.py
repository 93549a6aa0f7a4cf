"""Process-wide knobs of helion-distributed (read when used, so tests and launchers can set them)."""

from __future__ import annotations

import os

TIMEOUT_ENV = "HELION_DIST_TIMEOUT"
DEFAULT_TIMEOUT_S = 60.0

_timeout_override: float | None = None


def timeout_s() -> float:
    """Seconds a rank waits for its peers (signal pads, barriers, tile collectives) before it
    raises ``DistributedTimeout``: ``set_timeout()``, else ``HELION_DIST_TIMEOUT``, else 60."""
    if _timeout_override is not None:
        return _timeout_override
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"{TIMEOUT_ENV} must be positive, got {text!r}")
    return value


def set_timeout(seconds: float | None) -> None:
    """Override the distributed timeout for this process (``None`` goes back to the environment)."""
    global _timeout_override
    if seconds is not None and seconds <= 0:
        raise ValueError(f"the distributed timeout must be positive, got {seconds}")
    _timeout_override = None if seconds is None else float(seconds)
