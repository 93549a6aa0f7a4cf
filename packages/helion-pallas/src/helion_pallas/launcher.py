"""Compiled Pallas kernels: torch tensors in, results written back into the torch outputs.

Tensors cross to JAX through DLPack (`jax.dlpack.from_dlpack`), which shares the buffer where
the platform allows (contiguous CPU and CUDA tensors); the generated function is compiled ahead
of time for exactly the argument shapes, dtypes and device of this kernel variant. Pallas
outputs are new JAX buffers, so every tensor the kernel writes is copied back into the torch
tensor the host code allocated (`Tensor.copy_` from a DLPack view of the result).
"""

from __future__ import annotations

import hashlib
import linecache
from typing import Any
from typing import Sequence

import numpy
import torch

from helion import exc
from helion.ir.core import KernelIR
from helion.ir.core import TensorArg
from helion_pallas.tunables import PallasOptions
from helion_pallas.writer import jnp_dtype

#: XLA options of every compiled kernel. XLA by default may skip a rounding to float16/bfloat16
#: that is followed by a conversion back to float32 ("excess precision"): bf16(1 / x) * 3.3
#: computed in float32 would then multiply the unrounded reciprocal. PyTorch rounds there.
XLA_OPTIONS = {"xla_allow_excess_precision": False}


def to_jax(tensor: torch.Tensor) -> Any:
    """A JAX view of a torch tensor (a copy only when it is not contiguous)."""
    import jax

    tensor = tensor.detach()
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    else:
        # torch calls a tensor contiguous whatever the strides of its size-1 (and size-0)
        # dims, and DLPack passes them on: JAX reads strides (1, 16) of a (16, 1) tensor as a
        # column-major layout and refuses it for a kernel compiled for row-major arguments.
        # The row-major strides address the same memory: a view, no copy
        strides = _row_major_strides(tensor.shape)
        if tensor.stride() != strides:
            tensor = tensor.as_strided(tensor.shape, strides)
    return jax.dlpack.from_dlpack(tensor)


def _row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def jax_device(device: torch.device) -> Any:
    """The JAX device that holds the same memory as a torch device."""
    import jax

    if device.type == "cpu":
        return jax.devices("cpu")[0]
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return jax.devices("gpu")[index]
    return jax.devices()[device.index or 0]


def _register_source(name: str, source: str) -> str:
    """Make the generated source visible to tracebacks under a stable pseudo file name."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:10]
    filename = f"<helion-pallas {name} {digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    return filename


class PallasCompiledKernel:
    """The result of `PallasBackend.compile`: readable `.source`, called with host values."""

    def __init__(
        self,
        ir: KernelIR,
        options: PallasOptions,
        source: str,
        entry: str,
        written: Sequence[TensorArg],
    ) -> None:
        import jax
        import jax.numpy as jnp

        self.source = source
        self.options = options
        self.entry = entry  # the generated function `source` defines (jax arrays in and out)
        filename = _register_source(ir.name, source)
        namespace: dict[str, Any] = {"__name__": f"helion_pallas_generated_{entry}"}
        exec(compile(source, filename, "exec"), namespace)
        self.function = namespace[entry]
        self._tensor_positions = [t.index for t in ir.tensor_args]
        # runtime scalars go in as NumPy 0-d arrays: cheaper than building JAX arrays per call
        self._scalar_positions = [
            (s.index, numpy.dtype(jnp_dtype(s.dtype).removeprefix("jnp."))) for s in ir.scalar_args
        ]
        self._written_positions = [t.index for t in written]
        device = ir.tensor_args[0].device if ir.tensor_args else torch.device("cpu")
        self.device = device
        sharding = jax.sharding.SingleDeviceSharding(jax_device(device))
        specs = [
            jax.ShapeDtypeStruct(
                t.shape, getattr(jnp, jnp_dtype(t.dtype).removeprefix("jnp.")), sharding=sharding
            )
            for t in ir.tensor_args
        ]
        specs += [
            jax.ShapeDtypeStruct((), dtype, sharding=sharding)
            for _, dtype in self._scalar_positions
        ]
        with jax.enable_x64(True):
            try:
                self._executable = (
                    jax.jit(self.function, compiler_options=XLA_OPTIONS).lower(*specs).compile()
                )
            except exc.BaseError:
                raise
            except Exception as error:
                raise exc.InternalError(
                    f"JAX/Pallas could not compile the kernel generated for {ir.name!r} "
                    f"({options.target}): {type(error).__name__}: {error}"
                ) from error
        self._sharding = sharding

    def __call__(self, *host_values: Any) -> None:
        import jax

        on_cuda = self.device.type == "cuda"
        if on_cuda:
            # JAX runs on its own CUDA stream and DLPack does not order it after torch's: the
            # host code's `torch.zeros` of an accumulated output (a histogram) may not have run
            # yet, and the reused memory would hold a previous call's counts
            torch.cuda.current_stream(self.device).synchronize()
        with jax.enable_x64(True):
            arrays = [to_jax(host_values[position]) for position in self._tensor_positions]
            for position, dtype in self._scalar_positions:
                arrays.append(numpy.asarray(host_values[position], dtype=dtype))
            results = self._executable(*arrays)
            if on_cuda:
                # and torch's copy below must not read the results before JAX wrote them
                jax.block_until_ready(results)
        for position, result in zip(self._written_positions, results, strict=True):
            _copy_back(host_values[position], torch.from_dlpack(result))


def _copy_back(tensor: torch.Tensor, result: torch.Tensor) -> None:
    """Write a kernel's result into the torch tensor it stands for. Torch refuses in-place
    writes into a tensor made under torch.inference_mode() once outside it: such a tensor is
    written inside it (as the compiled backends write its memory)."""
    if tensor.is_inference() and not torch.is_inference_mode_enabled():
        with torch.inference_mode():
            tensor.copy_(result)
    else:
        tensor.copy_(result)


def launch_pallas(
    pallas_kernel: Any,
    grid: Any,
    *args: Any,
    output_indices: Any = None,
    interpret: bool | None = None,
    **pallas_call_options: Any,
) -> None:
    """``helion.runtime.default_pallas_launcher``: `pallas_kernel` run by ``pl.pallas_call``
    over `grid` with one whole-tensor ref per tensor of `args` (other arguments passed as they
    are), the tensors at `output_indices` (default: all) aliased input/output buffers whose
    final contents are copied back into the torch tensors."""
    import jax
    from jax.experimental import pallas as pl

    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    if not tensors:
        raise ValueError("default_pallas_launcher needs at least one torch tensor argument")
    if output_indices is None:
        outputs = list(tensors)
    else:
        if isinstance(output_indices, int):
            output_indices = [output_indices]
        outputs = []
        for index in output_indices:
            position = index + len(args) if index < 0 else index
            if position not in tensors:
                raise ValueError(
                    f"default_pallas_launcher: output index {index} is not the position of a "
                    f"torch tensor in the {len(args)} arguments"
                )
            if position not in outputs:
                outputs.append(position)
    inputs = [i for i in tensors if i not in outputs]
    device = args[tensors[0]].device
    for i in tensors:
        if args[i].device != device:
            raise exc.TensorsOnDifferentDevices(
                f"argument {tensors[0]}", device, f"argument {i}", args[i].device
            )
    if interpret is None:
        interpret = device.type == "cpu"
    count = len(args)

    def body(*refs: Any) -> None:
        # pallas_call's order: the input refs (outputs' aliased inputs last), then the outputs
        by_position = dict(zip(inputs, refs[: len(inputs)], strict=True))
        by_position.update(zip(outputs, refs[len(inputs) + len(outputs) :], strict=True))
        pallas_kernel(*(by_position.get(i, args[i]) for i in range(count)))

    out_shape = [
        jax.ShapeDtypeStruct(tuple(args[i].shape), to_jax_dtype(args[i].dtype)) for i in outputs
    ]
    aliases = {len(inputs) + k: k for k in range(len(outputs))}
    call = pl.pallas_call(
        body,
        out_shape=out_shape,
        grid=tuple(grid) if isinstance(grid, (list, tuple)) else (grid,),
        input_output_aliases=aliases,
        interpret=interpret,
        **pallas_call_options,
    )
    on_cuda = device.type == "cuda"
    if on_cuda:
        torch.cuda.current_stream(device).synchronize()  # JAX's stream is not torch's
    with jax.enable_x64(True):
        arrays = [to_jax(args[i]) for i in inputs + outputs]
        results = call(*arrays)
        if on_cuda:
            jax.block_until_ready(results)
    for position, result in zip(outputs, results, strict=True):
        _copy_back(args[position], torch.from_dlpack(result))


def to_jax_dtype(dtype: torch.dtype) -> Any:
    import jax.numpy as jnp

    return getattr(jnp, jnp_dtype(dtype).removeprefix("jnp."))
