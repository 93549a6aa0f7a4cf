"""Tensor sizes and strides as kernel arguments, under ``static_shapes=False``.

With static shapes every size and stride is a number in the generated code. Under
``static_shapes=False`` each new size is still traced and generated anew, but the sizes and
strides of tensor arguments are passed at launch (``x_size_0``, ``x_stride_0``) instead of being
written into the code. Sizes that trace alike then generate the same source: one module (the
module cache is keyed by source) and one Triton compile, which still specializes an int argument
on ``== 1`` and on divisibility by 16 (unless ``triton_do_not_specialize`` is set).

A loop bound or a slice length is an int in the IR, with no record of how host code computed
it: it becomes the size argument of a tensor dimension of the same size, preferably one that the
loop's tiles index (or, for a reduction dimension, one that a ``:`` slice covers), else the first
in argument order. 0 and 1 stay numbers (Triton specializes on them anyway). The code is
generated for this call's sizes either way, so a bound that equals a tensor's size only by
chance still launches with the right value; at worst another size generates other source.
Numbers inside arithmetic (``sum / n``) are not replaced: a runtime int would change the dtype
promotion of the expression.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import Callable

from helion.ir.core import KernelIR
from helion.ir.core import TensorArg
from helion.ir.core import TileType
from helion.ir.core import Value
from helion.language import _ops as ops


@dataclasses.dataclass(frozen=True)
class RuntimeSize:
    """A size or stride of a tensor argument passed at launch."""

    value: int  # this trace's value
    tensor_index: int  # the tensor argument (`TensorArg.index`)
    dim: int
    kind: str  # "size" or "stride"


def _block_of(index: Any) -> int | None:
    """The block id of a tile item, or of a scalar item that is a tile's begin (an `hl.grid`
    index); None for anything else."""
    if not isinstance(index, Value):
        return None
    if isinstance(index.type, TileType):
        return index.type.block_id
    producer = index.producer
    if producer is not None and producer.op is ops.TILE_ATTRS["begin"]:
        return producer.attrs["block_id"]
    return None


class RuntimeSizes:
    """The size and stride arguments of one generated kernel (none under static shapes)."""

    def __init__(self, ir: KernelIR, enabled: bool, fresh: Callable[[str], str]) -> None:
        self.enabled = enabled
        self._fresh = fresh
        self._names: dict[RuntimeSize, str] = {}  # in order of first use
        # value -> the first tensor dimension of that size (argument order, then dims)
        self._by_value: dict[int, RuntimeSize] = {}
        # block id -> the tensor dimensions its tiles index; value -> a dimension a `:` covers
        self._by_block: dict[int, list[RuntimeSize]] = {}
        self._sliced: dict[int, RuntimeSize] = {}
        if enabled:
            for arg in ir.tensor_args:
                for dim, size in enumerate(arg.shape):
                    if int(size) > 1:
                        self._by_value.setdefault(
                            int(size), RuntimeSize(int(size), arg.index, dim, "size")
                        )
            for op in ir.memory_ops():
                self._note_access(op.node, op.tensor)

    def _note_access(self, node: Any, tensor: TensorArg) -> None:
        dim = 0
        for item in node.attrs["items"]:
            if item[0] == "none":
                continue  # a new axis: no tensor dimension
            if dim >= len(tensor.shape):
                break
            size = int(tensor.shape[dim])
            here = RuntimeSize(size, tensor.index, dim, "size")
            block = _block_of(node.inputs[item[1]]) if item[0] in ("tile", "scalar") else None
            if size > 1 and block is not None:
                self._by_block.setdefault(block, []).append(here)
            elif size > 1 and item[0] == "full" and (int(item[1]), int(item[2])) == (0, size):
                self._sliced.setdefault(size, here)
            dim += 1

    def extent(self, value: Any, block_id: int | None = None) -> RuntimeSize | Any:
        """A loop bound of block ``block_id``, or a slice length: the size argument of a
        dimension of that size (anything but an int > 1 is returned as it is)."""
        if not self.enabled or isinstance(value, bool) or not isinstance(value, int):
            return value
        for indexed in self._by_block.get(block_id, ()) if block_id is not None else ():
            if indexed.value == value:
                return indexed
        return self._sliced.get(value) or self._by_value.get(value, value)

    def size(self, tensor: TensorArg, dim: int) -> RuntimeSize | int:
        value = int(tensor.shape[dim])
        if not self.enabled or value <= 1:
            return value
        return RuntimeSize(value, tensor.index, dim, "size")

    def stride(self, tensor: TensorArg, dim: int) -> RuntimeSize | int:
        value = int(tensor.stride[dim])
        if not self.enabled or value in (0, 1):
            return value
        return RuntimeSize(value, tensor.index, dim, "stride")

    def name(self, size: RuntimeSize, tensor_name: str) -> str:
        """The kernel parameter of ``size`` (declared at first use)."""
        name = self._names.get(size)
        if name is None:
            name = self._fresh(f"{tensor_name}_{size.kind}_{size.dim}")
            self._names[size] = name
        return name

    def text(self, item: RuntimeSize | int, tensor_names: dict[int, str]) -> str:
        """``item`` in kernel (or launcher) source: its parameter, or the number."""
        if isinstance(item, RuntimeSize):
            return self.name(item, tensor_names[item.tensor_index])
        return str(item)

    def params(self) -> list[str]:
        return list(self._names.values())

    def launcher_lines(self, tensor_names: dict[int, str]) -> list[str]:
        """Launcher statements binding each parameter from its tensor (``x_size_0 = x.size(0)``)."""
        return [
            f"{name} = {tensor_names[size.tensor_index]}.{size.kind}({size.dim})"
            for size, name in self._names.items()
        ]
