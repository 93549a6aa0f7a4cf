"""Hook implementations of helion-cute (the module named by its ``helion.plugins`` entry point)."""

from __future__ import annotations

from helion.backends.base import Backend
from helion.plugins import hookimpl
from helion_cute.backend import CuteBackend


@hookimpl
def helion_backends() -> list[Backend]:
    return [CuteBackend()]
