"""Writes into tensors whose elements overlap in memory, refused when a kernel is traced.

A tensor made by ``expand()`` (a stride of 0) or an overlapping ``as_strided`` view has elements
that are one memory location. Torch refuses to write into one; a kernel writing into one would
leave a result that depends on the order of its writes (Triton wrote silently, the ref backend
and Pallas raised torch's error from deep inside). Loads from such tensors are fine.

Eager mode checks each write into a tensor with the same test and error (`internal_overlap`,
`overlap_error`), when the write runs.

The check reads the shape and strides the IR traced each tensor with, which the tensor guards
of the traced code compare on every call: a call with other strides runs another trace, checked
anew, so the check costs nothing per call.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from helion import exc

if TYPE_CHECKING:
    from helion.ir.core import KernelIR

# above this many elements, a layout that the quick test cannot clear is refused unchecked
_EXACT_CHECK_LIMIT = 1 << 22


def internal_overlap(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool | None:
    """Whether two elements of a tensor of ``shape`` and ``stride`` are one memory location:
    True, False, or None where the layout is too large to tell."""
    if 0 in shape:
        return False  # no elements
    dims = sorted((s, n) for n, s in zip(shape, stride, strict=True) if n > 1)
    if not dims:
        return False
    if dims[0][0] == 0:
        return True  # an expanded dimension
    # ordered by stride, each dimension steps past every offset the smaller ones reach: the
    # layout of every dense, sliced, transposed or permuted tensor
    reach = 0
    for step, size in dims:
        if step <= reach:
            break
        reach += (size - 1) * step
    else:
        return False
    numel = math.prod(n for _, n in dims)
    if numel > _EXACT_CHECK_LIMIT:
        return None
    import torch

    offsets = torch.zeros(1, dtype=torch.int64)
    for step, size in dims:
        offsets = (offsets[:, None] + torch.arange(size, dtype=torch.int64) * step).reshape(-1)
    return bool(offsets.unique().numel() < numel)


def check_overlapping_writes(ir: KernelIR) -> None:
    """Refuse a store or atomic into a tensor whose elements overlap in memory, at the line of
    the first one.

    Raises:
        helion.exc.WriteToOverlappingTensor: What writes, into which tensor, and its layout.
    """
    checked: dict[int, bool | None] = {}
    for info in ir.memory_ops():
        if info.kind == "load":
            continue
        tensor = info.tensor
        if tensor.index not in checked:
            checked[tensor.index] = internal_overlap(tuple(tensor.shape), tuple(tensor.stride))
        overlap = checked[tensor.index]
        if overlap is False:
            continue
        raise overlap_error(
            write_name(info.kind, info.node.attrs.get("kind")),
            tensor.name,
            overlap,
            tuple(tensor.shape),
            tuple(tensor.stride),
            loc=info.node.loc,
        )


def write_name(memory: str, atomic_kind: str | None = None) -> str:
    """How an error names a write: "A store", or the atomic (`hl.atomic_add`, ...)."""
    return "A store" if memory == "store" else f"hl.atomic_{atomic_kind or 'add'}"


def overlap_error(
    what: str,
    name: str,
    overlap: bool | None,
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    loc: exc.SourceLocation | None = None,
) -> exc.WriteToOverlappingTensor:
    """The error for `what` (see `write_name`) into tensor `name`, of a layout whose elements
    overlap (`internal_overlap` gave True) or may (None). Eager mode raises it too, for the same
    writes (`helion.eager.mode`)."""
    return exc.WriteToOverlappingTensor(
        what,
        name,
        "overlap" if overlap else "may overlap (too many of them to tell)",
        list(shape),
        list(stride),
        loc=loc,
    )
