"""Hook implementations of helion-triton (found through the ``helion.plugins`` entry point).

Only hookimpls live here; importing this module imports no toolkit, so plugin discovery stays
cheap and a missing or broken Triton is reported by ``TritonBackend.is_available``.
"""

from __future__ import annotations

from helion.backends.base import Backend
from helion.plugins import hookimpl
from helion_triton.backend import TritonBackend


@hookimpl
def helion_backends() -> list[Backend]:
    return [TritonBackend()]
