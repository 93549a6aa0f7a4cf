"""helion-pallas: the JAX Pallas backend of Helion.

The backend is registered through the ``helion.plugins`` entry point, which names
:mod:`helion_pallas.plugin`; importing this package imports no toolkit (JAX is imported when a
kernel is checked or compiled).
"""

from __future__ import annotations

import importlib.metadata

try:
    __version__ = importlib.metadata.version("helion-pallas")
except importlib.metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0.0.0+unknown"
