"""Runtime: Kernel, BoundKernel, Config, Settings."""

from helion.runtime.config import Config as Config
from helion.runtime.settings import Settings as Settings


def __getattr__(name: str):
    if name in ("Kernel", "BoundKernel"):
        from helion.runtime import kernel

        return getattr(kernel, name)
    raise AttributeError(name)
