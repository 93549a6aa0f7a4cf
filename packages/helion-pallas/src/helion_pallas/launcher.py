"""Compiled Pallas kernels: torch tensors in, results written back into the torch outputs.

Tensors cross to JAX through DLPack (`jax.dlpack.from_dlpack`), which shares the buffer where
the platform allows (contiguous CPU and CUDA tensors); the generated function is compiled ahead
of time for exactly the argument shapes, dtypes and device of this kernel variant. Pallas
outputs are new JAX buffers, so every tensor the kernel writes is copied back into the torch
tensor the host code allocated (`Tensor.copy_` from a DLPack view of the result).

On CUDA, JAX computes on a stream of its own. The call does not wait on the host for either
side: DLPack's stream handshake orders the work. `jax.dlpack.from_dlpack` hands torch JAX's
stream, and torch makes it wait for its current stream (the host code's `torch.zeros` of an
accumulated output is done before the kernel reads it); `torch.from_dlpack` of a result hands
JAX torch's current stream, which then waits for the kernel before the copy back and before
any later torch work (which may reuse the memory of inputs JAX was reading).
"""

from __future__ import annotations

import hashlib
import linecache
import os
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

    return jax.dlpack.from_dlpack(dlpack_ready(tensor))


def dlpack_ready(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor`, or a row-major tensor of the same values that JAX takes through DLPack."""
    tensor = tensor.detach()
    if not tensor.is_contiguous():
        return tensor.contiguous()
    # torch calls a tensor contiguous whatever the strides of its size-1 (and size-0) dims,
    # and DLPack passes them on: JAX reads strides (1, 16) of a (16, 1) tensor as a
    # column-major layout and refuses it for a kernel compiled for row-major arguments. The
    # row-major strides address the same memory: a view, no copy
    strides = _row_major_strides(tensor.shape)
    if tensor.stride() != strides:
        return tensor.as_strided(tensor.shape, strides)
    return tensor


class TensorImporter:
    """The torch tensors of one call as JAX arrays, for the calls of compiled kernels.

    `jax.dlpack.from_dlpack` spends most of its time a tensor around the import (71 µs on the
    H100 host against 47 for this, 23 against 5 on the CPU one): the JAX device looked up
    again, and a `jnp.asarray` to the canonical dtype, a no-op under `jax.enable_x64`, where
    the kernels run. This hands jaxlib's import each tensor's DLPack capsule directly, with
    the same stream handshake (torch makes JAX's stream wait for its current stream). That
    import is private to JAX: where it is missing or its signature is not the known one, each
    tensor goes through `to_jax` (the public path) instead.
    """

    _DL_DEVICE_TYPES = {"cpu": 1, "cuda": 2}  # DLPack's kDLCPU and kDLCUDA

    def __init__(self, device: torch.device) -> None:
        self.device = jax_device(device)
        self._dl_device_type = self._DL_DEVICE_TYPES.get(device.type)
        self._import = _jaxlib_capsule_import() if self._dl_device_type else None
        # the stream JAX hands torch's export to wait on (and records each buffer's ready
        # event on); what `jax.dlpack.from_dlpack` asks the device for each time
        self._stream = (
            self.device.get_stream_for_external_ready_events() if device.type == "cuda" else None
        )

    def __call__(self, tensors: Sequence[torch.Tensor]) -> list[Any]:
        if self._import is not None:
            try:
                return [
                    self._import(
                        dlpack_ready(tensor).__dlpack__(stream=self._stream),
                        self.device,
                        self._stream,
                        None,
                        self._dl_device_type,
                    )
                    for tensor in tensors
                ]
            except TypeError:  # not the signature this was written for: the public path
                self._import = None
        return [to_jax(tensor) for tensor in tensors]


def _jaxlib_capsule_import() -> Any:
    try:
        from jax._src.lib import _jax
        from jax._src.lib import jaxlib_extension_version
    except ImportError:
        return None
    if jaxlib_extension_version < 467:  # before the DLPack device type argument
        return None
    return getattr(_jax, "dlpack_managed_tensor_to_buffer", None)


def _row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def jax_device(device: torch.device) -> Any:
    """The JAX device that holds the same memory as a torch device."""
    # JAX reserves 75% of a GPU's memory when it first starts its GPU client, which any
    # `jax.devices(...)` does (the CPU's too), leaving torch, which shares the GPU, short. Unless
    # the user chose (the variable set before this first call), JAX allocates as it goes
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
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
        self._import = TensorImporter(device)

    def __call__(self, *host_values: Any) -> None:
        import jax

        with jax.enable_x64(True):
            arrays = self._import([host_values[position] for position in self._tensor_positions])
            for position, dtype in self._scalar_positions:
                arrays.append(numpy.asarray(host_values[position], dtype=dtype))
            results = self._executable(*arrays)
        hand_back(results, [host_values[position] for position in self._written_positions])


def hand_back(results: Sequence[Any], tensors: Sequence[torch.Tensor]) -> None:
    """Copy each JAX result into the torch tensor it stands for, on torch's current stream
    after JAX wrote it (the DLPack handshake of `torch.from_dlpack`). A kernel that writes no
    tensor is waited for on the host: no copy would order torch's later work after it."""
    import jax

    if not tensors:
        jax.block_until_ready(results)
    for tensor, result in zip(tensors, results, strict=True):
        _copy_back(tensor, torch.from_dlpack(result))


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
    with jax.enable_x64(True):
        arrays = TensorImporter(device)([args[i] for i in inputs + outputs])
        results = call(*arrays)
    hand_back(results, [args[position] for position in outputs])


def to_jax_dtype(dtype: torch.dtype) -> Any:
    import jax.numpy as jnp

    return getattr(jnp, jnp_dtype(dtype).removeprefix("jnp."))
