"""The `pallas` backend: Kernel IR -> JAX Pallas (`pl.pallas_call`), on CPU, NVIDIA GPUs and TPUs.

* CPU tensors (or `HELION_PALLAS_INTERPRET=1`): `interpret=True`, run by XLA on the host.
* CUDA tensors: Pallas' Triton lowering (`plgpu.CompilerParams(num_warps=, num_stages=)`).
* TPU (torch/XLA tensors): Mosaic TPU compiler params are emitted; untested.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import TYPE_CHECKING
from typing import Any

import torch

import helion.language._ops as ops
from helion import exc
from helion.backends.base import Backend

if TYPE_CHECKING:
    from helion.autotuner.config_spec import ConfigSpec
    from helion.backends.base import ExportedModule
    from helion.ir import KernelIR
    from helion.runtime.config import Config
    from helion_pallas.launcher import PallasCompiledKernel


class PallasBackend(Backend):
    """Generates one `pl.pallas_call` per top-level device loop."""

    name = "pallas"
    distribution = "helion-pallas"
    device_types = ("cpu", "cuda", "xla")
    # Pallas' Triton lowering needs dot operands of at least 16 x 16
    min_dot_size = 16
    # JAX runs threads from import on: a forked screening child deadlocked (quick tuning of a
    # 37 x 100 row reduction: two valid configs timed out at 60 s, the search took 65 s)
    fork_safe = False
    # an access with a slice of length 0 touches no memory: a load gives zeros, a store nothing
    zero_length_slices = True

    def is_available(self) -> tuple[bool, str]:
        missing = [
            module for module in ("jax", "jaxlib") if importlib.util.find_spec(module) is None
        ]
        if missing:
            return False, f"{' and '.join(missing)} not installed (pip install jax jaxlib)"
        return True, ""

    def cache_key(self) -> str:
        versions = []
        for distribution in ("jax", "jaxlib"):
            try:
                versions.append(f"{distribution}{importlib.metadata.version(distribution)}")
            except importlib.metadata.PackageNotFoundError:
                versions.append(f"{distribution}?")
        return f"{self.name}-{self.version()}-{'-'.join(versions)}"

    # -- checking -----------------------------------------------------------------------------

    def check(self, ir: KernelIR) -> None:
        """Report every construct this backend cannot compile, with its source line."""
        from helion_pallas.lowerings import lowering_table
        from helion_pallas.lowerings import reshape_supported
        from helion_pallas.memory import check_memory
        from helion_pallas.tunables import device_target
        from helion_pallas.tunables import interpret_setting
        from helion_pallas.writer import is_supported_dtype

        table = lowering_table()
        target = device_target(_device_of(ir), interpret_setting(getattr(ir, "settings", None)))
        problems: list[tuple[str, Any, str | None]] = []
        for tensor in ir.tensor_args:
            if not is_supported_dtype(tensor.dtype):
                problems.append((f"tensor {tensor.name} of dtype {tensor.dtype}", None, None))
        for node in ir.body.nodes:
            if node.op is not ops.grid_loop and node.op.side_effects:
                problems.append((f"{node.op.name} outside the device loops", node.loc, None))
            if node.op is ops.grid_loop:
                bounds = list(node.attrs["begins"]) + list(node.attrs["ends"])
                if not all(isinstance(bound, int) for bound in bounds):
                    problems.append(
                        (
                            "a top-level loop whose bounds are only known at run time",
                            node.loc,
                            "A Pallas grid is static: bound the top-level loop by a tensor size (or an "
                            "hl.constexpr), and skip the extra tiles inside the loop.",
                        )
                    )
        for node in ir.walk():
            if node.op.structural:
                continue
            if node.op not in table:
                problems.append((node.op.user_name, node.loc, None))
                continue
            if node.op is ops.view_reshape and not reshape_supported(
                node.inputs[0].shape, node.attrs["shape"]
            ):
                problems.append(
                    (
                        f"reshape {list(node.inputs[0].shape)} -> {list(node.attrs['shape'])}",
                        node.loc,
                        "Tiles are held padded to powers of two, so a reshape may add or drop "
                        "size-1 dims, and merge or split a run of dims whose only padded dim is "
                        "its first ([bk, 2, n] -> [2 * bk, n], not [2, bk] -> [2 * bk]).",
                    )
                )
            forward_cumsum = node.op is ops.SCANS["cumsum"] and not node.attrs.get("reverse")
            if node.op.scan and target == "gpu" and not forward_cumsum:
                kind = ("reverse " if node.attrs.get("reverse") else "") + node.op.name
                problems.append(
                    (
                        f"{kind} on GPU (the Triton lowering has forward cumsum only)",
                        node.loc,
                        None,
                    )
                )
            if node.op.memory:
                reason = check_memory(node, target)
                if reason is not None:
                    problems.append((reason, node.loc, None))
            for value in node.outputs:
                if not is_supported_dtype(value.dtype):
                    problems.append((f"{node.op.name} producing {value.dtype}", node.loc, None))
        if problems:
            what, loc, hint = problems[0]
            if len(problems) > 1:
                others = "; ".join(
                    f"{what_else}{_line(where)}" for what_else, where, _ in problems[1:6]
                )
                more = f" (and {len(problems) - 6} more)" if len(problems) > 6 else ""
                hint = f"{hint + ' ' if hint else ''}Also unsupported: {others}{more}."
            raise exc.BackendUnsupported(what, self.name, loc=loc, hint=hint)

    # -- tunables -----------------------------------------------------------------------------

    def tunables(self, ir: KernelIR, spec: ConfigSpec, device: torch.device) -> None:
        """Keep the core tunables Pallas honours; on GPU, batched dots get batch tiles of 1."""
        from helion_pallas.tunables import GPU_ONLY_FIELDS
        from helion_pallas.tunables import HONOURED_FIELDS
        from helion_pallas.tunables import NOT_ON_GPU_FIELDS
        from helion_pallas.tunables import device_target
        from helion_pallas.tunables import interpret_setting

        target = device_target(device, interpret_setting(getattr(ir, "settings", None)))
        keep = set(HONOURED_FIELDS)
        keep -= set(NOT_ON_GPU_FIELDS) if target == "gpu" else set(GPU_ONLY_FIELDS)
        for name in list(spec.fields):
            if name not in keep and name not in spec.user_tunables:
                spec.remove(name)
        if target == "gpu":
            _restrict_batch_tiles(ir, spec)

    # -- compiling ----------------------------------------------------------------------------

    def compile(self, ir: KernelIR, config: Config) -> PallasCompiledKernel:
        from helion_pallas.codegen import generate_source
        from helion_pallas.launcher import PallasCompiledKernel
        from helion_pallas.tunables import PallasOptions
        from helion_pallas.tunables import device_target
        from helion_pallas.tunables import interpret_setting

        settings = getattr(ir, "settings", None)
        target = device_target(_device_of(ir), interpret_setting(settings))
        options = PallasOptions.parse(config, target, settings)
        source, entry, written = generate_source(ir, options)
        header = f"# {config!r}\n"
        return PallasCompiledKernel(ir, options, header + source, entry, written)

    def default_launcher(self, kernel: Any, grid: Any, *args: Any, **options: Any) -> None:
        """``helion.runtime.default_pallas_launcher`` (see ``launcher.launch_pallas``)."""
        from helion_pallas.launcher import launch_pallas

        launch_pallas(kernel, grid, *args, **options)

    # -- the generated code as others see it -------------------------------------------------------

    def export_module(
        self, compiled: Any, ir: KernelIR, config: Config, *, jax_fn: bool = False
    ) -> ExportedModule:
        """The generated module without helion imports; with ``jax_fn``, of JAX alone (see
        ``helion_pallas.export``)."""
        from helion_pallas.export import export_module

        return export_module(compiled, jax_fn=jax_fn)


def _device_of(ir: KernelIR) -> torch.device:
    for tensor in ir.tensor_args:
        return tensor.device
    return torch.device("cpu")


def _line(loc: Any) -> str:
    return f" (line {loc.lineno})" if loc is not None else ""


def _restrict_batch_tiles(ir: KernelIR, spec: ConfigSpec) -> None:
    """Pallas' Triton dot is 2-D, so the batch dims of a batched dot get a block size of 1."""
    from helion.autotuner.config_fragment import BlockSizeFragment

    blocks = {info.symbol: info for info in ir.block_sizes}
    for node in ir.walk():
        if node.op is not ops.dot:
            continue
        for dim in node.output.shape[:-2]:
            info = blocks.get(dim)
            if info is None or info.kind != "tile" or info.config_index is None:
                continue
            if info.config_index < spec.length("block_sizes"):
                spec.set_item(
                    "block_sizes",
                    info.config_index,
                    BlockSizeFragment(1, 1, 1, size_hint=info.size_hint),
                )
