"""`hl.stacktensor_like` while tracing: a proxy whose subscripts emit `stack_load` /
`stack_store` nodes (see `helion.language.stack_tensor` for the semantics)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

import torch

from helion import exc
from helion.frontend import jagged
from helion.frontend.proxies import DeviceValue
from helion.frontend.proxies import HostTensor
from helion.frontend.proxies import TileProxy
from helion.ir.core import TensorType
from helion.language import _ops as ops
from helion.language.stack_tensor import StackTensor

if TYPE_CHECKING:
    from helion.frontend.tracer import Tracer


class StackTensorProxy(StackTensor):
    """A StackTensor in traced device code: `tensor_like` is a HostTensor, `dev_ptrs` a
    DeviceValue of uint64 pointers."""

    __slots__ = ("tracer",)

    def __init__(self, tracer: Tracer, tensor_like: HostTensor, dev_ptrs: DeviceValue) -> None:
        super().__init__(tensor_like, dev_ptrs)
        self.tracer = tracer

    def __getitem__(self, index: Any) -> DeviceValue:
        return load(self.tracer, self, index, None, None)

    def __setitem__(self, index: Any, value: Any) -> None:
        store(self.tracer, self, index, value, None)


def make(tracer: Tracer, tensor_like: Any, dev_ptrs: Any) -> StackTensorProxy:
    loc = tracer.current_loc()
    if tracer.loop_depth == 0:
        raise exc.StackTensorcOnHost(loc=loc)
    if isinstance(tensor_like, (DeviceValue, TileProxy)):
        raise exc.StackTensorExampleOnDevice(loc=loc)
    if not isinstance(tensor_like, HostTensor):
        raise exc.InvalidAPIUsage(
            f"hl.stacktensor_like needs a host tensor as tensor_like, got {type(tensor_like).__name__}",
            loc=loc,
        )
    if isinstance(dev_ptrs, HostTensor):
        raise exc.StackTensorDevPtrOnHost(
            loc=loc,
            hint=f"Load the pointers in device code first: hl.stacktensor_like(x, {dev_ptrs.arg.name}[...]).",
        )
    if not isinstance(dev_ptrs, DeviceValue):
        raise exc.InvalidAPIUsage(
            f"hl.stacktensor_like needs a uint64 device tensor of pointers, got {type(dev_ptrs).__name__}",
            loc=loc,
        )
    if dev_ptrs.dtype != torch.uint64:
        raise exc.StackTensorDevPtrDtype(dev_ptrs.dtype, loc=loc)
    return StackTensorProxy(tracer, tensor_like, dev_ptrs)


def _pointer_shape(stack: StackTensorProxy) -> tuple:
    return tuple(stack.dev_ptrs.value.shape)


def load(
    tracer: Tracer,
    stack: StackTensorProxy,
    index: Any,
    extra_mask: Any,
    eviction_policy: str | None,
) -> DeviceValue:
    items, inputs, shape = tracer._index_items(stack.tensor_like, index)
    full = (*_pointer_shape(stack), *shape)
    mask = jagged.access_mask(tracer, full, extra_mask, "a StackTensor load")
    inputs.append(stack.dev_ptrs.value)
    attrs = {
        "tensor": stack.tensor_like.arg,
        "items": tuple(items),
        "ptrs": len(inputs) - 1,
        "mask": None,
        "eviction_policy": eviction_policy,
    }
    if mask is not None:
        inputs.append(mask)
        attrs["mask"] = len(inputs) - 1
    return tracer.wrap(tracer.emit(ops.stack_load, inputs, attrs, [TensorType(full, stack.dtype)]))


def store(tracer: Tracer, stack: StackTensorProxy, index: Any, value: Any, extra_mask: Any) -> None:
    items, inputs, shape = tracer._index_items(stack.tensor_like, index)
    full = (*_pointer_shape(stack), *shape)
    inputs.append(tracer._stored_value(value, full, stack.dtype))
    attrs = {
        "tensor": stack.tensor_like.arg,
        "items": tuple(items),
        "value": len(inputs) - 1,
        "mask": None,
    }
    inputs.append(stack.dev_ptrs.value)
    attrs["ptrs"] = len(inputs) - 1
    mask = jagged.access_mask(tracer, full, extra_mask, "a StackTensor store")
    if mask is not None:
        inputs.append(mask)
        attrs["mask"] = len(inputs) - 1
    tracer.emit(ops.stack_store, inputs, attrs, [])
