"""What the tests that run CPU rank processes share: the backends they run on (Triton where it
is installed) and the environment of their ranks."""

from __future__ import annotations

import importlib.util

HAS_TRITON = (
    importlib.util.find_spec("helion_triton") is not None
    and importlib.util.find_spec("triton") is not None
)
BACKENDS = ["ref", "triton"] if HAS_TRITON else ["ref"]
QUIET = {"PYTHONWARNINGS": "ignore", "HELION_DIST_TIMEOUT": "30"}
