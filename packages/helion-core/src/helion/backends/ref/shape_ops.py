"""The ref backend's rules for the shape ops: sort, topk, gather, stack, cat, split.

Sorting is stable (equal keys keep their order, for both directions) and topk is a stable sort
cut to k, so that ties come out exactly as the compiled backends order them.
"""

from __future__ import annotations

from typing import Any

import torch

from helion.backends.ref.lowerings import pad_partial_tiles
from helion.backends.ref.lowerings import ref_lowering
from helion.language import _ops as ops


@ref_lowering(ops.sort)
def _sort(ex: Any, node: Any, inputs: list) -> list:
    result = torch.sort(
        inputs[0], dim=node.attrs["dim"], descending=node.attrs["descending"], stable=True
    )
    return [result.values, result.indices]


@ref_lowering(ops.topk)
def _topk(ex: Any, node: Any, inputs: list) -> list:
    dim, k = node.attrs["dim"], node.attrs["k"]
    result = torch.sort(inputs[0], dim=dim, descending=node.attrs["largest"], stable=True)
    return [result.values.narrow(dim, 0, k), result.indices.narrow(dim, 0, k)]


@ref_lowering(ops.gather)
def _gather(ex: Any, node: Any, inputs: list) -> Any:
    source, index = inputs
    return torch.gather(source, node.attrs["dim"], index.long())


@ref_lowering(ops.stack)
def _stack(ex: Any, node: Any, inputs: list) -> Any:
    return torch.stack(pad_partial_tiles(list(inputs)), dim=node.attrs["dim"])


@ref_lowering(ops.cat)
def _cat(ex: Any, node: Any, inputs: list) -> Any:
    return torch.cat(list(inputs), dim=node.attrs["dim"])


@ref_lowering(ops.split)
def _split(ex: Any, node: Any, inputs: list) -> list:
    x = inputs[0]
    return [x[..., 0], x[..., 1]]
