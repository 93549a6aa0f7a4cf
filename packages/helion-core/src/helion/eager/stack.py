"""`hl.stacktensor_like` in eager mode: every pointer resolves to a live tensor (see
`helion.language.stack_tensor`), and a stack access is the same access on each of them."""

from __future__ import annotations

from typing import Any
from typing import Sequence

import torch

from helion import exc
from helion.eager import indexing
from helion.language.stack_tensor import StackTensor
from helion.language.stack_tensor import candidate_tensors
from helion.language.stack_tensor import resolve_buffer


class EagerStackTensor(StackTensor):
    __slots__ = ("_buffers",)

    def __init__(
        self, tensor_like: torch.Tensor, dev_ptrs: torch.Tensor, known: Sequence[Any]
    ) -> None:
        super().__init__(tensor_like, dev_ptrs)
        candidates = candidate_tensors(known)
        with torch._C.DisableTorchFunction():
            addresses = [int(a) for a in dev_ptrs.reshape(-1).tolist()]
        self._buffers = [
            resolve_buffer(
                a,
                tuple(tensor_like.shape),
                tuple(tensor_like.stride()),
                tensor_like.dtype,
                dev_ptrs.device,
                candidates,
            )
            for a in addresses
        ]

    def _slot_shape(self, index: Any) -> tuple[int, ...]:
        items = indexing.normalize_index(self.tensor_like, index)
        return tuple(indexing.Gather(self.tensor_like, items).shape)

    def _per_buffer(self, extra: Any, slot: tuple[int, ...], what: str) -> list[Any]:
        if extra is None:
            return [None] * len(self._buffers)
        full = (*self.dev_ptrs.shape, *slot)
        value = torch.as_tensor(extra, device=self.dev_ptrs.device)
        try:
            value = value.broadcast_to(full)
        except RuntimeError:
            raise exc.ShapeMismatch(
                f"{what} of shape {list(value.shape)} does not broadcast to the stack's {list(full)}"
            ) from None
        return list(value.reshape(len(self._buffers), *slot).unbind(0))

    def load(self, index: Any, mask: Any = None) -> torch.Tensor:
        with torch._C.DisableTorchFunction():
            slot = self._slot_shape(index)
            masks = self._per_buffer(mask, slot, "the mask")
            parts = [indexing.load(b, index, m) for b, m in zip(self._buffers, masks, strict=True)]
            if not parts:
                return torch.empty(
                    (*self.dev_ptrs.shape, *slot), dtype=self.dtype, device=self.dev_ptrs.device
                )
            return torch.stack(parts).reshape(*self.dev_ptrs.shape, *slot)

    def store(self, index: Any, value: Any, mask: Any = None) -> None:
        with torch._C.DisableTorchFunction():
            slot = self._slot_shape(index)
            values = self._per_buffer(value, slot, "the stored value")
            masks = self._per_buffer(mask, slot, "the mask")
            for buffer, v, m in zip(self._buffers, values, masks, strict=True):
                indexing.store(buffer, index, v, m)

    def __getitem__(self, index: Any) -> torch.Tensor:
        return self.load(index)

    def __setitem__(self, index: Any, value: Any) -> None:
        self.store(index, value)


def make_stack(
    tensor_like: Any, dev_ptrs: Any, known: Sequence[Any], depth: int
) -> EagerStackTensor:
    if depth == 0:
        raise exc.StackTensorcOnHost()
    if not isinstance(tensor_like, torch.Tensor):
        raise exc.StackTensorExampleOnDevice()
    if not isinstance(dev_ptrs, torch.Tensor):
        raise exc.StackTensorDevPtrOnHost()
    if dev_ptrs.dtype != torch.uint64:
        raise exc.StackTensorDevPtrDtype(dev_ptrs.dtype)
    if any(dev_ptrs is k for k in known):
        raise exc.StackTensorDevPtrOnHost(
            hint="Load the pointers in device code first: hl.stacktensor_like(x, dev_ptrs[:])."
        )
    return EagerStackTensor(tensor_like, dev_ptrs, known)
