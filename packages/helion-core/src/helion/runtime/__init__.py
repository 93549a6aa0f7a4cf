"""Runtime: Kernel, BoundKernel, Config, Settings, OutputCodeOptions, and device queries for
host code (`get_num_sm`, `get_num_xcd`)."""

from helion.runtime.config import Config as Config
from helion.runtime.hardware import get_num_sm as get_num_sm
from helion.runtime.hardware import get_num_xcd as get_num_xcd
from helion.runtime.output_code import OutputCodeOptions as OutputCodeOptions
from helion.runtime.settings import Settings as Settings


def __getattr__(name: str):
    if name in ("Kernel", "BoundKernel"):
        from helion.runtime import kernel

        return getattr(kernel, name)
    raise AttributeError(name)
