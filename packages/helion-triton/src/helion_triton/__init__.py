"""helion-triton: the Triton backend of Helion.

The backend is registered through the ``helion.plugins`` entry point, which names
:mod:`helion_triton.plugin`; importing this package imports no toolkit.
"""

from __future__ import annotations

import importlib.metadata

try:
    __version__ = importlib.metadata.version("helion-triton")
except importlib.metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0.0.0+unknown"
