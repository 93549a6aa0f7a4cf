"""`hl.StackTensor`: several buffers of one shape, addressed as one tensor with leading stack dims.

`hl.stacktensor_like(tensor_like, dev_ptrs)` (in device code) describes the buffers whose data
pointers are the elements of `dev_ptrs` (a uint64 device tensor loaded in the kernel), each laid
out like the host tensor `tensor_like` (shape, strides, dtype). `stack[index]` reads `index`
from every buffer (result shape `dev_ptrs.shape + tensor_like[index].shape`); `stack[index] = v`
writes `v[j]` to buffer `j` (or the same value to every buffer when `v` has no stack dims).

Compiled backends use the pointers directly. The ref backend and eager mode cannot dereference
a raw address safely, so they resolve each pointer to a live tensor: one registered with
:func:`stack_pointers` / :func:`register_buffers`, or a tensor argument the kernel reads (eager
mode: any tensor argument). An address no such tensor covers is an error, never a wild read.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any
from typing import Iterable
from typing import Sequence

import torch


class StackTensor:
    """What `hl.stacktensor_like` returns: `tensor_like` (the layout of one buffer) and
    `dev_ptrs` (the buffers' data pointers). Index it like a tensor: `stack[tile]`,
    `stack[tile] = value`, or with `hl.load` / `hl.store`."""

    __slots__ = ("dev_ptrs", "tensor_like")

    def __init__(self, tensor_like: Any, dev_ptrs: Any) -> None:
        self.tensor_like = tensor_like
        self.dev_ptrs = dev_ptrs

    @property
    def shape(self) -> tuple:
        return (*tuple(self.dev_ptrs.shape), *tuple(self.tensor_like.shape))

    @property
    def dtype(self) -> torch.dtype:
        return self.tensor_like.dtype

    @property
    def device(self) -> Any:
        return self.dev_ptrs.device

    def __repr__(self) -> str:
        return f"StackTensor(shape={list(self.shape)}, dtype={self.dtype})"


# -- host side: pointers -> live tensors (ref backend, eager mode) --------------------------------

_lock = threading.Lock()
_registered: list[weakref.ref] = []


def register_buffers(*tensors: torch.Tensor) -> None:
    """Let the ref backend and eager mode find `tensors` by their data pointers. The registry holds
    weak references only: a buffer that is freed is forgotten."""
    with _lock:
        _registered[:] = [r for r in _registered if r() is not None]
        known = {id(r()) for r in _registered}
        for tensor in tensors:
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"register_buffers takes tensors, got {type(tensor).__name__}")
            if id(tensor) not in known:
                _registered.append(weakref.ref(tensor))
                known.add(id(tensor))


def stack_pointers(tensors: Sequence[torch.Tensor], device: Any = None) -> torch.Tensor:
    """The uint64 tensor of the data pointers of `tensors` (on `device`, default the first
    tensor's), for `hl.stacktensor_like`; the tensors are also registered (`register_buffers`)."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack_pointers needs at least one tensor")
    register_buffers(*tensors)
    target = tensors[0].device if device is None else torch.device(device)
    return torch.tensor([t.data_ptr() for t in tensors], dtype=torch.uint64, device=target)


def _registered_tensors() -> list[torch.Tensor]:
    with _lock:
        alive = [r() for r in _registered]
    return [t for t in alive if t is not None]


def candidate_tensors(values: Iterable[Any]) -> list[torch.Tensor]:
    """The tensors a pointer may resolve to: those among `values` (and in lists/tuples there),
    then the registered ones."""
    found: list[torch.Tensor] = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, torch.Tensor))
    return found + _registered_tensors()


def _extent_elements(shape: Sequence[int], stride: Sequence[int]) -> int:
    """Elements from the first to one past the last of a strided layout (0 when it is empty)."""
    if any(int(s) == 0 for s in shape):
        return 0
    return 1 + sum((int(s) - 1) * int(st) for s, st in zip(shape, stride, strict=True))


def resolve_buffer(
    address: int,
    shape: Sequence[int],
    stride: Sequence[int],
    dtype: torch.dtype,
    device: torch.device,
    candidates: Sequence[torch.Tensor],
    *,
    what: str = "hl.stacktensor_like",
) -> torch.Tensor:
    """A view of `shape`/`stride`/`dtype` starting at `address`, taken from a candidate tensor
    whose storage holds that whole layout. Raises `exc.StackTensorUnknownPointer` otherwise."""
    from helion import exc

    if address == 0:
        raise exc.StackTensorUnknownPointer(what, "0x0 (a null pointer)")
    itemsize = torch.empty((), dtype=dtype).element_size()
    needed = _extent_elements(shape, stride) * itemsize
    too_small = None
    for tensor in candidates:
        if tensor.device != device:
            continue
        storage = tensor.untyped_storage()
        start = storage.data_ptr()
        size = storage.nbytes()
        if not start <= address < start + max(size, 1):
            continue
        offset = address - start
        if tensor.dtype != dtype or offset % itemsize:
            too_small = f"the tensor there is {tensor.dtype}, the stack is {dtype}"
            continue
        if offset + needed > size:
            too_small = (
                f"the tensor there holds {size - offset} bytes from it, the stack needs {needed}"
            )
            continue
        return torch.as_strided(tensor, tuple(shape), tuple(stride), offset // itemsize)
    detail = f"0x{address:x}" + (f" ({too_small})" if too_small else "")
    raise exc.StackTensorUnknownPointer(what, detail)


__all__ = ["StackTensor", "register_buffers", "resolve_buffer", "stack_pointers"]
