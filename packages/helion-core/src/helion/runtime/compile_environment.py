"""`BoundKernel.env`: what a bound kernel is compiled for and with, in one read-only object."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING
from typing import Any

import torch

if TYPE_CHECKING:
    from helion.ir.core import BlockSizeInfo
    from helion.ir.core import ScalarArg
    from helion.ir.core import TensorArg
    from helion.runtime.kernel import BoundKernel
    from helion.runtime.settings import Settings


@dataclasses.dataclass(frozen=True)
class CompileEnvironment:
    """The compile environment of a bound kernel (``kernel.bind(args).env``).

    Attributes:
        kernel_name: the kernel's name.
        device: the device the kernel runs on (of its tensor arguments).
        backend: the name of the backend that compiles it (``"triton"``, ``"ref"``, ...).
        settings: the kernel's `Settings` (the kernel's own object: changing it changes the
            kernel, as ``kernel.settings`` does).
        config_spec: the search space: the tunables, ``default_config()``, ``normalize()``
            (the bound kernel's ``config_spec``).
        block_sizes: one `helion.ir.core.BlockSizeInfo` per block-size variable, in block-id
            order: ``kind`` (``"tile"``: an entry of ``Config.block_sizes``, at
            ``config_index``; ``"fixed"``: given as an int; ``"grid"``: ``hl.grid``;
            ``"reduction"``: a full ``:`` dimension), ``size_hint`` (the extent traced),
            ``min_size`` / ``max_size``, ``fixed_value`` and the kernel line (``loc``).
        index_dtype: the dtype of index arithmetic (``torch.int32``, or ``torch.int64`` for
            tensors of more than 2**31 - 1 elements or by ``Settings.index_dtype``).
        tensor_args: the tensors the device code reads or writes (`helion.ir.core.TensorArg`:
            name, shape, stride, dtype, device), including those read from container arguments
            or captured by function arguments.
        scalar_args: the host numbers passed to the device code at each launch (not baked).
        specialization_key: the bound kernel's key (``Kernel.specialization_key(args)``), as
            its repr.

    It describes the trace made when the kernel was bound (later variants, e.g. other sizes
    under ``static_shapes=False``, have the same block sizes and tunables).
    """

    kernel_name: str
    device: torch.device
    backend: str
    settings: Settings
    config_spec: Any
    block_sizes: tuple[BlockSizeInfo, ...]
    index_dtype: torch.dtype
    tensor_args: tuple[TensorArg, ...]
    scalar_args: tuple[ScalarArg, ...]
    specialization_key: str

    @classmethod
    def of(cls, bound: BoundKernel) -> CompileEnvironment:
        ir = bound.ir
        return cls(
            kernel_name=bound.kernel.name,
            device=bound.device,
            backend=bound.backend.name,
            settings=bound.settings,
            config_spec=bound.config_spec,
            block_sizes=tuple(dataclasses.replace(info) for info in ir.block_sizes),
            index_dtype=ir.index_dtype,
            tensor_args=tuple(dataclasses.replace(arg) for arg in ir.tensor_args),
            scalar_args=tuple(ir.scalar_args),
            specialization_key=bound._specialization_repr,
        )

    def tunable_block_sizes(self) -> list[BlockSizeInfo]:
        """The block sizes the config chooses (``Config.block_sizes``), in config order."""
        tiles = [info for info in self.block_sizes if info.kind == "tile"]
        return sorted(tiles, key=lambda info: (info.config_index is None, info.config_index))

    def __repr__(self) -> str:
        blocks = ", ".join(f"{info.kind}:{info.size_hint}" for info in self.block_sizes)
        return (
            f"CompileEnvironment(kernel={self.kernel_name!r}, device={self.device}, "
            f"backend={self.backend!r}, index_dtype={self.index_dtype}, block_sizes=[{blocks}])"
        )
