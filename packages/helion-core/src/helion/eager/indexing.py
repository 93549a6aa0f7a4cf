"""Helion indexing semantics on real tensors, for eager mode.

An index is a list with one entry per tensor dimension (plus `None` for new axes): tiles,
slices, ints (or 0-D integer tensors) and integer index tensors. All index tensors broadcast
together and their broadcast shape sits where the first of them is, whatever comes between
them (torch moves such dims to the front; Helion does not). With a mask, lanes outside the
tensor are clamped before reading and read 0.

Every function here runs with torch function handling disabled (callers ensure it), on plain
tensors.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any
from typing import Callable
from typing import Sequence

import torch

from helion import exc
from helion.eager.tiles import RefTile


def normalize_index(tensor: torch.Tensor, index: Any) -> list[Any]:
    """The index as a list with `...` expanded."""
    if isinstance(index, (tuple, list)):
        items = list(index)
    else:
        items = [index]
    if any(item is Ellipsis for item in items):
        position = next(i for i, item in enumerate(items) if item is Ellipsis)
        consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
        items[position : position + 1] = [slice(None)] * (tensor.ndim - consumed)
    return items


def _is_index_tensor(item: Any) -> bool:
    return isinstance(item, torch.Tensor) and item.ndim > 0


def _check_item(item: Any) -> None:
    if isinstance(item, torch.Tensor):
        if item.dtype == torch.bool:
            raise exc.DataDependentOutputShapeNotSupported("boolean-mask indexing")
        if item.dtype.is_floating_point or item.dtype.is_complex:
            raise exc.InvalidIndexingType(f"a {item.dtype} tensor")
    elif not isinstance(item, (RefTile, slice, int, type(None))) or isinstance(item, bool):
        raise exc.InvalidIndexingType(type(item).__name__)
    elif isinstance(item, slice) and item.step not in (None, 1):
        raise exc.InvalidIndexingType("slices with a step")  # as compiled kernels refuse


def is_basic(items: Sequence[Any]) -> bool:
    return not any(_is_index_tensor(item) for item in items)


def basic_index(items: Sequence[Any]) -> tuple:
    """Tiles -> slices, 0-D tensors -> ints: an index torch handles with plain slicing."""
    out: list[Any] = []
    for item in items:
        _check_item(item)
        if isinstance(item, RefTile):
            out.append(item.as_slice())
        elif isinstance(item, torch.Tensor):
            out.append(int(item.item()))
        else:
            out.append(item)
    return tuple(out)


class Gather:
    """Index tensors (one per indexed dimension, each of the result's rank) and the result shape."""

    def __init__(self, tensor: torch.Tensor, items: Sequence[Any]) -> None:
        for item in items:
            _check_item(item)
        consumed = sum(1 for item in items if item is not None)
        if consumed > tensor.ndim:
            raise exc.RankMismatch(tensor.ndim, consumed, " (too many indices)")
        items = list(items) + [slice(None)] * (tensor.ndim - consumed)
        device = tensor.device
        tensor_items = [item for item in items if _is_index_tensor(item)]
        broadcast = (
            tuple(torch.broadcast_shapes(*(t.shape for t in tensor_items))) if tensor_items else ()
        )
        # result layout: one entry per output dim; index tensors share one group of dims
        shape: list[int] = []
        plan: list[tuple] = []  # (kind, payload, output position) per item
        group_position = None
        dim = 0
        for item in items:
            if item is None:
                plan.append(("none", None, len(shape)))
                shape.append(1)
                continue
            size = tensor.shape[dim]
            if isinstance(item, RefTile):
                plan.append(("range", (item.begin, item.end), len(shape)))
                shape.append(item.end - item.begin)
            elif isinstance(item, slice):
                start, stop, step = item.indices(size)
                length = len(range(start, stop, step))
                plan.append(("range", (start, start + step * length, step), len(shape)))
                shape.append(length)
            elif _is_index_tensor(item):
                if group_position is None:
                    group_position = len(shape)
                    shape.extend(broadcast)
                plan.append(("tensor", item, group_position))
            else:
                value = int(item.item()) if isinstance(item, torch.Tensor) else int(item)
                plan.append(("scalar", value, None))
            dim += 1
        rank = len(shape)
        self.shape = tuple(shape)
        self.indices: list[torch.Tensor] = []
        self.sizes: list[int] = []
        dim = 0
        for kind, payload, position in plan:
            if kind == "none":
                continue
            self.sizes.append(tensor.shape[dim])
            dim += 1
            if kind == "range":
                index = torch.arange(*payload, device=device)
                view = [1] * rank
                view[position] = index.numel()
                self.indices.append(index.reshape(view))
            elif kind == "tensor":
                index = payload.long().reshape(
                    (1,) * (len(broadcast) - payload.ndim) + tuple(payload.shape)
                )
                view = [1] * position + list(index.shape) + [1] * (rank - position - len(broadcast))
                self.indices.append(index.reshape(view))
            else:
                self.indices.append(torch.tensor(payload, device=device).reshape((1,) * rank))

    def clamped(self) -> list[torch.Tensor]:
        return [
            index.clamp(0, max(size - 1, 0))
            for index, size in zip(self.indices, self.sizes, strict=True)
        ]

    def expanded(self, indices: list[torch.Tensor] | None = None) -> tuple[torch.Tensor, ...]:
        return tuple(
            index.expand(self.shape) for index in (indices if indices is not None else self.indices)
        )


def check_bounds(
    tensor: torch.Tensor, items: Sequence[Any], access: str, name: str | None = None
) -> None:
    """An unmasked access whose tile, int or index tensor reaches outside `tensor` is refused
    with the error compiled kernels give (`IndexOutOfBounds`), where torch would clamp a slice,
    wrap a negative index or raise an IndexError of its own."""
    dim = 0
    for item in items:
        if item is None:
            continue
        if dim >= tensor.ndim:
            return  # too many indices: torch's own error names it
        size = tensor.shape[dim]
        outside = None
        if isinstance(item, RefTile):
            if item.end > item.begin and (item.begin < 0 or item.end > size):
                outside = item.begin if item.begin < 0 else max(item.begin, size)
        elif isinstance(item, torch.Tensor) and item.ndim > 0:
            if not (item.dtype.is_floating_point or item.dtype == torch.bool) and item.numel():
                bad = (item < 0) | (item >= size)
                if bool(bad.any()):
                    outside = int(item[bad].reshape(-1)[0])
        elif isinstance(item, (int, torch.Tensor)) and not isinstance(item, bool):
            value = int(item.item()) if isinstance(item, torch.Tensor) else int(item)
            if not -size <= value < size:
                outside = value
        if outside is not None:
            raise exc.IndexOutOfBounds(access, name or _local_name(tensor), outside, dim, size)
        dim += 1


_HELION_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _local_name(tensor: torch.Tensor) -> str:
    """The name the kernel's code holds `tensor` under (for error messages), or '?'."""
    frame = sys._getframe(1)
    while frame is not None:
        if not os.path.abspath(frame.f_code.co_filename).startswith(_HELION_DIR):
            for name, value in frame.f_locals.items():
                if value is tensor:
                    return name
        frame = frame.f_back
    return "?"


def load(
    tensor: torch.Tensor, index: Any, mask: Any = None, name: str | None = None
) -> torch.Tensor:
    """`tensor[index]` as a new tensor (never a view), masked lanes reading 0."""
    items = normalize_index(tensor, index)
    if mask is None:
        check_bounds(tensor, items, "load", name)
    if mask is None and is_basic(items):
        return tensor[basic_index(items)].clone()
    gather = Gather(tensor, items)
    indices = gather.clamped() if mask is not None else gather.indices
    if not indices:
        result = tensor.clone().reshape(gather.shape)
    else:
        result = tensor[gather.expanded(indices)]
    if mask is not None:
        keep = torch.as_tensor(mask, device=result.device).to(torch.bool)
        result = torch.where(
            keep, result, torch.zeros((), dtype=result.dtype, device=result.device)
        )
        if result.shape != gather.shape:
            raise exc.ShapeMismatch(
                f"the mask of shape {list(keep.shape)} does not broadcast to the loaded shape {list(gather.shape)}"
            )
    return result


def _fit_value(value: Any, shape: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    value = torch.as_tensor(value, device=device)
    # extra leading size-1 dims are allowed (squeezed)
    while value.ndim > len(shape) and value.shape[0] == 1:
        value = value.reshape(value.shape[1:])
    try:
        value = value.expand(shape)
    except RuntimeError:
        raise exc.ShapeMismatch(
            f"cannot store a value of shape {list(value.shape)} into a slice of shape {list(shape)}"
        ) from None
    return value.to(dtype)


def _writes_inference_tensors(position: int) -> Callable[[Callable[..., Any]], Any]:
    """A write whose target (argument ``position``) may be a tensor made under
    ``torch.inference_mode()`` while it is off, which torch refuses to update in place:
    compiled kernels write into such arguments (their launches do not go through autograd),
    and so does eager mode."""

    def decorate(write: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(write)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            target = args[position]
            if target.is_inference() and not torch.is_inference_mode_enabled():
                with torch.inference_mode():
                    return write(*args, **kwargs)
            return write(*args, **kwargs)

        return wrapper

    return decorate


@_writes_inference_tensors(0)
def store(
    tensor: torch.Tensor, index: Any, value: Any, mask: Any = None, name: str | None = None
) -> None:
    """`tensor[index] = value`; with a mask, only the lanes where it is true are written."""
    items = normalize_index(tensor, index)
    if mask is None:
        check_bounds(tensor, items, "store", name)
    if mask is None and is_basic(items):
        basic = basic_index(items)
        target_shape = tensor[basic].shape
        tensor[basic] = _fit_value(value, tuple(target_shape), tensor.dtype, tensor.device)
        return
    gather = Gather(tensor, items)
    value = _fit_value(value, gather.shape, tensor.dtype, tensor.device)
    indices = gather.expanded()
    if mask is not None:
        keep = torch.as_tensor(mask, device=tensor.device).to(torch.bool).expand(gather.shape)
        indices = tuple(index[keep] for index in indices)
        value = value[keep]
    if not indices:
        tensor.copy_(value.reshape(tensor.shape))
        return
    tensor[indices] = value


@_writes_inference_tensors(1)
def atomic(
    kind: str, tensor: torch.Tensor, index: Any, value: Any, expected: Any = None
) -> torch.Tensor:
    """Apply an atomic read-modify-write lane by lane in order; returns the previous values.

    Lanes that hit the same element see each other's writes in lane order, as if the hardware
    had serialized them that way.
    """
    items = normalize_index(tensor, index)
    gather = Gather(tensor, items)
    shape = gather.shape
    value = _fit_value(value, shape, tensor.dtype, tensor.device)
    indices = gather.expanded()
    linear = torch.full(shape, tensor.storage_offset(), dtype=torch.long, device=tensor.device)
    for idx, stride in zip(indices, tensor.stride(), strict=True):
        linear = linear + idx * stride
    flat_linear = linear.reshape(-1)
    flat_value = value.reshape(-1)
    storage = tensor.as_strided(
        (tensor.untyped_storage().nbytes() // tensor.element_size(),), (1,), 0
    )
    unique = torch.unique(flat_linear).numel() == flat_linear.numel()
    if kind == "add" and unique:
        old = storage[flat_linear].clone()
        storage.index_put_((flat_linear,), flat_value, accumulate=True)
        return old.reshape(shape)
    if kind == "add":
        old = storage[flat_linear].clone()
        # each lane sees the sum of the earlier lanes that hit the same element
        order = torch.sort(flat_linear, stable=True).indices
        sorted_linear = flat_linear[order]
        sorted_value = flat_value[order]
        running = torch.cumsum(sorted_value.to(_accumulate_dtype(tensor.dtype)), 0)
        first = torch.ones_like(sorted_linear, dtype=torch.bool)
        first[1:] = sorted_linear[1:] != sorted_linear[:-1]
        segment = torch.cumsum(first.long(), 0) - 1
        start_of_segment = torch.nonzero(first).reshape(-1)
        before = torch.zeros_like(running)
        before[1:] = running[:-1]
        exclusive = before - before[start_of_segment][segment]
        old_sorted = old[order] + exclusive.to(tensor.dtype)
        old = torch.empty_like(old)
        old[order] = old_sorted
        storage.index_put_((flat_linear,), flat_value, accumulate=True)
        return old.reshape(shape)
    flat_expected = None
    if kind == "cas":
        flat_expected = _fit_value(expected, shape, tensor.dtype, tensor.device).reshape(-1)
    if unique:
        old = storage[flat_linear].clone()
        storage[flat_linear] = _combine(kind, old, flat_value, flat_expected)
        return old.reshape(shape)
    olds = []
    for lane, where in enumerate(flat_linear.tolist()):
        current = storage[where].clone()
        olds.append(current)
        storage[where] = _combine(
            kind, current, flat_value[lane], None if flat_expected is None else flat_expected[lane]
        )
    return torch.stack(olds).reshape(shape) if olds else storage[flat_linear].reshape(shape)


def _accumulate_dtype(dtype: torch.dtype) -> torch.dtype:
    if dtype.is_floating_point:
        return torch.float64
    return torch.int64


def _combine(
    kind: str, current: torch.Tensor, value: torch.Tensor, expected: torch.Tensor | None
) -> torch.Tensor:
    if kind == "max":
        return torch.maximum(current, value)
    if kind == "min":
        return torch.minimum(current, value)
    if kind == "and":
        return current & value
    if kind == "or":
        return current | value
    if kind == "xor":
        return current ^ value
    if kind == "xchg":
        return value
    if kind == "cas":
        return torch.where(current == expected, value, current)
    raise exc.InvalidAPIUsage(f"unknown atomic kind {kind!r}")
