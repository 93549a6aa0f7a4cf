"""Self-contained modules of Triton kernels (``OutputCodeOptions(allow_helion_deps=False)``).

A generated module already imports only torch and Triton: its launcher calls the
``@triton.jit`` kernel with the grid and constexprs written out. What the runtime adds when it
loads one, the exported module does itself:

* On CPU the runtime wraps the kernel for Triton's interpreter (see ``launcher``); the exported
  module relies on Triton's own switch instead, ``TRITON_INTERPRET=1`` set before ``triton``
  is imported, and its launch says so when the switch was not on.
* Tensor descriptors (TMA) need a Triton allocator for their scratch memory: the module sets
  one on CUDA when it is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helion.backends.base import ExportedModule

if TYPE_CHECKING:
    from helion_triton.launcher import TritonCompiledKernel


def export_module(compiled: TritonCompiledKernel) -> ExportedModule:
    generated = compiled.generated
    kernel, launcher = generated.kernel_name, generated.launcher_name
    lines = [compiled.source.rstrip(), ""]
    if generated.uses_tensor_descriptors and compiled.target.is_cuda:
        lines += [
            "",
            "def _helion_triton_allocate(size, alignment, stream):",
            '    """Scratch memory of the tensor descriptors the kernel builds."""',
            '    return torch.empty(size, dtype=torch.int8, device="cuda")',
            "",
            "",
            "triton.set_allocator(_helion_triton_allocate)",
            "",
        ]
    if compiled.target.interpret:
        # the launcher under a name of its own: the host code appended to this module takes
        # the kernel's name, which the launcher has
        own = f"_helion_triton_launcher_{launcher}"
        entry = f"_helion_triton_launch_{launcher}"
        message = (
            "this module was generated for CPU tensors, which Triton runs through its "
            "interpreter: set TRITON_INTERPRET=1 before triton is imported"
        )
        lines += [
            f"{own} = {launcher}",
            "",
            "",
            f"def {entry}(*values):",
            f'    """`{launcher}`, once Triton interprets `{kernel}` (see the message below)."""',
            f'    if type({kernel}).__name__ != "InterpretedFunction":',
            f"        raise RuntimeError({message!r})",
            f"    {own}(*values)",
        ]
        launcher = entry
    return ExportedModule("\n".join(lines) + "\n", launcher)
