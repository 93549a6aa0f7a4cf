"""Ref lowerings of StackTensor loads and stores (`hl.stacktensor_like`).

Each pointer is resolved to a view of a live tensor (a kernel argument or a registered buffer,
see `helion.language.stack_tensor`), then the node's index is applied to every buffer like a
plain load or store. An address that no known tensor covers raises; nothing reads raw memory.
"""

from __future__ import annotations

from typing import Any

import torch

from helion.backends.ref.lowerings import load_from
from helion.backends.ref.lowerings import ref_lowering
from helion.backends.ref.lowerings import store_into
from helion.language import _ops as ops
from helion.language.stack_tensor import candidate_tensors
from helion.language.stack_tensor import resolve_buffer


def _buffers(ex: Any, node: Any, ptrs: torch.Tensor) -> list[torch.Tensor]:
    like = node.attrs["tensor"]
    candidates = candidate_tensors(ex.host)
    addresses = [int(a) for a in ptrs.reshape(-1).tolist()]
    return [
        resolve_buffer(
            a,
            like.shape,
            like.stride,
            like.dtype,
            ptrs.device,
            candidates,
            what="stack_load/stack_store",
        )
        for a in addresses
    ]


def _split(value: Any, ptrs: torch.Tensor, count: int, rank: int) -> list[Any]:
    """`value` (broadcastable to the access, of `rank` dims led by the pointer dims) as one
    entry per buffer."""
    if value is None:
        return [None] * count
    if not isinstance(value, torch.Tensor):
        return [value] * count
    lead = ptrs.ndim
    value = value.reshape((1,) * (rank - value.ndim) + tuple(value.shape))
    shape = torch.broadcast_shapes(tuple(value.shape[:lead]), tuple(ptrs.shape)) + tuple(
        value.shape[lead:]
    )
    return list(value.expand(shape).reshape(count, *value.shape[lead:]).unbind(0))


@ref_lowering(ops.stack_load)
def _stack_load(ex: Any, node: Any, inputs: list) -> Any:
    ptrs = inputs[node.attrs["ptrs"]]
    buffers = _buffers(ex, node, ptrs)
    mask_index = node.attrs.get("mask")
    rank = len(node.output.type.shape)
    masks = _split(None if mask_index is None else inputs[mask_index], ptrs, len(buffers), rank)
    parts = [load_from(ex, node, b, inputs, m).clone() for b, m in zip(buffers, masks, strict=True)]
    if not parts:
        return torch.empty((*ptrs.shape, 0), dtype=node.output.dtype, device=ptrs.device)
    return torch.stack(parts).reshape(*ptrs.shape, *parts[0].shape)


@ref_lowering(ops.stack_store)
def _stack_store(ex: Any, node: Any, inputs: list) -> None:
    ptrs = inputs[node.attrs["ptrs"]]
    buffers = _buffers(ex, node, ptrs)
    mask_index = node.attrs.get("mask")
    rank = len(node.inputs[node.attrs["value"]].type.shape)
    values = _split(inputs[node.attrs["value"]], ptrs, len(buffers), rank)
    masks = _split(None if mask_index is None else inputs[mask_index], ptrs, len(buffers), rank)
    for buffer, value, mask in zip(buffers, values, masks, strict=True):
        store_into(ex, node, buffer, inputs, value, mask)
