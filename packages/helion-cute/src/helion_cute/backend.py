"""The ``cute`` backend: Kernel IR + Config -> CuTe DSL (CUTLASS Python) kernels."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import TYPE_CHECKING
from typing import Any
from typing import Callable

import torch

from helion import exc
from helion.backends.base import Backend

if TYPE_CHECKING:
    from helion.autotuner.config_spec import ConfigSpec
    from helion.ir import KernelIR
    from helion.runtime.config import Config

# nvidia-cutlass-dsl installs the `cutlass` package (the CuTe DSL lives in `cutlass.cute`)
CUTLASS_MODULE = "cutlass"
CUTLASS_DISTRIBUTION = "nvidia-cutlass-dsl"


def is_installed(module: str) -> bool:
    # find_spec locates the module without importing it: importing cutlass takes seconds
    return importlib.util.find_spec(module) is not None


class CuteBackend(Backend):
    """Generates CuTe DSL kernels: SIMT programs for elementwise, reduction and gather code,
    and warpgroup-MMA (wgmma) + TMA pipelines for Hopper matmuls.

    Compiling (``cute.compile``) works on any machine; launching needs a CUDA device.
    """

    name = "cute"
    distribution = "helion-cute"
    device_types = ("cuda",)
    # wgmma tiles are at least 16 wide in every dot dimension
    min_dot_size = 16
    # a load of a `:` slice of length 0 is a fill, a store of one is dropped
    # (helion.ir.core.addresses_no_element), and a tile loop over an empty dimension is not emitted
    # (helion.ir.core.runs_no_iteration)
    zero_length_slices = True

    def is_available(self) -> tuple[bool, str]:
        if not is_installed(CUTLASS_MODULE):
            return (
                False,
                f"{CUTLASS_DISTRIBUTION} is not installed (pip install {CUTLASS_DISTRIBUTION})",
            )
        return True, ""

    def cache_key(self) -> str:
        from helion_cute.runtime import target_arch

        try:
            dsl_version = importlib.metadata.version(CUTLASS_DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            dsl_version = "unknown"
        return f"{self.name}-{self.version()}-cutlass-dsl-{dsl_version}-{target_arch()}"

    def check(self, ir: KernelIR) -> None:
        """Report every op without a CuTe lowering and every unsupported dtype, with its line."""
        from helion_cute.lowerings import CUTE_LOWERINGS
        from helion_cute.lowerings import unused_index_reductions
        from helion_cute.source import SUPPORTED_DTYPES

        problems: list[tuple[str, Any]] = []
        skipped = unused_index_reductions(ir)  # emitted by torch.max(x, dim), never read
        for arg in ir.tensor_args:
            if arg.dtype not in SUPPORTED_DTYPES:
                problems.append((f"tensors of dtype {arg.dtype} ({arg.name})", None))
        for node in ir.walk():
            if id(node) in skipped:
                continue
            if not node.op.structural and node.op not in CUTE_LOWERINGS:
                problems.append((node.op.user_name, node.loc))
                continue
            for out in node.outputs:
                if hasattr(out.type, "dtype") and out.dtype not in SUPPORTED_DTYPES:
                    problems.append((f"{node.op.name} producing {out.dtype}", node.loc))
        if not problems:
            return
        what, loc = problems[0]
        hint = None
        if len(problems) > 1:
            # a SourceLocation prints as "file:line"
            others = "; ".join(
                f"{w} ({where})" if where is not None else w for w, where in problems[1:]
            )
            hint = f"Also unsupported: {others}. Use backend='ref' or 'triton' for this kernel."
        raise exc.BackendUnsupported(what, self.name, loc=loc, hint=hint)

    def tunables(self, ir: KernelIR, spec: ConfigSpec, device: torch.device) -> None:
        from helion_cute import tunables

        tunables.edit_spec(ir, spec)

    def seed_configs(self, ir: KernelIR, spec: ConfigSpec, device: torch.device) -> list[Config]:
        from helion_cute import tunables

        return tunables.seed_configs(ir, spec)

    def compile(self, ir: KernelIR, config: Config) -> Any:
        from helion_cute.runtime import CuteCompiledKernel

        return CuteCompiledKernel(ir, config)

    def default_launcher(self, kernel: Any, grid: Any, *args: Any, **options: Any) -> Any:
        """``helion.runtime.default_cute_launcher`` (see ``runtime.launch_cute``)."""
        from helion_cute.runtime import launch_cute

        return launch_cute(kernel, grid, *args, **options)

    def benchmark(
        self,
        fn: Callable[[], object],
        *,
        device: torch.device | str,
        repeat: int | None = None,
    ) -> float:
        """Median run time in ms, timed with CUDA events (falls back to the default timer)."""
        device = torch.device(device)
        if device.type != "cuda":
            return super().benchmark(fn, device=device, repeat=repeat)
        fn()
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize(device)
        once = max(start.elapsed_time(end), 1e-3)
        if repeat is None:
            repeat = max(5, min(100, int(50.0 / once)))
        times = []
        for _ in range(repeat):
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        times.sort()
        return times[len(times) // 2]
