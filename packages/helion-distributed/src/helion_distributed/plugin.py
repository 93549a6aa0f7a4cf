"""Hook implementations of helion-distributed.

helion-distributed provides language ops (``hl.signal``, ``hl.wait``, ``hl.all_reduce``, ...)
and their lowerings, not a backend. Until those ops land, it registers an empty op list, so the
plugin machinery is exercised end to end and ``helion plugins`` lists it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helion.plugins import hookimpl

if TYPE_CHECKING:
    from helion.language._ops import Op


@hookimpl
def helion_language_ops() -> list[Op]:
    return []
