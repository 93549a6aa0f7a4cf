"""Hook implementations of helion-cute.

The CuTe DSL backend is registered so that ``helion backends`` lists it, but it does not
generate code yet: it reports itself unavailable, and compiling with it raises
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

# nvidia-cutlass-dsl installs the `cutlass` package (CuTe DSL lives in `cutlass.cute`).
_CUTLASS_MODULE = "cutlass"


class CuteBackend(Backend):
    """CuTe DSL backend (placeholder until its code generator lands)."""

    name = "cute"
    distribution = "helion-cute"
    device_types = ("cuda",)

    def is_available(self) -> tuple[bool, str]:
        reasons = []
        if not _is_installed(_CUTLASS_MODULE):
            reasons.append("nvidia-cutlass-dsl is not installed (pip install nvidia-cutlass-dsl)")
        reasons.append(f"{self.distribution} {self.version()}: code generation not implemented yet")
        return False, "; ".join(reasons)

    def check(self, ir: KernelIR) -> None:
        _refuse(self)

    def compile(self, ir: KernelIR, config: Config) -> CompiledKernel:
        _refuse(self)


def _is_installed(module: str) -> bool:
    # find_spec locates the module without importing it: importing cutlass is slow.
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
    return [CuteBackend()]
