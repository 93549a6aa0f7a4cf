"""helion-cute: the CuTe DSL (CUTLASS Python) backend of Helion.

The backend is registered through the ``helion.plugins`` entry point, which names
:mod:`helion_cute.plugin`; importing this package imports no toolkit (the DSL is imported at the
first compile).
"""

from __future__ import annotations

import importlib.metadata

try:
    __version__ = importlib.metadata.version("helion-cute")
except importlib.metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0.0.0+unknown"
