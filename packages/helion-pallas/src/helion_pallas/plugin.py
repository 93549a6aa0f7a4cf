"""Hook implementations of helion-pallas (the entry point `helion.plugins` names this module).

Importing it is cheap: the backend module is imported when the hook is called, and JAX only
when a kernel is checked or compiled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helion.plugins import hookimpl

if TYPE_CHECKING:
    from helion.backends.base import Backend


@hookimpl
def helion_backends() -> list[Backend]:
    from helion_pallas.backend import PallasBackend

    return [PallasBackend()]
