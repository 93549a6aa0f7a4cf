"""helion-distributed: distributed Helion kernels (symmetric memory, signal pads, collectives).

Its language ops are registered through the ``helion.plugins`` entry point, which names
:mod:`helion_distributed.plugin`.
"""

from __future__ import annotations

import importlib.metadata

try:
    __version__ = importlib.metadata.version("helion-distributed")
except importlib.metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0.0.0+unknown"
