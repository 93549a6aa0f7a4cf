"""The built-in `ref` backend: runs Kernel IR with eager torch ops, on any device."""

from __future__ import annotations

import copy
from typing import Any

import torch

from helion import exc
from helion.backends.base import Backend
from helion.ir.core import KernelIR
from helion.ir.printer import format_ir

# tunables that only change generated machine code, which the ref backend does not have
_IGNORED_FIELDS = (
    "flatten_loops",
    "l2_groupings",
    "reduction_loops",
    "range_unroll_factors",
    "range_num_stages",
    "range_multi_buffers",
    "range_flattens",
    "static_ranges",
    "num_warps",
    "num_stages",
    "pid_type",
    "indexing",
    "load_eviction_policies",
)

_COMPLEX_HINT = (
    "The compiled backends have no complex types: pass the real and imaginary parts as real "
    "tensors (torch.view_as_real(z) gives both, as a last dimension of size 2)."
)


class RefCompiledKernel:
    def __init__(self, ir: KernelIR, config: Any) -> None:
        from helion.backends.ref.executor import RefExecutor

        self.executor = RefExecutor(ir, config)
        self.source = (
            f"# ref backend: executes this IR tile by tile with eager torch ops\n# {config!r}\n"
            + format_ir(ir)
        )

    def __call__(self, *host_values: Any) -> None:
        # a copy per launch: the executor keeps the launch's values and tile extents as it
        # runs, and two threads may launch one compiled kernel at once
        copy.copy(self.executor).run(host_values)


class RefBackend(Backend):
    name = "ref"
    distribution = "helion-core"
    min_dot_size = 1
    # tiles are sliced at their exact extent, so a length-0 slice is an empty tensor
    zero_length_slices = True

    def check(self, ir: KernelIR) -> None:
        from helion.backends.ref.lowerings import ref_lowerings

        # complex values would run through eager torch ops that are not the compiled backends'
        # semantics (a reduction's accumulator drops the imaginary part); the compiled backends
        # have no complex types, and ref is their oracle, so it refuses them as they do
        for tensor in ir.tensor_args:
            if tensor.dtype.is_complex:
                raise exc.BackendUnsupported(
                    f"tensor {tensor.name!r} of dtype {tensor.dtype}",
                    self.name,
                    hint=_COMPLEX_HINT,
                )
        for node in ir.walk():
            for value in node.outputs:
                dtype = getattr(value.type, "dtype", None)
                if isinstance(dtype, torch.dtype) and dtype.is_complex:
                    raise exc.BackendUnsupported(
                        f"{node.op.name} producing {dtype}",
                        self.name,
                        loc=node.loc,
                        hint=_COMPLEX_HINT,
                    )
        table = ref_lowerings()
        missing = [node for node in ir.walk() if not node.op.structural and node.op not in table]
        if missing:
            raise exc.BackendUnsupported(missing[0].op.name, self.name, loc=missing[0].loc)

    def tunables(self, ir: KernelIR, spec: Any, device: torch.device) -> None:
        for name in _IGNORED_FIELDS:
            if name in spec.fields:
                spec.remove(name)

    def compile(self, ir: KernelIR, config: Any) -> RefCompiledKernel:
        return RefCompiledKernel(ir, config)
