"""Hook implementations of helion-pallas.

The Pallas backend is registered so that ``helion backends`` lists it, but it does not generate
code yet: it reports itself unavailable, and compiling with it raises
``helion.exc.BackendUnsupported``.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING
from typing import NoReturn

from helion import exc
from helion.backends.base import Backend
from helion.plugins import hookimpl

if TYPE_CHECKING:
    from helion.backends.base import CompiledKernel
    from helion.ir import KernelIR
    from helion.runtime.config import Config


class PallasBackend(Backend):
    """JAX Pallas backend (placeholder until its code generator lands)."""

    name = "pallas"
    distribution = "helion-pallas"
    # Pallas runs on GPU and TPU, and on CPU in interpret mode.
    device_types = ("cpu", "cuda", "tpu")

    def is_available(self) -> tuple[bool, str]:
        missing = [module for module in ("jax", "jaxlib") if not _is_installed(module)]
        reasons = []
        if missing:
            reasons.append(f"{' and '.join(missing)} not installed (pip install jax jaxlib)")
        reasons.append(f"{self.distribution} {self.version()}: code generation not implemented yet")
        return False, "; ".join(reasons)

    def check(self, ir: KernelIR) -> None:
        _refuse(self)

    def compile(self, ir: KernelIR, config: Config) -> CompiledKernel:
        _refuse(self)


def _is_installed(module: str) -> bool:
    # find_spec locates the module without importing it: importing jax takes seconds.
    return importlib.util.find_spec(module) is not None


def _refuse(backend: Backend) -> NoReturn:
    raise exc.BackendUnsupported(
        "code generation",
        backend.name,
        hint=f"{backend.distribution} {backend.version()} does not generate code yet; "
        "use backend='ref' or another installed backend (see `helion backends`).",
    )


@hookimpl
def helion_backends() -> list[Backend]:
    return [PallasBackend()]
