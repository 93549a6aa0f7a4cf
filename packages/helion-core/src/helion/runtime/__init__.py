"""Runtime: Kernel, BoundKernel, Config, Settings, OutputCodeOptions, device queries for host
code (`get_num_sm`, `get_num_xcd`), and launchers of kernels written in a backend's own language
(`default_launcher` for Triton, `default_pallas_launcher`, `default_cute_launcher`,
`default_metal_launcher`) with their helpers (`set_triton_allocator`, `cute_cuda_graph`).

The launchers reach their backend through the backend registry when called, so importing this
module imports no backend package."""

from helion.runtime.compile_environment import CompileEnvironment as CompileEnvironment
from helion.runtime.config import Config as Config
from helion.runtime.hardware import get_num_sm as get_num_sm
from helion.runtime.hardware import get_num_xcd as get_num_xcd
from helion.runtime.launchers import CapturedGraph as CapturedGraph
from helion.runtime.launchers import cute_cuda_graph as cute_cuda_graph
from helion.runtime.launchers import default_cute_launcher as default_cute_launcher
from helion.runtime.launchers import default_launcher as default_launcher
from helion.runtime.launchers import default_metal_launcher as default_metal_launcher
from helion.runtime.launchers import default_pallas_launcher as default_pallas_launcher
from helion.runtime.launchers import set_triton_allocator as set_triton_allocator
from helion.runtime.output_code import OutputCodeOptions as OutputCodeOptions
from helion.runtime.settings import Settings as Settings


def __getattr__(name: str):
    # imported on first use: helion.runtime.kernel imports this package's modules
    if name in ("Kernel", "BoundKernel", "kernel"):
        import importlib

        module = importlib.import_module("helion.runtime.kernel")
        # `helion.runtime.kernel` is that module, and (as public Helion's runtime exports it)
        # the decorator too: calling the module is calling `helion.kernel`
        return module if name == "kernel" else getattr(module, name)
    raise AttributeError(name)
